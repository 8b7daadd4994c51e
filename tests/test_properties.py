"""Property tests of the whole pipeline: never raises, evidence points at the right line."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnose.api import diagnose_text

# Our own lines in the formats the rules read, plus noise around them.
POOL = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.10 GiB of which 1.25 GiB is free.",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "Traceback (most recent call last):",
    '  File "/srv/app/run.py", line 12, in main',
    "[rank3]:[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=7, OpType=ALLREDUCE) ran for 600021 milliseconds before timing out.",
    "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 131072, "
    "Hardware limit: 101376",
    "[TensorRT-LLM][ERROR] Assertion failed: Failed to initialize cutlass TMA WS grouped gemm. "
    "Error: Error Internal (/src/x.h:487)",
    "1       0x7f00aa100ca6 tensorrt_llm::common::throwRuntimeError(char const*, int, char const*)",
    "CUDA error: no kernel image is available for execution on the device",
    "The server is fired up and ready to roll!",
    "[2026-01-02 10:00:00 TP3] Decode batch. #running-req: 12, #token: 4096",
    'INFO:     127.0.0.1:5000 - "POST /generate HTTP/1.1" 200',
]
NOISE = st.sampled_from(
    ["", "\x1b[31m", "\x1b[0m", "> ", "```", "  ", "(VllmWorker rank=1 pid=7) "]
)
LINE = st.one_of(
    st.builds(lambda n, a, b: a + n + b, st.sampled_from(POOL), NOISE, NOISE),
    st.text(max_size=80),
)


def _alnum(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z]", "", text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(LINE, max_size=30), st.sampled_from(["\n", "\r\n"]))
def test_diagnosis_never_raises_and_evidence_points_home(lines: list[str], eol: str) -> None:
    text = eol.join(lines)
    d = diagnose_text(text)
    original = text.replace("\r\n", "\n").split("\n")
    for finding in d.findings:
        for ev in finding.evidence:
            if re.match(r"^[\w.]+ = ", ev.text):
                continue  # a context fact quotes its normalised value, not the line
            assert ev.line <= len(original)
            head = _alnum(ev.text)[:12]
            window = _alnum(" ".join(original[ev.line - 1 : ev.line + 3]))
            assert head in window, (ev, original[ev.line - 1])
    d.to_dict()
