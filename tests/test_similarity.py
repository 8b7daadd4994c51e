"""diagnose.similarity gives rapidfuzz's scores, and a process switches to rapidfuzz after a few."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz import fuzz

import diagnose.similarity as similarity
from diagnose.kb import load_kb, mask_signature
from diagnose.similarity import ratio, token_set_ratio

# Tokens like the masked signatures': shared words, placeholders, near-duplicates.
_WORDS = st.sampled_from(
    ["CUDA", "error", "<N>", "<PATH>:<N>", "out", "of", "memory", "illegal", "sm_<N>", "a", "ab",
     "abc", "ba", "tile", "128x256x64", "Failed:", "'x.size(<N>)'", "é", "nccl", "timeout"]
)  # fmt: skip
_SENTENCES = st.lists(_WORDS, max_size=9).map(" ".join)
_RAW = st.text(alphabet="ab c\t", max_size=14)


@settings(max_examples=400, deadline=None)
@given(_SENTENCES | _RAW, _SENTENCES | _RAW, st.sampled_from([0.0, 60.0, 85.0]))
def test_token_set_ratio_is_rapidfuzz_s(a: str, b: str, cutoff: float) -> None:
    assert token_set_ratio(a, b, score_cutoff=cutoff) == pytest.approx(
        fuzz.token_set_ratio(a, b, score_cutoff=cutoff), abs=1e-9
    )


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abcde ", max_size=30), st.text(alphabet="abcde ", max_size=30))
def test_ratio_is_rapidfuzz_s(a: str, b: str) -> None:
    assert ratio(a, b) == pytest.approx(fuzz.ratio(a, b), abs=1e-9)


def test_every_reference_pair_scores_alike() -> None:
    refs = [r.signature for c in load_kb().causes for r in c.references]
    probes = [
        *refs[::7],
        mask_signature("RuntimeError: CUDA error: out of memory at 0x7f00 /a/b.py:12"),
    ]
    for probe in probes:
        for ref in refs:
            for cutoff in (0.0, 60.0):
                assert token_set_ratio(ref, probe, score_cutoff=cutoff) == pytest.approx(
                    fuzz.token_set_ratio(ref, probe, score_cutoff=cutoff), abs=1e-9
                )


def test_a_process_scores_here_first_then_with_rapidfuzz(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setattr(similarity, "_calls", 0)
    monkeypatch.delitem(sys.modules, "rapidfuzz", raising=False)
    firsts = [similarity.use_rapidfuzz() for _ in range(similarity.PURE_CALLS)]
    assert firsts == [None] * similarity.PURE_CALLS
    later = similarity.use_rapidfuzz()
    assert later is not None and later.token_set_ratio("a b", "a c") == fuzz.token_set_ratio(
        "a b", "a c"
    )


def test_rapidfuzz_already_imported_is_used_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(similarity, "_calls", 0)
    assert similarity.use_rapidfuzz() is not None  # this test module imported it
