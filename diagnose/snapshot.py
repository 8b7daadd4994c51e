"""Keep the validated knowledge base and rule base on disk, so a warm CLI run skips validation.

Validating the shipped kb and rules (TOML parsing, per-field checks, error
locations, RE2 compilation, literal extraction for the prefilter) cost ~2.6 ms a
rule and grows with every rule authors add, while a small log takes a few ms
to diagnose.  After a successful load the frozen result is written as *plain
data* (``marshal``: tuples, strings, numbers; it cannot carry code to execute)
under a key made of every input's ``(path, size, mtime_ns)`` and of the code
that validates them.  A later run with the same key rebuilds the objects
directly from their field values.  RE2 patterns come back uncompiled
(:class:`~diagnose.lazyre.LazyRE2`): RE2 still costs ~0.1 ms a pattern, and the
shared literal prefilter means most rules never run on a given log.

Only successful loads are stored; a file that changes, appears or disappears
changes the key, so an edited rule is always validated again.  Any problem
reading or writing the cache only costs speed.
"""

from __future__ import annotations

import dataclasses
import functools
import marshal
import os
import sys
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from diagnose.lazyre import LazyRE2
from diagnose.sealed import seal, unseal
from diagnose.tomlsource import caching

__all__ = ["code_stamp", "decode", "encode", "load", "memo", "save", "storable", "tree_stamp"]

#: Bump when the encoding changes (the file name carries it).
FORMAT = 1
#: Snapshot files kept: the shipped kb and rules plus a few extra rule-dir combinations,
#: without growing when tests load hundreds of temporary rule sets.
MAX_ENTRIES = 12

_PACKAGE = Path(__file__).resolve().parent
#: Sources whose logic decides what a load produces (validation, schema, defaults,
#: region kinds, arch fact names): editing one invalidates every snapshot.
_CODE = (
    "kb.py",
    "concepts.py",
    "vocab.py",
    "model.py",
    "regions/__init__.py",
    "tomlsource.py",
    "datafiles.py",
    "globs.py",
    "literals.py",
    "rules/loader.py",
    "rules/locate.py",
    "rules/parse.py",
    "rules/prefilter.py",
    "rules/schema.py",
    "snapshot.py",
)

Key = tuple[Any, ...]
T = TypeVar("T")

_PREFIX = "snapshot-v"


class Unencodable(TypeError):
    """A value the snapshot format does not know (the load then simply is not cached)."""


# --------------------------------------------------------------------------- keys


def _stat(path: Path) -> tuple[int, int] | None:
    """``(size, mtime_ns)`` of ``path``, ``None`` when it cannot be read."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


@functools.lru_cache(maxsize=1)
def code_stamp() -> Key:
    """The package version and the stamps of the sources that shape a load.

    Taken once per process: what shapes a load is the code already imported, so a
    source edited while a server runs must not make its old code's output look new.
    """
    from diagnose import __version__

    return (__version__, *(_stat(_PACKAGE / rel) for rel in _CODE))


def tree_stamp(root: Path) -> Key:
    """``(root, ((relpath, size, mtime_ns), ...))`` for every ``*.toml`` under ``root``.

    Walked with ``os.scandir`` (whose entries carry their ``stat``): ``Path.rglob``
    plus a ``stat`` a file measured ~1.3 ms for the shipped rules on every run.
    Symlinked folders are followed, as ``rglob`` (which loads the rules) does.
    """
    resolved = root.resolve()
    if not resolved.is_dir():
        return (str(resolved), None)
    found: list[tuple[tuple[str, ...], int, int]] = []
    _walk(str(resolved), (), found)
    found.sort()
    return (str(resolved), tuple(("/".join(parts), size, mtime) for parts, size, mtime in found))


def _walk(folder: str, parts: tuple[str, ...], out: list[tuple[tuple[str, ...], int, int]]) -> None:
    """Append ``(parts, size, mtime_ns)`` of each ``*.toml`` file below ``folder``."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir():
                _walk(entry.path, (*parts, entry.name), out)
            elif entry.name.endswith(".toml"):
                st = entry.stat()
                out.append(((*parts, entry.name), st.st_size, st.st_mtime_ns))
        except OSError:
            continue  # vanished between listing and stat: the next run's key differs anyway


# --------------------------------------------------------------------------- codec


#: Classes a snapshot may hold, by qualified name.  The modules that define them
#: declare them with :func:`storable` when imported, so this low-level module never
#: imports the kb, vocabulary or rule schema (which sit above it and use :func:`memo`).
#: A snapshot naming a class not registered (its module not yet imported) fails to
#: decode and is simply rebuilt: that only costs speed.
_classes: dict[str, type] = {}
_RE2_TAG = "\x00re2"
_CONTAINERS = (list, tuple, dict)
_CONTAINER_TYPES = frozenset(_CONTAINERS)


def storable(*classes: type) -> None:
    """Allow instances of ``classes`` (frozen dataclasses) in snapshots."""
    for cls in classes:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls.__qualname__} is not a dataclass")
        _classes[cls.__qualname__] = cls


def _known() -> dict[str, type]:
    return _classes


def encode(value: Any) -> Any:
    """Turn a validated object into marshal-able plain data; :class:`Unencodable` otherwise.

    A registered dataclass becomes ``[name, field values...]`` and an RE2 pattern
    (:class:`~diagnose.lazyre.LazyRE2`) ``["\\0re2", pattern, options]``; lists mark
    these because the objects themselves only ever hold tuples.
    """
    if value is None or isinstance(value, (str, bool, int, float, bytes)):
        return value
    if isinstance(value, tuple):
        return tuple(encode(v) for v in value)
    if isinstance(value, frozenset):
        if all(v is None or isinstance(v, (str, int, float)) for v in value):
            return value
        raise Unencodable("a frozenset of non-scalars")
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise Unencodable("a dict with non-string keys")
        return {k: encode(v) for k, v in value.items()}
    cls = type(value)
    if dataclasses.is_dataclass(value) and _known().get(cls.__qualname__) is cls:
        return [
            cls.__qualname__,
            *(encode(getattr(value, f.name)) for f in dataclasses.fields(value)),
        ]
    if cls is LazyRE2:
        return [_RE2_TAG, value.pattern, value.option_values]
    raise Unencodable(f"cannot snapshot a {cls.__module__}.{cls.__qualname__}")


def decode(data: Any) -> Any:
    """Rebuild what :func:`encode` produced (RE2 patterns are compiled again).

    The hot loop of a warm start (~1,600 objects for the shipped rules and kb):
    scalars are passed through inline instead of through a call each, and
    ``type(v) in`` replaces ``isinstance`` (marshal only ever yields exact types),
    which measured 7.2 -> 4.4 ms for the shipped rules plus kb.
    """
    kind = type(data)
    if kind is tuple:
        # Most tuples hold only strings and numbers (ids, globs, example facts): reuse them.
        for v in data:
            if type(v) in _CONTAINER_TYPES:
                return tuple([decode(v) if type(v) in _CONTAINER_TYPES else v for v in data])
        return data
    if kind is list:
        tag = data[0]
        if tag == _RE2_TAG:
            return LazyRE2(data[1], data[2])  # compiled when a rule first uses it
        args = [decode(v) if type(v) in _CONTAINER_TYPES else v for v in data[1:]]
        return _known()[tag](*args)
    if kind is dict:
        return {k: decode(v) if type(v) in _CONTAINER_TYPES else v for k, v in data.items()}
    return data


# --------------------------------------------------------------------------- store


def _file(key: Key) -> Path:
    """The file holding ``key``'s snapshot, beside the TOML parse cache.

    One file per key, so a run reads only the kb and rule base it loads (a
    shared file grew to every rule set tests and wheels ever loaded).  The name
    carries a CRC of the key; the file stores the whole key, checked on load.
    """
    from diagnose.tomlsource import cache_dir

    py = f"{sys.version_info[0]}{sys.version_info[1]}"
    crc = zlib.crc32(repr(key).encode("utf-8", "surrogatepass"))
    return cache_dir() / f"{_PREFIX}{FORMAT}-py{py}-{key[0]}-{crc:08x}.marshal"


def load(key: Key) -> Any | None:
    """Return the object stored under ``key``, or ``None`` (absent, stale, unreadable)."""
    if not caching():
        return None
    try:
        payload = unseal(_file(key).read_bytes())
        if payload is None:
            return None  # changed on disk since it was written: rebuild, never trust
        stored = marshal.loads(payload)
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if not (isinstance(stored, tuple) and len(stored) == 2 and stored[0] == key):
        return None  # another key with the same CRC, or an older layout
    try:
        return decode(stored[1])
    except Exception:  # a damaged entry, or re2.error from another RE2 build: validate instead
        return None


def save(key: Key, value: Any) -> None:
    """Store ``value`` under ``key`` (best effort: atomic rename, silent on failure).

    Keeps the :data:`MAX_ENTRIES` most recently written snapshot files, so edited
    rules and temporary rule dirs never pile up.
    """
    if not caching():
        return
    try:
        data = seal(marshal.dumps((key, encode(value))))
    except (Unencodable, ValueError):
        return
    target = _file(key)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)
        # Oldest first; never the file just written (coarse mtimes can tie).
        olds = sorted(
            (p for p in target.parent.glob(f"{_PREFIX}*.marshal") if p != target),
            key=lambda p: p.stat().st_mtime_ns,
        )
        for old in olds[: max(0, len(olds) + 1 - MAX_ENTRIES)]:
            old.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only home, or a file another process removed first, only costs speed


def stamps(roots: Iterable[Path]) -> Key:
    """:func:`tree_stamp` of each root, in order."""
    return tuple(tree_stamp(r) for r in roots)


def memo(name: str, inputs: Sequence[Path], build: Callable[[], T]) -> T:
    """``build()``'s value, from the snapshot when no file in ``inputs`` (nor the code) changed.

    For the small tables read beside the kb (``kb/stacks.toml``, ``kb/frame-roles.toml``):
    they used to be parsed with ``tomllib`` on every run, after the TOML parse cache had
    already been written.  ``inputs`` should name the data file and the module that
    validates it; a ``build()`` that raises stores nothing.
    """
    key = (name, code_stamp(), tuple((str(p), _stat(p)) for p in inputs))
    cached = load(key)
    if cached is not None:
        return cast(T, cached)
    value = build()
    save(key, value)
    return value
