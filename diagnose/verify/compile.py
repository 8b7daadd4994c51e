"""Level 2 (``compile``): build the real CUTLASS kernel type for the crash's arch and read its size.

A host-only probe instantiates the kernel of the spec's family and tile with
real CUTLASS headers (FlashInfer's bundled copy when installed, else the
``nvidia-cutlass`` wheel) and prints ``GemmKernel::SharedStorageSize`` and the
builder's stage count.  No GPU of that arch is needed: the sizes are
compile-time constants of the arch tag.  The probe source is generated only
from validated fields mapped through fixed tables; nvcc and the probe run in
subprocesses with timeouts; results are cached by a hash of everything that
determines them, under ``~/.cache/crashkb/verify``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

from diagnose.records import record
from diagnose.verify.cache import COMPILE_TIMEOUT, cache_dir, cache_load, cache_store
from diagnose.verify.model import arch_mismatch
from diagnose.verify.result import Verification
from diagnose.verify.spec import GemmSpec

RUN_TIMEOUT = 20.0

# Canonical dtype -> CUTLASS element type; only these strings can reach a probe.
_CUTLASS_TYPES = {
    "fp4_e2m1": "cutlass::float_e2m1_t",
    "fp8_e4m3": "cutlass::float_e4m3_t",
    "fp8_e5m2": "cutlass::float_e5m2_t",
    "bf16": "cutlass::bfloat16_t",
    "fp16": "cutlass::half_t",
    "fp32": "float",
}
_ARCH_TAGS = {90: "Sm90", 100: "Sm100", 103: "Sm100", 120: "Sm120", 121: "Sm120"}
_POW2 = frozenset(2**i for i in range(3, 11))


@record
class Headers:
    """A CUTLASS include directory, its version and where it came from."""

    include: Path
    version: str
    source: str


def find_nvcc() -> tuple[str, str] | None:
    """Path and version of nvcc (``PATH``, then ``$CUDA_HOME/bin``), or ``None``."""
    candidates = [shutil.which("nvcc")]
    cuda_home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    candidates.append(str(Path(cuda_home) / "bin" / "nvcc"))
    for c in candidates:
        if c and Path(c).is_file():
            try:
                out = subprocess.run([c, "--version"], capture_output=True, text=True, timeout=30)
            except (OSError, subprocess.SubprocessError):
                continue
            m = re.search(r"release [\d.]+, V([\d.]+)", out.stdout)
            return c, m.group(1) if m else "unknown"
    return None


def find_headers() -> Headers | None:
    """CUTLASS headers the user's framework ships, else the ``nvidia-cutlass`` wheel's."""
    import importlib.util

    places = [
        ("flashinfer", ("data", "cutlass", "include"), "FlashInfer wheel"),
        ("cutlass_library", ("source", "include"), "nvidia-cutlass wheel"),
    ]
    for module, parts, label in places:
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            found = None
        if found is None or not found.submodule_search_locations:
            continue
        inc = Path(next(iter(found.submodule_search_locations))).joinpath(*parts)
        version = _header_version(inc)
        if version:
            return Headers(inc, version, label)
    return None


def _header_version(inc: Path) -> str | None:
    try:
        text = (inc / "cutlass" / "version.h").read_text(errors="replace")
    except OSError:
        return None
    nums = [re.search(rf"#define CUTLASS_{p} (\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in nums if m) if all(nums) else None


def probe_source(spec: GemmSpec, epilogue_c: bool) -> str | None:
    """The probe translation unit for ``spec``; ``None`` when the family has no probe."""
    cc = int(spec.arch[3:]) if spec.arch and spec.arch[3:].isdigit() else 0
    tag = _ARCH_TAGS.get(cc)
    tile = spec.tile
    if tag is None or tile is None or not all(t in _POW2 for t in tile):
        return None
    a = _CUTLASS_TYPES.get(spec.dtype_a or "")
    b = _CUTLASS_TYPES.get(spec.dtype_b or "")
    d = _CUTLASS_TYPES.get(spec.dtype_d or "bf16", "cutlass::bfloat16_t")
    if a is None or b is None:
        return None
    c = d if epilogue_c else "void"
    shape = f"Shape<_{tile[0]},_{tile[1]},_{tile[2]}>"
    if spec.family in {"cutlass-grouped-blockscaled", "cutlass-dense-blockscaled"} and cc >= 100:
        grouped = spec.family == "cutlass-grouped-blockscaled"
        wrap = "cutlass::nv_float4_t" if "ue8m0" not in spec.dtypes else "cutlass::mx_float4_t"
        a_t = f"{wrap}<{a}>" if spec.dtype_a == "fp4_e2m1" else f"cutlass::mx_float8_t<{a}>"
        b_t = f"{wrap}<{b}>" if spec.dtype_b == "fp4_e2m1" else f"cutlass::mx_float8_t<{b}>"
        mainloop, epilogue = (
            "cutlass::gemm::collective::KernelScheduleAuto",
            "cutlass::epilogue::TmaWarpSpecialized",
        )
        cluster = "Shape<_1,_1,_1>"
        if cc < 120:
            # SM100/SM103 (tcgen05, accumulators in tensor memory).  One SM: the builder picks
            # the dense kernel and epilogue; a grouped GEMM must name the pointer-array 1-SM
            # schedules (CUTLASS example 75), which Auto does not choose.  A cluster of two
            # along M runs the 2-SM MMA (the tile is then the pair's, M = 2 x one CTA's), whose
            # schedules are always named (CUTLASS examples 72b, 75).
            nvf4 = wrap == "cutlass::nv_float4_t" and a_t == b_t
            kind = "Nvf4Sm100" if nvf4 else "BlockScaledSm100"
            two_sm = spec.cluster is not None and spec.cluster[0] == 2
            if two_sm:
                cluster = "Shape<_2,_1,_1>"
                array = "PtrArray" if grouped else ""
                mainloop = f"cutlass::gemm::Kernel{array}TmaWarpSpecialized2Sm{kind}"
                epilogue = f"cutlass::epilogue::{array}TmaWarpSpecialized2Sm"
            elif grouped:
                mainloop = f"cutlass::gemm::KernelPtrArrayTmaWarpSpecialized1Sm{kind}"
                epilogue = "cutlass::epilogue::PtrArrayTmaWarpSpecialized1Sm"
            else:
                epilogue = "cutlass::epilogue::collective::EpilogueScheduleAuto"
        return _render(
            tag,
            a_t,
            b_t,
            c,
            d,
            shape,
            "OpClassBlockScaledTensorOp",
            grouped,
            align_a=32 if spec.dtype_a == "fp4_e2m1" else 16,
            align_b=32 if spec.dtype_b == "fp4_e2m1" else 16,
            mainloop=mainloop,
            epilogue=epilogue,
            cluster=cluster,
        )
    if spec.family == "cutlass-sm90-tma-ws" and tag == "Sm90":
        coop = tile[0] >= 128
        kind = "Cooperative" if coop else "Pingpong"
        return _render(
            tag,
            a,
            b,
            c,
            d,
            shape,
            "OpClassTensorOp",
            False,
            align_a=128 // _bits(spec.dtype_a),
            align_b=128 // _bits(spec.dtype_b),
            mainloop=f"cutlass::gemm::KernelTmaWarpSpecialized{kind}",
            epilogue="cutlass::epilogue::TmaWarpSpecialized" + ("Cooperative" if coop else ""),
        )
    return None


def _bits(dtype: str | None) -> int:
    return {"fp8_e4m3": 8, "fp8_e5m2": 8, "fp32": 32}.get(dtype or "", 16)


def _render(
    tag: str,
    a: str,
    b: str,
    c: str,
    d: str,
    shape: str,
    op: str,
    grouped: bool,
    *,
    align_a: int,
    align_b: int,
    mainloop: str,
    epilogue: str,
    cluster: str = "Shape<_1,_1,_1>",
) -> str:
    ptr = "*" if grouped else ""
    problem = (
        "cutlass::gemm::GroupProblemShape<Shape<int,int,int>>"
        if grouped
        else "Shape<int,int,int,int>"
    )
    epi_op = "OpClassTensorOp" if op == "OpClassBlockScaledTensorOp" else op
    return f"""// crashkb verify probe: generated from validated fields only
#include <cstdio>
#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
using namespace cute;
using CtaTile = {shape};
using Cluster = {cluster};
using Epi = typename cutlass::epilogue::collective::CollectiveBuilder<
  cutlass::arch::{tag}, cutlass::arch::{epi_op}, CtaTile, Cluster,
  cutlass::epilogue::collective::EpilogueTileAuto, float, float,
  {c}, cutlass::layout::RowMajor{ptr}, {128 // 16},
  {d}, cutlass::layout::RowMajor{ptr}, {128 // 16},
  {epilogue}>::CollectiveOp;
using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
  cutlass::arch::{tag}, cutlass::arch::{op},
  {a}, cutlass::layout::RowMajor{ptr}, {align_a},
  {b}, cutlass::layout::ColumnMajor{ptr}, {align_b}, float, CtaTile, Cluster,
  cutlass::gemm::collective::StageCountAutoCarveout<
    static_cast<int>(sizeof(typename Epi::SharedStorage))>,
  {mainloop}>::CollectiveOp;
using Kernel = cutlass::gemm::kernel::GemmUniversal<{problem}, Mainloop, Epi>;
int main() {{
  std::printf("stages=%d\\nkernel_smem=%d\\nepilogue_smem=%d\\n",
    int(Mainloop::DispatchPolicy::Stages), int(Kernel::SharedStorageSize),
    int(sizeof(typename Epi::SharedStorage)));
  return 0;
}}
"""


def run_probe(
    source: str,
    arch: str,
    nvcc: tuple[str, str],
    headers: Headers,
    cache: Path | None = None,
    timeout: float = COMPILE_TIMEOUT,
) -> dict[str, object]:
    """Compile and run ``source`` for ``arch`` (cached); ``{"error": ...}`` on any failure."""
    target = f"{arch}a"  # the arch-specific features (TMA/GMMA, block-scaled MMA) need 'a'
    if not re.fullmatch(r"sm_\d{2,3}a", target):
        return {"error": f"bad arch {arch!r}"}
    key = hashlib.sha256(
        "\0".join([source, target, nvcc[1], headers.version, str(headers.include)]).encode()
    ).hexdigest()[:24]
    hit = (cache or cache_dir()) / f"{key}.json"
    stored = cache_load(hit)
    if stored is not None:
        return {**stored, "cached": 1}
    with tempfile.TemporaryDirectory(prefix="crashkb-probe-") as tmp:
        src, exe = Path(tmp) / "probe.cu", Path(tmp) / "probe"
        src.write_text(source)
        cmd = [
            nvcc[0],
            "-std=c++17",
            f"-arch={target}",
            "-I",
            str(headers.include),
            "-o",
            str(exe),
            str(src),
        ]
        try:
            built = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp)
        except subprocess.TimeoutExpired:
            return {"error": f"nvcc timed out after {timeout:.0f} s"}
        except OSError as exc:
            return {"error": f"nvcc could not start: {exc}"}
        if built.returncode != 0:
            data: dict[str, object] = {
                "error": "compile failed",
                "detail": _assertion(built.stderr),
            }
        else:
            try:
                ran = subprocess.run(
                    [str(exe)], capture_output=True, text=True, timeout=RUN_TIMEOUT
                )
            except (OSError, subprocess.SubprocessError) as exc:
                return {"error": f"probe did not run: {exc}"}
            data = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", ran.stdout)}
            if "kernel_smem" not in data:
                return {"error": "probe printed no size"}
    cache_store(hit, data)
    data["cached"] = 0
    return data


#: The SM120/SM90 collectives' static_assert when the capacity leaves fewer than 2 stages.
#: The SM100 block-scaled builder's, when not even one stage of A, B, SFA and SFB fits.
_STAGES_REFUSED = re.compile(
    r"Stages set to value 2 or more|Stages >= 2|at least 2 stages|Smem usage is too high"
)


def _assertion(stderr: str) -> str:
    """The first static_assert message nvcc printed (why the tile cannot be built)."""
    m = re.search(r'static assertion failed with "([^"]{1,200})"', stderr)
    return m.group(1) if m else stderr.strip().splitlines()[-1][:200] if stderr.strip() else ""


def verify_compile(
    spec: GemmSpec,
    model: Verification,
    *,
    cache: Path | None = None,
    timeout: float = COMPILE_TIMEOUT,
) -> Verification:
    """Run level 2 on top of the model result; stays at ``model`` (saying why) when it cannot."""
    notes = list(model.notes)

    def stay(why: str) -> Verification:
        return replace(model, notes=(*notes, f"Not compiled: {why}."))

    if spec.family in {"triton-matmul", "triton-attention"}:
        from diagnose.verify.triton_compile import verify_triton

        return verify_triton(spec, model, cache=cache, timeout=timeout)
    nvcc = find_nvcc()
    if nvcc is None:
        return stay("no nvcc on PATH or in $CUDA_HOME/bin")
    headers = find_headers()
    if headers is None:
        return stay(
            "no CUTLASS headers (nvidia-cutlass: pip install -e '.[verify]' in a crashkb checkout)"
        )
    if spec.arch is None or model.smem_limit is None:
        return stay("no target arch")
    epis = [spec.epilogue_c] if spec.epilogue_c is not None else [False, True]
    meas = list(model.measurements)
    results = []
    stage_refusals = 0
    for epi_c in epis:
        source = probe_source(spec, epi_c)
        if source is None:
            return stay(f"no probe for family {spec.family} on {spec.arch} with this tile/dtypes")
        got = run_probe(source, spec.arch, nvcc, headers, cache, timeout)
        label = f"C={'D' if epi_c else 'void'}"
        if "error" in got:
            detail = f" ({got['detail']})" if got.get("detail") else ""
            notes.append(f"Probe {label}: {got['error']}{detail}.")
            stage_refusals += _STAGES_REFUSED.search(str(got.get("detail", ""))) is not None
            continue
        meas.append((f"compiled[{label}].kernel_smem", int(str(got["kernel_smem"]))))
        meas.append((f"compiled[{label}].stages", int(str(got["stages"]))))
        meas.append((f"compiled[{label}].cached", int(str(got.get("cached", 0)))))
        results.append((int(str(got["kernel_smem"])), int(str(got["stages"]))))
    toolchain = (
        ("nvcc", nvcc[1]),
        ("cutlass", headers.version),
        ("cutlass_headers", headers.source),
    )
    if not results and stage_refusals == len(epis):
        # The builder sizes the pipeline from the arch's shared-memory capacity; when fewer
        # than 2 stages fit, the collective's static_assert(Stages >= 2) stops the build.
        # That IS the overflow, measured by the real headers (NVIDIA/cutlass#3144).
        notes.append(
            f"The real {spec.arch}a kernel for this tile cannot be built: CUTLASS fits fewer "
            f"than 2 pipeline stages into {spec.arch}'s {model.smem_limit} B of shared memory "
            "and its static_assert(Stages >= 2) refuses it."
        )
        return replace(
            model,
            status="confirmed",
            level="compile",
            method=f"nvcc {spec.arch}a probe, CUTLASS stage-count static_assert",
            measurements=tuple(meas),
            notes=tuple(notes),
            toolchain=toolchain,
        )
    if not results:
        return replace(model, notes=tuple(notes), measurements=tuple(meas), toolchain=toolchain)
    required, stages = max(results)
    limit = model.smem_limit
    better = None
    if spec.cutlass_version and spec.cutlass_version != headers.version:
        notes.append(
            f"Compiled with CUTLASS {headers.version}; the log's build used "
            f"{spec.cutlass_version}, whose sizes may differ (gpu-facts §2.4)."
        )
    if required > limit:
        status = "confirmed"
        notes.append(
            f"The {spec.arch} kernel for this tile needs {required} B of shared memory; "
            f"{spec.arch} allows {limit} B per block: the launch cannot succeed."
        )
    else:
        status = "refuted"
        notes.append(
            f"The {spec.arch} kernel for this tile needs {required} B, within "
            f"{limit} B: shared memory does not explain this failure."
        )
        better = arch_mismatch(spec, notes)
    return replace(
        model,
        status=status,
        level="compile",
        smem_required=required,
        stages=stages,
        method=f"nvcc {spec.arch}a probe, sizeof(SharedStorage)",
        measurements=tuple(meas),
        notes=tuple(notes),
        toolchain=toolchain,
        better_cause=better,
    )
