"""Concept vocabularies (``kb/concepts/*.toml``): named word classes that rules compose.

A concept is what many wordings have in common: a GPU architecture in any spelling
(``sm_120``, ``SM120``, ``sm120a``, ``compute capability 12.0``, ``arch major 10``,
``Blackwell``, ``RTX 5090``), a "this is not supported" predicate, a problem-shape word.
A rule's regex names one as ``{{arch}}`` and the rule loader puts the concept's alternation
there, so one rule can say "a predicate of unsupport next to an architecture" and catch
wordings nobody wrote a rule for.

Each file is one concept::

    name = "arch"                  # must equal the file stem
    description = "..."
    patterns = ['sm_?\\d{2,3}[af]?', ...]   # RE2 fragments, no capturing groups
    gpus = true                    # also every product and family name of kb/gpus.toml
    examples = ["sm_120", ...]     # each must be matched whole (checked at load)
    non_examples = ["smem", ...]   # none may be matched anywhere (checked at load)
    references = ["owner/repo#N"]  # optional: threads that showed a wording

Loading validates every field and fails naming file, line and field, as for causes.
Patterns are matched case-insensitively wherever a rule uses them with ``(?i)``; the load
checks examples that way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from diagnose.lazyre import lazy
from diagnose.records import record
from diagnose.snapshot import storable
from diagnose.tomlsource import CONTROL_ESCAPE, TomlSource, has_control_escape, load_toml

__all__ = ["REFERENCE_RE", "Concept", "expand", "parse_concepts"]

#: How a rule's regex names a concept: ``{{arch}}``.  Double braces never occur in RE2
#: syntax (a repetition is ``{n,m}``), so the reference cannot be mistaken for a pattern.
REFERENCE_RE = lazy(r"\{\{([a-z][a-z0-9-]*)\}\}")
_NAME = lazy(r"^[a-z][a-z0-9-]*$")
_REF_ID = lazy(r"^[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+#\d+$")
_KEYS = {
    "name": str,
    "description": str,
    "patterns": list,
    "gpus": bool,
    "examples": list,
    "non_examples": list,
    "references": list,
}
_REQUIRED = ("name", "description", "patterns", "examples", "non_examples")


@record
class Concept:
    """One named word class; ``pattern`` is its non-capturing RE2 alternation."""

    name: str
    description: str
    pattern: str
    examples: tuple[str, ...]
    non_examples: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    path: str = ""


def expand(pattern: str, concepts: dict[str, str]) -> str:
    """Replace each ``{{name}}`` in ``pattern`` with that concept's alternation.

    ``KeyError`` names the first unknown concept.
    """
    if "{{" not in pattern:
        return pattern

    def sub(m: re.Match[str]) -> str:
        return concepts[m.group(1)]

    return REFERENCE_RE.sub(sub, pattern)


def parse_concepts(
    folders: Iterable[Path], gpu_names: Sequence[str], family_names: Sequence[str]
) -> tuple[Concept, ...]:
    """Load every ``concepts/*.toml`` under ``folders`` (later folders may add, not replace).

    ``gpu_names`` and ``family_names`` (from kb/gpus.toml) join concepts that say
    ``gpus = true``.
    """
    found: dict[str, Concept] = {}
    for folder in folders:
        for path in sorted((folder / "concepts").glob("*.toml")):
            concept = _parse(load_toml(path), path, gpu_names, family_names)
            if concept.name in found:
                raise load_toml(path).error(
                    "name",
                    f"concept '{concept.name}' already defined in {found[concept.name].path}",
                )
            found[concept.name] = concept
    return tuple(found.values())


def _parse(
    src: TomlSource, path: Path, gpu_names: Sequence[str], family_names: Sequence[str]
) -> Concept:
    data: dict[str, Any] = src.data
    for key in data:
        if key not in _KEYS:
            raise src.error(key, f"unknown field (known: {', '.join(_KEYS)})")
    for key in _REQUIRED:
        if key not in data:
            raise src.error(None, f"missing required field '{key}'")
    for key, kind in _KEYS.items():
        if key in data and not isinstance(data[key], kind):
            raise src.error(key, f"must be {kind.__name__}")
        if kind is list and key in data:
            for i, item in enumerate(data[key]):
                if not isinstance(item, str) or not item.strip():
                    raise src.error(f"{key}[{i}]", "must be a non-empty string")
    name = data["name"]
    if not _NAME.match(name) or name != path.stem:
        raise src.error("name", f"'{name}' must be lowercase and equal the file name '{path.stem}'")
    import re2  # lazy: only a kb load (not a snapshot hit) validates

    parts: list[str] = []
    for i, fragment in enumerate(data["patterns"]):
        field = f"patterns[{i}]"
        if has_control_escape(fragment):
            raise src.error(field, CONTROL_ESCAPE)
        try:
            compiled = re2.compile(fragment)
        except re2.error as exc:
            raise src.error(field, f"not a valid RE2 pattern: {exc}") from exc
        if compiled.groups:
            raise src.error(field, "must not capture: write (?:...) instead of (...)")
        if "{{" in fragment:
            raise src.error(field, "a concept cannot name another concept")
        parts.append(fragment)
    if data.get("gpus"):
        words = sorted({*gpu_names, *family_names}, key=len, reverse=True)
        parts.extend(r"\b" + r"\s?".join(map(re.escape, w.split())) + r"\b" for w in words)
    pattern = "(?:" + "|".join(parts) + ")"
    whole = re2.compile(f"(?i)^{pattern}$")
    anywhere = re2.compile(f"(?i){pattern}")
    for i, example in enumerate(data["examples"]):
        if not whole.search(example):
            raise src.error(f"examples[{i}]", f"'{example}' is not matched whole by any pattern")
    for i, example in enumerate(data["non_examples"]):
        if anywhere.search(example):
            raise src.error(f"non_examples[{i}]", f"'{example}' is matched but must not be")
    for i, ref in enumerate(data.get("references", ())):
        if not _REF_ID.match(ref):
            raise src.error(f"references[{i}]", f"'{ref}' is not owner/repo#N")
    return Concept(
        name=name,
        description=data["description"],
        pattern=pattern,
        examples=tuple(data["examples"]),
        non_examples=tuple(data["non_examples"]),
        references=tuple(data.get("references", ())),
        path=str(path),
    )


storable(Concept)
