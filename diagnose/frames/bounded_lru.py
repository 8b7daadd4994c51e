"""A least-recently-used string map bounded by entry count and by total characters.

The demangle cache: bounding characters as well as entries keeps a log full of huge
kernel names from holding gigabytes.  Thread-safe.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping


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

    def __len__(self) -> int:
        return len(self._data)

    def get_many(self, keys: Iterable[str]) -> dict[str, str]:
        """The cached entries among ``keys`` (marked recently used), under one lock.

        A batch (``demangle_many``) pays one lock and one C-level loop, not a call per name.
        """
        with self._lock:
            data = self._data
            hits = {k: v for k in keys if (v := data.get(k)) is not None}
            for k in hits:
                data.move_to_end(k)
            return hits

    def put_many(self, items: Mapping[str, str]) -> None:
        """``put`` every item, under one lock (same per-entry size rule).

        Sizes are summed with ``map(len, ...)`` and the per-entry rule is checked only when
        the longest key plus the longest value could break it: C loops, not Python ones.
        """
        if not items:
            return
        if len(items) > self._max_entries:
            # Only the last max_entries could stay: storing the rest only to evict it cost a
            # 472k-name batch ~1 s (of dict churn) for nothing.
            items = {k: items[k] for k in list(items)[-self._max_entries :]}
        limit = self._max_chars
        if (max(map(len, items)) + max(map(len, items.values()))) * 8 > limit:
            items = {k: v for k, v in items.items() if (len(k) + len(v)) * 8 <= limit}
        size = sum(map(len, items)) + sum(map(len, items.values()))
        with self._lock:
            data = self._data
            if not data.keys().isdisjoint(items):
                for k in items.keys() & data.keys():
                    old = data.pop(k)
                    self._chars -= len(k) + len(old)
            data.update(items)
            self._chars += size
            while len(data) > self._max_entries or self._chars > self._max_chars:
                k, v = data.popitem(last=False)
                self._chars -= len(k) + len(v)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._data.clear()
            self._chars = 0
