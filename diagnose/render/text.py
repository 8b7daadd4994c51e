"""Terminal text renderer (rich styling on a colour TTY, plain text otherwise)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from diagnose.render.common import (
    TIER_WORDS,
    evidence,
    facts_line,
    headline,
    ranks_note,
    region_for,
    top_frames,
    verification_lines,
)

if TYPE_CHECKING:
    from diagnose.report import Diagnosis


def render_text(d: Diagnosis, *, color: bool = False, verbose: bool = False) -> str:
    """Return the human-readable report; ``color`` adds rich markup for a terminal."""
    out: list[str] = []

    def head(title: str) -> None:
        out.append("")
        out.append(f"[bold]{title}[/bold]" if color else title)

    first = headline(d)
    out.append(
        f"[bold red]{_esc(first, color)}[/bold red]" if color and d.fatal else _esc(first, color)
    )
    if d.summary:
        out.append(_esc(d.summary, color))
    # What the reader found about the input itself (a cut archive, binary data) is always shown.
    out.extend(_esc(n, color) for n in d.notes if n.startswith("The input: "))
    if d.server_ready and d.known and not d.fatal:
        out.append("The server reported ready: the failures were skipped, not fatal.")
    primary = d.primary
    if primary is not None:
        out.append(
            _esc(f"rule {primary.rule_id}; {TIER_WORDS.get(primary.tier, primary.tier)}", color)
        )
        facts = facts_line(primary)
        if facts:
            head("Facts")
            out.append("  " + _esc(facts, color))
        head("Evidence")
        for ev in evidence(primary):
            out.append(_esc(f"  {d.source}:{ev.line}: {ev.text.strip()[:200]}", color))
    region = region_for(d, primary)
    if region is None and not d.known and d.crashes:
        region = d.crashes[0]
    if region is not None:
        frames = top_frames(region)
        if frames:
            head("Top frames")
            out.extend(_esc(f"  {f}", color) for f in frames)
        note = ranks_note(region)
        if note:
            out.append(_esc(f"  ({note})", color))
    if d.verification is not None:
        head("Verification")
        out.extend(_esc(f"  {line}", color) for line in verification_lines(d.verification))
    if d.cascade:
        head("Consequences, not causes")
        out.extend(_esc(f"  {rule_id}", color) for rule_id in d.cascade)
    if d.fixes:
        head("What to change")
        for i, fix in enumerate(d.fixes, 1):
            out.append(_esc(f"  {i}. {fix.title}", color))
            for extra in (*fix.flags, *fix.env, *fix.config):
                out.append(_esc(f"       {extra}", color))
    for note in d.version_notes:
        out.append(_esc(f"  note: {note}", color))
    if d.similar:
        head("Similar known cases")
        out.extend(_esc(f"  {s.reference} ({s.score:.2f}): {s.title}", color) for s in d.similar)
    if d.next_steps:
        head("To decide" if d.known else "Evidence that would decide it")
        out.extend(_esc(f"  - {s}", color) for s in d.next_steps)
    if verbose:
        _verbose(d, out, color)
    out.append("")
    out.append(_esc(f"{_regions_phrase(d)} in {d.total_lines} lines; kb {d.kb_version}", color))
    return "\n".join(out)


def _verbose(d: Diagnosis, out: list[str], color: bool) -> None:
    """Append every crash region and every finding (``--verbose``)."""
    out.append("")
    out.append("All crash regions:")
    for i, region in enumerate(d.crashes):
        note = ranks_note(region)
        out.append(
            _esc(
                f"  [{i}] {region.kind} lines {region.lines[0]}-{region.lines[1]}: "
                f"{region.message[:160]}{'  (' + note + ')' if note else ''}",
                color,
            )
        )
    if d.findings:
        out.append("All findings:")
        for f in d.findings:
            out.append(_esc(f"  {f.confidence:.2f} {f.rule_id} on region {f.region_index}", color))
    out.extend(_esc(f"note: {n}", color) for n in d.notes)


def _regions_phrase(d: Diagnosis) -> str:
    """How many error regions the log held, not calling a survived warning a crash."""
    n = len(d.crashes)
    noun = "error region" if n == 1 else "error regions"
    if not n:
        return "no error regions"
    return f"{n} {noun}" + ("" if d.fatal else ", none fatal")


def _esc(text: str, color: bool) -> str:
    """Escape rich markup in log text when colour rendering is on."""
    if not color:
        return text
    return text.replace("[", r"\[")
