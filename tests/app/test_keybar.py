"""The key bar: it shows the screen's keys as Textual's footer does, follows them when they
change, and keeps its keys when a bindings refresh changes nothing it shows."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Input
from textual.widgets._footer import FooterKey

from oom_wizard.screens.widgets import KeyBar


class KeysApp(App[None]):
    """An input, and a "Cancel" key that is shown only while ``busy``."""

    BINDINGS = [  # noqa: RUF012
        Binding("f2", "cancel", "Cancel"),
        Binding("f1", "help", "Help"),
    ]

    busy = False

    def compose(self) -> ComposeResult:
        yield Input(id="typed")
        yield KeyBar()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.busy if action == "cancel" else True  # False: the key is not shown

    def action_cancel(self) -> None:
        """Nothing to cancel in this app."""

    def action_help(self) -> None:
        """No help in this app."""


def shown(app: App[None]) -> list[str]:
    """The descriptions of the keys the bar shows."""
    return [key.description for key in app.screen.query(FooterKey)]


async def test_the_bar_follows_the_keys_and_keeps_them_when_nothing_changes() -> None:
    app = KeysApp()
    async with app.run_test() as pilot:
        await pilot.pause()
        assert "Help" in shown(app)
        assert "Cancel" not in shown(app)
        keys = list(app.screen.query(FooterKey))

        app.screen.refresh_bindings()  # nothing it shows has changed
        await pilot.press("a", "b")  # typing refreshes the bindings too
        await pilot.pause()
        assert list(app.screen.query(FooterKey)) == keys  # the same widgets, not rebuilt

        app.busy = True
        app.screen.refresh_bindings()
        await pilot.pause()
        assert "Cancel" in shown(app)

        app.busy = False
        app.screen.refresh_bindings()
        await pilot.pause()
        assert "Cancel" not in shown(app)
