"""Generate a realistic LLM-server log of a given size with one crash near the end.

The healthy part mixes what sglang and vLLM print while serving: prefill/decode batch
statistics, HTTP access lines, vLLM metrics lines, memory-pool and CUDA-graph lines, and the
odd benign warning, with varying numbers, ranks and timestamps.  About 99 % of the way in, a
scheduler crashes with a Python traceback ending in a CUDA illegal-memory-access error,
followed by a few lines of shutdown noise.  Every line is synthetic.

Usage: ``python bench/gen_server_log.py OUT SIZE_MB [--seed N] [--flood 0.15]``,
``--flood``: that fraction of lines are benign warnings a loaded server repeats.  Prints
nothing; the crash's line numbers are written to ``OUT.crash`` (``first last``).
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

CRASH_MESSAGE = "RuntimeError: CUDA error: an illegal memory access was encountered"

_MODELS = ("acme/chat-13b", "acme/coder-34b-fp8", "acme/moe-8x7b")
_PATHS = ("/v1/chat/completions", "/v1/completions", "/generate", "/health", "/metrics")
_WARNINGS = (
    "Ignoring unknown field 'logprobs_mode' in the request body.",
    "The tokenizer has no chat template; using the default one.",
    "Slow request: waited 4.1 s in the queue before prefill.",
)


def _crash(stamp: str) -> list[str]:
    """The crash block: traceback, CUDA error, the usual hints and shutdown noise."""
    site = "/opt/venv/lib/python3.12/site-packages/sglang/srt"
    return [
        f"[{stamp} TP2] Scheduler hit an exception: Traceback (most recent call last):",
        f'  File "{site}/managers/scheduler.py", line 2311, in run_scheduler_process',
        "    scheduler.event_loop_overlap()",
        f'  File "{site}/managers/scheduler.py", line 771, in event_loop_overlap',
        "    result = self.run_batch(batch)",
        "             ^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{site}/model_executor/model_runner.py", line 1480, in forward',
        "    return self.forward_decode(forward_batch)",
        f'  File "{site}/layers/attention/flashinfer_backend.py", line 612, in forward_decode',
        "    o = decode_wrapper.forward(q, kv_cache, sm_scale=layer.scaling)",
        CRASH_MESSAGE,
        "CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
        "",
        f"[{stamp}] Received sigquit from a child process. It usually means the child failed.",
    ]


def _healthy(rng: random.Random, now: datetime, tp: int) -> str:
    """One healthy line, chosen with realistic frequencies."""
    stamp = now.strftime("%Y-%m-%d %H:%M:%S")
    roll = rng.random()
    if roll < 0.40:
        running = rng.randint(1, 256)
        return (
            f"[{stamp} TP{tp}] Decode batch. #running-req: {running}, "
            f"#token: {running * rng.randint(200, 4000)}, token usage: {rng.random():.2f}, "
            f"cuda graph: {rng.random() < 0.9}, gen throughput (token/s): "
            f"{rng.uniform(50, 9000):.2f}, #queue-req: {rng.randint(0, 40)}"
        )
    if roll < 0.60:
        return (
            f"[{stamp} TP{tp}] Prefill batch. #new-seq: {rng.randint(1, 32)}, "
            f"#new-token: {rng.randint(16, 16384)}, #cached-token: {rng.randint(0, 8192)}, "
            f"token usage: {rng.random():.2f}, #running-req: {rng.randint(0, 256)}, "
            f"#queue-req: {rng.randint(0, 40)}"
        )
    if roll < 0.85:
        port = rng.randint(30000, 65000)
        path = rng.choice(_PATHS)
        code = 200 if rng.random() < 0.98 else rng.choice((400, 404, 422))
        verb = "GET" if path in ("/health", "/metrics") else "POST"
        peer = f"10.0.{tp}.{rng.randint(2, 254)}:{port}"
        return f'[{stamp}] INFO:     {peer} - "{verb} {path} HTTP/1.1" {code}'
    if roll < 0.97:
        return (
            f"INFO {now:%m-%d %H:%M:%S} [metrics.py:{rng.choice((386, 455))}] Avg prompt "
            f"throughput: {rng.uniform(0, 20000):.1f} tokens/s, Avg generation throughput: "
            f"{rng.uniform(0, 5000):.1f} tokens/s, Running: {rng.randint(0, 256)} reqs, "
            f"Swapped: 0 reqs, Pending: {rng.randint(0, 30)} reqs, GPU KV cache usage: "
            f"{rng.uniform(0, 99):.1f}%, CPU KV cache usage: 0.0%."
        )
    if roll < 0.99:
        return (
            f"[{stamp} TP{tp}] KV Cache is allocated. #tokens: {rng.randint(10**5, 3 * 10**6)}, "
            f"K size: {rng.uniform(5, 60):.2f} GB, V size: {rng.uniform(5, 60):.2f} GB; "
            f"Memory pool end. avail mem={rng.uniform(1, 40):.2f} GB; model {rng.choice(_MODELS)}"
        )
    return f"[{stamp} TP{tp}] WARNING: {rng.choice(_WARNINGS)}"


# What a server under load repeats by the hundred thousand and survives: vLLM's preemption
# warning, NCCL's transport warnings, and lines that contain "error" without being one.
def _flood(rng: random.Random, now: datetime, tp: int) -> str:
    stamp = now.strftime("%m-%d %H:%M:%S")
    kind = rng.randrange(4)
    if kind == 0:
        return (
            f"WARNING {stamp} [scheduler.py:1560] Sequence group {rng.randint(1, 10**6)} is "
            "preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache "
            f"space. This can affect the end-to-end performance. Increase gpu_memory_utilization "
            f"or tensor_parallel_size to provide more KV cache memory. "
            f"total_num_cumulative_preemption={rng.randint(1, 10**5)}"
        )
    if kind == 1:
        return (
            f"node{rng.randint(1, 8)}:{rng.randint(1000, 99999)}:{rng.randint(1000, 99999)} "
            f"[{tp}] NCCL WARN NET/IB : Got async event : port active"
        )
    if kind == 2:
        return f"INFO {stamp} [cache.py:88] Cache flush skipped: no error (rank {tp})"
    return f"[{stamp} TP{tp}] Decode batch. #running-req: {rng.randint(1, 256)}, error_count: 0"


def healthy_lines(seed: int = 7) -> Iterator[str]:
    """Endless healthy server log lines (newline-terminated), for burying a crash in."""
    rng = random.Random(seed)
    now = datetime(2025, 3, 14, 9, 0, 0)
    while True:
        now += timedelta(milliseconds=rng.randint(0, 40))
        yield _healthy(rng, now, rng.randint(0, 7)) + "\n"


def generate(path: Path, size_bytes: int, seed: int = 7, flood: float = 0.0) -> tuple[int, int]:
    """Write the log to ``path``; return the crash's (first, last) 1-based line numbers.

    ``flood`` is the fraction of lines that are benign warnings repeated by the hundred
    thousand (``_flood``), as a server under load prints them.
    """
    rng = random.Random(seed)
    now = datetime(2025, 3, 14, 9, 0, 0)
    crash_at = int(size_bytes * 0.99)
    written = 0
    line_no = 0
    crash: tuple[int, int] = (0, 0)
    block: list[str] = []
    with path.open("w", encoding="utf-8", newline="\n") as out:
        while written < size_bytes:
            if not crash[0] and written >= crash_at:
                lines = _crash(now.strftime("%Y-%m-%d %H:%M:%S"))
                crash = (line_no + 1, line_no + len(lines))
            else:
                now += timedelta(milliseconds=rng.randint(0, 40))
                tp = rng.randint(0, 7)
                make = _flood if flood and rng.random() < flood else _healthy
                lines = [make(rng, now, tp)]
            for line in lines:
                block.append(line)
                written += len(line) + 1
                line_no += 1
            if len(block) >= 4096:
                out.write("\n".join(block) + "\n")
                block.clear()
        if block:
            out.write("\n".join(block) + "\n")
    return crash


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("size_mb", type=float)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--flood", type=float, default=0.0, help="fraction of flood warnings")
    args = parser.parse_args()
    first, last = generate(args.out, int(args.size_mb * 1024 * 1024), args.seed, args.flood)
    args.out.with_name(args.out.name + ".crash").write_text(f"{first} {last}\n")


if __name__ == "__main__":
    main()
