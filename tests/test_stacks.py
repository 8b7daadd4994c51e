"""Fixes for the crash's own software stack come first; every applies_to id is declared."""

from __future__ import annotations

from diagnose.kb import load_kb
from diagnose.stacks import detect, known_stacks, order_fixes


def test_every_applies_to_names_a_declared_stack() -> None:
    known = known_stacks()
    unknown = {
        (cause.id, layer)
        for cause in load_kb().causes
        for fix in cause.fixes
        for layer in fix.applies_to
        if layer not in known
    }
    assert unknown == set()


def test_detect_reads_markers_case_insensitively() -> None:
    found = detect(["[TensorRT-LLM][ERROR] cutlass init failed", "from FlashInfer autotuner"])
    assert {"tensorrt-llm", "cutlass", "flashinfer"} <= found
    assert "triton" not in found


def test_region_stack_beats_log_stack_and_unrelated_fixes_drop() -> None:
    fixes = ["triton-config", "cutlass-upgrade", "generic", "ascend-buffer"]
    applies = [("triton", "sglang"), ("cutlass",), (), ("vllm-ascend",)]
    ordered = order_fixes(fixes, applies, frozenset({"cutlass"}), frozenset({"sglang", "cutlass"}))
    assert ordered == ["cutlass-upgrade", "triton-config", "generic"]


def test_nothing_detected_keeps_kb_order() -> None:
    fixes = ["a", "b"]
    assert order_fixes(fixes, [("x",), ("y",)], frozenset(), frozenset()) == ["a", "b"]
