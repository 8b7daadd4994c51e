"""Frames hard-wrapped at a terminal width joined back, at a common width or one the text shows."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import field

from diagnose.framelines import frame_start
from diagnose.ingest.normalize.clean import INFERRED, Clean, relabel
from diagnose.ingest.normalize.pastes import NEW_RECORD, SPLIT_STRONG, may_hold_marker
from diagnose.ingest.normalize.prefixes import Ident, strip_prefixes
from diagnose.lazyre import lazy
from diagnose.records import record

#: Narrowest terminal width inferred from the text itself (see :func:`infer_wraps`):
#: below it, two lines of equal length are too often chance.
MIN_INFERRED_WIDTH = 60

#: Most physical lines one soft-wrapped frame may be re-joined from.
MAX_JOINED_LINES = 8

# --- soft-wrap re-joining -------------------------------------------------------------------

# A frame's start, cut or whole: the one definition (diagnose.framelines).
_FRAME_START = frame_start


def _unbalanced(text: str) -> bool:
    """True when a frame line opens more ``<``/``(``/``[`` or quotes than it closes."""
    if text.lstrip().startswith('File "') and text.count('"') % 2 == 1:
        return True
    body = text.replace("->", "").replace("operator<<", "").replace("operator>>", "")
    body = body.replace("operator<", "").replace("operator>", "")
    return (
        body.count("<") > body.count(">")
        or body.count("(") > body.count(")")
        or body.count("[") > body.count("]")
    )


def is_cut_frame(line: Clean) -> bool:
    """A frame line that the terminal or chat client visibly cut."""
    text = line.text
    if not text or _FRAME_START.match(text) is None:
        return False
    if _unbalanced(text):
        return True
    last = text[-1]
    return line.wrap != 0 and (last.isalnum() or last in "_:<,/.")


def is_hard_cut(line: Clean) -> bool:
    """Any line that ends exactly at a terminal width: the terminal cut it there.

    Error messages get cut too, not only frames (``CUDA out of`` / ``memory. Tried to
    allocate``), and a rule needs the message whole.  A separator rule (``=`` * 80) is
    exactly as wide by design, so lines of one or two distinct characters are not cuts.
    A log prefix that alone fills the terminal line leaves its message on the next one.
    A line padded with blanks to the width (a Windows console copy) was not cut, nor is a
    title centred in a rule the width of the terminal.
    """
    if not line.wrap or line.pad > 1:
        return False
    body = line.text.strip()
    if body[:3] in _RULE_HEADS and _TITLED_RULE.match(body):
        return False  # pytest pads "=== FAILURES ===" and "___ test_x ___" to the width
    if "%|" in body and _PROGRESS_BAR.match(body):
        # tqdm sizes its bar to fill the terminal: "100%|█████| 30/30 [06:13<0" ends at the
        # width by design, and the line after it ("Killed") is a record of its own
        # (kijai/ComfyUI-WanVideoWrapper#20, round 111).
        return False
    return len(set(body)) > 2 or (line.prefixed and not body)


# A section title centred in a rule: "==== 1 failed in 3.2s ====", "____ test_x[a] ____".
_TITLED_RULE = lazy(r"([=_*#~+-])\1{2,} \S.*? \1{3,}$")
_RULE_HEADS = frozenset(c * 3 for c in "=_*#~+-")
# A tqdm progress bar: an optional description, the percentage, then the bar.
_PROGRESS_BAR = lazy(r"[^|\n]{0,120}?\d{1,3}%\|")


_BULLETS = ("- ", "* ", "+ ")


def continues(head: Clean, nxt: Clean) -> bool:
    """Whether ``nxt`` is the rest of the cut frame or hard-cut line ``head`` (conservative)."""
    text = nxt.text
    if head.joined >= MAX_JOINED_LINES or not text or nxt.prefixed:
        return False
    if nxt.rank is not None and nxt.rank != head.rank:
        return False
    if not head.text:
        return is_hard_cut(head)  # only a prefix fit on the line: this is its message
    if head.wrap == INFERRED and head.joined == 1 and _alike(head.text, text):
        return False  # a learned width met by a table row or progress bar: rows, not pieces
    if text[:2] in _BULLETS and head.text[:2] == text[:2]:
        # Two items of one Markdown list; the first only happened to be a common terminal
        # width long (180 columns in flashinfer-ai/flashinfer#4013).
        return False
    if head.joined > 1 and is_hard_cut(head):
        # Piece after piece exactly the terminal's width: the wrap is certain, and the next
        # piece may start anywhere (``uctor.exc.InductorError`` looks like a new record).
        return True
    # An indented line starts a new record; a single space is where a terminal cut fell
    # between two words of a hard-cut line.
    if text[0] in " \t" and not (text[1:2] not in (" ", "\t", "") and is_hard_cut(head)):
        return False
    if _FRAME_START.match(text) or NEW_RECORD.match(text):
        return False
    if may_hold_marker(text) and SPLIT_STRONG.search(text):
        return False  # holds a traceback/frame marker of its own: a new record
    if _cut_in_quote(head.text, text) or open_call_at_end(head.text):
        return True
    if long_record_cut(head) and nxt.rank is None and text[:1].islower():
        return True
    if (
        not head.pad
        and len(head.text) >= LONG_RECORD
        and head.text[-1:].islower()
        and _WORD_REST.match(text)
    ):
        # "... Including non-PyTorch memory, this proce" / "ss has 23.40 GiB memory in use."
        return True
    if _sentence_then_record(head, text):
        return False
    return is_cut_frame(head) or is_hard_cut(head)


def _sentence_then_record(head: Clean, text: str) -> bool:
    """A head that ends a sentence right at the width, then a line that starts a record.

    A terminal that cut after the full stop leaves the space before the next word at the
    start of the next line (the indented case above); with no blank between them, a capital
    or a path starting the next line is a record of its own that only happened to follow a
    line of a common width: sglang's 180-column "... Consider using --deepep-config to change
    the behavior." then NVSHMEM's "/dvs/p4/build/.../transport.cpp:...: init failed" (round 144).
    A spinner or status glyph starts a record too: pyannote's "... revert torch to 1.x." then
    "⠴ Transcribing... Could not locate cudnn_ops64_9.dll" (round 372).
    """
    first = text[:1]
    return (
        not head.pad
        and head.text[-1:] in ".!?"
        and head.text[-2:-1].isalpha()
        and (first == "/" or first.isupper() or (first > "\x7f" and not first.isalnum()))
    )


def open_call_at_end(text: str) -> bool:
    """A quoted call cut after a comma: "when calling `cublasGemmEx(handle, opa, opb," - its
    arguments go on on the next lines (pytorch/pytorch#57773 pastes)."""
    return text.endswith(",") and text.count("`") % 2 == 1 and text.count("(") > text.count(")")


def long_record_cut(line: Clean) -> bool:
    """A long rank-prefixed record that ends inside a word: "[rank4]: torch.OutOfMemoryError:
    ... Of the allocated memor" then "y 74.57 GiB is allocated by PyTorch" with no prefix.
    In a log whose every record carries its rank, a bare line after it is its wrapped rest."""
    text = line.text
    return line.rank is not None and len(text) >= LONG_RECORD and text[-1:].islower()


LONG_RECORD = 150
# The rest of a word a terminal cut: a few lowercase letters, then the sentence goes on.
_WORD_REST = lazy(r"[a-z]{1,4} [a-z0-9]")


def open_quote_at_end(text: str) -> bool:
    """Whether ``text`` ends inside a single-quoted word (a cut that may continue)."""
    return (
        text[-1:].isalnum()
        and "'" in text[-41:]
        and _QUOTE_OPEN_AT_END.search(text) is not None
        and text.count("'") % 2 == 1
    )


def _cut_in_quote(head: str, text: str) -> bool:
    """A quoted token the paste cut in two: "ptxas fatal : Value 'sm_1" / "20' is not ..."
    (the head leaves a single quote open on its last word, the next line closes it)."""
    return open_quote_at_end(head) and _QUOTE_CLOSE_AT_START.match(text) is not None


_QUOTE_OPEN_AT_END = lazy(r"(?:^|\s)'[\w.:-]{1,40}$")
_QUOTE_CLOSE_AT_START = lazy(r"[\w.:-]{1,40}'(?:\s|$|[,.;)])")


def join_wrapped(head: Clean, nxt: Clean) -> Clean:
    """Glue ``nxt`` onto ``head``: no separator for a hard cut, a space after a comma.

    A space the head's trailing trim removed is put back (``error`` + ``on the device``).
    A terminal narrower than a long prefix cuts inside it (vLLM worker + logger prefixes
    run past 80 columns), so a hard-cut head gets its now-whole prefix stripped again.
    """
    left = head.text
    spaced = head.pad == 1 or (left.endswith(",") and not head.wrap)
    head.text = left + (" " if spaced else "") + nxt.text
    if is_hard_cut(head) and head.text:
        ident = Ident()
        head.text, _ = strip_prefixes(head.text, ident)
        head.rank = head.rank or ident.value
    head.width = nxt.width
    head.pad = nxt.pad
    head.wrap = nxt.wrap
    head.joined += 1
    return head


# --- terminal widths inferred from the text -------------------------------------------------

# Lines of look-ahead in which the evidence for a width is weighed: bounded memory when
# streaming, and wide enough to see several cut lines of one paste.
_WINDOW = 256
# Cut pairs (a line ending mid-token, then a line that reads as its rest) a width needs in
# the window.  One is not enough: a log's widest line ending inside a word, followed by a
# record with no prefix (``... out of memory`` / ``alloc_tensor_range: failed``), is common.
# Below _WIDE, text wrapped by hand or by a message template (textwrap's 70, PEP 8's 79,
# git's 72) often repeats its longest length, so a third pair is required.
_PAIRS_NEEDED = 2
_PAIRS_NEEDED_NARROW = 3
_WIDE = 100
# A terminal makes its width the commonest long length (every longer line leaves a piece
# exactly that wide); text wrapped at word boundaries spreads over the few columns below.
_BELOW = 4
_COUNTED = MIN_INFERRED_WIDTH - _BELOW
# Pieces of one wrapped message agree on few columns (~5-10 % by chance); table rows,
# progress bars and fixed-width records agree on most.
_ALIKE_COLUMNS = 0.4
_ALIKE_MIN_OVERLAP = 16
# A cut falls anywhere in a token: after a letter, digit, ``_``, a path or a call's
# punctuation.  A closing bracket or a bar is where rows and records end.
_MID_TOKEN_ENDS = frozenset("_-.,:;/<([{='\"")
_DIGITS_MASKED = str.maketrans("0123456789", "##########")


def _alike(head: str, text: str) -> bool:
    """Whether two lines are rows of one format: same start, or mostly the same columns."""
    if head[:8] == text[:8]:
        return True
    overlap = min(len(head), len(text))
    if overlap < _ALIKE_MIN_OVERLAP:
        return False
    same = sum(map(str.__eq__, head[:overlap], text[:overlap]))
    return same > _ALIKE_COLUMNS * overlap


def _ends_mid_token(line: Clean) -> bool:
    """Whether a line ends where a terminal's cut may fall: inside a token, or on one blank."""
    text = line.text
    if not text or line.pad > 1:
        return False
    return line.pad == 1 or text[-1].isalnum() or text[-1] in _MID_TOKEN_ENDS


def _is_cut_pair(head: Clean, nxt: Clean) -> bool:
    """Whether ``head`` looks cut mid-token at its width and ``nxt`` reads as its rest.

    Only evidence for a width (:func:`infer_wraps`), so stricter than :func:`continues`:
    ``nxt`` no wider, with no log prefix, frame, new record or indented code; ``head`` not
    padded, not a separator rule, not a sentence's end; the two not rows of one format.
    """
    body, text = head.text, nxt.text
    if not text or nxt.prefixed or nxt.width > head.width or not _ends_mid_token(head):
        return False
    if body[-1] in ".:!?" and text[0].isupper():
        return False  # a sentence ended and the next began: a line break a person chose
    if nxt.rank is not None and nxt.rank != head.rank:
        return False
    if text[0] in " \t" and text[1:2] in (" ", "\t", ""):
        return False
    if _FRAME_START.match(text) or NEW_RECORD.match(text):
        return False
    return len(set(body)) > 2 and not _alike(body, text)


@record(frozen=False)
class _WidthWindow:
    """The look-ahead of :func:`infer_wraps`: its lines, their widths, their cut pairs.

    Only lines at least ``_COUNTED`` wide are counted: narrower ones can neither be cut at
    an inferred width nor sit just below one, and most log lines are narrower.
    """

    lines: deque[Clean] = field(default_factory=deque)
    widths: dict[int, int] = field(default_factory=dict)  # counted lines by width
    pairs: dict[int, int] = field(default_factory=dict)  # cut pairs by the head's width
    # Counted lines, widths strictly decreasing, from _WINDOW lines before the oldest on.
    widest: deque[Clean] = field(default_factory=deque)
    learned: set[int] = field(default_factory=set)  # widths shown so far: no more weighing
    # Cut pairs in the window by their head's width and text, digits masked: a record printed again
    # (by another rank, or on retry) is the same evidence, not more.  Two copies of a
    # 119-column NVSHMEM warning taught that width, and each copy swallowed the line after
    # it (deepseek-ai/DeepEP#303).
    heads: dict[str, int] = field(default_factory=dict)

    def pair(self, prev: Clean, line: Clean) -> None:
        """Count ``prev`` as a cut pair when it looks cut and ``line`` reads as its rest."""
        width = prev.width
        if not prev.wrap and width not in self.learned and _is_cut_pair(prev, line):
            key = f"{width}\x00{prev.text.translate(_DIGITS_MASKED)}"
            prev.cut_pair = key
            seen = self.heads.get(key, 0)
            self.heads[key] = seen + 1
            if not seen:
                self.pairs[width] = self.pairs.get(width, 0) + 1

    def count(self, line: Clean) -> None:
        """Count a line at least ``_COUNTED`` wide that has just entered the window."""
        width = line.width
        self.widths[width] = self.widths.get(width, 0) + 1
        widest = self.widest
        while widest and widest[-1].width <= width:
            widest.pop()
        widest.append(line)

    def shows(self, width: int) -> bool:
        """Whether the window shows ``width`` to be a terminal's (see :func:`infer_wraps`)."""
        needed = _PAIRS_NEEDED if width >= _WIDE else _PAIRS_NEEDED_NARROW
        if self.pairs.get(width, 0) < needed or (self.widest and self.widest[0].width > width):
            return False
        below = sum(self.widths.get(width - k, 0) for k in range(1, _BELOW + 1))
        return self.widths[width] > below

    def retire(self, line: Clean) -> None:
        """Judge a counted line leaving the window (mark it when its width is shown), uncount it."""
        width = line.width
        learned = self.learned
        widest = self.widest
        while widest and widest[0].number < line.number - _WINDOW:
            widest.popleft()  # the look-behind ends _WINDOW lines back
        # Most lines' widths hold no cut pair: one dict look-up rules them out.
        if (
            (self.pairs.get(width) or width in learned)
            and not line.wrap
            and width >= MIN_INFERRED_WIDTH
            and _ends_mid_token(line)  # a table row's bar, a bracket: an end, not a cut
            and (width in learned or self.shows(width))
        ):
            learned.add(width)
            line.wrap = INFERRED
        self.widths[width] -= 1
        if line.cut_pair:
            key = line.cut_pair
            left = self.heads[key] - 1
            if left:
                self.heads[key] = left
            else:
                del self.heads[key]
                self.pairs[width] -= 1


def infer_wraps(lines: Iterable[Clean], labels: set[str] | None = None) -> Iterator[Clean]:
    """Mark lines whose width the text itself shows to be a terminal's (``wrap=INFERRED``).

    WRAP_WIDTHS lists common widths, but a resized terminal cuts at any column (116 in
    om-ai-lab/VLM-R1#257).  A width ``L >= MIN_INFERRED_WIDTH`` is a terminal's when no
    line within ``_WINDOW`` lines either side is wider and, within the next ``_WINDOW``,
    at least two lines ``L`` wide end mid-token and are followed by a line that reads as
    their rest (:func:`_is_cut_pair`; three below 100 columns), and ``L`` is commoner than
    the few widths just below it (text a person or a template wrapped at word boundaries
    spreads over those).  A learned width stays learned for the rest of the stream.
    Tables, progress bars and fixed-width records give no pairs.  Linear time; holds at
    most ``_WINDOW`` lines back.

    ``labels`` is the host-label set :func:`clean` learns into: when it grows, the lines
    still held here that carry a new label lose it too (see :func:`relabel`).
    """
    window = _WidthWindow()
    held = window.lines
    prev: Clean | None = None
    known = 0
    for line in lines:
        # Plain comparisons first: most log lines are narrower than any inferred width.
        if prev is not None and prev.width >= MIN_INFERRED_WIDTH and not line.prefixed:
            window.pair(prev, line)
        if labels is not None and len(labels) != known:
            relabel(held, labels)
            known = len(labels)
        held.append(line)
        if line.width >= _COUNTED:
            window.count(line)
        prev = line
        if len(held) > _WINDOW:
            old = held.popleft()
            if old.width >= _COUNTED:
                window.retire(old)
            yield old
    while held:
        old = held.popleft()
        if old.width >= _COUNTED:
            window.retire(old)
        yield old
