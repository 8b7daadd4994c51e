"""A least-recently-used string map bounded by entry count and by total characters.

The demangle cache: bounding characters as well as entries keeps a log full of huge
kernel names from holding gigabytes.  Thread-safe.
"""

from __future__ import annotations

import threading
from collections import OrderedDict


class BoundedLRU:
    """Least-recently-used map bounded both by entry count and by total characters."""

    def __init__(self, max_entries: int, max_chars: int) -> None:
        self._data: OrderedDict[str, str] = OrderedDict()
        self._chars = 0
        self._max_entries = max_entries
        self._max_chars = max_chars
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        """Return the cached value and mark it recently used, or ``None``."""
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: str, value: str) -> None:
        """Store ``key -> value`` unless it alone exceeds an eighth of the character budget."""
        size = len(key) + len(value)
        if size * 8 > self._max_chars:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._chars -= len(key) + len(old)
            self._data[key] = value
            self._chars += size
            while len(self._data) > self._max_entries or self._chars > self._max_chars:
                k, v = self._data.popitem(last=False)
                self._chars -= len(k) + len(v)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._data.clear()
            self._chars = 0
