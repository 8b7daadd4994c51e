"""Diagnose a log while it is being written: one :class:`Diagnosis` per crash, as it completes.

:func:`iter_diagnoses` consumes a file object (a growing file, a pipe from ``kubectl logs -f``
or ``journalctl -f``, a socket) or any iterable of lines, and yields a diagnosis as soon as
each crash region is complete.  :class:`StreamDiagnoser` is the same engine driven by hand
(``feed`` / ``idle`` / ``close``), for callers that own the reading loop (``--follow``, the
logging handler).

How it stays cheap and bounded:

* Healthy lines cost one pass of RE2's literal automaton over each chunk (the scanner's
  ``TRIGGERS`` plus the readiness phrases); only lines near a hit are decoded.
* A crash window opens at a hit with ``before`` lines of context and grows while lines hit,
  continue a traceback (indented, ``File "..."``, ``frame #N``) or sit within ``settle_lines``
  of the last such line.  It is *complete* after ``settle_lines`` quiet lines, when the
  stream goes quiet (``idle``), at a readiness line, or at the end; then only that window
  is normalised, split into regions and matched, and its memory is released.  A window is
  cut at ``max_window_lines`` / ``max_window_bytes``, so memory never grows with the log.
* Log-wide context (server args, GPUs, versions) comes from the first ``context_head_lines``
  lines, where servers print it, capped at ``_MAX_CONTEXT_LINES`` lines.
* The same failure printed by several ranks in separate windows is reported once: a
  diagnosis whose cause and normalised signature (:func:`diagnose.signature.signature`) were
  already reported within ``dedupe_lines`` lines is dropped and counted in ``stats``; one
  the program survived is reported once per stream.
* A hit line whose shape (numbers masked) already opened ``REPEAT_WINDOWS`` windows opens
  none (:class:`diagnose.ingest.scan.RepeatCounter`, shared with the scan), unless the next
  line continues a block: a warning flood is counted in ``stats.counted``, not diagnosed
  100,000 times.
"""

from __future__ import annotations

import io
import os
import select
import stat
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeAlias

from diagnose.ingest.scan import (
    TRIGGERS,
    WINDOW_AFTER,
    WINDOW_BEFORE,
    FastSearch,
    RepeatCounter,
    SplitSearch,
    continues_block,
    literal_pattern,
    search_pool,
    trigger_pattern,
)
from diagnose.records import record

if TYPE_CHECKING:
    from diagnose.context import LogContext
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

# A line longer than this is kept cut: no crash line is megabytes long, and an unbounded
# carry would break the memory bound on a stream without newlines.
_MAX_LINE = 1 << 20
_MAX_CONTEXT_LINES = 500
_CHUNK = 4 << 20
_FILE_CHUNK = 16 << 20
# A buffer this big is searched in _SPLIT_PARTS segments at once (see _searcher).
_SPLIT_MIN = 1 << 20
_SPLIT_PARTS = 4
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


class StreamDiagnoser:
    """The incremental engine behind :func:`iter_diagnoses`.

    ``feed`` takes any chunk of bytes or text (partial lines are held until their newline);
    ``idle`` says the stream went quiet, which completes an open crash window; ``close``
    ends the stream; ``restart`` says the file was truncated or replaced (line numbers start
    again at 1).  Each returns the events that became ready, in line order.  Not
    thread-safe: one engine per stream.
    """

    def __init__(
        self,
        *,
        source: str = "<stream>",
        settle_lines: int = 40,
        before: int = WINDOW_BEFORE,
        after: int = WINDOW_AFTER,
        dedupe_lines: int = 2_000,
        max_window_lines: int = 20_000,
        max_window_bytes: int = 8 << 20,
        context_head_lines: int = 20_000,
        rule_dirs: Sequence[Path] = (),
    ) -> None:
        """Set the window and de-duplication limits (line counts); see the module docstring."""
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
        self.stats = StreamStats()
        phrases = _ready_phrases()
        self._phrases = tuple((p, p.encode()) for p in phrases)
        from diagnose.engine import rule_triggers

        folded = rule_triggers(self.rule_dirs)
        self._trigger = FastSearch(re2.compile(trigger_pattern(TRIGGERS, folded)))
        self._ready = FastSearch(re2.compile(literal_pattern(phrases)))
        self._any = FastSearch(re2.compile(trigger_pattern((*TRIGGERS, *phrases), folded)))
        from diagnose.context import CONTEXT_LITERALS

        self._context_re = FastSearch(re2.compile(literal_pattern(CONTEXT_LITERALS)))
        self._next_line = 1  # number of the first line of the next buffer
        self._repeat = RepeatCounter()  # a restarted file floods anew
        self._carry = b""
        self._skipping = False
        self._reset_position()
        self._context_raw: list[tuple[int, str]] = []
        self._head_context: LogContext | None = None
        self._sglang = False
        self._ready_lines: list[tuple[int, str]] = []
        self._seen: dict[str, int] = {}

    # ------------------------------------------------------------------ public interface

    def feed(self, data: bytes | str) -> list[Diagnosis | Ready]:
        """Process a chunk; return the diagnoses and readiness lines it completed."""
        raw = data.encode("utf-8", "replace") if isinstance(data, str) else bytes(data)
        return self._feed(raw, None)

    def _feed(self, raw: bytes, ahead: SplitSearch | None) -> list[Diagnosis | Ready]:
        """:meth:`feed` for bytes; ``ahead`` is :meth:`_search_ahead`'s plan for ``raw``.

        The chunk is processed where it lies: the carried partial line is finished with the
        chunk's first line as a small piece of its own, so the chunk is never copied.
        """
        if not raw:
            return []
        self.stats.bytes += len(raw)
        out: list[Diagnosis | Ready] = []
        lo = 0
        if self._skipping:
            nl = raw.find(b"\n")
            if nl == -1:
                return out
            lo, self._skipping = nl + 1, False
        if self._carry or ahead is not None:
            nl = raw.find(b"\n", lo)
            if nl == -1:
                self._carry += raw[lo:]
                lo = len(raw)
            else:
                line = self._carry + raw[lo : nl + 1]
                self._carry, lo = b"", nl + 1
                self._process(line, 0, len(line), out)
        cut = raw.rfind(b"\n", lo)
        if cut != -1:
            if ahead is not None and ahead.bounds[0] == lo and ahead.bounds[-1] == cut + 1:
                self._process(raw, lo, cut + 1, out, ahead)
            else:
                self._process(raw, lo, cut + 1, out)
            lo = cut + 1
        if lo < len(raw):
            self._carry += raw[lo:]
        if len(self._carry) >= _MAX_LINE:
            self._process(self._carry[:_MAX_LINE] + b"\n", 0, _MAX_LINE + 1, out)
            self._carry, self._skipping = b"", True
        return out

    def _search_ahead(self, raw: bytes) -> SplitSearch | None:
        """Start searching ``raw``'s whole lines after its first (what :meth:`_feed` will
        process in place) in threads, before the chunk before it is processed."""
        pool = search_pool()
        if pool is None or len(raw) < _SPLIT_MIN:
            return None
        lo, cut = raw.find(b"\n") + 1, raw.rfind(b"\n")
        if lo == 0 or cut + 1 <= lo:
            return None
        return SplitSearch(self._any, raw, lo, cut + 1, pool, _SPLIT_PARTS)

    def idle(self) -> list[Diagnosis | Ready]:
        """The stream went quiet: complete the open crash window (a held partial line waits)."""
        out: list[Diagnosis | Ready] = []
        self._complete(out)
        return out

    def close(self) -> list[Diagnosis | Ready]:
        """End of stream: the last partial line counts as a line; complete every window."""
        out: list[Diagnosis | Ready] = []
        if self._carry:
            line, self._carry = self._carry + b"\n", b""
            self._process(line, 0, len(line), out)
        self._complete(out)
        return out

    def restart(self) -> list[Diagnosis | Ready]:
        """The file was truncated or rotated: finish what is open, then count from line 1."""
        out = self.close()
        self._reset_position()
        # Line numbers, readiness and the head belong to the old file: a ready line kept
        # from it would mark the new file's crashes as survived (verdict.decide).
        self._context_raw.clear()
        self._ready_lines.clear()
        self._head_context = None
        self._sglang = False
        self._seen.clear()
        return out

    # ------------------------------------------------------------------ the scan

    def _reset_position(self) -> None:
        self._next_line = 1  # number of the first line of the next buffer
        self._carry = b""
        self._skipping = False
        self._lo = 0  # where the lines of the buffer being processed start
        self._tail: deque[bytes] = deque(maxlen=self.before)
        self._win: list[str] | None = None
        self._win_first = 0
        self._win_bytes = 0
        self._win_active = 0  # index in the window of the last hit/continuation line
        self._quiet = 0
        self._last_end = 0  # last line of the previous window (context never overlaps it)
        # A window was cut inside a block (a recursion dump of a million frames): the rest of
        # that block is passed over, or each "frame #" trigger in it would open a window and
        # one crash would be reported dozens of times.
        self._overflow = False
        # The cut window itself, held until the block ends: a Python traceback's exception
        # line comes after its frames, and the two make one diagnosis (see _complete).
        self._held: tuple[int, list[str]] | None = None
        self._held_stop = 0  # the line that ended the passed-over block (0: not yet)

    def _process(
        self,
        buf: bytes,
        lo: int,
        end: int,
        out: list[Diagnosis | Ready],
        ahead: SplitSearch | None = None,
    ) -> None:
        """Handle ``buf[lo:end]``: whole lines, each ending in ``\\n``."""
        self._lo = lo
        if self._next_line <= self.context_head_lines:
            self._collect_context(buf, lo, end)
        pos, line_no = lo, self._next_line
        search = ahead.search if ahead is not None else self._searcher(buf, lo, end)
        while pos < end:
            if self._win is None and self._overflow:
                pos, line_no = self._pass_block(buf, pos, line_no, end)
                continue
            if self._win is None:
                m = search(pos)
                if m is None:
                    break
                start = buf.rfind(b"\n", pos, m.start()) + 1 or pos
                line_no += buf.count(b"\n", pos, start)
                stop = buf.find(b"\n", m.start())
                line = buf[start:stop]
                if self._ready.search(line) is not None:
                    self._on_ready(line, line_no, out)
                if self._trigger.search(line) is None:
                    pos, line_no = stop + 1, line_no + 1
                    continue
                if self._flood(buf, stop, end, line):
                    pos, line_no = stop + 1, line_no + 1
                    continue
                if self._held is not None and line_no != self._held_stop:
                    self._complete(out)  # the block ended without a line of its own
                self._open(buf, start, line_no)
                pos = start
            pos, line_no = self._extend(buf, pos, line_no, end, out)
        self._remember_tail(buf, end)
        self._next_line = line_no + buf.count(b"\n", pos, end)
        self.stats.lines = self._next_line - 1

    def _searcher(self, buf: bytes, lo: int, end: int) -> Callable[[int], Any]:
        """``pos -> first trigger/readiness hit at or after pos``: in threads for big buffers.

        A file read in 4 MiB chunks spends most of its time in the automaton, which RE2
        runs without the GIL, so big buffers are searched in parallel segments.
        """
        pattern = self._any
        if end - lo >= _SPLIT_MIN:
            pool = search_pool()
            if pool is not None:
                return SplitSearch(pattern, buf, lo, end, pool, _SPLIT_PARTS).search
        return lambda pos: pattern.search(buf, pos, end)

    def _open(self, buf: bytes, start: int, line_no: int) -> None:
        """Open a window at the hit on ``line_no`` with up to ``before`` lines of context."""
        count = min(self.before, line_no - self._last_end - 1)
        lines: list[bytes] = []
        pos = start
        lo = self._lo
        while len(lines) < count and pos > lo:
            prev = buf.rfind(b"\n", lo, pos - 1) + 1 or lo
            lines.append(buf[prev : pos - 1])
            pos = prev
        if len(lines) < count and pos == lo and self._tail:
            need = count - len(lines)
            lines.extend(reversed(list(self._tail)[-need:]))
        lines.reverse()
        self._win = [_decode(x) for x in lines]
        self._win_first = line_no - len(lines)
        self._win_bytes = sum(len(x) for x in lines)
        self._win_active = len(lines)
        self._quiet = 0

    def _extend(
        self, buf: bytes, pos: int, line_no: int, end: int, out: list[Diagnosis | Ready]
    ) -> tuple[int, int]:
        """Append lines from ``pos`` to the open window until it completes or ``buf`` ends."""
        trigger, ready = self._trigger.search, self._ready.search
        while pos < end and self._win is not None:
            stop = buf.find(b"\n", pos)
            raw = buf[pos:stop]
            if ready(raw) is not None:
                # A readiness line ends warm-up: what came before it was lived through.
                self._on_ready(raw, line_no, out, complete_first=True)
                return stop + 1, line_no + 1
            win = self._win
            win.append(_decode(raw))
            self._win_bytes += len(raw)
            if (raw.strip() and continues_block(raw)) or (
                trigger(raw) is not None and not self._flood(buf, stop, end, raw)
            ):
                self._quiet = 0
                self._win_active = len(win)
            else:
                self._quiet += 1
            pos, line_no = stop + 1, line_no + 1
            if self._quiet >= self.settle:
                self._complete(out)
            elif len(win) >= self.max_window_lines or self._win_bytes >= self.max_window_bytes:
                self.stats.cut_windows += 1
                self._win = None
                self._complete(out)  # a window held before this one goes out on its own
                self._held, self._held_stop = (self._win_first, win), 0
                self._last_end = self._win_first + len(win) - 1
                self._overflow = True
        return pos, line_no

    def _flood(self, buf: bytes, stop: int, end: int, raw: bytes) -> bool:
        """Whether the hit line ``raw`` (ending at ``stop``) is one more copy of a flooding
        shape: then it keeps no window open (a warning every few lines would hold one
        window open through a whole log)."""
        following = buf.find(b"\n", stop + 1, end) if stop + 1 < end else -1
        after = buf[stop + 1 : following] if following >= 0 else None
        if self._repeat.counts_only(raw, after) is None:
            return False
        self.stats.counted += 1
        return True

    def _pass_block(self, buf: bytes, pos: int, line_no: int, end: int) -> tuple[int, int]:
        """Pass over the rest of a cut block; stop before the first line that ends it.

        That line is read as usual, so a Python traceback's exception line (which comes
        last) still opens a window, with the block's last lines as its context.
        """
        while pos < end:
            stop = buf.find(b"\n", pos)
            raw = buf[pos:stop]
            if not (raw.strip() and continues_block(raw)):
                self._overflow = False
                self._held_stop = line_no
                break
            pos, line_no = stop + 1, line_no + 1
        return pos, line_no

    def _remember_tail(self, buf: bytes, end: int) -> None:
        """Keep the last ``before`` lines for a window that opens early in the next buffer."""
        if not self.before:
            return
        pieces: list[bytes] = []
        lo = self._lo
        pos = end - 1  # the final newline
        while len(pieces) < self.before and pos > lo:
            prev = buf.rfind(b"\n", lo, pos) + 1 or lo
            pieces.append(buf[prev:pos])
            pos = prev - 1
            if prev == lo:
                break
        self._tail.extend(reversed(pieces))

    # ------------------------------------------------------------------ context and readiness

    def _collect_context(self, buf: bytes, lo: int, end: int) -> None:
        """Keep the head's lines that carry log-wide facts (server args, GPUs, versions)."""
        search = self._context_re.search
        pos, line_no = lo, self._next_line
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

    def _on_ready(
        self, raw: bytes, line_no: int, out: list[Diagnosis | Ready], complete_first: bool = False
    ) -> None:
        """Record a readiness line and emit its event (after any window it closes)."""
        text = _decode(raw[:4096])
        if len(self._ready_lines) < 64:
            self._ready_lines.append((line_no, text))
            self._head_context = None
        if complete_first:
            self._complete(out)
            self._last_end = line_no
        phrase = next((p for p, b in self._phrases if b in raw), "")
        serving = _serving(phrase, self._sglang)
        out.append(Ready(line_no, text.strip(), phrase, serving))

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

    def _complete(self, out: list[Diagnosis | Ready]) -> None:
        """Diagnose the open window (if any), release it, and append a new report.

        A window held because it was cut inside a block is diagnosed together with the
        window that opened on the line ending that block (a traceback's exception line),
        else on its own.
        """
        win, held = self._win, self._held
        segments: list[tuple[int, list[str]]] = []
        if held is not None:
            segments.append(held)
            self._held = None
            self.stats.windows += 1
        if win is not None:
            keep = min(len(win), self._win_active + min(self.after, self._quiet))
            first = self._win_first
            segments.append((first, win[:keep]))
            self._win = None
            self._last_end = first + keep - 1
            self.stats.windows += 1
        if not segments:
            return
        diagnosis = self._diagnose(segments)
        if diagnosis is None:
            return
        from diagnose.signature import signature

        key = f"{diagnosis.cause}\x00{signature(diagnosis)}"
        last = self._seen.get(key)
        end = self._last_end
        # A failure the program survived (a warning a loaded server repeats) is reported
        # once per stream; a fatal one again after dedupe_lines (a restarted server's crash).
        if last is not None and (not diagnosis.fatal or end - last <= self.dedupe_lines):
            self._seen[key] = end
            self.stats.suppressed += 1
            return
        if len(self._seen) > 4096:  # forget reports older than the de-duplication span
            self._seen = {k: v for k, v in self._seen.items() if end - v <= self.dedupe_lines}
        self._seen[key] = end
        self.stats.diagnoses += 1
        out.append(diagnosis)

    def _diagnose(self, segments: list[tuple[int, list[str]]]) -> Diagnosis | None:
        """Parse a window (one or two pieces: first line, lines) and diagnose it; ``None``
        when it holds no crash region."""
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
        parsed = Parsed(self.source, lines, regions, context, self._last_end, streamed=True)
        diagnosis = diagnose_parsed(parsed, rule_dirs=self.rule_dirs)
        if regions:
            return diagnosis
        # No crash region, but a log-scope rule may still name a fatal cause from lines no
        # region holds ("Reason: OOMKilled" in a pod's status, torch's hint line naming a
        # capture error): the whole-log path reports it, so the stream does too.
        return diagnosis if diagnosis.primary is not None and diagnosis.fatal else None


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
    pending: tuple[bytes, SplitSearch | None] | None = None
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
