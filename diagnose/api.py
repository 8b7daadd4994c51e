"""The library entry points: diagnose a log held in memory or a file, optionally verified.

``diagnose_text`` and ``diagnose_file`` never print or exit; unreadable input
raises :class:`~diagnose.errors.InputError`, an invalid rule or kb file
:class:`~diagnose.errors.RuleFileError`.  Everything else, however odd the
bytes, gives a result.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from diagnose.engine import diagnose_parsed, rule_triggers, rule_wording
from diagnose.pipeline import parse_source, parse_text
from diagnose.report import Diagnosis


def diagnose_text(
    text: str,
    *,
    source: str = "<text>",
    rule_dirs: Sequence[Path] = (),
    verify: bool = False,
    verify_level: str = "model",
    binaries: str | os.PathLike[str] | None = None,
    arch: str | None = None,
) -> Diagnosis:
    """Diagnose a log held in memory; ``verify`` checks the primary finding (see verify),
    reading the CUDA binaries its frames name (or those under ``binaries``) for GPU ``arch``
    when the log does not say it."""
    wording = rule_wording(rule_dirs)
    d = diagnose_parsed(parse_text(text, source, wording), rule_dirs=rule_dirs)
    return _verified(d, verify, verify_level, binaries, arch)


def diagnose_file(
    path: str | os.PathLike[str] | BinaryIO,
    *,
    rule_dirs: Sequence[Path] = (),
    verify: bool = False,
    verify_level: str = "model",
    binaries: str | os.PathLike[str] | None = None,
    arch: str | None = None,
) -> Diagnosis:
    """Diagnose a log file (plain or compressed), ``-`` for stdin, or a binary stream
    (``verify``, ``binaries``, ``arch``: see :func:`diagnose_text`)."""
    # The scan triggers are only needed for a file big enough to be scanned in windows.
    parsed = parse_source(path, rule_wording(rule_dirs), lambda: rule_triggers(rule_dirs))
    return _verified(
        diagnose_parsed(parsed, rule_dirs=rule_dirs), verify, verify_level, binaries, arch
    )


def _verified(
    d: Diagnosis,
    verify: bool,
    level: str,
    binaries: str | os.PathLike[str] | None = None,
    arch: str | None = None,
) -> Diagnosis:
    """Attach :func:`diagnose.verify.verify`'s result when asked (it never raises for hardware)."""
    if not verify:
        return d
    from dataclasses import replace

    from diagnose.verify import verify as run_verify

    folder = Path(binaries) if binaries is not None else None
    v = run_verify(d, level, binaries=folder, arch=arch)
    notes = list(d.notes)
    tier, confidence = d.tier, d.confidence
    if v.status == "confirmed" and v.level == "run":
        # Reproduced on this GPU: the strongest tier there is.
        tier, confidence = "verified", max(confidence, 0.97)
    elif v.status == "confirmed":
        notes.append(f"The verifier confirmed this at level {v.level} (no GPU of that arch ran it)")
    elif v.status == "refuted":
        better = f"; it points at {v.better_cause}" if v.better_cause else ""
        notes.append(f"The verifier refuted this at level {v.level}{better}.")
        confidence = min(confidence, 0.5)
    return replace(d, verification=v, tier=tier, confidence=confidence, notes=tuple(notes))


__all__ = ["diagnose_file", "diagnose_parsed", "diagnose_text", "rule_triggers", "rule_wording"]
