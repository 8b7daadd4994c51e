"""Tests for diagnose.follow and ``diagnose --follow / --until ready`` end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from diagnose.follow import IDLE, RESTART, follow_file, watch
from diagnose.report import Diagnosis
from diagnose.stream import Ready

ROOT = Path(__file__).resolve().parents[1]


def test_follow_file_growth_truncation_rotation(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"one\n")
    gen = follow_file(log, poll=0, sleep=lambda _: None)
    assert next(gen) == b"one\n"
    assert next(gen) is IDLE
    with log.open("ab") as f:
        f.write(b"two\n")
    assert next(gen) == b"two\n"
    log.write_bytes(b"3\n")  # copytruncate: the same file, shorter
    assert next(gen) is RESTART
    assert next(gen) == b"3\n"
    log.rename(tmp_path / "server.log.1")  # logrotate: a new file takes the name
    log.write_bytes(b"four\n")
    assert next(gen) is RESTART
    assert next(gen) == b"four\n"
    gen.close()


def test_follow_file_truncated_and_regrown_within_one_poll(tmp_path: Path) -> None:
    """copytruncate, then the server writes past the old read position before the next poll:
    the size never drops below it, yet the crash at the new file's start must be read."""
    log = tmp_path / "server.log"
    log.write_bytes(b"INFO warming up\n")
    gen = follow_file(log, poll=0, sleep=lambda _: None)
    assert next(gen) == b"INFO warming up\n"
    assert next(gen) is IDLE
    crash = b"RuntimeError: CUDA error: an illegal memory access was encountered\n"
    log.write_bytes(crash + b"INFO shutting down\n")  # longer than what was read
    assert next(gen) is RESTART
    assert next(gen) == crash + b"INFO shutting down\n"
    with log.open("ab") as f:  # plain growth after that is not a restart
        f.write(b"more\n")
    assert next(gen) == b"more\n"
    gen.close()


def test_follow_file_waits_for_a_missing_file(tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    gen = follow_file(log, poll=0, sleep=lambda _: None)
    assert next(gen) is IDLE
    log.write_bytes(b"hello\n")
    assert next(gen) == b"hello\n"


def test_follow_file_stops(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"x\n")
    polls = iter([False, False, True])
    assert list(follow_file(log, poll=0, sleep=lambda _: None, stop=lambda: next(polls))) == [
        b"x\n",
        IDLE,
    ]


def test_watch_finished_file_until_ready(tmp_path: Path) -> None:
    log = tmp_path / "done.log"
    log.write_text(
        "[2031-07-04 12:00:00] INFO worker: loading weights\n"
        "INFO:     Application startup complete.\n",
        encoding="utf-8",
    )
    seen: list[Diagnosis | Ready] = []
    result = watch(log, follow=False, until_ready=True, on_event=seen.append)
    assert (result.outcome, result.exit_code) == ("ready", 0)
    assert result.ready is not None and result.ready.line == 2
    assert [type(e) for e in seen] == [Ready]


def test_watch_finished_file_never_ready(tmp_path: Path) -> None:
    log = tmp_path / "done.log"
    log.write_text("[2031-07-04 12:00:00] INFO worker: loading weights\n", encoding="utf-8")
    result = watch(log, follow=False, until_ready=True)
    assert (result.outcome, result.exit_code) == ("ended", 3)  # never ready: no cause to name


def test_watch_ends_with_the_whole_log_verdict(tmp_path: Path) -> None:
    """Two windows, a kernel fault and the watchdog timeout it caused: the watch reports
    each as it completes and ends with one root cause, as ``diagnose FILE`` says."""
    from diagnose import diagnose_file

    watchdog = (
        "[rank0]:[E704 12:30:00.0 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, "
        "Timeout(ms)=600000) ran for 600021 milliseconds before timing out."
    )
    fault = [
        "Traceback (most recent call last):",
        '  File "/srv/model.py", line 12, in step',
        "    out = kernel(x)",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ]
    healthy = [f"[2031-07-04 12:00:00] INFO decode batch {i}, throughput {i % 90}" for i in
               range(2000)]  # fmt: skip
    log = tmp_path / "faulted.log"
    log.write_text("\n".join([*healthy, *fault, *healthy, watchdog]) + "\n", encoding="utf-8")
    seen: list[Diagnosis | Ready] = []
    result = watch(log, follow=False, on_event=seen.append)
    assert len([e for e in seen if isinstance(e, Diagnosis)]) == 2
    assert result.summary is not None
    whole = diagnose_file(log)
    assert (result.summary.cause, result.summary.fatal) == (whole.cause, whole.fatal)
    assert (result.outcome, result.exit_code) == ("ended", 1)
    assert "whole log: illegal-memory-access (fatal)" in result.message


# --------------------------------------------------------------------------- end to end

_WRITER = textwrap.dedent(
    """
    import sys, time
    path, scenario = sys.argv[1], sys.argv[2]
    def put(f, *lines, pause=0.15):
        for line in lines:
            f.write(line + "\\n")
            f.flush()
            time.sleep(pause)
    time.sleep(0.5)
    with open(path, "w", encoding="utf-8") as f:
        put(f, "[2031-07-04 12:00:00] server_args=ServerArgs(model_path='acme/tiny', tp_size=2)",
               "[2031-07-04 12:00:01 TP0] Load weight begin. avail mem=70.1 GB")
        if scenario == "ready":
            put(f, "[2031-07-04 12:00:02] WARNING tuner: [Autotuner]: Skipping tactic <Runner "
                   "object at 0x7f0011> 2, due to failure while profiling: Assertion failed: "
                   "Failed to initialize cutlass TMA WS grouped gemm. Error: Error Internal "
                   "(gemm_launch.inl:77)",
                   "[2031-07-04 12:00:03] INFO tuner: [Autotuner]: Skipped 3 unsupported "
                   "tactic(s) for gemm1",
                   "INFO:     Application startup complete.")
            time.sleep(1.0)  # sglang warms up between these two lines
            put(f, "[2031-07-04 12:00:09] The server is fired up and ready to roll!")
        elif scenario == "crash":
            put(f, "[2031-07-04 12:00:02 TP1] Scheduler hit an exception: Traceback (most "
                   "recent call last):",
                   '  File "/opt/acme/srv/loop.py", line 88, in run_loop',
                   "    self.step()",
                   "RuntimeError: CUDA error: an illegal memory access was encountered")
        time.sleep(30)  # the server process lives on; the diagnoser must not wait for it
    """
)


def _run(tmp_path: Path, scenario: str, *extra: str) -> subprocess.CompletedProcess[str]:
    log = tmp_path / "server.log"  # does not exist yet: the writer creates it later
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(log), scenario])
    try:
        return subprocess.run(
            [sys.executable, "-m", "diagnose", str(log), "--follow", "--until", "ready",
             "--timeout", "20", *extra],
            capture_output=True, text=True, cwd=ROOT, timeout=60,
            env={**os.environ, "NO_COLOR": "1"},
        )  # fmt: skip
    finally:
        writer.kill()
        writer.wait()


def test_cli_until_ready_exits_0_and_reports_skipped_tactics(tmp_path: Path) -> None:
    proc = _run(tmp_path, "ready")
    assert proc.returncode == 0, proc.stderr
    assert "tactic-skipped" in proc.stdout
    assert "not fatal" in proc.stdout
    # uvicorn's line came first, but on an sglang log only "fired up" means serving
    assert "server ready (line 6): The server is fired up" in proc.stderr


def test_cli_until_ready_exits_1_with_the_diagnosis_on_a_crash(tmp_path: Path) -> None:
    proc = _run(tmp_path, "crash", "--format", "jsonl")
    assert proc.returncode == 1, proc.stderr
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(records) == 1
    assert "illegal memory access" in records[0]["crash"]["message"]
    assert records[0]["crash"]["message_line"] == 6
    assert "fatal crash before the server was ready" in proc.stderr


def test_cli_until_ready_timeout(tmp_path: Path) -> None:
    log = tmp_path / "quiet.log"
    log.write_text("[2031-07-04 12:00:00] INFO worker: loading weights\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "diagnose", str(log), "--follow", "--until", "ready",
         "--timeout", "1"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 3  # not ready, and no crash to name
    assert "not ready after 1 s" in proc.stderr


def test_cli_follow_stdin_jsonl_pipeline() -> None:
    log = "\n".join(
        [
            "[2031-07-04 12:00:00 TP0] Decode batch. #running-req: 4",
            "[2031-07-04 12:00:01 TP0] Scheduler hit an exception: Traceback (most recent "
            "call last):",
            '  File "/opt/acme/srv/loop.py", line 88, in run_loop',
            "RuntimeError: CUDA error: misaligned address",
            "[2031-07-04 12:00:02 TP0] Decode batch. #running-req: 4",
        ]
    )
    proc = subprocess.run(
        [sys.executable, "-m", "diagnose", "--follow", "-", "--format", "jsonl"],
        input=log + "\n", capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 1  # a fatal crash was seen
    (record,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert record["crash"]["message_line"] == 4


def test_one_failure_is_one_alert_and_a_benign_warning_none(tmp_path: Path) -> None:
    log = tmp_path / "nccl.log"
    log.write_text(
        "[rank1]:[E101 10:00:01.000000000 ProcessGroupNCCL.cpp:1895] Process group watchdog "
        "thread terminated with exception: NCCL error: unhandled system error, NCCL version "
        "2.21.5\n"
        "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        "  what():  Process group watchdog thread terminated with exception: NCCL error: "
        "unhandled system error\n"
        "Fatal Python error: Aborted\n"
        "\n"
        "WARNING 01-01 10:00:09 cache flush skipped: no error\n",
        encoding="utf-8",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "diagnose", "--follow", str(log), "--format", "jsonl",
         "--timeout", "2"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["cause"] for r in records] == ["nccl-error"]
    assert records[0]["crash_count"] >= 2
