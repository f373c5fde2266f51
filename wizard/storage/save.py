"""Saving: always a new file, never the source, atomically, with its change log as a pair.

A save writes two files, the config and its change log, and the user sees both or
neither. The commit (:func:`save`) goes:

1. every refusal is checked before anything is written: the source itself (also
   through a symlink or another path to the same file), an existing output without
   ``force``, a folder that does not exist or cannot be written, a name that is too
   long or not UTF-8;
2. both files are written to temp files in their destination folders and fsynced;
3. a journal naming the files and both hashes is written and fsynced in every folder the
   commit touches, each copy naming them relative to its own folder (so that it means the
   same whoever reads it, from whatever working folder); with ``force``, each file about to
   be replaced gets a hard-linked backup first;
4. the change log is renamed into place, then the config; the folders are fsynced;
5. the backups and the journals are removed.

A failure at any step puts back what was there (the backups restore a replaced
file), so an error leaves the folder as it was. Catchable signals (SIGINT, SIGTERM)
are held off during steps 3 to 5, so they land before the renames (nothing is
written) or after them (both are). For SIGKILL, :func:`recover` — run by every save,
at start-up in the working folder and by every use case before it opens a job — finishes
or undoes what a dead process left: a journal whose commit point was passed (a final name
holds the bytes it was to receive, or, for a database pair, the row holds the saved
config) rolls forward; one that was not rolls back. A journal whose files cannot be found
where it says is left as it is, with its temps, and a note says so: recovery never removes
the only copy of anything. Only the tool's own names are touched
(``.NAME.oomw-PID-TOKEN.tmp`` and friends), and only when process PID is gone.

A database pair (:mod:`oom_wizard.storage.jobdb`) is the same commit with its commit point
moved: the change log's temp and the journal are written, then the row's transaction
commits (``commit``), then the change log is renamed in.

Every write step calls :data:`STEP_HOOK` when a test has set it: the seam the
fault tests use to fail or kill a save at each step deterministically.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Final

from oom_wizard.errors import NameTaken, SaveRefused
from oom_wizard.formats.document import (
    JSON_SUFFIXES,
    YAML_SUFFIXES,
    JobDocument,
    strip_json_comments,
)
from oom_wizard.storage.atomic import commit_pair, mode_of, recover, same_file, signals_held
from oom_wizard.storage.changelog import (
    ChangeLog,
    FileRef,
    RunFacts,
    changelog_path_for,
    record_path,
    sha256_of,
)
from oom_wizard.storage.changes import Prepared

OUTPUT_TAG: Final = "oomfix"
HEADER: Final = (
    "Edited by oom-wizard: what changed and why is in the .changelog.json file of the same name."
)
_TAGGED_STEM = re.compile(rf"^(?P<base>.+)\.{OUTPUT_TAG}(?:-(?P<n>\d+))?$")


@dataclass(frozen=True)
class SaveResult:
    """Where a save wrote, and the change log as written (so that nothing reads it back).

    Attributes:
        config: The new config.
        changelog: Its change log's path.
        log: The change log written there (None: not known to whoever made this result).
    """

    config: Path
    changelog: Path
    log: ChangeLog | None = field(default=None, compare=False, repr=False)


def default_output_path(source: Path) -> Path:
    """The first free name: ``my_job.yaml`` → ``my_job.oomfix.yaml``, then ``-2``, ``-3``...

    A source that is itself an output (``my_job.oomfix.yaml``) continues the series
    (``my_job.oomfix-2.yaml``) instead of stacking tags.
    """

    stem, suffix = source.stem, source.suffix
    match = _TAGGED_STEM.match(stem)
    base = match.group("base") if match else stem
    number = int(match.group("n") or 1) + 1 if match else 1
    while True:
        tag = OUTPUT_TAG if number == 1 else f"{OUTPUT_TAG}-{number}"
        candidate = source.with_name(f"{base}.{tag}{suffix}")
        if not candidate.exists() and not changelog_path_for(candidate).exists():
            return candidate
        number += 1


def check_output(output: Path, *, source: Path | None, force: bool = False) -> None:
    """Refuse an output that is the source, exists (without ``force``) or cannot be written.

    Raises:
        SaveRefused: one line that says what to do instead.
    """
    check_name(output)
    _check_suffix(output, source)
    try:
        _check_output(output, source=source, force=force)
    except OSError as exc:
        raise SaveRefused(f"cannot use this name: {exc.strerror or exc}", file=output) from None


def _check_suffix(output: Path, source: Path | None) -> None:
    """Refuse a config name AI Toolkit would not read: it picks its reader by the exact,
    lower-case suffix (``.yaml``, ``.yml``, ``.json``, ``.jsonc``) and refuses the rest."""

    known = (*YAML_SUFFIXES, *JSON_SUFFIXES)
    if output.suffix in known:
        return
    keep = source.suffix if source is not None and source.suffix in known else ".yaml"
    named = f"'{output.suffix}'" if output.suffix else "a name without one"
    raise SaveRefused(
        f"AI Toolkit reads only job files ending in lower-case {', '.join(known)} and "
        f"refuses {named}; name the output {output.stem}{keep}",
        file=output,
    )


def check_name(path: Path, *, what: str = "file") -> None:
    """Refuse a name the change log cannot record (not UTF-8) or the folder cannot hold.

    Raises:
        SaveRefused: the name is not valid UTF-8, or longer than the file system allows.
    """
    shown = os.fsencode(path).decode("utf-8", "replace")
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        raise SaveRefused(
            f"this {what} name is not valid UTF-8, so the change log cannot record it; "
            "pick a name in UTF-8",
            file=shown,
        ) from None
    limit = _name_max(path.parent)
    if len(os.fsencode(path.name)) > limit:
        raise SaveRefused(
            f"this {what} name is longer than the {limit} bytes the file system allows; "
            "pick a shorter name",
            file=shown,
        )


def _name_max(folder: Path) -> int:
    try:
        return int(os.pathconf(folder if folder.is_dir() else ".", "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def _check_output(output: Path, *, source: Path | None, force: bool) -> None:
    if source is not None and same_file(output, source):
        raise SaveRefused(
            "this is the source config itself; oom-wizard never writes the source",
            file=output,
            remedy="rename",
        )
    if output.is_dir():
        raise SaveRefused("this is a folder", file=output, remedy="file_name")
    if (output.exists() or output.is_symlink()) and not force:
        raise NameTaken(
            "already exists and will not be overwritten",
            file=output,
            remedy="rename_or_force",
        )
    if output.exists() and not output.is_file():
        raise SaveRefused("this is not a regular file; it will not be replaced", file=output)
    folder = output.parent
    if folder.exists() and not folder.is_dir():
        raise SaveRefused(f"{folder} is a file, not a folder; choose another place", file=output)
    if not folder.is_dir():
        raise SaveRefused(f"the folder {folder} does not exist; create it first", file=output)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise SaveRefused(f"the folder {folder} is not writable", file=output, remedy="place")


def save(
    document: JobDocument,
    changelog: ChangeLog,
    *,
    output: Path,
    changelog_path: Path | None = None,
    source: Path | None = None,
    force: bool = False,
) -> SaveResult:
    """Write ``document`` to ``output`` and ``changelog`` beside it, as one pair.

    Args:
        document: The edited document (its ``source`` is the file it came from).
        changelog: The change log to write (its output hash is filled in here).
        output: Where the config goes; never the source, never over a file unless ``force``.
        changelog_path: Where the change log goes (default: beside the output).
        source: The source file to protect, and whose permission bits to copy.
        force: Replace an existing output and change log (each is backed up until the
            pair is in place, and put back on any failure).

    Raises:
        SaveRefused: a target is refused, or a write failed; either way the folders are
            as they were (the message says so, or says exactly what is not).
    """

    source = source if source is not None else document.source
    log_path = changelog_path or changelog_path_for(output)
    if source is not None:
        check_name(source, what="source")
    check_output(output, source=source, force=force)
    check_output(log_path, source=source, force=force)
    if same_file(log_path, output) or log_path == output:
        raise SaveRefused("the change log cannot be the config itself", file=log_path)
    _check_format(document, output)
    for folder in {output.parent, log_path.parent}:
        recover(folder)
    final = document.with_header_comment(HEADER)
    data = final.to_bytes()
    recorded = FileRef(path=record_path(output, log_path), sha256=sha256_of(data))
    update: dict[str, FileRef] = {"output": recorded}
    if len(changelog.runs) <= 1 and not Path(changelog.source.path).is_absolute():
        # A log that starts here: a source named relative to the current folder is
        # recorded relative to the change log's folder instead.
        source_path = record_path(Path(changelog.source.path), log_path)
        update["source"] = changelog.source.model_copy(update={"path": source_path})
    log = changelog.model_copy(update=update)
    # pydantic wraps an exception raised inside its serializer (a Ctrl-C or SIGTERM landing
    # there) in its own error; held here, the signal lands just after, as itself.
    with signals_held():
        log_data = log.to_json().encode("utf-8")
    mode = mode_of(source)
    commit_pair(
        [(log_path, log_data), (output, data)], mode=mode, replace=force, what=_what(log_path)
    )
    return SaveResult(config=output, changelog=log_path, log=log)


def _check_format(document: JobDocument, output: Path) -> None:
    """Refuse an output whose name says another format than the text it would hold."""
    suffix = output.suffix.lower()
    named = (
        "json" if suffix in (".json", ".jsonc") else "yaml" if suffix in (".yaml", ".yml") else None
    )
    if (
        suffix == ".json"
        and document.fmt == "json"
        and "/" in document.text
        and strip_json_comments(document.text) != document.text
    ):
        raise SaveRefused(
            "the config has // or /* */ comments, which AI Toolkit's json.loads refuses "
            "in a .json file (and so does oom-wizard); name the output .jsonc",
            file=output,
        )
    if named is not None and named != document.fmt:
        kind = "YAML" if document.fmt == "yaml" else "JSON"
        keep = ".yaml" if document.fmt == "yaml" else ".json"
        raise SaveRefused(
            f"the config is {kind} and is saved as {kind} (only the changed lines differ), so "
            f"a {suffix} name would not be readable by AI Toolkit; name the output {keep}",
            file=output,
        )


def _what(log_path: Path) -> Callable[[Path], str]:
    return lambda path: "the change log" if path == log_path else "the config"


def commit(
    prepared: Prepared,
    run: RunFacts,
    *,
    output: Path | None = None,
    changelog_path: Path | None = None,
    force: bool = False,
    prior: ChangeLog | None,
) -> SaveResult:
    """Save the prepared document and its change log (the prior log plus this run).

    The prior log is ``prior`` as the open read it (None: a new log starts here); the save
    reads nothing of the job again.

    Raises:
        SaveRefused: the output or change log path is refused; nothing is written.
    """
    source = prepared.before.source

    write = partial(
        _commit,
        prepared,
        run,
        changelog_path=changelog_path,
        force=force,
        prior=prior,
    )
    if output is not None or changelog_path is not None:
        return write(output=output or default_output_path(source))
    # The default name: another save may take the same free name at the same moment; the
    # one that loses the race takes the next free name instead.
    for attempt in range(NAME_RACE_TRIES):
        try:
            return write(output=default_output_path(source))
        except NameTaken:
            if attempt == NAME_RACE_TRIES - 1:
                raise
    raise AssertionError("unreachable")


#: How often a save under the default name tries the next free name when another save took it.
NAME_RACE_TRIES: Final = 20


def _commit(
    prepared: Prepared,
    run: RunFacts,
    *,
    output: Path,
    changelog_path: Path | None = None,
    force: bool,
    prior: ChangeLog | None,
) -> SaveResult:

    source = prepared.before.source
    base = prior
    if base is None:
        base = ChangeLog(
            source=FileRef(path=str(source), sha256=sha256_of(prepared.before.to_bytes())),
            output=FileRef(path=str(output)),
        )
    log = base.with_run(run.record(), prepared.entries, output=FileRef(path=str(output)))
    return save(
        prepared.after,
        log,
        output=output,
        changelog_path=changelog_path,
        source=source,
        force=force,
    )
