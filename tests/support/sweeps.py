"""Two properties checked on whole example configs: ``apply --all`` at every moment, and the
round trip of a full roll-back and every scale-up back.

Each is one function on one config; it raises :class:`AssertionError` where the property does
not hold. The suite runs both on :func:`sample` (``tests/cli/test_apply.py``,
``tests/domain/rules/test_scaleup.py``); ``python bench/sweep_examples.py`` runs them on every
config we have, AI Toolkit's examples included when ``../shared`` is beside the checkout.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from oom_wizard.formats.document import load_document
from oom_wizard.rules.catalog import MOMENTS
from oom_wizard.rules.plan import build_plan, default_model_kind
from oom_wizard.storage.changelog import read_changelog
from tests.support.corpus import FLOOR_CONFIG, OWN_CONFIGS, shared_examples
from tests.support.plan_support import SCALE_UP_ORDER, assert_exact, cli, differing, verify

#: The own configs the suite sweeps, one of each shape the sweep has found a difference in:
#: the floor (nothing to change), an image job in YAML, one with three buckets, a web-UI
#: export in JSON (a video job), two experts, an arch nobody knows, a ``.yml`` video job.
SAMPLE = (
    FLOOR_CONFIG,
    "flux_portrait_24gb.yaml",
    "flux_three_buckets.yaml",
    "ltx2_video_ui.json",
    "wan22_experts.yaml",
    "unknown_arch.json",
    "wan22_i2v_clips.yml",
)

#: The AI Toolkit example the suite adds to :data:`SAMPLE` when ``../shared`` is there.
SHARED_SAMPLE = "train_lora_qwen_image_24gb.yaml"


def sample() -> list[Path]:
    """:data:`SAMPLE`, then :data:`SHARED_SAMPLE` when ``../shared`` is beside the checkout."""
    shared = [path for path in shared_examples() if path.name == SHARED_SAMPLE]
    return [OWN_CONFIGS / name for name in SAMPLE] + shared


# --- apply --all at every moment ------------------------------------------------------------------


def apply_every_moment(example: Path, folder: Path) -> dict[str, str]:
    """``apply --all`` on a copy of ``example`` in ``folder`` at every moment; each output
    is exact (the source plus its logged changes) and, planned again with its change log,
    has every step satisfied. What each moment did: saved, nothing to change, environment."""
    source = folder / example.name
    shutil.copyfile(example, source)
    kind, _ = default_model_kind(load_document(source))
    done: dict[str, str] = {}
    for moment in MOMENTS:
        out = folder / f"{moment}{source.suffix}"  # JSON stays JSON
        status, stdout, stderr = cli("apply", source, "--all", "--moment", moment, "-o", out)
        assert status == 0, stderr
        if moment == "environment":
            assert not out.exists() and "Nothing in the config changes" in stdout
            done[moment] = "environment"
            continue
        if "Nothing to change" in stdout:  # a config already at the floor of every step
            assert not out.exists()
            done[moment] = "nothing to change"
            continue
        log = folder / f"{moment}.changelog.json"
        verdict, report = verify(source, out, log)
        assert verdict == 0, report
        again = build_plan(load_document(out), moment, kind, changelog=read_changelog(log))
        assert [s.id for s in again.steps if not s.satisfied] == [], moment
        done[moment] = "saved"
    return done


# --- the round trip: every step rolled back, then every scale-up ----------------------------------


def latest(folder: Path) -> Path:
    """The newest config in ``folder`` (each save gets the next ``.oomfix-N`` name)."""
    configs = [path for path in folder.glob("*.oomfix*") if ".changelog" not in path.name]
    return max(configs, key=save_number)


def save_number(config: Path) -> int:
    match = re.search(r"\.oomfix(?:-(\d+))?$", config.stem)
    return int(match.group(1) or 1) if match else 0


def changelog_beside(config: Path) -> Path:
    return config.with_name(config.stem + ".changelog.json")


def scale_up_all(folder: Path) -> list[str]:
    """Run ``scale-up --yes`` until nothing is left; the step each run restored."""
    restored: list[str] = []
    for _ in range(len(SCALE_UP_ORDER) + 2):
        config = latest(folder)
        status, out, err = cli("scale-up", config, "--yes")
        assert status == 0, err
        if "Nothing left to re-add" in out:
            return restored
        runs = json.loads(changelog_beside(latest(folder)).read_text("utf-8"))["runs"]
        assert runs[-1]["direction"] == "scale_up" and len(runs[-1]["steps"]) == 1
        restored.append(runs[-1]["steps"][0])
    raise AssertionError(f"scale-up did not finish: {restored}")


def rollback_steps(config: Path, moment: str = "early_steps") -> list[str]:
    """The steps of the plan that the scale-up order can undo."""
    document = load_document(config)
    plan = build_plan(document, moment, default_model_kind(document)[0])
    return [step.id for step in plan.steps if step.id in SCALE_UP_ORDER]


def round_trip(example: Path, folder: Path) -> list[str]:
    """Roll a copy of ``example`` in ``folder`` back by every step the scale-up order knows,
    then scale up until nothing is left: the steps come back in that order and the last
    config has the source's values exactly. The steps restored, in order."""
    source = folder / example.name
    shutil.copyfile(example, source)
    steps = ",".join(rollback_steps(source))
    status, out, err = cli("apply", source, "--moment", "early_steps", "--steps", steps)
    assert status == 0, err
    assert "Nothing to change" not in out
    rolled = json.loads(changelog_beside(latest(folder)).read_text("utf-8"))
    applied = rolled["runs"][0]["steps"]
    restored = scale_up_all(folder)
    assert restored == [step for step in SCALE_UP_ORDER if step in applied]
    final = latest(folder)
    assert differing(source, final) == set()
    assert_exact(source, final, changelog_beside(final))
    return restored
