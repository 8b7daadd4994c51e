"""The C++ runtime's own ``abi::__cxa_demangle``, called in this process through ctypes.

This is the spelling C++ loggers print (TensorRT-LLM's ``TllmException::getTrace()``,
PyTorch's ``c10::demangle``), so it is our first tier, used only for names
:func:`diagnose.frames.mangled_bound.inprocess_safe` proves cannot explode.

Why not the ``cxxfilt`` package, which wraps the same function?  Measured per name on
2,908 real names: cxxfilt 7.6 us, this 5.0 us (no per-call exception objects or
``c_char_p`` wrappers), and importing cxxfilt costs ~26 ms (``ctypes.util.find_library``
runs ldconfig) where loading the soname costs 0.1 ms.  So cxxfilt is only the tests'
independent oracle (the ``test`` extra), never the run-time path.  Passing a reusable
output buffer measured slower (6.2 us): libstdc++ still mallocs the result and then copies
it into the buffer (cp-demangle.c ``__cxa_demangle``).  ``ctypes`` is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

# libiberty's d_demangle_callback refuses names whose 2*len exceeds its recursion limit
# (2,048) unless DMGL_NO_RECURSE_LIMIT is set, which __cxa_demangle never sets (gcc PR 87675,
# GCC 9+).  Batches send longer names straight to the worker instead of trying them here.
CXA_MAX_LEN = 1_024
# Sonames tried before the slow ctypes.util.find_library: GNU libstdc++, LLVM libc++.
CXX_LIBS = ("libstdc++.so.6", "libc++.so.1", "libc++.1.dylib")

_call: Any = None
_free: Any = None
_string_at: Any = None
_unavailable = False  # set once loading failed: never try again in this process


def _load() -> bool:
    """Bind ``__cxa_demangle`` and ``free``; False (and remembered) when unavailable."""
    global _call, _free, _string_at, _unavailable
    try:
        import ctypes

        lib = _open_runtime()
        call = lib.__cxa_demangle
        call.restype = ctypes.c_void_p
        call.argtypes = (ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
        free = ctypes.CDLL(None).free
        free.argtypes = (ctypes.c_void_p,)
        free.restype = None
    except Exception:  # no ctypes, no C++ runtime, or no such symbol: the fallback reads
        _unavailable = True
        return False
    _call, _free, _string_at = call, free, ctypes.string_at
    return True


def _open_runtime() -> Any:
    """The C++ runtime: its usual sonames first, ``find_library`` (runs ldconfig) last."""
    import ctypes

    # Building the candidate tuple used to call find_library (~25 ms) before any soname.
    for name in CXX_LIBS:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    import ctypes.util

    found = ctypes.util.find_library("stdc++")
    if found is None:
        raise OSError("no C++ runtime library")
    return ctypes.CDLL(found)


def loaded() -> bool:
    """True once ``__cxa_demangle`` is bound, or known to be missing (no import to come)."""
    return _call is not None or _unavailable


def cxa_demangle(core: str) -> str | None:
    """``__cxa_demangle(core)`` in this process; ``None`` when refused or unavailable.

    Callers must first prove the output small (``inprocess_safe``): this call has no
    output bound of its own.
    """
    if _unavailable or (_call is None and not _load()):
        return None
    try:
        raw = core.encode("ascii")
    except UnicodeError:
        return None
    if b"\0" in raw:
        return None  # C would read a shorter name than the one we were given
    ptr = _call(raw, None, None, None)  # NULL status: a NULL result means refused
    if not ptr:
        return None
    try:
        return str(_string_at(ptr).decode("utf-8", "replace"))
    finally:
        _free(ptr)


def cxa_demangle_each(cores: Sequence[str]) -> list[str | None]:
    """``[cxa_demangle(core) for core in cores]`` with the per-call lookups done once.

    The batch path reads thousands of names here; of ~3.8 us a name, ~2.7 us is the C
    call itself, so the Python around it is worth keeping to one loop.  Same contract:
    every name must be proven small first.
    """
    if _unavailable or (_call is None and not _load()):
        return [None] * len(cores)
    call, free, string_at = _call, _free, _string_at
    out: list[str | None] = []
    for core in cores:
        try:
            raw = core.encode("ascii")
        except UnicodeError:
            out.append(None)
            continue
        ptr = call(raw, None, None, None) if b"\0" not in raw else None
        if not ptr:
            out.append(None)
            continue
        try:
            out.append(str(string_at(ptr).decode("utf-8", "replace")))
        finally:
            free(ptr)
    return out
