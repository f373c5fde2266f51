"""The memory model against published measured peaks, and AI Toolkit's example configs.

    python bench/memory_accuracy.py

Prints the H200 rows against ``fit``'s band; the refit of the overheads on every source and
the bands' widths from the held-out errors; every published point and GPU row held out (its
source left out of every refit and of the widths) and, per certainty class, the in-sample and
held-out shares within ±15 % of the midpoint and inside the band; then, for every point of
``tests/fixtures/measured_peaks.yaml``, its band, the measured peak, the midpoint's error and
whether it lies within ±15 %; the points under layer offloading, the measured differences
between two runs, a diagnostic least-squares overhead (C + f × the rest) on the published
points (the model does not use it), and ``fit`` on every AI Toolkit example config at the card
in its name (``../shared/aitk-examples``, when it is there). Asserts nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from oom_wizard.errors import ConfigError
from oom_wizard.formats.document import load_document
from oom_wizard.rules.memory import BAND_RATE, job_memory, verdict
from oom_wizard.rules.modelkind import find_model_kind
from tests.support.measured_peaks import (
    EXAMPLES,
    GPU_FIXTURE,
    Point,
    class_bands,
    deltas,
    example_card,
    held_out_errors,
    points,
    refit,
)

SHARE = 0.15


def gpu_rows() -> None:
    """The H200 rows (``tests/fixtures/gpu_peaks.yaml``) against ``fit``'s band, with the
    figures in the rows' own setup (their ``lora_setup``: the LoRA under autocast)."""
    print(f"{'H200 row':44} {'band GiB':>13} {'measured':>9} {'error':>7}  in band  checked")
    for p in points(fixture=GPU_FIXTURE):
        inside = p.band.low <= p.measured_gib <= p.band.high
        print(
            f"{p.id:44} {p.band.low:6.1f}–{p.band.high:5.1f} {p.measured_gib:9.2f} "
            f"{100 * p.error:+6.0f}%  {'yes' if inside else 'no ':7}  {p.memory.certainty}"
        )
    print()


def held_out_table() -> None:
    """In-sample against leave-one-source-out, per certainty class: the share within 15 % of
    the midpoint and the share inside the band, for the published points and the GPU rows."""
    rows = points(fixture=GPU_FIXTURE)
    published = points()
    everything = rows + published
    found = held_out_errors(everything)
    away = found.points
    fitted = refit(everything)
    print(
        f"refit on every source: slack {fitted.slack:.3f} of the varying part, each item "
        f"{fitted.item_gib:.2f} GiB; workspaces {fitted.workspace_gib:.2f} GiB (the "
        f"libraries'), context {fitted.context_gib:.3f} GiB (measured)"
    )
    widths = class_bands(found.errors)
    print(
        f"bands from the held-out errors (± the {100 * BAND_RATE:.0f}th percentile of their size): "
        + ", ".join(f"{c} {100 * lo:+.1f} %..{100 * hi:+.1f} %" for c, (lo, hi) in widths.items())
    )
    print("held out: each point with its source's points left out of every refit\n")
    print(f"{'held out':44} {'band GiB':>13} {'measured':>9} {'error':>7}  ±15%  inside  source")
    for p in away:
        print(
            f"{p.id:44} {p.band.low:6.1f}–{p.band.high:5.1f} {p.measured_gib:9.2f} "
            f"{100 * p.error:+6.0f}%  {'yes' if p.close else 'no ':4} "
            f"{'yes' if p.inside else 'no ':6}  {p.group[-40:]}"
        )
    print(
        f"\n{'set':10} {'class':9} {'n':>3}  {'in-sample ±15%':>15} {'inside':>7}   "
        f"{'held-out ±15%':>14} {'inside':>7}"
    )
    for name, subset in (("published", published), ("GPU rows", rows)):
        ids = {p.id for p in subset}
        for certainty in ("gpu", "cpu", "stand_in", "all"):
            inn = [p for p in subset if certainty in ("all", p.certainty)]
            out = [p for p in away if p.id in ids and certainty in ("all", p.certainty)]
            if not inn:
                continue
            n = len(inn)
            print(
                f"{name:10} {certainty:9} {n:3}  {_share(inn, 'close'):>15} "
                f"{_share(inn, 'inside'):>7}   {_share(out, 'close'):>14} "
                f"{_share(out, 'inside'):>7}"
            )
    print()


def _share(found: list[Point], what: str) -> str:
    hits = sum(bool(getattr(p, what)) for p in found)
    return f"{hits}/{len(found)} {100 * hits / len(found):3.0f}%"


def main() -> None:
    gpu_rows()
    held_out_table()
    found = points()
    print("error: (midpoint − measured) / measured; ±15%: measured within 15 % of the midpoint;")
    print("~: published as about / a bit more than; figures: what the arch has in memory.yaml\n")
    print(f"{'point':44} {'band GiB':>13} {'measured':>9} {'error':>7}  ±15%  figures")
    within = 0
    counted = [p for p in found if p.has_counts]
    for p in found:
        close = abs(p.band.mid - p.measured_gib) <= SHARE * p.band.mid
        within += close
        figures = "counts+act" if p.has_activations else ("counts" if p.has_counts else "nominal")
        approx = "~" if p.approximate else " "
        print(
            f"{p.id:44} {p.band.low:6.1f}–{p.band.high:5.1f} {approx}{p.measured_gib:8.2f} "
            f"{100 * p.error:+6.0f}%  {'yes' if close else 'no ':4} {figures}"
        )
    share = 100 * within / len(found)
    print(f"\nwithin ±15 % of the midpoint: {within} of {len(found)} ({share:.0f} %)")
    near = sum(abs(p.band.mid - p.measured_gib) <= SHARE * p.band.mid for p in counted)
    if counted:
        print(
            f"  of the {len(counted)} whose arch has parameter counts: {near} "
            f"({100 * near / len(counted):.0f} %)"
        )
    offloaded = [p for p in found if p.offloaded > 0]
    if offloaded:
        print("  under layer offloading (the share of the transformer moved; block swap as it):")
        for p in offloaded:
            close = abs(p.band.mid - p.measured_gib) <= SHARE * p.band.mid
            print(
                f"    {p.id:42} {p.offloaded:4.0%}  {100 * p.error:+4.0f}%  "
                f"{'yes' if close else 'no'}"
            )
    differences()
    fit_overhead(counted)
    examples()


def differences() -> None:
    """Each measured difference between two runs beside the model's (low to high edge)."""
    found = deltas()
    if not found:
        return
    print(f"\n{'difference':44} {'model GiB':>13} {'measured':>9} {'error':>7}  in band")
    for d in found:
        print(
            f"{d.id:44} {d.low:+6.2f}–{d.high:+5.2f} {d.measured_gib:+9.2f} "
            f"{100 * d.error:+6.0f}%  {'yes' if d.within_band else 'no'}"
        )


def fit_overhead(counted: list[Point]) -> None:
    """Least squares of measured − (everything but the overhead) = C + f × that."""
    xs, ys = [], []
    for p in counted:
        parts = p.memory.parts["training"]
        rest = (
            parts.transformer
            + parts.text_encoder
            + parts.vae
            + parts.trainable
            + parts.optimizer
            + parts.activations
        )
        xs.append(rest)
        ys.append(p.measured_gib - rest)
    if len(xs) < 2:
        return
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    f = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    c = my - f * mx
    spread = sorted(y - (c + f * x) for x, y in zip(xs, ys, strict=True))
    print(
        "\n(diagnostic, not used by the model: what other trainers' points would make a "
        "constant and a share)"
    )
    print(
        f"overhead fit on {n} points: C = {c:.2f} GiB, f = {f:.3f}; residuals from "
        f"{spread[0]:+.1f} to {spread[-1]:+.1f} GiB (median {spread[n // 2]:+.1f})"
    )


def examples() -> None:
    if EXAMPLES is None or not EXAMPLES.is_dir():
        print("\n(no ../shared/aitk-examples here: the example table is left out)")
        return
    print(f"\n{'AI Toolkit example':46} {'card':>5} {'peak phase':>16} {'band GiB':>13}  verdict")
    for path in sorted(EXAMPLES.glob("*.yaml")):
        card = example_card(path)
        try:
            doc = load_document(path)
        except ConfigError as exc:
            print(f"{path.name:46} {'':>5} does not load: {str(exc).split(': ', 1)[-1][:60]}")
            continue
        kind = find_model_kind(doc.view().primary).kind or "image"
        memory = job_memory(doc, [], kind)
        if memory.not_estimated is not None:
            print(f"{path.name:46} {card or '':>5} {memory.not_estimated[:60]}")
            continue
        peak = memory.peak()
        shown = verdict(peak, card) if card else "(no card in the name)"
        print(
            f"{path.name:46} {card or '':>5} {memory.peak_phase:>16} "
            f"{peak.low:6.1f}–{peak.high:5.1f}  {shown}"
        )


if __name__ == "__main__":
    main()
