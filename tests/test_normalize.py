"""Tests for diagnose.ingest.normalize: every layer it peels, combinations, and properties.

All fixtures are synthetic: invented hosts, pids, paths and messages in the real formats.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.ingest.normalize import (
    MAX_JOINED_LINES,
    WRAP_WIDTHS,
    normalize,
    normalize_lines,
    split_lines,
)
from diagnose.model import LogLine

ESC = "\x1b"


def texts(text: str) -> list[str]:
    return [line.text for line in normalize(text)]


def one(raw: str) -> LogLine:
    lines = normalize(raw)
    assert len(lines) == 1, lines
    return lines[0]


# --- terminal damage ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        (f"{ESC}[31mERROR{ESC}[0m disk full", "ERROR disk full"),
        (f"{ESC}[1;38;5;196mred{ESC}[m text{ESC}[K", "red text"),
        (f"{ESC}]0;tab title{ESC}\\visible", "visible"),
        (f"{ESC}]8;;https://example.invalid{ESC}\\link{ESC}]8;;{ESC}\\ after", "link after"),
        (f"{ESC}]2;bell-ended\x07shown", "shown"),
        (f"{ESC}(Bplain{ESC}=", "plain"),
        ("\x9b32mC1 csi\x9b0m", "C1 csi"),
        ("^[[33mcaret notation^[[0m", "caret notation"),
        # ESC lost when copied from a web page: bare remnants
        (" [36m(RayWorkerAlpha pid=4242) [0m boom", "boom"),
        ("[32mINFO[0m [1;31mready[m", "INFO ready"),
        ("progress[K", "progress"),
    ],
)
def test_ansi(raw: str, want: str) -> None:
    assert one(raw).text == want


@pytest.mark.parametrize(
    "content",
    [
        "x = [m for m in modules]",
        "weights[10m] and cache[0m]",
        "[multiproc_executor.py:470] something",
        "[Kernel] launched",
        "matrix[K] = 3",
    ],
)
def test_bracket_content_that_resembles_sgr_is_kept(content: str) -> None:
    assert one(content).text == content


def test_crlf_and_cr_progress_bars() -> None:
    raw = "first\r\n 10%|#    | 1/10\r 60%|######  | 6/10\r100%|##########| 10/10\r\nlast\r\n"
    assert normalize(raw) == [
        LogLine(1, "first"),
        LogLine(2, "100%|##########| 10/10"),
        LogLine(3, "last"),
    ]


def test_cr_overwrite_keeps_prefix_rank() -> None:
    raw = "[2031-01-01 00:00:00 TP6] Capturing 10%\rCapturing 100%\n"
    assert one(raw) == LogLine(1, "Capturing 100%", "TP6")


def test_cr_only_line_endings() -> None:
    assert normalize("alpha\rbeta\r\rgamma") == [
        LogLine(1, "alpha"),
        LogLine(2, "beta"),
        LogLine(3, ""),
        LogLine(4, "gamma"),
    ]
    # A window cut from a bigger file was split by the reader: \r there is an overwrite.
    assert normalize("Loading 10%\rLoading 100%", first_line=7) == [LogLine(7, "Loading 100%")]


def test_backspaces_zero_width_nbsp_controls() -> None:
    assert one("typo\b\b\bpe ok").text == "tpe ok"
    assert one("a\u200bb\u200dc\ufeffd\u2060e").text == "abcde"
    assert one("\u00a0\u00a0File\u00a0x").text == "  File x"
    assert one("bell\x07 and\x01 nul\x00 del\x7f").text == "bell and nul del"


def test_smart_quotes_in_python_frame() -> None:
    raw = "  File “/srv/app/worker.py”, line 12, in ‘run’"
    assert one(raw).text == "  File \"/srv/app/worker.py\", line 12, in 'run'"


# --- prefixes -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "text", "rank"),
    [
        (
            "[2031-02-03 04:05:06 TP3] Scheduler hit an exception",
            "Scheduler hit an exception",
            "TP3",
        ),
        ("[2031-02-03 04:05:06 DP1 TP5] Load weight end.", "Load weight end.", "DP1 TP5"),
        ("[2031-02-03 04:05:06] Using KV cache dtype", "Using KV cache dtype", None),
        ("(VllmWorker rank=2 pid=5150) RuntimeError: x", "RuntimeError: x", "rank=2"),
        ("(RayWorkerWrapper pid=2077, ip=10.9.8.7) hello", "hello", "pid=2077"),
        ("(EngineCore_DP3 pid=88) crashed", "crashed", "DP3"),
        ("(Worker_PP1_TP2_EP3 pid=91) crashed", "crashed", "PP1_TP2_EP3"),
        ("(VllmWorker TP0 pid=118) crashed", "crashed", "TP0"),
        ("(VllmWorker DP1 TP3 pid=7) crashed", "crashed", "DP1 TP3"),
        ("(pid=4711) raylet says hi", "raylet says hi", "pid=4711"),
        ("[rank3]: torch.OutOfMemoryError: x", "torch.OutOfMemoryError: x", "rank3"),
        ("[rank12]:[W ProcessGroup.cpp:9] warn", "[W ProcessGroup.cpp:9] warn", "rank12"),
        ("[1,6]<stdout>: step 5 done", "step 5 done", "1,6"),
        (
            '[default3]:  File "/srv/run.py", line 9, in main',
            '  File "/srv/run.py", line 9, in main',
            "default3",
        ),
        ("[trainer12]:[rank12]: RuntimeError: x", "RuntimeError: x", "trainer12"),
        ("[2031-02-03T04:05:06.789Z] [stderr] RuntimeError: x", "RuntimeError: x", None),
        ("2031-02-03 04:05:06,789 - toolkit.engine - ERROR - died", "died", None),
        (
            "2031-02-03 04:05:06,789 - toolkit.engine - loaded - fine",
            "toolkit.engine - loaded - fine",
            None,
        ),
        (
            "[0,11]<stderr>:Traceback (most recent call last):",
            "Traceback (most recent call last):",
            "0,11",
        ),
        (
            "ERROR 01-02 02:39:17 worker_base.py:467]     logits = model(x)",
            "    logits = model(x)",
            None,
        ),
        ("INFO 03-04 05:06:07 [engine.py:88] Avg throughput", "Avg throughput", None),
        ("WARNING 12-31 23:59:59.123 [config.py:1] careful", "careful", None),
        ("2031-01-02T10:00:00.123456Z RuntimeError: y", "RuntimeError: y", None),
        ("2031-01-02T10:00:00.123456789+02:00 stderr F shipped", "shipped", None),
        (
            "2031-01-02 10:00:00,669 - INFO - toolkit.jit: Loading",
            "INFO - toolkit.jit: Loading",
            None,
        ),
        (
            "2031-01-02 10:00:00.123 | ERROR    | toolkit.server:main:42 - died",
            "died",
            None,
        ),
        ("infer-pod-7f9c2 | out of memory", "out of memory", "infer-pod-7f9c2"),
        ("gateway   | ValueError: bad", "ValueError: bad", "gateway"),
        ("serve-1  | ERROR 11-18 18:07:28 engine.py:36] boom", "boom", "serve-1"),
        ("Mar 03 10:00:00 gpu-node-7 python3[4321]: NCCL WARN x", "NCCL WARN x", None),
        ("E0102 10:00:00.123456 12345 server.cc:12] Check failed", "Check failed", None),
        (
            "E1105 18:09:29.303000 9336 Lib\\site-packages\\torch\\_inductor\\heur.py:715] boom",
            "boom",
            None,
        ),
        ("[10/01/2031-08:26:34] [TRT] [W] Skipping tactic 3", "[TRT] [W] Skipping tactic 3", None),
        ("[pod/infer-abc12/server] fatal", "fatal", "infer-abc12"),
        (
            "[ 8123.456789] NVRM: Xid (PCI:0000:3b:00): 79, x",
            "NVRM: Xid (PCI:0000:3b:00): 79, x",
            None,
        ),
        ("[Mon Mar  3 10:00:00 2031] NVRM: GPU lost", "NVRM: GPU lost", None),
        ("  | [rank0]: watchdog", "watchdog", "rank0"),
        (
            "[4321] [rank5]:[E0203 04:05:06.123456789 ProcessGroupNCCL.cpp:607] [Rank 5] Watchdog",
            "[E ProcessGroupNCCL.cpp:607] [Rank 5] Watchdog",
            "rank5",
        ),
    ],
)
def test_prefixes(raw: str, text: str, rank: str | None) -> None:
    assert one(raw) == LogLine(1, text, rank)


TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/srv/toolkit/loop.py", line 88, in run',
    "    self.step()",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
]


def test_docker_json_file_records_are_unwrapped() -> None:
    import json

    raw = "\n".join(
        json.dumps({"log": line + "\n", "stream": "stderr", "time": "2031-01-02T10:00:00Z"})
        for line in TRACEBACK
    )
    assert normalize(raw) == [LogLine(i + 1, line) for i, line in enumerate(TRACEBACK)]


def test_a_structured_record_holding_a_whole_traceback_is_split_at_its_markers() -> None:
    import json

    raw = json.dumps({"levelname": "ERROR", "message": "\n".join(TRACEBACK)})
    assert texts(raw) == TRACEBACK
    assert {line.number for line in normalize(raw)} == {1}


@pytest.mark.parametrize(
    "content",
    [
        '{"config": {"tp": 8}, "note": "no text key"}',
        '{"log": "not closed"',
        '{"log": 42}',
        "{'log': 'python repr, not JSON'}",
        '{"log": ' + "[" * 200_000 + "]" * 200_000 + "}",  # nested past json's recursion
    ],
)
def test_json_like_lines_without_a_text_field_are_kept(content: str) -> None:
    assert one(content) == LogLine(1, content, None)


@pytest.mark.parametrize("label", ["node07", "worker-1", "gpu-a100-3.cluster.local", "12"])
def test_host_labels_are_learned_from_a_traceback_and_stripped(label: str) -> None:
    raw = "\n".join([f"{label}: loading shards", *(f"{label}: {line}" for line in TRACEBACK)])
    lines = normalize(raw)
    # The first line is read before the label is known to be one; it loses it once the
    # traceback teaches it (the lines held back for width inference are relabelled).
    assert lines[0] == LogLine(1, "loading shards", label)
    assert lines[1:] == [LogLine(i + 2, line, label) for i, line in enumerate(TRACEBACK)]


def test_two_hosts_interleaved_keep_their_own_labels() -> None:
    rows = [f"{host}: {line}" for line in TRACEBACK for host in ("node07", "node08")]
    lines = normalize("\n".join(rows))
    assert [line.rank for line in lines] == ["node07", "node08"] * len(TRACEBACK)
    assert [line.text for line in lines[::2]] == TRACEBACK


@pytest.mark.parametrize(
    "rows",
    [
        # No digit: an ordinary word and a colon, even before a traceback.
        ["error: Traceback (most recent call last):", "error: something else"],
        # A label-like word never followed by a traceback or a frame.
        ["step10: loss 2.31", "step10: loss 2.29"],
        # Upper case: an exception name, not a host.
        ["CUDA12: Traceback (most recent call last):"],
    ],
)
def test_words_that_only_look_like_host_labels_are_kept(rows: list[str]) -> None:
    assert texts("\n".join(rows)) == rows


@pytest.mark.parametrize(
    ("raw", "level"),
    [
        (
            "(VllmWorker TP0 pid=118) WARNING 08-16 20:48:53 [custom_all_reduce.py:147] off",
            "WARNING",
        ),
        ("ERROR 01-02 02:39:17 worker_base.py:467] boom", "ERROR"),
        ("W0110 12:27:06.332000 158 torch/_dynamo/convert_frame.py:1551] recompiling", "WARNING"),
        ("E0102 10:00:00.123456 12345 server.cc:12] Check failed", "ERROR"),
        ("2031-01-02 10:00:00.123 | WARNING  | toolkit.server:main:42 - slow", "WARNING"),
        ("2031-02-03 04:05:06,789 - toolkit.engine - INFO - loaded", "INFO"),
        # Ray's C++ core logger: timestamp, level letter, pid, thread.
        ("[2031-02-03 04:05:06,789 E 808 17795] logging.cc:108: Unhandled exception", "ERROR"),
        # No level in the prefix (sglang), or no prefix at all.
        ("[2031-02-03 04:05:06 TP1] Decode transfer failed", None),
        ("RuntimeError: CUDA error: out of memory", None),
        # The level is the logger's, not a word of the message.
        ("[rank0]: WARNING text that only mentions a level", None),
        # logfmt records keep the level in a field (Go's slog: ollama/ollama#9160).
        ('time=2031-02-03T04:05:06.789Z level=WARN source=sched.go:646 msg="slow"', "WARNING"),
        ('level=ERROR source=server.go:265 msg="runner terminated"', "ERROR"),
        ('msg="a message that says level=ERROR " ok', None),
    ],
)
def test_the_level_a_prefix_names_is_kept(raw: str, level: str | None) -> None:
    assert one(raw).level == level
    if raw.startswith("[2031-02-03 04:05:06,789 E"):
        assert one(raw).text == "logging.cc:108: Unhandled exception"


def test_lines_differing_only_in_level_are_equal() -> None:
    assert LogLine(3, "x", "TP0", "WARNING") == LogLine(3, "x", "TP0")


def test_markdown_bold_around_pasted_lines_is_dropped() -> None:
    raw = (
        "[**TensorRT-LLM][ERROR] frob failed\n"
        "[TensorRT-LLM][ERROR] Encountered an error in forward function: frob\n"
        "[TensorRT-LLM][WARNING] Step function failed, continuing.**"
    )
    assert texts(raw) == [
        "[TensorRT-LLM][ERROR] frob failed",
        "[TensorRT-LLM][ERROR] Encountered an error in forward function: frob",
        "[TensorRT-LLM][WARNING] Step function failed, continuing.",
    ]
    assert texts("**RuntimeError: CUDA error: out of memory**") == [
        "RuntimeError: CUDA error: out of memory"
    ]


@pytest.mark.parametrize(
    "content",
    [
        "    return self._call_impl(*args, **kwargs)",
        "x = a ** b",
        "**kwargs and **options were passed",
        "--- separators *** ---",
    ],
)
def test_double_stars_inside_code_are_kept(content: str) -> None:
    if content.startswith("**"):
        # a line that opens with ** loses only that marker
        assert texts(content) == [content[2:]]
    else:
        assert texts(content) == [content]


def test_nested_prefixes_keep_the_most_specific_rank() -> None:
    raw = "(Worker pid=700) (Worker_TP1 pid=700) ERROR 03-05 09:56:09 [executor.py:880] [1/11] nvcc"
    assert one(raw) == LogLine(1, "[1/11] nvcc", "TP1")
    raw = "api-1  | 2031-01-02T10:00:00Z [2031-01-02 10:00:00 TP2] Decode failed"
    assert one(raw) == LogLine(1, "Decode failed", "TP2")


@pytest.mark.parametrize(
    "content",
    [
        "[TensorRT-LLM][ERROR] CUDA runtime error in cudaMalloc: out of memory",
        "[TensorRT-LLM][WARNING] tactic skipped",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "INFO:     Waiting for application startup.",
        "ERROR: could not bind",
        "[E ProcessGroupNCCL.cpp:475] [Rank 4] Watchdog caught collective operation timeout",
        "(most recent call first):",
        "(rank 3) finished",
        "2 GPUs | 80 GB each",
        "| GPU | Memory |",
        "dmesg | grep -i xid",
        "[1/11] /usr/local/cuda/bin/nvcc -c kernel.cu",
        "host-a:1234:5678 [0] NCCL INFO Bootstrap",
        "Error 03-04 is not a level",
        "[sm90]: no kernel image",
        "[1.5] seconds is not a dmesg stamp",
        "[stderr]: no blank after it",
    ],
)
def test_content_that_looks_like_a_prefix_is_kept(content: str) -> None:
    assert one(content) == LogLine(1, content, None)


# --- chat / markdown ------------------------------------------------------------------------


def test_fences_quotes_details_entities_backticks() -> None:
    raw = "\n".join(
        [
            "<details><summary>Full log</summary>",  # 1
            "",  # 2
            "```txt",  # 3
            "x &lt; y &amp;&amp; a &gt; b &quot;q&quot; &#39;s&#39;",  # 4
            "```",  # 5
            "</details>",  # 6
            "> > nested quote",  # 7
            ">quoted without space",  # 8
            "~~~",  # 9
            "inside tilde fence",  # 10
            "~~~",  # 11
            "`RuntimeError: wrapped in backticks`",  # 12
            "`a` and `b` stays",  # 13
        ]
    )
    assert texts(raw) == [
        "Full log",
        "",
        "",
        "x < y && a > b \"q\" 's'",
        "",
        "",
        "nested quote",
        "quoted without space",
        "",
        "inside tilde fence",
        "",
        "RuntimeError: wrapped in backticks",
        "`a` and `b` stays",
    ]


def test_inline_code_spread_over_several_lines() -> None:
    # One backtick opens the first line of a multi-line paste and one closes the last; the
    # prefixes behind them are then read as usual (sgl-project/sglang#3932).
    plain = [
        "[rank6]:[E1107 03:21:09.4410 ProcessGroupNCCL.cpp:616] [Rank 6] Watchdog caught",
        "[rank6]:[E1107 03:21:09.4417 ProcessGroupNCCL.cpp:1785] [PG ID 1] Timeout at work 9",
    ]
    wrapped = normalize("\n".join(["`" + plain[0], plain[1] + "`"]))
    assert wrapped == normalize("\n".join(plain))
    assert [line.rank for line in wrapped] == ["rank6", "rank6"]
    # A hard wrap inside the span keeps its cut: the blank before the wrap still joins words.
    # (The first physical line is 80 wide, a terminal width, and ends in the cut's blank.)
    wrapped_cut = (
        "`RuntimeError: CUDA error: an illegal memory access was encountered by kernel 3 \n"
    )
    wrapped_cut += "of fused_moe_grouped_gemm`"
    assert texts(wrapped_cut) == [
        "RuntimeError: CUDA error: an illegal memory access was encountered by kernel 3"
        " of fused_moe_grouped_gemm"
    ]
    assert texts("a lone ` in the middle stays\nthe `num_stages` knob stays") == [
        "a lone ` in the middle stays",
        "the `num_stages` knob stays",
    ]


def test_entities_that_would_invent_letters_are_left_alone() -> None:
    assert one("&#65; &copy; &amp;lt;").text == "&#65; &copy; &lt;"


def test_quote_marker_inside_a_fence_is_content() -> None:
    raw = "```\n>>> import torch\n> not a quote here\n```\n> quoted again"
    assert texts(raw) == ["", ">>> import torch", "> not a quote here", "", "quoted again"]


def test_fence_inside_quote_only_strips_the_quote_depth_it_opened_at() -> None:
    raw = "> ```\n> >>> x = 1\n> ```"
    assert texts(raw) == ["", ">>> x = 1", ""]


def test_fence_glued_to_content() -> None:
    raw = (
        "```Traceback (most recent call last):\n"
        '  File "/a.py", line 1, in <module>\n'
        "KeyError: 'k'```"
    )
    assert normalize(raw) == [
        LogLine(1, "Traceback (most recent call last):"),
        LogLine(2, '  File "/a.py", line 1, in <module>'),
        LogLine(3, "KeyError: 'k'"),
    ]
    assert one("```ValueError: one line```").text == "ValueError: one line"


def test_everything_combined() -> None:
    """ANSI inside a rank prefix inside a fence inside a quote, with entities and CRLF."""
    raw = (
        "> Here is my log:\r\n"
        "> ```text\r\n"
        f"> {ESC}[36m(VllmWorker rank=5 pid=3141){ESC}[0m ERROR 06-07 08:09:10 "
        "[executor.py:470] RuntimeError: size &lt;= 0\r\n"
        f"> {ESC}[36m(VllmWorker rank=5 pid=3141){ESC}[0m ERROR 06-07 08:09:10 "
        '[executor.py:470]   File "/srv/x.py", line 3, in f\r\n'
        "> ```\r\n"
    )
    assert normalize(raw) == [
        LogLine(1, "Here is my log:"),
        LogLine(2, ""),
        LogLine(3, "RuntimeError: size <= 0", "rank=5"),
        LogLine(4, '  File "/srv/x.py", line 3, in f', "rank=5"),
        LogLine(5, ""),
    ]


# --- soft wraps -----------------------------------------------------------------------------


def test_cpp_template_frame_continued_on_next_line_is_joined() -> None:
    raw = (
        "#4  0x00007fabc0012345 in cutlass::Kernel<toolkit::GemmShape<128, 256,\n"
        "64>, toolkit::Epilogue<float> >(Params) () from /opt/lib/libkern.so\n"
        "#5  0x00007fabc0054321 in main ()\n"
    )
    assert normalize(raw) == [
        LogLine(
            1,
            "#4  0x00007fabc0012345 in cutlass::Kernel<toolkit::GemmShape<128, 256, 64>, "
            "toolkit::Epilogue<float> >(Params) () from /opt/lib/libkern.so",
        ),
        LogLine(3, "#5  0x00007fabc0054321 in main ()"),
    ]


def test_python_frame_cut_at_80_columns_is_joined() -> None:
    head = '  File "/home/user/venvs/serve/lib/python3.11/site-packages/toolkit/engines/work'
    assert len(head) == 80
    raw = head + '\ner.py", line 88, in step\n    self.go()\n'
    assert normalize(raw) == [
        LogLine(
            1,
            '  File "/home/user/venvs/serve/lib/python3.11/site-packages/toolkit/engines/'
            'worker.py", line 88, in step',
        ),
        LogLine(3, "    self.go()"),
    ]


@pytest.mark.parametrize(
    "template",
    [
        "frame #{n}: frob::recurse(int) + 0x1c (0x7f00{n:08x} in /opt/lib/libfrob.so)",
        "#{n} 0x00007f00{n:08x} in frob::recurse (depth=7) at /src/frob/recur.cc:1234",
    ],
)
def test_deep_recursion_frames_as_wide_as_a_terminal_stay_apart(template: str) -> None:
    # Past frame 9,999 a frame line of a recursion dump can fill exactly 80 columns; it must
    # not be taken for the cut head of the frame before it (a million-frame dump was
    # re-joined eight lines at a time).
    rows = [template.format(n=n) for n in range(123_450, 123_470)]
    assert {len(row) for row in rows} == {80}
    lines = normalize("\n".join(rows))
    assert [line.text for line in lines] == rows


def test_multi_line_wrap_is_joined_up_to_the_limit() -> None:
    head = "frame #3: toolkit::launch<toolkit::Tile<"
    parts = [f"Arg{i}," for i in range(MAX_JOINED_LINES + 3)]
    lines = normalize("\n".join([head, *parts]))
    assert lines[0].number == 1
    assert lines[0].text.startswith(head + "Arg0, Arg1,")
    assert len(lines) == 1 + (len(parts) - (MAX_JOINED_LINES - 1))
    assert lines[1].number == MAX_JOINED_LINES + 1


@pytest.mark.parametrize(
    "raw",
    [
        # next line is itself a frame
        "#1  0x0000000000401000 in f<int, (char)\n#2  0x0000000000402000 in main ()",
        # next line is indented code, not a continuation
        '  File "/a/b.py", line 3, in f\n    g(x)',
        # balanced frame that is not at a wrap width
        "frame #0: c10::Error::Error() + 0x1 (0x7f in /lib/libc10.so)\nnext words here",
        # not a frame at all, even if unbalanced
        "Loading shards (3 of 8\ncontinues here",
        # next line starts a new record
        "frame #2: toolkit::run<float,\nRuntimeError: boom",
        # next line has its own log prefix
        "frame #2: toolkit::run<float,\n[2031-01-01 00:00:00 TP0] later",
        # next line is blank
        "frame #2: toolkit::run<float,\n\ntrailing",
    ],
)
def test_not_joined(raw: str) -> None:
    assert [line.number for line in normalize(raw)] == list(range(1, len(split_lines(raw)) + 1))


# --- wrap widths inferred from the text -------------------------------------------------------

# Invented messages, long enough to be cut several times at every width tested.
NCCL_MESSAGE = (
    "torch.distributed.DistBackendError: NCCL communicator on rank 5 of 16 failed during "
    "ncclCommInitRankConfig after 1800000 ms; the proxy thread reported ncclRemoteError while "
    "connecting to peer 11 over NET/IB/mlx9_3:1 at 10.42.7.19<45821>, which usually means the "
    "peer process exited first or the fabric dropped the queue pair; set NCCL_DEBUG=INFO on "
    "every rank to see which side gave up first"
)
OOM_MESSAGE = (
    "torch.OutOfMemoryError: tried to reserve 7.25 GiB for the paged attention workspace of "
    "batch 31 but device 2 has 79.10 GiB in total, 3.02 GiB free, 71.96 GiB held by this "
    "process and 4.12 GiB by the others, so lower max_num_seqs or the memory fraction"
)


def _cut(text: str, width: int) -> list[str]:
    """What a terminal ``width`` columns wide leaves of one long line."""
    return [text[i : i + width] for i in range(0, len(text), width)]


def _log_around(pieces: list[str]) -> str:
    return "\n".join(["[2031-05-06 07:08:09 TP5] scheduler loop started", *pieces, "done"]) + "\n"


@pytest.mark.parametrize("width", [72, 116, 132, 150])
def test_message_cut_at_any_width_is_rejoined(width: int) -> None:
    """72 and 116 are in no list of terminal widths: the cut lines themselves show them."""
    pieces = _cut(NCCL_MESSAGE, width)
    assert len(pieces) >= 3 and len(pieces[-1]) < width
    lines = normalize(_log_around(pieces))
    assert lines == [
        LogLine(1, "scheduler loop started", "TP5"),
        LogLine(2, NCCL_MESSAGE),
        LogLine(2 + len(pieces), "done"),
    ]


def test_message_cut_into_three_lines_at_116_is_rejoined() -> None:
    """The smallest case: two full lines of 116 and the rest (80/100/120 always joined)."""
    message = NCCL_MESSAGE[:300]
    assert [len(p) for p in _cut(message, 116)] == [116, 116, 68]
    assert texts("\n".join(_cut(message, 116))) == [message]


def test_inferred_width_is_learned_for_the_rest_of_the_log() -> None:
    """Once a paste shows its width, a later line cut only once at it is re-joined too."""
    short = OOM_MESSAGE[:180]
    raw = "\n".join([*_cut(NCCL_MESSAGE, 116), "waiting for peers", *_cut(short, 116)])
    assert texts(raw) == [NCCL_MESSAGE, "waiting for peers", short]
    assert list(normalize_lines(enumerate(split_lines(raw), 1))) == normalize(raw)


def test_console_padding_to_an_inferred_width_ends_the_message() -> None:
    """A console that pads every line to its width: padding ends a message, cuts join."""
    width = 108
    padded = [p.ljust(width) for p in _cut(OOM_MESSAGE, width)]
    raw = "\n".join([*padded, "next record".ljust(width)])
    assert texts(raw) == [OOM_MESSAGE, "next record"]


def test_wrapped_prefixed_records_stay_separate_records() -> None:
    """Each log record's prefix starts a new one, even on a line right after a cut."""
    width = 116
    records = [
        f"[2031-05-06 07:08:{10 + i} TP{i}] " + OOM_MESSAGE[i * 7 :][: 170 - len(str(i))]
        for i in range(4)
    ]
    raw = "\n".join(piece for record in records for piece in _cut(record, width))
    lines = normalize(raw)
    assert [line.rank for line in lines] == ["TP0", "TP1", "TP2", "TP3"]
    assert [line.number for line in lines] == [1, 3, 5, 7]


def test_table_of_equal_width_rows_is_not_joined() -> None:
    border = "+" + "-" * 86 + "+"
    rows = [
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile ECC  Mig |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute |",
        "|   0  Acme X900                      On  |   00000000:17:00.0 Off |        0  Default |",
        "|   1  Acme X900                      On  |   00000000:2A:00.0 Off |        0  Default |",
    ]
    assert {len(row) for row in rows} == {len(border)}
    raw = "\n".join([border, *rows, border, "Processes: none"])
    assert texts(raw) == [border, *rows, border, "Processes: none"]


def test_table_without_borders_is_not_joined() -> None:
    """Rows ending in digits look cut, but they agree on their columns."""
    rows = [
        "prefill_chunked       20480        812.55            25204.13      97.50      61.25",
        "decode_graphed         4096         31.07           131829.77      88.10      61.25",
        "spec_verify            8192        140.33            58375.27      91.45      62.50",
        "mixed_batch           16384        640.90            25564.07      95.05      63.75",
    ]
    assert len({len(row) for row in rows}) == 1
    raw = "\n".join(["phase              tokens    latency_ms    throughput_tok_s", *rows, "end"])
    assert texts(raw) == raw.split("\n")


def test_progress_bars_of_one_width_are_not_joined() -> None:
    bars = [
        f"Capturing CUDA graphs (bs={bs:>3} free_mem=41.{bs % 10}0 GB): {pct:>3}%|{fill}| "
        f"{n}/8 [00:0{n}<00:0{8 - n},  1.9{n}it/s]"
        for n, (bs, pct, fill) in enumerate(
            [(256, 12, "#         "), (128, 25, "##        "), (64, 38, "###       ")], 1
        )
    ]
    assert len({len(bar) for bar in bars}) == 1
    raw = "\n".join([*bars, "graphs captured"])
    assert texts(raw) == raw.split("\n")


def test_fixed_width_records_are_not_joined() -> None:
    """Records of one width, with a timestamp or without one, are records, not pieces."""
    stamped = [
        f"2031-05-06T07:08:0{i}Z step={120 + i:06d} loss=2.43{i}1 grad=0.81{i}3 lr=3.0e-05 tok=18{i}34"
        for i in range(4)
    ]
    bare = [
        f"step {120 + i:06d} | loss 2.43{i}1 | grad_norm 0.81{i}3 | lr 3.0e-05 | tokens 18{i}34"
        for i in range(4)
    ]
    for records in (stamped, bare):
        assert len({len(r) for r in records}) == 1
        raw = "\n".join([*records, "eval skipped"])
        assert [line.number for line in normalize(raw)] == [1, 2, 3, 4, 5]


def test_hand_wrapped_text_with_two_equal_lines_is_not_joined() -> None:
    """A message wrapped at word boundaries by a person: below 100 columns, two equal
    lines are chance (a third cut would be needed)."""
    lines = [
        "The installed driver is older than the toolkit this wheel targets,",
        "so kernels built for the newer toolkit cannot be loaded at runtime",
        "on this machine; upgrade the driver or install a matching wheel.",
    ]
    assert len(lines[0]) == len(lines[1]) > len(lines[2])
    assert texts("\n".join(lines)) == lines


def test_one_cut_at_an_unlisted_width_is_left_alone() -> None:
    """One cut cannot be told from a log's widest line ending in a word: kept apart."""
    head = "kv_pool_reserve: requested 9216 blocks for 4 layers groups but the allocator has only"
    raw = f"{head}\nreserve_failed: giving up after 3 retries\n"
    assert len(head) not in WRAP_WIDTHS
    assert texts(raw) == [head, "reserve_failed: giving up after 3 retries"]


def test_a_wider_line_nearby_refutes_the_width() -> None:
    """No terminal leaves a line wider than itself: a wider line nearby means no wrap."""
    wide = "x-trace " + "abcdefgh " * 15 + "end"
    assert len(wide) > 116 and len(wide) not in WRAP_WIDTHS
    pieces = _cut(NCCL_MESSAGE, 116)
    filler = [f"step {i}" for i in range(20)]
    for raw in ([wide, *filler, *pieces], [*pieces, *filler, wide]):
        assert texts("\n".join(raw)) == raw


def test_learned_width_does_not_join_table_rows() -> None:
    """A width learned from a wrapped message, then a table exactly that wide."""
    width = 116
    row = "| {:<3} | {:<46} | {:>12} | {:>12} | {:>10} | {:>14} |"
    rows = [
        row.format(i, f"layers.{i}.mlp.experts.w13_weight", 4096 * (i + 1), 2 * i + 1, "bf16", i)
        for i in range(3)
    ]
    assert {len(r) for r in rows} == {width}
    raw = "\n".join([*_cut(NCCL_MESSAGE, width), *rows, "loaded"])
    assert texts(raw) == [NCCL_MESSAGE, *rows, "loaded"]


def test_inference_holds_a_bounded_window() -> None:
    """Streaming stays bounded: the first line comes out after a window, not at the end."""
    consumed = 0

    def numbered() -> Iterator[tuple[int, str]]:
        nonlocal consumed
        for number in range(1, 100_001):
            consumed = number
            yield number, f"line {number} of a long and ordinary log that nobody wrapped"

    first = next(normalize_lines(numbered()))
    assert first.number == 1
    assert consumed < 1_000


# --- one-line pastes ------------------------------------------------------------------------


def test_python_traceback_on_one_line_is_split() -> None:
    raw = (
        'Traceback (most recent call last):   File "/srv/main.py", line 10, in <module>     '
        'run()   File "/srv/run.py", line 4, in run     raise ValueError("bad") ValueError: bad'
    )
    assert normalize("before\n" + raw) == [
        LogLine(1, "before"),
        LogLine(2, "Traceback (most recent call last):"),
        LogLine(2, '  File "/srv/main.py", line 10, in <module>'),
        LogLine(2, "    run()"),
        LogLine(2, '  File "/srv/run.py", line 4, in run'),
        LogLine(2, '    raise ValueError("bad")'),
        LogLine(2, "ValueError: bad"),
    ]


def test_c10_error_on_one_line_is_split() -> None:
    raw = (
        "[rank1]: RuntimeError: CUDA error: device-side assert triggered Exception raised from "
        "check at /src/c10/cuda/Check.cpp:43 (most recent call first): frame #0: "
        "c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f01 in /lib/libc10.so) "
        "frame #1: c10::cuda::check(int) + 0x10 (0x7f02 in /lib/libc10_cuda.so)"
    )
    lines = normalize(raw)
    assert [line.text.split(" ")[0] for line in lines] == [
        "RuntimeError:",
        "Exception",
        "frame",
        "frame",
    ]
    assert {(line.number, line.rank) for line in lines} == {(1, "rank1")}


def test_gdb_and_trtllm_frames_on_one_line_are_split() -> None:
    gdb = "#0  0x00007f1 in raise () from /lib/libc.so.6 #1  0x00007f2 in abort () from /lib/c.so"
    assert texts(gdb) == [
        "#0  0x00007f1 in raise () from /lib/libc.so.6",
        "#1  0x00007f2 in abort () from /lib/c.so",
    ]
    trt = (
        "terminate called after throwing an instance of 'toolkit::Error' what():  "
        "[TensorRT-LLM][ERROR] Assertion failed: no tactic (/src/gemm.cpp:77) "
        "1       0x7f00aa11bb22 toolkit::throwError(char const*) + 82 "
        "2       0x7f00aa11bb33 toolkit::Gemm::run() + 17"
    )
    assert texts(trt) == [
        "terminate called after throwing an instance of 'toolkit::Error'",
        "what(): [TensorRT-LLM][ERROR] Assertion failed: no tactic (/src/gemm.cpp:77)",
        "1       0x7f00aa11bb22 toolkit::throwError(char const*) + 82",
        "2       0x7f00aa11bb33 toolkit::Gemm::run() + 17",
    ]


def test_prefixed_worker_log_that_lost_its_newlines_is_split() -> None:
    # Every record of a worker's traceback once began with the same process + logger prefix.
    pre = "(Worker pid=51) ERROR 02-01 10:00:00 [executor.py:90] "
    raw = (
        f'{pre}Traceback (most recent call last): {pre}  File "/srv/run.py", line 4, in step '
        f"{pre}    out = model(x) {pre}RuntimeError: NPU out of memory."
    )
    assert normalize(raw) == [
        LogLine(1, "Traceback (most recent call last):", "pid=51"),
        LogLine(1, '  File "/srv/run.py", line 4, in step', "pid=51"),
        LogLine(1, "    out = model(x)", "pid=51"),
        LogLine(1, "RuntimeError: NPU out of memory.", "pid=51"),
    ]


def test_collapsed_line_that_starts_inside_a_frame_keeps_the_code_under_it() -> None:
    # The paste's previous physical line ended mid-path; this one starts with the frame's rest.
    pre = "(EngineCore_DP0 pid=8) ERROR 05-05 05:05:05 [core.py:1] "
    raw = f'lib/app/layer.py", line 9, in merge {pre}y = torch.cat(parts) {pre}ValueError: bad'
    assert texts(raw) == [
        'lib/app/layer.py", line 9, in merge',
        "    y = torch.cat(parts)",
        "ValueError: bad",
    ]


@pytest.mark.parametrize(
    "content",
    [
        "INFO 02-01 10:00:00 [ray.py:12] stopping (Worker pid=51) and (Worker pid=52) after a fault",
        "WARNING 02-01 10:00:00 [ray.py:12] restarting (Worker pid=51) since it stopped replying",
        "see (Worker pid=51) then (Worker pid=51)",
    ],
)
def test_worker_mentions_in_a_message_are_not_split(content: str) -> None:
    # Two different workers, or one mention, are a message; a short line is never a paste.
    assert len(normalize(content)) == 1


@pytest.mark.parametrize(
    "content",
    [
        "[TensorRT-LLM][ERROR] [TensorRT-LLM][ERROR] CUDA runtime error in cudaMallocAsync: oom",
        "Error in model execution: RuntimeError: CUDA error: an illegal memory access was seen",
        'ERROR: see File "/srv/config.py", line 3 for how the value was computed in this run',
        '  File "/srv/toolkit/very/long/path/to/module/with/many/parts/worker.py", line 1, in run',
    ],
)
def test_long_ordinary_lines_are_not_split(content: str) -> None:
    assert one(content).text == content


# --- bad input ------------------------------------------------------------------------------


def test_empty_and_blank() -> None:
    assert normalize("") == []
    assert normalize("\n") == [LogLine(1, "")]
    assert normalize("\n\n \n") == [LogLine(1, ""), LogLine(2, ""), LogLine(3, "")]


def test_only_nuls_and_replacement_chars() -> None:
    assert normalize("\x00\x00\x00") == [LogLine(1, "")]
    assert one("bad \ufffd\ufffd bytes").text == "bad \ufffd\ufffd bytes"


def test_ten_megabyte_single_lines_finish() -> None:
    size = 10 << 20
    nasty = [
        "x" * size,
        ('File "' + "a" * 50) * (size // 56),
        ("\x1b]" + "b" * 30) * (size // 32),
        "[" * size,
        "(pid=1 " * (size // 7),
        "A." * (size // 2),
        " " * size + "|",
        "<" * size,
        ("frame #1: " + "c" * 90) * (size // 100),
        "ab\b" * (size // 3),
    ]
    for raw in nasty:
        lines = normalize(raw)
        assert lines and all(line.number == 1 for line in lines)


def test_first_line_offset_and_streaming_agree() -> None:
    raw = "a\n[rank2]: b\n```\nframe #1: f<int,\ng>()\n"
    lines = normalize(raw, first_line=41)
    assert [line.number for line in lines] == [41, 42, 43, 44]
    streamed = list(normalize_lines(enumerate(split_lines(raw), 41)))
    assert streamed == lines


# --- properties -----------------------------------------------------------------------------


def original_lines(text: str, first_line: int = 1) -> list[str]:
    """Physical lines as an editor numbers them: \\n, or \\r in a whole text without \\n."""
    if not text:
        return []
    sep = "\r" if first_line == 1 and "\n" not in text and "\r" in text else "\n"
    lines = text.split(sep)
    return lines[:-1] if lines[-1] == "" else lines


def alnum(text: str) -> str:
    return "".join(ch for ch in text if ch.isalnum())


def is_subsequence(needle: str, haystack: str) -> bool:
    it = iter(haystack)
    return all(ch in it for ch in needle)


def check_points_at_origin(raw: str, lines: Sequence[LogLine], first_line: int = 1) -> None:
    """Every LogLine's letters/digits come, in order, from its own line onward.

    Normalisation only removes or re-spaces characters (it never invents a letter or a
    digit), so the alphanumeric characters of ``text`` must be a subsequence of those of
    original line ``number`` followed by the lines a soft-wrap join may have consumed
    (at most ``MAX_JOINED_LINES``), and the first of them must be in line ``number``
    itself.  Pieces of a split one-line paste all satisfy it against the same line.
    """
    origin = original_lines(raw, first_line)
    previous = first_line
    for line in lines:
        index = line.number - first_line
        assert 0 <= index < len(origin), line
        assert line.number >= previous
        previous = line.number
        got = alnum(line.text)
        window = "".join(alnum(text) for text in origin[index : index + MAX_JOINED_LINES])
        assert is_subsequence(got, window), (line, origin[index])
        if got:
            assert got[0] in alnum(origin[index]), (line, origin[index])


FRAGMENTS = [
    "\n",
    "\r\n",
    "\r",
    "\b",
    "\x00",
    "\t",
    " ",
    "  ",
    ESC,
    f"{ESC}[0m",
    f"{ESC}[1;31m",
    f"{ESC}]0;t\x07",
    "[0m",
    "[m",
    "> ",
    ">",
    "```",
    "```py",
    "~~~",
    "`",
    "<details>",
    "<summary>",
    "&lt;",
    "&amp;",
    "&#39;",
    "&#65;",
    "“",
    "\u200b",
    "\u00a0",
    "[2031-01-02 03:04:05 TP1] ",
    "[rank7]: ",
    "(VllmWorker rank=3 pid=9) ",
    "(Ray pid=5, ip=1.2.3.4) ",
    "ERROR 01-02 03:04:05 w.py:1] ",
    "2031-01-02T03:04:05Z ",
    "svc-1  | ",
    "  | ",
    "[1,2]<stdout>: ",
    "E0102 10:00:00.123456 99 f.cc:1] ",
    "Mar 03 10:00:00 h p[1]: ",
    "Traceback (most recent call last):",
    '  File "/p/a.py", line 3, in f',
    "    g()",
    "frame #0: f<int,",
    "#1  0x0000000000001234 in g () ",
    "1       0x7f0011223344 h() + 1 ",
    "terminate called ",
    "what():  ",
    "[TensorRT-LLM][ERROR] ",
    "RuntimeError: boom",
    "<",
    "(",
    '"',
    "[",
]

raw_logs = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=12)),
    max_size=60,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(raw_logs, st.integers(min_value=1, max_value=10**6))
def test_property_numbers_point_at_the_original_line(raw: str, first_line: int) -> None:
    lines = normalize(raw, first_line)
    check_points_at_origin(raw, lines, first_line)
    split = split_lines(raw, cr_endings=first_line == 1)
    assert lines == list(normalize_lines(enumerate(split, first_line)))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_property_never_raises_on_any_text(raw: str) -> None:
    check_points_at_origin(raw, normalize(raw))


plain_lines = st.lists(
    st.from_regex(r"[a-z][a-z ,.:;=]{0,40}[a-z]", fullmatch=True), min_size=1, max_size=20
)


@settings(max_examples=200, deadline=None)
@given(plain_lines)
def test_property_plain_prose_is_untouched(lines: list[str]) -> None:
    assert normalize("\n".join(lines)) == [LogLine(i, t) for i, t in enumerate(lines, 1)]


# --- real logs (skipped when ../shared is absent) ----------------------------------------------


@pytest.fixture(scope="module")
def corpus_dir() -> Path:
    shared = Path(__file__).resolve().parents[1].parent / "shared"
    corpus = shared / "corpus" / "dev"
    if not corpus.is_dir():
        pytest.skip("shared corpus not available")
    return corpus


def test_corpus_logs_keep_their_line_numbers_and_lose_their_prefixes(corpus_dir: Path) -> None:
    from diagnose.ingest.read import iter_lines, read_text

    logs = sorted(corpus_dir.glob("*.log"))
    assert logs
    leftovers = ("(VllmWorker", "(EngineCore", "(RayWorker", "[rank", ESC, "```")
    for path in logs:
        raw = read_text(path)
        lines = normalize(raw)
        check_points_at_origin(raw, lines)
        assert list(normalize_lines(enumerate(iter_lines(path), 1))) == lines, path.name
        for line in lines:
            assert not line.text.lstrip().startswith(leftovers), (path.name, line)


def test_a_repeated_record_does_not_teach_a_terminal_width() -> None:
    # Two copies of one 119-column warning, each followed by a shorter line: one piece of
    # evidence, not two, so neither copy swallows the line after it (deepseek-ai/DeepEP#303).
    head = "/opt/shmem/src/host/transport/transport.cpp:nvshmemi_transport_init:282: " + (
        "init failed for transport: IBGDA"
    )
    head = head.ljust(118, "x") + "A"
    rest = "WARN: device mlx5_3 cannot allocate buffer on the specified memory type. Skipping..."
    raw = "\n".join([head, rest, "", head, rest, ""])
    assert texts(raw)[:2] == [head, rest]


def test_tritons_ptxas_heading_is_not_the_rest_of_an_80_column_line() -> None:
    # Triton's own message is exactly 80 columns too; ours is written for the test.
    head = "pkg.errors.PTXASError: PTXAS error: the code generator of this toy kernel failed"
    assert len(head) == 80
    assert texts(head + "\n`ptxas` stderr:\nptxas fatal   : Unresolved extern\n")[:2] == [
        head,
        "`ptxas` stderr:",
    ]


def test_open_mpi_and_buildkit_prefixes() -> None:
    lines = normalize(
        "[trainer-03:00412] Signal: Floating point exception (8)\n"
        "#17 305.3   Error: Kernel compilation failed for csrc/a.cu: nvcc error:\n"
        "#1  0x00007f3a in main () at a.c:3\n"
    )
    assert [(line.text, line.rank) for line in lines] == [
        ("Signal: Floating point exception (8)", "trainer-03:00412"),
        ("  Error: Kernel compilation failed for csrc/a.cu: nvcc error:", None),
        ("#1  0x00007f3a in main () at a.c:3", None),
    ]


def test_a_loggers_file_tag_with_a_long_line_number_is_no_open_mpi_host() -> None:
    assert texts("[engine_core.py:12345] Engine started") == [
        "[engine_core.py:12345] Engine started"
    ]


def test_a_one_line_chat_message_is_split_at_its_code_fences() -> None:
    raw = (
        "When running ``` python -m sglang.launch_server --model-path org/model ``` I get ``` "
        "Cannot access gated repo for url https://huggingface.co/org/model/resolve/main/x.json. ```"
    )
    assert texts(raw) == [
        "When running",
        "python -m sglang.launch_server --model-path org/model",
        "I get",
        "Cannot access gated repo for url https://huggingface.co/org/model/resolve/main/x.json.",
    ]
    assert texts("x = 1 ``` ``` and more text that is long enough to be split at all") != []


def test_held_out_round_12_prefixes_and_suffixes() -> None:
    lines = normalize(
        "(RayWorkerWrapper pid=994) ERROR 01-29 07:44:33 worker_base.py:467] RuntimeError: x"
        " [repeated 14x across cluster]\n"
        "2031-04-12 21:57:39,467 xinference.api.restful_api 1 ERROR    ValueError: y\n"
        "[vllm]: (VllmWorkerProcess pid=91) ERROR 07-28 23:29:37 utils.py:226] RuntimeError: z\n"
        "[Autotuner]: Skipping tactic 3\n"
        "    [ic5:133017] Signal: Segmentation fault (11)\n"
    )
    assert [(line.text, line.rank, line.level) for line in lines] == [
        ("RuntimeError: x", "pid=994", "ERROR"),
        ("ValueError: y", None, "ERROR"),
        ("RuntimeError: z", "pid=91", "ERROR"),
        ("[Autotuner]: Skipping tactic 3", None, None),
        ("Signal: Segmentation fault (11)", "ic5:133017", None),
    ]


def test_buildkit_seconds_are_learned_from_a_traceback_they_prefix() -> None:
    raw = (
        "12.5 Collecting flash-attn\n"
        "272.6       Traceback (most recent call last):\n"
        '272.6         File "<string>", line 2, in <module>\n'
        "272.7       subprocess.CalledProcessError: Command 'ninja' returned 1.\n"
    )
    assert texts(raw) == [
        "12.5 Collecting flash-attn",  # before the traceback taught the shape: kept
        "      Traceback (most recent call last):",
        '        File "<string>", line 2, in <module>',
        "      subprocess.CalledProcessError: Command 'ninja' returned 1.",
    ]
    assert texts("3.5 GiB free of 24 GiB\n") == ["3.5 GiB free of 24 GiB"]


def test_a_level_word_starts_a_new_record_after_a_long_line() -> None:
    head = "vllm.engine.async_llm_engine.AsyncEngineDeadError: Task finished unexpectedly. " + (
        "See stack trace above for the actual cause." * 3
    )
    assert texts(head + "\nERROR:    Exception in ASGI application\n" + head + "\n") == [
        head,
        "ERROR:    Exception in ASGI application",
        head,
    ]


def test_a_logfmt_record_starts_a_new_record_after_a_line_at_a_terminal_width() -> None:
    head = (
        'time=2031-05-01T10:00:04.512Z level=INFO source=sched.go:470 msg="Load failed" model='
        + ("/m/blobs/sha256-" + "0f" * 60)
    )
    head += "x" * (250 - len(head))  # exactly a common terminal width
    assert len(head) == 250
    tail = 'time=2031-05-01T10:00:04.513Z level=ERROR source=server.go:265 msg="runner died"'
    assert texts(head + "\n" + tail + "\n") == [head, tail]
    bare = 'level=ERROR source=server.go:265 msg="runner died"'
    assert texts(head + "\n" + bare + "\n") == [head, bare]


def test_two_copies_of_a_line_that_differ_in_width_only_before_cleaning() -> None:
    # Found by the property test: one copy carried a closing fence, so the two had one text
    # but two widths; the width window's evidence count went negative.
    line = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. " + (
        "GPU 0 has a total capacity of 79.10 GiB of which 1.25 GiB is free."
    )
    assert texts(f"{line}```\n0\n{line}\n0") == [line, "0", line, "0"]


def test_a_flattened_worker_paste_cut_inside_a_quoted_word() -> None:
    raw = (
        "(SGLangWorker pid=38138) Exception: Capture cuda graph failed: Internal Triton PTX "
        "codegen error: (SGLangWorker pid=38138) ptxas fatal : Value 'sm_1\n"
        "20' is not defined for option 'gpu-name' (SGLangWorker pid=38138) Possible solutions:\n"
    )
    assert [(line.number, line.text, line.rank) for line in normalize(raw)] == [
        (
            1,
            "Exception: Capture cuda graph failed: Internal Triton PTX codegen error:",
            "pid=38138",
        ),
        (1, "ptxas fatal : Value 'sm_120' is not defined for option 'gpu-name'", "pid=38138"),
        (1, "Possible solutions:", "pid=38138"),
    ]


def test_an_open_quote_at_a_line_end_joins_only_the_line_that_closes_it() -> None:
    assert texts("the value 'sm_1\n20' is not defined\n") == ["the value 'sm_120' is not defined"]
    assert texts("I can't load 'model\nnext line\n") == ["I can't load 'model", "next line"]
    assert texts("it's 'abc\ndef\n") == ["it's 'abc", "def"]


def test_a_quoted_call_cut_after_a_comma_takes_its_argument_lines() -> None:
    raw = (
        "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling "
        "`cublasGemmStridedBatchedExFix(handle, opa, opb,\n"
        "(int)m, (int)n, (int)k, (void*)&falpha, a, CUDA_R_16BF,\n"
        "CUDA_R_16BF, (int)ldc, CUBLAS_GEMM_DEFAULT_TENSOR_OP)`\n"
        "next record\n"
    )
    lines = texts(raw)
    assert len(lines) == 2 and lines[1] == "next record"
    assert lines[0].endswith(
        "opb, (int)m, (int)n, (int)k, (void*)&falpha, a, CUDA_R_16BF, "
        "CUDA_R_16BF, (int)ldc, CUBLAS_GEMM_DEFAULT_TENSOR_OP)"
    )


def test_a_long_rank_record_cut_inside_a_word_takes_the_bare_line_after_it() -> None:
    head = "[rank4]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 462.00 MiB. " + (
        "GPU 4 has a total capacity of 79.11 GiB of which 462.56 MiB is free. Of the allocated memor"
    )
    raw = head + "\ny 74.57 GiB is allocated by PyTorch.\n[rank4]: next\n"
    assert [(line.number, line.text, line.rank) for line in normalize(raw)] == [
        (1, head[len("[rank4]: ") :] + "y 74.57 GiB is allocated by PyTorch.", "rank4"),
        (3, "next", "rank4"),
    ]
    # A short record, or a next line that starts a sentence, is left alone.
    assert len(texts("[rank4]: loading weights from disk\nmore output\n")) == 2


def test_a_long_line_cut_inside_a_word_takes_the_rest_of_the_word() -> None:
    head = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 232.00 MiB. GPU 0 has "
        + (
            "a total capacity of 23.57 GiB of which 154.25 MiB is free. Including non-PyTorch memory, "
            "this proce"
        )
    )
    rest = "ss has 23.40 GiB memory in use."
    assert texts(f"{head}\n{rest}\n") == [head + rest]
    # Padded to the width, or a short line: the next line is a line of its own.
    assert texts(f"{head}   \n{rest}\n") == [head, rest]
    assert texts(f"short line ending in proce\n{rest}\n") == ["short line ending in proce", rest]


def test_glog_with_an_iso_timestamp() -> None:
    [line] = normalize(
        "E2031-08-13T11:34:14+08:00.677000 1201 torch/_inductor/select_algorithm.py:2100] "
        "Runtime error during autotuning:"
    )
    assert (line.text, line.level) == ("Runtime error during autotuning:", "ERROR")


def test_a_trace_with_its_newlines_written_out_is_split() -> None:
    raw = (
        "[ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n): out of memory "
        "(/src/runtime/buffers.h:125)\\n1       0x7f45c6d96865 void acme::check<cudaError>"
        "(cudaError, char const*, char const*, int) + 149\\n2       0x7f45c8ab8d23 "
        "acme::runtime::BufferManager::gpu(unsigned long) const + 515\\n"
    )
    lines = normalize(raw)
    assert [ln.text for ln in lines] == [
        "[ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n): out of memory "
        "(/src/runtime/buffers.h:125)",
        "1       0x7f45c6d96865 void acme::check<cudaError>(cudaError, char const*, char const*,"
        " int) + 149",
        "2       0x7f45c8ab8d23 acme::runtime::BufferManager::gpu(unsigned long) const + 515",
    ]
    assert {ln.number for ln in lines} == {1}


def test_a_windows_path_is_not_an_escaped_newline() -> None:
    raw = 'File "C:\\new\\tools\\nightly\\run.py", line 3, in main: Error in C:\\nets\\x'
    assert [ln.text for ln in normalize(raw)] == [raw]


def test_two_list_items_are_not_a_cut_line_and_its_rest() -> None:
    first = "- four tactics fail with `Error Internal`. " + "y" * 136 + "."
    assert len(first) == 180  # exactly a common terminal width
    lines = normalize(first + "\n- The failing tactics need more shared memory.\n")
    assert [ln.text[:2] for ln in lines] == ["- ", "- "]


def test_a_sentence_ending_at_a_common_width_does_not_swallow_the_next_record() -> None:
    head = "[2026-01-02 10:00:00 TP0] Only use 24 SMs for the all-to-all. " + "w" * 117 + "."
    assert len(head) == 180  # exactly a common terminal width, ending a sentence
    path = "/build/comm/src/host/transport/transport.cpp:init:282: init failed for transport: X"
    lines = normalize(head + "\n" + path + "\nNext record. Still going.\n")
    assert [ln.text for ln in lines][-2:] == [path, "Next record. Still going."]


def test_a_spinner_glyph_after_a_sentence_at_the_width_starts_a_record() -> None:
    # A console spinner ("⠴ Transcribing...") is a status line of its own, not the rest of the
    # sentence before it; joined, its library error read as the sentence's line (round 372).
    head = "[2026-01-02 10:00:00 TP0] Only use 24 SMs for the all-to-all. " + "w" * 117 + "."
    assert len(head) == 180
    spinner = "\u2834 Transcribing... 0:00:00Could not locate cudnn_ops64_9.dll."
    lines = normalize(head + "\n" + spinner + "\nNext record. Still going.\n")
    assert [ln.text for ln in lines][-2:] == [spinner, "Next record. Still going."]


def test_a_compiler_diagnostic_after_a_command_at_the_width_starts_a_record() -> None:
    # nvcc's own "fatal :" line is a record, not the rest of the command line before it,
    # even when that line filled the terminal and ended mid-word (round 386).
    head = (
        "nvcc -ccbin g++ -gencode arch=compute_N,code=[sm_N,compute_N] " + "-Xab " * 22 + "-c xy.cu"
    )
    assert len(head) == 180
    fatal = "nvcc fatal   : Unsupported gpu architecture 'compute_N'"
    lines = normalize(head + "\n" + fatal + "\nMakefile:43: recipe for target 'x.o' failed\n")
    assert [ln.text for ln in lines][1] == fatal


def test_a_word_cut_after_its_full_stop_still_joins_its_rest() -> None:
    # The cut falls inside "file.py": the next line starts lower-case, so it is the rest.
    head = "RuntimeError: could not open the cache index " + "z" * 115 + " in /tmp/cache/file."
    assert len(head) == 180
    lines = normalize(head + "\npy (errno 2)\n")
    assert [ln.text for ln in lines] == [head + "py (errno 2)"]


def test_a_nested_tensorrt_llm_message_is_not_split_at_its_inner_tag() -> None:
    raw = (
        "[TensorRT-LLM][ERROR] Encountered error for requestId 42: Encountered an error in "
        "forward function: [TensorRT-LLM][ERROR] Assertion failed: blocks.empty() "
        "(/src/batch_manager/cache.cpp:160) 1 0x7fd6cf49d68d /opt/backends/libacme.so(+0x1668d) "
        "[0x7fd6cf49d68d] 2 0x7fd6cf4a4ebf /opt/backends/libacme.so(+0x1debf) [0x7fd6cf4a4ebf]"
    )
    texts = [ln.text for ln in normalize(raw)]
    assert texts[0].endswith("Assertion failed: blocks.empty() (/src/batch_manager/cache.cpp:160)")
    assert texts[1].startswith("1 0x7fd6cf49d68d") and len(texts) == 3
