"""GPU worker for level 3, run as ``python -m diagnose.verify._gpu_child`` in a subprocess.

It reads one JSON job on stdin (already validated by :mod:`diagnose.verify.run`,
re-checked here) and writes one JSON object on stdout.  A kernel that kills the
CUDA context kills only this process.  This module is the one place in the
package that writes to stdout: it is a separate program, not the library.
"""

from __future__ import annotations

import ctypes
import json
import sys
import time
from typing import Any

# A kernel with only dynamic shared memory, in PTX so the driver JITs it for any GPU.
_PTX = b""".version 7.0
.target sm_70
.address_size 64
.extern .shared .align 16 .b8 dyn[];
.visible .entry probe() { ret; }
"""
_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _int(job: dict[str, Any], key: str, low: int, high: int, default: int) -> int:
    v = job.get(key, default)
    return v if isinstance(v, int) and low <= v <= high else default


def _optin_attempt(nbytes: int) -> dict[str, Any]:
    """cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes): the call CUTLASS makes."""
    cuda = ctypes.CDLL("libcuda.so.1")
    ctx, mod, fn = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    cuda.cuInit(0)
    dev = ctypes.c_int()
    cuda.cuDeviceGet(ctypes.byref(dev), 0)
    cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
    cuda.cuCtxSetCurrent(ctx)
    rc = cuda.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(_PTX))
    if rc != 0:
        return {"error": f"cuModuleLoadData {rc}"}
    cuda.cuModuleGetFunction(ctypes.byref(fn), mod, b"probe")
    rc = cuda.cuFuncSetAttribute(fn, 8, ctypes.c_int(nbytes))  # 8 = MAX_DYNAMIC_SHARED_SIZE_BYTES
    name = ctypes.c_char_p()
    cuda.cuGetErrorName(rc, ctypes.byref(name))
    return {"bytes": nbytes, "rc": rc, "name": (name.value or b"").decode()}


def _gemm(job: dict[str, Any]) -> dict[str, Any]:
    import torch  # type: ignore[import-not-found, unused-ignore]

    m = _int(job, "m", 1, 65536, 1024)
    n = _int(job, "n", 1, 65536, 4096)
    k = _int(job, "k", 16, 65536, 7168)
    mode = job.get("mode") if job.get("mode") in {"bf16", "fp8", "fp4-dequant"} else "bf16"
    g = torch.Generator(device="cuda").manual_seed(0)
    if mode == "fp4-dequant":
        # E2M1 values times per-16 block scales, dequantised to bf16: same values, not FP4 math.
        table = torch.tensor(_E2M1, device="cuda")

        def sign(shape: tuple[int, int]) -> Any:
            return torch.where(torch.rand(shape, device="cuda", generator=g) < 0.5, -1.0, 1.0)

        a = table[torch.randint(0, 8, (m, k), device="cuda", generator=g)] * sign((m, k))
        b = table[torch.randint(0, 8, (n, k), device="cuda", generator=g)] * sign((n, k))
        sa = torch.rand(m, k // 16, device="cuda", generator=g).repeat_interleave(16, 1) + 0.5
        sb = torch.rand(n, k // 16, device="cuda", generator=g).repeat_interleave(16, 1) + 0.5
        a, b = (a * sa).to(torch.bfloat16), (b * sb).to(torch.bfloat16)
    else:
        a = torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
        b = torch.randn(n, k, device="cuda", generator=g).to(torch.bfloat16)
    ref = a.float() @ b.float().t()
    if mode == "fp8":
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        one = torch.ones((), device="cuda")
        ref = a8.float() @ b8.float().t()

        def run() -> Any:
            return torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    else:

        def run() -> Any:
            return a @ b.t()

    out = run()
    torch.cuda.synchronize()
    rel = float((out.float() - ref).norm() / ref.norm())
    times = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        run()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    ms = times[len(times) // 2]
    return {
        "m": m,
        "n": n,
        "k": k,
        "mode": mode,
        "rel_error": rel,
        "ms_per_gemm": ms,
        "tflops": 2 * m * n * k / ms / 1e9,
    }


def _memory(job: dict[str, Any]) -> dict[str, Any]:
    """Leave exactly the log's free bytes, try the log's allocation, then the recommended room."""
    import torch  # type: ignore[import-not-found, unused-ignore]

    free0, total = torch.cuda.mem_get_info()
    out: dict[str, Any] = {"local_free": free0, "local_total": total}
    want_free = _int(job, "free", 0, 1 << 44, 0)
    request = _int(job, "request", 1, 1 << 44, 1)
    extra = _int(job, "extra", 0, 1 << 44, 0)
    for label, leave in (("as_logged", want_free), ("recommended", want_free + extra)):
        blocker = None
        torch.cuda.empty_cache()
        free, _ = torch.cuda.mem_get_info()
        if free < leave:
            out[label] = "local GPU has less free memory than the case needs"
            continue
        try:
            blocker = torch.empty(free - leave, dtype=torch.uint8, device="cuda")
            left = torch.cuda.mem_get_info()[0]
            try:
                buf = torch.empty(request, dtype=torch.uint8, device="cuda")
                del buf
                out[label] = f"allocated {request} B with {left} B free"
            except torch.OutOfMemoryError:
                out[label] = f"OOM: {request} B requested, {left} B free"
        finally:
            del blocker
    return out


def main() -> None:
    """Read the job, run it, print one JSON object."""
    job = json.loads(sys.stdin.read() or "{}")
    result: dict[str, Any] = {}
    try:
        import torch  # type: ignore[import-not-found, unused-ignore]

        if not torch.cuda.is_available():
            print(json.dumps({"error": "no CUDA device"}))
            return
        p = torch.cuda.get_device_properties(0)
        result["device"] = f"{p.name} (cc {p.major}.{p.minor})"
        result["cc"] = p.major * 10 + p.minor
        result["optin"] = int(getattr(p, "shared_memory_per_block_optin", 0))
        result["torch"] = torch.__version__
        result["cuda"] = str(torch.version.cuda)
        t0 = time.perf_counter()
        if job.get("kind") == "memory":
            result.update(_memory(job))
        else:
            if isinstance(job.get("optin_bytes"), int) and 0 < job["optin_bytes"] < 1 << 20:
                result["optin_attempt"] = _optin_attempt(job["optin_bytes"])
                result["optin_ok"] = _optin_attempt(result["optin"])
            result.update(_gemm(job))
        result["seconds"] = time.perf_counter() - t0
    except Exception as exc:  # the worker reports every failure as data
        result["error"] = f"{type(exc).__name__}: {exc}"[:500]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
