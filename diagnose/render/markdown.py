"""Markdown renderer for chat (Slack, Discord, GitHub): short, evidence fenced, size-capped."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from diagnose.render.common import (
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

#: The chat default (GitHub comments take far more; Slack truncates long messages). Discord
#: caps ordinary messages at 2,000 characters: pass max_chars=2000 there (serve does).
MAX_CHARS = 3500


def render_markdown(d: Diagnosis, max_chars: int = MAX_CHARS, flavor: str = "github") -> str:
    """Return a chat-ready Markdown report of at most ``max_chars`` characters.

    ``flavor="slack"`` writes Slack's mrkdwn (``*bold*``, ``_italic_``): Slack shows
    standard ``**bold**`` literally.  GitHub and Discord share the standard spelling.
    """
    text = _render(d, max_chars)
    return _to_slack(text) if flavor == "slack" else text


_BOLD = re.compile(r"\*\*(.+?)\*\*")


def _to_slack(text: str) -> str:
    """Rewrite ``**bold**`` as Slack's ``*bold*`` outside code fences (length only shrinks)."""
    parts = text.split("```")
    for i in range(0, len(parts), 2):  # even pieces are outside fences
        parts[i] = _BOLD.sub(r"*\1*", parts[i])
    return "```".join(parts)


def _render(d: Diagnosis, max_chars: int) -> str:
    """The standard-Markdown report, size-capped."""
    parts: list[str] = [f"**{headline(d)}**"]
    if d.summary:
        parts.append(d.summary)
    primary = d.primary
    if primary is not None:
        facts = facts_line(primary)
        if facts:
            parts.append(f"Facts: `{facts}`")
        lines = [f"{ev.line}: {ev.text.strip()[:160]}" for ev in evidence(primary)]
        if lines:
            parts.append("Evidence:\n" + _fence("\n".join(lines)))
    region = region_for(d, primary) or (d.crashes[0] if d.crashes and not d.known else None)
    if region is not None:
        frames = top_frames(region)
        if frames:
            parts.append("Top frames:\n" + _fence("\n".join(frames)))
        note = ranks_note(region)
        if note:
            parts.append(f"_{note}_")
    if d.verification is not None:
        lines = verification_lines(d.verification)
        parts.append(f"**Verification: {lines[0]}**\n" + _fence("\n".join(lines[1:])))
    if d.fixes:
        parts.append(
            "**What to change**\n"
            + "\n".join(
                f"{i}. {fix.title}"
                + "".join(f" `{x}`" for x in (*fix.flags, *fix.env, *fix.config)[:3])
                for i, fix in enumerate(d.fixes[:4], 1)
            )
        )
    if d.version_notes:
        parts.append("\n".join(f"- {n}" for n in d.version_notes))
    if d.similar:
        parts.append("Similar: " + ", ".join(f"{s.reference} ({s.score:.2f})" for s in d.similar))
    if d.next_steps:
        parts.append("**To decide**\n" + "\n".join(f"- {s}" for s in d.next_steps[:4]))
    footer = f"_rule {primary.rule_id if primary else '-'} · kb {d.kb_version}_"
    return _fit(parts, footer, max_chars)


def _fence(text: str) -> str:
    """Fence ``text`` so chat clients show it verbatim (backticks inside cannot close it)."""
    return "```\n" + text.replace("```", "'''") + "\n```"


def _fit(parts: list[str], footer: str, max_chars: int) -> str:
    """Join parts, dropping the least important tail parts until the result fits."""
    kept = list(parts)
    while kept:
        text = "\n\n".join([*kept, footer])
        if len(text) <= max_chars:
            return text
        if len(kept) == 1:
            return text[: max_chars - 1] + "…"
        kept.pop()
    return footer[:max_chars]
