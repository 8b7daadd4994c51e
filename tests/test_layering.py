"""Architecture rules: only the command modules print, exit or import typer."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "diagnose"

#: Modules that are command-line shells (they may use typer, print and exit).
SHELLS = {
    "cli.py",
    "cli_plain.py",
    "kbcli.py",
    "__main__.py",
    "launch.py",
    "serve.py",
    "mcp_server.py",
}


def _library_modules() -> list[Path]:
    # ``*_child.py`` files are entry points of sandboxed subprocesses (the verifier's GPU
    # child): their stdout is their protocol, so they are shells too.
    return [
        p
        for p in PACKAGE.rglob("*.py")
        if p.name not in SHELLS and not p.name.endswith("_child.py")
    ]


def test_library_never_imports_typer() -> None:
    offenders = []
    for path in _library_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n == "typer" or n.startswith("typer.") for n in names):
                offenders.append(str(path.relative_to(PACKAGE)))
    assert offenders == []


def test_library_never_prints_or_exits() -> None:
    offenders = []
    for path in _library_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                fn = node.func
                name = (
                    fn.id
                    if isinstance(fn, ast.Name)
                    else (
                        f"{getattr(fn.value, 'id', '')}.{fn.attr}"
                        if isinstance(fn, ast.Attribute)
                        else ""
                    )
                )
                if name in {"print", "exit", "sys.exit", "os._exit", "quit"}:
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {name}")
    assert offenders == []
