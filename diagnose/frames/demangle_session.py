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
import re
from typing import TYPE_CHECKING

from diagnose.frames.mangled_shape import MAX_OUTPUT

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Sequence

    from diagnose.frames.demangle_worker import Worker

# A fresh worker is first asked this name; the answer proves it is up and speaks the protocol.
PROBE, PROBE_TEXT = b"_Z5probev", b"probe()"
# What the line protocol carries: words, and lists of words one per line.
_WORD_RE = re.compile(r"[A-Za-z0-9_.$]*")
_LINES_RE = re.compile(r"[A-Za-z0-9_.$\n]*")


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
        self.answers: list[bytes] = []
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

    def ask(self, names: list[bytes]) -> None:
        """Queue ``names`` (written as the pipe takes them)."""
        self.request += b"\n".join(names) + b"\n"
        self.asked += len(names)

    def pump(self, wait_s: float) -> None:
        """One ``select`` round of writing names and reading answers."""
        import select

        if self.dead or self.oversized:
            return
        writing = [self.fd_in] if self.sent < len(self.request) else []
        readable, writable, _ = select.select([self.fd_out], writing, [], wait_s)
        if writable:
            try:  # stdin is non-blocking: write what fits, never wait for the worker
                self.sent += os.write(self.fd_in, self.request[self.sent : self.sent + 65_536])
            except BlockingIOError:
                pass
            except OSError:  # broken pipe: the worker is gone
                self.dead = True
            if self.sent > 1 << 20:
                del self.request[: self.sent]
                self.sent = 0
        if readable:
            # 64 KiB reads: a larger buffer is mmap-ed and zeroed afresh on every call.
            chunk = os.read(self.fd_out, 65_536)
            if not chunk:
                self.dead = True
                return
            lines = chunk.split(b"\n")
            if len(lines) > 1:
                lines[0] = bytes(self.partial) + lines[0]
                self.partial = bytearray(lines.pop())
                if not self.ready:
                    self.ready = lines.pop(0) == PROBE_TEXT
                    self.dead = not self.ready
                self.answers.extend(lines)
            else:
                self.partial += chunk
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
        self.names: list[bytes] = []
        self.results: list[str | None] = []
        self.done = 0  # names before this index have their result
        self.exchange: Exchange | None = None
        self.base = 0  # index of the current exchange's first name
        # Called by finish() with the index of each name the worker gave back unread, so
        # the caller can read it another way while the worker is still busy.
        self.on_unread: Callable[[int], None] | None = None

    def ask(self, cores: Sequence[str]) -> None:
        """Add names to the batch; results come back in this order from :meth:`finish`."""
        joined = "\n".join(cores)
        if not (_LINES_RE.fullmatch(joined) and joined.count("\n") == len(cores) - 1):
            # Only a clean word can go down a line protocol; anything else is unreadable
            # and is sent as an empty line (which comes back empty: no result).
            joined = "\n".join(c if _WORD_RE.fullmatch(c) else "" for c in cores)
        names = joined.encode("ascii").split(b"\n") if cores else []
        self.names += names
        self.results += [None] * len(names)
        self._feed()

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
                if self.on_unread is not None:
                    for i in range(before, self.done):
                        if self.results[i] is None:
                            self.on_unread(i)
                last = time.monotonic()
        return self.results

    def _feed(self) -> None:
        """Send every name not yet given to a worker, starting one if needed."""
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
        batch = self.names[start:]
        if batch:
            self.exchange.ask(batch)
            self.poll()

    def _collect(self) -> None:
        exchange = self.exchange
        if exchange is None:
            return
        answers = exchange.answers
        end = self.base + len(answers)
        for i in range(self.done, end):
            text = answers[i - self.base]
            if text != self.names[i] and self.names[i]:
                self.results[i] = text.decode("utf-8", "replace")
        self.done = max(self.done, end)

    def _recover(self, strike: bool) -> None:
        """The current worker is done for: skip the name it was on, resend the rest."""
        exchange = self.exchange
        self.exchange = None
        if exchange is not None and self.done < self.base + exchange.asked and exchange.ready:
            self.done += 1  # the culprit keeps None; a worker that never came up read nothing
        self.worker.kill(strike=strike)
        if self.done < len(self.names) and self.worker.usable:
            self._feed()
        else:
            self.done = len(self.names)
