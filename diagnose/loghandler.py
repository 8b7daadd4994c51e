"""A ``logging.Handler`` that diagnoses a Python service's own crash output, in-process.

Attach :class:`DiagnoseHandler` to the logger that records the service's errors; it
formats each record (tracebacks included) into a :class:`~diagnose.stream.StreamDiagnoser`
and calls ``callback`` with each :class:`~diagnose.report.Diagnosis` when its crash
completes::

    import logging
    from diagnose.loghandler import DiagnoseHandler

    def report(d):                      # e.g. raise an alert, tag a metric
        alerts.send(d.cause, d.title, d.fixes[0].title if d.fixes else "")

    logging.getLogger().addHandler(DiagnoseHandler(report))

A record that carries a traceback (``logger.exception``) is a complete crash and is
diagnosed at once; other error lines complete after ``settle_lines`` further records,
on :meth:`flush` or at ``logging.shutdown()``.  Output that never passes through
``logging`` (a C++ ``terminate``, a segfault's faulthandler dump on stderr) is out of
its reach: follow the process's log file with ``diagnose --follow`` for those.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from diagnose.report import Diagnosis
    from diagnose.stream import Ready

__all__ = ["DiagnoseHandler"]


class DiagnoseHandler(logging.Handler):
    """Feed formatted log records to a streaming diagnoser; hand each diagnosis to ``callback``.

    ``callback`` runs in the logging thread under the handler's lock; records it logs
    itself are ignored by this handler (no feedback loop).  An exception in ``callback``
    goes to :meth:`logging.Handler.handleError`, like any handler failure.
    """

    def __init__(
        self,
        callback: Callable[[Diagnosis], None],
        level: int = logging.NOTSET,
        *,
        source: str = "<logging>",
        settle_lines: int = 40,
        rule_dirs: Sequence[Path] = (),
    ) -> None:
        """Diagnose records at ``level`` and above; see the module docstring."""
        super().__init__(level)
        from diagnose.stream import StreamDiagnoser

        self.callback = callback
        self._engine = StreamDiagnoser(
            source=source, settle_lines=settle_lines, rule_dirs=rule_dirs
        )
        self._local = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        """Format ``record`` and feed it; a record with a traceback completes its crash."""
        if getattr(self._local, "busy", False):
            return  # the callback logged: never diagnose our own reporting
        try:
            text = self.format(record)
            events = self._engine.feed(text + "\n")
            if record.exc_info or record.exc_text:
                events += self._engine.idle()
            self._deliver(events)
        except Exception:  # a handler must never break the service's logging
            self.handleError(record)

    def flush(self) -> None:
        """Complete the crash in progress (called by ``logging.shutdown``)."""
        with self.lock or _NO_LOCK:
            try:
                self._deliver(self._engine.idle())
            except Exception:  # logging.shutdown must not fail because of us
                self.handleError(logging.makeLogRecord({"msg": "DiagnoseHandler.flush"}))

    def close(self) -> None:
        """Complete everything pending, then close the handler."""
        try:
            with self.lock or _NO_LOCK:
                self._deliver(self._engine.close())
        except Exception:  # logging.shutdown must not fail because of us
            self.handleError(logging.makeLogRecord({"msg": "DiagnoseHandler.close"}))
        finally:
            super().close()

    def _deliver(self, events: Sequence[Diagnosis | Ready]) -> None:
        from diagnose.report import Diagnosis

        self._local.busy = True
        try:
            for event in events:
                if isinstance(event, Diagnosis):
                    self.callback(event)
        finally:
            self._local.busy = False


class _NoLock:
    """Stand-in when ``createLock`` was overridden to give no lock."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_LOCK = _NoLock()
