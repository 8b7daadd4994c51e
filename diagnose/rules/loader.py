"""Find rule files, validate each one and the set as a whole, and build a :class:`RuleSet`.

Rule directories are searched in this order: the shipped ``rules/`` (unless
``include_default=False``), every directory in ``DIAGNOSE_RULES_PATH``
(``os.pathsep``-separated), then the ``dirs`` the caller passes.  A rule lives in
``<dir>/<cause>/<slug>.toml`` and its ``id`` must read ``<cause>/<slug>``; files
and folders whose name starts with ``_`` or ``.`` (``_template.toml``) are not rules.
Ids and aliases must be unique across all directories, so a user rule can never
silently shadow a shipped one.
"""

from __future__ import annotations

import marshal
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from diagnose import snapshot
from diagnose.errors import RuleFileError
from diagnose.rules.ruleset import RuleSet
from diagnose.rules.schema import Rule

ENV_VAR = "DIAGNOSE_RULES_PATH"


def rule_dirs(
    dirs: Sequence[Path | str] | None = None, *, include_default: bool = True
) -> list[Path]:
    """Return the rule directories to load, shipped first, without duplicates."""
    found: list[Path] = []
    if include_default:
        from diagnose.datafiles import data_dir

        found.append(data_dir("rules"))
    found += [Path(p) for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p]
    found += [Path(d) for d in dirs or ()]
    unique: list[Path] = []
    for d in found:
        if d.resolve() not in {u.resolve() for u in unique}:
            unique.append(d)
    return unique


def rule_files(root: Path) -> Iterator[Path]:
    """Yield the rule files under ``root`` in a stable order (skipping ``_*`` and ``.*``)."""
    for path in sorted(root.rglob("*.toml")):
        if not any(part.startswith(("_", ".")) for part in path.relative_to(root).parts):
            yield path


def expected_id(root: Path, path: Path) -> str:
    """Return the id a rule file must declare: its path below ``root`` without ``.toml``."""
    return path.relative_to(root).with_suffix("").as_posix()


def _cause_checker(kb: Any) -> Callable[[str], bool]:
    """Return a predicate telling whether the knowledge base knows a cause id."""

    def known(cause: str) -> bool:
        try:
            return kb.cause(cause) is not None
        except LookupError:
            return False

    return known


def _default_kb() -> Any:
    """Load the shipped knowledge base (lazily: only when the caller passed none)."""
    from diagnose.kb import load_kb

    return load_kb()


def check_rules(
    dirs: Sequence[Path | str] | None = None, *, kb: Any = None, include_default: bool = True
) -> tuple[list[Rule], list[RuleFileError], list[str]]:
    """Load and validate every rule file; return (rules, errors, dirs) without raising.

    Each broken file contributes its first error; duplicate ids and aliases
    across files are reported at the second file's ``id`` (or ``aliases``) line.
    """
    # Validation machinery is imported here: a run served from the snapshot never needs it.
    from diagnose.rules import locate
    from diagnose.rules.parse import parse_rule
    from diagnose.tomlsource import load_toml

    kb = kb if kb is not None else _default_kb()
    known = _cause_checker(kb)
    concepts = kb.concept_patterns() if hasattr(kb, "concept_patterns") else {}
    rules: list[Rule] = []
    errors: list[RuleFileError] = []
    seen: dict[str, str] = {}
    roots = rule_dirs(dirs, include_default=include_default)
    for root in roots:
        if not root.is_dir():
            errors.append(RuleFileError(str(root), None, None, "rule directory not found"))
            continue
        for path in rule_files(root):
            try:
                src = load_toml(path)
                rule = parse_rule(src, expected_id(root, path), known, concepts)
                for field, key in [("id", rule.id), *(("aliases", a) for a in rule.aliases)]:
                    if key in seen:
                        raise locate.error(src, field, f"duplicate id '{key}' (also {seen[key]})")
                    seen[key] = str(path)
            except RuleFileError as exc:
                errors.append(exc)
                continue
            rules.append(rule)
    return rules, errors, [str(r) for r in roots]


def load_rules(
    dirs: Sequence[Path | str] | None = None,
    *,
    kb: Any = None,
    include_default: bool = True,
    examples: bool = True,
) -> RuleSet:
    """Load the rule base: shipped rules, ``DIAGNOSE_RULES_PATH`` and ``dirs``.

    ``kb`` is the knowledge base used to check each rule's cause (default:
    ``diagnose.kb.load_kb()``).  Raises the first
    :class:`~diagnose.errors.RuleFileError` (``file:line: field 'x': message``).
    ``examples=False`` leaves every rule's ``examples`` empty: matching never reads
    them, and on a warm start they are half the snapshot (334 objects, ~1.5 ms).
    """
    if kb is None:
        kb = _default_kb()
    key = _snapshot_key(rule_dirs(dirs, include_default=include_default), kb)
    if key is not None:
        cached = snapshot.load(key)
        if isinstance(cached, tuple) and len(cached) == 3:
            rules, roots, examples_blob = cached
            if examples:
                rules = _with_examples(rules, examples_blob)
            return RuleSet.build(rules, roots)
    rules, errors, roots = check_rules(dirs, kb=kb, include_default=include_default)
    if errors:
        raise errors[0]
    if key is not None:
        snapshot.save(key, _split_examples(rules, roots))
    return RuleSet.build(rules if examples else [replace(r, examples=()) for r in rules], roots)


def _split_examples(rules: Sequence[Rule], roots: Sequence[str]) -> tuple[Any, ...]:
    """The snapshot value: rules without examples, roots, and the examples as one blob.

    The blob is the examples' own snapshot encoding, marshalled: loading the rules
    copies it as bytes, and only a caller that wants examples decodes it.
    """
    blob = marshal.dumps(snapshot.encode(tuple(r.examples for r in rules)))
    return tuple(replace(r, examples=()) for r in rules), tuple(roots), blob


def _with_examples(rules: Sequence[Rule], blob: bytes) -> list[Rule]:
    """Put back the examples :func:`_split_examples` set aside."""
    examples = snapshot.decode(marshal.loads(blob))
    return [replace(r, examples=ex) for r, ex in zip(rules, examples, strict=True)]


def _snapshot_key(roots: Sequence[Path], kb: Any) -> tuple[Any, ...] | None:
    """The rule snapshot's key: code, the kb's cause ids and every rule file's stamp.

    ``None`` (no snapshot) for a duck-typed kb: only a real :class:`KnowledgeBase`
    says, through its cause ids, everything validation asks of it.
    """
    from diagnose.kb import KnowledgeBase

    if not isinstance(kb, KnowledgeBase):
        return None
    concepts = tuple(sorted(kb.concept_patterns().items()))
    return ("rules", snapshot.code_stamp(), kb.cause_ids, concepts, snapshot.stamps(roots))
