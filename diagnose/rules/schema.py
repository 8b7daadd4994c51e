"""Frozen, validated form of a rule file: signals, examples and the rule itself.

The loader (:mod:`diagnose.rules.loader`) builds these from TOML; the engine
(:mod:`diagnose.rules.engine`) only reads them.  Each signal keeps ``field``, the
dotted path of the TOML entry that defined it (``match.all[0]``), so evidence and
error messages can point back at the rule file.  Compiled RE2 patterns live on the
signal (``compare=False``) so matching never compiles anything.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, Literal

from diagnose.globs import Glob  # at run time: a rule snapshot holds Glob objects
from diagnose.lazyre import lazy
from diagnose.model import FactValue
from diagnose.records import record
from diagnose.snapshot import storable

Severity = Literal["fatal", "warning", "info"]
Expect = Literal["match", "no-match", "todo-match", "todo-no-match"]
Scope = Literal["region", "log"]
Unit = Literal["str", "int", "float", "bytes"]
CompareOp = Literal["==", "!=", "<", "<=", ">", ">="]
ContextOp = Literal["==", "!=", "<", "<=", ">", ">=", "glob", "present", "absent"]
FuzzyMethod = Literal["partial_ratio", "token_set_ratio"]

SEVERITIES: tuple[Severity, ...] = ("fatal", "warning", "info")
EXPECTS: tuple[Expect, ...] = ("match", "no-match", "todo-match", "todo-no-match")
SCOPES: tuple[Scope, ...] = ("region", "log")
UNITS: tuple[Unit, ...] = ("str", "int", "float", "bytes")
COMPARE_OPS: tuple[CompareOp, ...] = ("==", "!=", "<", "<=", ">", ">=")
CONTEXT_OPS: tuple[ContextOp, ...] = (*COMPARE_OPS, "glob", "present", "absent")
FUZZY_METHODS: tuple[FuzzyMethod, ...] = ("partial_ratio", "token_set_ratio")
FRAME_FIELDS = ("function", "symbol", "module", "file")
#: Facts a matching ``frame`` signal reports (from :class:`~diagnose.model.KernelFacts`).
FRAME_FACTS = ("function", "arch", "dtypes", "tile", "cluster", "stages")
#: A ``{fact}`` or ``{fact:size}`` placeholder in a rule's summary or fallback text.
PLACEHOLDER_RE = lazy(r"\{([A-Za-z_][\w.]*)(?::(\w+))?\}")


@record
class TextSignal:
    """A literal substring of one line (optionally case-insensitive)."""

    field: str
    literal: str
    ignore_case: bool = False


@record
class RegexSignal:
    """An RE2 pattern searched in each line; named groups become facts converted by ``extract``."""

    field: str
    pattern: str
    compiled: Any = dataclasses.field(compare=False, repr=False)
    extract: tuple[tuple[str, Unit], ...] = ()
    groups: tuple[str, ...] = ()
    #: Case-folded literals one of which every match contains (``None``: unknown); see prefilter.
    literals: frozenset[str] | None = None


@record
class TileTest:
    """One comparison on a frame's CTA tile: ``axis`` is ``m``, ``n`` or ``k``."""

    axis: str
    op: CompareOp
    value: int


@record
class FrameSignal:
    """A glob on one frame field plus optional kernel-vocabulary predicates (arch, dtype, tile).

    Globs know ``*`` and ``?`` only and must match the whole value; they are
    compiled to :class:`~diagnose.globs.Glob` (``*_match``): linear time, no backtracking.
    """

    field: str
    glob: str
    on: str = "function"
    arch_glob: str | None = None
    dtype_glob: str | None = None
    tile: tuple[TileTest, ...] = ()
    glob_match: Any = dataclasses.field(default=None, compare=False, repr=False)
    arch_match: Glob | None = dataclasses.field(default=None, compare=False, repr=False)
    dtype_match: Glob | None = dataclasses.field(default=None, compare=False, repr=False)


@record
class RegionKindSignal:
    """The region was opened by one of ``kinds`` (at log scope: any region of those kinds)."""

    field: str
    kinds: tuple[str, ...]


@record
class ContextSignal:
    """A log-wide fact: a server arg, ``gpu``, ``arch``, ``ready``, ``version.*``, ``memory.*``."""

    field: str
    key: str
    op: ContextOp
    value: str | int | float | None = None
    compiled: Any = dataclasses.field(default=None, compare=False, repr=False)


@record
class Operand:
    """One side of a numeric predicate: a fact name, ``arch.<attr>`` (kb hardware) or a number."""

    kind: Literal["fact", "arch", "number"]
    name: str = ""
    number: float = 0.0

    def __str__(self) -> str:
        """Render the operand as written in the rule."""
        if self.kind == "number":
            return f"{self.number:g}"
        return self.name if self.kind == "fact" else f"arch.{self.name}"


@record
class NumericSignal:
    """``left op right`` on extracted facts and kb hardware facts, e.g. ``x > arch.smem_optin``."""

    field: str
    text: str
    left: Operand
    op: CompareOp
    right: Operand

    @property
    def uses_hardware(self) -> bool:
        """True when either side reads a knowledge-base hardware fact."""
        return self.left.kind == "arch" or self.right.kind == "arch"


@record
class FuzzySignal:
    """A rapidfuzz similarity of ``phrase`` to a line of at least ``min_score`` (0-100)."""

    field: str
    phrase: str
    min_score: float
    method: FuzzyMethod = "partial_ratio"


Signal = (
    TextSignal
    | RegexSignal
    | FrameSignal
    | RegionKindSignal
    | ContextSignal
    | NumericSignal
    | FuzzySignal
)


@record
class Example:
    """A log snippet the rule must (or, for ``no-match``, must not) match."""

    name: str
    expect: Expect
    log: str
    facts: tuple[tuple[str, FactValue | bool], ...] = ()
    reason: str = ""
    line: int | None = None


@record
class Rule:
    """One validated rule: what it means (cause, title, summary) and how it matches.

    ``all`` signals must all fire, at least one ``any`` signal must fire (when
    there are any), no ``none`` signal may fire.  ``optional`` signals never
    gate; they only add facts and evidence.  ``confirm`` signals never gate
    either: when they hold the confidence rises (and the tier becomes
    ``hardware`` if they read kb hardware facts); when they are false it falls.
    """

    id: str
    cause: str
    title: str
    severity: Severity
    confidence: float
    summary: str
    path: str
    scope: Scope = "region"
    fallback: str = ""
    references: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    all: tuple[Signal, ...] = ()
    any: tuple[Signal, ...] = ()
    none: tuple[Signal, ...] = ()
    optional: tuple[Signal, ...] = ()
    confirm: tuple[Signal, ...] = ()
    examples: tuple[Example, ...] = ()
    facts: frozenset[str] = frozenset()

    @property
    def fatal(self) -> bool:
        """True when a match means the process died (severity ``fatal``)."""
        return self.severity == "fatal"

    def signals(self) -> Iterator[Signal]:
        """Yield every signal of the rule, gating ones first."""
        yield from self.all
        yield from self.any
        yield from self.none
        yield from self.optional
        yield from self.confirm


storable(
    TextSignal,
    RegexSignal,
    TileTest,
    FrameSignal,
    RegionKindSignal,
    ContextSignal,
    Operand,
    NumericSignal,
    FuzzySignal,
    Example,
    Rule,
)
