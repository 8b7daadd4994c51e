"""Terminal damage undone in one line: ANSI colour (also with its ESC lost), backspaces,
``\\r`` progress-bar overwrites."""

from __future__ import annotations

import re

from diagnose.lazyre import lazy

# ECMA-48 escapes: CSI (7- and 8-bit), OSC terminated by BEL or ST, charset designations,
# other two-byte escapes (Fp, Fe, Fs), then any ESC left over.  Every branch is linear: the OSC body
# cannot contain the terminators it looks for.
ANSI = lazy(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
    r"|\x1b[()*+][0-9A-Za-z]"
    r"|\x1b[0-~]?"
)

# SGR/erase-line sequences whose ESC was lost when the log was copied from a web page
# (`` [36m(RayWorkerVllm pid=5085) [0m``, ``[32mINFO[0m``; vllm-project/vllm#2734).
# Never before ``]`` so ``[10m]`` survives.  The bare ``[m``/``[K`` forms are removed
# only at the end of a line or in a line that had a numbered one: ``[m for m in xs]``
# and ``[multiproc_executor.py:470]`` are content.  The optional space before is
# matched so drop_sgr can decide whether it goes too.
BARE_SGR = lazy(r" ?\[\d{1,3}(?:;\d{1,3}){0,15}[mK](?!\])")
BARE_SGR_SEEN = lazy(r"\[\d{1,3}(?:;\d{1,3}){0,15}[mK](?!\])")  # literal-led: fast scan
BARE_SGR_EMPTY = lazy(r" ?\[[mK](?![\w\]]| \w)")
BARE_SGR_END = lazy(r" ?\[[mK]$")


def drop_sgr(match: re.Match[str]) -> str:
    """Remove a bare SGR remnant, and the space before it when that space only separated it.

    `` [36m(Ray pid=1) [0m boom`` -> ``(Ray pid=1) boom`` but ``INFO[0m [1mready`` ->
    ``INFO ready``: the space goes only at the line's ends or before another space.
    """
    if match.group(0)[0] != " ":
        return ""
    text, end = match.string, match.end()
    if match.start() == 0 or end == len(text) or text[end] == " ":
        return ""
    return " "


# ``cat -v`` caret notation of the same escapes (``^[[0m``).
CARET_SGR = lazy(r"\^\[\[[0-9;]{0,48}[A-Za-z]")

CHAR_TABLE: dict[int, str | None] = {
    **{c: None for c in range(0x20) if c not in (0x08, 0x09, 0x0D)},  # keep BS, TAB, CR
    0x7F: None,
    **dict.fromkeys(range(0x80, 0xA0)),  # C1 controls (0x9b CSI is handled before)
    0x00A0: " ",  # no-break space (chat clients turn indentation into these)
    0x2007: " ",
    0x202F: " ",
    0x3000: " ",
    0x2028: " ",
    0x2029: " ",
    0x200B: None,  # zero-width space / joiners / word joiner / BOM
    0x200C: None,
    0x200D: None,
    0x2060: None,
    0xFEFF: None,
    0x00AD: None,  # soft hyphen
    0x201C: '"',  # smart quotes from chat clients: File “x.py” -> File "x.py"
    0x201D: '"',
    0x201E: '"',
    0x00AB: '"',
    0x00BB: '"',
    0x2018: "'",
    0x2019: "'",
    0x201A: "'",
    0x2032: "'",
}


def undo_backspaces(text: str) -> str:
    """Apply ``\\b`` as a terminal does when overstriking: each one erases the char before.

    Walks the pieces between backspaces right to left, carrying how many characters are
    still to erase, so a huge line costs one pass instead of a per-character loop.
    """
    pieces = text.split("\b")
    kept: list[str] = []
    erase = 0
    for piece in reversed(pieces[1:]):
        if erase < len(piece):
            kept.append(piece[: len(piece) - erase] if erase else piece)
            erase = 0
        else:
            erase -= len(piece)
        erase += 1
    head = pieces[0]
    if erase < len(head):
        kept.append(head[: len(head) - erase])
    return "".join(reversed(kept))


def last_segment(text: str) -> str:
    """Keep what a terminal shows after ``\\r`` overwrites: the last non-blank segment."""
    for segment in reversed(text.split("\r")):
        if segment.strip():
            return segment
    return ""
