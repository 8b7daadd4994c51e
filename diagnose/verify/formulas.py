"""Shared-memory formulas of CUTLASS 3.x/4.x TMA warp-specialized kernels and Triton matmuls.

Pure arithmetic, no GPU, no compiler.  Each function returns an :class:`Estimate`
(stages and kernel bytes).  The formulas follow the collective builders
(research notes gpu-facts.md §2.3) and were checked against every measured row
there; the tests pin those rows.  Version switches cite the CUTLASS change that
moved the number.
"""

from __future__ import annotations

from diagnose.records import record
from diagnose.verify.spec import DTYPE_BITS

SM90_CAPACITY = 232448  # cutlass sm90_smem_capacity_bytes (= sm100's)
SM120_CAPACITY = 101376  # cutlass sm120_smem_capacity_bytes, also used for sm_121

# Epilogue SharedStorage bytes measured from CUTLASS's SM120 TMA epilogue, keyed by
# (D dtype, epilogue reads C).  Used as StageCountAutoCarveout<sizeof(Epi::SharedStorage)>.
SM120_EPILOGUE = {
    ("bf16", True): 13312,
    ("bf16", False): 9216,
    ("fp16", True): 13312,
    ("fp16", False): 9216,
    ("fp32", True): 26624,
    ("fp32", False): 18432,
}
# SM90 TMA epilogue, bf16 C+D: cooperative (128-row tiles) and pingpong (64-row tiles).
SM90_EPILOGUE = {"cooperative": 33792, "pingpong": 17408}
# SM100/SM103 1-SM epilogue SharedStorage (EpilogueTileAuto, bf16 D), keyed by (reads C,
# CTA tile N), measured with the compile level for sm_100a (bench/results/sm100_blockscaled.md).
SM100_EPILOGUE = {
    (False, 64): 17408,
    (False, 128): 17408,
    (False, 256): 17408,
    (True, 64): 25600,
    (True, 128): 33792,
    (True, 256): 67584,
}


@record
class Estimate:
    """Stages the builder picks and the kernel's dynamic shared memory in bytes."""

    stages: int
    smem: int
    per_stage: int
    capacity: int
    carveout: int


def version_tuple(text: str) -> tuple[int, int, int] | None:
    """``"4.4.2"`` -> ``(4, 4, 2)``; ``None`` when not a version."""
    parts = text.split("+")[0].split(".")[:3]
    if not parts or not all(p.isdigit() for p in parts):
        return None
    nums = [int(p) for p in parts] + [0] * (3 - len(parts))
    return nums[0], nums[1], nums[2]


def _up(x: int, m: int) -> int:
    return -(-x // m) * m


def sm120_blockscaled(
    tile: tuple[int, int, int],
    bits_a: int,
    bits_b: int,
    epilogue: int,
    *,
    grouped: bool,
    cutlass: tuple[int, int, int],
    vector: int = 16,
) -> Estimate:
    """SM120/SM121 block-scaled (NVFP4/MXFP4) TMA warp-specialized GEMM.

    Per stage the builder counts A + B + scale factors + 128 B of barriers.
    Scale rows are padded to 128 since CUTLASS 4.5.0 (NVIDIA/cutlass#3176);
    before it N < 128 counted 0 B of SFB while still allocating some, which is
    the 1 KiB overshoot of NVIDIA/cutlass#3144.  The builder's capacity lost the
    grouped/dense scheduler storage only from 4.4.2 (NVIDIA/cutlass#3092).
    """
    m, n, k = tile
    a, b = m * k * bits_a // 8, n * k * bits_b // 8
    padded = cutlass >= (4, 5, 0)
    sfa = max(m, 128) * k // vector if padded else (m // 128) * 128 * k // vector
    sfb_counted = max(n, 128) * k // vector if padded else (n // 128) * 128 * k // vector
    # What the struct really holds per stage: padded on >= 4.5; before, N < 128 tiles got a
    # K-byte SFB buffer (calibrated on the measured 128x32 / 128x64 rows, gpu-facts §2.4).
    sfb_alloc = sfb_counted if padded or n >= 128 else 16 * k // vector
    sfa_alloc = max(m, 128) * k // vector
    per_stage = a + b + sfa + sfb_counted + 128
    capacity = SM120_CAPACITY
    if cutlass >= (4, 4, 2):
        capacity -= (128 + 256 + 48) if grouped else (48 + 48)
    stages = (capacity - epilogue) // per_stage
    mainloop = _up(stages * (a + b + sfa_alloc + sfb_alloc) + 4 * 128 + 16 * stages, 1024)
    smem = mainloop + epilogue + (1024 if grouped else 0)
    return Estimate(stages, smem, per_stage, capacity, epilogue)


def sm100_epilogue(epilogue_c: bool, n: int) -> int:
    """The measured SM100 epilogue bytes for tile width ``n`` (the next measured width up)."""
    widths = sorted(w for c, w in SM100_EPILOGUE if c == epilogue_c)
    width = next((w for w in widths if w >= n), widths[-1])
    return SM100_EPILOGUE[(epilogue_c, width)]


def sm100_blockscaled(
    tile: tuple[int, int, int],
    bits_a: int,
    bits_b: int,
    epilogue: int,
    *,
    grouped: bool,
    vector: int = 16,
    two_sm: bool = False,
) -> Estimate:
    """SM100/SM103 block-scaled (NVFP4/MXFP4) tcgen05 GEMM, 1-SM (cluster 1x1x1) or 2-SM.

    The builder (sm100_blockscaled_umma_builder.inl) counts per stage A + B + the scale
    factors (rows padded to 128, one byte each) + a 16-byte pipeline, against the SM100
    capacity less the kernel's barriers and scheduler storage (``Sm100DenseGemmTmaUmmaCarveout``:
    160 B, 144 B when N = 256 leaves one accumulator stage; a grouped GEMM's eight scheduler
    stages and four tensor maps make it 984 B).  The accumulators live in tensor memory, so
    nothing else grows with the tile: the kernel holds ``stages`` operand stages and the
    epilogue, plus 1 KiB when grouped (matched to the byte for all 24 dense and grouped rows
    of bench/results/sm100_blockscaled.md).
    """
    m, n, k = tile
    # B's scale factors cover the whole tile width on either MMA (rows padded to 128).
    sfb = max(n, 128) * k // vector
    if two_sm:
        # The 2-SM MMA: ``tile`` is the pair's; each CTA stages its half of A's rows and half
        # of B's columns (the MMA reads B from both), and A's scale factors for its rows
        # (matched to the byte for all 24 rows of bench/results/sm100_blockscaled_2sm.md).
        m, n = m // 2, n // 2
    a, b = m * k * bits_a // 8, n * k * bits_b // 8
    sfa = max(m, 128) * k // vector
    accumulator_stages = 1 if tile[1] == 256 else 2
    if grouped:
        carve = 16 * accumulator_stages + 128 + 16 + 8 + 128 + 8 * 16 + 8 * 4 + 4 * 128
    else:
        carve = 16 * accumulator_stages + 32 + 16 + 8 + 32 + 2 * 16 + 2 * 4
    per_stage = a + b + sfa + sfb + 16
    capacity = SM90_CAPACITY - carve
    stages = (capacity - epilogue) // per_stage
    # A grouped kernel also holds its tensor maps and scheduler responses: 1 KiB measured.
    smem = stages * (a + b + sfa + sfb) + epilogue + (1024 if grouped else 0)
    return Estimate(stages, smem, per_stage, capacity, epilogue)


def sm90_tma_ws(tile: tuple[int, int, int], bits_a: int, bits_b: int, epilogue: int) -> Estimate:
    """SM90 (Hopper) TMA warp-specialized GEMM, non-block-scaled (sm90_gmma_builder.inl)."""
    m, n, k = tile
    ab = m * k * bits_a // 8 + n * k * bits_b // 8
    per_stage = _up(ab, 128) + 16  # one full/empty mbarrier pair of PipelineTmaAsync
    capacity = SM90_CAPACITY // 128 * 128
    stages = (capacity - _up(epilogue, 128)) // per_stage
    return Estimate(stages, stages * ab + epilogue, per_stage, capacity, epilogue)


def triton_matmul(
    tile: tuple[int, int, int], bits_a: int, bits_b: int, stages: int, cc: int
) -> Estimate:
    """Triton matmul: ``num_stages`` buys stages-1 buffers on sm_8x/sm_12x, stages on sm_9x/10x.

    Measured with Triton 3.6 cross-compiles (gpu-facts §5.2); sm_100 adds a 16-B barrier.
    """
    m, n, k = tile
    per_stage = (m * k * bits_a + n * k * bits_b) // 8
    if 90 <= cc < 120:
        smem = stages * per_stage + (16 if cc >= 100 else 0)
    else:
        smem = max(stages - 1, 1) * per_stage
    return Estimate(stages, smem, per_stage, 0, 0)


def bits(dtype: str | None, default: int = 16) -> int:
    """Bits per element of a canonical dtype."""
    return DTYPE_BITS.get(dtype or "", default)
