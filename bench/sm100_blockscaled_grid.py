"""Measure SM100/SM103 block-scaled CUTLASS kernels' shared memory with the compile level.

For a grid of MMA tiles (N, K as the MoE and dense FP4 GEMMs of TensorRT-LLM / FlashInfer
pick them; M = 128 on one SM, or M = 128 and 256 over a 2-SM cluster with ``--two-sm``),
dense and grouped, the epilogue reading C or not, this builds the real kernel type with nvcc
for ``sm_100a`` through :func:`diagnose.verify.compile.run_probe` (host-only: no Blackwell
GPU needed), prints the builder's stage count and ``SharedStorageSize`` beside the model
level's formula, and writes the table to ``bench/results/sm100_blockscaled.md`` (or
``sm100_blockscaled_2sm.md``).  The tests pin these rows.

Usage: ``python bench/sm100_blockscaled_grid.py [--jobs 2] [--two-sm]`` (35-50 s a kernel).
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from diagnose.verify.compile import find_headers, find_nvcc, probe_source, run_probe
from diagnose.verify.formulas import version_tuple
from diagnose.verify.model import estimate
from diagnose.verify.spec import GemmSpec

ROOT = Path(__file__).resolve().parents[1]
TILES = [(128, n, k) for n in (64, 128, 256) for k in (128, 256)]
# The 2-SM NVFP4 MMA needs M = 256 (the builder refuses M = 128: "Invalid TileShape_M").
TILES_2SM = [(256, n, k) for n in (64, 128, 256) for k in (128, 256)]


def spec(
    tile: tuple[int, int, int], grouped: bool, arch: str = "sm_100", two_sm: bool = False
) -> GemmSpec:
    family = "cutlass-grouped-blockscaled" if grouped else "cutlass-dense-blockscaled"
    return GemmSpec(
        cause="smem-overflow",
        arch=arch,
        family=family,
        dtype_a="fp4_e2m1",
        dtype_b="fp4_e2m1",
        dtype_d="bf16",
        tile=tile,
        cluster=(2, 1, 1) if two_sm else None,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--two-sm", action="store_true", help="2-SM MMA tiles over a 2x1x1 cluster")
    args = ap.parse_args(argv)
    two = args.two_sm
    nvcc, headers = find_nvcc(), find_headers()
    if nvcc is None or headers is None:
        print("needs nvcc and CUTLASS headers (pip install nvidia-cutlass)", file=sys.stderr)
        return 2
    tiles = TILES_2SM if two else TILES
    cases = [(t, g, c) for g in (False, True) for t in tiles for c in (False, True)]

    def measure(case: tuple[tuple[int, int, int], bool, bool]) -> dict[str, object]:
        tile, grouped, c = case
        source = probe_source(spec(tile, grouped, two_sm=two), c)
        assert source is not None
        return run_probe(source, "sm_100", nvcc, headers)

    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(measure, cases))
    ver = version_tuple(headers.version) or (4, 2, 0)
    rows = []
    for (tile, grouped, c), got in zip(cases, results, strict=True):
        est = estimate(spec(tile, grouped, two_sm=two), tile, ver, c)
        model = f"{est.stages} / {est.smem:,}" if est else "-"
        if "error" in got:
            measured = f"{got['error']}: {got.get('detail', '')}"
        else:
            measured = (
                f"{got['stages']} / {got['kernel_smem']:,} (epilogue {got['epilogue_smem']:,})"
            )
        kind = "grouped" if grouped else "dense"
        name = "x".join(map(str, tile))
        rows.append(f"| {kind} | {name} | {'bf16' if c else 'void'} | {measured} | {model} |")
    cluster = "2x1x1 (2-SM MMA; the tile is the pair's)" if two else "1x1x1"
    table = (
        "# SM100 block-scaled (NVFP4) CUTLASS kernels: compile level vs model level\n\n"
        f"`python bench/sm100_blockscaled_grid.py` with nvcc {nvcc[1]}, CUTLASS {headers.version} "
        f"({headers.source}), target sm_100a, cluster {cluster}, bf16 D.\n\n"
        "| kind | tile (elements) | C | compile: stages / kernel bytes | model: stages / bytes |\n"
        "|---|---|---|---|---|\n" + "\n".join(rows) + "\n"
    )
    print(table)
    name = "sm100_blockscaled_2sm.md" if two else "sm100_blockscaled.md"
    (ROOT / "bench" / "results" / name).write_text(table, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
