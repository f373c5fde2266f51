"""The app's inputs: Textual's (empty) validation never runs on them, and what is typed still
reaches the screen as ``Input.Changed``."""

from __future__ import annotations

from textual import on
from textual.app import App, ComposeResult
from textual.widgets import Input

from oom_wizard.screens.widgets import PlainInput


class TypedApp(App[None]):
    """One plain input and one of Textual's own, and the values each reported."""

    def __init__(self) -> None:
        super().__init__()
        self.changed: list[tuple[str, str]] = []

    def compose(self) -> ComposeResult:
        yield PlainInput("2", id="plain")
        yield Input("2", id="textual")

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        self.changed.append((event.input.id or "", event.value))


async def test_a_plain_input_is_never_validated_and_still_reports_what_is_typed() -> None:
    app = TypedApp()
    async with app.run_test() as pilot:
        plain = app.query_one("#plain", PlainInput)
        textual = app.query_one("#textual", Input)
        # Textual's own input marks itself valid from its first value on; the plain one never.
        assert textual.has_class("-valid")
        assert not plain.has_class("-valid") and not plain.has_class("-invalid")

        plain.focus()
        await pilot.press("end", "4")
        await pilot.pause()

        assert plain.value == "24"
        assert ("plain", "24") in app.changed
        assert not plain.has_class("-valid") and not plain.has_class("-invalid")
        assert plain.is_valid
