"""Which software layers a log shows, so fixes for the crash's own stack come first.

The markers are data (``kb/stacks.toml``); a kb fix names the layers it applies to
(``applies_to``).  Fixes are ordered by how many of their layers appear in the
crash region itself, then in the whole log; a fix for layers the log never shows
is dropped when some other fix does apply (a CUTLASS MoE crash gets no Triton
advice first).  A fix without ``applies_to`` is generic and always kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

from diagnose.datafiles import data_dir
from diagnose.tomlsource import load_toml

T = TypeVar("T")


@lru_cache(maxsize=1)
def markers() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``(stack id, lower-cased markers)`` pairs from ``kb/stacks.toml`` (snapshotted)."""
    from diagnose.snapshot import memo

    path = data_dir("kb") / "stacks.toml"
    return memo("stacks", (path, Path(__file__)), lambda: _read_markers(path))


def _read_markers(path: Path) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Parse and validate the markers file."""
    src = load_toml(path)
    table = src.data.get("stacks")
    if not isinstance(table, dict):
        raise src.error("stacks", "expected a [stacks.<id>] table per software layer")
    out = []
    for stack_id, spec in table.items():
        found = spec.get("markers") if isinstance(spec, dict) else None
        if not isinstance(found, list) or not all(isinstance(m, str) and m for m in found):
            raise src.error(f"stacks.{stack_id}.markers", "expected a list of non-empty strings")
        out.append((stack_id, tuple(m.lower() for m in found)))
    return tuple(out)


def known_stacks() -> frozenset[str]:
    """Every stack id the markers file declares."""
    return frozenset(stack for stack, _ in markers())


def detect(texts: Iterable[str]) -> frozenset[str]:
    """The stack ids whose markers occur in ``texts`` (case-insensitive)."""
    blob = "\n".join(texts).lower()
    return frozenset(stack for stack, ms in markers() if any(m in blob for m in ms))


def order_fixes(
    fixes: Sequence[T],
    applies: Sequence[tuple[str, ...]],
    region: frozenset[str],
    log: frozenset[str],
) -> list[T]:
    """Order ``fixes`` (with their ``applies_to``) by fit to the region's, then the log's stack."""
    scored = []
    for i, (fix, layers) in enumerate(zip(fixes, applies, strict=True)):
        if not layers:
            scored.append(((0, 0, i), fix, True))
            continue
        near = len(region.intersection(layers))
        far = len(log.intersection(layers))
        scored.append(((-near, -far, i), fix, near + far > 0))
    if any(hit for _, _, hit in scored):
        scored = [s for s in scored if s[2]]
    return [fix for _, fix, _ in sorted(scored, key=lambda s: s[0])]
