"""Calibrate the nearest-known-case verdict (diagnose.nearest) on labelled folders.

For every labelled log with a crash region, the most informative error message is scored
against the case library (rule examples and kb references) the way ``diagnose.nearest``
does, leaving out the examples of the rule that explains the log (a case must not find its
own rule's examples: that would measure memory).  Logs are bucketed by score and by the
lead over the best other cause; each bucket says how often the nearest cause was the label.
The product's thresholds (MIN_SCORE, MIN_LEAD) are printed with the precision they reach on
each folder, and on the logs whose verdict was unknown (where the product uses it).

    python bench/nearest_calibration.py ../shared/corpus/dev ../shared/corpus/dev-v2 /tmp/r44
    python bench/nearest_calibration.py --out bench/results/nearest.md FOLDER...
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

SCORE_EDGES = (100, 95, 90, 80, 0)
LEAD_EDGES = (10, 5, 0)


def _bucket(value: float, edges: tuple[int, ...]) -> int:
    return next(e for e in edges if value >= e)


def score_folder(
    folder: Path, entries: tuple[tuple[str, str, str], ...]
) -> list[dict[str, object]]:
    """Score every case of ``folder``; one row per case with a crash region."""
    from accuracy import load_cases  # type: ignore[import-not-found]
    from rapidfuzz import fuzz, process

    from diagnose import diagnose_file
    from diagnose.engine import _informative
    from diagnose.kb import mask_signature
    from diagnose.nearest import _content_words

    rows: list[dict[str, object]] = []
    for case_id, path, labels in load_cases(folder):
        d = diagnose_file(path)
        if not d.crashes:
            continue
        message = mask_signature(max(d.crashes, key=_informative).message)
        own = f"{d.primary.rule_id}:" if d.primary else None
        pool = [e for e in entries if not (own and e[2].startswith(own))]
        found = process.extract(
            message, [e[0] for e in pool], scorer=fuzz.token_set_ratio, limit=25
        )
        if not found:
            continue
        _, best, index = found[0]
        cause = pool[index][1]
        floor = found[-1][1] if len(found) == 25 else 0.0
        other = max((s for _, s, i in found if pool[i][1] != cause), default=floor)
        rows.append(
            {
                "case": case_id,
                "label": labels["cause"],
                "nearest": cause,
                "score": best,
                "lead": best - other,
                "unknown_verdict": d.primary is None,
                "content": _content_words(message),
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, help="also write the tables to this Markdown file")
    args = parser.parse_args()

    from diagnose.nearest import MIN_CONTENT_WORDS, MIN_LEAD, MIN_SCORE, library

    entries = library()
    lines = [
        "# Nearest known case: calibration",
        "",
        f"Library: {len(entries)} entries (rule match examples and kb references). Each log is",
        "scored without the examples of the rule that explains it. Cells: right/total.",
        "",
    ]
    all_rows: dict[str, list[dict[str, object]]] = {}
    for folder in args.folders:
        all_rows[folder.name or str(folder)] = score_folder(folder, entries)
    lines += ["| folder | score | lead >= 10 | lead 5-9 | lead < 5 |", "|---|---|---|---|---|"]
    for name, rows in all_rows.items():
        cells: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])
        for r in rows:
            key = (_bucket(float(r["score"]), SCORE_EDGES), _bucket(float(r["lead"]), LEAD_EDGES))  # type: ignore[arg-type]
            cells[key][0] += r["nearest"] == r["label"]
            cells[key][1] += 1
        for s in SCORE_EDGES:
            row = [f"{cells[(s, lead)][0]}/{cells[(s, lead)][1]}" for lead in LEAD_EDGES]
            label = "100" if s == 100 else f">= {s}"
            lines.append(f"| {name} | {label} | " + " | ".join(row) + " |")
    lines += [
        "",
        f"At the product's thresholds (score >= {MIN_SCORE:.0f}, lead >= {MIN_LEAD:.0f}, "
        f">= {MIN_CONTENT_WORDS} words outside the generic-word concept):",
        "",
        "| folder | all logs | logs whose verdict was unknown |",
        "|---|---|---|",
    ]
    for name, rows in all_rows.items():
        taken = [
            r
            for r in rows
            if float(r["score"]) >= MIN_SCORE  # type: ignore[arg-type]
            and float(r["lead"]) >= MIN_LEAD  # type: ignore[arg-type]
            and int(r["content"]) >= MIN_CONTENT_WORDS  # type: ignore[call-overload]
        ]
        unknown = [r for r in taken if r["unknown_verdict"]]
        right = sum(r["nearest"] == r["label"] for r in taken)
        right_u = sum(r["nearest"] == r["label"] for r in unknown)
        lines.append(f"| {name} | {right}/{len(taken)} | {right_u}/{len(unknown)} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
