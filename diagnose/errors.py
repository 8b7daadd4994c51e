"""The library's exception hierarchy: one base class the CLI funnels into exit code 2."""

from __future__ import annotations


class DiagnoseError(Exception):
    """Base class of every error the library raises on purpose."""


class InputError(DiagnoseError):
    """The input cannot be read at all (missing path, directory, no permission)."""


class RuleFileError(DiagnoseError):
    """A rule or knowledge-base file is invalid; the message names file, line and field."""

    def __init__(self, path: str, line: int | None, field: str | None, message: str) -> None:
        self.path = path
        self.line = line
        self.field = field
        self.message = message
        where = path if line is None else f"{path}:{line}"
        what = f"field '{field}': " if field else ""
        super().__init__(f"{where}: {what}{message}")
