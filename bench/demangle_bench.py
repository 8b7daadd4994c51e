"""Side-by-side benchmark: our ``demangle`` vs system GNU ``c++filt`` on real symbols.

Run: ``.venv/bin/python bench/demangle_bench.py [--write bench/results/demangle.md]``.
Needs ``../shared/peer`` (real-symbols-pytorch, libiberty-demangle-expected,
llvm-cxxfilt-lit) and ``c++filt`` on PATH; prints a Markdown table and the ratios.

- Throughput: names/s over the whole real-symbols list.  c++filt gets the list on stdin in
  one batch (wall time including process start).  "cold" for us means an empty cache and
  no worker process yet (its start-up is counted); "warm" is a second pass over the same
  list.  For c++filt, "warm" is a second run (page cache hot; it has no result cache).
- Agreement: exact string match with each reference column of the list (``cxa`` =
  ``abi::__cxa_demangle``, ``gnu`` = c++filt 2.40 ``--no-recurse-limit``, ``llvm``).
- Peer suites: libiberty ``demangle-expected`` gnu-v3 cases and the llvm-cxxfilt lit cases.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from diagnose.frames import demangle as dm  # noqa: E402

SHARED = ROOT.parent / "shared" / "peer"


NOTES = """
Where the cold time goes: the in-process `__cxa_demangle` tier is about half of c++filt's
batch speed (ctypes per call); names whose back-references could, by the linear-time bound,
print more than 16 MiB go to the rlimited worker (a pipe round trip each, plus its start-up);
names libstdc++ refuses go to the pure-Python `demangle` package (about 2 ms each on long
CUTLASS names), which is what the `cxa_demangle_fails` set is made of.  Warm (cached) calls
are an order of magnitude faster than c++filt.
"""


def load_rows() -> list[dict[str, object]]:
    """The real-symbols list, one dict per symbol."""
    path = SHARED / "real-symbols-pytorch" / "symbols.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_ours(names: Sequence[str]) -> tuple[list[str], float, float]:
    """Our outputs, cold seconds and warm seconds."""
    dm._reset_state()
    start = time.perf_counter()
    outs = [dm.demangle(n) for n in names]
    cold = time.perf_counter() - start
    start = time.perf_counter()
    for n in names:
        dm.demangle(n)
    warm = time.perf_counter() - start
    return outs, cold, warm


def run_cxxfilt(names: Sequence[str], exe: str) -> tuple[list[str], float, float]:
    """c++filt outputs (one batch on stdin) and the wall time of two runs."""
    data = ("\n".join(names) + "\n").encode()
    times = []
    out = b""
    for _ in range(2):
        start = time.perf_counter()
        out = subprocess.run([exe], input=data, capture_output=True, check=True).stdout
        times.append(time.perf_counter() - start)
    lines = out.decode().split("\n")[: len(names)]
    return lines, times[0], times[1]


def agreement(outs: Sequence[str], rows: Sequence[dict[str, object]], column: str) -> str:
    """``agree/total (pct)`` over rows whose reference column is present."""
    total = agree = 0
    for out, row in zip(outs, rows, strict=True):
        if column == "cxa":
            if not row["cxa_ok"]:
                continue
            ref = row.get("cxa") or row["gnu"]
        else:
            ref = row.get(column)
        if not ref:
            continue
        total += 1
        agree += out == ref
    return f"{agree}/{total} ({100 * agree / max(total, 1):.2f} %)"


def libiberty_rate(fn: Callable[[str], str]) -> str:
    """Exact-match rate on the plain gnu-v3 cases of libiberty's demangle-expected."""
    path = SHARED / "libiberty-demangle-expected" / "demangle-expected"
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    skip = {"--is-v3-ctor", "--is-v3-dtor", "--ret-postfix", "--ret-drop"}
    i = total = agree = 0
    while i + 2 < len(lines):
        if lines[i].startswith("#"):
            i += 1
            continue
        opts = lines[i].split()
        name, want = lines[i + 1], lines[i + 2]
        i += 4 if "--no-params" in opts else 3
        if "--format=gnu-v3" in opts and not skip & set(opts):
            total += 1
            agree += fn(name) == want
    return f"{agree}/{total} ({100 * agree / max(total, 1):.1f} %)"


def lit_rate(fn: Callable[[str], str]) -> str:
    """Pass rate on the llvm-cxxfilt lit cases (text mode: every word demangled)."""
    suite = json.loads((SHARED / "llvm-cxxfilt-lit" / "cases.json").read_text())
    cases = [c for test in suite.values() for c in test["cases"]]
    agree = sum(fn(c["input"]) == c["expected"] for c in cases)
    return f"{agree}/{len(cases)}"


def cxxfilt_cli(exe: str) -> Callable[[str], str]:
    """One c++filt call per input (slow, only for the small peer suites)."""

    def call(text: str) -> str:
        done = subprocess.run([exe], input=text + "\n", capture_output=True, text=True)
        return done.stdout.rstrip("\n")

    return call


def main() -> int:
    """Run everything, print the table, optionally write it to a Markdown file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="also write the table here")
    args = parser.parse_args()
    exe = shutil.which("c++filt")
    if not SHARED.is_dir() or exe is None:
        print("needs ../shared/peer and c++filt on PATH", file=sys.stderr)
        return 2
    rows = load_rows()
    names = [str(r["mangled"]) for r in rows]
    natural = [i for i, r in enumerate(rows) if r["set"] != "cxa_demangle_fails"]

    ours, cold, warm = run_ours(names)
    gnu, gcold, gwarm = run_cxxfilt(names, exe)
    sub = [names[i] for i in natural]
    _, ncold, nwarm = run_ours(sub)
    _, gncold, gnwarm = run_cxxfilt(sub, exe)
    fast = [
        n
        for n, r in zip(names, rows, strict=True)
        if r["cxa_ok"] and dm._output_bound_bits(n) <= dm._INPROC_BUDGET_BITS
    ]
    inproc = len(fast)
    _, fcold, _ = run_ours(fast)
    _, gfcold, _ = run_cxxfilt(fast, exe)

    def rate(n: int, s: float) -> str:
        return f"{n / s:,.0f}/s"

    table = [
        "| measure | ours (`diagnose.frames.demangle`) | GNU c++filt 2.40 | ours / c++filt |",
        "|---|---:|---:|---:|",
        f"| all {len(names)} names, cold | {rate(len(names), cold)} | {rate(len(names), gcold)} "
        f"| {gcold / cold:.2f}x |",
        f"| all {len(names)} names, warm | {rate(len(names), warm)} | {rate(len(names), gwarm)} "
        f"| {gwarm / warm:.2f}x |",
        f"| {len(sub)} names without the `cxa_demangle_fails` set, cold | {rate(len(sub), ncold)} "
        f"| {rate(len(sub), gncold)} | {gncold / ncold:.2f}x |",
        f"| same, warm | {rate(len(sub), nwarm)} | {rate(len(sub), gnwarm)} "
        f"| {gnwarm / nwarm:.2f}x |",
    ]
    table.append(
        f"| {len(fast)} names on the in-process path only, cold | {rate(len(fast), fcold)} "
        f"| {rate(len(fast), gfcold)} | {gfcold / fcold:.2f}x |"
    )
    for column in ("cxa", "gnu", "llvm"):
        table.append(
            f"| agrees with `{column}` | {agreement(ours, rows, column)} "
            f"| {agreement(gnu, rows, column)} | |"
        )
    read = sum(o != n for o, n in zip(ours, names, strict=True))
    gread = sum(o != n for o, n in zip(gnu, names, strict=True))
    table.append(f"| names read (output differs from input) | {read} | {gread} | |")
    table.append(
        f"| libiberty demangle-expected, gnu-v3 | {libiberty_rate(dm.demangle)} "
        f"| {libiberty_rate(cxxfilt_cli(exe))} | |"
    )
    table.append(
        f"| llvm-cxxfilt lit (text mode) | {lit_rate(dm.demangle_in_text)} "
        f"| {lit_rate(cxxfilt_cli(exe))} | |"
    )
    table.append(
        f"| readable names on the in-process path (proven bound) | {inproc}/{len(names)} | | |"
    )
    text = "\n".join(table)
    print(text)
    if args.write:
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        header = (
            "# demangle benchmark\n\n"
            f"Measured {stamp} on {platform.node()} ({platform.machine()}, "
            f"{platform.system()} {platform.release()}, Python {platform.python_version()}, "
            f"{_cpu_count()} cores) with `.venv/bin/python bench/demangle_bench.py "
            f"--write {args.write}`.\n\n"
        )
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(header + text + "\n" + NOTES)
    return 0


def _cpu_count() -> int:
    import os

    return os.cpu_count() or 0


if __name__ == "__main__":
    raise SystemExit(main())
