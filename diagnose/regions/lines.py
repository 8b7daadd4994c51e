"""What each line of a log is: a class from cheap literal tests, then the error vocabulary.

Every line gets one class (traceback header, Python frame, C++ frame of any dialect,
``what():``, error vocabulary, blank, ...) from its first ``WINDOW`` characters only, so a
megabyte-long template name costs no more than a short line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from diagnose.framelines import HEX, is_frame
from diagnose.frames.ipython import is_frame_line as is_ipython_frame
from diagnose.frames.pytest_report import is_error_line as is_pytest_error
from diagnose.frames.pytest_report import is_frame_line as is_pytest_frame
from diagnose.frames.pytest_report import is_header as is_pytest_header
from diagnose.lazyre import LazyPattern, lazy
from diagnose.regions.prose import is_prose

# Only this many leading characters of a line are classified: every marker we look for sits
# near the start of its line, and a bounded window keeps the pass linear in the line count.
WINDOW = 2048
# A region keeps at most this many parsed frames (the body keeps every line).  A recursion
# crash can print a million frames; the top of the stack is what identifies the failure.
MAX_FRAMES = 256
# Frames that enter the de-duplication signature.
SIGNATURE_FRAMES = 32
# Free-text lines accepted after an exception line as part of its message (ninja output,
# multi-line ValueError text).  Frame lines do not count against it.
MAX_MESSAGE_LINES = 40
# A pytest failure (the test's source, every frame's code, captured locals) is cut here.
MAX_PYTEST_LINES = 5_000
# An exception line with nothing after its colon: "AssertionError:".
EXC_ONLY_RE = lazy(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*:\s*$")
# The last line of a paste shorter than this, and no exception, is a cut stub (_cut_fragment).
FRAGMENT = 12
# Indented lines an exception message ending in ":" may carry on into (see _run_on).
RUN_ON_LINES = 8
# A message is cut here; the full line stays in the region body.
MAX_MESSAGE = 4096

# --- line classes ----------------------------------------------------------------------------

BLANK = 0
OTHER = 1  # not indented, no vocabulary
CODE = 2  # indented text (a traceback's source line, a message continuation)
TB = 3  # "Traceback (most recent call last):"
CHAIN = 4  # "The above exception was the direct cause ..." / "During handling ..."
PYFRAME = 5  # File "x.py", line 3, in f
FRAME = 6  # a C/C++ frame: gdb/ASan "#N", c10 "frame #N:", TRT-LLM "N 0x...", glibc, glog
C10HDR = 7  # "Exception raised from f at file:line (most recent call first):"
HINT = 8  # "CUDA kernel errors might be asynchronously reported ..." and friends
TERM = 9  # "terminate called after throwing an instance of 'X'"
WHAT = 10  # "  what():  text"
FATALPY = 11  # "Fatal Python error: Segmentation fault"
THREAD = 12  # faulthandler "Current thread 0x... (most recent call first):"
ASAN = 13  # "==123==ERROR: AddressSanitizer: ..."
CSAN = 14  # "========= ..." (compute-sanitizer)
GDBSIG = 15  # "Thread 1 "python" received signal SIGSEGV, Segmentation fault."
GDBNOISE = 16  # gdb chatter around a backtrace ("[New LWP 12]", "Using host libthread_db")
ERR = 17  # an error-vocabulary line
PYTEST = 18  # "_____ test_x[param] _____": a pytest failure's header

# Classes that may follow a message as its attached native backtrace.
TAIL = frozenset({FRAME, C10HDR, HINT, GDBNOISE, GDBSIG})

_PYFRAME_RE = lazy(r'File "[^"]*", line (?:\d+|\?\?\?)')
# PyTorch's fatal-signal handler (c10), seen in vLLM, SGLang, TensorRT-LLM and Megatron
# logs: "!!!!!!! Segfault encountered !!!!!!!", then native frames in Python's shape.
_SIGNAL_BANNER_RE = lazy(r"!{3,} ?[A-Z][\w ]{2,30} encountered ?!{3,}")
_THREAD_RE = lazy(
    rf"(?:Current thread|Thread) {HEX} \(most recent call first\)|Stack \(most recent call"
    rf"|Current thread's C stack|Extension modules: "
)
_ASAN_RE = lazy(r"==\d+==\s*ERROR: \w*Sanitizer")
ASAN_END_RE = lazy(r"==\d+==ABORTING")
_GDBNOISE_RE = lazy(
    r"\[New (?:LWP|Thread) |\[Thread debugging using|Using host libthread_db"
    rf"|{HEX} in \S|\d+\t|\d+\s+in \S|\d+\s+\S+: No such file|\(gdb\)"
    r"|\[Inferior \d+ \(process \d+\) (?:detached|exited)"
    r"|\[Thread 0x[0-9a-f]+ \(LWP \d+\) exited\]|Thread \d+ \(Thread |Backtrace stopped:"
    # debuginfod without network, and gdb's missing-source warning: "Download failed: Invalid
    # argument.  Continuing without source file ./nptl/pthread_kill.c." / "warning: 44\t./nptl/
    # pthread_kill.c: No such file or directory" (ikawrakow/ik_llama.cpp#425)
    r"|Download failed: .{0,200}Continuing without |warning: \d+\s+\S+: No such file"
    # where the program stopped, printed before "(gdb) bt": "__pthread_kill_implementation
    # (no_tid=0, signo=6, threadid=<optimized out>) at ./nptl/pthread_kill.c:44"
    r"|(?![\w:]*(?:rror|xception|RROR))[A-Za-z_][\w:]* \([^()]*\) at \S+:\d+$"
)
_CHAIN_RE = lazy(r"The above exception was the direct cause|During handling of the above exception")
# PyTorch on ROCm prints the same hints with HIP, AMD_SERIALIZE_KERNEL and TORCH_USE_HIP_DSA.
_HINT_RE = lazy(
    r"(?:CUDA|HIP) kernel errors might be asynchronously"
    r"|For debugging consider passing (?:CUDA_LAUNCH|AMD_SERIALIZE|HIP_LAUNCH)"
    r"|Compile with `TORCH_USE_(?:CUDA|HIP)_DSA`|Device-side assertions were explicitly omitted"
    r"|Search for `cuda\w+' in https|current device: \d+, in function|err$"
    r"|\(run with NCCL_DEBUG=INFO for details\)$|Last error:$|note: run with `RUST_BACKTRACE"
    r"|stack backtrace:$"
    # A compiler's note under its error (MLIR, gcc, clang, nvcc): "note: operand defined here
    # (op in a child region)" between Triton's diagnostic and its "PassManager::run failed"
    # (triton-lang/triton#10327)
    r"|note: \S"
    # LLVM's crash preamble before its own stack dump (Triton's MLIR passes abort this way)
    r"|PLEASE submit a bug report to |Stack dump(?: without symbol names)?\b"
    r"|\d+\.\tProgram arguments:"
)
# An exception line: a (dotted) class name ending in Error/Exception/... then ":" or end.
EXC_RE = lazy(
    r"(?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*)?(?:Error|Exception|Exit|Interrupt|Failure|Fault"
    r"|OutOfResources|OutOfMemory)\b(?::|\s*$)"
)

# A fully qualified exception class (lowercase modules, then a CamelCase class) and its
# message, as Python prints an uncaught one: "torch._dynamo.exc.Unsupported: ...".
_DOTTED_EXC_RE = lazy(r"(?:[a-z_][a-z0-9_]*\.){1,8}[A-Z][A-Za-z0-9]*: \S")
# The same with a CamelCase last component: tells an exception line from a source line.
EXC_SHAPE_RE = lazy(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?::\s|:$|$)")
# What a poster writes in place of lines cut out of a traceback.
ELISIONS = frozenset({"...", "\u2026", "[...]", "(...)", "....", "[\u2026]"})
# A function's first line in the source pytest shows: "    def test_gemm(dtype, n):".
DEF_RE = lazy(r"\s*(?:async )?def ([A-Za-z_]\w*)\(")
# The rule before each sub-exception of an ExceptionGroup: "+-+---- 1 ----", "+---- 2 ----".
EGROUP_SEP_RE = lazy(r"\s*\+[-+]*-{3,} \d+ -{3,}\s*$")
# The rule IPython prints above a traceback's header (and a chained exception's).
DASH_RULE_RE = lazy(r"-{20,}\s*$")
# Python 3.11+ column markers under a source line.
MARKER_RE = lazy(r"\s*[~^]+\s*$")
# The header of a cause chain under an error: Rust's anyhow/eyre ("Error: Could not create
# backend", a blank line, "Caused by:", then the causes indented; text-embeddings-inference,
# candle, mistral.rs), Java's "Caused by: java.lang.X: ...", and xFormers' dispatcher, which
# lists each operator it ruled out ("`fa3F@0.0.0` is not supported because:" and the reasons
# indented, a blank line between operators; YanWenKun/ComfyUI-Windows-Portable#134).
CAUSED_BY_RE = lazy(r"\s*(?:Caused by:|`[\w@.+-]{1,60}` is not supported because:)")
# An unindented line that carries on the error message before it: figures ("139264 bytes"),
# a "Label: number" fact ("Required: 139264  Hardware limit: 101376", Triton's OutOfResources
# text), or the advice sentence that ends such a message ("Reducing block sizes or
# `num_stages` may help.").  Outside a traceback these used to end the region.
CONTINUATION_RE = lazy(
    # the number must end at a space: "node:123:456 [0] NCCL WARN ..." is a new record
    r"[-+]?\d[\d.,]*(?:\s|$)|[A-Za-z][\w ]{0,30}:\s+[-+]?\d[\d.,]*(?:[\sxX%]|$)"
    r"|(?:Reducing|Reduce|Lowering|Increasing|Decreasing|Try|Please|Consider)\s"
)
# TensorRT-LLM's tactic dump after a GEMM failure: "Config was Cutlass GEMM Tactic" (the
# CutlassGemmConfig::toString header) then one "\tfield: value" line per field.  The dump is
# the failing kernel's own description, so it joins the error's region even when a paste lost
# the tab indentation of its fields.
TACTIC_RE = lazy(
    r"Config was\b|\w+ GEMM Tactic\s*$|style=|sm: ?\d|(?:dynamic |fallback )?cluster shape ID:"
    r"|tile shape ID:|mainloop sched:|epi sched:|swap_ab:|enable cuda kernel:"
    r"|epilogue fusion type:|stages:|split_k_\w+:|tile_config\w*:"
)

# --- error vocabulary ------------------------------------------------------------------------

# Literal pre-tests: a line that contains none of these is not an error line, and the
# regexes below never run on it.  Chosen so every pattern below contains one of them.

# The error vocabulary is data (kb/vocab/error-lines.toml): each entry a pattern, the region
# kind it opens and its weight (3 names a specific failure, 2 a subsystem error, 1 a generic
# fatal-looking word); the first entry of the highest weight decides a line's kind.  Its
# literal prefilter is derived from the patterns (diagnose.rules.prefilter.regex_literals).


#: ``(kind, weight, pattern)`` groups, and the literals of the prefilter.
_Table = tuple[tuple[tuple[str, int, LazyPattern], ...], tuple[str, ...]]
_Plain = tuple[tuple[tuple[str, int, str], ...], tuple[str, ...]]


@lru_cache(maxsize=4)
def _vocab_table(dirs: tuple[Path, ...]) -> _Table:
    """The error vocabulary in force: ``(kind, weight, pattern)`` groups in file order (each
    compiled on first use), and the lower-cased literals one of which every match contains.
    Derived once per change of the vocabulary files and kept in the snapshot."""
    from diagnose.snapshot import memo

    files = [f for d in dirs if (f := d / "vocab" / "error-lines.toml").is_file()]
    plain: _Plain = memo("error-lines", (*files, Path(__file__)), _plain_table)
    return tuple((k, w, lazy(p)) for k, w, p in plain[0]), plain[1]


def _plain_table() -> _Plain:
    from diagnose.literals import regex_literals
    from diagnose.vocab import vocabulary

    groups: list[tuple[str, int, list[str]]] = []
    literals: set[str] = set()
    for term in vocabulary("error-lines").terms:
        kind, weight = str(term.attribute("kind")), int(term.attribute("weight"))
        if groups and groups[-1][:2] == (kind, weight):
            groups[-1][2].append(term.text)
        else:
            groups.append((kind, weight, [term.text]))
        literals |= {lit.lower() for lit in regex_literals(term.text) or (term.text.lower(),)}
    table = tuple((k, w, "|".join(f"(?:{x})" for x in xs)) for k, w, xs in groups)
    return table, tuple(sorted(literals, key=lambda s: (len(s), s)))


def _vocabulary() -> _Table:
    from diagnose.vocab import kb_dirs

    return _vocab_table(kb_dirs())


# --- classification --------------------------------------------------------------------------


def _is_long_glibc_frame(window: str, text: str) -> bool:
    """True for a ``backtrace_symbols`` line whose symbol runs past the classified window.

    glibc puts its frame marker at the end (``module(symbol+0xoff) [0xaddr]``), and CUTLASS
    kernel names alone run to 2-5 KB, so the window holds nothing but module and symbol:
    no blank, an opening parenthesis, and a tail that closes the frame.
    """
    return (
        "(" in window
        and " " not in window
        and "\t" not in window
        and "[0x" in text[-_GLIBC_TAIL:]
        and _GLIBC_TAIL_RE.search(text, len(text) - _GLIBC_TAIL) is not None
    )


# The end of a glibc frame line: "+0xoff) [0xaddr]", addresses of at most 16 digits.
_GLIBC_TAIL = 64
_GLIBC_TAIL_RE = lazy(rf"[^\s()]\+{HEX}\)\s*\[{HEX}\]\s*$")


def _has_err_literal(t: str) -> bool:
    """Cheap pre-test: does ``t`` contain any literal that the error vocabulary needs?"""
    folded = t.lower()
    return any(lit in folded for lit in _vocabulary()[1])


#: Up to this many characters, plain ``in`` tests find the error literals faster than
#: importing RE2 and compiling its automaton (~3 ms on a pasted trace, every CLI run);
#: once a bigger input built the automaton, it serves every later one.
SMALL_TEXT = 8192


def literal_lines(texts: Sequence[str]) -> list[bool]:
    """For each text, whether it holds an error literal: one RE2 pass over all of them.

    RE2 runs the alternation of literals as one automaton over the joined UTF-8 text (about
    50x faster than ``re`` on this pattern), and the pass resumes at the next line after a
    hit, so it stays linear.  UTF-8 never puts a ``\\n`` byte inside a character, so byte
    newlines still separate the texts.  A small input is tested literal by literal.
    """
    literals = _vocabulary()[1]
    if literals not in _AUTOMATON and sum(min(len(t), WINDOW) for t in texts) <= SMALL_TEXT:
        windows = (t[:WINDOW].replace("\n", " ").lower() for t in texts)  # as the automaton
        return [any(lit in w for lit in literals) for w in windows]
    import re2  # lazy: the CLI's --help path must not pay for it

    _group_set(_vocabulary()[0])  # a big input: its candidate lines are classified by set
    flags = [False] * len(texts)
    joined = "\n".join(
        (t[:WINDOW].replace("\n", " ") if "\n" in t else t[:WINDOW]) for t in texts
    ).encode("utf-8", errors="replace")
    search = _literal_automaton(re2, literals).search
    pos, index = 0, 0
    while True:
        m = search(joined, pos)
        if m is None:
            break
        index += joined.count(b"\n", pos, m.start())
        flags[index] = True
        nl = joined.find(b"\n", m.end())
        if nl == -1:
            break
        pos, index = nl + 1, index + 1
    return flags


_AUTOMATON: dict[tuple[str, ...], Any] = {}


def _literal_automaton(re2: Any, literals: tuple[str, ...]) -> Any:
    """The compiled RE2 alternation of the error vocabulary's literals, any case (built once)."""
    if literals not in _AUTOMATON:
        options = re2.Options()
        options.log_errors = False  # a DFA out of its budget falls back quietly
        options.never_capture = True
        options.case_sensitive = False
        pattern = b"|".join(re.escape(lit.encode()) for lit in literals)
        _AUTOMATON[literals] = re2.compile(pattern, options=options)
    return _AUTOMATON[literals]


def vocab(text: str) -> tuple[str, int] | None:
    """Return ``(kind, weight)`` of the strongest error-vocabulary match in ``text``."""
    t = text[:WINDOW]
    if not _has_err_literal(t):
        return None
    table = _vocabulary()[0]
    gate = _GROUP_SETS.get(table)
    hits = gate(t) if gate is not None else None
    best: tuple[str, int] | None = None
    for i, (kind, weight, pattern) in enumerate(table):
        if best is not None and weight <= best[1]:
            continue
        if (i in hits) if hits is not None else pattern.search(t):
            best = (kind, weight)
            if weight == 3:
                break
    return best


#: Per vocabulary table, one RE2 set pass that says which groups match a line (groups RE2
#: cannot run, with lookarounds, are searched with ``re`` and added).  Built when a log is
#: big enough to have built the literal automaton: a warning flood sends ~100,000 lines
#: here, and a dozen ``re`` searches a line took 7.5 s of a 30 MB log.
_GROUP_SETS: dict[Any, Any] = {}


_NOT_RE2 = re.compile(r"\(\?<?[=!]|\\[1-9]")


def _group_set(table: Any) -> Any:
    """The set matcher of ``table``: ``text -> set of matching group indices`` (built once)."""
    if table in _GROUP_SETS:
        return _GROUP_SETS[table]
    import re2

    found: Any = None
    try:
        options = re2.Options()
        options.log_errors = False  # a DFA out of its budget falls back quietly
        options.never_capture = True
        matcher = re2.Set.SearchSet(options)
        in_set: list[int] = []
        by_re: list[int] = []
        for i, (_, _, pattern) in enumerate(table):
            # RE2 has no lookarounds or backreferences; asked to add one it refuses and
            # writes to stderr, so such groups are never offered: ``re`` runs them.
            if _NOT_RE2.search(pattern.pattern):
                by_re.append(i)
            else:
                matcher.Add(pattern.pattern)
                in_set.append(i)
        matcher.Compile()

        def groups(text: str) -> set[int]:
            try:
                hit = {in_set[j] for j in matcher.Match(text) or ()}
            except UnicodeError:  # lone surrogates: every group by ``re``
                return {i for i, (_, _, p) in enumerate(table) if p.search(text)}
            return hit | {i for i in by_re if table[i][2].search(text)}

        found = groups
    except Exception:  # pragma: no cover - RE2 is a declared dependency
        found = None
    _GROUP_SETS[table] = found
    return found


def classify(text: str, has_literal: bool = True) -> int:
    """Return the line class of one normalised line (see the ``_`` class constants).

    ``has_literal`` False says the line holds no error literal (see :func:`literal_lines`),
    which skips the vocabulary regexes.
    """
    t = text[:WINDOW]
    s = t.lstrip()
    if not s:
        return BLANK
    indented = len(s) != len(t)
    first = s[0]
    if first == "F":
        if s.startswith('File "') and _PYFRAME_RE.match(s):
            return PYFRAME
        if s.startswith("Fatal Python error"):
            return FATALPY
    if first == "!" and _SIGNAL_BANNER_RE.match(s):
        return FATALPY  # PyTorch's "!!!!!!! Segfault encountered !!!!!!!"
    if first in "CIF</~" and is_ipython_frame(s):
        return PYFRAME
    if ".py:" in t and is_pytest_frame(s):
        return PYFRAME
    if first == "_" and is_pytest_header(s):
        return PYTEST
    if first == "E" and is_pytest_error(t) and EXC_SHAPE_RE.match(s[1:].lstrip()):
        return ERR  # pytest's "E   pkg.SomeUnsupported: ...": any exception, not only *Error
    if first == "=":
        if s.startswith("=========") and s[9:10] != "=":
            # compute-sanitizer's "========= " (nine), not a longer rule such as pytest's
            # "=== short test summary info ===" with its first entry glued on (held-out 21)
            return CSAN
        if _ASAN_RE.match(s):
            return ASAN
    if "ost recent call last" in t and re.search(r"[Tt]race[Bb]ack \(most recent call last\)", t):
        return TB
    if is_frame(s) or (len(text) > WINDOW and _is_long_glibc_frame(s, text)):
        return FRAME
    if first == "E" and s.startswith("Exception raised from "):
        return C10HDR
    if first == "t" and s.startswith("terminate called"):
        return TERM
    if first == "w" and s.startswith("what():"):
        return WHAT
    if "exception" in t and _CHAIN_RE.search(t):
        return CHAIN
    if ("thread" in t or "Thread" in t or "Stack" in t or "Extension" in t) and _THREAD_RE.match(s):
        return THREAD
    if "received signal SIG" in t:
        return GDBSIG
    if _HINT_RE.match(s):
        return HINT
    if (first in "[0U(T123456789BDw" or ") at " in t) and _GDBNOISE_RE.match(s):
        return GDBNOISE
    if has_literal and vocab(s) is not None and not is_prose(s):
        return ERR
    if not indented and first.islower() and ": " in t and _DOTTED_EXC_RE.match(s):
        # A qualified exception whose name says no "Error": Python's own last line for
        # torch._dynamo.exc.FailOnRecompileLimitHit, ...exc.Unsupported, pkg.SomeTimeout.
        return ERR
    return CODE if indented else OTHER
