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
    """Return one compact JSON object per crash region (for log shippers), verdict fields on each.

    A log without crash regions still yields one line, so a pipeline always sees a record.
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
    if not diagnosis.crashes:
        return json.dumps({**base, "crash": None, "findings": []}, ensure_ascii=False)
    out = []
    for index, region in enumerate(diagnosis.crashes):
        findings = [f.to_dict() for f in diagnosis.findings if f.region_index == index]
        record = {**base, "crash_index": index, "crash": region.to_dict(), "findings": findings}
        out.append(json.dumps(record, ensure_ascii=False))
    return "\n".join(out)
