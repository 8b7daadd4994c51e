"""Demangle Itanium C++ symbols the way C++ loggers print them, without trusting the input.

``demangle`` returns the ``abi::__cxa_demangle`` spelling (what TensorRT-LLM's
``TllmException::getTrace()`` and PyTorch's ``c10::demangle`` print), so frames we
demangle compare equal to frames a logger already demangled.  Three tiers:

1. ``cxxfilt`` (ctypes -> libstdc++ ``__cxa_demangle``) in this process, but only for names
   a linear-time check proves cannot explode (see :func:`_output_bound_bits`).  libiberty
   bounds recursion, not output: a 249-byte name whose back-references double the output
   at each level expands to 201 MB.
2. Every other name goes to one persistent worker process running the same call under
   ``RLIMIT_AS``/``RLIMIT_CPU`` and a per-call wall-clock timeout.  A worker that dies or
   times out is killed and restarted on the next call; after a few deaths the process
   stops using one (so a log full of hostile names costs a bounded amount of time).
3. When ``__cxa_demangle`` refuses a name (about 0.6 % of real names, mostly CUTLASS kernel
   names, which is why TensorRT-LLM logs show raw ``_ZN...`` frames) or libstdc++ is
   missing, the pure-Python ``demangle`` package reads it in the same spelling under its
   default ``Limits`` (depth, input and output caps).

Results are kept in a small LRU bounded by entries and by characters.  ``read_mangled_prefix``
recovers namespace, function name and template arguments from a name cut mid-way, which
no demangler does.  Heavy imports (``cxxfilt``, ``demangle``, ``subprocess``) happen on
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
    from collections.abc import Callable

__all__ = ["demangle", "demangle_in_text", "is_mangled", "read_mangled_prefix"]

# Longest input any tier will look at.  The `demangle` package's own max_input is 64 KiB;
# the longest of 743,842 real symbols measured (shared research, parsing.md) is 4,614.
_MAX_NAME = 65_536
# Longest result we hand back (again the `demangle` package's cap); real maximum is ~13k.
_MAX_OUTPUT = 65_536
# In-process tier: at most this many characters and a proven output bound of 2**24 chars
# (16 MiB, about 0.15 s of __cxa_demangle in the worst case; real names print < 13k).
_INPROC_MAX_LEN = 8_192
_INPROC_BUDGET_BITS = 24
# Most characters one mangled character can print as, outside back-references: `y` is
# "unsigned long long" plus ", " as a template argument (20); 32 leaves a margin.
_LITERAL_FACTOR = 32

# Word characters of a mangled name in free text: llvm-cxxfilt's IsLegalItaniumChar
# (alnum, '_', '$', '.'), which its delimiters.test exercises.
_WORD_CHARS = "A-Za-z0-9_.$"
_SHAPE_RE = re.compile(r"\.?_{1,4}Z[A-Za-z0-9_][A-Za-z0-9_.$]*")
_TEXT_RE = re.compile(r"(?<![A-Za-z0-9_.$])\.?_{1,4}Z[A-Za-z0-9_.$]+")
# ELF symbol versions that nm/backtraces append: `@GLIBCXX_3.4`, `@@CXXABI_1.3.9`.
_VERSION_RE = re.compile(r"@@?[A-Za-z][A-Za-z0-9_.]*\Z")
# Back-references, found at every position (lookahead: overlapping): substitutions
# `S_`/`S<seq>_` grouped by target, and template parameters `T_`/`T<n>_`/`TL<l>__<n>_`.
_SUB_RE = re.compile(r"(?=S([0-9A-Z]*)_)")
_TPARAM_RE = re.compile(r"(?=T[0-9A-Z]*_)")


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
        if not isinstance(symbol, str) or not 3 <= len(symbol) <= _MAX_NAME:
            return symbol
        if "Z" not in symbol[:6]:
            return symbol
        hit = _CACHE.get(symbol)
        if hit is not None:
            return hit
        result = _demangle_uncached(symbol)
        _CACHE.put(symbol, result)
        return result
    except Exception:  # the contract is "never raises": any surprise means "unreadable"
        return symbol


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


def _demangle_uncached(symbol: str) -> str:
    """Strip decorations, pick a tier, and put the decorations that belong back."""
    core = _VERSION_RE.sub("", symbol, count=1) if "@" in symbol else symbol
    dot = ""
    if core.startswith("."):
        dot, core = ".", core[1:]
    if _SHAPE_RE.fullmatch(core) is None:
        return symbol
    if core.startswith("____Z"):
        core = core[1:]  # LLVM strips one leading underscore, then reads `___Z` blocks
    text: str | None
    if core.startswith("___Z"):
        # Apple block invocations; __cxa_demangle does not read them, `demangle` does.
        text = _fallback(core)
    else:
        if core.startswith("__Z"):
            core = core[1:]  # Mach-O adds one underscore to every C symbol
        text = _demangle_itanium(core)
    if text is None or len(text) > _MAX_OUTPUT:
        return symbol
    return dot + text


def _demangle_itanium(core: str) -> str | None:
    """Demangle a plain ``_Z`` name through the tiers; ``None`` when nobody can read it."""
    text: str | None
    if _output_bound_bits(core) <= _INPROC_BUDGET_BITS:
        text = _cxa_inprocess(core)
    else:
        text = _WORKER.demangle(core)
    if text is None:
        text = _fallback(core)
    return text


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

    The regexes scan overlapping matches, so every real reference is counted under its
    true target; matches inside identifiers only add factors, keeping the bound an upper
    bound.  This assumes libiberty prints a node once per reference to it, which is how
    cp-demangle.c's printer works (its ``d_printing`` guard stops cycles).
    """
    n = len(core)
    if n > _INPROC_MAX_LEN:
        return float(_INPROC_BUDGET_BITS + 1)
    counts: dict[str, int] = {}
    for seq in _SUB_RE.findall(core):
        counts[seq] = counts.get(seq, 0) + 1
    bits = math.log2(_LITERAL_FACTOR * n) + sum(math.log2(1 + r) for r in counts.values())
    bits += len(_TPARAM_RE.findall(core))
    bits += core.count("Dp") * math.log2(n)
    return bits


_cxa: Callable[[str], str] | None = None
_cxa_errors: tuple[type[BaseException], ...] = ()
_cxa_unavailable = False


def _cxa_inprocess(core: str) -> str | None:
    """``__cxa_demangle`` via cxxfilt in this process; ``None`` when refused or unavailable."""
    global _cxa, _cxa_errors, _cxa_unavailable
    if _cxa_unavailable:
        return None
    if _cxa is None:
        try:
            import cxxfilt
        except Exception:  # not installed, or ctypes cannot load libc/libstdc++
            _cxa_unavailable = True
            return None
        _cxa = cxxfilt.demangle
        _cxa_errors = (cxxfilt.Error, UnicodeError, ValueError)
    try:
        return _cxa(core)
    except _cxa_errors as error:
        # cxxfilt defers "libstdc++ not found" to the first call: remember it.
        if type(error).__name__ == "LibraryNotFound":
            _cxa_unavailable = True
        return None


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

# The worker reads length-prefixed names on stdin and answers status + length-prefixed
# bytes on stdout.  It limits its own address space once, and before each call sets its
# CPU soft limit to "used so far + a few seconds" so SIGXCPU ends a runaway call.
_WORKER_SOURCE = r"""
import os, resource, struct, sys
limit_as, cpu_s, max_out = (int(a) for a in sys.argv[1:4])
resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
import cxxfilt
cxxfilt.demangleb(b"_Z1fv")
pending = bytearray()
def read_exact(n):
    while len(pending) < n:
        chunk = os.read(0, max(65536, n - len(pending)))
        if not chunk:
            sys.exit(0)
        pending.extend(chunk)
    out = bytes(pending[:n])
    del pending[:n]
    return out
def write_all(data):
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]
hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
write_all(b"R")
while True:
    (n,) = struct.unpack("<I", read_exact(4))
    name = read_exact(n)
    use = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(use.ru_utime + use.ru_stime) + cpu_s
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    try:
        out, status = cxxfilt.demangleb(name), 0
        if len(out) > max_out:
            out, status = b"", 2
    except cxxfilt.InvalidName:
        out, status = b"", 1
    except Exception:
        out, status = b"", 2
    write_all(struct.pack("<BI", status, len(out)) + out)
"""


class _Worker:
    """One persistent ``__cxa_demangle`` process for names the in-process check rejects.

    Thread-safe (one call at a time).  A call that times out or finds the worker dead
    kills it and returns ``None``; the next call starts a new one.  After
    ``max_strikes`` such deaths the worker is no longer used in this process.
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
        self._proc: subprocess.Popen[bytes] | None = None
        self._owner_pid = 0
        self._lock = threading.Lock()

    @property
    def usable(self) -> bool:
        """False on platforms without ``resource`` limits or after too many deaths."""
        return os.name == "posix" and self.strikes < self.max_strikes

    def demangle(self, core: str) -> str | None:
        """Demangle in the worker; ``None`` when refused, too large, dead or unavailable."""
        if not self.usable:
            return None
        with self._lock:
            try:
                return self._call(core.encode("ascii"))
            except Exception:
                self._kill(strike=True)
                return None

    def _call(self, name: bytes) -> str | None:
        import struct

        proc = self._ensure()
        if proc is None:
            return None
        assert proc.stdin is not None and proc.stdout is not None
        _write_all(proc.stdin.fileno(), struct.pack("<I", len(name)) + name)
        reply = _read_frame(proc.stdout.fileno(), self.timeout_s)
        if reply is None:
            self._kill(strike=True)
            return None
        status, body = reply
        return body.decode("utf-8", "replace") if status == 0 else None

    def _ensure(self) -> subprocess.Popen[bytes] | None:
        if self._proc is not None and self._owner_pid != os.getpid():
            self._proc = None  # inherited across fork: its pipes belong to the parent
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        if self._proc is not None:
            self._kill(strike=True)
            if not self.usable:
                return None
        import subprocess

        args = [str(self.limit_as), str(self.cpu_s), str(_MAX_OUTPUT)]
        proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER_SOURCE, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        self._proc, self._owner_pid = proc, os.getpid()
        assert proc.stdout is not None
        if _read_exact(proc.stdout.fileno(), 1, self.start_timeout_s) != b"R":
            self._kill(strike=True)
            return None
        return proc

    def _kill(self, strike: bool) -> None:
        proc, self._proc = self._proc, None
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
                self._kill(strike=False)

    def reset(self) -> None:
        """Stop the worker and forget past deaths."""
        self.close()
        self.strikes = 0


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, n: int, timeout_s: float) -> bytes | None:
    """Read exactly ``n`` bytes within ``timeout_s`` seconds in total; ``None`` otherwise."""
    import select
    import time

    deadline = time.monotonic() + timeout_s
    chunks: list[bytes] = []
    need = n
    while need:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return None
        chunk = os.read(fd, need)
        if not chunk:
            return None
        chunks.append(chunk)
        need -= len(chunk)
    return b"".join(chunks)


def _read_frame(fd: int, timeout_s: float) -> tuple[int, bytes] | None:
    """Read one ``status, length, body`` reply within ``timeout_s``; ``None`` otherwise."""
    import select
    import struct
    import time

    deadline = time.monotonic() + timeout_s
    buf = b""
    need = 5
    while len(buf) < need:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 1 << 17)
        if not chunk:
            return None
        buf += chunk
        if need == 5 and len(buf) >= 5:
            need = 5 + struct.unpack_from("<I", buf, 1)[0]
    return buf[0], buf[5:need]


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
