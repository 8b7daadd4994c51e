"""One shared literal prefilter for the whole rule base, so matching cost grows slower than rules.

Every rule gets a *guard*: a set of case-folded literals such that, if the rule
can match a log at all, at least one of them occurs in it.  The guards of all
rules are compiled into ONE RE2 literal set (an Aho-Corasick-like automaton), so
a single linear pass over the case-folded log says which rules are worth
evaluating.  A rule without a guard (only frame, context or fuzzy signals) is
always evaluated.

Correctness matters more than selectivity here: a guard may only claim a
literal the rule truly requires (:func:`diagnose.literals.regex_literals` says
which ones a pattern requires), and the log is case-folded as the literals are.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from diagnose.literals import more_selective
from diagnose.rules.schema import RegexSignal, Rule, Signal, TextSignal

#: Always present in the scanned text; its absence from a Set result means RE2 gave up.
_SENTINEL = "\x00crashkb-prefilter\x00"
#: Until this many characters have been searched, one ``in`` test a literal beats building
#: the RE2 set (~1.4 ms for the shipped ~160 literals, paid by every CLI run of a pasted
#: trace).  The budget is per rule set, not per text: a process that diagnoses many logs
#: (serve, fleet, a benchmark) builds the set once and keeps using it.
SMALL_TEXT = 8192


def signal_literals(signal: Signal) -> frozenset[str] | None:
    """Return the literal choices a firing ``signal`` implies, or ``None`` when it implies none."""
    if isinstance(signal, TextSignal):
        return frozenset({signal.literal.casefold()}) if signal.literal else None
    if isinstance(signal, RegexSignal):
        return signal.literals
    return None


def rule_guard(rule: Rule) -> frozenset[str] | None:
    """Return the rule's guard: literals one of which a log must contain for the rule to match.

    Any one ``all`` signal with literals is enough (the most selective is kept);
    otherwise ``any`` works only when every ``any`` signal has literals.
    """
    best: frozenset[str] | None = None
    for signal in rule.all:
        lits = signal_literals(signal)
        if lits and (best is None or more_selective(lits, best)):
            best = lits
    if best is not None:
        return best
    if not rule.any:
        return None
    union: set[str] = set()
    for signal in rule.any:
        lits = signal_literals(signal)
        if not lits:
            return None
        union |= lits
    return frozenset(union)


class Prefilter:
    """Maps the literals present in a text to the indexes of rules worth evaluating."""

    def __init__(self, guards: Sequence[frozenset[str] | None]) -> None:
        """Compile the guards of rules ``0..n-1`` (``None`` = always evaluate) into one RE2 set."""
        self._always = [i for i, g in enumerate(guards) if g is None]
        self._literals: list[str] = []
        self._owners: list[list[int]] = []
        index: dict[str, int] = {}
        for rule_index, guard in enumerate(guards):
            for lit in sorted(guard or ()):
                if lit not in index:
                    index[lit] = len(self._literals)
                    self._literals.append(lit)
                    self._owners.append([])
                self._owners[index[lit]].append(rule_index)
        self._set: Any = None
        self._set_built = False
        self._plain_budget = SMALL_TEXT

    @property
    def literal_count(self) -> int:
        """Number of distinct literals in the shared set."""
        return len(self._literals)

    def candidates(self, texts: Iterable[str]) -> list[int]:
        """Return, in rule order, the indexes of rules whose guard occurs in ``texts``."""
        folded = "\n".join(t.casefold() for t in texts)
        found: set[int] = set(self._always)
        for lit_index in self._present(folded):
            found.update(self._owners[lit_index])
        return sorted(found)

    def _present(self, folded: str) -> list[int]:
        """Indexes (into ``self._literals``) of literals that occur in ``folded``."""
        if not self._set_built and len(folded) <= self._plain_budget:
            self._plain_budget -= len(folded)
            return [i for i, lit in enumerate(self._literals) if lit in folded]
        if not self._set_built:
            self._set, self._set_built = _compile_set([_SENTINEL, *self._literals]), True
        hits = self._set.Match(f"{_SENTINEL}\n{folded}") if self._set is not None else None
        if hits is None or 0 not in hits:
            # RE2 ran out of DFA memory (or the set did not build): fall back to plain
            # substring tests rather than ever hide a rule.
            return [i for i, lit in enumerate(self._literals) if lit in folded]
        return [h - 1 for h in hits if h != 0]


def _compile_set(literals: Sequence[str]) -> Any:
    """Build an unanchored RE2 literal set; ``None`` when RE2 refuses it."""
    import re2

    options = re2.Options()
    options.literal = True
    options.log_errors = False
    options.max_mem = 64 << 20  # room for the DFA of a few thousand literals
    rset = re2.Set.SearchSet(options)
    try:
        for lit in literals:
            rset.Add(lit)
        rset.Compile()
    except re2.error:
        return None
    return rset
