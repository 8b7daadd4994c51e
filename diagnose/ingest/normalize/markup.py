"""Markdown and chat structure undone: quote marks, fences, ``<details>`` HTML, entities, bold."""

from __future__ import annotations

import re

from diagnose.lazyre import lazy
from diagnose.records import record

QUOTE_STARTS = (">", " >", "  >", "   >")
#: One Markdown/chat quote marker, as the reader strips it (the big-file cutter judges the text
#: under the same markers: diagnose.ingest.scan.continues_block).
QUOTE_MARK = r" {0,3}>(?: |(?=\S)|$)"
_QUOTE = lazy(QUOTE_MARK)
_FENCE = lazy(r" {0,4}(`{3,}|~{3,})(.*)")
_LANG_TAG = lazy(r"[\w+#.-]{0,32}(?: *\{[^{}]{0,80}\})?")
_HTML_TAG = lazy(r"</?(?:details|summary|pre|code|kbd|samp|br)\b[^<>]{0,200}>", re.I)
_ENTITY = lazy(r"&(#x?[0-9a-fA-F]{2,4}|[a-z]{2,4});")
# Only entities that decode to punctuation: a decoder that could produce letters or
# digits would let an escape invent text the user never saw.
_ENTITIES = {
    "lt": "<",
    "gt": ">",
    "amp": "&",
    "quot": '"',
    "apos": "'",
    "nbsp": " ",
    "#39": "'",
    "#x27": "'",
    "#34": '"',
    "#x22": '"',
    "#60": "<",
    "#x3c": "<",
    "#x3C": "<",
    "#62": ">",
    "#x3e": ">",
    "#x3E": ">",
    "#38": "&",
    "#x26": "&",
    "#160": " ",
    "#xa0": " ",
    "#xA0": " ",
}


def _decode_entity(match: re.Match[str]) -> str:
    return _ENTITIES.get(match.group(1), match.group(0))


@record(frozen=False)
class Fence:
    """Markdown fence state carried from line to line."""

    open: bool = False
    marker: str = ""
    quote_depth: int = 0


def strip_quotes(text: str, limit: int) -> tuple[str, int]:
    """Remove up to ``limit`` leading ``>`` quote markers; return the rest and how many."""
    depth = 0
    while depth < limit and text.startswith(QUOTE_STARTS):
        match = _QUOTE.match(text)
        if match is None:
            break
        text = text[match.end() :]
        depth += 1
    return text, depth


def strip_fence(text: str, fence: Fence, depth: int) -> tuple[str, bool]:
    """Handle a code-fence marker on this line; return the content left and whether it was one.

    ```` ```lang ```` alone opens/closes a block and leaves nothing.  A fence glued to
    content (```` ```Traceback ... ````, ```` RuntimeError: x``` ````) keeps the content:
    people do paste that way and the marker must not hide the first or last line.
    """
    match = _FENCE.match(text) if text.lstrip(" ")[:3] in ("```", "~~~") else None
    if match is not None:
        marker, rest = match.group(1), match.group(2)
        if _LANG_TAG.fullmatch(rest.strip()):
            _toggle(fence, marker, depth)
            return "", True
        if marker[0] == "`" and rest.rstrip().endswith("```"):
            return rest.rstrip()[:-3].rstrip("`"), True  # ```one line``` (no state change)
        _toggle(fence, marker, depth)
        return rest, True
    stripped = text.rstrip()
    if stripped.endswith("```"):
        _toggle(fence, "```", depth)
        return stripped[:-3], True
    return text, False


def _toggle(fence: Fence, marker: str, depth: int) -> None:
    if fence.open:
        fence.open = False
        fence.quote_depth = 0
    else:
        fence.open, fence.marker, fence.quote_depth = True, marker, depth


def strip_markup(text: str) -> str:
    """Remove ``<details>``-style tags, decode punctuation entities, unwrap `` `line` ``."""
    if "<" in text:
        text = _HTML_TAG.sub("", text)
    if "&" in text and ";" in text:
        text = _ENTITY.sub(_decode_entity, text)
    if "`" in text:
        body = text.strip()
        # Slack/Discord inline code around a whole line: `RuntimeError: x`.
        if len(body) > 2 and body[0] == body[-1] == "`" and "`" not in body[1:-1]:
            lead = text[: len(text) - len(text.lstrip())]
            text = lead + body[1:-1]
        # Inline code stretched over several lines: a single backtick opens the first line
        # and another closes the last (sgl-project/sglang#3932, NVIDIA/nccl#1814).  Left in
        # place it hides the line's prefix ("`[rank4]:[E304 ...", "`host:1:2 [4] ...").
        # Only the backtick goes: the blanks around it still tell a hard wrap's cut.
        elif body.count("`") == 1 and (body[0] == "`" or body[-1] == "`"):
            cut = text.index("`")
            text = text[:cut] + text[cut + 1 :]
    if "**" in text:
        text = _strip_bold(text)
    return text


def _strip_bold(text: str) -> str:
    """Drop Markdown bold that a poster wrapped around pasted log lines.

    It opens the first line and closes the last, sometimes inside the first bracket
    (``[**TensorRT-LLM][ERROR] ...`` / ``... continuing.**``, NVIDIA/TensorRT#4080), and
    left in place it hides the line's prefix.  Only a ``**`` at either end goes: code such
    as ``f(*args, **kwargs)`` keeps its own.
    """
    body = text.strip()
    if body.startswith("**"):
        cut = text.index("**")
        text = text[:cut] + text[cut + 2 :]
    elif body.startswith("[**"):
        cut = text.index("[**") + 1
        text = text[:cut] + text[cut + 2 :]
    if text.rstrip().endswith("**") and not text.rstrip().endswith("***"):
        end = text.rstrip()
        text = end[:-2] + text[len(end) :]
    return text
