"""The ``diagnose`` command: exit codes, stdin, formats and bad input, run as a real process."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "diagnose" / "examples" / "sm120-ep8-smem.log"

OOM_LOG = """\
[2026-03-01 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/opt/srv/worker.py", line 88, in forward
    out = self.model(batch)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total \
capacity of 79.10 GiB of which 1.25 GiB is free. Of the allocated memory 75.00 GiB is allocated \
by PyTorch, and 1.10 GiB is reserved by PyTorch but unallocated.
"""


def run_cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m diagnose`` the way a user runs ``diagnose``."""
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "diagnose", *args],
        input=stdin.decode("utf-8", "replace") if stdin is not None else None,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_a_fatal_known_cause_exits_1_and_names_it(tmp_path: Path) -> None:
    log = tmp_path / "oom.log"
    log.write_text(OOM_LOG)
    proc = run_cli(str(log))
    assert proc.returncode == 1, proc.stderr
    assert "cuda-oom" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_stdin_dash_and_json_contract(tmp_path: Path) -> None:
    proc = run_cli("-", "--format", "json", stdin=OOM_LOG.encode())
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    for key in (
        "schema_version",
        "crashes",
        "cause",
        "fatal",
        "confidence",
        "title",
        "findings",
        "fixes",
        "kb_version",
    ):
        assert key in data
    assert data["cause"] == "cuda-oom"
    crash = data["crashes"][0]
    for key in ("kind", "lines", "count", "ranks", "message", "frames"):
        assert key in crash
    frame = crash["frames"][0]
    for key in (
        "index",
        "address",
        "module",
        "offset",
        "symbol",
        "function",
        "template_args",
        "params",
        "file",
        "line",
        "truncated",
        "mangled",
    ):
        assert key in frame
    finding = data["findings"][0]
    assert finding["rule_id"].startswith("cuda-oom/")
    assert finding["evidence"] and all(isinstance(e["line"], int) for e in finding["evidence"])


def test_evidence_points_at_original_lines(tmp_path: Path) -> None:
    # Colour, CRLF and a chat fence must not shift line numbers.
    noisy = (
        "chatter\r\n```\r\n"
        + OOM_LOG.replace("\n", "\r\n").replace(
            "torch.OutOfMemoryError", "\x1b[31mtorch.OutOfMemoryError\x1b[0m"
        )
        + "```\r\n"
    )
    log = tmp_path / "noisy.log"
    log.write_bytes(noisy.encode())
    data = json.loads(run_cli(str(log), "--format", "json").stdout)
    lines = noisy.split("\r\n")
    for ev in data["primary"]["evidence"]:
        assert (
            "OutOfMemoryError" in lines[ev["line"] - 1]
            or ev["text"].strip() in lines[ev["line"] - 1]
        )


def test_gzip_input(tmp_path: Path) -> None:
    log = tmp_path / "crash.log.gz"
    log.write_bytes(gzip.compress(OOM_LOG.encode()))
    assert run_cli(str(log)).returncode == 1


def test_a_fatal_unknown_cause_exits_3(tmp_path: Path) -> None:
    log = tmp_path / "odd.log"
    log.write_text(
        "Traceback (most recent call last):\n"
        '  File "/srv/app.py", line 3, in <module>\n'
        "    frob()\n"
        "RuntimeError: the flux capacitor reported state 7 in widget frobnication\n"
    )
    proc = run_cli(str(log))
    assert proc.returncode == 3
    assert "Unknown" in proc.stdout


@pytest.mark.parametrize(
    "text",
    [
        "INFO 01-01 10:00:00 serving on port 8000\nINFO 01-01 10:00:01 200 OK\n",
        "WARNING 01-01 10:00:00 failed to load optional plugin; continuing\n",
    ],
    ids=["healthy", "survived-warning"],
)
def test_nothing_fatal_exits_0_so_a_deploy_can_gate_on_it(text: str) -> None:
    proc = run_cli("-", stdin=text.encode())
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_version_prints_package_and_rule_base() -> None:
    proc = run_cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith("diagnose (crashkb) ") and " kb " in proc.stdout


def test_diagnose_kb_version_is_the_same_version_line() -> None:
    import subprocess
    import sys

    kb = subprocess.run(
        [sys.executable, "-c", "from diagnose.kbcli import main; main()", "--version"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    main = run_cli("--version")
    assert kb.returncode == 0
    assert kb.stdout.replace("diagnose-kb ", "diagnose ", 1) == main.stdout


@pytest.mark.parametrize(
    ("make", "expect"),
    [
        (lambda p: p / "missing.log", 2),
        (lambda p: p, 2),  # a directory
    ],
    ids=["missing", "directory"],
)
def test_unusable_input_is_one_line_exit_2(tmp_path: Path, make, expect) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli(str(make(tmp_path)))
    assert proc.returncode == expect
    assert proc.stderr.startswith("diagnose: ")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files regardless of permissions")
def test_no_permission_exit_2(tmp_path: Path) -> None:
    log = tmp_path / "secret.log"
    log.write_text(OOM_LOG)
    log.chmod(0)
    proc = run_cli(str(log))
    assert proc.returncode == 2


@pytest.mark.parametrize(
    "payload",
    [b"", b"\x00" * 4096, bytes(range(256)) * 64, b"\xff\xfe\xfa not utf-8 \xc3\x28"],
    ids=["empty", "nuls", "binary", "invalid-utf8"],
)
def test_odd_bytes_give_a_result(tmp_path: Path, payload: bytes) -> None:
    log = tmp_path / "odd.bin"
    log.write_bytes(payload)
    proc = run_cli(str(log), "--format", "json")
    assert proc.returncode in (0, 1, 3), proc.stderr
    assert "Traceback" not in proc.stderr
    json.loads(proc.stdout)


def test_markdown_is_chat_sized() -> None:
    proc = run_cli(str(EXAMPLE), "--format", "markdown")
    assert proc.returncode in (0, 1, 3)
    assert len(proc.stdout) <= 3600
    assert proc.stdout.count("```") % 2 == 0


def test_bad_user_rule_dir_names_file_line_field(tmp_path: Path) -> None:
    bad = tmp_path / "rules" / "cuda-oom"
    bad.mkdir(parents=True)
    (bad / "broken.toml").write_text('id = "cuda-oom/broken"\ncause = "cuda-oom"\ntitle = 3\n')
    proc = run_cli(str(EXAMPLE), "--rules", str(tmp_path / "rules"))
    assert proc.returncode == 2
    assert "broken.toml" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_usage_error_exit_2() -> None:
    proc = run_cli("--format", "yaml", str(EXAMPLE))
    assert proc.returncode == 2


def test_markdown_slack_flavor_uses_mrkdwn_bold() -> None:
    from diagnose.api import diagnose_file
    from diagnose.render.markdown import render_markdown

    d = diagnose_file(EXAMPLE)
    github = render_markdown(d)
    slack = render_markdown(d, flavor="slack")
    assert github.startswith("**") and slack.startswith("*") and not slack.startswith("**")
    assert slack.count("```") == github.count("```")
    assert len(render_markdown(d, max_chars=2000)) <= 2000


def test_shipped_examples_give_the_mission_verdicts() -> None:
    """The fatal SM120 crash is smem-overflow on hardware numbers; the server that came up
    beside dozens of failed tactics is tactic-skipped and not fatal."""
    from diagnose.api import diagnose_file, diagnose_text

    crash = diagnose_file(EXAMPLE)
    assert (crash.cause, crash.fatal, crash.tier) == ("smem-overflow", True, "hardware")
    assert crash.primary is not None and crash.primary.fact("arch") == "sm_120"
    up = diagnose_file(EXAMPLE.with_name("sm120-ep8-tactics-skipped.log"))
    assert (up.cause, up.fatal, up.server_ready) == ("tactic-skipped", False, True)
    bare = diagnose_text("\n".join(EXAMPLE_TRACE))
    assert bare.cause == "smem-overflow"


EXAMPLE_TRACE = (
    "1       0x789a90580ca6 tensorrt_llm::common::throwRuntimeError(...)",
    "2       0x789a90cf6341 /root/.cache/flashinfer/0.6.3/120a/cached_ops/fused_moe_120/fused_moe_120.so(+0x90d341)",
    "3       0x789a9076d948 void tensorrt_llm::kernels::cutlass_kernels_oss::dispatchMoeGemmSelectClusterShapeTmaWarpSpecialized<cutlass::arch::Sm120, __nv_fp4_e2m1, __nv_fp4_e2m1, __nv_bf...",
)


def test_a_100mb_single_line_gives_a_result(tmp_path: Path) -> None:
    log = tmp_path / "oneline.log"
    with log.open("w") as fh:
        fh.write("x" * 50_000_000 + " RuntimeError: widget " + "y" * 50_000_000 + "\n")
    proc = run_cli(str(log), "--format", "json")
    assert proc.returncode in (0, 1, 3), proc.stderr
    assert json.loads(proc.stdout)["schema_version"] == 1


def test_a_million_frame_traceback(tmp_path: Path) -> None:
    log = tmp_path / "frames.log"
    with log.open("w") as fh:
        fh.write("Traceback (most recent call last):\n")
        for i in range(1_000_000):
            fh.write(f'  File "/srv/mod{i % 97}.py", line {i % 500}, in fn{i % 13}\n')
        fh.write("RuntimeError: CUDA error: an illegal memory access was encountered\n")
    proc = run_cli(str(log), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["cause"] == "illegal-memory-access"
    assert data["primary"]["evidence"][-1]["line"] == 1_000_002


def test_no_argument_on_a_terminal_prints_help_instead_of_waiting() -> None:
    import pty

    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "diagnose"],
            stdin=follower,
            capture_output=True,
            text=True,
            env={**os.environ, "NO_COLOR": "1"},
            timeout=60,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert proc.returncode == 0
    assert "Usage" in proc.stdout and "diagnose" in proc.stdout


def test_a_bad_verify_level_is_one_line() -> None:
    proc = run_cli(str(EXAMPLE), "--verify-level", "bogus")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "diagnose: --verify-level must be model, compile or run, not 'bogus'"
    ]


def test_several_logs_give_one_result_each_and_the_worst_code(tmp_path: Path) -> None:
    healthy = tmp_path / "ok.log"
    healthy.write_text("INFO 01-01 10:00:00 serving\n")
    oom = tmp_path / "oom.log"
    oom.write_text(OOM_LOG)
    proc = run_cli(str(healthy), str(oom))
    assert proc.returncode == 1  # the fatal known cause speaks for both
    assert proc.stdout.count("==> ") == 2 and "cuda-oom" in proc.stdout
    proc = run_cli(str(healthy), str(oom), "--format", "json")
    assert [d["cause"] for d in json.loads(proc.stdout)] == ["unknown", "cuda-oom"]
    proc = run_cli(str(oom), str(tmp_path / "missing.log"))
    assert proc.returncode == 2  # an unreadable input outranks the rest
    assert "cuda-oom" in proc.stdout and proc.stderr.count("diagnose: ") == 1


def test_follow_takes_one_log() -> None:
    proc = run_cli(str(EXAMPLE), str(EXAMPLE), "--follow")
    assert proc.returncode == 2
    assert "one log at a time" in proc.stderr


def test_no_cache_writes_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "NO_COLOR": "1", "CRASHKB_CACHE_DIR": str(tmp_path / "cache"),
           "CRASHKB_NO_CACHE": "1"}  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "diagnose", str(EXAMPLE)], capture_output=True,
                          text=True, env=env, timeout=120)  # fmt: skip
    assert proc.returncode == 1 and "smem-overflow" in proc.stdout
    assert not (tmp_path / "cache").exists()


def test_kb_show_suggests_the_nearest_ids() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "from diagnose.kbcli import main; main()", "show",
         "smem-overflow/cutlas-error-internal"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "did you mean smem-overflow/cutlass-error-internal" in proc.stderr


# The plain form (``diagnose LOG... [-f FMT] [--no-color]``) runs without typer
# (diagnose.cli_plain); everything else is the typer command's.
@pytest.mark.parametrize(
    ("argv", "plain"),
    [
        (["a.log"], ("a.log",)),
        (["a.log", "b.log.gz", "-"], ("a.log", "b.log.gz", "-")),
        (["-f", "json", "a.log"], ("a.log",)),
        (["a.log", "--format=markdown", "--no-color"], ("a.log",)),
        ([], None),  # help on a terminal, or stdin: typer decides
        (["--help"], None),
        (["a.log", "--verbose"], None),
        (["a.log", "-f"], None),  # a missing value is typer's error to word
        (["a.log", "-f", "yaml"], None),  # ... and so is a bad one
        (["a.log", "-f", "json", "-f", "text"], None),
        (["a.log", "--no-color", "--no-color"], None),
        (["a.log", "--"], None),
        (["a.log", "-fjson"], None),
        (["serve"], None),
        (["mcp", "x"], None),
        (["a.log", "--follow"], None),
    ],
)
def test_plain_args_take_only_the_plain_form(
    argv: list[str], plain: tuple[str, ...] | None
) -> None:
    from diagnose.cli_plain import plain_args

    got = plain_args(argv)
    assert (got.logs if got is not None else None) == plain


def test_plain_args_read_the_format() -> None:
    from diagnose.cli_plain import plain_args
    from diagnose.render import OutputFormat

    got = plain_args(["--format", "jsonl", "a.log", "--no-color"])
    assert got is not None and got.fmt is OutputFormat.jsonl and got.no_color
    got = plain_args(["a.log"])
    assert got is not None and got.fmt is OutputFormat.text and not got.no_color


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "jsonl"])
def test_plain_and_typer_paths_print_the_same(tmp_path: Path, fmt: str) -> None:
    """The same plain command through the typer command (forced by an option that changes
    nothing: ``--rules`` with an empty directory) and without it: same bytes, same code."""
    empty = tmp_path / "rules"
    empty.mkdir()
    oom = tmp_path / "oom.log"
    oom.write_text(OOM_LOG)
    logs = [str(EXAMPLE), str(oom), str(tmp_path / "missing.log")]
    plain = run_cli(*logs, "-f", fmt)
    typer_run = run_cli(*logs, "-f", fmt, "--rules", str(empty))
    assert plain.returncode == typer_run.returncode == 2  # the missing file is the worst
    assert plain.stdout == typer_run.stdout
    assert plain.stderr == typer_run.stderr


def test_the_plain_form_does_not_import_typer(tmp_path: Path) -> None:
    log = tmp_path / "oom.log"
    log.write_text(OOM_LOG)
    code = (
        "import sys; sys.argv = ['diagnose', sys.argv[1]]\n"
        "import atexit; atexit.register(lambda: print('typer' in sys.modules, file=sys.stderr))\n"
        "from diagnose.launch import diagnose; diagnose()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(log)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "False"
