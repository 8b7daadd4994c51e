"""Named, documented exit codes of the ``diagnose`` command (see README "Exit codes")."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What the process exit status means; click/typer already use 2 for usage errors."""

    KNOWN_CAUSE = 0
    """A known root cause was named (with ``--follow --until ready``: the server became ready)."""

    NO_KNOWN_CAUSE = 1
    """No rule named a cause (verdict ``unknown``); with ``--follow``: a fatal crash came first."""

    USAGE_OR_INPUT_ERROR = 2
    """Bad arguments, unreadable input, or an invalid rule/knowledge-base file."""
