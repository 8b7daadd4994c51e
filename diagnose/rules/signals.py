"""Evaluate one signal against one scope (a region, or the whole log): one small function per kind.

Each evaluation returns an :class:`Outcome`: whether the signal fired (``None``
when it could not be decided, e.g. a numeric check whose fact or arch is
unknown), the evidence lines, the facts it extracted and, for ``fuzzy``, the
score.  Everything is linear in the scope's size: RE2 never backtracks, globs
match with plain string searches, and fuzzy scoring reads a bounded prefix of each line.
"""

from __future__ import annotations

import bisect
import operator
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import field
from typing import Any

from diagnose.model import Evidence, FactValue, Frame, LogLine
from diagnose.records import record
from diagnose.roles import culprit_first
from diagnose.rules.schema import (
    ContextSignal,
    FrameSignal,
    FuzzySignal,
    NumericSignal,
    Operand,
    RegexSignal,
    RegionKindSignal,
    Signal,
    TextSignal,
)
from diagnose.rules.units import convert

#: Evidence lines kept per signal, and characters kept per evidence line.
MAX_EVIDENCE = 3
EVIDENCE_CHARS = 300
#: Fuzzy scoring reads this many leading characters of a line (keeps it linear).
FUZZY_WINDOW = 1000

_OPS: Mapping[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt,
    "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}  # fmt: skip
_VERSION_PART = re.compile(r"\d+")


@record(frozen=False)
class Scope:
    """What a rule sees: a region's lines and frames, or the whole log's; plus context and kb."""

    lines: Sequence[LogLine]
    frames: Sequence[Frame]
    kinds: tuple[str, ...]
    context: Any = None
    kb: Any = None
    _folded: list[str] | None = field(default=None, repr=False)
    _joined: tuple[str, list[int]] | None = field(default=None, repr=False)
    _holding: dict[str, list[int]] = field(default_factory=dict, repr=False)

    def folded(self) -> list[str]:
        """Case-folded line texts (computed once per scope)."""
        if self._folded is None:
            self._folded = [line.text.casefold() for line in self.lines]
        return self._folded

    def holding(self, literals: Iterable[str]) -> list[int]:
        """Indices of the lines whose folded text holds any of ``literals``, in order.

        A whole log's scope has hundreds of thousands of lines and every log-scope regex
        asks this: one ``str.find`` sweep per literal over the joined text (cached), not a
        Python test per line and literal (8.6 s of a 30 MB warning-flood log).
        """
        if self._joined is None:
            folded = self.folded()
            starts, pos = [], 0
            for text in folded:
                starts.append(pos)
                pos += len(text) + 1
            self._joined = ("\n".join(folded), starts)
        joined, starts = self._joined
        found: set[int] = set()
        for lit in literals:
            hit = self._holding.get(lit)
            if hit is None:
                hit = []
                at = joined.find(lit)
                while at >= 0:
                    line = bisect.bisect_right(starts, at) - 1
                    hit.append(line)
                    nxt = starts[line + 1] if line + 1 < len(starts) else len(joined)
                    at = joined.find(lit, nxt)
                self._holding[lit] = hit
            found.update(hit)
        return sorted(found)


@record
class Outcome:
    """The result of one signal: fired (``None`` = undecidable), evidence, facts, score, detail."""

    fired: bool | None
    evidence: tuple[Evidence, ...] = ()
    facts: tuple[tuple[str, FactValue], ...] = ()
    score: float | None = None
    detail: str = ""
    hardware: bool = False


NO = Outcome(False)


def _evidence(line: LogLine, signal: Signal) -> Evidence:
    """Evidence for ``line``, its text clipped so one huge pasted line stays readable."""
    text = line.text if len(line.text) <= EVIDENCE_CHARS else line.text[:EVIDENCE_CHARS] + "..."
    return Evidence(line.number, text, signal.field)


def _text(signal: TextSignal, scope: Scope, facts: Mapping[str, FactValue]) -> Outcome:
    """Literal substring in a line."""
    if signal.ignore_case:
        needle = signal.literal.casefold()
        hits = [ln for ln, f in zip(scope.lines, scope.folded(), strict=True) if needle in f]
    else:
        hits = [ln for ln in scope.lines if signal.literal in ln.text]
    if not hits:
        return NO
    return Outcome(True, tuple(_evidence(ln, signal) for ln in hits[:MAX_EVIDENCE]))


#: Above this many lines a scope finds a regex's candidate lines by sweeping the joined text.
_SWEEP_LINES = 2000


def _regex(signal: RegexSignal, scope: Scope, facts: Mapping[str, FactValue]) -> Outcome:
    """RE2 search per line; the first match's named groups become facts."""
    evidence: list[Evidence] = []
    found: tuple[tuple[str, FactValue], ...] = ()
    notes: list[str] = []
    lits = signal.literals
    if lits is not None and len(scope.lines) > _SWEEP_LINES and not any("\n" in x for x in lits):
        candidates: Iterable[LogLine] = (scope.lines[i] for i in scope.holding(lits))
    else:
        candidates = (
            line
            for line, folded in zip(scope.lines, scope.folded(), strict=True)
            # the cheap literal test spares RE2 (and UTF-8 encoding) most lines
            if lits is None or any(lit in folded for lit in lits)
        )
    for line in candidates:
        m = signal.compiled.search(line.text)
        if m is None:
            continue
        if not evidence:
            found, notes = _convert_groups(signal, m.groupdict())
        evidence.append(_evidence(line, signal))
        if len(evidence) >= MAX_EVIDENCE:
            break
    if not evidence:
        return NO
    return Outcome(True, tuple(evidence), found, detail="; ".join(notes))


def _convert_groups(
    signal: RegexSignal, groups: Mapping[str, str | None]
) -> tuple[tuple[tuple[str, FactValue], ...], list[str]]:
    """Convert captured groups to their declared units; unconvertible ones become notes."""
    facts: list[tuple[str, FactValue]] = []
    notes: list[str] = []
    for name, unit in signal.extract:
        raw = groups.get(name)
        if raw is None:
            continue
        value = convert(raw, unit)
        if value is None:
            notes.append(f"{signal.field}: '{raw}' is not a valid {unit} for '{name}'")
        else:
            facts.append((name, value))
    return tuple(facts), notes


def _frame_facts(frame: Frame) -> tuple[tuple[str, FactValue], ...]:
    """The facts a matching frame reports: function and kernel vocabulary."""
    k = frame.kernel
    pairs: list[tuple[str, FactValue | None]] = [
        ("function", frame.function), ("arch", k.arch), ("dtypes", k.dtypes or None),
        ("tile", k.tile), ("cluster", k.cluster), ("stages", k.stages),
    ]  # fmt: skip
    return tuple((name, value) for name, value in pairs if value is not None)


def _frame_matches(signal: FrameSignal, frame: Frame) -> bool:
    """Glob on the chosen field, then the arch/dtype/tile predicates."""
    value = getattr(frame, signal.on)
    if value is None or not signal.glob_match.matches(value):
        return False
    kernel = frame.kernel
    if signal.arch_match is not None and (
        kernel.arch is None or not signal.arch_match.matches(kernel.arch)
    ):
        return False
    if signal.dtype_match is not None and not any(
        signal.dtype_match.matches(d) for d in kernel.dtypes
    ):
        return False
    for test in signal.tile:
        if kernel.tile is None:
            return False
        if not _OPS[test.op](kernel.tile["mnk".index(test.axis)], test.value):
            return False
    return True


def _frame(signal: FrameSignal, scope: Scope, facts: Mapping[str, FactValue]) -> Outcome:
    """The first frame that satisfies the glob and kernel predicates, culprits first.

    Frames carry roles (diagnose.roles): kernel frames are tried before app code, and
    error-reporting machinery last, so facts never come from ``throwRuntimeError``.
    """
    for frame in culprit_first(scope.frames):
        if _frame_matches(signal, frame):
            text = frame.symbol or frame.function or ""
            ev = Evidence(frame.log_line, text[:EVIDENCE_CHARS], signal.field)
            return Outcome(True, (ev,), _frame_facts(frame))
    return NO


def _region_kind(signal: RegionKindSignal, scope: Scope, facts: Mapping[str, FactValue]) -> Outcome:
    """The scope's region kind (any region's, at log scope) is one of the listed kinds."""
    return Outcome(any(kind in signal.kinds for kind in scope.kinds))


def _context_items(context: Any, key: str) -> Iterator[tuple[Any, int | None]]:
    """Yield ``(value, line)`` for a context key: gpu, arch, ready, version.*, memory.*, args."""
    if context is None:
        return
    if key in ("gpu", "arch", "ready"):
        raw: Any = getattr(context, {"gpu": "gpus", "arch": "archs", "ready": "ready"}[key], ())
    elif key.startswith(("version.", "memory.")):
        table = "versions" if key.startswith("version.") else "memory"
        raw = getattr(context, table, {}).get(key.split(".", 1)[1])
    else:
        raw = getattr(context, "server_args", {}).get(key)
    items = raw if isinstance(raw, (list, tuple)) else () if raw is None else (raw,)
    for item in items:
        value = next(
            (getattr(item, a) for a in ("value", "name", "text") if hasattr(item, a)), item
        )
        yield value, getattr(item, "line", None)


def _as_number(value: Any) -> float | None:
    """``value`` as a float when it is (or spells) a number; booleans are not numbers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        return None


def _version(value: Any) -> tuple[int, ...]:
    """``"2.5.1+cu124"`` -> ``(2, 5, 1)``: the leading dotted numbers of a version."""
    head = re.split(r"[^0-9.]", str(value).strip(), maxsplit=1)[0]
    return tuple(int(p) for p in _VERSION_PART.findall(head))


def _context_test(signal: ContextSignal, value: Any) -> bool:
    """Compare one context value with the signal's ``op`` and ``value``."""
    if signal.op == "glob":
        return bool(signal.compiled.matches(str(value)))
    if signal.key.startswith("version.") and signal.op not in ("==", "!="):
        return _OPS[signal.op](_version(value), _version(signal.value))
    left, right = _as_number(value), _as_number(signal.value)
    if left is not None and right is not None:
        return _OPS[signal.op](left, right)
    if signal.op in ("==", "!="):
        return _OPS[signal.op](str(value).casefold(), str(signal.value).casefold())
    return False  # an ordering between non-numbers is never true


def _context(signal: ContextSignal, scope: Scope, facts: Mapping[str, FactValue]) -> Outcome:
    """A log-wide fact: present/absent, or any value satisfying the comparison."""
    items = list(_context_items(scope.context, signal.key))
    if signal.op in ("present", "absent"):
        if (signal.op == "present") != bool(items):
            return NO
        if not items:
            return Outcome(True)
    else:
        items = [(v, ln) for v, ln in items if _context_test(signal, v)]
        if not items:
            return NO
    value, line = items[0]
    fact = value if isinstance(value, (str, int, float)) else str(value)
    evidence = () if line is None else (Evidence(line, f"{signal.key} = {value}", signal.field),)
    return Outcome(True, evidence, ((signal.key, fact),))


def resolve_arch(facts: Mapping[str, FactValue], scope: Scope) -> tuple[Any, dict[str, FactValue]]:
    """Find the kb arch facts for this match: a fact ``arch``, the log's archs, then its GPUs."""
    kb = scope.kb
    if kb is None:
        return None, {}
    archs = [facts["arch"]] if isinstance(facts.get("arch"), str) else []
    archs += [v for v, _ in _context_items(scope.context, "arch")]
    for arch_id in archs:
        found = kb.arch(str(arch_id))
        if found is not None:
            return found, {"arch": found.arch}
    gpus = [facts["gpu"]] if isinstance(facts.get("gpu"), str) else []
    gpus += [v for v, _ in _context_items(scope.context, "gpu")]
    for gpu in gpus:
        found = kb.arch_for_gpu(str(gpu))
        if found is not None:
            return found, {"arch": found.arch, "gpu": str(gpu)}
    return None, {}


def _numeric(signal: NumericSignal, scope: Scope, facts: Mapping[str, FactValue]) -> Outcome:
    """``left op right`` on facts and kb hardware facts; undecidable when a side is unknown."""
    arch: Any = None
    new: dict[str, FactValue] = {}
    if signal.uses_hardware:
        arch, new = resolve_arch(facts, scope)

    def value(side: Operand) -> float | None:
        if side.kind == "number":
            return side.number
        if side.kind == "fact":
            return _as_number(facts.get(side.name))
        number = _as_number(getattr(arch, side.name, None)) if arch is not None else None
        if number is not None:
            new[f"arch.{side.name}"] = int(number) if number.is_integer() else number
        return number

    left, right = value(signal.left), value(signal.right)
    if left is None or right is None:
        missing = signal.left if left is None else signal.right
        return Outcome(None, detail=f"{signal.text}: {missing} unknown")
    held = _OPS[signal.op](left, right)
    where = f" on {new['arch']}" if "arch" in new else ""
    detail = f"{signal.text}: {left:g} {signal.op} {right:g}{where} is {str(held).lower()}"
    return Outcome(held, facts=tuple(new.items()), detail=detail, hardware=signal.uses_hardware)


def _fuzzy(signal: FuzzySignal, scope: Scope, facts: Mapping[str, FactValue]) -> Outcome:
    """Best rapidfuzz score of the phrase against any line; fires at ``min_score``."""
    from rapidfuzz import fuzz

    scorer = fuzz.partial_ratio if signal.method == "partial_ratio" else fuzz.token_set_ratio
    phrase = signal.phrase.casefold()
    best, best_line = 0.0, None
    for line, folded in zip(scope.lines, scope.folded(), strict=True):
        score = scorer(phrase, folded[:FUZZY_WINDOW], score_cutoff=max(best, signal.min_score))
        if score > best:
            best, best_line = score, line
    if best_line is None:
        return Outcome(False, score=best)
    return Outcome(True, (_evidence(best_line, signal),), score=round(best, 1))


_DISPATCH: Mapping[type, Callable[[Any, Scope, Mapping[str, FactValue]], Outcome]] = {
    TextSignal: _text,
    RegexSignal: _regex,
    FrameSignal: _frame,
    RegionKindSignal: _region_kind,
    ContextSignal: _context,
    NumericSignal: _numeric,
    FuzzySignal: _fuzzy,
}


def evaluate(signal: Signal, scope: Scope, facts: Mapping[str, FactValue]) -> Outcome:
    """Evaluate ``signal`` in ``scope``; ``facts`` are those found so far (numeric reads them)."""
    return _DISPATCH[type(signal)](signal, scope, facts)
