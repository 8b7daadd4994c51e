"""Named, documented exit codes of the ``diagnose`` command (see README "Exit codes").

A deploy script can gate on them: ``diagnose server.log && deploy`` deploys only when nothing
in the log ended the process.  The same meanings hold for one log, for several logs (the
code of the worst one, see :func:`worst`), for ``--follow`` and for ``--until ready``.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum


class ExitCode(IntEnum):
    """What the process exit status means; click/typer already use 2 for usage errors."""

    NO_FATAL_FAILURE = 0
    """Nothing ended the process: a healthy log, only warnings, or every error was survived
    (with ``--until ready``: the server became ready)."""

    FATAL_KNOWN_CAUSE = 1
    """A fatal failure whose root cause the knowledge base names."""

    USAGE_OR_INPUT_ERROR = 2
    """Bad arguments, unreadable input, or an invalid rule/knowledge-base file."""

    FATAL_UNKNOWN_CAUSE = 3
    """A fatal failure no rule explains (verdict ``unknown``), or with ``--until ready`` a
    server that never said it was ready."""


#: Which code a run of several logs reports: an input error first, then any fatal failure.
_SEVERITY = (
    ExitCode.USAGE_OR_INPUT_ERROR,
    ExitCode.FATAL_KNOWN_CAUSE,
    ExitCode.FATAL_UNKNOWN_CAUSE,
    ExitCode.NO_FATAL_FAILURE,
)


def for_verdict(fatal: bool | None, known: bool) -> ExitCode:
    """The code of one verdict: ``fatal`` as the diagnosis says, ``known`` a named cause."""
    if not fatal:
        return ExitCode.NO_FATAL_FAILURE
    return ExitCode.FATAL_KNOWN_CAUSE if known else ExitCode.FATAL_UNKNOWN_CAUSE


def worst(codes: Iterable[ExitCode]) -> ExitCode:
    """The code that speaks for several logs (the first of ``_SEVERITY`` present)."""
    present = set(codes)
    return next((c for c in _SEVERITY if c in present), ExitCode.NO_FATAL_FAILURE)
