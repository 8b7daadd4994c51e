"""torch elastic's ChildFailedError table read as one failure with a summary message.

Our own reports in the shape ``ChildFailedError.format_msg`` prints (torchrun, and the
accelerate/DeepSpeed launchers on top of it); hosts, paths and PIDs are made up.
"""

from __future__ import annotations

from diagnose.api import diagnose_text
from diagnose.elastic_report import opens_report, read_report
from diagnose.model import LogLine
from diagnose.regions import find_regions

LAUNCHER = """\
Traceback (most recent call last):
  File "/opt/venv/bin/torchrun", line 8, in <module>
    sys.exit(main())
  File "/opt/venv/lib/python3.12/site-packages/torch/distributed/launcher/api.py", line 270, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: """

RULE = "=" * 64
SECTION = "-" * 64


def entry(index: int, rank: int, exitcode: str, traceback: str) -> str:
    return f"""\
[{index}]:
  time      : 2026-03-04_05:06:07
  host      : trainer-{rank}.cluster.example
  rank      : {rank} (local_rank: {rank % 8})
  exitcode  : {exitcode}
  error_file: <N/A>
  traceback : {traceback}"""


def report(failures: str, root: str, title: str = "finetune.py FAILED") -> str:
    return "\n".join(
        [
            RULE,
            title,
            SECTION,
            "Failures:",
            failures,
            SECTION,
            "Root Cause (first observed failure):",
            root,
            RULE,
        ]
    )


SIGKILL_ROOT = entry(0, 0, "-9 (pid: 4242)", "Signal 9 (SIGKILL) received by PID 4242")


def regions_of(text: str) -> list[tuple[str, tuple[int, int], str]]:
    lines = [LogLine(i + 1, row) for i, row in enumerate(text.split("\n"))]
    return [(r.kind, r.lines, r.message) for r in find_regions(lines)]


def test_the_table_joins_the_launcher_traceback_and_names_the_root_cause() -> None:
    text = LAUNCHER + "\n" + report("  <NO_OTHER_FAILURES>", SIGKILL_ROOT) + "\nINFO bye"
    [(kind, lines, message)] = regions_of(text)
    assert kind == "python-traceback"
    assert lines == (1, 21)  # through the closing rule, not the log line after it
    assert message == (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: finetune.py FAILED: "
        "rank 0 (local_rank: 0), exitcode -9 (pid: 4242): Signal 9 (SIGKILL) received by PID 4242"
    )


def test_a_paste_that_starts_at_the_exception_is_one_region_too() -> None:
    head = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "
    [(kind, lines, message)] = regions_of(
        head + "\n" + report("  <NO_OTHER_FAILURES>", SIGKILL_ROOT)
    )
    assert (kind, lines) == ("error-line", (1, 16))
    assert message.endswith("exitcode -9 (pid: 4242): Signal 9 (SIGKILL) received by PID 4242")


def test_the_root_cause_entry_wins_over_other_failures() -> None:
    other = entry(1, 9, "-6 (pid: 77)", "Signal 6 (SIGABRT) received by PID 77")
    root = entry(0, 8, "1 (pid: 76)", "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970,")
    [(_, _, message)] = regions_of(LAUNCHER + "\n" + report(other, root))
    assert "rank 8 (local_rank: 0), exitcode 1 (pid: 76): RuntimeError: NCCL error" in message
    assert "SIGABRT" not in message


def test_a_recorded_child_traceback_stays_its_own_region() -> None:
    root = (
        entry(0, 0, "1 (pid: 31)", "Traceback (most recent call last):")
        + """
    File "/srv/train.py", line 12, in step
      loss = model(batch)
  torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.02 GiB is free."""
    )
    text = LAUNCHER + "\n" + report("  <NO_OTHER_FAILURES>", root)
    found = regions_of(text)
    assert [kind for kind, _, _ in found] == ["python-traceback", "python-traceback"]
    assert found[0][2].endswith("finetune.py FAILED: rank 0 (local_rank: 0), exitcode 1 (pid: 31)")
    assert found[1][2].startswith("torch.OutOfMemoryError: CUDA out of memory")
    verdict = diagnose_text(text)
    assert verdict.cause == "cuda-oom"


def test_a_multi_line_traceback_field_is_joined() -> None:
    root = entry(0, 0, "1 (pid: 5)", "ValueError: the shard index 3 is out of range") + (
        "\n    for a world size of 2"
    )
    [(_, _, message)] = regions_of(LAUNCHER + "\n" + report("  <NO_OTHER_FAILURES>", root))
    assert message.endswith("ValueError: the shard index 3 is out of range for a world size of 2")


def test_a_cut_report_still_gives_what_it_has() -> None:
    text = LAUNCHER + "\n" + report("  <NO_OTHER_FAILURES>", SIGKILL_ROOT)
    cut = "\n".join(text.split("\n")[:-3])  # the paste stops after the exitcode field
    [(_, _, message)] = regions_of(cut)
    assert message.endswith("finetune.py FAILED: rank 0 (local_rank: 0), exitcode -9 (pid: 4242)")


def test_only_an_empty_exception_message_above_a_titled_rule_opens_a_report() -> None:
    assert opens_report("ChildFailedError: ", RULE, "train.py FAILED")
    assert not opens_report("ChildFailedError: lost rank 3", RULE, "train.py FAILED")
    assert not opens_report("ChildFailedError:", "=" * 10, "train.py FAILED")
    assert not opens_report("ChildFailedError:", RULE, "train.py finished")
    # compute-sanitizer's prefix is a rule of nine '=' then text: never a report rule
    assert not opens_report("Error:", "========= Invalid __global__ read", "x FAILED")


def test_read_report_stops_at_its_closing_rule() -> None:
    lines = [*report("  <NO_OTHER_FAILURES>", SIGKILL_ROOT).split("\n"), "after"]
    taken, summary = read_report(lines)
    assert lines[taken - 1] == RULE and lines[taken] == "after"
    assert summary.startswith("finetune.py FAILED: rank 0")


def test_an_empty_traceback_field_is_left_out() -> None:
    root = entry(0, 2, "1 (pid: 9)", "<N/A>")
    _, summary = read_report(report("  <NO_OTHER_FAILURES>", root).split("\n"))
    assert summary == "finetune.py FAILED: rank 2 (local_rank: 2), exitcode 1 (pid: 9)"
