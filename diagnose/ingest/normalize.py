"""Undo what terminals, log shippers and chat clients do to a crash log, line by line.

A log reaches us wrapped in layers, outermost first: chat quoting (``> ``), markdown
fences and ``<details>`` HTML, entity escaping, log-shipper prefixes (docker, k8s,
journald, mpirun), process prefixes (vLLM/Ray workers, sglang ranks), logger prefixes
(vLLM, glog), and terminal damage (ANSI colour, ``\\r`` progress bars, backspaces).
Sometimes the newlines themselves are gone (a whole traceback, or a run of worker-prefixed
records, pasted on one line) or a long frame was hard-wrapped at the terminal width (a
common width, or one the text shows by its own cut lines).  :func:`normalize` peels the
layers off and returns :class:`~diagnose.model.LogLine` objects that keep the ORIGINAL
1-based line number and the rank/process the prefix named.

Everything here is linear time: each regex is anchored or literal-led, and runs only
after a cheap literal check says it can match.  Content that merely looks like a prefix
(``[TensorRT-LLM][ERROR]``, ``RuntimeError:`` at the start of a line) is kept.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import field

from diagnose.lazyre import lazy
from diagnose.model import LogLine
from diagnose.records import record

__all__ = [
    "MAX_JOINED_LINES",
    "MIN_INFERRED_WIDTH",
    "WRAP_WIDTHS",
    "normalize",
    "normalize_lines",
    "split_lines",
]

#: Terminal/emulator widths at which a hard-wrapped frame is recognised as cut.
WRAP_WIDTHS = frozenset({80, 100, 120, 132, 140, 150, 160, 180, 200, 240, 250, 256})

#: Narrowest terminal width inferred from the text itself (see :func:`_infer_wraps`):
#: below it, two lines of equal length are too often chance.
MIN_INFERRED_WIDTH = 60

#: Most physical lines one soft-wrapped frame may be re-joined from.
MAX_JOINED_LINES = 8

# _Clean.wrap: the line is exactly as wide as a terminal, known (WRAP_WIDTHS) or inferred.
_KNOWN = 1
_INFERRED = 2

# Nested prefixes seen in real logs go up to 4 deep (two worker prefixes before a logger
# prefix in vllm-project/vllm#36077); the bound only guarantees termination.
_MAX_PREFIXES = 8

# --- character-level damage ---------------------------------------------------------------

# ECMA-48 escapes: CSI (7- and 8-bit), OSC terminated by BEL or ST, charset designations,
# other two-byte escapes (Fp, Fe, Fs), then any ESC left over.  Every branch is linear: the OSC body
# cannot contain the terminators it looks for.
_ANSI = lazy(
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
# matched so _drop_sgr can decide whether it goes too.
_BARE_SGR = lazy(r" ?\[\d{1,3}(?:;\d{1,3}){0,15}[mK](?!\])")
_BARE_SGR_SEEN = lazy(r"\[\d{1,3}(?:;\d{1,3}){0,15}[mK](?!\])")  # literal-led: fast scan
_BARE_SGR_EMPTY = lazy(r" ?\[[mK](?![\w\]]| \w)")
_BARE_SGR_END = lazy(r" ?\[[mK]$")


def _drop_sgr(match: re.Match[str]) -> str:
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
_CARET_SGR = lazy(r"\^\[\[[0-9;]{0,48}[A-Za-z]")

_CHAR_TABLE: dict[int, str | None] = {
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


def _undo_backspaces(text: str) -> str:
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


def _last_segment(text: str) -> str:
    """Keep what a terminal shows after ``\\r`` overwrites: the last non-blank segment."""
    for segment in reversed(text.split("\r")):
        if segment.strip():
            return segment
    return ""


# --- markdown / chat structure --------------------------------------------------------------

_QUOTE_STARTS = (">", " >", "  >", "   >")
_QUOTE = lazy(r" {0,3}>(?: |(?=\S)|$)")
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
class _Fence:
    """Markdown fence state carried from line to line."""

    open: bool = False
    marker: str = ""
    quote_depth: int = 0


def _strip_quotes(text: str, limit: int) -> tuple[str, int]:
    """Remove up to ``limit`` leading ``>`` quote markers; return the rest and how many."""
    depth = 0
    while depth < limit and text.startswith(_QUOTE_STARTS):
        match = _QUOTE.match(text)
        if match is None:
            break
        text = text[match.end() :]
        depth += 1
    return text, depth


def _strip_fence(text: str, fence: _Fence, depth: int) -> tuple[str, bool]:
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


def _toggle(fence: _Fence, marker: str, depth: int) -> None:
    if fence.open:
        fence.open = False
        fence.quote_depth = 0
    else:
        fence.open, fence.marker, fence.quote_depth = True, marker, depth


def _strip_markup(text: str) -> str:
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


# --- log prefixes ---------------------------------------------------------------------------

# Each pattern is anchored at the line start and ends at the single space that separates
# prefix from message, so the message keeps its own indentation (Python frames).
_TS = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?"
_TAGS = r"(?:[A-Z]{2,4}\d{1,5})(?: [A-Z]{2,4}\d{1,5}){0,5}"
_MON = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|TRACE)"

# One anchored alternation per first character: a single C-level match per line.
_BRACKET_PREFIX = lazy(
    r"\[(?:"
    # sglang: [2026-01-02 10:00:00 TP3] / [2025-05-14 03:58:33 DP0 TP0]; buildkite [ts]
    rf"{_TS}(?: (?P<tags>{_TAGS}))?\]"
    # Ray's C++ core logger: [2025-04-15 00:31:11,815 E 808 17795] (level, pid, thread)
    rf"|{_TS} (?P<raylevel>[DIWEF]) \d{{1,8}} \d{{1,8}}\]"
    # torchrun/torch.distributed: [rank3]: (also [rank3]:[E...] with no space)
    r"|(?P<rank>rank\d{1,5})\]:"
    # torchrun --tee / --log-dir: [default3]: (role name, then the local rank); no blank
    # follows, so none is taken (see _strip_one_prefix)
    r"|(?P<role>[A-Za-z][A-Za-z_]{2,31}\d{1,5})\]:"
    # Azure ML and other job runners: [stderr] after their timestamp
    r"|std(?:out|err)\](?= )"
    # mpirun --tag-output: [1,6]<stdout>:
    r"|(?P<mpi>\d{1,5},\d{1,6})\]<(?:stdout|stderr)>:"
    # TensorRT logger timestamp: [10/01/2025-08:26:34]; the [TRT] [W] after it is content
    # (ultralytics/ultralytics#22271)
    r"|\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d\]"
    # kubectl logs --prefix: [pod/name-abc12/container]
    r"|pod/(?P<pod>[\w.-]{1,253})/[\w.-]{1,63}\]"
    # a container or service tag before the process's own prefix: "[vllm]: (VllmWorker...";
    # only there: "[Autotuner]: Skipping tactic" is the message's own tag
    r"|[A-Za-z][\w.-]{0,62}\]: (?=\((?:[\w ]+ )?(?:pid|rank)=|\[)"
    # Open MPI's signal handler and mca messages: [trainer-03:00412] (host, pid printed %05d)
    r"|(?P<ompi>[A-Za-z][\w.-]{0,252}:\d{5,8})\](?= )"
    # a bare pid before another bracketed prefix: [80746] [rank0]: (hiyouga/LlamaFactory#7396)
    r"|(?P<pid>\d{2,8})\](?= \[)"
    # dmesg: seconds since boot "[ 1234.567890]", or dmesg -T "[Mon Mar  3 10:00:00 2025]"
    r"| {0,7}\d{1,10}\.\d{6}\]"
    rf"|(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) {_MON} [ \d]\d \d\d:\d\d:\d\d \d{{4}}\]"
    r") ?"
)
# c10 logging: [E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] -> [E ProcessGroupNCCL.cpp:607]
# (the older spelling), so one failure printed at different times by many ranks reads alike.
_C10_STAMP = lazy(r"\[([EWIF])\d{3,4} \d\d:\d\d:\d\d\.\d{1,9} (\d+ )?(?=[\w./-]+:\d+\])")

# vLLM/Ray worker prefix: (VllmWorker rank=2 pid=123) (RayWorkerWrapper pid=1054, ip=10.1.2.3)
# (EngineCore_DP0 pid=17833) (pid=123), and vLLM V1's (VllmWorker TP0 pid=118) with its
# parallel ranks as words after the name — needs a pid= or ip= field to count.
_WORKER_NAME = r"[A-Za-z_][\w.:-]{0,63}(?: [A-Z]{2,4}\d{1,5}){0,4}"
_WORKER = lazy(
    rf"\((?P<name>{_WORKER_NAME})?(?:,? ?(?P<kv>(?:rank|pid|ip|node|node_id|repr)"
    r"=[\w.:/-]{1,64}))+\) ?"
)
_WORKER_KV = lazy(r"\b(rank|pid)=([\w.-]+)")
_NAME_TAGS = lazy(r"(?:[_ -](?:[A-Z]{2,4}\d{1,5}))+$")

_DIGIT_PREFIX = lazy(
    # loguru: 2026-01-02 10:00:00.123 | ERROR    | module:func:12 - message
    rf"{_TS} \| (?P<loguru>{_LEVEL}) {{0,8}}\| [\w.<>:-]{{1,200}} - "
    # python logging's cookbook format: asctime - name - levelname - message
    rf"|{_TS} - [\w.<>-]{{1,200}} - (?P<cookbook>{_LEVEL}) - "
    # and "asctime name process levelname message" (xinference): the level padded to 8
    rf"|{_TS} [A-Za-z_][\w.<>-]{{0,199}}(?: \d{{1,8}})? (?P<spaced>{_LEVEL}) +"
    # docker --timestamps / k8s (CRI adds 'stdout F'), python logging "ts - ", ts | message
    rf"|{_TS}(?: (?:stdout|stderr) [FP])?(?: - | \| | ?)"
)
_ALPHA_PREFIX = lazy(
    # vLLM logger: ERROR 01-02 02:39:17 worker_base.py:467] / INFO 03-04 ... [core.py:12]
    rf"(?P<vllm>{_LEVEL}) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{{1,6}})? "
    r"(?:\[[\w./-]{1,200}:\d{1,6}\]|[\w./-]{1,200}:\d{1,6}\]) ?"
    # glog: E0102 10:00:00.123456 12345 file.cc:12]; torch's logging with an ISO time:
    # E2025-08-13T11:34:14+08:00.677000 1201 select_algorithm.py:2100]
    r"|(?P<glog>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d{1,9} +\d{1,10} [\w./-]{1,200}:\d{1,6}\] ?"
    r"|(?P<glogiso>[IWEF])\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[+-]\d\d:\d\d|Z)?\.\d{1,9} +\d{1,10}"
    r" [\w./-]{1,200}:\d{1,6}\] ?"
    # journald: Mar 03 10:00:00 host python[123]:
    rf"|{_MON} [ \d]\d \d\d:\d\d:\d\d [\w.-]{{1,253}} [\w./@-]{{1,200}}(?:\[\d+\])?: ?"
)
# First letters of a level name, a glog severity or a month: others skip _ALPHA_PREFIX.
_ALPHA_FIRST = frozenset("ACDEFIJMNOSTW")
# docker compose: "vllm-1  | " (vllm-project/vllm#10439) / "container  | " / "pod-abc12 | ".
# One token, then either 2+ spaces (compose pads names to align) or a name ending in a
# replica index or pod suffix holding a digit (-1, _2, -abc12).
_COMPOSE = lazy(
    r"(?P<svc>[A-Za-z0-9][\w.-]{0,62}?) {2,}\| "
    r"|(?P<replica>[A-Za-z0-9][\w.-]{0,62}[-_](?=[0-9a-z]{0,9}\d)[0-9a-z]{1,10}) \| "
)
_SOURCE_SUFFIXES = (".py", ".c", ".cc", ".cpp", ".cu", ".h", ".hpp", ".rs", ".go")
_RAY_REPEATED = lazy(r" ?\[repeated \d+x across cluster\]$")
_BUILDKIT = lazy(r"#\d{1,4} \d{1,6}\.\d{1,3} ")
# Buildkite / CI log viewers: "  | " before each line, often inside a chat quote
# (vllm-project/vllm#8204); not a markdown table row: those end in "|".
_PIPE = lazy(r" {0,4}\| ")


@record(frozen=False)
class _Ident:
    """The best process identity seen in a line's prefixes (rank beats pid/container).

    ``level`` is the log level a prefix named, spelled as :data:`_LEVELS` spells it.
    """

    value: str | None = None
    strength: int = 0
    level: str | None = None

    def offer(self, value: str | None, strength: int) -> None:
        """Keep ``value`` when it names the process more specifically than what we have."""
        if value and strength > self.strength:
            self.value, self.strength = value, strength


def _worker_ident(match: re.Match[str], ident: _Ident) -> None:
    """Pick the rank out of a vLLM/Ray worker prefix: rank=N, a TP/DP tag in the name, pid."""
    fields = dict(_WORKER_KV.findall(match.group(0)))
    if "rank" in fields:
        ident.offer(f"rank={fields['rank']}", 3)
        return
    name = match.group("name") or ""
    tags = _NAME_TAGS.search(name)
    if tags:
        ident.offer(tags.group(0)[1:], 3)
    elif "pid" in fields:
        ident.offer(f"pid={fields['pid']}", 1)


def _strip_one_prefix(text: str, ident: _Ident) -> str | None:
    """Strip one recognised prefix from the start of ``text``; None when there is none."""
    first = text[0]
    if first == "[":
        match = _BRACKET_PREFIX.match(text)
        if match is None:
            return None
        tags, rank, mpi, role, pod, pid, ompi = match.group(
            "tags", "rank", "mpi", "role", "pod", "pid", "ompi"
        )
        _note_level(match.group("raylevel"), ident)
        if tags or rank or mpi or role:
            ident.offer(tags or rank or mpi or role, 3)
        if role:  # the blank after "[default0]:" is the message's own indentation
            return text[match.end("role") + 2 :]
        elif pod:
            ident.offer(pod, 2)
        elif pid:
            ident.offer(f"pid={pid}", 1)
        elif ompi:
            if ompi.rpartition(":")[0].endswith(_SOURCE_SUFFIXES):
                return None  # a logger's [file.py:12345] tag, not a host
            ident.offer(ompi, 1)
        return text[match.end() :]
    if first == "#":
        # Docker BuildKit's plain progress: "#17 305.3 " (step, then seconds into it)
        match = _BUILDKIT.match(text)
        return text[match.end() :] if match else None
    if first == "(":
        match = _WORKER.match(text)
        if match and ("pid=" in match.group(0) or "ip=" in match.group(0)):
            _worker_ident(match, ident)
            return text[match.end() :]
        return None
    if first.isdigit():
        match = _DIGIT_PREFIX.match(text) if text[4:5] == "-" else None
        if match:
            _note_level(
                match.group("loguru") or match.group("cookbook") or match.group("spaced"), ident
            )
            return text[match.end() :]
    elif first in _ALPHA_FIRST:
        match = _ALPHA_PREFIX.match(text)
        if match:
            _note_level(match.group("vllm") or match.group("glog") or match.group("glogiso"), ident)
            return text[match.end() :]
    if first.isalnum() and "| " in text[:80]:
        match = _COMPOSE.match(text)
        if match:
            ident.offer(match.group("svc") or match.group("replica"), 2)
            return text[match.end() :]
    if first == " " and text.lstrip(" ")[:1] == "[":
        # A paste indented as a Markdown code block: "    [ic5:133017] [ 1] lib.so(...)".
        body = text.lstrip(" ")
        match = _BRACKET_PREFIX.match(body)
        if match is not None and any(match.group("rank", "mpi", "ompi", "tags", "pod")):
            return _strip_one_prefix(body, ident)
    if first == " " or first == "|":
        match = _PIPE.match(text)
        if match and not text.rstrip().endswith("|"):
            return text[match.end() :]
    return None


# Level names as prefixes spell them -> one spelling (glog's single letters included).
_LEVELS = {
    "W": "WARNING", "WARN": "WARNING", "WARNING": "WARNING",
    "E": "ERROR", "ERROR": "ERROR", "CRITICAL": "CRITICAL",
    "F": "FATAL", "FATAL": "FATAL",
    "I": "INFO", "INFO": "INFO", "DEBUG": "DEBUG", "TRACE": "TRACE",
}  # fmt: skip


# A logfmt record (Go's slog and logrus, so Ollama) names its level in a field after the time,
# which stays in the text: "time=2025-11-26T08:00:04.513Z level=WARN source=sched.go:646 msg=...".
_LOGFMT_LEVEL = lazy(r"(?:time=\S+ )?level=([A-Za-z]+) ")


def _note_logfmt_level(text: str, ident: _Ident) -> None:
    """Take a logfmt record's ``level=`` field as the line's level (ollama/ollama#9160)."""
    match = _LOGFMT_LEVEL.match(text)
    if match is not None:
        _note_level(match.group(1).upper(), ident)


def _note_level(name: str | None, ident: _Ident) -> None:
    """Keep the first level a line's prefixes name (the outermost is the logger's own)."""
    if name and ident.level is None:
        ident.level = _LEVELS.get(name)


def _strip_prefixes(text: str, ident: _Ident) -> tuple[str, bool]:
    """Strip every nested prefix; return the message and whether anything was stripped."""
    stripped = False
    for _ in range(_MAX_PREFIXES):
        if not text:
            break
        rest = _strip_one_prefix(text, ident)
        if rest is None:
            break
        text, stripped = rest, True
    if len(text) > 3 and text[0] == "[" and text[1] in "EWIF" and text[2].isdigit():
        text = _C10_STAMP.sub(r"[\1 ", text, count=1)
    return text, stripped


# --- per-line cleaning ----------------------------------------------------------------------


@record(frozen=False)
class _Clean:
    """One physical line after cleaning, before joining/splitting."""

    number: int
    text: str
    rank: str | None
    prefixed: bool  # a log/process prefix was stripped: it starts a new log record
    width: int  # length as the terminal showed it (for hard-wrap detection)
    joined: int = 1
    pad: int = 0  # trailing blanks trimmed: one is a cut between two words, more are padding
    wrap: int = 0  # width is a terminal's: _KNOWN (in WRAP_WIDTHS) or _INFERRED from the text
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
    one-line paste, which :func:`_split_pasted` splits at its frame markers.
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


def _relabel(held: Iterable[_Clean], labels: set[str]) -> None:
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
            ident = _Ident()
            rest, _ = _strip_prefixes(text[len(host) + 2 :], ident)
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


def _clean(number: int, raw: str, fence: _Fence, labels: set[str] | None = None) -> _Clean:
    """Peel every layer off one physical line (``labels``: host labels learned so far)."""
    text = raw
    if text.startswith('{"') and text.rstrip().endswith("}"):
        text = _unwrap_json(text)
    # isascii() is O(1) and isprintable() a tight C loop: most lines skip the pass.
    if not (text.isascii() and text.isprintable()):
        if "\x1b" in text or "\x9b" in text:
            text = _ANSI.sub("", text)
        text = text.translate(_CHAR_TABLE)
        text = text.strip("\r")
    if "[" in text:
        if "^[" in text:
            text = _CARET_SGR.sub("", text)
        if _BARE_SGR_SEEN.search(text) is not None:
            text = _BARE_SGR.sub(_drop_sgr, text)
            text = _BARE_SGR_EMPTY.sub(_drop_sgr, text)
        elif text.endswith(("[m", "[K")):
            text = _BARE_SGR_END.sub(_drop_sgr, text)
    width = len(text)

    if text.startswith(_QUOTE_STARTS):
        limit = fence.quote_depth if fence.open else _MAX_PREFIXES
        text, depth = _strip_quotes(text, limit)
    else:
        depth = 0
    if "`" in text or "~~~" in text:
        text, was_fence = _strip_fence(text, fence, depth)
        if was_fence and not text.strip():
            return _Clean(number, "", None, False, width)
    text = _strip_markup(text)

    ident = _Ident()
    host = None
    first = text[:1]
    if labels is not None and first.isdigit() and " " in text[:8]:
        text = _strip_build_seconds(text, labels)
        first = text[:1]
    if labels is not None and (first.islower() or first.isdigit()) and ": " in text[:66]:
        text, host = _strip_host_label(text, labels)
    text, prefixed = _strip_prefixes(text, ident) if text else (text, False)
    if host is not None:
        ident.offer(host, 2)
        prefixed = True
    if "\r" in text:
        text = _last_segment(text)
        if text:
            text, again = _strip_prefixes(text, ident)
            prefixed = prefixed or again
    if "\b" in text:
        text = _undo_backspaces(text)
    if text.endswith("across cluster]"):
        # Ray's log deduplication: "... [repeated 14x across cluster]" after the message
        text = _RAY_REPEATED.sub("", text)
    kept = text.rstrip(" \t")
    wrap = _KNOWN if width in WRAP_WIDTHS else 0
    if ident.level is None and "level=" in kept[:48]:
        _note_logfmt_level(kept, ident)
    return _Clean(
        number,
        kept,
        ident.value,
        prefixed,
        width,
        pad=len(text) - len(kept),
        wrap=wrap,
        level=ident.level,
    )


# --- soft-wrap re-joining -------------------------------------------------------------------

# Frame numbers run past 9,999 only in deep-recursion dumps; there a gdb frame must show its
# address to count, so an issue number opening a line ("#12345 fixed") is not a frame.
_FRAME_START = lazy(
    r"\s*(?:#\d{1,4}\s+(?:0x[0-9a-fA-F]+\s|[\w:<~]|\?\?)|#\d{5,7}\s+0x[0-9a-fA-F]+\s"
    r"|frame #\d{1,7}: "
    r"|\d{1,3} {2,}0x[0-9a-fA-F]{4,}|File \"|0x[0-9a-fA-F]{6,}\s|[\w./+-]{1,400}\.so(?:\.\d+)*\()"
)
_NEW_RECORD = lazy(
    r"(?:Traceback \(|During handling|The above exception|terminate called|\[TensorRT-LLM\]"
    r"|(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt)\b"
    r"|\S+:\d+:\d*:? ?(?:error|warning|note):"
    # uvicorn's "ERROR:    Exception in ASGI application", "INFO:     127.0.0.1:5 - ..."
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):\s"
    # logfmt records (Go's slog, so Ollama): "time=2025-11-26T08:00:04.513Z level=ERROR ...";
    # the record above ending at a terminal width had swallowed it (ollama/ollama#13250)
    r"|time=\d{4}-\d\d-\d\d[T ]|level=[A-Za-z]+ "
    # Triton's PTXASError: "triton.runtime.errors.PTXASError: PTXAS error: Internal Triton
    # PTX codegen error" is exactly 80 columns, and its next line is this heading.
    r"|`ptxas` stderr:)"
)


def _unbalanced(text: str) -> bool:
    """True when a frame line opens more ``<``/``(``/``[`` or quotes than it closes."""
    if text.lstrip().startswith('File "') and text.count('"') % 2 == 1:
        return True
    body = text.replace("->", "").replace("operator<<", "").replace("operator>>", "")
    body = body.replace("operator<", "").replace("operator>", "")
    return (
        body.count("<") > body.count(">")
        or body.count("(") > body.count(")")
        or body.count("[") > body.count("]")
    )


def _is_cut_frame(line: _Clean) -> bool:
    """A frame line that the terminal or chat client visibly cut."""
    text = line.text
    if not text or _FRAME_START.match(text) is None:
        return False
    if _unbalanced(text):
        return True
    last = text[-1]
    return line.wrap != 0 and (last.isalnum() or last in "_:<,/.")


def _is_hard_cut(line: _Clean) -> bool:
    """Any line that ends exactly at a terminal width: the terminal cut it there.

    Error messages get cut too, not only frames (``CUDA out of`` / ``memory. Tried to
    allocate``), and a rule needs the message whole.  A separator rule (``=`` * 80) is
    exactly as wide by design, so lines of one or two distinct characters are not cuts.
    A log prefix that alone fills the terminal line leaves its message on the next one.
    A line padded with blanks to the width (a Windows console copy) was not cut, nor is a
    title centred in a rule the width of the terminal.
    """
    if not line.wrap or line.pad > 1:
        return False
    body = line.text.strip()
    if body[:3] in _RULE_HEADS and _TITLED_RULE.match(body):
        return False  # pytest pads "=== FAILURES ===" and "___ test_x ___" to the width
    return len(set(body)) > 2 or (line.prefixed and not body)


# A section title centred in a rule: "==== 1 failed in 3.2s ====", "____ test_x[a] ____".
_TITLED_RULE = lazy(r"([=_*#~+-])\1{2,} \S.*? \1{3,}$")
_RULE_HEADS = frozenset(c * 3 for c in "=_*#~+-")


_BULLETS = ("- ", "* ", "+ ")


def _continues(head: _Clean, nxt: _Clean) -> bool:
    """Whether ``nxt`` is the rest of the cut frame or hard-cut line ``head`` (conservative)."""
    text = nxt.text
    if head.joined >= MAX_JOINED_LINES or not text or nxt.prefixed:
        return False
    if nxt.rank is not None and nxt.rank != head.rank:
        return False
    if not head.text:
        return _is_hard_cut(head)  # only a prefix fit on the line: this is its message
    if head.wrap == _INFERRED and head.joined == 1 and _alike(head.text, text):
        return False  # a learned width met by a table row or progress bar: rows, not pieces
    if text[:2] in _BULLETS and head.text[:2] == text[:2]:
        # Two items of one Markdown list; the first only happened to be a common terminal
        # width long (180 columns in flashinfer-ai/flashinfer#4013).
        return False
    if head.joined > 1 and _is_hard_cut(head):
        # Piece after piece exactly the terminal's width: the wrap is certain, and the next
        # piece may start anywhere (``uctor.exc.InductorError`` looks like a new record).
        return True
    # An indented line starts a new record; a single space is where a terminal cut fell
    # between two words of a hard-cut line.
    if text[0] in " \t" and not (text[1:2] not in (" ", "\t", "") and _is_hard_cut(head)):
        return False
    if _FRAME_START.match(text) or _NEW_RECORD.match(text):
        return False
    if _may_hold_marker(text) and _SPLIT_STRONG.search(text):
        return False  # holds a traceback/frame marker of its own: a new record
    if _cut_in_quote(head.text, text) or _open_call_at_end(head.text):
        return True
    if _long_record_cut(head) and nxt.rank is None and text[:1].islower():
        return True
    if (
        not head.pad
        and len(head.text) >= _LONG_RECORD
        and head.text[-1:].islower()
        and _WORD_REST.match(text)
    ):
        # "... Including non-PyTorch memory, this proce" / "ss has 23.40 GiB memory in use."
        return True
    return _is_cut_frame(head) or _is_hard_cut(head)


def _open_call_at_end(text: str) -> bool:
    """A quoted call cut after a comma: "when calling `cublasGemmEx(handle, opa, opb," - its
    arguments go on on the next lines (pytorch/pytorch#57773 pastes)."""
    return text.endswith(",") and text.count("`") % 2 == 1 and text.count("(") > text.count(")")


def _long_record_cut(line: _Clean) -> bool:
    """A long rank-prefixed record that ends inside a word: "[rank4]: torch.OutOfMemoryError:
    ... Of the allocated memor" then "y 74.57 GiB is allocated by PyTorch" with no prefix.
    In a log whose every record carries its rank, a bare line after it is its wrapped rest."""
    text = line.text
    return line.rank is not None and len(text) >= _LONG_RECORD and text[-1:].islower()


_LONG_RECORD = 150
# The rest of a word a terminal cut: a few lowercase letters, then the sentence goes on.
_WORD_REST = lazy(r"[a-z]{1,4} [a-z0-9]")


def _open_quote_at_end(text: str) -> bool:
    """Whether ``text`` ends inside a single-quoted word (a cut that may continue)."""
    return (
        text[-1:].isalnum()
        and "'" in text[-41:]
        and _QUOTE_OPEN_AT_END.search(text) is not None
        and text.count("'") % 2 == 1
    )


def _cut_in_quote(head: str, text: str) -> bool:
    """A quoted token the paste cut in two: "ptxas fatal : Value 'sm_1" / "20' is not ..."
    (the head leaves a single quote open on its last word, the next line closes it)."""
    return _open_quote_at_end(head) and _QUOTE_CLOSE_AT_START.match(text) is not None


_QUOTE_OPEN_AT_END = lazy(r"(?:^|\s)'[\w.:-]{1,40}$")
_QUOTE_CLOSE_AT_START = lazy(r"[\w.:-]{1,40}'(?:\s|$|[,.;)])")


def _join(head: _Clean, nxt: _Clean) -> _Clean:
    """Glue ``nxt`` onto ``head``: no separator for a hard cut, a space after a comma.

    A space the head's trailing trim removed is put back (``error`` + ``on the device``).
    A terminal narrower than a long prefix cuts inside it (vLLM worker + logger prefixes
    run past 80 columns), so a hard-cut head gets its now-whole prefix stripped again.
    """
    left = head.text
    spaced = head.pad == 1 or (left.endswith(",") and not head.wrap)
    head.text = left + (" " if spaced else "") + nxt.text
    if _is_hard_cut(head) and head.text:
        ident = _Ident()
        head.text, _ = _strip_prefixes(head.text, ident)
        head.rank = head.rank or ident.value
    head.width = nxt.width
    head.pad = nxt.pad
    head.wrap = nxt.wrap
    head.joined += 1
    return head


# --- terminal widths inferred from the text -------------------------------------------------

# Lines of look-ahead in which the evidence for a width is weighed: bounded memory when
# streaming, and wide enough to see several cut lines of one paste.
_WINDOW = 256
# Cut pairs (a line ending mid-token, then a line that reads as its rest) a width needs in
# the window.  One is not enough: a log's widest line ending inside a word, followed by a
# record with no prefix (``... out of memory`` / ``alloc_tensor_range: failed``), is common.
# Below _WIDE, text wrapped by hand or by a message template (textwrap's 70, PEP 8's 79,
# git's 72) often repeats its longest length, so a third pair is required.
_PAIRS_NEEDED = 2
_PAIRS_NEEDED_NARROW = 3
_WIDE = 100
# A terminal makes its width the commonest long length (every longer line leaves a piece
# exactly that wide); text wrapped at word boundaries spreads over the few columns below.
_BELOW = 4
_COUNTED = MIN_INFERRED_WIDTH - _BELOW
# Pieces of one wrapped message agree on few columns (~5-10 % by chance); table rows,
# progress bars and fixed-width records agree on most.
_ALIKE_COLUMNS = 0.4
_ALIKE_MIN_OVERLAP = 16
# A cut falls anywhere in a token: after a letter, digit, ``_``, a path or a call's
# punctuation.  A closing bracket or a bar is where rows and records end.
_MID_TOKEN_ENDS = frozenset("_-.,:;/<([{='\"")
_DIGITS_MASKED = str.maketrans("0123456789", "##########")


def _alike(head: str, text: str) -> bool:
    """Whether two lines are rows of one format: same start, or mostly the same columns."""
    if head[:8] == text[:8]:
        return True
    overlap = min(len(head), len(text))
    if overlap < _ALIKE_MIN_OVERLAP:
        return False
    same = sum(map(str.__eq__, head[:overlap], text[:overlap]))
    return same > _ALIKE_COLUMNS * overlap


def _ends_mid_token(line: _Clean) -> bool:
    """Whether a line ends where a terminal's cut may fall: inside a token, or on one blank."""
    text = line.text
    if not text or line.pad > 1:
        return False
    return line.pad == 1 or text[-1].isalnum() or text[-1] in _MID_TOKEN_ENDS


def _is_cut_pair(head: _Clean, nxt: _Clean) -> bool:
    """Whether ``head`` looks cut mid-token at its width and ``nxt`` reads as its rest.

    Only evidence for a width (:func:`_infer_wraps`), so stricter than :func:`_continues`:
    ``nxt`` no wider, with no log prefix, frame, new record or indented code; ``head`` not
    padded, not a separator rule, not a sentence's end; the two not rows of one format.
    """
    body, text = head.text, nxt.text
    if not text or nxt.prefixed or nxt.width > head.width or not _ends_mid_token(head):
        return False
    if body[-1] in ".:!?" and text[0].isupper():
        return False  # a sentence ended and the next began: a line break a person chose
    if nxt.rank is not None and nxt.rank != head.rank:
        return False
    if text[0] in " \t" and text[1:2] in (" ", "\t", ""):
        return False
    if _FRAME_START.match(text) or _NEW_RECORD.match(text):
        return False
    return len(set(body)) > 2 and not _alike(body, text)


@record(frozen=False)
class _WidthWindow:
    """The look-ahead of :func:`_infer_wraps`: its lines, their widths, their cut pairs.

    Only lines at least ``_COUNTED`` wide are counted: narrower ones can neither be cut at
    an inferred width nor sit just below one, and most log lines are narrower.
    """

    lines: deque[_Clean] = field(default_factory=deque)
    widths: dict[int, int] = field(default_factory=dict)  # counted lines by width
    pairs: dict[int, int] = field(default_factory=dict)  # cut pairs by the head's width
    # Counted lines, widths strictly decreasing, from _WINDOW lines before the oldest on.
    widest: deque[_Clean] = field(default_factory=deque)
    learned: set[int] = field(default_factory=set)  # widths shown so far: no more weighing
    # Cut pairs in the window by their head's width and text, digits masked: a record printed again
    # (by another rank, or on retry) is the same evidence, not more.  Two copies of a
    # 119-column NVSHMEM warning taught that width, and each copy swallowed the line after
    # it (deepseek-ai/DeepEP#303).
    heads: dict[str, int] = field(default_factory=dict)

    def pair(self, prev: _Clean, line: _Clean) -> None:
        """Count ``prev`` as a cut pair when it looks cut and ``line`` reads as its rest."""
        width = prev.width
        if not prev.wrap and width not in self.learned and _is_cut_pair(prev, line):
            key = f"{width}\x00{prev.text.translate(_DIGITS_MASKED)}"
            prev.cut_pair = key
            seen = self.heads.get(key, 0)
            self.heads[key] = seen + 1
            if not seen:
                self.pairs[width] = self.pairs.get(width, 0) + 1

    def count(self, line: _Clean) -> None:
        """Count a line at least ``_COUNTED`` wide that has just entered the window."""
        width = line.width
        self.widths[width] = self.widths.get(width, 0) + 1
        widest = self.widest
        while widest and widest[-1].width <= width:
            widest.pop()
        widest.append(line)

    def shows(self, width: int) -> bool:
        """Whether the window shows ``width`` to be a terminal's (see :func:`_infer_wraps`)."""
        needed = _PAIRS_NEEDED if width >= _WIDE else _PAIRS_NEEDED_NARROW
        if self.pairs.get(width, 0) < needed or (self.widest and self.widest[0].width > width):
            return False
        below = sum(self.widths.get(width - k, 0) for k in range(1, _BELOW + 1))
        return self.widths[width] > below

    def retire(self, line: _Clean) -> None:
        """Judge a counted line leaving the window (mark it when its width is shown), uncount it."""
        width = line.width
        learned = self.learned
        widest = self.widest
        while widest and widest[0].number < line.number - _WINDOW:
            widest.popleft()  # the look-behind ends _WINDOW lines back
        # Most lines' widths hold no cut pair: one dict look-up rules them out.
        if (
            (self.pairs.get(width) or width in learned)
            and not line.wrap
            and width >= MIN_INFERRED_WIDTH
            and _ends_mid_token(line)  # a table row's bar, a bracket: an end, not a cut
            and (width in learned or self.shows(width))
        ):
            learned.add(width)
            line.wrap = _INFERRED
        self.widths[width] -= 1
        if line.cut_pair:
            key = line.cut_pair
            left = self.heads[key] - 1
            if left:
                self.heads[key] = left
            else:
                del self.heads[key]
                self.pairs[width] -= 1


def _infer_wraps(lines: Iterable[_Clean], labels: set[str] | None = None) -> Iterator[_Clean]:
    """Mark lines whose width the text itself shows to be a terminal's (``wrap=_INFERRED``).

    WRAP_WIDTHS lists common widths, but a resized terminal cuts at any column (116 in
    om-ai-lab/VLM-R1#257).  A width ``L >= MIN_INFERRED_WIDTH`` is a terminal's when no
    line within ``_WINDOW`` lines either side is wider and, within the next ``_WINDOW``,
    at least two lines ``L`` wide end mid-token and are followed by a line that reads as
    their rest (:func:`_is_cut_pair`; three below 100 columns), and ``L`` is commoner than
    the few widths just below it (text a person or a template wrapped at word boundaries
    spreads over those).  A learned width stays learned for the rest of the stream.
    Tables, progress bars and fixed-width records give no pairs.  Linear time; holds at
    most ``_WINDOW`` lines back.

    ``labels`` is the host-label set :func:`_clean` learns into: when it grows, the lines
    still held here that carry a new label lose it too (see :func:`_relabel`).
    """
    window = _WidthWindow()
    held = window.lines
    prev: _Clean | None = None
    known = 0
    for line in lines:
        # Plain comparisons first: most log lines are narrower than any inferred width.
        if prev is not None and prev.width >= MIN_INFERRED_WIDTH and not line.prefixed:
            window.pair(prev, line)
        if labels is not None and len(labels) != known:
            _relabel(held, labels)
            known = len(labels)
        held.append(line)
        if line.width >= _COUNTED:
            window.count(line)
        prev = line
        if len(held) > _WINDOW:
            old = held.popleft()
            if old.width >= _COUNTED:
                window.retire(old)
            yield old
    while held:
        old = held.popleft()
        if old.width >= _COUNTED:
            window.retire(old)
        yield old


# --- one-line pastes ------------------------------------------------------------------------

# Strong markers: a line holding them mid-line is a collapsed multi-line paste.
_SPLIT_STRONG = lazy(
    r"Traceback \(most recent call last\):"
    r"|(?<![\w\"])File \"[^\"\n]{1,4096}\", line \d+"
    r"|(?<![\w#])frame #\d{1,7}: "
    r"|(?<![\w#])#\d{1,7} +0x[0-9a-fA-F]{4,} in "
    r"|(?<=\s)\d{1,3} +0x[0-9a-fA-F]{8,16} "
    r"|terminate called "
)
# Weak markers: split there too, but only in a line the strong markers already qualify.
_SPLIT_WEAK = lazy(
    r"\[TensorRT-LLM\]"
    r"|(?<=\s)(?:[A-Za-z_]\w{0,80}\.){0,8}[A-Z]\w{0,80}(?:Error|Exception)(?=: |:$|$)"
    r"|(?<=\s)what\(\): "
    r"|(?<=\s)Exception raised from "
)


def _may_hold_marker(text: str) -> bool:
    """Literal prefilter (plain ``in`` beats a regex alternation): no strong marker without."""
    return (
        " 0x" in text
        or 'File "' in text
        or "frame #" in text
        or "Traceback (" in text
        or "terminate called" in text
    )


_ESCAPED_NEWLINE = lazy(r"(?<!\\)\\n")
_BARE_MARKER = lazy(r"what\(\):|\[TensorRT-LLM\](?:\[\w{1,16}\])?")
_PY_CODE_AFTER_FRAME = lazy(r'(File "[^"]*", line \d+, in \S+) +(\S.*)')
_MIN_PASTE_LEN = 60


def _continued_at_tag(head: str) -> bool:
    """The text before a ``[TensorRT-LLM]`` tag ends a message that the tag continues."""
    return head.endswith(":") and not head.endswith("what():")


def _split_pasted(text: str) -> list[str]:
    """Split a whole traceback that lost its newlines back into lines (same line number)."""
    if len(text) < _MIN_PASTE_LEN:
        return [text]
    if text.count("```") >= 2:
        # A chat message that lost its newlines but kept its code fences: "I get ```
        # Cannot access gated repo ... ```" - the fenced part is the log, not the prose.
        fenced = [piece.strip() for piece in text.split("```")]
        lines = [line for piece in fenced if piece for line in _split_pasted(piece)]
        return lines or [text]
    if not _may_hold_marker(text):
        return [text]
    if text.count("\\n") >= 2:
        # A trace posted as one escaped string, its newlines written out as "\n" (a repr,
        # a JSON value copied by hand): "...tllmBuffers.h:125)\n1       0x7f45c6d96865 void
        # tensorrt_llm::common::check<cudaError>..." (NVIDIA/TensorRT-LLM#2857).
        escaped = _ESCAPED_NEWLINE.split(text)
        # (A blank in front: some markers must follow whitespace.)
        if sum(_SPLIT_STRONG.match(" " + part.strip(), 1) is not None for part in escaped) >= 2:
            return [line for part in escaped if part.strip() for line in _split_pasted(part)]
    body = text.lstrip()
    offset = len(text) - len(body)
    strong = [m.start() for m in _SPLIT_STRONG.finditer(body)]
    mid_strong = [p for p in strong if p > 0]
    if not mid_strong:
        return [text]
    # Not at a tag that continues a message ending in ":": TensorRT-LLM nests the caught
    # exception's own text, "Encountered an error in forward function: [TensorRT-LLM][ERROR]
    # Assertion failed: ..." (NVIDIA/TensorRT-LLM#699).
    weak = [
        m.start()
        for m in _SPLIT_WEAK.finditer(body)
        if not (m.group().startswith("[") and _continued_at_tag(body[: m.start()].rstrip()))
    ]
    starts_with_marker = (strong and strong[0] == 0) or (weak and weak[0] == 0)
    if len(mid_strong) + len([p for p in weak if p > 0]) < 2 and not starts_with_marker:
        return [text]
    cuts = sorted({0, *mid_strong, *(p for p in weak if p > 0)})
    pieces: list[str] = []
    carry = ""
    for start, end in zip(cuts, [*cuts[1:], len(body)], strict=True):
        piece = carry + body[start:end].strip()
        carry = ""
        if _BARE_MARKER.fullmatch(piece):
            # "what():  [TensorRT-LLM][ERROR] Assertion failed" is one line, not three.
            carry = piece + " "
            continue
        if not piece:
            continue
        if piece.startswith('File "'):
            code = _PY_CODE_AFTER_FRAME.fullmatch(piece)
            if code:
                pieces += ["  " + code.group(1), "    " + code.group(2)]
                continue
            piece = "  " + piece
        pieces.append(piece)
    if carry:
        pieces.append(carry.rstrip())
    if pieces and offset:
        pieces[0] = text[:offset] + pieces[0]
    return pieces


# A process prefix repeated mid-line: a prefixed log (vLLM/Ray workers) that lost its
# newlines, e.g. copied from a rendered page (vllm-project/vllm-ascend#1617), where every
# "(VllmWorkerProcess pid=N) ERROR MM-DD hh:mm:ss [file.py:N]" once started a line.  Same
# shape as _WORKER, but only after whitespace: a prefix is never glued to a word.  Linear:
# literal-led, and every repeated part is bounded and ends at a character it cannot contain.
_MID_WORKER = lazy(
    rf"(?<=\s)\((?:{_WORKER_NAME})?(?:,? ?(?:rank|pid|ip|node|node_id|repr)"
    r"=[\w.:/-]{1,64})+\) "
)
_FRAME_TAIL = lazy(r'\.py", line \d+, in [\w<>.]+$')


def _split_prefixed(text: str, rank: str | None = None) -> list[tuple[str, str | None]] | None:
    """Split a line holding one process prefix twice or more mid-line; None when it does not.

    The caller has checked that ``pid=`` occurs twice (the literal prefilter).

    Each piece loses its prefixes the way a whole line would (worker, then logger), and
    keeps the rank they name.  One mention of a worker ("restarting (Worker pid=7)") or two
    different workers on one line is a message, not a collapsed log: the very same prefix
    text must recur.  Frames and the code under them are indented as
    :func:`_split_pasted` does, so the traceback reads as one.
    """
    found = [m for m in _MID_WORKER.finditer(text) if "pid=" in m[0]]
    # The line's own prefix, already stripped, recurring once mid-line counts as twice.
    again = rank is not None and len(found) == 1 and rank in found[0][0]
    if not again and (len(found) < 2 or len({m[0] for m in found}) == len(found)):
        return None
    pieces: list[tuple[str, str | None]] = []
    head = text[: found[0].start()].rstrip()
    if head:
        pieces.append((head, None))
    # The head may be the tail of a frame whose start is on the line before ('...py", line 9,
    # in f'): the code under it is indented like any frame's.
    after_frame = head.lstrip().startswith('File "') or _FRAME_TAIL.search(head) is not None
    ends = [m.start() for m in found[1:]] + [len(text)]
    for match, end in zip(found, ends, strict=True):
        ident = _Ident()
        body, _ = _strip_prefixes(text[match.start() : end].strip(), ident)
        lead = body.lstrip()
        if not lead:
            continue
        if lead.startswith('File "'):
            body, after_frame = "  " + lead, True
        elif after_frame and _NEW_RECORD.match(lead) is None:
            body, after_frame = "    " + lead, False
        else:
            after_frame = False
        pieces.append((body, ident.value))
    return pieces


# --- public API -----------------------------------------------------------------------------


def split_lines(text: str, cr_endings: bool = True) -> list[str]:
    """Split text into physical lines the way an editor numbers them.

    Lines end at ``\\n`` (CRLF's ``\\r`` stays for :func:`normalize` to drop).  With
    ``cr_endings``, a text holding ``\\r`` but no ``\\n`` at all is taken to use old Mac
    CR-only endings.  Unlike :meth:`str.splitlines`, form feeds and Unicode separators do
    not end lines, so numbers match what the user's editor shows.
    """
    if not text:
        return []
    sep = "\r" if cr_endings and "\n" not in text and "\r" in text else "\n"
    lines = text.split(sep)
    if lines[-1] == "":
        lines.pop()
    return lines


def normalize_lines(lines: Iterable[tuple[int, str]]) -> Iterator[LogLine]:
    """Stream-normalise ``(original line number, raw line)`` pairs into :class:`LogLine`.

    Same per-line code as :func:`normalize`; holds a window of lines back while it weighs
    whether their width is a terminal's (:func:`_infer_wraps`), and one cut frame while it
    waits for the line that may continue it.  Never raises on any text.
    """
    fence = _Fence()
    labels: set[str] = set()
    held: _Clean | None = None
    cleaned = (_clean(number, raw, fence, labels) for number, raw in lines)
    for line in _infer_wraps(cleaned, labels):
        if held is not None:
            if _continues(held, line):
                held = _join(held, line)
                continue
            yield from _emit(held)
            held = None
        if (
            _is_cut_frame(line)
            or _is_hard_cut(line)
            or _open_quote_at_end(line.text)
            or _open_call_at_end(line.text)
            or _long_record_cut(line)
            or (len(line.text) >= _LONG_RECORD and line.text[-1:].islower())
        ):
            held = line
        else:
            yield from _emit(line)
    if held is not None:
        yield from _emit(held)


def _emit(line: _Clean) -> list[LogLine]:
    if len(line.text) < _MIN_PASTE_LEN:
        return [LogLine(line.number, line.text, line.rank, line.level)]
    # Literal prefilter inline (one scan, no call) for the common line: without "pid=" twice
    # there is no repeated worker prefix.  A mid-line prefix must name its pid; the ip=-only
    # Ray form is left to the line-start stripper.
    text = line.text
    first = text.find("pid=")
    twice = first >= 0 and (
        text.find("pid=", first + 4) >= 0 or (line.rank is not None and line.rank in text)
    )
    prefixed = _split_prefixed(text, line.rank) if twice else None
    # A re-joined frame is not split at markers again: its pieces would come from later
    # lines.  A repeated worker prefix still splits (a flattened paste cut inside a word).
    whole = line.joined > 1
    if prefixed is None:
        if whole:
            return [LogLine(line.number, text, line.rank, line.level)]
        return [LogLine(line.number, piece, line.rank, line.level) for piece in _split_pasted(text)]
    # A piece may itself hold a collapsed traceback; its pieces share the prefix's rank.
    return [
        LogLine(line.number, part, rank or line.rank, line.level)
        for piece, rank in prefixed
        for part in ([piece] if whole else _split_pasted(piece))
    ]


def normalize(text: str, first_line: int = 1) -> list[LogLine]:
    """Normalise a whole log: one :class:`LogLine` per physical line, minus joins plus splits.

    ``first_line`` is the original number of the first line (when ``text`` is a window
    cut from a bigger file).  A window's lines were already split by the reader, so
    CR-only endings are only recognised in a whole text (``first_line == 1``): in a
    window, a lone ``\\r`` is always a progress-bar overwrite.

    Fence and ``<details>`` lines become empty lines; a frame hard-wrapped over several
    lines becomes one line numbered after its first; a one-line paste becomes several
    lines sharing its number.  Pure; never raises.
    """
    lines = split_lines(text, cr_endings=first_line == 1)
    return list(normalize_lines(enumerate(lines, first_line)))
