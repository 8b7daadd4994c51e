"""Tests for diagnose.stream: per-crash reports from a stream, as each crash completes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import diagnose
from diagnose import diagnose_text
from diagnose.report import Diagnosis
from diagnose.stream import (
    Ready,
    StreamDiagnoser,
    is_fatal_crash,
    iter_diagnoses,
    iter_events,
)


def healthy(n: int, start: int = 0) -> list[str]:
    """Synthetic healthy serving lines (our own format, numbers vary)."""
    return [
        f"[2031-07-04 12:{(start + i) // 60 % 60:02d}:{(start + i) % 60:02d} TP{i % 4}] "
        f"Decode batch. #running-req: {i % 97}, #token: {i * 13}, gen throughput: {i % 500}.5"
        for i in range(n)
    ]


def crash(rank: int = 0, pid: int = 4242, message: str = "an illegal memory access") -> list[str]:
    """A synthetic scheduler crash: a Python traceback ending in a CUDA error."""
    return [
        f"[2031-07-04 12:00:00 TP{rank}] Scheduler hit an exception: "
        "Traceback (most recent call last):",
        f'  File "/opt/env{pid}/srv/loop.py", line 88, in run_loop',
        "    self.step()",
        f'  File "/opt/env{pid}/srv/model.py", line 1{rank}2, in step',
        "    out = kernel(x)",
        f"RuntimeError: CUDA error: {message} was encountered",
    ]


def stream_of(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def test_one_crash_is_reported_with_original_line_numbers() -> None:
    lines = [*healthy(300), *crash(), *healthy(300)]
    found = list(iter_diagnoses(lines))
    assert len(found) == 1
    d = found[0]
    assert d.streamed
    batch = diagnose_text(stream_of(lines))
    assert [r.message for r in d.crashes] == [r.message for r in batch.crashes]
    assert [r.message_line for r in d.crashes] == [r.message_line for r in batch.crashes] == [306]
    assert d.cause == batch.cause


def test_crash_free_stream_yields_nothing_and_counts_lines() -> None:
    engine = StreamDiagnoser()
    events = engine.feed(stream_of(healthy(5000))) + engine.close()
    assert events == []
    assert engine.stats.lines == 5000
    assert engine.stats.windows == 0


def test_report_comes_before_the_stream_ends() -> None:
    total = [*healthy(100), *crash(), *healthy(2000)]
    consumed = 0

    def source() -> Iterator[str]:
        nonlocal consumed
        for line in total:
            consumed += 1
            yield line

    first = next(iter_diagnoses(source(), batch_lines=1, settle_lines=40))
    assert first.crashes[0].message_line == 106
    # complete after exactly settle_lines quiet lines, not at the end of the stream
    assert consumed == 106 + 40


def test_copies_from_ranks_in_separate_windows_give_one_report() -> None:
    lines: list[str] = []
    for rank in range(8):
        lines += healthy(100, start=rank * 100)
        lines += crash(rank=rank, pid=1000 + rank)
    lines += healthy(100)
    engine = StreamDiagnoser()
    reports = [
        e for e in engine.feed(stream_of(lines)) + engine.close() if isinstance(e, Diagnosis)
    ]
    assert len(reports) == 1
    assert engine.stats.suppressed == 7


def test_interleaved_rank_copies_are_one_region() -> None:
    lines = [*healthy(50)]
    copies = [crash(rank=r, pid=7) for r in range(4)]
    for row in zip(*copies, strict=True):
        lines.extend(row)
    lines += healthy(100)
    reports = list(iter_diagnoses(lines))
    assert len(reports) == 1


def test_different_crashes_are_each_reported() -> None:
    lines = [*healthy(100), *crash(), *healthy(500), *crash(message="misaligned address")]
    lines += healthy(10)
    reports = list(iter_diagnoses(lines))
    assert [("misaligned" in d.crashes[-1].message) for d in reports] == [False, True]


def test_same_crash_long_after_is_a_new_report() -> None:
    lines = [*healthy(10), *crash(), *healthy(3000), *crash(), *healthy(10)]
    assert len(list(iter_diagnoses(lines, dedupe_lines=1000))) == 2


def feed_lines(engine: StreamDiagnoser, lines: list[str]) -> list[Diagnosis]:
    """Feed ``lines`` one at a time, then close: the diagnoses, without readiness events."""
    events = [e for line in lines for e in engine.feed(line + "\n")] + engine.close()
    return [e for e in events if not isinstance(e, Ready)]


def test_huge_trace_is_cut_not_kept() -> None:
    frames = [f"frame #{i}: libfoo.so(+0x{i:x}) [0x{i:x}]" for i in range(30_000)]
    lines = [*healthy(10), "terminate called after throwing an instance of 'c10::Error'", *frames]
    lines += [*healthy(50), *crash(message="misaligned address"), *healthy(10)]
    engine = StreamDiagnoser(max_window_lines=5000)
    reports = feed_lines(engine, lines)
    # The block is cut once and the rest of it passed over: one report for it, not one per
    # 5,000 "frame #" lines, and the crash after it is still reported.
    assert engine.stats.cut_windows == 1
    assert [d.crashes[0].lines[0] for d in reports] == [11, len(lines) - 10 - 6 + 1]
    assert reports[0].crashes[0].lines[1] == 5_000
    assert "misaligned" in reports[1].crashes[-1].message


def test_a_cut_traceback_and_its_exception_line_are_one_report() -> None:
    # Mutual recursion is not folded into "[Previous line repeated N more times]": every
    # frame is printed, and the exception line comes after the window's cap.
    frames = []
    for i in range(3_000):
        frames += [f'  File "/srv/walk.py", line {10 + i % 2}, in visit_{i % 2}', "    go(node)"]
    lines = [*healthy(10), "Traceback (most recent call last):", *frames]
    lines += ["RecursionError: maximum recursion depth exceeded", *healthy(10)]
    engine = StreamDiagnoser(max_window_lines=5000)
    reports = feed_lines(engine, lines)
    assert engine.stats.cut_windows == 1
    [report] = reports
    [region] = report.crashes
    assert region.message == "RecursionError: maximum recursion depth exceeded"
    assert region.lines[0] == 11 and region.lines[1] >= 6_012
    assert region.frames[0].function == "visit_0"


def test_a_big_buffer_searched_in_parallel_gives_the_same_reports() -> None:
    lines = []
    for k in range(6):
        lines += healthy(4000, start=k * 4000)
        lines += crash(
            rank=k % 4, message=["an illegal memory access", "misaligned address"][k % 2]
        )
    text = stream_of(lines)
    assert len(text) > 2 << 20  # big enough to be searched in segments

    def reports(chunks: list[str]) -> list[tuple[tuple[int, int], str]]:
        engine = StreamDiagnoser(dedupe_lines=0)
        events = [e for c in chunks for e in engine.feed(c)] + engine.close()
        return [
            (d.crashes[-1].lines, d.crashes[-1].message) for d in events if not isinstance(d, Ready)
        ]

    whole = reports([text])
    assert len(whole) == 6
    assert whole == reports([line + "\n" for line in lines])


def test_a_regular_file_read_ahead_gives_the_same_reports(tmp_path: Path) -> None:
    # Files are fed one chunk behind the read, each chunk searched ahead in threads; the
    # crashes straddle the small chunks' boundaries.
    lines = []
    for k in range(12):
        lines += healthy(3000 + 7 * k, start=k * 4000)
        lines += crash(
            rank=k % 4, message=["an illegal memory access", "misaligned address"][k % 2]
        )
    path = tmp_path / "big.log"
    path.write_text(stream_of(lines))

    def reports(**options: Any) -> list[tuple[tuple[int, int], str]]:
        with path.open("rb") as f:
            found = list(iter_diagnoses(f, dedupe_lines=0, **options))
        return [(d.crashes[-1].lines, d.crashes[-1].message) for d in found]

    one_by_one = [
        (d.crashes[-1].lines, d.crashes[-1].message)
        for d in iter_diagnoses(iter(lines), dedupe_lines=0)
    ]
    assert len(one_by_one) == 12
    assert reports(chunk_size=(1 << 20) + 13) == one_by_one
    assert reports() == one_by_one


def test_long_line_without_newline_is_bounded() -> None:
    engine = StreamDiagnoser()
    engine.feed(b"x" * (3 << 20))
    assert len(engine._carry) < (2 << 20)
    events = engine.feed(b"\n" + stream_of(crash()).encode()) + engine.close()
    assert len([e for e in events if isinstance(e, Diagnosis)]) == 1
    assert engine.stats.lines == 7


@settings(max_examples=25, deadline=None)
@given(cuts=st.lists(st.integers(min_value=1, max_value=4000), min_size=1, max_size=12))
def test_chunk_boundaries_do_not_change_reports(cuts: list[int]) -> None:
    text = stream_of([*healthy(60), *crash(), *healthy(80), *crash(message="bad"), *healthy(5)])
    data = text.encode()
    whole = StreamDiagnoser()
    expected = whole.feed(data) + whole.close()
    engine = StreamDiagnoser()
    got: list[Diagnosis | Ready] = []
    pos = 0
    for cut in cuts:
        got += engine.feed(data[pos : pos + cut])
        pos += cut
    got += engine.feed(data[pos:]) + engine.close()
    key = [(type(e).__name__, getattr(e, "crashes", None)) for e in expected]
    assert [(type(e).__name__, getattr(e, "crashes", None)) for e in got] == key
    assert len(key) == 2


def test_pipe_that_goes_quiet_still_reports_its_crash() -> None:
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, stream_of([*healthy(5), *crash()]).encode())
        with os.fdopen(read_fd, "rb", closefd=True) as reader:
            events = iter_events(reader, quiet=0.2)
            first = next(events)  # the writer is still open: only the quiet period ends it
            assert isinstance(first, Diagnosis)
            assert first.crashes[0].message_line == 11
    finally:
        os.close(write_fd)


def test_ready_lines_and_sglang_warmup() -> None:
    sglang = [
        "[2031-07-04 12:00:00] server_args=ServerArgs(model_path='acme/tiny', tp_size=1)",
        "INFO:     Application startup complete.",
        "[2031-07-04 12:00:09] The server is fired up and ready to roll!",
    ]
    events = [e for e in iter_events(sglang) if isinstance(e, Ready)]
    assert [(e.line, e.serving) for e in events] == [(2, False), (3, True)]
    vllm = ["INFO 07-04 12:00:00 [api_server.py:1] vLLM API server version 0.0.1",
            "INFO:     Application startup complete."]  # fmt: skip
    assert [e.serving for e in iter_events(vllm) if isinstance(e, Ready)] == [True]


def test_skipped_tactics_before_ready_are_not_the_crash() -> None:
    lines = [
        "[2031-07-04 12:00:00] WARNING tuner: [Autotuner]: Skipping tactic <Runner object at "
        "0x7f0011> 2, due to failure while profiling: Assertion failed: Failed to initialize "
        "cutlass TMA WS grouped gemm. Error: Error Internal (gemm_launch.inl:77)",
        "[2031-07-04 12:00:01] INFO tuner: [Autotuner]: Skipped 6 unsupported tactic(s) for gemm1",
        *healthy(3),
        "INFO:     Application startup complete.",
    ]
    reports = list(iter_diagnoses(lines))
    assert reports, "the skipped tactics are reported"
    assert not any(is_fatal_crash(d) for d in reports)
    assert reports[0].cause == "tactic-skipped"


def test_is_fatal_crash_on_a_real_crash() -> None:
    d = next(iter_diagnoses([*healthy(3), *crash()]))
    assert is_fatal_crash(d)


def test_public_export() -> None:
    assert diagnose.iter_diagnoses is iter_diagnoses


def test_text_file_object(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(stream_of([*healthy(30), *crash(), *healthy(30)]), encoding="utf-8")
    with log.open(encoding="utf-8") as f:
        assert len(list(iter_diagnoses(f))) == 1
    with log.open("rb") as f:
        assert len(list(iter_diagnoses(f))) == 1


@pytest.fixture
def corpus() -> Path:
    shared = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "dev"
    if not shared.is_dir():
        pytest.skip("../shared/corpus is not present")
    return shared


def test_stream_names_the_batch_cause_on_every_dev_log(corpus: Path) -> None:
    from diagnose import diagnose_file

    known = agree = 0
    for path in sorted(corpus.glob("*.log")):
        whole = diagnose_file(path)
        if not whole.known:
            continue
        known += 1
        with path.open("rb") as f:
            agree += whole.cause in {d.cause for d in iter_diagnoses(f)}
    assert known >= 10
    assert agree == known, (agree, known)


def test_every_rule_example_gets_the_same_cause_from_the_stream() -> None:
    """The stream names what the whole-log path names, for every matching rule example."""
    import io

    from diagnose import diagnose_text
    from diagnose.rules import load_rules

    differ = []
    for rule in load_rules():
        for example in rule.examples:
            if example.expect != "match":
                continue
            whole = diagnose_text(example.log)
            streamed = list(iter_diagnoses(io.StringIO(example.log)))
            first = next((d for d in streamed if d.fatal), streamed[0] if streamed else None)
            if (first.cause if first else "none") != whole.cause:
                differ.append((rule.id, example.name, whole.cause, [d.cause for d in streamed]))
    assert differ == []


def test_readme_pipeline_examples_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import logging
    import re

    doc = Path(__file__).resolve().parents[1] / "docs" / "pipelines.md"
    section = doc.read_text(encoding="utf-8").split("## Pipelines", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 3
    example = Path(__file__).resolve().parents[1] / "diagnose" / "examples" / "sm120-ep8-smem.log"
    (tmp_path / "server.log").write_text(stream_of([*healthy(20), *crash(), *healthy(50)]))
    (tmp_path / "logs").mkdir()
    for n in range(3):
        (tmp_path / "logs" / f"node{n}.log").write_text(example.read_text(encoding="utf-8"))
    monkeypatch.chdir(tmp_path)
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        exec(compile(blocks[0], "README-stream", "exec"), {})
    finally:
        for handler in root.handlers[len(before) :]:
            root.removeHandler(handler)
    (line,) = capsys.readouterr().out.splitlines()
    assert line.split()[1] == "26"  # "<cause> <message line> <title>"
    exec(compile(blocks[1], "README-summary", "exec"), {})
    assert capsys.readouterr().out.split() == ["illegal-memory-access"]
    pytest.importorskip("distributed", reason="the 'fleet' extra is not installed")
    exec(compile(blocks[2], "README-fleet", "exec"), {})
    out = capsys.readouterr().out
    assert "3 nodes: smem-overflow on sm_120, tile 128x256x128" in out


def test_restart_forgets_the_old_file() -> None:
    engine = StreamDiagnoser()
    first = engine.feed(stream_of([*healthy(3000), "INFO:     Application startup complete."]))
    assert [type(e) for e in first] == [Ready]
    engine.restart()  # truncated: the same crash again is a new event, numbered from 1
    again = engine.feed(stream_of([*healthy(5), *crash(), *healthy(50)])) + engine.close()
    (d,) = [e for e in again if isinstance(e, Diagnosis)]
    assert d.crashes[0].message_line == 11
    assert is_fatal_crash(d)  # not "survived" because of the old file's ready line


def test_a_warning_flood_is_reported_once_and_counted_not_windowed() -> None:
    """A benign warning every few lines (a loaded server) once kept one window open through
    the whole log and re-alerted per window; now: one survived report, then the crash."""
    lines: list[str] = []
    for i in range(3000):
        lines.append(
            f"WARNING 01-02 10:00:{i % 60:02d} [scheduler.py:1560] Sequence group {i} is "
            "preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache "
            f"space. total_num_cumulative_preemption={i} (error_count: 0)"
        )
        lines += healthy(2, start=i)
    lines += crash()
    sd = StreamDiagnoser()
    got = sd.feed("\n".join(lines) + "\n") + sd.close()
    reports = [d for d in got if isinstance(d, Diagnosis)]
    assert [d.fatal for d in reports] == [False, True]
    assert reports[1].cause == "illegal-memory-access"
    assert sd.stats.counted > 2500
    assert sd.stats.windows < 100


def test_a_survived_report_is_not_repeated_but_a_fatal_one_is_after_the_span() -> None:
    warning = (
        "[2031-07-04 12:00:00 TP0] WARNING: Sequence group {i} is preempted by "
        "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space."
    )
    lines = [warning.format(i=0), *healthy(3000), *crash(), *healthy(3000, start=1)]
    lines += [warning.format(i=1), *healthy(3000, start=2), *crash(rank=1)]
    sd = StreamDiagnoser(dedupe_lines=2000)
    got = [d for d in sd.feed("\n".join(lines) + "\n") + sd.close() if isinstance(d, Diagnosis)]
    # the preemption warning 6,000 lines later is not news; the same crash again is
    assert [(d.cause, d.fatal) for d in got] == [
        ("kv-cache-oom", False),
        ("illegal-memory-access", True),
        ("illegal-memory-access", True),
    ]


def _fault_then_watchdog() -> str:
    """A kernel fault, then (thousands of healthy lines later, in another window) the
    collective it left hanging times out on another rank: one root and its cascade."""
    watchdog = (
        "[rank0]:[E704 12:30:00.000000000 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=512, OpType=ALLREDUCE, NumelIn=4096, "
        "NumelOut=4096, Timeout(ms)=600000) ran for 600021 milliseconds before timing out."
    )
    return stream_of([*healthy(1000), *crash(rank=1), *healthy(3000, 1000), watchdog])


def test_the_summary_judges_every_window_together() -> None:
    engine = StreamDiagnoser(summary=True)
    events = engine.feed(_fault_then_watchdog()) + engine.close()
    # window by window: two fatal reports, each judged alone
    assert [d.cause for d in events if isinstance(d, Diagnosis)] == [
        "illegal-memory-access",
        "nccl-timeout",
    ]
    whole = engine.summary()
    assert (whole.cause, whole.fatal) == ("illegal-memory-access", True)
    assert any(rule.startswith("nccl-timeout/") for rule in whole.cascade)
    assert (whole.cause, whole.fatal, whole.cascade) == (
        (d := diagnose_text(_fault_then_watchdog())).cause,
        d.fatal,
        d.cascade,
    )


def test_a_small_input_is_one_window_whatever_its_triggers() -> None:
    # A line the whole-text reader opens a region on but no scan trigger marks (its words
    # are not ASCII, so no literal guard holds them): the summary of a small stream reads it
    # as a file of the same bytes is read (rounds 322, 327 and 330 had such lines).
    log = "[I] building the engine\n[E] 9: Пропуск тактики 0x3e8 из-за исключения\n"
    engine = StreamDiagnoser(summary=True)
    engine.feed(log)
    engine.close()
    whole, streamed = diagnose_text(log), engine.summary()
    assert whole.crashes
    assert (streamed.cause, streamed.fatal) == (whole.cause, whole.fatal)
    # Past the whole-input size the windows decide, as the big-file scan does.
    big = StreamDiagnoser(summary=True)
    big.feed("INFO healthy line of a long log\n" * 40_000 + log)
    big.close()
    assert not big.summary().crashes


def test_a_summary_needs_the_engine_to_keep_its_windows() -> None:
    engine = StreamDiagnoser()
    engine.close()
    with pytest.raises(ValueError, match="summary=True"):
        engine.summary()
