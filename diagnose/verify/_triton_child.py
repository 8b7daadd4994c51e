"""Triton cross-compile worker, run as ``python -m diagnose.verify._triton_child`` in a subprocess.

It reads one JSON job on stdin (built and validated by
:mod:`diagnose.verify.triton_compile`, re-checked here), compiles the named
representative kernel for ``GPUTarget("cuda", cc, 32)`` once per configuration,
and writes one JSON object on stdout with each configuration's
``metadata.shared``.  No GPU is touched: Triton lowers to PTX and runs the
``ptxas`` its wheel ships.  A compiler crash or hang kills only this process.
This module writes to stdout because it is a separate program, not the library.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import tempfile
from typing import Any

KERNEL_NAMES = frozenset({"matmul", "attention"})
# Canonical element type -> Triton signature type; only these strings reach Triton.
TRITON_TYPES = {
    "fp16": "fp16",
    "bf16": "bf16",
    "fp32": "fp32",
    "fp8_e4m3": "fp8e4nv",
    "fp8_e5m2": "fp8e5",
}
POW2_BLOCKS = frozenset(2**i for i in range(4, 10))  # 16..512: tl.dot needs >= 16
WARPS = frozenset({1, 2, 4, 8, 16, 32})
MAX_CONFIGS = 32


def check_job(job: object) -> dict[str, Any] | str:
    """The job when every field is in range, else the reason it is refused."""
    if not isinstance(job, dict):
        return "job is not an object"
    if job.get("kernel") not in KERNEL_NAMES:
        return "unknown kernel"
    cc = job.get("cc")
    if not isinstance(cc, int) or isinstance(cc, bool) or not 75 <= cc <= 130:
        return "compute capability out of range"
    if job.get("dtype") not in TRITON_TYPES:
        return "unknown dtype"
    configs = job.get("configs")
    if not isinstance(configs, list) or not 1 <= len(configs) <= MAX_CONFIGS:
        return "no configurations"
    for c in configs:
        if not (isinstance(c, list) and len(c) == 5 and all(type(x) is int for x in c)):
            return "malformed configuration"
        bm, bn, bk, stages, warps = c
        if not {bm, bn, bk} <= POW2_BLOCKS or not 1 <= stages <= 8 or warps not in WARPS:
            return "configuration out of range"
    return job


def _signature(
    fn: Any, dtype: str, divisible: tuple[str, ...], unit: tuple[str, ...]
) -> tuple[dict[str, str], dict[tuple[int, ...], list[list[Any]]]]:
    """Triton's signature and the ``tt.divisibility`` attributes the JIT would specialise."""
    sig: dict[str, str] = {}
    attrs: dict[tuple[int, ...], list[list[Any]]] = {}
    for i, name in enumerate(inspect.signature(fn).parameters):
        if name.isupper() or name in unit:
            sig[name] = "constexpr"
        elif name.endswith("_ptr"):
            sig[name] = f"*{dtype}"
        elif name == "sm_scale":
            sig[name] = "fp32"
        else:
            sig[name] = "i32"
        if name in divisible:
            attrs[(i,)] = [["tt.divisibility", 16]]
    return sig, attrs


def compile_all(job: dict[str, Any]) -> dict[str, Any]:
    """Compile every configuration of ``job``; one result (``shared`` or ``error``) each."""
    # Triton's own on-disk cache would duplicate ours: keep it in a directory we delete.
    # FP fusion does not move shared memory; setting it only silences Triton 3.9's warning.
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    with tempfile.TemporaryDirectory(prefix="crashkb-triton-") as tmp:
        os.environ["TRITON_CACHE_DIR"] = tmp
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        from diagnose.verify._triton_kernels import KERNELS

        fn, divisible, unit = KERNELS[job["kernel"]]
        kernel = triton.jit(fn)
        sig, attrs = _signature(fn, TRITON_TYPES[job["dtype"]], divisible, unit)
        target = GPUTarget("cuda", job["cc"], 32)
        results: list[dict[str, Any]] = []
        for bm, bn, bk, stages, warps in job["configs"]:
            consts: dict[str, int] = {"BLOCK_M": bm, "BLOCK_N": bn, **dict.fromkeys(unit, 1)}
            consts["HEAD_DIM" if job["kernel"] == "attention" else "BLOCK_K"] = bk
            src = ASTSource(kernel, sig, constexprs=consts, attrs=attrs)
            row: dict[str, Any] = {"config": [bm, bn, bk, stages, warps]}
            try:
                done = triton.compile(
                    src, target=target, options={"num_stages": stages, "num_warps": warps}
                )
                row["shared"] = int(done.metadata.shared)
            except Exception as exc:
                lines = str(exc).strip().splitlines() or [type(exc).__name__]
                row["error"] = f"{type(exc).__name__}: {lines[-1][:200]}"
            results.append(row)
        return {"triton": str(triton.__version__), "results": results}


def main() -> int:
    """Read the job, compile, print one JSON object; exit 0 unless the job was refused."""
    try:
        job = check_job(json.loads(sys.stdin.read(65536)))
    except ValueError:
        job = "invalid JSON"
    if isinstance(job, str):
        sys.stdout.write(json.dumps({"error": job}) + "\n")
        return 2
    try:
        out = compile_all(job)
    except ImportError as exc:
        out = {"error": f"triton not importable: {exc}"}
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
