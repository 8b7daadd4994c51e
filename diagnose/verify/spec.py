"""Rebuild the operation a crash implicates from what the rules and the parser extracted.

:func:`build_spec` reads the primary finding's facts, the frames of its crash
region (``Frame.kernel``), its evidence lines and the log-wide context, and
returns a :class:`GemmSpec` or a :class:`MemorySpec`.  Every number taken from
the log passes :func:`bounded` first and every name is checked against a fixed
vocabulary, so nothing a log says can reach a compiler flag, a shell or a code
string unvalidated (the probe generators only ever see these validated fields).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from diagnose.records import record

if TYPE_CHECKING:
    from diagnose.kb import KnowledgeBase
    from diagnose.model import FactValue, Finding, Region
    from diagnose.report import Diagnosis

GEMM_CAUSES = frozenset({"smem-overflow", "tactic-skipped", "cutlass-error-internal"})
MEMORY_CAUSES = frozenset({"a2a-buffer-oom", "cuda-oom", "kv-cache-oom"})

#: Bits per element as stored in shared memory, for the dtypes the vocabulary emits.
DTYPE_BITS: dict[str, int] = {
    "fp4_e2m1": 4,
    "fp6_e3m2": 6,
    "fp6_e2m3": 6,
    "fp6": 6,
    "fp8_e4m3": 8,
    "fp8_e5m2": 8,
    "int8": 8,
    "uint8": 8,
    "bf16": 16,
    "fp16": 16,
    "fp32": 32,
    "tf32": 32,
}
FAMILIES = (
    "cutlass-grouped-blockscaled",
    "cutlass-dense-blockscaled",
    "cutlass-sm90-tma-ws",
    "triton-matmul",
    "triton-attention",
)

_ARCH = re.compile(r"sm_(\d{2,3})([af]?)")
_TILE_DIM = (8, 1024)
_MAX_SMEM = 1 << 20  # no GPU has a MiB of shared memory per block
_MAX_BYTES = 1 << 44  # 16 TiB: beyond any single GPU or host figure in a log
_MAX_TEXT = 4096  # characters of one evidence line read by the fallback scanners
_MAX_REGIONS = 16

# Fallback scanners over the crash region and evidence: bounded, anchored on literals.
_TILE_NAME = re.compile(r"CtaShape(\d{1,4})x(\d{1,4})x(\d{1,4})B")
_TILE_ID = re.compile(r"tile shape ID:\s{0,4}(\d{1,4})x(\d{1,4})x(\d{1,4})\b")
_CLUSTER_ID = re.compile(r"cluster shape ID:\s{0,4}(\d{1,2})x(\d{1,2})x(\d{1,2})\b")
_THROW = re.compile(r"([\w.-]{1,120}\.(?:h|hpp|cuh|cu|inl|cpp|cc)):(\d{1,6})\b")
_REQUIRES = re.compile(r"requires (\d{1,9}) bytes shared memory but device supports (\d{1,9})")
_TRITON = re.compile(r"Required: (\d{1,9}),? Hardware limit(?:ation)?: (\d{1,9})")
_BLOCKS = re.compile(r"\b(BLOCK_SIZE_[MNK]|BLOCK_[MNK])\s{0,2}[=:]\s{0,2}(\d{1,4})\b")
_NUM_STAGES = re.compile(r"\bnum_stages\s{0,2}[=:]\s{0,2}(\d{1,2})\b")
_NUM_WARPS = re.compile(r"\bnum_warps\s{0,2}[=:]\s{0,2}(\d{1,2})\b")
# Attention head dim as kernels and posters spell it (``BLOCK_DMODEL=128``, ``H=16,D=128``).
_HEAD_DIM = re.compile(r"\b(?:head_dim|HEAD_DIM|BLOCK_DMODEL|Lk|D)\s{0,2}[=:]\s{0,2}(\d{1,4})\b")
_ATTENTION = re.compile(r"attention|attn")
# A GEMM's problem size as TensorRT-LLM's profiler prints it ("for shape (m=4096, n=3456,
# k=5120)", "(for m=4096, n=1024, k=5504)") and cuBLAS-style dumps ("M=1024 N=4096 K=7168").
_PROBLEM_MNK = re.compile(
    r"\b[mM]\s{0,2}[=:]\s{0,2}(\d{1,6}),?\s{1,3}[nN]\s{0,2}[=:]\s{0,2}(\d{1,6}),?\s{1,3}"
    r"[kK]\s{0,2}[=:]\s{0,2}(\d{1,6})\b"
)
_PROBLEM_DIM = (1, 65536)
# Tokens one forward step can carry, in the order an engine's own limit is the tighter one.
_TOKEN_LIMITS = ("chunked_prefill_size", "max_num_batched_tokens", "max_prefill_tokens",
                 "max_num_tokens")  # fmt: skip
_BUILD_ARCH = re.compile(r"[/_](1[0-2]\d|[89]\d)([af])/")  # flashinfer's cache: .../0.6.3/120a/...


def bounded(value: object, low: float, high: float) -> float | None:
    """``value`` as a number when it is a finite int/float (or numeric text) within bounds."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value) if "." in value else int(value)
        except ValueError:
            return None
    if not isinstance(value, int | float) or value != value:  # NaN
        return None
    return value if low <= value <= high else None


def bounded_int(value: object, low: int, high: int) -> int | None:
    """``value`` as an int within ``[low, high]``, else ``None``."""
    v = bounded(value, low, high)
    return int(v) if v is not None and float(v).is_integer() else None


def canonical_arch(text: object) -> str | None:
    """``sm_120a`` / ``sm_120`` / ``Sm120`` as ``sm_120`` style text, else ``None``."""
    if not isinstance(text, str):
        return None
    m = _ARCH.fullmatch(text.strip().lower().replace("sm", "sm_", 1).replace("__", "_"))
    return f"sm_{m.group(1)}" if m else None


def _tile(value: object) -> tuple[int, int, int] | None:
    """A validated (M, N, K) triple."""
    if not isinstance(value, tuple | list) or len(value) != 3:
        return None
    dims = [bounded_int(v, *_TILE_DIM) for v in value]
    if any(d is None for d in dims):
        return None
    return (int(dims[0] or 0), int(dims[1] or 0), int(dims[2] or 0))


@record
class GemmSpec:
    """A GEMM rebuilt from the crash: arch, dtypes, tile in ELEMENTS, family and provenance.

    ``tile_name`` is the framework's label as logged (``CtaShape128x256x64B``);
    ``k_units`` says how its K was read (``bytes`` converted to elements via the
    A dtype, or ``elements``).  ``epilogue_c`` is ``None`` when the log does not
    say whether the epilogue reads C, and the model then checks both.
    For ``triton-attention`` the tile is (BLOCK_M, BLOCK_N, head dim); ``head_dim``
    and ``num_warps`` are what a Triton log states, for the compile level.
    """

    cause: str
    arch: str | None
    arch_source: str = ""
    family: str | None = None
    dtype_a: str | None = None
    dtype_b: str | None = None
    dtype_d: str | None = None
    tile: tuple[int, int, int] | None = None
    tile_name: str = ""
    k_units: str = "elements"
    cluster: tuple[int, int, int] | None = None
    stages: int | None = None
    epilogue_c: bool | None = None
    framework: str = ""
    framework_version: str = ""
    cutlass_version: str = ""
    gpu: str = ""
    gpu_arch: str | None = None
    build_arch: str | None = None
    log_required: int | None = None
    log_limit: int | None = None
    throw_site: tuple[str, int] | None = None
    error_internal: bool = False
    num_warps: int | None = None
    head_dim: int | None = None
    #: (M, N, K) of the GEMM to re-run, when the log gives enough to size it.
    problem: tuple[int, int, int] | None = None
    #: Where each of M, N, K came from, in words, for the verdict's notes.
    problem_from: tuple[str, ...] = ()

    @property
    def dtypes(self) -> tuple[str, ...]:
        """A, B and D dtypes that are known, in that order."""
        return tuple(d for d in (self.dtype_a, self.dtype_b, self.dtype_d) if d)


@record
class MemorySpec:
    """The memory budget a crash implies; byte counts are ints, ``fraction`` in (0, 1]."""

    cause: str
    total: int | None = None
    free: int | None = None
    requested: int | None = None
    weights: int | None = None
    fraction: float | None = None
    fraction_flag: str = ""
    ep_size: int | None = None
    tokens_per_rank: int | None = None
    hidden: int | None = None
    experts: int | None = None
    a2a_backend: str = ""
    deepep_mode: str = ""
    gpu: str = ""


def build_spec(d: Diagnosis, kb: KnowledgeBase) -> GemmSpec | MemorySpec | None:
    """The spec of the operation the primary finding implicates; ``None`` for other causes."""
    f = d.primary
    if f is None:
        return None
    if f.cause in MEMORY_CAUSES:
        return _memory_spec(d, f)
    if f.cause in GEMM_CAUSES:
        return _gemm_spec(d, f, kb)
    return None


def _texts(d: Diagnosis, f: Finding) -> list[str]:
    """The evidence lines and the crash region's lines, capped per line."""
    out = [e.text[:_MAX_TEXT] for e in f.evidence]
    for region in _regions(d, f):
        out.extend(line.text[:_MAX_TEXT] for line in region.body[:400])
        out.extend((fr.module or "")[:_MAX_TEXT] for fr in region.frames)
    return out


def _regions(d: Diagnosis, f: Finding) -> list[Region]:
    """The finding's crash region first, then the others (the config lines and the kernel
    frame are often printed in a region of their own, before the traceback)."""
    first = f.region_index if f.region_index is not None else -1
    ordered = [d.crashes[first]] if 0 <= first < len(d.crashes) else []
    return ordered + [r for i, r in enumerate(d.crashes[:_MAX_REGIONS]) if i != first]


def _first(rx: re.Pattern[str], texts: Iterable[str]) -> re.Match[str] | None:
    for t in texts:
        m = rx.search(t)
        if m:
            return m
    return None


def _ctx(d: Diagnosis, section: str, key: str) -> str | None:
    """A context value as text (``server_args``/``versions``/``memory``)."""
    entry = d.context.get(section, {}).get(key) if isinstance(d.context, Mapping) else None
    return str(entry["value"]) if isinstance(entry, Mapping) and "value" in entry else None


def _gemm_spec(d: Diagnosis, f: Finding, kb: KnowledgeBase) -> GemmSpec:
    texts = _texts(d, f)
    joined = "\n".join(texts)
    kernels = [fr.kernel for r in _regions(d, f) for fr in r.frames if not fr.kernel.is_empty()]
    facts: dict[str, FactValue] = dict(f.facts)

    arch, source = _arch(facts, kernels, d, kb)
    gpus = [str(g.get("value", "")) for g in d.context.get("gpus", []) if isinstance(g, Mapping)]
    gpu = gpus[0][:120] if gpus else str(facts.get("gpu", ""))[:120]
    gpu_facts = kb.arch_for_gpu(gpu) if gpu else None
    gpu_arch = gpu_facts.arch if gpu_facts else None
    build = _first(_BUILD_ARCH, texts)

    listed = facts.get("dtypes")
    listed = listed if isinstance(listed, tuple) else (listed,) if isinstance(listed, str) else ()
    dtypes = [str(x) for x in listed if str(x) in DTYPE_BITS]
    for k in kernels:
        dtypes.extend(x for x in k.dtypes if x in DTYPE_BITS and x not in dtypes)
    dtype_a = dtypes[0] if dtypes else None
    dtype_b = dtypes[1] if len(dtypes) > 2 else dtype_a
    dtype_d = dtypes[-1] if len(dtypes) > 1 else None

    tile, name, units = _tile_of(facts, kernels, texts, dtype_a)
    cluster = _tile(facts.get("cluster"))
    cm = _first(_CLUSTER_ID, texts)
    if cluster is None and cm:
        cluster = (int(cm.group(1)), int(cm.group(2)), int(cm.group(3)))
    stages = bounded_int(facts.get("stages"), 1, 16)
    sm = _first(_NUM_STAGES, texts)
    if stages is None and sm:
        stages = bounded_int(sm.group(1), 1, 16)

    req = bounded_int(facts.get("smem_required"), 1, _MAX_SMEM)
    lim = bounded_int(facts.get("smem_limit"), 1, _MAX_SMEM)
    rm = _first(_REQUIRES, texts) or _first(_TRITON, texts)
    if rm and req is None:
        req, lim = bounded_int(rm.group(1), 1, _MAX_SMEM), bounded_int(rm.group(2), 1, _MAX_SMEM)
    throw = _first(_THROW, [t for t in texts if "rror" in t or "ssert" in t])

    family = _family(joined, arch, dtype_a, tile is not None)
    warps = bounded_int(wm.group(1), 1, 32) if (wm := _first(_NUM_WARPS, texts)) else None
    head_dim = bounded_int(hm.group(1), 16, 1024) if (hm := _first(_HEAD_DIM, texts)) else None
    if family == "triton-attention" and tile is None and head_dim is not None:
        tile = _attention_tile(texts, head_dim)
    framework, fw_version = _framework(d, joined, family)
    problem, problem_from = _problem(d, texts, family)
    return GemmSpec(
        cause=f.cause,
        arch=arch,
        arch_source=source,
        family=family,
        dtype_a=dtype_a,
        dtype_b=dtype_b,
        dtype_d=dtype_d,
        tile=tile,
        tile_name=name,
        k_units=units,
        cluster=cluster,
        stages=stages,
        framework=framework,
        framework_version=fw_version,
        cutlass_version=_version_text(_ctx(d, "versions", "cutlass")),
        gpu=gpu,
        gpu_arch=gpu_arch,
        build_arch=f"sm_{build.group(1)}{build.group(2)}" if build else None,
        log_required=req,
        log_limit=lim,
        throw_site=(throw.group(1), int(throw.group(2))) if throw else None,
        error_internal="Error Internal" in joined,
        num_warps=warps,
        head_dim=head_dim,
        problem=problem,
        problem_from=problem_from,
    )


def _problem(
    d: Diagnosis, texts: list[str], family: str | None
) -> tuple[tuple[int, int, int] | None, tuple[str, ...]]:
    """The GEMM's (M, N, K) from the log, with where each number came from.

    A profiler line that prints m, n and k wins.  Otherwise, for a MoE kernel, the model's
    shape from a config dump or the server arguments sizes one expert's gate-up GEMM:
    K = hidden size, N = 2 x the expert intermediate size (divided by the TP size unless
    experts are sharded by EP), M = the tokens of one step x top-k / experts (the mean
    rows one expert receives).  Nothing is sized from numbers the log does not show.
    """
    m = _first(_PROBLEM_MNK, texts)
    if m:
        dims = tuple(bounded_int(g, *_PROBLEM_DIM) for g in m.groups())
        if all(x is not None for x in dims):
            return (int(dims[0] or 1), int(dims[1] or 1), int(dims[2] or 1)), (
                f"M, N, K as the log prints them ('{m.group(0)[:60]}')",
            )
    if family not in {
        "cutlass-grouped-blockscaled",
        "cutlass-dense-blockscaled",
        "triton-matmul",
        "cutlass-sm90-tma-ws",
    }:
        return None, ()

    def arg(key: str) -> int | None:
        return bounded_int(_ctx(d, "server_args", key), 1, 1 << 20)

    hidden = arg("hidden_size")
    inter = arg("moe_intermediate_size")
    experts, top_k = arg("num_experts"), arg("top_k")
    if hidden is not None and (inter is None or experts is None or top_k is None):
        return _dense_problem(arg, hidden, family)
    if hidden is None or inter is None or experts is None or top_k is None:
        return None, ()
    sharded_by_ep = (arg("ep_size") or 1) > 1 or (
        _ctx(d, "server_args", "enable_expert_parallel") == "true"
    )
    n, split = _gate_up(inter, arg("tp_size") or 1, may_split=not sharded_by_ep)
    tokens_key, tokens = _step_tokens(arg)
    rows = -(-(tokens or 0) * top_k // experts) if tokens else None
    return _sized(
        (rows, n, hidden),
        f"M = {tokens_key} {tokens} x top_k {top_k} / {experts} experts (mean rows per expert)"
        if tokens
        else _DEFAULT_M,
        f"N = 2 x moe_intermediate_size {inter}{split} (gate and up projections)",
        f"K = hidden_size {hidden}",
    )


def _dense_problem(
    arg: Callable[[str], int | None], hidden: int, family: str | None
) -> tuple[tuple[int, int, int] | None, tuple[str, ...]]:
    """A dense model's fused gate-up GEMM: K = hidden size, N = 2 x intermediate size / TP
    (column-parallel), M = the tokens of one step.  Only for a dense GEMM family: a grouped
    (MoE) kernel with no expert shape in the log is not sized from a dense one."""
    inter = arg("intermediate_size")
    if inter is None or family == "cutlass-grouped-blockscaled":
        return None, ()
    n, split = _gate_up(inter, arg("tp_size") or 1, may_split=True)
    tokens_key, tokens = _step_tokens(arg)
    return _sized(
        (tokens, n, hidden),
        f"M = {tokens_key} {tokens} (the tokens of one step)" if tokens else _DEFAULT_M,
        f"N = 2 x intermediate_size {inter}{split} (a dense model's fused gate and up)",
        f"K = hidden_size {hidden}",
    )


_DEFAULT_M = "M = 1024 (the log names no per-step token limit)"


def _gate_up(inter: int, tp: int, *, may_split: bool) -> tuple[int, str]:
    """N of a fused gate-up GEMM (2 x the intermediate size, over TP when it divides and the
    weights are split by TP), and the note's words for the split."""
    if may_split and tp > 1 and inter % tp == 0:
        return 2 * inter // tp, f" / tp_size {tp}"
    return 2 * inter, ""


def _step_tokens(arg: Callable[[str], int | None]) -> tuple[str, int | None]:
    """The first per-step token limit the log sets, and its value."""
    key = next((k for k in _TOKEN_LIMITS if arg(k)), "")
    return key, arg(key) if key else None


def _sized(
    mnk: tuple[int | None, int, int], *where: str
) -> tuple[tuple[int, int, int] | None, tuple[str, ...]]:
    """(M, N, K) within the re-run's bounds (M = 1024 when unknown), with where each came from."""
    size = [bounded_int(mnk[0] or 1024, *_PROBLEM_DIM)]
    size += [bounded_int(x, *_PROBLEM_DIM) for x in mnk[1:]]
    if any(x is None for x in size):
        return None, ()
    return (int(size[0] or 1), int(size[1] or 1), int(size[2] or 1)), where


def _attention_tile(texts: list[str], head_dim: int) -> tuple[int, int, int] | None:
    """(BLOCK_M, BLOCK_N, head dim) when the log names both blocks of an attention kernel."""
    blocks = {}
    for t in texts:
        for bm in _BLOCKS.finditer(t):
            blocks[bm.group(1)[-1]] = bounded_int(bm.group(2), *_TILE_DIM)
    m, n = blocks.get("M"), blocks.get("N")
    return (m, n, head_dim) if m and n else None


def _arch(
    facts: Mapping[str, FactValue], kernels: list[Any], d: Diagnosis, kb: KnowledgeBase
) -> tuple[str | None, str]:
    """The crash's target arch and where it came from (trace beats context beats GPU name)."""
    a = canonical_arch(facts.get("arch"))
    if a:
        return a, "finding"
    for k in kernels:
        a = canonical_arch(k.arch)
        if a:
            return a, "trace"
    for entry in d.context.get("archs", []):
        a = canonical_arch(entry.get("value") if isinstance(entry, Mapping) else None)
        if a:
            return a, "log"
    for entry in d.context.get("gpus", []):
        name = str(entry.get("value", "")) if isinstance(entry, Mapping) else ""
        facts_for = kb.arch_for_gpu(name[:120]) if name else None
        if facts_for:
            return facts_for.arch, f"gpu name '{name[:60]}'"
    return None, ""


def _tile_of(
    facts: Mapping[str, FactValue], kernels: list[Any], texts: list[str], dtype_a: str | None
) -> tuple[tuple[int, int, int] | None, str, str]:
    """Tile in elements, its label, and the K units the label used."""
    m = _first(_TILE_NAME, texts) or _first(_TILE_ID, texts)
    if m:
        # "CtaShape128x256x64B": K is in BYTES; the MoE dispatcher converts K_el = K_B*8/bits(A)
        # (flashinfer moe_gemm_template_dispatch_tma_ws.h, see research gpu-facts §3.1).  The
        # tactic dump's "tile shape ID: 64x64x128" is that enum name without "CtaShape"/"B":
        # flashinfer-ai/flashinfer#3134 prints it beside "Unsupported tile (64, 64, 64)" for
        # 16-bit activations, i.e. K = 128 B = 64 elements.
        raw = _tile((int(m.group(1)), int(m.group(2)), int(m.group(3))))
        label = m.group(0).split(":")[-1].strip()
        bits = DTYPE_BITS.get(dtype_a or "", 0)
        if raw and bits:
            return (raw[0], raw[1], raw[2] * 8 // bits), label, "bytes"
        return raw, label, "bytes"
    tile = _tile(facts.get("tile"))
    if tile:
        return tile, "x".join(map(str, tile)), "elements"
    for k in kernels:
        tile = _tile(k.tile)
        if tile:
            return tile, "x".join(map(str, tile)), "elements"
    blocks = {}
    for t in texts:
        for bm in _BLOCKS.finditer(t):
            blocks[bm.group(1)[-1]] = bounded_int(bm.group(2), 8, 1024)
    if all(blocks.get(x) for x in "MNK"):
        return (int(blocks["M"] or 0), int(blocks["N"] or 0), int(blocks["K"] or 0)), "", "elements"
    return None, "", "elements"


def _family(text: str, arch: str | None, dtype_a: str | None, has_tile: bool) -> str | None:
    """The kernel family the text names, from a fixed vocabulary."""
    low = text.lower()
    if "outofresources" in low or "triton" in low:
        return "triton-attention" if _ATTENTION.search(low) else "triton-matmul"
    blockscaled = dtype_a in {"fp4_e2m1", "fp6", "fp6_e3m2", "fp6_e2m3"} or "fp4" in low
    if "grouped gemm" in low or "moegemm" in low or "moe_gemm" in low or "fused_moe" in low:
        return "cutlass-grouped-blockscaled" if blockscaled else "cutlass-sm90-tma-ws"
    if blockscaled and ("gemm" in low or has_tile):
        return "cutlass-dense-blockscaled"
    if arch in {"sm_90", "sm_100", "sm_103"} and has_tile:
        return "cutlass-sm90-tma-ws"
    return None


def _framework(d: Diagnosis, text: str, family: str | None) -> tuple[str, str]:
    """Which framework built the kernel, and its logged version."""
    low = text.lower()
    for name in ("flashinfer", "tensorrt_llm", "triton", "vllm", "sglang"):
        if name in low or (name == "tensorrt_llm" and "tensorrt-llm" in low):
            return name, _version_text(_ctx(d, "versions", name))
    if family in {"triton-matmul", "triton-attention"}:
        return "triton", _version_text(_ctx(d, "versions", "triton"))
    return "", ""


def _version_text(v: str | None) -> str:
    """A version string reduced to safe characters (digits, dots, letters, +)."""
    if not v:
        return ""
    m = re.match(r"[0-9][0-9A-Za-z.+]{0,30}", v.strip())
    return m.group(0) if m else ""


def _memory_spec(d: Diagnosis, f: Finding) -> MemorySpec:
    facts = dict(f.facts)

    def size(fact: str, mem: str) -> int | None:
        v = bounded_int(facts.get(fact), 1, _MAX_BYTES)
        return v if v is not None else bounded_int(_ctx(d, "memory", mem), 1, _MAX_BYTES)

    frac_flag = "mem_fraction_static"
    frac = bounded(_ctx(d, "server_args", frac_flag), 0.01, 1.0)
    if frac is None:
        frac_flag = "gpu_memory_utilization"
        frac = bounded(_ctx(d, "server_args", frac_flag), 0.01, 1.0)
    tokens = bounded_int(facts.get("tokens_per_rank"), 1, 65536)
    if tokens is None:
        tokens = bounded_int(_ctx(d, "server_args", "num_max_dispatch_tokens_per_rank"), 1, 65536)
    gpus = [str(g.get("value", "")) for g in d.context.get("gpus", []) if isinstance(g, Mapping)]
    backend = _ctx(d, "server_args", "moe_a2a_backend") or ""
    mode = _ctx(d, "server_args", "deepep_mode") or ""
    return MemorySpec(
        cause=f.cause,
        total=size("total_bytes", "total"),
        free=size("free_bytes", "free"),
        requested=size("requested_bytes", "requested"),
        weights=size("weights_bytes", "weights"),
        fraction=float(frac) if frac is not None else None,
        fraction_flag=frac_flag if frac is not None else "",
        ep_size=bounded_int(_ctx(d, "server_args", "ep_size"), 1, 4096),
        tokens_per_rank=tokens,
        hidden=bounded_int(facts.get("hidden_size"), 64, 65536),
        experts=bounded_int(facts.get("num_experts"), 1, 4096),
        a2a_backend=backend if re.fullmatch(r"[\w-]{1,40}", backend) else "",
        deepep_mode=mode if re.fullmatch(r"[\w-]{1,40}", mode) else "",
        gpu=gpus[0][:120] if gpus else "",
    )
