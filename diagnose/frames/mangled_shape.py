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
