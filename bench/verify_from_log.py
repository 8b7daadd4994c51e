"""Run the verifier's run level on real logs, on this machine's GPU, and record what it did.

    python bench/verify_from_log.py LOG [LOG ...] [--out results.json]

For each log: the diagnosis, the GEMM size the verifier read from the log (and from where),
then the run level's status, device and measurements.  A bench reports; it asserts nothing.
The logs themselves stay outside the repository (public threads, cited in the record).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from diagnose.api import diagnose_file
from diagnose.kb import load_kb
from diagnose.verify.spec import GemmSpec, build_spec


def main(argv: list[str]) -> None:
    """Diagnose and verify each log at level ``run``; print a table, save JSON."""
    out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else None
    logs = [a for i, a in enumerate(argv) if not a.startswith("--") and argv[i - 1] != "--out"]
    kb = load_kb()
    rows = []
    for log in logs:
        t0 = time.perf_counter()
        d = diagnose_file(log, verify=True, verify_level="run")
        spent = time.perf_counter() - t0
        spec = build_spec(d, kb)
        v = d.verification
        row = {
            "log": Path(log).name,
            "cause": d.primary.cause if d.primary else d.cause,
            "tier": d.tier,
            "arch": spec.arch if spec else None,
            "problem": list(spec.problem) if isinstance(spec, GemmSpec) and spec.problem else None,
            "problem_from": list(spec.problem_from) if isinstance(spec, GemmSpec) else [],
            "status": v.status if v else None,
            "level": v.level if v else None,
            "device": v.device if v else None,
            "measurements": dict(v.measurements) if v else {},
            "notes": list(v.notes) if v else [],
            "seconds": round(spent, 2),
        }
        rows.append(row)
        print(f"{row['log']}: {row['cause']} -> {row['status']} at {row['level']} "
              f"on {row['device']} ({spent:.1f} s); size {row['problem']}")  # fmt: skip
        for note in row["notes"]:
            print(f"    {note}")
    record = {"date": time.strftime("%Y-%m-%d"), "runs": rows}
    if out:
        out.write_text(json.dumps(record, indent=2, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
