"""Level 1 (``model``): the arch's formula against the kb's opt-in limit.  Instant, no GPU.

Alone it never says ``confirmed``: a formula is ±1 KiB.  Clearly under the limit
it refutes the overflow for the logged tile (and looks for the other known cause
of CUTLASS "Error Internal"); near or over the limit it says to go on to
``compile``.  It also lists the framework's candidate tiles for the arch and the
largest one that fits.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from diagnose.verify.formulas import (
    SM90_EPILOGUE,
    SM120_EPILOGUE,
    Estimate,
    bits,
    sm90_tma_ws,
    sm100_blockscaled,
    sm100_epilogue,
    sm120_blockscaled,
    triton_matmul,
    version_tuple,
)
from diagnose.verify.result import TileFit, Verification
from diagnose.verify.spec import GemmSpec

if TYPE_CHECKING:
    from diagnose.kb import KnowledgeBase
    from diagnose.verify.source_reader import FrameworkTiles

NEAR_ABOVE = 1024  # formula error bars (gpu-facts §5.3 tier 1)
NEAR_BELOW = 2048

# Fallback candidate tiles (elements, NVFP4) when the framework's sources are not installed:
# flashinfer/TRT-LLM are_tile_shapes_supported_sm120 and the dense SM120 FP4 dispatch.
SM120_GROUPED_TILES = (
    (128, 32, 128), (128, 32, 256), (128, 64, 128), (128, 64, 256),
    (128, 128, 128), (128, 128, 256), (128, 256, 128), (256, 128, 128),
)  # fmt: skip
SM120_DENSE_TILES = ((128, 128, 128), (128, 128, 256), (256, 128, 128))
SM90_TILES = ((64, 128, 64), (128, 64, 64), (128, 128, 64), (128, 256, 64), (256, 128, 64))
# SM100/SM103 1-SM block-scaled tiles (elements, NVFP4): M = 128, N and K as the FP4 MoE and
# dense GEMMs of TensorRT-LLM / FlashInfer pick them.
SM100_TILES = tuple((128, n, k) for n in (64, 128, 256) for k in (128, 256))
# Versions bracketing the two SM120 builder fixes, used when the log names no CUTLASS version.
OLD_CUTLASS, NEW_CUTLASS = (4, 4, 1), (4, 5, 0)


def estimate(
    spec: GemmSpec, tile: tuple[int, int, int], cutlass: tuple[int, int, int], epilogue_c: bool
) -> Estimate | None:
    """The formula for ``spec``'s family on its arch, at ``tile``; ``None`` when none applies."""
    cc = _cc(spec.arch)
    ba, bb = bits(spec.dtype_a), bits(spec.dtype_b)
    if spec.family == "triton-matmul":
        if spec.stages is None or cc is None:
            return None
        return triton_matmul(tile, ba, bb, spec.stages, cc)
    if spec.family in {"cutlass-grouped-blockscaled", "cutlass-dense-blockscaled"}:
        if cc in (100, 103):
            # Mixed FP8 x FP4 keeps one byte per element in shared memory, as on SM120.
            if {ba, bb} == {4, 8}:
                ba = bb = 8
            return sm100_blockscaled(
                tile,
                ba,
                bb,
                sm100_epilogue(epilogue_c, tile[1]),
                grouped=spec.family == "cutlass-grouped-blockscaled",
                vector=32 if "ue8m0" in spec.dtypes else 16,
                two_sm=spec.cluster is not None and spec.cluster[0] == 2,
            )
        if cc is None or cc < 120:
            return None
        d = spec.dtype_d if spec.dtype_d in {"bf16", "fp16", "fp32"} else "bf16"
        epi = SM120_EPILOGUE[(d or "bf16", epilogue_c)]
        # Mixed FP8 x FP4 stores sub-byte operands one byte per element (SmemAllocType uint8_t).
        if {ba, bb} == {4, 8}:
            ba = bb = 8
        vector = 32 if "ue8m0" in spec.dtypes else 16
        return sm120_blockscaled(
            tile,
            ba,
            bb,
            epi,
            cutlass=cutlass,
            vector=vector,
            grouped=spec.family == "cutlass-grouped-blockscaled",
        )
    if spec.family == "cutlass-sm90-tma-ws" and cc is not None and 90 <= cc < 100:
        epi = SM90_EPILOGUE["cooperative" if tile[0] >= 128 else "pingpong"]
        return sm90_tma_ws(tile, ba, bb, epi)
    return None


def _cc(arch: str | None) -> int | None:
    return int(arch[3:]) if arch and arch[3:].isdigit() else None


def _variants(spec: GemmSpec) -> list[tuple[tuple[int, int, int], bool]]:
    """(CUTLASS version, epilogue reads C) pairs to evaluate when the log leaves them open."""
    v = version_tuple(spec.cutlass_version) if spec.cutlass_version else None
    versions = [v] if v else [OLD_CUTLASS, NEW_CUTLASS]
    epis = [spec.epilogue_c] if spec.epilogue_c is not None else [False, True]
    return [(ver, e) for ver in versions for e in epis]


def candidates(spec: GemmSpec) -> tuple[tuple[int, int, int], ...]:
    """Tiles the framework can pick for the arch (kb fallback table), in elements."""
    if spec.family in {"cutlass-grouped-blockscaled", "cutlass-dense-blockscaled"} and _cc(
        spec.arch
    ) in (100, 103):
        return SM100_TILES
    if spec.family == "cutlass-grouped-blockscaled":
        return SM120_GROUPED_TILES
    if spec.family == "cutlass-dense-blockscaled":
        return SM120_DENSE_TILES
    if spec.family == "cutlass-sm90-tma-ws":
        scale = 16 // bits(spec.dtype_a)
        return tuple((m, n, k * max(scale, 1)) for m, n, k in SM90_TILES)
    return ()


def tile_name(spec: GemmSpec, tile: tuple[int, int, int]) -> str:
    """The framework's label for ``tile`` (K in bytes for the TRT-LLM/FlashInfer SM120 enum)."""
    if spec.family and spec.family.endswith("blockscaled"):
        return f"CtaShape{tile[0]}x{tile[1]}x{tile[2] * bits(spec.dtype_a) // 8}B"
    return "x".join(map(str, tile))


def fit_table(
    spec: GemmSpec, limit: int, tiles: tuple[tuple[int, int, int], ...] | None = None
) -> tuple[TileFit, ...]:
    """Every candidate tile (``tiles``, else the kb table) with its worst-case bytes."""
    out = []
    for tile in tiles if tiles is not None else candidates(spec):
        ests = [e for ver, c in _variants(spec) if (e := estimate(spec, tile, ver, c))]
        if not ests:
            continue
        worst = max(ests, key=lambda e: e.smem)
        ok = worst.stages >= 2 and worst.smem <= limit
        out.append(TileFit(tile_name(spec, tile), tile, worst.smem, worst.stages, ok))
    return tuple(out)


def largest_fit(tiles: tuple[TileFit, ...]) -> TileFit | None:
    """The fitting tile with the most work per CTA (M·N·K), fewer bytes on a tie."""
    fits = [t for t in tiles if t.fits]
    return max(fits, key=lambda t: (t.tile[0] * t.tile[1] * t.tile[2], -t.smem)) if fits else None


def verify_model(spec: GemmSpec, kb: KnowledgeBase, requested: str) -> Verification:
    """Run level 1 for a GEMM / shared-memory finding."""
    notes: list[str] = []
    facts = kb.arch(spec.arch) if spec.arch else None
    base = Verification(
        "inconclusive",
        "model",
        requested,
        spec.cause,
        method="formula",
        arch=spec.arch,
        tile=spec.tile,
        dtypes=spec.dtypes,
    )
    if spec.throw_site is not None:
        base = _with_throw_site(base, spec.throw_site)
        notes.extend(base.notes)
    if facts is None:
        why = "no target arch in the log" if not spec.arch else f"{spec.arch} is not in the kb"
        return replace(base, notes=(*base.notes, f"Cannot model: {why}."))
    limit = facts.smem_per_block_optin
    meas: list[tuple[str, int | float | str]] = [("smem_limit_kb", limit)]
    installed = installed_tiles(spec)
    if spec.log_limit is not None:
        meas.append(("smem_limit_log", spec.log_limit))
        if spec.log_limit != limit:
            notes.append(
                f"The log's limit {spec.log_limit} B is not {spec.arch}'s opt-in "
                f"{limit} B: the GPU that crashed may not be the one named."
            )
    if spec.log_required is not None:
        meas.append(("smem_required_log", spec.log_required))
    tiles = fit_table(spec, limit, installed.usable if installed and installed.tiles else None)
    if installed is not None:
        notes.extend(installed.notes)
        if installed.tiles:
            notes.append(_installed_note(spec, installed, tiles))
    from_source = installed is not None and bool(installed.tiles)
    origin = installed.origin if installed is not None and from_source else "kb table"
    base = replace(base, tile_source=origin if tiles else "")
    best = largest_fit(tiles)
    rec = _recommend(spec, best, limit)

    ests: list[tuple[str, Estimate]] = []
    if spec.tile is not None:
        for ver, c in _variants(spec):
            e = estimate(spec, spec.tile, ver, c)
            if e is not None:
                label = f"cutlass {'.'.join(map(str, ver))}, C={'D' if c else 'void'}"
                if _cc(spec.arch) in (100, 103):  # no version switch in the SM100 formula
                    label = f"C={'D' if c else 'void'}"
                ests.append((label if spec.family != "triton-matmul" else "triton", e))
    ests = list(dict(ests).items())  # Triton has no version/epilogue variants: one row
    for label, e in ests:
        meas.append((f"formula[{label}]", e.smem))
    required: int | None
    stages: int | None
    if ests and spec.family == "triton-matmul" and spec.log_required is not None:
        # Triton printed its own metadata.shared: that number is the kernel's, the matmul
        # formula only a cross-check (attention kernels hold more than two operand tiles).
        required, stages = spec.log_required, spec.stages
        if ests[0][1].smem != required:
            notes.append(
                f"A plain matmul with these blocks needs {ests[0][1].smem} B; Triton "
                f"reported {required} B, so the kernel holds more than A and B tiles."
            )
    elif ests:
        worst = max(ests, key=lambda le: le[1].smem)[1]
        required, stages = worst.smem, worst.stages
        best_case = min(e.smem for _, e in ests)
        if len({e.smem for _, e in ests}) > 1:
            notes.append(
                f"The log does not pin the CUTLASS version or epilogue: {best_case}-"
                f"{required} B over the variants; the worst case is reported."
            )
    else:
        required, stages = spec.log_required, spec.stages
        if required is None:
            notes.append("No tile or byte count in the log to model.")
            return replace(
                base,
                smem_limit=limit,
                tiles=tiles,
                measurements=tuple(meas),
                notes=tuple(notes),
                recommendation=rec,
            )
        base = replace(base, method="log numbers vs kb limit")
    status, better = "inconclusive", None
    if stages is not None and stages < 2:
        notes.append(
            f"Only {stages} pipeline stage fits {spec.arch}'s {limit} B ({required} B with one "
            "stage), and the SM120 block-scaled collectives static_assert Stages >= 2: the tile "
            "cannot be built for this arch; a formula alone never confirms (go on to compile)."
        )
    elif required > limit + NEAR_ABOVE:
        notes.append(
            f"The formula puts {required} B over {spec.arch}'s {limit} B: the overflow "
            "is plausible; a formula alone never confirms (go on to compile)."
        )
    elif required > limit - NEAR_BELOW:
        notes.append(
            f"{required} B is within the formula's error of {limit} B: go on to "
            "compile for the exact size."
        )
    else:
        status = "refuted"
        notes.append(
            f"The logged tile needs at most {required} B, under {spec.arch}'s "
            f"{limit} B: shared memory is not why THIS tile failed."
        )
        better = arch_mismatch(spec, notes)
    return replace(
        base,
        status=status,
        smem_required=required,
        smem_limit=limit,
        stages=stages,
        measurements=tuple(meas),
        notes=tuple(notes),
        tiles=tiles,
        recommendation=rec,
        better_cause=better,
    )


def installed_tiles(spec: GemmSpec) -> FrameworkTiles | None:
    """The installed FlashInfer's own SM120 tiles for ``spec`` (``None``: not its kernel).

    TRT-LLM logs are left to the kb table: FlashInfer's copy of the heuristic is not
    the one that ran there.
    """
    if spec.family not in {"cutlass-grouped-blockscaled", "cutlass-dense-blockscaled"}:
        return None
    if (_cc(spec.arch) or 0) < 120 or spec.framework == "tensorrt_llm":
        return None
    from diagnose.verify.source_reader import framework_tiles

    log_version = spec.framework_version if spec.framework == "flashinfer" else ""
    return framework_tiles(family=spec.family, bits_a=bits(spec.dtype_a), log_version=log_version)


def _installed_note(spec: GemmSpec, fw: FrameworkTiles, tiles: tuple[TileFit, ...]) -> str:
    """``FlashInfer 0.7.4 can pick on sm_120: X (fits), Y (over); never: Z (why)``."""
    picks = ", ".join(f"{t.name} ({'fits' if t.fits else 'over'})" for t in tiles)
    never = "; ".join(f"{t.name} ({t.dropped})" for t in fw.tiles if t.dropped)
    path = "grouped (MoE)" if spec.family == "cutlass-grouped-blockscaled" else "dense"
    return (
        f"{fw.origin} can pick for {path} GEMMs on {spec.arch}: "
        f"{picks or 'none'}" + (f"; never: {never}" if never else "") + "."
    )


def _with_throw_site(base: Verification, site: tuple[str, int]) -> Verification:
    """Attach the installed source around the log's throw site, when that file is present."""
    from diagnose.verify.source_reader import source_context

    ctx = source_context(site[0], site[1])
    if ctx is None:
        return base
    return replace(
        base,
        source_file=ctx.path,
        source_line=ctx.line,
        source_lines=ctx.lines,
        notes=(*base.notes, f"{site[0]}:{site[1]} read from {ctx.origin} ({ctx.path})."),
    )


def arch_mismatch(spec: GemmSpec, notes: list[str]) -> str | None:
    """The other known cause of CUTLASS "Error Internal": a binary built for another arch.

    ``cudaFuncSetAttribute`` also fails when the loaded image is for another SM
    (sm_120a cubins on sm_121, HazyResearch/ThunderKittens#203), and CUTLASS
    reports both as kErrorInternal (gpu-facts §2.1).
    """
    if not spec.error_internal:
        return None
    if spec.build_arch and spec.gpu_arch and spec.build_arch.rstrip("af") != spec.gpu_arch:
        notes.append(
            f"The kernels were built for {spec.build_arch} but the GPU is "
            f"{spec.gpu_arch}: 'a' cubins only load on their exact arch, and a "
            "failed load reads as Error Internal."
        )
        return "arch-unsupported"
    notes.append(
        '"Error Internal" also comes from a binary built for another arch; check '
        "the extension's SASS targets with `cuobjdump --list-elf <the .so>`."
    )
    return None


def _recommend(spec: GemmSpec, best: TileFit | None, limit: int) -> str:
    """The largest tile that fits the crash's arch and the config change to get it."""
    if spec.family == "triton-matmul" and spec.tile and spec.arch:
        cc = _cc(spec.arch) or 0
        ba, bb = bits(spec.dtype_a), bits(spec.dtype_b)
        top = spec.stages or 4
        full = triton_matmul(spec.tile, ba, bb, top, cc)
        # Scale from Triton's own number when the log has it: each stage adds one A+B buffer.
        base = spec.log_required or full.smem
        for s in range(top, 0, -1):
            if base - (top - s) * full.per_stage <= limit:
                return (
                    f"Set num_stages={s} for BLOCK {'x'.join(map(str, spec.tile))} on "
                    f"{spec.arch} ({limit} B), or halve BLOCK_N."
                )
        return f"No num_stages fits BLOCK {'x'.join(map(str, spec.tile))} on {spec.arch}."
    if best is None:
        return ""
    fix = ""
    if spec.family == "cutlass-grouped-blockscaled":
        fix = (
            " Use a FlashInfer/TRT-LLM build on CUTLASS >= 4.5 (pads scale-factor rows, "
            "NVIDIA/cutlass#3176) or restrict the MoE tactics to fitting tiles."
        )
    return (
        f"Largest tile that fits {spec.arch} ({limit} B): {best.name} "
        f"({'x'.join(map(str, best.tile))} elements, {best.smem} B, {best.stages} stages)." + fix
    )
