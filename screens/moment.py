"""Stage 2, When did it crash: the moment and the model kind, preselected from the log."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Header, OptionList, RadioSet, Static
from textual.widgets.option_list import Option

from oom_wizard.application.labels import log_claim, moment_info
from oom_wizard.application.settling import WizardState, advice_for
from oom_wizard.rules.diagnosis import Answers
from oom_wizard.screens.base import BACK, Back, StageScreen
from oom_wizard.screens.toggles import Choice, Tick
from oom_wizard.screens.widgets import KeyBar, MarkedOptionList
from oom_wizard.vocabulary import MODEL_KINDS, MOMENTS, Moment

#: How many evidence lines the screen shows (the rest are in ``diagnose``).
EVIDENCE_LINES = 6


class MomentScreen(StageScreen[Answers | Back]):
    """Asks when the job crashed and what kind of model it trains."""

    BINDINGS = [  # noqa: RUF012
        Binding("enter", "next", "Next", priority=True, id="moment.next"),
        Binding("escape", "back", "Back", id="moment.back"),
        Binding("ctrl+t", "toggle_kind", "Image/video", id="moment.toggle_kind"),
    ]

    def compose(self) -> ComposeResult:
        state = self.state
        yield Header()
        with VerticalScroll(id="body"):
            yield Static("When did it crash?", classes="title")
            guess = self._unsure_guess()
            options = [
                Option(
                    Content.assemble(
                        (moment_info(moment).label, "bold"),
                        " — ",
                        moment_info(moment).words,
                        *((("  (not sure)", "$text-warning"),) if moment == guess else ()),
                    ),
                    id=moment,
                )
                for moment in MOMENTS
            ]
            yield MarkedOptionList(*options, id="moments", compact=True)
            yield Static(self._detected(), id="detected")
            yield Static("", id="disagreement", classes="note")
            yield Static(self._evidence(), id="evidence")
            with Vertical(id="answers"):
                with RadioSet(id="kind", compact=True):
                    for kind in MODEL_KINDS:
                        yield Choice(f"{kind} model", value=kind == state.model_kind, id=kind)
                yield Tick(
                    "This exact config worked before",
                    value=state.answers.worked_before,
                    id="worked",
                )
            yield Static("", id="advice", classes="note", markup=False)
        yield KeyBar()

    def on_mount(self) -> None:
        """Highlight the moment in effect and focus the list."""
        moments = self.query_one("#moments", MarkedOptionList)
        moments.highlighted = MOMENTS.index(self.state.moment)
        moments.focus()
        self.show_disagreement()
        self.show_advice()

    @on(Tick.Changed, "#worked")
    def show_advice(self) -> None:
        """The advice beyond the config for the answers on screen (as ``diagnose`` gives it,
        ``--worked-before`` included): ticking "worked before" adds an update to suspect."""
        lines = advice_for(self.state, self.chosen())
        shown = self.query_one("#advice", Static)
        shown.update("\n".join(f"• {line}" for line in lines))
        shown.display = bool(lines)
        if lines and self.query_one("#worked", Tick).has_focus:
            self.call_after_refresh(shown.scroll_visible)

    def _unsure_guess(self) -> Moment | None:
        """The moment preselected from a log that does not settle it (marked "not sure")."""
        settled = self.state.settled
        claim = log_claim(self.state.log_diagnosis)
        if settled.moment_source == "answer" or claim.sure:
            return None
        return settled.moment

    def _detected(self) -> Content:
        """The log's own verdict (never the user's answer), worded by how sure it is
        (:func:`~oom_wizard.application.labels.log_claim`)."""
        verdict = self.state.log_diagnosis
        claim = log_claim(verdict)
        if verdict is None or verdict.moment is None:
            return Content.styled(claim.headline, "$text-muted")
        if not claim.sure:
            lines = [claim.headline]
            if verdict.log_note:
                lines.append(verdict.log_note)
            return Content.styled("\n".join(lines), "$text-warning")
        text = claim.headline
        if verdict.model_kind is not None:
            text += f" · {verdict.model_kind} model"
        if verdict.environment_suspected:
            text += " · the GPU itself looks suspect"
        text += f"\n{verdict.certainty}"
        if verdict.log_note:  # the log is from the run before the config's last change
            text += f"\n{verdict.log_note}"
        return Content.styled(text, "$text-accent")

    def _evidence(self) -> Content:
        """The log's last evidence lines, with their line numbers."""
        verdict = self.state.log_diagnosis
        if verdict is None:
            return Content("")
        lines = [
            Content.assemble((f"{item.line:>6}  ", "$text-muted"), item.text[:200])
            for item in verdict.evidence[-EVIDENCE_LINES:]
        ]
        return Content("\n").join(lines)

    @on(OptionList.OptionHighlighted, "#moments")
    @on(RadioSet.Changed, "#kind")
    def show_disagreement(self) -> None:
        """One line when the answers on screen differ from what the log says."""
        line = disagreement(self.state, self.chosen())
        shown = self.query_one("#disagreement", Static)
        shown.update(line or "")
        shown.display = line is not None

    def chosen(self) -> Answers:
        """The answers as the widgets show them now.

        A moment or kind left as preselected from the log and config is not an answer (the
        command line without ``--moment`` / ``--kind`` is the same job): only a value the
        user picked, or picked before, counts as theirs.
        """
        moments = self.query_one("#moments", MarkedOptionList)
        index = moments.highlighted if moments.highlighted is not None else 0
        pressed = self.query_one("#kind", RadioSet).pressed_button
        pressed_id = pressed.id if pressed is not None else None
        settled = self.state.settled
        kind = next((k for k in MODEL_KINDS if k == pressed_id), settled.model_kind)
        moment = MOMENTS[index]
        return Answers(
            moment=None
            if moment == settled.moment and settled.moment_source != "answer"
            else moment,
            model_kind=None
            if kind == settled.model_kind and settled.kind_source != "answer"
            else kind,
            worked_before=self.query_one("#worked", Tick).value,
        )

    def action_next(self) -> None:
        """Go on with these answers (the app plans for them)."""
        self.dismiss(self.chosen())

    def action_back(self) -> None:
        """Back to the loaded job."""
        self.dismiss(BACK)

    def action_toggle_kind(self) -> None:
        """Switch between image and video."""
        current = self.chosen().model_kind or self.state.model_kind
        other = MODEL_KINDS[(MODEL_KINDS.index(current) + 1) % len(MODEL_KINDS)]
        self.query_one(f"#{other}", Choice).value = True


def disagreement(state: WizardState, chosen: Answers) -> str | None:
    """Where ``chosen`` differs from the log's own verdict, in one line (None: it agrees)."""
    verdict = state.log_diagnosis
    if verdict is None:
        return None
    differ: list[str] = []
    if verdict.moment is not None and chosen.moment not in (None, verdict.moment):
        differ.append(_label(chosen.moment))
    if verdict.model_kind is not None and chosen.model_kind not in (None, verdict.model_kind):
        differ.append(f"{chosen.model_kind} model")
    if not differ:
        return None
    return f"You picked: {' · '.join(differ)}. Your answer is used."


def _label(moment: Moment) -> str:
    """A moment's label, in the user's words."""
    return moment_info(moment).label
