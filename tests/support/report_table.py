"""Print the diagnosis table over the report fixtures (and, with ``--cases DIR``, other cases).

``python tests/support/report_table.py [--cases DIR ...]`` runs ``diagnose`` on every folder that
holds ``job.yaml``, ``log.txt`` and ``expected.yaml`` and prints, per report, the moment, the model
kind and the environment verdict as labelled and as found, then how many are right, and the
share of right moments at each confidence the diagnosis gave (:func:`by_confidence`). A label
that stays out of reach says why in its ``expected.yaml`` (``out_of_reach``).

The labels: ``moment`` (the report fixtures) or ``crash_moment`` (``../shared/cases``),
``model_kind``, ``trainer`` (the trainer family, one of ``TRAINER_FAMILIES``: the report fixtures
must name it, so the table can be split by family and a weak family shows), and optionally
``environment`` (true when the environment, not the config, is
to blame; without it, the verdict expected is ``moment == environment``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from oom_wizard.formats.document import load_document  # noqa: E402
from oom_wizard.logs.scan import scan_log  # noqa: E402
from oom_wizard.rules.diagnosis import diagnose  # noqa: E402

REPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "reports"

# The trainer families the labels name (``trainer:``): the tool that printed the log. GUIs and
# notebooks that run sd-scripts (kohya_ss, FluxGym, ComfyUI-FluxTrainer, the Colab notebooks) are
# the kohya family; diffusers' example scripts and their forks are ``diffusers``.
TRAINER_FAMILIES = (
    "ai-toolkit",
    "kohya",
    "musubi",
    "onetrainer",
    "simpletuner",
    "diffusion-pipe",
    "diffusers",
    "everydream2",
    "finetrainers",
    "ltx-trainer",
    "other",
)


@dataclass(frozen=True)
class Row:
    """One report: what its label says and what the diagnosis found."""

    name: str
    moment: tuple[str | None, str | None]
    kind: tuple[str | None, str | None]
    environment: tuple[bool, bool]
    out_of_reach: str | None
    trainer: str = "other"
    confidence: str = "low"

    @property
    def moment_right(self) -> bool:
        """Whether the moment found is the labelled one."""
        return self.moment[0] == self.moment[1]


def expected_of(folder: Path) -> dict[str, Any]:
    """The label of one report folder."""
    data = yaml.safe_load((folder / "expected.yaml").read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{folder / 'expected.yaml'}: not a mapping")
    return data


def report_dirs(roots: Iterable[Path]) -> list[Path]:
    """Every report folder under ``roots``, in name order per root."""
    found: list[Path] = []
    for root in roots:
        found += sorted(p for p in root.iterdir() if (p / "expected.yaml").is_file())
    return found


def trainer_of(folder: Path, label: dict[str, Any]) -> str:
    """The trainer family a label names; ``other`` for a case folder that names none."""
    trainer = label.get("trainer", "other")
    if trainer not in TRAINER_FAMILIES:
        raise ValueError(
            f"{folder / 'expected.yaml'}: trainer {trainer!r} is not one of "
            + ", ".join(TRAINER_FAMILIES)
        )
    return str(trainer)


def row_of(folder: Path) -> Row:
    """Diagnose one report folder as the CLI would (no GPU probe)."""
    label = expected_of(folder)
    trainer = trainer_of(folder, label)
    moment = label.get("moment", label.get("crash_moment"))
    env = bool(label.get("environment", moment == "environment"))
    view = load_document(folder / "job.yaml").view()
    result = diagnose(scan_log(folder / "log.txt"), view)
    got_env = result.moment == "environment" or (
        result.environment_suspected and result.moment is None
    )
    return Row(
        name=folder.name,
        moment=(moment, result.moment),
        kind=(label.get("model_kind"), result.model_kind),
        environment=(env, got_env),
        out_of_reach=label.get("out_of_reach"),
        trainer=trainer,
        confidence=result.confidence,
    )


def _cell(pair: tuple[Any, Any]) -> str:
    want, got = pair
    return f"{want}" if want == got else f"{want} ≠ {got}"


def _totals(rows: Sequence[Row]) -> tuple[int, int, int]:
    moments = sum(r.moment_right for r in rows)
    kinds = sum(r.kind[0] == r.kind[1] for r in rows)
    envs = sum(r.environment[0] == r.environment[1] for r in rows)
    return moments, kinds, envs


def by_family(rows: Sequence[Row]) -> str:
    """The totals per trainer family, in ``TRAINER_FAMILIES`` order, as plain text."""
    lines = [f"{'trainer':<15} {'reports':>7}  {'moment':>9}  {'kind':>9}  {'environment':>11}"]
    for family in TRAINER_FAMILIES:
        held = [r for r in rows if r.trainer == family]
        if not held:
            continue
        moments, kinds, envs = _totals(held)
        n = len(held)
        lines.append(
            f"{family:<15} {n:>7}  {f'{moments}/{n}':>9}  {f'{kinds}/{n}':>9}  {f'{envs}/{n}':>11}"
        )
    return "\n".join(lines)


CONFIDENCES = ("high", "medium", "low")


def confidence_shares(rows: Sequence[Row]) -> dict[str, tuple[int, int]]:
    """Per confidence the diagnosis gave: (moments right, reports)."""
    return {
        level: (
            sum(r.moment_right for r in rows if r.confidence == level),
            sum(r.confidence == level for r in rows),
        )
        for level in CONFIDENCES
    }


def by_confidence(rows: Sequence[Row]) -> str:
    """The share of right moments at each confidence, as plain text."""
    lines = [f"{'confidence':<15} {'reports':>7}  {'right':>9}"]
    for level, (right, n) in confidence_shares(rows).items():
        share = f" ({100 * right / n:.0f} %)" if n else ""
        lines.append(f"{level:<15} {n:>7}  {f'{right}/{n}':>9}{share}")
    return "\n".join(lines)


def render(rows: Sequence[Row]) -> str:
    """The table, its totals, and the totals by trainer family as plain text."""
    width = max((len(r.name) for r in rows), default=4)
    lines = [f"{'report':<{width}}  {'moment':<28} {'kind':<16} environment"]
    for row in rows:
        mark = " " if row.moment_right else "✗"
        lines.append(
            f"{row.name:<{width}}  {mark}{_cell(row.moment):<27} {_cell(row.kind):<16} "
            f"{_cell(row.environment)}"
        )
        if row.out_of_reach and not row.moment_right:
            lines.append(f"{'':<{width}}    out of reach: {row.out_of_reach}")
    total = len(rows) or 1
    moments, kinds, envs = _totals(rows)
    lines.append("")
    lines.append(
        f"moment {moments}/{len(rows)} ({100 * moments / total:.0f} %) · "
        f"kind {kinds}/{len(rows)} ({100 * kinds / total:.0f} %) · "
        f"environment {envs}/{len(rows)} ({100 * envs / total:.0f} %)"
    )
    lines += ["", by_family(rows), "", by_confidence(rows)]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table; 0 always (it measures, it does not judge)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cases", action="append", type=Path, default=[], metavar="DIR")
    args = parser.parse_args(argv)
    print(render([row_of(d) for d in report_dirs([REPORTS, *args.cases])]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
