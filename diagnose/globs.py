"""Shell-style globs (``*`` and ``?``) that match in linear time, for frame and context signals.

A glob with only ``*`` wildcards (nearly all of them: ``cutlass::*``, ``*moe*``,
``sm_12*``) is matched with plain string searches, left to right, which is exact
for ``*``-only patterns and far cheaper than a regex call per frame.  Anything
with ``?`` is compiled to an anchored RE2 pattern, which cannot backtrack.
"""

from __future__ import annotations

import re

from diagnose.lazyre import LazyRE2
from diagnose.records import record
from diagnose.snapshot import storable


def glob_to_regex(glob: str, *, ignore_case: bool = False) -> str:
    """Translate a ``*``/``?`` glob into an anchored RE2 pattern (other characters are literal)."""
    parts = [".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in glob]
    return ("(?i)" if ignore_case else "") + "(?s)^" + "".join(parts) + "$"


@record
class Glob:
    """A compiled glob; ``matches`` tests a whole value."""

    text: str
    ignore_case: bool = False
    regex: LazyRE2 | None = None  # RE2 pattern when the glob has '?'

    @classmethod
    def compile(cls, text: str, *, ignore_case: bool = False) -> Glob:
        """Compile ``text`` (``*``-only globs need no regex at all)."""
        if "?" not in text:
            return cls(text.casefold() if ignore_case else text, ignore_case)
        import re2

        options = re2.Options()
        options.log_errors = False
        compiled = re2.compile(glob_to_regex(text, ignore_case=ignore_case), options=options)
        return cls(text, ignore_case, LazyRE2.wrap(compiled))

    def matches(self, value: str) -> bool:
        """True when the whole of ``value`` matches the glob."""
        if self.regex is not None:
            return self.regex.search(value) is not None
        if self.ignore_case:
            value = value.casefold()
        parts = self.text.split("*")
        if len(parts) == 1:
            return value == parts[0]
        first, last = parts[0], parts[-1]
        if not value.startswith(first) or len(value) < len(first) + len(last):
            return False
        pos, end = len(first), len(value) - len(last)
        for middle in parts[1:-1]:
            found = value.find(middle, pos, end)
            if found < 0:
                return False
            pos = found + len(middle)
        return value.endswith(last)


storable(Glob)
