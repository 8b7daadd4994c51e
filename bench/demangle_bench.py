"""Side-by-side benchmark: our ``demangle`` vs system GNU ``c++filt`` on real symbols.

Run: ``.venv/bin/python bench/demangle_bench.py [--write bench/results/demangle.md]``.
Needs ``../shared/peer`` (real-symbols-pytorch, libiberty-demangle-expected,
llvm-cxxfilt-lit) and ``c++filt`` on PATH; prints a Markdown table and the ratios.

- Throughput: names/s over the whole real-symbols list.  c++filt gets the list on stdin in
  one batch (wall time including process start).  "cold" for us means an empty cache and
  no worker process yet (its start-up is counted); "warm" is a second pass over the same
  list.  For c++filt, "warm" is a second run (page cache hot; it has no result cache).
  Cold figures are the best of ``--repeat`` runs on both sides (a shared 2-core machine is
  noisy); the very first call in the process, which also pays the one-time ``ctypes`` and
  ``demangle`` imports, is reported on its own row.  ``demangle_many`` is the batch API,
  ``demangle()`` one name at a time.  ``c++filt -i -r`` is GNU c++filt reading what we
  read (it refuses names over 1,024 characters without ``-r``), as a second reference.
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
from diagnose.frames import demangle_worker, mangled_bound  # noqa: E402

SHARED = ROOT.parent / "shared" / "peer"


NOTES = """
Where the cold time goes.  `demangle_many` prepares each distinct uncached name here and
streams them, 128 at a time, to one sandboxed worker (GNU `c++filt -i -r -s gnu-v3` under
`ulimit -v/-t` when binutils is installed: ~1 ms to start, ~6 us of CPU a name, and it reads
the names over 1,024 characters that `__cxa_demangle` refuses).  With c++filt as the worker
every name goes there: the proven-bound check plus a ctypes call here cost ~10 us a name, so
sharing measured slower (CPU ms, here + worker: 45 + 21 shared against 29 + 28).  With the
Python worker (no c++filt) this process reads the short names itself.  The names neither
reads (3 real ones GNU cannot read, 3 vector-ABI `_ZGV` names) go to the pure-Python
`demangle` package, whose import (~40 ms, once per process) dominates the first call.
`demangle()` one name at a time still proves the bound and calls `__cxa_demangle` here
(ctypes directly: 5.0 us against cxxfilt's 7.6 us) and asks the worker only for the rest.
Ratios against plain c++filt are not like for like: it gives up on 295 long names that we
(and `c++filt -r`) read, which is about half of c++filt -r's time.  Wall times on a shared,
loaded machine (load average in the header) swing by 2-3x between runs, c++filt's included;
the CPU row is the stable measure.  By CPU the batch path costs ~1.5x c++filt in this
process and ~1.4x in the worker, in parallel on two cores: on an idle machine that puts
cold `demangle_many` at roughly 0.6-0.8x c++filt, short of parity.  What is left: ~9 us a
name of Python work here (decorations, cache, pipes) and reading the names c++filt skips.
"""


def load_rows() -> list[dict[str, object]]:
    """The real-symbols list, one dict per symbol."""
    path = SHARED / "real-symbols-pytorch" / "symbols.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_ours(names: Sequence[str], batch: bool) -> tuple[list[str], float, float]:
    """Our outputs, cold seconds and warm seconds (batch API or one call per name)."""
    dm._reset_state()

    def once() -> list[str]:
        return dm.demangle_many(names) if batch else [dm.demangle(n) for n in names]

    start = time.perf_counter()
    outs = once()
    cold = time.perf_counter() - start
    start = time.perf_counter()
    once()
    warm = time.perf_counter() - start
    return outs, cold, warm


def best_ours(names: Sequence[str], batch: bool, repeat: int) -> tuple[list[str], float, float]:
    """``run_ours`` ``repeat`` times: the outputs, the best cold and best warm times."""
    runs = [run_ours(names, batch) for _ in range(repeat)]
    return runs[0][0], min(r[1] for r in runs), min(r[2] for r in runs)


def cpu_ms(names: Sequence[str], exe: str, repeat: int) -> tuple[float, float, float]:
    """Best CPU ms of a cold ``demangle_many`` (this process, worker) and of c++filt.

    CPU time does not depend on what else the machine runs, unlike wall time.
    """
    import resource

    def used(who: int) -> float:
        u = resource.getrusage(who)
        return 1000 * (u.ru_utime + u.ru_stime)

    ours, worker, gnu = [], [], []
    data = ("\n".join(names) + "\n").encode()
    for _ in range(repeat):
        dm._reset_state()
        me, kids = used(resource.RUSAGE_SELF), used(resource.RUSAGE_CHILDREN)
        dm.demangle_many(names)
        ours.append(used(resource.RUSAGE_SELF) - me)
        demangle_worker.WORKER.close()  # reaped: its CPU time joins RUSAGE_CHILDREN
        worker.append(used(resource.RUSAGE_CHILDREN) - kids)
        kids = used(resource.RUSAGE_CHILDREN)
        subprocess.run([exe], input=data, capture_output=True, check=True)
        gnu.append(used(resource.RUSAGE_CHILDREN) - kids)
    return min(ours), min(worker), min(gnu)


def run_cxxfilt(
    names: Sequence[str], exe: str, repeat: int = 2, flags: Sequence[str] = ()
) -> tuple[list[str], float, float]:
    """c++filt outputs (one batch on stdin), the best and the last wall time of ``repeat``."""
    data = ("\n".join(names) + "\n").encode()
    times = []
    out = b""
    for _ in range(max(repeat, 2)):
        start = time.perf_counter()
        out = subprocess.run([exe, *flags], input=data, capture_output=True, check=True).stdout
        times.append(time.perf_counter() - start)
    lines = out.decode().split("\n")[: len(names)]
    return lines, min(times), times[-1]


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
    global SHARED
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="also write the table here")
    parser.add_argument("--repeat", type=int, default=3, help="cold runs to take the best of")
    parser.add_argument("--peer", type=Path, help=f"the peer suites folder (default {SHARED})")
    args = parser.parse_args()
    if args.peer is not None:
        SHARED = args.peer
    exe = shutil.which("c++filt")
    if not SHARED.is_dir() or exe is None:
        print("needs ../shared/peer and c++filt on PATH", file=sys.stderr)
        return 2
    rows = load_rows()
    names = [str(r["mangled"]) for r in rows]
    natural = [i for i, r in enumerate(rows) if r["set"] != "cxa_demangle_fails"]
    sub = [names[i] for i in natural]
    rep = args.repeat

    start = time.perf_counter()
    dm._reset_state()
    dm.demangle_many(names)
    first = time.perf_counter() - start
    ours, cold, warm = best_ours(names, True, rep)
    _, scold, swarm = best_ours(names, False, rep)
    gnu, gcold, gwarm = run_cxxfilt(names, exe, rep)
    _, rcold, _ = run_cxxfilt(names, exe, rep, ("-i", "-r", "-s", "gnu-v3"))
    _, ncold, nwarm = best_ours(sub, True, rep)
    _, nscold, _ = best_ours(sub, False, rep)
    _, gncold, gnwarm = run_cxxfilt(sub, exe, rep)
    fast = [
        n
        for n, r in zip(names, rows, strict=True)
        if r["cxa_ok"] and mangled_bound.output_bound_bits(n) <= mangled_bound.INPROC_BUDGET_BITS
    ]
    inproc = len(fast)
    _, fcold, _ = best_ours(fast, False, rep)
    _, gfcold, _ = run_cxxfilt(fast, exe, rep)
    engine = "GNU c++filt" if demangle_worker.WORKER.native else "Python"
    me_ms, worker_ms, gnu_ms = cpu_ms(names, exe, rep)

    def rate(n: int, s: float) -> str:
        return f"{n / s:,.0f}/s"

    def row(label: str, n: int, ours_s: float, gnu_s: float) -> str:
        return f"| {label} | {rate(n, ours_s)} | {rate(n, gnu_s)} | {gnu_s / ours_s:.2f}x |"

    a, b = len(names), len(sub)
    table = [
        "| measure | ours (`diagnose.frames.demangle`) | GNU c++filt 2.40 | ours / c++filt |",
        "|---|---:|---:|---:|",
        row(f"all {a} names, cold, `demangle_many`", a, cold, gcold),
        row(f"all {a} names, cold, `demangle()` per name", a, scold, gcold),
        row(f"all {a} names, cold, `demangle_many`, vs `c++filt -i -r`", a, cold, rcold),
        row(f"all {a} names, first call in the process (imports too)", a, first, gcold),
        row(f"all {a} names, warm, `demangle_many`", a, warm, gwarm),
        row(f"all {a} names, warm, `demangle()` per name", a, swarm, gwarm),
        row(f"{b} names without the `cxa_demangle_fails` set, cold, `demangle_many`", b, ncold,
            gncold),
        row("same, cold, `demangle()` per name", b, nscold, gncold),
        row("same, warm, `demangle_many`", b, nwarm, gnwarm),
        row(f"{len(fast)} names on the in-process path only, cold, `demangle()`", len(fast),
            fcold, gfcold),
    ]  # fmt: skip
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
    table.append(f"| worker engine | {engine} | | |")
    table.append(
        f"| CPU ms, all names cold, `demangle_many` (this process + worker) "
        f"| {me_ms:.0f} + {worker_ms:.0f} | {gnu_ms:.0f} | |"
    )
    text = "\n".join(table)
    print(text)
    if args.write:
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        header = (
            "# demangle benchmark\n\n"
            f"Measured {stamp} on {platform.node()} ({platform.machine()}, "
            f"{platform.system()} {platform.release()}, Python {platform.python_version()}, "
            f"{_cpu_count()} cores, load average {_load()}) with "
            f"`.venv/bin/python bench/demangle_bench.py --repeat {rep} --write {args.write}`."
            "\n\n"
        )
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(header + text + "\n" + NOTES)
    return 0


def _load() -> str:
    import os

    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def _cpu_count() -> int:
    import os

    return os.cpu_count() or 0


if __name__ == "__main__":
    raise SystemExit(main())
