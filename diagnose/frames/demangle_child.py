"""The Python demangler worker, run by path as ``python -I -S demangle_child.py AS CPU MAX``.

Used by :mod:`diagnose.frames.demangle_worker` when GNU c++filt is not installed.  It
speaks c++filt's protocol: one name per line on stdin, one line per name on stdout, the
name echoed back when it cannot be read.  Each name goes to libstdc++'s
``__cxa_demangle``, then to binutils' libiberty ``cplus_demangle`` from ``libbfd`` if
present (which reads the long CUTLASS names ``__cxa_demangle`` refuses, gcc PR 87675,
because we pass DMGL_NO_RECURSE_LIMIT: safe only in a sandbox like this one).

It limits itself: ``RLIMIT_AS`` to ``AS`` bytes, and before each name a CPU soft limit of
"used so far + ``CPU`` seconds".  Results longer than ``MAX`` characters are not sent.
``-I -S`` keeps start-up at ~20 ms, so this file imports the standard library only (it
cannot import the ``diagnose`` package).  It is a separate program, not the library: its
stdout is its protocol.
"""

from __future__ import annotations

import ctypes
import glob
import os
import resource
import sys
from typing import Any

# Mirrors diagnose.frames.cxa.CXX_LIBS (this program cannot import the package).
_CXX_LIBS = ("libstdc++.so.6", "libc++.so.1", "libc++.1.dylib")
# cplus_demangle flags: DMGL_PARAMS | DMGL_ANSI | DMGL_TYPES | DMGL_GNU_V3 |
# DMGL_NO_RECURSE_LIMIT; no DMGL_VERBOSE, so `std::ostream` stays as __cxa_demangle prints.
_GNU_FLAGS = 1 | 2 | 16 | (1 << 14) | (1 << 18)
_LIB_DIRS = ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib")


def _load(names: list[str]) -> ctypes.CDLL | None:
    """The first of ``names`` that loads, or ``None``."""
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    return None


def _bind() -> tuple[Any, Any]:
    """``(__cxa_demangle, cplus_demangle)``, each ``None`` where the library is missing."""
    cxa = getattr(_load(list(_CXX_LIBS)), "__cxa_demangle", None)
    if cxa is not None:
        cxa.restype = ctypes.c_void_p
        cxa.argtypes = (ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    # binutils' libbfd links libiberty and exports cplus_demangle.
    dirs = [*_LIB_DIRS, *glob.glob("/usr/lib/*-linux-gnu")]
    found = (p for d in dirs for p in glob.glob(d + "/libbfd*.so*"))
    gnu = getattr(_load(sorted(found, reverse=True)), "cplus_demangle", None)
    if gnu is not None:
        gnu.restype = ctypes.c_void_p
        gnu.argtypes = (ctypes.c_char_p, ctypes.c_int)
    return cxa, gnu


def main(argv: list[str]) -> int:
    """Serve names from stdin until it closes; 3 when no demangler can be loaded."""
    limit_as, cpu_s, max_output = (int(a) for a in argv[:3])
    cxa, gnu = _bind()
    if cxa is None and gnu is None:
        return 3
    libc = ctypes.CDLL(None)
    free, strnlen = libc.free, libc.strnlen
    free.argtypes, free.restype = (ctypes.c_void_p,), None
    strnlen.argtypes, strnlen.restype = (ctypes.c_void_p, ctypes.c_size_t), ctypes.c_size_t
    status = ctypes.c_int()
    resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    for line in sys.stdin.buffer:
        name = line.rstrip(b"\n")
        use = resource.getrusage(resource.RUSAGE_SELF)
        soft = int(use.ru_utime + use.ru_stime) + cpu_s
        if hard == resource.RLIM_INFINITY or soft < hard:
            resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
        out, ptr = name, None
        try:
            status.value = 0
            if cxa is not None:
                ptr = cxa(name, None, None, ctypes.byref(status))
            # status -1 is an allocation failure: libiberty would fail the same way.
            if not ptr and status.value != -1 and gnu is not None:
                ptr = gnu(name, _GNU_FLAGS)
            if ptr and strnlen(ptr, max_output + 1) <= max_output:
                out = ctypes.string_at(ptr)
        except Exception:  # anything unexpected: echo the name, which means "unread"
            out = name
        finally:
            if ptr:
                free(ptr)
        data = memoryview(out + b"\n")
        while data:
            data = data[os.write(1, data) :]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
