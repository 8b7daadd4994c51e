"""Token-set similarity of two error signatures, as ``rapidfuzz.fuzz.token_set_ratio`` scores it.

The similar-cases step scores one crash signature against the ~100 known references in
the knowledge base.  rapidfuzz does that in ~0.3 ms, but importing it costs ~9 ms (44
modules), which a one-shot ``diagnose crash.log`` pays for one diagnosis: the same
scores computed here take ~3 ms.  So a process scores its first diagnoses here and
switches to rapidfuzz from the third (a server, a stream or a fleet run amortise the
import), or at once when something already imported it.  The scores are the same either
way; ``tests/test_similarity.py`` holds the two against each other.

The score: split both strings on whitespace into token sets; 100 when one set holds the
other (and they share a token); otherwise the best of three normalised Indel similarities
(shared tokens against shared + each side's own tokens, and the two sides' own tokens,
sorted and joined, against each other).  Indel distance is ``len(a) + len(b) - 2 * LCS``;
the LCS length comes from a bit-parallel pass over one string (one big-int update per
character of the other).
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from typing import Any

__all__ = ["ratio", "token_set_ratio", "use_rapidfuzz"]

#: Diagnoses a process scores here before it imports rapidfuzz.
PURE_CALLS = 2
_calls = 0


def use_rapidfuzz() -> Any:
    """rapidfuzz's ``fuzz`` module when it is (or is now worth being) imported, else None."""
    global _calls
    _calls += 1
    if "rapidfuzz" in sys.modules or _calls > PURE_CALLS:
        try:
            from rapidfuzz import fuzz

            return fuzz
        except ImportError:  # pragma: no cover - a declared dependency
            return None
    return None


def _lcs_length(a: str, b: str) -> int:
    """Length of the longest common subsequence (bit-parallel, Hyyro 2004)."""
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return 0
    masks: dict[str, int] = {}
    for i, ch in enumerate(a):
        masks[ch] = masks.get(ch, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    get = masks.get
    for ch in b:
        u = v & get(ch, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def _may_be_within(a: str, b: str, allowed: int) -> bool:
    """False when the Indel distance of ``a`` and ``b`` surely exceeds ``allowed``.

    An LCS holds each character at most as often as the rarer string does, so
    ``len(a) + len(b) - 2 * sum(min counts)`` bounds the distance from below; with a
    cutoff this skips most LCS passes (55 of 97 references on a typical signature).
    """
    if abs(len(a) - len(b)) > allowed:
        return False
    common = (Counter(a) & Counter(b)).total()
    return len(a) + len(b) - 2 * common <= allowed


def _normalized(distance: int, lensum: int, cutoff: float) -> float:
    """100 * (1 - distance / lensum), or 0 below ``cutoff`` (100 for two empty strings)."""
    score = 100.0 if not lensum else 100.0 - 100.0 * distance / lensum
    return score if score >= cutoff else 0.0


def ratio(a: str, b: str) -> float:
    """Normalised Indel similarity of two strings, 0..100 (``fuzz.ratio``)."""
    lensum = len(a) + len(b)
    if not lensum:
        return 100.0
    return _normalized(lensum - 2 * _lcs_length(a, b), lensum, 0.0)


def token_set_ratio(a: str, b: str, *, score_cutoff: float = 0.0) -> float:
    """``fuzz.token_set_ratio(a, b, score_cutoff=...)`` with no processor, 0..100."""
    if not a or not b:
        return 0.0
    tokens_a, tokens_b = set(a.split()), set(b.split())
    if not tokens_a or not tokens_b:
        return 0.0
    shared = tokens_a & tokens_b
    only_a, only_b = tokens_a - tokens_b, tokens_b - tokens_a
    if shared and (not only_a or not only_b):
        return 100.0
    diff_a, diff_b = " ".join(sorted(only_a)), " ".join(sorted(only_b))
    shared_len = len(" ".join(shared))
    sep = 1 if shared_len else 0
    with_a, with_b = shared_len + sep + len(diff_a), shared_len + sep + len(diff_b)
    lensum = with_a + with_b
    # The shared tokens are a common prefix of both joined strings, so only the sides'
    # own tokens differ; skip the LCS when their lengths alone put it past the cutoff.
    allowed = math.ceil(lensum * (1 - score_cutoff / 100))
    result = 0.0
    if _may_be_within(diff_a, diff_b, allowed):
        distance = len(diff_a) + len(diff_b) - 2 * _lcs_length(diff_a, diff_b)
        if distance <= allowed:
            result = _normalized(distance, lensum, score_cutoff)
    if not shared_len:
        return result
    # Shared tokens against shared + one side's own: the distance is that side's own part.
    score_a = _normalized(sep + len(diff_a), shared_len + with_a, score_cutoff)
    score_b = _normalized(sep + len(diff_b), shared_len + with_b, score_cutoff)
    return max(result, score_a, score_b)
