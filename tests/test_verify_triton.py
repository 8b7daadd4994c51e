"""Triton compile level: job validation, spec reading of Triton logs, and real cross-compiles.

The compile tests need the ``triton`` wheel (``pip install -e '.[verify]' in a crashkb checkout``) but no GPU:
Triton lowers for any ``GPUTarget``.  Expected bytes are the measured rows of the research
notes (gpu-facts §5.3): a bf16/fp16 128x128x64 matmul holds (stages-1) x 32 KiB on sm_8x and
stages x 32 KiB on sm_90.  Logs below are synthetic, written for these tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagnose.kb import load_kb
from diagnose.model import Evidence, Finding, LogLine, Region
from diagnose.report import Diagnosis
from diagnose.verify import verify
from diagnose.verify._triton_child import check_job
from diagnose.verify.model import verify_model
from diagnose.verify.spec import GemmSpec, build_spec
from diagnose.verify.triton_compile import (
    TritonJob,
    build_job,
    close_to,
    run_child,
    triton_version,
    verify_triton,
)

needs_triton = pytest.mark.skipif(
    triton_version() is None,
    reason="triton not installed (pip install -e '.[verify]' in a crashkb checkout)",
)
OOR = (
    "triton.runtime.errors.OutOfResources: out of resource: shared memory, "
    "Required: {req}, Hardware limit: 101376. Reducing block sizes or `num_stages` may help."
)


def _diagnosis(lines: list[str], facts: tuple[tuple[str, object], ...] = ()) -> Diagnosis:
    body = tuple(LogLine(i + 1, t) for i, t in enumerate(lines))
    region = Region("triton-error", (1, len(lines)), lines[-1], len(lines), body=body)
    finding = Finding(
        "smem-overflow/t",
        "smem-overflow",
        "t",
        "fatal",
        True,
        0.8,
        "pattern",
        0,
        evidence=(Evidence(len(lines), lines[-1], "match.all[0]"),),
        facts=facts,  # type: ignore[arg-type]
    )
    return Diagnosis(
        "<t>", len(lines), (region,), "smem-overflow", True, 0.8, "pattern", "t", "",
        (finding,), finding, (), (), (), (), (), False, {}, (), "test",
    )  # fmt: skip


def _spec(**kw: object) -> GemmSpec:
    fields: dict[str, object] = {"family": "triton-matmul", "dtype_a": "bf16", "dtype_b": "bf16"}
    fields.update(kw)
    return GemmSpec("smem-overflow", str(fields.pop("arch", "sm_89")), **fields)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module: later tests reuse earlier compiles, as a user's runs would."""
    return tmp_path_factory.mktemp("triton-cache")


# --- validation: nothing a log says reaches Triton unchecked ---------------------------------


def test_job_for_logged_blocks_compiles_the_logged_stages_then_fewer() -> None:
    job = build_job(_spec(tile=(128, 256, 64), stages=4, num_warps=8))
    assert isinstance(job, TritonJob) and job.exact and job.kernel == "matmul"
    assert job.cc == 89 and job.dtype == "bf16"
    assert [c[3] for c in job.configs] == [4, 3, 2, 1]
    assert all(c[:3] == (128, 256, 64) and c[4] == 8 for c in job.configs)


def test_job_defaults_and_sweep_are_said_not_hidden() -> None:
    job = build_job(_spec(dtype_a=None, tile=(64, 64, 32)))
    assert isinstance(job, TritonJob)
    assert job.configs[0][3] == 3 and job.configs[0][4] == 4  # Triton's JIT defaults
    assert any("fp16 assumed" in n for n in job.notes)
    assert any("no num_stages" in n for n in job.notes)
    sweep = build_job(_spec(family="triton-attention", head_dim=128))
    assert isinstance(sweep, TritonJob) and not sweep.exact and sweep.kernel == "attention"
    assert {c[2] for c in sweep.configs} == {128}  # the log's head dim, not the sweep's
    assert len(build_job(_spec()).configs) == 18  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"arch": "sm_61"}, "no Triton target"),
        ({"tile": (96, 128, 64)}, "not powers of two"),
        ({"tile": (1024, 128, 64)}, "not powers of two"),
        ({"tile": (128, 128, 64), "num_warps": 3}, "num_warps=3"),
        ({"tile": (128, 128, 64), "stages": 12}, "num_stages=12"),
    ],
)
def test_job_refuses_out_of_range_specs(kw: dict[str, object], why: str) -> None:
    got = build_job(_spec(**kw))
    assert isinstance(got, str) and why in got


@pytest.mark.parametrize(
    "job",
    [
        [],
        {"kernel": "os.system", "cc": 89, "dtype": "fp16", "configs": [[64, 64, 32, 2, 4]]},
        {"kernel": "matmul", "cc": True, "dtype": "fp16", "configs": [[64, 64, 32, 2, 4]]},
        {"kernel": "matmul", "cc": 89, "dtype": "float16; rm", "configs": [[64, 64, 32, 2, 4]]},
        {"kernel": "matmul", "cc": 89, "dtype": "fp16", "configs": [[64, 64, "32", 2, 4]]},
        {"kernel": "matmul", "cc": 89, "dtype": "fp16", "configs": [[64, 64, 48, 2, 4]]},
        {"kernel": "matmul", "cc": 89, "dtype": "fp16", "configs": [[64, 64, 32, 2, 4]] * 33},
    ],
)
def test_child_rechecks_every_field(job: object) -> None:
    assert isinstance(check_job(job), str)


def test_closeness_is_a_few_bytes_of_scratch_not_a_factor() -> None:
    assert close_to(131072, 131074) and close_to(98304, 99000)
    assert not close_to(98304, 131074) and not close_to(163840, 131074)


# --- the spec reads Triton logs ---------------------------------------------------------------


def test_spec_reads_attention_blocks_head_dim_and_warps() -> None:
    lines = [
        "extend_attention_fwd: BLOCK_M=128, BLOCK_N=64, BLOCK_DMODEL=256, num_warps=8, "
        "num_stages=2",
        OOR.format(req=147456),
    ]
    spec = build_spec(_diagnosis(lines, (("arch", "sm_120"),)), load_kb())
    assert isinstance(spec, GemmSpec) and spec.family == "triton-attention"
    assert spec.tile == (128, 64, 256) and spec.head_dim == 256
    assert spec.num_warps == 8 and spec.stages == 2 and spec.log_required == 147456


def test_spec_keeps_matmul_family_and_bounds_warps() -> None:
    lines = ["BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_warps=99", OOR.format(req=110000)]
    spec = build_spec(_diagnosis(lines, (("arch", "sm_86"),)), load_kb())
    assert isinstance(spec, GemmSpec) and spec.family == "triton-matmul"
    assert spec.tile == (64, 64, 32) and spec.num_warps is None


# --- real cross-compiles (CPU only) -----------------------------------------------------------


@needs_triton
def test_cross_compile_matches_the_measured_rows_per_arch(cache: Path) -> None:
    configs = ((128, 128, 64, 3, 4), (128, 128, 64, 4, 4))
    for cc, expected in ((89, [65536, 98304]), (90, [98304, 131072])):
        out = run_child(
            TritonJob("matmul", cc, "bf16", configs, True), str(triton_version()), cache
        )
        assert [r["shared"] for r in out["results"]] == expected, out


@needs_triton
def test_attention_holds_q_plus_k_and_v_per_stage(cache: Path) -> None:
    job = TritonJob("attention", 86, "fp16", ((128, 64, 128, 3, 4), (128, 64, 128, 2, 4)), True)
    out = run_child(job, str(triton_version()), cache)
    shared = [r["shared"] for r in out["results"]]
    # Q (128x128) stays, K and V (64x128 each) are double-buffered at 3 stages on sm_86.
    assert shared == [98304, 65536], out


@needs_triton
def test_logged_blocks_that_agree_confirm_and_give_a_measured_stage_fix(cache: Path) -> None:
    lines = ["BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_stages=4", OOR.format(req=147456)]
    d = _diagnosis(lines, (("arch", "sm_89"),))
    v = verify(d, "compile", cache=cache)
    assert v.level == "compile" and v.status == "confirmed", v.notes
    assert v.smem_required == 147456 and v.smem_limit == 101376
    m = dict(v.measurements)
    assert m["triton[128x256x64,s4,w4].shared"] == 147456
    assert m["triton[128x256x64,s3,w4].shared"] == 98304
    assert "num_stages=3 compiles to 98304 B" in v.recommendation
    assert dict(v.toolchain)["triton"] == triton_version()


@needs_triton
def test_bytes_far_from_the_log_never_confirm(cache: Path) -> None:
    # Same blocks as above (served from the cache), but the crashed kernel needed far more.
    lines = ["BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_stages=4", OOR.format(req=229378)]
    v = verify(_diagnosis(lines, (("arch", "sm_89"),)), "compile", cache=cache)
    assert v.level == "compile" and v.status == "inconclusive"
    assert v.smem_required == 229378  # the log's figure stays; ours is only a measurement
    note = next(n for n in v.notes if "Triton compiles" in n)
    assert "147456 B" in note and "229378 B" in note and "neither confirms" in note
    assert dict(v.measurements)["triton.cached"] == 1


@needs_triton
def test_log_without_blocks_sweeps_and_stays_inconclusive(cache: Path) -> None:
    spec = _spec(family="triton-attention", head_dim=64, stages=2, log_required=120000)
    model = verify_model(spec, load_kb(), "compile")
    v = verify_triton(spec, model, cache=cache)
    assert v.level == "compile" and v.status == "inconclusive"
    assert any("names no BLOCK sizes" in n and "120000 B" in n for n in v.notes)
    assert sum(k.startswith("triton[") for k, _ in v.measurements) == 3


def test_without_triton_or_on_timeout_it_stays_at_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    spec = _spec(tile=(64, 64, 32), stages=2, log_required=110000)
    model = verify_model(spec, load_kb(), "compile")
    monkeypatch.setattr("diagnose.verify.triton_compile.triton_version", lambda: None)
    v = verify_triton(spec, model, cache=tmp_path)
    assert v.level == "model" and "triton is not installed" in v.notes[-1]
    monkeypatch.setattr("diagnose.verify.triton_compile.triton_version", lambda: "0")
    v = verify_triton(spec, model, cache=tmp_path, timeout=0.01)
    assert v.level == "model" and "timed out" in v.notes[-1]


@needs_triton
def test_corrupt_cache_entries_are_recompiled_not_trusted(tmp_path: Path) -> None:
    job = TritonJob("matmul", 80, "fp16", ((64, 64, 32, 2, 4),), True)
    version = str(triton_version())
    assert run_child(job, version, tmp_path)["cached"] == 0
    (entry,) = tmp_path.iterdir()
    entry.write_text(json.dumps({"results": "not a list"}))
    assert "error" in run_child(job, version, tmp_path, timeout=0.01)  # recompiles, times out
    entry.write_text("{")
    assert run_child(job, version, tmp_path)["results"][0]["shared"] == 8192


# --- the dev corpus: every Triton smem log with an arch gets a compile job -----------------


@pytest.fixture(scope="module")
def corpus() -> Path:
    shared = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "dev"
    if not shared.is_dir():
        pytest.skip("../shared/corpus is not present")
    return shared


def test_triton_corpus_logs_with_an_arch_get_a_compile_job(corpus: Path) -> None:
    from diagnose import diagnose_file

    seen = 0
    for log in sorted(corpus.glob("*.log")):
        if "OutOfResources" not in log.read_text(errors="replace"):
            continue
        spec = build_spec(diagnose_file(log), load_kb())
        if not isinstance(spec, GemmSpec) or spec.arch is None:
            continue
        assert spec.family in {"triton-matmul", "triton-attention"}, log.name
        assert isinstance(build_job(spec), TritonJob), log.name
        seen += 1
    assert seen >= 3
