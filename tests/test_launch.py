"""The console-script launcher: exit codes, streams and threads survive the hard exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from diagnose.exitcodes import ExitCode
from diagnose.launch import _exit_status

ROOT = Path(__file__).resolve().parents[1]
TRACE = (
    "1       0x789a90580ca6 tensorrt_llm::common::throwRuntimeError(...)\n"
    "3       0x789a9076d948 void tensorrt_llm::kernels::cutlass_kernels_oss::"
    "dispatchMoeGemmSelectClusterShapeTmaWarpSpecialized<cutlass::arch::Sm120, "
    "__nv_fp4_e2m1, __nv_fp4_e2m1, __nv_bf...\n"
)


def _launch(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "diagnose", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("code", "status"), [(None, 0), (0, 0), (1, 1), (2, 2), (256 + 3, 3), ("boom", 1)]
)
def test_exit_status_follows_the_interpreter(code: object, status: int) -> None:
    assert _exit_status(code) == status


def test_fatal_known_cause_prints_everything_and_exits_1() -> None:
    proc = _launch("--format", "json", "-", stdin=TRACE)
    assert proc.returncode == ExitCode.FATAL_KNOWN_CAUSE
    assert proc.stdout.rstrip().endswith("}")  # flushed whole before os._exit
    assert '"smem-overflow"' in proc.stdout


def test_input_error_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = _launch(str(tmp_path / "missing.log"))
    assert proc.returncode == ExitCode.USAGE_OR_INPUT_ERROR
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_kb_command_runs_through_the_launcher() -> None:
    code = "import sys; sys.argv = ['diagnose-kb', 'list']; from diagnose.launch import diagnose_kb; diagnose_kb()"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0
    assert "smem-overflow" in proc.stdout


def test_closed_pipe_is_not_a_traceback() -> None:
    # `diagnose … | true`: the reader is gone before the ~200 KB report is written.
    proc = subprocess.run(
        f"{sys.executable} -m diagnose --verbose --format json - | true",
        shell=True,
        cwd=ROOT,
        input=TRACE * 300,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in proc.stderr


def test_live_non_daemon_thread_gets_a_normal_exit() -> None:
    code = (
        "import threading, time\n"
        "from diagnose.launch import _run\n"
        "def late():\n"
        "    time.sleep(0.3)\n"
        "    print('thread finished', flush=True)\n"
        "threading.Thread(target=late).start()\n"
        "_run(lambda: None)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0
    assert "thread finished" in proc.stdout


@pytest.mark.parametrize(
    ("args", "long_running"),
    [
        (["serve", "--port", "8000"], True),
        (["mcp"], True),
        (["server.log", "--follow"], True),
        (["-F", "server.log"], True),
        (["--follow=true", "server.log"], True),
        (["crash.log", "--format", "json"], False),
        (["-"], False),
        (["serve.log"], False),
    ],
)
def test_only_one_shot_runs_raise_the_collection_threshold(
    args: list[str], long_running: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server or a follower keeps CPython's GC thresholds; a one-shot run raises gen 0."""
    import gc

    from diagnose import launch

    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []
    monkeypatch.setattr(sys, "argv", ["diagnose", *args])
    monkeypatch.setattr(launch, "_hard_exit", lambda status: None)
    try:
        launch._run(lambda: seen.append(gc.get_threshold()))
    finally:
        gc.set_threshold(*before)
    assert (seen[0][0] == before[0]) is long_running
    assert (seen[0][0] == launch.GC_THRESHOLD0) is not long_running
