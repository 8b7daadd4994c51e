"""Typed, frozen result objects shared by every stage of the pipeline.

The parser produces :class:`LogLine`, :class:`Frame` and :class:`Region`; the
diagnosis adds findings on top.  Everything here is immutable and carries the
ORIGINAL 1-based line numbers of the user's file so evidence always points at
what the user sees.  ``to_dict`` methods define the public JSON contract: add
fields freely, never rename or drop one without bumping ``SCHEMA_VERSION``.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from diagnose.records import record

SCHEMA_VERSION = 1


@record
class LogLine:
    """One normalised line of the input and the original line number it came from.

    ``rank`` keeps the process/rank identity a log prefix named (``TP3``,
    ``rank=2``, ``1,6``) after the prefix itself was stripped from ``text``;
    ``level`` the log level it named (``"WARNING"``, ``"ERROR"``, ...), which says
    whether an error-looking line was only logged as a warning; ``prefixed`` whether a
    log or process prefix was taken off it (it starts a record of its own).  Two lines
    with the same number, text and rank are equal whatever their level and prefix.
    """

    number: int
    text: str
    rank: str | None = None
    level: str | None = field(default=None, compare=False)
    prefixed: bool = field(default=False, compare=False)


@record
class TemplateArg:
    """One template argument: its text, the qualified name at its top level, and nested args.

    ``truncated`` is True when the log cut the name inside this argument (its text
    is only the prefix that survived, e.g. ``__nv_bf`` for ``__nv_bfloat16``).
    """

    text: str
    name: str | None = None
    args: tuple[TemplateArg, ...] = ()
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form: ``{"text", "name", "args": [...], "truncated"}``."""
        return {
            "text": self.text,
            "name": self.name,
            "args": [a.to_dict() for a in self.args],
            "truncated": self.truncated,
        }


@record
class ParsedName:
    """A demangled C++ name split into its parts (see :func:`diagnose.parse_name`).

    ``scope`` is the namespace/class path without template arguments, ``name`` the
    last component, ``qualified`` both joined with ``::``.  ``template_args`` are
    the arguments of the last templated component of the function name itself.
    ``params`` is ``None`` when the text had no parameter list (a variable, a
    truncated name).  ``special`` holds prefixes such as ``vtable for``.
    """

    text: str
    qualified: str
    scope: tuple[str, ...] = ()
    name: str = ""
    template_args: tuple[TemplateArg, ...] = ()
    params: tuple[str, ...] | None = None
    return_type: str = ""
    qualifiers: tuple[str, ...] = ()
    abi_tags: tuple[str, ...] = ()
    clones: tuple[str, ...] = ()
    special: str = ""
    truncated: bool = False


@record
class KernelFacts:
    """Kernel vocabulary read from a frame's name: arch, canonical dtypes, tile shapes."""

    arch: str | None = None
    dtypes: tuple[str, ...] = ()
    tile: tuple[int, int, int] | None = None
    cluster: tuple[int, int, int] | None = None
    stages: int | None = None

    def is_empty(self) -> bool:
        """True when nothing was recognised."""
        return (
            self.arch is None
            and not self.dtypes
            and self.tile is None
            and self.cluster is None
            and self.stages is None
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (tuples become lists)."""
        return {
            "arch": self.arch,
            "dtypes": list(self.dtypes),
            "tile": list(self.tile) if self.tile else None,
            "cluster": list(self.cluster) if self.cluster else None,
            "stages": self.stages,
        }


@record
class Frame:
    """One stack frame in any dialect (C++ backtrace, gdb, sanitizer, c10, Python).

    ``log_line`` is the original 1-based line number in the user's file; ``line``
    is the source line the frame names (``file.cc:12`` gives 12).  ``symbol`` is
    the symbol as written, ``function`` the qualified name without template
    arguments or parameters, ``mangled`` the ``_Z`` name when the log showed one.
    """

    log_line: int
    dialect: str
    index: int | None = None
    address: str | None = None
    module: str | None = None
    offset: str | None = None
    symbol: str | None = None
    function: str | None = None
    template_args: tuple[TemplateArg, ...] = ()
    params: tuple[str, ...] | None = None
    file: str | None = None
    line: int | None = None
    truncated: bool = False
    mangled: str | None = None
    kernel: KernelFacts = field(default_factory=KernelFacts)
    # machinery | kernel | runtime | app (diagnose.roles); "" until roles are assigned.
    role: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form of the frame (the public contract)."""
        return {
            "log_line": self.log_line,
            "dialect": self.dialect,
            "index": self.index,
            "address": self.address,
            "module": self.module,
            "offset": self.offset,
            "symbol": self.symbol,
            "function": self.function,
            "template_args": [a.to_dict() for a in self.template_args],
            "params": list(self.params) if self.params is not None else None,
            "file": self.file,
            "line": self.line,
            "truncated": self.truncated,
            "mangled": self.mangled,
            "kernel": None if self.kernel.is_empty() else self.kernel.to_dict(),
            "role": self.role,
        }


@record
class Region:
    """One distinct failure: the lines that belong to it and the frames parsed from them.

    ``kind`` names what opened the region (see ``diagnose.regions.REGION_KINDS``).
    ``lines`` is ``(first, last)`` in original line numbers; ``body`` holds the
    normalised lines.  When several ranks printed the same failure it is kept
    once, with ``count`` copies seen and the ``ranks`` that printed it; ``last_line``
    is the last line of the last copy (0 when there is one copy, or all sit in ``lines``).
    """

    kind: str
    lines: tuple[int, int]
    message: str
    message_line: int
    body: tuple[LogLine, ...] = ()
    frames: tuple[Frame, ...] = ()
    count: int = 1
    ranks: tuple[str, ...] = ()
    truncated: bool = False
    last_line: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form of the region (the public contract)."""
        return {
            "kind": self.kind,
            "lines": list(self.lines),
            "count": self.count,
            "last_line": self.last_line or self.lines[1],
            "ranks": list(self.ranks),
            "message": self.message,
            "message_line": self.message_line,
            "truncated": self.truncated,
            "frames": [f.to_dict() for f in self.frames],
        }


#: A fact a rule extracted: a number (bytes, counts), a string (arch, gpu), a tuple (tile).
FactValue = str | int | float | tuple[int, ...] | tuple[str, ...]


@record
class Evidence:
    """One log line that made a rule signal fire; ``signal`` names the signal (``match.all[0]``)."""

    line: int
    text: str
    signal: str

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form: ``{"line", "text", "signal"}``."""
        return {"line": self.line, "text": self.text, "signal": self.signal}


@record
class Finding:
    """One rule that matched one region (or the whole log when ``region_index`` is ``None``).

    ``tier`` says how strong the support is: ``"pattern"`` (the text matched),
    ``"hardware"`` (a numeric check against the knowledge base's hardware facts
    held, e.g. required shared memory above the arch's opt-in limit) or
    ``"verified"`` (reproduced on a GPU).  ``facts`` and ``scores`` are
    ``(name, value)`` pairs in the order the rule produced them; ``summary`` is
    the rule's explanation with those facts filled in.
    """

    rule_id: str
    cause: str
    title: str
    severity: str
    fatal: bool
    confidence: float
    tier: str
    region_index: int | None
    evidence: tuple[Evidence, ...] = ()
    facts: tuple[tuple[str, FactValue], ...] = ()
    scores: tuple[tuple[str, float], ...] = ()
    notes: tuple[str, ...] = ()
    summary: str = ""

    def fact(self, name: str) -> FactValue | None:
        """Return the fact called ``name``, or ``None`` when the rule did not extract it."""
        for key, value in self.facts:
            if key == name:
                return value
        return None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form of the finding (the public contract)."""
        return {
            "rule_id": self.rule_id,
            "cause": self.cause,
            "title": self.title,
            "severity": self.severity,
            "fatal": self.fatal,
            "confidence": round(self.confidence, 4),
            "tier": self.tier,
            "region_index": self.region_index,
            "summary": self.summary,
            "evidence": [e.to_dict() for e in self.evidence],
            "facts": {k: list(v) if isinstance(v, tuple) else v for k, v in self.facts},
            "scores": dict(self.scores),
            "notes": list(self.notes),
        }
