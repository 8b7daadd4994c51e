"""The wheel carries kb/ and rules/, and both an installed wheel and a checkout find them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_checkout_finds_data_folders() -> None:
    from diagnose.datafiles import data_dir

    assert (data_dir("kb") / "causes").is_dir()
    assert any(data_dir("rules").rglob("*.toml"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot build a wheel here: {proc.stderr.strip()[-300:]}")
    return next(out.glob("crashkb-*.whl"))


@pytest.mark.slow
def test_wheel_contains_kb_and_rules(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "diagnose/_data/kb/gpus.toml" in names
    assert any(n.startswith("diagnose/_data/kb/causes/") for n in names)
    assert any(n.startswith("diagnose/_data/rules/") and n.endswith(".toml") for n in names)
    assert "diagnose/py.typed" in names
    assert any(n.startswith("diagnose/examples/") for n in names)


@pytest.mark.slow
def test_installed_wheel_diagnoses_from_its_own_data(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        timeout=300,
    )
    # Run from an empty directory with the installed copy first on the path, so the
    # checkout's kb/ and rules/ cannot be what is found.
    code = (
        "import json, diagnose, diagnose.datafiles as d;"
        "from diagnose import diagnose_file;"
        "import importlib.resources as r;"
        "ex = r.files('diagnose') / 'examples' / 'sm120-ep8-smem.log';"
        "res = diagnose_file(str(ex));"
        "print(json.dumps({'kb': str(d.data_dir('kb')), 'rules': str(d.data_dir('rules')),"
        " 'file': diagnose.__file__, 'crashes': len(res.crashes)}))"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["file"].startswith(str(target))
    assert info["kb"].startswith(str(target)) and info["kb"].endswith("_data/kb")
    assert info["rules"].startswith(str(target)) and info["rules"].endswith("_data/rules")
    assert info["crashes"] >= 1
