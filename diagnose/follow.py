"""Watch a live server log: follow a growing file like ``tail -F`` and report each crash.

:func:`follow_file` yields the bytes a file gains, survives rotation (the path now names a
new file: the old one is read to its end first) and truncation (``copytruncate``: reading
restarts at 0), and yields :data:`IDLE` on each empty poll so the caller keeps a clock.

:func:`watch` drives a :class:`~diagnose.stream.StreamDiagnoser` over a followed file,
stdin, or a finished file, hands each event to ``on_event`` (the CLI prints it) and, with
``until_ready``, stops at the first of: the server says it is serving (exit 0), a fatal
crash (exit 1), the timeout (exit 1).  Survived warnings (skipped autotuner tactics
during warm-up) are reported as events and never end the watch.
"""

from __future__ import annotations

import enum
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from diagnose.exitcodes import ExitCode, for_verdict
from diagnose.records import record

if TYPE_CHECKING:
    from diagnose.report import Diagnosis
    from diagnose.stream import Ready

__all__ = ["IDLE", "RESTART", "Signal", "WatchResult", "follow_file", "watch"]


class Signal(enum.Enum):
    """What :func:`follow_file` yields besides data."""

    IDLE = "idle"  # a poll found nothing new
    RESTART = "restart"  # the file was truncated or replaced: line numbers restart at 1


#: Bytes of the end of what was read, compared with the file before each read.
_TAIL = 64

IDLE = Signal.IDLE
RESTART = Signal.RESTART


def follow_file(
    path: str | os.PathLike[str],
    *,
    poll: float = 0.2,
    chunk_size: int = 1 << 20,
    stop: Callable[[], bool] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[bytes | Signal]:
    """Yield what ``path`` gains, from its start, until ``stop()`` is true.

    A missing file is waited for (a server may not have created it yet).  Rotation is
    seen as the path naming another inode; truncation as the size dropping below the
    read position, or as the last bytes read no longer being where they were (truncated
    and regrown past the read position between two polls).  Never raises for a vanished
    or unreadable file: it keeps waiting.
    """
    handle = None
    identity: tuple[int, int] | None = None
    tail = b""  # the last bytes read, which must still be where they were
    try:
        while stop is None or not stop():
            if handle is None:
                try:
                    handle = open(path, "rb")  # noqa: SIM115 - held across yields, closed below
                except OSError:
                    yield IDLE
                    sleep(poll)
                    continue
                st = os.fstat(handle.fileno())
                tail = b""
                if identity is not None:
                    yield RESTART  # a new file at the path: it starts at line 1
                identity = (st.st_dev, st.st_ino)
            if _rewritten(handle, tail):
                # Truncated and regrown past the read position between two reads
                # (copytruncate and a chatty server): reading on would lose the crash.
                handle.seek(0)
                tail = b""
                yield RESTART
            data = handle.read(chunk_size)
            if data:
                tail = (tail + data[-_TAIL:])[-_TAIL:]
                yield data
                continue
            try:
                now = os.stat(path)
            except OSError:
                now = None
            if now is not None and (now.st_dev, now.st_ino) != identity:
                handle.close()  # rotated: the old file is read to its end, take the new one
                handle = None
                continue
            if os.fstat(handle.fileno()).st_size < handle.tell():
                handle.seek(0)  # copytruncate: the same file starts over
                tail = b""
                yield RESTART
                continue
            yield IDLE
            sleep(poll)
    finally:
        if handle is not None:
            handle.close()


def _rewritten(handle: BinaryIO, tail: bytes) -> bool:
    """True when the bytes just before the read position are no longer the ones read there."""
    if not tail:
        return False
    end = handle.tell()
    try:
        return os.pread(handle.fileno(), len(tail), end - len(tail)) != tail
    except OSError:
        return False


@record
class WatchResult:
    """How a watch ended: ``outcome`` is ``ready``, ``crash``, ``timeout`` or ``ended``.

    ``crash`` is the diagnosis that ended it (or the last fatal one seen); ``summary``
    is the whole-log verdict of a watch that ran to the end of its input or its timeout
    (every window judged together, as ``diagnose FILE`` judges the file); ``message`` is
    one line for the user; ``exit_code`` follows README "Exit codes".
    """

    outcome: str
    exit_code: int
    message: str
    ready: Ready | None = None
    crash: Diagnosis | None = None
    reports: int = 0
    summary: Diagnosis | None = None


def watch(
    source: str | os.PathLike[str],
    *,
    follow: bool = True,
    until_ready: bool = False,
    timeout: float | None = None,
    quiet: float = 2.0,
    poll: float = 0.2,
    rule_dirs: Sequence[Path] = (),
    on_event: Callable[[Diagnosis | Ready], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> WatchResult:
    """Diagnose ``source`` as it grows and report each crash through ``on_event``.

    ``source`` is a path or ``-`` (stdin, read as it arrives).  ``follow=False`` reads the
    file once to its end (useful with ``until_ready`` on a finished log).  ``quiet``
    seconds without new data complete an open crash window.  Without ``until_ready`` the
    watch ends at the timeout or the end of input, and its exit code is the whole log's
    verdict (:meth:`~diagnose.stream.StreamDiagnoser.summary`): 1 (known cause) or 3
    (unknown) for a fatal crash, else 0, as ``diagnose FILE`` on the same bytes.  Raises
    :class:`~diagnose.errors.InputError` only for an unreadable non-followed file.
    """
    from diagnose.report import Diagnosis
    from diagnose.stream import StreamDiagnoser, is_fatal_crash

    name = "<stdin>" if str(source) == "-" else os.fspath(source)
    engine = StreamDiagnoser(source=name, rule_dirs=rule_dirs, summary=True)
    deadline = None if timeout is None else clock() + max(0.0, timeout)
    reports = 0
    last_fatal: Diagnosis | None = None
    last_data = clock()

    def expired() -> bool:
        return deadline is not None and clock() >= deadline

    def take(event: Diagnosis | Ready, stop_on_crash: bool) -> WatchResult | None:
        """Count and hand on one event; the result that ends the watch, if it does."""
        nonlocal reports, last_fatal
        if on_event is not None:
            on_event(event)
        if isinstance(event, Diagnosis):
            reports += 1
            if is_fatal_crash(event):
                last_fatal = event
                if until_ready and stop_on_crash:
                    return WatchResult(
                        "crash", for_verdict(True, event.known),
                        f"fatal crash before the server was ready: {event.title}",
                        crash=event, reports=reports,
                    )  # fmt: skip
        elif until_ready and event.serving:
            return WatchResult(
                "ready", ExitCode.NO_FATAL_FAILURE,
                f"server ready (line {event.line}): {event.phrase}",
                ready=event, reports=reports,
            )  # fmt: skip
        return None

    for item in _items(source, follow, poll, quiet, expired):
        if isinstance(item, bytes):
            events = engine.feed(item)
            last_data = clock()
        elif item is RESTART:
            events = engine.restart()
        elif clock() - last_data >= quiet:
            events = engine.idle()
        else:
            events = []
        for event in events:
            if (done := take(event, stop_on_crash=True)) is not None:
                return done
    # The final flush reads on past a crash: a later ready line there still wins.
    for event in engine.close():
        if (done := take(event, stop_on_crash=False)) is not None:
            return done
    if until_ready and last_fatal is not None:
        return WatchResult("crash", for_verdict(True, last_fatal.known),
                           f"fatal crash before the server was ready: {last_fatal.title}",
                           crash=last_fatal, reports=reports)  # fmt: skip
    # The whole log judged at its end: a crash the server later came through (a ready line
    # after it) or a cascade of one root is not the alarm a window alone raised.
    summary = engine.summary()
    if until_ready:  # never ready and no crash: not a success, and no cause to name
        code = ExitCode.FATAL_UNKNOWN_CAUSE
    else:
        code = for_verdict(summary.fatal, summary.known)
    if expired():
        what = "not ready" if until_ready else "stopped"
        return WatchResult("timeout", code, f"{what} after {timeout:g} s{_whole(summary)}",
                           crash=last_fatal, reports=reports, summary=summary)  # fmt: skip
    what = "input ended before the server said it was ready" if until_ready else "input ended"
    return WatchResult("ended", code, what + _whole(summary), crash=last_fatal,
                       reports=reports, summary=summary)  # fmt: skip


def _whole(summary: Diagnosis) -> str:
    """The whole-log verdict, said after how a watch ended."""
    if summary.primary is None and not summary.fatal:
        return ""
    state = "fatal" if summary.fatal else "survived"
    return f"; whole log: {summary.cause} ({state})"


def _items(
    source: str | os.PathLike[str],
    follow: bool,
    poll: float,
    quiet: float,
    expired: Callable[[], bool],
) -> Iterator[bytes | Signal]:
    """Data and signals from a followed file, stdin, or a file read once."""
    if str(source) == "-":
        from diagnose.stream import read_chunks

        for chunk in read_chunks(sys.stdin.buffer, min(poll, quiet), 1 << 20):
            if expired():
                return
            if chunk is None:
                yield IDLE
            else:
                yield chunk if isinstance(chunk, bytes) else chunk.encode("utf-8", "replace")
        return
    if follow:
        yield from follow_file(source, poll=poll, stop=expired)
        return
    from diagnose.ingest.read import open_source

    with open_source(source) as stream:
        while chunk := stream.read(4 << 20):
            yield chunk
            if expired():
                return
