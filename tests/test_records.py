"""``@record`` classes are plain frozen dataclasses, whether their methods were compiled or cached."""

from __future__ import annotations

import dataclasses
import marshal
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from diagnose import records
from diagnose.model import Frame
from diagnose.records import record
from diagnose.sealed import seal, unseal

ROOT = Path(__file__).resolve().parents[1]
_PACKAGE_FILE = records._file  # the real location, before the fixture points it elsewhere


@pytest.fixture(autouse=True)
def cache_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private compiled-methods file and fresh cache state, so no test class ever lands in
    the package's own file (``save`` runs at exit) and each test starts empty."""
    target = tmp_path / "__pycache__" / "methods.marshal"
    monkeypatch.setattr(records, "_file", lambda: target)
    monkeypatch.setattr(records, "_codes", None)
    monkeypatch.setattr(records, "_used", set())
    monkeypatch.setattr(records, "_added", False)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    return target


def _declare() -> tuple[type, type]:
    """The same shapes declared with ``@record`` and with ``@dataclass``."""

    @record
    class Tile:
        m: int
        n: int
        k: int = 64
        tags: tuple[str, ...] = dataclasses.field(default=(), compare=False)

    @dataclasses.dataclass(frozen=True, slots=True)
    class PlainTile:
        m: int
        n: int
        k: int = 64
        tags: tuple[str, ...] = dataclasses.field(default=(), compare=False)

    return Tile, PlainTile


def test_record_behaves_like_a_frozen_slotted_dataclass() -> None:
    tile_cls, plain_cls = _declare()
    a, b = tile_cls(128, 256, tags=("x",)), plain_cls(128, 256, tags=("x",))
    assert dataclasses.is_dataclass(a)
    assert [f.name for f in dataclasses.fields(a)] == [f.name for f in dataclasses.fields(b)]
    assert repr(a).split("(", 1)[1] == repr(b).split("(", 1)[1]
    assert a == tile_cls(128, 256) and hash(a) == hash(tile_cls(128, 256))  # tags: compare=False
    assert not hasattr(a, "__dict__") and tile_cls.__slots__ == plain_cls.__slots__
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.m = 1  # type: ignore[misc]
    assert dataclasses.replace(a, k=32).k == 32
    assert dataclasses.asdict(a) == dataclasses.asdict(b)


def test_options_pass_through() -> None:
    @record(order=True)
    class Version:
        major: int
        minor: int

    @record(frozen=False)
    class Counter:
        hits: int = 0

    assert Version(1, 2) < Version(1, 10)
    c = Counter()
    c.hits += 1
    assert c.hits == 1
    assert dataclasses.fields(Counter)[0].name == "hits"


def test_exec_shim_is_removed_after_decorating() -> None:
    _declare()
    assert "exec" not in vars(dataclasses)


def test_second_declaration_runs_the_cached_code(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[str] = []
    real_compile = compile

    def counting_compile(source: str, *args: object, **kwargs: object) -> object:
        compiled.append(source)
        return real_compile(source, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(records, "compile", counting_compile, raising=False)
    first, _ = _declare()
    n = len(compiled)
    second, _ = _declare()
    assert len(compiled) == n  # every method source was already compiled
    assert second(1, 2) == second(1, 2) and second is not first


def test_cache_round_trip_and_damaged_file(
    cache_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = cache_file

    @record
    class Fresh:
        some_unusual_field_name_for_this_test: int

    records.save()
    stored = marshal.loads(unseal(target.read_bytes()) or b"")
    assert any("some_unusual_field_name_for_this_test" in k for k in stored)
    target.write_bytes(b"\x00 not marshal")
    assert records._load() == {}
    monkeypatch.setattr(records, "_codes", None)

    @record
    class Again:
        some_unusual_field_name_for_this_test: int

    assert Again(3).some_unusual_field_name_for_this_test == 3


def test_dont_write_bytecode_is_honoured(cache_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records, "_added", True)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    records.save()
    assert not cache_file.exists()


def test_public_results_still_pickle_and_compare() -> None:
    frame = Frame(log_line=1, dialect="trtllm", index=1, function="f")
    assert pickle.loads(pickle.dumps(frame)) == frame


def test_fresh_interpreter_builds_identical_objects_from_the_cache() -> None:
    # The first run may compile and store; the second must compile nothing and agree.
    probe = (
        "import json\n"
        "from diagnose import diagnose_text, records\n"
        "d = diagnose_text('RuntimeError: CUDA error: out of memory\\n')\n"
        "print(json.dumps(d.to_dict(), sort_keys=True))\n"
        "print('compiled-new', records._added)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    outs = [
        subprocess.run(
            [sys.executable, "-c", probe],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout.splitlines()
        for _ in range(2)
    ]
    assert outs[0][0] == outs[1][0] and outs[0][0].startswith("{")
    assert outs[1][1] == "compiled-new False"


def test_pycache_prefix_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "prefix"))
    path = _PACKAGE_FILE()
    assert path is not None and path.is_relative_to(tmp_path / "prefix")
    assert path.parent.name == Path(records.__file__).resolve().parent.name


def test_file_keeps_only_used_methods_past_the_cap(
    cache_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = cache_file
    stale = compile("pass", "<string>", "exec")
    target.parent.mkdir(parents=True)
    target.write_bytes(seal(marshal.dumps({f"# stale {i}\n": stale for i in range(5)})))
    monkeypatch.setattr(records, "MAX_ENTRIES", 3)

    @record
    class Kept:
        a_field_only_this_test_uses: int

    records.save()
    stored = marshal.loads(unseal(target.read_bytes()) or b"")
    assert stored and not any(k.startswith("# stale") for k in stored)
    assert all(k in records._used for k in stored)
