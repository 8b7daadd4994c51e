"""``@record``: frozen, slotted dataclasses whose generated methods are compiled once.

Every result and knowledge object in crashkb is a frozen dataclass.  On CPython
3.10-3.12 the ``dataclass`` decorator writes each generated method
(``__init__``, ``__repr__``, ``__eq__``, ``__hash__`` and, for frozen classes,
``__setattr__`` / ``__delattr__``) as source text and compiles it with ``exec``,
on every start of every process: ~0.6 ms a class, ~35 ms of a ~130 ms CLI run
for the ~60 classes a diagnosis touches (measured with ``bench/cli_startup.py``;
3.13 batches one ``exec`` per class, python/cpython#109870, which helps but still
compiles every start).

``record`` is exactly ``dataclasses.dataclass(frozen=True, slots=True, ...)``,
except that while it runs, the ``exec`` that ``dataclasses`` looks up by name is
one that keeps the compiled code of each generated source text.  The code is
stored beside the package's own bytecode
(``diagnose/__pycache__/dataclass-methods-v1.<cache tag>.marshal``, or under
``PYTHONPYCACHEPREFIX``), so it has the same trust as the package's ``.pyc`` files:
only whoever can write those can change it, and ``PYTHONDONTWRITEBYTECODE`` is honoured.  The key is
the whole source text, so a hit runs exactly what compiling would have produced;
anything unexpected (an unreadable or foreign file, an unwritable directory, a
future ``dataclasses`` that compiles differently) falls back to plain compiling.
The classes are ordinary dataclasses: ``fields``, ``replace``, ``asdict`` and
``FrozenInstanceError`` behave as always.
"""

from __future__ import annotations

import dataclasses
import marshal
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import CodeType
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:  # only type checkers read the marker; no typing_extensions import (~3 ms) at run time

    def dataclass_transform(**_: object) -> Callable[[T], T]:
        return lambda f: f


__all__ = ["record", "save"]

T = TypeVar("T")

#: Bump when the file layout changes.
_FORMAT = 1
#: Entries kept in the file.  A checkout whose classes keep changing would otherwise keep
#: every old method text; past this, a save keeps only what its own process used.
MAX_ENTRIES = 2000
_lock = threading.Lock()
_active = 0  # decorations in progress (dataclasses.exec is ours while > 0)
_codes: dict[str, CodeType] | None = None
_used: set[str] = set()  # source texts this process executed
_added = False


def _file() -> Path | None:
    """Where the compiled methods live, or ``None`` when this interpreter has no bytecode tag.

    Beside the package's ``.pyc`` files, or under ``PYTHONPYCACHEPREFIX`` when that is set
    (as Python places bytecode for a read-only install).
    """
    tag: str | None = sys.implementation.cache_tag  # None where bytecode caching is off
    if tag is None:
        return None
    name = f"dataclass-methods-v{_FORMAT}.{tag}.marshal"
    package = Path(__file__).resolve().parent
    prefix: str | None = sys.pycache_prefix
    if prefix:
        return Path(prefix, *package.parts[1:], name)
    return package / "__pycache__" / name


def _load() -> dict[str, CodeType]:
    """The stored ``{source text: code}`` table (empty when absent or unreadable)."""
    path = _file()
    if path is None:
        return {}
    from diagnose.sealed import unseal

    try:
        payload = unseal(path.read_bytes())
        if payload is None:  # changed since written: compiled code is never run from it
            return {}
        table = marshal.loads(payload)
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if not isinstance(table, dict):
        return {}
    return {k: v for k, v in table.items() if isinstance(k, str) and isinstance(v, CodeType)}


def _exec(source: object, globals_: dict[str, Any] | None = None, locals_: Any = None) -> None:
    """``exec`` for ``dataclasses``: compile each distinct source text only once per install."""
    global _codes, _added
    if not isinstance(source, str):
        exec(source, globals_, locals_)  # type: ignore[arg-type]
        return
    if _codes is None:
        _codes = _load()
    _used.add(source)
    code = _codes.get(source)
    if code is None:
        code = compile(source, "<string>", "exec")  # the file name exec(str) would give
        _codes[source] = code
        if not _added:
            _added = True
            import atexit

            atexit.register(save)
    exec(code, globals_, locals_)


def save() -> None:
    """Write newly compiled methods (best effort; runs at exit once something new was compiled)."""
    global _added
    path = _file()
    if not _added or _codes is None or path is None or sys.dont_write_bytecode:
        return
    _added = False
    try:
        merged = {**_load(), **_codes}
        if len(merged) > MAX_ENTRIES:
            merged = {k: v for k, v in _codes.items() if k in _used}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        from diagnose.sealed import seal

        tmp.write_bytes(seal(marshal.dumps(merged)))
        os.replace(tmp, path)
    except (OSError, ValueError):
        pass  # a read-only install only costs speed


def _decorate(cls: type[T], options: dict[str, Any]) -> type[T]:
    """``dataclass(**options)(cls)`` with :func:`_exec` standing in for ``exec``."""
    global _active
    with _lock:
        _active += 1
        dataclasses.exec = _exec  # type: ignore[attr-defined]
    try:
        return dataclasses.dataclass(**options)(cls)
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                del dataclasses.exec  # type: ignore[attr-defined]


# PEP 681: on overloads, the transform marks the first one (mypy reads it there).
@overload
@dataclass_transform(frozen_default=True)
def record(cls: type[T], /) -> type[T]: ...
@overload
def record(
    *, frozen: bool = True, slots: bool = True, eq: bool = True, order: bool = False
) -> Callable[[type[T]], type[T]]: ...


def record(
    cls: type[T] | None = None,
    /,
    *,
    frozen: bool = True,
    slots: bool = True,
    eq: bool = True,
    order: bool = False,
) -> type[T] | Callable[[type[T]], type[T]]:
    """``@dataclass(frozen=True, slots=True)``, compiled once per install (see the module doc)."""
    options = {"frozen": frozen, "slots": slots, "eq": eq, "order": order}
    if cls is not None:
        return _decorate(cls, options)
    return lambda c: _decorate(c, options)
