"""The sandboxed demangler worker: one persistent process for names we will not read here.

The worker speaks c++filt's own protocol (see :mod:`diagnose.frames.demangle_session`).
It is GNU c++filt itself when installed (binutils): ``-i`` drops DMGL_VERBOSE so it prints
the ``__cxa_demangle`` spelling (2,908 of 2,908 real names agree), ``-r`` lifts the
1,024-character guard that makes ``__cxa_demangle`` refuse long CUTLASS names (gcc PR
87675), ``-s gnu-v3`` stops it guessing Rust for ``_ZN...17h<hash>E``.  It starts in
~1 ms, runs at C speed and flushes every line, so the first name without an answer is the
one it died on.  Without it, :mod:`diagnose.frames.demangle_child` runs under ``python -I
-S`` (~20 ms to start).  Either runs under an address-space and a CPU limit, with a
wall-clock timeout per name; after ``max_strikes`` deaths no worker is used until
``strike_memory_s`` has passed since the last one.
``subprocess`` is imported on first use.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import TYPE_CHECKING

from diagnose.frames.demangle_session import PIPE_SIZE, Exchange, Session
from diagnose.frames.mangled_shape import MAX_OUTPUT

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Sequence

CXXFILT_ARGS = ("-i", "-r", "-s", "gnu-v3")
# `ulimit` in the shell that execs c++filt: no unlimited c++filt ever runs (`&&`).
CXXFILT_SH = 'ulimit -v "$1" && ulimit -t "$2" && p="$3" && shift 3 && exec "$p" "$@"'
# Run by path: `-I` keeps site-packages (and so this package) off the child's sys.path.
# os.path, not pathlib: importing pathlib would add ~5 ms to importing this module.
_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "demangle_child.py")


def python_engine(limit_as: int, cpu_s: int) -> list[str]:
    """The command line of the Python worker (:mod:`diagnose.frames.demangle_child`)."""
    limits = [str(limit_as), str(cpu_s), str(MAX_OUTPUT)]
    return [sys.executable, "-I", "-S", _CHILD, *limits]


class Worker:
    """One persistent sandboxed demangler process for names this process will not read.

    Thread-safe (one batch at a time).  A worker that dies or times out is killed and
    restarted for the rest of its batch.  After ``max_strikes`` such deaths no worker is
    used (callers fall back to the bounded `demangle` package) until ``strike_memory_s``
    has passed since the last one.
    """

    def __init__(
        self,
        # Real names are answered in microseconds (c++filt reads ~100 bytes a microsecond);
        # only a hostile name takes this long, and three of them switch the worker off, so
        # 0.5 s keeps a log of hostile names near 1.5 s in all (it was 3 s at 1.0 s).
        timeout_s: float = 0.5,
        start_timeout_s: float = 10.0,
        limit_as: int = 512 * 1024 * 1024,
        cpu_s: int = 2,
        max_strikes: int = 3,
        strike_memory_s: float = 60.0,
    ) -> None:
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.limit_as = limit_as
        self.cpu_s = cpu_s
        self.max_strikes = max_strikes
        self.strikes = 0
        # Strikes are forgotten this long after the last one: a log of hostile names switches
        # the worker off for the rest of that log, not for the rest of a long-lived process
        # (serve, --follow) whose later real names would then take the ~10x slower fallback.
        self.strike_memory_s = strike_memory_s
        self._last_strike: float | None = None
        self.starts = 0  # processes started, for tests and the benchmark
        self.engine: list[str] | None = None  # the command line, chosen on first use
        self.proven = False  # a process of this engine has answered the probe
        self._proc: subprocess.Popen[bytes] | None = None
        self._exchange: Exchange | None = None
        self._busy_s = 0.0
        self._owner_pid = 0
        self._lock = threading.Lock()

    @property
    def usable(self) -> bool:
        """False on platforms without ``resource`` limits, or after too many recent deaths."""
        if (
            self.strikes >= self.max_strikes
            and self._last_strike is not None
            and time.monotonic() - self._last_strike > self.strike_memory_s
        ):
            self.strikes = 0  # forgiven: see strike_memory_s
        return os.name == "posix" and self.strikes < self.max_strikes

    @property
    def native(self) -> bool:
        """True when the worker is c++filt (chosen on first use), not the Python one.

        Until a process has answered the probe this is c++filt on trust: see :meth:`demote`.
        """
        if self.engine is None:
            self.engine = self._choose_engine()
        return self.engine[0] == "/bin/sh"

    def demangle(self, core: str) -> str | None:
        """Demangle in the worker; ``None`` when refused, too large, dead or unavailable."""
        return self.demangle_batch([core])[0]

    def demangle_batch(
        self,
        cores: Sequence[str],
        meanwhile: Callable[[Session | None], None] | None = None,
    ) -> list[str | None]:
        """Demangle ``cores`` in the worker; ``None`` for each one it could not read.

        ``meanwhile(session)`` runs after the names are handed over and before the answers
        are awaited: it may ``ask`` for more and should ``poll`` now and then so that
        neither pipe fills up.  Results cover ``cores`` then what it asked, in order.
        Without a usable worker it gets ``None`` and every result is ``None``.
        """

        with self._lock:
            started = time.monotonic()
            if not self.usable:
                if meanwhile is not None:
                    meanwhile(None)
                return [None] * len(cores)
            session = Session(self)
            try:
                if cores:
                    session.ask(cores)
                if meanwhile is not None:
                    meanwhile(session)
                return session.finish()
            except Exception:  # a surprise in the pipes: this worker is not to be trusted
                self.kill(strike=True)
                return [None] * len(session.names)
            finally:
                self._busy_s += time.monotonic() - started

    def prestart(self) -> None:
        """Start the process now if none runs, so it comes up while the caller prepares.

        Exec-ing ``sh`` and ``c++filt`` takes ~1 ms, the Python worker ~20 ms; a batch
        that is sure to need the worker calls this before sorting its names.
        """
        with self._lock:
            if self.usable:
                self.exchange()

    def exchange(self) -> Exchange | None:
        """The running worker's pipes, starting a process if needed; ``None`` if impossible."""
        if self._proc is not None and self._owner_pid != os.getpid():
            self._proc = self._exchange = None  # inherited across fork: the parent's pipes
        if self._proc is not None:
            if self._proc.poll() is not None or self._exchange is None:
                self.kill(strike=True)  # died between batches
            elif self._busy_s > self.cpu_s * 4:
                # c++filt's CPU limit covers its whole life, and our busy time bounds its
                # CPU time: replace it well before it could run out.  Not a strike.
                self.kill(strike=False)
            else:
                return self._exchange
        if not self.usable:
            return None
        try:
            return self._start()
        except Exception:  # cannot start a process here: count it like a death
            self.kill(strike=True)
            return None

    def _start(self) -> Exchange:
        import subprocess

        if self.engine is None:
            self.engine = self._choose_engine()
        proc = subprocess.Popen(
            self.engine,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        self.starts += 1
        self._proc, self._owner_pid, self._busy_s = proc, os.getpid(), 0.0
        assert proc.stdin is not None and proc.stdout is not None
        for fd in (proc.stdin.fileno(), proc.stdout.fileno()):
            os.set_blocking(fd, False)
            _widen(fd)
        self._exchange = Exchange(proc)
        return self._exchange

    def _choose_engine(self) -> list[str]:
        """GNU c++filt under ulimits when one is on ``PATH``, else the Python worker.

        Whether the ``c++filt`` found is GNU's (llvm-cxxfilt is also installed under
        that name, and spells names differently) is left to its first process: its
        answer to the probe must be GNU's spelling, or :meth:`demote` switches engines.
        Asking ``c++filt --version`` first cost a process and ~3 ms (``shutil``, the
        run) at the start of every process that demangles.
        """
        path = _on_path("c++filt")
        if path is not None and os.path.exists("/bin/sh"):
            limits = [str(self.limit_as // 1024), str(self.cpu_s * 8), path]
            return ["/bin/sh", "-c", CXXFILT_SH, "sh", *limits, *CXXFILT_ARGS]
        return python_engine(self.limit_as, self.cpu_s)

    def demote(self) -> bool:
        """Use the Python worker when c++filt never answered the probe as GNU's would.

        Called for a process that died or was given up on before its probe answer.
        True (and the death is no strike) when this switched engines: the ``c++filt``
        on ``PATH`` is not GNU's, or does not take ``-i -r``.
        """
        if self.proven or self.engine is None or self.engine[0] != "/bin/sh":
            return False
        self.engine = python_engine(self.limit_as, self.cpu_s)
        return True

    def kill(self, strike: bool) -> None:
        """Stop the running process (if any); ``strike`` counts it as a death."""
        proc, self._proc, self._exchange = self._proc, None, None
        if strike:
            self.strikes += 1
            self._last_strike = time.monotonic()
        if proc is None:
            return
        try:
            proc.kill()
            proc.wait(timeout=5)
        except Exception:  # already gone, or not reaped: nothing more we can do
            pass
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    def close(self) -> None:
        """Stop the worker (it also exits by itself when our end of its stdin closes)."""
        with self._lock:
            if self._proc is not None and self._owner_pid == os.getpid():
                self.kill(strike=False)

    def reset(self) -> None:
        """Stop the worker and forget past deaths."""
        self.close()
        self.strikes = 0
        self.starts = 0


def _on_path(name: str) -> str | None:
    """``shutil.which(name)`` for a plain name, without importing ``shutil`` (~2 ms)."""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or os.curdir, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _widen(fd: int) -> None:
    """Grow a pipe to ``PIPE_SIZE`` where the platform allows it (Linux); else leave it."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    except (ImportError, AttributeError, OSError):  # not Linux, or over the user's quota
        pass


WORKER = Worker()


def _atexit_close() -> None:
    WORKER.close()


def _register_atexit() -> None:
    import atexit

    atexit.register(_atexit_close)


_register_atexit()
