"""The whole CLI against grep on big server logs, with and without a warning flood.

Generates (``bench/gen_server_log.py``) a clean log and a log where ``--flood`` of the lines
are benign warnings a loaded server repeats, each ``--size-mb`` large with one crash near
the end, then times, interleaved over ``--reps`` rounds:

- ``grep -c -E 'Traceback|Error|error' LOG | cat`` (its output to a pipe: GNU grep stops at
  the first match when its output is /dev/null);
- ``diagnose --format json LOG`` from a file, and the same log on stdin (``diagnose -``);

and reports each one's best wall time, the throughput ratio to grep (>= 0.5x is the target),
peak RSS (<= 150 MB), and whether the verdict named the crash. Results go to
``bench/results/flood.md``.

Usage: ``python bench/flood_bench.py [--size-mb 1024] [--flood 0.15] [--reps 2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
DIAGNOSE = [sys.executable, "-m", "diagnose"]


def _run(cmd: str | list[str], stdin_path: Path | None = None) -> tuple[float, float, bytes]:
    """Wall seconds, peak RSS of the child in MB, and its stdout."""
    stdin = stdin_path.open("rb") if stdin_path else subprocess.DEVNULL
    t0 = time.perf_counter()
    child = subprocess.Popen(cmd, shell=isinstance(cmd, str), stdin=stdin, stdout=subprocess.PIPE)
    out = child.stdout.read() if child.stdout else b""
    _, _, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - t0
    if stdin_path:
        stdin.close()  # type: ignore[union-attr]
    return wall, usage.ru_maxrss / 1024, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=1024)
    ap.add_argument("--flood", type=float, default=0.15)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "flood.md")
    args = ap.parse_args(argv)
    from gen_server_log import generate

    rows = []
    with tempfile.TemporaryDirectory(prefix="crashkb-flood-") as tmp:
        logs = {}
        for name, flood in (("clean", 0.0), ("flood", args.flood)):
            path = Path(tmp) / f"{name}.log"
            generate(path, int(args.size_mb * (1 << 20)), seed=7, flood=flood)
            logs[name] = path
        for name, path in logs.items():
            size_mb = path.stat().st_size / (1 << 20)
            best: dict[str, tuple[float, float, bytes]] = {}
            for _ in range(args.reps):
                runs = {
                    "grep": _run(f"grep -c -E 'Traceback|Error|error' {path} | cat"),
                    "file": _run([*DIAGNOSE, str(path), "--format", "json"]),
                    "stdin": _run([*DIAGNOSE, "-", "--format", "json"], stdin_path=path),
                }
                for key, got in runs.items():
                    if key not in best or got[0] < best[key][0]:
                        best[key] = got
            grep_s = best["grep"][0]
            for key in ("file", "stdin"):
                wall, rss, out = best[key]
                try:
                    d = json.loads(out)
                    verdict = f"{d['cause']}, {len(d['crashes'])} regions"
                except (ValueError, KeyError):
                    verdict = "no JSON"
                rows.append(
                    (name, size_mb, key, wall, grep_s, grep_s / wall if wall else 0.0, rss, verdict)
                )
    lines = [
        "# The whole CLI vs grep on big server logs",
        "",
        f"`python bench/flood_bench.py --size-mb {args.size_mb:g} --flood {args.flood:g} "
        f"--reps {args.reps}` on {os.cpu_count()} cores ({platform.machine()}), Python "
        f"{platform.python_version()}; best of {args.reps} interleaved rounds. grep: "
        "`grep -c -E 'Traceback|Error|error' LOG | cat`.",
        "",
        "| log | MB | input | diagnose s | grep s | throughput vs grep | peak RSS MB | verdict |",
        "|---|---:|---|---:|---:|---:|---:|---|",
    ]
    for name, mb, key, wall, grep_s, ratio, rss, verdict in rows:
        lines.append(
            f"| {name} | {mb:.0f} | {key} | {wall:.2f} | {grep_s:.2f} | {ratio:.2f}x | "
            f"{rss:.0f} | {verdict} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
