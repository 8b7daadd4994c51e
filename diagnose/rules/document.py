"""What the rule engine matches against: normalised lines, crash regions and log-wide context.

:meth:`Document.from_text` runs normalize -> find_regions -> frame roles ->
extract_context, as the CLI's parse stage (:mod:`diagnose.pipeline`) does; rule
examples use it.  Tests and callers that already hold parsed pieces build a
:class:`Document` directly.
``context`` is read by duck typing (``server_args``, ``gpus``, ``archs``,
``versions``, ``ready``; each value may be a plain value or a ``Fact`` with
``value`` and ``line``) so the engine does not depend on one context class.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from diagnose.model import LogLine, Region
from diagnose.records import record


@record
class Document:
    """A parsed log: every line, the crash regions found in it and its log-wide context."""

    lines: tuple[LogLine, ...]
    regions: tuple[Region, ...] = ()
    context: Any = None

    @classmethod
    def from_text(cls, text: str, wording: Any = None) -> Document:
        """Parse ``text``: normalize, regions with frame roles, context (as the CLI does).

        ``wording`` is the rule base's error wording (``diagnose.rules.wording``), as the
        CLI passes it to ``find_regions``.
        """
        from diagnose.context import extract_context
        from diagnose.ingest.normalize import normalize
        from diagnose.regions import find_regions

        lines = tuple(normalize(text))
        from diagnose.roles import assign as assign_roles

        return cls(lines, assign_roles(find_regions(lines, wording)), extract_context(lines))

    @classmethod
    def from_lines(
        cls, texts: list[str], regions: tuple[Region, ...] = (), context: Any = None
    ) -> Document:
        """Build a document from raw line texts numbered from 1 (tests, synthetic input)."""
        lines = tuple(LogLine(i, t) for i, t in enumerate(texts, start=1))
        return cls(lines, regions, context)

    def texts(self) -> Iterator[str]:
        """Yield every text a signal may read: the lines, then region messages."""
        for line in self.lines:
            yield line.text
        for region in self.regions:
            yield region.message
