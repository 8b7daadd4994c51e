"""Verifier benchmark and GPU record: level costs side by side, then the run level on this GPU.

    python bench/verify_h200.py [--out results.json]

Prints model vs compile-from-cache vs run wall time as ratios (no assertions), the
run-level numbers for each GEMM mode (bf16, fp8, FP4 values dequantised), a
same-arch reproduction of an sm_90 opt-in overflow, and a memory-budget replay.
Compile level is included only when nvcc and CUTLASS headers are present.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from diagnose.kb import load_kb
from diagnose.verify.model import verify_model
from diagnose.verify.run import run_worker, verify_run_gemm
from diagnose.verify.spec import GemmSpec


def _timed(fn, *args, **kw):  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t


def main() -> None:
    """Run every measurement once and print a table plus JSON."""
    out_path = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else None
    kb = load_kb()
    sm120 = GemmSpec(
        "smem-overflow",
        "sm_120",
        family="cutlass-grouped-blockscaled",
        dtype_a="fp4_e2m1",
        dtype_b="fp4_e2m1",
        dtype_d="bf16",
        tile=(128, 32, 128),
        epilogue_c=False,
    )
    model, _t_cold = _timed(verify_model, sm120, kb, "run")
    _, t_model_warm = _timed(verify_model, sm120, kb, "run")
    record: dict[str, object] = {
        "date": time.strftime("%Y-%m-%d"),
        "model_ms": t_model_warm * 1e3,
        "model": model.to_dict(),
    }
    try:
        from diagnose.verify.compile import verify_compile

        comp, t_cold = _timed(verify_compile, sm120, model)
        _, t_cached = _timed(verify_compile, sm120, model)
        record.update(compile=comp.to_dict(), compile_s=t_cold, compile_cached_s=t_cached)
    except Exception as exc:  # a bench reports, it does not stop
        record["compile_error"] = repr(exc)
    base = model if "compile" not in record else comp
    runs = {}
    for label, spec, problem in [
        ("fp4-dequant sm_120 tile", sm120, (4096, 4096, 7168)),
        (
            "fp8 sm_90",
            GemmSpec(
                "smem-overflow",
                "sm_90",
                family="cutlass-sm90-tma-ws",
                dtype_a="fp8_e4m3",
                dtype_b="fp8_e4m3",
                dtype_d="bf16",
                tile=(128, 256, 128),
            ),
            (4096, 4096, 7168),
        ),
        (
            "bf16 sm_90",
            GemmSpec(
                "smem-overflow",
                "sm_90",
                family="cutlass-sm90-tma-ws",
                dtype_a="bf16",
                dtype_b="bf16",
                dtype_d="bf16",
                tile=(128, 256, 64),
            ),
            (4096, 4096, 7168),
        ),
    ]:
        prior = base if spec is sm120 else verify_model(spec, kb, "run")
        v, t = _timed(verify_run_gemm, spec, prior, problem)
        runs[label] = {"wall_s": t, **v.to_dict()}
    # Same arch as the crash: a Triton sm_90 kernel that asked for 245760 B (5 stages of 48 KiB).
    tri = GemmSpec(
        "smem-overflow",
        "sm_90",
        family="triton-matmul",
        dtype_a="bf16",
        dtype_b="bf16",
        tile=(128, 256, 64),
        stages=5,
        log_required=245760,
        log_limit=232448,
    )
    v, t = _timed(verify_run_gemm, tri, verify_model(tri, kb, "run"), (2048, 2048, 2048))
    runs["sm_90 opt-in 245760 B"] = {"wall_s": t, **v.to_dict()}
    record["run"] = runs
    mem, t_mem = _timed(
        run_worker, {"kind": "memory", "free": 1 << 30, "request": 3 << 30, "extra": 3 << 30}
    )
    record["memory_replay"] = {"wall_s": t_mem, **mem}
    print(f"model (warm)       {t_model_warm * 1e3:9.3f} ms")
    if "compile_s" in record:
        print(
            f"compile cold       {record['compile_s']:9.2f} s   "
            f"({record['compile_s'] / t_model_warm:,.0f}x model)"
        )
        print(f"compile cached     {record['compile_cached_s']:9.3f} s")
    for label, r in runs.items():
        m = r["measurements"]
        print(
            f"run {label:24s} {r['wall_s']:6.2f} s  status={r['status']:12s} "
            f"rel_err={m.get('run.rel_error', '-')}  ms/GEMM={m.get('run.ms_per_gemm', '-')}  "
            f"optin={m.get('run.optin_attempt_result', '-')}"
        )
    print(f"memory replay      {t_mem:6.2f} s  {mem.get('as_logged')} | {mem.get('recommended')}")
    text = json.dumps(record, indent=1, default=str)
    if out_path:
        out_path.write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
