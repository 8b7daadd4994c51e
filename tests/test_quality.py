"""ruff and mypy --strict stay clean on the package (the lint half of the test command)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    """Path of a tool installed beside this interpreter (the venv), else on PATH."""
    here = Path(sys.executable).with_name(name)
    found = str(here) if here.exists() else shutil.which(name)
    if not found:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]')")
    return found


def test_ruff_clean() -> None:
    proc = subprocess.run(
        [_tool("ruff"), "check", "--quiet", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict_clean() -> None:
    proc = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
