"""Connection-level limits for ``diagnose serve``: header timeout, connection cap, quiet refusals.

uvicorn closes an idle keep-alive connection, but not one that never finishes its request
headers: a client that connects and sends nothing, or one header byte a second, holds a
socket for ever (1,000 such sockets were open after 20 s; with 512 file descriptors
/healthz stopped answering).  :class:`GuardedH11Protocol` is uvicorn's h11 protocol with

* a header deadline: from the first byte of a request (or the connection's start) the
  client has ``header_timeout_s`` to finish its request line and headers, else the socket
  is closed (the body has its own limit in the app, ``read_timeout_s``);
* a connection cap: past ``max_connections`` open connections, the oldest one that has not
  finished sending a request is closed to make room (a flood of idle sockets then evicts
  itself, and a real client still gets in); when every connection is mid-request, the new
  one is closed;
* refusals logged once per ``log_interval_s`` per kind with the count since the last line,
  not once per socket (a flood of refusals filled stderr with 120 MB in 15 s).

The limits are class attributes set by :func:`configure`, so uvicorn's worker processes,
which import this class by reference, get them from the same server config.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

if TYPE_CHECKING:
    import asyncio

__all__ = ["GuardedH11Protocol", "RefusalLog", "configure"]

_log = logging.getLogger("diagnose.serve")


class RefusalLog:
    """Log each kind of refusal at most once per interval, with how many were not logged."""

    def __init__(self, interval_s: float = 10.0) -> None:
        self.interval_s = interval_s
        self.counts: dict[str, int] = {}  # all refusals by kind, for tests and operators
        self._last: dict[str, float] = {}
        self._unlogged: dict[str, int] = {}

    def refused(self, kind: str, detail: str) -> None:
        """Count one refusal of ``kind``; log it when the kind's interval has passed."""
        self.counts[kind] = self.counts.get(kind, 0) + 1
        now = time.monotonic()
        last = self._last.get(kind)
        if last is not None and now - last < self.interval_s:
            self._unlogged[kind] = self._unlogged.get(kind, 0) + 1
            return
        more = self._unlogged.pop(kind, 0)
        self._last[kind] = now
        also = f" (and {more} more since the last report)" if more else ""
        _log.warning("refused: %s: %s%s", kind, detail, also)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header deadline and a connection cap (see module)."""

    header_timeout_s: float = 10.0
    max_connections: int = 512
    refusals: RefusalLog = RefusalLog()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._opened = time.monotonic()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            idle = [c for c in self.connections if isinstance(c, GuardedH11Protocol)
                    and c is not self and c._between_requests()
                    and not c.transport.is_closing()]  # fmt: skip
            victim = min(idle, key=lambda c: c._opened, default=None)
            self.refusals.refused(
                "connection limit",
                f"{self.max_connections} connections are open; "
                + ("closed the oldest idle one" if victim else "refused a new one"),
            )
            if victim is None:
                transport.close()
                return
            victim._disarm_header_timer()
            victim.transport.close()
        self._arm_header_timer()

    def _between_requests(self) -> bool:
        """No request is being received or answered on this connection."""
        return self.conn.their_state is h11.IDLE and (
            self.cycle is None or self.cycle.response_complete
        )

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:
            self._arm_header_timer()  # a request has begun (or is about to): its headers
        else:
            self._disarm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._header_late)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_late(self) -> None:
        self._header_timer = None
        if self._between_requests() and not self.transport.is_closing():
            self.refusals.refused(
                "header timeout", f"request headers not received within {self.header_timeout_s:g} s"
            )
            self.transport.close()


def configure(header_timeout_s: float, max_connections: int, log_interval_s: float = 10.0) -> None:
    """Set the limits every :class:`GuardedH11Protocol` connection of this process uses."""
    GuardedH11Protocol.header_timeout_s = header_timeout_s
    GuardedH11Protocol.max_connections = max_connections
    GuardedH11Protocol.refusals = RefusalLog(log_interval_s)
