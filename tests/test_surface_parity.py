"""Every surface gives the same verdict: cause, fatal flag and primary rule.

The library on text and on a file, the file gzip-compressed, the file through the big-file
(windowed) path, the CLI on many files in one call and on stdin, ``diagnose serve`` over
HTTP, the stream's first fatal report and its whole-log summary, on
every rule's matching examples and (where ``../shared`` is beside the checkout) every dev
log.  The figure the hardening and engine issues ask for is 100%, and this test holds it.
"""

from __future__ import annotations

import gzip
import http.client
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import serve_process

from diagnose import diagnose_file, diagnose_text
from diagnose.report import Diagnosis
from diagnose.stream import iter_diagnoses

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "corpus" / "dev"

Key = tuple[str, bool | None, str | None]


def _key(d: Diagnosis | None) -> Key:
    if d is None:
        return ("unknown", None, None)
    return (d.cause, d.fatal, d.primary.rule_id if d.primary else None)


def _key_json(d: dict[str, Any]) -> Key:
    primary = d.get("primary") or {}
    return (d["cause"], d["fatal"], primary.get("rule_id"))


def _cases() -> list[tuple[str, str]]:
    from diagnose.rules import load_rules

    cases = [
        (f"{rule.id}:{example.name}", example.log)
        for rule in load_rules()
        for example in rule.examples
        if example.expect == "match"
    ]
    if DEV.is_dir():
        cases += [
            (f"dev:{p.name}", p.read_text(encoding="utf-8", errors="replace"))
            for p in sorted(DEV.glob("*.log"))
        ]
    return cases


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str, Path]]:
    """Each case as a file and a .gz beside it."""
    out = tmp_path_factory.mktemp("parity")
    files = []
    for index, (name, text) in enumerate(_cases()):
        path = out / f"{index:04d}.log"
        path.write_text(text, encoding="utf-8")
        path.with_suffix(".log.gz").write_bytes(gzip.compress(text.encode("utf-8")))
        files.append((name, text, path))
    return files


@pytest.fixture(scope="module")
def library(written: list[tuple[str, str, Path]]) -> dict[str, Key]:
    return {name: _key(diagnose_text(text)) for name, text, _ in written}


def test_the_library_on_a_file_and_on_its_gzip_agrees_with_text(
    written: list[tuple[str, str, Path]], library: dict[str, Key]
) -> None:
    differ = []
    for name, _, path in written:
        for source in (path, path.with_suffix(".log.gz")):
            got = _key(diagnose_file(source))
            if got != library[name]:
                differ.append((name, source.name, library[name], got))
    assert differ == []


def test_the_windowed_big_file_path_agrees_with_whole_text(
    written: list[tuple[str, str, Path]],
    library: dict[str, Key],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No verdict depends on the size on disk: with the whole-input limit at zero every file
    takes the big-file path (the window cutter's windows, parsed together), and each gives
    what the whole text gives."""
    import diagnose.pipeline as pipeline

    monkeypatch.setattr(pipeline, "WHOLE_INPUT_LIMIT", 0)
    differ = [
        (name, library[name], got)
        for name, _, path in written
        if (got := _key(diagnose_file(path))) != library[name]
    ]
    assert differ == []


def test_the_stream_reports_the_same_first_fatal_verdict(
    written: list[tuple[str, str, Path]], library: dict[str, Key]
) -> None:
    differ: list[tuple[str, Key, Key | None]] = []
    for name, text, _ in written:
        reports = list(iter_diagnoses(io.StringIO(text)))
        first = next((d for d in reports if d.fatal), reports[0] if reports else None)
        want = library[name]
        if first is None:
            # Nothing to report: the whole log had no fatal failure either.
            if want[1]:
                differ.append((name, want, None))
        elif _key(first) != want:
            differ.append((name, want, _key(first)))
    assert differ == []


def test_the_stream_summary_agrees_with_whole_text(
    written: list[tuple[str, str, Path]], library: dict[str, Key]
) -> None:
    """The stream's whole-log verdict at close is the whole text's: every window judged
    together, by the assembly the big-file path uses."""
    from diagnose.stream import StreamDiagnoser

    differ = []
    for name, text, _ in written:
        engine = StreamDiagnoser(summary=True)
        engine.feed(text)
        engine.close()
        if (got := _key(engine.summary())) != library[name]:
            differ.append((name, library[name], got))
    assert differ == []


def _cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "diagnose", *args],
        input=stdin,
        capture_output=True,
        timeout=600,
        env={**os.environ, "NO_COLOR": "1"},
    )


def test_the_cli_on_many_files_in_one_call_agrees(
    written: list[tuple[str, str, Path]], library: dict[str, Key]
) -> None:
    paths = [str(p) for _, _, p in written] + [str(p.with_suffix(".log.gz")) for _, _, p in written]
    done = _cli("--format", "json", *paths)
    assert done.returncode in (0, 1, 3), done.stderr.decode()[-2000:]
    results = json.loads(done.stdout)
    assert len(results) == len(paths)
    names = [n for n, _, _ in written] * 2
    differ = [
        (name, library[name], _key_json(r))
        for name, r in zip(names, results, strict=True)
        if _key_json(r) != library[name]
    ]
    assert differ == []


def test_the_cli_on_stdin_agrees(
    written: list[tuple[str, str, Path]], library: dict[str, Key]
) -> None:
    # One process a log: every rule's first example and, where present, the dev logs.
    seen_rules: set[str] = set()
    chosen = []
    for name, text, _ in written:
        rule = name.rsplit(":", 1)[0]
        if name.startswith("dev:") or rule not in seen_rules:
            seen_rules.add(rule)
            chosen.append((name, text))
    differ = []
    for name, text in chosen:
        done = _cli("--format", "json", "-", stdin=text.encode("utf-8"))
        got = _key_json(json.loads(done.stdout))
        if got != library[name]:
            differ.append((name, library[name], got))
    assert differ == []


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    pytest.importorskip("starlette", reason="needs the serve extra (starlette)")
    pytest.importorskip("uvicorn", reason="needs the serve extra (uvicorn)")
    proc = serve_process.start()
    yield proc.port  # type: ignore[attr-defined]
    serve_process.stop(proc)


def test_serve_agrees(
    written: list[tuple[str, str, Path]], library: dict[str, Key], server: int
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server, timeout=60)
    differ: list[tuple[str, Key, Key | str]] = []
    for name, text, _ in written:
        body = text.encode("utf-8")
        conn.request("POST", "/diagnose", body, {"Content-Type": "text/plain; charset=utf-8"})
        response = conn.getresponse()
        payload = response.read()
        if response.status != 200:
            differ.append((name, library[name], f"HTTP {response.status}"))
            continue
        got = _key_json(json.loads(payload))
        if got != library[name]:
            differ.append((name, library[name], got))
    assert differ == []
