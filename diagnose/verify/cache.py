"""The verifier's result cache and compile budget, shared by the CUTLASS and Triton compile levels.

A compile-level result depends only on what built it (spec, headers or Triton
version, compiler), so it is kept as a small JSON file under a hash of those
inputs and a second run answers at once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["COMPILE_TIMEOUT", "cache_dir", "cache_load", "cache_store"]

COMPILE_TIMEOUT = 180.0  # the budget for one cold compile on 2 cores


def cache_dir() -> Path:
    """``$CRASHKB_CACHE_DIR/verify``, else ``$XDG_CACHE_HOME/crashkb/verify`` (~/.cache)."""
    own = os.environ.get("CRASHKB_CACHE_DIR")
    if own:
        return Path(own) / "verify"
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "crashkb" / "verify"


def cache_load(path: Path) -> dict[str, object] | None:
    """A cached JSON result: the object stored at ``path``, ``None`` when absent or unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def cache_store(path: Path, data: Mapping[str, object]) -> None:
    """Keep a JSON result at ``path``; a read-only home only costs the cache."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
    except OSError:
        pass
