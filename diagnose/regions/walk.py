"""The per-stream state machine that opens a region at a header and extends it.

A region opens at a traceback, ``terminate called``, ``Fatal Python error``, a sanitizer
report, a frame block or an error-vocabulary line, and grows while the following lines
continue it; its frame lines are parsed into :class:`~diagnose.model.Frame` objects.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from diagnose.elastic_report import MAX_REPORT_LINES, opens_report, read_report
from diagnose.frames.ipython import arrow_line
from diagnose.frames.ipython import is_source_line as is_ipython_source
from diagnose.frames.pytest_report import ends_failure, opens_section
from diagnose.frames.pytest_report import is_error_line as is_pytest_error
from diagnose.frames.pytest_report import is_frame_line as is_pytest_frame
from diagnose.frames.pytest_report import is_header as is_pytest_header
from diagnose.model import Frame, LogLine
from diagnose.records import record
from diagnose.regions.lines import (
    ASAN,
    ASAN_END_RE,
    BLANK,
    C10HDR,
    CAUSED_BY_RE,
    CHAIN,
    CODE,
    CONTINUATION_RE,
    CSAN,
    DASH_RULE_RE,
    DEF_RE,
    EGROUP_SEP_RE,
    ELISIONS,
    ERR,
    EXC_ONLY_RE,
    EXC_RE,
    EXC_SHAPE_RE,
    FATALPY,
    FRAGMENT,
    FRAME,
    GDBNOISE,
    GDBSIG,
    HINT,
    MARKER_RE,
    MAX_FRAMES,
    MAX_MESSAGE,
    MAX_MESSAGE_LINES,
    MAX_PYTEST_LINES,
    OTHER,
    PYFRAME,
    PYTEST,
    RUN_ON_LINES,
    TACTIC_RE,
    TAIL,
    TB,
    TERM,
    THREAD,
    WHAT,
    WINDOW,
    vocab,
)
from diagnose.regions.messages import strip_prefixes
from diagnose.regions.prose import RECORD_RE, STRUCTURED_KINDS
from diagnose.signature import mask

if TYPE_CHECKING:
    _FrameParser = Callable[[LogLine], Frame | None]


@record(frozen=False)
class _Found:
    """A region found in one stream, before frames are parsed and copies are merged."""

    kind: str
    start: int  # stream index of the first line
    end: int  # stream index one past the last line
    message: int  # stream index of the message line
    message_text: str
    truncated: bool = False
    has_message: bool = True  # False: a traceback that ends before its exception line


class Stream:
    """The lines of one rank (or of the whole log) and the state machine that reads them."""

    def __init__(self, lines: list[LogLine], classes: list[int]) -> None:
        self.lines = lines
        self.cls = classes
        self.n = len(lines)
        # nxt[i]: index of the first non-blank line at or after i (n when none): lets a
        # blank line be judged by what follows it without rescanning (linear overall).
        nxt = [self.n] * (self.n + 1)
        for i in range(self.n - 1, -1, -1):
            nxt[i] = i if classes[i] != BLANK else nxt[i + 1]
        self.nxt = nxt

    def regions(self) -> list[_Found]:
        """Walk the stream once and return the regions in order."""
        out: list[_Found] = []
        i, n, cls = 0, self.n, self.cls
        while i < n:
            c = cls[i]
            found: _Found | None = None
            if c == PYTEST or (c in (PYFRAME, ERR) and self._pytest_opens(i)):
                found = self._pytest(i)
            elif c in (TB, CHAIN, PYFRAME) or (
                c in (CODE, OTHER) and self._code_opens_traceback(i)
            ):
                found = self._traceback(i)
            elif c in (FATALPY, THREAD):
                found = self._faulthandler(i)
            elif c == ASAN:
                found = self._asan(i)
            elif c == CSAN:
                out.extend(self._csan(i))
                i = self._csan_end(i)
                continue
            elif c in (FRAME, C10HDR, GDBSIG):
                found = self._frames(i)
            elif c in (ERR, TERM, WHAT):
                found = self._next_copy(i, out) or self._leads_traceback(
                    self._chained(self._error_block(i))
                )
            if found is None:
                i += 1
                continue
            out.append(found)
            i = max(found.end, i + 1)
        return out

    def _next_copy(self, i: int, out: list[_Found]) -> _Found | None:
        """Line ``i`` as one more copy of the one-line error read just before it, or None.

        A flood of one warning (16k identical NCCL WARN lines in a 1 MiB paste) would read
        each copy's block afresh; a copy with the same line on both sides reads exactly as
        the one before it did, one line further on (``_error_block`` ends a block at the
        same line repeated), so the region is that one shifted.
        """
        if not out or self.cls[i] != ERR or i + 2 >= self.n:
            return None
        prev = out[-1]
        if prev.start != i - 1 or prev.end != i:  # a one-line block: its message is that line
            return None
        text = self._text(i)
        if not (self._text(i - 1) == text == self._text(i + 1) == self._text(i + 2)):
            return None
        return _Found(prev.kind, i, i + 1, i, prev.message_text, False, prev.has_message)

    def _leads_traceback(self, found: _Found) -> _Found:
        """An error line printed right above the traceback that reports it.

        A library logs its error, then Python raises: "cuBLAS API failed with status 15",
        a blank line, "Traceback (most recent call last):".  One failure: the traceback's
        exception names it, or, when the paste cut the traceback before its exception
        line, the error line does (not the last frame).
        """
        if found.kind == "python-traceback":
            return found
        k = self.nxt[found.end] if found.end < self.n else self.n
        if k >= self.n or self.cls[k] != TB or k - found.end > 1:
            return found
        return self._with_traceback(found, k)

    def _chained(self, found: _Found) -> _Found:
        """An exception line followed by "The above exception was the direct cause ...".

        The paste began after the first traceback's frames; the chain makes the error line
        and the traceback that follows one failure whose message is the final exception.
        """
        k = self.nxt[found.end]
        if k >= self.n or self.cls[k] != CHAIN:
            return found
        return self._with_traceback(found, k)

    def _with_traceback(self, found: _Found, k: int) -> _Found:
        """``found`` and the traceback read from line ``k`` on, as one failure: named by the
        traceback's exception, or by ``found`` when the paste cut the traceback before it."""
        tb = self._traceback(k)
        if tb.has_message:
            return _Found(
                "python-traceback", found.start, tb.end, tb.message, tb.message_text, tb.truncated
            )
        return _Found(
            "python-traceback", found.start, tb.end, found.message, found.message_text, True
        )

    # -- helpers --

    def _text(self, i: int) -> str:
        return self.lines[i].text

    def _code_opens_traceback(self, i: int) -> bool:
        """A source line (and ``^^^`` marker) right before a ``File`` line: a cut paste."""
        for k in range(i + 1, min(i + 3, self.n)):
            c = self.cls[k]
            if c == PYFRAME:
                return True
            if c != CODE and not MARKER_RE.match(self._text(k)):
                return False
        return False

    def _free_text(self, i: int) -> bool:
        """A line that can continue a multi-line exception message."""
        c = self.cls[i]
        if c in (CODE, HINT, WHAT):
            return True
        if c not in (OTHER, ERR):
            return False
        s = self._text(i).lstrip()
        return not RECORD_RE.match(s) and not EXC_RE.match(s)

    def _tail(self, j: int, free: bool) -> int:
        """Extend from ``j`` over an attached backtrace (and free text when ``free``)."""
        n, cls, nxt = self.n, self.cls, self.nxt
        budget = MAX_MESSAGE_LINES
        while j < n:
            c = cls[j]
            if c in TAIL or (c == CODE and j > 0 and cls[j - 1] in (FRAME, GDBNOISE)):
                j += 1
            elif c == BLANK:
                k = nxt[j]
                if k < n and cls[k] in TAIL and cls[k] != GDBSIG:
                    j = k
                else:
                    break
            elif free and budget > 0 and self._free_text(j):
                budget -= 1
                j += 1
            else:
                break
        return j

    def _trim(self, start: int, end: int) -> int:
        """Move ``end`` back over trailing blank lines (never before ``start + 1``)."""
        while end > start + 1 and self.cls[end - 1] == BLANK:
            end -= 1
        return end

    # -- region readers --

    def _traceback(self, i: int) -> _Found:
        """A Python traceback, chained ones included; the message is the last exception."""
        n, cls, nxt = self.n, self.cls, self.nxt
        start = i
        message = -1
        report_text = ""  # the summary of torch elastic's report, when one follows
        ipython = False  # IPython's frames: numbered source lines, "---->" on the current one
        in_group = False  # inside an ExceptionGroup's sub-exceptions
        first_sub = -1  # the first sub-exception's line, once a second one follows
        # The last exception line of an earlier link in a chain: when the paste stops right
        # after "During handling of the above exception ..." and the next traceback's header
        # (vllm-project/vllm#16336), that exception is still the failure, not the last frame.
        earlier = -1
        j = i
        while j < n and cls[j] in (CODE, OTHER):  # a cut paste opens on a source line
            j += 1
        while True:
            # header lines (Traceback / chain markers) then frames and source lines
            while j < n and (
                self._header(j) or (cls[j] == BLANK and nxt[j] < n and self._header(nxt[j]))
            ):
                j += 1
            while j < n:
                c = cls[j]
                if c == PYFRAME:
                    ipython = ipython or not self._text(j).lstrip().startswith('File "')
                    j += 1
                    # the frame's source line, even when a paste lost its indentation
                    if j < n and cls[j] in (OTHER, ERR) and not self._exception_shaped(j):
                        j += 1
                elif c == CODE or (c == OTHER and MARKER_RE.match(self._text(j))):
                    j += 1
                elif c == OTHER and self._text(j).strip() in ELISIONS:
                    j += 1  # the poster cut frames out: "..." in place of them
                elif ipython and c in (OTHER, ERR) and is_ipython_source(self._text(j)):
                    j += 1  # "----> 3 code" (the arrow marks IPython's current line)
                elif c == BLANK and nxt[j] < n and cls[nxt[j]] in (PYFRAME, CODE):
                    j = nxt[j]
                elif c == BLANK and nxt[j] < n and j > start and self._exception_shaped(nxt[j]):
                    # frames and the exception line separated by blank lines in a paste
                    j = nxt[j]
                else:
                    break
            if j < n and self._exception_at(j) and not self._cut_fragment(j):
                message = j
                report = self._report(j)
                if report is None:
                    j = self._tail(j + 1, free=True)
                else:
                    j, report_text = report
                if (
                    j < n
                    and cls[j] == TB
                    and j - 1 > message
                    and EGROUP_SEP_RE.match(self._text(j - 1)) is not None
                ):
                    # An ExceptionGroup (asyncio/anyio TaskGroup under uvicorn): each
                    # sub-exception follows under a "+---- 1 ----" rule.  The first one is
                    # the failure; the ones after it are usually its cancelled siblings.
                    if in_group and first_sub < 0:
                        first_sub = message
                    in_group = True
                    earlier = message
                    continue
            else:
                message = -1
            k = nxt[j] if j < n else n
            if k < n and cls[k] == CHAIN:
                if message >= 0:
                    earlier = message
                j = k
                continue
            if message < 0 and k < n and cls[k] == TB and k - j <= 1 and j > start:
                # "Traceback (most recent call last):" repeated right after a cut one is the
                # next copy, not a continuation: stop here.
                pass
            break
        end = self._trim(start, j)
        has_message = message >= 0
        cut = not has_message
        if first_sub >= 0:
            message, has_message = first_sub, True
        elif not has_message and earlier >= 0:
            message, has_message = earlier, True
        elif not has_message:
            message = self._last_frame(start, end)
        text = report_text or strip_prefixes(self._text(message))
        if has_message and text.endswith(":") and not report_text:
            # "AssertionError:" alone: the message is on the (unindented) lines below it
            text = self._run_on(text, message + 1, end, bare=EXC_ONLY_RE.match(text) is not None)
        return _Found(
            "python-traceback",
            start,
            end,
            message,
            text,
            cut or self._cut_at_end(end),
            has_message,
        )

    def _pytest_opens(self, i: int) -> bool:
        """Does line ``i`` (a frame or an error line) belong to a pytest failure?"""
        text = self._text(i)
        if self.cls[i] == ERR:
            return is_pytest_error(text)
        return ".py:" in text and is_pytest_frame(text.strip())

    def _pytest(self, i: int) -> _Found:
        """A pytest failure, from its header (or a frame or ``E`` line) to where it ends.

        It ends after its closing ``path.py:620: SomeError`` line, before the next header
        or section, or (``--tb=short`` has no closing line) at the first line after the
        ``E`` lines that is not another ``E`` line or blank.
        """
        n = self.n
        stop = min(n, i + MAX_PYTEST_LINES)
        errors: list[int] = [i] if self.cls[i] == ERR else []
        closed = ends_failure(self._text(i).strip())
        j = i + 1
        while j < stop and not closed:
            text = self._text(j)
            s = text.strip()
            if is_pytest_header(s) or opens_section(s):
                break
            if is_pytest_error(text):
                errors.append(j)
            elif s and errors and not ends_failure(s):
                break  # past the exception: the failure is over
            closed = ends_failure(s)
            j += 1
        end = self._trim(i, j)
        shaped = [k for k in errors if EXC_SHAPE_RE.match(strip_prefixes(self._text(k)))]
        message = (shaped or errors or [end - 1 if closed else i])[0]
        text = strip_prefixes(self._text(message))
        return _Found("python-traceback", i, end, message, text, self._cut_at_end(end))

    def _header(self, j: int) -> bool:
        """A traceback header, a chain marker, or the dash rule IPython prints above one."""
        c = self.cls[j]
        if c in (TB, CHAIN):
            return True
        return (
            c == OTHER
            and j + 1 < self.n
            and self.cls[j + 1] == TB
            and DASH_RULE_RE.match(self._text(j)) is not None
        )

    def _run_on(self, text: str, j: int, end: int, bare: bool = False) -> str:
        """An exception message that ends in a colon, with the indented lines that carry it on.

        FlashInfer: "RuntimeError: Error in function 'aligned_alloc' at allocator.h:49:" and
        "  Buffer overflow when allocating ... but only 413138944 bytes available" below it.
        """
        parts = [text]
        carry = (CODE, OTHER, ERR) if bare else (CODE,)
        while j < end and len(parts) <= RUN_ON_LINES and self.cls[j] in carry:
            parts.append(self._text(j).strip())
            j += 1
        return " ".join(parts)[:MAX_MESSAGE]

    def _report(self, j: int) -> tuple[int, str] | None:
        """torch elastic's failure table under exception line ``j``: its end and summary.

        ``None`` when no report follows (see :mod:`diagnose.elastic_report`).
        """
        if j + 2 >= self.n:
            return None
        head = strip_prefixes(self._text(j))
        if not opens_report(head, self._text(j + 1), self._text(j + 2)):
            return None
        stop = min(self.n, j + 1 + MAX_REPORT_LINES)
        taken, summary = read_report([self._text(k) for k in range(j + 1, stop)])
        return j + 1 + taken, f"{head.rstrip()} {summary}"

    def _cut_fragment(self, j: int) -> bool:
        """Is line ``j`` the stub of a line the paste cut off ("Runt", "(APIS") at its end?

        Only the input's last line, short and not shaped like an exception, so the traceback
        reads as cut rather than as failing with "Runt".
        """
        if j != self.n - 1:
            return False
        text = strip_prefixes(self._text(j))
        return len(text) < FRAGMENT and EXC_RE.match(text) is None

    def _exception_shaped(self, j: int) -> bool:
        """Does line ``j`` read like ``package.SomeError: text`` rather than source code?"""
        return EXC_SHAPE_RE.match(self._text(j).lstrip()) is not None

    def _exception_at(self, j: int) -> bool:
        """Is line ``j`` the exception line that ends a traceback?"""
        c = self.cls[j]
        if c in (ERR, OTHER, HINT):
            return True
        # TRT-LLM and c10 messages are sometimes indented by the logger
        return c == CODE and EXC_RE.match(self._text(j).lstrip()) is not None

    def _last_frame(self, start: int, end: int) -> int:
        """Index of the last frame line in ``[start, end)`` (the start when none)."""
        for k in range(end - 1, start - 1, -1):
            if self.cls[k] in (PYFRAME, FRAME):
                return k
        return start

    def _cut_at_end(self, end: int) -> bool:
        """Does the region run into the end of the input with a visibly cut last line?"""
        if end != self.n:
            return False
        last = self._text(end - 1).rstrip()
        if self.cls[end - 1] in (FRAME, PYFRAME, C10HDR):
            return True
        return last.endswith(("...", "…")) or _unbalanced(last[-WINDOW:])

    def _faulthandler(self, i: int) -> _Found:
        """``Fatal Python error`` plus the per-thread Python stacks faulthandler prints."""
        n, cls, nxt = self.n, self.cls, self.nxt
        j = i + 1
        while j < n:
            c = cls[j]
            if c in (PYFRAME, THREAD, CODE, FRAME):
                j += 1
            elif c == BLANK and nxt[j] < n and cls[nxt[j]] in (THREAD, PYFRAME):
                j = nxt[j]
            else:
                break
        end = self._trim(i, j)
        # Without a "Fatal Python error" line, the thread that crashed is the one faulthandler
        # calls current, not the idle thread it happened to print first (a tqdm monitor in
        # flashinfer-ai/flashinfer#4773).
        message = i
        if cls[i] != FATALPY:
            message = next(
                (k for k in range(i, end) if self._text(k).lstrip().startswith("Current thread")), i
            )
        return _Found(
            "faulthandler",
            i,
            end,
            message,
            strip_prefixes(self._text(message)),
            self._cut_at_end(end) or cls[i] != FATALPY,
        )

    def _asan(self, i: int) -> _Found:
        """An ASan/TSan/MSan/LSan report, up to its ``==pid==ABORTING`` line."""
        n, cls, nxt = self.n, self.cls, self.nxt
        j = i + 1
        while j < n:
            c = cls[j]
            if c in (TB, TERM, FATALPY, ASAN, CSAN):
                break
            if c == BLANK:
                k = nxt[j]
                if k < n and self._sanitizer_line(k):
                    j = k
                    continue
                break
            j += 1
            if ASAN_END_RE.match(self._text(j - 1).lstrip()):
                break
        end = self._trim(i, j)
        return _Found("sanitizer", i, end, i, strip_prefixes(self._text(i)), self._cut_at_end(end))

    def _sanitizer_line(self, k: int) -> bool:
        """Does line ``k`` continue a sanitizer report after a blank line?"""
        if self.cls[k] in (FRAME, CODE):
            return True
        s = self._text(k)
        return s.startswith(("0x", "==", "SUMMARY:", "Shadow", "READ of", "WRITE of")) or (
            s.rstrip().endswith("here:") or "leak of" in s
        )

    def _csan_end(self, i: int) -> int:
        j = i
        while j < self.n and self.cls[j] == CSAN:
            j += 1
        return j

    def _csan(self, i: int) -> list[_Found]:
        """compute-sanitizer output: one region per reported error inside the block."""
        end = self._csan_end(i)
        heads = [k for k in range(i, end) if _csan_header(self._text(k))]
        out: list[_Found] = []
        for h, head in enumerate(heads):
            first = i if h == 0 else head
            last = heads[h + 1] if h + 1 < len(heads) else end
            out.append(
                _Found(
                    "sanitizer",
                    first,
                    last,
                    head,
                    strip_prefixes(self._text(head)),
                    self._cut_at_end(last),
                )
            )
        return out

    def _frames(self, i: int) -> _Found:
        """A native frame block (c10, TRT-LLM, glibc, gdb) with no error line before it."""
        n, cls = self.n, self.cls
        j = self._tail(i, free=False)
        j = max(j, i + 1)
        end = self._trim(i, j)
        gdb = False
        message = -1
        for k in range(i, min(end, i + 64)):
            c = cls[k]
            if c == GDBSIG and message < 0:
                message = k
                gdb = True
            elif c == FRAME and self._text(k).lstrip().startswith("#"):
                gdb = True
        if message < 0:
            message = i
            for k in range(i, min(end, i + 64)):
                if cls[k] in (C10HDR, FRAME):
                    message = k
                    break
        kind = "gdb-backtrace" if gdb else "cpp-backtrace"
        truncated = self._cut_at_end(end) or (end == n and cls[end - 1] == FRAME)
        return _Found(kind, i, end, message, strip_prefixes(self._text(message)), truncated)

    def _error_block(self, i: int) -> _Found:
        """Adjacent error lines (and their native backtrace) that report one failure."""
        report = self._report(i)
        if report is not None:  # a paste that starts at ChildFailedError and its table
            end, text = report
            return _Found("error-line", i, end, i, text, self._cut_at_end(end))
        n, cls = self.n, self.cls
        members = [i]
        seen = {mask(strip_prefixes(self._text(i)))} if cls[i] == ERR else set()
        has_term = cls[i] == TERM
        budget = MAX_MESSAGE_LINES
        j = i + 1
        while j < n:
            c = cls[j]
            if c in (ERR, TERM, WHAT):
                # A second "terminate called" is another failure, except libstdc++'s
                # "terminate called recursively" (a second thread threw meanwhile).
                if c == TERM and has_term and "recursively" not in self._text(j):
                    break
                if c == ERR:
                    sig = mask(strip_prefixes(self._text(j)))
                    if sig in seen:  # the same line again: the next copy, not this failure
                        break
                    seen.add(sig)
                has_term = has_term or c == TERM
                members.append(j)
                j += 1
            elif c == OTHER and self._new_level(i, j):
                break  # another record of its logger, at another level: not this message
            elif c in (CODE, HINT) or (c == OTHER and self._bridges(j)):
                j += 1
            elif self._caused_by(j):
                # the error's cause chain ("Caused by:" and the causes indented under it),
                # also past the one blank line anyhow prints before it
                j = self.nxt[j] + 1
            elif c == OTHER and budget > 0 and self._continues(j):
                budget -= 1
                j += 1
            else:
                break
        j = self._tail(j, free=False)
        end = self._trim(i, j)
        kind, message, text = self._error_message(i, end, members)
        if text.endswith(":") and "panicked at " in text and message + 1 < end:
            # Rust 1.73+: "thread 'main' panicked at src/core.rs:264:80:" and the payload
            # ("called `Result::unwrap()` on an `Err` value: DriverError(...)") on the next line.
            message += 1
            text = strip_prefixes(self._text(message))
        elif text.endswith(":"):
            text = self._run_on(text, message + 1, end)
        elif message + 1 < end and EXC_RE.fullmatch(text):
            # An exception printed without its message, the message on the next line:
            # "triton.compiler.errors.CompilationError" then "AssertionError('Mismatched
            # type ...')" (sgl-project/sglang#23739).
            below = strip_prefixes(self._text(message + 1)).strip()
            if below:
                text = f"{text}: {below}"
        return _Found(kind, i, end, message, text, self._cut_at_end(end))

    def _caused_by(self, j: int) -> bool:
        """Line ``j``, or the first line after the blank lines at ``j``, opens a cause chain."""
        k = self.nxt[j] if self.cls[j] == BLANK else j
        return k < self.n and k - j <= 1 and CAUSED_BY_RE.match(self._text(k)) is not None

    def _new_level(self, i: int, j: int) -> bool:
        """Line ``j`` is a record its logger's prefix gave a level other than line ``i``'s.

        A healthy server's "INFO ... [metrics.py:455] Avg prompt throughput: 11609.8
        tokens/s" reads like a continuation ("name: number") of a WARNING above it once
        the prefixes are gone (held-out round 6's warning, buried in a big log).
        """
        level = self.lines[j].level
        return level is not None and level != self.lines[i].level

    def _continues(self, j: int) -> bool:
        """An unindented line that carries on the error message above it (see ``CONTINUATION_RE``).

        A new log record or a new exception line is never a continuation.
        """
        s = self._text(j).lstrip()
        if RECORD_RE.match(s) or EXC_RE.match(s):
            return False
        return CONTINUATION_RE.match(s) is not None or TACTIC_RE.match(s) is not None

    def _bridges(self, j: int) -> bool:
        """A plain line between two error lines of one report (``current device: 0 ...``)."""
        n, cls = self.n, self.cls
        if RECORD_RE.match(self._text(j)):
            return False
        for k in (j + 1, j + 2):
            if k >= n or cls[k] == BLANK:
                return False
            if cls[k] in (ERR, TERM, WHAT, HINT, C10HDR, FRAME):
                return True
        return False

    def _error_message(self, start: int, end: int, members: list[int]) -> tuple[str, int, str]:
        """Pick the kind and the most informative line of an error block."""
        whats = [k for k in members if self.cls[k] == WHAT]
        if whats or any(self.cls[k] == TERM for k in members):
            k = whats[0] if whats else members[0]
            return "cpp-terminate", k, strip_prefixes(self._text(k))
        best, best_kind, best_weight = members[0], "error-line", -1
        for k in members:
            hit = vocab(self._text(k))
            if hit is None:
                continue
            weight = hit[1] * 2 + (1 if EXC_RE.match(strip_prefixes(self._text(k))) else 0)
            if weight > best_weight:
                best, best_kind, best_weight = k, hit[0], weight
        if best_kind not in STRUCTURED_KINDS:
            has_frames = any(self.cls[k] == FRAME for k in range(start, min(end, start + 4096)))
            best_kind = "cpp-backtrace" if has_frames else "error-line"
        return best_kind, best, strip_prefixes(self._text(best))


def _csan_header(text: str) -> bool:
    """A compute-sanitizer line that starts one error report (``========= Invalid ...``)."""
    body = text.lstrip()[9:]
    if not body.startswith(" ") or body.startswith("  ") or not body.strip():
        return False
    head = body.strip()
    return not head.startswith(("COMPUTE-SANITIZER", "ERROR SUMMARY", "LEAK SUMMARY", "Target"))


def _unbalanced(text: str) -> bool:
    """True when brackets or quotes in ``text`` are left open (a line cut by the paste)."""
    depth = 0
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}" and depth:
            depth -= 1
    return depth > 0 or text.count('"') % 2 == 1 or text.count("`") % 2 == 1


def frame_parser() -> _FrameParser:
    """Return :func:`diagnose.frames.dialects.parse_frame`, imported only when needed."""
    from diagnose.frames.dialects import parse_frame

    return parse_frame


def frames_of(
    body: Sequence[LogLine], classes: Sequence[int], parse: _FrameParser
) -> tuple[Frame, ...]:
    """Parse the frame lines of ``body`` (at most ``MAX_FRAMES``)."""
    out: list[Frame] = []
    numberless = -1  # index in out of an IPython 7 frame still waiting for its line number
    last_def: str | None = None  # pytest shows a frame's code (its `def`) before its location
    for line, c in zip(body, classes, strict=True):
        if numberless >= 0 and c != PYFRAME:
            number = arrow_line(line.text)
            if number is not None:
                out[numberless] = replace(out[numberless], line=number)
                numberless = -1
        if c != PYFRAME and "def " in line.text and (d := DEF_RE.match(line.text)):
            last_def = d.group(1)
        if c in (PYFRAME, FRAME, CSAN):
            if c == CSAN:
                line = replace(line, text=line.text.lstrip()[9:].strip())
            try:
                frame = parse(line)
            except Exception:  # a contract breach must not lose the region
                frame = None
            if frame is not None:
                if c == PYFRAME and frame.function is None and last_def is not None:
                    # pytest's "tests/test_x.py:41:" and "x.py:620: OutOfResources" name no
                    # function; the `def` line of the code shown above them does.
                    frame = replace(frame, function=last_def, symbol=last_def)
                last_def = None
                numberless = len(out) if c == PYFRAME and frame.line is None else -1
                out.append(frame)
                if len(out) >= MAX_FRAMES:
                    break
    return tuple(out)
