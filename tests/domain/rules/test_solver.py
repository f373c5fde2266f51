"""The one solver of "what to change so it fits" (issue 38 item 3, issue 40's ordering rule):
the least loss that fits, irreducible, never a lever the arch ignores, the crashed phase's
levers first."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

import pytest

from oom_wizard.formats.change import Change
from oom_wizard.formats.document import JobDocument, load_document
from oom_wizard.paths import format_path
from oom_wizard.rules.catalog import load_presets
from oom_wizard.rules.memory import Calibration, JobMemory
from oom_wizard.rules.plan import Plan, StepChoice, build_plan, changes_for, default_model_kind
from oom_wizard.rules.sizing import Weigher
from oom_wizard.rules.solver import MARGIN_SHARE, MIN_SAVING, fits_card, lever_order, loss_of
from tests.support.corpus import needs_examples, shared_examples

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ROOT / "tests" / "fixtures" / "configs"
DEMO = ROOT / "presets" / "demo"


def kind_of(document: JobDocument) -> str:
    return default_model_kind(document)[0]


def sized(document: JobDocument, card: float, moment: str = "early_steps") -> Plan:
    return build_plan(document, moment, kind_of(document), card_gib=card)


def changes_of(
    plan: Plan, ids: Collection[str], rungs: Mapping[str, int] | None = None
) -> list[Change]:
    """The changes of the steps ``ids``, each at its rung in ``rungs`` (else its default)."""
    up = rungs or {}
    return changes_for(
        plan,
        {
            s.id: s.rung_choice(up.get(s.id, 0)) if s.id in ids else StepChoice(s.id, False)
            for s in plan.steps
        },
    )


def assert_irreducible(document: JobDocument, plan: Plan, card: float) -> None:
    """Undoing any one change of a fix that fits makes it not fit (the margin it was found
    with, and the crashed phase lowered): leaving a step out, or taking a step one rung down."""
    sizing = plan.sizing
    assert sizing is not None
    steps = plan.fixes["just_enough"]
    rungs = plan.fix_rungs.get("just_enough", {})
    if not sizing.covered:
        return
    weigher = Weigher(document, plan.model_kind, load_presets(), None, plan.gpus)
    share = MARGIN_SHARE if sizing.margin_kept else 0.0
    assert fits_card(weigher.memory(changes_of(plan, steps, rungs)), card, share)
    today = weigher.memory(())

    def lowered(memory: JobMemory) -> bool:  # the solver's rule: the crashed phase is lower
        before, after = today.phases.get("training"), memory.phases.get("training")
        return before is not None and (after is None or after.high <= before.high - MIN_SAVING)

    for step in steps:
        if step == "validation_run":
            continue
        memory = weigher.memory(changes_of(plan, [s for s in steps if s != step], rungs))
        assert not (fits_card(memory, card, share) and lowered(memory)), (step, steps)
        if rungs.get(step, 0) > 0:
            down = {**rungs, step: rungs[step] - 1}
            memory = weigher.memory(changes_of(plan, steps, down))
            assert not (fits_card(memory, card, share) and lowered(memory)), (step, down)


def test_a_klein_ui_job_on_16_gib_gets_offloading_and_cached_embeddings() -> None:
    """FLUX.2 Klein 9B as the web UI makes it: cached text embeddings (time) and layer
    offloading (time, several-fold), no quality lost."""
    document = load_document(CONFIGS / "klein9b_ui_defaults.yaml")
    plan = sized(document, 16.0)
    assert plan.sizing is not None and plan.sizing.covered and plan.sizing.margin_kept
    assert plan.fixes["just_enough"] == ("text_encoder", "layer_offloading")
    assert {loss_of(step) for step in plan.fixes["just_enough"]} == {"time"}
    assert plan.sizing.predicted("just_enough").high <= 16.0
    assert_irreducible(document, plan, 16.0)


def test_an_sdxl_ui_job_on_8_gib_gets_the_closest_config_and_no_fit() -> None:
    document = load_document(CONFIGS / "sdxl_ui_defaults.yaml")
    plan = sized(document, 8.0)
    assert plan.sizing is not None and not plan.sizing.covered
    closest = plan.fixes["just_enough"]
    # SDXL ignores layer offloading (presets/archs.yaml): never a candidate.
    assert "layer_offloading" not in closest and "top_bucket" in closest
    step = plan.step("layer_offloading")
    assert step is None or not step.available


def test_a_lever_the_arch_ignores_is_never_taken_even_when_nothing_fits() -> None:
    """FLUX.1 ignores layer offloading: on 6 GiB nothing fits, and the closest config still
    leaves it out."""
    document = load_document(DEMO / "flux_portrait_lora.yaml")
    plan = sized(document, 6.0)
    assert plan.sizing is not None and not plan.sizing.covered
    assert "layer_offloading" not in plan.fixes["just_enough"]
    assert all(plan.step(s).available for s in plan.fixes["just_enough"])  # type: ignore[union-attr]


def test_levers_go_by_what_the_user_loses_and_the_crashed_phase_first() -> None:
    order = lever_order(["sampling", "top_bucket", "layer_offloading", "low_vram", "quantize"])
    assert order == ["low_vram", "layer_offloading", "sampling", "top_bucket", "quantize"]
    # Within a class, what lowers the phase that crashed goes first (issue 40).
    assert lever_order(["top_bucket", "quantize"], lambda s: s == "quantize")[0] == "quantize"


def test_a_crash_while_loading_starts_with_what_lowers_the_load() -> None:
    """A crash quantizing the transformer during load: the fix's first step lowers the load,
    never lighter samples first."""
    document = load_document(DEMO / "flux_portrait_lora.yaml")
    crash = Calibration("load", 16.5, None, 16.0, "PyTorch's OOM message")
    plan = build_plan(document, "loading", "image", calibration=crash, card_gib=16.0)
    assert plan.default_fix == "just_enough"
    first = next(s for s in plan.steps if s.default_on)
    assert first.id != "sampling"
    weigher = Weigher(document, "image", load_presets(), crash, plan.gpus)
    today = weigher.band((), "load")
    after = weigher.band(changes_of(plan, [first.id]), "load")
    assert today is not None and after is not None and after.high < today.high


@pytest.mark.parametrize("card", [12.0, 24.0])
@pytest.mark.parametrize("name", ["flux_portrait_24gb.yaml", "wan14b_video_lora.yaml"])
def test_undoing_any_one_step_of_a_fix_makes_it_not_fit(name: str, card: float) -> None:
    document = load_document(CONFIGS / name)
    assert_irreducible(document, sized(document, card), card)


@needs_examples
def test_every_example_fits_or_gets_an_irreducible_fix_or_the_closest_config() -> None:
    """AI Toolkit's examples on a 16 GiB card (``bench/bench_solver.py`` runs 8 to 48 GiB
    and fits what each fix saves): every fix is irreducible and takes no lever the arch
    ignores."""
    card = 16.0
    for path in shared_examples():
        try:
            document = load_document(path)
        except Exception:  # an example AI Toolkit ships broken (omnigen2's YAML)
            continue
        plan = sized(document, card)
        if plan.sizing is None:
            continue  # not estimated, or nothing left on the ladder
        assert all(plan.step(s).available for s in plan.fixes["just_enough"]), path.name  # type: ignore[union-attr]
        assert_irreducible(document, plan, card)


def _weigh_sum(
    costs: dict[str, float], base: float = 10.0
) -> Callable[[Sequence[Change]], JobMemory]:
    """A job whose load and training step weigh ``base`` plus the cost of each change's step."""
    return lambda changes: _weighing(base + sum(costs[c.step or ""] for c in changes))


def _weighing(total: float) -> JobMemory:
    """A job whose load and training step both weigh ``total`` GiB (± 0.5)."""
    from oom_wizard.rules.memory import Band

    band = Band(total - 0.5, total + 0.5)
    return JobMemory(
        phases={"load": band, "baseline_sample": None, "training": band, "sample": None},
        parts={},
        peak_phase="training",
        known=True,
        calibrated_by=None,
        notes=(),
    )


def _candidate(step: str) -> tuple[str, list[Change]]:
    from oom_wizard.paths import parse_path

    return (step, [Change(parse_path(f"config.process[0].model.{step}"), False, step=step)])


def test_giving_back_takes_the_most_valuable_that_still_fit_and_skips_one_that_does_not() -> None:
    """Issue 38 item 4: a job with room gets back what still fits with the margin; one that
    would not is left out (and named), the next is still tried."""
    from oom_wizard.rules.solver import give_back

    weigh = _weigh_sum({"a": 3.0, "b": 8.0, "c": 2.0})
    found = give_back(weigh, [_candidate("a"), _candidate("b"), _candidate("c")], 20.0)
    assert found.steps == ("a", "c")  # 10 + 3 + 2 = 15 (+0.5) with 2 GiB free; b: 21.5 > 20
    assert found.held == "b" and found.held_memory is not None
    assert fits_card(found.memory, 20.0)
    assert found.held_memory.peak().high > 20.0 - MARGIN_SHARE * 20.0


def test_giving_back_in_order_stops_at_the_first_that_does_not_fit() -> None:
    """The scale-up's re-adds come back one per run in a fixed order: the walk stops there."""
    from oom_wizard.rules.solver import give_back

    weigh = _weigh_sum({"a": 3.0, "b": 8.0, "c": 2.0})
    found = give_back(
        weigh, [_candidate("a"), _candidate("b"), _candidate("c")], 20.0, in_order=True
    )
    assert found.steps == ("a",) and found.held == "b"
    nothing = give_back(weigh, [_candidate("b")], 12.0)
    assert nothing.steps == () and nothing.memory.peak().high == pytest.approx(10.5)


def test_a_default_step_that_does_not_lower_the_crashed_phase_says_why() -> None:
    """A step the default fix takes, which on its own does not lower the phase the crash ran
    into, says why it is taken; a step that lowers it says nothing."""
    # the UI's LTX-2 job on 16 GiB: lighter samples are taken for the sample's sake
    document = load_document(CONFIGS / "ltx2_video_ui.json")
    plan = sized(document, 16.0)
    by_id = {step.id: step for step in plan.steps}
    sampling = by_id["sampling"]
    assert sampling.default_on and sampling.note is not None
    assert "On its own it does not lower one training step" in sampling.note
    assert "another phase fits the card too" in sampling.note
    for step in plan.steps:
        if step.default_on and step.id != "sampling":
            assert "On its own" not in (step.note or ""), step.id


def _weigh_rungs(base: float, savings: dict[str, list[float]]) -> Callable[..., JobMemory]:
    """A job whose load and training step weigh ``base`` less what each step saves at its rung
    (a change's ``after`` is the rung)."""
    return lambda changes: _weighing(
        base - sum(savings[c.step or ""][int(c.after)] for c in changes)
    )


def _at_rungs(levels: Mapping[str, int]) -> list[Change]:
    from oom_wizard.paths import parse_path

    return [
        Change(parse_path(f"config.process[0].model.{step}"), rung, step=step)
        for step, rung in levels.items()
    ]


def test_a_lever_goes_up_its_rungs_before_a_lever_of_more_loss() -> None:
    """20 GiB on a 16 GiB card (14.4 with the margin): half the layers offloaded leaves it
    over; all of them fits, so no samples and no rank are given up. Without its stronger rung
    the same search gives up both."""
    from oom_wizard.rules.solver import solve

    savings = {"layer_offloading": [3.0, 6.0], "sampling": [1.0, 2.0], "lora_rank": [2.0]}
    candidates = ["sampling", "lora_rank", "layer_offloading"]
    weigh = _weigh_rungs(20.0, savings)
    rungs = {"layer_offloading": 1, "sampling": 1}
    found = solve(weigh, candidates, _at_rungs, 16.0, rungs=rungs)
    assert found.fits and found.steps == ("layer_offloading",)
    assert found.rungs == {"layer_offloading": 1}
    one_rung = solve(weigh, candidates, _at_rungs, 16.0)
    assert set(one_rung.steps) == {"layer_offloading", "sampling", "lora_rank"}
    assert one_rung.rungs == {}


def test_no_samples_comes_before_a_lever_that_costs_quality() -> None:
    """Lighter samples leave it over; no samples at all fits before a bucket goes."""
    from oom_wizard.rules.solver import solve

    weigh = _weigh_rungs(18.0, {"sampling": [1.0, 4.0], "top_bucket": [4.0]})
    found = solve(weigh, ["top_bucket", "sampling"], _at_rungs, 16.0, rungs={"sampling": 1})
    assert found.steps == ("sampling",) and found.rungs == {"sampling": 1}


def test_a_rung_that_lowers_nothing_is_passed_over() -> None:
    """The text encoder's rung saves nothing in the training step: the next one is taken."""
    from oom_wizard.rules.solver import solve

    weigh = _weigh_rungs(20.0, {"layer_offloading": [3.0, 3.0, 6.0]})
    found = solve(weigh, ["layer_offloading"], _at_rungs, 16.0, rungs={"layer_offloading": 2})
    assert found.fits and found.rungs == {"layer_offloading": 2}


def test_the_answer_steps_a_rung_down_that_a_later_lever_makes_needless() -> None:
    """Both offloading rungs leave it over, a lower rank is needed anyway, and with it the
    first offloading rung is enough: undoing any one change (the rank, the offloading, or
    its rung) makes it not fit."""
    from oom_wizard.rules.solver import solve

    weigh = _weigh_rungs(20.0, {"layer_offloading": [1.0, 2.0], "lora_rank": [5.0]})
    found = solve(
        weigh, ["layer_offloading", "lora_rank"], _at_rungs, 16.0, rungs={"layer_offloading": 1}
    )
    assert found.fits and set(found.steps) == {"layer_offloading", "lora_rank"}
    assert found.rungs == {}  # 20 - 1 - 5 = 14 (+0.5): fits with the margin
    for undone in ({"lora_rank": 0}, {"layer_offloading": 0}):
        assert not fits_card(weigh(_at_rungs(undone)), 16.0)


def test_a_plan_step_carries_its_stronger_rungs_and_a_fix_its_values() -> None:
    """FLUX.2 Klein on 12 GiB: layer offloading past its default half (the text encoder's
    percent first), and the fix's values where every front end reads them: the default
    choices (``apply``, ``run --auto``, the app's review) and ``plan --json``."""
    document = load_document(CONFIGS / "klein9b_ui_defaults.yaml")
    plan = sized(document, 12.0)
    step = plan.step("layer_offloading")
    assert step is not None
    te = "config.process[0].model.layer_offloading_text_encoder_percent"
    transformer = "config.process[0].model.layer_offloading_transformer_percent"
    assert [dict(rung) for rung in step.rungs] == [
        {transformer: 0.5, te: 1.0},
        {transformer: 1.0, te: 1.0},
    ]
    assert plan.fix_rungs["just_enough"] == {"layer_offloading": 2}
    values = {transformer: 1.0, te: 1.0}
    assert plan.fix_values("just_enough") == values
    assert plan.default_choices("just_enough")["layer_offloading"].values == values
    assert plan.to_json()["fix_values"]["just_enough"] == values
    changes = {c.path[-1]: c.after for c in changes_for(plan, plan.default_choices("just_enough"))}
    assert changes["layer_offloading_transformer_percent"] == 1.0
    assert_irreducible(document, plan, 12.0)


def test_no_samples_is_the_sampling_step_s_last_rung_and_leaves_the_samples_as_they_are() -> None:
    document = load_document(CONFIGS / "sdxl_ui_defaults.yaml")
    plan = sized(document, 8.0)
    step = plan.step("sampling")
    assert step is not None
    off = "config.process[0].train.disable_sampling"
    assert [dict(rung) for rung in step.rungs] == [{off: True}]
    lighter = {f.key for f in step.fields if f.key.startswith("config.process[0].sample.")}
    assert lighter and all(f.default_on for f in step.fields if f.key in lighter)
    changed = {format_path(c.path) for c in changes_for(plan, {step.id: step.rung_choice(1)})}
    assert off in changed and not changed & lighter
    assert {f.key for f in step.at_rung(1).fields if f.default_on} == {off}
    # A crash while loading keeps its own switch (on by default, no lighter samples).
    loading = build_plan(document, "loading", "image", card_gib=8.0).step("sampling")
    assert loading is not None and loading.rungs == ()


def test_frames_and_rank_are_halved_again_as_stronger_rungs() -> None:
    """Wan 2.1 14B: the clip halved, then halved again on the frame grid; the rank halved
    to the floor, alpha in proportion."""
    plan = sized(load_document(CONFIGS / "wan14b_video_lora.yaml"), 10.0)
    frames, rank = plan.step("num_frames"), plan.step("lora_rank")
    assert frames is not None and rank is not None
    key = "config.process[0].datasets[0].num_frames"
    assert [f.after for f in frames.fields if f.key == key] == [17]
    assert [dict(rung) for rung in frames.rungs] == [{key: 9}, {key: 5}]
    ranks = [rung["config.process[0].network.linear"] for rung in rank.rungs]
    assert ranks == sorted(ranks, reverse=True) and ranks[-1] == 4
    assert_irreducible(load_document(CONFIGS / "wan14b_video_lora.yaml"), plan, 10.0)
