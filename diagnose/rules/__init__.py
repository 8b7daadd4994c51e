"""The rule base mechanism: load and validate ``rules/**/*.toml``, match rules against a log.

Typical use::

    from diagnose.rules import Document, load_rules, run_rules
    rules = load_rules()                      # shipped rules + DIAGNOSE_RULES_PATH
    run = run_rules(rules, Document.from_text(log_text), kb)
    run.findings                              # ranked Finding objects
    run.notes                                 # rules that failed at run time

See ``rules/README.md`` for the rule format.  Knowledge lives in the TOML
files; this package only holds the mechanism.
"""

from __future__ import annotations

from diagnose.rules.document import Document
from diagnose.rules.engine import RuleRun, match_rules, rank, run_rules
from diagnose.rules.loader import check_rules, load_rules, rule_dirs
from diagnose.rules.ruleset import RuleSet
from diagnose.rules.schema import Example, Rule

__all__ = [
    "Document",
    "Example",
    "Rule",
    "RuleRun",
    "RuleSet",
    "check_rules",
    "load_rules",
    "match_rules",
    "rank",
    "rule_dirs",
    "run_rules",
]
