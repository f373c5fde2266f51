"""What the screens show that comes from the presets: a moment's words, a field's place in
the web UI, an arch's label.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from oom_wizard.formats.document import JobDocument
from oom_wizard.rules.catalog import MomentInfo
from oom_wizard.vocabulary import Moment

if TYPE_CHECKING:
    from oom_wizard.application.settling import WizardState
    from oom_wizard.formats.view import ProcessView
    from oom_wizard.paths import FieldPath
    from oom_wizard.rules.catalog import ArchFacts
    from oom_wizard.rules.diagnosis import Diagnosis


def arch_of(state: WizardState | JobDocument, path: FieldPath) -> ArchFacts | None:
    """The arch of the process a field belongs to (the first process's for a bare path)."""
    from oom_wizard.rules.catalog import load_presets
    from oom_wizard.rules.shape import arch_facts

    process = process_of(state, path)
    return arch_facts(process, load_presets()) if process is not None else None


def process_of(state: WizardState | JobDocument, path: FieldPath) -> ProcessView | None:
    """The process a field belongs to (the first process for a bare path)."""
    document = state if isinstance(state, JobDocument) else state.document
    view = document.view()
    index = path[2] if len(path) > 2 and path[:2] == ("config", "process") else None
    return next((p for p in view.processes if p.index == index), view.primary)


def moment_info(moment: Moment) -> MomentInfo:
    """A moment as the presets describe it: its label, the user's words, its cause."""
    from oom_wizard.rules.catalog import load_presets

    return load_presets().moment(moment)


@dataclass(frozen=True)
class LogClaim:
    """What the log says about when the job crashed, worded by how sure the diagnosis is.

    Attributes:
        headline: The line a front end shows (the moment screen, ``run``, ``watch``).
        sure: Whether the log settles the moment (confidence high or medium): only then does a
            front end present the moment as the log's answer; otherwise it asks.
        likeliest: The moment the log leans to (None: it does not lean anywhere).
    """

    headline: str
    sure: bool
    likeliest: Moment | None


def log_claim(diagnosis: Diagnosis | None) -> LogClaim:
    """The one wording of the log's verdict on the moment, for every front end.

    At ``high`` or ``medium`` confidence the log points to its moment and says how sure and
    why; at ``low`` it says that the log does not settle it, names the likeliest moment as a
    guess with its reason, and asks; with no moment it asks.
    """
    if diagnosis is None:
        return LogClaim("No log: pick what you saw.", sure=False, likeliest=None)
    moment = diagnosis.moment
    if moment is None:
        return LogClaim(
            "The log does not say when it crashed: pick what you saw.", sure=False, likeliest=None
        )
    label = moment_info(moment).label
    if diagnosis.confidence == "low":
        return LogClaim(
            f"Not sure: the log does not settle when it crashed ({diagnosis.basis}). "
            f"It looks most like '{label}'; pick what you saw.",
            sure=False,
            likeliest=moment,
        )
    return LogClaim(f"The log points to: {label}", sure=True, likeliest=moment)


def ui_hint(path: str, state: WizardState | None = None) -> str | None:
    """Where a field is in AI Toolkit's web UI (None when the UI does not show it).

    With the state, the hint is the plan's rows' own (:func:`oom_wizard.rules.plan.field_hint`): for
    the arch of the field's process, and a dataset's field names the dataset (its folder's
    name) instead of the presets' "Dataset N".
    """
    from oom_wizard.paths import parse_path
    from oom_wizard.rules.catalog import load_presets
    from oom_wizard.rules.plan import field_hint
    from oom_wizard.rules.shape import arch_facts

    presets = load_presets()
    if state is None:
        return presets.ui_hint(path)
    parsed = parse_path(path)
    process = process_of(state, parsed)
    if process is None:
        return presets.ui_hint(parsed)
    return field_hint(presets, process, arch_facts(process, presets), parsed)


def arch_label(process_model: object) -> str | None:
    """The arch a process's ``model`` section names, as "label (kind)" (None: unknown)."""
    from oom_wizard.rules.catalog import load_presets

    model = process_model if isinstance(process_model, dict) else {}
    facts = load_presets().arch_from_model(model)
    return f"{facts.label} ({facts.kind})" if facts else None
