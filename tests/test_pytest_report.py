"""pytest failure reports: one region per failing test, its frames, the E-line exception.

Our own failing tests in the layouts pytest prints (``--tb=long``, the default, and
``--tb=short``); paths and numbers are made up.
"""

from __future__ import annotations

import pytest

from diagnose.api import diagnose_text
from diagnose.frames.pytest_report import ends_failure, is_error_line, is_frame_line, is_header
from diagnose.ingest.normalize import normalize
from diagnose.model import LogLine, Region
from diagnose.regions import find_regions


def centred(title: str, fill: str) -> str:
    """A title centred in a rule 80 columns wide, as pytest pads it to the terminal."""
    return f" {title} ".center(80, fill)


LONG = "\n".join(
    [
        centred("test session starts", "="),
        "platform linux -- Python 3.12.3, pytest-8.3.4, pluggy-1.5.0",
        "collected 3 items",
        "",
        "tests/kernels/test_gemm.py ..F",
        "",
        centred("FAILURES", "="),
        centred("test_grouped_gemm[bf16-256]", "_"),
        "",
        "dtype = torch.bfloat16, n = 256",
        "",
        "    def test_grouped_gemm(dtype, n):",
        "        a = torch.randn((n, n), device='cuda', dtype=dtype)",
        ">       out = grouped_gemm(a, a)",
        "",
        "tests/kernels/test_gemm.py:41: ",
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ ",
        "kernels/gemm.py:120: in grouped_gemm",
        "    return _launch(a, b, BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, num_stages=4)",
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ ",
        "",
        "    def _launch(a, b, **meta):",
        ">       _gemm_kernel[grid](a, b, **meta)",
        "E       triton.runtime.errors.OutOfResources: out of resource: shared memory,"
        " Required: 262144, Hardware limit: 101376. Reducing block sizes or `num_stages` may help.",
        "",
        "kernels/gemm.py:77: OutOfResources",
        centred("short test summary info", "="),
        "FAILED tests/kernels/test_gemm.py::test_grouped_gemm[bf16-256] - "
        "triton.runtime.errors.OutOfResources: out of resource: shared memory,"
        " Required: 262144, Hardware limit: 101376. Reducing block sizes or `num_stages` may help.",
        centred("1 failed, 2 passed in 9.87s", "="),
    ]
)

SHORT = """\
tests/test_attn.py:30: in test_decode
    out = decode(q, kv_cache)
flash/ops.py:88: in decode
    return _C.decode(q, kv_cache)
E   RuntimeError: CUDA error: an illegal memory access was encountered
E   CUDA kernel errors might be asynchronously reported at some other API call.

INFO the next thing the job printed"""


def regions_of(text: str) -> list[Region]:
    return find_regions(normalize(text))


def test_a_long_failure_is_one_region_from_its_header_to_its_closing_line() -> None:
    [region] = regions_of(LONG)
    assert region.kind == "python-traceback"
    assert region.lines == (8, 26)
    assert region.message.startswith(
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 262144"
    )
    assert region.count == 2  # the short summary's FAILED line repeats it
    # The test's own line and the closing line name no function: the `def` above does.
    assert [(f.file, f.line, f.function) for f in region.frames] == [
        ("tests/kernels/test_gemm.py", 41, "test_grouped_gemm"),
        ("kernels/gemm.py", 120, "grouped_gemm"),
        ("kernels/gemm.py", 77, "_launch"),
    ]
    assert diagnose_text(LONG).cause == "smem-overflow"


def test_pytest_rules_at_the_terminal_width_are_not_joined_to_the_next_line() -> None:
    lines = normalize(LONG)
    assert [line.text for line in lines[:2]] == [
        centred("test session starts", "="),
        "platform linux -- Python 3.12.3, pytest-8.3.4, pluggy-1.5.0",
    ]
    assert any(line.text == centred("FAILURES", "=") for line in lines)


def test_a_short_failure_ends_after_its_e_lines() -> None:
    [region] = regions_of(SHORT)
    assert region.lines == (1, 6)
    assert region.message == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert [f.function for f in region.frames] == ["test_decode", "decode"]
    assert diagnose_text(SHORT).cause == "illegal-memory-access"


def test_a_paste_that_starts_at_the_e_lines() -> None:
    text = "\n".join(LONG.split("\n")[23:26])  # the E line, a blank, the closing line
    [region] = regions_of(text)
    assert region.lines == (1, 3)
    assert region.message.startswith("triton.runtime.errors.OutOfResources")


def test_only_the_summary_is_still_read() -> None:
    summary = LONG.split("\n")[-2]
    [region] = regions_of(summary)
    assert region.message.startswith("triton.runtime.errors.OutOfResources: out of resource")


@pytest.mark.parametrize(
    ("line", "frame", "closing"),
    [
        ("tests/test_x.py:41: ", True, False),
        ("kernels/gemm.py:120: in grouped_gemm", True, False),
        ("kernels/gemm.py:77: OutOfResources", True, True),
        ("/srv/x.py:12: UserWarning: torch.cuda.amp is deprecated", False, False),
        ("kernels/gemm.py:77: error", False, False),
    ],
)
def test_location_lines(line: str, frame: bool, closing: bool) -> None:
    assert is_frame_line(line.strip()) is frame
    assert ends_failure(line.strip()) is closing


def test_headers_and_error_lines() -> None:
    assert is_header(centred("test_x[a-1]", "_"))
    assert is_header(centred("ERROR collecting tests/test_x.py", "_"))
    assert not is_header("_ _ _ _ _ _ _ _")
    assert is_error_line("E       assert 3 == 4")
    assert not is_error_line("E0102 10:00:00.000 1 x.cc:1] glog, not pytest")


def test_a_frameless_repeat_of_a_message_joins_the_failure_it_repeats() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/srv/a.py", line 3, in f\n'
        "    g()\n"
        "ValueError: shard 7 is missing\n"
        "INFO retrying\n"
        "ERROR ValueError: shard 7 is missing"
    )
    [region] = find_regions([LogLine(i + 1, row) for i, row in enumerate(text.split("\n"))])
    assert (region.lines, region.count) == ((1, 4), 2)


def test_deeply_indented_e_lines_of_any_exception_open_a_failure() -> None:
    text = (
        ">               raise e.with_traceback(None) from e.__cause__\n"
        "E               torch._dynamo.exc.Unsupported: can't handle functions not in python\n"
        "E                 Explanation: Dynamo can only handle functions defined in python\n"
    )
    [region] = regions_of(text)
    assert region.message == "torch._dynamo.exc.Unsupported: can't handle functions not in python"
    assert diagnose_text(text).fatal is True
