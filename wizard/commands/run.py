"""``oom-wizard run CONFIG | --db PATH --job NAME [--auto] [--max-retries N] … -- TRAINER…``.

Runs the trainer on the config (``{config}`` in the command is replaced by its path; the default is
``python run.py {config}`` in AI Toolkit's folder), its output on the terminal and in a log beside
the config, and on an out-of-memory crash saves the next roll-back and runs again
(``oom_wizard.application.autopilot``). Without ``--auto`` it asks before each retry: on a terminal
the wizard opens on the crash, already diagnosed, with the fix preselected, and the config the user
saves is what runs next (leaving it without a save stops); with the output piped, a [Y/n] with "yes"
preselected; with no terminal it stops. ``--scale-up`` goes upward from a config that finished.

A web-UI job (``--db PATH --job NAME``) is run from its row of the jobs database: each
attempt's config is written to a file of its own for the trainer, and each fix goes into the
row in place with its change log, as ``apply --db --in-place`` saves it. A job the UI runs,
stops or has queued is refused before anything starts.

The config is read before anything starts: one that does not parse is refused (exit 2) with
no trainer started and no log written.

Exit status: 0 the last attempt finished and trained; 2 it stopped without a finished run;
130 Ctrl-C (SIGINT); 143 SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oom_wizard.application.autopilot import (
    EXIT_STATUS,
    NO_TERMINAL,
    Settings,
    UserSave,
    always_yes,
    autopilot,
    check_readable,
    db_job_to_run,
    entry_lines,
)
from oom_wizard.application.card_wait import CardWait
from oom_wizard.application.follow import follow_log
from oom_wizard.application.labels import log_claim
from oom_wizard.application.running import (
    FATAL_SILENCE_S,
    default_command,
    run_trainer,
    trainer_argv,
)
from oom_wizard.commands._common import add_edited_argument
from oom_wizard.commands._jobdb import add_db_arguments, wants_db
from oom_wizard.errors import WizardError
from oom_wizard.host.interrupts import Terminated, raise_terminated

if TYPE_CHECKING:
    from oom_wizard.application.autopilot import NoTerminal, Where
    from oom_wizard.application.running import TrainerEnd
    from oom_wizard.application.settling import WizardState
    from oom_wizard.screens.app import OomWizardApp

PREFIX = "[oom-wizard] "
WATCH_S = 0.5
"""Seconds between two looks at the log for warnings."""


def add_parser(subparsers: Any) -> None:
    """Register ``run``."""
    parser = subparsers.add_parser(
        "run",
        help="run the trainer, and on an out-of-memory crash roll back one step and retry",
        description=(
            "Run the trainer as a child process ({config} in its command is replaced by the "
            "config's path), show and log its output, and when it runs out of memory save the "
            "next roll-back as a new config and run again: first a short validation run, then "
            "the full one. It stops, and says why, instead of relaunching an unchanged config."
        ),
    )
    parser.add_argument(
        "config",
        nargs="?",
        type=Path,
        metavar="CONFIG",
        help="the job config to run (or a web-UI job: --db PATH --job NAME)",
    )
    _add_options(parser)
    add_db_arguments(parser)
    parser.add_argument(
        "trainer",
        nargs=argparse.REMAINDER,
        metavar="-- TRAINER …",
        help="the trainer command (default in AI Toolkit's folder: python run.py {config})",
    )
    parser.set_defaults(handler=run)


def _add_options(parser: argparse.ArgumentParser) -> None:
    """The options, which may come before or after CONFIG."""
    parser.add_argument(
        "--auto", action="store_true", help="retry without asking (the default fix each time)"
    )
    parser.add_argument(
        "--max-retries", type=int, default=5, metavar="N", help="roll-backs tried at most (5)"
    )
    parser.add_argument(
        "--validation-steps",
        type=int,
        default=100,
        metavar="N",
        help=(
            "train.steps of the short run after each fix (100; 0: no validation run), raised "
            "to one step past the config's first periodic save and sample"
        ),
    )
    parser.add_argument(
        "--scale-up",
        action="store_true",
        help="after a finished run: re-add one setting per run until one crashes",
    )
    parser.add_argument(
        "--stall-minutes",
        type=float,
        default=10.0,
        metavar="N",
        help="warn when no new step comes for N minutes while the trainer lives (10)",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds the trainer gets after SIGINT, then SIGTERM, before SIGKILL (10)",
    )
    parser.add_argument(
        "--silence",
        type=float,
        default=FATAL_SILENCE_S,
        metavar="S",
        help=(
            "seconds of no output after the trainer printed its fatal error before its "
            f"processes are ended, as when it exits ({FATAL_SILENCE_S:g})"
        ),
    )
    add_edited_argument(parser)


class _OptionParser(argparse.ArgumentParser):
    """The options given after CONFIG (argparse hands them over with the trainer's words)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise WizardError(f"run: {message} (see 'oom-wizard run --help')")


def _split(args: argparse.Namespace) -> list[str]:
    """Options after CONFIG are read into ``args``; the words after ``--`` are the trainer."""
    words = list(args.trainer)
    if "--" in words:
        cut = words.index("--")
    else:  # argparse drops a ``--`` that comes right after CONFIG
        cut = len(words) if words[:1] and words[0].startswith("-") else -1
    head, tail = (words[:cut], words[cut + 1 :]) if cut >= 0 else ([], words)
    if head:
        later = _OptionParser(prog="oom-wizard run", add_help=False)
        _add_options(later)
        add_db_arguments(later)
        later.parse_args(head, namespace=args)
    return tail


def run(args: argparse.Namespace) -> int:
    """Run the loop; its exit status."""

    if args.db is not None and args.config is not None and "--" not in args.trainer:
        # No CONFIG with --db: argparse took the first word after ``--`` for it.
        args.trainer, args.config = [str(args.config), *args.trainer], None
    template = _split(args)
    where = _where(args)
    if args.max_retries < 0 or args.validation_steps < 0:
        raise WizardError("--max-retries and --validation-steps cannot be negative")
    # A config that does not parse, or is edited after our save, is refused before anything
    # starts.
    check_readable(where, edited_ok=args.edited_ok)
    if not template:
        found = default_command(Path.cwd())
        if found is None:
            raise WizardError(
                "give the trainer command after --, e.g. -- python run.py {config} "
                "(that is the default when run from AI Toolkit's folder)"
            )
        template = found
    echo = sys.stdout.buffer
    card = CardWait()

    def runner(config: Path, log: Path, env: Mapping[str, str] | None = None) -> TrainerEnd:
        card.before_attempt(_say)
        done = threading.Event()
        stall_s = args.stall_minutes * 60
        watcher = threading.Thread(target=_watch, args=(log, done, stall_s), daemon=True)
        watcher.start()
        try:
            return run_trainer(
                trainer_argv(template, config),
                log,
                echo=echo,
                env={**os.environ, **env} if env else None,
                grace_s=args.grace,
                silence_s=args.silence,
            )
        finally:
            done.set()
            watcher.join()

    settings = Settings(
        max_retries=args.max_retries,
        validation_steps=args.validation_steps,
        scale_up=args.scale_up,
        edited_ok=args.edited_ok,
    )
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        outcome = autopilot(
            where,
            runner,
            settings=settings,
            ask=always_yes if args.auto else _ask,
            say=_say,
            card_read=lambda: card.first,
        )
    except KeyboardInterrupt as exc:  # between two attempts: what was saved is complete
        if isinstance(exc, Terminated):
            _say("Terminated (SIGTERM) between attempts; every config saved so far is complete.")
            return EXIT_STATUS["terminated"]
        _say("Interrupted (Ctrl-C) between attempts; every config saved so far is complete.")
        return EXIT_STATUS["interrupted"]
    finally:
        signal.signal(signal.SIGTERM, previous)
    _say("Attempts:")
    for line in outcome.summary():
        _say(f"  {line}")
    return outcome.exit_status


def _where(args: argparse.Namespace) -> Where:
    """The config file, or the web-UI job (which must exist)."""

    if wants_db(args, args.config):
        if args.job is None:
            raise WizardError("run a web-UI job with --db PATH --job NAME")
        return db_job_to_run(args.db, args.job)
    if args.config is None:
        raise WizardError("give the job config to run (or a web-UI job: --db PATH --job NAME)")
    if not args.config.is_file():
        raise WizardError("no such config", file=args.config)
    config: Path = args.config
    return config


def _watch(log: Path, done: threading.Event, stall_s: float) -> None:
    """Tell the log's warnings as they come (skips, a stall, a slowdown) while it runs."""

    job = follow_log(log, stall_s=stall_s)
    while True:
        finished = done.wait(WATCH_S)
        for warning in job.poll().warnings:
            _say(f"⚠ {warning}")
        if finished:
            return


def _say(text: str) -> None:
    sys.stdout.write(f"{PREFIX}{text}\n")
    sys.stdout.flush()


def _ask(state: WizardState, fix: Sequence[str]) -> bool | UserSave | NoTerminal:
    """Show the diagnosis and the fix, then ask: in the wizard on a terminal, else [Y/n].

    On a terminal (stdin and stdout) the wizard opens on the crash, already diagnosed, on the
    review of the fix preselected; the config the user saves is the one the next attempt
    runs, and leaving the wizard without a save stops the loop. With only stdin a terminal
    (the output piped), Enter or y saves the fix as shown; with no terminal it refuses.
    """

    _say(state.diagnosis.verdict)
    claim = log_claim(state.diagnosis)
    _say(claim.headline if not claim.sure else state.diagnosis.certainty)
    for line in fix:
        _say(f"  {line}")
    if sys.stdin.isatty() and sys.stdout.isatty():
        return ask_in_wizard(state)
    if not sys.stdin.isatty():
        return NO_TERMINAL
    sys.stdout.write(f"{PREFIX}Save this roll-back and run again? [Y/n] ")
    sys.stdout.flush()
    answer = sys.stdin.readline().strip().lower()
    return answer in ("", "y", "yes")


def ask_in_wizard(
    state: WizardState, drive: Callable[[OomWizardApp], object] | None = None
) -> bool | UserSave:
    """The wizard on the crash with the fix preselected; what the user saved, or False.

    Args:
        state: The job opened on the crash, the fix preselected.
        drive: Runs the app to its end (default: in this terminal; a test drives it headless).
    """
    # boundary (a): the app, imported only to start it
    from oom_wizard.screens.app import create_app

    app = create_app(opened=state, first="review", exit_on_save=True)
    if drive is None:
        app.run()
    else:
        drive(app)
    finished = app.finished
    if finished is None:
        _say("The wizard was closed without a save.")
        return False
    return UserSave(finished.saved, entry_lines(finished.ready))
