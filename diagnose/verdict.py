"""From ranked findings to one whole-log verdict: the root, its cascade, and what survived.

Three judgements live here, each driven by data rather than special cases:

* **Survived, not fatal.**  A finding whose evidence all lies before the last
  readiness line ("ready to roll", "Application startup complete") was lived
  through: the server came up anyway.  This is the mission's mixed state, many
  failed autotuner tactics beside "ready to roll", which is ``tactic-skipped``.
  So is one inside a region the program says it lived through (:func:`lived_spans`:
  a serving loop's catch block, "continuing", "Ignoring this choice.") when no crash
  follows it, and one whose every line a rule written for the survived state (a
  warning rule) also read, as surely.
* **Cascade.**  A cause listed in another present cause's ``cascades`` (kb data:
  an illegal memory access makes NCCL's watchdog time out) is a consequence; the
  root is the cause it follows from.
* **Unknown.**  No finding means ``unknown``, never a guess.  Whether an unknown
  failure was fatal is still judged (:func:`unknown_fatal`): a line logged as a
  warning, or anything the server came up after, did not end the process.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from diagnose.records import record
from diagnose.rules.engine import TIER_ORDER
from diagnose.vocab import vocabulary

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from diagnose.kb import KnowledgeBase
    from diagnose.model import Finding, LogLine, Region


@record
class Verdict:
    """The chosen root finding, the cascade rule ids, every finding re-ranked, and a note from
    each step of :func:`decide` on what it did and why (``Diagnosis.verdict_steps``)."""

    primary: Finding | None
    fatal: bool | None
    cascade: tuple[str, ...]
    findings: tuple[Finding, ...]
    server_ready: bool
    steps: tuple[str, ...] = ()


def last_line(finding: Finding) -> int:
    """The last original line number among a finding's evidence (0 when none)."""
    return max((e.line for e in finding.evidence), default=0)


def first_line(finding: Finding) -> int:
    """The first original line number among a finding's evidence (0 when none)."""
    return min((e.line for e in finding.evidence), default=0)


def decide(
    findings: Sequence[Finding],
    ready_lines: Sequence[int],
    kb: KnowledgeBase,
    lived: Sequence[tuple[int, int]] = (),
) -> Verdict:
    """Pick the root finding; mark survived findings non-fatal; name the cascade.

    An ordered list of small steps, each adding a note on what it did and why:
    survived-by-readiness, survived-by-the-program's-words, survived-by-a-warning-rule's-line,
    pool, roots, primary, cascade.
    ``lived``: the line spans of regions the program says it lived through (:func:`lived_spans`).
    """
    steps: list[str] = []
    ready_at = max(ready_lines, default=0)
    # A fatal finding whose evidence ends before the server said it was ready was survived;
    # so was one inside a region the program says it lived through.
    adjusted = _mark_survived(
        findings,
        lambda f: bool(ready_at) and last_line(f) < ready_at,
        "the server reported ready after this",
        lambda ids: (
            f"readiness: the server said it was ready at line {ready_at}, after "
            f"{ids}: marked survived"
        ),
        steps,
    )
    adjusted = _mark_survived(
        adjusted,
        lambda f: _within(f, lived),
        "the program says it went on after this",
        lambda ids: f"lived through: the program caught or went on after {ids}: marked survived",
        steps,
    )
    # A rule written for the survived state (severity below fatal) that read every line a
    # fatal rule read says the program went on past them: the two describe one message.
    survivors = _survived_state_lines(findings)
    adjusted = _mark_survived(
        adjusted,
        lambda f: _claimed(f, survivors),
        "a rule written for the survived state read the same line",
        lambda ids: (
            f"same line: a rule written for the survived state read every line of {ids}: "
            "marked survived"
        ),
        steps,
    )
    fatal = [f for f in adjusted if f.fatal]
    pool = _pool(adjusted, fatal, steps)
    if not pool:
        return Verdict(None, None, (), tuple(adjusted), bool(ready_at), tuple(steps))
    consequences = _consequences(pool, kb)
    roots = _roots(pool, consequences, steps)
    primary = _primary(roots, bool(fatal), steps)
    cascade = _cascade(pool, consequences, primary, steps)
    ranked = sorted(
        adjusted, key=lambda f: (f is not primary, f.cause in consequences, _rank_key(f))
    )
    return Verdict(primary, primary.fatal, cascade, tuple(ranked), bool(ready_at), tuple(steps))


def _mark_survived(
    findings: Sequence[Finding],
    lived_through: Callable[[Finding], bool],
    why: str,
    step: Callable[[str], str],
    steps: list[str],
) -> list[Finding]:
    """Mark the fatal findings ``lived_through`` says were survived; note the step with the
    rule ids it marked (``step`` words the note around them)."""
    out = [_survived(f, why) if f.fatal and lived_through(f) else f for f in findings]
    marked = [a.rule_id for a, b in zip(findings, out, strict=True) if a is not b]
    if marked:
        steps.append(step(", ".join(marked)))
    return out


def _pool(adjusted: list[Finding], fatal: list[Finding], steps: list[str]) -> list[Finding]:
    """The findings the root is chosen from: the fatal ones, else every finding."""
    if not adjusted:
        steps.append("pool: no rule matched")
        return []
    if fatal:
        steps.append(f"pool: {len(fatal)} fatal of {len(adjusted)} findings")
        return fatal
    steps.append(f"pool: none of {len(adjusted)} findings is fatal; choosing among all")
    return adjusted


def _roots(pool: list[Finding], consequences: set[str], steps: list[str]) -> list[Finding]:
    """Findings whose cause no earlier finding's cause sets off (kb ``cascades``)."""
    roots = [f for f in pool if f.cause not in consequences]
    if consequences & {f.cause for f in pool}:
        steps.append(
            "roots: "
            + ", ".join(sorted(consequences & {f.cause for f in pool}))
            + " follow from an earlier cause in this log (kb cascades): not the root"
        )
    return roots or pool


def _primary(roots: list[Finding], any_fatal: bool, steps: list[str]) -> Finding:
    """The root with the highest confidence and tier, the earliest on a tie."""
    if any_fatal:
        primary = min(roots, key=_rank_key)
        why = "highest confidence, then tier, then earliest evidence"
    else:
        # Everything was lived through: a rule written for the survived state
        # (severity below fatal, e.g. tactic-skipped) explains it better than a crash rule.
        primary = min(roots, key=lambda f: (f.severity == "fatal", *_rank_key(f)))
        why = "a rule written for the survived state first, then confidence"
    steps.append(
        f"primary: {primary.rule_id} ({primary.confidence:.2f}, {primary.tier}) of "
        f"{len(roots)} root(s): {why}"
    )
    return primary


def _cascade(
    pool: list[Finding], consequences: set[str], primary: Finding, steps: list[str]
) -> tuple[str, ...]:
    """The rule ids of the findings that are consequences of the root."""
    cascade = tuple(
        dict.fromkeys(
            f.rule_id for f in pool if f.cause in consequences and f.cause != primary.cause
        )
    )
    if cascade:
        steps.append(f"cascade: {', '.join(cascade)} reported as consequences")
    return cascade


def _rank_key(f: Finding) -> tuple[float, int, int]:
    """Best first: higher confidence, stronger tier, then the earliest evidence (roots first)."""
    tier = TIER_ORDER.get(f.tier, len(TIER_ORDER))
    return (-round(f.confidence, 3), tier, first_line(f))


def _survived(f: Finding, why: str) -> Finding:
    """The same finding, marked as lived through, saying why."""
    return replace(f, fatal=False, notes=(*f.notes, why))


def _survived_state_lines(findings: Sequence[Finding]) -> list[tuple[float, frozenset[int]]]:
    """Each finding of severity below fatal (a rule written for the survived state) as its
    confidence and the set of lines it read, built once per verdict."""
    return [
        (round(w.confidence, 3), frozenset(e.line for e in w.evidence))
        for w in findings
        if w.severity != "fatal"
    ]


def _claimed(f: Finding, survivors: Sequence[tuple[float, frozenset[int]]]) -> bool:
    """True when a survived-state finding at least as confident as ``f`` read every evidence
    line of ``f``. A more confident fatal rule is the more specific reading of the line:
    torch's "CUDA initialization:" warning naming a driver too old for the build stays that
    fatal cause (the labelled dev case), while llama.cpp's ggml_cuda_init failure, read as
    well by the equally sure cuda-init-warning, is the server going on on the CPU."""
    lines = {e.line for e in f.evidence}
    confidence = round(f.confidence, 3)
    return bool(lines) and any(c >= confidence and lines <= read for c, read in survivors)


def _within(f: Finding, spans: Sequence[tuple[int, int]]) -> bool:
    """True when all of the finding's evidence lies inside one of ``spans``."""
    first, last = first_line(f), last_line(f)
    return bool(f.evidence) and any(a <= first and last <= b for a, b in spans)


# What a serving loop says when it caught an error and served on (kb/vocab/caught.toml), what
# one failed HTTP request looks like (request-failed.toml) unless a dead engine is behind it
# (engine-dead.toml), what says the program carried on (carried-on.toml) and what says a
# build gave up after skipping failures (gave-up.toml): data, with the threads they came from.


def lived_spans(regions: Sequence[Region], lines: Sequence[LogLine] = ()) -> list[tuple[int, int]]:
    """The line spans of the regions the program says it lived through.

    Those a serving loop reports having caught (an HTTP request's handler included), and
    those right after which it says it carried on (``lines``: "continuing", "Ignoring this
    choice.", ...; see kb/vocab/carried-on.toml); in both cases only when no other crash region
    follows (a loop that caught an error and then died of the next one, its thread's own
    traceback, NVIDIA/TensorRT-LLM#5390, did not survive it) and no later line says the
    build gave up on what it had skipped.
    """
    caught = vocabulary("caught")
    carried_on, gave_up = _program_words(lines)
    heads = _heads(regions, lines)
    warned = [_warning_continued(r, heads.get(r.lines[0], ())[-1:]) for r in regions]
    lived = [
        warned[i] is not None
        or any(caught.any(ln.text) for ln in r.body)
        or any(caught.any(text) for text in heads.get(r.lines[0], ()))
        or _asgi_request_failed(r)
        or any(r.message_line <= n <= r.lines[1] + _CARRIED_ON_SPAN for n in carried_on)
        for i, r in enumerate(regions)
    ]
    # A crash after it says the program did not live on after all (an illegal address
    # caught while tuning, then the worker's traceback: flashinfer-ai/flashinfer#2800).
    last_crash = max(
        (i for i, r in enumerate(regions) if r.kind in CRASH_KINDS and not lived[i]), default=-1
    )
    # So does a build that gave up after skipping what failed: TensorRT skips each tactic
    # that ran out of memory, then finds no implementation left for the node and the engine
    # build fails (NVIDIA/TensorRT#2642).  Held-out round 37.
    spans = [
        warned[i] or r.lines
        for i, r in enumerate(regions)
        if lived[i] and i > last_crash and gave_up < r.lines[0]
    ]
    # Runs of records their loggers gave a level below ERROR: what only they say ended nothing
    # (vLLM's DEBUG "CUDA platform is not available" and INFO "No platform detected" in a pod
    # without the GPU runtime, which then runs on the CPU: kserve/kserve#4722; its WARNING
    # "Failed to import from vllm._C": vllm-project/vllm#5501).
    after = max(regions[last_crash].lines[1] if last_crash >= 0 else 0, gave_up)
    spans += [run for run in _mild_runs(lines) if run[0] > after]
    # So do records whose own text gives a warning level where no logger prefix gave one
    # (Python's "path.py:14: UserWarning: ...", "[W ...]", "WARNING: ..."; mild-records
    # entries marked level_in_text), with the indented source line warnings.warn prints
    # under each: AutoAWQ warns that its kernels cannot load and goes on
    # (casper-hansen/AutoAWQ#579, round 203).
    spans += [run for run in _warned_in_text(lines) if run[0] > after]
    return spans


def _warned_in_text(lines: Sequence[LogLine]) -> list[tuple[int, int]]:
    """The spans of consecutive warning records (by their own text) and the indented lines
    under them."""
    mild = vocabulary("mild-records")

    def warned(ln: LogLine) -> bool:
        if ln.level is not None and ln.level not in _MILD_LEVELS:
            return False  # logged as ERROR or worse
        record = mild.search(ln.text.lstrip())
        return record is not None and bool(record.attribute("level_in_text"))

    def source_line(ln: LogLine, last: int) -> bool:  # what warnings.warn prints under one
        return ln.number == last + 1 and ln.text[:1] in (" ", "\t")

    return _runs(lines, warned, source_line)


def _mild_runs(lines: Sequence[LogLine]) -> list[tuple[int, int]]:
    """The spans of consecutive lines whose logger level is below ERROR."""
    return _runs(lines, lambda ln: ln.level in _MILD_LEVELS)


def _runs(
    lines: Sequence[LogLine],
    member: Callable[[LogLine], bool],
    carries_on: Callable[[LogLine, int], bool] = lambda _ln, _last: False,
) -> list[tuple[int, int]]:
    """The spans of consecutive ``member`` lines; ``carries_on(line, last)`` lets a line that
    is not one extend the span it follows."""
    runs: list[tuple[int, int]] = []
    start = last = -1
    for ln in lines:
        if member(ln):
            if start < 0 or ln.number > last + 1:
                if start >= 0:
                    runs.append((start, last))
                start = ln.number
            last = ln.number
        elif start >= 0 and carries_on(ln, last):
            last = ln.number
        elif start >= 0 and ln.number != last:
            runs.append((start, last))
            start = -1
    if start >= 0:
        runs.append((start, last))
    return runs


#: Lines right above a region that still belong to it: asyncio prints "Task exception was
#: never retrieved" and the task's repr above the traceback (sgl-project/sglang#17031).
_HEAD_SPAN = 2


def _heads(regions: Sequence[Region], lines: Sequence[LogLine]) -> dict[int, list[str]]:
    """For each region's first line, the texts of the up to ``_HEAD_SPAN`` lines above it."""
    wanted = {r.lines[0] - k: r.lines[0] for r in regions for k in range(1, _HEAD_SPAN + 1)}
    heads: dict[int, list[str]] = {}
    for ln in lines:
        start = wanted.get(ln.number)
        if start is not None:
            heads.setdefault(start, []).append(ln.text)
    return heads


def _asgi_request_failed(region: Region) -> bool:
    """One HTTP request's handler raised inside uvicorn, and no dead engine is behind it."""
    body = region.body
    failed, dead = vocabulary("request-failed"), vocabulary("engine-dead")
    return any(failed.any(ln.text) for ln in body) and not any(dead.any(ln.text) for ln in body)


def _consequences(pool: Sequence[Finding], kb: KnowledgeBase) -> set[str]:
    """Causes in ``pool`` set off by another cause in it that showed up no later.

    Order matters: an NCCL error printed BEFORE an illegal memory access is not that
    access's consequence (sgl-project/sglang#26196 shows the handle error first).
    """
    first_seen: dict[str, int] = {}
    for f in pool:
        at = first_line(f)
        first_seen[f.cause] = min(at, first_seen.get(f.cause, at))
    out: set[str] = set()
    for root, root_at in first_seen.items():
        try:
            cascades = kb.cause(root).cascades
        except KeyError:
            continue
        out.update(
            c for c in cascades if c != root and c in first_seen and first_seen[c] >= root_at
        )
    return out


#: Region kinds that end a process when nothing catches them (an ``error-line`` may be a
#: logged, handled error, so it does not count on its own).
CRASH_KINDS = frozenset({
    "python-traceback", "cpp-terminate", "cpp-backtrace", "trtllm-error", "faulthandler",
    "sanitizer", "gdb-backtrace", "cuda-error", "nccl-error", "nvshmem-error",
})  # fmt: skip


def unexplained_crash(
    regions: Sequence[Region], findings: Sequence[Finding], after: int, ready_lines: Sequence[int]
) -> Region | None:
    """A crash region after line ``after`` that no finding explains and no readiness follows.

    A survived verdict (skipped tactics) must not hide a worker that died later for a
    reason no rule knows: then the honest answer is "unknown, fatal".
    """
    explained = {f.region_index for f in findings if f.region_index is not None}
    ready_at = max(ready_lines, default=0)
    for index, region in enumerate(regions):
        if (
            region.kind in CRASH_KINDS
            and region.lines[0] > after
            and index not in explained
            and ready_at < region.lines[0]
        ):
            return region
    return None


# Levels under which a logged error did not end anything by itself.
_MILD_LEVELS = frozenset({"WARNING", "INFO", "DEBUG", "TRACE"})


def _warning_continued(region: Region, above: Sequence[str]) -> tuple[int, int] | None:
    """The lines of a warning whose message is on a line of its own, when ``region`` is one.

    Python's warnings module prints ``torch/cuda/__init__.py:235: UserWarning:`` and then
    torch's message on the next line (xorbitsai/inference#3866, jianchang512/ChatTTS-ui#290):
    the record ends in its level's colon.  Either line may open the one-line region (``above``
    is the line right above it).  A warning ends nothing by itself; a failure it leads to
    is a region of its own.
    """
    if region.kind != "error-line" or region.lines[0] != region.lines[1]:
        return None
    mild = vocabulary("mild-records")

    def header(text: str) -> bool:
        # The separator after the colon went with the message: put it back for the patterns.
        return text.rstrip().endswith(":") and mild.search(text.strip() + " ") is not None

    first = region.lines[0]
    if any(header(h) for h in above):
        return (first - 1, first)
    line = next((ln for ln in region.body if ln.number == first), None)
    if line is None:
        return None
    if header(line.text):
        return (first, first + 1)
    # Header and message on one line (as printed, or joined back by the reader).
    record = mild.search(line.text.lstrip())
    return (first, first) if record is not None and record.attribute("level_in_text") else None


#: Region kinds a single logged record opens (a mild one ends nothing by itself).
_ONE_LINE_KINDS = frozenset({"error-line", "nccl-error", "nvshmem-error"})


def _only_warned(region: Region) -> bool:
    """True when the region is one logged line that by itself ends nothing: its logger
    called it a warning, or it is another component's mild record."""
    if region.kind not in _ONE_LINE_KINDS and region.kind != "cpp-backtrace":
        return False
    line = next((ln for ln in region.body if ln.number == region.message_line), None)
    if line is None:
        return False
    text = line.text.lstrip()
    # A record that ends nothing by itself (kb/vocab/mild-records.toml): NCCL's WARN before
    # it picks another transport (aws/aws-k8s-tester#454), the GPU driver's own checks that
    # healthy start-ups print too; in a plain error line with no logger level, a warning
    # that carries its level in the text.
    mild = vocabulary("mild-records").search(text)
    in_text = mild is not None and bool(mild.attribute("level_in_text", False))
    if region.kind == "cpp-backtrace":
        if not _logged_exception_trace(region, line):
            return False
    elif region.lines[0] != region.lines[1] and not _continued_record(region, line, in_text):
        return False
    if mild is not None and not in_text:
        return True
    if region.kind not in ("error-line", "cpp-backtrace"):
        return False
    if line.level is not None:
        return line.level in _MILD_LEVELS
    return mild is not None


def _logged_exception_trace(region: Region, line: LogLine) -> bool:
    """A C++ exception's trace printed as the tail of one logged record: c10 appends
    "Exception raised from <where>" and the frames to the message of an exception it caught
    and logged (c10d's TCPStore "[W ...] sendBytes failed ... Broken pipe" from a heartbeat
    thread at shutdown; kvcache-ai/Mooncake#936, round 158).  The record's own level then
    says whether it ended anything; a line of another record inside the region (a
    "terminate called", a traceback) has a prefix or is no frame, and breaks the run."""
    if region.lines[0] != region.message_line:
        return False
    frames = {f.log_line for f in region.frames}
    raised = False
    for ln in region.body:
        if ln is line:
            continue
        if ln.level is not None or ln.prefixed:
            return False
        if ln.text.lstrip().startswith("Exception raised from "):
            raised = True
        elif ln.number not in frames:
            return False
    return raised


def _continued_record(region: Region, line: LogLine, level_in_text: bool = False) -> bool:
    """A one-record region whose message goes on over lines with no logger prefix of their
    own: LMCache's "[ts] LMCache WARNING: Failed to allocate memory for the KV cache." then
    "The KV cache will not be stored." (LMCache/LMCache#969). The record is the message
    line's, and its level is the record's, from its logger prefix or, with
    ``level_in_text``, from its own words (llama.cpp's "warning: failed to mlock ..." then
    "Try increasing RLIMIT_MLOCK ..."; h2oai/h2ogpt#812, round 306)."""
    return (
        region.kind == "error-line"
        and (line.level is not None or level_in_text)
        and region.lines[0] == region.message_line
        and all(ln.level is None and not ln.prefixed for ln in region.body if ln is not line)
    )


def unknown_fatal(
    regions: Sequence[Region],
    ready_lines: Sequence[int],
    lived: Sequence[tuple[int, int]] = (),
) -> bool | None:
    """Whether a log no rule explains died of what it shows; ``None`` without any region.

    A region counts when it could have ended the process and nothing says the process
    lived on: it does not end before the last readiness line, it is not a single line its
    logger called a warning (vLLM's "Custom allreduce is disabled" is logged as a WARNING;
    sglang-style prefixes name no level and count), and the program does not say it lived
    through it (``lived``, from :func:`lived_spans`: TensorRT-LLM's "Step function failed,
    continuing.", trtexec's "... has been ignored"; held-out round 10; NVSHMEM's
    "Skipping...", round 11).  An error line at ERROR level, any traceback or backtrace,
    and any CUDA/NCCL error line all count.
    """
    if not regions:
        return None
    ready_at = max(ready_lines, default=0)
    # Like a survived finding, a region is lived through only when it ends strictly before
    # the readiness line: a one-line paste holds both on one line and says nothing of order.
    return any(
        r.lines[1] >= ready_at
        and not _only_warned(r)
        and not (ready_at and r.lines[0] > ready_at and _one_request(r))
        and r.lines not in lived
        for r in regions
    )


def _one_request(region: Region) -> bool:
    """A serving server's report that one request failed ("Decode transfer failed for request
    rank=0 req.rid='3ce8...' ... KVTransferError"): after readiness the server answers the
    next request; an engine that died of it reports that in a region of its own."""
    return vocabulary("one-request").any(region.message)


# The program's own word that it went on after an error it printed.
# Lines after a region in which such a word still speaks of it.
_CARRIED_ON_SPAN = 3


def _program_words(lines: Sequence[LogLine]) -> tuple[list[int], int]:
    """In one pass: the numbers of the lines that say the program carried on, and the number
    of the last line saying a build gave up after skipping failures (0 if none)."""
    carried_on: list[int] = []
    gave_up = 0
    went_on, stopped = vocabulary("carried-on"), vocabulary("gave-up")
    for ln in lines:
        if went_on.any(ln.text):
            carried_on.append(ln.number)
        if stopped.any(ln.text):
            gave_up = ln.number
    return carried_on, gave_up  # fmt: skip
