"""``oom-wizard fit CONFIG | JOB_DIR | --db PATH --job NAME [--gpu GIB] [--json]``: will it fit.

Each phase of the job (loading, the first sample, a training step, a periodic sample) as a
band of GiB against the card, the verdict of the peak, its parts and, when it does not fit,
the roll-back steps that would make it fit (``apply --moment M --steps ...`` takes them as
they are). The card comes from ``nvidia-smi``, else ``--gpu``, else the command asks on a
terminal. All of it comes from the application layer (:func:`oom_wizard.application.fitting.fit`).
Writes nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from typing import TYPE_CHECKING, Any, Final, TextIO

from oom_wizard import spelling
from oom_wizard.application.fitting import (
    FIT_MARGIN,
    VERDICT_STATUS,
    card_gib_problem,
    fit,
    probed_card,
    step_loss,
)
from oom_wizard.application.leaving import job_notes
from oom_wizard.application.settling import JobCard
from oom_wizard.commands._common import add_crash_arguments, stdout
from oom_wizard.commands._jobdb import add_db_arguments, wants_db
from oom_wizard.commands._report import show_jobs
from oom_wizard.commands._target import load_target
from oom_wizard.errors import WizardError

if TYPE_CHECKING:
    from rich.console import Console

    from oom_wizard.application.fitting import FitReport, Room
    from oom_wizard.application.settling import WizardState
    from oom_wizard.rules.host import HostMemory
    from oom_wizard.rules.memory import Calibration

PHASE_WORDS = {
    "load": "loading",
    "baseline_sample": "first sample",
    "training": "training step",
    "sample": "periodic sample",
}
PART_WORDS = {
    "transformer": "transformer",
    "in_flight": "layer copies in flight",
    "text_encoder": "text encoder",
    "vae": "VAE",
    "trainable": "trained weights + gradients",
    "optimizer": "optimizer state",
    "activations": "activations",
    "vae_pass": "VAE decode/encode",
    "unexplained": "held beyond the estimate (the log's figure)",
}


def add_parser(subparsers: Any) -> None:
    """Register ``fit``."""
    parser = subparsers.add_parser(
        "fit",
        help="will it fit: each phase's peak in GiB against the card (writes nothing)",
        description=(
            "Estimate the job's GPU memory at each phase (loading, first sample, training "
            "step, periodic sample) as a band in GiB, compare its peak with the card, and "
            "when it does not fit, name the roll-back steps that would make it fit."
        ),
    )
    parser.add_argument(
        "config",
        nargs="?",
        metavar="CONFIG",
        help="the job config (.yaml, .yml, .json, .jsonc), or the job's output folder",
    )
    parser.add_argument(
        "--gpu",
        type=_gib,
        metavar="GIB",
        help="the card's memory in GiB (default: from nvidia-smi, else asked)",
    )
    parser.add_argument(
        "--ram",
        type=_ram,
        metavar="GIB",
        help="the machine's RAM in GiB, for the host's verdict (default: this machine's, read "
        "with the GPU probe)",
    )
    add_crash_arguments(
        parser,
        moment_help="when it crashed, if it did (the fix then follows the peak anyway)",
        kind_help="image or video model (default: from the arch)",
        log_help="the training log: PyTorch's OOM figures in it calibrate the estimate",
    )
    add_db_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(handler=run)


def _gib(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of GiB, such as 24") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a card size; give GiB above 0")

    problem = card_gib_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"'{text}': {problem}")
    return value


def _ram(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of GiB, such as 32") from None
    if not math.isfinite(value) or value <= 0 or value > 1024 * 1024:
        raise argparse.ArgumentTypeError(f"'{text}' is not an amount of RAM; give GiB above 0")
    return value


def run(args: argparse.Namespace) -> int:
    """Print the fit (as text, or as JSON with ``--json``); the verdict's exit status
    (:data:`~oom_wizard.application.fitting.VERDICT_STATUS`)."""

    if wants_db(args, args.config) and args.job is None:
        return show_jobs(args.db, stdout())
    state = load_target(_with_defaults(args))
    for note in job_notes(state):  # on stderr: the JSON on stdout stays one object
        print(f"note: {note}", file=sys.stderr)
    card = card_of(state, args.gpu)
    report = fit(state, card, args.ram)
    if args.json:
        print(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    else:
        render(stdout(), state, report)
    return VERDICT_STATUS[report.verdict]


def _with_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """``load_target``'s arguments: ``fit`` has no ``--new-crash``."""
    return argparse.Namespace(**{**vars(args), "new_crash": False})


def card_of(state: WizardState, gpu: float | None) -> JobCard:
    """The card: ``--gpu``, else nvidia-smi's, else the one PyTorch's OOM message in the log
    names, else asked on a terminal.

    Raises:
        WizardError: no card known and no terminal to ask on.
    """

    if gpu is not None:
        return JobCard(gpu, "--gpu")
    found = probed_card(state)
    if found is not None:
        return found
    seen = "no GPU seen (nvidia-smi)"
    if state.job.probe_note is not None:
        seen = state.job.probe_note
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise WizardError(f"{seen} and no --gpu: give the card's memory, such as --gpu 24")
    if state.job.probe_note is not None:
        print(f"note: {state.job.probe_note}", file=sys.stderr)
    return ask_card(sys.stdin, sys.stderr)


#: How often a card size that is not one is asked again before the command gives up.
CARD_TRIES: Final = 3


def ask_card(answers: TextIO, prompts: TextIO) -> JobCard:
    """The card's memory asked on a terminal: a typo is said and asked again (three tries
    in all); an empty answer or the end of input gives up.

    Raises:
        WizardError: no answer, or no card size in three tries.
    """

    prompt = "No GPU seen here (nvidia-smi). The card's memory in GiB: "
    for tried in range(1, CARD_TRIES + 1):
        print(prompt, end="", file=prompts, flush=True)
        answer = answers.readline().strip()
        if not answer:
            raise WizardError("no card size given: give the card's memory, such as --gpu 24")
        try:
            return JobCard(_gib(answer), "asked")
        except argparse.ArgumentTypeError as exc:
            if tried == CARD_TRIES:
                raise WizardError(f"{exc} ({CARD_TRIES} tries); give it as --gpu 24") from None
            prompt = f"{exc}. Again, in GiB (such as 24): "
    raise AssertionError("unreachable: the last try returns or raises")


def calibration_words(calibration: Calibration, scale: float) -> str:
    """What the log (or a run) said and what it did to the bands, in one line."""
    card = f" on the {calibration.card_gib:.1f} GiB card" if calibration.card_gib else ""
    said: list[str] = []
    if calibration.at_least_gib is not None:
        said.append(
            f"the {PHASE_WORDS[calibration.phase]} needed more than "
            f"{calibration.at_least_gib:.2f} GiB (a floor: what PyTorch held in tensors plus "
            "the allocation it tried)"
        )
    elif calibration.measured_gib is not None:
        said.append(
            f"the {PHASE_WORDS[calibration.phase]} peaked at {calibration.measured_gib:.1f} GiB"
        )
    if calibration.passed:
        said.append(" and ".join(PHASE_WORDS[p] for p in calibration.passed) + f" passed{card}")
    effect = (
        f"activations and workspaces × {scale:.2f}"
        if abs(scale - 1.0) > 1e-6
        else "the band agrees"
    )
    return f"{calibration.source}: {'; '.join(said)} ({effect})"


def band_text(low: float, high: float) -> str:
    """``20.3–25.7 GiB``."""
    return f"{low:.1f}–{high:.1f} GiB"


def render(console: Console, state: WizardState, report: FitReport) -> None:
    """The phases, the verdict, the parts of the peak and the fix, as text."""
    memory, card = report.memory, report.card
    console.print(
        f"Will it fit: {state.source} on a {card.gib:.1f} GiB card (from {card.words})",
        markup=False,
    )
    words = card.tenants_words()
    if words is not None:
        console.print(f"  on the card: {words}", markup=False)
    if memory.not_estimated is not None:
        console.print(f"  {memory.not_estimated}.", markup=False)
        return
    for phase, band in memory.phases.items():
        words = PHASE_WORDS[phase].ljust(16)
        if band is None:
            console.print(f"  {words} does not happen", markup=False)
            continue
        mark = spelling.verdict(report.phase_verdict(phase) or "")
        calibration = memory.calibrated_by
        if calibration is not None and phase in calibration.passed and calibration.on is None:
            mark += " (the log shows it passed)"
        elif calibration is not None and calibration.floor_gib and phase == calibration.phase:
            mark += " (it crashed here)" if calibration.on is None else " (its source crashed here)"
        console.print(f"  {words} {band_text(band.low, band.high).ljust(16)} {mark}", markup=False)
    peak = memory.peak()
    console.print(
        f"  peak: {PHASE_WORDS[memory.peak_phase]}, {peak.mid:.1f} of {card.room_gib:.1f} GiB "
        f"({peak.low:.1f}–{peak.high:.1f}): {spelling.verdict(report.verdict)}; "
        f"{memory.basis()}",
        markup=False,
    )
    parts = memory.parts[memory.peak_phase].as_dict()
    shown = ", ".join(f"{PART_WORDS[k]} {parts[k]:.1f}" for k in PART_WORDS if parts[k] >= 0.05)
    shown += (
        f", CUDA context {parts['context']:.1f}, allocator reserve and workspaces "
        f"{parts['overhead'] - parts['context']:.1f}"
    )
    console.print(f"  at the peak (GiB, midpoints): {shown}", markup=False)
    calibration = memory.calibrated_by
    if calibration is not None:
        console.print(f"  {calibration_words(calibration, memory.scale)}", markup=False)
        crash_card = calibration.card_gib
        if crash_card and abs(crash_card - card.gib) > 0.05:
            console.print(
                f"  note: that crash was on a {crash_card:.1f} GiB card; this fit weighs the "
                f"job against the {card.gib:.1f} GiB card (from {card.words})",
                markup=False,
            )
    for note in memory.notes:
        console.print(f"  note: {note}", markup=False)
    for finding in report.options:
        console.print(f"  option: {finding.words()}", markup=False)
    if report.host is not None:
        render_host(console, report.host)
    if report.room is not None:
        render_room(console, report.room, report.card)
    fix = report.fix
    if fix is None:
        return
    console.print("", markup=False)
    if not fix.steps:
        console.print("No change AI Toolkit offers for this job lowers this peak.", markup=False)
        return
    fixed = fix.memory.peak()
    steps = ", ".join(f"{s.id} ({step_loss(s)})" for s in fix.steps)
    if not fix.reaches:
        console.print(
            f"Nothing AI Toolkit offers for this job is predicted to fit this card. The closest "
            f"config, with {steps}, peaks at {PHASE_WORDS[fix.memory.peak_phase]} "
            f"{band_text(fixed.low, fixed.high)}: {fix.lacks_gib:.1f} GiB over the "
            f"{card.gib:.1f} GiB card at its high edge. What is left: a bigger card, or a "
            "smaller variant of the model.",
            markup=False,
        )
        return
    after = fix.memory.phases.get(memory.peak_phase)
    room = (
        f"with {FIT_MARGIN:.0%} of the card free"
        if fix.margin
        else f"but with less than {FIT_MARGIN:.0%} of the card free: no change AI Toolkit "
        "offers leaves more"
    )
    today = (
        f"{PHASE_WORDS[memory.peak_phase]} {band_text(after.low, after.high)}; " if after else ""
    )
    console.print(
        f"To fit, the least loss: {steps} ({today}peak {PHASE_WORDS[fix.memory.peak_phase]} "
        f"{band_text(fixed.low, fixed.high)}: fits, {room})",
        markup=False,
    )
    line = report.apply_args
    if line is not None:
        console.print("  " + shlex.join(line), markup=False)


def render_room(console: Console, room: Room, card: JobCard) -> None:
    """What a job that fits with room could get back, and the command that makes it."""

    console.print("", markup=False)
    if room.taken:
        peak = room.memory.peak()
        items = ", ".join(f"{item.title} ({item.loss})" for item in room.taken)
        console.print(
            f"Room to give back, the most quality that still fits with {FIT_MARGIN:.0%} of "
            f"the card free: {items} (peak {PHASE_WORDS[room.memory.peak_phase]} "
            f"{band_text(peak.low, peak.high)})",
            markup=False,
        )
    held = room.held
    if held is not None:
        item, memory = held
        peak = memory.peak()
        words = "Left out:" if room.taken else "Room, but not enough to give back anything:"
        console.print(
            f"  {words} {item.title} would not fit with that margin "
            f"({PHASE_WORDS[memory.peak_phase]} {band_text(peak.low, peak.high)} on the "
            f"{card.room_gib:.1f} GiB card)",
            markup=False,
        )
    if room.command is None:
        return
    line = shlex.join(room.command)
    if room.scale_up and len(room.taken) > 1:
        line += (
            f"   (one re-add per run: {len(room.taken)} runs, each on the config the last saved)"
        )
    console.print("  " + line, markup=False)


HOST_PHASE_WORDS = {"load": "loading", "caching": "caching", "training": "training step"}


def render_host(console: Console, host: HostMemory) -> None:
    """The host's RAM per phase, its verdict and, when it is the limit, what lowers it."""
    ram = f"{host.ram_gib:.1f} GiB of RAM" if host.ram_gib is not None else "RAM not known"
    console.print(f"Host RAM ({ram}):", markup=False)
    for phase, band in host.phases.items():
        parts = ", ".join(
            f"{name} under 0.1" if hi < 0.05 else f"{name} {lo:.1f}–{hi:.1f}"
            for name, lo, hi in band.parts
        )
        console.print(
            f"  {HOST_PHASE_WORDS[phase].ljust(16)} {band_text(band.low, band.high).ljust(16)} "
            f"({parts})",
            markup=False,
        )
    verdict = spelling.verdict(host.verdict)
    if host.verdict == "unknown":
        verdict += " (give --ram GIB)"
    pinned = (
        f"; pinned {band_text(host.pinned.low, host.pinned.high)}"
        + (" against Windows' cap of half the RAM" if host.windows else "")
        if host.pinned.high > 0
        else ""
    )
    console.print(f"  host: {verdict}{pinned}", markup=False)
    for lever in host.levers:
        console.print(f"  to lower it: {lever}", markup=False)
    for note in host.notes:
        console.print(f"  note: {note}", markup=False)
