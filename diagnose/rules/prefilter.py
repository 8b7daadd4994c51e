"""One shared literal prefilter for the whole rule base, so matching cost grows slower than rules.

Every rule gets a *guard*: a set of case-folded literals such that, if the rule
can match a log at all, at least one of them occurs in it.  The guards of all
rules are compiled into ONE RE2 literal set (an Aho-Corasick-like automaton), so
a single linear pass over the case-folded log says which rules are worth
evaluating.  A rule without a guard (only frame, context or fuzzy signals) is
always evaluated.

Correctness matters more than selectivity here: a guard may only claim a
literal the rule truly requires.  :func:`regex_literals` therefore reads only
the top level of a pattern, never descends into groups, drops a character a
quantifier makes optional, and gives up (``None``) on anything it does not
understand.  Literals are printable ASCII only and compared after
``str.casefold`` on both sides: RE2's ``(?i)`` folds ``k`` with KELVIN SIGN and
``s`` with LONG S, and ``casefold`` maps both of those to ASCII, so folding the
log can only add hits, never lose one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from diagnose.rules.schema import RegexSignal, Rule, Signal, TextSignal

_REPEAT = re.compile(r"\{(\d+)(,\d*)?\}")
# The opening of a non-capturing group with optional flags: `(?:`, `(?i:`, `(?s-i:`.
_FLAG_GROUP = re.compile(r"\(\?[a-zA-Z-]*:")
#: Groups nested deeper than this are not searched for literals (a bound, not a limit seen).
_MAX_GROUP_DEPTH = 8
#: Escapes that stand for one literal character (RE2 syntax: punctuation escapes itself).
_PUNCT = frozenset("\\.+*?()|[]{}^$-/#&~!@%=:;'\",<>` ")
#: Always present in the scanned text; its absence from a Set result means RE2 gave up.
_SENTINEL = "\x00crashkb-prefilter\x00"
#: Until this many characters have been searched, one ``in`` test a literal beats building
#: the RE2 set (~1.4 ms for the shipped ~160 literals, paid by every CLI run of a pasted
#: trace).  The budget is per rule set, not per text: a process that diagnoses many logs
#: (serve, fleet, a benchmark) builds the set once and keeps using it.
SMALL_TEXT = 8192


def _printable(ch: str) -> bool:
    """True for printable ASCII, the only characters a guard literal may contain."""
    return " " <= ch <= "~"


def _skip_class(pattern: str, i: int) -> int:
    """Return the index just past the character class that starts at ``pattern[i] == '['``."""
    i += 1
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if pattern.startswith("[:", i):
            end = pattern.find(":]", i + 2)
            i = end + 2 if end >= 0 else i + 1
            continue
        if ch == "]":
            return i + 1
        i += 1
    return i


def _skip_group(pattern: str, i: int) -> int:
    """Return the index just past the group that starts at ``pattern[i] == '('``."""
    depth = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":
            i = _skip_class(pattern, i)
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def _top_level_branches(pattern: str) -> list[str]:
    """Split ``pattern`` on ``|`` outside groups and classes."""
    branches: list[str] = []
    start = i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
        elif ch == "[":
            i = _skip_class(pattern, i)
        elif ch == "(":
            i = _skip_group(pattern, i)
        elif ch == "|":
            branches.append(pattern[start:i])
            i += 1
            start = i
        else:
            i += 1
    branches.append(pattern[start:])
    return branches


def _quantifier_at(branch: str, i: int) -> tuple[int, bool] | None:
    """At ``branch[i]``, return (length, may_be_zero) of a quantifier, or ``None``."""
    if i >= len(branch):
        return None
    ch = branch[i]
    if ch in "*?":
        length, zero = 1, True
    elif ch == "+":
        length, zero = 1, False
    elif ch == "{" and (m := _REPEAT.match(branch, i)):
        length, zero = m.end() - i, int(m.group(1)) == 0
    else:
        return None
    if i + length < len(branch) and branch[i + length] == "?":  # lazy form
        length += 1
    return length, zero


def _escape(branch: str, i: int) -> tuple[str | None, int]:
    """Read the escape at ``branch[i] == '\\'``: (literal char or ``None``, next index)."""
    nxt = branch[i + 1 : i + 2]
    if nxt in _PUNCT:
        return nxt, i + 2
    if nxt in ("p", "P", "x"):  # \pN, \p{Greek}, \x41, \x{263a}
        if branch[i + 2 : i + 3] == "{":
            end = branch.find("}", i)
            return None, (end + 1 if end >= 0 else len(branch))
        return None, i + (3 if nxt != "x" else 4)
    if nxt.isdigit():  # octal \123
        j = i + 1
        while j < len(branch) and j < i + 4 and branch[j] in "01234567":
            j += 1
        return None, max(j, i + 2)
    return None, i + 2  # \d \w \s \b \A \z \n \t ...: a class, an anchor or a control char


# A group that only sets flags, with no body of its own: "(?i)", "(?s-m)".
_FLAG_SETTING = re.compile(r"\(\?[a-zA-Z-]+\)")


def _group_body(group: str) -> str | None:
    """The pattern inside ``group`` (``(...)``, ``(?:...)``, ``(?P<n>...)``, ``(?i:...)``).

    ``None`` for what constrains no text of its own: lookarounds and flag-only groups.
    """
    if not group.startswith("(?"):
        return group[1:-1]
    if group.startswith(("(?P<", "(?<")) and not group.startswith(("(?<=", "(?<!")):
        close = group.find(">")
        return group[close + 1 : -1] if close > 0 else None
    m = _FLAG_GROUP.match(group)
    return group[m.end() : -1] if m is not None else None


def _branch_parts(branch: str) -> tuple[list[str], list[str]]:
    """The literal runs a match of ``branch`` must contain, and the bodies of its mandatory groups.

    A group counts when no quantifier lets it match zero times: ``(?P<detail>NCCL WARN ...)``
    (how rules name the text they extract) requires its body, so the body's literals guard it.
    """
    runs: list[str] = []
    groups: list[str] = []
    run: list[str] = []

    def cut() -> None:
        if run:
            runs.append("".join(run))
            run.clear()

    i = 0
    last: str | None = None  # what the previous atom added: "char" (to run), "group", or None
    while i < len(branch):
        ch = branch[i]
        char: str | None = None
        group: str | None = None
        if ch == "\\":
            char, i = _escape(branch, i)
        elif ch == "[":
            i = _skip_class(branch, i)
        elif ch == "(":
            end = _skip_group(branch, i)
            group, i = branch[i:end], end
            if _FLAG_SETTING.fullmatch(group):
                # "(?i)" sets flags and is no atom: RE2 applies a quantifier after it to the
                # atom before it ("K(?i){0,2}" is "K{0,2}"), which may then be left out.
                quant = _quantifier_at(branch, i)
                if quant is not None:
                    i += quant[0]
                    if quant[1] and last == "char" and run:
                        run.pop()
                    elif quant[1] and last == "group" and groups:
                        groups.pop()
                    cut()
                    last = None
                continue
        elif ch in ".^$":
            i += 1
        elif (quant := _quantifier_at(branch, i)) is not None:
            i += quant[0]  # a quantifier after a group, class or anchor
        else:
            char = ch
            i += 1
        quant = _quantifier_at(branch, i)
        last = None
        if group is not None and group.endswith(")") and (quant is None or not quant[1]):
            body = _group_body(group)
            if body is not None:
                groups.append(body)
                last = "group"
        if quant is not None:
            i += quant[0]
            if char is not None and not quant[1]:
                run.append(char)  # x+ : x is required, but what follows may not be adjacent
            cut()
            last = None  # a quantified atom cannot be quantified again
            continue
        if char is not None and _printable(char):
            run.append(char)
            last = "char"
        else:
            cut()
    cut()
    return runs, groups


def _branch_literals(branch: str, depth: int) -> frozenset[str] | None:
    """The most selective literal set one element of which every match of ``branch`` contains."""
    runs, groups = _branch_parts(branch)
    options = [frozenset({r.casefold()}) for r in runs]
    if depth < _MAX_GROUP_DEPTH:
        options += [lits for body in groups if (lits := _literals(body, depth + 1))]
    best: frozenset[str] | None = None
    for lits in options:
        if best is None or _better(lits, best):
            best = lits
    return best


def _literals(pattern: str, depth: int) -> frozenset[str] | None:
    """:func:`regex_literals` below ``depth`` levels of group nesting."""
    choices: set[str] = set()
    for branch in _top_level_branches(pattern):
        lits = _branch_literals(branch, depth)
        if lits is None:
            return None
        choices |= lits
    return frozenset(choices)


def regex_literals(pattern: str) -> frozenset[str] | None:
    """Return case-folded literals one of which every match of ``pattern`` contains.

    ``None`` means no such set could be derived safely (a branch without a
    literal, ``\\Q...\\E`` quoting); the rule is then evaluated on every log.
    Each branch contributes its most selective requirement: a literal run, or the
    literal set of a group it cannot skip.
    """
    if "\\Q" in pattern:
        return None
    return _literals(pattern, 0)


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
        if lits and (best is None or _better(lits, best)):
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


def _better(a: frozenset[str], b: frozenset[str]) -> bool:
    """Prefer fewer alternatives, then longer shortest literal."""
    return (len(a), -min(map(len, a))) < (len(b), -min(map(len, b)))


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
