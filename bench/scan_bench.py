"""Benchmark the streaming scan against grep on a generated 1 GB server log, side by side.

One run measures, interleaved over ``--reps`` rounds (best time kept, so a busy machine
hurts both sides alike):

- ``grep -c -E 'Traceback|Error|error'`` wall time over the file (page cache warm);
- :func:`diagnose.ingest.scan.scan` wall time, CPU time and peak RSS, in a child process
  (``resource.getrusage`` there), with the triggers and context literals the product's
  big-file path uses (``TRIGGERS`` plus every rule's literal guard, the readiness phrases; it
  searches chunks ahead in two threads when the machine has a second core, so its CPU
  time is reported beside grep's too);
- that the crash was found: a window holds it and ``normalize`` + ``find_regions`` on the
  windows give a region whose message is the crash's exception line;
- the whole-input path (``normalize`` + ``find_regions``) on a log of
  ``WHOLE_INPUT_LIMIT`` bytes, which backs the threshold documented in ``scan.py``.

Prints the ratios and writes them to ``bench/results/scan.md``.  The big file lives under
``/tmp`` (``--path``), never in the repository.

Usage: ``python bench/scan_bench.py [--size-mb 1024] [--reps 3] [--path /tmp/...]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from gen_server_log import CRASH_MESSAGE, generate  # noqa: E402

_CHILD = r"""
import json, resource, sys, time
from diagnose.api import rule_triggers
from diagnose.context import ready_phrases
from diagnose.ingest.scan import scan
folded = rule_triggers()  # the product's triggers: TRIGGERS plus every rule's guard
u = resource.getrusage(resource.RUSAGE_SELF)
c, t = u.ru_utime + u.ru_stime, time.perf_counter()
with open(sys.argv[1], "rb") as f:
    r = scan(f, context_literals=ready_phrases(), folded_triggers=folded)
dt = time.perf_counter() - t
u = resource.getrusage(resource.RUSAGE_SELF)
cpu = u.ru_utime + u.ru_stime - c
first, last = map(int, sys.argv[2].split())
held = [w for w in r.windows if w.first_line <= first and w.first_line + len(w.lines) > last]
found = False
if held:
    from diagnose.ingest.normalize import normalize
    from diagnose.regions import find_regions
    w = held[0]
    regions = find_regions(normalize("\n".join(w.lines), first_line=w.first_line))
    found = any(x.message == sys.argv[3] and first <= x.message_line <= last for x in regions)
print(json.dumps({
    "seconds": dt,
    "cpu": cpu,
    "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "bytes": r.total_bytes, "lines": r.total_lines, "hits": r.hits,
    "windows": len(r.windows), "window_lines": sum(len(w.lines) for w in r.windows),
    "context": len(r.context), "crash_window": bool(held), "crash_region": found,
}))
"""


def _grep(path: Path) -> tuple[float, float, int]:
    """grep's wall seconds, CPU seconds and count."""
    kids = _children_cpu()
    start = time.perf_counter()
    out = subprocess.run(
        ["grep", "-c", "-E", "Traceback|Error|error", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    return wall, _children_cpu() - kids, int(out.stdout.strip() or 0)


def _children_cpu() -> float:
    import resource

    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def _scan(path: Path, crash: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), crash, CRASH_MESSAGE],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def _whole(size: int) -> tuple[float, int]:
    """normalize + find_regions over a generated log of ``size`` bytes, in-process."""
    from diagnose.ingest.normalize import normalize
    from diagnose.regions import find_regions

    path = Path("/tmp/crashkb-whole-bench.log")
    generate(path, size, seed=11)
    text = path.read_text(encoding="utf-8")
    start = time.perf_counter()
    regions = find_regions(normalize(text))
    elapsed = time.perf_counter() - start
    path.unlink()
    path.with_name(path.name + ".crash").unlink(missing_ok=True)
    return elapsed, len(regions)


def main() -> None:
    """Run the benchmark and write ``bench/results/scan.md``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=1024)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--path", type=Path, default=Path("/tmp/crashkb-scan-bench.log"))
    args = parser.parse_args()

    size = int(args.size_mb * 1024 * 1024)
    marker = args.path.with_name(args.path.name + ".crash")
    if not (args.path.exists() and marker.exists() and args.path.stat().st_size >= size):
        first, last = generate(args.path, size)
        marker.write_text(f"{first} {last}\n")
    crash = marker.read_text().strip()
    real_size = args.path.stat().st_size
    with args.path.open("rb") as f:  # warm the page cache for both sides
        while f.read(16 * 1024 * 1024):
            pass

    grep_best, scan_best, rss = float("inf"), float("inf"), 0.0
    grep_cpu, scan_cpu = float("inf"), float("inf")
    last_scan: dict[str, float] = {}
    grep_count = 0
    for _ in range(max(1, args.reps)):
        g, g_cpu, grep_count = _grep(args.path)
        grep_best, grep_cpu = min(grep_best, g), min(grep_cpu, g_cpu)
        last_scan = _scan(args.path, crash)
        scan_best = min(scan_best, last_scan["seconds"])
        scan_cpu = min(scan_cpu, last_scan["cpu"])
        rss = max(rss, last_scan["rss_mb"])

    from diagnose.api import rule_triggers
    from diagnose.context import ready_phrases
    from diagnose.ingest.scan import TRIGGERS, WHOLE_INPUT_LIMIT

    n_rule, n_ready = len(rule_triggers()), len(ready_phrases())

    whole_s, whole_regions = _whole(WHOLE_INPUT_LIMIT)
    mb = real_size / 1e6
    rows = [
        ("file", f"{real_size / 2**20:.0f} MiB, {int(last_scan['lines']):,} lines"),
        ("grep -c -E 'Traceback|Error|error'", f"{grep_best:.2f} s ({mb / grep_best:.0f} MB/s)"),
        (
            f"scan ({len(TRIGGERS)} triggers + {n_rule} rule literals any case"
            f" + {n_ready} readiness phrases)",
            f"{scan_best:.2f} s ({mb / scan_best:.0f} MB/s)",
        ),
        ("scan / grep throughput", f"{grep_best / scan_best:.2f}x (target >= 0.5x)"),
        (
            "CPU seconds: grep / scan (scan searches in 2 threads when it has 2 cores)",
            f"{grep_cpu:.2f} / {scan_cpu:.2f} ({grep_cpu / scan_cpu:.2f}x)",
        ),
        ("scan peak RSS (child)", f"{rss:.0f} MB (target <= 150 MB)"),
        (
            "hits / windows / kept lines",
            "{:,} / {:,} / {:,}".format(
                int(last_scan["hits"]), int(last_scan["windows"]), int(last_scan["window_lines"])
            ),
        ),
        ("grep matching lines", f"{grep_count:,}"),
        (
            "crash window / crash region",
            f"{bool(last_scan['crash_window'])} / {bool(last_scan['crash_region'])}",
        ),
        (
            f"whole path on {WHOLE_INPUT_LIMIT // 2**20} MiB (normalize+find_regions)",
            f"{whole_s:.2f} s, {whole_regions} regions",
        ),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    cpu = platform.processor() or platform.machine()
    md = [
        "# Streaming scan vs grep",
        "",
        f"`python bench/scan_bench.py --size-mb {args.size_mb:g} --reps {args.reps}` on "
        f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}; best of "
        f"{args.reps} interleaved rounds, page cache warm.",
        "",
        "| measure | value |",
        "|---|---|",
        *[f"| {k.replace('|', chr(92) + '|')} | {v} |" for k, v in rows],
        "",
    ]
    out = HERE / "results" / "scan.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text("\n".join(md), encoding="utf-8")


if __name__ == "__main__":
    main()
