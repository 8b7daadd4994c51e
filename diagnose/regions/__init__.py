"""Find each distinct failure in a normalised log and group the lines that belong to it.

:func:`find_regions` turns the :class:`~diagnose.model.LogLine` sequence made by
``diagnose.ingest.normalize.normalize`` into :class:`~diagnose.model.Region` objects, one per
distinct failure, in the order the failures first appear.

How it works, in one linear pass per stage:

1. Every line gets a class from cheap literal tests (``classify``): traceback header, Python
   frame, C++ frame of any dialect, ``what():``, error vocabulary, blank, ...  Only the first
   ``WINDOW`` characters of a line are looked at, so a megabyte-long template name costs no
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

from diagnose.model import LogLine, Region
from diagnose.records import record
from diagnose.regions.lines import ERR, OTHER, WINDOW, classify, literal_lines
from diagnose.regions.messages import RANK_TEXT_RE, signature
from diagnose.regions.prose import is_prose
from diagnose.regions.walk import Stream, frame_parser, frames_of

__all__ = ["REGION_KINDS", "Wording", "find_regions", "merge_repeats"]

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
    plain = [i for i, c in enumerate(classes) if c == OTHER]
    if not plain:
        return
    for i, hit in zip(plain, wording([texts[i] for i in plain]), strict=True):
        if hit and not is_prose(texts[i][:WINDOW].strip()):
            classes[i] = ERR


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
            c = classify(line.text, flag)
            if len(memo) < _CLASS_MEMO:
                memo[key] = c
        out.append(c)
    return out


def _find_regions(lines: Sequence[LogLine], wording: Wording | None = None) -> list[Region]:
    parse = frame_parser()
    merged: dict[tuple[str, ...], _Merged] = {}
    # A frameless line that repeats an earlier failure's message (pytest's "FAILED x - msg"
    # summary, a logger echoing the exception) is one more copy of it, not a new failure.
    by_message: dict[str, _Merged] = {}
    for stream_lines in _streams(lines):
        flags = literal_lines([line.text for line in stream_lines])
        classes = _classes(stream_lines, flags)
        if wording is not None:
            _with_wording([line.text for line in stream_lines], classes, wording)
        stream = Stream(stream_lines, classes)
        for found in stream.regions():
            body = stream_lines[found.start : found.end]
            body_cls = classes[found.start : found.end]
            frames = frames_of(body, body_cls, parse)
            sig = signature(found.message_text, frames, body, body_cls)
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
        key = (r.kind, *signature(r.message, r.frames, (), ()))
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
    m = RANK_TEXT_RE.search(message)
    return (m.group(1),) if m else ()
