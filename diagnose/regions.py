"""Find each distinct failure in a normalised log and group the lines that belong to it.

:func:`find_regions` turns the :class:`~diagnose.model.LogLine` sequence made by
``diagnose.ingest.normalize.normalize`` into :class:`~diagnose.model.Region` objects, one per
distinct failure, in the order the failures first appear.

How it works, in one linear pass per stage:

1. Every line gets a class from cheap literal tests (``_classify``): traceback header, Python
   frame, C++ frame of any dialect, ``what():``, error vocabulary, blank, ...  Only the first
   ``_WINDOW`` characters of a line are looked at, so a megabyte-long template name costs no
   more than a short line.
2. Lines are split into streams by ``LogLine.rank``.  Multi-rank logs interleave lines of
   several processes; a traceback is only contiguous inside its own rank's stream.  A line
   without a rank prefix belongs to the stream of the line before it, because loggers that
   prefix a multi-line record (glog, c10) prefix only its first line.
3. Each stream is walked by a small state machine that opens a region at a header (a
   traceback, ``terminate called``, ``Fatal Python error``, a sanitizer report, a frame block
   or an error-vocabulary line) and extends it while the following lines continue it.
4. Copies of the same failure, printed by several ranks or repeated, are merged by a
   signature: the message with numbers, addresses and hashes masked, plus the frames'
   functions.  The first copy is kept as the evidence, with ``count`` and ``ranks``.

The function never raises: malformed input yields fewer or smaller regions, not errors.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagnose.elastic_report import MAX_REPORT_LINES, opens_report, read_report
from diagnose.frames.ipython import arrow_line
from diagnose.frames.ipython import is_frame_line as is_ipython_frame
from diagnose.frames.ipython import is_source_line as is_ipython_source
from diagnose.frames.pytest_report import ends_failure, opens_section
from diagnose.frames.pytest_report import is_error_line as is_pytest_error
from diagnose.frames.pytest_report import is_frame_line as is_pytest_frame
from diagnose.frames.pytest_report import is_header as is_pytest_header
from diagnose.lazyre import LazyPattern, lazy
from diagnose.model import Frame, LogLine, Region
from diagnose.records import record

if TYPE_CHECKING:
    _FrameParser = Callable[[LogLine], Frame | None]

__all__ = ["REGION_KINDS", "find_regions"]

#: Every value :attr:`Region.kind` can take (``cuda-error`` also covers ROCm/HIP runtime errors).
REGION_KINDS = (
    "python-traceback",
    "cpp-backtrace",
    "cpp-terminate",
    "trtllm-error",
    "cuda-error",
    "nccl-error",
    "nvshmem-error",
    "triton-error",
    "faulthandler",
    "sanitizer",
    "gdb-backtrace",
    "error-line",
)

# Only this many leading characters of a line are classified: every marker we look for sits
# near the start of its line, and a bounded window keeps the pass linear in the line count.
_WINDOW = 2048
# A region keeps at most this many parsed frames (the body keeps every line).  A recursion
# crash can print a million frames; the top of the stack is what identifies the failure.
_MAX_FRAMES = 256
# Frames that enter the de-duplication signature.
_SIGNATURE_FRAMES = 32
# Free-text lines accepted after an exception line as part of its message (ninja output,
# multi-line ValueError text).  Frame lines do not count against it.
_MAX_MESSAGE_LINES = 40
# A pytest failure (the test's source, every frame's code, captured locals) is cut here.
_MAX_PYTEST_LINES = 5_000
# An exception line with nothing after its colon: "AssertionError:".
_EXC_ONLY_RE = lazy(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*:\s*$")
# The last line of a paste shorter than this, and no exception, is a cut stub (_cut_fragment).
_FRAGMENT = 12
# Indented lines an exception message ending in ":" may carry on into (see _run_on).
_RUN_ON_LINES = 8
# A message is cut here; the full line stays in the region body.
_MAX_MESSAGE = 4096

# --- line classes ----------------------------------------------------------------------------

_BLANK = 0
_OTHER = 1  # not indented, no vocabulary
_CODE = 2  # indented text (a traceback's source line, a message continuation)
_TB = 3  # "Traceback (most recent call last):"
_CHAIN = 4  # "The above exception was the direct cause ..." / "During handling ..."
_PYFRAME = 5  # File "x.py", line 3, in f
_FRAME = 6  # a C/C++ frame: gdb/ASan "#N", c10 "frame #N:", TRT-LLM "N 0x...", glibc, glog
_C10HDR = 7  # "Exception raised from f at file:line (most recent call first):"
_HINT = 8  # "CUDA kernel errors might be asynchronously reported ..." and friends
_TERM = 9  # "terminate called after throwing an instance of 'X'"
_WHAT = 10  # "  what():  text"
_FATALPY = 11  # "Fatal Python error: Segmentation fault"
_THREAD = 12  # faulthandler "Current thread 0x... (most recent call first):"
_ASAN = 13  # "==123==ERROR: AddressSanitizer: ..."
_CSAN = 14  # "========= ..." (compute-sanitizer)
_GDBSIG = 15  # "Thread 1 "python" received signal SIGSEGV, Segmentation fault."
_GDBNOISE = 16  # gdb chatter around a backtrace ("[New LWP 12]", "Using host libthread_db")
_ERR = 17  # an error-vocabulary line
_PYTEST = 18  # "_____ test_x[param] _____": a pytest failure's header

# Classes that may follow a message as its attached native backtrace.
_TAIL = frozenset({_FRAME, _C10HDR, _HINT, _GDBNOISE, _GDBSIG})

_HEX = r"0[xX][0-9a-fA-F]+"
_PYFRAME_RE = lazy(r'File "[^"]*", line (?:\d+|\?\?\?)')
# PyTorch's fatal-signal handler (c10), seen in vLLM, SGLang, TensorRT-LLM and Megatron
# logs: "!!!!!!! Segfault encountered !!!!!!!", then native frames in Python's shape.
_SIGNAL_BANNER_RE = lazy(r"!{3,} ?[A-Z][\w ]{2,30} encountered ?!{3,}")
_HASH_FRAME_RE = lazy(r"#\d+\s+\S")
_NUMBERED_FRAME_RE = lazy(rf"\d+\s+{_HEX}\s+\S")
_BOOST_FRAME_RE = lazy(r"\d{1,5}# \S")  # boost::stacktrace (Triton Inference Server)
# Open MPI prints a frame without symbol glued to its address: "[ 3] python3[0x598f69]".
_GLIBC_FRAME_RE = lazy(
    rf"\S\((?:[^()\s]*\+)?{_HEX}\)\s*\[{_HEX}\]|\S\s\[{_HEX}\]$|^\[ *\d+\] \S+\[{_HEX}\]$"
)
_GLOG_FRAME_RE = lazy(rf"@\s+{_HEX}\s")
_RUST_FRAME_RE = lazy(r"\d+: [\w<][\w:<>$. ]*::|\d+:\s+0x[0-9a-fA-F]+ - \S")
_JAVA_FRAME_RE = lazy(r"at [\w$.]+\.[\w$<>]+\([^()]*\)$")
# c10's Windows backtrace: "00007FFE12AE1DE4 00007FFE12AC2070 torch_python.dll!symbol [...]"
_WINDOWS_FRAME_RE = lazy(r"[0-9A-Fa-f]{16}(?: ?[0-9A-Fa-f]{16})?\s+[^\s!\[\]]+!")
_THREAD_RE = lazy(
    rf"(?:Current thread|Thread) {_HEX} \(most recent call first\)|Stack \(most recent call"
    rf"|Current thread's C stack|Extension modules: "
)
_ASAN_RE = lazy(r"==\d+==\s*ERROR: \w*Sanitizer")
_ASAN_END_RE = lazy(r"==\d+==ABORTING")
_GDBNOISE_RE = lazy(
    r"\[New (?:LWP|Thread) |\[Thread debugging using|Using host libthread_db"
    rf"|{_HEX} in \S|\d+\t|\d+\s+in \S|\d+\s+\S+: No such file|\(gdb\)"
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
# A line that begins a new log record: a timestamp, a level word, a glog header or a
# bracketed tag.  Free text after an exception line stops at one.
_RECORD_RE = lazy(
    r"\[?\d{4}[-/]\d\d[-/]\d\d|\[?\d\d[-/]\d\d[-/ ]\d\d|\[?\d\d:\d\d:\d\d"
    r"|(?:INFO|WARNING|WARN|DEBUG|ERROR|CRITICAL|FATAL|TRACE)\b|[IWEF]\d{4} \d\d:"
    r"|\[[A-Za-z][^\]]{0,40}\]"
)
# An exception line: a (dotted) class name ending in Error/Exception/... then ":" or end.
_EXC_RE = lazy(
    r"(?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*)?(?:Error|Exception|Exit|Interrupt|Failure|Fault"
    r"|OutOfResources|OutOfMemory)\b(?::|\s*$)"
)

# A fully qualified exception class (lowercase modules, then a CamelCase class) and its
# message, as Python prints an uncaught one: "torch._dynamo.exc.Unsupported: ...".
_DOTTED_EXC_RE = lazy(r"(?:[a-z_][a-z0-9_]*\.){1,8}[A-Z][A-Za-z0-9]*: \S")
# The same with a CamelCase last component: tells an exception line from a source line.
_EXC_SHAPE_RE = lazy(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?::\s|:$|$)")
# What a poster writes in place of lines cut out of a traceback.
_ELISIONS = frozenset({"...", "\u2026", "[...]", "(...)", "....", "[\u2026]"})
# A function's first line in the source pytest shows: "    def test_gemm(dtype, n):".
_DEF_RE = lazy(r"\s*(?:async )?def ([A-Za-z_]\w*)\(")
# The rule before each sub-exception of an ExceptionGroup: "+-+---- 1 ----", "+---- 2 ----".
_EGROUP_SEP_RE = lazy(r"\s*\+[-+]*-{3,} \d+ -{3,}\s*$")
# The rule IPython prints above a traceback's header (and a chained exception's).
_DASH_RULE_RE = lazy(r"-{20,}\s*$")
# Python 3.11+ column markers under a source line.
_MARKER_RE = lazy(r"\s*[~^]+\s*$")
# An unindented line that carries on the error message before it: figures ("139264 bytes"),
# a "Label: number" fact ("Required: 139264  Hardware limit: 101376", Triton's OutOfResources
# text), or the advice sentence that ends such a message ("Reducing block sizes or
# `num_stages` may help.").  Outside a traceback these used to end the region.
_CONTINUATION_RE = lazy(
    # the number must end at a space: "node:123:456 [0] NCCL WARN ..." is a new record
    r"[-+]?\d[\d.,]*(?:\s|$)|[A-Za-z][\w ]{0,30}:\s+[-+]?\d[\d.,]*(?:[\sxX%]|$)"
    r"|(?:Reducing|Reduce|Lowering|Increasing|Decreasing|Try|Please|Consider)\s"
)
# TensorRT-LLM's tactic dump after a GEMM failure: "Config was Cutlass GEMM Tactic" (the
# CutlassGemmConfig::toString header) then one "\tfield: value" line per field.  The dump is
# the failing kernel's own description, so it joins the error's region even when a paste lost
# the tab indentation of its fields.
_TACTIC_RE = lazy(
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


# --- prose --------------------------------------------------------------------------------------

# A chat paste mixes the log with the poster's own sentences ("I get a CUDA out of memory error
# when I run it", "Has anyone seen `illegal memory access` before?").  Such a sentence names an
# error without being one, so it must not open a region.  A line counts as prose only when it
# has a sentence signal (first person singular, a question opener, a final "?") AND none of
# the marks of a logged error: an exception class, an error code, a "Label:" head, a qualified
# "module.Name:".  Ambiguous lines stay error lines: a missed region costs more than a spare one.
_PROSE_FIRST_PERSON_RE = lazy(r"\b(?:I(?![/\w])|I'(?:m|ve|d|ll)|[Mm]y|me)\b")
_PROSE_OPENER_RE = lazy(
    r"(?:[Hh]ow (?:to|do|can|should)|[Ww]hy (?:do|does|is|are|am)|[Aa]ny ?one|[Dd]oes any ?one"
    r"|[Hh]as any ?one|[Aa]ny (?:idea|ideas|help|hint)|[Ii]s there|[Cc]an (?:some|any) ?one"
    r"|[Cc]ould (?:some|any) ?one)\b"
)
# A sentence that points at the error rather than being it: "... would fail with the
# following error:", "... failed with below error when tp=2:", "... also failed with the same
# error." (held-out round 14).
_PROSE_POINTER_RE = lazy(
    r"(?i)\b(?:the following|following|below|the same|same|above|this|these)\s+(?:\w+\s+)?"
    r"(?:errors?|exceptions?|tracebacks?|outputs?|logs?|messages?|issues?)\b[^.:\uff1a]{0,40}"
    r"[.:\uff1a]\s*$"
)
# A poster's own paragraph about the log, with no first person and no question ("The one run
# that actually failed logged nothing. Also worth knowing ...", vllm-project/vllm#56824): two
# sentences on one line, and function words as dense as in English prose (about a third of the
# words), which no logged message is (they name things: types, paths, numbers, flags).
_PROSE_SENTENCES_RE = lazy(r"[a-z]{2,}[.;] [A-Z][a-z]+ [a-z]")
_PROSE_WORD_RE = lazy(r"[A-Za-z']+")
# Code in the line (a dotted or snake_case name, camelCase): a logged message that names
# things ("preempted by PreemptionMode.SWAP mode because ..."), however wordy.
_CODE_TOKEN_RE = lazy(r"[A-Za-z]\.[A-Za-z]|[A-Za-z0-9]_[A-Za-z0-9]|[a-z][A-Z]")
_FUNCTION_WORDS = frozenset({
    "the", "a", "an", "of", "to", "in", "on", "at", "and", "or", "but", "is", "are", "was",
    "were", "be", "been", "has", "have", "had", "this", "that", "these", "those", "which", "who",
    "it", "its", "as", "for", "with", "from", "by", "not", "no", "all", "only", "than", "then",
    "so", "also", "there", "their", "they", "we", "you",
})  # fmt: skip
_PROSE_MIN_WORDS = 14
_PROSE_DENSITY = 0.3
_MD_HEADING_RE = lazy(r"#{1,6} +\S")
_HEADING_RE = lazy(r"(?i)(?:the |full )?(?:error|errors|error log|error message|traceback)s?:?$")
_PROSE_QUESTION_RE = lazy(r"\?[\"'`)\]]*\s*$")
_LOGGED_ERROR_RE = lazy(
    r"[A-Za-z_]\w*(?:Error|Exception|Failure|Fault|OutOfResources|OutOfMemory)(?:\b|[A-Z])"
    r"|\b[A-Z][A-Z0-9]*_[A-Z0-9_]{2,}|^[\w.-]+(?: [\w.-]+){0,2}:(?:\s|$)"
    r"|\b[A-Za-z_]\w*(?:\.\w+)+:\s"
)


def _is_prose(s: str) -> bool:
    """Does the stripped line ``s`` read as a person's sentence rather than a logged error?"""
    if s.startswith(("...", "\u2026")) and s.endswith(("...", "\u2026")):
        return True  # what a poster wrote in place of cut lines: "... (many NCCL errors) ..."
    if len(s) <= 16 and _HEADING_RE.match(s):
        return True  # a heading over the paste: "error:", "Error log:", "Errors"
    if s[0] == "#" and _MD_HEADING_RE.match(s):
        return True  # "### Originating CUDA error (all 8 TP ranks)": the poster's heading
    if _RECORD_RE.match(s) or s[0] in "[(<{#=|" or _LOGGED_ERROR_RE.search(s):
        return False
    return (
        _PROSE_FIRST_PERSON_RE.search(s) is not None
        or _PROSE_OPENER_RE.match(s) is not None
        or _PROSE_QUESTION_RE.search(s) is not None
        or _PROSE_POINTER_RE.search(s) is not None
        or _reads_as_paragraph(s)
    )


def _reads_as_paragraph(s: str) -> bool:
    """Two sentences with prose's density of function words (see ``_FUNCTION_WORDS``)."""
    if _PROSE_SENTENCES_RE.search(s) is None or _CODE_TOKEN_RE.search(s) is not None:
        return False
    words = _PROSE_WORD_RE.findall(s)
    if len(words) < _PROSE_MIN_WORDS:
        return False
    common = sum(w.lower() in _FUNCTION_WORDS for w in words)
    return common >= _PROSE_DENSITY * len(words)


_STRUCTURED_KINDS = frozenset(
    {"trtllm-error", "nvshmem-error", "triton-error", "nccl-error", "cuda-error", "sanitizer"}
)

# --- messages and signatures -----------------------------------------------------------------

# Log-record prefixes that say nothing about the failure: timestamps, level words, glog and
# c10 headers, vLLM's "ERROR 01-02 12:00:00 file.py:12]", TRT-LLM tags, quote markers.
_PREFIX_RE = lazy(
    r"\s*(?:"
    r">\s+"
    r"|\([\w ]+? (?:rank=\d+ )?pid=\d+(?:, ip=[\d.]+)?\)\s*"
    r"|\[?\d{4}[-/]\d\d[-/]\d\d[T ]?[\d:.,]*Z?\]?(?: \w+\d)*\]?:?\s*"
    r"|\[\d\d/\d\d/\d{4}-[\d:]+\]\s*"
    r"|(?:INFO|WARNING|WARN|DEBUG|ERROR|CRITICAL|FATAL)\s*(?:\d\d-\d\d [\d:.]+\s+)?"
    r"(?:\[?[\w./-]+:\d+\]\s*)?(?:[:|]\s*)?"
    r"|\[?[IWEF]\d{4} [\d:.]+(?: +\d+)? [\w./-]+:\d+\]\s*"
    r"|\[[IWEF] ?[\w./-]*:\d+\]\s*"
    r"|\[TensorRT-LLM\](?:\[[A-Z]+\])?\s*|\[TRT-LLM\] \[[A-Z]\]\s*|\[[VIWEF]\] \[TRT\]\s*"
    r"|==\d+==\s*(?:ERROR:\s*)?"
    r"|=+\s+"
    r"|what\(\):\s*"
    # UCX's "[host:pid:thread:tid]" before "Caught signal 8 (Floating point exception ...)",
    # and its log records' "[host:pid:thread]  ib_mlx5_dv.c:452  UCX  ERROR   " (rules read
    # the record whole: only the message drops it)
    r"|\[[\w.-]+:\d+ ?:\d+:\d+\]\s*"
    r"|\[[\w.-]+:\d+ ?:\d+\]\s+[\w.-]+:\d+\s+UCX\s+(?:ERROR|WARN|DIAG|INFO|DEBUG)\s+"
    # pytest: the "E   " of an exception line, and a short summary's "FAILED <test> - "
    r"|E {1,64}(?=\S)|FAILED \S+::\S+ - "
    r")"
)
# The characters a match of _PREFIX_RE can start with, once leading spaces are stripped (a
# test checks each alternative): most messages start with none, and need no regex call.
# A digit can only open a date (\d{4} then - or /): a numbered frame line is no prefix.
_PREFIX_HEADS = frozenset(">([IWDECF=w")


def _may_have_prefix(text: str) -> bool:
    """False when no alternative of ``_PREFIX_RE`` can match at the start of ``text``."""
    head = text[:1]
    if head.isdigit():  # a superset of what \d matches
        return text[:4].isdigit() and text[4:5] in ("-", "/")
    return head in _PREFIX_HEADS


_NCCL_HEAD = lazy(r"[\w.-]+:\d+:\d+ \[\d+\] (?:[\w./-]+:\d+ )?(?=NCCL )")
_TRAILING_CARETS = lazy(r"\s{2,}[~^]{3,}\s*$")
# A sentence ending in a colon before a qualified exception: the exception is the message.
_PROSE_LEAD = lazy(
    r"[^:\uff1a]{8,300}?(?:[:\uff1a]\s*|\s[`'\"]{1,3})"
    r"(?=(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception)|OutOfResources)\b:)"
)
_RANK_TEXT_RE = lazy(r"\[(?:PG [^\]]*?)?Rank (\d+)\]")
_MASK_RE = lazy(rf"{_HEX}|\b[0-9a-fA-F]{{8,}}\b|\d+")


def _strip_prefixes(text: str) -> str:
    """Drop log-record prefixes from ``text`` so the message starts at the error itself."""
    out = text.strip()
    for _ in range(8):  # bounded: each round removes one prefix
        m = _PREFIX_RE.match(out) if _may_have_prefix(out) else None
        if m is None or m.end() == 0:
            break
        rest = out[m.end() :].strip()
        if not rest:
            break
        out = rest
    if " NCCL " in out[:300] and (nccl := _NCCL_HEAD.match(out)) is not None:
        out = out[nccl.end() :]  # NCCL's "host:pid:tid [0] file.cc:63 " before "NCCL WARN"
    if out.endswith("^") and (carets := _TRAILING_CARETS.search(out)) is not None:
        out = out[: carets.start()]  # Python's ^^^^ underline glued on by the paste
    lead = _PROSE_LEAD.match(out) if ("\uff1a" in out or ": " in out) else None
    if lead is not None and (
        "\uff1a" in lead.group(0) or _PROSE_FIRST_PERSON_RE.search(lead.group(0)) is not None
    ):
        out = out[lead.end() :]  # "I ran it and got this error: RuntimeError: ..."
    return out[:_MAX_MESSAGE]


def _mask(text: str) -> str:
    """Mask numbers, addresses and hashes so copies from other ranks/pids compare equal."""
    return _MASK_RE.sub("#", text[:_WINDOW])


# --- classification --------------------------------------------------------------------------


def _is_frame(s: str) -> bool:
    """True when the stripped text ``s`` is a C/C++ (or Rust/Java) stack-frame line."""
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
_GLIBC_TAIL_RE = lazy(rf"[^\s()]\+{_HEX}\)\s*\[{_HEX}\]\s*$")


def _has_err_literal(t: str) -> bool:
    """Cheap pre-test: does ``t`` contain any literal that the error vocabulary needs?"""
    folded = t.lower()
    return any(lit in folded for lit in _vocabulary()[1])


#: Up to this many characters, plain ``in`` tests find the error literals faster than
#: importing RE2 and compiling its automaton (~3 ms on a pasted trace, every CLI run);
#: once a bigger input built the automaton, it serves every later one.
SMALL_TEXT = 8192


def _literal_lines(texts: Sequence[str]) -> list[bool]:
    """For each text, whether it holds an error literal: one RE2 pass over all of them.

    RE2 runs the alternation of literals as one automaton over the joined UTF-8 text (about
    50x faster than ``re`` on this pattern), and the pass resumes at the next line after a
    hit, so it stays linear.  UTF-8 never puts a ``\\n`` byte inside a character, so byte
    newlines still separate the texts.  A small input is tested literal by literal.
    """
    literals = _vocabulary()[1]
    if literals not in _AUTOMATON and sum(min(len(t), _WINDOW) for t in texts) <= SMALL_TEXT:
        windows = (t[:_WINDOW].replace("\n", " ").lower() for t in texts)  # as the automaton
        return [any(lit in w for lit in literals) for w in windows]
    import re2  # lazy: the CLI's --help path must not pay for it

    _group_set(_vocabulary()[0])  # a big input: its candidate lines are classified by set
    flags = [False] * len(texts)
    joined = "\n".join(
        (t[:_WINDOW].replace("\n", " ") if "\n" in t else t[:_WINDOW]) for t in texts
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


def _vocab(text: str) -> tuple[str, int] | None:
    """Return ``(kind, weight)`` of the strongest error-vocabulary match in ``text``."""
    t = text[:_WINDOW]
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


def _classify(text: str, has_literal: bool = True) -> int:
    """Return the line class of one normalised line (see the ``_`` class constants).

    ``has_literal`` False says the line holds no error literal (see :func:`_literal_lines`),
    which skips the vocabulary regexes.
    """
    t = text[:_WINDOW]
    s = t.lstrip()
    if not s:
        return _BLANK
    indented = len(s) != len(t)
    first = s[0]
    if first == "F":
        if s.startswith('File "') and _PYFRAME_RE.match(s):
            return _PYFRAME
        if s.startswith("Fatal Python error"):
            return _FATALPY
    if first == "!" and _SIGNAL_BANNER_RE.match(s):
        return _FATALPY  # PyTorch's "!!!!!!! Segfault encountered !!!!!!!"
    if first in "CIF</~" and is_ipython_frame(s):
        return _PYFRAME
    if ".py:" in t and is_pytest_frame(s):
        return _PYFRAME
    if first == "_" and is_pytest_header(s):
        return _PYTEST
    if first == "E" and is_pytest_error(t) and _EXC_SHAPE_RE.match(s[1:].lstrip()):
        return _ERR  # pytest's "E   pkg.SomeUnsupported: ...": any exception, not only *Error
    if first == "=":
        if s.startswith("=========") and s[9:10] != "=":
            # compute-sanitizer's "========= " (nine), not a longer rule such as pytest's
            # "=== short test summary info ===" with its first entry glued on (held-out 21)
            return _CSAN
        if _ASAN_RE.match(s):
            return _ASAN
    if "ost recent call last" in t and re.search(r"[Tt]race[Bb]ack \(most recent call last\)", t):
        return _TB
    if _is_frame(s) or (len(text) > _WINDOW and _is_long_glibc_frame(s, text)):
        return _FRAME
    if first == "E" and s.startswith("Exception raised from "):
        return _C10HDR
    if first == "t" and s.startswith("terminate called"):
        return _TERM
    if first == "w" and s.startswith("what():"):
        return _WHAT
    if "exception" in t and _CHAIN_RE.search(t):
        return _CHAIN
    if ("thread" in t or "Thread" in t or "Stack" in t or "Extension" in t) and _THREAD_RE.match(s):
        return _THREAD
    if "received signal SIG" in t:
        return _GDBSIG
    if _HINT_RE.match(s):
        return _HINT
    if (first in "[0U(T123456789BDw" or ") at " in t) and _GDBNOISE_RE.match(s):
        return _GDBNOISE
    if has_literal and _vocab(s) is not None and not _is_prose(s):
        return _ERR
    if not indented and first.islower() and ": " in t and _DOTTED_EXC_RE.match(s):
        # A qualified exception whose name says no "Error": Python's own last line for
        # torch._dynamo.exc.FailOnRecompileLimitHit, ...exc.Unsupported, pkg.SomeTimeout.
        return _ERR
    return _CODE if indented else _OTHER


# --- region assembly -------------------------------------------------------------------------


@record(frozen=False)
class _Found:
    """A region found in one stream, before frames are parsed and copies are merged."""

    kind: str
    start: int  # stream index of the first line
    end: int  # stream index one past the last line
    message: int  # stream index of the message line
    message_text: str
    truncated: bool = False
    has_message: bool = True  # False: a traceback that ends before its exception line


class _Stream:
    """The lines of one rank (or of the whole log) and the state machine that reads them."""

    def __init__(self, lines: list[LogLine], classes: list[int]) -> None:
        self.lines = lines
        self.cls = classes
        self.n = len(lines)
        # nxt[i]: index of the first non-blank line at or after i (n when none): lets a
        # blank line be judged by what follows it without rescanning (linear overall).
        nxt = [self.n] * (self.n + 1)
        for i in range(self.n - 1, -1, -1):
            nxt[i] = i if classes[i] != _BLANK else nxt[i + 1]
        self.nxt = nxt

    def regions(self) -> list[_Found]:
        """Walk the stream once and return the regions in order."""
        out: list[_Found] = []
        i, n, cls = 0, self.n, self.cls
        while i < n:
            c = cls[i]
            found: _Found | None = None
            if c == _PYTEST or (c in (_PYFRAME, _ERR) and self._pytest_opens(i)):
                found = self._pytest(i)
            elif c in (_TB, _CHAIN, _PYFRAME) or (
                c in (_CODE, _OTHER) and self._code_opens_traceback(i)
            ):
                found = self._traceback(i)
            elif c in (_FATALPY, _THREAD):
                found = self._faulthandler(i)
            elif c == _ASAN:
                found = self._asan(i)
            elif c == _CSAN:
                out.extend(self._csan(i))
                i = self._csan_end(i)
                continue
            elif c in (_FRAME, _C10HDR, _GDBSIG):
                found = self._frames(i)
            elif c in (_ERR, _TERM, _WHAT):
                found = self._leads_traceback(self._chained(self._error_block(i)))
            if found is None:
                i += 1
                continue
            out.append(found)
            i = max(found.end, i + 1)
        return out

    def _leads_traceback(self, found: _Found) -> _Found:
        """An error line printed right above the traceback that reports it.

        A library logs its error, then Python raises: "cuBLAS API failed with status 15",
        a blank line, "Traceback (most recent call last):".  One failure: the traceback's
        exception names it, or, when the paste cut the traceback before its exception
        line, the error line does (not the last frame).
        """
        if found.kind == "python-traceback":
            return found
        k = self.nxt[found.end] if found.end < self.n else self.n
        if k >= self.n or self.cls[k] != _TB or k - found.end > 1:
            return found
        return self._with_traceback(found, k)

    def _chained(self, found: _Found) -> _Found:
        """An exception line followed by "The above exception was the direct cause ...".

        The paste began after the first traceback's frames; the chain makes the error line
        and the traceback that follows one failure whose message is the final exception.
        """
        k = self.nxt[found.end]
        if k >= self.n or self.cls[k] != _CHAIN:
            return found
        return self._with_traceback(found, k)

    def _with_traceback(self, found: _Found, k: int) -> _Found:
        """``found`` and the traceback read from line ``k`` on, as one failure: named by the
        traceback's exception, or by ``found`` when the paste cut the traceback before it."""
        tb = self._traceback(k)
        if tb.has_message:
            return _Found(
                "python-traceback", found.start, tb.end, tb.message, tb.message_text, tb.truncated
            )
        return _Found(
            "python-traceback", found.start, tb.end, found.message, found.message_text, True
        )

    # -- helpers --

    def _text(self, i: int) -> str:
        return self.lines[i].text

    def _code_opens_traceback(self, i: int) -> bool:
        """A source line (and ``^^^`` marker) right before a ``File`` line: a cut paste."""
        for k in range(i + 1, min(i + 3, self.n)):
            c = self.cls[k]
            if c == _PYFRAME:
                return True
            if c != _CODE and not _MARKER_RE.match(self._text(k)):
                return False
        return False

    def _free_text(self, i: int) -> bool:
        """A line that can continue a multi-line exception message."""
        c = self.cls[i]
        if c in (_CODE, _HINT, _WHAT):
            return True
        if c not in (_OTHER, _ERR):
            return False
        s = self._text(i).lstrip()
        return not _RECORD_RE.match(s) and not _EXC_RE.match(s)

    def _tail(self, j: int, free: bool) -> int:
        """Extend from ``j`` over an attached backtrace (and free text when ``free``)."""
        n, cls, nxt = self.n, self.cls, self.nxt
        budget = _MAX_MESSAGE_LINES
        while j < n:
            c = cls[j]
            if c in _TAIL or (c == _CODE and j > 0 and cls[j - 1] in (_FRAME, _GDBNOISE)):
                j += 1
            elif c == _BLANK:
                k = nxt[j]
                if k < n and cls[k] in _TAIL and cls[k] != _GDBSIG:
                    j = k
                else:
                    break
            elif free and budget > 0 and self._free_text(j):
                budget -= 1
                j += 1
            else:
                break
        return j

    def _trim(self, start: int, end: int) -> int:
        """Move ``end`` back over trailing blank lines (never before ``start + 1``)."""
        while end > start + 1 and self.cls[end - 1] == _BLANK:
            end -= 1
        return end

    # -- region readers --

    def _traceback(self, i: int) -> _Found:
        """A Python traceback, chained ones included; the message is the last exception."""
        n, cls, nxt = self.n, self.cls, self.nxt
        start = i
        message = -1
        report_text = ""  # the summary of torch elastic's report, when one follows
        ipython = False  # IPython's frames: numbered source lines, "---->" on the current one
        in_group = False  # inside an ExceptionGroup's sub-exceptions
        first_sub = -1  # the first sub-exception's line, once a second one follows
        # The last exception line of an earlier link in a chain: when the paste stops right
        # after "During handling of the above exception ..." and the next traceback's header
        # (vllm-project/vllm#16336), that exception is still the failure, not the last frame.
        earlier = -1
        j = i
        while j < n and cls[j] in (_CODE, _OTHER):  # a cut paste opens on a source line
            j += 1
        while True:
            # header lines (Traceback / chain markers) then frames and source lines
            while j < n and (
                self._header(j) or (cls[j] == _BLANK and nxt[j] < n and self._header(nxt[j]))
            ):
                j += 1
            while j < n:
                c = cls[j]
                if c == _PYFRAME:
                    ipython = ipython or not self._text(j).lstrip().startswith('File "')
                    j += 1
                    # the frame's source line, even when a paste lost its indentation
                    if j < n and cls[j] in (_OTHER, _ERR) and not self._exception_shaped(j):
                        j += 1
                elif c == _CODE or (c == _OTHER and _MARKER_RE.match(self._text(j))):
                    j += 1
                elif c == _OTHER and self._text(j).strip() in _ELISIONS:
                    j += 1  # the poster cut frames out: "..." in place of them
                elif ipython and c in (_OTHER, _ERR) and is_ipython_source(self._text(j)):
                    j += 1  # "----> 3 code" (the arrow marks IPython's current line)
                elif c == _BLANK and nxt[j] < n and cls[nxt[j]] in (_PYFRAME, _CODE):
                    j = nxt[j]
                elif c == _BLANK and nxt[j] < n and j > start and self._exception_shaped(nxt[j]):
                    # frames and the exception line separated by blank lines in a paste
                    j = nxt[j]
                else:
                    break
            if j < n and self._exception_at(j) and not self._cut_fragment(j):
                message = j
                report = self._report(j)
                if report is None:
                    j = self._tail(j + 1, free=True)
                else:
                    j, report_text = report
                if (
                    j < n
                    and cls[j] == _TB
                    and j - 1 > message
                    and _EGROUP_SEP_RE.match(self._text(j - 1)) is not None
                ):
                    # An ExceptionGroup (asyncio/anyio TaskGroup under uvicorn): each
                    # sub-exception follows under a "+---- 1 ----" rule.  The first one is
                    # the failure; the ones after it are usually its cancelled siblings.
                    if in_group and first_sub < 0:
                        first_sub = message
                    in_group = True
                    earlier = message
                    continue
            else:
                message = -1
            k = nxt[j] if j < n else n
            if k < n and cls[k] == _CHAIN:
                if message >= 0:
                    earlier = message
                j = k
                continue
            if message < 0 and k < n and cls[k] == _TB and k - j <= 1 and j > start:
                # "Traceback (most recent call last):" repeated right after a cut one is the
                # next copy, not a continuation: stop here.
                pass
            break
        end = self._trim(start, j)
        has_message = message >= 0
        cut = not has_message
        if first_sub >= 0:
            message, has_message = first_sub, True
        elif not has_message and earlier >= 0:
            message, has_message = earlier, True
        elif not has_message:
            message = self._last_frame(start, end)
        text = report_text or _strip_prefixes(self._text(message))
        if has_message and text.endswith(":") and not report_text:
            # "AssertionError:" alone: the message is on the (unindented) lines below it
            text = self._run_on(text, message + 1, end, bare=_EXC_ONLY_RE.match(text) is not None)
        return _Found(
            "python-traceback",
            start,
            end,
            message,
            text,
            cut or self._cut_at_end(end),
            has_message,
        )

    def _pytest_opens(self, i: int) -> bool:
        """Does line ``i`` (a frame or an error line) belong to a pytest failure?"""
        text = self._text(i)
        if self.cls[i] == _ERR:
            return is_pytest_error(text)
        return ".py:" in text and is_pytest_frame(text.strip())

    def _pytest(self, i: int) -> _Found:
        """A pytest failure, from its header (or a frame or ``E`` line) to where it ends.

        It ends after its closing ``path.py:620: SomeError`` line, before the next header
        or section, or (``--tb=short`` has no closing line) at the first line after the
        ``E`` lines that is not another ``E`` line or blank.
        """
        n = self.n
        stop = min(n, i + _MAX_PYTEST_LINES)
        errors: list[int] = [i] if self.cls[i] == _ERR else []
        closed = ends_failure(self._text(i).strip())
        j = i + 1
        while j < stop and not closed:
            text = self._text(j)
            s = text.strip()
            if is_pytest_header(s) or opens_section(s):
                break
            if is_pytest_error(text):
                errors.append(j)
            elif s and errors and not ends_failure(s):
                break  # past the exception: the failure is over
            closed = ends_failure(s)
            j += 1
        end = self._trim(i, j)
        shaped = [k for k in errors if _EXC_SHAPE_RE.match(_strip_prefixes(self._text(k)))]
        message = (shaped or errors or [end - 1 if closed else i])[0]
        text = _strip_prefixes(self._text(message))
        return _Found("python-traceback", i, end, message, text, self._cut_at_end(end))

    def _header(self, j: int) -> bool:
        """A traceback header, a chain marker, or the dash rule IPython prints above one."""
        c = self.cls[j]
        if c in (_TB, _CHAIN):
            return True
        return (
            c == _OTHER
            and j + 1 < self.n
            and self.cls[j + 1] == _TB
            and _DASH_RULE_RE.match(self._text(j)) is not None
        )

    def _run_on(self, text: str, j: int, end: int, bare: bool = False) -> str:
        """An exception message that ends in a colon, with the indented lines that carry it on.

        FlashInfer: "RuntimeError: Error in function 'aligned_alloc' at allocator.h:49:" and
        "  Buffer overflow when allocating ... but only 413138944 bytes available" below it.
        """
        parts = [text]
        carry = (_CODE, _OTHER, _ERR) if bare else (_CODE,)
        while j < end and len(parts) <= _RUN_ON_LINES and self.cls[j] in carry:
            parts.append(self._text(j).strip())
            j += 1
        return " ".join(parts)[:_MAX_MESSAGE]

    def _report(self, j: int) -> tuple[int, str] | None:
        """torch elastic's failure table under exception line ``j``: its end and summary.

        ``None`` when no report follows (see :mod:`diagnose.elastic_report`).
        """
        if j + 2 >= self.n:
            return None
        head = _strip_prefixes(self._text(j))
        if not opens_report(head, self._text(j + 1), self._text(j + 2)):
            return None
        stop = min(self.n, j + 1 + MAX_REPORT_LINES)
        taken, summary = read_report([self._text(k) for k in range(j + 1, stop)])
        return j + 1 + taken, f"{head.rstrip()} {summary}"

    def _cut_fragment(self, j: int) -> bool:
        """Is line ``j`` the stub of a line the paste cut off ("Runt", "(APIS") at its end?

        Only the input's last line, short and not shaped like an exception, so the traceback
        reads as cut rather than as failing with "Runt".
        """
        if j != self.n - 1:
            return False
        text = _strip_prefixes(self._text(j))
        return len(text) < _FRAGMENT and _EXC_RE.match(text) is None

    def _exception_shaped(self, j: int) -> bool:
        """Does line ``j`` read like ``package.SomeError: text`` rather than source code?"""
        return _EXC_SHAPE_RE.match(self._text(j).lstrip()) is not None

    def _exception_at(self, j: int) -> bool:
        """Is line ``j`` the exception line that ends a traceback?"""
        c = self.cls[j]
        if c in (_ERR, _OTHER, _HINT):
            return True
        # TRT-LLM and c10 messages are sometimes indented by the logger
        return c == _CODE and _EXC_RE.match(self._text(j).lstrip()) is not None

    def _last_frame(self, start: int, end: int) -> int:
        """Index of the last frame line in ``[start, end)`` (the start when none)."""
        for k in range(end - 1, start - 1, -1):
            if self.cls[k] in (_PYFRAME, _FRAME):
                return k
        return start

    def _cut_at_end(self, end: int) -> bool:
        """Does the region run into the end of the input with a visibly cut last line?"""
        if end != self.n:
            return False
        last = self._text(end - 1).rstrip()
        if self.cls[end - 1] in (_FRAME, _PYFRAME, _C10HDR):
            return True
        return last.endswith(("...", "…")) or _unbalanced(last[-_WINDOW:])

    def _faulthandler(self, i: int) -> _Found:
        """``Fatal Python error`` plus the per-thread Python stacks faulthandler prints."""
        n, cls, nxt = self.n, self.cls, self.nxt
        j = i + 1
        while j < n:
            c = cls[j]
            if c in (_PYFRAME, _THREAD, _CODE, _FRAME):
                j += 1
            elif c == _BLANK and nxt[j] < n and cls[nxt[j]] in (_THREAD, _PYFRAME):
                j = nxt[j]
            else:
                break
        end = self._trim(i, j)
        # Without a "Fatal Python error" line, the thread that crashed is the one faulthandler
        # calls current, not the idle thread it happened to print first (a tqdm monitor in
        # flashinfer-ai/flashinfer#4773).
        message = i
        if cls[i] != _FATALPY:
            message = next(
                (k for k in range(i, end) if self._text(k).lstrip().startswith("Current thread")), i
            )
        return _Found(
            "faulthandler",
            i,
            end,
            message,
            _strip_prefixes(self._text(message)),
            self._cut_at_end(end) or cls[i] != _FATALPY,
        )

    def _asan(self, i: int) -> _Found:
        """An ASan/TSan/MSan/LSan report, up to its ``==pid==ABORTING`` line."""
        n, cls, nxt = self.n, self.cls, self.nxt
        j = i + 1
        while j < n:
            c = cls[j]
            if c in (_TB, _TERM, _FATALPY, _ASAN, _CSAN):
                break
            if c == _BLANK:
                k = nxt[j]
                if k < n and self._sanitizer_line(k):
                    j = k
                    continue
                break
            j += 1
            if _ASAN_END_RE.match(self._text(j - 1).lstrip()):
                break
        end = self._trim(i, j)
        return _Found("sanitizer", i, end, i, _strip_prefixes(self._text(i)), self._cut_at_end(end))

    def _sanitizer_line(self, k: int) -> bool:
        """Does line ``k`` continue a sanitizer report after a blank line?"""
        if self.cls[k] in (_FRAME, _CODE):
            return True
        s = self._text(k)
        return s.startswith(("0x", "==", "SUMMARY:", "Shadow", "READ of", "WRITE of")) or (
            s.rstrip().endswith("here:") or "leak of" in s
        )

    def _csan_end(self, i: int) -> int:
        j = i
        while j < self.n and self.cls[j] == _CSAN:
            j += 1
        return j

    def _csan(self, i: int) -> list[_Found]:
        """compute-sanitizer output: one region per reported error inside the block."""
        end = self._csan_end(i)
        heads = [k for k in range(i, end) if _csan_header(self._text(k))]
        out: list[_Found] = []
        for h, head in enumerate(heads):
            first = i if h == 0 else head
            last = heads[h + 1] if h + 1 < len(heads) else end
            out.append(
                _Found(
                    "sanitizer",
                    first,
                    last,
                    head,
                    _strip_prefixes(self._text(head)),
                    self._cut_at_end(last),
                )
            )
        return out

    def _frames(self, i: int) -> _Found:
        """A native frame block (c10, TRT-LLM, glibc, gdb) with no error line before it."""
        n, cls = self.n, self.cls
        j = self._tail(i, free=False)
        j = max(j, i + 1)
        end = self._trim(i, j)
        gdb = False
        message = -1
        for k in range(i, min(end, i + 64)):
            c = cls[k]
            if c == _GDBSIG and message < 0:
                message = k
                gdb = True
            elif c == _FRAME and self._text(k).lstrip().startswith("#"):
                gdb = True
        if message < 0:
            message = i
            for k in range(i, min(end, i + 64)):
                if cls[k] in (_C10HDR, _FRAME):
                    message = k
                    break
        kind = "gdb-backtrace" if gdb else "cpp-backtrace"
        truncated = self._cut_at_end(end) or (end == n and cls[end - 1] == _FRAME)
        return _Found(kind, i, end, message, _strip_prefixes(self._text(message)), truncated)

    def _error_block(self, i: int) -> _Found:
        """Adjacent error lines (and their native backtrace) that report one failure."""
        report = self._report(i)
        if report is not None:  # a paste that starts at ChildFailedError and its table
            end, text = report
            return _Found("error-line", i, end, i, text, self._cut_at_end(end))
        n, cls = self.n, self.cls
        members = [i]
        seen = {_mask(_strip_prefixes(self._text(i)))} if cls[i] == _ERR else set()
        has_term = cls[i] == _TERM
        budget = _MAX_MESSAGE_LINES
        j = i + 1
        while j < n:
            c = cls[j]
            if c in (_ERR, _TERM, _WHAT):
                # A second "terminate called" is another failure, except libstdc++'s
                # "terminate called recursively" (a second thread threw meanwhile).
                if c == _TERM and has_term and "recursively" not in self._text(j):
                    break
                if c == _ERR:
                    sig = _mask(_strip_prefixes(self._text(j)))
                    if sig in seen:  # the same line again: the next copy, not this failure
                        break
                    seen.add(sig)
                has_term = has_term or c == _TERM
                members.append(j)
                j += 1
            elif c == _OTHER and self._new_level(i, j):
                break  # another record of its logger, at another level: not this message
            elif c in (_CODE, _HINT) or (c == _OTHER and self._bridges(j)):
                j += 1
            elif c == _OTHER and budget > 0 and self._continues(j):
                budget -= 1
                j += 1
            else:
                break
        j = self._tail(j, free=False)
        end = self._trim(i, j)
        kind, message, text = self._error_message(i, end, members)
        if text.endswith(":") and "panicked at " in text and message + 1 < end:
            # Rust 1.73+: "thread 'main' panicked at src/core.rs:264:80:" and the payload
            # ("called `Result::unwrap()` on an `Err` value: DriverError(...)") on the next line.
            message += 1
            text = _strip_prefixes(self._text(message))
        elif text.endswith(":"):
            text = self._run_on(text, message + 1, end)
        elif message + 1 < end and _EXC_RE.fullmatch(text):
            # An exception printed without its message, the message on the next line:
            # "triton.compiler.errors.CompilationError" then "AssertionError('Mismatched
            # type ...')" (sgl-project/sglang#23739).
            below = _strip_prefixes(self._text(message + 1)).strip()
            if below:
                text = f"{text}: {below}"
        return _Found(kind, i, end, message, text, self._cut_at_end(end))

    def _new_level(self, i: int, j: int) -> bool:
        """Line ``j`` is a record its logger's prefix gave a level other than line ``i``'s.

        A healthy server's "INFO ... [metrics.py:455] Avg prompt throughput: 11609.8
        tokens/s" reads like a continuation ("name: number") of a WARNING above it once
        the prefixes are gone (held-out round 6's warning, buried in a big log).
        """
        level = self.lines[j].level
        return level is not None and level != self.lines[i].level

    def _continues(self, j: int) -> bool:
        """An unindented line that carries on the error message above it (see ``_CONTINUATION_RE``).

        A new log record or a new exception line is never a continuation.
        """
        s = self._text(j).lstrip()
        if _RECORD_RE.match(s) or _EXC_RE.match(s):
            return False
        return _CONTINUATION_RE.match(s) is not None or _TACTIC_RE.match(s) is not None

    def _bridges(self, j: int) -> bool:
        """A plain line between two error lines of one report (``current device: 0 ...``)."""
        n, cls = self.n, self.cls
        if _RECORD_RE.match(self._text(j)):
            return False
        for k in (j + 1, j + 2):
            if k >= n or cls[k] == _BLANK:
                return False
            if cls[k] in (_ERR, _TERM, _WHAT, _HINT, _C10HDR, _FRAME):
                return True
        return False

    def _error_message(self, start: int, end: int, members: list[int]) -> tuple[str, int, str]:
        """Pick the kind and the most informative line of an error block."""
        whats = [k for k in members if self.cls[k] == _WHAT]
        if whats or any(self.cls[k] == _TERM for k in members):
            k = whats[0] if whats else members[0]
            return "cpp-terminate", k, _strip_prefixes(self._text(k))
        best, best_kind, best_weight = members[0], "error-line", -1
        for k in members:
            hit = _vocab(self._text(k))
            if hit is None:
                continue
            weight = hit[1] * 2 + (1 if _EXC_RE.match(_strip_prefixes(self._text(k))) else 0)
            if weight > best_weight:
                best, best_kind, best_weight = k, hit[0], weight
        if best_kind not in _STRUCTURED_KINDS:
            has_frames = any(self.cls[k] == _FRAME for k in range(start, min(end, start + 4096)))
            best_kind = "cpp-backtrace" if has_frames else "error-line"
        return best_kind, best, _strip_prefixes(self._text(best))


def _csan_header(text: str) -> bool:
    """A compute-sanitizer line that starts one error report (``========= Invalid ...``)."""
    body = text.lstrip()[9:]
    if not body.startswith(" ") or body.startswith("  ") or not body.strip():
        return False
    head = body.strip()
    return not head.startswith(("COMPUTE-SANITIZER", "ERROR SUMMARY", "LEAK SUMMARY", "Target"))


def _unbalanced(text: str) -> bool:
    """True when brackets or quotes in ``text`` are left open (a line cut by the paste)."""
    depth = 0
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}" and depth:
            depth -= 1
    return depth > 0 or text.count('"') % 2 == 1 or text.count("`") % 2 == 1


# --- streams, frames and merging -------------------------------------------------------------


def _streams(lines: Sequence[LogLine]) -> list[list[LogLine]]:
    """Split ``lines`` by rank; an unprefixed line stays with the stream before it."""
    by_key: dict[str | None, list[LogLine]] = {}
    key: str | None = None
    for line in lines:
        if line.rank is not None:
            key = line.rank
        by_key.setdefault(key, []).append(line)
    return list(by_key.values())


def _frame_parser() -> _FrameParser:
    """Return :func:`diagnose.frames.dialects.parse_frame`, imported only when needed."""
    from diagnose.frames.dialects import parse_frame

    return parse_frame


def _frames_of(
    body: Sequence[LogLine], classes: Sequence[int], parse: _FrameParser
) -> tuple[Frame, ...]:
    """Parse the frame lines of ``body`` (at most ``_MAX_FRAMES``)."""
    out: list[Frame] = []
    numberless = -1  # index in out of an IPython 7 frame still waiting for its line number
    last_def: str | None = None  # pytest shows a frame's code (its `def`) before its location
    for line, c in zip(body, classes, strict=True):
        if numberless >= 0 and c != _PYFRAME:
            number = arrow_line(line.text)
            if number is not None:
                out[numberless] = replace(out[numberless], line=number)
                numberless = -1
        if c != _PYFRAME and "def " in line.text and (d := _DEF_RE.match(line.text)):
            last_def = d.group(1)
        if c in (_PYFRAME, _FRAME, _CSAN):
            if c == _CSAN:
                line = LogLine(line.number, line.text.lstrip()[9:].strip(), line.rank, line.level)
            try:
                frame = parse(line)
            except Exception:  # a contract breach must not lose the region
                frame = None
            if frame is not None:
                if c == _PYFRAME and frame.function is None and last_def is not None:
                    # pytest's "tests/test_x.py:41:" and "x.py:620: OutOfResources" name no
                    # function; the `def` line of the code shown above them does.
                    frame = replace(frame, function=last_def, symbol=last_def)
                last_def = None
                numberless = len(out) if c == _PYFRAME and frame.line is None else -1
                out.append(frame)
                if len(out) >= _MAX_FRAMES:
                    break
    return tuple(out)


def _signature(
    message: str, frames: Sequence[Frame], body: Sequence[LogLine], classes: Sequence[int]
) -> tuple[str, ...]:
    """What makes two copies the same failure: masked message plus frame functions."""
    parts = [_mask(message)]
    if frames:
        parts.extend(_mask(f.function or f.symbol or "") for f in frames[:_SIGNATURE_FRAMES])
    else:
        taken = 0
        for line, c in zip(body, classes, strict=True):
            if c in (_PYFRAME, _FRAME):
                parts.append(_mask(line.text.strip()))
                taken += 1
                if taken >= _SIGNATURE_FRAMES:
                    break
    return tuple(parts)


def _rank_key(rank: str) -> tuple[int, int, str]:
    digits = re.sub(r"\D", "", rank)
    return (0, int(digits), rank) if digits and len(digits) < 18 else (1, 0, rank)


@record(frozen=False)
class _Merged:
    """A region being built: the first copy plus the copies merged into it."""

    region: Region
    count: int
    ranks: dict[str, None]


#: Tells, for many line texts at once, which carry a known failure's wording (the rule
#: base's, see ``diagnose.rules.wording``): such a line is an error line too.
Wording = Callable[[Sequence[str]], list[bool]]


def find_regions(lines: Sequence[LogLine], wording: Wording | None = None) -> list[Region]:
    """Return one :class:`Region` per distinct failure in ``lines``, in order of appearance.

    ``lines`` is the output of ``diagnose.ingest.normalize.normalize``.  Copies of the same
    failure (several ranks, or one error repeated) become one region with ``count`` and
    ``ranks``.  ``wording`` adds error lines beyond this module's own vocabulary: a plain
    line (not indented, not prose) on which it answers True opens a region.  Never raises;
    runs in time linear in the input.
    """
    try:
        return _find_regions(lines, wording)
    except (RecursionError, MemoryError, ValueError, IndexError):  # pragma: no cover - guard
        return []


def _with_wording(texts: Sequence[str], classes: list[int], wording: Wording) -> None:
    """Promote plain lines that carry a known failure's wording to error lines (in place)."""
    plain = [i for i, c in enumerate(classes) if c == _OTHER]
    if not plain:
        return
    for i, hit in zip(plain, wording([texts[i] for i in plain]), strict=True):
        if hit and not _is_prose(texts[i][:_WINDOW].strip()):
            classes[i] = _ERR


#: Distinct lines whose class is remembered within one call: a flood repeats one line
#: thousands of times (a 1 MiB paste of one NCCL warning took 1 s to classify line by line).
_CLASS_MEMO = 4096


def _classes(lines: Sequence[LogLine], flags: Sequence[bool]) -> list[int]:
    """Each line's class; identical lines are classified once (the class is a function of
    the text and its literal flag alone)."""
    memo: dict[tuple[str, bool], int] = {}
    out: list[int] = []
    for line, flag in zip(lines, flags, strict=True):
        key = (line.text, flag)
        c = memo.get(key)
        if c is None:
            c = _classify(line.text, flag)
            if len(memo) < _CLASS_MEMO:
                memo[key] = c
        out.append(c)
    return out


def _find_regions(lines: Sequence[LogLine], wording: Wording | None = None) -> list[Region]:
    parse = _frame_parser()
    merged: dict[tuple[str, ...], _Merged] = {}
    # A frameless line that repeats an earlier failure's message (pytest's "FAILED x - msg"
    # summary, a logger echoing the exception) is one more copy of it, not a new failure.
    by_message: dict[str, _Merged] = {}
    for stream_lines in _streams(lines):
        flags = _literal_lines([line.text for line in stream_lines])
        classes = _classes(stream_lines, flags)
        if wording is not None:
            _with_wording([line.text for line in stream_lines], classes, wording)
        stream = _Stream(stream_lines, classes)
        for found in stream.regions():
            body = stream_lines[found.start : found.end]
            body_cls = classes[found.start : found.end]
            frames = _frames_of(body, body_cls, parse)
            sig = _signature(found.message_text, frames, body, body_cls)
            ranks = _ranks_of(body, found.message_text)
            entry = merged.get(sig)
            if entry is None and not frames:
                entry = by_message.get(sig[0])
            if entry is not None:
                entry.count += 1
                entry.ranks.update(dict.fromkeys(ranks))
                continue
            region = Region(
                kind=found.kind,
                lines=(body[0].number, body[-1].number),
                message=found.message_text,
                message_line=stream_lines[found.message].number,
                body=tuple(body),
                frames=frames,
                truncated=found.truncated,
            )
            merged[sig] = _Merged(region, 1, dict.fromkeys(ranks))
            by_message.setdefault(sig[0], merged[sig])
    out: list[Region] = []
    for entry in merged.values():
        ranks = tuple(sorted(entry.ranks, key=_rank_key))
        r = entry.region
        out.append(
            Region(
                kind=r.kind,
                lines=r.lines,
                message=r.message,
                message_line=r.message_line,
                body=r.body,
                frames=r.frames,
                count=entry.count,
                ranks=ranks,
                truncated=r.truncated,
            )
        )
    out.sort(key=lambda r: (r.lines[0], r.message_line))
    return out


def merge_repeats(regions: Iterable[Region]) -> list[Region]:
    """Regions of separate windows of one log, with repeats of the same failure merged.

    A loaded server prints the same warning or error hundreds of thousands of times, in
    windows far apart; each window's copies are merged by :func:`find_regions`, and this
    merges them across windows by the same signature (masked message and frame functions):
    the first copy is kept, with the total ``count``, every rank and the last copy's last
    line.  Rule matching then runs once per distinct failure instead of once per window.
    """
    merged: dict[tuple[str, ...], Region] = {}
    for r in regions:
        # The body's frame lines already went into the frames; no classes are needed here.
        key = (r.kind, *_signature(r.message, r.frames, (), ()))
        first = merged.get(key)
        if first is None:
            merged[key] = r
            continue
        ranks = dict.fromkeys((*first.ranks, *r.ranks))
        merged[key] = replace(
            first,
            count=first.count + r.count,
            ranks=tuple(sorted(ranks, key=_rank_key)),
            last_line=max(first.last_line, r.last_line or r.lines[1]),
        )
    return sorted(merged.values(), key=lambda r: (r.lines[0], r.message_line))


def _ranks_of(body: Sequence[LogLine], message: str) -> tuple[str, ...]:
    """The rank a copy came from: its lines' rank prefix, else a ``[Rank N]`` in the message."""
    for line in body:
        if line.rank is not None:
            return (line.rank,)
    m = _RANK_TEXT_RE.search(message)
    return (m.group(1),) if m else ()
