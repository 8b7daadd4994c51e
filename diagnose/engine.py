"""The diagnosis engine: match a parsed log against the rule base and build the :class:`Diagnosis`.

Every way in (:mod:`diagnose.api` for a whole log, :mod:`diagnose.stream` for the
windows of a followed or scanned log, and through them the CLI, HTTP, MCP and the
log handler) ends here, so they all reach the same verdict for the same lines.
It also gives the parser the rule base's error wording and scan triggers.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from diagnose.pipeline import Parsed
from diagnose.report import Diagnosis, FixAdvice, SimilarCase

if TYPE_CHECKING:
    from diagnose.context import LogContext
    from diagnose.kb import Cause, KnowledgeBase
    from diagnose.model import Finding, Region
    from diagnose.nearest import Likely
    from diagnose.regions import Wording
    from diagnose.rules import RuleSet

__all__ = ["diagnose_parsed", "rule_triggers", "rule_wording"]


def diagnose_parsed(parsed: Parsed, *, rule_dirs: Sequence[Path] = ()) -> Diagnosis:
    """Diagnose an already-parsed window (the streaming engine parses windows itself)."""
    return _diagnose(parsed, rule_dirs)


def rule_wording(rule_dirs: Sequence[str | os.PathLike[str]] = ()) -> Wording:
    """The error wording of the rule base (shipped rules plus ``rule_dirs``) for the parser."""
    from diagnose.rules.wording import wording_of

    _, rules = _load(tuple(Path(d) for d in rule_dirs))
    return wording_of(rules).lines


def rule_triggers(rule_dirs: Sequence[str | os.PathLike[str]] = ()) -> tuple[str, ...]:
    """The rule base's literals that make a line a candidate in big-file scans and streams."""
    from diagnose.rules.wording import scan_literals

    _, rules = _load(tuple(Path(d) for d in rule_dirs))
    return scan_literals(rules)


def _load(rule_dirs: tuple[Path, ...]) -> tuple[KnowledgeBase, RuleSet]:
    """The knowledge base and the rule base for ``rule_dirs`` and the kb folders in force."""
    from diagnose.rules.loader import ENV_VAR
    from diagnose.vocab import kb_dirs

    return _load_for(rule_dirs, kb_dirs(), os.environ.get(ENV_VAR, ""))


@lru_cache(maxsize=8)
def _load_for(
    rule_dirs: tuple[Path, ...], kb_folders: tuple[Path, ...], env_rules: str
) -> tuple[KnowledgeBase, RuleSet]:
    """Load (once per set of rule and kb folders) the knowledge base and the rule base."""
    from diagnose.kb import load_kb
    from diagnose.rules import load_rules

    kb = load_kb()
    rules = load_rules(list(rule_dirs) or None, kb=kb, examples=False)  # matching only
    from diagnose.tomlsource import save_parse_cache

    save_parse_cache()
    return kb, rules


def _diagnose(parsed: Parsed, rule_dirs: Sequence[Path]) -> Diagnosis:
    """Match rules on a parsed log and turn the findings into a verdict."""
    from diagnose.rules import Document, run_rules
    from diagnose.verdict import decide, last_line, lived_spans, unexplained_crash, unknown_fatal

    kb, rules = _load(tuple(Path(d) for d in rule_dirs))
    doc = Document(parsed.lines, parsed.regions, parsed.context)
    outcome = run_rules(rules, doc, kb)
    ready = [fact.line for fact in parsed.context.ready]
    lived = lived_spans(parsed.regions, parsed.lines)
    verdict = decide(outcome.findings, ready, kb, lived)
    primary = verdict.primary
    steps = list(verdict.steps)
    notes = [*_input_notes(parsed), *outcome.notes]
    died_of_it = False
    if primary is not None and not verdict.fatal:
        later = unexplained_crash(parsed.regions, verdict.findings, last_line(primary), ready)
        if later is not None and kb.cause(primary.cause).explains_later_crashes:
            # The program went on degraded (no GPU) and then crashed for a reason no rule
            # names: the crash is where the degradation showed (microsoft/lisa#2823, round 172).
            notes.append(
                f"{primary.rule_id}: the program went on after it, and the crash at line "
                f"{later.lines[0]}, which no rule explains, is taken as its consequence."
            )
            steps.append(f"later crash: line {later.lines[0]} follows from {primary.cause}: fatal")
            died_of_it = True
        elif later is not None:
            notes.append(
                f"{primary.rule_id} (not fatal) explains lines up to {last_line(primary)}, but "
                f"a later crash at line {later.lines[0]} is not explained by any rule."
            )
            steps.append(f"later crash: line {later.lines[0]} is unexplained: no primary")
            primary = None
    fatal: bool | None
    if primary is not None:
        fatal = verdict.fatal or died_of_it
    else:
        fatal = unknown_fatal(parsed.regions, ready, lived)
    if primary is None:
        steps.append(
            "unknown: "
            + ("a crash region no rule explains" if fatal else "nothing that ended the process")
        )
    likely = _likely(parsed.regions, rule_dirs) if primary is None and fatal else None
    if likely is not None:
        steps.append(f"likely: nearest known case {likely.resembles} ({likely.score:.0f})")
    cause_id = primary.cause if primary else (likely.cause if likely else None)
    cause = kb.cause(cause_id) if cause_id else None
    fixes, advice_note = _fixes(cause, parsed, primary, kb)
    if advice_note:
        notes.append(advice_note)
    truncated = any(r.truncated for r in parsed.regions)
    return Diagnosis(
        source=parsed.source,
        total_lines=parsed.total_lines,
        crashes=parsed.regions,
        cause=cause.id if cause else "unknown",
        fatal=fatal,
        confidence=primary.confidence if primary else (_likely_confidence() if likely else 0.0),
        tier=primary.tier if primary else ("likely" if likely else None),
        title=(
            primary.title
            if primary
            else f"Likely: {cause.title}"
            if cause
            else _unknown_title(parsed.regions)
        ),
        summary=(primary.summary or (cause.summary if cause else ""))
        if primary
        else _likely_summary(likely, cause)
        if likely and cause
        else _unknown_summary(parsed.regions),
        findings=verdict.findings,
        primary=primary,
        cascade=verdict.cascade,
        fixes=fixes,
        similar=_similar(kb, parsed.regions, primary),
        version_notes=_version_notes(cause, parsed.context),
        next_steps=_next_steps(cause, primary, truncated, fatal, kb),
        likely=likely,
        server_ready=verdict.server_ready,
        context=parsed.context.to_dict(),
        notes=tuple(notes),
        kb_version=kb.version,
        streamed=parsed.streamed,
        verdict_steps=tuple(steps),
    )


def _input_notes(parsed: Parsed) -> list[str]:
    """What the reader said about the input itself (a cut archive, binary data): the lines
    :func:`diagnose.ingest.read.input_note` appended, at the end of the text."""
    from diagnose.ingest.read import NOTE_PREFIX

    return [
        f"The input: {text[len(NOTE_PREFIX) : -1]}."
        for ln in parsed.lines[-3:]
        if (text := ln.text.strip()).startswith(NOTE_PREFIX) and text.endswith("]")
    ]


def _likely(regions: Sequence[Region], rule_dirs: Sequence[Path]) -> Likely | None:
    """The nearest known case of the most informative unexplained error (see diagnose.nearest)."""
    if not regions:
        return None
    from diagnose.nearest import library, nearest

    best = max(regions, key=_informative)
    return nearest(best.message, library(tuple(Path(d) for d in rule_dirs)))


def _likely_confidence() -> float:
    from diagnose.nearest import CALIBRATED_PRECISION

    return CALIBRATED_PRECISION


def _likely_summary(likely: Likely, cause: Cause) -> str:
    """Say that no rule matched, what the error resembles and how closely, then the cause."""
    return (
        f"No rule matches this error, but it reads like a known case of {cause.id} "
        f"({likely.resembles}, similarity {likely.score:.0f}/100): {cause.summary}"
    )


def _unknown_title(regions: Sequence[Region]) -> str:
    """Title of an unknown verdict."""
    return "Unknown cause" if regions else "No crash found"


def _unknown_summary(regions: Sequence[Region]) -> str:
    """The most informative error line of an unknown verdict, quoted, never a guess."""
    if not regions:
        return "No crash region was found in this log."
    best = max(regions, key=_informative)
    return f"Most informative error (line {best.message_line}): {best.message.strip()[:300]}"


def _informative(region: Region) -> tuple[bool, bool, bool, int]:
    """Sort key for :func:`_unknown_summary`: a real message first (a traceback the paste cut
    before its exception line has only its last frame), then frames, structure and length."""
    named = not any(f.log_line == region.message_line for f in region.frames)
    return (named, len(region.frames) > 0, region.kind != "error-line", len(region.message))


def _fixes(
    cause: Cause | None, parsed: Parsed, primary: Finding | None, kb: KnowledgeBase
) -> tuple[tuple[FixAdvice, ...], str]:
    """The cause's fixes for this log: its stack's first, phrased for its engine (and a note
    when the log shows no engine); see :mod:`diagnose.advice`."""
    if cause is None:
        return (), ""
    from diagnose.advice import tailor
    from diagnose.stacks import detect, known_stacks, order_fixes

    region_texts: list[str] = [e.text for e in primary.evidence] if primary else []
    index = primary.region_index if primary is not None else None
    if index is not None and index < len(parsed.regions):
        region_texts.extend(ln.text for ln in parsed.regions[index].body)
    # A package version the log prints ("V1 LLM engine (v0.11.0)") shows its stack too.
    versions = {name.replace("_", "-"): f.value for name, f in parsed.context.versions.items()}
    region = detect(region_texts)
    log = detect(ln.text for ln in parsed.lines) | known_stacks().intersection(versions)
    # Fixes written for one rule come first when it is the verdict's, and never otherwise.
    rule = primary.rule_id if primary is not None else ""
    specific = [f for f in cause.fixes if rule in f.for_rules]
    general = [f for f in cause.fixes if not f.for_rules]
    ordered = specific + order_fixes(general, [f.applies_to for f in general], region, log)
    tailored = tailor(ordered, region, log, versions=versions, gpu=_gpu_facts(parsed, kb))
    advice = tuple(FixAdvice(f.title, f.detail, f.flags, f.env, f.config) for f in tailored.fixes)
    return advice, tailored.note


def _gpu_facts(parsed: Parsed, kb: KnowledgeBase) -> dict[str, str]:
    """``capability``/``sm``/``arch`` of the one GPU generation the log shows (else none)."""
    archs = {kb.arch(f.value) for f in parsed.context.archs} | {
        kb.arch_for_gpu(f.value) for f in parsed.context.gpus
    }
    archs.discard(None)
    if len(archs) != 1:
        return {}
    arch = archs.pop()
    assert arch is not None
    return {
        "capability": arch.capability,
        "sm": arch.arch.removeprefix("sm_"),
        "arch": arch.arch,
    }


def _similarity_text(region: Region | None) -> str:
    """The text compared with known cases: the crash's message and its first frame functions,
    unmasked (``KnowledgeBase.nearest_references`` masks it for similarity, keeping arch numbers
    that a crash identity, :func:`diagnose.signature.mask`, drops)."""
    if region is None:
        return ""
    frames = " ".join(f.function or "" for f in region.frames[:4] if f.function)
    return f"{region.message} {frames}".strip()


def _similar(
    kb: KnowledgeBase, regions: Sequence[Region], primary: Finding | None
) -> tuple[SimilarCase, ...]:
    """Known upstream cases resembling the crash (rapidfuzz on masked signatures)."""
    region = None
    if primary is not None and primary.region_index is not None:
        region = regions[primary.region_index] if primary.region_index < len(regions) else None
    elif regions:
        region = regions[0]
    text = _similarity_text(region) or (
        primary.evidence[0].text if primary and primary.evidence else ""
    )
    if not text:
        return ()
    return tuple(
        SimilarCase(ref.id, ref.url, ref.title, ref.cause, score)
        for ref, score in kb.nearest_references(text, limit=3, cutoff=0.6)
    )


def _version_notes(cause: Cause | None, context: LogContext) -> tuple[str, ...]:
    """Say when the log's versions predate (or include) a release known to fix the cause."""
    if cause is None or not cause.fixed_in:
        return ()
    notes = []
    for fixed in cause.fixed_in:
        seen = context.versions.get(fixed.package)
        if seen is None:
            continue
        from diagnose.versions import is_before  # ~2 ms: only when the log names a version

        before = is_before(seen.value, fixed.version)
        if before is True:
            notes.append(
                f"{fixed.package} {seen.value} (line {seen.line}) predates "
                f"{fixed.version}, which fixes this ({fixed.reference})."
            )
        elif before is False:
            notes.append(
                f"{fixed.package} {seen.value} already includes the fix in "
                f"{fixed.version} ({fixed.reference}); look for another trigger."
            )
    return tuple(notes)


def _next_steps(
    cause: Cause | None,
    primary: Finding | None,
    truncated: bool,
    fatal: bool | None,
    kb: KnowledgeBase,
) -> tuple[str, ...]:
    """What evidence would decide an uncertain or unknown verdict (kb/causes/unknown.toml's
    ``next_steps`` when nothing matched)."""
    steps: list[str] = []
    if truncated:
        steps.append("The paste looks cut off: include the complete trace to the last line.")
    if cause is None:
        unknown = kb.cause("unknown")
        steps.extend(unknown.next_steps_if_survived if fatal is False else unknown.next_steps)
    elif primary is None or primary.tier == "pattern":  # a likely cause, or a pattern match
        steps.extend(cause.verify)
        steps.extend(cause.evidence_to_collect[:2])
    return tuple(dict.fromkeys(steps))
