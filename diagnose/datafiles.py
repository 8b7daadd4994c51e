"""Locate the shipped data folders (``kb/`` and ``rules/``) from a wheel or a source checkout.

In a built wheel, hatch force-includes the top-level ``kb/`` and ``rules/`` into
``diagnose/_data/``; in a source checkout or an editable install they sit beside
the package.  The wheel copy wins so an installed tool never reads a stray
checkout in the current directory.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Return the directory of shipped data ``name`` (``"kb"`` or ``"rules"``).

    Raises ``FileNotFoundError`` naming both places looked at when neither exists.
    """
    installed = _PACKAGE_DIR / "_data" / name
    if installed.is_dir():
        return installed
    checkout = _PACKAGE_DIR.parent / name
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"data folder '{name}' not found in {installed} or {checkout}")
