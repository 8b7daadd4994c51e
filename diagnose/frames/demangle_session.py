"""Talking to one demangler worker over its pipes: c++filt's line protocol, batch by batch.

:class:`Exchange` is one worker process's pipes: names written as the pipe takes them,
answers read as they come, never blocking on either.  :class:`Session` is one batch of
names across however many worker processes it takes: when a worker dies, times out or
starts an over-long answer, the name it was reading gets no answer and the rest go to a
fresh one.  Starting and killing processes is :mod:`diagnose.frames.demangle_worker`'s job.
"""

from __future__ import annotations

import contextlib
import os
from itertools import accumulate
from typing import TYPE_CHECKING

from diagnose.frames.mangled_shape import MAX_OUTPUT, WORD_BYTES

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Sequence

    from diagnose.frames.demangle_worker import Worker

# The worker's pipes are widened to this (F_SETPIPE_SZ; Linux's unprivileged maximum):
# c++filt answers ~100 bytes a microsecond, so it can run ~10 ms ahead of this process
# instead of stopping on a full 64 KiB pipe after ~0.6 ms.
PIPE_SIZE = 1 << 20
# Reads of 64 KiB: a larger buffer is mmap-ed and zeroed afresh on every call.
_READ_SIZE = 65_536
# While waiting, nap half as long as c++filt takes for the bytes of names it has left
# (~17 ns a byte on real names), at most _MAX_NAP; see Session.finish.
_NAP_PER_BYTE = 8.5e-9
_MAX_NAP = 0.002
_NAP_FROM = 32_768
# A fresh worker is first asked this name; the answer proves it is up, speaks the protocol
# and prints __cxa_demangle's spelling (llvm-cxxfilt would print `>>`, not `> >`).
PROBE = b"_Z5probeISt6vectorIiSaIiEEEvv"
PROBE_TEXT = "void probe<std::vector<int, std::allocator<int> > >()"


class Exchange:
    """The pipes of one worker process: lines still to write, answers read so far."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.fd_in = proc.stdin.fileno()
        self.fd_out = proc.stdout.fileno()
        self.request = bytearray()
        self.sent = 0  # bytes of `request` written
        self.asked = 0  # names in `request`
        self.partial = bytearray()
        self.answers: list[str] = []
        self.dead = False  # exited, or broke the protocol
        self.oversized = False  # the line being read is longer than MAX_OUTPUT
        # A fresh worker is first asked a probe name: its answer says the process is up
        # (start-up gets its own, longer timeout) and that it speaks the protocol.
        self.ready = False
        self.request += PROBE + b"\n"

    def reset(self) -> None:
        """Forget a finished batch's answers (every name asked was answered)."""
        del self.answers[:]
        self.asked = 0

    def ask(self, raw: bytes, count: int) -> None:
        """Queue ``count`` names joined by newlines (written as the pipe takes them)."""
        self.request += raw
        self.request += b"\n"
        self.asked += count

    def pump(self, wait_s: float) -> None:
        """One ``select`` round of writing names and reading answers."""
        import select

        if self.dead or self.oversized:
            return
        writing = [self.fd_in] if self.sent < len(self.request) else []
        readable, writable, _ = select.select([self.fd_out], writing, [], wait_s)
        if writable:
            self._write()
        if readable:
            self._read()

    def _write(self) -> None:
        try:  # stdin is non-blocking: write what fits, never wait for the worker
            # A memoryview, not a slice: slicing copied up to a pipeful (1 MiB) per write.
            with memoryview(self.request) as view:
                self.sent += os.write(self.fd_in, view[self.sent : self.sent + PIPE_SIZE])
        except BlockingIOError:
            pass
        except OSError:  # broken pipe: the worker is gone
            self.dead = True
        if self.sent > PIPE_SIZE:
            del self.request[: self.sent]
            self.sent = 0

    def _read(self) -> None:
        """Read what the worker has written (its stdout is non-blocking), up to a pipeful.

        All of it, not one read a round: while this process is busy between two rounds
        the worker must find room to write, or it stops (long names answer ~5 KB each).
        """
        for _ in range(PIPE_SIZE // _READ_SIZE):
            try:
                chunk = os.read(self.fd_out, _READ_SIZE)
            except BlockingIOError:
                return
            if not chunk:
                self.dead = True
                return
            self._take(chunk)
            if self.dead or self.oversized or len(chunk) < _READ_SIZE:
                return

    def _take(self, chunk: bytes) -> None:
        cut = chunk.rfind(b"\n")
        if cut < 0:
            self.partial += chunk
        else:
            # One decode and one split a chunk, not one a line ("\n" never occurs inside
            # a UTF-8 sequence, so cutting at it first changes nothing).
            head = bytes(self.partial) + chunk[:cut] if self.partial else chunk[:cut]
            self.partial = bytearray(chunk[cut + 1 :])
            lines = head.decode("utf-8", "replace").split("\n")
            if not self.ready:
                self.ready = lines.pop(0) == PROBE_TEXT
                if not self.ready:  # not our worker: none of its answers count
                    self.dead = True
                    return
            self.answers += lines
        if len(self.answers) > self.asked:
            self.dead = True  # more answers than names: not our protocol
        # A line longer than any result we keep: stop reading it (it could be 200 MB).
        self.oversized = len(self.partial) > MAX_OUTPUT


class Session:
    """One batch of names handed to the worker, possibly across worker restarts.

    Names are asked in order and answered in order.  When the worker dies, times out or
    starts an answer longer than ``MAX_OUTPUT``, the first unanswered name is the one it
    was reading: it gets ``None`` (exact isolation, one restart per hostile name, where
    bisecting a batch would take log n), and the names after it go to a fresh worker.
    """

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.names: list[str] = []  # as sent ("" for a name that could not be sent)
        self.results: list[str | None] = []
        self.done = 0  # names before this index have their result
        self.ends = [0]  # ends[i]: bytes of names[:i] with their newlines
        self.exchange: Exchange | None = None
        self.base = 0  # index of the current exchange's first name
        # Indices of names a live worker gave back unread, as they come in: the caller may
        # read them another way (and empty the list) while the worker is still busy.
        self.unread: list[int] = []

    def ask(self, cores: Sequence[str]) -> None:
        """Add names to the batch; results come back in this order from :meth:`finish`."""
        if not cores:
            return
        raw = _clean_lines(cores)
        if raw is None:
            # Only a clean word can go down a line protocol; anything else is unreadable
            # and is sent as an empty line (which comes back empty: no result).
            words = [core if _clean_lines([core]) is not None else "" for core in cores]
            self.ask_words(words)
        else:
            self.ask_words(list(cores), raw)

    def ask_words(self, words: list[str], raw: bytes | None = None) -> None:
        """:meth:`ask` for names the caller has checked are words of ``WORD_BYTES``.

        ``raw`` is them joined by newlines, if the caller has that at hand.  The batch
        path checks its whole batch at once (``mangled_shape.bare``); checking again
        here, chunk by chunk, cost ~1 ms of a 3,232-name batch.
        """
        if not words:
            return
        if raw is None:
            raw = "\n".join(words).encode("ascii")
        self.names += words
        self.results += [None] * len(words)
        sizes = [len(word) + 1 for word in words]
        sizes[0] += self.ends[-1]
        self.ends += accumulate(sizes)
        self._feed(raw, len(words))

    @property
    def backlog(self) -> int:
        """Bytes of the names asked for and not answered yet: the worker's work ahead.

        Bytes, not names: c++filt's time is about proportional to a name's length
        (~17 ns a byte), and names run from 20 to 5,000 bytes.
        """
        return self.ends[-1] - self.ends[self.done]

    def poll(self) -> None:
        """Move what the pipes take or hold right now, without waiting."""
        if self.exchange is not None:
            with contextlib.suppress(OSError, ValueError):
                self.exchange.pump(0.0)
            self._collect()
            if self.exchange.dead or self.exchange.oversized:
                self._recover(strike=self.exchange.dead)

    def finish(self) -> list[str | None]:
        """Wait for every answer (bounded by the worker's timeouts); the results in order."""
        import time

        worker = self.worker
        last = time.monotonic()
        while self.done < len(self.names) and self.exchange is not None:
            exchange = self.exchange
            limit = worker.timeout_s if exchange.ready else worker.start_timeout_s
            left = last + limit - time.monotonic()
            if left <= 0:
                self._recover(strike=True)
                last = time.monotonic()
                continue
            before = self.done
            try:
                exchange.pump(left)
            except (OSError, ValueError):
                exchange.dead = True
            self._collect()
            if exchange.dead or exchange.oversized:
                self._recover(strike=exchange.dead)
                last = time.monotonic()
            elif self.done != before:
                last = time.monotonic()
                # Let answers pile up in the pipe instead of waking for each buffer c++filt
                # flushes (~600 wake-ups for 3,232 names, each a select, a read and a
                # decode): nap for half the work left, as c++filt's speed predicts.  Not
                # for the last few names: a nap is never shorter than ~60 us.
                if self.backlog > _NAP_FROM:
                    time.sleep(min(self.backlog * _NAP_PER_BYTE, _MAX_NAP))
        return self.results

    def _feed(self, raw: bytes | None = None, count: int = 0) -> None:
        """Send every name not yet given to a worker, starting one if needed.

        ``raw`` is the last ``count`` names already joined, sent as they are when they
        are all that is left to send.
        """
        if self.exchange is None:
            self.exchange = self.worker.exchange()
            if self.exchange is not None:
                self.exchange.reset()
            self.base = self.done
            start = self.done
        else:
            start = self.base + self.exchange.asked
        if self.exchange is None:
            self.done = len(self.names)  # no worker: everything left stays None
            return
        left = len(self.names) - start
        if left:
            if raw is None or left != count:  # a fresh worker: the rest of the batch
                raw = "\n".join(self.names[start:]).encode("ascii")
            self.exchange.ask(raw, left)
            self.poll()

    def _collect(self) -> None:
        exchange = self.exchange
        if exchange is None:
            return
        if exchange.ready:
            self.worker.proven = True
        answers = exchange.answers
        start, end = self.done, self.base + len(answers)
        if end <= start:
            return
        # One slice and one comprehension per poll rather than a Python loop per name.
        # c++filt echoes a name it cannot read; an empty line is a name we never sent.
        new = answers[start - self.base :]
        names = self.names[start:end]
        texts = [a if a != n and n else None for a, n in zip(new, names, strict=True)]
        self.results[start:end] = texts
        if None in texts:
            self.unread += [start + k for k, t in enumerate(texts) if t is None]
        self.done = end

    def _recover(self, strike: bool) -> None:
        """The current worker is done for: skip the name it was on, resend the rest."""
        exchange = self.exchange
        self.exchange = None
        if exchange is not None and self.done < self.base + exchange.asked and exchange.ready:
            self.done += 1  # the culprit keeps None; a worker that never came up read nothing
        if exchange is not None and not exchange.ready and self.worker.demote():
            strike = False  # not GNU c++filt after all: the rest goes to the Python worker
        self.worker.kill(strike=strike)
        if self.done < len(self.names) and self.worker.usable:
            self._feed()
        else:
            self.done = len(self.names)


def _clean_lines(cores: Sequence[str]) -> bytes | None:
    """``cores`` as ASCII lines when every one is a clean word; ``None`` otherwise.

    What the line protocol carries: words of ``WORD_BYTES``, one a line.  Checked with
    bytes.translate (delete the word bytes, only the newlines may be left): ~0.4 ns a
    byte, where the regex over the joined batch it replaces took ~2.5 ns.
    """
    joined = "\n".join(cores)
    if not joined.isascii():
        return None
    raw = joined.encode("ascii")
    # Delete every word byte: what is left must be the separators, and only them.
    left = raw.translate(_SAME, WORD_BYTES)
    return raw if len(left) == len(cores) - 1 and not left.strip(b"\n") else None


_SAME = bytes(range(256))  # bytes.translate with this table (not None) is ~2x faster
