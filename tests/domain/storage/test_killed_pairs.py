"""A save killed by SIGKILL, then the next command from the save's folder and from another
one: the pair is old or new, nothing false is said, a web-UI job can always be restored.

The suite's fixed sample of ``bench/bench_save_kill.py``'s points (that script kills every
kind of save at each of its system calls; the machinery is ``tests/support/killed_saves.py``).
The sample is each kind of save's commit point, where the pair turns from old to new, and the
calls just before and inside a database commit; the points that lost data in round 3 are among
them (each of these fails on round 3's code):

- a first save killed between its two renames, then any command from another folder (R4-1:
  the recovery there found none of the journal's paths and removed the only copy of the new
  config);
- ``--force`` killed there (R4-1: the new change log stayed beside the old config, and every
  later command said it was "edited after oom-wizard saved it");
- a web-UI job saved in place, as new or restored, killed between the database's commit and
  its change log (R4-3: the row and the log out of step for good, a restore that could no longer
  put the original back).

Each point is named by a call that only the save makes, so that no traced run has to count
them: ``link``, ``rename``, ``fsync`` (which SQLite does not use), and ``fdatasync`` (which only
SQLite uses: its first is inside the row's commit).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.killed_saves import BY_NAME, kill_and_check

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")

#: (save, call, N, why this point).
POINTS = [
    ("file pair", "link", 2, "between the renames: the change log in, the config not"),
    ("--force", "rename", 2, "between the renames over an earlier pair"),
    ("--force, two folders", "rename", 2, "between the renames, one in each folder"),
    ("database, in place", "fsync", 3, "the journal on disk, before the row's commit"),
    ("database, in place", "rename", 1, "after the row's commit, before the change log's rename"),
    ("database, as new", "rename", 1, "after the new row's commit"),
    ("restore", "fdatasync", 1, "inside the row's commit (round 3: after the log's rename)"),
    ("restore", "rename", 1, "after the restored row's commit"),
]


@pytest.mark.parametrize(
    ("save", "call", "when", "why"),
    POINTS,
    ids=[
        f"{save.replace(' ', '-').replace(',', '')}-{call}-{when}" for save, call, when, _ in POINTS
    ],
)
def test_a_killed_save_is_old_or_new_for_the_next_command_from_any_folder(
    tmp_path: Path, save: str, call: str, when: int, why: str
) -> None:
    killed, outcomes = kill_and_check(tmp_path, BY_NAME[save], call, when)

    assert killed == "killed", why
    for where, outcome in outcomes.items():
        assert outcome.held, f"{why}; from {where}: {outcome.detail()}"
