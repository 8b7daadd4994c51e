"""Diagnoses for the HTTP service in worker processes that are killed at the time limit.

A thread cannot be stopped: a diagnosis past ``timeout_s`` used to get its 503 while its
thread kept a core busy (nine such requests held 1.1-1.7 GB and a core for minutes).  Here
each diagnosis runs in one of ``size`` long-lived worker processes.  At the limit the
worker is killed (SIGKILL: it holds no lock the server needs) and a fresh one takes its
place, so a hostile log costs one process start, never a lost core.  Requests beyond the
busy workers wait in a queue of at most ``queue`` places; past that they are refused at
once rather than piling up (a 503 with Retry-After is what a client can act on).

Workers are started with ``spawn``: the server's threads are never forked.  A worker
loads the rule base before it takes work, so the first request pays nothing extra.

A worker whose resident memory ends a diagnosis above ``max_rss_mb`` is retired and a
fresh one started in the background: CPython keeps the arenas a 1 MB hostile body grew,
so without this the server's memory rose 75% under attack (bench/results/serve.md) and
stayed there.  The server's memory is then bounded by ``size`` times the limit.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import resource
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.context import SpawnProcess

    from diagnose.report import Diagnosis

__all__ = ["Busy", "DiagnosePool", "default_pool_size"]


class Busy(Exception):
    """Every worker is busy and the queue is full: answer 503 now, do not wait."""


def _worker_main(conn: Connection, rule_dirs: tuple[str, ...]) -> None:
    """The worker program: warm up, then diagnose one text per message until told to stop."""
    # A long-lived worker scores similar cases with rapidfuzz: import it now rather than
    # inside the first request (diagnose.similarity serves one-shot processes).
    import rapidfuzz  # noqa: F401

    from diagnose.api import diagnose_text

    dirs = tuple(Path(d) for d in rule_dirs)
    diagnose_text("", source="warm-up", rule_dirs=dirs)
    conn.send(("ready", None))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):  # the server went away
            return
        if job is None:
            return
        text, source = job
        try:
            result = diagnose_text(text, source=source, rule_dirs=dirs)
            conn.send(("ok", result, resident_bytes()))
        except Exception as exc:  # reported as data; the server answers 500 and carries on
            conn.send(("error", f"{type(exc).__name__}: {exc}"[:300], resident_bytes()))


def resident_bytes() -> int:
    """This process's resident memory now (Linux ``/proc``), else its peak."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@dataclass
class _Worker:
    process: SpawnProcess
    conn: Connection

    def alive(self) -> bool:
        return self.process.is_alive()

    def kill(self) -> None:
        try:
            self.process.kill()
            self.process.join(timeout=5)
        finally:
            self.conn.close()


class DiagnosePool:
    """``size`` worker processes, a wait queue of ``queue`` places, a kill at ``timeout_s``.

    Thread-safe; the async server calls :meth:`diagnose` from worker threads (it blocks on
    the worker's pipe, never on the CPU).  Workers start on first use.
    """

    def __init__(
        self,
        size: int,
        queue: int,
        timeout_s: float,
        rule_dirs: tuple[str, ...] = (),
        max_rss_mb: float = 0.0,
    ) -> None:
        self.size = max(1, size)
        self.queue = max(0, queue)
        self.timeout_s = timeout_s
        self.rule_dirs = rule_dirs
        self.max_rss = int(max_rss_mb * (1 << 20))  # 0: never retire for memory
        self.killed = 0  # workers killed at the time limit, for tests and logs
        self.retired = 0  # workers retired for their memory, for tests and logs
        self._idle: deque[_Worker] = deque()
        self._started = 0
        self._waiting = 0
        self._lock = threading.Condition()
        self._closed = False
        self._ctx = multiprocessing.get_context("spawn")

    def diagnose(self, text: str, source: str = "request") -> Diagnosis:
        """Diagnose ``text`` in a worker; :class:`TimeoutError` at the limit (worker killed),
        :class:`Busy` when the queue is full, :class:`RuntimeError` when the worker failed."""
        worker = self._acquire()
        try:
            worker.conn.send((text, source))
            answered = worker.conn.poll(self.timeout_s)
            reply = worker.conn.recv() if answered else None
        except (EOFError, OSError) as exc:  # the worker died (OOM killer, a crash)
            self._discard(worker)
            raise RuntimeError(f"diagnosis worker died ({type(exc).__name__})") from None
        if reply is None:
            self.killed += 1
            self._discard(worker)
            raise TimeoutError(f"diagnosis took longer than {self.timeout_s:g} s")
        status, payload, rss = reply
        if self.max_rss and rss > self.max_rss:
            self.retired += 1
            self._retire(worker)
        else:
            self._release(worker)
        if status != "ok":
            raise RuntimeError(str(payload))
        result: Diagnosis = payload
        return result

    def pids(self) -> list[int]:
        """Process ids of the idle workers (for tests and operators)."""
        with self._lock:
            return [w.process.pid for w in self._idle if w.process.pid is not None]

    def close(self) -> None:
        """Stop every idle worker; busy ones are stopped when they come back."""
        with self._lock:
            self._closed = True
            workers = list(self._idle)
            self._idle.clear()
            self._lock.notify_all()
        for w in workers:
            with contextlib.suppress(OSError):
                w.conn.send(None)
            w.kill()

    # -- internals -------------------------------------------------------------------

    def _acquire(self) -> _Worker:
        with self._lock:
            if self._closed:
                raise Busy("the server is shutting down")
            if not self._idle and self._started >= self.size:
                if self._waiting >= self.queue:
                    raise Busy(f"all {self.size} diagnosis workers are busy; try again")
                self._waiting += 1
                try:
                    while not self._idle and self._started >= self.size and not self._closed:
                        self._lock.wait()
                finally:
                    self._waiting -= 1
                if self._closed:
                    raise Busy("the server is shutting down")
            if self._idle:
                worker = self._idle.popleft()
                if worker.alive():
                    return worker
                self._started -= 1  # died while idle (OOM killer): replace it below
                worker.conn.close()
            self._started += 1
        try:
            return self._spawn()
        except BaseException:
            with self._lock:
                self._started -= 1
                self._lock.notify()
            raise

    def _spawn(self) -> _Worker:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(
            target=_worker_main, args=(child, self.rule_dirs), name="diagnose-worker", daemon=True
        )
        process.start()
        child.close()
        worker = _Worker(process, parent)
        # Loading the rule base takes about a second cold; a worker that cannot even do that
        # within a generous bound is broken, not slow.
        if not parent.poll(max(30.0, self.timeout_s)) or parent.recv()[0] != "ready":
            worker.kill()
            raise RuntimeError("diagnosis worker did not start")
        return worker

    def _release(self, worker: _Worker) -> None:
        with self._lock:
            if self._closed:
                closed = True
            else:
                closed = False
                self._idle.append(worker)
                self._lock.notify()
        if closed:
            worker.kill()

    def _retire(self, worker: _Worker) -> None:
        """Stop a worker that grew too big and start its successor off the request path."""
        with contextlib.suppress(OSError):
            worker.conn.send(None)
        self._discard(worker)
        threading.Thread(target=self._replace, name="diagnose-worker-start", daemon=True).start()

    def _replace(self) -> None:
        with self._lock:
            if self._closed or self._started >= self.size:
                return
            self._started += 1
        try:
            worker = self._spawn()
        except BaseException:
            with self._lock:
                self._started -= 1
                self._lock.notify()
            return
        self._release(worker)

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            self._started -= 1
            self._lock.notify()


def default_pool_size(concurrency: int) -> int:
    """Workers per server process: the configured concurrency, at most the CPU count."""
    return max(1, min(concurrency, os.cpu_count() or 1))
