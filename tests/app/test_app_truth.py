"""One truth on every screen: the app says what the command line says, from the same service.

- the environment screen's title comes from the same verdict as its reasons;
- the result screen's "later" list is the list ``history`` prints;
- "this exact config worked before" changes the advice, as ``diagnose --worked-before`` does;
- with every re-add made, the scale-up screen names a change made with ``set`` that still
  stands, as ``scale-up`` and ``history`` do, instead of saying that everything is back.
"""

from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import OptionList, Static

from oom_wizard.application.demo import IMAGE_JOB
from oom_wizard.request import JobRequest
from oom_wizard.screens.app import create_app
from oom_wizard.screens.environment import EnvironmentScreen
from oom_wizard.screens.moment import MomentScreen
from oom_wizard.screens.toggles import Choice, Tick
from oom_wizard.vocabulary import MOMENTS
from tests.support.app_support import (
    demo_app,
    demo_folder,
    press,
    review_app,
    save_from_review,
    screen_text,
    settle,
    wait_for_screen,
    wait_for_state,
)
from tests.support.plan_support import cli

SIZE = (80, 24)

#: The demo's OOM message, and the same with another process holding a third of the card.
JOB_ALONE = (
    "GPU 0 has a total capacity of 23.54 GiB of which 1.12 GiB is free. Including non-PyTorch "
    "memory, this process has 22.40 GiB"
)
WITH_OTHERS = (
    "GPU 0 has a total capacity of 23.54 GiB of which 1.12 GiB is free. Process 4242 has "
    "8.00 GiB memory in use. Including non-PyTorch memory, this process has 14.40 GiB"
)


def others_log(folder: Path) -> Path:
    """The demo's log, where another process held 8 GiB of the 23.5 GiB card at the crash."""
    text = (folder / IMAGE_JOB.log).read_text(encoding="utf-8")
    assert text.count(JOB_ALONE) == 1
    path = folder / "others_on_the_card.log"
    path.write_text(text.replace(JOB_ALONE, WITH_OTHERS), encoding="utf-8")
    return path


# --- the environment screen -------------------------------------------------------------------


async def test_environment_found_in_the_log_says_so_with_its_reason(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = demo_app(folder, log=others_log(folder))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter")
        assert app.require_state().moment == "environment"
        await press(pilot, "enter")
        assert isinstance(app.screen, EnvironmentScreen)
        title = screen_text(pilot, "#verdict")
        reasons = screen_text(pilot, "#reasons")
    assert title == "It is the environment, not the config"
    assert "other processes held 8.00 GiB of 23.54 GiB" in reasons
    assert "not the environment" not in reasons


async def test_environment_picked_against_the_log_does_not_blame_the_gpu(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = demo_app(folder)  # the job's own process held 22.4 of 23.5 GiB
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter")
        pilot.app.screen.query_one("#moments", OptionList).highlighted = MOMENTS.index(
            "environment"
        )
        await press(pilot, "enter")
        assert isinstance(app.screen, EnvironmentScreen)
        title = screen_text(pilot, "#verdict")
        cause = screen_text(pilot, "#cause")
        reasons = screen_text(pilot, "#reasons")
    assert "the job itself filled the card, it is the config, not the environment" in reasons
    assert title == "You say it is the environment; the log does not show it"
    assert not title.startswith("It is")
    assert cause.startswith("Your answer means: ")


# --- the result screen's "later" list and history ---------------------------------------------


def history_later(out: str) -> list[str]:
    """The numbered lines under history's "Later" heading."""
    from oom_wizard.commands.history import LATER_HEADING

    lines = out.splitlines()
    start = lines.index(LATER_HEADING) + 1
    later = []
    for line in lines[start:]:
        if not line.startswith("  ") or not line.strip()[0].isdigit():
            break
        later.append(line)
    return later


async def test_the_later_list_is_the_list_history_prints(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    app = review_app(JobRequest(target=folder / IMAGE_JOB.config, log=folder / IMAGE_JOB.log))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_screen(pilot, "ReviewScreen")
        app.screen.query_one("#fix-safe", Choice).value = True  # the seed's set: several steps
        await pilot.pause()
        await save_from_review(pilot)
        shown = screen_text(pilot, "#later").splitlines()[1:]
    status, out, _ = cli("history", folder / "flux_portrait_lora.oomfix.yaml")
    assert status == 0
    assert len(shown) >= 2  # a real list: several settings to give back
    assert [line.rstrip() for line in shown] == history_later(out)
    first = shown[0].split(". ", 1)[1]
    assert f"Next scale-up: {first} [" in out  # and history's next is the list's first


# --- "this exact config worked before" --------------------------------------------------------


async def test_worked_before_changes_the_advice_as_the_cli_flag_does(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    config, log = folder / IMAGE_JOB.config, folder / IMAGE_JOB.log
    app = demo_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter")
        assert isinstance(app.screen, MomentScreen)
        advice = app.screen.query_one("#advice", Static)
        before = str(advice.render()).strip() if advice.display else ""
        worked = app.screen.query_one("#worked", Tick)
        worked.focus()
        await press(pilot, "space")
        assert worked.value
        await settle(pilot)
        assert advice.display
        after = str(advice.render())
        await press(pilot, "enter")
        assert app.require_state().answers.worked_before
    _, plain, _ = cli("diagnose", config, "--log", log, "--no-probe", "--json")
    _, flagged, _ = cli("diagnose", config, "--log", log, "--no-probe", "--json", "--worked-before")
    added = {a["text"] for a in json.loads(flagged)["advice"]} - {
        a["text"] for a in json.loads(plain)["advice"]
    }
    assert added  # the flag adds advice on the command line ...
    for text in added:  # ... and the tick shows the same in the app
        assert text not in before
        assert " ".join(text.split()) in " ".join(after.split())


async def test_environment_suspected_from_worked_before_alone_says_suspect(
    tmp_path: Path,
) -> None:
    from oom_wizard.screens.app import create_app

    folder = demo_folder(tmp_path)
    app = create_app(folder / IMAGE_JOB.config, probe=False)  # no log: nothing against it
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter")
        assert isinstance(app.screen, MomentScreen)
        app.screen.query_one("#worked", Tick).value = True
        app.screen.query_one("#moments", OptionList).highlighted = MOMENTS.index("environment")
        await settle(pilot)
        await press(pilot, "enter")
        assert isinstance(app.screen, EnvironmentScreen)
        title = screen_text(pilot, "#verdict")
        reasons = screen_text(pilot, "#reasons")
    assert title == "The environment looks suspect"
    assert "you say this exact config worked before" in reasons


# --- a change made with set, after every re-add ---------------------------------------------


def scaled_all_the_way_up(folder: Path) -> Path:
    """The demo rolled back, one field then changed with ``set``, and every re-add made
    with ``scale-up --yes``; the last config."""
    config, log = folder / IMAGE_JOB.config, folder / IMAGE_JOB.log
    assert cli("apply", config, "--log", log)[0] == 0
    status, out, err = cli("set", folder / "flux_portrait_lora.oomfix.yaml", f"{LR}=0.0002")
    assert status == 0, err
    current = Path(next(line for line in out.splitlines() if line.startswith("Wrote "))[6:])
    while True:
        status, out, err = cli("scale-up", current, "--yes")
        assert status == 0, err
        wrote = [line for line in out.splitlines() if line.startswith("Wrote ")]
        if not wrote:
            return current
        current = Path(wrote[0].removeprefix("Wrote "))


LR = "config.process[0].train.lr"


async def test_the_scale_up_never_says_everything_is_back_while_a_set_change_stands(
    tmp_path: Path,
) -> None:
    folder = demo_folder(tmp_path)
    last = scaled_all_the_way_up(folder)
    status, out, _ = cli("scale-up", last)
    assert status == 0 and "still stands" in out  # the command line's words

    app = create_app(last)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_state(pilot)
        await press(pilot, "enter")
        assert type(app.screen).__name__ == "ComingBackScreen"
        await press(pilot, "down", "enter")  # Yes: no log says it (none preselected)
        assert type(app.screen).__name__ == "ScaleUpScreen"
        shown = " ".join(str(widget.render()) for widget in app.screen.query(Static))

    assert "Everything is back" not in shown
    assert "Nothing left to re-add" in shown
    assert "still stands" in shown and f"{LR}: 0.0001 → 0.0002 (set by hand)" in shown
