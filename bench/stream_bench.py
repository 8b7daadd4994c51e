"""Streaming API vs the CLI's big-file scan, side by side: throughput and peak memory.

Two synthetic server logs (healthy lines from ``bench/gen_server_log.py``):

* ``clean``: crash-free, ``--clean-mb`` MiB (1024 for the issue's 1 GB case);
* ``crashy``: ``--crashy-mb`` MiB (2048) with ``--crashes`` (1000) crash blocks spread evenly.

Each measurement runs in a fresh child process so its peak RSS (``ru_maxrss``) is its own:

* ``scan``: ``diagnose.ingest.scan.scan`` over the file, trigger literals only (the floor);
* ``cli-scan``: the same with ``diagnose.context.READY_PHRASES``, as ``diagnose.pipeline``
  calls it for a big file (the full context vocabulary is read from the file's head only);
* ``stream-file``: ``iter_diagnoses(open(path, "rb"))`` (chunked reads);
* ``stream-lines``: ``iter_diagnoses(line for line in f)`` (an iterable of text lines).

Usage: ``python bench/stream_bench.py [--clean-mb 1024] [--crashy-mb 2048] [--crashes 1000]
[--dir /tmp] [--repeat 2] [--only clean|crashy] [--generate-only]``.  Prints a Markdown table:
best-of-N MB/s, the ratio to ``scan``, the largest peak RSS.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_server_log  # the sibling generator; bench/ is not a package

_CHILD = r"""
import json, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]
t = time.perf_counter()
found = 0
if mode == "scan":
    from diagnose.ingest.scan import scan
    with open(path, "rb") as f:
        found = len(scan(f).windows)
elif mode == "cli-scan":
    from diagnose.context import READY_PHRASES
    from diagnose.ingest.scan import scan
    with open(path, "rb") as f:
        found = len(scan(f, context_literals=READY_PHRASES).windows)
elif mode == "stream-file":
    from diagnose.stream import iter_diagnoses
    with open(path, "rb") as f:
        found = sum(1 for _ in iter_diagnoses(f))
else:
    from diagnose.stream import iter_diagnoses
    with open(path, encoding="utf-8", errors="replace") as f:
        found = sum(1 for _ in iter_diagnoses(line for line in f))
seconds = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": seconds, "rss": rss, "found": found}))
"""


def write_log(path: Path, size_bytes: int, crashes: int, seed: int = 11) -> None:
    """Write healthy lines with ``crashes`` crash blocks spread evenly through the file."""
    rng = random.Random(seed)
    now = datetime(2025, 3, 14, 9, 0, 0)
    every = size_bytes // (crashes + 1) if crashes else size_bytes + 1
    next_crash, written, done = every, 0, 0
    block: list[str] = []
    with path.open("w", encoding="utf-8", newline="\n") as out:
        while written < size_bytes:
            now += timedelta(milliseconds=rng.randint(0, 40))
            if done < crashes and written >= next_crash:
                lines = gen_server_log._crash(now.strftime("%Y-%m-%d %H:%M:%S"))
                done += 1
                next_crash += every
            else:
                lines = [gen_server_log._healthy(rng, now, rng.randint(0, 7))]
            for line in lines:
                block.append(line)
                written += len(line) + 1
            if len(block) >= 4096:
                out.write("\n".join(block) + "\n")
                block.clear()
        if block:
            out.write("\n".join(block) + "\n")


def measure(mode: str, path: Path) -> dict[str, float]:
    """Run one mode in a child process; return seconds, peak RSS bytes and reports found."""
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(path)],
        check=False, capture_output=True, text=True, cwd=root,
    )  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"{mode} failed on {path}:\n{out.stderr[-2000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    """Generate the logs (once), measure every mode on each, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clean-mb", type=int, default=1024)
    parser.add_argument("--crashy-mb", type=int, default=2048)
    parser.add_argument("--crashes", type=int, default=1000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp"))
    parser.add_argument("--repeat", type=int, default=2, help="best of N runs per mode")
    parser.add_argument("--only", choices=("clean", "crashy"), help="measure one log only")
    parser.add_argument("--generate-only", action="store_true", help="write the logs, measure none")
    args = parser.parse_args()
    logs = [
        ("clean", args.dir / f"stream-clean-{args.clean_mb}.log", args.clean_mb, 0),
        ("crashy", args.dir / f"stream-crashy-{args.crashy_mb}-{args.crashes}.log",
         args.crashy_mb, args.crashes),
    ]  # fmt: skip
    logs = [log for log in logs if args.only in (None, log[0])]
    for _, path, mb, crashes in logs:
        if not path.exists():
            write_log(path, mb << 20, crashes)
    if args.generate_only:
        return
    print("| log | mode | MB/s | vs scan | peak RSS MB | reports |")
    print("|---|---|---:|---:|---:|---:|")
    for name, path, mb, _ in logs:
        size = path.stat().st_size / 1e6
        base = None
        for mode in ("scan", "cli-scan", "stream-file", "stream-lines"):
            runs = [measure(mode, path) for _ in range(max(1, args.repeat))]
            r = min(runs, key=lambda x: x["seconds"])
            r["rss"] = max(x["rss"] for x in runs)
            speed = size / r["seconds"]
            base = base or speed
            print(f"| {name} {mb} MiB | {mode} | {speed:.0f} | {speed / base:.2f} | "
                  f"{r['rss'] / 1e6:.0f} | {int(r['found'])} |")  # fmt: skip
            sys.stdout.flush()


if __name__ == "__main__":
    main()
