"""A traceback or a run of worker records pasted on one line, split back into lines."""

from __future__ import annotations

from diagnose.ingest.normalize.prefixes import WORKER_NAME, Ident, strip_prefixes
from diagnose.lazyre import lazy

NEW_RECORD = lazy(
    r"(?:Traceback \(|During handling|The above exception|terminate called|\[TensorRT-LLM\]"
    r"|(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt)\b"
    r"|\S+:\d+:\d*:? ?(?:error|warning|note):"
    # uvicorn's "ERROR:    Exception in ASGI application", "INFO:     127.0.0.1:5 - ..."
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):\s"
    # logfmt records (Go's slog, so Ollama): "time=2025-11-26T08:00:04.513Z level=ERROR ...";
    # the record above ending at a terminal width had swallowed it (ollama/ollama#13250)
    r"|time=\d{4}-\d\d-\d\d[T ]|level=[A-Za-z]+ "
    # A compiler driver's own diagnostic: "nvcc fatal   : Unsupported gpu architecture
    # 'compute_N'" after an nvcc command line that filled the terminal (round 386).
    r"|(?:nvcc|ptxas|nvlink|clang\+\+|clang|g\+\+|gcc|cc1plus|collect2|hipcc) ?(?:fatal|error)\s*:"
    # Triton's PTXASError: "triton.runtime.errors.PTXASError: PTXAS error: Internal Triton
    # PTX codegen error" is exactly 80 columns, and its next line is this heading.
    r"|`ptxas` stderr:)"
)


# Strong markers: a line holding them mid-line is a collapsed multi-line paste.
SPLIT_STRONG = lazy(
    r"Traceback \(most recent call last\):"
    r"|(?<![\w\"])File \"[^\"\n]{1,4096}\", line \d+"
    r"|(?<![\w#])frame #\d{1,7}: "
    r"|(?<![\w#])#\d{1,7} +0x[0-9a-fA-F]{4,} in "
    r"|(?<=\s)\d{1,3} +0x[0-9a-fA-F]{8,16} "
    r"|terminate called "
)
# Weak markers: split there too, but only in a line the strong markers already qualify.
_SPLIT_WEAK = lazy(
    r"\[TensorRT-LLM\]"
    r"|(?<=\s)(?:[A-Za-z_]\w{0,80}\.){0,8}[A-Z]\w{0,80}(?:Error|Exception)(?=: |:$|$)"
    r"|(?<=\s)what\(\): "
    r"|(?<=\s)Exception raised from "
)


def may_hold_marker(text: str) -> bool:
    """Literal prefilter (plain ``in`` beats a regex alternation): no strong marker without."""
    return (
        " 0x" in text
        or 'File "' in text
        or "frame #" in text
        or "Traceback (" in text
        or "terminate called" in text
    )


_ESCAPED_NEWLINE = lazy(r"(?<!\\)\\n")
_BARE_MARKER = lazy(r"what\(\):|\[TensorRT-LLM\](?:\[\w{1,16}\])?")
_PY_CODE_AFTER_FRAME = lazy(r'(File "[^"]*", line \d+, in \S+) +(\S.*)')
MIN_PASTE_LEN = 60


def _continued_at_tag(head: str) -> bool:
    """The text before a ``[TensorRT-LLM]`` tag ends a message that the tag continues."""
    return head.endswith(":") and not head.endswith("what():")


def split_pasted(text: str) -> list[str]:
    """Split a whole traceback that lost its newlines back into lines (same line number)."""
    if len(text) < MIN_PASTE_LEN:
        return [text]
    if text.count("```") >= 2:
        # A chat message that lost its newlines but kept its code fences: "I get ```
        # Cannot access gated repo ... ```" - the fenced part is the log, not the prose.
        fenced = [piece.strip() for piece in text.split("```")]
        lines = [line for piece in fenced if piece for line in split_pasted(piece)]
        return lines or [text]
    if not may_hold_marker(text):
        return [text]
    if text.count("\\n") >= 2:
        # A trace posted as one escaped string, its newlines written out as "\n" (a repr,
        # a JSON value copied by hand): "...tllmBuffers.h:125)\n1       0x7f45c6d96865 void
        # tensorrt_llm::common::check<cudaError>..." (NVIDIA/TensorRT-LLM#2857).
        escaped = _ESCAPED_NEWLINE.split(text)
        # (A blank in front: some markers must follow whitespace.)
        if sum(SPLIT_STRONG.match(" " + part.strip(), 1) is not None for part in escaped) >= 2:
            return [line for part in escaped if part.strip() for line in split_pasted(part)]
    body = text.lstrip()
    offset = len(text) - len(body)
    strong = [m.start() for m in SPLIT_STRONG.finditer(body)]
    mid_strong = [p for p in strong if p > 0]
    if not mid_strong:
        return [text]
    # Not at a tag that continues a message ending in ":": TensorRT-LLM nests the caught
    # exception's own text, "Encountered an error in forward function: [TensorRT-LLM][ERROR]
    # Assertion failed: ..." (NVIDIA/TensorRT-LLM#699).
    weak = [
        m.start()
        for m in _SPLIT_WEAK.finditer(body)
        if not (m.group().startswith("[") and _continued_at_tag(body[: m.start()].rstrip()))
    ]
    starts_with_marker = (strong and strong[0] == 0) or (weak and weak[0] == 0)
    if len(mid_strong) + len([p for p in weak if p > 0]) < 2 and not starts_with_marker:
        return [text]
    cuts = sorted({0, *mid_strong, *(p for p in weak if p > 0)})
    pieces: list[str] = []
    carry = ""
    for start, end in zip(cuts, [*cuts[1:], len(body)], strict=True):
        piece = carry + body[start:end].strip()
        carry = ""
        if _BARE_MARKER.fullmatch(piece):
            # "what():  [TensorRT-LLM][ERROR] Assertion failed" is one line, not three.
            carry = piece + " "
            continue
        if not piece:
            continue
        if piece.startswith('File "'):
            code = _PY_CODE_AFTER_FRAME.fullmatch(piece)
            if code:
                pieces += ["  " + code.group(1), "    " + code.group(2)]
                continue
            piece = "  " + piece
        pieces.append(piece)
    if carry:
        pieces.append(carry.rstrip())
    if pieces and offset:
        pieces[0] = text[:offset] + pieces[0]
    return pieces


# A process prefix repeated mid-line: a prefixed log (vLLM/Ray workers) that lost its
# newlines, e.g. copied from a rendered page (vllm-project/vllm-ascend#1617), where every
# "(VllmWorkerProcess pid=N) ERROR MM-DD hh:mm:ss [file.py:N]" once started a line.  Same
# shape as _WORKER, but only after whitespace: a prefix is never glued to a word.  Linear:
# literal-led, and every repeated part is bounded and ends at a character it cannot contain.
_MID_WORKER = lazy(
    rf"(?<=\s)\((?:{WORKER_NAME})?(?:,? ?(?:rank|pid|ip|node|node_id|repr)"
    r"=[\w.:/-]{1,64})+\) "
)
_FRAME_TAIL = lazy(r'\.py", line \d+, in [\w<>.]+$')


def split_prefixed(text: str, rank: str | None = None) -> list[tuple[str, str | None]] | None:
    """Split a line holding one process prefix twice or more mid-line; None when it does not.

    The caller has checked that ``pid=`` occurs twice (the literal prefilter).

    Each piece loses its prefixes the way a whole line would (worker, then logger), and
    keeps the rank they name.  One mention of a worker ("restarting (Worker pid=7)") or two
    different workers on one line is a message, not a collapsed log: the very same prefix
    text must recur.  Frames and the code under them are indented as
    :func:`split_pasted` does, so the traceback reads as one.
    """
    found = [m for m in _MID_WORKER.finditer(text) if "pid=" in m[0]]
    # The line's own prefix, already stripped, recurring once mid-line counts as twice.
    again = rank is not None and len(found) == 1 and rank in found[0][0]
    if not again and (len(found) < 2 or len({m[0] for m in found}) == len(found)):
        return None
    pieces: list[tuple[str, str | None]] = []
    head = text[: found[0].start()].rstrip()
    if head:
        pieces.append((head, None))
    # The head may be the tail of a frame whose start is on the line before ('...py", line 9,
    # in f'): the code under it is indented like any frame's.
    after_frame = head.lstrip().startswith('File "') or _FRAME_TAIL.search(head) is not None
    ends = [m.start() for m in found[1:]] + [len(text)]
    for match, end in zip(found, ends, strict=True):
        ident = Ident()
        body, _ = strip_prefixes(text[match.start() : end].strip(), ident)
        lead = body.lstrip()
        if not lead:
            continue
        if lead.startswith('File "'):
            body, after_frame = "  " + lead, True
        elif after_frame and NEW_RECORD.match(lead) is None:
            body, after_frame = "    " + lead, False
        else:
            after_frame = False
        pieces.append((body, ident.value))
    return pieces
