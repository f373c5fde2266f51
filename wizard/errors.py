"""The one error path: every bad input or refusal is a ``WizardError``.

A ``WizardError`` carries the file, line and column it is about (where there is
one), so the command line can print it as one line and exit with status 2, and the
app can show the same line in a notification. Anything else that escapes is a bug
(exit status 1).
"""

from __future__ import annotations

from pathlib import Path


class WizardError(Exception):
    """Bad input, or a request the tool refuses: shown as one line, never a traceback.

    Args:
        message: What is wrong and, where it helps, what to do about it.
        file: The file the problem is in, if any.
        line: 1-based line number in ``file``.
        column: 1-based column number in ``file``.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.column = column

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

    def one_line(self) -> str:
        """The message as the CLI prints it after ``oom-wizard: error: ``."""
        where = self.location()
        text = " ".join(self.message.split())
        return f"{where}: {text}" if where else text

    def __str__(self) -> str:
        return self.one_line()


class ConfigError(WizardError):
    """The job config cannot be read, parsed or validated."""


class EditError(WizardError):
    """An edit cannot be made safely (unknown path, wrong type, shared anchor...)."""


class SaveRefused(WizardError):
    """A save would overwrite something or write where it must not."""


class LogError(WizardError):
    """A training log cannot be read."""


class PresetError(WizardError):
    """A file in ``presets/`` does not match its schema (a bug in the shipped data)."""


class JobDatabaseError(WizardError):
    """AI Toolkit's jobs database cannot be read or written safely."""
