"""Level 3 (``run``): the GEMM or the allocations on the local GPU, in a subprocess with a timeout.

What it can claim depends on the local arch.  Where it IS the crash's arch, the
worker repeats CUTLASS's ``cudaFuncSetAttribute`` opt-in with the crash's byte
count and reports the driver's answer: the failure itself.  Elsewhere it runs
the same GEMM (FP4 values dequantised to bf16 on GPUs without FP4 MMA, said
plainly) against a PyTorch fp32 reference and reports error and time; that
shows the shapes and math are sane and never counts as evidence about the
crash's arch.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from typing import Any

from diagnose.verify.result import Verification
from diagnose.verify.spec import GemmSpec, MemorySpec

RUN_TIMEOUT = 60.0
MARGIN = 1 << 30


def run_worker(job: dict[str, Any], timeout: float = RUN_TIMEOUT) -> dict[str, Any]:
    """Run the GPU worker on ``job``; a dict with ``error`` when it crashed or timed out."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "diagnose.verify._gpu_child"],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"GPU worker timed out after {timeout:.0f} s"}
    except OSError as exc:
        return {"error": f"GPU worker could not start: {exc}"}
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return {"error": f"GPU worker exited {done.returncode}: {tail}"}
    try:
        out = json.loads(lines[-1])
    except ValueError:
        return {"error": "GPU worker printed invalid JSON"}
    return out if isinstance(out, dict) else {"error": "GPU worker printed a non-object"}


def _mode(spec: GemmSpec) -> str:
    if spec.dtype_a == "fp4_e2m1":
        return "fp4-dequant"
    if spec.dtype_a and spec.dtype_a.startswith("fp8"):
        return "fp8"
    return "bf16"


def verify_run_gemm(
    spec: GemmSpec,
    prior: Verification,
    problem: tuple[int, int, int] | None = None,
    timeout: float = RUN_TIMEOUT,
) -> Verification:
    """Run level 3 for a GEMM finding on top of the compile (or model) result."""
    job: dict[str, Any] = {"kind": "gemm", "mode": _mode(spec)}
    if problem:
        job.update(m=problem[0], n=problem[1], k=problem[2])
    if prior.smem_required:
        job["optin_bytes"] = prior.smem_required
    got = run_worker(job, timeout)
    notes = list(prior.notes)
    if problem and spec.problem_from:
        notes.append("Sized from the log: " + "; ".join(spec.problem_from) + ".")
    elif not problem:
        notes.append("The log gives no GEMM size: ran the worker's default 1024 x 4096 x 7168.")
    if "error" in got and "device" not in got:
        return replace(prior, notes=(*notes, f"Not run: {got['error']}."))
    meas = list(prior.measurements)
    for key in ("m", "n", "k", "rel_error", "ms_per_gemm", "tflops", "optin", "seconds"):
        if isinstance(got.get(key), int | float):
            meas.append((f"run.{key}", got[key]))
    device = str(got.get("device", ""))
    toolchain = (
        *prior.toolchain,
        ("torch", str(got.get("torch", ""))),
        ("cuda", str(got.get("cuda", ""))),
    )
    if "error" in got:
        notes.append(f"GPU run failed: {got['error']}.")
    local = f"sm_{got.get('cc')}"
    status = prior.status
    if got.get("mode") == "fp4-dequant":
        notes.append(
            "This GPU has no FP4 MMA: the GEMM ran on FP4 values dequantised to bf16 "
            "(same values, bf16 tensor-core math, cuBLAS tiles)."
        )
    if local == spec.arch and isinstance(got.get("optin_attempt"), dict):
        att = got["optin_attempt"]
        meas.append(("run.optin_attempt_bytes", int(att.get("bytes", 0))))
        meas.append(("run.optin_attempt_result", str(att.get("name", att.get("error", "")))))
        failed = att.get("rc", 0) != 0
        if prior.smem_required and prior.smem_limit:
            over = prior.smem_required > prior.smem_limit
            if failed and over:
                status = "confirmed"
                notes.append(
                    f"Reproduced on this {spec.arch} GPU: the opt-in to "
                    f"{att.get('bytes')} B fails with {att.get('name')}."
                )
            elif not failed and not over:
                status = "refuted"
                notes.append(f"This {spec.arch} GPU grants {att.get('bytes')} B: no overflow.")
    elif spec.arch:
        notes.append(
            f"Ran on {device or local}, not {spec.arch}: this shows the GEMM's shapes "
            f"and numerics are sane, NOT that the {spec.arch} kernel works."
        )
    return replace(
        prior,
        level="run" if "rel_error" in got or "optin_attempt" in got else prior.level,
        status=status,
        device=device or None,
        measurements=tuple(meas),
        notes=tuple(notes),
        toolchain=toolchain,
    )


def verify_run_memory(
    spec: MemorySpec, prior: Verification, timeout: float = RUN_TIMEOUT
) -> Verification:
    """Leave the log's free memory on the local GPU and try the log's allocation."""
    notes = list(prior.notes)
    if spec.requested is None or spec.free is None:
        return replace(prior, notes=(*notes, "Not run: the log gives no request/free pair."))
    shortfall = spec.requested - spec.free
    job = {
        "kind": "memory",
        "free": spec.free,
        "request": spec.requested,
        "extra": max(shortfall, 0) + MARGIN,
    }
    got = run_worker(job, timeout)
    if "error" in got and "device" not in got:
        return replace(prior, notes=(*notes, f"Not run: {got['error']}."))
    meas = list(prior.measurements)
    for key in ("local_free", "local_total", "as_logged", "recommended"):
        if key in got:
            meas.append((f"run.{key}", got[key]))
    status = prior.status
    logged, rec = str(got.get("as_logged", "")), str(got.get("recommended", ""))
    if logged.startswith("OOM") and rec.startswith("allocated"):
        status = "confirmed"
        notes.append(
            "Reproduced: with the log's free memory the allocation fails; with the "
            "recommended headroom it succeeds."
        )
    elif logged.startswith("allocated"):
        status = "refuted"
        notes.append("With the log's free memory left, the allocation succeeded here.")
    return replace(
        prior,
        level="run",
        status=status,
        device=str(got.get("device")) or None,
        measurements=tuple(meas),
        notes=tuple(notes),
    )
