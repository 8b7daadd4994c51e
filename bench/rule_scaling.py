"""How matching cost grows with the rule count: shipped rules vs shipped + N generated rules.

Run:  .venv/bin/python bench/rule_scaling.py [--rules 1000] [--repeat 20]

Generates N realistic rules (a literal or regex gate, optional fact regexes, a few
frame/context-only rules that no literal can guard) into a temporary directory,
loads them beside the shipped rules and times ``run_rules`` on the same parsed
logs: a synthetic 3,000-line server log and, when ``../shared/corpus/dev`` exists,
every dev-corpus log.  Prints times side by side and the ratio (target <= 2x),
``--unguarded-every`` sets how many generated rules no literal can guard (default 1 in 50),
plus the same rule base with the prefilter switched off to show what it saves.
Parsing is done once, outside the timings.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from diagnose.kb import load_kb  # noqa: E402
from diagnose.rules import Document, RuleSet, load_rules, run_rules  # noqa: E402

_VOCAB = """kernel launch failed buffer dispatch combine rank stream graph capture tensor expert
token cache pool block warp shared memory allocator handle context device driver module symbol
tactic profile runner gemm attention decode prefill sampler scheduler worker engine plugin layer
weight quant scale group tile stage cluster barrier fence queue socket transport proxy channel
ring tree collective reduce gather scatter"""
WORDS = tuple(_VOCAB.split())
CAUSES = ("cuda-oom", "smem-overflow", "tactic-skipped", "nccl-error", "illegal-memory-access")


def _phrase(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(3))


def generated_rule(i: int, rng: random.Random, unguarded_every: int = 50) -> tuple[str, str]:
    """One rule file (path relative to the root, text) shaped like a hand-written rule.

    Every ``unguarded_every``-th rule has no literal (frame + context gates only), so the
    prefilter cannot skip it; 0 means none.
    """
    cause = CAUSES[i % len(CAUSES)]
    slug = f"gen-{i:04d}"
    if unguarded_every and i % unguarded_every == 0:
        gate = f"all = [ {{ frame = '*{rng.choice(WORDS)}*' }}, {{ context = 'ep_size' }} ]"
    elif i % 3 == 0:
        gate = f"all = [ {{ regex = '{_phrase(rng)} (?P<n{i}>\\d+)' }} ]"
    else:
        gate = (
            f"any = [ {{ text = '{_phrase(rng)}', ignore_case = true }}, "
            f"{{ regex = '(?i){_phrase(rng)}: \\w+' }} ]"
        )
    text = f"""id = "{cause}/{slug}"
cause = "{cause}"
title = "generated {i}"
severity = "fatal"
confidence = 0.5
references = ["bench/gen#{i}"]
summary = "generated"

[match]
{gate}
none = [ {{ text = "{_phrase(rng)}" }} ]
optional = [ {{ regex = 'size=(?P<size{i}>\\d+)' }} ]

[[examples]]
name = "m"
expect = "match"
log = "x"

[[examples]]
name = "n"
expect = "no-match"
log = "y"
"""
    return f"{cause}/{slug}.toml", text


def synthetic_log(rng: random.Random, lines: int = 3000) -> str:
    """A server log: INFO chatter, autotuner warnings, one Triton traceback at the end."""
    out = []
    for n in range(lines):
        rank = n % 8
        out.append(
            f"[2026-05-0{1 + n % 9} 10:{n % 60:02d}:{n % 60:02d} TP{rank}] INFO "
            f"{rng.choice(WORDS)} {rng.choice(WORDS)} step={n} tokens={rng.randint(1, 4096)}"
        )
        if n % 500 == 250:
            out.append("[Autotuner]: Skipped 3 unsupported tactic(s) for moe::gemm1")
    out += [
        "Traceback (most recent call last):",
        '  File "/srv/app/attn.py", line 88, in forward',
        "    _kernel[grid](q, k, v)",
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, "
        "Required: 131072, Hardware limit: 101376. Reducing block sizes or `num_stages` may help.",
    ]
    return "\n".join(out) + "\n"


def best_time(fn: Callable[[], object], repeat: int) -> float:
    """Fastest of ``repeat`` runs, in seconds (the least disturbed by other processes)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def time_docs(rules: RuleSet, docs: list[Document], kb: object, repeat: int, **kw: bool) -> float:
    """Total best time to match ``rules`` against every document."""
    return sum(best_time(lambda d=d: run_rules(rules, d, kb, **kw), repeat) for d in docs)


def main() -> None:
    """Generate rules, time both rule bases on the same logs, print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rules", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument(
        "--unguarded-every", type=int, default=50, help="0: every rule has a literal"
    )
    args = parser.parse_args()
    rng = random.Random(7)
    kb = load_kb()
    shipped = load_rules(kb=kb)
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rules):
            rel, text = generated_rule(i, rng, args.unguarded_every)
            path = Path(tmp) / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        start = time.perf_counter()
        big = load_rules([tmp], kb=kb)
        load_s = time.perf_counter() - start

    corpus_dir = ROOT.parent / "shared" / "corpus" / "dev"
    suites = {"synthetic 3k-line log": [Document.from_text(synthetic_log(rng))]}
    if corpus_dir.is_dir():
        logs = sorted(corpus_dir.glob("*.log"))
        suites[f"dev corpus ({len(logs)} logs)"] = [
            Document.from_text(p.read_text(errors="replace")) for p in logs
        ]

    print(f"rule bases: shipped {len(shipped)} rules; shipped + generated {len(big)} rules")
    print(f"loading + validating {len(big)} rules: {load_s:.2f} s; "
          f"prefilter literals: {big.prefilter.literal_count}")  # fmt: skip
    head = f"{'shipped':>12}{'+generated':>14}{'ratio':>8}{'no prefilter':>15}{'ratio':>8}"
    print(f"{'log set':<26}{head}")
    for name, docs in suites.items():
        small_t = time_docs(shipped, docs, kb, args.repeat)
        big_t = time_docs(big, docs, kb, args.repeat)
        raw_t = time_docs(big, docs, kb, max(1, args.repeat // 4), prefilter=False)
        evaluated = sum(run_rules(big, d, kb).evaluated for d in docs) / len(docs)
        print(
            f"{name:<26}{small_t * 1e3:>10.2f}ms{big_t * 1e3:>12.2f}ms{big_t / small_t:>7.2f}x"
            f"{raw_t * 1e3:>13.2f}ms{raw_t / small_t:>7.2f}x   "
            f"(rules evaluated per log: {evaluated:.1f} of {len(big)})"
        )


if __name__ == "__main__":
    main()
