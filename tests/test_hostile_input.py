"""Hostile or odd input gives a result, never an exception (issue: hardening)."""

from __future__ import annotations

import json

from diagnose import diagnose_text
from diagnose.report import Diagnosis

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"


def test_lone_surrogates_are_read_like_undecodable_bytes() -> None:
    d = diagnose_text("\ud800 noise \udfff\n" + OOM)
    assert d.cause == "cuda-oom"
    json.dumps(d.to_dict(), ensure_ascii=False).encode("utf-8")  # the JSON can be sent


def test_a_cr_only_log_counts_its_lines() -> None:
    text = "INFO start\rRuntimeError: CUDA error: an illegal memory access was encountered\rdone\r"
    d: Diagnosis = diagnose_text(text)
    assert d.cause == "illegal-memory-access"
    assert d.total_lines == 3
    assert all(e.line <= d.total_lines for e in d.primary.evidence)  # type: ignore[union-attr]
