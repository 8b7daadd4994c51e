"""The rule base's error wording, as a line test the region finder can use.

A rule's gating ``text`` and ``regex`` signals are the wordings of a failure: when a line
carries one, the line is an error line whatever the hand-kept region vocabulary says.
Without this a rule for "error loading model: ..." could never fire on a log that also held
some other region, because a region-scoped rule only reads region lines, and a new wording
needed an edit to :mod:`diagnose.regions` as well as its rule file.  Here the rule file is
enough.

Only signals that name a failure by themselves count: a rule's one ``text``/``regex``
``all`` signal when it has exactly one (its ``any`` then says when or where: "capturing CUDA
graphs" beside an OOM), else its ``any`` signals when ``all`` has none.  With two such
``all`` signals one is usually context (a backend's name beside an OOM) and would make
ordinary lines look like errors, so neither counts.  Rules of severity ``info`` do not count.

:class:`RuleWording` answers for many lines at once, in time linear in their length: one
RE2 pass over the case-folded lines finds those that hold a wording's literal, and only
those lines run the signals whose literal they hold.  Identical lines (a warning printed
100,000 times) are answered once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from diagnose.rules.prefilter import signal_literals
from diagnose.rules.schema import RegexSignal, Rule, Signal, TextSignal

__all__ = ["RuleWording", "scan_literals", "wording_of"]

#: Only this many leading characters of a line are tested (the region finder's window).
WINDOW = 2048
#: Up to this many characters, plain substring tests find the candidate lines.
_PLAIN_BUDGET = 8192
#: Distinct line texts whose answer is remembered (bounded: a flood repeats a few texts).
_MEMO_LIMIT = 4096


def _wording_signals(rule: Rule) -> tuple[Signal, ...]:
    """The signals of ``rule`` that name a failure on their own (see the module docstring)."""
    if rule.severity == "info":
        return ()
    gates = tuple(s for s in rule.all if isinstance(s, (TextSignal, RegexSignal)))
    if len(gates) == 1:
        return gates  # the failure; the rule's `any` then says when or where (context)
    if gates:
        return ()  # several: which one is the failure and which the context is not known
    return tuple(s for s in rule.any if isinstance(s, (TextSignal, RegexSignal)))


class RuleWording:
    """Tells which lines carry the wording of some rule's failure."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        """Index the wording signals of ``rules`` by their case-folded literals."""
        self._by_literal: dict[str, list[Signal]] = {}
        for rule in rules:
            for signal in _wording_signals(rule):
                for lit in signal_literals(signal) or ():
                    if lit.strip():
                        self._by_literal.setdefault(lit, []).append(signal)
        self._literals = sorted(self._by_literal, key=len, reverse=True)
        self._automaton: Any = None
        self._memo: dict[str, bool] = {}

    def __bool__(self) -> bool:
        return bool(self._literals)

    def lines(self, texts: Sequence[str]) -> list[bool]:
        """For each text, whether some rule's failure wording fires on it."""
        flags = [False] * len(texts)
        if not self._literals:
            return flags
        folded = [t[:WINDOW].replace("\n", " ").casefold() for t in texts]
        for index in self._candidate_lines(folded):
            text = texts[index][:WINDOW]
            known = self._memo.get(text)
            if known is None:
                known = self._fires(text, folded[index])
                if len(self._memo) < _MEMO_LIMIT:
                    self._memo[text] = known
            flags[index] = known
        return flags

    def _candidate_lines(self, folded: Sequence[str]) -> list[int]:
        """Indexes of lines holding at least one literal: one RE2 pass, resumed per line.

        A small input (a chat paste) is tested literal by literal instead: compiling the
        automaton (~10 ms for the shipped rules) costs more than the whole test.
        """
        if self._automaton is None and sum(map(len, folded)) <= _PLAIN_BUDGET:
            lits = self._literals
            return [i for i, f in enumerate(folded) if any(lit in f for lit in lits)]
        import re2  # lazy, as everywhere: the CLI's --help must not pay for it

        if self._automaton is None:
            options = re2.Options()
            options.log_errors = False  # a DFA out of its budget falls back quietly
            options.max_mem = 32 << 20  # the DFA of ~16 KB of literals; 8 MB ran out
            options.never_capture = True
            pattern = "|".join(re.escape(lit) for lit in self._literals)
            self._automaton = re2.compile(pattern.encode(), options=options)
        joined = "\n".join(folded).encode("utf-8", errors="replace")
        search = self._automaton.search
        found: list[int] = []
        pos, index = 0, 0
        while True:
            m = search(joined, pos)
            if m is None:
                return found
            index += joined.count(b"\n", pos, m.start())
            found.append(index)
            nl = joined.find(b"\n", m.end())
            if nl == -1:
                return found
            pos, index = nl + 1, index + 1

    def _fires(self, text: str, folded: str) -> bool:
        """Does any wording signal whose literal ``folded`` holds match ``text``?"""
        for lit in self._literals:
            if lit not in folded:
                continue
            for signal in self._by_literal[lit]:
                if isinstance(signal, TextSignal):
                    if (
                        (signal.literal.casefold() in folded)
                        if signal.ignore_case
                        else (signal.literal in text)
                    ):
                        return True
                elif isinstance(signal, RegexSignal) and signal.compiled.search(text):
                    return True
        return False


def scan_literals(rules: Any) -> tuple[str, ...]:
    """Case-folded literals the big-file scan and the stream must treat as candidate lines.

    Every rule's literal guard (``diagnose.rules.prefilter.rule_guard``: one of them is in any
    log the rule matches), so a new rule's lines are seen in a 1 GB log with no edit to the
    scanner.  Info rules add none; a literal that holds a shorter one is implied by it.  A
    guard too short to say anything alone (" per ", "70") is left out: it would make
    healthy lines candidates by the million, and its rule's lines carry other triggers.
    """
    from diagnose.rules.prefilter import rule_guard

    derived: dict[str, Any] = rules.derived
    found = derived.get("scan_literals")
    if found is None:
        lits = {
            lit
            for rule in rules
            if rule.severity != "info"
            for lit in rule_guard(rule) or ()
            if lit.isascii() and _telling(lit)
        }
        ordered = sorted(lits, key=lambda s: (len(s), s))
        kept: list[str] = []
        for lit in ordered:
            if not any(k in lit for k in kept):
                kept.append(lit)
        found = derived.setdefault("scan_literals", tuple(sorted(kept)))
    return found  # type: ignore[no-any-return]


def _telling(literal: str) -> bool:
    """A literal long and wordy enough to mark a line on its own."""
    core = literal.strip()
    return len(core) >= 8 and sum(ch.isalpha() for ch in core) >= 6


def wording_of(rules: Any) -> RuleWording:
    """The :class:`RuleWording` of a :class:`~diagnose.rules.RuleSet`, built once per rule set."""
    derived: dict[str, Any] = rules.derived
    found = derived.get("wording")
    if found is None:
        found = derived.setdefault("wording", RuleWording(list(rules)))
    return found  # type: ignore[no-any-return]
