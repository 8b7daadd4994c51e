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

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from diagnose.rules.document import Document
    from diagnose.rules.engine import RuleRun, match_rules, rank, run_rules
    from diagnose.rules.loader import check_rules, load_rules, rule_dirs
    from diagnose.rules.ruleset import RuleSet
    from diagnose.rules.schema import Example, Rule

# Imported on first use (PEP 562): importing one submodule (the schema, the wording)
# must not pay for the engine and the loader.
_EXPORTS = {
    "Document": "diagnose.rules.document",
    "RuleRun": "diagnose.rules.engine",
    "match_rules": "diagnose.rules.engine",
    "rank": "diagnose.rules.engine",
    "run_rules": "diagnose.rules.engine",
    "check_rules": "diagnose.rules.loader",
    "load_rules": "diagnose.rules.loader",
    "rule_dirs": "diagnose.rules.loader",
    "RuleSet": "diagnose.rules.ruleset",
    "Example": "diagnose.rules.schema",
    "Rule": "diagnose.rules.schema",
}

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


def __getattr__(name: str) -> Any:
    """Import a public name on first use and keep it (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'diagnose.rules' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
