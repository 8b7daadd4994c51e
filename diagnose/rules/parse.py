"""Validate one parsed rule file and build its :class:`~diagnose.rules.schema.Rule`.

Every complaint is a :class:`~diagnose.errors.RuleFileError` naming the file,
the 1-based line and the dotted field (``match.any[1].regex``), so an author can
jump straight to the mistake.  Signals are compiled here (RE2 patterns, globs)
so matching never compiles or fails on syntax.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NoReturn, cast

from diagnose.errors import RuleFileError
from diagnose.globs import Glob
from diagnose.lazyre import LazyRE2, lazy
from diagnose.literals import regex_literals
from diagnose.rules import locate
from diagnose.rules.schema import (
    COMPARE_OPS,
    CONTEXT_OPS,
    EXPECTS,
    FRAME_FACTS,
    FRAME_FIELDS,
    FUZZY_METHODS,
    PLACEHOLDER_RE,
    SCOPES,
    SEVERITIES,
    UNITS,
    CompareOp,
    ContextOp,
    ContextSignal,
    Example,
    FrameSignal,
    FuzzyMethod,
    FuzzySignal,
    NumericSignal,
    Operand,
    RegexSignal,
    RegionKindSignal,
    Rule,
    Severity,
    Signal,
    TextSignal,
    TileTest,
    Unit,
)
from diagnose.tomlsource import CONTROL_ESCAPE, TomlSource, has_control_escape

TOP_KEYS = frozenset(
    {"id", "cause", "title", "severity", "confidence", "summary", "fallback"}
    | {"references", "aliases", "match", "examples"}
)
MATCH_KEYS = ("all", "any", "none", "optional", "confirm")
SIGNAL_KEYS: Mapping[str, frozenset[str]] = {
    "text": frozenset({"ignore_case"}),
    "regex": frozenset({"extract"}),
    "frame": frozenset({"on", "arch", "dtype", "tile_m", "tile_n", "tile_k"}),
    "region_kind": frozenset(),
    "context": frozenset({"op", "value"}),
    "numeric": frozenset(),
    "fuzzy": frozenset({"min_score", "method"}),
}
EXAMPLE_KEYS = frozenset({"name", "expect", "log", "facts", "reason"})
ID_RE = lazy(r"^[a-z0-9][a-z0-9-]*/[a-z0-9][a-z0-9-]*$")
REFERENCE_RE = lazy(r"^[\w.-]+/[\w.-]+#\d+$")
EXAMPLE_NAME_RE = lazy(r"^[a-z0-9][a-z0-9-]*$")
_NUMERIC_RE = lazy(r"^\s*(\S+)\s*(==|!=|<=|>=|<|>)\s*(\S+)\s*$")
_FACT_NAME_RE = lazy(r"^[A-Za-z_]\w*(?:\.\w+)?$")
_TILE_TEST_RE = lazy(r"^\s*(==|!=|<=|>=|<|>)?\s*(\d+)\s*$")
# RE2 runs in linear time because it has no backtracking features; name them plainly.
_RE2_REFUSED = lazy(r"\\[1-9]|\\k<|\(\?<?[=!]|\(\?>")


class _Parser:
    """Holds one rule file while it is validated; every ``fail`` names file, line and field."""

    def __init__(
        self,
        src: TomlSource,
        expected_id: str,
        known_cause: Callable[[str], bool],
        concepts: Mapping[str, str],
    ):
        self.src = src
        self.expected_id = expected_id
        self.known_cause = known_cause
        self.concepts = concepts
        self.facts: set[str] = set()
        self.fact_operands: list[tuple[str, str]] = []

    def fail(self, field: str | None, message: str) -> NoReturn:
        """Raise a located :class:`RuleFileError`."""
        raise locate.error(self.src, field, message)

    def check_keys(self, table: Mapping[str, Any], allowed: frozenset[str], prefix: str) -> None:
        """Reject keys the format does not define (a typo must not be silently ignored)."""
        for key in table:
            if key not in allowed:
                hint = ", ".join(sorted(allowed))
                self.fail(f"{prefix}{key}", f"unknown field '{key}' (allowed: {hint})")

    def get(self, table: Mapping[str, Any], key: str, kind: type | tuple[type, ...], field: str,
            default: Any = None, required: bool = False) -> Any:  # fmt: skip
        """Return ``table[key]`` checked against ``kind``; ``default`` when absent and optional."""
        if key not in table:
            if required:
                # Point at the table that lacks the key (line 1 for a top-level key).
                parent = field.rsplit(".", 1)[0] if "." in field else None
                line = locate.line_of(self.src, parent) if parent else 1
                raise RuleFileError(self.src.path, line, field, f"missing required field '{key}'")
            return default
        value = table[key]
        # TOML integers are fine where floats are expected; bools are not numbers here.
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            self.fail(field, f"expected {_kind_name(kind)}, got a boolean")
        if not isinstance(value, kind):
            self.fail(field, f"expected {_kind_name(kind)}, got {type(value).__name__}")
        return value

    def str_list(self, table: Mapping[str, Any], key: str, field: str) -> tuple[str, ...]:
        """Return a list of strings (empty when absent)."""
        items = self.get(table, key, list, field, default=[])
        for i, item in enumerate(items):
            if not isinstance(item, str):
                self.fail(f"{field}[{i}]", "expected a string")
        return tuple(items)

    # -- the rule -------------------------------------------------------------------------

    def rule(self) -> Rule:
        """Validate the whole file and return the rule."""
        data = self.src.data
        self.check_keys(data, TOP_KEYS, "")
        rule_id = self.get(data, "id", str, "id", required=True)
        if rule_id != self.expected_id:
            self.fail("id", f"id '{rule_id}' must equal the file path '{self.expected_id}'")
        if not ID_RE.match(rule_id):
            self.fail("id", "id must be '<cause>/<slug>' in lowercase letters, digits and '-'")
        cause = self.get(data, "cause", str, "cause", required=True)
        if rule_id.split("/")[0] != cause:
            self.fail("cause", f"cause '{cause}' must be the id's folder '{rule_id.split('/')[0]}'")
        if not self.known_cause(cause):
            self.fail("cause", f"unknown cause '{cause}' (not in the knowledge base)")
        severity = self.get(data, "severity", str, "severity", required=True)
        if severity not in SEVERITIES:
            self.fail("severity", f"severity must be one of {', '.join(SEVERITIES)}")
        confidence = float(self.get(data, "confidence", (int, float), "confidence", required=True))
        if not 0.0 <= confidence <= 1.0:
            self.fail("confidence", "confidence must be between 0 and 1")
        references = self.str_list(data, "references", "references")
        if not references:
            self.fail("references" if "references" in data else "id", "at least one reference")
        for i, ref in enumerate(references):
            if not REFERENCE_RE.match(ref):
                self.fail(f"references[{i}]", f"'{ref}' is not owner/repo#number")
        match = self.get(data, "match", dict, "match", required=True)
        scope, sections = self.match(match)
        summary = self.get(data, "summary", str, "summary", required=True)
        fallback = self.get(data, "fallback", str, "fallback", default="")
        self.check_placeholders(summary, "summary")
        self.check_placeholders(fallback, "fallback")
        for field, name in self.fact_operands:
            if name not in self.facts:
                self.fail(field, f"numeric operand '{name}' is not a fact any signal extracts")
        return Rule(
            id=rule_id,
            cause=cause,
            title=self.get(data, "title", str, "title", required=True),
            severity=cast(Severity, severity),
            confidence=confidence,
            summary=summary,
            fallback=fallback,
            path=self.src.path,
            scope=scope,
            references=references,
            aliases=self.str_list(data, "aliases", "aliases"),
            examples=self.examples(data),
            facts=frozenset(self.facts),
            **sections,
        )

    def match(self, match: Mapping[str, Any]) -> tuple[Any, dict[str, tuple[Signal, ...]]]:
        """Validate ``[match]``: scope and the five signal lists."""
        self.check_keys(match, frozenset({"scope", *MATCH_KEYS}), "match.")
        scope = self.get(match, "scope", str, "match.scope", default="region")
        if scope not in SCOPES:
            self.fail("match.scope", f"scope must be one of {', '.join(SCOPES)}")
        sections: dict[str, tuple[Signal, ...]] = {}
        for key in MATCH_KEYS:
            items = self.get(match, key, list, f"match.{key}", default=[])
            sections[key] = tuple(
                self.signal(item, f"match.{key}[{i}]") for i, item in enumerate(items)
            )
        if not sections["all"] and not sections["any"]:
            self.fail("match", "a rule needs at least one 'all' or 'any' signal")
        return scope, sections

    def check_placeholders(self, text: str, field: str) -> None:
        """Every ``{fact}`` in explanation text must be a fact some signal extracts."""
        for m in PLACEHOLDER_RE.finditer(text):
            if m.group(1) not in self.facts:
                declared = ", ".join(sorted(self.facts)) or "none"
                self.fail(
                    field, f"placeholder '{{{m.group(1)}}}' is not a declared fact ({declared})"
                )
            if m.group(2) not in (None, "size"):
                self.fail(field, f"unknown format ':{m.group(2)}' (only ':size')")

    # -- signals --------------------------------------------------------------------------

    def signal(self, item: Any, field: str) -> Signal:
        """Validate one inline signal table: exactly one kind key plus that kind's options."""
        if not isinstance(item, dict):
            self.fail(field, 'a signal is an inline table such as { text = "..." }')
        kinds = [k for k in item if k in SIGNAL_KEYS]
        if len(kinds) != 1:
            found = ", ".join(kinds) or "none"
            self.fail(
                field, f"a signal needs exactly one of {', '.join(SIGNAL_KEYS)} (found {found})"
            )
        kind = kinds[0]
        self.check_keys(item, SIGNAL_KEYS[kind] | {kind}, f"{field}.")
        builder: Callable[[dict[str, Any], str], Signal] = getattr(self, f"sig_{kind}")
        return builder(item, field)

    def sig_text(self, item: dict[str, Any], field: str) -> Signal:
        """``{ text = "literal", ignore_case = true }``."""
        literal = self.get(item, "text", str, f"{field}.text")
        if not literal:
            self.fail(f"{field}.text", "empty text")
        ignore = self.get(item, "ignore_case", bool, f"{field}.ignore_case", default=False)
        return TextSignal(field, literal, ignore)

    def sig_regex(self, item: dict[str, Any], field: str) -> Signal:
        """``{ regex = '...(?P<name>...)', extract = { name = "bytes" } }``."""
        pattern = self.get(item, "regex", str, f"{field}.regex")
        if has_control_escape(pattern):
            self.fail(f"{field}.regex", CONTROL_ESCAPE)
        expanded = self.expand(pattern, f"{field}.regex")
        compiled = self.compile(expanded, f"{field}.regex")
        groups = tuple(sorted(compiled.groupindex, key=compiled.groupindex.get))
        units = self.get(item, "extract", dict, f"{field}.extract", default={})
        for name, unit in units.items():
            if name not in groups:
                self.fail(f"{field}.extract", f"'{name}' is not a named group of the regex")
            if unit not in UNITS:
                self.fail(f"{field}.extract", f"unit of '{name}' must be one of {', '.join(UNITS)}")
        self.facts.update(groups)
        extract = tuple((g, cast(Unit, units.get(g, "str"))) for g in groups)
        return RegexSignal(field, pattern, compiled, extract, groups, regex_literals(expanded))

    def expand(self, pattern: str, field: str) -> str:
        """Put each ``{{concept}}``'s alternation in place (kb/concepts/, diagnose.concepts)."""
        from diagnose.concepts import REFERENCE_RE, expand

        for m in REFERENCE_RE.finditer(pattern):
            if m.group(1) not in self.concepts:
                known = ", ".join(sorted(self.concepts)) or "none"
                self.fail(field, f"unknown concept '{{{{{m.group(1)}}}}}' (known: {known})")
        return expand(pattern, dict(self.concepts))

    def sig_frame(self, item: dict[str, Any], field: str) -> Signal:
        """``{ frame = "glob", on = "function", arch = "sm_12*", dtype = "fp4*", tile_m = 64 }``."""
        glob = self.get(item, "frame", str, f"{field}.frame")
        on = self.get(item, "on", str, f"{field}.on", default="function")
        if on not in FRAME_FIELDS:
            self.fail(f"{field}.on", f"on must be one of {', '.join(FRAME_FIELDS)}")
        arch = self.get(item, "arch", str, f"{field}.arch")
        dtype = self.get(item, "dtype", str, f"{field}.dtype")
        tiles: list[TileTest] = []
        for axis in "mnk":
            raw = self.get(item, f"tile_{axis}", (int, str), f"{field}.tile_{axis}")
            if raw is None:
                continue
            m = _TILE_TEST_RE.match(str(raw))
            if m is None:
                self.fail(f"{field}.tile_{axis}", "write a number or a comparison like '>= 128'")
            tiles.append(TileTest(axis, cast(CompareOp, m.group(1) or "=="), int(m.group(2))))
        self.facts.update(FRAME_FACTS)
        return FrameSignal(
            field, glob, on, arch, dtype, tuple(tiles),
            glob_match=Glob.compile(glob),
            arch_match=Glob.compile(arch) if arch else None,
            dtype_match=Glob.compile(dtype) if dtype else None,
        )  # fmt: skip

    def sig_region_kind(self, item: dict[str, Any], field: str) -> Signal:
        """``{ region_kind = "python-traceback" }`` or a list of kinds."""
        raw = item["region_kind"]
        kinds = (raw,) if isinstance(raw, str) else self.str_list(item, "region_kind", field)
        known = _region_kinds()
        for kind in kinds:
            if known is not None and kind not in known:
                self.fail(f"{field}.region_kind", f"unknown region kind '{kind}'")
        return RegionKindSignal(field, tuple(kinds))

    def sig_context(self, item: dict[str, Any], field: str) -> Signal:
        """``{ context = "ep_size", op = ">=", value = 2 }``; ``op`` defaults to ``present``."""
        key = self.get(item, "context", str, f"{field}.context")
        op = self.get(item, "op", str, f"{field}.op", default="present")
        if op not in CONTEXT_OPS:
            self.fail(f"{field}.op", f"op must be one of {', '.join(CONTEXT_OPS)}")
        value = self.get(item, "value", (str, int, float), f"{field}.value")
        if op in ("present", "absent") and value is not None:
            self.fail(f"{field}.value", f"op '{op}' takes no value")
        if op not in ("present", "absent") and value is None:
            self.fail(field, f"op '{op}' needs a value")
        compiled = None
        if op == "glob":
            if not isinstance(value, str):
                self.fail(f"{field}.value", "a glob is a string")
            compiled = Glob.compile(value, ignore_case=True)
        self.facts.add(key)
        return ContextSignal(field, key, cast(ContextOp, op), value, compiled)

    def sig_numeric(self, item: dict[str, Any], field: str) -> Signal:
        """``{ numeric = "smem_required > arch.smem_optin" }``."""
        text = self.get(item, "numeric", str, f"{field}.numeric")
        m = _NUMERIC_RE.match(text)
        if m is None:
            self.fail(f"{field}.numeric", "write '<operand> <op> <operand>', op one of "
                      + ", ".join(COMPARE_OPS))  # fmt: skip
        left = self.operand(m.group(1), f"{field}.numeric")
        right = self.operand(m.group(3), f"{field}.numeric")
        if left.kind == "number" and right.kind == "number":
            self.fail(f"{field}.numeric", "compare at least one fact, not two numbers")
        for side in (left, right):
            if side.kind == "arch":
                self.facts.update({"arch", "gpu", f"arch.{side.name}"})
        return NumericSignal(field, text.strip(), left, cast(CompareOp, m.group(2)), right)

    def operand(self, token: str, field: str) -> Operand:
        """Parse one numeric operand: a number, ``arch.<attr>`` or a fact name."""
        try:
            return Operand("number", number=float(token))
        except ValueError:
            pass
        if token.startswith("arch."):
            attr = token[len("arch.") :]
            known = _arch_attrs()
            if attr not in known:
                names = ", ".join(sorted(known))
                self.fail(field, f"unknown hardware fact '{token}' (known: {names})")
            return Operand("arch", attr)
        if not _FACT_NAME_RE.match(token):
            self.fail(field, f"'{token}' is neither a number, arch.<attr> nor a fact name")
        self.fact_operands.append((field, token))
        return Operand("fact", token)

    def sig_fuzzy(self, item: dict[str, Any], field: str) -> Signal:
        """``{ fuzzy = "phrase", min_score = 90, method = "partial_ratio" }``."""
        phrase = self.get(item, "fuzzy", str, f"{field}.fuzzy")
        if not 3 <= len(phrase) <= 200:
            self.fail(f"{field}.fuzzy", "a fuzzy phrase is 3 to 200 characters")
        score = self.get(item, "min_score", (int, float), f"{field}.min_score", required=True)
        if not 50 <= score <= 100:
            self.fail(f"{field}.min_score", "min_score must be between 50 and 100")
        method = self.get(item, "method", str, f"{field}.method", default="partial_ratio")
        if method not in FUZZY_METHODS:
            self.fail(f"{field}.method", f"method must be one of {', '.join(FUZZY_METHODS)}")
        return FuzzySignal(field, phrase, float(score), cast(FuzzyMethod, method))

    def compile(self, pattern: str, field: str) -> Any:
        """Compile ``pattern`` with RE2, explaining what RE2 refuses and why."""
        import re2

        options = re2.Options()
        options.log_errors = False  # the library never prints; the error goes into the message
        try:
            return LazyRE2.wrap(re2.compile(pattern, options=options))
        except re2.error as exc:
            why = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            if _RE2_REFUSED.search(pattern):
                why += (
                    "; RE2 has no backreferences or lookaround (that is what keeps matching"
                    " linear): match the text plainly and put exclusions in a 'none' signal"
                )
            self.fail(field, f"invalid RE2 regex: {why}")

    # -- examples -------------------------------------------------------------------------

    def examples(self, data: Mapping[str, Any]) -> tuple[Example, ...]:
        """Validate ``[[examples]]``: at least one ``match`` and one ``no-match``."""
        items = self.get(data, "examples", list, "examples", default=[])
        # One pass finds every [[examples]] header (was one scan of the file per example).
        header_lines = self.src.array_table_lines("examples")
        out: list[Example] = []
        for i, item in enumerate(items):
            field = f"examples[{i}]"
            if not isinstance(item, dict):
                self.fail(field, "examples are [[examples]] tables")
            self.check_keys(item, EXAMPLE_KEYS, f"{field}.")
            name = self.get(item, "name", str, f"{field}.name", required=True)
            if not EXAMPLE_NAME_RE.match(name) or name in {e.name for e in out}:
                self.fail(f"{field}.name", f"example name '{name}' must be unique kebab-case")
            expect = self.get(item, "expect", str, f"{field}.expect", required=True)
            if expect not in EXPECTS:
                self.fail(f"{field}.expect", f"expect must be one of {', '.join(EXPECTS)}")
            reason = self.get(item, "reason", str, f"{field}.reason", default="")
            if expect.startswith("todo") and not reason:
                self.fail(field, f"a '{expect}' example needs a 'reason' (the known gap)")
            log = self.get(item, "log", str, f"{field}.log", required=True)
            if not log.strip():
                self.fail(f"{field}.log", "empty log")
            facts = self.get(item, "facts", dict, f"{field}.facts", default={})
            for key in facts:
                if key not in self.facts:
                    self.fail(f"{field}.facts", f"'{key}' is not a fact this rule extracts")
            if i < len(header_lines):
                line: int | None = header_lines[i]
            else:  # inline `examples = [...]`: locate walks the array
                line = locate.line_of(self.src, field)
            out.append(Example(name, expect, log, tuple(facts.items()), reason, line))
        for want in ("match", "no-match"):
            if not any(e.expect == want for e in out):
                self.fail("examples" if items else "id", f"needs at least one '{want}' example")
        return tuple(out)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    """Human name of an expected TOML type."""
    names = {str: "a string", int: "an integer", float: "a number", bool: "true/false",
             list: "a list", dict: "a table"}  # fmt: skip
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _region_kinds() -> frozenset[str] | None:
    """Region kinds the region finder can produce, or ``None`` when it is not available."""
    try:
        from diagnose.regions import REGION_KINDS
    except ImportError:
        return None
    return frozenset(REGION_KINDS)


def _arch_attrs() -> frozenset[str]:
    """Fields of the knowledge base's per-arch facts that a numeric check may read."""
    import dataclasses

    from diagnose.kb import ArchFacts

    return frozenset(f.name for f in dataclasses.fields(ArchFacts))


def parse_rule(
    src: TomlSource,
    expected_id: str,
    known_cause: Callable[[str], bool],
    concepts: Mapping[str, str] | None = None,
) -> Rule:
    """Validate ``src`` (a rule file expected to hold ``expected_id``) and return its rule.

    ``concepts`` maps concept names to the alternations ``{{name}}`` stands for in regexes.
    """
    return _Parser(src, expected_id, known_cause, concepts or {}).rule()
