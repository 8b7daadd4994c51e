"""Level 2 (``compile``) for Triton crashes: cross-compile a representative kernel, read its bytes.

Triton lowers a kernel for any ``GPUTarget("cuda", cc, 32)`` on a machine without
that GPU (or any GPU): its wheel ships ``ptxas``.  ``metadata.shared`` is the
figure Triton's launcher compares with the device's opt-in limit before raising
``OutOfResources: out of resource: shared memory, Required: N``.

The kernel is ours (:mod:`diagnose.verify._triton_kernels`): a tiled ``tl.dot``
matmul, or a flash-attention forward when the spec's family is attention.  Only
validated numbers from the :class:`GemmSpec` reach it (power-of-two blocks,
``num_stages``, ``num_warps``, a dtype from a fixed table).  The compile runs in
``python -m diagnose.verify._triton_child`` with a timeout; results are cached
by a hash of the job, the Triton version and the kernels' source.

Representative means not the crashed kernel: the status is ``confirmed`` only
when the log named the blocks and our bytes agree with the log's ``Required``
within :data:`CLOSE_BYTES` / :data:`CLOSE_FRACTION`.  Otherwise both numbers are
reported and the result stays inconclusive, saying why.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from diagnose.records import record
from diagnose.verify.cache import COMPILE_TIMEOUT, cache_dir, cache_load, cache_store
from diagnose.verify.result import Verification
from diagnose.verify.spec import GemmSpec

TRITON_FAMILIES = frozenset({"triton-matmul", "triton-attention"})
# Triton's JIT defaults when the log does not say (triton/backends/nvidia/compiler.py).
DEFAULT_STAGES, DEFAULT_WARPS = 3, 4
# Our kernel counts as the crashed one when its bytes are this close to the log's figure.
# Triton adds a few bytes of scratch beside the operand buffers (a log's 131074 vs 131072).
CLOSE_BYTES, CLOSE_FRACTION = 1024, 0.03
# Common blocks compiled when the log names none, kept to 18 compiles (~1 s each on one core):
# tiles from Triton's matmul tutorial autotune list, and FlexAttention/sglang attention blocks
# over the usual head dims; stages around Triton's default of 3.
SWEEP_MATMUL = ((64, 64, 32), (128, 64, 32), (128, 128, 32), (128, 128, 64), (128, 256, 64),
                (256, 128, 64))  # fmt: skip
SWEEP_ATTENTION_MN, SWEEP_HEAD_DIM = ((64, 64), (128, 64), (128, 128)), (64, 128)
SWEEP_STAGES = (2, 3, 4)
_DTYPES = {"fp16": "fp16", "bf16": "bf16", "fp32": "fp32", "tf32": "fp32"}
_DTYPES.update(fp8_e4m3="fp8_e4m3", fp8_e5m2="fp8_e5m2")
_BLOCKS = frozenset(2**i for i in range(4, 10))  # 16..512, what tl.arange/tl.dot accept
_WARPS = frozenset({1, 2, 4, 8, 16, 32})
_KERNELS = Path(__file__).with_name("_triton_kernels.py")

Config = tuple[int, int, int, int, int]  # BLOCK_M, BLOCK_N, BLOCK_K or head dim, stages, warps


@record
class TritonJob:
    """What the child compiles: kernel, target cc, dtype and configurations (validated)."""

    kernel: str
    cc: int
    dtype: str
    configs: tuple[Config, ...]
    exact: bool
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The child's stdin object."""
        return {
            "kernel": self.kernel,
            "cc": self.cc,
            "dtype": self.dtype,
            "configs": [list(c) for c in self.configs],
        }


def triton_version() -> str | None:
    """The installed Triton's version, read without importing it (importing takes a second)."""
    from importlib import metadata

    try:
        return metadata.version("triton")
    except metadata.PackageNotFoundError:
        return None


def build_job(spec: GemmSpec) -> TritonJob | str:
    """The compile job for ``spec``, or why there is none."""
    cc = int(spec.arch[3:]) if spec.arch and spec.arch[3:].isdigit() else 0
    if not 75 <= cc <= 130:
        return f"no Triton target for {spec.arch or 'an unknown arch'}"
    attention = spec.family == "triton-attention"
    notes: list[str] = []
    dtype = _DTYPES.get(spec.dtype_a or "")
    if dtype is None:
        dtype = "fp16"
        notes.append("The log names no element type: fp16 assumed (bf16 takes the same bytes).")
    warps = spec.num_warps or DEFAULT_WARPS
    if warps not in _WARPS:
        return f"num_warps={warps} is not a power of two up to 32"
    if spec.tile is not None:
        if not set(spec.tile) <= _BLOCKS:
            return f"blocks {spec.tile} are not powers of two in 16..512"
        top = spec.stages or DEFAULT_STAGES
        if not 1 <= top <= 8:
            return f"num_stages={top} is out of range"
        if spec.stages is None:
            notes.append(f"The log names no num_stages: Triton's default {DEFAULT_STAGES} used.")
        # The log's stage count first, then fewer: the largest count that fits is the advice.
        configs = tuple((*spec.tile, s, warps) for s in range(top, 0, -1))
        return TritonJob(
            "attention" if attention else "matmul", cc, dtype, configs, True, tuple(notes)
        )
    heads = (spec.head_dim,) if spec.head_dim and spec.head_dim in _BLOCKS else SWEEP_HEAD_DIM
    blocks = (
        tuple((m, n, d) for m, n in SWEEP_ATTENTION_MN for d in heads)
        if attention
        else SWEEP_MATMUL
    )
    stages = (spec.stages,) if spec.stages and 1 <= spec.stages <= 8 else SWEEP_STAGES
    configs = tuple((*b, s, warps) for b in blocks for s in stages)
    return TritonJob(
        "attention" if attention else "matmul", cc, dtype, configs, False, tuple(notes)
    )


def run_child(
    job: TritonJob, version: str, cache: Path | None = None, timeout: float = COMPILE_TIMEOUT
) -> dict[str, Any]:
    """Compile ``job`` in the child process (cached); ``{"error": ...}`` on any failure."""
    payload = json.dumps(job.to_json(), sort_keys=True)
    try:
        kernels = _KERNELS.read_bytes()
    except OSError as exc:
        return {"error": f"kernel source unreadable: {exc}"}
    key = hashlib.sha256(
        b"\0".join([payload.encode(), version.encode(), hashlib.sha256(kernels).digest()])
    ).hexdigest()[:24]
    hit = (cache or cache_dir()) / f"triton-{key}.json"
    stored = cache_load(hit)
    if stored is not None and isinstance(stored.get("results"), list):
        return {**stored, "cached": 1}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "diagnose.verify._triton_child"],
            input=payload,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"Triton compile timed out after {timeout:.0f} s"}
    except OSError as exc:
        return {"error": f"Triton compile could not start: {exc}"}
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    try:
        out = json.loads(lines[-1]) if lines else None
    except ValueError:
        out = None
    if not isinstance(out, dict):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return {"error": f"Triton compile exited {done.returncode}: {tail}"}
    if "error" in out or not isinstance(out.get("results"), list):
        return {"error": str(out.get("error", "no results"))[:300]}
    cache_store(hit, out)
    return {**out, "cached": 0}


def _measured(out: dict[str, Any]) -> list[tuple[Config, int | str]]:
    """``(config, shared bytes or error text)`` per row the child returned, shape-checked."""
    rows: list[tuple[Config, int | str]] = []
    for row in out.get("results", []):
        cfg = row.get("config") if isinstance(row, dict) else None
        if not (isinstance(cfg, list) and len(cfg) == 5 and all(type(x) is int for x in cfg)):
            continue
        config: Config = (cfg[0], cfg[1], cfg[2], cfg[3], cfg[4])
        shared = row.get("shared")
        if type(shared) is int and shared >= 0:
            rows.append((config, shared))
        else:
            rows.append((config, str(row.get("error", "no size"))[:200]))
    return rows


def label(kernel: str, c: Config) -> str:
    """``BLOCK_M=128, BLOCK_N=64, HEAD_DIM=128, num_stages=3, num_warps=4``."""
    inner = "HEAD_DIM" if kernel == "attention" else "BLOCK_K"
    return f"BLOCK_M={c[0]}, BLOCK_N={c[1]}, {inner}={c[2]}, num_stages={c[3]}, num_warps={c[4]}"


def close_to(compiled: int, logged: int) -> bool:
    """True when our kernel's bytes are the log's within the tolerance (same kernel shape)."""
    return abs(compiled - logged) <= max(CLOSE_BYTES, CLOSE_FRACTION * logged)


def verify_triton(
    spec: GemmSpec,
    model: Verification,
    *,
    cache: Path | None = None,
    timeout: float = COMPILE_TIMEOUT,
) -> Verification:
    """Run level 2 for a Triton finding; stays at ``model`` (saying why) when it cannot."""

    def stay(why: str) -> Verification:
        return replace(model, notes=(*model.notes, f"Not compiled: {why}."))

    version = triton_version()
    if version is None:
        return stay("triton is not installed (pip install -e '.[verify]' in a crashkb checkout)")
    if model.smem_limit is None:
        return stay("no target arch")
    job = build_job(spec)
    if isinstance(job, str):
        return stay(job)
    out = run_child(job, version, cache, timeout)
    if "error" in out:
        return stay(str(out["error"]))
    rows = _measured(out)
    sizes = [(c, s) for c, s in rows if isinstance(s, int)]
    failed = [f"{label(job.kernel, c)}: {s}" for c, s in rows if isinstance(s, str)]
    if not rows or (job.exact and isinstance(rows[0][1], str)) or not sizes:
        return stay("Triton could not compile " + ("; ".join(failed[:3]) or "the kernel"))
    meas = list(model.measurements)
    meas.extend(
        (f"triton[{'x'.join(map(str, c[:3]))},s{c[3]},w{c[4]}].shared", s) for c, s in sizes
    )
    meas.append(("triton.cached", int(out.get("cached", 0))))
    base = replace(
        model,
        level="compile",
        method=f"triton {version} compile for GPUTarget('cuda', {job.cc}, 32), metadata.shared",
        toolchain=(("triton", str(out.get("triton", version))[:40]),),
        measurements=tuple(meas),
        notes=(*model.notes, *job.notes),
    )
    if job.exact:
        return _exact(spec, job, base, rows, failed)
    return _sweep(spec, job, base, sizes, failed)


def _what(job: TritonJob) -> str:
    kind = "flash-attention forward" if job.kernel == "attention" else "tiled tl.dot matmul"
    return f"a representative {job.dtype} {kind}"


def _exact(
    spec: GemmSpec,
    job: TritonJob,
    base: Verification,
    rows: list[tuple[Config, int | str]],
    failed: list[str],
) -> Verification:
    """The log named the blocks: compare our bytes with its ``Required`` and the kb limit."""
    first, got = rows[0]
    assert isinstance(got, int)  # verify_triton stays at model when the log's config failed
    limit = base.smem_limit or 0
    notes = list(base.notes)
    status = base.status
    required: int | None = base.smem_required
    head = (
        f"Triton compiles {_what(job)} with {label(job.kernel, first)} for {spec.arch} "
        f"to {got} B of shared memory"
    )
    logged = spec.log_required
    if logged is None:
        notes.append(f"{head}; the log has no 'Required' figure to compare it with, so a "
                     "representative kernel cannot stand for the crashed one.")  # fmt: skip
    elif close_to(got, logged):
        required = got
        if got > limit:
            status = "confirmed"
            notes.append(
                f"{head}; the log's Triton reported Required: {logged} B. Both exceed "
                f"{spec.arch}'s opt-in {limit} B: this configuration cannot launch there."
            )
        else:
            notes.append(f"{head}, as the log's {logged} B; both fit {limit} B, so shared "
                         "memory does not explain the failure on this arch.")  # fmt: skip
    else:
        notes.append(
            f"{head}; the log's Triton reported Required: {logged} B ({got / logged:.2f}x). "
            "The kernel that crashed holds different buffers than ours, so this compile "
            "neither confirms nor refutes it."
        )
    fits = [(c, s) for c, s in rows[1:] if isinstance(s, int) and s <= limit]
    rec = base.recommendation
    if got > limit and fits:
        c, s = fits[0]
        whose = "" if required == got else " (for our representative kernel)"
        rec = (
            f"num_stages={c[3]} compiles to {s} B for {spec.arch}, within {limit} B{whose}; "
            f"num_stages={first[3]} needs {got} B."
        )
    if failed:
        notes.append("Triton could not compile: " + "; ".join(failed[:3]) + ".")
    return replace(base, status=status, smem_required=required, stages=first[3],
                   notes=tuple(notes), recommendation=rec)  # fmt: skip


def _sweep(
    spec: GemmSpec,
    job: TritonJob,
    base: Verification,
    sizes: list[tuple[Config, int]],
    failed: list[str],
) -> Verification:
    """The log named no blocks: compile common ones, report the nearest; never confirms."""
    notes = list(base.notes)
    limit = base.smem_limit or 0
    low, high = min(s for _, s in sizes), max(s for _, s in sizes)
    head = (
        f"The log names no BLOCK sizes: Triton compiles {len(sizes)} common configurations "
        f"of {_what(job)} for {spec.arch} to {low}-{high} B"
    )
    logged = spec.log_required
    if logged is not None:
        c, s = min(sizes, key=lambda cs: (abs(cs[1] - logged), cs[0]))
        match = "matches" if close_to(s, logged) else "is the nearest to"
        notes.append(
            f"{head}; {label(job.kernel, c)} at {s} B {match} the log's Required: {logged} B. "
            "Blocks guessed from common sizes cannot confirm the crash: inconclusive."
        )
    else:
        notes.append(f"{head}; the log has no 'Required' figure to compare with: inconclusive.")
    fitting = [c for c, s in sizes if s <= limit]
    notes.append(
        f"{len(fitting)} of {len(sizes)} fit {spec.arch}'s {limit} B"
        + (f", e.g. {label(job.kernel, max(fitting, key=_work))}." if fitting else ".")
    )
    status = base.status if base.status == "refuted" else "inconclusive"
    return replace(base, status=status, notes=tuple(notes))


def _work(c: Config) -> tuple[int, int]:
    """Work per program (M·N·K), then fewer stages: the fitting config worth trying first."""
    return c[0] * c[1] * c[2], -c[3]
