"""Undo what terminals, log shippers and chat clients do to a crash log, line by line.

A log reaches us wrapped in layers, outermost first: chat quoting (``> ``), markdown
fences and ``<details>`` HTML, entity escaping, log-shipper prefixes (docker, k8s,
journald, mpirun), process prefixes (vLLM/Ray workers, sglang ranks), logger prefixes
(vLLM, glog), and terminal damage (ANSI colour, ``\\r`` progress bars, backspaces).
Sometimes the newlines themselves are gone (a whole traceback, or a run of worker-prefixed
records, pasted on one line) or a long frame was hard-wrapped at the terminal width (a
common width, or one the text shows by its own cut lines).  :func:`normalize` peels the
layers off and returns :class:`~diagnose.model.LogLine` objects that keep the ORIGINAL
1-based line number and the rank/process the prefix named.

Everything here is linear time: each regex is anchored or literal-led, and runs only
after a cheap literal check says it can match.  Content that merely looks like a prefix
(``[TensorRT-LLM][ERROR]``, ``RuntimeError:`` at the start of a line) is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from diagnose.ingest.normalize.clean import HOST_LABEL, JSON_TEXT_KEYS, WRAP_WIDTHS, Clean, clean
from diagnose.ingest.normalize.markup import QUOTE_MARK, Fence
from diagnose.ingest.normalize.pastes import MIN_PASTE_LEN, split_pasted, split_prefixed
from diagnose.ingest.normalize.wraps import (
    LONG_RECORD,
    MAX_JOINED_LINES,
    MIN_INFERRED_WIDTH,
    continues,
    infer_wraps,
    is_cut_frame,
    is_hard_cut,
    join_wrapped,
    long_record_cut,
    open_call_at_end,
    open_quote_at_end,
)
from diagnose.model import LogLine

__all__ = [
    "BLANK_RUN_KEPT",
    "HOST_LABEL",
    "JSON_TEXT_KEYS",
    "MAX_JOINED_LINES",
    "MIN_INFERRED_WIDTH",
    "QUOTE_MARK",
    "WRAP_WIDTHS",
    "normalize",
    "normalize_lines",
    "split_lines",
]


def split_lines(text: str, cr_endings: bool = True) -> list[str]:
    """Split text into physical lines the way an editor numbers them.

    Lines end at ``\\n`` (CRLF's ``\\r`` stays for :func:`normalize` to drop).  With
    ``cr_endings``, a text holding ``\\r`` but no ``\\n`` at all is taken to use old Mac
    CR-only endings.  Unlike :meth:`str.splitlines`, form feeds and Unicode separators do
    not end lines, so numbers match what the user's editor shows.
    """
    if not text:
        return []
    sep = "\r" if cr_endings and "\n" not in text and "\r" in text else "\n"
    lines = text.split(sep)
    if lines[-1] == "":
        lines.pop()
    return lines


#: Empty lines kept of a run: enough for every "more than two blank lines" boundary (the
#: scan's window end, a paragraph break), so what follows reads the same.
BLANK_RUN_KEPT = 3


def _thin_blank_runs(lines: Iterable[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """``lines`` with each run of empty lines cut to :data:`BLANK_RUN_KEPT`.

    A damaged archive or a zero-filled file after a crash reads as hundreds of thousands of
    empty lines (NULs are dropped); each cost a pass of the whole per-line pipeline, 4 s for
    1.4 million (a 517-byte bz2 in the fuzz campaign).  The lines kept keep their numbers.
    """
    run = 0
    for pair in lines:
        if pair[1]:
            run = 0
        else:
            run += 1
            if run > BLANK_RUN_KEPT:
                continue
        yield pair


def normalize_lines(lines: Iterable[tuple[int, str]]) -> Iterator[LogLine]:
    """Stream-normalise ``(original line number, raw line)`` pairs into :class:`LogLine`.

    Same per-line code as :func:`normalize`; holds a window of lines back while it weighs
    whether their width is a terminal's (:func:`infer_wraps`), and one cut frame while it
    waits for the line that may continue it.  Never raises on any text.
    """
    fence = Fence()
    labels: set[str] = set()
    held: Clean | None = None
    cleaned = (clean(number, raw, fence, labels) for number, raw in _thin_blank_runs(lines))
    for line in infer_wraps(cleaned, labels):
        if held is not None:
            if continues(held, line):
                held = join_wrapped(held, line)
                continue
            yield from _emit(held)
            held = None
        if (
            is_cut_frame(line)
            or is_hard_cut(line)
            or open_quote_at_end(line.text)
            or open_call_at_end(line.text)
            or long_record_cut(line)
            or (len(line.text) >= LONG_RECORD and line.text[-1:].islower())
        ):
            held = line
        else:
            yield from _emit(line)
    if held is not None:
        yield from _emit(held)


def _emit(line: Clean) -> list[LogLine]:
    if len(line.text) < MIN_PASTE_LEN:
        return [LogLine(line.number, line.text, line.rank, line.level, line.prefixed)]
    # Literal prefilter inline (one scan, no call) for the common line: without "pid=" twice
    # there is no repeated worker prefix.  A mid-line prefix must name its pid; the ip=-only
    # Ray form is left to the line-start stripper.
    text = line.text
    first = text.find("pid=")
    twice = first >= 0 and (
        text.find("pid=", first + 4) >= 0 or (line.rank is not None and line.rank in text)
    )
    prefixed = split_prefixed(text, line.rank) if twice else None
    # A re-joined frame is not split at markers again: its pieces would come from later
    # lines.  A repeated worker prefix still splits (a flattened paste cut inside a word).
    whole = line.joined > 1
    if prefixed is None:
        if whole:
            return [LogLine(line.number, text, line.rank, line.level, line.prefixed)]
        return [
            LogLine(line.number, piece, line.rank, line.level, line.prefixed)
            for piece in split_pasted(text)
        ]
    # A piece may itself hold a collapsed traceback; its pieces share the prefix's rank.
    return [
        LogLine(line.number, part, rank or line.rank, line.level, line.prefixed)
        for piece, rank in prefixed
        for part in ([piece] if whole else split_pasted(piece))
    ]


def normalize(text: str, first_line: int = 1) -> list[LogLine]:
    """Normalise a whole log: one :class:`LogLine` per physical line, minus joins plus splits.

    ``first_line`` is the original number of the first line (when ``text`` is a window
    cut from a bigger file).  A window's lines were already split by the reader, so
    CR-only endings are only recognised in a whole text (``first_line == 1``): in a
    window, a lone ``\\r`` is always a progress-bar overwrite.

    Fence and ``<details>`` lines become empty lines; a frame hard-wrapped over several
    lines becomes one line numbered after its first; a one-line paste becomes several
    lines sharing its number.  Pure; never raises.
    """
    lines = split_lines(text, cr_endings=first_line == 1)
    return list(normalize_lines(enumerate(lines, first_line)))
