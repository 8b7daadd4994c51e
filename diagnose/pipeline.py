"""The parse stage: from input to normalised lines, crash regions and log-wide context.

Small inputs (a chat paste, a CI log) are read whole, normalised and searched.
Big files are streamed through the literal prefilter in :mod:`diagnose.ingest.scan`
so only the windows around candidate lines are ever decoded and normalised,
keeping memory bounded however large the log is.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, BinaryIO

from diagnose.context import LogContext, extract_context
from diagnose.ingest.normalize import normalize
from diagnose.ingest.read import (
    STREAM_HEAD_BYTES,
    WHOLE_INPUT_LIMIT,
    Bounded,
    input_note,
    open_bounded,
)
from diagnose.model import LogLine, Region
from diagnose.records import record
from diagnose.regions import Wording, find_regions, merge_repeats
from diagnose.roles import assign as assign_roles

if TYPE_CHECKING:
    from diagnose.ingest.scan import ScanResult


@record
class Parsed:
    """What the parse stage found: regions, context, and the lines they came from.

    ``lines`` holds every normalised line for a small input, and only the scanned
    windows (plus context lines) for a streamed one; ``total_lines`` always counts
    the whole input.
    """

    source: str
    lines: tuple[LogLine, ...]
    regions: tuple[Region, ...]
    context: LogContext
    total_lines: int
    streamed: bool = False


def parse_text(text: str, source: str = "<text>", wording: Wording | None = None) -> Parsed:
    """Run the parse stage on an in-memory string (``wording``: see ``find_regions``)."""
    text = _encodable(text)
    lines = tuple(normalize(text))
    regions = assign_roles(find_regions(lines, wording))
    context = extract_context(lines)
    total = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if lines:  # a CR-only log has no "\n" but as many lines as the normaliser numbered
        total = max(total, lines[-1].number)
    return Parsed(source, lines, regions, context, total)


def _encodable(text: str) -> str:
    """``text`` with lone surrogates replaced: RE2 and every encoder refuse them.

    They arrive from a JSON body (``"\\ud800"``), a caller's string, or a surrogateescape
    decode of bytes that were not UTF-8; each becomes U+FFFD, like any other undecodable byte.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def parse_source(
    source: str | os.PathLike[str] | BinaryIO,
    wording: Wording | None = None,
    triggers: Callable[[], Sequence[str]] | None = None,
) -> Parsed:
    """Run the parse stage on a path, ``-`` (stdin) or a binary file object.

    Raises :class:`~diagnose.errors.InputError` only when the input cannot be
    opened at all; any bytes that can be read give a result.
    """
    name = _source_name(source)
    with open_bounded(source, WHOLE_INPUT_LIMIT, STREAM_HEAD_BYTES) as bounded:
        if bounded.text is not None:
            return parse_text(bounded.text, name, wording)
        parsed = _parse_streamed(bounded, name, wording, triggers() if triggers else ())
    notes = bounded.notes()  # known only now that the stream was read to its end
    if not notes:
        return parsed
    # Said as read_text says it: lines after the last one.
    end = parsed.total_lines
    said = tuple(LogLine(end + i, input_note(n)) for i, n in enumerate(notes, 1))
    return replace(parsed, lines=(*parsed.lines, *said), total_lines=end + len(said))


def _parse_streamed(
    bounded: Bounded,
    name: str,
    wording: Wording | None = None,
    triggers: Sequence[str] = (),
) -> Parsed:
    """Scan a big input with literal prefilters and parse only the candidate windows.

    ``triggers``: the rule base's literals (``diagnose.rules.wording.scan_literals``), any case.
    """
    from diagnose.context import ready_phrases
    from diagnose.ingest.scan import scan

    # The stream's first bytes were read to see the input is big; the stream replays them,
    # so the scan still starts at line 1.
    assert bounded.stream is not None
    # Readiness lines are context and barriers: a window ends at one, as in the stream.
    result = scan(bounded.stream, barriers=ready_phrases(), folded_triggers=triggers)
    return parse_windows(name, bounded.head, result, wording)


def parse_windows(
    name: str, head_text: str, result: ScanResult, wording: Wording | None = None
) -> Parsed:
    """Parse the windows a :class:`~diagnose.ingest.scan.WindowCutter` kept, as one log.

    The one assembly of a windowed log's verdict: the big-file scan and the stream's
    whole-log summary (:meth:`diagnose.stream.StreamDiagnoser.summary`) both end here, so
    a cascade or a log-scope rule sees every window together.  ``head_text`` is the log's
    first bytes, read whole for its settings (the last line may be cut mid-line).
    """
    head = normalize(head_text)
    head = head[:-1] if head else head  # the last head line may be cut mid-line
    lines: list[LogLine] = []
    regions: list[Region] = []
    for first_line, raw_lines in result.windows:
        window = normalize("\n".join(raw_lines), first_line=first_line)
        lines.extend(window)
        regions.extend(assign_roles(find_regions(window, wording)))
    # The head already holds every line up to head_end: past it, only windows and
    # readiness lines add facts (and nothing is read twice by extract_context).
    head_end = head[-1].number if head else 0
    later = [ln for ln in lines if ln.number > head_end]
    later.extend(
        line
        for number, raw in result.context
        if number > head_end
        for line in normalize(raw, first_line=number)
    )
    context = extract_context([*head, *sorted(later, key=lambda ln: ln.number)])
    # A warning repeated through the log opens a window each time: one region, counted;
    # past REPEAT_WINDOWS the scan only counted its lines, and those counts join it here.
    distinct = _with_counted(merge_repeats(regions), result)
    return Parsed(name, tuple(lines), tuple(distinct), context, result.total_lines, streamed=True)


def _with_counted(regions: Sequence[Region], result: ScanResult) -> list[Region]:
    """Add the repeats the scan counted without windows to the regions of their shape."""
    if not result.repeated:
        return list(regions)
    from diagnose.ingest.flood import line_shape

    counted = {shape: (n, last) for shape, n, _first, last in result.repeated}
    wanted = {r.message_line for r in regions}
    raw_at: dict[int, str] = {}
    for first, raw_lines in result.windows:
        for number in wanted:
            if first <= number < first + len(raw_lines):
                raw_at[number] = raw_lines[number - first]
    out: list[Region] = []
    for region in regions:
        raw = raw_at.get(region.message_line)
        hit = counted.pop(line_shape(raw.encode("utf-8", "replace")), None) if raw else None
        if hit is not None:
            last = max(region.last_line or region.lines[1], hit[1])
            region = replace(region, count=region.count + hit[0], last_line=last)
        out.append(region)
    return out


def _source_name(source: str | os.PathLike[str] | BinaryIO) -> str:
    """Return a printable name for ``source``."""
    if isinstance(source, (str, os.PathLike)):
        text = str(source)
        return "<stdin>" if text == "-" else text
    return str(getattr(source, "name", "<stream>"))
