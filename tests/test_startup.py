"""Start-up hygiene: what importing and a warm CLI run load, the rule snapshot, lazy regexes.

The import checks run in fresh interpreters (``sys.modules`` of this test process
already holds everything).  Timing lives in ``bench/cli_startup.py``, never here.
"""

from __future__ import annotations

import dataclasses
import json
import marshal
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from diagnose import snapshot
from diagnose.datafiles import data_dir
from diagnose.kb import KnowledgeBase, _build, load_kb
from diagnose.lazyre import LazyPattern, LazyRE2, lazy
from diagnose.rules.loader import check_rules, load_rules
from diagnose.tomlsource import TomlSource

ROOT = Path(__file__).resolve().parents[1]
#: Never needed to import the package or to parse the CLI's arguments.
HEAVY = ("rich", "rapidfuzz", "re2", "typer", "tomllib", "tomli", "cxxfilt", "demangle", "ctypes")


def _modules_after(code: str, env: dict[str, str] | None = None) -> set[str]:
    """Top-level and dotted module names loaded by ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def _heavy(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in names)


def test_import_diagnose_loads_nothing_heavy() -> None:
    modules = _modules_after("import diagnose")
    assert _heavy(modules, HEAVY) == []
    assert sorted(m for m in modules if m.startswith("diagnose.")) == []


def test_cli_module_imports_no_rich_rapidfuzz_or_re2() -> None:
    modules = _modules_after("import diagnose.cli")
    assert _heavy(modules, ("rich", "rapidfuzz", "re2", "tomllib", "tomli")) == []
    # Nothing of the pipeline either: it is imported when a command actually runs.
    assert "diagnose.api" not in modules
    assert "diagnose.rules.engine" not in modules


def test_warm_run_skips_rule_validation(tmp_path: Path) -> None:
    log = tmp_path / "crash.log"
    log.write_text(
        "[2031-04-05 10:00:00 TP0] GPU 0: NVIDIA H100 80GB HBM3\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n",
        encoding="utf-8",
    )
    env = {**os.environ, "CRASHKB_CACHE_DIR": str(tmp_path / "cache")}
    run = f"from diagnose.api import diagnose_file\ndiagnose_file({str(log)!r})"
    cold = _modules_after(run, env)
    assert "diagnose.rules.parse" in cold  # the first run validates and writes the snapshot
    assert list((tmp_path / "cache").glob("snapshot-*.marshal"))
    warm = _modules_after(run, env)
    assert "diagnose.rules.parse" not in warm
    assert "diagnose.rules.locate" not in warm


def test_warm_run_decodes_every_snapshot(tmp_path: Path) -> None:
    """Each module registers the classes its snapshot holds (snapshot.storable); a class whose
    module a warm run has not imported yet would make that snapshot miss, silently."""
    env = {**os.environ, "CRASHKB_CACHE_DIR": str(tmp_path / "cache")}
    probe = (
        "import json\n"
        "import diagnose.snapshot as s\n"
        "real, missed = s.load, []\n"
        "def load(key):\n"
        "    value = real(key)\n"
        "    if value is None: missed.append(str(key[0]))\n"
        "    return value\n"
        "s.load = load\n"
        "from diagnose.api import diagnose_file\n"
        "diagnose_file('diagnose/examples/sm120-ep8-smem.log')\n"
        "print(json.dumps(missed))"
    )

    def missed() -> list[str]:
        out = subprocess.run(
            [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True,
            text=True, check=True, timeout=120,
        ).stdout  # fmt: skip
        return list(json.loads(out.splitlines()[-1]))

    assert {"kb", "rules"} <= set(missed())  # cold: every table is built and stored
    assert missed() == []


def test_snapshot_round_trip_equals_a_validated_load() -> None:
    kb = _build(data_dir("kb"), (), data_dir("rules"))
    back = snapshot.decode(snapshot.encode(kb))
    assert isinstance(back, KnowledgeBase)
    assert (back.version, back.causes, back.archs, back.gpus) == (
        kb.version,
        kb.causes,
        kb.archs,
        kb.gpus,
    )
    assert back._name_keys == kb._name_keys
    rules, errors, _roots = check_rules(kb=kb)
    assert errors == []
    decoded = snapshot.decode(snapshot.encode(tuple(rules)))
    assert decoded == tuple(rules)  # compiled patterns are compare=False: check them below
    for fresh, cached in zip(rules, decoded, strict=True):
        for a, b in zip(fresh.signals(), cached.signals(), strict=True):
            for name in ("compiled", "glob_match", "arch_match", "dtype_match"):
                x, y = getattr(a, name, None), getattr(b, name, None)
                if isinstance(x, LazyRE2):
                    assert isinstance(y, LazyRE2)
                    assert (y.pattern, y.option_values) == (x.pattern, x.option_values)
                    assert y._compiled is None  # compiled only when the rule runs
                    assert y.compiled.options.log_errors is False
                else:
                    assert x == y


def test_snapshot_refuses_unknown_objects() -> None:
    with pytest.raises(snapshot.Unencodable):
        snapshot.encode(object())
    with pytest.raises(snapshot.Unencodable):
        snapshot.encode([1, 2])  # lists mark encoded objects; real ones are never stored


def test_edited_rule_is_validated_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRASHKB_CACHE_DIR", str(tmp_path / "cache"))
    rules_dir = tmp_path / "rules" / "cuda-oom"
    rules_dir.mkdir(parents=True)
    rule = rules_dir / "demo-alloc.toml"
    rule.write_text(_demo_rule("alloc exploded"), encoding="utf-8")
    kb = load_kb()
    first = load_rules([tmp_path / "rules"], kb=kb)
    assert "cuda-oom/demo-alloc" in {r.id for r in first}
    again = load_rules([tmp_path / "rules"], kb=kb)  # served from the snapshot
    assert again.rules == first.rules
    rule.write_text(_demo_rule("alloc exploded").replace("confidence = 0.7", "confidence = 7"))
    os.utime(rule, ns=(rule.stat().st_atime_ns, rule.stat().st_mtime_ns + 10**9))
    with pytest.raises(Exception, match="confidence must be between 0 and 1"):
        load_rules([tmp_path / "rules"], kb=kb)


def test_damaged_snapshot_file_only_costs_speed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRASHKB_CACHE_DIR", str(tmp_path))
    kb = load_kb()
    fresh = load_rules(kb=kb)  # writes the snapshot
    written = list(tmp_path.glob("snapshot-*-rules-*.marshal"))
    assert len(written) == 1
    written[0].write_bytes(b"\x00not marshal")
    assert load_rules(kb=kb).rules == fresh.rules
    written[0].write_bytes(marshal.dumps((("rules", "another key"), "payload")))
    assert load_rules(kb=kb).rules == fresh.rules


def test_snapshot_files_do_not_pile_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRASHKB_CACHE_DIR", str(tmp_path))
    for i in range(snapshot.MAX_ENTRIES + 5):
        snapshot.save(("demo", i), ("value", i))
    assert len(list(tmp_path.glob("snapshot-*.marshal"))) == snapshot.MAX_ENTRIES
    assert snapshot.load(("demo", snapshot.MAX_ENTRIES + 4)) == ("value", snapshot.MAX_ENTRIES + 4)


def _demo_rule(phrase: str) -> str:
    """A small valid rule of our own (not a copy of a shipped one)."""
    return f"""
id = "cuda-oom/demo-alloc"
cause = "cuda-oom"
title = "Demo allocator failure"
severity = "fatal"
confidence = 0.7
summary = "The demo allocator failed."
references = ["example/demo#1"]

[match]
all = [ {{ text = "{phrase}" }} ]

[[examples]]
name = "hit"
expect = "match"
log = "RuntimeError: {phrase} on device 3"

[[examples]]
name = "miss"
expect = "no-match"
log = "RuntimeError: something else"
"""


@pytest.mark.parametrize(
    ("pattern", "flags", "text"),
    [
        (r"(?P<a>\d+)\s*(?P<u>[KMG]i?B)", 0, "free 12 MiB of 80 GiB"),
        (r"^error:\s*(\w+)", re.M, "ok\nerror: boom\nerror: again"),
        (r"x*", 0, "axxb"),
    ],
)
def test_lazy_pattern_matches_like_re(pattern: str, flags: int, text: str) -> None:
    real, lz = re.compile(pattern, flags), lazy(pattern, flags)
    assert isinstance(lz, LazyPattern) and lz._compiled is None and lz.pattern == pattern
    assert repr(lz.search(text)) == repr(real.search(text))
    assert repr(lz.match(text)) == repr(real.match(text))
    assert repr(lz.fullmatch(text)) == repr(real.fullmatch(text))
    assert [m.span() for m in lz.finditer(text, 1)] == [m.span() for m in real.finditer(text, 1)]
    assert lz.findall(text) == real.findall(text)
    assert lz.sub("<>", text, 1) == real.sub("<>", text, 1)
    assert lz.subn(lambda m: m.group(0).upper(), text) == real.subn(
        lambda m: m.group(0).upper(), text
    )
    assert lz.split(text) == real.split(text)
    assert (lz.groups, lz.groupindex) == (real.groups, dict(real.groupindex))


def test_array_table_lines_agree_with_line_of() -> None:
    text = (
        'id = "x"\n'
        "[[examples]]\n"
        'name = "a"\n'
        "# [[examples]] in a comment is no header\n"
        "[[ examples ]]  # spaced, with a comment\n"
        'name = "b"\n'
        "[[examples.sub]]\n"
        "[[other]]\n"
        "[[examples]]\n"
    )
    src = TomlSource("demo.toml", text, {})
    lines = src.array_table_lines("examples")
    assert lines == [2, 5, 9]
    assert lines == [src.line_of(f"examples[{i}]") for i in range(3)]


def test_rules_for_matching_skip_examples_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRASHKB_CACHE_DIR", str(tmp_path))
    kb = load_kb()
    full = load_rules(kb=kb)  # cold: validates and writes the snapshot
    lean_cold = load_rules(kb=kb, examples=False)
    warm_full = load_rules(kb=kb)  # from the snapshot, examples decoded from their blob
    lean = load_rules(kb=kb, examples=False)
    assert warm_full.rules == full.rules and all(r.examples for r in full)
    assert all(r.examples == () for r in lean) and lean.rules == lean_cold.rules
    assert [dataclasses.replace(r, examples=()) for r in full] == list(lean.rules)
