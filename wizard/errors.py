"""The one error path: every bad input or refusal is a ``WizardError``.

A ``WizardError`` carries the file, line and column it is about (where there is
one), so the command line can print it as one line and exit with status 2, and the
app can show the same line in a notification. Anything else that escapes is a bug
(exit status 1).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final, Literal

#: The program's name, as every error line starts.
PROGRAM = "oom-wizard"

#: The front end a message is worded for: the command line (its flags) or the app (its
#: fields). A refusal names what to do in the words of the one that shows it.
Front = Literal["cli", "app"]

#: What to do about a refusal, by key, worded for each front end (the one source of these
#: words: a refusal carries the key, :meth:`WizardError.one_line` the words).
REMEDIES: Final[Mapping[str, Mapping[Front, str]]] = {
    "rename": {
        "cli": "pick another output name with -o",
        "app": "type another name in Save as",
    },
    "rename_or_force": {
        "cli": "pick another name with -o (or pass --force to replace it)",
        "app": "type another name in Save as",
    },
    "file_name": {
        "cli": "give a file name with -o",
        "app": "type a file name in Save as",
    },
    "changelog_name": {
        "cli": "give a file name with --changelog",
        "app": "type a file name in Change log",
    },
    "place": {
        "cli": "choose another place with -o",
        "app": "type a path in another folder in Save as",
    },
}


class WizardError(Exception):
    """Bad input, or a request the tool refuses: shown as one line, never a traceback.

    Args:
        message: What is wrong and, where it helps, what to do about it.
        file: The file the problem is in, if any.
        line: 1-based line number in ``file``.
        column: 1-based column number in ``file``.
        remedy: What to do about it, as a key of :data:`REMEDIES` (worded for the front
            end that shows the line).
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        column: int | None = None,
        remedy: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.column = column
        self.remedy = remedy

    def location(self) -> str:
        """``FILE:LINE:COL``, ``FILE:LINE``, ``FILE`` or an empty string."""
        if self.file is None:
            return ""
        parts = [self.file]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def one_line(self, front: Front = "cli") -> str:
        """The message as ``front`` shows it after ``oom-wizard: error: `` (the command line
        prints it so), its remedy in that front end's words."""
        where = self.location()
        text = self.reason(front)
        return f"{where}: {text}" if where else text

    def reason(self, front: Front = "cli") -> str:
        """The message and its remedy without the location (a row that shows the file)."""
        text = " ".join(self.message.split())
        if self.remedy is not None:
            text += f"; {REMEDIES[self.remedy][front]}"
        return text

    def __str__(self) -> str:
        return self.one_line()


class ConfigError(WizardError):
    """The job config cannot be read, parsed or validated."""


class EditError(WizardError):
    """An edit cannot be made safely (unknown path, wrong type, shared anchor...)."""


class SaveRefused(WizardError):
    """A save would overwrite something or write where it must not."""


class NameTaken(SaveRefused):
    """A target name exists (or appeared while saving): a default name takes the next one."""


class LogError(WizardError):
    """A training log cannot be read."""


class PresetError(WizardError):
    """A file in ``presets/`` does not match its schema (a bug in the shipped data)."""


class JobDatabaseError(WizardError):
    """AI Toolkit's jobs database cannot be read or written safely."""


# --- the one line for any failure (the command line prints it; the app shows it) ----------


#: Errors of the machine, not of the program: one line, like any bad input.
_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG})
_PATH_ERRNOS = frozenset(
    {errno.ENAMETOOLONG, errno.ELOOP, errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR}
)


def os_error_line(exc: OSError) -> str | None:
    """The one line for an ``OSError`` that no layer below turned into a refusal, or None.

    The save and database layers wrap their own writes, so a full device here is the
    output (standard output, a pipe, a terminal); a name error names its path.
    """
    if exc.filename is None and exc.errno in _OUTPUT_ERRNOS:
        return f"cannot write the output: {exc.strerror}"
    if exc.filename is not None and exc.errno in (_PATH_ERRNOS | _OUTPUT_ERRNOS):
        name = os.fsencode(exc.filename).decode("utf-8", "replace")
        return f"{name}: {exc.strerror}"
    return None


def error_line(exc: BaseException, front: Front = "cli") -> str:
    """The one line the command line prints for ``exc``; the app shows the same line with
    its remedy worded for it (``front``), without the command line's ``oom-wizard: error:``
    (its notice is titled, its line coloured, instead); an internal error reads the same.

    A ``WizardError`` is bad input; an ``OSError`` of the machine (a full device, a name
    too long) is too; anything else is an internal error, a bug.
    """
    error = f"{PROGRAM}: error: " if front == "cli" else ""
    if isinstance(exc, WizardError):
        return f"{error}{exc.one_line(front)}"
    if isinstance(exc, OSError):
        line = os_error_line(exc)
        if line is not None:
            return f"{error}{line}"
    return (  # a bug: the same line in both, to be reported as it is
        f"{PROGRAM}: internal error: {type(exc).__name__}: {exc} "
        "(run again with --debug for a traceback, and please report it)"
    )


def is_bad_input(exc: BaseException) -> bool:
    """Whether ``exc`` is bad input (exit status 2) rather than a bug (exit status 1)."""
    return isinstance(exc, WizardError) or (
        isinstance(exc, OSError) and os_error_line(exc) is not None
    )
