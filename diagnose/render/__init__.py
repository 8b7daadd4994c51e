"""Renderers: one module per output format, chosen through :class:`OutputFormat`."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, assert_never

if TYPE_CHECKING:
    from diagnose.report import Diagnosis


class OutputFormat(StrEnum):
    """The ``--format`` choices of the CLI."""

    text = "text"
    markdown = "markdown"
    json = "json"
    jsonl = "jsonl"


def render(
    diagnosis: Diagnosis, fmt: OutputFormat, *, color: bool = False, verbose: bool = False
) -> str:
    """Render ``diagnosis`` in ``fmt``; every format is wired here (a test loops over all)."""
    if fmt is OutputFormat.text:
        from diagnose.render.text import render_text

        return render_text(diagnosis, color=color, verbose=verbose)
    if fmt is OutputFormat.markdown:
        from diagnose.render.markdown import render_markdown

        return render_markdown(diagnosis)
    if fmt is OutputFormat.json:
        from diagnose.render.json import render_json

        return render_json(diagnosis)
    if fmt is OutputFormat.jsonl:
        from diagnose.render.json import render_jsonl

        return render_jsonl(diagnosis)
    assert_never(fmt)
