"""``set``: a user's own edits, checked as the app checks a typed value."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from oom_wizard.application.labels import arch_of
from oom_wizard.errors import EditError, WizardError
from oom_wizard.formats.document import JobDocument
from oom_wizard.formats.fields import parse_assignment, parse_unset
from oom_wizard.paths import MISSING, format_path
from oom_wizard.rules.limits import check_changelog, check_document
from oom_wizard.rules.values import validate_value
from oom_wizard.storage.changelog import ChangeLog, RunFacts, changelog_path_for
from oom_wizard.storage.changes import REQUIRED, Change, Prepared, changelog_of, prepare
from oom_wizard.storage.jobdir import load_config
from oom_wizard.storage.save import commit

if TYPE_CHECKING:
    from oom_wizard.storage.save import SaveResult


@dataclass(frozen=True)
class Edit:
    """``set``'s edits on one config, checked and made in memory.

    Attributes:
        document: The config as loaded (never written).
        prepared: The edits made in memory (``prepared.changed``: whether any changes it).
        prior: The change log beside the config, as read with it (the save appends to it).
    """

    document: JobDocument
    prepared: Prepared
    prior: ChangeLog | None


def prepare_set(
    config: Path, assignments: Sequence[str], unsets: Sequence[str], *, force: bool
) -> Edit:
    """``set CONFIG PATH=VALUE … --unset PATH …``: the config read, each assignment parsed
    against it and checked (:func:`prepare_edit`), the edits made in memory.

    Raises:
        WizardError: nothing to set, a config that cannot be read, or an edit refused.
    """

    if not assignments and not unsets:
        raise WizardError("nothing to set: give PATH=VALUE pairs or --unset PATH")
    document = load_config(config)
    check_document(document)
    prior = changelog_of(document.source)  # the log this save appends to, if the config's
    if prior is not None:
        check_changelog(prior, changelog_path_for(document.source))
    changes = [parse_assignment(text, document) for text in assignments]
    changes += [parse_unset(text, document) for text in unsets]
    return Edit(document, prepare_edit(document, changes, force=force), prior)


def save_set(edit: Edit, *, output: Path | None, changelog: Path | None, force: bool) -> SaveResult:
    """Write the edited config as a new file, with an ``edit`` run of its change log.

    Raises:
        SaveRefused: the output or change log is refused; nothing is written.
    """

    return commit(
        edit.prepared,
        RunFacts("edit"),
        output=output,
        changelog_path=changelog,
        force=force,
        prior=edit.prior,
    )


def prepare_edit(document: JobDocument, changes: Sequence[Change], *, force: bool) -> Prepared:
    """``set``'s edits, checked as the app checks a typed value, then made in memory.

    Each value goes through the same rules as a value typed on a step's row
    (:func:`check_value`: ``presets/levers.yaml`` with the field's arch), and removing a
    whole section (a mapping or a list, such as ``config.process[0].train``) needs
    ``force``: it takes every field in it along.

    Raises:
        EditError: a value the app would refuse, or a section removed without ``force``.
    """

    for change in changes:
        where = format_path(change.path)
        before = document.get(change.path)
        if change.after is MISSING:
            refused_anyway = change.path in REQUIRED or isinstance(change.path[-1], int)
            if isinstance(before, (dict, list)) and not force and not refused_anyway:
                count = len(before)
                raise EditError(
                    f"{where} is a whole section ({count} "
                    f"{'entry' if count == 1 else 'entries'}); removing it removes everything "
                    "in it: pass --force to remove it anyway, or --unset the fields you mean",
                    file=document.source,
                )
            continue
        arch = arch_of(document, change.path)
        items = (
            [((*change.path, index), item) for index, item in enumerate(change.after)]
            if isinstance(change.after, list)
            else [(change.path, change.after)]
        )
        for path, value in items:
            check = validate_value(path, value, arch, before=document.get(path))
            if not check.ok:
                raise EditError(f"{where}: {check.reason}", file=document.source)
    return prepare(document, changes)
