"""``run`` owns every process the trainer starts, a helper in a session of its own included
(issue 32, R4-2): real children, real signals, a helper that holds the trainer's output open."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oom_wizard.application.running import (
    TrainerEnd,
    processes_note,
    run_trainer,
    stops_as_from_a_terminal,
)
from oom_wizard.host import supervision as trainer_module
from tests.support.autopilot_support import (
    FAKE,
    SCENARIOS,
    pid_alive,
    wait_for,
    wait_for_bytes,
    write_config,
)
from tests.support.tmux_support import WIZARD

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the child subreaper and /proc are Linux's"
)
EARLY = next(s for s in SCENARIOS if s.name == "image-early-steps")

#: A trainer that starts a helper in a session of its own (its output inherited: it holds the
#: pipe), writes the helper's pid to argv[1], prints and exits 0 at once.
LEAVES_A_HELPER = """
import subprocess, sys
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                          start_new_session=True)
open(sys.argv[1], "w").write(f"{helper.pid}\\n")
print("trained", flush=True)
"""


def end_for_good(pid: int) -> None:
    """A failing test must not leave its helper sleeping."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


@linux_only
def test_a_helper_in_its_own_session_does_not_keep_the_run_waiting(tmp_path: Path) -> None:
    helperfile = tmp_path / "helper"
    argv = [sys.executable, "-c", LEAVES_A_HELPER, str(helperfile)]

    started = time.monotonic()
    end = run_trainer(argv, tmp_path / "run.log", grace_s=2.0)
    took = time.monotonic() - started
    helper = int(helperfile.read_text())
    alive = pid_alive(helper)
    end_for_good(helper)

    assert not alive, "the helper outlived the trainer's run"
    assert took < 20, f"run_trainer waited {took:.1f} s on a pipe a helper held"
    assert end.returncode == 0 and not end.interrupted
    assert end.outside_group == 1 and end.sees_all and end.left_running == ()
    assert not end.output_cut  # the helper ended, so the pipe closed: all of it was read
    assert (tmp_path / "run.log").read_text() == "trained\n"
    assert processes_note(end) == (
        "the trainer's processes were stopped, 1 of them outside its process group "
        "(a helper in a session of its own)"
    )


def test_where_the_helpers_cannot_be_seen_reading_stops_once_quiet_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a subreaper (macOS, the BSDs) the helper is out of reach: the run still ends,
    a short quiet after the trainer, and claims no more than its group."""
    monkeypatch.setattr(trainer_module, "adopt_orphans", lambda: None)
    helperfile = tmp_path / "helper"
    argv = [sys.executable, "-c", LEAVES_A_HELPER, str(helperfile)]

    started = time.monotonic()
    end = run_trainer(argv, tmp_path / "run.log", grace_s=2.0)
    took = time.monotonic() - started
    end_for_good(int(helperfile.read_text()))

    assert took < 20
    assert end.returncode == 0 and end.output_cut and not end.sees_all
    assert (tmp_path / "run.log").read_text() == "trained\n"
    assert "cannot be found on this system" in processes_note(end)
    assert "were stopped, " not in processes_note(end)


def test_a_process_that_survives_sigkill_is_named_not_called_stopped() -> None:
    end = TrainerEnd(returncode=-2, duration_s=1.0, interrupted=True, left_running=(41, 42))

    note = processes_note(end)

    assert "2 processes it started still run after SIGKILL (pid 41 42)" in note
    assert "processes were stopped" not in note


@linux_only
@pytest.mark.skipif(not WIZARD.exists(), reason="the oom-wizard script is not installed")
@pytest.mark.parametrize(
    ("sig", "status", "said"),
    [
        (signal.SIGINT, 130, b"Interrupted (Ctrl-C); "),
        (signal.SIGTERM, 143, b"Terminated (SIGTERM); "),
    ],
    ids=["ctrl-c", "sigterm"],
)
def test_one_signal_ends_run_and_every_process_the_trainer_started(
    tmp_path: Path, sig: signal.Signals, status: int, said: bytes
) -> None:
    config = write_config(tmp_path, EARLY)
    pidfile, helperfile = tmp_path / "pids", tmp_path / "helper"
    env = {
        **os.environ,
        "FAKE_VRAM_GB": "24",
        "FAKE_STALL_AT": "1",
        "FAKE_WORKER": "1",
        "FAKE_PIDFILE": str(pidfile),
        "FAKE_SETSID_HELPER": str(helperfile),
    }
    proc = subprocess.Popen(
        [str(WIZARD), "run", str(config), "--auto", "--grace", "2", "--",
         sys.executable, str(FAKE), "{config}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
        preexec_fn=stops_as_from_a_terminal,
    )  # fmt: skip
    pid, _pgid, worker = (int(x) for x in wait_for(pidfile).split())
    helper = int(wait_for(helperfile))
    wait_for_bytes(tmp_path / "image-early-steps.run.log", b" 1/3000 [")

    proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        for survivor in (pid, worker, helper):
            if pid_alive(survivor):
                end_for_good(survivor)
                pytest.fail(f"pid {survivor} outlived run")

    assert proc.returncode == status, err
    stopped = b"the trainer's processes were stopped, 1 of them outside its process group"
    assert said + stopped in out


def test_an_oom_quoted_in_a_prompt_then_silence_does_not_end_the_trainer(tmp_path: Path) -> None:
    """``--silence`` ends a trainer that printed its fatal error and hangs; a prompt that
    quotes an OOM, then a slow sample, is no fatal error (R4-8)."""
    prompt = ' - Prompt: a meme, the caption "CUDA out of memory. Tried to allocate 20.00 MiB"'
    quiet = f"import time\nprint({prompt!r}, flush=True)\ntime.sleep(1.5)\nprint('sampled')\n"

    end = run_trainer([sys.executable, "-c", quiet], tmp_path / "run.log", silence_s=0.3)

    assert end.hung_after_error is None and end.returncode == 0
    assert (tmp_path / "run.log").read_text().endswith("sampled\n")


@linux_only
@pytest.mark.skipif(not WIZARD.exists(), reason="the oom-wizard script is not installed")
def test_sigkill_of_run_takes_the_helper_in_its_own_session_along(tmp_path: Path) -> None:
    """The watchdog is told of each process the trainer starts outside its group: when
    ``run`` is killed outright, those go with the group."""
    config = write_config(tmp_path, EARLY)
    pidfile, helperfile = tmp_path / "pids", tmp_path / "helper"
    env = {
        **os.environ,
        "FAKE_VRAM_GB": "48",
        "FAKE_STALL_AT": "1",
        "FAKE_PIDFILE": str(pidfile),
        "FAKE_SETSID_HELPER": str(helperfile),
    }
    proc = subprocess.Popen(
        [str(WIZARD), "run", str(config), "--auto", "--", sys.executable, str(FAKE), "{config}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path,
    )  # fmt: skip
    pid = int(wait_for(pidfile).split()[0])
    helper = int(wait_for(helperfile))
    wait_for_bytes(tmp_path / "image-early-steps.run.log", b" 1/3000 [")
    time.sleep(1.5)  # run looks for such processes once a second

    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    deadline = time.monotonic() + 5
    while (pid_alive(pid) or pid_alive(helper)) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in (pid, helper) if pid_alive(p)]
    for survivor in left:
        end_for_good(survivor)

    assert left == [], "a process the trainer started outlived oom-wizard run's SIGKILL"
