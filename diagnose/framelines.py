"""What a stack-frame line looks like: the one definition every reader uses.

Three readers ask about frames, each a different question of the same shapes:

- the region classifier (:mod:`diagnose.regions.lines`): is this stripped line a whole frame
  of some dialect (:func:`is_frame`: gdb/ASan ``#N``, c10 ``frame #N:``, TensorRT-LLM
  ``N 0x...``, glibc ``module(sym+0x..) [0x..]``, glog ``@ 0x``, boost, Rust, Java, c10's
  Windows dump);
- the wrap re-joiner (:mod:`diagnose.ingest.normalize.wraps`): does this line *start* a frame,
  even one a terminal cut before its end (:data:`frame_start`);
- the big-file scanner and the stream (:func:`diagnose.ingest.scan.continues_block`): the same
  question on raw bytes (the scanner compiles :data:`FRAME_START` for bytes itself: it is
  imported only for big inputs, and this module is on every run's start-up path), beside
  the block words that are not frames (``Traceback``, ``The above exception``, ...).

A start is looser than a whole frame on purpose: a cut frame has lost the tail that
:func:`is_frame` checks.  Frame numbers run past 9,999 only in deep-recursion dumps; there a
gdb frame must show its address to count, so an issue number opening a line ("#12345
fixed") is not a frame start.
"""

from __future__ import annotations

from diagnose.lazyre import lazy

__all__ = ["FRAME_START", "HEX", "frame_start", "is_frame"]

HEX = r"0[xX][0-9a-fA-F]+"

#: The start of a frame line of any dialect, after optional blanks (a ``match`` pattern).
FRAME_START = (
    r"\s*(?:#\d{1,4}\s+(?:0x[0-9a-fA-F]+\s|[\w:<~]|\?\?)|#\d{5,7}\s+0x[0-9a-fA-F]+\s"
    r"|frame #\d{1,7}: "
    # TensorRT-LLM / boost numbered frames: "1       0x7f... module(+0x..)"
    r"|\d{1,3} {2,}0x[0-9a-fA-F]{4,}|\d+\s+0x[0-9a-fA-F]+\s"
    r'|File "'
    r"|0x[0-9a-fA-F]{6,}\s"
    # glibc backtrace_symbols, with the module first: "libc.so.6(+0x29d90) [0x7f...]" (cut
    # after the parenthesis too) and "python3(PyObject_Call+0x5d) [0x...]". Bounded classes
    # that cannot cross "(": with "\S+\(" a 1 MB line of "f(x)f(x)..." backtracked to every
    # parenthesis, 20 s (fuzz seed 5, #249334).
    r"|[\w./+-]{1,400}\.so(?:\.\d+)*\("
    r"|[^\s(]{1,400}\((?:[^\s()]{0,400}\+)?0x[0-9a-fA-F]+\)\s*\[0x"
    r")"
)
frame_start = lazy(FRAME_START)

_HASH_FRAME_RE = lazy(r"#\d+\s+\S")
_NUMBERED_FRAME_RE = lazy(rf"\d+\s+{HEX}\s+\S")
_BOOST_FRAME_RE = lazy(r"\d{1,5}# \S")  # boost::stacktrace (Triton Inference Server)
# Open MPI prints a frame without symbol glued to its address: "[ 3] python3[0x598f69]".
_GLIBC_FRAME_RE = lazy(
    rf"\S\((?:[^()\s]*\+)?{HEX}\)\s*\[{HEX}\]|\S\s\[{HEX}\]$|^\[ *\d+\] \S+\[{HEX}\]$"
)
_GLOG_FRAME_RE = lazy(rf"@\s+{HEX}\s")
_RUST_FRAME_RE = lazy(r"\d+: [\w<][\w:<>$. ]*::|\d+:\s+0x[0-9a-fA-F]+ - \S")
_JAVA_FRAME_RE = lazy(r"at [\w$.]+\.[\w$<>]+\([^()]*\)$")
# c10's Windows backtrace: "00007FFE12AE1DE4 00007FFE12AC2070 torch_python.dll!symbol [...]"
_WINDOWS_FRAME_RE = lazy(r"[0-9A-Fa-f]{16}(?: ?[0-9A-Fa-f]{16})?\s+[^\s!\[\]]+!")


def is_frame(s: str) -> bool:
    """True when the stripped text ``s`` is a whole C/C++ (or Rust/Java) stack-frame line."""
    first = s[0]
    if first == "#":
        return _HASH_FRAME_RE.match(s) is not None
    if first == "f":
        return s.startswith("frame #")
    if first.isdigit():
        return (
            ("# " in s[:7] and _BOOST_FRAME_RE.match(s) is not None)
            or _NUMBERED_FRAME_RE.match(s) is not None
            or _RUST_FRAME_RE.match(s) is not None
            or _GLIBC_FRAME_RE.search(s) is not None
            or ("!" in s[16:120] and _WINDOWS_FRAME_RE.match(s) is not None)
        )
    if first == "@":
        return _GLOG_FRAME_RE.match(s) is not None
    if first == "a" and s.startswith("at "):
        return _JAVA_FRAME_RE.match(s) is not None
    if "[0x" in s:
        return _GLIBC_FRAME_RE.search(s) is not None
    return False
