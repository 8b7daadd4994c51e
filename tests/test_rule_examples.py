"""Run every ``[[examples]]`` entry of every shipped rule through the full pipeline.

Test ids are ``<rule-id>:<example-name>``, so ``pytest -k smem-overflow/triton`` runs one
rule.  ``todo-*`` examples are strict xfails: when the gap is fixed the XPASS fails the
run, and the author flips the annotation (semgrep's ``todoruleid``).  A ``match`` example
must also yield the ``facts`` it declares.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from diagnose.errors import RuleFileError
from diagnose.rules import RuleSet, load_rules
from diagnose.rules.examples import run_example
from diagnose.rules.schema import Example, Rule

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


@lru_cache(maxsize=1)
def shipped() -> tuple[Any, RuleSet]:
    """The real knowledge base and the shipped rules (loaded once per session)."""
    from diagnose.kb import load_kb

    kb = load_kb()
    return kb, load_rules(kb=kb, include_default=True)


def _params() -> list[Any]:
    try:
        _, rules = shipped()
    except RuleFileError as exc:
        # A broken rule file must fail loudly, not silently collect zero tests.
        return [pytest.param(None, None, str(exc), id="rule-base-loads")]
    params = []
    for rule in rules:
        for example in rule.examples:
            marks = []
            if example.expect.startswith("todo-"):
                marks.append(pytest.mark.xfail(strict=True, reason=example.reason))
            params.append(
                pytest.param(rule, example, None, id=f"{rule.id}:{example.name}", marks=marks)
            )
    return params


@pytest.mark.parametrize(("rule", "example", "load_error"), _params())
def test_rule_example(rule: Rule | None, example: Example | None, load_error: str | None) -> None:
    """The rule matches (or not) as its example says, with the declared facts."""
    if load_error is not None:
        pytest.fail(load_error)
    assert rule is not None and example is not None
    kb, rules = shipped()
    result = run_example(rules, rule, example, kb)
    assert result.reached_target, result.explain()


def test_every_shipped_rule_has_both_kinds_of_example() -> None:
    _, rules = shipped()
    assert len(rules) >= 3
    for rule in rules:
        kinds = {e.expect for e in rule.examples}
        assert {"match", "no-match"} <= kinds, rule.id


def test_hardware_tier_reached_through_the_pipeline() -> None:
    """A Triton limit that equals the kb's opt-in limit for the named GPU gives tier hardware."""
    from diagnose.rules import Document, run_rules

    kb, rules = shipped()
    log = (
        "[2026-01-05 08:00:01] INFO gpu: NVIDIA GeForce RTX 4090, capability 8.9\n"
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, "
        "Required: 131072, Hardware limit: 101376. Reducing block sizes or `num_stages` may help.\n"
    )
    run = run_rules(rules, Document.from_text(log), kb)
    (finding,) = [f for f in run.findings if f.rule_id == "smem-overflow/triton-out-of-resources"]
    assert finding.tier == "hardware" and finding.fact("arch") == "sm_89"
    assert finding.confidence > rules.get(finding.rule_id).confidence  # type: ignore[union-attr]


def _corpus() -> list[Path]:
    dev = SHARED / "corpus" / "dev"
    return sorted(dev.glob("*.log")) if dev.is_dir() else []


SEEDS = {
    "smem-overflow/triton-out-of-resources",
    "cuda-oom/torch-out-of-memory",
    "tactic-skipped/autotuner-skipped-tactic",
}


@pytest.mark.skipif(not _corpus(), reason="../shared/corpus is not available")
def test_seed_rules_on_the_dev_corpus() -> None:
    """Seed rules recognise most cases labelled with their cause, and almost never claim a
    fatal cause on a case labelled otherwise (the verdict, not these rules, breaks the rare
    tie with a more specific cause such as kv-cache-oom)."""
    from diagnose.rules import Document, run_rules
    from diagnose.tomlsource import load_toml

    kb, rules = shipped()
    seeds = rules.subset(r for r in rules if r.id in SEEDS)
    causes = {r.cause for r in seeds}
    labelled = dict.fromkeys(causes, 0)
    recalled = dict.fromkeys(causes, 0)
    false_fatal: list[str] = []
    others = 0
    for log in _corpus():
        label = load_toml(log.with_suffix(".toml")).data["cause"]
        findings = run_rules(seeds, Document.from_text(log.read_text(errors="replace")), kb)
        fired = {f.cause for f in findings.findings}
        if label in causes:
            labelled[label] += 1
            recalled[label] += label in fired
        else:
            others += 1
        false_fatal += [
            f"{log.stem}: {f.rule_id} (label {label})"
            for f in findings.findings
            if f.fatal and f.cause != label
        ]
    for cause in causes:
        assert recalled[cause] >= 0.6 * labelled[cause], (cause, recalled, labelled)
    assert len(false_fatal) <= 0.02 * others, false_fatal
