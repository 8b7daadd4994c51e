"""Run the ``[[examples]]`` of rules through the full pipeline and judge each one.

Used by ``tests/test_rule_examples.py`` and ``diagnose-kb test``.  Verdicts
follow semgrep's rule tests: ``missed`` (a ``match`` example did not match, or
its declared facts were not extracted), ``incorrect`` (a ``no-match`` example
matched), ``fixed`` (a ``todo-*`` example now behaves as its target, so the
annotation must be flipped) and ``ok``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from diagnose.model import Finding
from diagnose.records import record
from diagnose.rules.document import Document
from diagnose.rules.engine import run_rules
from diagnose.rules.ruleset import RuleSet
from diagnose.rules.schema import Example, Rule
from diagnose.rules.wording import wording_of

Verdict = Literal["ok", "missed", "incorrect", "fixed"]


@record
class ExampleResult:
    """What one example produced: the rule's findings on it and any fact mismatches."""

    rule: Rule
    example: Example
    findings: tuple[Finding, ...]
    fact_problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def test_id(self) -> str:
        """``<rule-id>:<example-name>``, the pytest id (``pytest -k`` can select it)."""
        return f"{self.rule.id}:{self.example.name}"

    @property
    def reached_target(self) -> bool:
        """True when the rule behaved as the example's target (``todo-*`` target the opposite)."""
        matched = bool(self.findings)
        if self.example.expect in ("match", "todo-match"):
            return matched and not self.fact_problems
        return not matched

    @property
    def verdict(self) -> Verdict:
        """``ok``, ``missed``, ``incorrect`` or ``fixed`` (see the module docstring)."""
        if self.example.expect.startswith("todo-"):
            return "fixed" if self.reached_target else "ok"
        if self.reached_target:
            return "ok"
        return "missed" if self.example.expect == "match" else "incorrect"

    def explain(self) -> str:
        """One paragraph for a failure report: what was expected, what was found."""
        head = f"{self.verdict}: {self.test_id} (expect {self.example.expect})"
        lines = [head]
        if self.verdict == "fixed":
            lines.append("  the known gap is gone: change expect to the non-todo form")
        lines += [f"  fact {p}" for p in self.fact_problems]
        for f in self.findings:
            lines += [f"  matched line {e.line} via {e.signal}: {e.text}" for e in f.evidence]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _fact_problems(example: Example, findings: tuple[Finding, ...]) -> tuple[str, ...]:
    """Declared facts that no finding of the rule extracted with the declared value."""
    problems: list[str] = []
    for name, want in example.facts:
        got = [f.fact(name) for f in findings]
        if not any(g == want or str(g) == str(want) for g in got if g is not None):
            seen = ", ".join(repr(g) for g in got if g is not None) or "nothing"
            problems.append(f"{name}: expected {want!r}, got {seen}")
    return tuple(problems) if findings else ()


def run_example(rules: RuleSet, rule: Rule, example: Example, kb: Any) -> ExampleResult:
    """Parse the example log with the full pipeline and match it against the whole rule set."""
    doc = Document.from_text(example.log, wording_of(rules).lines)
    run = run_rules(rules, doc, kb)
    mine = tuple(f for f in run.findings if f.rule_id == rule.id)
    notes = tuple(n for n in run.notes if rule.id in n)
    return ExampleResult(rule, example, mine, _fact_problems(example, mine), notes)


def run_examples(rules: RuleSet, kb: Any, only: Iterable[str] | None = None) -> list[ExampleResult]:
    """Run every example of every rule (or of the rule ids in ``only``)."""
    wanted = set(only) if only is not None else None
    return [
        run_example(rules, rule, example, kb)
        for rule in rules
        if wanted is None or rule.id in wanted
        for example in rule.examples
    ]
