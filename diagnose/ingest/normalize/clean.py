"""One physical line cleaned of every layer, and the shipper records and host labels around it."""

from __future__ import annotations

from collections.abc import Iterable

from diagnose.ingest.normalize.damage import (
    ANSI,
    BARE_SGR,
    BARE_SGR_EMPTY,
    BARE_SGR_END,
    BARE_SGR_SEEN,
    CARET_SGR,
    CHAR_TABLE,
    drop_sgr,
    last_segment,
    undo_backspaces,
)
from diagnose.ingest.normalize.markup import (
    QUOTE_STARTS,
    Fence,
    strip_fence,
    strip_markup,
    strip_quotes,
)
from diagnose.ingest.normalize.prefixes import (
    MAX_PREFIXES,
    RAY_REPEATED,
    Ident,
    note_logfmt_level,
    strip_prefixes,
)
from diagnose.lazyre import lazy
from diagnose.records import record

#: Terminal/emulator widths at which a hard-wrapped frame is recognised as cut.
WRAP_WIDTHS = frozenset({80, 100, 120, 132, 140, 150, 160, 180, 200, 240, 250, 256})

# Clean.wrap: the line is exactly as wide as a terminal, known (WRAP_WIDTHS) or inferred.
_KNOWN = 1
INFERRED = 2

# --- per-line cleaning ----------------------------------------------------------------------


@record(frozen=False)
class Clean:
    """One physical line after cleaning, before joining/splitting."""

    number: int
    text: str
    rank: str | None
    prefixed: bool  # a log/process prefix was stripped: it starts a new log record
    width: int  # length as the terminal showed it (for hard-wrap detection)
    joined: int = 1
    pad: int = 0  # trailing blanks trimmed: one is a cut between two words, more are padding
    wrap: int = 0  # width is a terminal's: _KNOWN (in WRAP_WIDTHS) or INFERRED from the text
    # Set when the line ends mid-token and the next reads as its rest (evidence for a width):
    # its width and digit-masked text, the key the width window counts it under.
    cut_pair: str = ""
    level: str | None = None  # the log level a stripped prefix named


# --- shipper records and host labels --------------------------------------------------------

#: Keys that hold the line in a JSON log record: docker's json-file and fluent-bit ("log"),
#: structured loggers ("message", "msg"), Google Cloud Logging exports ("textPayload").
#: The big-file scanner reads the same keys (diagnose.ingest.scan.continues_block).
JSON_TEXT_KEYS = ("log", "message", "msg", "textPayload")


def _unwrap_json(text: str) -> str:
    """The log line inside a JSON record (``{"log": "...\\n", "stream": ...}``), else ``text``.

    A record holding a whole multi-line message gets its newlines as blanks: that is a
    one-line paste, which :func:`split_pasted` splits at its frame markers.
    """
    import json

    try:
        record = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's recursion
        return text
    if isinstance(record, dict):
        for key in JSON_TEXT_KEYS:
            value = record.get(key)
            if isinstance(value, str):
                return value.rstrip("\r\n").replace("\r\n", " ").replace("\n", " ")
    return text


# pdsh, DeepSpeed's multi-node launcher and `srun --label` put "host: " (or "3: ") before
# every line a process prints.  A word and a colon also start ordinary messages, so a label
# is learned, not assumed: it must hold a digit and be followed once by a traceback header
# or a frame; from then on it is stripped from every line that carries it.
#: A host label's word (shared with the big-file scanner's window continuation).
HOST_LABEL = r"[a-z0-9][a-z0-9.-]{0,62}"
_HOST_LABEL = lazy(rf"({HOST_LABEL}): ")
_LABEL_EVIDENCE = (
    "Traceback (most recent call last)",
    'File "',
    "frame #",
    "terminate called",
    "[rank",
)
_MAX_LABELS = 1024  # a pdsh fan-out of this many hosts is already rare


# Docker BuildKit's log without its "#12 " step: "272.6       Traceback (most recent ...".
# The seconds change every line, so the shape is learned (like a host label) from a
# traceback it prefixes (held-out rounds 11 and 12), then stripped wherever it appears.
_BUILD_SECONDS = lazy(r"\d{1,6}\.\d ")
_BUILD_MARK = "\x00build-seconds"


def _strip_build_seconds(text: str, labels: set[str]) -> str:
    """``text`` without BuildKit's elapsed seconds once that prefix has been learned."""
    match = _BUILD_SECONDS.match(text)
    if match is None:
        return text
    rest = text[match.end() :]
    if _BUILD_MARK not in labels:
        if not rest.lstrip(" ").startswith(_LABEL_EVIDENCE):
            return text
        labels.add(_BUILD_MARK)
    return rest


def relabel(held: Iterable[Clean], labels: set[str]) -> None:
    """Strip host labels learned just now from lines cleaned before they were learned.

    pdsh/DeepSpeed print the label on every line, but it is only learned at the first
    traceback header or frame it prefixes; the error lines just above that (a
    DistBackendError and its message) kept it (held-out round 15).
    """
    for line in held:
        text = line.text
        if line.rank is not None or ": " not in text[:66]:
            continue
        host = text.split(": ", 1)[0]
        if host in labels:
            ident = Ident()
            rest, _ = strip_prefixes(text[len(host) + 2 :], ident)
            line.text, line.rank, line.prefixed = rest, host, True
            line.level = line.level or ident.level


def _strip_host_label(text: str, labels: set[str]) -> tuple[str, str | None]:
    """``text`` without a learned (or now learned) host label, and the label."""
    match = _HOST_LABEL.match(text)
    if match is None:
        return text, None
    host = match.group(1)
    rest = text[match.end() :]
    if host not in labels:
        if (
            len(labels) >= _MAX_LABELS
            or not any(c.isdigit() for c in host)
            or not rest.lstrip(" ").startswith(_LABEL_EVIDENCE)
        ):
            return text, None
        labels.add(host)
    return rest, host


def clean(number: int, raw: str, fence: Fence, labels: set[str] | None = None) -> Clean:
    """Peel every layer off one physical line (``labels``: host labels learned so far)."""
    text = raw
    if text.startswith('{"') and text.rstrip().endswith("}"):
        text = _unwrap_json(text)
    # isascii() is O(1) and isprintable() a tight C loop: most lines skip the pass.
    if not (text.isascii() and text.isprintable()):
        if "\x1b" in text or "\x9b" in text:
            text = ANSI.sub("", text)
        text = text.translate(CHAR_TABLE)
        text = text.strip("\r")
    if "[" in text:
        if "^[" in text:
            text = CARET_SGR.sub("", text)
        if BARE_SGR_SEEN.search(text) is not None:
            text = BARE_SGR.sub(drop_sgr, text)
            text = BARE_SGR_EMPTY.sub(drop_sgr, text)
        elif text.endswith(("[m", "[K")):
            text = BARE_SGR_END.sub(drop_sgr, text)
    width = len(text)

    if text.startswith(QUOTE_STARTS):
        limit = fence.quote_depth if fence.open else MAX_PREFIXES
        text, depth = strip_quotes(text, limit)
    else:
        depth = 0
    if "`" in text or "~~~" in text:
        text, was_fence = strip_fence(text, fence, depth)
        if was_fence and not text.strip():
            return Clean(number, "", None, False, width)
    text = strip_markup(text)

    ident = Ident()
    host = None
    first = text[:1]
    if labels is not None and first.isdigit() and " " in text[:8]:
        text = _strip_build_seconds(text, labels)
        first = text[:1]
    if labels is not None and (first.islower() or first.isdigit()) and ": " in text[:66]:
        text, host = _strip_host_label(text, labels)
    text, prefixed = strip_prefixes(text, ident) if text else (text, False)
    if host is not None:
        ident.offer(host, 2)
        prefixed = True
    if "\r" in text:
        text = last_segment(text)
        if text:
            text, again = strip_prefixes(text, ident)
            prefixed = prefixed or again
    if "\b" in text:
        text = undo_backspaces(text)
    if text.endswith("across cluster]"):
        # Ray's log deduplication: "... [repeated 14x across cluster]" after the message
        text = RAY_REPEATED.sub("", text)
    kept = text.rstrip(" \t")
    wrap = _KNOWN if width in WRAP_WIDTHS else 0
    if ident.level is None and "level=" in kept[:48]:
        note_logfmt_level(kept, ident)
    return Clean(
        number,
        kept,
        ident.value,
        prefixed,
        width,
        pad=len(text) - len(kept),
        wrap=wrap,
        level=ident.level,
    )
