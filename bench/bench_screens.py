"""CPU time of one screen change in the wizard, beside a bare Textual app of the same size.

The Pilot tests cost what the app's screen changes cost: each Enter that moves the wizard on
composes, styles, lays out and paints a new stage. This prints, for each change of the demo's
walk (launch, the moment, every step, the review, the save), the CPU time of the key press
until the new screen is idle and the number of widgets on that screen; beside it, the same
change in a bare Textual app whose screens hold the same number of widgets (a Header, plain
Statics in a scroll, a Footer with the same number of keys). The least CPU time of
``--runs`` walks (another process on the machine only ever adds to it), all in one process,
headless at 80x24; the first walk of each warms the caches and is not counted.

Usage::

    python bench/bench_screens.py [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from tests.support.app_support import demo_app, demo_folder, settle, wait_for_state

#: The walk from the demo's load screen to its result: every default accepted.
WALK = 7
SIZE = (80, 24)
#: Widgets a bare screen has besides its Statics: Header (4), the scroll, Footer (1 + keys).
BARE_FIXED = 6


def widgets(screen: Screen[object]) -> int:
    """The widgets on ``screen`` (the screen itself not counted)."""
    return sum(1 for _ in screen.walk_children(with_self=False))


def keys(screen: Screen[object]) -> int:
    """The keys the screen's footer shows."""
    return sum(
        1 for _key, (_node, binding, *_rest) in screen.active_bindings.items() if binding.show
    )


async def timed_press(pilot: Pilot[Any], key: str) -> float:
    """CPU seconds from the key press until the app is idle again."""
    start = time.process_time()
    await pilot.press(key)
    await settle(pilot)
    return time.process_time() - start


#: Keys a bare screen can show besides the app's Enter; :meth:`BareScreen.check_action` hides
#: those beyond the count it is asked for.
BARE_KEYS = 12


class BareScreen(Screen[None]):
    """A screen of ``statics`` plain Statics and a footer of ``shown`` keys."""

    BINDINGS = [  # noqa: RUF012
        Binding(f"f{key}", f"noop({key})", f"Key {key}") for key in range(1, BARE_KEYS + 1)
    ]

    def __init__(self, statics: int, shown: int) -> None:
        super().__init__()
        self.statics = statics
        self.shown = shown

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll():
            for row in range(self.statics):
                yield Static(f"row {row}: a line of text")
        yield Footer()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Show the first ``shown - 1`` keys (the app's Enter is the last one)."""
        if action == "noop":
            return isinstance(key := parameters[0], int) and key < self.shown
        return True

    def action_noop(self, key: int) -> None:
        """The bare footer's keys do nothing."""


class BareApp(App[None]):
    """Shows the next :class:`BareScreen` of ``sizes`` on every Enter."""

    BINDINGS = [Binding("enter", "next", "Next", priority=True)]  # noqa: RUF012

    def __init__(self, sizes: list[tuple[int, int]]) -> None:
        super().__init__()
        self.sizes = iter(sizes)

    def on_mount(self) -> None:
        self.action_next()

    def action_next(self) -> None:
        statics, shown = next(self.sizes, (1, 1))
        if len(self.screen_stack) > 1:
            self.pop_screen()  # as the wizard's stages leave the stack before the next one
        self.push_screen(BareScreen(statics, shown))


async def wizard_walk() -> list[tuple[str, int, int, float]]:
    """One walk: (screen reached, its widgets, its footer keys, CPU seconds) per change."""
    rows: list[tuple[str, int, int, float]] = []
    with tempfile.TemporaryDirectory() as root:
        app = demo_app(demo_folder(Path(root)))
        async with app.run_test(size=SIZE) as pilot:
            await wait_for_state(pilot)
            for _ in range(WALK):
                seconds = await timed_press(pilot, "enter")
                screen = app.screen
                rows.append((type(screen).__name__, widgets(screen), keys(screen), seconds))
    return rows


async def bare_walk(sizes: list[tuple[int, int]]) -> list[tuple[int, float]]:
    """The same number of changes in the bare app: (its widgets, CPU seconds) per change."""
    rows: list[tuple[int, float]] = []
    app = BareApp([(1, 1), *sizes])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        for _ in sizes:
            seconds = await timed_press(pilot, "enter")
            rows.append((widgets(app.screen), seconds))
    return rows


def least(runs: list[list[float]]) -> Iterator[float]:
    """The least value of each position over ``runs``."""
    return (min(column) for column in zip(*runs, strict=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="walks of each app (default 5)")
    args = parser.parse_args()

    def repeated(walk: Callable[[], list[float]]) -> list[float]:
        walk()  # warms the caches
        return list(least([walk() for _ in range(args.runs)]))

    shape = asyncio.run(wizard_walk())
    ours = repeated(lambda: [row[3] for row in asyncio.run(wizard_walk())])
    sizes = [(max(widgets - BARE_FIXED - shown, 1), shown) for _, widgets, shown, _ in shape]
    bare_rows = asyncio.run(bare_walk(sizes))
    # The bare footer may show a key more or less than counted: match the widgets exactly.
    sizes = [
        (max(statics + wanted[0] - got[0], 1), shown)
        for (statics, shown), wanted, got in zip(
            sizes, [(row[1], row[2]) for row in shape], bare_rows, strict=True
        )
    ]
    bare_rows = asyncio.run(bare_walk(sizes))
    bare = repeated(lambda: [row[1] for row in asyncio.run(bare_walk(sizes))])

    print(f"one screen change, CPU ms (least of {args.runs}), headless {SIZE[0]}x{SIZE[1]}")
    heads = f"{'widgets':>8}{'wizard':>9}{'bare':>9}{'bare widgets':>14}{'ratio':>8}"
    print(f"{'wizard screen':<16}{heads}")
    for (name, count, _, _), mine, theirs, (bare_count, _) in zip(
        shape, ours, bare, bare_rows, strict=True
    ):
        print(
            f"{name:<16}{count:>8}{mine * 1000:>9.0f}{theirs * 1000:>9.0f}"
            f"{bare_count:>14}{mine / theirs:>8.2f}"
        )
    total_ours, total_bare = sum(ours), sum(bare)
    print(
        f"{'whole walk':<16}{'':>8}{total_ours * 1000:>9.0f}{total_bare * 1000:>9.0f}"
        f"{'':>14}{total_ours / total_bare:>8.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
