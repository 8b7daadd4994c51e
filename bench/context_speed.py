"""Side-by-side cost of diagnose.context.extract_context on a synthetic server log.

Compares, in one run:
  gated      extract_context as shipped (RE2 set of per-extractor literals, one pass a line)
  ungated    the same extractors with the gate removed (every regex on every line)
  py-gate    the fallback gate: Python substring tests, literal by literal
  scanner    lines pre-selected with CONTEXT_LITERALS (what ingest/scan does), then gated
and checks all three give the same LogContext.  Also prints the 4x-size ratio to show
the cost grows linearly.  Run: .venv/bin/python bench/context_speed.py [lines]
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable

from diagnose import context
from diagnose.model import LogLine

_NOISE = [
    "[2026-01-04 08:{m:02d}:{s:02d} TP{r}] Decode batch. #running-req: {n}, #token: {t}, "
    "token usage: 0.{u:02d}, gen throughput (token/s): {g}.0, #queue-req: 0",
    "INFO 01-04 08:{m:02d}:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: {g}.1 "
    "tokens/s, Avg generation throughput: {t}.4 tokens/s, Running: {n} reqs",
    '  File "/opt/app/serving/worker_{r}.py", line {n}, in step',
    "    out = self.model.forward(batch, positions=pos_{r}, cache=kv_{n})",
]
_FACTS = [
    "server_args=ServerArgs(model_path='acme/Bench-MoE', tp_size=8, ep_size=8, "
    "mem_fraction_static=0.8, moe_a2a_backend='deepep', " + "x_opt=1, " * 150 + "dp_size=2)",
    "|   0  NVIDIA H200                    On  |   00000000:19:00.0 Off |      0 |",
    "torch==2.9.0",
    "KV Cache is allocated. #tokens: 400000, K size: 10.00 GB, V size: 10.00 GB",
    "The server is fired up and ready to roll!",
]


def _log(n: int) -> list[LogLine]:
    rnd = random.Random(7)
    out: list[LogLine] = []
    for i in range(n):
        if i % 5000 == 0:
            text = _FACTS[(i // 5000) % len(_FACTS)]
        else:
            text = rnd.choice(_NOISE).format(
                m=i % 60,
                s=i % 59,
                r=i % 8,
                n=i % 97,
                t=i % 1000,
                u=i % 100,
                g=i % 700,
            )
        out.append(LogLine(i + 1, text))
    return out


def _time(fn: Callable[[], context.LogContext]) -> tuple[float, context.LogContext]:
    best = float("inf")
    result = context.LogContext()
    for _ in range(3):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def main() -> None:
    """Print timings and ratios; exit 1 if the variants disagree."""
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    lines = _log(n)
    big = _log(4 * n)

    gated_s, gated = _time(lambda: context.extract_context(lines))

    def scanner() -> context.LogContext:
        lits = context.CONTEXT_LITERALS
        return context.extract_context(
            ln for ln in lines if any(lit in ln.text.encode() for lit in lits)
        )

    scan_s, scanned = _time(scanner)

    def ungated() -> context.LogContext:
        acc = context._Acc()
        for ln in lines:
            for _, extractor in context._extractors():
                extractor(ln.text, ln.number, acc)
        return acc.freeze()

    def python_gate() -> context.LogContext:
        acc = context._Acc()
        table = context._extractors()
        for ln in lines:
            for i in context._python_gate(ln.text, table):
                table[i][1](ln.text, ln.number, acc)
        return acc.freeze()

    ungated_s, ungated_ctx = _time(ungated)
    pygate_s, pygate_ctx = _time(python_gate)

    big_s, _ = _time(lambda: context.extract_context(big))

    print(f"lines={n}")
    print(f"gated    {gated_s * 1e3:8.1f} ms  ({gated_s / n * 1e6:.2f} us/line)")
    print(f"ungated  {ungated_s * 1e3:8.1f} ms  ratio ungated/gated = {ungated_s / gated_s:.2f}")
    print(f"py-gate  {pygate_s * 1e3:8.1f} ms  ratio py-gate/gated = {pygate_s / gated_s:.2f}")
    print(f"scanner  {scan_s * 1e3:8.1f} ms  (bytes prefilter in Python: a correctness check only)")
    print(f"4x lines {big_s * 1e3:8.1f} ms  ratio 4x/1x = {big_s / gated_s:.2f} (linear = 4)")
    same = gated == ungated_ctx == pygate_ctx == scanned
    print(f"same result: {same}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
