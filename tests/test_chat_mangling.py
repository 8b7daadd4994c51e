"""Chat damage must not change the verdict: every dev-corpus log, clean vs. mangled.

A log pasted into Slack, Discord, a GitHub comment or an e-mail arrives fenced, quoted,
entity-escaped, with smart quotes, hard-wrapped, collapsed to one line, cut short, wrapped
in prose, with CRLF endings or ANSI colour.  For each dev-corpus log we diagnose the clean
text and each mangled form and require the same cause and fatal flag.  We measure
agreement with today's verdict, not accuracy: a log diagnosed ``unknown`` must stay
``unknown``.  Each mangling's agreement is printed (``pytest -rP`` shows it) and
recorded as a junit property so a regression names the mangling that broke.

Skips cleanly when ``../shared`` (the corpus) is absent.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from diagnose.api import diagnose_text
from diagnose.report import Diagnosis

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
CORPUS = SHARED / "corpus" / "dev"

#: Terminal width the hard-wrap mangling cuts at (the classic 80-column terminal/e-mail).
WRAP = 80
#: A resized terminal's width, in no list of common widths: the normalizer must infer it
#: from the cut lines themselves (om-ai-lab/VLM-R1#257 was pasted from one 116 wide).
ODD_WRAP = 116


def fence(text: str) -> str:
    """A GitHub/Slack code block with a language tag."""
    return "```text\n" + text.rstrip("\n") + "\n```\n"


def quote(text: str) -> str:
    """An e-mail / markdown reply: every line behind ``> ``."""
    return "".join(f"> {line}\n" if line else ">\n" for line in text.split("\n"))


def slack_inline(text: str) -> str:
    """Slack's single-backtick inline code around every non-blank line."""
    return "\n".join(f"`{line}`" if line.strip() else line for line in text.split("\n"))


def html_escape(text: str) -> str:
    """What a web page's copy or an HTML e-mail leaves: ``&lt;`` ``&gt;`` ``&quot;`` ``&#x27;``."""
    return html.escape(text, quote=True)


def smart_quotes(text: str) -> str:
    """Chat clients curl straight quotes: alternating opening/closing per line."""
    out: list[str] = []
    for line in text.split("\n"):
        line = re.sub(r'"([^"\n]*)"', "\u201c\\1\u201d", line)
        out.append(line.replace("'", "\u2019"))
    return "\n".join(out)


def hard_wrap(text: str, width: int = WRAP) -> str:
    """A terminal (or a copy from one) that cut every long line at exactly ``width`` columns.

    Trailing blanks go first: a console's padding to its own width is not content a
    narrower terminal would wrap onto a line of its own.
    """
    out: list[str] = []
    for raw in text.split("\n"):
        line = raw.rstrip()
        if not line:
            out.append(line)
        out.extend(line[i : i + width] for i in range(0, len(line), width))
    return "\n".join(out)


def hard_wrap_odd(text: str) -> str:
    """The same at a width the normalizer knows only from the text (``ODD_WRAP``)."""
    return hard_wrap(text, ODD_WRAP)


def wrap_cuts(text: str, width: int) -> int:
    """How many times a ``width``-column terminal cuts ``text``'s lines."""
    return sum(max(0, len(line.rstrip()) - 1) // width for line in text.split("\n"))


def one_line(text: str) -> str:
    """A chat input that turned every newline into a space."""
    return " ".join(line for line in text.split("\n") if line.strip())


def cut_tail(text: str) -> str:
    """The paste lost its last 10 % (message size limit, scroll-back cut)."""
    return text[: int(len(text) * 0.9)]


def prose(text: str) -> str:
    """Prose before and after the log, as people write it."""
    return (
        "hey all, our deployment died again right after startup and I can't tell why.\n"
        "here is the output from the container:\n\n"
        + text
        + "\n\nany ideas? happy to share more details, it happens every time we restart.\n"
    )


def crlf(text: str) -> str:
    """Windows line endings."""
    return text.replace("\n", "\r\n")


def ansi(text: str) -> str:
    """A coloured terminal: each line in an SGR colour, the reset at its end."""
    colours = ("\x1b[31m", "\x1b[1;33m", "\x1b[36m", "\x1b[38;5;245m")
    return "\n".join(
        f"{colours[i % len(colours)]}{line}\x1b[0m" if line else line
        for i, line in enumerate(text.split("\n"))
    )


MANGLINGS: dict[str, Callable[[str], str]] = {
    "fence": fence,
    "quote": quote,
    "slack-backticks": slack_inline,
    "html-escape": html_escape,
    "smart-quotes": smart_quotes,
    "hard-wrap-80": hard_wrap,
    "hard-wrap-116": hard_wrap_odd,
    "one-line": one_line,
    "cut-10pct": cut_tail,
    "prose": prose,
    "crlf": crlf,
    "ansi": ansi,
}


def verdict(d: Diagnosis) -> tuple[str, bool | None]:
    """What must survive the mangling: the cause and whether it was fatal."""
    return d.cause, d.fatal


@dataclass
class _Case:
    name: str
    text: str
    clean: Diagnosis


@pytest.fixture(scope="module")
def cases() -> list[_Case]:
    """Every dev-corpus log with its clean diagnosis (skip without ../shared)."""
    if not CORPUS.is_dir():
        pytest.skip(f"dev corpus not found at {CORPUS}")
    out = []
    for path in sorted(CORPUS.glob("*.log")):
        text = path.read_text(encoding="utf-8", errors="replace")
        out.append(_Case(path.stem, text, diagnose_text(text, source=path.name)))
    if not out:
        pytest.skip("dev corpus is empty")
    return out


def _evidence_survives(case: _Case, mangled: str) -> bool:
    """True when every evidence line of the clean verdict is still present in ``mangled``."""
    primary = case.clean.primary
    if primary is None:
        return True
    return all(ev.text.strip() in mangled for ev in primary.evidence)


@pytest.mark.parametrize("name", sorted(MANGLINGS))
def test_mangling_keeps_verdict(
    name: str, cases: list[_Case], record_property: Callable[[str, object], None]
) -> None:
    """Each mangling keeps every log's cause and fatal flag (see module docstring)."""
    mangle = MANGLINGS[name]
    broken: list[str] = []
    compared = 0
    for case in cases:
        mangled = mangle(case.text)
        if name == "cut-10pct" and not _evidence_survives(case, mangled):
            continue  # the cut removed the evidence itself: a different verdict is right
        if name == "hard-wrap-116" and wrap_cuts(case.text, ODD_WRAP) < 2:
            # One cut at an unlisted width cannot be told from a log's widest line ending
            # mid-word (the normalizer needs two cut lines to infer a width), and a log
            # with no cut is unchanged: neither measures the inference.
            continue
        compared += 1
        got = verdict(diagnose_text(mangled, source=case.name))
        want = verdict(case.clean)
        if got != want:
            broken.append(f"{case.name}: {want} -> {got}")
    agreement = (compared - len(broken)) / compared if compared else 1.0
    record_property(f"agreement[{name}]", f"{compared - len(broken)}/{compared}")
    print(f"{name}: {compared - len(broken)}/{compared} logs keep their verdict")  # -rP shows it
    assert not broken, f"{name}: agreement {agreement:.1%}; changed:\n" + "\n".join(broken)


def test_manglings_change_the_text(cases: list[_Case]) -> None:
    """Each mangling really alters a log (a no-op mangling would make its test vacuous)."""
    sample = next(
        c.text
        for c in cases
        if len(c.text) > 400 and wrap_cuts(c.text, ODD_WRAP) >= 2 and '"' in c.text
    )
    for name, mangle in MANGLINGS.items():
        assert mangle(sample) != sample, name


# --- synthetic cases for the normalizer's hard-wrap handling (no corpus needed) -----------


def _wrapped(line: str, width: int = WRAP) -> str:
    return "\n".join(line[i : i + width] for i in range(0, len(line), width))


def test_hard_cut_message_is_rejoined_with_its_space() -> None:
    """An error message cut at 80 columns, even between two words, comes back whole."""
    from diagnose.ingest.normalize import normalize

    message = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 13.50 GiB. GPU 12 "
        "has a total capacity of 47.40 GiB of which 1.25 GiB is free. Process 4711 has 46.1 GiB"
    )
    assert message[WRAP - 1] == " "  # the first cut falls just after a space
    lines = normalize("INFO starting worker\n" + _wrapped(message) + "\nnext record\n")
    assert [ln.text for ln in lines] == ["INFO starting worker", message, "next record"]
    assert [ln.number for ln in lines] == [1, 2, 5]


def test_progress_bar_as_wide_as_the_terminal_is_not_a_cut() -> None:
    """tqdm fills the terminal with its bar by design: the next line is a record of its own."""
    from diagnose.ingest.normalize import normalize

    bar = "100%|" + "\u2588" * 60 + "| 30/30 [06:13<00:00, 12.46s/it]"
    bar = bar[:WRAP]
    assert len(bar) == WRAP
    lines = normalize(bar + "\nKilled\n")
    assert [ln.text for ln in lines] == [bar, "Killed"]


def test_prefix_filling_the_terminal_keeps_its_message_and_rank() -> None:
    """A worker + logger prefix that alone is 80 columns wide: the message is the next line."""
    from diagnose.ingest.normalize import normalize

    prefix = "(VllmWorker_TP3 pid=90210) ERROR 11-30 23:59:01 [gpu_model_runner_v2.py:4242] "
    prefix = prefix.replace("runner_v2", "runner_v2" + "x" * (WRAP - len(prefix)))
    assert len(prefix) == WRAP
    lines = normalize(prefix + "\nRuntimeError: CUDA error: an illegal memory access\n")
    texts = [(ln.text, ln.rank) for ln in lines if ln.text]
    assert texts == [("RuntimeError: CUDA error: an illegal memory access", "TP3")]


def test_lines_exactly_as_wide_by_design_stay_apart() -> None:
    """Separator rules and console padding are as wide as the terminal without being cut."""
    from diagnose.ingest.normalize import normalize

    rule = "=" * WRAP
    padded = "ValueError: unsupported tile".ljust(120)
    text = f"{rule}\nsummary of the run\n{padded}\nsecond padded line\n"
    assert [ln.text for ln in normalize(text)] == [
        rule,
        "summary of the run",
        "ValueError: unsupported tile",
        "second padded line",
    ]


def test_hard_wrap_of_an_indented_traceback_is_harmless() -> None:
    """A natural 80-column frame line followed by its indented code line is not joined."""
    from diagnose.ingest.normalize import normalize

    frame = '  File "/opt/app/serving/engine/worker_loop.py", line 118, in run_forever_loop'
    frame = frame.ljust(WRAP, "x")[:WRAP]
    lines = normalize(f"Traceback (most recent call last):\n{frame}\n    self.step()\n")
    assert [ln.text for ln in lines][1:] == [frame, "    self.step()"]
