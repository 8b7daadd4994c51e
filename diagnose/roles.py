"""Give every frame a role (machinery, kernel, runtime, app) before any rule looks at it.

Error-reporting and dispatch code (``throwRuntimeError``, ``c10::Error``, Python's call
plumbing) sits at the top of most traces but is never what failed; the kernel
instantiation below it usually is.  The globs are data (``kb/frame-roles.toml``);
a frame whose name carries kernel vocabulary (arch tag, dtypes, tile) is a kernel
frame whatever it is called.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from diagnose.datafiles import data_dir
from diagnose.model import Frame, Region
from diagnose.tomlsource import load_toml

if TYPE_CHECKING:
    from diagnose.globs import Glob

ROLES = ("machinery", "kernel", "runtime", "app")
#: Order in which frames are offered as the culprit: kernels first, machinery never first.
CULPRIT_ORDER = {"kernel": 0, "app": 1, "runtime": 2, "machinery": 3, "": 2}


_Table = tuple[tuple[str, tuple["Glob", ...], tuple["Glob", ...]], ...]


@lru_cache(maxsize=1)
def _table() -> _Table:
    """``(role, function globs, module globs)`` in file order, globs compiled once (snapshotted)."""
    from diagnose.snapshot import memo

    path = data_dir("kb") / "frame-roles.toml"
    return memo("roles", (path, Path(__file__)), lambda: _read_table(path))


def _read_table(path: Path) -> _Table:
    """Parse and validate the roles file."""
    from diagnose.globs import Glob

    src = load_toml(path)
    entries = src.data.get("roles")
    if not isinstance(entries, list):
        raise src.error("roles", "expected [[roles]] tables")
    out: list[tuple[str, tuple[Glob, ...], tuple[Glob, ...]]] = []
    for i, entry in enumerate(entries):
        role = entry.get("role") if isinstance(entry, dict) else None
        if role not in ROLES:
            raise src.error(f"roles[{i}].role", f"role must be one of {', '.join(ROLES)}")
        globs: list[tuple[Glob, ...]] = []
        for key in ("functions", "modules"):
            raw = entry.get(key, [])
            if not isinstance(raw, list) or not all(isinstance(g, str) and g for g in raw):
                raise src.error(f"roles[{i}].{key}", "expected a list of non-empty globs")
            globs.append(tuple(Glob.compile(g) for g in raw))
        out.append((str(role), globs[0], globs[1]))
    return tuple(out)


@lru_cache(maxsize=4096)
def _role_of(function: str | None, module: str | None, has_kernel_facts: bool) -> str:
    """The role for one (function, module) pair; cached because frames repeat across ranks."""
    if has_kernel_facts:
        return "kernel"
    for role, functions, modules in _table():
        if function and any(g.matches(function) for g in functions):
            return role
        if not function and module and any(g.matches(module) for g in modules):
            return role
    return "app"


def frame_role(frame: Frame) -> str:
    """The role of one frame."""
    return _role_of(frame.function, frame.module, not frame.kernel.is_empty())


def with_roles(region: Region) -> Region:
    """The same region with every frame's ``role`` filled in."""
    if not region.frames or all(f.role for f in region.frames):
        return region
    frames = tuple(dataclasses.replace(f, role=f.role or frame_role(f)) for f in region.frames)
    return dataclasses.replace(region, frames=frames)


def assign(regions: Iterable[Region]) -> tuple[Region, ...]:
    """:func:`with_roles` over many regions."""
    return tuple(with_roles(r) for r in regions)


def culprit_first(frames: Sequence[Frame]) -> list[Frame]:
    """Frames ordered as culprit candidates: kernels, then app code, runtime, machinery last."""
    return sorted(frames, key=lambda f: CULPRIT_ORDER.get(f.role, 2))
