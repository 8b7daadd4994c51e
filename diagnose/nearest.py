"""The nearest known case, for a fatal error no rule explains.

Every rule carries matching examples and every cause public references; together they are a
library of how each known cause reads.  When a crash matches no rule, its most informative
error message (masked: numbers, addresses and paths) is scored against every entry of that
library with rapidfuzz's ``token_set_ratio``.  The cause of the best entry is named as
*likely* only when the score and its lead over the best entry of any other cause clear the
thresholds below; otherwise the verdict stays ``unknown``.

The thresholds were calibrated on the labelled sets (``bench/nearest_calibration.py``,
results in ``bench/results/nearest.md``) so that a *likely* cause is right about as often as
a generic pattern rule is: each log was scored against the library without the examples of
the rule that explains it, so a case cannot find itself.

The library is built from the rule files once (it parses every example log, ~0.5 s) and kept
in the snapshot under the rule base's content, so a run that needs it reads it back.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from diagnose.records import record

__all__ = ["MIN_LEAD", "MIN_SCORE", "Likely", "library", "nearest"]

#: A likely cause needs at least this token-set score (0-100) ...
MIN_SCORE = 95.0
#: ... and at least this lead over the best-scoring entry of any other cause ...
MIN_LEAD = 10.0
#: ... from a message with at least this many words outside the generic-word concept
#: (kb/concepts/generic-word.toml): a bare "AssertionError" is a subset of every assertion
#: example's words and scored 100 against one of another cause (held-out rounds 66, 69).
MIN_CONTENT_WORDS = 3
#: The share of likely verdicts that named the labelled cause at these thresholds when they
#: were calibrated (bench/results/nearest.md); reported as the verdict's confidence.
CALIBRATED_PRECISION = 0.9

_TOP = 25
_WORD = __import__("re").compile(r"[A-Za-z][A-Za-z0-9_]*")
Entry = tuple[str, str, str]  # (masked text, cause, source: "<rule-id>:<example>" or "o/r#N")


@record
class Likely:
    """The nearest known case: its cause, how close it is, and what it resembles."""

    cause: str
    score: float
    lead: float
    resembles: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {
            "cause": self.cause,
            "score": round(self.score, 1),
            "lead": round(self.lead, 1),
            "resembles": self.resembles,
            "text": self.text,
        }


def library(rule_dirs: Sequence[Path] = ()) -> tuple[Entry, ...]:
    """Every known case's masked error text with its cause (from the snapshot when unchanged)."""
    from diagnose import snapshot
    from diagnose.kb import load_kb
    from diagnose.rules.loader import rule_dirs as resolve

    kb = load_kb()
    roots = resolve(list(rule_dirs) or None)
    key = ("nearest", snapshot.code_stamp(), kb.version, snapshot.stamps(roots))
    cached = snapshot.load(key)
    if isinstance(cached, tuple):
        return cached
    built = _build(kb, rule_dirs)
    snapshot.save(key, built)
    return built


def _build(kb: Any, rule_dirs: Sequence[Path]) -> tuple[Entry, ...]:
    from diagnose.kb import mask_signature
    from diagnose.rules import Document, load_rules
    from diagnose.rules.wording import wording_of

    rules = load_rules(list(rule_dirs) or None, kb=kb)
    wording = wording_of(rules).lines
    entries: list[Entry] = []
    for rule in rules:
        for example in rule.examples:
            if example.expect != "match":
                continue
            doc = Document.from_text(example.log, wording)
            texts = [r.message for r in doc.regions]
            if not texts:
                texts = [ln.text for ln in doc.lines if ln.text.strip()][-1:]
            entries.extend(
                (mask_signature(t), rule.cause, f"{rule.id}:{example.name}") for t in texts if t
            )
    for cause in kb.causes:
        if cause.id == "unknown":
            continue
        entries.extend((ref.signature, cause.id, ref.id) for ref in cause.references)
    return tuple(entries)


_GENERIC: list[Any] = []


def _content_words(masked: str) -> int:
    """Words of ``masked`` that are not generic error words (nor masked numbers or paths)."""
    if not _GENERIC:
        import re

        from diagnose.kb import load_kb

        pattern = load_kb().concept_patterns().get("generic-word", r"(?!)")
        _GENERIC.append(re.compile(rf"(?i)(?:{pattern})"))
    generic = _GENERIC[0]
    words = [w for w in _WORD.findall(masked) if len(w) > 1 and not w.isdigit()]
    return sum(1 for w in words if generic.fullmatch(w) is None)


def nearest(message: str, entries: Sequence[Entry]) -> Likely | None:
    """The likely cause of ``message`` (an error line), or ``None`` when none is close enough."""
    from rapidfuzz import fuzz, process

    from diagnose.kb import mask_signature

    masked = mask_signature(message)
    if not masked or not entries or _content_words(masked) < MIN_CONTENT_WORDS:
        return None
    texts = [e[0] for e in entries]
    found = process.extract(masked, texts, scorer=fuzz.token_set_ratio, limit=_TOP)
    if not found:
        return None
    _, best, index = found[0]
    cause = entries[index][1]
    # Past the top entries, any other cause scores at most the last of them.
    floor = found[-1][1] if len(found) == _TOP else 0.0
    other = max((s for _, s, i in found if entries[i][1] != cause), default=floor)
    if best < MIN_SCORE or best - other < MIN_LEAD:
        return None
    return Likely(cause, float(best), float(best - other), entries[index][2], masked)
