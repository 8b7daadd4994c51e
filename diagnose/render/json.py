"""JSON renderers: one object per log (``json``) or one object per crash line (``jsonl``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from diagnose.report import Diagnosis


def render_json(diagnosis: Diagnosis) -> str:
    """Return the whole diagnosis as one pretty-printed JSON object."""
    return json.dumps(diagnosis.to_dict(), indent=2, ensure_ascii=False)


def render_jsonl(diagnosis: Diagnosis) -> str:
    """Return one compact JSON object for the diagnosis (for log shippers): one alert per failure.

    A failure prints several regions (a watchdog's exception, the ``terminate`` it causes,
    Python's fatal-error dump); they are one failure, so one record: the verdict fields, the
    region the verdict rests on (``crash`` and ``crash_index``; the first one when no rule
    matched), ``crash_count`` and every finding.  A log without crash regions still yields
    one record, so a pipeline always sees one.
    """
    whole = diagnosis.to_dict()
    base: dict[str, Any] = {
        k: whole[k]
        for k in (
            "schema_version",
            "source",
            "cause",
            "fatal",
            "confidence",
            "tier",
            "title",
            "kb_version",
        )
    }
    findings = [f.to_dict() for f in diagnosis.findings]
    if not diagnosis.crashes:
        return json.dumps({**base, "crash": None, "crash_count": 0, "findings": findings},
                          ensure_ascii=False)  # fmt: skip
    primary = diagnosis.primary
    index = primary.region_index if primary is not None else None
    if index is None or not 0 <= index < len(diagnosis.crashes):
        index = 0
    record = {
        **base,
        "crash_index": index,
        "crash": diagnosis.crashes[index].to_dict(),
        "crash_count": len(diagnosis.crashes),
        "findings": findings,
    }
    return json.dumps(record, ensure_ascii=False)
