"""Pieces every human-readable renderer shows the same way: headline, facts, evidence."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from diagnose.model import Evidence, FactValue, Finding, Region
    from diagnose.report import Diagnosis
    from diagnose.verify.result import Verification

#: What each confidence tier means, weakest first.
TIER_WORDS = {
    "pattern": "the log text matches a known pattern",
    "hardware": "the numbers in the log agree with the hardware limits",
    "verified": "reproduced on a GPU",
}
#: Below "pattern": no rule matched; the error resembles a known case (diagnose.nearest).
LIKELY_TIER = "likely"

MAX_EVIDENCE_LINES = 8
MAX_FRAMES = 6


def headline(d: Diagnosis) -> str:
    """One line: the cause, how sure, fatal or not."""
    if not d.crashes and not d.findings:
        return "No crash found in this log."
    if not d.known and d.fatal is False:
        return (
            "No fatal crash: no rule matches these errors, and each was logged as a warning, "
            "came before the server reported ready, or was followed by the program carrying on."
        )
    if not d.known:
        return "Unknown cause: no rule in the knowledge base matches this crash."
    state = "fatal" if d.fatal else "not fatal"
    if d.likely is not None:
        return f"{d.title} [{d.cause}, likely] ({state}; confidence {d.confidence:.2f})"
    tier = f", {d.tier} tier" if d.tier else ""
    return f"{d.title} [{d.cause}] ({state}; confidence {d.confidence:.2f}{tier})"


def format_fact(value: FactValue) -> str:
    """Render one fact value (tuples as ``128x256x64``, byte counts with KiB)."""
    if isinstance(value, tuple):
        sep = "x" if all(isinstance(v, int) for v in value) else ","
        return sep.join(str(v) for v in value)
    return str(value)


def facts_line(finding: Finding) -> str:
    """``arch=sm_120 tile=128x256x128 ...`` for the finding's extracted facts."""
    return "  ".join(f"{k}={format_fact(v)}" for k, v in finding.facts)


def evidence(finding: Finding) -> list[Evidence]:
    """The finding's evidence lines, de-duplicated by line number, in file order, capped."""
    seen: dict[int, Evidence] = {}
    for ev in finding.evidence:
        seen.setdefault(ev.line, ev)
    return [seen[n] for n in sorted(seen)][:MAX_EVIDENCE_LINES]


def region_for(d: Diagnosis, finding: Finding | None) -> Region | None:
    """The crash region a finding was made on, if any."""
    if finding is None or finding.region_index is None:
        return None
    if 0 <= finding.region_index < len(d.crashes):
        return d.crashes[finding.region_index]
    return None


def top_frames(region: Region) -> list[str]:
    """The first few frames worth reading, as one-line strings.

    Error-reporting machinery (``throwRuntimeError``, ``c10::Error``) is left out when
    other frames exist; the innermost kernel frame is marked as the likely culprit.  A
    native backtrace lists the innermost frame first; a Python traceback lists it last
    ("most recent call last"), so there the last frames are the ones shown.
    """
    frames = [f for f in region.frames if f.role != "machinery"] or list(region.frames)
    if frames and all(f.dialect == "python" for f in frames):
        shown = frames[-MAX_FRAMES:]
        culprit = next((f for f in reversed(frames) if f.role == "kernel"), None)
    else:
        shown = frames[:MAX_FRAMES]
        culprit = next((f for f in frames if f.role == "kernel"), None)
    out = []
    for frame in shown:
        name = frame.function or frame.symbol or frame.module or "??"
        where = f" ({frame.file}:{frame.line})" if frame.file and frame.line else ""
        cut = " [cut]" if frame.truncated else ""
        mark = "  <- likely culprit" if frame is culprit else ""
        out.append(f"{name}{where}{cut}{mark}")
    return out


def ranks_note(region: Region) -> str:
    """``printed by 8 ranks (0-7)`` style note, or an empty string."""
    if region.count <= 1:
        return ""
    ranks = f": {', '.join(region.ranks[:8])}" if region.ranks else ""
    more = "…" if len(region.ranks) > 8 else ""
    return f"seen {region.count}x{ranks}{more}"


def verification_lines(v: Verification) -> list[str]:
    """The verifier's block: verdict and level, the numbers, the notes, the tile table, the fix."""
    out = [f"{v.status.upper()} at level {v.level} (asked: {v.requested}; method: {v.method})"]
    spec = [
        f"arch={v.arch}" if v.arch else "",
        "tile=" + "x".join(map(str, v.tile)) if v.tile else "",
        "dtypes=" + ",".join(v.dtypes) if v.dtypes else "",
        f"smem_required={v.smem_required}" if v.smem_required is not None else "",
        f"smem_limit={v.smem_limit}" if v.smem_limit is not None else "",
        f"stages={v.stages}" if v.stages is not None else "",
    ]
    if any(spec):
        out.append("  ".join(s for s in spec if s))
    if v.toolchain or v.device:
        tools = ", ".join(f"{k} {val}" for k, val in v.toolchain)
        out.append(f"toolchain: {tools or '-'}; device: {v.device or 'none'}")
    out.extend(f"measured {k} = {val}" for k, val in v.measurements)
    out.extend(f"note: {n}" for n in v.notes)
    if v.tiles:
        out.append(
            "tiles for "
            + (v.arch or "?")
            + ": "
            + ", ".join(f"{t.name} {t.smem} B {'fits' if t.fits else 'OVER'}" for t in v.tiles)
        )
    for b in v.binaries:
        code = ", ".join((*b.sass, *b.ptx)) or "no device code"
        kernels = f"; {len(b.kernels)} kernels" if b.kernels else ""
        out.append(f"binary {b.path}: {code}{kernels}")
    if v.better_cause:
        out.append(f"better explanation: {v.better_cause}")
    if v.recommendation:
        out.append(f"recommendation: {v.recommendation}")
    if v.source_lines:
        out.append(f"installed source around {v.source_file}:{v.source_line}:")
        mark = v.source_line
        out.extend(f"{'>' if n == mark else ' '} {n:5d} | {text}" for n, text in v.source_lines)
    return out
