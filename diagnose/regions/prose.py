"""Tell a person's sentences about an error from the error's own lines (issue threads, chats)."""

from __future__ import annotations

from diagnose.lazyre import lazy

# A line that begins a new log record: a timestamp, a level word, a glog header or a
# bracketed tag.  Free text after an exception line stops at one.
RECORD_RE = lazy(
    r"\[?\d{4}[-/]\d\d[-/]\d\d|\[?\d\d[-/]\d\d[-/ ]\d\d|\[?\d\d:\d\d:\d\d"
    r"|(?:INFO|WARNING|WARN|DEBUG|ERROR|CRITICAL|FATAL|TRACE)\b|[IWEF]\d{4} \d\d:"
    r"|\[[A-Za-z][^\]]{0,40}\]"
)

# A chat paste mixes the log with the poster's own sentences ("I get a CUDA out of memory error
# when I run it", "Has anyone seen `illegal memory access` before?").  Such a sentence names an
# error without being one, so it must not open a region.  A line counts as prose only when it
# has a sentence signal (first person singular, a question opener, a final "?") AND none of
# the marks of a logged error: an exception class, an error code, a "Label:" head, a qualified
# "module.Name:".  Ambiguous lines stay error lines: a missed region costs more than a spare one.
PROSE_FIRST_PERSON_RE = lazy(r"\b(?:I(?![/\w])|I'(?:m|ve|d|ll)|[Mm]y|me)\b")
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

# The error quoted inside the sentence that introduces it: 'Here is the exact error I get when
# it crashes: "Processing Prompt [BLAS] (3584 / 5525 tokens)CUDA error: out of memory' (a
# koboldcpp thread, round 225). What follows the colon and the quote mark is the log's own
# text, so the line is not only a person's sentence.
_QUOTED_ERROR_RE = lazy(
    r"[:\uff1a]\s*[\"'`\u201c][^\"'`\u201d]{0,200}?"
    r"(?:\b(?:[Ee]rror|ERROR|[Ee]xception|FAILED|[Ff]ailed|[Ff]ailure)\b|out of memory"
    r"|[a-z](?:Error|Exception)\b)"
)


def is_prose(s: str) -> bool:
    """Does the stripped line ``s`` read as a person's sentence rather than a logged error?"""
    if s.startswith(("...", "\u2026")) and s.endswith(("...", "\u2026")):
        return True  # what a poster wrote in place of cut lines: "... (many NCCL errors) ..."
    if len(s) <= 16 and _HEADING_RE.match(s):
        return True  # a heading over the paste: "error:", "Error log:", "Errors"
    if s[0] == "#" and _MD_HEADING_RE.match(s):
        return True  # "### Originating CUDA error (all 8 TP ranks)": the poster's heading
    if RECORD_RE.match(s) or s[0] in "[(<{#=|" or _LOGGED_ERROR_RE.search(s):
        return False
    if _QUOTED_ERROR_RE.search(s):
        return False  # a sentence that quotes the error: the quote is the log's text
    return (
        PROSE_FIRST_PERSON_RE.search(s) is not None
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


STRUCTURED_KINDS = frozenset(
    {"trtllm-error", "nvshmem-error", "triton-error", "nccl-error", "cuda-error", "sanitizer"}
)
