"""Find the line of an entry inside an inline TOML array, for ``file:line: field`` errors.

:meth:`diagnose.tomlsource.TomlSource.line_of` knows tables, keys and
``[[array-of-tables]]`` entries, but a rule's signals are *inline* tables inside
an array (``all = [ { regex = '...' }, { text = "..." } ]``) that may span many
lines.  :func:`line_of` walks such an array with a tiny TOML-aware scanner
(strings, comments, nesting) so an error in ``match.any[2].regex`` names the
line where that third entry writes ``regex``.
"""

from __future__ import annotations

import re

from diagnose.errors import RuleFileError
from diagnose.tomlsource import TomlSource

_ELEMENT = re.compile(r"^(?P<array>.+)\[(?P<index>\d+)\](?:\.(?P<key>[\w-]+))?$")


def _skip_string(text: str, i: int) -> int:
    """Return the index just past the TOML string starting at ``text[i]`` (a quote)."""
    quote = text[i]
    if text.startswith(quote * 3, i):
        end = text.find(quote * 3, i + 3)
        return len(text) if end < 0 else end + 3
    i += 1
    while i < len(text) and text[i] not in (quote, "\n"):
        i += 2 if quote == '"' and text[i] == "\\" else 1
    return i + 1


def element_offsets(text: str, start: int) -> list[tuple[int, int]]:
    """Return ``(start, end)`` offsets of the elements of the first array at/after ``start``."""
    i = text.find("[", start)
    if i < 0:
        return []
    depth, elements, begin = 0, [], -1
    while i < len(text):
        ch = text[i]
        if ch in "'\"":
            if depth == 1 and begin < 0:
                begin = i
            i = _skip_string(text, i)
            continue
        if ch == "#":
            nl = text.find("\n", i)
            i = len(text) if nl < 0 else nl
            continue
        if ch in "[{":
            if depth == 1 and begin < 0:
                begin = i
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                if begin >= 0:
                    elements.append((begin, i))
                return elements
        elif ch == "," and depth == 1:
            if begin >= 0:
                elements.append((begin, i))
            begin = -1
        elif depth == 1 and begin < 0 and not ch.isspace():
            begin = i
        i += 1
    return elements


def _line_at(text: str, offset: int) -> int:
    """Return the 1-based line number of ``offset`` in ``text``."""
    return text.count("\n", 0, offset) + 1


def line_of(src: TomlSource, field: str) -> int | None:
    """Return the line of ``field``, also for ``array[i]`` / ``array[i].key`` of inline arrays."""
    m = _ELEMENT.match(field)
    if m is None or re.search(rf"^\s*\[\[\s*{re.escape(m.group('array'))}\s*\]\]", src.text, re.M):
        return src.line_of(field)  # a key, a table, or an ``[[array-of-tables]]`` entry
    array_line = src.line_of(m.group("array"))
    if array_line is None:
        return None
    lines = src.text.splitlines(keepends=True)
    start = sum(len(line) for line in lines[: array_line - 1])
    eq = src.text.find("=", start)
    elements = element_offsets(src.text, eq if eq >= 0 else start)
    index = int(m.group("index"))
    if index >= len(elements):
        return array_line
    begin, end = elements[index]
    key = m.group("key")
    if key:
        hit = re.compile(rf"(?:^|[{{,\s]){re.escape(key)}\s*=").search(src.text, begin, end)
        if hit:
            return _line_at(src.text, hit.start() + (hit.group(0)[0] in "{, \t\n"))
    return _line_at(src.text, begin)


def error(src: TomlSource, field: str | None, message: str) -> RuleFileError:
    """Build a :class:`RuleFileError` located at ``field`` (inline array entries included)."""
    line = line_of(src, field) if field else None
    return RuleFileError(src.path, line, field, message)
