"""Accuracy of the diagnosis on a labelled corpus folder (default: ../shared/corpus/dev).

Prints top-1 accuracy, per-cause precision/recall, the confusion table, the
fatal-flag agreement and every miss.  ``--bury MB`` also re-runs each log buried at
a random place inside MB megabytes of generated healthy server log (the verdict
must not change).  ``--save FILE`` writes the verdicts as JSON, ``--diff FILE``
compares against a saved run (what a rule change fixes and breaks).

    python bench/accuracy.py
    python bench/accuracy.py --bury 50
    python bench/accuracy.py --save /tmp/before.json   # ... change rules ...
    python bench/accuracy.py --diff /tmp/before.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import tomllib
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def load_cases(folder: Path) -> list[tuple[str, Path, dict[str, object]]]:
    """Every ``<id>.log`` with its ``<id>.toml`` labels, sorted by id."""
    cases = []
    for log in sorted(folder.glob("*.log")):
        labels = tomllib.loads(log.with_suffix(".toml").read_text())
        cases.append((log.stem, log, labels))
    return cases


def run(
    cases: list[tuple[str, Path, dict[str, object]]], bury_mb: float = 0.0
) -> dict[str, dict[str, object]]:
    """Diagnose every case; return ``{id: {"cause", "fatal", "rule", "seconds"}}``."""
    from diagnose.api import diagnose_file

    out: dict[str, dict[str, object]] = {}
    rng = random.Random(1234)
    filler = _healthy_lines(bury_mb) if bury_mb else []
    with tempfile.TemporaryDirectory() as tmp:
        for case_id, path, _labels in cases:
            target = path
            if filler:
                at = rng.randrange(len(filler))
                target = Path(tmp) / f"{case_id}.log"
                with open(target, "w", encoding="utf-8") as fh:
                    fh.writelines(filler[:at])
                    fh.write(path.read_text(encoding="utf-8", errors="replace").rstrip("\n") + "\n")
                    fh.writelines(filler[at:])
            t0 = time.perf_counter()
            d = diagnose_file(target)
            out[case_id] = {
                "cause": d.cause,
                "fatal": d.fatal,
                "rule": d.primary.rule_id if d.primary else None,
                "seconds": round(time.perf_counter() - t0, 4),
            }
    return out


def _healthy_lines(megabytes: float) -> list[str]:
    """Generated healthy sglang/vLLM log lines adding up to about ``megabytes`` MB."""
    sys.path.insert(0, str(ROOT / "bench"))
    from gen_server_log import healthy_lines  # type: ignore[import-not-found]

    lines: list[str] = []
    size = 0
    for line in healthy_lines(seed=7):
        lines.append(line)
        size += len(line)
        if size >= megabytes * 1e6:
            break
    return lines


def report(
    cases: list[tuple[str, Path, dict[str, object]]], got: dict[str, dict[str, object]]
) -> float:
    """Print the accuracy tables; return top-1 accuracy."""
    confusion: Counter[tuple[str, str]] = Counter()
    per_label: dict[str, Counter[str]] = defaultdict(Counter)
    misses = []
    fatal_ok = 0
    fatal_misses: list[tuple[str, object, object]] = []
    for case_id, _path, labels in cases:
        want = str(labels["cause"])
        have = str(got[case_id]["cause"])
        confusion[(want, have)] += 1
        per_label[want]["n"] += 1
        if want == have:
            per_label[want]["tp"] += 1
        else:
            per_label[have]["fp"] += 1
            misses.append((case_id, want, have, got[case_id]["rule"]))
        # No crash region (fatal None) says nothing died: it agrees with a label of false.
        # Unknown verdicts are judged too (they were once passed as agreeing).
        if bool(got[case_id]["fatal"]) == bool(labels.get("fatal")):
            fatal_ok += 1
        else:
            fatal_misses.append((case_id, labels.get("fatal"), got[case_id]["fatal"]))
    total = len(cases)
    correct = sum(c["tp"] for c in per_label.values())
    print(f"top-1 accuracy: {correct}/{total} = {correct / total:.1%}")
    print(f"fatal flag agrees: {fatal_ok}/{total} (no crash found counts as not fatal)")
    unknown_given_known = sum(
        1 for _, want, have, _ in misses if have == "unknown" and want != "unknown"
    )
    print(f"'unknown' given a known cause: {unknown_given_known}")
    wrong = sum(1 for _, _, have, _ in misses if have != "unknown")
    print(f"a wrong cause named: {wrong}/{total} = {wrong / total:.1%} (target <= 3%)")
    print()
    print("| cause | cases | precision | recall |")
    print("|---|---:|---:|---:|")
    for cause in sorted(per_label):
        c = per_label[cause]
        tp, fp, n = c["tp"], c["fp"], c["n"]
        prec = f"{tp / (tp + fp):.0%}" if tp + fp else "-"
        rec = f"{tp / n:.0%}" if n else "-"
        print(f"| {cause} | {n} | {prec} | {rec} |")
    print()
    print("confusions (label -> verdict: count):")
    for (want, have), n in sorted(confusion.items()):
        if want != have:
            print(f"  {want} -> {have}: {n}")
    print()
    for case_id, want, have, rule in misses:
        print(f"MISS {case_id}: label {want}, got {have} ({rule})")
    for case_id, want_fatal, have_fatal in fatal_misses:
        print(f"FATAL {case_id}: label {want_fatal}, got {have_fatal}")
    return correct / total if total else 0.0


def main() -> None:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", default=str(ROOT.parent / "shared" / "corpus" / "dev"))
    ap.add_argument("--bury", type=float, default=0.0, help="MB of healthy log around each case")
    ap.add_argument("--save", help="write verdicts to this JSON file")
    ap.add_argument("--diff", help="compare verdicts with a saved JSON run")
    args = ap.parse_args()
    folder = Path(args.folder)
    if not folder.is_dir():
        sys.exit(f"no corpus at {folder}")
    cases = load_cases(folder)
    t0 = time.perf_counter()
    got = run(cases, args.bury)
    elapsed = time.perf_counter() - t0
    report(cases, got)
    print(
        f"\n{len(cases)} logs in {elapsed:.1f} s"
        + (f" (each buried in {args.bury:g} MB of healthy log)" if args.bury else "")
    )
    if args.save:
        Path(args.save).write_text(json.dumps(got, indent=1, sort_keys=True))
    if args.diff:
        before = json.loads(Path(args.diff).read_text())
        labels = {cid: str(lab["cause"]) for cid, _, lab in cases}
        for cid in sorted(got):
            old = before.get(cid, {}).get("cause")
            new = got[cid]["cause"]
            if old != new:
                mark = (
                    "FIXED" if new == labels[cid] else "BROKE" if old == labels[cid] else "CHANGED"
                )
                print(f"{mark} {cid}: {old} -> {new} (label {labels[cid]})")


if __name__ == "__main__":
    main()
