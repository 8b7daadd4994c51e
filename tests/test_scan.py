"""The streaming scan: windows, line numbers across chunk boundaries, context lines, bounds."""

from __future__ import annotations

import io
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.ingest.flood import line_shape
from diagnose.ingest.normalize import normalize
from diagnose.ingest.scan import (
    REPEAT_WINDOWS,
    WHOLE_INPUT_LIMIT,
    ScanResult,
    Window,
    scan,
)
from diagnose.regions import find_regions

CRASH = [
    "[2025-02-02 11:00:00 TP1] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/srv/frob/scheduler.py", line 120, in loop',
    "    self.step()",
    '  File "/srv/frob/scheduler.py", line 80, in step',
    "    out = self.runner.forward(batch)",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
]


def _healthy(rng: random.Random, n: int) -> list[str]:
    return [
        f"[2025-02-02 10:{i % 60:02d}:00 TP{rng.randint(0, 7)}] Decode batch. "
        f"#running-req: {rng.randint(1, 99)}, gen throughput (token/s): {rng.uniform(1, 999):.1f}"
        for i in range(n)
    ]


def _log(rng: random.Random, crash_at: int, total: int) -> list[str]:
    rows = _healthy(rng, total)
    rows[crash_at:crash_at] = CRASH
    return rows


def _scan_text(text: str, **kwargs: object) -> ScanResult:
    return scan(io.BytesIO(text.encode()), **kwargs)  # type: ignore[arg-type]


def _check_windows(result: ScanResult, rows: list[str]) -> None:
    """Every window line is the file's line at the number the window claims."""
    for w in result.windows:
        for k, line in enumerate(w.lines):
            assert line == rows[w.first_line - 1 + k]


def test_crash_window_has_context_and_the_whole_traceback() -> None:
    rows = _log(random.Random(1), 500, 1000)
    result = _scan_text("\n".join(rows) + "\n", before=5, after=2)
    assert result.total_lines == len(rows)
    assert len(result.windows) == 1
    w = result.windows[0]
    assert w.first_line == 501 - 5
    assert w.lines[5:12] == CRASH
    _check_windows(result, rows)


@pytest.mark.parametrize("chunk", [256, 777, 4096, 1 << 20])
def test_chunk_size_does_not_change_the_result(chunk: int) -> None:
    rng = random.Random(2)
    rows = _healthy(rng, 3000)
    for at in (0, 17, 1200, 1203, 2990):  # one at the very start, two overlapping, one at the end
        rows[at] = "ERROR 02-02 11:00:00 [core.py:9] ValueError: bad frob setting"
    text = "\n".join(rows) + "\n"
    reference = _scan_text(text, chunk_size=1 << 22)
    result = _scan_text(text, chunk_size=chunk)
    assert result.windows == reference.windows
    assert result.total_lines == 3000
    _check_windows(result, rows)
    firsts = [w.first_line for w in result.windows]
    assert firsts == [1, 1201 - 20, 2991 - 20]  # line 18 joins line 1, line 1204 joins 1201


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_searching_ahead_in_threads_does_not_change_the_result(seed: int) -> None:
    # Pieces of >= 1 MiB are searched ahead in threads; crashes land on chunk boundaries,
    # straddle them and sit inside each other's windows, so the hint a thread found is
    # sometimes behind where the window left off.
    from diagnose.ingest.scan import CONTEXT_LITERALS

    rng = random.Random(seed)
    rows = _healthy(rng, 60_000)
    for _ in range(40):
        at = rng.randrange(len(rows))
        rows[at:at] = CRASH if rng.random() < 0.5 else [f"NVIDIA H100 driver version {at}"]
    chunk = 1 << 20
    # A crash across every chunk boundary: its window is open when the next chunk arrives
    # and that chunk's first hit (the exception line) lies inside what the window takes.
    offset, boundaries = 0, []
    for i, row in enumerate(rows):
        offset += len(row) + 1
        if offset >= chunk * (len(boundaries) + 1):
            boundaries.append(i)
    for i in reversed(boundaries):
        rows[i - 2 : i - 2] = CRASH
    text = "\n".join(rows) + "\n"
    for chunk in (1 << 20, (3 << 19) + 7):
        alone = _scan_text(text, chunk_size=chunk, threads=0, context_literals=CONTEXT_LITERALS)
        ahead = _scan_text(text, chunk_size=chunk, threads=2, context_literals=CONTEXT_LITERALS)
        assert ahead == alone
        assert len(alone.windows) > 10 and alone.context
        _check_windows(ahead, rows)


def test_frames_continue_the_window_beyond_after() -> None:
    rows = _healthy(random.Random(3), 50)
    block = ["terminate called after throwing an instance of 'std::runtime_error'"]
    block += [
        f"frame #{i}: frob::f{i}() + 0x10 (0x7f0000{i:04x} in /opt/libfrob.so)" for i in range(40)
    ]
    rows[20:20] = block
    result = _scan_text("\n".join(rows), before=0, after=0)
    assert [(w.first_line, len(w.lines)) for w in result.windows] == [(21, 41)]


def _wrapped(line: str) -> str:
    import json

    return json.dumps({"log": line + "\n", "stream": "stderr"})


@pytest.mark.parametrize(
    "wrap",
    [
        _wrapped,
        lambda line: f"node07: {line}",
        lambda line: f"> {line}",
        lambda line: f"> > {line}",
    ],
    ids=["json-record", "host-label", "chat-quote", "nested-quote"],
)
def test_a_wrapped_traceback_continues_the_window(wrap: Callable[[str], str]) -> None:
    # A traceback whose frame lines are inside JSON log records (docker json-file), under a
    # pdsh/srun host label or quoted in a chat reply: no frame line holds a trigger, the window
    # must run on anyway.
    block = ["Traceback (most recent call last):"]
    for i in range(40):
        block += [f'  File "/srv/frob/m{i}.py", line {i + 1}, in f{i}', f"    f{i + 1}()"]
    block.append("frob.FrobError: the frobnicator went away")
    rows = _healthy(random.Random(5), 50)
    rows[20:20] = [wrap(line) for line in block]
    result = _scan_text("\n".join(rows), before=0, after=0)
    assert [(w.first_line, len(w.lines)) for w in result.windows] == [(21, len(block))]


def test_context_literals_are_returned_individually() -> None:
    rows = _healthy(random.Random(4), 100)
    rows[3] = "server_args=ServerArgs(model_path='/m/frob-7b', tp_size=4)"
    rows[60] = "Detected GPU: NVIDIA H200 (compute capability 9.0)"
    result = _scan_text("\n".join(rows), context_literals=[b"server_args=", "compute capability"])
    assert result.context == ((4, rows[3]), (61, rows[60]))
    assert result.windows == ()


def test_windows_feed_normalize_and_find_regions_with_original_numbers() -> None:
    rows = _log(random.Random(5), 700, 900)
    result = _scan_text("\n".join(rows))
    (w,) = result.windows
    regions = find_regions(normalize("\n".join(w.lines), first_line=w.first_line))
    crash = [r for r in regions if r.kind == "python-traceback"]
    assert crash and crash[0].message_line == 706
    assert crash[0].message == CRASH[5]


def test_over_long_line_is_cut_and_numbering_survives() -> None:
    rows = ["x" * (3 * 1024 * 1024), "ok", "RuntimeError: frob failed", "ok"]
    result = _scan_text("\n".join(rows), chunk_size=64 * 1024, before=1, after=0)
    assert result.total_lines == 4
    (w,) = result.windows
    assert w.first_line == 2 and w.lines == ["ok", "RuntimeError: frob failed"]


def test_crlf_and_missing_final_newline() -> None:
    result = _scan_text("a\r\nb\r\nAssertionError: frob\r\nc", before=1, after=0)
    assert result.total_lines == 4
    assert result.windows == (Window(2, ["b\r", "AssertionError: frob\r"]),)


def test_memory_budget_keeps_the_head_and_the_newest_windows() -> None:
    rows: list[str] = []
    for i in range(400):
        rows += _healthy(random.Random(i), 30)
        # distinct words, not numbers: repeats of one shape are counted, not windowed
        rows.append(f"WARNING frob {_letters(i)} failed to warm up")
    rows += CRASH
    result = _scan_text("\n".join(rows), max_bytes=64 * 1024, before=3, after=0)
    assert result.dropped_windows > 0
    assert result.windows[0].first_line < 40  # the head survives
    assert CRASH[5] in result.windows[-1].lines  # and so does the end
    _check_windows(result, rows)


def _letters(i: int) -> str:
    return "".join(chr(ord("a") + int(d)) for d in str(i))


def test_a_repeated_warning_is_counted_after_its_first_windows() -> None:
    rows: list[str] = []
    for i in range(2000):
        rows.append(f"WARNING 01-02 10:{i % 60:02d}:00 Sequence group {i} is preempted (error 0)")
        rows += _healthy(random.Random(i), 3)
    rows += CRASH
    result = _scan_text("\n".join(rows), before=2, after=0)
    assert len(result.windows) <= REPEAT_WINDOWS + 1
    [(_shape, count, first, last)] = result.repeated
    assert count == 2000 - REPEAT_WINDOWS
    assert rows[first - 1].startswith(f"WARNING 01-02 10:{REPEAT_WINDOWS % 60:02d}:00")
    assert last == 1 + 4 * 1999
    assert CRASH[5] in result.windows[-1].lines  # the crash after the flood keeps its window
    _check_windows(result, rows)


def test_a_repeated_traceback_header_is_always_windowed() -> None:
    rows: list[str] = []
    for i in range(REPEAT_WINDOWS * 3):
        rows += [f"Traceback (most recent call last): # {i}", '  File "/x.py", line 1, in f']
        rows += ["frob: caught and logged", *_healthy(random.Random(i), 30)]
    result = _scan_text("\n".join(rows), before=0, after=0)
    assert not result.repeated
    assert len(result.windows) == REPEAT_WINDOWS * 3


def test_a_huge_frame_block_is_cut_into_bounded_windows() -> None:
    frames = [
        f"frame #{i}: frob::recurse(int) + 0x1c (0x7f00{i:08x} in /l.so)" for i in range(50_000)
    ]
    frames[40_000] = "frame #40000: frob::driver_version_probe() + 0x8 (0x7f0000009c40 in /l.so)"
    rows = ["terminate called after throwing an instance of 'std::bad_alloc'", *frames]
    later = [
        "INFO restarting",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ]
    rows += later
    for chunk in (4096, 1 << 20):
        result = _scan_text(
            "\n".join(rows), max_window_lines=1000, chunk_size=chunk, context_literals=[b"version"]
        )
        # One window for the block (its head: the message and the top frames), not one per
        # thousand "frame #" lines; the crash after the block still gets its own.
        assert [w.first_line for w in result.windows] == [1, len(rows) - 20]
        assert len(result.windows[0].lines) == 1000
        assert result.windows[-1].lines[-1] == later[-1]
        assert result.total_lines == len(rows)
        assert result.hits < 1000 + 25  # the rest of the block is passed over, not searched
        # ... but its context lines are still noted, at their own line numbers.
        noted = [(n, text) for n, text in result.context if "driver_version" in text]
        assert noted == [(40_002, rows[40_001])]
        _check_windows(result, rows)


def test_a_huge_python_traceback_keeps_its_head_and_its_exception_line() -> None:
    frames = [f'  File "/srv/m{i % 7}.py", line {i % 90 + 1}, in f\n    f()' for i in range(30_000)]
    rows = ["Traceback (most recent call last):", *"\n".join(frames).split("\n")]
    rows.append("RecursionError: maximum recursion depth exceeded")
    result = _scan_text("\n".join(rows), max_window_lines=1000, chunk_size=8192)
    assert [w.first_line for w in result.windows] == [1, len(rows) - 20]
    assert result.windows[-1].lines[-1] == rows[-1]
    _check_windows(result, rows)


def test_every_rule_example_has_a_line_the_scan_sees() -> None:
    # A log over WHOLE_INPUT_LIMIT is only read in windows around trigger lines (and its
    # head): a rule whose evidence holds no trigger can never fire on a big log.  The
    # triggers are the hand-kept TRIGGERS (the region finder's vocabulary) plus every rule's
    # literal guard in any case (scan_literals), so each matching example must show one.
    from diagnose.ingest.scan import TRIGGERS
    from diagnose.rules import load_rules
    from diagnose.rules.wording import scan_literals

    rules = load_rules()
    triggers = [t.decode() for t in TRIGGERS]
    folded = scan_literals(rules)
    unseen = [
        (rule.id, example.name)
        for rule in rules
        for example in rule.examples
        if example.expect == "match"
        and not any(t in line for line in example.log.splitlines() for t in triggers)
        and not any(t in line.lower() for line in example.log.splitlines() for t in folded)
    ]
    assert not unseen


def test_rule_literals_make_lines_candidates_in_any_case() -> None:
    text = (
        "INFO warming up\nllama_model_load: ERROR LOADING MODEL: unknown model architecture: 'x'\n"
    )
    plain = scan(io.BytesIO(text.encode()), triggers=(b"Traceback",), threads=0)
    assert plain.windows == ()
    found = scan(
        io.BytesIO(text.encode()),
        triggers=(b"Traceback",),
        folded_triggers=("error loading model",),
        threads=0,
    )
    assert [w.first_line for w in found.windows] == [1]
    assert any("ERROR LOADING MODEL" in line for w in found.windows for line in w.lines)


def test_empty_stream() -> None:
    result = _scan_text("")
    assert result == ScanResult((), (), 0, 0, 0, 0)


def test_threshold_is_documented_in_bytes() -> None:
    assert WHOLE_INPUT_LIMIT >= 1024 * 1024


def test_a_flood_in_a_big_file_is_one_region_with_every_line_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through diagnose_file: the windows and the counted-only repeats add up to the count a
    window per line gives, and the last copy's line is the file's last warning."""
    import diagnose.ingest.scan as scan_module
    from diagnose.api import diagnose_file

    warning = (
        "WARNING 01-02 10:00:{s:02d} [scheduler.py:1560] Sequence group {i} is preempted by "
        "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space."
    )
    path = tmp_path / "flood.log"
    rng = random.Random(5)
    floods = lines = last_flood = 0
    with path.open("w") as out:
        while out.tell() < WHOLE_INPUT_LIMIT + (1 << 20):
            lines += 1
            if rng.random() < 0.15:
                out.write(warning.format(s=floods % 60, i=rng.randint(1, 10**6)) + "\n")
                floods, last_flood = floods + 1, lines
            else:
                out.write(_healthy(rng, 1)[0] + "\n")
        # a healthy line before the crash: a warning right above a traceback is its header
        out.write(_healthy(rng, 1)[0] + "\n" + "\n".join(CRASH) + "\n")
    d = diagnose_file(path)
    assert d.cause == "illegal-memory-access" and d.fatal
    [flood] = [r for r in d.crashes if "preempted" in r.message]
    assert flood.last_line == last_flood
    monkeypatch.setattr(scan_module, "REPEAT_WINDOWS", 10**9)  # a window for every line
    [windowed] = [r for r in diagnose_file(path).crashes if "preempted" in r.message]
    # (one copy is the header of a traceback region in both: floods - 1 or floods)
    assert flood.count == windowed.count >= floods - 1


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=200),
    st.integers(min_value=-5, max_value=220),
    st.one_of(st.none(), st.integers(min_value=-5, max_value=220)),
)
def test_fast_search_finds_what_the_wrapper_finds(buf: bytes, pos: int, end: int | None) -> None:
    import re2

    from diagnose.ingest.scan import FastSearch, trigger_pattern

    pattern = re2.compile(trigger_pattern([b"rror", b"Trace"], [b"oom"]))
    want = pattern.search(buf, pos, end)
    got = FastSearch(pattern).search(buf, pos, end)
    assert (got and (got.start(), got.end(), got.group())) == (
        want and (want.start(), want.end(), want.group())
    )


_FLOOD_KINDS = (
    # a long stem around its trigger: learned, then blanked from the search in bulk
    "WARNING 01-02 10:00:{s:02d} [scheduler.py:1560] Sequence group {i} is preempted by "
    "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space (error {j})",
    # a short stem (", error_count: "): learned, but blanked only on lines of its own shape
    "[TP{j}] Decode batch {i}, error_count: {s}",
    # another message with the same short stem: its copies stay in the search, counted as
    # repeats of their own shape
    "[TP{j}] Prefill chunk {i}, error_count: {s}",
    # the stem holds a readiness phrase: never blanked, or readiness would be lost
    "INFO {s} worker {i}: The server is fired up and ready to roll, cache error {j} ignored",
)


def _flood_log(seed: int) -> list[str]:
    rng = random.Random(seed)
    rows: list[str] = []
    for n in range(20_000):
        roll = rng.random()
        if roll < (0.12 if n < 14_000 else 0.003):  # the flood ebbs for the last 6,000 lines
            kind = _FLOOD_KINDS[rng.randrange(len(_FLOOD_KINDS))]
            rows.append(kind.format(s=n % 60, i=rng.randint(1, 10**6), j=rng.randint(0, 9)))
        elif roll < 0.1205:
            rows += CRASH  # a crash whose context takes flood copies in
        else:
            rows += _healthy(rng, 1)
    return rows


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize(("chunk", "threads"), [(4096, 0), (20_000, 2), (1 << 20, 0)])
def test_blanking_a_learned_flood_counts_every_copy_and_keeps_every_crash(
    seed: int, chunk: int, threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted line by line or blanked in bulk (and retired when the flood ebbs), every
    flood copy is either in a window or counted (the first and last copies bound them), every
    crash keeps its whole window.  Bulk opens no more windows: line by line, a copy that
    ends a chunk is windowed because its next line is not known yet."""
    import diagnose.ingest.flood as flood_module
    import diagnose.ingest.scan as scan_module
    from diagnose.ingest.flood import FloodMask

    learned: list[bytes] = []
    retired: set[bytes] = set()

    class Recording(FloodMask):
        def learn(self, line: bytes, start: int, stop: int, shape: bytes) -> bool:
            ok = super().learn(line, start, stop, shape)
            learned.extend([shape] if ok else [])
            return ok

        def mask(self, buf: bytes, lo: int, hi: int) -> flood_module.Masked:
            masked = super().mask(buf, lo, hi)
            retired.update(set(self.shape_of) - set(self.stems))
            return masked

    rows = _flood_log(seed)
    text = "\n".join(rows) + "\n"
    kwargs = {"chunk_size": chunk, "threads": threads, "context_literals": [b"fired up"]}
    monkeypatch.setattr(scan_module, "FloodMask", Recording)
    monkeypatch.setattr(flood_module, "_JUDGED_PIECE", min(chunk, 4096) // 2)  # judge small logs
    bulk = _scan_text(text, **kwargs)
    monkeypatch.setattr(scan_module, "LEARN_FLOOD_AFTER", 10**9)
    by_line = _scan_text(text, **kwargs)
    assert [s for s in learned if b"preempted" in s] and not [s for s in learned if b"fired" in s]
    # the short stem two messages share belongs to the one that flooded first, for good
    assert len([s for s in learned if b"error_count" in s]) == 1
    assert retired  # the flood ebbed and its stems stopped costing a pass
    assert len(bulk.windows) <= len(by_line.windows)
    assert bulk.context == by_line.context and bulk.total_lines == by_line.total_lines
    for result in (bulk, by_line):
        _check_windows(result, rows)
        windowed = {w.first_line + k for w in result.windows for k in range(len(w.lines))}
        for shape, count, first, last in result.repeated:
            copies = [n for n, row in enumerate(rows, 1) if line_shape(row.encode()) == shape]
            outside = [n for n in copies if n not in windowed]
            assert count == len(outside)
            # first and last are copies; one a window took in may stand for the end
            assert first in copies and last in copies
            assert first <= outside[0] and last >= outside[-1]
        crashes = [n for n, row in enumerate(rows, 1) if row == CRASH[0]]
        for n in crashes:
            assert all(n + k in windowed for k in range(len(CRASH)))


def test_a_flood_stem_is_learned_only_when_blanking_it_hides_nothing_else() -> None:
    from diagnose.ingest.flood import MIN_CHECKED_STEM, MIN_STEM, FloodMask, stem_of

    line = b"W 10:00:01 group 77 is preempted because there is not enough KV cache space (x 3)"
    at = line.index(b"not enough")
    assert (
        stem_of(line, at, at + 10)
        == b" is preempted because there is not enough KV cache space (x "
    )
    assert stem_of(b"#0  0x7f in f", 0, 6) == b""  # a trigger with digits is not words
    finds = FloodMask(lambda t: b"enough" in t or b"Traceback" in t, lambda t: b"ready" in t)
    assert finds.learn(line, at, at + 10, b"shape-1")
    assert not finds.learn(line, at, at + 10, b"shape-1")  # each shape is looked at once
    # too short to name one message: learned, but a copy is blanked only on a line of its shape
    short = b"[TP1] batch 7, error_count: 0"
    at = short.index(b"error")
    assert MIN_CHECKED_STEM <= len(stem_of(short, at, at + 5)) < MIN_STEM
    checked = FloodMask(lambda t: b"error" in t, lambda t: False)
    assert checked.learn(short, at, at + 5, line_shape(short))
    other = b"[TP1] prefill 9 requeued, error_count: 3"
    piece = short + b"\n" + other + b"\n" + short.replace(b"7", b"12") + b"\n"
    masked = checked.mask(piece, 0, len(piece))
    [(count, _, _)] = masked.found.values()
    assert count == 2 and masked.search_buf.count(b"error") == 1  # the other message stays
    assert (
        checked.copies_in(b", error_count: ", short),
        checked.copies_in(b", error_count: ", other),
    ) == (1, 0)
    assert len(stem_of(b"[TP1] x 7, err 0", 10, 13)) < MIN_CHECKED_STEM
    assert not checked.learn(b"[TP1] x 7, err 0", 10, 13, b"shape-9")  # too short even to check
    # another trigger outside the stem would be hidden with it
    other = b"Traceback 9 is preempted because there is not enough KV cache space again"
    assert not finds.learn(other, other.index(b"not enough"), other.index(b" KV"), b"shape-3")
    # a readiness phrase in the stem is never blanked
    ready = b"worker 4: server ready, so there is not enough KV cache space for the rest"
    assert not finds.learn(ready, ready.index(b"not enough"), ready.index(b" KV"), b"shape-4")
    masked = finds.mask(line + b"\n" + line + b"\n", 0, 2 * len(line) + 2)
    [(count, first, _)] = masked.found.values()
    assert (count, first) == (2, line.index(b" is"))
    assert b"enough" not in masked.search_buf and len(masked.search_buf) == 2 * len(line) + 2


def test_frames_cut_from_both_ends_of_their_traceback_are_windowed() -> None:
    """A paste of Python frames alone (no "Traceback" header, no exception line) is a crash
    region to the region finder, so the big-file path must keep it too."""
    rows = _healthy(random.Random(9), 200)
    frames = [
        '  File "/srv/frob/engine/core.py", line 141, in _initialize_kv_caches',
        "    available = self.executor.determine_available_memory()",
        '  File "/srv/frob/executor/abstract.py", line 76, in determine_available_memory',
    ]
    rows[100:100] = frames
    result = _scan_text("\n".join(rows) + "\n")
    windowed = {w.first_line + k for w in result.windows for k in range(len(w.lines))}
    assert all(101 + k in windowed for k in range(len(frames)))
    _check_windows(result, rows)


def test_a_small_input_never_imports_the_scanner() -> None:
    """The window settings a small input's path needs live in ingest/read.py: importing the
    scanner (its patterns, the flood mask) costs every one-shot CLI run ~1.5 ms."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from diagnose import diagnose_text\n"
        "diagnose_text('RuntimeError: CUDA error: an illegal memory access was encountered')\n"
        "print('diagnose.ingest.scan' in sys.modules, 'diagnose.ingest.flood' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_the_trigger_automaton_fits_its_dfa_budget(tmp_path: Path) -> None:
    """RE2 falls back from its DFA to the NFA, silently, once the trigger union outgrows the
    memory budget, and placing each hit then costs ~100x more (rounds 269-276's dozen new
    triggers took a 32 MB flood log from 1.8 s to 16 s). RE2 says so when asked to log: the
    scan over a flood log, with logging forced on, must not print it."""
    import subprocess
    import sys

    log = tmp_path / "flood.log"
    log.write_text("\n".join(_flood_log(3)) + "\n", encoding="utf-8")
    probe = (
        "import sys, re2\n"
        "compile_ = re2.compile\n"
        "def loud(pattern, options=None):\n"
        "    options.log_errors = True\n"
        "    return compile_(pattern, options=options)\n"
        "re2.compile = loud\n"
        "from diagnose.context import ready_phrases\n"
        "from diagnose.engine import rule_triggers\n"
        "from diagnose.ingest import scan\n"
        "with open(sys.argv[1], 'rb') as f:\n"
        "    result = scan.scan(f, barriers=ready_phrases(), folded_triggers=rule_triggers(()),\n"
        "                       threads=0)\n"
        "print(result.hits)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(log)], capture_output=True, text=True, check=True
    )
    assert int(out.stdout) > 0
    assert "DFA out of memory" not in out.stderr
