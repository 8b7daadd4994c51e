"""Kernel vocabulary read off a kernel's name: target arch, element dtypes, tile/cluster, stages.

GPU kernels carry their configuration in their names: CUTLASS 3.x writes it as template
arguments (``cutlass::arch::Sm120``, ``cute::tuple<cute::C<128>, ...>``), CUTLASS 2.x as
``GemmShape<128, 256, 64>``, generated libraries and cuBLAS as snake-case tokens
(``cutlass3x_sm90_..._128x128x64_2x1x1_...``), TensorRT-LLM as ``CtaShape128x256x64B``.
:func:`kernel_facts` reads all of these from the template-argument tree of a parsed name
and from its text, so it works on names a logger cut short as long as the prefix still
holds them.  Nothing here raises.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from diagnose.frames.names import parse_name
from diagnose.lazyre import lazy
from diagnose.model import KernelFacts, ParsedName, TemplateArg

__all__ = ["arch_from_tag", "canonical_dtype", "kernel_facts"]

# Compute capabilities that exist; other `smNN` digits are not arch tags (`sm12` is not).
_KNOWN_ARCH = frozenset(
    {50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 110, 120, 121}
)
# `cutlass::arch::Sm120` is the authoritative tag: an MMA atom such as `SM80_16x8x16_...`
# names the instruction, and Hopper kernels use Ampere atoms.
_ARCH_TAG = lazy(r"arch::Sm(\d{2,3})([af]?)(?![0-9A-Za-z])")
_ARCH_ANY = lazy(
    r"(?:(?<![A-Za-z0-9])[Ss][Mm]_?|(?<=[a-z])Sm_?|(?<![A-Za-z0-9])cutlass(?:3x)?_)"
    r"(\d{2,3})([af](?![a-z]))?(?![0-9])"
)

# Spelling -> canonical dtype.  Keys are the last `::` component, so `cutlass::half_t`
# and `half_t` both hit.  Plain `int`/`long` are left out: as template arguments they are
# index types and counts far more often than element types.
_DTYPES: dict[str, str] = {
    "__nv_fp4_e2m1": "fp4_e2m1",
    "__nv_fp4x2_e2m1": "fp4_e2m1",
    "__nv_fp4x4_e2m1": "fp4_e2m1",
    "float_e2m1_t": "fp4_e2m1",
    "nv_float4_t": "fp4_e2m1",
    "mx_float4_t": "fp4_e2m1",
    "__nv_fp8_e4m3": "fp8_e4m3",
    "__nv_fp8x2_e4m3": "fp8_e4m3",
    "__nv_fp8x4_e4m3": "fp8_e4m3",
    "float_e4m3_t": "fp8_e4m3",
    "Float8_e4m3fn": "fp8_e4m3",
    "Float8_e4m3fnuz": "fp8_e4m3fnuz",
    "__nv_fp8_e5m2": "fp8_e5m2",
    "__nv_fp8x2_e5m2": "fp8_e5m2",
    "float_e5m2_t": "fp8_e5m2",
    "Float8_e5m2": "fp8_e5m2",
    "Float8_e5m2fnuz": "fp8_e5m2fnuz",
    "__nv_fp6_e3m2": "fp6_e3m2",
    "float_e3m2_t": "fp6_e3m2",
    "__nv_fp6_e2m3": "fp6_e2m3",
    "float_e2m3_t": "fp6_e2m3",
    "mx_float6_t": "fp6",
    "float_ue8m0_t": "ue8m0",
    "__nv_fp8_e8m0": "ue8m0",
    "Float8_e8m0fnu": "ue8m0",
    "float_ue4m3_t": "ue4m3",
    "__nv_bfloat16": "bf16",
    "__nv_bfloat162": "bf16",
    "bfloat16_t": "bf16",
    "BFloat16": "bf16",
    "nv_bfloat16": "bf16",
    "half": "fp16",
    "__half": "fp16",
    "__half2": "fp16",
    "half_t": "fp16",
    "Half": "fp16",
    "tfloat32_t": "tf32",
    "float": "fp32",
    "double": "fp64",
    "int8_t": "int8",
    "signed char": "int8",
    "uint8_t": "uint8",
    "unsigned char": "uint8",
    "int4b_t": "int4",
    "uint4b_t": "uint4",
    "int2b_t": "int2",
    "uint2b_t": "uint2",
    "uint1b_t": "uint1",
}
# Wrappers whose dtype is their argument's: `cutlass::nv_float4_t<cutlass::float_e2m1_t>`.
_DTYPE_WRAPPERS = frozenset({"nv_float4_t", "mx_float4_t", "mx_float6_t", "mx_float8_t"})
_CUT_MIN = 5  # a cut-off spelling must keep this much to be read as a dtype prefix

# Snake-case dtype tokens in kernel names: `gemm_bf16bf16_bf16f32`, `_e4m3_`, `fp8`.
_NAME_TOKEN = lazy(
    r"nvfp4|mxfp4|mxfp8|mxfp6|bf16|fp16|f16|fp32|f32|tf32|fp64|f64|e4m3|e5m2|e2m1|e3m2|e2m3|"
    r"ue8m0|ue4m3|fp8|fp4|int8|s8|u8|int4|s4|u4"
)
_NAME_TOKEN_MAP = {
    "nvfp4": "fp4_e2m1",
    "mxfp4": "fp4_e2m1",
    "fp4": "fp4_e2m1",
    "e2m1": "fp4_e2m1",
    "mxfp8": "fp8_e4m3",
    "e4m3": "fp8_e4m3",
    "e5m2": "fp8_e5m2",
    "fp8": "fp8",
    "mxfp6": "fp6",
    "e3m2": "fp6_e3m2",
    "e2m3": "fp6_e2m3",
    "ue8m0": "ue8m0",
    "ue4m3": "ue4m3",
    "bf16": "bf16",
    "fp16": "fp16",
    "f16": "fp16",
    "fp32": "fp32",
    "f32": "fp32",
    "tf32": "tf32",
    "fp64": "fp64",
    "f64": "fp64",
    "int8": "int8",
    "s8": "int8",
    "u8": "uint8",
    "int4": "int4",
    "s4": "int4",
    "u4": "uint4",
}

_STATIC_INT = lazy(r"^(?:cute::)?(?:_(\d+)|C<(\d+)>|Int<(\d+)>)$|^(\d+)[uUlL]*$")
_TUPLE_NAMES = frozenset({"cute::tuple", "cute::Shape", "tuple", "Shape", "cute::Tile"})
_GEMM_SHAPE_NAMES = frozenset({"GemmShape", "CtaShape", "TileShape", "ThreadblockShape"})
_CLUSTER_NAMES = frozenset({"ClusterShape", "ClusterShape_MNK"})
_NAMED_SHAPE = lazy(
    r"(?P<kind>TileShape|CtaShape|ThreadblockShape|ClusterShape)\w*\s*=\s*(?P<val>[\w:]+<)"
)
# GCC/nvcc `[with ElementA = cutlass::half_t, ...]` clauses in static-assert and error text.
_NAMED_ELEMENT = lazy(r"Element\w*\s*=\s*([\w:]+(?:<[\w:]+>)?)")
_GLUED_SHAPE = lazy(r"(?P<kind>CtaShape|TileShape|ClusterShape)_?(\d+)x(\d+)x(\d+)")
_XSHAPE = lazy(r"(?<![0-9x])(\d{1,4})x(\d{1,4})x(\d{1,4})(?![0-9x])")
# CUTLASS 2.x library names: `..._128x256_64x3_tn_align8` is tile 128x256x64, 3 stages.
_CUTLASS2_TILE = lazy(r"_(\d{2,3})x(\d{2,3})_(\d{2,3})x(\d{1,2})_")
_STAGES = lazy(
    r"(?:Stages|StageCount|Stage)<(\d+)>|(?<![A-Za-z0-9])(\d{1,2})_?stages?(?![a-z])",
)


def arch_from_tag(text: str) -> str | None:
    """Canonical arch (``sm_120``, ``sm_90a``) from a tag such as ``cutlass::arch::Sm120``.

    Also reads ``sm90``/``sm_90a`` tokens inside kernel names; an explicit
    ``cutlass::arch::SmNN`` wins over them.  Returns ``None`` when none is present.
    """
    try:
        for pattern in (_ARCH_TAG, _ARCH_ANY):
            for m in pattern.finditer(text):
                if int(m.group(1)) in _KNOWN_ARCH:
                    return f"sm_{m.group(1)}{m.group(2) or ''}"
    except (TypeError, ValueError):
        return None
    return None


# The longest spelling of one element type, decorations and a wrapper included
# (``cutlass::nv_float4_t<cutlass::float_e2m1_t> const*`` is 50): longer text is a whole
# template argument list, and regex passes over kilobytes of it cost ~20 us a node.
_MAX_DTYPE_SPELLING = 160


def canonical_dtype(text: str) -> str | None:
    """Canonical dtype (``fp4_e2m1``, ``bf16``, ``fp8_e4m3``...) for one type spelling.

    Accepts qualified spellings (``cutlass::float_e2m1_t``), cv/pointer decorations
    (``__nv_bfloat16 const*``) and wrappers (``cutlass::nv_float4_t<...>``).
    """
    try:
        t = text.strip()
        if len(t) > _MAX_DTYPE_SPELLING:
            return None  # a whole template's text: every dtype node is read on its own
        for junk in ("const", "volatile", "struct", "class"):
            if junk in t:
                t = re.sub(rf"(?<![\w$]){junk}(?![\w$])", " ", t)
        t = " ".join(t.replace("*", " ").replace("&", " ").split())
        head, _, inner = t.partition("<")
        last = head.strip().rsplit("::", 1)[-1]
        if last in _DTYPE_WRAPPERS and inner:
            found = canonical_dtype(inner.rstrip("> "))
            if found is not None:
                return found
        return _DTYPES.get(last) or _DTYPES.get(head.strip())
    except (AttributeError, TypeError):
        return None


def _cut_dtype(text: str) -> str | None:
    """The dtype a cut-off spelling (``__nv_bf``) can only have been, if it is unambiguous."""
    last = text.strip().rsplit("::", 1)[-1]
    if len(last) < _CUT_MIN:
        return None
    hits = {v for k, v in _DTYPES.items() if k.startswith(last)}
    return hits.pop() if len(hits) == 1 else None


def _walk(args: tuple[TemplateArg, ...]) -> Iterator[TemplateArg]:
    """Every argument in the tree, depth first in written order."""
    stack = list(reversed(args))
    while stack:
        a = stack.pop()
        yield a
        stack.extend(reversed(a.args))


def _static_int(arg: TemplateArg) -> int | None:
    """The value of a compile-time integer argument: ``128``, ``cute::_128``, ``cute::C<128>``."""
    m = _STATIC_INT.match(arg.text.replace(" ", ""))
    if m is None:
        return None
    return int(next(g for g in m.groups() if g is not None))


def _triple(arg: TemplateArg) -> tuple[int, int, int] | None:
    """(M, N, K) when ``arg`` is a three-element static shape, else ``None``."""
    if arg.truncated or len(arg.args) != 3:
        return None
    vals = [_static_int(a) for a in arg.args]
    if any(v is None for v in vals) or any(a.truncated for a in arg.args):
        return None
    m, n, k = (v for v in vals if v is not None)
    return (m, n, k)


def _is_cluster(t: tuple[int, int, int]) -> bool:
    """Cluster shapes are small: at most 16 CTAs in all (the portable limit is 8)."""
    return all(v >= 1 for v in t) and t[0] * t[1] * t[2] <= 16


def _is_tile(t: tuple[int, int, int]) -> bool:
    """CTA tiles are at least 8 wide in every dimension."""
    return all(v >= 8 for v in t)


class _Facts:
    """Accumulates facts, first finding wins (outermost, leftmost is the kernel's own)."""

    def __init__(self) -> None:
        self.dtypes: list[str] = []
        self.tile: tuple[int, int, int] | None = None
        self.cluster: tuple[int, int, int] | None = None
        self.stages: int | None = None

    def dtype(self, d: str | None) -> None:
        if d is not None and d not in self.dtypes:
            self.dtypes.append(d)

    def shape(self, kind: str, t: tuple[int, int, int] | None) -> None:
        if t is None:
            return
        if kind == "cluster":
            if self.cluster is None and _is_cluster(t):
                self.cluster = t
        elif kind == "tile":
            if self.tile is None and _is_tile(t):
                self.tile = t
        elif self.tile is None and _is_tile(t):
            self.tile = t
        elif self.tile is not None and self.cluster is None and _is_cluster(t):
            # CUTLASS 3.x passes TileShape then ClusterShape as unnamed cute tuples.
            self.cluster = t


def _from_tree(parsed: ParsedName, facts: _Facts) -> None:
    """Dtypes and shapes from the template-argument tree."""
    for arg in _walk(parsed.template_args):
        name = arg.name or ""
        last = name.rsplit("::", 1)[-1]
        if arg.truncated and not arg.args:
            facts.dtype(canonical_dtype(arg.text) or _cut_dtype(arg.text))
        elif name and last not in _DTYPE_WRAPPERS:
            facts.dtype(canonical_dtype(name))
        if name in _TUPLE_NAMES or last in ("tuple", "Shape"):
            facts.shape("any", _triple(arg))
        elif last in _GEMM_SHAPE_NAMES:
            facts.shape("tile", _triple(arg))
        elif last in _CLUSTER_NAMES:
            facts.shape("cluster", _triple(arg))
        elif last in ("Stages", "StageCount") and len(arg.args) == 1 and facts.stages is None:
            facts.stages = _static_int(arg.args[0])


def _balanced(text: str, start: int) -> str:
    """``text`` from ``start`` through the ``>`` that closes its first ``<``."""
    depth = 0
    for i in range(start, min(len(text), start + 4096)):
        c = text[i]
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return text[start : start + 4096]


def _from_text(parsed: ParsedName, facts: _Facts) -> None:
    """Shapes, stages and dtype tokens spelled inside identifiers and `[with ...]` text.

    Each pattern runs only when a literal every match contains is present (most kernel
    names hold none of them), which spares compiling and running it.
    """
    text = parsed.text
    if "Shape" in text:
        if "=" in text:
            for m in _NAMED_SHAPE.finditer(text):
                sub = parse_name(_balanced(text, m.start("val")))
                kind = "cluster" if m.group("kind") == "ClusterShape" else "tile"
                if sub.template_args and len(sub.template_args) == 3:
                    facts.shape(kind, _triple(TemplateArg(text="", args=sub.template_args)))
        for m in _GLUED_SHAPE.finditer(text):
            kind = "cluster" if m.group("kind") == "ClusterShape" else "tile"
            facts.shape(kind, (int(m.group(2)), int(m.group(3)), int(m.group(4))))
    if "Element" in text and "=" in text:
        for m in _NAMED_ELEMENT.finditer(text):
            facts.dtype(canonical_dtype(m.group(1)))
    ident = parsed.name or text
    if "x" in ident:
        for m in _XSHAPE.finditer(ident):
            t = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
            before = ident[max(0, m.start() - 16) : m.start()].lower()
            if "warp" in before:
                continue  # warpgroupsize1x1x1 is a warp layout, not a cluster
            facts.shape("cluster" if "cluster" in before else "any", t)
        m2 = _CUTLASS2_TILE.search(ident)
        if m2 is not None:
            a, b, c, st = (int(g) for g in m2.groups())
            facts.shape("tile", (a, b, c))
            if facts.stages is None:
                facts.stages = st
    if facts.stages is None and "tage" in text:  # Stage, Stages, StageCount, stages
        ms = _STAGES.search(text)
        if ms is not None:
            facts.stages = int(ms.group(1) or ms.group(2))
    for seg in re.split(r"[^A-Za-z0-9]+|_", ident):
        if seg and re.fullmatch(rf"(?:{_NAME_TOKEN.pattern})+", seg):
            for tok in _NAME_TOKEN.findall(seg):
                facts.dtype(_NAME_TOKEN_MAP[tok])


def kernel_facts(name: ParsedName | str) -> KernelFacts:
    """Read arch, canonical dtypes, tile/cluster shapes and stage count from a kernel name.

    ``name`` is a demangled name or its :func:`~diagnose.frames.names.parse_name` result.
    Dtypes come in order of first appearance: template arguments, then snake-case tokens
    in the kernel's own name, then parameter types.  Never raises.
    """
    try:
        parsed = name if isinstance(name, ParsedName) else parse_name(str(name))
        facts = _Facts()
        _from_tree(parsed, facts)
        _from_text(parsed, facts)
        for p in parsed.params or ():
            facts.dtype(canonical_dtype(p))
        return KernelFacts(
            arch=arch_from_tag(parsed.text),
            dtypes=tuple(facts.dtypes),
            tile=facts.tile,
            cluster=facts.cluster,
            stages=facts.stages,
        )
    except Exception:  # the contract is "never raises": a bad name yields no facts
        return KernelFacts()
