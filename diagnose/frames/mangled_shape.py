"""What an Itanium mangled name looks like in a log, and the size bounds every tier shares.

:func:`is_mangled` tests the shape; :func:`prepare` strips the decorations a backtrace or
``nm`` adds (a leading ``.``, Mach-O underscores, an ``@VERSION`` suffix) so a demangler
sees a plain ``_Z`` name.  Pure string work on ``re``; nothing here runs a demangler.
"""

from __future__ import annotations

import re

# Longest input any tier will look at.  The `demangle` package's own max_input is 64 KiB;
# the longest of 743,842 real symbols measured (shared research, parsing.md) is 4,614.
MAX_NAME = 65_536
# Longest result we hand back (again the `demangle` package's cap); real maximum is ~13k.
MAX_OUTPUT = 65_536

# The characters of a mangled word after its `_Z` (SHAPE_RE's tail), as bytes for
# bytes.translate, which checks a whole batch at ~0.6 ns a byte (a regex: ~2.5 ns).
WORD_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.$"

SHAPE_RE = re.compile(r"\.?_{1,4}Z[A-Za-z0-9_][A-Za-z0-9_.$]*")
# ELF symbol versions that nm/backtraces append: `@GLIBCXX_3.4`, `@@CXXABI_1.3.9`.
VERSION_RE = re.compile(r"@@?[A-Za-z][A-Za-z0-9_.]*\Z")


def is_mangled(token: str) -> bool:
    """True when ``token`` has the shape of an Itanium C++ mangled name.

    Accepts ``_Z...``, Mach-O ``__Z...``, Apple block ``___Z...``/``____Z...``, a leading
    ``.`` (PowerPC/LLVM dot symbols) and a trailing ``@VERSION``.  Shape only: a name that
    passes may still be unreadable, and :func:`diagnose.frames.demangle.demangle` then
    returns it unchanged.
    """
    if not isinstance(token, str) or len(token) > MAX_NAME:
        return False
    core = VERSION_RE.sub("", token, count=1) if "@" in token else token
    return SHAPE_RE.fullmatch(core) is not None


def worth_reading(symbol: object) -> bool:
    """Cheap pre-check before the cache: a string that may be a mangled name."""
    return isinstance(symbol, str) and 3 <= len(symbol) <= MAX_NAME and "Z" in symbol[:6]


def prepare(symbol: str) -> tuple[str, str, bool] | None:
    """``(dot, core, is_block)`` with decorations stripped, or ``None`` when not mangled.

    ``core`` starts with ``_Z`` (or ``___Z`` for an Apple block invocation); ``dot`` is the
    leading ``.`` to put back on the result.
    """
    core = VERSION_RE.sub("", symbol, count=1) if "@" in symbol else symbol
    dot = ""
    if core.startswith("."):
        dot, core = ".", core[1:]
    if SHAPE_RE.fullmatch(core) is None:
        return None
    if core.startswith("____Z"):
        core = core[1:]  # LLVM strips one leading underscore, then reads `___Z` blocks
    if core.startswith("___Z"):
        return dot, core, True
    if core.startswith("__Z"):
        core = core[1:]  # Mach-O adds one underscore to every C symbol
    return dot, core, False


def bare(symbols: list[str]) -> bool:
    """True when every item is a plain ``_Z`` word of 3 to ``MAX_NAME`` characters, which
    ``worth_reading`` takes and :func:`prepare` leaves as it is.

    Real batches are nearly all such names; checking the batch at once lets the batch path
    skip the per-name filter and ``prepare`` (1.3 us a name).  One join a ~64 KB slice
    touches each name once; every other test runs over the slice's bytes in C.  (Five
    ``map`` passes over a 474k-name list cost more than the rest together: each pass
    visits every string object again.)  Joining a whole batch at once cost twice as much,
    most of it page faults on the fresh memory.
    """
    if not symbols:
        return False
    for start in range(0, len(symbols), _SLICE):
        part = symbols[start : start + _SLICE]
        try:
            joined = "\n".join(part)
        except TypeError:  # not every item is a string
            return False
        if not joined.isascii():
            return False
        raw = joined.encode("ascii")
        if len(raw) > MAX_NAME and max(map(len, part)) > MAX_NAME:
            return False
        # Every line starts `_Z`, then a character SHAPE_RE allows second (not `.`/`$`),
        # and none is `_Z` alone.
        if not raw.startswith(b"_Z") or raw.count(b"\n_Z") != len(part) - 1:
            return False
        if raw.startswith((b"_Z.", b"_Z$", b"_Z\n")) or raw == b"_Z" or raw.endswith(b"\n_Z"):
            return False
        if b"\n_Z." in raw or b"\n_Z$" in raw or b"\n_Z\n" in raw:
            return False
        # Delete every word byte: what is left must be the separators, and only them.
        left = raw.translate(_SAME, WORD_BYTES)
        if len(left) != len(part) - 1 or left.strip(b"\n"):
            return False
    return True


_SLICE = 128  # names checked at a time: ~64 KB, under malloc's mmap threshold
_SAME = bytes(range(256))  # bytes.translate with this table (not None) is ~2x faster
