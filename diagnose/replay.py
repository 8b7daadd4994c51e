"""Replay a folder of crash logs and diff the verdicts against a saved run.

A rule change changes output without changing code; this is how its effect is seen
before it lands: ``diagnose-kb replay cases/ --save before.json``, edit rules, then
``diagnose-kb replay cases/ --against before.json`` lists what was FIXED (now equals
the label), BROKE (was right, now wrong) or CHANGED.  Labels are optional: a
``<id>.toml`` beside ``<id>.log`` with ``cause = "..."`` (the corpus case format).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path

from diagnose.records import record


@record
class Verdict:
    """The part of a diagnosis a replay compares."""

    cause: str
    fatal: bool | None
    rule: str | None
    label: str | None = None

    def to_dict(self) -> dict[str, object]:
        """JSON form, as saved by ``--save``."""
        return {"cause": self.cause, "fatal": self.fatal, "rule": self.rule, "label": self.label}


@record
class Change:
    """One case whose cause differs between the saved run and this one."""

    case: str
    kind: str  # FIXED | BROKE | CHANGED | NEW | GONE
    before: str | None
    after: str | None
    label: str | None


def _label(log: Path) -> str | None:
    """The ``cause`` label in ``<id>.toml`` beside the log, if any."""
    meta = log.with_suffix(".toml")
    if not meta.is_file():
        return None
    try:
        value = tomllib.loads(meta.read_text(encoding="utf-8")).get("cause")
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return str(value) if value is not None else None


def replay(folder: Path, rule_dirs: tuple[Path, ...] = ()) -> Iterator[tuple[str, Verdict]]:
    """Diagnose every ``*.log`` (and ``*.log.gz``) under ``folder``, in name order."""
    from diagnose.api import diagnose_file

    for log in sorted([*folder.glob("*.log"), *folder.glob("*.log.gz")]):
        d = diagnose_file(log, rule_dirs=rule_dirs)
        case = log.name.removesuffix(".gz").removesuffix(".log")
        yield case, Verdict(d.cause, d.fatal, d.primary.rule_id if d.primary else None, _label(log))


def load_run(path: Path) -> dict[str, Verdict]:
    """Read a run saved by :func:`save_run`."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    return {
        case: Verdict(str(v.get("cause")), v.get("fatal"), v.get("rule"), v.get("label"))
        for case, v in raw.items()
    }


def save_run(path: Path, run: Mapping[str, Verdict]) -> None:
    """Write a run as JSON (sorted, stable diffs)."""
    data = {case: v.to_dict() for case, v in run.items()}
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def diff(before: Mapping[str, Verdict], after: Mapping[str, Verdict]) -> list[Change]:
    """Every case whose cause changed, classified against its label."""
    out: list[Change] = []
    for case in sorted(set(before) | set(after)):
        old, new = before.get(case), after.get(case)
        if old is None or new is None:
            present = new if new is not None else old
            label = present.label if present is not None else None
            out.append(
                Change(
                    case,
                    "NEW" if old is None else "GONE",
                    old.cause if old is not None else None,
                    new.cause if new is not None else None,
                    label,
                )
            )
            continue
        if old.cause == new.cause:
            continue
        label = new.label or old.label
        kind = "FIXED" if new.cause == label else "BROKE" if old.cause == label else "CHANGED"
        out.append(Change(case, kind, old.cause, new.cause, label))
    return out


def accuracy(run: Mapping[str, Verdict]) -> tuple[int, int]:
    """(correct, labelled) over the cases that carry a label."""
    labelled = [v for v in run.values() if v.label is not None]
    return sum(v.cause == v.label for v in labelled), len(labelled)
