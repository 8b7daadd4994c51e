"""The loaded rule base: rules in load order, lookup by id or alias, one shared prefilter."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import field
from typing import Any

from diagnose.records import record
from diagnose.rules.prefilter import Prefilter, rule_guard
from diagnose.rules.schema import Rule


@record
class RuleSet:
    """An immutable collection of rules compiled for matching.

    Build it with :meth:`build` (the loader does); ``dirs`` records where the
    rules came from so reports can say which rule base was used.
    """

    rules: tuple[Rule, ...]
    prefilter: Prefilter = field(compare=False, repr=False)
    dirs: tuple[str, ...] = ()
    by_id: Mapping[str, Rule] = field(default_factory=dict, compare=False, repr=False)
    #: Data derived from the rules once and reused by every run (the engine's signal plans).
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def build(cls, rules: Sequence[Rule], dirs: Sequence[str] = ()) -> RuleSet:
        """Compile ``rules`` (already validated, ids unique) into a rule set."""
        by_id: dict[str, Rule] = {}
        for rule in rules:
            for key in (*rule.aliases, rule.id):
                by_id[key] = rule
        prefilter = Prefilter([rule_guard(r) for r in rules])
        return cls(tuple(rules), prefilter, tuple(dirs), by_id)

    def __iter__(self) -> Iterator[Rule]:
        """Iterate over the rules in load order."""
        return iter(self.rules)

    def __len__(self) -> int:
        """Return the number of rules."""
        return len(self.rules)

    def get(self, rule_id: str) -> Rule | None:
        """Return the rule whose id (or old alias) is ``rule_id``, or ``None``."""
        return self.by_id.get(rule_id)

    def candidates(self, texts: Iterable[str]) -> list[Rule]:
        """Return, in load order, the rules whose literal guard occurs somewhere in ``texts``."""
        return [self.rules[i] for i in self.prefilter.candidates(texts)]

    def subset(self, rules: Iterable[Rule]) -> RuleSet:
        """Return a new rule set holding only ``rules`` (same dirs)."""
        return RuleSet.build(list(rules), self.dirs)
