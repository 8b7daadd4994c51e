"""``diagnose-kb replay``: replay a folder, save the run, diff a later run against it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from diagnose.replay import Verdict, diff

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total "
    "capacity of 39.39 GiB of which 512.00 MiB is free.\n"
)
HEALTHY = "[2026-01-01 00:00:00] INFO: the server is fired up and ready to roll!\n"


def _kb(*args: str) -> subprocess.CompletedProcess[str]:
    code = "from diagnose.kbcli import app; app(prog_name='diagnose-kb')"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120
    )


def _case(folder: Path, name: str, text: str, label: str) -> None:
    (folder / f"{name}.log").write_text(text)
    (folder / f"{name}.toml").write_text(f'cause = "{label}"\n')


def test_replay_saves_and_diffs(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    _case(cases, "oom", OOM, "cuda-oom")
    _case(cases, "healthy", HEALTHY, "unknown")
    saved = tmp_path / "run.json"
    first = _kb("replay", str(cases), "--save", str(saved))
    assert first.returncode == 0, first.stderr
    assert "2/2 labelled cases right" in first.stdout
    run = json.loads(saved.read_text())
    assert run["oom"]["cause"] == "cuda-oom" and run["healthy"]["cause"] == "unknown"

    # Pretend the saved run had the OOM case wrong: replaying now shows it FIXED.
    run["oom"]["cause"] = "unknown"
    saved.write_text(json.dumps(run))
    second = _kb("replay", str(cases), "--against", str(saved))
    assert second.returncode == 0
    assert "FIXED   oom: unknown -> cuda-oom" in second.stdout


def test_a_broken_case_fails_the_replay(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    _case(cases, "oom", OOM, "kv-cache-oom")  # label says something else
    saved = tmp_path / "run.json"
    saved.write_text(
        json.dumps(
            {"oom": {"cause": "kv-cache-oom", "fatal": True, "rule": None, "label": "kv-cache-oom"}}
        )
    )
    proc = _kb("replay", str(cases), "--against", str(saved))
    assert proc.returncode == 1
    assert "BROKE" in proc.stdout


def test_diff_classifies_changes() -> None:
    before = {
        "a": Verdict("x", True, None, "y"),
        "b": Verdict("y", True, None, "y"),
        "c": Verdict("x", True, None, "z"),
    }
    after = {
        "a": Verdict("y", True, None, "y"),
        "b": Verdict("x", True, None, "y"),
        "c": Verdict("w", True, None, "z"),
        "d": Verdict("x", True, None, None),
    }
    kinds = {c.case: c.kind for c in diff(before, after)}
    assert kinds == {"a": "FIXED", "b": "BROKE", "c": "CHANGED", "d": "NEW"}
