"""Word lists the verdict and the stream read (``kb/vocab/*.toml``): knowledge, kept as data.

Which phrases say a server is ready, which words say a program carried on after an error,
which say a serving loop caught one: each is a vocabulary file, one entry per wording, with
the log lines it was written for as examples and, where a public thread showed it, the
thread.  Adding a wording is an edit to the file, never to Python.

Each file::

    name = "ready"                 # must equal the file stem
    description = "..."
    match = "literal"              # "literal": a case-sensitive substring; "pattern": RE2
    ignore_case = false            # patterns only
    attributes = ["serving"]       # extra per-entry keys this vocabulary defines (optional)

    [[entries]]
    text = "The server is fired up and ready to roll!"
    examples = ["[2026-01-01 10:00:00] The server is fired up and ready to roll!"]
    reference = "sgl-project/sglang#1234"    # optional
    serving = true                           # an attribute declared above

Every example must be matched by its own entry (checked at load); a broken file fails
naming file, line and field.  Folders named by ``DIAGNOSE_KB_PATH`` (``os.pathsep``
separated, laid out like ``kb/``) add entries to the shipped vocabularies.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from diagnose.records import record
from diagnose.snapshot import storable
from diagnose.tomlsource import CONTROL_ESCAPE, TomlSource, has_control_escape, load_toml

__all__ = ["ENV_VAR", "Term", "Vocabulary", "kb_dirs", "vocabulary"]

#: Extra knowledge-base folders (laid out like ``kb/``), ``os.pathsep``-separated.
ENV_VAR = "DIAGNOSE_KB_PATH"
_NAME = re.compile(r"^[a-z][a-z0-9-]*$")
_GLOBAL_FLAGS = re.compile(r"\(\?[aiLmsux]+\)")
_REF = re.compile(r"^[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+#\d+$")
_FILE_KEYS = {"name", "description", "match", "ignore_case", "attributes", "entries"}
_ENTRY_KEYS = {"text", "examples", "reference", "note"}


@record
class Term:
    """One wording: its text (a literal or a pattern), example lines and attributes."""

    text: str
    examples: tuple[str, ...]
    reference: str = ""
    attributes: tuple[tuple[str, Any], ...] = ()

    def attribute(self, name: str, default: Any = None) -> Any:
        """The value of an attribute the vocabulary declares (``default`` when unset)."""
        return next((v for k, v in self.attributes if k == name), default)


@record(slots=False, eq=False)
class Vocabulary:
    """A validated word list; ``search`` and ``lines`` answer for one line or many."""

    name: str
    match: str
    ignore_case: bool
    terms: tuple[Term, ...]

    @property
    def texts(self) -> tuple[str, ...]:
        """Every entry's text, in file order."""
        return tuple(t.text for t in self.terms)

    def search(self, line: str) -> Term | None:
        """The first entry that matches ``line``, or ``None``."""
        if self.match == "literal":
            return next((t for t in self.terms if t.text in line), None)
        for term, pattern in zip(self.terms, self._compiled, strict=True):
            if pattern.search(line):
                return term
        return None

    def any(self, line: str) -> bool:
        """Whether some entry matches ``line`` (one combined pattern, behind a literal test)."""
        if self.match == "literal":
            return any(t.text in line for t in self.terms)
        needles = self._needles
        if needles is not None:
            folded = line.lower()
            if not any(n in folded for n in needles):
                return False
        return self._combined.search(line) is not None

    @functools.cached_property
    def _needles(self) -> tuple[str, ...] | None:
        """Lower-cased literals one of which every match contains (None: not derivable)."""
        from diagnose.literals import regex_literals

        found: set[str] = set()
        for term in self.terms:
            lits = regex_literals(term.text)
            if not lits or not all(lit.isascii() for lit in lits):
                return None
            found |= {lit.lower() for lit in lits}
        return tuple(sorted(found))

    @functools.cached_property
    def _compiled(self) -> list[re.Pattern[str]]:
        flags = re.IGNORECASE if self.ignore_case else 0
        return [re.compile(t.text, flags) for t in self.terms]

    @functools.cached_property
    def _combined(self) -> re.Pattern[str]:
        flags = re.IGNORECASE if self.ignore_case else 0
        return re.compile("|".join(f"(?:{t.text})" for t in self.terms) or "(?!)", flags)


def kb_dirs() -> tuple[Path, ...]:
    """The shipped ``kb/`` folder, then those ``DIAGNOSE_KB_PATH`` names."""
    return _kb_dirs(os.environ.get(ENV_VAR, ""))


@lru_cache(maxsize=8)
def _kb_dirs(env: str) -> tuple[Path, ...]:
    # Cached per value of the variable: the parser asks once per candidate line, and
    # finding the shipped folder stats the disk (7.7 s of a 30 MB warning-flood log).
    from diagnose.datafiles import data_dir

    return (data_dir("kb"), *(Path(p) for p in env.split(os.pathsep) if p))


def vocabulary(name: str) -> Vocabulary:
    """The vocabulary ``kb/vocab/<name>.toml`` plus the same file in extra kb folders."""
    found = _load_all(kb_dirs()).get(name)
    if found is None:
        raise FileNotFoundError(f"no vocabulary '{name}' in {', '.join(map(str, kb_dirs()))}")
    return found


@lru_cache(maxsize=4)
def _load_all(dirs: tuple[Path, ...]) -> dict[str, Vocabulary]:
    """Every vocabulary of ``dirs``, validated once and then read back from the snapshot."""
    from diagnose.snapshot import memo

    files = sorted({p for d in dirs for p in (d / "vocab").glob("*.toml")})
    names = sorted({p.stem for p in files})

    def build() -> dict[str, Vocabulary]:
        found: dict[str, Vocabulary] = {}
        for n in names:
            paths = [d / "vocab" / f"{n}.toml" for d in dirs]
            found[n] = _build(n, [p for p in paths if p.is_file()])
        return found

    return memo("vocab", (*files, Path(__file__)), build)


def _build(name: str, files: Sequence[Path]) -> Vocabulary:
    vocab: Vocabulary | None = None
    for path in files:
        part = _parse(load_toml(path), path, name)
        if vocab is None:
            vocab = part
        elif (part.match, part.ignore_case) != (vocab.match, vocab.ignore_case):
            raise load_toml(path).error("match", f"differs from the shipped '{name}' vocabulary")
        else:
            vocab = Vocabulary(name, vocab.match, vocab.ignore_case, vocab.terms + part.terms)
    assert vocab is not None
    return vocab


def _parse(src: TomlSource, path: Path, name: str) -> Vocabulary:
    data: dict[str, Any] = src.data
    for key in data:
        if key not in _FILE_KEYS:
            raise src.error(key, f"unknown field (known: {', '.join(sorted(_FILE_KEYS))})")
    if data.get("name") != name or not _NAME.match(name):
        raise src.error("name", f"must be '{name}', the file's name")
    for key in ("description", "match"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise src.error(key if key in data else None, f"'{key}' must be a non-empty string")
    match = data["match"]
    if match not in ("literal", "pattern"):
        raise src.error("match", "must be 'literal' or 'pattern'")
    ignore_case = data.get("ignore_case", False)
    if not isinstance(ignore_case, bool) or (ignore_case and match == "literal"):
        raise src.error("ignore_case", "must be true or false, and only for patterns")
    attributes = data.get("attributes", [])
    if not isinstance(attributes, list) or not all(isinstance(a, str) for a in attributes):
        raise src.error("attributes", "must be a list of names")
    entries = data.get("entries")
    if not isinstance(entries, list) or not entries:
        raise src.error("entries" if "entries" in data else None, "needs [[entries]]")
    flags = re.IGNORECASE if ignore_case else 0
    terms: list[Term] = []
    for i, entry in enumerate(entries):
        prefix = f"entries[{i}]"
        if not isinstance(entry, dict):
            raise src.error(prefix, "must be a table")
        for key in entry:
            if key not in _ENTRY_KEYS and key not in attributes:
                raise src.error(f"{prefix}.{key}", "unknown field")
        text = entry.get("text")
        if not isinstance(text, str) or not text:
            raise src.error(f"{prefix}.text" if "text" in entry else prefix, "needs a text")
        if match == "pattern":
            if has_control_escape(text):
                raise src.error(f"{prefix}.text", CONTROL_ESCAPE)
            try:
                pattern = re.compile(text, flags)
            except re.error as exc:
                raise src.error(f"{prefix}.text", f"not a valid pattern: {exc}") from exc
            if pattern.groups:
                raise src.error(f"{prefix}.text", "must not capture: write (?:...) instead")
            if _GLOBAL_FLAGS.search(text):
                # Entries are joined into one alternation, where Python refuses a global
                # flag anywhere but at the start: fail here, not on the first log.
                raise src.error(f"{prefix}.text", "must not set global flags such as (?i): "
                                "set ignore_case = true for the file, or use (?i:...)")  # fmt: skip
            if _blank_prefilter(text):
                # The literal prefilter keeps one literal a branch, the run every match holds:
                # "(?:Unsupported|Invalid) ..." leaves " ", which every line holds, and the
                # entry then makes every line a candidate (caught by a test at stop 22).
                raise src.error(f"{prefix}.text", "its literal prefilter is only blank space, "
                                "which every line holds: give each branch a word of its own "
                                "(two entries rather than one alternation)")  # fmt: skip
        examples = entry.get("examples")
        if not isinstance(examples, list) or not examples:
            raise src.error(f"{prefix}.examples" if "examples" in entry else prefix,
                            "needs examples: the log lines it was written for")  # fmt: skip
        for j, example in enumerate(examples):
            hit = (text in example) if match == "literal" else re.search(text, example, flags)
            if not isinstance(example, str) or not hit:
                raise src.error(f"{prefix}.examples[{j}]", "not matched by this entry's text")
        reference = entry.get("reference", "")
        if reference and not _REF.match(str(reference)):
            raise src.error(f"{prefix}.reference", f"'{reference}' is not owner/repo#N")
        attrs = tuple((a, entry[a]) for a in attributes if a in entry)
        terms.append(Term(text, tuple(examples), str(reference), attrs))
    return Vocabulary(name, match, ignore_case, tuple(terms))


def _blank_prefilter(pattern: str) -> bool:
    """Whether a literal the prefilter would look for in ``pattern`` is only white space."""
    from diagnose.literals import regex_literals

    return any(not lit.strip() for lit in regex_literals(pattern) or ())


storable(Term, Vocabulary)
