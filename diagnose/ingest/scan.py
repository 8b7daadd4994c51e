"""Stream a huge log once and keep only the windows of lines around candidate errors.

A server log can be gigabytes of healthy ``Decode batch`` lines with one crash near the end.
:func:`scan` reads it in big chunks, finds candidate lines with a literal multi-pattern
search (RE2's automaton over an alternation of plain literals, see ``TRIGGERS``), and keeps
for each hit a window: ``before`` lines of context, the hit, then the following lines while
they look like a traceback or frame block (indented, ``File "..."``, ``frame #N``, ``#N``,
``N  0x...``) or fall within ``after`` lines of a hit.  Overlapping windows are merged.
Each window is ``(first_line, lines)`` ready for ``normalize("\\n".join(lines),
first_line=first_line)``, so line numbers stay those of the user's file.

A second, caller-supplied literal set (``context_literals``) selects single lines for
log-wide facts (server arguments, GPU names, versions, readiness lines); ``barriers``
(readiness) also end the open window.

:class:`WindowCutter` is that per-chunk work, the one window cutter: :func:`scan` keeps its
windows for a whole-log verdict, :class:`diagnose.stream.StreamDiagnoser` diagnoses each as
it closes.

The automaton pass is most of a scan's time and RE2 runs it without the GIL, so with a
second core two threads search the next chunks for their first hit while this thread counts
lines and builds windows (the stream searches a file's next chunk the same way).

Memory is bounded by the chunk size plus ``max_bytes`` of kept text: when windows exceed
the budget, the oldest ones after the first quarter of the budget are dropped (a crash is
usually near the end, the start holds the configuration) and counted in
``ScanResult.dropped_windows``.

Inputs below ``WHOLE_INPUT_LIMIT`` bytes need no scan: ``normalize`` + ``find_regions`` over
the whole text take well under a second there (``bench/scan_bench.py`` measures both).
"""

from __future__ import annotations

import os
import re
import sys
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, NamedTuple

from diagnose.framelines import FRAME_START
from diagnose.ingest.flood import FloodMask, Masked, line_shape
from diagnose.ingest.normalize import HOST_LABEL, JSON_TEXT_KEYS, QUOTE_MARK
from diagnose.ingest.read import WHOLE_INPUT_LIMIT
from diagnose.records import record

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "CONTEXT_LITERALS",
    "MAX_KEPT_BYTES",
    "MAX_LINE",
    "MAX_WINDOW_BYTES",
    "MAX_WINDOW_LINES",
    "TRIGGERS",
    "WHOLE_INPUT_LIMIT",
    "WINDOW_AFTER",
    "WINDOW_BEFORE",
    "RepeatCounter",
    "ScanResult",
    "Window",
    "WindowCutter",
    "continues_block",
    "literal_pattern",
    "scan",
    "window_cutter",
]


#: Literals that make a line a candidate.  Case variants are listed because the search is
#: byte-exact.  Deliberately absent: ``CUDA`` and ``abort`` (healthy lines say "CUDA graph"
#: and "Abort request"), bare ``fault`` (matches "default"), ``0x`` (healthy tensor dumps).
TRIGGERS: tuple[bytes, ...] = (
    b"rror",  # Error, error, RuntimeError, cudaErrorX
    b"RROR",  # ERROR, CUDA_ERROR_X, [ERROR]
    b"Traceback",
    b"most recent call first",  # faulthandler's per-thread header, even without its "Fatal"
    b"TraceBack",
    b"xception",
    b"ssert",  # assert, Assertion, AssertionError
    b"SSERT",  # EP_HOST_ASSERT, GGML_ASSERT
    b"Fatal",
    b"FATAL",
    b"Segmentation fault",
    b"Segfault",  # PyTorch's fatal-signal handler: "!!!!!!! Segfault encountered !!!!!!!"
    b"compilation terminated",  # gcc's closing line after a fatal error under nvcc
    b"only supported on",  # Triton's "f8e4m3nv is only supported on compute capability >= 90"
    b"core dumped",
    b"Killed",
    b"out of memory",
    b"OutOf",  # OutOfMemoryError, OutOfResources
    b"out of resource",
    b"RESOURCE_EXHAUSTED",
    b"failed",
    b"Failed",
    b"FAILED",
    b"failure",
    b"imeout",  # timeout, Timeout
    b"timed out",
    b"terminate called",
    b"what():",
    b"frame #",
    # A Python frame line: a pasted traceback cut above its header and before its exception
    # line is still a crash region to the region finder, so the scan must see it too.
    b'File "',
    b"atchdog",  # Watchdog caught collective operation timeout
    b"illegal",
    b"misaligned",
    b"no kernel image",
    b"STATUS_",  # CUBLAS_STATUS_X, CUDNN_STATUS_X
    b"non-zero status",
    b"error status",
    b"panicked",
    b"received signal",
    # A debugger's backtrace pasted without the signal line: gdb's "bt" and its frame zero.
    b"(gdb) bt",
    b"#0  0x",
    b"==ERROR",
    b"========= ",
    b"Skipping tactic",
    b"any valid",  # TRT-LLM "Have not found any valid GEMM config" (a skipped-tactics warning)
    b"No valid",  # Inductor/Triton "No valid triton configs"
    b"Cannot profile",
    b"too old",
    b"nsupported",  # unsupported, Unsupported
    b"not supported",
    b"OOM",  # the region finder's \bOOM\b: "[Autotuner]: OOM detected", "DeepEP ... OOMs"
    # What rules match beyond these words is not listed here: scan() and the stream add
    # every rule's literal guard, in any case (diagnose.rules.wording.scan_literals).
)

#: A starting set for ``context_literals``: lines that carry log-wide facts.
CONTEXT_LITERALS: tuple[bytes, ...] = (
    b"server_args=",
    b"ServerArgs(",
    b"non-default args",
    b"Initializing a V1 LLM engine",
    b"NVIDIA",
    b"compute capability",
    b"version",
    b"Version",
    b"The server is fired up",
    b"Application startup complete",
)

_CHUNK = 16 * 1024 * 1024
# A piece this big has its first search run ahead in a thread; a carried line or a small
# input is not worth the hand-off.
_AHEAD_MIN = 1 << 16
# "Not searched ahead": feed() searches itself.
_NOT_SEARCHED: Any = object()
#: A line longer than this is kept cut (the rest of it is skipped): a crash line is never
#: megabytes long, and an unbounded line would break the memory bound.  The scan and the
#: stream share this definition.
MAX_LINE = 1 << 20
#: Bytes of windows :func:`scan` keeps in all (the head's quarter, then the newest).
MAX_KEPT_BYTES = 32 << 20
#: A window is cut at this many lines or bytes, and the rest of its block passed over (a
#: recursion dump of a million frames is one crash, not a million bytes of memory); the
#: scan's window cap is a quarter of what it keeps.
MAX_WINDOW_LINES = 20_000
MAX_WINDOW_BYTES = MAX_KEPT_BYTES // 4
_MAX_CONTEXT_LINES = 10_000

# A rank/process prefix to look past when judging continuation: "[rank3]:",
# "(VllmWorker rank=2 pid=9)", "[1,6]<stdout>:", "[2025-01-01 10:00:00 TP3]".
_PREFIX = re.compile(rb"(?:\[[^\]\n]{0,64}\](?:<\w+>)?:?|\([^)\n]{0,96}\))[ \t]?")
# The start of a frame line, on raw bytes (the one definition is diagnose.framelines').
_FRAME_START_BYTES = re.compile(FRAME_START.encode())
# Lines that go on a traceback or frame block without being frames.
_BLOCK_WORDS = (
    b"#",
    b"Exception raised from",
    b"The above exception",
    b"During handling",
    b"Traceback",
    b"what():",
    b"Current thread",
    b"Thread 0x",
    b"@ 0x",
    b"==",  # sanitizer and compute-sanitizer report lines
    b"^",  # compiler caret lines under a failing source line
    b"~",
)
_HOST_LABEL = re.compile(HOST_LABEL.encode() + rb": ")
# Chat and Markdown quote markers, nested, as normalize strips them.
_QUOTES = re.compile(rb"(?:" + QUOTE_MARK.encode() + rb")+")
# The start of a JSON log record's text field (the keys normalize unwraps).
_JSON_TEXT = re.compile(rb'\{"(?:' + "|".join(JSON_TEXT_KEYS).encode() + rb')": ?"')


#: After this many windows opened at lines of one shape (digits masked), further hits of that
#: shape that open no traceback or frame block are counted, not windowed: a server under load
#: repeats one benign warning hundreds of thousands of times, and a window each made a 300 MB
#: flood log 70x slower than grep (bench/results/README.md).  More than a host's ranks, so
#: one failure printed by every rank still gets its windows.
REPEAT_WINDOWS = 32
#: RE2's memory budget for the trigger automata (see :func:`window_cutter`).
_RE2_MAX_MEM = 64 << 20
#: Lines of context a window keeps before a hit, and after the last line that belongs to it:
#: the one definition the scan and the stream share.
WINDOW_BEFORE = 20
WINDOW_AFTER = 5
_MAX_SHAPES = 4096  # distinct shapes remembered; later new shapes are always windowed
#: After this many counted-only copies, a shape's stem is blanked from the search in bulk
#: (:mod:`diagnose.ingest.flood`): a flood, not a warning seen a few times.
LEARN_FLOOD_AFTER = 64


class RepeatCounter:
    """Says which hit lines' shapes already had their windows (:class:`WindowCutter`).

    A shape's first ``REPEAT_WINDOWS`` hits open windows; the cutter counts later ones
    instead, unless the next line continues a traceback or frame block (or is not known
    yet: the hit ends the buffer), so no crash's first line is ever passed over.
    """

    def __init__(self) -> None:
        self.opened: dict[bytes, int] = {}

    def had_windows(self, line: bytes) -> bytes | None:
        """The shape of ``line`` when that shape already had its windows, else ``None`` (and
        this sighting is one more window of it).  The scan's hot loop asks this first and
        reads the next line only for a shape that had them (a flood's only case)."""
        shape = line_shape(line)
        seen = self.opened.get(shape)
        if seen is None or seen < REPEAT_WINDOWS:
            if seen is not None or len(self.opened) < _MAX_SHAPES:
                self.opened[shape] = (seen or 0) + 1
            return None
        return shape


class Window(NamedTuple):
    """Consecutive raw lines around one or more hits, and the line number of the first."""

    first_line: int
    lines: list[str]


@record
class ScanResult:
    """What :func:`scan` kept from one stream."""

    windows: tuple[Window, ...]
    context: tuple[tuple[int, str], ...]  # (line number, raw line) per context-literal line
    total_lines: int
    total_bytes: int
    hits: int  # candidate lines found (before merging; a cut block's rest is not searched)
    dropped_windows: int = 0
    #: Hits counted, not windowed (``REPEAT_WINDOWS``): (shape, count, first line, last line).
    repeated: tuple[tuple[bytes, int, int, int], ...] = ()


def continues_block(line: bytes) -> bool:
    """Does a raw line look like part of a traceback or frame block (past any rank prefix)?

    Shared by the big-file scanner and :mod:`diagnose.stream`, which must agree on where
    a crash block ends.
    """
    if line[:1] == b">":
        # A chat or Markdown quote ("> Caught signal 11 ..." then ">  0 0x... __sigaction()"):
        # the reader strips the markers before parsing, so the block goes on in the quoted text
        # (NVIDIA/nvshmem's backtrace quoted in deepseek-ai/DeepEP#36, round 284). A marker
        # after leading blanks needs nothing: a blank already continues the block.
        quoted = _QUOTES.match(line)
        if quoted is not None:
            line = line[quoted.end() :]
    if line[:1] in (b" ", b"\t"):
        return True
    if line[:2] == b'{"':  # a JSON log record (docker json-file, fluent-bit): judge its text
        m = _JSON_TEXT.match(line)
        if m is not None:
            line = line[m.end() :]
            if line[:1] in (b" ", b"\t"):
                return True
    if line[:1] in (b"[", b"("):
        m = _PREFIX.match(line)
        if m is not None:
            line = line[m.end() :]
            if line[:1] in (b" ", b"\t"):
                return True
    elif b": " in line[:66]:
        # pdsh / DeepSpeed / srun --label: "node07:   File ...".  normalize learns such labels
        # before it strips them; here a label-like word only keeps a window open a line longer.
        m = _HOST_LABEL.match(line)
        if m is not None:
            line = line[m.end() :]
            if line[:1] in (b" ", b"\t"):
                return True
    return line.startswith(_BLOCK_WORDS) or _FRAME_START_BYTES.match(line) is not None


def literal_pattern(literals: Iterable[bytes | str]) -> bytes:
    """One alternation of escaped literals (RE2 runs it as a single automaton)."""
    parts = [lit.encode() if isinstance(lit, str) else lit for lit in literals]
    return b"|".join(re.escape(p) for p in parts if p)


def trigger_pattern(exact: Iterable[bytes | str], folded: Iterable[bytes | str] = ()) -> bytes:
    """The trigger alternation: ``exact`` literals as written, ``folded`` ones in any case.

    ``folded`` are the rule base's literal guards (``diagnose.rules.wording.scan_literals``),
    which are case-folded; the hand-kept ``TRIGGERS`` stay case-sensitive on purpose.
    """
    strict, loose = literal_pattern(exact), literal_pattern(folded)
    if not loose:
        return strict
    return (strict + b"|" if strict else b"") + b"(?i:" + loose + b")"


class _Hit:
    """A hit's span in the buffer searched: ``start()``, ``end()``, ``group()``."""

    __slots__ = ("_buf", "_end", "_start")

    def __init__(self, buf: bytes, start: int, end: int) -> None:
        self._buf, self._start, self._end = buf, start, end

    def start(self) -> int:
        return self._start

    def end(self) -> int:
        return self._end

    def group(self) -> bytes:
        return self._buf[self._start : self._end]


class FastSearch:
    """A compiled RE2 pattern's unanchored ``search(buf, pos, end)`` on bytes, calling the
    wrapper's C++ matcher directly where it exposes it: the wrapper's generator and match
    object cost 3-4 us a hit, most of what a warning flood's hits cost (bench/flood_bench.py).
    Falls back to the wrapper's own ``search`` where its internals differ."""

    __slots__ = ("_anchor", "_match", "pattern")

    def __init__(self, pattern: Any) -> None:
        self.pattern = pattern
        anchor = getattr(sys.modules.get(type(pattern).__module__), "_Anchor", None)
        self._anchor = getattr(anchor, "UNANCHORED", None)
        self._match = getattr(getattr(pattern, "_regexp", None), "Match", None)

    def search(self, buf: bytes, pos: int = 0, endpos: int | None = None) -> Any:
        if self._match is None or self._anchor is None or not isinstance(buf, (bytes, bytearray)):
            return self.pattern.search(buf, pos, endpos)
        size = len(buf)
        pos = max(0, min(pos, size))
        end = size if endpos is None else max(0, min(endpos, size))
        if pos > end:
            return None
        start, stop = self.span(buf, pos, end)
        return None if start < 0 else _Hit(buf, start, stop)

    def span(self, buf: bytes, pos: int, end: int) -> tuple[int, int]:
        """The first hit's ``(start, end)`` in ``buf[pos:end]``, ``(-1, -1)`` when none:
        the scan's hot loop, with no match object at all (``0 <= pos <= end <= len(buf)``)."""
        if self._match is None or self._anchor is None:
            m = self.pattern.search(buf, pos, end)
            return (-1, -1) if m is None else (m.start(), m.end())
        start, stop = self._match(self._anchor, buf, pos, end)[0]
        return (start, stop)


class _Windows:
    """Kept windows under a byte budget: the head is kept, the newest tail after it."""

    def __init__(self, max_bytes: int) -> None:
        self.head: list[Window] = []
        self.tail: deque[tuple[Window, int]] = deque()
        self.head_bytes = 0
        self.tail_bytes = 0
        self.max_bytes = max_bytes
        self.dropped = 0

    def add(self, window: Window, size: int) -> None:
        if not self.tail and self.head_bytes + size <= self.max_bytes // 4:
            self.head.append(window)
            self.head_bytes += size
            return
        self.tail.append((window, size))
        self.tail_bytes += size
        while self.tail_bytes > self.max_bytes - self.head_bytes and len(self.tail) > 1:
            _, old = self.tail.popleft()
            self.tail_bytes -= old
            self.dropped += 1

    def all(self) -> tuple[Window, ...]:
        return tuple(self.head) + tuple(w for w, _ in self.tail)


class _Open:
    """The window being built: its lines, where it ends, how many after-lines it still owes."""

    __slots__ = ("active", "first", "last", "lines", "owed", "size", "stopped")

    def __init__(self, first: int, lines: list[str], size: int) -> None:
        self.first = first
        self.lines = lines
        self.last = first + len(lines) - 1
        self.active = self.last  # the last hit or block line
        self.owed = 0
        self.size = size
        self.stopped = False  # ended before a non-continuation line; may still be merged


def _lines_in(buf: bytes, start: int, end: int) -> Iterator[tuple[int, int]]:
    """(begin, end) byte offsets of the lines of ``buf[start:end]`` (end excludes ``\\n``)."""
    pos = start
    while pos < end:
        nl = buf.find(b"\n", pos, end)
        stop = end if nl == -1 else nl
        yield pos, stop
        pos = stop + 1


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def scan(
    stream: BinaryIO,
    *,
    context_literals: Sequence[bytes | str] = (),
    before: int = WINDOW_BEFORE,
    after: int = WINDOW_AFTER,
    chunk_size: int = _CHUNK,
    max_window_lines: int = MAX_WINDOW_LINES,
    max_bytes: int = MAX_KEPT_BYTES,
    triggers: Sequence[bytes | str] = TRIGGERS,
    folded_triggers: Sequence[str] = (),
    barriers: Sequence[bytes | str] = (),
    threads: int | None = None,
) -> ScanResult:
    """Read ``stream`` to the end and return the windows around its candidate error lines.

    ``before`` lines of context precede each hit; ``after`` lines follow it, and the window
    goes on while lines continue a traceback or frame block, up to ``max_window_lines``
    (a million-frame trace is kept cut, not whole).  A line with one of ``barriers`` (also
    context literals: readiness phrases) ends the open window.  ``threads`` search chunks ahead
    (default: 2 when there is a second core; 0 searches in this thread only); the result
    does not depend on it.  Never raises on content; I/O errors of ``stream``
    propagate.
    """
    scanner = window_cutter(
        triggers=triggers,
        folded_triggers=folded_triggers,
        context_literals=context_literals,
        barriers=barriers,
        before=before,
        after=after,
        max_window_lines=max_window_lines,
        max_bytes=max_bytes,
    )
    size = max(256, chunk_size)
    read = _Counted(stream)
    pieces = _pieces(read, size)
    workers = _search_threads() if threads is None else max(0, threads)
    if workers == 0:
        for buf, lo, hi in pieces:
            scanner.feed(buf, lo, hi, masked=scanner.mask(buf, lo, hi))
        return scanner.result(read.total)
    # RE2 releases the GIL while it searches, so threads search the next chunks for their
    # first hit while this thread counts the current chunk's lines and builds its windows
    # (bench/scan_bench.py: the automaton is ~2/3 of a scan, line counting ~1/4).
    from concurrent.futures import ThreadPoolExecutor

    union = scanner.union
    ahead: deque[tuple[bytes, int, int, Any, Masked | None]] = deque()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for buf, lo, hi in pieces:
            big = hi - lo >= _AHEAD_MIN
            # masked with the stems known now: a stem learned later applies from a later piece
            masked = scanner.mask(buf, lo, hi)
            sbuf = buf if masked is None else masked.search_buf
            first = pool.submit(union.search, sbuf, lo, hi - 1) if big else None
            ahead.append((buf, lo, hi, first, masked))
            if len(ahead) > workers:
                _feed_searched(scanner, ahead.popleft())
        while ahead:
            _feed_searched(scanner, ahead.popleft())
    return scanner.result(read.total)


def window_cutter(
    *,
    triggers: Sequence[bytes | str] = TRIGGERS,
    folded_triggers: Sequence[str] = (),
    context_literals: Sequence[bytes | str] = (),
    barriers: Sequence[bytes | str] = (),
    before: int = WINDOW_BEFORE,
    after: int = WINDOW_AFTER,
    max_window_lines: int = MAX_WINDOW_LINES,
    max_bytes: int = MAX_KEPT_BYTES,
    max_window_bytes: int | None = None,
    on_window: Callable[[Window, bool], None] | None = None,
    on_context: Callable[[int, bytes], None] | None = None,
) -> WindowCutter:
    """A :class:`WindowCutter` with its literal sets compiled (see :func:`scan` for them)."""
    import re2  # lazy: only big inputs and streams need it

    options = re2.Options()
    options.log_errors = False  # a DFA out of its budget falls back quietly
    options.never_capture = True
    # The trigger union (500+ literals, some folded) outgrew RE2's default 8 MB DFA budget once
    # rules 269-276 added a dozen: its matches then fell back to the NFA, and placing each hit
    # went from ~4 us to ~380 us (a 32 MB flood log: 1.8 s -> 16 s). The cache grows lazily.
    options.max_mem = _RE2_MAX_MEM
    trig = [t.encode() if isinstance(t, str) else t for t in triggers if t]
    loose = [t.encode() for t in folded_triggers if t]
    bars = [b.encode() if isinstance(b, str) else b for b in barriers if b]
    ctx = [c.encode() if isinstance(c, str) else c for c in context_literals if c]
    ctx += [b for b in bars if b not in ctx]
    return WindowCutter(
        # one pass finds both sets; the matched literal says which set it came from
        FastSearch(re2.compile(trigger_pattern([*trig, *ctx], loose), options=options)),
        frozenset(trig) | frozenset(t.lower() for t in loose),
        FastSearch(re2.compile(trigger_pattern(trig, loose), options=options)),
        FastSearch(re2.compile(literal_pattern(ctx), options=options)) if ctx else None,
        max(0, before),
        max(0, after),
        max(1, max_window_lines),
        max_bytes,
        barrier=FastSearch(re2.compile(literal_pattern(bars), options=options)) if bars else None,
        on_window=on_window,
        on_context=on_context,
        max_window_bytes=max_window_bytes,
    )


class WindowCutter:
    """Cuts a log into windows around its candidate error lines: the one definition of
    where a crash window starts, grows, is cut and ends, for :func:`scan` (which keeps the
    windows) and :class:`diagnose.stream.StreamDiagnoser` (which diagnoses each as it
    closes).  Build one with :func:`window_cutter`; feed it whole lines in order.
    """

    def __init__(
        self,
        union: Any,
        trigger_set: frozenset[bytes],
        trigger: Any,
        context: Any,
        before: int,
        after: int,
        max_window_lines: int,
        max_bytes: int,
        *,
        barrier: Any = None,
        on_window: Callable[[Window, bool], None] | None = None,
        on_context: Callable[[int, bytes], None] | None = None,
        max_window_bytes: int | None = None,
    ) -> None:
        self.union = union
        self.trigger_set = trigger_set
        self.trigger = trigger
        self.context = context
        # Context lines that end the open window (readiness: what came before was lived
        # through); a window's leading context never reaches back past one.
        self.barrier = barrier
        self.before = before
        self.after = after
        self.max_window_lines = max_window_lines
        cap = max_bytes // 4 if max_window_bytes is None else max_window_bytes
        self.max_window_bytes = max(1, cap)
        self.kept = _Windows(max_bytes)
        # Where closed windows go: kept under the byte budget (the scan), or handed to the
        # caller as each completes (the stream diagnoses them one by one).
        self.on_window = on_window
        self.on_context = on_context
        self.floor = 0  # a window's leading context starts after this line
        self.block_end = 0  # the line that ended the last passed-over block (0: none yet)
        self.open: _Open | None = None
        self.line_base = 1  # number of the first line of the next buffer
        self.lo = 0  # where the current buffer's lines start
        self.tail: deque[bytes] = deque(maxlen=before)  # last lines of earlier buffers
        # A window filled up inside a block (a recursion dump of a million frames): the rest
        # of that block is passed over, or every trigger in it ("frame #") would open a
        # window of its own and one crash would read as dozens.
        self.overflow = False
        self.hits = 0
        self.context_lines: list[tuple[int, str]] = []
        self.repeat = RepeatCounter()
        self.repeats: dict[bytes, list[int]] = {}  # shape -> [count, first, last] not windowed
        # The last counted-only hits: a later window's leading context may take them in, and
        # then they are that window's lines, not counted twice.
        self.recent_counted: deque[tuple[int, bytes]] = deque(maxlen=max(1, before))
        self.flood = FloodMask(
            lambda text: union.search(text, 0, len(text)) is not None,
            lambda text: context is not None and context.search(text, 0, len(text)) is not None,
        )
        # stem -> [first, end): the lines of the pieces searched with it blanked (its copies
        # there are counted in bulk, and a window that takes one in takes it back)
        self.blanked: dict[bytes, list[int]] = {}

    def mask(self, buf: bytes, lo: int, hi: int) -> Masked | None:
        """The piece as the search should see it (``None``: as it is, no flood learned)."""
        return self.flood.mask(buf, lo, hi) if self.flood.stems else None

    def feed(
        self,
        buf: bytes,
        lo: int,
        hi: int,
        first_hit: Any = _NOT_SEARCHED,
        masked: Masked | None = None,
    ) -> None:
        """Process ``buf[lo:hi]``: whole lines, the last one ending in ``\\n`` at ``hi - 1``.

        ``first_hit`` is ``union.search(buf, lo, hi - 1)`` when a thread already ran it;
        ``masked`` is :meth:`mask`'s view of the piece, searched instead of ``buf``.
        """
        self.lo = lo
        end = hi - 1  # the final newline
        pos, line_no = lo, self.line_base
        sbuf: bytes | bytearray = buf
        in_use = masked.stems if masked is not None else ()
        for stem, lines in self.blanked.items():
            if stem not in in_use and lines[1] > line_no:
                lines[1] = line_no  # retired: copies from here on are counted one by one
        if masked is not None:
            sbuf = masked.search_buf
            for stem in in_use:
                self.blanked.setdefault(stem, [line_no, sys.maxsize])
            self._count_blanked(buf, lo, masked)
        if self.open is not None and not self.open.stopped:
            pos, line_no = self._extend(buf, pos, line_no, end)
        span = self.union.span
        trigger_set = self.trigger_set
        # A warning flood is this loop's whole cost: one pass per hit line, so the counted-only
        # path reads the next line only for a shape that had its windows.
        had_windows, repeats, recent = self.repeat.had_windows, self.repeats, self.recent_counted
        while pos < end:
            if self.overflow:
                pos, line_no = self._pass_block(buf, pos, line_no, end)
                if pos >= end:
                    break
            if first_hit is not _NOT_SEARCHED and (first_hit is None or first_hit.start() >= pos):
                # no hit in [lo, end) means none in [pos, end) either
                hs, he = (-1, -1) if first_hit is None else (first_hit.start(), first_hit.end())
            else:
                hs, he = span(sbuf, pos, end)
            first_hit = _NOT_SEARCHED
            if hs < 0:
                break
            start = buf.rfind(b"\n", pos, hs) + 1 or pos
            line_no += buf.count(b"\n", pos, start)
            stop = buf.find(b"\n", hs)
            found = buf[hs:he]
            if found not in trigger_set and found.lower() not in trigger_set:
                # a context literal came first on this line; a trigger may still follow
                if self.barrier is not None and self.barrier.search(buf, start, stop) is not None:
                    self._barrier(line_no)
                self._note_context(line_no, buf[start:stop])
                if self.trigger.search(sbuf, he, stop) is None:
                    pos, line_no = stop + 1, line_no + 1
                    continue
            shape = had_windows(buf[start:stop])
            if shape is not None:
                following = buf.find(b"\n", stop + 1, end + 1) if stop < end else -1
                if following >= 0 and not continues_block(buf[stop + 1 : following]):
                    counted = repeats.get(shape)
                    if counted is None:
                        repeats[shape] = [1, line_no, line_no]
                    else:
                        counted[0] += 1
                        counted[2] = line_no
                        if counted[0] == LEARN_FLOOD_AFTER:
                            self.flood.learn(buf[start:stop], hs - start, he - start, shape)
                    recent.append((line_no, shape))
                    pos, line_no = stop + 1, line_no + 1
                    continue
            self.hits += 1
            self._open_at(buf, start, line_no)
            pos, line_no = self._extend(buf, start, line_no, end, hit_first=True)
        self._remember_tail(buf, end)
        # lines before ``pos`` were counted on the way; count the rest in one pass
        self.line_base = line_no + buf.count(b"\n", pos, hi)
        if masked is not None:
            for stem, (_, _, last) in masked.found.items():
                # the last copy is near the piece's end in a flood: count from that end
                at = self.line_base - 1 - buf.count(b"\n", last, end)
                counted = self.repeats[self.flood.shape_of[stem]]
                counted[2] = max(counted[2], at)

    def _count_blanked(self, buf: bytes, lo: int, masked: Masked) -> None:
        """Count the stem copies blanked from this piece as their shapes' repeats, before
        any window reads the piece: a window that takes a copy in takes it back
        (:meth:`_take_back`), and :meth:`feed` sets the last line once it is known."""
        for stem, (count, first, _) in masked.found.items():
            shape = self.flood.shape_of[stem]
            at = self.line_base + buf.count(b"\n", lo, first)  # near the start in a flood
            counted = self.repeats.get(shape)
            if counted is None:
                self.repeats[shape] = [count, at, at]
            else:
                counted[0] += count
                counted[1] = min(counted[1], at)

    def _take_back(self, line_no: int, raw: bytes) -> None:
        """A window holds line ``line_no``: its blanked stem copies are not counted repeats."""
        for stem, (first, end) in self.blanked.items():
            copies = self.flood.copies_in(stem, raw) if first <= line_no < end else 0
            shape = self.flood.shape_of[stem]
            counted = self.repeats.get(shape)
            if copies and counted is not None:
                counted[0] -= copies
                if counted[0] <= 0:
                    del self.repeats[shape]

    def _uncount_from(self, first_line: int) -> None:
        """Take back the counted-only hits from ``first_line`` on: a window holds them now."""
        while self.recent_counted and self.recent_counted[-1][0] >= first_line:
            _, shape = self.recent_counted.pop()
            counted = self.repeats[shape]
            counted[0] -= 1
            if counted[0] == 0:
                del self.repeats[shape]

    def _open_at(self, buf: bytes, start: int, line_no: int) -> None:
        """Start a window at the hit on ``line_no``, or continue the open one."""
        want = max(1, line_no - self.before, self.floor + 1)
        prev = self.open
        if prev is not None and prev.last >= want - 1:
            want = prev.last + 1
        context = self._lines_before(buf, start, max(0, line_no - want), line_no)
        self._uncount_from(line_no - len(context))
        if prev is not None and prev.last + 1 == line_no - len(context):
            prev.stopped = False
            prev.lines.extend(context)
            prev.size += sum(len(s) for s in context)
            prev.last = line_no - 1
            return
        self._close()
        self.open = _Open(line_no - len(context), context, sum(len(s) for s in context))

    def _lines_before(self, buf: bytes, start: int, count: int, line_no: int) -> list[str]:
        """The ``count`` raw lines before offset ``start`` (line ``line_no``), from earlier
        buffers if needed."""
        out: list[bytes] = []
        pos, lo = start, self.lo
        while len(out) < count and pos > lo:
            prev = buf.rfind(b"\n", lo, pos - 1) + 1 or lo
            out.append(buf[prev : pos - 1])
            pos = prev
        if len(out) < count and pos == lo:
            need = count - len(out)
            out.extend(reversed(list(self.tail)[-need:]))
        out.reverse()
        if self.blanked:
            for number, raw in enumerate(out, line_no - len(out)):
                self._take_back(number, raw)
        return [_decode(x) for x in out]

    def _extend(
        self, buf: bytes, pos: int, line_no: int, end: int, hit_first: bool = False
    ) -> tuple[int, int]:
        """Append lines from ``pos`` to the open window while they belong to it."""
        win = self.open
        if win is None:
            return pos, line_no
        search = self.trigger.search
        had_windows = self.repeat.had_windows
        context = self.context
        blanks = 0
        for begin, stop in _lines_in(buf, pos, end + 1):
            raw = buf[begin:stop]
            if hit_first:
                hit, hit_first = True, False
            else:
                # a flood's copy keeps no window open (a warning every few lines would hold
                # one open through a whole log): each sighting in a window counts as one of
                # its shape's windows, and past them it is no hit, unless it ends a block
                # (a traceback's exception line, however often that crash repeats)
                hit = search(raw) is not None and (
                    win.active == line_no - 1 or had_windows(raw) is None
                )
                self.hits += hit
                if context is not None and context.search(raw) is not None:
                    if self.barrier is not None and self.barrier.search(raw) is not None:
                        # the window ends before it; the line itself opens none
                        self._stop(begin, line_no)
                        self._barrier(line_no)
                        self._note_context(line_no, raw)
                        return stop + 1, line_no + 1
                    self._note_context(line_no, raw)
            if hit:
                win.owed = self.after
                win.active = line_no
                blanks = 0
            elif not raw.strip():
                blanks += 1
                if blanks > 2 and win.owed <= 0:
                    return self._stop(begin, line_no)
                win.owed -= 1
            elif win.owed > 0:
                win.owed -= 1
                blanks = 0
                if continues_block(raw):
                    win.active = line_no
            elif continues_block(raw):
                win.active = line_no
                blanks = 0
            else:
                return self._stop(begin, line_no)
            if self.blanked:
                self._take_back(line_no, raw)
            text = _decode(raw)
            win.lines.append(text)
            win.size += len(text)
            win.last = line_no
            line_no += 1
            if len(win.lines) >= self.max_window_lines or win.size > self.max_window_bytes:
                self._close(cut=True)
                self.overflow = True
                return stop + 1, line_no
        return end + 1, line_no

    def _pass_block(self, buf: bytes, pos: int, line_no: int, end: int) -> tuple[int, int]:
        """Pass over the rest of an overflowed block; stop at the first line that ends it.

        That line is read as usual: a Python traceback's exception line comes last, so a
        trigger there opens a window whose context is the block's last lines.  The lines
        passed over are not counted as hits; context lines among them are still noted
        (one automaton pass over the span, not a search a line).
        """
        first, start, stop_at = line_no, pos, end + 1
        while pos <= end:
            nl = buf.find(b"\n", pos, end + 1)
            stop = end + 1 if nl == -1 else nl
            if not continues_block(buf[pos:stop]):
                self.overflow = False
                self.block_end = line_no
                stop_at = pos
                break
            pos, line_no = stop + 1, line_no + 1
        if self.context is not None:
            self._note_context_in(buf, start, stop_at, first)
        return stop_at, line_no

    def _note_context_in(self, buf: bytes, start: int, stop: int, line_no: int) -> None:
        """Note each context-literal line of ``buf[start:stop]`` (whole lines from ``line_no``)."""
        pos = start
        while pos < stop:
            m = self.context.search(buf, pos, stop)
            if m is None:
                return
            begin = buf.rfind(b"\n", pos, m.start()) + 1 or pos
            line_no += buf.count(b"\n", pos, begin)
            nl = buf.find(b"\n", m.start(), stop)
            end = stop if nl == -1 else nl
            self._note_context(line_no, buf[begin:end])
            pos, line_no = end + 1, line_no + 1

    def _stop(self, begin: int, line_no: int) -> tuple[int, int]:
        """End the open window before the line at ``begin``; drop its trailing blank lines."""
        win = self.open
        if win is not None:
            win.stopped = True
            while len(win.lines) > 1 and not win.lines[-1].strip():
                win.size -= len(win.lines.pop())
                win.last -= 1
        return begin, line_no

    def _close(self, cut: bool = False) -> None:
        """The open window is complete: keep it, or hand it to ``on_window`` (``cut``: it
        filled up inside a block whose rest is passed over)."""
        win = self.open
        if win is not None:
            self.open = None
            self.floor = max(self.floor, win.last)
            if self.on_window is None:
                self.kept.add(Window(win.first, win.lines), win.size)
            else:
                self.on_window(Window(win.first, win.lines), cut)

    def _barrier(self, line_no: int) -> None:
        """A barrier line (readiness) ends what is open; no later context reaches back past it."""
        self._close()
        self.floor = max(self.floor, line_no)

    def settle(self, quiet: int) -> None:
        """Close the open window once it has ended and ``quiet`` lines passed since its last
        hit or block line, for a caller that reports each window as it completes (the
        stream).  A window closes anyway when a later hit opens one out of its reach; this
        closes it without waiting for one."""
        win = self.open
        if win is not None and win.stopped and self.line_base - 1 - win.active >= quiet:
            self._close()

    def flush(self) -> None:
        """Close the open window now, ended or not (the stream went quiet, or ended)."""
        self._close()

    def counted(self) -> int:
        """Hit lines counted, not windowed, so far (a warning flood's copies)."""
        return sum(n for n, _, _ in self.repeats.values())

    def _note_context(self, line_no: int, raw: bytes) -> None:
        """Hand one context-literal line to ``on_context``, or keep it (up to
        ``_MAX_CONTEXT_LINES`` of them)."""
        if self.on_context is not None:
            self.on_context(line_no, raw)
        else:
            self.keep_context(line_no, raw)

    def keep_context(self, line_no: int, raw: bytes) -> None:
        """Keep one context-literal line for :meth:`result` (up to ``_MAX_CONTEXT_LINES``)."""
        if len(self.context_lines) < _MAX_CONTEXT_LINES:
            self.context_lines.append((line_no, _decode(raw)))

    def _remember_tail(self, buf: bytes, end: int) -> None:
        """Keep the last ``before`` lines for a window that opens early in the next buffer."""
        if not self.before:
            return
        pieces: list[bytes] = []
        pos, lo = end, self.lo
        while len(pieces) < self.before:
            prev = buf.rfind(b"\n", lo, pos) + 1 or lo
            pieces.append(buf[prev:pos])
            if prev == lo:
                break
            pos = prev - 1
        self.tail.extend(reversed(pieces))

    def result(self, total_bytes: int) -> ScanResult:
        """Close the open window and return everything kept."""
        self._close()
        return self.kept_so_far(total_bytes)

    def kept_so_far(self, total_bytes: int) -> ScanResult:
        """Everything kept from the windows closed so far (the open one stays open)."""
        return ScanResult(
            windows=self.kept.all(),
            context=tuple(self.context_lines),
            total_lines=self.line_base - 1,
            total_bytes=total_bytes,
            hits=self.hits,
            dropped_windows=self.kept.dropped,
            repeated=tuple((k, n, a, b) for k, (n, a, b) in self.repeats.items()),
        )


class _Counted:
    """A binary stream's ``read``, counting the bytes it returned."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.total = 0

    def read(self, size: int) -> bytes:
        data = self.stream.read(size)
        self.total += len(data)
        return data


def _pieces(stream: _Counted, size: int) -> Iterator[tuple[bytes, int, int]]:
    """The stream as ``(buf, lo, hi)`` pieces of whole lines, in order, ready for ``feed``.

    A chunk's first line is finished with the carried rest of the previous chunk as a piece
    of its own, so the big chunk is never copied; a line longer than ``MAX_LINE`` gives its
    head and the rest of it is skipped.
    """
    carry = b""  # the unfinished last line of the previous chunk
    skipping = False  # inside the cut-off rest of an over-long line
    while True:
        data = stream.read(size)
        if not data:
            break
        start = 0
        if skipping:
            nl = data.find(b"\n")
            if nl == -1:
                continue
            start, skipping = nl + 1, False
        if carry:
            nl = data.find(b"\n", start)
            if nl == -1:
                carry, skipping = carry + data[start:], False
            else:
                line = carry + data[start : nl + 1]
                yield line, 0, len(line)
                carry, start = b"", nl + 1
        if not carry:
            cut = data.rfind(b"\n", start)
            if cut == -1:
                carry = data[start:]
            else:
                yield data, start, cut + 1
                carry = data[cut + 1 :]
        if len(carry) >= MAX_LINE:
            head = carry[:MAX_LINE] + b"\n"
            yield head, 0, len(head)
            carry, skipping = b"", True
    if carry:
        yield carry + b"\n", 0, len(carry) + 1


_POOL: Any = None


def search_pool() -> Any:
    """The process's threads for searching ahead (created on first use); ``None`` on one core."""
    global _POOL
    if _POOL is None:
        workers = _search_threads()
        if workers == 0:
            return None
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="crashkb-search")
    return _POOL


def _search_threads() -> int:
    """Threads that search ahead: two wherever there is a second core, else none.

    Two, not one, even on two cores: this thread's share (reading, counting lines) is
    about a third of a chunk's search, so with one search thread the cores idle a third
    of the time (measured on 2 cores: 2.6 s alone, 2.4 s with one, 1.7 s with two).
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return 2 if (cores or 1) > 1 else 0


def _feed_searched(scanner: WindowCutter, item: tuple[bytes, int, int, Any, Masked | None]) -> None:
    buf, lo, hi, future, masked = item
    if future is None:
        scanner.feed(buf, lo, hi, masked=masked)
    else:
        scanner.feed(buf, lo, hi, first_hit=future.result(), masked=masked)
