"""Diagnose a log while it is being written: one :class:`Diagnosis` per crash, as it completes.

:func:`iter_diagnoses` consumes a file object (a growing file, a pipe from ``kubectl logs -f``
or ``journalctl -f``, a socket) or any iterable of lines, and yields a diagnosis as soon as
each crash region is complete.  :class:`StreamDiagnoser` is the same engine driven by hand
(``feed`` / ``idle`` / ``close``), for callers that own the reading loop (``--follow``, the
logging handler).

How it stays cheap and bounded:

* Windows are cut by the same :class:`diagnose.ingest.scan.WindowCutter` as the big-file
  scan: healthy lines cost one pass of RE2's literal automaton over each chunk (the
  triggers, the rule base's literal guards and the readiness phrases); only lines near a
  hit are decoded.  A window opens at a hit with ``before`` lines of context, grows while
  lines hit, continue a traceback (indented, ``File "..."``, ``frame #N``) or fall within
  ``after`` lines of a hit, and takes in a later hit whose context reaches it.  It is
  *complete* when a hit out of its reach opens another, after ``settle_lines`` quiet lines,
  when the stream goes quiet (``idle``), at a readiness line, or at the end; then only that
  window is normalised, split into regions and matched, and its memory is released.  A
  window is cut at ``max_window_lines`` / ``max_window_bytes`` and the rest of its block
  passed over, so memory never grows with the log.
* Log-wide context (server args, GPUs, versions) comes from the first ``context_head_lines``
  lines, where servers print it, capped at ``_MAX_CONTEXT_LINES`` lines.
* The same failure printed by several ranks in separate windows is reported once: a
  diagnosis whose cause and normalised signature (:func:`diagnose.signature.signature`) were
  already reported within ``dedupe_lines`` lines is dropped and counted in ``stats``; one
  the program survived is reported once per stream.
* A hit line whose shape (numbers masked) already opened ``REPEAT_WINDOWS`` windows opens
  none, unless the next line continues a block, and a flood's learned stem is blanked from
  the search in bulk (:mod:`diagnose.ingest.flood`): a warning flood is counted in
  ``stats.counted``, not diagnosed 100,000 times.
"""

from __future__ import annotations

import io
import os
import select
import stat
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple, TypeAlias

from diagnose.ingest.read import STREAM_HEAD_BYTES, whole_text
from diagnose.ingest.scan import (
    MAX_LINE,
    MAX_WINDOW_BYTES,
    MAX_WINDOW_LINES,
    WINDOW_AFTER,
    WINDOW_BEFORE,
    FastSearch,
    Window,
    literal_pattern,
    search_pool,
    window_cutter,
)
from diagnose.records import record

if TYPE_CHECKING:
    from concurrent.futures import Future

    from diagnose.context import LogContext
    from diagnose.ingest.flood import Masked
    from diagnose.ingest.scan import WindowCutter
    from diagnose.report import Diagnosis

__all__ = [
    "Ready",
    "StreamDiagnoser",
    "StreamEvent",
    "StreamStats",
    "is_fatal_crash",
    "iter_diagnoses",
    "iter_events",
    "read_chunks",
]

_MAX_CONTEXT_LINES = 500
_CHUNK = 4 << 20
_FILE_CHUNK = 16 << 20
# A file chunk this big has its first hit searched ahead in a thread (see _search_ahead).
_SPLIT_MIN = 1 << 20
_BATCH_SECONDS = 0.1

# Readiness phrases that mean "serving now".  sglang's uvicorn prints "Application startup
# complete." BEFORE its warm-up request runs (sglang http_server.py _wait_and_warmup), and
# only "fired up" follows a successful warm-up, so on an sglang log only that one counts.
_SGLANG_MARKERS = (b"sglang", b"SGLang", b"ServerArgs(")


def _ready_phrases() -> tuple[str, ...]:
    """The readiness phrases (kb/vocab/ready.toml, one list for every reader)."""
    from diagnose.context import ready_phrases

    return ready_phrases()


def _serving(phrase: str, sglang: bool) -> bool:
    """Whether ``phrase`` means the server takes requests now.

    A phrase marked ``serving = false`` is printed before that (uvicorn's "Started server
    process", vLLM's "Starting vLLM API server"); on an sglang log only a phrase marked
    ``engine = "sglang"`` counts, as uvicorn's lines come before sglang's warm-up.
    """
    from diagnose.vocab import vocabulary

    term = vocabulary("ready").search(phrase)
    if term is None:
        return False
    if sglang:
        return bool(term.attribute("engine") == "sglang")
    return bool(term.attribute("serving", True))


@record
class Ready:
    """A readiness line: ``phrase`` is the known phrase it contains.

    ``serving`` is True when the phrase means the server takes requests now (see
    :func:`_serving`; on an sglang log only "fired up", which follows the warm-up).
    """

    line: int
    text: str
    phrase: str
    serving: bool


#: What the stream yields: a crash's diagnosis, or a readiness line.
StreamEvent: TypeAlias = "Diagnosis | Ready"


@record(frozen=False)
class StreamStats:
    """Counters of one stream: lines and bytes seen, windows diagnosed, reports dropped."""

    lines: int = 0
    bytes: int = 0
    windows: int = 0
    diagnoses: int = 0
    suppressed: int = 0
    cut_windows: int = 0
    #: Hit lines of a shape that already had its windows (a warning flood): counted only.
    counted: int = 0


def is_fatal_crash(diagnosis: Diagnosis) -> bool:
    """True when a diagnosis reports a crash that ends the process, not a survived warning.

    A fatal finding whose every evidence line is also evidence of a non-fatal finding is
    text inside a survived report (an autotuner's "Skipping tactic ... Assertion failed"
    quotes the failure it caught, NVIDIA/TensorRT-LLM#894), so it is not the crash.  With no
    rule at all, a lone error line is not proof of death; any other region kind is.
    """
    if diagnosis.fatal is not True:
        return False
    benign = {e.line for f in diagnosis.findings if not f.fatal for e in f.evidence}
    fatal = [f for f in diagnosis.findings if f.fatal]
    if fatal:
        return any(not f.evidence or any(e.line not in benign for e in f.evidence) for f in fatal)
    return any(r.kind != "error-line" and r.message_line not in benign for r in diagnosis.crashes)


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


class _Ahead(NamedTuple):
    """A chunk's whole lines ``[lo, hi)`` with their first hit searched in a thread."""

    lo: int
    hi: int
    first: Future[Any]
    masked: Masked | None


class StreamDiagnoser:
    """The incremental engine behind :func:`iter_diagnoses`.

    ``feed`` takes any chunk of bytes or text (partial lines are held until their newline);
    ``idle`` says the stream went quiet, which completes an open crash window; ``close``
    ends the stream; ``restart`` says the file was truncated or replaced (line numbers start
    again at 1).  Each returns the events that became ready, in line order.  Not
    thread-safe: one engine per stream.
    """

    # reset by _reset_position (a restarted file starts them afresh)
    _carry: bytes
    _skipping: bool
    _cutter: WindowCutter
    _held: Window | None

    def __init__(
        self,
        *,
        source: str = "<stream>",
        settle_lines: int = 40,
        before: int = WINDOW_BEFORE,
        after: int = WINDOW_AFTER,
        dedupe_lines: int = 2_000,
        max_window_lines: int = MAX_WINDOW_LINES,
        max_window_bytes: int = MAX_WINDOW_BYTES,
        context_head_lines: int = 20_000,
        rule_dirs: Sequence[Path] = (),
        summary: bool = False,
    ) -> None:
        """Set the window and de-duplication limits (line counts); see the module docstring.

        ``summary``: also keep what :meth:`summary` needs for a whole-log verdict (the
        head's first ``STREAM_HEAD_BYTES`` and the windows, under the big-file scan's byte
        budget), so memory stays bounded by settings.
        """
        import re2  # lazy: only streaming needs the automaton here

        self.source = source
        self.settle = max(1, settle_lines)
        self.before = max(0, before)
        self.after = max(0, after)
        self.dedupe_lines = max(0, dedupe_lines)
        self.max_window_lines = max(1, max_window_lines)
        self.max_window_bytes = max(1024, max_window_bytes)
        self.context_head_lines = max(0, context_head_lines)
        self.rule_dirs = tuple(Path(d) for d in rule_dirs)
        self.keeps_summary = summary
        self._stats = StreamStats()
        self._counted_before = 0  # flood copies counted in files before a restart
        phrases = _ready_phrases()
        self._phrases = tuple((p, p.encode()) for p in phrases)
        from diagnose.engine import rule_triggers

        self._folded = rule_triggers(self.rule_dirs)
        from diagnose.context import CONTEXT_LITERALS

        self._context_re = FastSearch(re2.compile(literal_pattern(CONTEXT_LITERALS)))
        self._out: list[Diagnosis | Ready] = []  # events of the call under way, in line order
        self._reset_position()
        self._context_raw: list[tuple[int, str]] = []
        self._head_context: LogContext | None = None
        self._sglang = False
        self._ready_lines: list[tuple[int, str]] = []
        self._seen: dict[str, int] = {}

    # ------------------------------------------------------------------ public interface

    @property
    def stats(self) -> StreamStats:
        """This stream's counters.  Lines and flood copies are the cutter's own counts, read
        when asked rather than copied after every chunk fed (a sum over every repeated shape)."""
        self._stats.lines = self._cutter.line_base - 1
        self._stats.counted = self._counted_before + self._cutter.counted()
        return self._stats

    def feed(self, data: bytes | str) -> list[Diagnosis | Ready]:
        """Process a chunk; return the diagnoses and readiness lines it completed."""
        raw = data.encode("utf-8", "replace") if isinstance(data, str) else bytes(data)
        return self._feed(raw, None)

    def summary(self) -> Diagnosis:
        """The whole-log verdict of what was fed, from the windows completed so far (call
        after :meth:`close` for the whole stream; after :meth:`restart`, of the new file).

        Built as the big-file scan builds its verdict (:func:`diagnose.pipeline.parse_windows`):
        every window parsed together, so one root cause with its cascade, log-scope rules
        and survived failures are judged across windows, and a log gives the same verdict
        streamed as read from a file.  An input no bigger than the whole-input limit (its
        head holds every byte) is one window, read whole as such a file is.  Needs
        ``summary=True``.
        """
        if not self.keeps_summary:
            raise ValueError("StreamDiagnoser(summary=True) keeps what a summary needs")
        from diagnose.engine import diagnose_parsed, rule_wording
        from diagnose.pipeline import parse_text, parse_windows

        wording = rule_wording(self.rule_dirs)
        if self._head_whole:
            # A small input is one window, as a file or stdin of the same bytes is read whole
            # (diagnose.ingest.read.open_bounded): lines no trigger marks (a rule's regex with
            # no literal guard, a non-ASCII wording) are judged as they are there.
            whole = parse_text(whole_text(self._head), self.source, wording)
            return diagnose_parsed(whole, rule_dirs=self.rule_dirs)
        result = self._cutter.kept_so_far(self._stats.bytes)
        head = _decode(bytes(self._head))
        parsed = parse_windows(self.source, head, result, wording)
        return diagnose_parsed(parsed, rule_dirs=self.rule_dirs)

    def _feed(self, raw: bytes, ahead: _Ahead | None) -> list[Diagnosis | Ready]:
        """:meth:`feed` for bytes; ``ahead`` is :meth:`_search_ahead`'s search of ``raw``.

        The chunk is processed where it lies: the carried partial line is finished with the
        chunk's first line as a small piece of its own, so the chunk is never copied.
        """
        if not raw:
            return []
        self._stats.bytes += len(raw)
        lo = 0
        if self._skipping:
            nl = raw.find(b"\n")
            if nl == -1:
                return self._take()
            lo, self._skipping = nl + 1, False
        if self._carry or ahead is not None:
            nl = raw.find(b"\n", lo)
            if nl == -1:
                self._carry += raw[lo:]
                lo = len(raw)
            else:
                line = self._carry + raw[lo : nl + 1]
                self._carry, lo = b"", nl + 1
                self._process(line, 0, len(line))
        cut = raw.rfind(b"\n", lo)
        if cut != -1:
            if ahead is not None and ahead.lo == lo and ahead.hi == cut + 1:
                self._process(raw, lo, cut + 1, ahead)
            else:
                self._process(raw, lo, cut + 1)
            lo = cut + 1
        if lo < len(raw):
            self._carry += raw[lo:]
        if len(self._carry) >= MAX_LINE:
            self._process(self._carry[:MAX_LINE] + b"\n", 0, MAX_LINE + 1)
            self._carry, self._skipping = b"", True
        self._cutter.settle(self.settle)
        return self._take()

    def _search_ahead(self, raw: bytes) -> _Ahead | None:
        """Start searching ``raw``'s whole lines after its first (what :meth:`_feed` will
        process in place) for their first hit in a thread, before the chunk before it is
        processed (RE2 runs without the GIL)."""
        pool = search_pool()
        if pool is None or len(raw) < _SPLIT_MIN:
            return None
        lo, cut = raw.find(b"\n") + 1, raw.rfind(b"\n")
        if lo == 0 or cut + 1 <= lo:
            return None
        cutter = self._cutter
        masked = cutter.mask(raw, lo, cut + 1)
        sbuf = raw if masked is None else masked.search_buf
        return _Ahead(lo, cut + 1, pool.submit(cutter.union.search, sbuf, lo, cut), masked)

    def idle(self) -> list[Diagnosis | Ready]:
        """The stream went quiet: complete the open crash window (a held partial line waits)."""
        self._cutter.flush()
        self._release_held()
        return self._take()

    def close(self) -> list[Diagnosis | Ready]:
        """End of stream: the last partial line counts as a line; complete every window."""
        if self._carry:
            line, self._carry = self._carry + b"\n", b""
            self._process(line, 0, len(line))
        return self.idle()

    def restart(self) -> list[Diagnosis | Ready]:
        """The file was truncated or rotated: finish what is open, then count from line 1."""
        out = self.close()
        self._counted_before += self._cutter.counted()
        self._reset_position()
        # Line numbers, readiness and the head belong to the old file: a ready line kept
        # from it would mark the new file's crashes as survived (verdict.decide).
        self._context_raw.clear()
        self._ready_lines.clear()
        self._head_context = None
        self._sglang = False
        self._seen.clear()
        return out

    # ------------------------------------------------------------------ the windows

    def _reset_position(self) -> None:
        self._carry = b""
        self._skipping = False
        self._head = bytearray()  # the first STREAM_HEAD_BYTES, kept for summary()
        # Whether the head holds every byte fed since the (re)start: then the input is small
        # enough to be read whole, and summary() reads it as a file of those bytes is read.
        self._head_whole = True
        # The one window cutter (diagnose.ingest.scan): where a crash window starts, grows,
        # is cut and ends is decided there for the stream and the big-file scan alike.  A
        # readiness line ends the open window (what came before it was lived through).
        self._cutter = window_cutter(
            folded_triggers=self._folded,
            barriers=[phrase for phrase, _ in self._phrases],
            before=self.before,
            after=self.after,
            max_window_lines=self.max_window_lines,
            max_window_bytes=self.max_window_bytes,
            on_window=self._on_window,
            on_context=self._on_ready,
        )
        # A window cut inside a block (a recursion dump of a million frames), held until the
        # block ends: a Python traceback's exception line comes after its frames, and the
        # two make one diagnosis (see _on_window).
        self._held = None

    def _process(self, buf: bytes, lo: int, end: int, ahead: _Ahead | None = None) -> None:
        """Handle ``buf[lo:end]``: whole lines, each ending in ``\\n``."""
        cutter = self._cutter
        if cutter.line_base <= self.context_head_lines:
            self._collect_context(buf, lo, end)
        if self.keeps_summary and self._head_whole:
            room = STREAM_HEAD_BYTES - len(self._head)
            self._head += buf[lo : min(end, lo + room)]
            self._head_whole = end - lo <= room
        if ahead is None:
            cutter.feed(buf, lo, end, masked=cutter.mask(buf, lo, end))
        else:
            cutter.feed(buf, lo, end, first_hit=ahead.first.result(), masked=ahead.masked)

    def _on_window(self, window: Window, cut: bool) -> None:
        """A window closed: diagnose it, or hold it when it was cut inside a block."""
        self._stats.windows += 1
        if self.keeps_summary:  # kept as the scan keeps its windows, for summary()
            self._cutter.kept.add(window, sum(len(line) + 1 for line in window.lines))
        if cut:
            self._stats.cut_windows += 1
            self._release_held()
            self._held = window
            return
        held, self._held = self._held, None
        if held is not None:
            # The window that holds the line ending the cut block (a traceback's exception
            # line, after its frames) is one crash with it.
            block_end = self._cutter.block_end
            if window.first_line <= block_end < window.first_line + len(window.lines):
                self._report([held, window])
                return
            self._report([held])
        self._report([window])

    def _release_held(self) -> None:
        """Diagnose a held cut window on its own (its block ended without a line of its own)."""
        held, self._held = self._held, None
        if held is not None:
            self._report([held])

    def _take(self) -> list[Diagnosis | Ready]:
        out, self._out = self._out, []
        return out

    # ------------------------------------------------------------------ context and readiness

    def _collect_context(self, buf: bytes, lo: int, end: int) -> None:
        """Keep the head's lines that carry log-wide facts (server args, GPUs, versions)."""
        search = self._context_re.search
        pos, line_no = lo, self._cutter.line_base
        while len(self._context_raw) < _MAX_CONTEXT_LINES and line_no <= self.context_head_lines:
            m = search(buf, pos, end)
            if m is None:
                return
            start = buf.rfind(b"\n", pos, m.start()) + 1 or pos
            stop = buf.find(b"\n", m.start())
            line_no += buf.count(b"\n", pos, start)
            if line_no > self.context_head_lines:
                return
            raw = buf[start:stop][:65536]
            if not self._sglang and any(k in raw for k in _SGLANG_MARKERS):
                self._sglang = True
            self._context_raw.append((line_no, _decode(raw)))
            self._head_context = None
            pos, line_no = stop + 1, line_no + 1

    def _on_ready(self, line_no: int, raw: bytes) -> None:
        """Record a readiness line and emit its event (the cutter already closed the window
        before it; a held cut window goes out first, to keep line order)."""
        self._release_held()
        if self.keeps_summary:
            self._cutter.keep_context(line_no, raw)
        text = _decode(raw[:4096])
        if len(self._ready_lines) < 64:
            self._ready_lines.append((line_no, text))
            self._head_context = None
        phrase = next((p for p, b in self._phrases if b in raw), "")
        serving = _serving(phrase, self._sglang)
        self._out.append(Ready(line_no, text.strip(), phrase, serving))

    def _context(self) -> LogContext:
        """The head's log-wide context (computed once per change, not once per window)."""
        if self._head_context is None:
            from diagnose.context import extract_context
            from diagnose.ingest.normalize import normalize

            lines = [
                line
                for number, raw in (*self._context_raw, *self._ready_lines)
                for line in normalize(raw, first_line=number)
            ]
            self._head_context = extract_context(lines)
        return self._head_context

    # ------------------------------------------------------------------ completion

    def _report(self, windows: list[Window]) -> None:
        """Diagnose a completed window (one or two pieces) and add its report, unless the
        same failure was just reported."""
        end = windows[-1].first_line + len(windows[-1].lines) - 1
        diagnosis = self._diagnose([(w.first_line, w.lines) for w in windows], end)
        if diagnosis is None:
            return
        from diagnose.signature import signature

        key = f"{diagnosis.cause}\x00{signature(diagnosis)}"
        last = self._seen.get(key)
        # A failure the program survived (a warning a loaded server repeats) is reported
        # once per stream; a fatal one again after dedupe_lines (a restarted server's crash).
        if last is not None and (not diagnosis.fatal or end - last <= self.dedupe_lines):
            self._seen[key] = end
            self._stats.suppressed += 1
            return
        if len(self._seen) > 4096:  # forget reports older than the de-duplication span
            self._seen = {k: v for k, v in self._seen.items() if end - v <= self.dedupe_lines}
        self._seen[key] = end
        self._stats.diagnoses += 1
        self._out.append(diagnosis)

    def _diagnose(self, segments: list[tuple[int, list[str]]], end: int) -> Diagnosis | None:
        """Parse a window (one or two pieces: first line, lines) and diagnose it; ``None``
        when it holds no crash region and no log-scope rule names a cause in it."""
        from diagnose.context import extract_context
        from diagnose.engine import diagnose_parsed
        from diagnose.ingest.normalize import normalize
        from diagnose.pipeline import Parsed
        from diagnose.regions import find_regions

        lines = tuple(
            line
            for first, raw_lines in segments
            for line in normalize("\n".join(raw_lines), first_line=first)
        )
        from diagnose.engine import rule_wording
        from diagnose.roles import assign as assign_roles

        regions = assign_roles(find_regions(lines, rule_wording(self.rule_dirs)))
        context = _merge(self._context(), extract_context(lines))
        parsed = Parsed(self.source, lines, regions, context, end, streamed=True)
        diagnosis = diagnose_parsed(parsed, rule_dirs=self.rule_dirs)
        if regions:
            return diagnosis
        # No crash region, but a log-scope rule may still name a cause from lines no region
        # holds ("Reason: OOMKilled" in a pod's status, torch's hint line naming a capture
        # error, torch's warning that the GPU is outside its build's range): the whole-log
        # path reports it, fatal or not, so the stream does too.
        return diagnosis if diagnosis.primary is not None else None


def _merge(head: LogContext, window: LogContext) -> LogContext:
    """Head facts win for settings (they are the configuration); the window's memory wins
    (the last reading is what the crash saw); lists are joined without repeats."""
    from types import MappingProxyType

    def join(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
        seen = {f.value for f in a}
        return a + tuple(f for f in b if f.value not in seen)

    if window.is_empty():
        return head
    return replace(
        head,
        server_args=MappingProxyType({**window.server_args, **head.server_args}),
        versions=MappingProxyType({**window.versions, **head.versions}),
        memory=MappingProxyType({**head.memory, **window.memory}),
        gpus=join(head.gpus, window.gpus),
        archs=join(head.archs, window.archs),
        ready=join(head.ready, window.ready),
    )


# ---------------------------------------------------------------------- iteration


def iter_events(
    source: IO[bytes] | IO[str] | Iterable[str] | Iterable[bytes],
    *,
    quiet: float | None = 2.0,
    chunk_size: int | None = None,
    batch_lines: int = 512,
    **options: Any,
) -> Iterator[Diagnosis | Ready]:
    """Yield crash diagnoses and readiness lines from ``source`` as they complete.

    ``source`` is a file object (regular file, pipe, socket, stdin) or any iterable of
    lines.  For a pipe or socket, ``quiet`` seconds without new data complete the open
    crash window, so the last crash is reported even when the writer goes silent without
    closing (a regular file or a plain iterable has no clock: its windows complete on
    ``settle_lines`` quiet lines or at the end).  An iterable's lines are matched in batches
    of up to ``batch_lines``, each flushed at the latest when a line arrives 0.1 s after the
    batch began.  A regular file is read in 16 MiB chunks (``chunk_size`` overrides),
    each searched in threads while the one before it is processed; other sources in 4 MiB
    reads as data arrives.  ``options`` go to :class:`StreamDiagnoser`.
    """
    engine = StreamDiagnoser(**options)
    if hasattr(source, "read"):
        if _regular_file(source):
            # Bigger reads for a file already written: no latency to keep low, and fewer
            # hand-offs to the search threads (4 MiB reads measured ~25% slower).
            size = chunk_size or _FILE_CHUNK
            yield from _feed_ahead(engine, read_chunks(source, quiet, size))  # type: ignore[arg-type]
        else:
            chunks = read_chunks(source, quiet, chunk_size or _CHUNK)  # type: ignore[arg-type]
            for chunk in chunks:
                yield from engine.idle() if chunk is None else engine.feed(chunk)
    else:
        # Lines are matched in batches (one RE2 call per batch, not per line); a batch is
        # flushed at ``batch_lines`` lines or when a line arrives ``_BATCH_SECONDS`` after
        # the batch began, so a slow live source is not held back.
        batch: list[bytes] = []
        started = 0.0
        for line in source:
            raw = line.encode("utf-8", "replace") if isinstance(line, str) else bytes(line)
            if not batch:
                started = time.monotonic()
            batch.append(raw if raw.endswith(b"\n") else raw + b"\n")
            if len(batch) >= batch_lines or time.monotonic() - started >= _BATCH_SECONDS:
                events = engine.feed(b"".join(batch))
                batch.clear()
                yield from events
        if batch:
            yield from engine.feed(b"".join(batch))
    yield from engine.close()


def iter_diagnoses(
    source: IO[bytes] | IO[str] | Iterable[str] | Iterable[bytes], **options: Any
) -> Iterator[Diagnosis]:
    """Yield one :class:`~diagnose.report.Diagnosis` per crash in ``source``, as each completes.

    Example::

        import subprocess
        from diagnose import iter_diagnoses

        proc = subprocess.Popen(["kubectl", "logs", "-f", "pod/llm-0"], stdout=subprocess.PIPE)
        for d in iter_diagnoses(proc.stdout):
            print(d.cause, d.crashes[0].lines, d.title)

    Memory stays bounded however long the stream; see :func:`iter_events` for ``quiet`` and
    :class:`StreamDiagnoser` for the other options.
    """
    from diagnose.report import Diagnosis

    for event in iter_events(source, **options):
        if isinstance(event, Diagnosis):
            yield event


def read_chunks(
    source: IO[bytes] | IO[str], quiet: float | None, chunk_size: int
) -> Iterator[bytes | str | None]:
    """Chunks of ``source`` as they arrive; ``None`` after each ``quiet`` seconds of silence."""
    binary: Any = source
    if isinstance(source, io.TextIOBase):
        binary = getattr(source, "buffer", None)
        if binary is None:  # io.StringIO and friends: text only
            while chunk := source.read(chunk_size):
                yield chunk
            return
    fd = _stream_fd(binary)
    if fd is None:
        read = getattr(binary, "read1", binary.read)
        while chunk := read(chunk_size):
            yield chunk
        return
    # A pipe, socket or terminal: wait for data with a deadline, read what is there.
    while True:
        if quiet is not None:
            ready, _, _ = select.select([fd], [], [], quiet)
            if not ready:
                yield None
                continue
        data = os.read(fd, chunk_size)
        if not data:
            return
        yield data


def _feed_ahead(
    engine: StreamDiagnoser, chunks: Iterator[bytes | str | None]
) -> Iterator[Diagnosis | Ready]:
    """Feed a regular file's chunks, each searched in threads while the one before is fed.

    A file already written has no clock: reading one chunk ahead delays nothing, and its
    automaton pass (most of the work, run by RE2 without the GIL) overlaps this thread's
    line counting and window building, as in :func:`diagnose.ingest.scan.scan`.
    """
    pending: tuple[bytes, _Ahead | None] | None = None
    for chunk in chunks:
        if chunk is None:  # a regular file never goes quiet; kept for safety
            continue
        raw = chunk.encode("utf-8", "replace") if isinstance(chunk, str) else bytes(chunk)
        ahead = engine._search_ahead(raw)
        if pending is not None:
            yield from engine._feed(*pending)
        pending = (raw, ahead)
    if pending is not None:
        yield from engine._feed(*pending)


def _regular_file(source: Any) -> bool:
    """True for a file object over a regular file (read to its end, never waited on)."""
    binary = getattr(source, "buffer", source)
    try:
        return stat.S_ISREG(os.fstat(int(binary.fileno())).st_mode)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False


def _stream_fd(binary: Any) -> int | None:
    """The descriptor of a pipe/socket/terminal, or ``None`` for regular files and others."""
    try:
        fd = int(binary.fileno())
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None
    return None if stat.S_ISREG(mode) else fd
