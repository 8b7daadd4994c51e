"""The literals every match of a regular expression must contain, derived without running it.

Two things need this: the rule base's shared prefilter
(:mod:`diagnose.rules.prefilter`), which skips a rule when none of its required
literals occurs in a log, and the scanners that look for error wording (the
vocabulary in ``kb/vocab`` and the rule wording in
:mod:`diagnose.rules.wording`), which pick candidate lines with plain substring
tests before any regex runs.  It sits below both, knowing only regex syntax.

Correctness matters more than selectivity: a literal may only be claimed when
every match truly contains it.  :func:`regex_literals` therefore reads only the
top level of a pattern (groups to a bounded depth), drops a character a
quantifier makes optional, and gives up (``None``) on anything it does not
understand.  Literals are printable ASCII only and case-folded with
``str.casefold``: RE2's ``(?i)`` folds ``k`` with KELVIN SIGN and ``s`` with LONG S,
and ``casefold`` maps both of those to ASCII, so folding the log can only add
hits, never lose one.
"""

from __future__ import annotations

import re

__all__ = ["more_selective", "regex_literals"]

_REPEAT = re.compile(r"\{(\d+)(,\d*)?\}")
# The opening of a non-capturing group with optional flags: `(?:`, `(?i:`, `(?s-i:`.
_FLAG_GROUP = re.compile(r"\(\?[a-zA-Z-]*:")
#: Groups nested deeper than this are not searched for literals (a bound, not a limit seen).
_MAX_GROUP_DEPTH = 8
#: Escapes that stand for one literal character (RE2 syntax: punctuation escapes itself).
_PUNCT = frozenset("\\.+*?()|[]{}^$-/#&~!@%=:;'\",<>` ")


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
        if best is None or more_selective(lits, best):
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


def more_selective(a: frozenset[str], b: frozenset[str]) -> bool:
    """Prefer fewer alternatives, then longer shortest literal."""
    return (len(a), -min(map(len, a))) < (len(b), -min(map(len, b)))
