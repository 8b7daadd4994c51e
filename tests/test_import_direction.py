"""Import direction: the layering in pyproject's [tool.importlinter] holds, and covers every module.

Surfaces sit over the library API, the API over the streaming and whole-log engine,
the engine over the rules, the rules over the parser, the parser over the knowledge
base and the plain result model.  import-linter checks function-level imports too,
so a lazy ``import`` inside a function cannot hide an upward dependency.
"""

from __future__ import annotations

import pkgutil
import tomllib
from pathlib import Path

import pytest

import diagnose

pytest.importorskip("importlinter")

ROOT = Path(__file__).resolve().parents[1]


def _config() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        config = tomllib.load(f)["tool"]["importlinter"]
    assert isinstance(config, dict)
    return config


def test_contracts_hold(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from importlinter.cli import lint_imports

    monkeypatch.chdir(ROOT)
    code = lint_imports(no_cache=True, no_logo=True)
    out = capsys.readouterr().out
    assert code == 0, out


def test_every_module_has_a_layer() -> None:
    """A new top-level module must be placed in a layer, or the layering says nothing about it."""
    contract = next(c for c in _config()["contracts"] if c["id"] == "layers")  # type: ignore[attr-defined]
    placed = {name.strip() for layer in contract["layers"] for name in layer.split(":")}
    modules = {m.name for m in pkgutil.iter_modules(diagnose.__path__)}
    assert modules - placed == set(), "place these modules in a layer of [tool.importlinter]"
    assert placed - modules == set(), "these layers name modules that no longer exist"
