"""A region's message without logger prefixes, and the signature that merges its copies."""

from __future__ import annotations

from collections.abc import Sequence

from diagnose.lazyre import lazy
from diagnose.model import Frame, LogLine
from diagnose.regions.lines import FRAME, MAX_MESSAGE, PYFRAME, SIGNATURE_FRAMES
from diagnose.regions.prose import PROSE_FIRST_PERSON_RE
from diagnose.signature import mask

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
RANK_TEXT_RE = lazy(r"\[(?:PG [^\]]*?)?Rank (\d+)\]")


def strip_prefixes(text: str) -> str:
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
        "\uff1a" in lead.group(0) or PROSE_FIRST_PERSON_RE.search(lead.group(0)) is not None
    ):
        out = out[lead.end() :]  # "I ran it and got this error: RuntimeError: ..."
    return out[:MAX_MESSAGE]


def signature(
    message: str, frames: Sequence[Frame], body: Sequence[LogLine], classes: Sequence[int]
) -> tuple[str, ...]:
    """What makes two copies the same failure: the masked message plus frame functions, masked
    the way every crash identity is (:func:`diagnose.signature.mask`)."""
    parts = [mask(message)]
    if frames:
        parts.extend(mask(f.function or f.symbol or "") for f in frames[:SIGNATURE_FRAMES])
    else:
        taken = 0
        for line, c in zip(body, classes, strict=True):
            if c in (PYFRAME, FRAME):
                parts.append(mask(line.text.strip()))
                taken += 1
                if taken >= SIGNATURE_FRAMES:
                    break
    return tuple(parts)
