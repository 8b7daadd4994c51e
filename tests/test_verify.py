"""Verifier tests: formulas against the measured rows of the research notes, spec validation,
verdicts, wiring into JSON/text/markdown, the compile level (needs nvcc) and the GPU level."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from diagnose.kb import load_kb
from diagnose.model import Evidence, Finding, Region
from diagnose.report import Diagnosis
from diagnose.verify import verify
from diagnose.verify.formulas import (
    sm90_tma_ws,
    sm100_blockscaled,
    sm100_epilogue,
    sm120_blockscaled,
    triton_matmul,
)
from diagnose.verify.memory import deepep_low_latency_bytes, deepep_normal_nvl_bytes
from diagnose.verify.model import verify_model
from diagnose.verify.result import Verification
from diagnose.verify.spec import GemmSpec, bounded_int, build_spec, canonical_arch

OLD, V442, NEW = (4, 4, 1), (4, 4, 2), (4, 5, 0)


# Grouped SM120 NVFP4 rows measured with nvcc probes (gpu-facts §2.4 / §3.3):
# (tile, epilogue bytes, cutlass, stages, kernel bytes)
GROUPED_ROWS = [
    ((128, 32, 128), 9216, OLD, 8, 102400),
    ((128, 32, 256), 9216, V442, 4, 102400),
    ((128, 32, 128), 9216, NEW, 7, 97280),
    ((128, 32, 256), 9216, NEW, 3, 84992),
    ((128, 64, 256), 9216, V442, 3, 92160),
    ((128, 256, 128), 9216, OLD, 3, 94208),
    ((256, 128, 128), 13312, NEW, 3, 98304),
    ((128, 32, 128), 13312, OLD, 7, 95232),
    ((128, 64, 128), 13312, NEW, 6, 101376),
    ((128, 128, 256), 13312, OLD, 2, 89088),
]


@pytest.mark.parametrize(("tile", "epi", "ver", "stages", "smem"), GROUPED_ROWS)
def test_sm120_grouped_matches_measured(
    tile: tuple[int, int, int], epi: int, ver: tuple[int, int, int], stages: int, smem: int
) -> None:
    est = sm120_blockscaled(tile, 4, 4, epi, grouped=True, cutlass=ver)
    assert (est.stages, est.smem) == (stages, smem)


@pytest.mark.parametrize(
    ("tile", "stages", "smem"),
    [((128, 128, 256), 2, 83968), ((256, 128, 128), 3, 93184), ((128, 128, 128), 4, 83968)],
)
def test_sm120_dense_matches_measured(tile: tuple[int, int, int], stages: int, smem: int) -> None:
    est = sm120_blockscaled(tile, 4, 4, 9216, grouped=False, cutlass=OLD)
    assert (est.stages, est.smem) == (stages, smem)


# SM100 1-SM NVFP4 rows from the compile level (nvcc 13.0, CUTLASS 4.2.0, sm_100a; the
# grid of bench/sm100_blockscaled_grid.py, bench/results/sm100_blockscaled.md):
# (tile, epilogue reads C, stages, dense kernel bytes); grouped kernels hold 1 KiB more.
SM100_ROWS = [
    ((128, 64, 128), False, 14, 218112),
    ((128, 64, 128), True, 14, 226304),
    ((128, 64, 256), False, 7, 218112),
    ((128, 64, 256), True, 7, 226304),
    ((128, 128, 128), False, 11, 220160),
    ((128, 128, 128), True, 10, 218112),
    ((128, 128, 256), False, 5, 201728),
    ((128, 128, 256), True, 5, 218112),
    ((128, 256, 128), False, 7, 210944),
    ((128, 256, 128), True, 5, 205824),
    ((128, 256, 256), False, 3, 183296),
    ((128, 256, 256), True, 2, 178176),
]


@pytest.mark.parametrize(("tile", "c", "stages", "smem"), SM100_ROWS)
@pytest.mark.parametrize("grouped", [False, True])
def test_sm100_blockscaled_matches_the_compile_level(
    tile: tuple[int, int, int], c: bool, stages: int, smem: int, grouped: bool
) -> None:
    est = sm100_blockscaled(tile, 4, 4, sm100_epilogue(c, tile[1]), grouped=grouped)
    assert (est.stages, est.smem) == (stages, smem + (1024 if grouped else 0))


# SM100 2-SM NVFP4 rows (2x1x1 cluster; the tile is the pair's) from the compile level (nvcc
# 13.0, CUTLASS 4.2.0; bench/sm100_blockscaled_grid.py --two-sm, sm100_blockscaled_2sm.md):
# (tile, epilogue reads C, grouped, stages, kernel bytes).
SM100_2SM_ROWS = [
    ((256, 64, 128), False, False, 17, 226304),
    ((256, 64, 128), True, False, 16, 222208),
    ((256, 64, 256), False, False, 8, 214016),
    ((256, 64, 256), True, False, 8, 222208),
    ((256, 128, 128), False, False, 14, 218112),
    ((256, 128, 128), True, False, 13, 220160),
    ((256, 128, 256), False, False, 7, 218112),
    ((256, 128, 256), True, False, 6, 205824),
    ((256, 256, 128), False, False, 11, 231424),
    ((256, 256, 128), True, False, 8, 223232),
    ((256, 256, 256), False, False, 5, 211968),
    ((256, 256, 256), True, False, 4, 223232),
    ((256, 64, 128), False, True, 17, 227328),
    ((256, 64, 128), True, True, 16, 223232),
    ((256, 64, 256), False, True, 8, 215040),
    ((256, 64, 256), True, True, 8, 223232),
    ((256, 128, 128), False, True, 14, 219136),
    ((256, 128, 128), True, True, 13, 221184),
    ((256, 128, 256), False, True, 7, 219136),
    ((256, 128, 256), True, True, 6, 206848),
    ((256, 256, 128), False, True, 10, 212992),
    ((256, 256, 128), True, True, 8, 224256),
    ((256, 256, 256), False, True, 5, 212992),
    ((256, 256, 256), True, True, 4, 224256),
]


@pytest.mark.parametrize(("tile", "c", "grouped", "stages", "smem"), SM100_2SM_ROWS)
def test_sm100_two_sm_matches_the_compile_level(
    tile: tuple[int, int, int], c: bool, grouped: bool, stages: int, smem: int
) -> None:
    est = sm100_blockscaled(tile, 4, 4, sm100_epilogue(c, tile[1]), grouped=grouped, two_sm=True)
    assert (est.stages, est.smem) == (stages, smem)


@pytest.mark.parametrize("arch", ["sm_100", "sm_103"])
def test_sm100_error_internal_is_not_shared_memory(arch: str) -> None:
    """On B200/B300 the builder sizes every tile to the arch's own 227 KiB: an "Error
    Internal" there is refuted as an overflow and pointed at the binary's arch targets."""
    spec = GemmSpec(
        "smem-overflow",
        arch,
        family="cutlass-grouped-blockscaled",
        dtype_a="fp4_e2m1",
        dtype_b="fp4_e2m1",
        dtype_d="bf16",
        tile=(128, 256, 256),
        error_internal=True,
    )
    v = verify_model(spec, load_kb(), "model")
    assert v.status == "refuted"
    assert dict(v.measurements)["smem_limit_kb"] == 232448
    assert any("another arch" in n for n in v.notes)


def test_sm90_and_triton_match_measured() -> None:
    assert (sm90_tma_ws((128, 128, 64), 16, 16, 33792).stages, 230400) == (6, 230400)
    assert sm90_tma_ws((128, 128, 64), 16, 16, 33792).smem == 230400
    assert sm90_tma_ws((64, 128, 64), 16, 16, 17408).smem == 214016
    assert sm90_tma_ws((128, 256, 128), 8, 8, 33792).stages == 4
    assert triton_matmul((128, 128, 64), 16, 16, 4, 120).smem == 98304
    assert triton_matmul((128, 256, 64), 16, 16, 3, 90).smem == 147456
    assert triton_matmul((128, 256, 64), 16, 16, 5, 90).smem == 245760


def test_deepep_buffer_sizes_match_logged_allocations() -> None:
    # "Allocating buffer size: 2115.111296 MB" (DeepEP#128), "2116.290944 MB" (DeepEP#38).
    assert deepep_low_latency_bytes(128, 7168, 288, "initial") == 2_115_111_296
    assert deepep_low_latency_bytes(128, 7168, 288, "mar2025") == 2_116_290_944
    assert deepep_low_latency_bytes(128, 7168, 288) == 2_146_961_792
    assert round(deepep_normal_nvl_bytes(7168 * 2, 8) / 2**20) == 320


def test_bounds_reject_hostile_numbers() -> None:
    assert bounded_int("128", 8, 1024) == 128
    assert bounded_int("1e400", 8, 1024) is None
    assert bounded_int("nan", 0, 10) is None
    assert bounded_int(True, 0, 10) is None
    assert bounded_int("4096; rm -rf /", 0, 10_000) is None
    assert canonical_arch("cutlass::arch::Sm120") is None
    assert canonical_arch("Sm120") == "sm_120"
    assert canonical_arch("sm_90a") == "sm_90"


def _diagnosis(
    cause: str,
    facts: tuple[tuple[str, object], ...],
    lines: list[str],
    context: dict[str, object] | None = None,
) -> Diagnosis:
    from diagnose.model import LogLine

    body = tuple(LogLine(i + 1, t) for i, t in enumerate(lines))
    region = Region("error", (1, len(lines)), lines[-1], len(lines), body=body)
    finding = Finding(
        f"{cause}/t",
        cause,
        "t",
        "fatal",
        True,
        0.8,
        "pattern",
        0,
        evidence=(Evidence(len(lines), lines[-1], "match.all[0]"),),
        facts=facts,
    )  # type: ignore[arg-type]
    return Diagnosis(
        "<t>",
        len(lines),
        (region,),
        cause,
        True,
        0.8,
        "pattern",
        "t",
        "",
        (finding,),
        finding,
        (),
        (),
        (),
        (),
        (),
        False,
        context or {},
        (),
        "test",
    )


MOE_LINES = [
    "GPU 0: NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
    "dispatchMoeGemmSelectClusterShapeTmaWarpSpecialized<cutlass::arch::Sm120, __nv_fp4_e2m1,"
    " __nv_fp4_e2m1, __nv_bfloat16> tactic CtaShape128x32x64B",
    "[TensorRT-LLM][ERROR] Assertion failed: Failed to initialize cutlass TMA WS grouped gemm. "
    "Error: Error Internal (moe_gemm_tma_ws_launcher.inl:240)",
]


def test_spec_resolves_k_bytes_and_family() -> None:
    d = _diagnosis(
        "smem-overflow", (("arch", "sm_120"), ("dtypes", ("fp4_e2m1", "bf16"))), MOE_LINES
    )
    spec = build_spec(d, load_kb())
    assert isinstance(spec, GemmSpec)
    assert spec.tile == (128, 32, 128) and spec.k_units == "bytes"
    assert spec.family == "cutlass-grouped-blockscaled"
    assert spec.throw_site == ("moe_gemm_tma_ws_launcher.inl", 240)
    assert spec.error_internal


QWEN_MOE_H20 = """\
NVIDIA H20
Qwen3MoeConfig {
  "hidden_size": 6144,
  "moe_intermediate_size": 2560,
  "num_experts": 160,
  "num_experts_per_tok": 8,
}
vllm serve /models/q -tp 8 --enable-expert-parallel --max-num-batched-tokens 8192
  File "/vllm/model_executor/layers/fused_moe/fused_moe.py", line 1485, in fused_experts_impl
triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 263168, \
Hardware limit: 232448. Reducing block sizes or `num_stages` may help.
"""


def test_run_size_comes_from_the_model_config_the_log_prints() -> None:
    from diagnose.api import diagnose_text

    spec = build_spec(diagnose_text(QWEN_MOE_H20), load_kb())
    assert isinstance(spec, GemmSpec) and spec.family == "triton-matmul"
    # 8192 tokens x top-8 over 160 experts = 410 rows; EP keeps each expert whole.
    assert spec.problem == (410, 2 * 2560, 6144)
    assert any("max_num_batched_tokens 8192" in w for w in spec.problem_from)
    # Without EP, TP shards each expert's intermediate size.
    no_ep = QWEN_MOE_H20.replace(" --enable-expert-parallel", "")
    spec = build_spec(diagnose_text(no_ep), load_kb())
    assert isinstance(spec, GemmSpec) and spec.problem == (410, 2 * 2560 // 8, 6144)
    assert any("/ tp_size 8" in w for w in spec.problem_from)


DENSE_H100 = """\
NVIDIA H100 80GB HBM3
LlamaConfig {
  "hidden_size": 8192,
  "intermediate_size": 28672,
}
vllm serve /models/llama -tp 4 --max-num-batched-tokens 4096
  File "/vllm/model_executor/layers/quantization/utils/fp8_utils.py", line 320, in w8a8_matmul
triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 262144, \
Hardware limit: 232448. Reducing block sizes or `num_stages` may help.
"""


def test_run_size_of_a_dense_model_comes_from_its_config() -> None:
    from diagnose.api import diagnose_text

    spec = build_spec(diagnose_text(DENSE_H100), load_kb())
    assert isinstance(spec, GemmSpec) and spec.family == "triton-matmul"
    # One step's 4096 tokens through the fused gate-up projection, column-split over TP 4.
    assert spec.problem == (4096, 2 * 28672 // 4, 8192)
    assert any("intermediate_size 28672 / tp_size 4" in w for w in spec.problem_from)
    # No token limit in the log: the default is said to be one.
    bare = DENSE_H100.replace(" --max-num-batched-tokens 4096", "")
    spec = build_spec(diagnose_text(bare), load_kb())
    assert isinstance(spec, GemmSpec) and spec.problem is not None and spec.problem[0] == 1024
    assert any("names no per-step token limit" in w for w in spec.problem_from)


def test_run_size_prefers_the_profilers_own_mnk_and_never_invents_one() -> None:
    from diagnose.api import diagnose_text

    lines = [*MOE_LINES[:2], "Cannot profile configuration 55 (for m=4096, n=1024, k=5504)"]
    d = _diagnosis("smem-overflow", (("arch", "sm_120"),), lines + MOE_LINES[2:])
    spec = build_spec(d, load_kb())
    assert isinstance(spec, GemmSpec) and spec.problem == (4096, 1024, 5504)
    # A model config without a MoE shape, or numbers past any GEMM, size nothing.
    partial = QWEN_MOE_H20.replace('  "num_experts": 160,\n', "")
    assert build_spec(diagnose_text(partial), load_kb()).problem is None  # type: ignore[union-attr]
    huge = [*lines[:2], "for m=99999999, n=1, k=1", *MOE_LINES[2:]]
    spec = build_spec(_diagnosis("smem-overflow", (), huge), load_kb())
    assert isinstance(spec, GemmSpec) and spec.problem is None


def test_model_never_confirms_and_lists_fitting_tiles() -> None:
    d = _diagnosis(
        "smem-overflow", (("arch", "sm_120"), ("dtypes", ("fp4_e2m1", "bf16"))), MOE_LINES
    )
    v = verify(d, "model")
    assert v.status == "inconclusive" and v.level == "model"
    assert v.smem_limit == 101376 and v.smem_required == 102400
    assert any(t.fits for t in v.tiles) and not all(t.fits for t in v.tiles)
    assert "Largest tile that fits sm_120" in v.recommendation


def test_model_refutes_a_fitting_tile_and_points_at_arch_mismatch() -> None:
    lines = [
        *MOE_LINES[:1],
        MOE_LINES[1].replace("128x32x64B", "128x256x64B"),
        MOE_LINES[2],
        "/root/.cache/flashinfer/0.6.3/120a/cached_ops/fused_moe_120/fused_moe_120.so",
    ]
    lines[0] = "GPU 0: NVIDIA GB10"
    d = _diagnosis(
        "smem-overflow",
        (("arch", "sm_120"), ("dtypes", ("fp4_e2m1", "bf16"))),
        lines,
        {"gpus": [{"value": "NVIDIA GB10", "line": 1}]},
    )
    v = verify(d, "model")
    assert v.status == "refuted"
    assert v.smem_required is not None and v.smem_required < 101376 - 2048
    assert v.better_cause == "arch-unsupported"


def test_unknown_arch_and_other_causes_are_inconclusive_not_errors() -> None:
    d = _diagnosis("smem-overflow", (), ["something failed"])
    assert verify(d, "run").status == "inconclusive"
    d = _diagnosis("nccl-timeout", (), ["Watchdog caught collective operation timeout"])
    assert "No verifier" in verify(d, "model").notes[0]
    with pytest.raises(ValueError):
        verify(d, "everything")


def test_triton_log_numbers_and_stage_advice() -> None:
    line = (
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, "
        "Required: 114688, Hardware limit: 101376."
    )
    d = _diagnosis(
        "smem-overflow",
        (("smem_required", 114688), ("smem_limit", 101376), ("arch", "sm_89")),
        ["BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_stages=4", line],
    )
    v = verify(d, "model")
    assert v.status == "inconclusive"
    assert v.smem_required == 114688  # Triton's own number wins over the matmul formula
    assert dict(v.measurements)["formula[triton]"] == 98304  # (4-1) stages of 32 KiB on sm_8x
    assert "num_stages=3" in v.recommendation


def test_memory_replay_recommends_a_fraction() -> None:
    d = _diagnosis(
        "cuda-oom",
        (("requested_bytes", 3 << 30), ("free_bytes", 1 << 30), ("total_bytes", 80 << 30)),
        ["torch.OutOfMemoryError: CUDA out of memory."],
        {"server_args": {"mem_fraction_static": {"value": "0.85", "line": 1}}},
    )
    v = verify(d, "model")
    m = dict(v.measurements)
    assert m["shortfall_bytes"] == 2 << 30
    assert m["recommended_mem_fraction_static"] == pytest.approx(0.81)
    assert "--mem-fraction-static 0.81" in v.recommendation


def test_verification_reaches_json_text_and_markdown() -> None:
    from diagnose.render import OutputFormat, render

    d = _diagnosis(
        "smem-overflow", (("arch", "sm_120"), ("dtypes", ("fp4_e2m1", "bf16"))), MOE_LINES
    )
    d = replace(d, verification=verify(d, "model"))
    data = json.loads(render(d, OutputFormat.json))
    assert data["verification"]["smem_limit"] == 101376
    assert data["verification"]["level"] == "model"
    assert "INCONCLUSIVE at level model" in render(d, OutputFormat.text)
    assert "Verification: INCONCLUSIVE" in render(d, OutputFormat.markdown)


def test_model_is_fast() -> None:
    """Not a timing assertion: records that the model does no I/O beyond the cached kb."""
    spec = GemmSpec(
        "smem-overflow",
        "sm_120",
        family="cutlass-grouped-blockscaled",
        dtype_a="fp4_e2m1",
        dtype_b="fp4_e2m1",
        dtype_d="bf16",
        tile=(128, 32, 128),
    )
    v = verify_model(spec, load_kb(), "model")
    assert isinstance(v, Verification) and v.toolchain == () and v.device is None


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_compile_level_measures_the_real_kernel(tmp_path: Path) -> None:
    from diagnose.verify.compile import find_headers, verify_compile

    headers = find_headers()
    if headers is None:
        pytest.skip("no CUTLASS headers (pip install nvidia-cutlass)")
    spec = GemmSpec(
        "smem-overflow",
        "sm_120",
        family="cutlass-grouped-blockscaled",
        dtype_a="fp4_e2m1",
        dtype_b="fp4_e2m1",
        dtype_d="bf16",
        tile=(128, 32, 128),
        epilogue_c=False,
    )
    model = verify_model(spec, load_kb(), "compile")
    v = verify_compile(spec, model, cache=tmp_path)
    assert v.level == "compile", v.notes
    m = dict(v.measurements)
    expected = 102400 if headers.version < "4.5" else 97280  # gpu-facts §2.4
    assert m["compiled[C=void].kernel_smem"] == expected
    assert v.status == ("confirmed" if expected > 101376 else "refuted")
    again = verify_compile(spec, model, cache=tmp_path)  # served from the cache
    assert dict(again.measurements)["compiled[C=void].cached"] == 1


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
@pytest.mark.parametrize(
    ("tile", "cluster", "smem"),
    [
        # The 1-SM tcgen05 kernel.
        ((128, 128, 256), None, 201728),
        # A 2x1x1 cluster builds the 2-SM MMA kernel: the tile is the pair's, each CTA stages
        # half of A's rows and half of B's columns.
        ((256, 128, 256), (2, 1, 1), 218112),
    ],
)
def test_compile_level_builds_an_sm100_blockscaled_kernel(
    tmp_path: Path, tile: tuple[int, int, int], cluster: tuple[int, int, int] | None, smem: int
) -> None:
    """The SM100 probe compiles and agrees with the model level to the byte."""
    from diagnose.verify.compile import find_headers, verify_compile

    if find_headers() is None:
        pytest.skip("no CUTLASS headers (pip install nvidia-cutlass)")
    spec = GemmSpec(
        "smem-overflow",
        "sm_100",
        family="cutlass-dense-blockscaled",
        dtype_a="fp4_e2m1",
        dtype_b="fp4_e2m1",
        dtype_d="bf16",
        tile=tile,
        cluster=cluster,
        epilogue_c=False,
    )
    model = verify_model(spec, load_kb(), "compile")
    v = verify_compile(spec, model, cache=tmp_path)
    m = dict(v.measurements)
    assert v.level == "compile", v.notes
    assert m["compiled[C=void].kernel_smem"] == smem == dict(model.measurements)["formula[C=void]"]
    assert v.status == "refuted"


@pytest.mark.gpu
def test_run_level_on_gpu() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from diagnose.verify.run import verify_run_gemm

    spec = GemmSpec(
        "smem-overflow",
        "sm_120",
        family="cutlass-grouped-blockscaled",
        dtype_a="fp4_e2m1",
        dtype_b="fp4_e2m1",
        dtype_d="bf16",
        tile=(128, 32, 128),
    )
    model = verify_model(spec, load_kb(), "run")
    v = verify_run_gemm(spec, model, problem=(512, 1024, 2048))
    m = dict(v.measurements)
    assert v.level == "run" and float(m["run.rel_error"]) < 0.02
    assert v.status != "confirmed"  # another arch never confirms an sm_120 crash


def test_compile_refusal_for_too_few_stages_confirms_the_overflow(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """CUTLASS refusing the tile (fewer than 2 stages fit) is the overflow, measured."""
    from diagnose.verify import compile as comp
    from diagnose.verify.model import verify_model
    from diagnose.verify.spec import GemmSpec

    monkeypatch.setattr(comp, "find_nvcc", lambda: ("nvcc", "13.0"))
    monkeypatch.setattr(
        comp, "find_headers", lambda: comp.Headers(tmp_path, "4.2.0", "test headers")
    )
    monkeypatch.setattr(
        comp,
        "run_probe",
        lambda *a, **k: {
            "error": "compile failed",
            "detail": "Specialization requires Stages set to value 2 or more.",
        },
    )
    spec = GemmSpec(
        "smem-overflow",
        "sm_120",
        family="cutlass-grouped-blockscaled",
        dtype_a="fp4_e2m1",
        dtype_b="fp4_e2m1",
        dtype_d="bf16",
        tile=(128, 256, 256),
    )
    v = comp.verify_compile(spec, verify_model(spec, load_kb(), "compile"), cache=tmp_path)
    assert v.status == "confirmed" and v.level == "compile"
    assert any("cannot be built" in n for n in v.notes)
