"""Match a :class:`RuleSet` against a :class:`Document` and return ranked findings.

One pass of the shared literal prefilter picks the candidate rules; each
candidate is then evaluated once per crash region (``scope = "region"``) or once
over the whole log (``scope = "log"``).  A log without any detected region is
treated as one region, so a one-line paste of an error still gets diagnosed.

Inside a scope the order is fixed: ``all`` (stop at the first miss), ``any`` and
``optional`` (every signal, to collect facts), the numeric checks of ``all``
and ``any`` (they read those facts), ``none``, and finally ``confirm``.
A rule that raises becomes a note on the run, never a crash (Mozilla siggen
turns a failing signature rule into a note the same way).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import Any

from diagnose.model import Evidence, FactValue, Finding
from diagnose.records import record
from diagnose.rules import signals as sig
from diagnose.rules.document import Document
from diagnose.rules.ruleset import RuleSet
from diagnose.rules.schema import (
    PLACEHOLDER_RE,
    ContextSignal,
    FrameSignal,
    FuzzySignal,
    NumericSignal,
    RegexSignal,
    RegionKindSignal,
    Rule,
    Signal,
    TextSignal,
)
from diagnose.rules.units import format_size

TIER_ORDER = {"verified": 0, "hardware": 1, "pattern": 2}
#: Gates whose truth in any region implies their truth over the whole log.
_LOG_WIDE_GATES = (ContextSignal, FrameSignal, RegionKindSignal)
#: Relative cost of evaluating one signal kind in a scope (lower runs first in `all`).
_COST = {ContextSignal: 0, RegionKindSignal: 0, TextSignal: 1, RegexSignal: 2, FrameSignal: 3,
         FuzzySignal: 4}  # fmt: skip
#: A held ``confirm`` check moves confidence this share of the way to 1; a failed one scales it.
CONFIRM_GAIN = 0.5
CONTRADICT_FACTOR = 0.5


@record
class RuleRun:
    """Ranked findings of one run, notes about rules that failed, and how many rules ran."""

    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = ()
    evaluated: int = 0


@record(frozen=False)
class _Match:
    """Accumulates what the signals of one rule produced in one scope."""

    facts: dict[str, FactValue] = field(default_factory=dict)
    evidence: list[Evidence] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    hardware: bool = False
    fuzzy_factor: float = 1.0

    def absorb(self, signal: Signal, out: sig.Outcome) -> None:
        """Keep a fired signal's facts (first writer wins), evidence, score and detail."""
        for name, value in out.facts:
            self.facts.setdefault(name, value)
        self.evidence.extend(out.evidence)
        if out.score is not None:
            self.scores[signal.field] = out.score
        if out.detail:
            self.notes.append(out.detail)


@record
class _Plan:
    """A rule's signals in evaluation order; numeric checks last, since they read facts."""

    all_plain: tuple[Signal, ...]
    all_numeric: tuple[Signal, ...]
    any_plain: tuple[Signal, ...]
    any_numeric: tuple[Signal, ...]

    @classmethod
    def of(cls, rule: Rule) -> _Plan:
        """Split the rule's ``all`` and ``any`` lists once per run."""

        def split(signals: Sequence[Signal], numeric: bool) -> tuple[Signal, ...]:
            return tuple(s for s in signals if isinstance(s, NumericSignal) is numeric)

        # `all` stops at its first miss, so try the cheapest signals first.
        all_plain = sorted(split(rule.all, False), key=lambda s: _COST.get(type(s), 9))
        return cls(tuple(all_plain), split(rule.all, True),
                   split(rule.any, False), split(rule.any, True))  # fmt: skip


def _gate(rule: Rule, plan: _Plan, scope: sig.Scope) -> _Match | None:
    """Evaluate the gating signals; return the accumulated match, or ``None`` when it fails."""
    fired: list[tuple[Signal, sig.Outcome]] = []
    for signal in plan.all_plain:
        out = sig.evaluate(signal, scope, {})
        if out.fired is not True:
            return None  # the common case: stop before allocating anything else
        fired.append((signal, out))
    acc = _Match()
    # Evidence and facts follow the rule file's order, whatever order the signals ran in.
    for signal, out in sorted(fired, key=lambda pair: rule.all.index(pair[0])):
        acc.absorb(signal, out)
        if isinstance(signal, FuzzySignal) and out.score is not None:
            acc.fuzzy_factor *= out.score / 100.0
    any_fired = False
    for signal in (*plan.any_plain, *rule.optional):
        out = sig.evaluate(signal, scope, acc.facts)
        if out.fired is True:
            any_fired |= signal in plan.any_plain
            acc.absorb(signal, out)
    for signal in plan.all_numeric:
        out = sig.evaluate(signal, scope, acc.facts)
        if out.fired is not True:
            return None
        acc.absorb(signal, out)
        acc.hardware |= out.hardware
    for signal in plan.any_numeric:
        out = sig.evaluate(signal, scope, acc.facts)
        if out.fired is True:
            any_fired = True
            acc.absorb(signal, out)
            acc.hardware |= out.hardware
    if rule.any and not any_fired:
        return None
    for signal in rule.none:
        if sig.evaluate(signal, scope, acc.facts).fired is True:
            return None
    return acc


def _finding(rule: Rule, plan: _Plan, scope: sig.Scope, region_index: int | None) -> Finding | None:
    """Evaluate ``rule`` in ``scope`` and build its finding, or ``None`` when it does not match."""
    acc = _gate(rule, plan, scope)
    if acc is None:
        return None
    confidence = rule.confidence * acc.fuzzy_factor
    held = contradicted = False
    for signal in rule.confirm:
        out = sig.evaluate(signal, scope, acc.facts)
        if out.fired is True:
            held = True
            acc.absorb(signal, out)
            acc.hardware |= out.hardware
        elif out.fired is False:
            contradicted = True
            acc.notes.append(f"check failed: {out.detail or signal.field}")
    if contradicted:
        confidence *= CONTRADICT_FACTOR
    elif held:
        confidence += (1.0 - confidence) * CONFIRM_GAIN
    evidence = sorted({(e.line, e.signal): e for e in acc.evidence}.values(), key=_evidence_key)
    return Finding(
        rule_id=rule.id,
        cause=rule.cause,
        title=rule.title,
        severity=rule.severity,
        fatal=rule.fatal,
        confidence=round(min(confidence, 1.0), 4),
        tier="hardware" if acc.hardware and not contradicted else "pattern",
        region_index=region_index,
        evidence=tuple(evidence),
        facts=tuple(acc.facts.items()),
        scores=tuple(acc.scores.items()),
        notes=tuple(acc.notes),
        summary=render_summary(rule, acc.facts),
    )


def _evidence_key(e: Evidence) -> tuple[int, str]:
    """Order evidence by line, then by signal."""
    return e.line, e.signal


def render_summary(rule: Rule, facts: dict[str, FactValue]) -> str:
    """Fill ``{fact}`` / ``{fact:size}`` placeholders; use the fallback when a fact is missing."""
    names = {m.group(1) for m in PLACEHOLDER_RE.finditer(rule.summary)}
    if not names <= facts.keys():
        return rule.fallback or rule.title

    def fill(m: Any) -> str:
        value = facts[m.group(1)]
        if m.group(2) == "size" and isinstance(value, (int, float)):
            return format_size(value)
        if isinstance(value, tuple):
            # A tile (128, 256, 64) reads as 128x256x64; a list of names as "a, b".
            sep = "x" if all(isinstance(v, int) for v in value) else ", "
            return sep.join(map(str, value))
        return str(value)

    return PLACEHOLDER_RE.sub(fill, rule.summary)


class _Scopes:
    """The scopes of one document, built once and shared by every rule (line folding is cached)."""

    def __init__(self, doc: Document, kb: Any) -> None:
        frames = [f for r in doc.regions for f in r.frames]
        kinds = tuple(r.kind for r in doc.regions)
        self.log: list[tuple[sig.Scope, int | None]] = [
            (sig.Scope(doc.lines, frames, kinds, doc.context, kb), None)
        ]
        self.regions: list[tuple[sig.Scope, int | None]] = [
            (sig.Scope(r.body, r.frames, (r.kind,), doc.context, kb), i)
            for i, r in enumerate(doc.regions)
        ]

    def possible(self, plan: _Plan) -> bool:
        """Cheap log-wide test of a region rule's frame, region-kind and context gates.

        Each holds somewhere in the log whenever it holds in some region, so one
        failure here rules out every region; the literal prefilter cannot see
        these signals, so without this a frame-gated rule would scan every region.
        """
        if len(self.regions) < 2:
            return True
        (scope, _), no_facts = self.log[0], dict[str, FactValue]()
        return all(
            sig.evaluate(s, scope, no_facts).fired is True
            for s in plan.all_plain
            if isinstance(s, _LOG_WIDE_GATES)
        )

    def of(self, rule: Rule) -> list[tuple[sig.Scope, int | None]]:
        """Each region for a region rule (the whole log if none); the log for a log rule."""
        return self.regions if rule.scope == "region" and self.regions else self.log


def rank(findings: Sequence[Finding]) -> list[Finding]:
    """Order findings: confidence, then tier, fatal first, earlier region, rule id."""
    return sorted(
        findings,
        key=lambda f: (
            -f.confidence,
            TIER_ORDER.get(f.tier, 9),
            not f.fatal,
            f.region_index if f.region_index is not None else -1,
            f.rule_id,
        ),
    )


def run_rules(rules: RuleSet, doc: Document, kb: Any = None, *, prefilter: bool = True) -> RuleRun:
    """Evaluate ``rules`` on ``doc``; ``kb`` supplies hardware facts for numeric checks.

    ``prefilter=False`` evaluates every rule (for tests proving the prefilter
    never hides a match).  Never raises because of a rule: a rule that fails
    at run time is skipped and named in ``notes``.
    """
    candidates = rules.candidates(doc.texts()) if prefilter else list(rules)
    plans: dict[str, _Plan] = rules.derived.setdefault("engine.plans", {})
    scopes = _Scopes(doc, kb)
    findings: list[Finding] = []
    notes: list[str] = []
    for rule in candidates:
        try:
            plan = plans.get(rule.id) or plans.setdefault(rule.id, _Plan.of(rule))
            if rule.scope == "region" and not scopes.possible(plan):
                continue
            found = [_finding(rule, plan, scope, index) for scope, index in scopes.of(rule)]
        except Exception as exc:  # one broken rule (or kb entry) must not stop the others
            notes.append(f"rule {rule.id} failed: {type(exc).__name__}: {exc}")
            continue
        findings.extend(f for f in found if f is not None)
    return RuleRun(tuple(rank(findings)), tuple(notes), len(candidates))


def match_rules(rules: RuleSet, doc: Document, kb: Any = None) -> list[Finding]:
    """Return the ranked findings of ``rules`` on ``doc`` (see :func:`run_rules` for notes)."""
    return list(run_rules(rules, doc, kb).findings)
