"""CLI start-up on a small log, side by side with the interpreter and the CLI framework floors.

One run times, interleaved round-robin over ``--runs`` rounds (so a busy machine slows
every command alike), the wall time of these child processes:

- ``python -c pass``: the interpreter alone;
- ``python -c 'import typer'``: the CLI framework's own floor (the target's yardstick);
- ``diagnose <trace>``: the installed console script on a copy of the SM120 trace;
- ``diagnose <example>``: the whole shipped SM120 example log (context, tactic dump, traceback);
- ``grep -c -i error <trace>``: a native process doing a trivial scan of the same file.

It prints medians and ratios and writes them to ``bench/results/cli_startup.md``, keeping
the hand-written findings below ``NOTES_MARKER`` in that file.

Bytecode: this environment may set ``PYTHONDONTWRITEBYTECODE=1``, which makes every run
recompile our sources (~80 ms).  A real install has ``.pyc`` files (pip compiles them), so
the bench first runs ``python -m compileall -q diagnose`` and starts the children with
``PYTHONDONTWRITEBYTECODE`` unset.  The rule/kb cache lives in a fresh temporary
``CRASHKB_CACHE_DIR``: the first ``diagnose`` run fills it (timed once, reported as the
cold run) and the timed rounds then see what a user sees from the second run on.

Usage: ``python bench/cli_startup.py [--runs 30] [--trace PATH]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EXAMPLE = ROOT / "diagnose" / "examples" / "sm120-ep8-smem.log"
TARGET_RATIO = 1.5
#: Everything from this line on in the results file is kept across runs (measured findings).
NOTES_MARKER = "<!-- notes: kept by bench/cli_startup.py -->"
#: A native backtrace frame line (``3       0x789a... symbol``), as TensorRT-LLM prints them.
_FRAME_LINE = re.compile(r"^\d+\s+0x[0-9a-f]+\s")


def trace_text(path: Path | None) -> str:
    """The SM120 trace: ``path`` when given, else the frame lines of the shipped example."""
    if path is not None:
        return path.read_text(encoding="utf-8")
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    return "".join(line + "\n" for line in lines if _FRAME_LINE.match(line))


def diagnose_command() -> list[str]:
    """The console script next to this interpreter, or the same entry point through ``-c``."""
    script = Path(sys.executable).parent / "diagnose"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from diagnose.launch import diagnose; diagnose()"]


def time_once(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one child run (exit status 0/1 are both normal).

    CPU time is what the child itself spent: a busy machine stretches wall time far more
    than CPU time, so the CPU ratio is the steadier one on a shared machine.
    """
    start = time.perf_counter()
    child = subprocess.Popen(
        argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, _, usage = os.wait4(child.pid, 0)
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def instructions(argv: list[str], env: dict[str, str], cwd: str) -> int | None:
    """Instructions one run executes, counted by ``valgrind --tool=callgrind`` (None without it).

    Repeatable to a fraction of a percent whatever else the machine runs; a ratio of
    instruction counts is not a ratio of times, but moves with it.
    """
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    proc = subprocess.run(
        [valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    m = re.search(r"Collected : (\d+)", proc.stderr)
    return int(m.group(1)) if m else None


def main() -> int:
    """Run the side-by-side timing, print the table and write the results file."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30, help="interleaved rounds (default 30)")
    ap.add_argument("--trace", type=Path, default=None, help="trace file (default: from example)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "cli_startup.md")
    ap.add_argument(
        "--instructions", action="store_true", help="also count instructions with callgrind"
    )
    args = ap.parse_args()

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "diagnose")], check=True)
    load_before = os.getloadavg()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory(prefix="crashkb-startup-") as tmp:
        env["CRASHKB_CACHE_DIR"] = str(Path(tmp) / "cache")
        trace = Path(tmp) / "sm120.log"
        trace.write_text(trace_text(args.trace), encoding="utf-8")
        example = Path(tmp) / "sm120-example.log"
        shutil.copyfile(EXAMPLE, example)
        grep = shutil.which("grep") or "grep"
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "python -c 'import typer'": [sys.executable, "-c", "import typer"],
            "diagnose <trace>": [*diagnose_command(), str(trace)],
            "diagnose <example>": [*diagnose_command(), str(example)],
            "grep -c -i error <trace>": [grep, "-c", "-i", "error", str(trace)],
        }
        cold = time_once(commands["diagnose <trace>"], env, tmp)[0]
        for argv in commands.values():  # warm the page cache and our caches
            time_once(argv, env, tmp)
        samples: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, argv in commands.items():
                wall_s, cpu_s = time_once(argv, env, tmp)
                samples[name].append(wall_s)
                cpu[name].append(cpu_s)
        counts = {
            name: instructions(commands[name], env, tmp)
            for name in ("python -c 'import typer'", "diagnose <trace>")
            if args.instructions
        }

    load_after = os.getloadavg()
    med = {name: statistics.median(s) for name, s in samples.items()}
    cpu_med = {name: statistics.median(s) for name, s in cpu.items()}
    typer_floor = med["python -c 'import typer'"]
    typer_cpu = cpu_med["python -c 'import typer'"]
    rows = [
        f"| {name} | {med[name] * 1e3:.1f} | {min(s) * 1e3:.1f} | "
        f"{med[name] / typer_floor:.2f}x | {cpu_med[name] * 1e3:.1f} | "
        f"{cpu_med[name] / typer_cpu:.2f}x | {med[name] / med['python -c pass']:.2f}x |"
        for name, s in samples.items()
    ]
    ratio = med["diagnose <trace>"] / typer_floor
    cpu_ratio = cpu_med["diagnose <trace>"] / typer_cpu
    verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
    counted = [c for c in counts.values() if c]
    instr_line: list[str] = []
    if len(counted) == 2:
        typer_ir, diag_ir = counted
        instr_line = [
            f"- instructions (callgrind, one run each): `import typer` {typer_ir:,}, "
            f"`diagnose <trace>` {diag_ir:,}: {diag_ir / typer_ir:.2f}x"
        ]
    report = "\n".join(
        [
            "# CLI start-up on a small log",
            "",
            f"`python bench/cli_startup.py --runs {args.runs}` on {os.cpu_count()} cores "
            f"({platform.machine()}), Python {platform.python_version()}; medians of "
            f"{args.runs} interleaved rounds.",
            "",
            "Sources byte-compiled first (`python -m compileall -q diagnose`) and children run "
            "with `PYTHONDONTWRITEBYTECODE` unset, as in a pip install; rule/kb cache warm "
            "(fresh `CRASHKB_CACHE_DIR`, filled by one cold run).",
            "",
            "| command | median ms | min ms | / import typer | CPU ms | CPU / import typer "
            "| / python -c pass |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
            f"- cold first run (empty cache): {cold * 1e3:.1f} ms",
            f"- target `diagnose <trace>` <= {TARGET_RATIO}x `import typer` (median wall): "
            f"{ratio:.2f}x ({verdict}); by median CPU time {cpu_ratio:.2f}x",
            *instr_line,
            f"- machine load (1-min average) before / after: {load_before[0]:.2f} / "
            f"{load_after[0]:.2f} (other work shares the cores: compare ratios, not ms)",
            "",
        ]
    )
    report += _kept_notes(args.out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report, encoding="utf-8")
    sys.stdout.write(report)
    return 0


def _kept_notes(path: Path) -> str:
    """The hand-written part of an earlier results file (from ``NOTES_MARKER`` on), if any."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return ""
    at = text.find(NOTES_MARKER)
    return "\n" + text[at:] if at >= 0 else ""


if __name__ == "__main__":
    sys.exit(main())
