"""Demangle Itanium C++ symbols the way C++ loggers print them, without trusting the input.

``demangle`` returns the ``abi::__cxa_demangle`` spelling (what TensorRT-LLM's
``TllmException::getTrace()`` and PyTorch's ``c10::demangle`` print), so frames we
demangle compare equal to frames a logger already demangled.  ``demangle_many`` does the
same for a whole list (a log region's frames) in one exchange with the worker.  Tiers:

1. libstdc++'s ``__cxa_demangle`` through ctypes in this process, but only for names a
   linear-time check proves cannot explode (see :func:`_output_bound_bits`).  libiberty
   bounds recursion, not output: a 249-byte name whose back-references double the output
   at each level expands to 201 MB.
2. Every other name goes to one persistent sandboxed worker: GNU ``c++filt -i -r`` under
   ``ulimit -v/-t`` when binutils is installed, else a Python process running
   ``__cxa_demangle`` (and binutils' libiberty ``cplus_demangle`` from ``libbfd`` if
   present) under ``RLIMIT_AS``/``RLIMIT_CPU``; a wall-clock timeout applies per name.
   Names ``__cxa_demangle`` refuses (about 10 % of real names, almost all because
   libiberty's stack guard refuses any name over 1,024 characters, gcc PR 87675; long
   CUTLASS kernel names are why TensorRT-LLM logs show raw ``_ZN...`` frames) are read
   there with the guard off, which only a sandbox may do: deep nesting can then overflow
   the stack.  A worker that dies, times out or starts a too-long answer is killed; the
   name it was reading gets no answer and the rest of its batch goes to a fresh worker.
   After a few deaths the process stops using one (a log full of hostile names costs
   bounded time).
3. What neither reads, or everything when no worker can run, goes to the pure-Python
   ``demangle`` package under its default ``Limits`` (depth, input and output caps).

Results are kept in a small LRU bounded by entries and by characters.  ``read_mangled_prefix``
recovers namespace, function name and template arguments from a name cut mid-way, which
no demangler does.  Heavy imports (``ctypes``, ``demangle``, ``subprocess``) happen on
first use, so importing this module is cheap.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from diagnose.model import ParsedName, TemplateArg

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Iterable, Sequence

__all__ = ["demangle", "demangle_in_text", "demangle_many", "is_mangled", "read_mangled_prefix"]

# Longest input any tier will look at.  The `demangle` package's own max_input is 64 KiB;
# the longest of 743,842 real symbols measured (shared research, parsing.md) is 4,614.
_MAX_NAME = 65_536
# Longest result we hand back (again the `demangle` package's cap); real maximum is ~13k.
_MAX_OUTPUT = 65_536
# In-process tier: at most this many characters and a proven output bound of 2**24 chars
# (16 MiB, about 0.15 s of __cxa_demangle in the worst case; real names print < 13k).
_INPROC_MAX_LEN = 8_192
_INPROC_BUDGET_BITS = 24
# libiberty's d_demangle_callback refuses names whose 2*len exceeds its recursion limit
# (2,048) unless DMGL_NO_RECURSE_LIMIT is set, which __cxa_demangle never sets (gcc PR 87675,
# GCC 9+).  Batches send longer names straight to the worker instead of trying them here.
_CXA_MAX_LEN = 1_024
# Most characters one mangled character can print as, outside back-references: `y` is
# "unsigned long long" plus ", " as a template argument (20); 32 leaves a margin.
_LITERAL_FACTOR = 32
# demangle_many moves the worker's pipes after this many names of its own work, so the
# worker never stalls on a full pipe while this process is busy.
_POLL_EVERY = 32

# Word characters of a mangled name in free text: llvm-cxxfilt's IsLegalItaniumChar
# (alnum, '_', '$', '.'), which its delimiters.test exercises.
_WORD_CHARS = "A-Za-z0-9_.$"
_SHAPE_RE = re.compile(r"\.?_{1,4}Z[A-Za-z0-9_][A-Za-z0-9_.$]*")
# What the worker's line protocol carries: words, and lists of words one per line.
_WORD_RE = re.compile(r"[A-Za-z0-9_.$]*")
_LINES_RE = re.compile(r"[A-Za-z0-9_.$\n]*")
_TEXT_RE = re.compile(r"(?<![A-Za-z0-9_.$])\.?_{1,4}Z[A-Za-z0-9_.$]+")
# ELF symbol versions that nm/backtraces append: `@GLIBCXX_3.4`, `@@CXXABI_1.3.9`.
_VERSION_RE = re.compile(r"@@?[A-Za-z][A-Za-z0-9_.]*\Z")
# Back-references are `S_`/`S<seq>_` substitutions and `T_`/`T<n>_`/`TL<l>__<n>_` template
# parameters: an `S` or `T` followed by a run of [0-9A-Z] and then `_`.  Every such match
# lies inside the [0-9A-Z] run that ends a `_`-separated piece, so splitting on `_` and
# stripping each piece from the right finds all overlapping matches in linear time; this
# measured 2x faster than a lookbehind regex and 3x faster than lookahead regexes.
_SEQ_CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def is_mangled(token: str) -> bool:
    """True when ``token`` has the shape of an Itanium C++ mangled name.

    Accepts ``_Z...``, Mach-O ``__Z...``, Apple block ``___Z...``/``____Z...``, a leading
    ``.`` (PowerPC/LLVM dot symbols) and a trailing ``@VERSION``.  Shape only: a name that
    passes may still be unreadable, and :func:`demangle` then returns it unchanged.
    """
    if not isinstance(token, str) or len(token) > _MAX_NAME:
        return False
    core = _VERSION_RE.sub("", token, count=1) if "@" in token else token
    return _SHAPE_RE.fullmatch(core) is not None


def demangle(symbol: str) -> str:
    """Return the ``__cxa_demangle`` spelling of ``symbol``, or ``symbol`` unchanged.

    Handles ``_Z``/``_ZL`` names, Mach-O ``__Z``, clone suffixes (``.isra.0``, ``.cold``,
    printed as ``[clone .cold]``) and strips ``@GLIBCXX_3.4`` version suffixes.  Never
    raises, never hangs and keeps memory bounded, whatever the input.
    """
    try:
        if not _worth_reading(symbol):
            return symbol
        hit = _CACHE.get(symbol)
        if hit is not None:
            return hit
        result = _demangle_uncached(symbol)
        _CACHE.put(symbol, result)
        return result
    except Exception:  # the contract is "never raises": any surprise means "unreadable"
        return symbol


def demangle_many(symbols: Iterable[str]) -> list[str]:
    """``[demangle(s) for s in symbols]``, several times faster on a cold cache.

    Names that need the worker go to it in one batch while this process demangles the
    others, so a list pays one worker start-up and no per-name pipe round trip.  Same
    guarantees as :func:`demangle`: never raises (past iterating ``symbols``), never hangs,
    bounded memory; a hostile name costs one worker restart and falls back on its own.
    """
    items = list(symbols)
    try:
        return _demangle_many(items)
    except Exception:  # never raises: redo the list one name at a time
        return [demangle(s) for s in items]


def demangle_in_text(text: str) -> str:
    """Demangle every mangled word inside free text, keeping everything around it.

    Words are maximal runs of ``[A-Za-z0-9_.$]`` as llvm-cxxfilt splits them, so
    ``lib.so(_ZN3foo3barEv+0x1a)`` becomes ``lib.so(foo::bar()+0x1a)`` while ``Foo._Z3Bar``
    (not a word of its own) stays.  A word that cannot be read is left as written.
    """
    try:
        if "_Z" not in text:
            return text
        return _TEXT_RE.sub(_replace_word, text)
    except Exception:  # never raises: give the text back as it was
        return text


def _replace_word(match: re.Match[str]) -> str:
    return demangle(match.group(0))


def _worth_reading(symbol: object) -> bool:
    """Cheap pre-check shared by both entry points: a string that may be a mangled name."""
    return isinstance(symbol, str) and 3 <= len(symbol) <= _MAX_NAME and "Z" in symbol[:6]


def _prepare(symbol: str) -> tuple[str, str, bool] | None:
    """``(dot, core, is_block)`` with decorations stripped, or ``None`` when not mangled.

    ``core`` starts with ``_Z`` (or ``___Z`` for an Apple block invocation).
    """
    core = _VERSION_RE.sub("", symbol, count=1) if "@" in symbol else symbol
    dot = ""
    if core.startswith("."):
        dot, core = ".", core[1:]
    if _SHAPE_RE.fullmatch(core) is None:
        return None
    if core.startswith("____Z"):
        core = core[1:]  # LLVM strips one leading underscore, then reads `___Z` blocks
    if core.startswith("___Z"):
        return dot, core, True
    if core.startswith("__Z"):
        core = core[1:]  # Mach-O adds one underscore to every C symbol
    return dot, core, False


def _finish(symbol: str, dot: str, text: str | None) -> str:
    """Put the decorations that belong back; an unread or oversized result gives ``symbol``."""
    if text is None or len(text) > _MAX_OUTPUT:
        return symbol
    return dot + text


def _demangle_uncached(symbol: str) -> str:
    """Strip decorations, pick a tier, and put the decorations that belong back."""
    prepared = _prepare(symbol)
    if prepared is None:
        return symbol
    dot, core, block = prepared
    # Apple block invocations: __cxa_demangle does not read them, `demangle` does.
    text = _fallback(core) if block else _demangle_itanium(core)
    return _finish(symbol, dot, text)


def _inprocess_safe(core: str) -> bool:
    """True when ``__cxa_demangle(core)`` provably prints at most ``2**24`` characters."""
    return _output_bound_bits(core) <= _INPROC_BUDGET_BITS


def _demangle_itanium(core: str) -> str | None:
    """Demangle a plain ``_Z`` name through the tiers; ``None`` when nobody can read it."""
    text = _cxa_inprocess(core) if _inprocess_safe(core) else None
    if text is None:
        # Too big to prove safe here, or refused here: the worker reads both kinds (the
        # second through libiberty without its length guard).
        text = _WORKER.demangle(core)
    if text is None:
        text = _fallback(core)
    return text


def _demangle_many(symbols: list[str]) -> list[str]:
    """The batch path: route every distinct uncached name, run the tiers side by side."""
    out = list(symbols)
    todo: dict[str, list[int]] = {}
    for i, symbol in enumerate(symbols):
        if not (isinstance(symbol, str) and 3 <= len(symbol) <= _MAX_NAME and "Z" in symbol[:6]):
            continue  # _worth_reading, inlined: this loop sees every name of the batch
        hit = _CACHE.get(symbol)
        if hit is not None:
            out[i] = hit
        elif symbol in todo:
            todo[symbol].append(i)
        else:
            todo[symbol] = [i]
    done: dict[str, str] = {}
    asked: list[_Job] = []  # in the order the worker answers
    spill: list[_Job] = []  # refused here or not provably safe: for the worker
    blocks: list[_Job] = []  # Apple blocks: the `demangle` package's
    # Start the worker only when it has work: a long name (refused here by length) or a
    # batch big enough to share.
    use_worker = _WORKER.usable and (
        len(todo) >= _BATCH_WORKER_MIN or any(len(s) > _CXA_MAX_LEN for s in todo)
    )
    # With c++filt as the worker it reads every name: it spends ~6 us of CPU on a name,
    # where the bound check and ctypes call here cost ~10 us.  Measured on the 3,232 real
    # names (CPU ms, this process + worker): all to c++filt 29 + 28; shared 45 + 21.
    # The Python worker costs more per name (29 + 72 against 61 + 51 when shared), so then
    # this process reads the short names itself and sends only the rest.
    native = use_worker and _WORKER.native

    def run(session: _Session | None) -> None:
        # Classifying, reading here and handing chunks over are interleaved, so the
        # worker starts reading while this process is still preparing names.
        chunk: list[_Job] = []
        for count, symbol in enumerate(todo):
            if session is not None and count % _POLL_EVERY == 0:
                session.poll()  # keep both pipes moving while this process is busy
            prepared = _prepare(symbol)
            if prepared is None:
                done[symbol] = symbol
                continue
            dot, core, block = prepared
            job = (symbol, dot, core)
            if block:
                blocks.append(job)
            elif session is not None and (native or len(core) > _CXA_MAX_LEN):
                chunk.append(job)
                if len(chunk) >= _CHUNK:
                    _hand_over(session, chunk, asked)
            else:
                safe = len(core) <= _CXA_MAX_LEN and _inprocess_safe(core)
                text = _cxa_inprocess(core) if safe else None
                if text is None:
                    spill.append(job)
                    if session is not None and len(spill) >= _CHUNK:
                        _hand_over(session, spill, asked)
                else:
                    done[symbol] = _finish(symbol, dot, text)
        if session is not None:
            _hand_over(session, chunk, asked)
            _hand_over(session, spill, asked)
            session.on_unread = lambda i: unread.__setitem__(i, _read_unread(asked[i][2]))

    unread: dict[int, str | None] = {}  # index in `asked` -> read after the worker gave up

    texts: list[str | None] = []
    if use_worker:
        texts = _WORKER.demangle_batch([], meanwhile=run)
    else:
        run(None)
    if spill:  # a few names refused here, or no worker during the batch: one exchange
        asked += spill
        texts += _WORKER.demangle_batch([job[2] for job in spill])
    for k, ((symbol, dot, core), text) in enumerate(zip(asked, texts, strict=True)):
        if text is None:
            text = unread[k] if k in unread else _read_unread(core)
        done[symbol] = _finish(symbol, dot, text)
    for symbol, dot, core in blocks:
        done[symbol] = _finish(symbol, dot, _fallback(core))
    for symbol, indices in todo.items():
        result = done[symbol]
        _CACHE.put(symbol, result)
        for i in indices:
            out[i] = result
    return out


_Job = tuple[str, str, str]  # (symbol as given, leading dot, core to demangle)
# A batch of this many names starts the worker even if no name needs it, to share the work.
_BATCH_WORKER_MIN = 256
# Names handed to the worker at a time: its pipe starts moving before the batch is ready.
_CHUNK = 128


def _read_unread(core: str) -> str | None:
    """A name the worker did not read (or no worker): here if provably safe, else the package.

    Run as soon as the worker answers, this overlaps the `demangle` import (~40 ms, once)
    and its ~2 ms a name with the worker's remaining work.
    """
    safe = len(core) <= _CXA_MAX_LEN and _inprocess_safe(core)
    return (_cxa_inprocess(core) if safe else None) or _fallback(core)


def _hand_over(session: _Session, jobs: list[_Job], asked: list[_Job]) -> None:
    """Ask the worker for ``jobs`` (emptying the list) and let the pipes move."""
    if jobs:
        asked.extend(jobs)
        session.ask([job[2] for job in jobs])
        del jobs[:]
    else:
        session.poll()


def _output_bound_bits(core: str) -> float:
    """log2 of an upper bound on the length of ``__cxa_demangle(core)``, in linear time.

    Without back-references every input character prints at most ``_LITERAL_FACTOR``
    characters, so the references are what can explode ("billion laughs").  Order the
    things a reference can point at (substitution candidates, template arguments) by where
    their text ends: one that ends at ``i`` only contains references to things that ended
    before ``i``.  With ``g(i) = F*n + sum(R_j * g(j) for j < i)``, where ``R_j`` counts the
    references to ``j``, induction gives ``g(i) = F*n * prod(1 + R_j for j < i)``: every
    distinct substitution target multiplies the bound by one plus its reference count.
    Template parameters (``T_``) may resolve to different arguments in nested template
    scopes, so each of those counts as its own target (a factor of 2).  A pack expansion
    ``Dp`` prints its pattern once per pack element (at most n), a factor of n each.

    Every ``S`` or ``T`` inside a [0-9A-Z] run that ends at a ``_`` is counted (overlapping
    matches included), so every real reference is counted under its true target; matches
    inside identifiers only add factors, keeping the bound an upper bound.  This assumes
    libiberty prints a node once per reference to it, which is how cp-demangle.c's printer
    works (its ``d_printing`` guard stops cycles).
    """
    n = len(core)
    if n > _INPROC_MAX_LEN:
        return float(_INPROC_BUDGET_BITS + 1)
    counts: dict[str, int] = {}
    tparams = 0
    pieces = core.split("_")
    pieces.pop()  # the text after the last `_` ends no reference
    for piece in pieces:
        head = piece.rstrip(_SEQ_CHARS)
        if len(head) == len(piece):
            continue
        run = piece[len(head) :]
        k = run.find("S")
        while k >= 0:
            seq = run[k + 1 :]
            counts[seq] = counts.get(seq, 0) + 1
            k = run.find("S", k + 1)
        tparams += run.count("T")
    bits = math.log2(_LITERAL_FACTOR * n) + sum(math.log2(1 + r) for r in counts.values())
    bits += tparams
    bits += core.count("Dp") * math.log2(n)
    return bits


# __cxa_demangle through ctypes.  Measured per name on 2,908 real names: cxxfilt 7.6 us,
# this 5.0 us (no per-call exception objects or c_char_p wrappers), and importing cxxfilt
# costs ~26 ms (ctypes.util.find_library runs ldconfig) where loading the soname costs
# 0.1 ms.  Passing a reusable output buffer measured slower (6.2 us): libstdc++ still
# mallocs the result and then copies it into the buffer (cp-demangle.c __cxa_demangle).
_cxa_call: Any = None
_cxa_free: Any = None
_cxa_string_at: Any = None
_cxa_unavailable = False
# Sonames tried before the slow ctypes.util.find_library: GNU libstdc++, LLVM libc++.
_CXX_LIBS = ("libstdc++.so.6", "libc++.so.1", "libc++.1.dylib")


def _load_cxa() -> bool:
    """Bind ``__cxa_demangle`` and ``free``; False (and remembered) when unavailable."""
    global _cxa_call, _cxa_free, _cxa_string_at, _cxa_unavailable
    try:
        import ctypes
        import ctypes.util

        lib = None
        for name in (*_CXX_LIBS, ctypes.util.find_library("stdc++")):
            if name is None:
                continue
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if lib is None:
            raise OSError("no C++ runtime library")
        call = lib.__cxa_demangle
        call.restype = ctypes.c_void_p
        call.argtypes = (ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
        free = ctypes.CDLL(None).free
        free.argtypes = (ctypes.c_void_p,)
        free.restype = None
    except Exception:  # no ctypes, no C++ runtime, or no such symbol: the fallback reads
        _cxa_unavailable = True
        return False
    _cxa_call, _cxa_free, _cxa_string_at = call, free, ctypes.string_at
    return True


def _cxa_inprocess(core: str) -> str | None:
    """``__cxa_demangle`` in this process; ``None`` when refused or unavailable."""
    if _cxa_unavailable or (_cxa_call is None and not _load_cxa()):
        return None
    try:
        raw = core.encode("ascii")
    except UnicodeError:
        return None
    if b"\0" in raw:
        return None  # C would read a shorter name than the one we were given
    ptr = _cxa_call(raw, None, None, None)  # NULL status: a NULL result means refused
    if not ptr:
        return None
    try:
        return str(_cxa_string_at(ptr).decode("utf-8", "replace"))
    finally:
        _cxa_free(ptr)


_fallback_style: Any = None


def _fallback(core: str) -> str | None:
    """Read ``core`` with the bounded pure-Python ``demangle`` package, GNU short spelling."""
    global _fallback_style
    try:
        import demangle as pydemangle

        if _fallback_style is None:
            # `expand_std_abbreviations=False` keeps `std::ostream`, as __cxa_demangle prints.
            _fallback_style = pydemangle.style("gnu", itanium={"expand_std_abbreviations": False})
        out = pydemangle.demangle(core, language=("itanium",), style=_fallback_style)
    except Exception:  # LimitExceeded and friends are caught inside; this is belt and braces
        return None
    if not isinstance(out, str) or out == core:
        return None
    return out


class _BoundedLRU:
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


_CACHE = _BoundedLRU(max_entries=16_384, max_chars=16 * 1024 * 1024)

# The worker speaks c++filt's own protocol: one name per line in, one line out, the name
# echoed back when it cannot be read.  It is GNU c++filt itself when installed (binutils):
# `-i` drops DMGL_VERBOSE so it prints the __cxa_demangle spelling (2,908 of 2,908 real
# names agree), `-r` lifts the 1,024-character guard that makes __cxa_demangle refuse long
# CUTLASS names (gcc PR 87675), `-s gnu-v3` stops it guessing Rust for `_ZN...17h<hash>E`.
# It starts in ~1 ms, runs at C speed and flushes every line, so the first name without an
# answer is the one it died on.  Without it, a `python -I -S` worker (~20 ms to start) runs
# __cxa_demangle, then binutils' libiberty `cplus_demangle` from libbfd if present, and
# sets its CPU soft limit to "used so far + a few seconds" before each name.
_CXXFILT_ARGS = ("-i", "-r", "-s", "gnu-v3")
_PROBE, _PROBE_TEXT = b"_Z5probev", b"probe()"
# `ulimit` in the shell that execs c++filt: no unlimited c++filt ever runs (`&&`).
_CXXFILT_SH = 'ulimit -v "$1" && ulimit -t "$2" && p="$3" && shift 3 && exec "$p" "$@"'
_WORKER_SOURCE = r"""
import ctypes, glob, os, resource, sys
limit_as, cpu_s = (int(a) for a in sys.argv[1:3])
def load(names):
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    return None
cxx = load(["libstdc++.so.6", "libc++.so.1", "libc++.1.dylib"])
cxa = getattr(cxx, "__cxa_demangle", None)
if cxa is not None:
    cxa.restype = ctypes.c_void_p
    cxa.argtypes = (ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
# binutils' libbfd links libiberty and exports cplus_demangle.  Flags: DMGL_PARAMS |
# DMGL_ANSI | DMGL_TYPES | DMGL_GNU_V3 | DMGL_NO_RECURSE_LIMIT (no DMGL_VERBOSE).
dirs = ["/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib"]
dirs += glob.glob("/usr/lib/*-linux-gnu")
bfd = load(sorted((p for d in dirs for p in glob.glob(d + "/libbfd*.so*")), reverse=True))
gnu = getattr(bfd, "cplus_demangle", None)
if gnu is not None:
    gnu.restype = ctypes.c_void_p
    gnu.argtypes = (ctypes.c_char_p, ctypes.c_int)
if cxa is None and gnu is None:
    sys.exit(3)
libc = ctypes.CDLL(None)
free, strnlen = libc.free, libc.strnlen
free.argtypes, free.restype = (ctypes.c_void_p,), None
strnlen.argtypes, strnlen.restype = (ctypes.c_void_p, ctypes.c_size_t), ctypes.c_size_t
flags = 1 | 2 | 16 | (1 << 14) | (1 << 18)
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
        if not ptr and status.value != -1 and gnu is not None:
            ptr = gnu(name, flags)
        if ptr and strnlen(ptr, 65537) <= 65536:
            out = ctypes.string_at(ptr)
    except Exception:
        out = name
    finally:
        if ptr:
            free(ptr)
    data = memoryview(out + b"\n")
    while data:
        data = data[os.write(1, data):]
"""


class _Exchange:
    """The pipes of one worker process: lines still to write, answers read so far."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.fd_in = proc.stdin.fileno()
        self.fd_out = proc.stdout.fileno()
        self.request = bytearray()
        self.sent = 0  # bytes of `request` written
        self.asked = 0  # names in `request`
        self.partial = bytearray()
        self.answers: list[bytes] = []
        self.dead = False  # exited, or broke the protocol
        self.oversized = False  # the line being read is longer than _MAX_OUTPUT
        # A fresh worker is first asked a probe name: its answer says the process is up
        # (start-up gets its own, longer timeout) and that it speaks the protocol.
        self.ready = False
        self.request += _PROBE + b"\n"

    def reset(self) -> None:
        """Forget a finished batch's answers (every name asked was answered)."""
        del self.answers[:]
        self.asked = 0

    def ask(self, names: list[bytes]) -> None:
        """Queue ``names`` (written as the pipe takes them)."""
        self.request += b"\n".join(names) + b"\n"
        self.asked += len(names)

    def pump(self, wait_s: float) -> None:
        """One ``select`` round of writing names and reading answers."""
        import select

        if self.dead or self.oversized:
            return
        writing = [self.fd_in] if self.sent < len(self.request) else []
        readable, writable, _ = select.select([self.fd_out], writing, [], wait_s)
        if writable:
            try:  # stdin is non-blocking: write what fits, never wait for the worker
                self.sent += os.write(self.fd_in, self.request[self.sent : self.sent + 65_536])
            except BlockingIOError:
                pass
            except OSError:  # broken pipe: the worker is gone
                self.dead = True
            if self.sent > 1 << 20:
                del self.request[: self.sent]
                self.sent = 0
        if readable:
            # 64 KiB reads: a larger buffer is mmap-ed and zeroed afresh on every call.
            chunk = os.read(self.fd_out, 65_536)
            if not chunk:
                self.dead = True
                return
            lines = chunk.split(b"\n")
            if len(lines) > 1:
                lines[0] = bytes(self.partial) + lines[0]
                self.partial = bytearray(lines.pop())
                if not self.ready:
                    self.ready = lines.pop(0) == _PROBE_TEXT
                    self.dead = not self.ready
                self.answers.extend(lines)
            else:
                self.partial += chunk
            if len(self.answers) > self.asked:
                self.dead = True  # more answers than names: not our protocol
            # A line longer than any result we keep: stop reading it (it could be 200 MB).
            self.oversized = len(self.partial) > _MAX_OUTPUT


class _Session:
    """One batch of names handed to the worker, possibly across worker restarts.

    Names are asked in order and answered in order.  When the worker dies, times out or
    starts an answer longer than ``_MAX_OUTPUT``, the first unanswered name is the one it
    was reading: it gets ``None`` (exact isolation, one restart per hostile name, where
    bisecting a batch would take log n), and the names after it go to a fresh worker.
    """

    def __init__(self, worker: _Worker) -> None:
        self.worker = worker
        self.names: list[bytes] = []
        self.results: list[str | None] = []
        self.done = 0  # names before this index have their result
        self.exchange: _Exchange | None = None
        self.base = 0  # index of the current exchange's first name
        # Called by finish() with the index of each name the worker gave back unread, so
        # the caller can read it another way while the worker is still busy.
        self.on_unread: Callable[[int], None] | None = None

    def ask(self, cores: Sequence[str]) -> None:
        """Add names to the batch; results come back in this order from :meth:`finish`."""
        joined = "\n".join(cores)
        if not (_LINES_RE.fullmatch(joined) and joined.count("\n") == len(cores) - 1):
            # Only a clean word can go down a line protocol; anything else is unreadable
            # and is sent as an empty line (which comes back empty: no result).
            joined = "\n".join(c if _WORD_RE.fullmatch(c) else "" for c in cores)
        names = joined.encode("ascii").split(b"\n") if cores else []
        self.names += names
        self.results += [None] * len(names)
        self._feed()

    def pending(self) -> int:
        """Names asked but not yet answered."""
        return len(self.names) - self.done

    def poll(self) -> None:
        """Move what the pipes take or hold right now, without waiting."""
        if self.exchange is not None:
            with contextlib.suppress(OSError, ValueError):
                self.exchange.pump(0.0)
            self._collect()
            if self.exchange.dead or self.exchange.oversized:
                self._recover(strike=self.exchange.dead)

    def finish(self) -> list[str | None]:
        """Wait for every answer (bounded by the worker's timeouts); the results in order."""
        import time

        worker = self.worker
        last = time.monotonic()
        while self.done < len(self.names) and self.exchange is not None:
            exchange = self.exchange
            limit = worker.timeout_s if exchange.ready else worker.start_timeout_s
            left = last + limit - time.monotonic()
            if left <= 0:
                self._recover(strike=True)
                last = time.monotonic()
                continue
            before = self.done
            try:
                exchange.pump(left)
            except (OSError, ValueError):
                exchange.dead = True
            self._collect()
            if exchange.dead or exchange.oversized:
                self._recover(strike=exchange.dead)
                last = time.monotonic()
            elif self.done != before:
                if self.on_unread is not None:
                    for i in range(before, self.done):
                        if self.results[i] is None:
                            self.on_unread(i)
                last = time.monotonic()
        return self.results

    def _feed(self) -> None:
        """Send every name not yet given to a worker, starting one if needed."""
        if self.exchange is None:
            self.exchange = self.worker.exchange()
            if self.exchange is not None:
                self.exchange.reset()
            self.base = self.done
            start = self.done
        else:
            start = self.base + self.exchange.asked
        if self.exchange is None:
            self.done = len(self.names)  # no worker: everything left stays None
            return
        batch = self.names[start:]
        if batch:
            self.exchange.ask(batch)
            self.poll()

    def _collect(self) -> None:
        exchange = self.exchange
        if exchange is None:
            return
        answers = exchange.answers
        end = self.base + len(answers)
        for i in range(self.done, end):
            text = answers[i - self.base]
            if text != self.names[i] and self.names[i]:
                self.results[i] = text.decode("utf-8", "replace")
        self.done = max(self.done, end)

    def _recover(self, strike: bool) -> None:
        """The current worker is done for: skip the name it was on, resend the rest."""
        exchange = self.exchange
        self.exchange = None
        if exchange is not None and self.done < self.base + exchange.asked and exchange.ready:
            self.done += 1  # the culprit keeps None; a worker that never came up read nothing
        self.worker.kill(strike=strike)
        if self.done < len(self.names) and self.worker.usable:
            self._feed()
        else:
            self.done = len(self.names)


class _Worker:
    """One persistent sandboxed demangler process for names this process will not read.

    Thread-safe (one batch at a time).  A worker that dies or times out is killed and
    restarted for the rest of its batch.  After ``max_strikes`` such deaths no worker is
    used in this process any more (callers fall back to the bounded `demangle` package).
    """

    def __init__(
        self,
        timeout_s: float = 1.0,
        start_timeout_s: float = 10.0,
        limit_as: int = 512 * 1024 * 1024,
        cpu_s: int = 2,
        max_strikes: int = 3,
    ) -> None:
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.limit_as = limit_as
        self.cpu_s = cpu_s
        self.max_strikes = max_strikes
        self.strikes = 0
        self.starts = 0  # processes started, for tests and the benchmark
        self.engine: list[str] | None = None  # the command line, chosen on first use
        self._proc: subprocess.Popen[bytes] | None = None
        self._exchange: _Exchange | None = None
        self._busy_s = 0.0
        self._owner_pid = 0
        self._lock = threading.Lock()

    @property
    def usable(self) -> bool:
        """False on platforms without ``resource`` limits or after too many deaths."""
        return os.name == "posix" and self.strikes < self.max_strikes

    @property
    def native(self) -> bool:
        """True when the worker is GNU c++filt (chosen on first use), not the Python one."""
        if self.engine is None:
            self.engine = self._choose_engine()
        return self.engine[0] == "/bin/sh"

    def demangle(self, core: str) -> str | None:
        """Demangle in the worker; ``None`` when refused, too large, dead or unavailable."""
        return self.demangle_batch([core])[0]

    def demangle_batch(
        self,
        cores: Sequence[str],
        meanwhile: Callable[[_Session | None], None] | None = None,
    ) -> list[str | None]:
        """Demangle ``cores`` in the worker; ``None`` for each one it could not read.

        ``meanwhile(session)`` runs after the names are handed over and before the answers
        are awaited: it may ``ask`` for more and should ``poll`` now and then so that
        neither pipe fills up.  Results cover ``cores`` then what it asked, in order.
        Without a usable worker it gets ``None`` and every result is ``None``.
        """
        import time

        with self._lock:
            started = time.monotonic()
            if not self.usable:
                if meanwhile is not None:
                    meanwhile(None)
                return [None] * len(cores)
            session = _Session(self)
            try:
                if cores:
                    session.ask(cores)
                if meanwhile is not None:
                    meanwhile(session)
                return session.finish()
            except Exception:  # a surprise in the pipes: this worker is not to be trusted
                self.kill(strike=True)
                return [None] * len(session.names)
            finally:
                self._busy_s += time.monotonic() - started

    def exchange(self) -> _Exchange | None:
        """The running worker's pipes, starting a process if needed; ``None`` if impossible."""
        if self._proc is not None and self._owner_pid != os.getpid():
            self._proc = self._exchange = None  # inherited across fork: the parent's pipes
        if self._proc is not None:
            if self._proc.poll() is not None or self._exchange is None:
                self.kill(strike=True)  # died between batches
            elif self._busy_s > self.cpu_s * 4:
                # c++filt's CPU limit covers its whole life, and our busy time bounds its
                # CPU time: replace it well before it could run out.  Not a strike.
                self.kill(strike=False)
            else:
                return self._exchange
        if not self.usable:
            return None
        try:
            return self._start()
        except Exception:  # cannot start a process here: count it like a death
            self.kill(strike=True)
            return None

    def _start(self) -> _Exchange:
        import subprocess

        if self.engine is None:
            self.engine = self._choose_engine()
        proc = subprocess.Popen(
            self.engine,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        self.starts += 1
        self._proc, self._owner_pid, self._busy_s = proc, os.getpid(), 0.0
        assert proc.stdin is not None
        os.set_blocking(proc.stdin.fileno(), False)
        self._exchange = _Exchange(proc)
        return self._exchange

    def _choose_engine(self) -> list[str]:
        """GNU c++filt under ulimits when installed, else the Python worker."""
        import shutil
        import subprocess

        path = shutil.which("c++filt")
        if path is not None and os.path.exists("/bin/sh"):
            try:
                done = subprocess.run(
                    [path, "--version"],
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=self.start_timeout_s,
                )
                # llvm-cxxfilt is also installed as c++filt; its spelling differs.
                if done.stdout.startswith(b"GNU c++filt"):
                    limits = [str(self.limit_as // 1024), str(self.cpu_s * 8), path]
                    return ["/bin/sh", "-c", _CXXFILT_SH, "sh", *limits, *_CXXFILT_ARGS]
            except Exception:  # no usable c++filt: the Python worker does the same job
                pass
        args = [str(self.limit_as), str(self.cpu_s)]
        return [sys.executable, "-I", "-S", "-c", _WORKER_SOURCE, *args]

    def kill(self, strike: bool) -> None:
        """Stop the running process (if any); ``strike`` counts it as a death."""
        proc, self._proc, self._exchange = self._proc, None, None
        if strike:
            self.strikes += 1
        if proc is None:
            return
        try:
            proc.kill()
            proc.wait(timeout=5)
        except Exception:  # already gone, or not reaped: nothing more we can do
            pass
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    def close(self) -> None:
        """Stop the worker (it also exits by itself when our end of its stdin closes)."""
        with self._lock:
            if self._proc is not None and self._owner_pid == os.getpid():
                self.kill(strike=False)

    def reset(self) -> None:
        """Stop the worker and forget past deaths."""
        self.close()
        self.strikes = 0
        self.starts = 0


_WORKER = _Worker()


def _atexit_close() -> None:
    _WORKER.close()


def _register_atexit() -> None:
    import atexit

    atexit.register(_atexit_close)


_register_atexit()


def _reset_state() -> None:
    """Clear the cache and restart the worker bookkeeping (for tests and benchmarks)."""
    _CACHE.clear()
    _WORKER.reset()


# ---------------------------------------------------------------------------------------
# Reading the prefix of a truncated or unreadable mangled name.
# ---------------------------------------------------------------------------------------

_BUILTINS = {
    "v": "void",
    "w": "wchar_t",
    "b": "bool",
    "c": "char",
    "a": "signed char",
    "h": "unsigned char",
    "s": "short",
    "t": "unsigned short",
    "i": "int",
    "j": "unsigned int",
    "l": "long",
    "m": "unsigned long",
    "x": "long long",
    "y": "unsigned long long",
    "n": "__int128",
    "o": "unsigned __int128",
    "f": "float",
    "d": "double",
    "e": "long double",
    "g": "__float128",
    "z": "...",
}
_D_BUILTINS = {
    "d": "decimal64",
    "e": "decimal128",
    "f": "decimal32",
    "h": "half",
    "i": "char32_t",
    "s": "char16_t",
    "u": "char8_t",
    "a": "auto",
    "c": "decltype(auto)",
    "n": "decltype(nullptr)",
}
# How __cxa_demangle spells integer literals of these types: `Lj16E` is `16u`.
_LITERAL_SUFFIX = {"i": "", "j": "u", "l": "l", "m": "ul", "x": "ll", "y": "ull"}
_STD_SUBS = {
    "t": "std",
    "a": "std::allocator",
    "b": "std::basic_string",
    "s": "std::string",
    "i": "std::istream",
    "o": "std::ostream",
    "d": "std::iostream",
}
_OPERATORS = {
    "nw": "new", "na": "new[]", "dl": "delete", "da": "delete[]", "ps": "+", "ng": "-",
    "ad": "&", "de": "*", "co": "~", "pl": "+", "mi": "-", "ml": "*", "dv": "/", "rm": "%",
    "an": "&", "or": "|", "eo": "^", "aS": "=", "pL": "+=", "mI": "-=", "mL": "*=",
    "dV": "/=", "rM": "%=", "aN": "&=", "oR": "|=", "eO": "^=", "ls": "<<", "rs": ">>",
    "lS": "<<=", "rS": ">>=", "eq": "==", "ne": "!=", "lt": "<", "gt": ">", "le": "<=",
    "ge": ">=", "ss": "<=>", "nt": "!", "aa": "&&", "oo": "||", "pp": "++", "mm": "--",
    "cm": ",", "pm": "->*", "pt": "->", "cl": "()", "ix": "[]", "qu": "?",
}  # fmt: skip
_SPECIALS = {
    "TV": "vtable for",
    "TT": "VTT for",
    "TI": "typeinfo for",
    "TS": "typeinfo name for",
    "GV": "guard variable for",
}
_MAX_DEPTH = 128
_MAX_TEXT = 2_048  # characters of one rendered template argument
_MAX_NODES = 2_000  # TemplateArg objects built for one name (substitutions form a DAG)


class _End(Exception):
    """Reading stopped: the input was cut, or held something this reader does not know."""


class _Item:
    """A name or type being read; linked into its parent before it is complete.

    Linking first is what lets a cut in the middle keep everything read so far.
    """

    __slots__ = ("args", "closed", "done", "fn", "name", "parts", "suffix", "text")

    def __init__(self) -> None:
        self.text = ""  # rendered text before the template arguments of the last part
        self.name: str | None = None  # qualified name without template arguments
        self.parts: list[str] = []  # components without template arguments
        self.args: list[_Item] | None = None  # template args of the last component
        self.closed = False  # the template argument list was read up to its `E`
        self.suffix = ""  # " const", "*", "&" ... applied after the arguments
        self.fn: tuple[str, str] | None = None  # (return type, params) of a function type
        self.done = True  # False while a template argument is still being read

    def copy(self) -> _Item:
        """Shallow copy, used when a substitution or qualifier reuses an earlier item."""
        other = _Item()
        other.text, other.name, other.parts = self.text, self.name, list(self.parts)
        other.args, other.closed, other.suffix, other.fn = (
            self.args,
            self.closed,
            self.suffix,
            self.fn,
        )
        other.done = self.done
        return other


def _render(item: _Item, budget: list[int]) -> str:
    """Spell ``item`` as __cxa_demangle would, ``...`` where it was cut; capped in length."""
    budget[0] -= 1
    if budget[0] < 0:
        return "..."
    if item.fn is not None:
        ret, params = item.fn
        mod = f"({item.suffix.strip()})" if item.suffix else ""
        return f"{ret} {mod}({params})"
    out = item.text
    if item.args is not None:
        inner = ", ".join(r for r in (_render(a, budget) for a in item.args) if r)
        if item.closed:
            out += f"<{inner}{' >' if inner.endswith('>') else '>'}"
        elif inner.endswith("..."):
            out += f"<{inner}"
        else:
            out += f"<{inner}, ..." if inner else "<..."
    elif not item.done:
        out += "..."
    out += item.suffix
    return out if len(out) <= _MAX_TEXT else out[: _MAX_TEXT - 3] + "..."


def _to_template_arg(item: _Item, budget: list[int]) -> TemplateArg:
    budget[0] -= 1
    text = _render(item, [_MAX_NODES])
    if budget[0] < 0:
        return TemplateArg(text=text, name=item.name)
    args = tuple(_to_template_arg(a, budget) for a in (item.args or ()))
    return TemplateArg(text=text, name=item.name, args=args)


class _PrefixReader:
    """Recursive-descent reader for the start of an Itanium encoding (name, then params)."""

    def __init__(self, s: str) -> None:
        self.s = s
        self.i = 0
        self.subs: list[_Item] = []
        self.tparams: list[_Item] | None = None
        self.depth = 0

    # -- characters ------------------------------------------------------------------
    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def take(self) -> str:
        if self.i >= len(self.s):
            raise _End
        ch = self.s[self.i]
        self.i += 1
        return ch

    def need(self, ch: str) -> None:
        if self.take() != ch:
            raise _End

    def number(self) -> int:
        start = self.i
        while self.peek().isdigit():
            self.i += 1
        if self.i == start:
            raise _End
        return int(self.s[start : self.i])

    def seq_id(self, close: str = "_") -> int:
        """Base-36 ``<seq-id>`` then ``close``: ``S_`` is 0, ``S0_`` is 1."""
        start = self.i
        while self.peek().isdigit() or self.peek().isupper():
            self.i += 1
        digits = self.s[start : self.i]
        self.need(close)
        return int(digits, 36) + 1 if digits else 0

    def source_name(self) -> str:
        n = self.number()
        if self.i + n > len(self.s):
            raise _End  # the cut fell inside the identifier: drop the partial word
        ident = self.s[self.i : self.i + n]
        self.i += n
        if ident.startswith("_GLOBAL__N"):
            return "(anonymous namespace)"
        return ident

    # -- names ------------------------------------------------------------------------
    def enter(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _End

    def add_sub(self, item: _Item) -> None:
        self.subs.append(item.copy())

    def substitution(self) -> _Item:
        """``S...``: a back-reference or one of the ``St``/``Sa``/``Ss`` abbreviations."""
        self.need("S")
        ch = self.peek()
        if ch.islower():
            self.i += 1
            if ch not in _STD_SUBS:
                raise _End
            item = _Item()
            item.text = item.name = _STD_SUBS[ch]
            item.parts = item.text.split("::")
            return item
        index = self.seq_id()
        if index >= len(self.subs):
            raise _End
        return self.subs[index].copy()

    def unqualified(self, item: _Item) -> None:
        """Append one ``<unqualified-name>`` component to ``item``."""
        ch = self.peek()
        if ch == "L":  # internal linkage marker before a source name
            self.i += 1
            ch = self.peek()
        if ch.isdigit():
            part = self.source_name()
        elif ch in "CD" and self.peek(1) in "0123456789I" and item.parts:
            self.i += 1
            if self.peek() == "I":  # inheriting constructor: CI1 <type>
                raise _End
            self.take()
            base = item.parts[-1]
            part = base if ch == "C" else "~" + base
        elif ch == "U":
            part = self.unnamed()
        elif ch.islower() and self.peek(1):
            code = ch + self.peek(1)
            self.i += 2
            if code == "cv":
                conv = _Item()
                self.type(conv)
                part = "operator " + _render(conv, [_MAX_NODES])
            elif code in _OPERATORS:
                op = _OPERATORS[code]
                part = "operator" + (" " + op if op[0].isalpha() else op)
            else:
                raise _End
        else:
            raise _End
        while self.peek() == "B":  # ABI tags print as [abi:cxx11]
            self.i += 1
            part += f"[abi:{self.source_name()}]"
        self.push_part(item, part)

    def unnamed(self) -> str:
        """``Ut<n>_`` unnamed types and ``Ul<params>E<n>_`` lambdas."""
        self.need("U")
        kind = self.take()
        if kind == "t":
            return f"{{unnamed type#{self.seq_id_decimal() + 1}}}"
        if kind != "l":
            raise _End
        params = self.params_until("E")
        return f"{{lambda({params})#{self.seq_id_decimal() + 1}}}"

    def seq_id_decimal(self) -> int:
        start = self.i
        while self.peek().isdigit():
            self.i += 1
        digits = self.s[start : self.i]
        self.need("_")
        return int(digits) + 1 if digits else 0

    def push_part(self, item: _Item, part: str) -> None:
        if item.args is not None:  # a component after template args: fold them into text
            item.text = _render(_bare(item), [_MAX_NODES])
            item.args, item.closed = None, False
        item.text = f"{item.text}::{part}" if item.text else part
        item.parts.append(part)
        item.name = "::".join(item.parts)

    def template_args(self, item: _Item) -> None:
        """``I <arg>* E``: read into ``item.args`` (linked before reading, for cuts)."""
        self.need("I")
        args: list[_Item] = []
        item.args, item.closed = args, False
        while self.peek() != "E":
            self.template_arg(args)
        self.i += 1
        item.closed = True

    def template_arg(self, args: list[_Item]) -> None:
        self.enter()
        ch = self.peek()
        if ch == "J":  # argument pack: its members print inline
            self.i += 1
            while self.peek() != "E":
                self.template_arg(args)
            self.i += 1
        elif ch == "X" or ch == "":
            raise _End  # expressions are not read here
        else:
            arg = _Item()
            arg.done = False
            args.append(arg)
            self.literal(arg) if ch == "L" else self.type(arg)
            arg.done = True
        self.depth -= 1

    def literal(self, item: _Item) -> None:
        """``L <type> <value> E``: integer, bool and enum literals as __cxa_demangle spells them."""
        self.need("L")
        if self.peek() == "_" and self.peek(1) == "Z":
            raise _End  # &function arguments (nvcc's __nv_dl_tag) are not read here
        kind = _Item()
        code = self.peek()
        if code in _BUILTINS and code != "z":
            self.i += 1
            kind.text = _BUILTINS[code]
        else:
            self.type(kind)
        negative = self.peek() == "n"
        if negative:
            self.i += 1
        start = self.i
        while self.peek() not in ("E", ""):
            self.i += 1
        value = self.s[start : self.i]
        self.need("E")
        sign = "-" if negative else ""
        if code == "b" and value in ("0", "1"):
            item.text = "true" if value == "1" else "false"
        elif code in _LITERAL_SUFFIX and value.isdigit():
            item.text = f"{sign}{value}{_LITERAL_SUFFIX[code]}"
        else:
            item.text = f"({_render(kind, [_MAX_NODES])}){sign}{value}"

    def type(self, item: _Item) -> None:
        """Read one ``<type>`` into ``item``, adding substitution candidates as we go."""
        self.enter()
        ch = self.take()
        if ch in _BUILTINS:
            item.text = _BUILTINS[ch]
        elif ch == "D" and self.peek() in _D_BUILTINS:
            item.text = _D_BUILTINS[self.take()]
        elif ch in "rVK":
            self.type(item)
            item.suffix += {"r": " restrict", "V": " volatile", "K": " const"}[ch]
            self.add_sub(item)
        elif ch in "PRO":
            self.type(item)
            item.suffix += {"P": "*", "R": "&", "O": "&&"}[ch]
            self.add_sub(item)
        elif ch == "D" and self.peek() == "p":
            self.i += 1
            self.type(item)
            self.add_sub(item)
        elif ch == "F":
            ret = _Item()
            self.type(ret)
            params = self.params_until("E")
            item.fn = (_render(ret, [_MAX_NODES]), params)
            self.add_sub(item)
        elif ch == "A":
            dim = self.number() if self.peek().isdigit() else 0
            self.need("_")
            self.type(item)
            item.suffix += f" [{dim}]"
            self.add_sub(item)
        elif ch == "T":
            self.i -= 1
            self.template_param(item)
            if self.peek() == "I":
                self.add_sub(item)
                self.template_args(item)
            self.add_sub(item)
        elif ch == "S":
            self.i -= 1
            std = self.peek(1) == "t"
            base = self.substitution()
            if std:  # `St <unqualified-name>`: a std:: class type
                base.parts, base.text = ["std"], "std"
                self.unqualified(base)
            _assign(item, base)
            if self.peek() == "I":
                if std:
                    self.add_sub(item)
                self.template_args(item)
                self.add_sub(item)
            elif std:
                self.add_sub(item)
        elif ch == "N":
            self.nested(item)
            self.add_sub(item)
        elif ch.isdigit() or ch in "LZ":
            self.i -= 1
            if ch == "Z":
                self.local_name(item)
            else:
                self.unqualified(item)
            if self.peek() == "I":
                self.add_sub(item)
                self.template_args(item)
            self.add_sub(item)
        else:
            raise _End
        self.depth -= 1

    def template_param(self, item: _Item) -> None:
        self.need("T")
        index = self.seq_id_decimal()
        if self.tparams is None or index >= len(self.tparams):
            raise _End
        _assign(item, self.tparams[index])

    def params_until(self, close: str) -> str:
        parts: list[str] = []
        while self.peek() != close:
            param = _Item()
            self.type(param)
            parts.append(_render(param, [_MAX_NODES]))
        self.i += 1
        return "" if parts == ["void"] else ", ".join(parts)

    def nested(self, item: _Item) -> None:
        """``N [quals] <prefix> E`` (the ``N`` already read)."""
        while self.peek() in ("r", "V", "K", "R", "O"):
            self.i += 1  # method cv/ref-qualifiers
        first = True
        while self.peek() != "E":
            ch = self.peek()
            if ch == "":
                raise _End
            if ch == "S" and first:
                std = self.peek(1) == "t"
                base = self.substitution()
                _assign(item, base)
                if std:
                    item.parts, item.text, item.name = ["std"], "std", "std"
                first = False
                continue  # a substitution is not a new candidate
            elif ch == "T" and first:
                self.template_param(item)
            elif ch == "I":
                if item.args is not None:
                    raise _End
                self.template_args(item)
            else:
                self.unqualified(item)
            first = False
            if self.peek() not in ("E", ""):
                self.add_sub(item)
        self.i += 1

    def local_name(self, item: _Item) -> None:
        """``Z <encoding> E <entity>``: a name local to a function, e.g. a lambda."""
        self.need("Z")
        outer = _Item()
        try:
            self.name(outer)
        finally:  # keep the enclosing function's name even when the rest is cut
            _assign(item, outer)
        if outer.args is not None and outer.closed:
            self.tparams = outer.args
            if self.peek() != "E" and not _is_ctor_like(outer):
                self.type(_Item())  # a template function encodes its return type first
        params = self.params_until("E")
        item.text = f"{_render(_bare(outer), [_MAX_NODES])}({params})"
        item.args, item.closed = None, False
        if self.peek() == "s":
            self.i += 1
            self.push_part(item, "string literal")
        elif self.peek() == "N":  # the entity may itself be nested: `...E NKUlvE_clE`
            self.i += 1
            inner = _Item()
            try:
                self.nested(inner)
            finally:
                for part in inner.parts:
                    self.push_part(item, part)
        else:
            self.unqualified(item)
        if self.peek() == "_":  # discriminator
            self.i += 1
            if self.peek() == "_":
                self.i += 1
            self.number()

    def name(self, item: _Item) -> None:
        """Read the ``<name>`` of an encoding into ``item``."""
        ch = self.peek()
        if ch == "N":
            self.i += 1
            self.nested(item)
        elif ch == "Z":
            self.local_name(item)
        elif ch == "S":
            std = self.peek(1) == "t"
            base = self.substitution()
            if std:
                base.parts, base.text = ["std"], "std"
                self.unqualified(base)
            _assign(item, base)
            if self.peek() == "I":
                if std:
                    self.add_sub(item)
                self.template_args(item)
        else:
            self.unqualified(item)
            if self.peek() == "I":
                self.add_sub(item)
                self.template_args(item)


def _bare(item: _Item) -> _Item:
    """``item`` as rendered text up to and including its last template argument list."""
    out = item.copy()
    out.suffix, out.fn = "", None
    return out


def _assign(dst: _Item, src: _Item) -> None:
    dst.text, dst.name, dst.parts = src.text, src.name, list(src.parts)
    dst.args, dst.closed, dst.suffix, dst.fn = src.args, src.closed, src.suffix, src.fn


def read_mangled_prefix(symbol: str) -> ParsedName | None:
    """Recover what a truncated or unreadable mangled name still says, or ``None``.

    Walks the length-prefixed ``N<len><id>...`` nesting for the namespace path and the
    function name, and reads template arguments (types, ``Li128E`` integer literals,
    ``std::`` abbreviations, back-references) up to the cut.  A partially read identifier
    is dropped rather than guessed.  ``truncated`` is False only when the whole encoding,
    parameters included, was read to its end.  Never raises.
    """
    try:
        return _read_prefix(symbol)
    except Exception:  # never raises: an internal surprise means "nothing recovered"
        return None


def _read_prefix(symbol: object) -> ParsedName | None:
    if not isinstance(symbol, str):
        return None
    core = symbol[:_MAX_NAME]  # past this, treat the name as cut: the walk is linear anyway
    core = _VERSION_RE.sub("", core, count=1) if "@" in core else core
    core = core.lstrip(".")
    stripped = core.lstrip("_")
    if not stripped.startswith("Z") or not 1 <= len(core) - len(stripped) <= 4:
        return None
    body = stripped[1:]
    clone = re.search(r"\.[A-Za-z_]", body)
    if clone:
        body = body[: clone.start()]
    reader = _PrefixReader(body)
    special = ""
    for code, words in _SPECIALS.items():
        if body.startswith(code):
            special, reader.i = words, 2
            break
    top = _Item()
    complete = False
    params: tuple[str, ...] | None = None
    return_type = ""
    try:
        if special and special != "guard variable for":
            reader.type(top)
        else:
            if reader.peek() == "L":
                reader.i += 1
            reader.name(top)
            if top.args is not None and top.closed:
                reader.tparams = top.args
        if reader.i < len(body) and not special:
            if top.args is not None and not _is_ctor_like(top):
                ret = _Item()
                reader.type(ret)
                return_type = _render(ret, [_MAX_NODES])
            params = tuple(p for p in _read_params(reader) if p != "void")
        complete = reader.i >= len(body) and len(symbol) <= _MAX_NAME
    except _End:
        complete = False
    if not top.parts:
        return None
    scope = tuple(top.parts[:-1])
    name = top.parts[-1]
    qualified = "::".join(top.parts)
    args = tuple(_to_template_arg(a, [_MAX_NODES]) for a in (top.args or ()))
    text = _render(top, [_MAX_NODES])
    if special:
        text = f"{special} {text}"
    if not complete:
        text += "..." if top.args is None or top.closed else ""
    return ParsedName(
        text=text,
        qualified=qualified,
        scope=scope,
        name=name,
        template_args=args,
        params=params if complete else None,
        return_type=return_type,
        special=special,
        truncated=not complete,
    )


def _is_ctor_like(item: _Item) -> bool:
    """Constructors, destructors and conversion operators encode no return type."""
    if len(item.parts) < 2:
        return item.parts[-1].startswith("operator ") if item.parts else False
    last, owner = item.parts[-1], item.parts[-2]
    return last in (owner, "~" + owner) or last.startswith("operator ")


def _read_params(reader: _PrefixReader) -> list[str]:
    out: list[str] = []
    while reader.i < len(reader.s):
        param = _Item()
        reader.type(param)
        out.append(_render(param, [_MAX_NODES]))
    return out
