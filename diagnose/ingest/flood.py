"""Take a warning flood out of the trigger search in bulk, a chunk at a time.

A server under load prints one benign warning hundreds of thousands of times. The scan
(:mod:`diagnose.ingest.scan`) already counts such a line instead of windowing it once its
shape has had its windows, but it still finds every copy with the trigger automaton and
looks at it from Python: about 5 us a copy, most of a flood log's time
(``bench/flood_bench.py``: 8.6 s for 1 GB against 2.6 s for the same log without the flood).

Once a shape is known to flood, :class:`FloodMask` learns its *stem*: the digit-free run of
the line around the trigger that made it a hit (``" is preempted by PreemptionMode.RECOMPUTE
mode because there is not enough KV cache space. ..."``), which every copy repeats byte for
byte whatever its numbers. Each later chunk is searched in a writable copy where every
occurrence of a stem is overwritten with filler of the same length (found with
``bytes.find`` at C speed; offsets and line numbers are unchanged), and counted as it is
found. The text a window shows always comes from the original chunk.

A stem is learned only when it is safe to stop seeing it:

- it is long (``MIN_STEM`` bytes), so it names one message, not a word;
- it holds no context literal (a readiness phrase, a server's settings), and with the stem
  blanked the line it came from has no other trigger, so nothing the line says besides
  the flood is hidden.

At most ``MAX_STEMS`` stems are kept, and a stem whose copies have become rare is retired
(``MIN_YIELD``): each costs a pass over every later chunk, about what ``MIN_YIELD`` copies
found one by one cost.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = [
    "MAX_STEMS",
    "MIN_CHECKED_STEM",
    "MIN_STEM",
    "FloodMask",
    "Masked",
    "line_shape",
    "stem_of",
]

#: A stem shorter than this could be a phrase of other messages too: its copies are blanked
#: only on lines of the flood's own shape (checked one by one, ~2 us a copy).
MIN_STEM = 24
#: Shorter than this, a stem is not learned at all: too common a run to be worth a pass.
#: A flood whose trigger sits between numbers ("#running-req: 12, error_count: 0") has a
#: short stem (", error_count: "); found one by one its copies cost ~25 us each
#: (bench/results/flood.md).
MIN_CHECKED_STEM = 8
#: Stems kept at once; a pass each over every later chunk (~1 ms a MiB).
MAX_STEMS = 8
#: A stem is worth its pass while a big piece holds at least one copy per this many bytes
#: (a pass is ~0.6 ns a byte, a copy found by the search ~5 us: break-even near 1 in 8 KiB).
MIN_YIELD = 8192
_JUDGED_PIECE = 1 << 20  # pieces smaller than this say nothing of a stem's yield
_DIGITS = frozenset(b"0123456789")
_SHAPE_HEX = re.compile(rb"0x[0-9a-fA-F]+")


def line_shape(raw: bytes) -> bytes:
    """A line with its numbers (decimal and ``0x`` hex) masked: what repeats of one message
    share ("step 9" and "step 100" alike).  Run on every hit of a flood, so the decimal
    digits are dropped by ``bytes.translate`` (0.3 us a line; the run-collapsing pattern
    took 2.4 us).  Only a digit between two letters could make two messages one shape
    ("sm90" and "sm"): a shape is a key for counting repeats, and a line that opens a block
    is windowed whatever its shape."""
    raw = raw[:512]
    if b"0x" in raw:
        raw = _SHAPE_HEX.sub(b"#", raw)
    return raw.translate(None, b"0123456789")


class Masked:
    """One chunk as the search sees it, and the stem copies it holds.

    ``found`` maps each stem with copies in ``buf[lo:hi]`` to ``(count, first, last)``:
    how many, and the byte offsets of the first and the last.
    """

    __slots__ = ("found", "search_buf", "stems")

    def __init__(
        self,
        search_buf: bytes | bytearray,
        found: dict[bytes, tuple[int, int, int]],
        stems: tuple[bytes, ...],
    ) -> None:
        self.search_buf = search_buf
        self.found = found
        self.stems = stems  # the stems this chunk was masked with


def stem_of(line: bytes, start: int, stop: int) -> bytes:
    """The digit-free run of ``line`` that holds ``line[start:stop]`` (a trigger's span)."""
    lo, hi = start, stop
    while lo > 0 and line[lo - 1] not in _DIGITS:
        lo -= 1
    while hi < len(line) and line[hi] not in _DIGITS:
        hi += 1
    if any(b in _DIGITS for b in line[start:stop]):
        return b""  # a trigger with digits in it ("#0  0x") is not a message's words
    return line[lo:hi]


class FloodMask:
    """The stems learned so far, and the masking of a chunk with them."""

    def __init__(
        self, finds_anything: Callable[[bytes], bool], finds_context: Callable[[bytes], bool]
    ) -> None:
        # Whether a text holds a trigger or context literal (the scan's union search), and
        # whether it holds a context literal (readiness phrases must never be blanked).
        self._finds = finds_anything
        self._context = finds_context
        self.stems: dict[bytes, bytes] = {}  # stems in use -> the shape copies count as
        self.shape_of: dict[bytes, bytes] = {}  # every stem ever learned -> its shape
        # short stems: a copy is blanked only where its line has the stem's shape
        self.checked: set[bytes] = set()
        self.tried: set[bytes] = set()  # shapes already looked at, learned or not

    def learn(self, line: bytes, start: int, stop: int, shape: bytes) -> bool:
        """Learn the stem of a flooding ``line`` whose trigger spans ``line[start:stop]``.

        Each shape is looked at once; ``False`` when it gave no safe stem.
        """
        if shape in self.tried or len(self.stems) >= MAX_STEMS:
            return False
        self.tried.add(shape)
        stem = stem_of(line, start, stop)
        # A stem belongs to the first shape that learned it, even once retired: the counts of
        # copies blanked earlier are that shape's (another message may share a short stem).
        if len(stem) < MIN_CHECKED_STEM or stem in self.shape_of:
            return False
        if self._context(stem) or self._finds(line.replace(stem, _filler(len(stem)))):
            return False
        self.stems[stem] = self.shape_of[stem] = shape
        if len(stem) < MIN_STEM:
            self.checked.add(stem)
        return True

    def copies_in(self, stem: bytes, line: bytes) -> int:
        """How many copies of ``stem`` the mask blanked in ``line`` (a line of a window)."""
        if stem not in line:
            return 0
        if stem in self.checked:
            return 1 if line_shape(line) == self.shape_of[stem] else 0
        return line.count(stem)

    def mask(self, buf: bytes, lo: int, hi: int) -> Masked:
        """``buf`` with every stem copy in ``buf[lo:hi]`` blanked, and what was blanked.

        One writable copy of the piece a pass, each copy overwritten in place: a
        ``bytes.replace`` a stem made a fresh 16 MiB object each time, and its page faults
        cost more than the search (~1.7 s a GB for three stems).
        """
        stems = tuple(self.stems)
        found: dict[bytes, tuple[int, int, int]] = {}
        out: bytearray | None = None
        judged = hi - lo >= _JUDGED_PIECE
        for stem in stems:
            size, fill = len(stem), _filler(len(stem))
            at = buf.find(stem, lo, hi)
            count, first, last = 0, -1, -1
            shape = self.shape_of[stem] if stem in self.checked else None
            while at >= 0:
                nxt = at + size
                if shape is not None:
                    # a short stem: only on a line of the flood's shape, once a line
                    start = buf.rfind(b"\n", lo, at) + 1 or lo
                    stop = buf.find(b"\n", at, hi)
                    stop = hi if stop < 0 else stop
                    nxt = stop
                    if line_shape(buf[start:stop]) != shape:
                        at = buf.find(stem, nxt, hi)
                        continue
                if out is None:
                    out = bytearray(buf)
                if first < 0:
                    first = at
                count, last = count + 1, at
                if shape is None:
                    out[at : at + size] = fill
                else:  # every copy on the checked line (one, in a flood)
                    while at >= 0:
                        out[at : at + size] = fill
                        at = buf.find(stem, at + size, nxt)
                at = buf.find(stem, nxt, hi)
            if judged and count * MIN_YIELD < hi - lo:
                # the flood ebbed: its copies cost less found one by one than this pass
                del self.stems[stem]
            if count:
                found[stem] = (count, first, last)
        return Masked(buf if out is None else out, found, stems)


def _filler(size: int) -> bytes:
    # NUL bytes: no trigger, readiness phrase or frame marker holds one, and no newline
    return b"\0" * size
