"""Recognise one stack-frame line of any backtrace dialect and return a :class:`Frame`.

Dialects (the ``Frame.dialect`` value in quotes):

- ``"trtllm"``: TensorRT-LLM ``TllmException`` traces, ``N  0xADDR symbol[ + dec]`` where the
  symbol slot may also hold ``module(+0xoff)`` (``dladdr`` found no name) or a raw ``_Z`` name
  (the logger's ``__cxa_demangle`` refused it).
- ``"glibc"``: ``backtrace_symbols`` output, ``module(symbol+0xoff) [0xaddr]``.
- ``"c10"``: PyTorch ``frame #N: symbol + 0xoff (0xaddr in module)``.
- ``"gdb"``: gdb / cuda-gdb ``#N  0xaddr in f (args) at file:line`` / ``from lib``.
- ``"sanitizer"``: ASan/UBSan/TSan/MSan and llvm-symbolizer ``#N 0xaddr in f file:line:col``.
- ``"python"``: traceback and faulthandler ``File "x.py", line N, in f``, and IPython /
  Jupyter's ``Cell In[7], line 3`` and ``File /x.py:12, in f(a)`` (:mod:`diagnose.frames.ipython`).
- ``"boost"``: ``boost::stacktrace`` (Triton Inference Server's signal handler, which hosts
  the TensorRT-LLM backend): ``N# f(args) in lib.so``, ``N# 0xADDR in lib.so``,
  ``N# f at file.cc:12``.
- ``"other"``: Java ``at a.B.f(B.java:12)``, Rust ``N: a::b::f``, glog ``@ 0xaddr f``,
  Android tombstone ``#00 pc 0001a2b3 /lib.so (f+12)`` and Linux kernel oops / dmesg
  ``func+0x5d/0x90 [module]`` frames.

Every line of a big log goes through :func:`parse_frame`, so each dialect is guarded by a cheap
literal test on the first character before any regex runs, and every regex is anchored and
free of nested quantifiers (linear time on a 1 MB line).  The C++ name itself is split by
:func:`diagnose.frames.names.parse_name`; ``_Z`` symbols go through
:func:`diagnose.frames.demangle.demangle` first.
"""

from __future__ import annotations

from typing import NamedTuple

from diagnose.frames.ipython import parse_ipython_frame
from diagnose.frames.names import parse_name
from diagnose.frames.pytest_report import parse_pytest_frame
from diagnose.frames.vocab import kernel_facts
from diagnose.lazyre import lazy
from diagnose.model import Frame, KernelFacts, LogLine, ParsedName, TemplateArg

__all__ = ["DIALECTS", "parse_frame"]

#: Every value :attr:`Frame.dialect` can take.
DIALECTS = ("trtllm", "glibc", "c10", "gdb", "sanitizer", "python", "boost", "other")

# A symbol longer than this is cut before name parsing and marked truncated: real demangled
# names stay under ~20 kB (the longest of 743,842 real mangled names is 4,614 bytes), and a
# pasted megabyte of garbage must not cost a full parse.
_MAX_SYMBOL = 32_768

# Symbols that name no function: gdb's ``??``, c10's ``<unknown function>``, ASan's
# ``<unknown>``, TSan's ``<null>``, glog's ``(unknown)``.
_UNKNOWN = frozenset({"", "??", "<unknown function>", "<unknown>", "<null>", "(unknown)"})

_HEX = r"0[xX][0-9a-fA-F]+"

# --- per-dialect patterns (all anchored; ``rest`` groups are parsed by hand) ----------------

# "#12  0x00007f... in REST" or "#2  REST" (gdb without address, TSan without address).
# Fuchsia's symbolizer numbers inlined frames "#1.1"; the sub-index is dropped.
_HASH = lazy(rf"#(\d+)(?:\.\d+)?\s+(?:({_HEX})(?:\s+in(?:\s+|$)|\s+|$))?")
# Fuchsia module tail "<libclang_rt.asan.so>+0x4363c" / "<<application>>+0xacf4c".
_ANGLE_MODULE = lazy(rf"<<?([^<>\s]*)>>?\+({_HEX})$")
# Apple sanitizers append the slice to the module: "(/usr/lib/libc++abi.dylib:x86_64+0xc10)".
_ARCH_SUFFIX = lazy(r":(?:x86_64h?|i386|arm64e?|armv7s?)$")
# Unknown source location as sanitizers print it.
_NO_SOURCE = frozenset({"??:?", "??:0", "??", "<null>"})
# Android tombstone / debuggerd: "#00 pc 0001a2b3  /system/lib/libc.so (abort+63)".
_TOMBSTONE = lazy(r"#(\d+)\s+pc\s+([0-9a-fA-F]+)\s+(\S+)(?:\s+\((.*?)(?:\+(\d+))?\))?$")
# Sanitizer module tail "(/lib/x.so+0x1234)" or "(<unknown module>)".
_SAN_MODULE = lazy(rf"\((.*?)(?:\+({_HEX}))?\)$")
# Sanitizer source tail "x.cc:12:3" / "C:\b\x.cc:37" / "x.cc:12" (last token).
_SAN_SOURCE = lazy(r"(\S+?):(\d+)(?::\d+)?$")
# gdb tails.
_GDB_AT = lazy(r"(\S+):(\d+)$")
# boost::stacktrace " 2# REST": REST is "0xADDR", "0xADDR in module", "f(args) in module" or
# "f(args) at file.cc:12" (boost/stacktrace/detail/frame_decl.hpp's to_string).
_BOOST = lazy(r"(\d{1,5})# (\S.*)$")
_BOOST_AT = lazy(r"(.+) at (\S+):(\d+)$")
# TensorRT-LLM "1       0x789a90580ca6 REST".
_TRTLLM = lazy(rf"(\d+)\s+({_HEX})\s+(\S.*)$")
# c10's Windows backtrace (dbghelp): "00007FFE12AE1DE4 00007FFE12AC2070 torch_python.dll!symbol
# [<unknown file> @ <unknown line number>]"; pastes run the two addresses together and cut the
# tail (NVIDIA/TensorRT-LLM#2540, under "Unhandled exception caught in c10/util/AbortHandler.h").
_WINDOWS = lazy(
    r"([0-9A-Fa-f]{16})(?: ?[0-9A-Fa-f]{16})?\s+([^\s!\[\]]+)!(.*?)"
    r"(?:\s+\[(?:(.*?) @ (\d+|<unknown line number>)\]?|[^\]]*))?$"
)
# The source position UCX prints two blanks after a symbol: "  Blas.cpp:0", "  ???:0".
_UCX_SOURCE = lazy(r"\)\s{2,}(\S+):(\d+)$")
# glibc backtrace_symbols: "module(symbol+0xoff) [0xaddr]", "module(+0xoff)", "module [0xaddr]".
_GLIBC = lazy(rf"([^\s()\[\]][^\s()\[\]]*)\s*\((.*?)(?:([+-]{_HEX}))?\)(?:\s*\[({_HEX})\])?$")
_OMPI_INDEX = lazy(r"\[ *(\d{1,4})\] ")
_GLIBC_BARE = lazy(rf"([^\s()\[\]]+)\s*\[({_HEX})\]$")
# PyTorch c10 "frame #3: REST".
_C10 = lazy(r"frame #(\d+):\s*(.*)$")
_C10_TAIL = lazy(r"\((0(?:[xX][0-9a-fA-F]*)?)(?:\s+in\s+([^)]*))?\)?$")
_C10_OFFSET = lazy(rf"\+\s*({_HEX})$")
# Python traceback ("File "x", line 1, in f") and faulthandler ("File "x", line 1 in f").
_PYTHON = lazy(r'File "([^"]*)", line (\d+|\?\?\?)(?:,?\s+in\s+(.+))?$')
# Java / Kotlin / Jazzer "at com.x.Y.f(Y.java:12)", "at a.B.f(Native Method)".
_JAVA = lazy(r"at\s+([^\s(]+)\(([^()]*)\)$")
# Rust std backtrace "  3: std::panicking::begin_panic" (old: "3: 0x55d0 - core::x").
_RUST = lazy(rf"(\d+):\s+(?:({_HEX})\s+-\s+)?(\S.*)$")
_RUST_HASH = lazy(r"::h[0-9a-f]{16}$")
_RUST_CRATE_HASH = lazy(r"\[[0-9a-f]{16}\]")
# Linux kernel oops / KASAN / dmesg (optionally behind a dmesg timestamp, "#N", "RIP: 0010:"):
# "[<ffffffff926dbfd0>] process_one_work+0x572/0x7e1 kernel/workqueue.c:2302",
# " nvacme_ioctl+0x5d/0x90 [nvidia]".
_KERNEL = lazy(
    r"(?:\[\s*\d+\.\d+\]\s*)?(?:#(\d+)\s+)?(?:RIP:?\s*(?:[0-9a-fA-F]{4}:)?\s*)?"
    r"(?:\[<\s*(?:0x)?([0-9a-fA-F]+|inlined)\s*>\]\s*)*(\?\s+)?"
    rf"([A-Za-z_.$][\w.$]*)\+({_HEX})/{_HEX}(?:\s+\[([\w-]+)\])?(.*)$"
)
_KERNEL_SOURCE = lazy(r"(?:\S+\s+)?(\S+):(\d+)(?:\s+\(discriminator \d+\))?$")
# glog / Caffe "@     0x7f9c3d0b9c2d  google::LogMessage::Fail()".
_GLOG = lazy(rf"@\s+({_HEX})\s+(.*)$")

# Bracket scanner for separating a gdb function from its argument VALUES: operator tokens
# are consumed whole so ``operator<`` or ``operator()`` never count as brackets.
_BRACKETS = lazy(
    r"operator\s*(?:\(\)|\[\]|->\*?|<=>|<<=?|>>=?|&&|\|\||\+\+|--|[-+*/%^&|~!=<>,]=?)?"
    r"| \(|[<>()\[\]{}]"
)
_OPEN = frozenset("<([{")


class _Name(NamedTuple):
    """The C++ fields derived from one symbol."""

    function: str | None
    template_args: tuple[TemplateArg, ...]
    params: tuple[str, ...] | None
    truncated: bool
    mangled: str | None
    kernel: KernelFacts


def parse_frame(line: LogLine) -> Frame | None:
    """Return the :class:`Frame` that ``line`` shows, or None when it is not a frame line.

    Never raises: anything unexpected inside the name parsers degrades to a frame without
    a function name rather than an exception.
    """
    text = line.text
    if not text:
        return None
    first = text[0]
    if first in " \t":
        text = text.strip()
        if not text:
            return None
        first = text[0]
    elif text[-1] in " \t\r\n":
        text = text.rstrip()
    try:
        return _dispatch(line.number, text, first)
    except Exception:  # pragma: no cover - contract guard
        # The name parsers promise never to raise; if one ever does on some odd line, losing
        # that frame is better than losing the diagnosis of the whole log.
        return None


def _dispatch(number: int, text: str, first: str) -> Frame | None:
    """Route ``text`` by its first character to the dialect that can start with it.

    Only lines whose first character or a literal marker fits reach a regex; the rest (most
    lines of a log) cost a few character tests.
    """
    if first == "#":
        return _hash_frame(number, text)
    if first == "F" and text.startswith('File "'):
        return _python_frame(number, text)
    if ".py:" in text:
        frame = parse_pytest_frame(number, text)
        if frame is not None:
            return frame
    if first in "CIF<~" or (first == "/" and ".py in " in text):
        frame = parse_ipython_frame(number, text)
        if frame is not None:
            return frame
    if first == "f" and text.startswith("frame #"):
        return _c10_frame(number, text)
    if first.isdigit():
        if "# " in text[:7]:
            return _boost_frame(number, text)
        if "!" in text[16:120] and text[:16].isalnum():
            return _windows_frame(number, text)
        if "0x" in text[:48]:
            return _trtllm_frame(number, text) or _rust_frame(number, text)
        return _rust_frame(number, text) if ": " in text[:12] else None
    if first == "a" and text.startswith("at "):
        return _java_frame(number, text)
    if first == "@":
        return _glog_frame(number, text)
    if "/0x" in text:
        # Kernel frames start with any letter ("RIP:", "[<addr>]", the function itself).
        return _kernel_frame(number, text)
    last = text[-1]
    if ((last == ")" or last == "]") and "(" in text) or "[0x" in text:
        return _glibc_frame(number, text)
    return None


# --- C++ names -------------------------------------------------------------------------------


def _name_fields(symbol: str | None) -> _Name:
    """Demangle and split ``symbol`` into function, template args, params and kernel facts."""
    if symbol is None or symbol in _UNKNOWN:
        return _Name(None, (), None, False, None, KernelFacts())
    cut = len(symbol) > _MAX_SYMBOL
    text = symbol[:_MAX_SYMBOL] if cut else symbol
    mangled: str | None = None
    parsed: ParsedName | None = None
    if text.startswith(("_Z", "__Z")):
        # Imported here: the demangle tiers (worker, ctypes, mangled readers) cost ~6 ms to
        # import and most logs print no raw _Z symbol.
        from diagnose.frames import demangle as _demangle

        mangled = text
        readable = _demangle.demangle(text) if not cut else text
        # A name the demanglers cannot read (cut by the logger, or refused) still has a
        # length-prefixed "N<len><id>..." head that names its scope and function.
        unread = readable == text
        parsed = _demangle.read_mangled_prefix(text) if unread else parse_name(readable)
    else:
        parsed = parse_name(text)
    if parsed is None:
        return _Name(None, (), None, cut, mangled, KernelFacts())
    return _Name(
        parsed.qualified or None,
        parsed.template_args,
        parsed.params,
        parsed.truncated or cut,
        mangled,
        kernel_facts(parsed),
    )


def _cxx_frame(
    number: int,
    dialect: str,
    symbol: str | None,
    *,
    index: int | None = None,
    address: str | None = None,
    module: str | None = None,
    offset: str | None = None,
    file: str | None = None,
    line: int | None = None,
    truncated: bool = False,
) -> Frame:
    """Build a Frame for a native (C/C++) frame, filling the name fields from ``symbol``."""
    name = _name_fields(symbol)
    return Frame(
        log_line=number,
        dialect=dialect,
        index=index,
        address=address,
        module=module or None,
        offset=offset,
        symbol=symbol or None,
        function=name.function,
        template_args=name.template_args,
        params=name.params,
        file=file or None,
        line=line,
        truncated=truncated or name.truncated,
        mangled=name.mangled,
        kernel=name.kernel,
    )


# --- '#'-led dialects: gdb, sanitizers, Android tombstones ------------------------------------


def _hash_frame(number: int, text: str) -> Frame | None:
    """Parse a ``#N ...`` line as a gdb, sanitizer or tombstone frame."""
    if len(text) < 3 or not text[1].isdigit():
        return None
    if " pc " in text[:12]:
        tomb = _TOMBSTONE.match(_strip_build_id(text))
        if tomb:
            sym = tomb.group(4)
            off = tomb.group(5)
            return _cxx_frame(
                number,
                "other",
                sym,
                index=int(tomb.group(1)),
                address="0x" + tomb.group(2),
                module=tomb.group(3),
                offset=f"+{int(off):#x}" if off else None,
            )
    head = _HASH.match(text)
    if head is None:
        return None
    index = int(head.group(1))
    address = head.group(2)
    rest = text[head.end() :].strip()
    if not rest and address is None:
        return None
    # Two spaces after "#N" is gdb's column alignment; sanitizers print exactly one.
    gdb_spacing = text[head.start(1) + len(head.group(1)) :].startswith("  ")
    if rest.startswith("[<"):
        return _kernel_frame(number, text)
    if rest == "<signal handler called>":
        return Frame(log_line=number, dialect="gdb", index=index, symbol=rest)
    bare = _strip_build_id(rest)
    if bare is not rest:
        # Only sanitizers / llvm-symbolizer print "(BuildId: ...)"; gdb never does.
        return _sanitizer_frame(number, bare, index, address)
    if rest.endswith(")"):
        cut = rest.rfind(" (")
        if cut >= 0 or rest.startswith("("):
            tail = rest[cut + 1 :] if cut >= 0 else rest
            if tail == "(<unknown module>)" or ("+0x" in tail and " " not in tail):
                return _sanitizer_frame(number, rest, index, address)
    # gdb always prints the argument values "f (a=1)" (or "f ()"), possibly wrapped onto
    # the next line; sanitizers never put a space before a parenthesis at depth 0.
    if " at " in rest or " from " in rest or _gdb_args_start(rest) >= 0:
        return _gdb_frame(number, rest, index, address)
    if address is not None:
        # A bare "#18 0x00007f8c37e871bd in f(QObject*)" is gdb whose argument list wrapped
        # onto the next line: gdb pads 64-bit addresses to 16 digits and aligns "#N  ";
        # sanitizers print the address unpadded.
        wrapped = gdb_spacing or (len(address) == 18 and address.startswith("0x00"))
        if not rest or (wrapped and not _has_source_tail(rest) and ">+0x" not in rest):
            return _gdb_frame(number, rest, index, address)
        return _sanitizer_frame(number, rest, index, address)
    if not gdb_spacing and _has_source_tail(rest):
        # TSan prints no address: "#0 f file.cc:12:3".
        return _sanitizer_frame(number, rest, index, address)
    # No address, no arguments, no location: prose such as "#1 priority", not a frame.
    return None


def _has_source_tail(rest: str) -> bool:
    """True when the last word of ``rest`` is a sanitizer location ``file:line[:col]``."""
    last = rest[rest.rfind(" ") + 1 :]
    return last in _NO_SOURCE or _SAN_SOURCE.fullmatch(last) is not None


def _strip_build_id(text: str) -> str:
    """Return ``text`` without a trailing ``(BuildId: hex)``; the same object when absent."""
    cut = text.rfind(" (BuildId: ")
    if cut < 0 or not text.endswith(")"):
        return text
    return text[:cut].rstrip()


def _gdb_args_start(text: str) -> int:
    """Index of the ``(`` that opens gdb's argument VALUES after the function name, or -1.

    gdb prints ``name (a=1, b=0x0)``: a space, then the values.  A C++ name may carry its
    own parameter TYPES glued to it (``f(int) (a=1)``) and brackets of templates, lambdas and
    ``(anonymous namespace)``, so only a `` (`` at bracket depth 0 counts.
    """
    depth = 0
    # A name longer than _MAX_SYMBOL is cut anyway, so the scan never needs to go further.
    for m in _BRACKETS.finditer(text, 0, _MAX_SYMBOL):
        tok = m.group()
        if tok == " (":
            if depth == 0:
                return m.start() + 1
            depth += 1
        elif tok in _OPEN:
            depth += 1
        elif depth and tok in ">)]}":
            depth -= 1
    return -1


def _gdb_frame(number: int, rest: str, index: int, address: str | None) -> Frame:
    """Parse gdb's ``f (args) at file:line`` / ``f (args) from lib`` after ``#N 0x.. in``."""
    module = file = None
    line = None
    at = rest.rfind(" at ")
    frm = rest.rfind(" from ")
    if frm > at:
        module = rest[frm + 6 :].strip()
        rest = rest[:frm]
    elif at >= 0:
        where = _GDB_AT.match(rest, at + 4)
        if where:
            file, line = where.group(1), int(where.group(2))
            rest = rest[:at]
        elif _looks_like_module(target := rest[at + 4 :].strip()) and " " not in target:
            # gdb without debug info: "#2 0x7fff in  () at /lib/x86_64-linux-gnu/libstdc++.so.6"
            module = target
            rest = rest[:at]
    args = _gdb_args_start(rest)
    symbol = _strip_launch((rest[:args] if args >= 0 else rest).strip())
    if symbol == "()":
        symbol = ""  # no name, only the empty argument list: "#2 0x7fff in  () at lib.so"
    return _cxx_frame(
        number,
        "gdb",
        symbol or None,
        index=index,
        address=address,
        module=module,
        file=file,
        line=line,
    )


def _strip_launch(symbol: str) -> str:
    """Drop cuda-gdb's launch configuration ``kernel<<<(1,1,1),(32,1,1)>>>`` from a kernel."""
    start = symbol.find("<<<(")
    if start > 0 and symbol.endswith(")>>>"):
        return symbol[:start]
    return symbol


def _sanitizer_frame(number: int, rest: str, index: int, address: str | None) -> Frame:
    """Parse a sanitizer / llvm-symbolizer frame body: ``f file:line:col`` or ``f (mod+0x)``."""
    module = offset = file = None
    line = None
    if rest.endswith(")"):
        cut = rest.rfind(" (")
        start = cut + 1 if cut >= 0 else (0 if rest.startswith("(") else -1)
        if start >= 0:
            tail = _SAN_MODULE.match(rest, start)
            if tail and (tail.group(1) == "<unknown module>" or " " not in tail.group(1)):
                module, offset = tail.group(1), tail.group(2)
                if module == "<unknown module>":
                    module = None
                elif module:
                    module = _ARCH_SUFFIX.sub("", module)
                rest = rest[:start].rstrip()
    mark = rest.rfind(">+0x") if module is None else -1
    if mark >= 0:
        angle = rest.rfind("<", 0, mark)
        if angle > 0 and rest[angle - 1] == "<":
            angle -= 1
        fuchsia = _ANGLE_MODULE.match(rest, angle) if angle >= 0 else None
        if fuchsia:
            module, offset = fuchsia.group(1) or None, fuchsia.group(2)
            rest = rest[:angle].rstrip()
    sp = rest.rfind(" ")
    if sp >= 0:
        last = rest[sp + 1 :]
        src = _SAN_SOURCE.fullmatch(last)
        if src and "(" not in last and "<" not in last:
            file, line = src.group(1), int(src.group(2))
            rest = rest[:sp]
        elif last in _NO_SOURCE:  # "??:?" (ASan), "<null>" (TSan): no source location
            rest = rest[:sp]
        elif ("/" in last or "\\" in last) and not any(c in last for c in "()<>"):
            file = last
            rest = rest[:sp]
    rest = rest.strip()
    if rest.startswith("in "):
        rest = rest[3:].lstrip()
    if offset is not None:
        offset = "+" + offset
    if rest and "+0x" in rest and " " not in rest:
        head, _, off = rest.rpartition("+")
        if module is None and _looks_like_module(head):
            # Android "#00 0xa383 /data/app/lib/libx.so+0x2dce11": an unsymbolized module.
            return Frame(
                log_line=number,
                dialect="sanitizer",
                index=index,
                address=address,
                module=head,
                offset="+" + off,
                file=file,
                line=line,
            )
        # Windows symbolizer "GetHandleVerifier+0xd7ff7": the module offset (when printed)
        # is the one kept, as for every other sanitizer frame.
        rest = head
        offset = offset or "+" + off
    return _cxx_frame(
        number,
        "sanitizer",
        rest or None,
        index=index,
        address=address,
        module=module,
        offset=offset,
        file=file,
        line=line,
    )


# --- TensorRT-LLM, glibc, c10 ----------------------------------------------------------------


def _trtllm_frame(number: int, text: str) -> Frame | None:
    """Parse ``N  0xADDR symbol[ + dec]`` / ``N  0xADDR module(+0xoff)`` (TensorRT-LLM)."""
    m = _TRTLLM.match(text)
    if m is None:
        return None
    index, address, rest = int(m.group(1)), m.group(2), m.group(3).rstrip()
    module = offset = file = None
    line: int | None = None
    if rest[-1].isdigit() and "  " in rest and (u := _UCX_SOURCE.search(rest)) is not None:
        # UCX's "==== backtrace ====": " 7 0x7b13e4 cublasLtMatmulAlgoGetHeuristic()  ???:0"
        rest = rest[: u.start() + 1]
        if u.group(1) != "???":
            file, line = u.group(1), int(u.group(2)) or None
    symbol: str | None = rest
    if rest[-1] in ")]" and "(" in rest and not rest.endswith("()"):
        g = _GLIBC.match(rest)
        if g and g.group(3) and _looks_like_module(g.group(1)):
            module, symbol, offset = g.group(1), g.group(2) or None, g.group(3)
    if module is None:
        head, plus, dec = rest.rpartition(" + ")
        if plus and head and dec.isdigit() and dec.isascii():
            # TensorRT-LLM's getTrace() prints the offset in decimal; Frame.offset is hex.
            symbol, offset = head.rstrip(), f"+{int(dec):#x}"
        elif rest[0] == "/" and "(" not in rest and " " not in rest:
            # A module path the paste cut before its "(+0x...)": "9 0x7fd6cf5308f6
            # /opt/tritonserver/backends/tensorrt" (held-out round 19) names no function.
            cut = _LIBRARY_END.search(rest) is None
            return _cxx_frame(
                number, "trtllm", None, index=index, address=address, module=rest, truncated=cut
            )
    return _cxx_frame(
        number,
        "trtllm",
        symbol,
        index=index,
        address=address,
        module=module,
        offset=offset,
        file=file,
        line=line,
    )


_LIBRARY_END = lazy(r"\.so(?:\.\d+)*$|/python\d[\d.]*$")


def _boost_frame(number: int, text: str) -> Frame | None:
    """Parse a ``boost::stacktrace`` line ``N# f(args) in module`` / ``N# f at file:line``."""
    m = _BOOST.match(text)
    if m is None:
        return None
    index, rest = int(m.group(1)), m.group(2).rstrip()
    module: str | None = None
    file: str | None = None
    line: int | None = None
    name = rest
    head, sep, tail = rest.rpartition(" in ")
    if sep and head and " " not in tail and "::" not in tail:  # a module has neither
        name, module = head, tail
    else:
        at = _BOOST_AT.match(rest)
        if at is not None:
            name, file, line = at.group(1), at.group(2), int(at.group(3))
    if name.startswith(("0x", "0X")) and " " not in name:
        return _cxx_frame(number, "boost", None, index=index, address=name, module=module)
    if file is None and (
        # boost prints an address, a source location or a module after every name; a bare
        # "3# of 5 shards" or "2# step in progress" is a numbered sentence.
        module is None or ("/" not in module and "." not in module and not _cxx_like(name))
    ):
        return None
    return _cxx_frame(number, "boost", name, index=index, module=module, file=file, line=line)


def _cxx_like(name: str) -> bool:
    """True when ``name`` reads as a C/C++ function name rather than words of a sentence."""
    return "(" in name or "::" in name or name.startswith("_Z")


def _looks_like_module(path: str) -> bool:
    """True when ``path`` names an executable or shared object, not a C++ name."""
    return "/" in path or ".so" in path or path.endswith((".dll", ".dylib", ".exe"))


def _glibc_frame(number: int, text: str) -> Frame | None:
    """Parse ``backtrace_symbols`` output ``module(symbol+0xoff) [0xaddr]``.

    Open MPI's signal handler numbers each one: ``[ 1] /lib/libcublasLt.so.12(+0x7a1b)[0x7f..]``.
    """
    index: int | None = None
    if text[:1] == "[" and (n := _OMPI_INDEX.match(text)) is not None:
        index, text = int(n.group(1)), text[n.end() :]
    m = _GLIBC.match(text)
    if m is None:
        bare = _GLIBC_BARE.match(text)
        if bare and (_looks_like_module(bare.group(1)) or index is not None):
            return Frame(
                log_line=number,
                dialect="glibc",
                index=index,
                address=bare.group(2),
                module=bare.group(1),
            )
        return None
    module, symbol, offset, address = m.groups()
    # Without an address, only a path-like module and a hex offset make it a frame: prose such
    # as "see foo(bar)" must not become one.
    if not _looks_like_module(module) and (address is None or offset is None):
        return None
    if address is None and offset is None:
        return None
    if symbol and " " in symbol:
        return None
    return _cxx_frame(
        number,
        "glibc",
        symbol or None,
        index=index,
        address=address,
        module=module,
        offset=offset,
    )


def _c10_frame(number: int, text: str) -> Frame | None:
    """Parse PyTorch ``frame #N: symbol + 0xoff (0xaddr in module)``; the tail may be cut."""
    m = _C10.match(text)
    if m is None:
        return None
    index, rest = int(m.group(1)), m.group(2).rstrip()
    address = module = offset = None
    truncated = False
    cut = rest.rfind(" (0")
    if cut >= 0:
        tail = _C10_TAIL.match(rest, cut + 1)
        if tail:
            address = tail.group(1) if len(tail.group(1)) > 2 else None
            module = (tail.group(2) or "").strip() or None
            truncated = not rest.endswith(")") or module is None
            rest = rest[:cut]
    plus = rest.rfind("+")
    off = _C10_OFFSET.match(rest, plus) if plus >= 0 else None
    if off:
        rest, offset = rest[:plus].rstrip(), "+" + off.group(1)
    return _cxx_frame(
        number,
        "c10",
        rest.strip() or None,
        index=index,
        address=address,
        module=module,
        offset=offset,
        truncated=truncated,
    )


def _windows_frame(number: int, text: str) -> Frame | None:
    """Parse c10's Windows ``ADDR [ADDR] module!symbol [file @ line]``; the tail may be cut."""
    m = _WINDOWS.match(text)
    if m is None:
        return None
    address, module, symbol, file, line = m.groups()
    known_file = file if file and not file.startswith("<") else None
    return _cxx_frame(
        number,
        "c10",
        symbol.strip() or None,
        address="0x" + address.lower(),
        module=module,
        file=known_file,
        line=int(line) if known_file and line and line.isdigit() else None,
        truncated=not text.endswith("]"),
    )


# --- Python and the "other" dialects ----------------------------------------------------------


def _python_frame(number: int, text: str) -> Frame | None:
    """Parse ``File "x.py", line 12, in f`` (traceback) or ``..., line 12 in f`` (faulthandler)."""
    m = _PYTHON.match(text)
    if m is None:
        return None
    file, line, func = m.groups()
    func = func.strip() if func else None
    if func and _native_in_python_shape(file, func):
        # PyTorch's fatal-signal handler prints native frames in Python's shape:
        # 'File "<unknown>", line 0, in ncclCommWindowRegister' under "!!!!!!! Segfault
        # encountered !!!!!!!" (NVIDIA/TensorRT-LLM#10255; vLLM and SGLang logs too).
        known = file if file != "<unknown>" else None
        at = int(line) if line.isdigit() and line != "0" else None
        if _HEX_ONLY.match(func):
            return _cxx_frame(number, "other", None, address=func, file=known, line=at)
        return _cxx_frame(number, "other", func, file=known, line=at)
    return Frame(
        log_line=number,
        dialect="python",
        symbol=func,
        function=func if func and func != "???" else None,
        file=file,
        line=int(line) if line.isdigit() else None,
    )


_HEX_ONLY = lazy(r"0x[0-9a-fA-F]+$")
_NATIVE_FILE = (".c", ".cc", ".cpp", ".cxx", ".cu", ".h", ".hpp", ".cuh", ".s", ".S", ".so")


def _native_in_python_shape(file: str, func: str) -> bool:
    """A native frame printed as 'File "...", line N, in f' (no Python file, a C++ name)."""
    if file.endswith((".py", ".pyx", ">")) and file != "<unknown>":
        return False  # a Python file, "<string>", "<frozen ...>"
    return file == "<unknown>" or file.endswith(_NATIVE_FILE) or "::" in func or "(" in func


def _java_frame(number: int, text: str) -> Frame | None:
    """Parse a JVM frame ``at pkg.Cls.method(Cls.java:12)``."""
    m = _JAVA.match(text)
    if m is None:
        return None
    name, where = m.groups()
    if "." not in name:
        return None
    file, _, line = where.partition(":")
    return Frame(
        log_line=number,
        dialect="other",
        symbol=name,
        function=name,
        file=file if file and " " not in file else None,
        line=int(line) if line.isdigit() and line.isascii() else None,
    )


def _rust_frame(number: int, text: str) -> Frame | None:
    """Parse a Rust std backtrace line ``N: path::to::fn[::h<hash>]``."""
    m = _RUST.match(text)
    if m is None:
        return None
    index, address, symbol = int(m.group(1)), m.group(2), m.group(3).strip()
    if "::" not in symbol or (" " in symbol and not symbol.startswith("<")):
        return None
    # Rust's legacy mangling leaves a "::h0123456789abcdef" hash on every function, and v0
    # mangling a "[e28293b1aa0f68bd]" crate disambiguator on every crate name.
    bare = _RUST_CRATE_HASH.sub("", _RUST_HASH.sub("", symbol))
    return Frame(
        log_line=number,
        dialect="other",
        index=index,
        address=address,
        symbol=symbol,
        function=bare,
    )


def _kernel_frame(number: int, text: str) -> Frame | None:
    """Parse a Linux kernel stack line ``[<addr>] func+0xoff/0xsize [module] file:line``.

    Frames marked ``?`` are stale return addresses the kernel unwinder could not vouch for
    (Documentation/admin-guide/bug-hunting.rst); they are not part of the call chain, so
    they give None.
    """
    m = _KERNEL.match(text)
    if m is None or m.group(3):
        return None
    index, address, _, func, offset, module, tail = m.groups()
    file = line = None
    src = _KERNEL_SOURCE.match(tail.strip()) if tail and ":" in tail else None
    if src:
        file, line = src.group(1), int(src.group(2))
    return _cxx_frame(
        number,
        "other",
        func,
        index=int(index) if index else None,
        address=None if address in (None, "inlined") else "0x" + address,
        module=module,
        offset="+" + offset,
        file=file,
        line=line,
    )


def _glog_frame(number: int, text: str) -> Frame | None:
    """Parse a glog failure-trace line ``@  0xADDR  symbol``."""
    m = _GLOG.match(text)
    if m is None:
        return None
    symbol = m.group(2).strip() or None
    return _cxx_frame(number, "other", symbol, address=m.group(1))
