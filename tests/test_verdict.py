"""The whole-log verdict: root vs cascade (in log order), survived vs fatal, unknown."""

from __future__ import annotations

from dataclasses import replace

import pytest

from diagnose.kb import load_kb
from diagnose.model import Evidence, Finding
from diagnose.verdict import decide


def _f(
    cause: str, line: int, conf: float = 0.8, fatal: bool = True, severity: str = "fatal"
) -> Finding:
    return Finding(
        rule_id=f"{cause}/x",
        cause=cause,
        title=cause,
        severity=severity,
        fatal=fatal,
        confidence=conf,
        tier="pattern",
        region_index=0,
        evidence=(Evidence(line, "text", "match.any[0]"),),
    )


def test_consequence_after_its_root_is_cascade() -> None:
    kb = load_kb()
    ima, timeout = _f("illegal-memory-access", 10, 0.7), _f("nccl-timeout", 40, 0.9)
    v = decide([timeout, ima], [], kb)
    assert v.primary is ima
    assert v.cascade == ("nccl-timeout/x",)


def test_consequence_printed_before_the_root_is_not_its_cascade() -> None:
    # The NCCL error came first, so the later illegal access cannot have caused it.
    kb = load_kb()
    nccl, ima = _f("nccl-error", 8, 0.9), _f("illegal-memory-access", 15, 0.7)
    v = decide([ima, nccl], [], kb)
    assert v.primary is nccl
    assert "nccl-error/x" not in v.cascade


def test_failures_before_ready_were_survived() -> None:
    kb = load_kb()
    smem = _f("smem-overflow", 5, 0.9)
    skipped = _f("tactic-skipped", 6, 0.6, fatal=False, severity="warning")
    v = decide([smem, skipped], [100], kb)
    assert v.server_ready and v.fatal is False
    assert v.primary is not None and v.primary.cause == "tactic-skipped"
    assert all(not f.fatal for f in v.findings)


def test_a_crash_after_ready_is_fatal() -> None:
    kb = load_kb()
    skipped = _f("tactic-skipped", 6, 0.6, fatal=False, severity="warning")
    oom = _f("cuda-oom", 500, 0.7)
    v = decide([skipped, oom], [100], kb)
    assert v.primary is oom and v.fatal is True


def test_nothing_matched_is_no_verdict() -> None:
    v = decide([], [], load_kb())
    assert v.primary is None and v.fatal is None


def test_skipped_tactics_do_not_hide_a_later_unexplained_crash() -> None:
    from diagnose.api import diagnose_text

    log = (
        "[Autotuner]: Skipping tactic 12 (profiling failed): CUDA error: an illegal "
        "instruction was encountered\n"
        "[Autotuner]: Skipping tactic 13 (profiling failed): CUDA error: an illegal "
        "instruction was encountered\n"
        "WorkerProc hit an exception.\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/engine/worker.py", line 40, in busy_loop\n'
        "    output = self.execute(batch)\n"
        "zmq.error.ZMQError: the frobnicator socket went away\n"
    )
    d = diagnose_text(log)
    assert d.fatal is True
    if d.cause == "unknown":
        assert any("not explained by any rule" in n for n in d.notes)
    else:  # a rule that reads the later crash is just as good
        assert d.primary is not None and d.primary.fatal


def test_a_survived_state_rule_reading_the_same_line_marks_the_fatal_one_survived() -> None:
    crash = _f("gpu-unavailable", 12, 0.85)
    went_on = replace(_f("gpu-unavailable", 12, 0.85, False, "warning"), rule_id="w/went-on")
    v = decide([crash, went_on], [], load_kb())
    assert v.fatal is False
    assert any(s.startswith("same line:") for s in v.steps)
    # A warning on another line, or one less sure than the fatal reading, changes nothing.
    elsewhere = replace(went_on, evidence=(Evidence(13, "text", "match.any[0]"),))
    assert decide([crash, elsewhere], [], load_kb()).fatal is True
    less_sure = replace(went_on, confidence=0.7)
    assert decide([crash, less_sure], [], load_kb()).fatal is True


def test_llama_cpp_going_on_after_its_cuda_init_failed_is_survived() -> None:
    from diagnose.api import diagnose_text

    d = diagnose_text(
        "ggml_cuda_init: failed to initialize CUDA: system has unsupported display driver / "
        "cuda driver combination\n"
        "llm_load_tensors: offloaded 0/33 layers to GPU\n"
    )
    assert d.cause == "gpu-unavailable" and d.fatal is False


def test_a_later_crash_after_going_on_without_the_gpu_is_that_cause() -> None:
    # gpu-unavailable says explains_later_crashes in kb: the program that went on without its
    # GPU dies later in its own words, and that death is the missing GPU's, not unknown.
    from diagnose.api import diagnose_text

    log = (
        "/opt/venv/lib/python3.11/site-packages/torch/cuda/__init__.py:129: UserWarning: CUDA "
        "initialization: CUDA unknown error - this may be due to an incorrectly set up "
        "environment. Setting the available devices to be zero.\n"
        "INFO 2026-01-12 10:00:02 bench: devices found: 0\n"
        "INFO 2026-01-12 10:00:02 bench: loading the frobnicator suite\n"
        "INFO 2026-01-12 10:00:03 bench: running 12 cases\n"
        "ERROR 2026-01-12 10:00:04 bench: case check_devices failed\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/bench/run.py", line 12, in <module>\n'
        "    check_devices()\n"
        "bench.errors.CheckFailed: the frobnicator check did not pass\n"
    )
    d = diagnose_text(log)
    assert d.cause == "gpu-unavailable" and d.fatal is True
    assert any("taken as its consequence" in n for n in d.notes)
    # Without it (a cause that does not degrade the program), the same shape stays unknown.
    assert load_kb().cause("tactic-skipped").explains_later_crashes is False


# --- whether an unknown failure was fatal -------------------------------------------------

_WARNED = (
    "(VllmWorker TP0 pid=4242) WARNING 03-01 10:00:01 [custom_all_reduce.py:137] Custom "
    "allreduce is disabled because the frobnicator link failed its self-test."
)


def test_an_error_logged_only_as_a_warning_is_not_fatal() -> None:
    from diagnose.api import diagnose_text
    from diagnose.render.common import headline

    d = diagnose_text(f"INFO 03-01 10:00:00 [config.py:10] starting\n{_WARNED}\n")
    assert d.cause == "unknown" and d.crashes
    assert d.fatal is False
    assert headline(d).startswith("No fatal crash")
    assert not any("CUDA_LAUNCH_BLOCKING" in step for step in d.next_steps)


def test_the_same_line_logged_as_an_error_is_fatal() -> None:
    from diagnose.api import diagnose_text

    d = diagnose_text(_WARNED.replace("WARNING", "ERROR") + "\n")
    assert d.cause == "unknown" and d.fatal is True


_LOGGED_TRACE = (
    "[rank0]:[{level}105 10:00:00.000000000 Frobnicator.cpp:88] [c10d] frobnicate failed on "
    "SocketImpl(fd=9): the peer hung up\n"
    "Exception raised from frobnicate at /src/torch/csrc/distributed/c10d/Frob.hpp:41 (most "
    "recent call first):\n"
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x80 (0x7f00 in "
    "/opt/torch/lib/libc10.so)\n"
    "frame #1: <unknown function> + 0x5ffc5b1 (0x7f01 in /opt/torch/lib/libtorch_cpu.so)\n"
)


@pytest.mark.parametrize(
    ("level", "after", "fatal"),
    [
        ("W", "", False),  # c10 logged the exception it caught as a warning, trace and all
        ("E", "", True),  # the same record at error level counts
        ("W", "terminate called after throwing an instance of 'c10::Error'\n", True),
    ],
)
def test_a_cpp_trace_that_tails_a_warning_record_ends_nothing(
    level: str, after: str, fatal: bool
) -> None:
    from diagnose.api import diagnose_text

    d = diagnose_text(_LOGGED_TRACE.format(level=level) + after)
    assert d.cause == "unknown" and d.crashes
    assert d.fatal is fatal


def test_an_unknown_traceback_before_readiness_was_survived_and_one_after_was_not() -> None:
    from diagnose.api import diagnose_text

    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/srv/engine/warmup.py", line 40, in warm\n'
        "    self.frobnicate()\n"
        "toolkit.FrobnicatorError: the frobnicator went away\n"
    )
    ready = "INFO:     Application startup complete.\n"
    assert diagnose_text(traceback + ready).fatal is False
    assert diagnose_text(ready + traceback).fatal is True


def test_a_log_without_a_crash_region_has_no_fatal_flag() -> None:
    from diagnose.api import diagnose_text

    assert diagnose_text("INFO all good\nINFO still good\n").fatal is None


def test_an_unknown_error_the_program_says_it_carried_on_from_is_not_fatal() -> None:
    from diagnose.api import diagnose_text

    carried_on = (
        "[TensorRT-LLM][ERROR] Assertion failed: frobnicator stalled (/src/step.cpp:88)\n"
        "[TensorRT-LLM][WARNING] Step function failed, continuing.\n"
    )
    d = diagnose_text(carried_on)
    assert d.cause == "unknown" and d.crashes and d.fatal is False
    # The same error with no such word, or the word far away, still counts.
    assert diagnose_text(carried_on.split("\n")[0] + "\n").fatal is True
    far = carried_on.split("\n")[0] + "\n" + "INFO step\n" * 6 + "INFO continuing with batch 7\n"
    assert diagnose_text(far).fatal is True


def test_a_traceback_whose_code_says_continuing_is_still_fatal() -> None:
    from diagnose.api import diagnose_text

    log = (
        "Traceback (most recent call last):\n"
        '  File "/srv/frob/loop.py", line 9, in run\n'
        "    step()  # continuing after a retry\n"
        "frob.FrobError: the frobnicator went away\n"
    )
    assert diagnose_text(log).fatal is True


def test_an_unknown_summary_quotes_a_real_message_over_a_cut_tracebacks_last_frame() -> None:
    from diagnose.api import diagnose_text

    log = (
        "compiler raised FrobError: the frobnicator refused the graph\n"
        "INFO unrelated\n"
        "INFO unrelated\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/frob/loop.py", line 9, in run\n'
        "    step()\n"
        '  File "/srv/frob/step.py", line 3, in step\n'
        "    frob(graph)\n"
    )
    d = diagnose_text(log)
    assert d.cause == "unknown" and len(d.crashes) == 2
    assert "FrobError: the frobnicator refused the graph" in d.summary


def test_a_lone_nccl_warn_record_is_a_warning() -> None:
    from diagnose.api import diagnose_text

    log = (
        "node7:1379562:1379562 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
        "node7:1379562:1379562 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
        "node7:1379562:1379562 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
    )
    d = diagnose_text(log)
    assert d.cause == "unknown" and d.fatal is False
    assert d.crashes[0].message == "NCCL WARN Failed to open libibverbs.so[.1]"


@pytest.mark.parametrize(
    ("line", "fatal"),
    [
        # The GPU driver's own check, printed on healthy unified-memory start-ups too.
        (
            "kernel: NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY]"
            " (0x00000051) returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359",
            False,
        ),
        # An Xid is a fault of its own, never a mild record.
        ("kernel: NVRM: Xid (PCI:0000:41:00): 79, pid=1234, GPU has fallen off the bus.", True),
    ],
)
def test_a_lone_driver_record_ends_nothing_but_an_xid_does(line: str, fatal: bool) -> None:
    from diagnose.api import diagnose_text

    d = diagnose_text(f"INFO starting\n{line}\n")
    assert d.fatal is fatal


@pytest.mark.parametrize(
    ("record", "fatal"),
    [
        (
            'level=WARN source=sched.go:640 msg="gpu memory did not recover before the timeout"',
            False,
        ),
        (
            'time=2031-05-01T10:00:00.000Z level=INFO source=server.go:120 msg="runner load'
            ' failed, retrying"',
            False,
        ),
        (
            'time=2031-05-01T10:00:00.000Z level=ERROR source=server.go:120 msg="runner failed"',
            True,
        ),
    ],
)
def test_a_lone_logfmt_record_is_judged_by_its_level(record: str, fatal: bool) -> None:
    from diagnose.api import diagnose_text

    d = diagnose_text("status of the service shows:\n" + record + "\n")
    assert d.cause == "unknown" and d.crashes and d.fatal is fatal


def test_one_requests_failure_after_readiness_is_not_fatal() -> None:
    from diagnose.api import diagnose_text

    ready = "[2031-05-01 10:00:00] The server is fired up and ready to roll!\n"
    failure = (
        "[2031-05-01 10:05:00 TP0] Decode transfer failed for request rank=0 req.rid='9f2c' "
        "with exception KVTransferError(bootstrap_room=42): Aborted by AbortReq.\n"
    )
    d = diagnose_text(ready + failure)
    assert d.cause == "unknown" and d.crashes and d.fatal is False
    # An engine failure after it still counts.
    engine = (
        "[2031-05-01 10:05:01 TP0] Scheduler hit an exception: RuntimeError: engine loop died\n"
    )
    assert diagnose_text(ready + failure + engine).fatal is True


@pytest.mark.parametrize(
    "log",
    [
        # NVSHMEM skips a device its IBGDA transport cannot use, and the test runs to the end
        # (deepseek-ai/DeepEP#303)
        "/opt/shmem/src/host/transport/transport.cpp:nvshmemi_transport_init:282:"
        " init failed for transport: IBGDA\n"
        "WARN: device mlx5_9 cannot allocate buffer on the specified memory type. Skipping...\n"
        "[rank 3] Dispatch + combine bandwidth: 98.10 GB/s\n",
        # NCCL's transport plugin fails and NCCL uses sockets (aws/aws-k8s-tester#454)
        "[1,9]<stdout>:worker-1:22:572 [1] plugin.c:257 NCCL WARN NET/OFI plugin initialization"
        " failed\n"
        "[1,9]<stdout>:worker-1:22:572 [1] NCCL INFO NET/IB : No device found.\n"
        "[1,9]<stdout>:worker-1:22:572 [1] NCCL INFO Using network Socket\n",
    ],
)
def test_an_error_the_program_carried_on_from_is_not_a_fatal_unknown(log: str) -> None:
    from diagnose.api import diagnose_text

    d = diagnose_text(log)
    assert d.cause == "unknown" and d.crashes and d.fatal is False


_CAUGHT_BY_EXECUTOR = """\
[TensorRT-LLM][INFO] Executor instance created by worker
[TensorRT-LLM][ERROR] Encountered an error in forwardAsync function: [TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, mCudaStream->get()): out of memory (/src/cpp/include/tensorrt_llm/runtime/tllmBuffers.h:125)
1       0x7f3a11d2e4b1 void tensorrt_llm::common::check<cudaError>(cudaError, char const*, char const*, int) + 161
2       0x7f3a11f40a2c tensorrt_llm::runtime::BufferManager::gpu(unsigned long, nvinfer1::DataType) const + 92
3       0x7f3a12a0b6d0 tensorrt_llm::executor::Executor::Impl::forwardAsync(std::list<std::shared_ptr<tensorrt_llm::batch_manager::LlmRequest> >&) + 528
[TensorRT-LLM][WARNING] Request 41 failed: the executor reported an error in this step
"""


def test_an_error_the_serving_loop_caught_was_survived() -> None:
    from diagnose import diagnose_text

    d = diagnose_text(_CAUGHT_BY_EXECUTOR)
    assert d.cause == "cuda-oom" and d.fatal is False
    assert d.primary is not None and "went on after this" in " ".join(d.primary.notes)


_CAUGHT_BY_TGI_SHARD = """\
2031-07-19T21:02:09.361Z ERROR batch{batch_size=4}:prefill:prefill{id=3 size=4}: text_generation_router::infer: router/src/infer.rs:554: Request failed during generation: Server error: CUDA out of memory. Tried to allocate 16.00 MiB (GPU 0; 22.20 GiB total capacity; 20.75 GiB already allocated)
2031-07-19T21:02:09.363Z ERROR text_generation_launcher: Method Prefill encountered an error.
Traceback (most recent call last):
  File "/srv/tgi/server/models/flash_causal_lm.py", line 812, in generate_token
    out = self.forward(batch)
torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 16.00 MiB (GPU 0; 22.20 GiB total capacity; 20.75 GiB already allocated)
"""


def test_a_text_generation_inference_shard_survives_a_failed_prefill() -> None:
    from diagnose import diagnose_text

    d = diagnose_text(_CAUGHT_BY_TGI_SHARD)
    assert d.cause == "cuda-oom" and d.fatal is False


_ASGI_REQUEST = """\
INFO:     10.0.0.5:51422 - "POST /v1/chat/completions HTTP/1.1" 200 OK
ERROR:    Exception in ASGI application
Traceback (most recent call last):
  File "/srv/py/uvicorn/protocols/http/httptools_impl.py", line 409, in run_asgi
    result = await app(self.scope, self.receive, self.send)
  File "/srv/py/engine/entrypoints/api_server.py", line 212, in stream_results
    async for out in generator:
asyncio.exceptions.CancelledError
INFO:     10.0.0.5:51430 - "POST /v1/chat/completions HTTP/1.1" 200 OK
"""


def test_one_requests_exception_in_the_asgi_app_is_survived() -> None:
    from diagnose import diagnose_text

    d = diagnose_text(_ASGI_REQUEST)
    assert d.crashes and d.fatal is False
    # ... but not when the request only relayed an engine that had died.
    dead = _ASGI_REQUEST.replace(
        "asyncio.exceptions.CancelledError",
        "engine.errors.AsyncEngineDeadError: Background loop has errored already.",
    )
    assert diagnose_text(dead).fatal is True


def test_ggml_without_a_usable_gpu_runs_on_the_cpu() -> None:
    from diagnose import diagnose_text

    log = (
        "ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device is detected\n"
        "warning: no usable GPU found, --gpu-layers option will be ignored\n"
        "llama_model_loader: loaded meta data with 30 key-value pairs\n"
    )
    d = diagnose_text(log)
    assert d.crashes and d.fatal is False


def test_skipped_tactics_then_no_implementation_left_is_a_failed_build() -> None:
    from diagnose import diagnose_text

    log = (
        "[W] Skipping tactic 0x0000000000000000 due to exception autotuning: CUDA error 2 "
        "allocating 2147747325-byte buffer: out of memory\n"
        "[E] 10: [optimizer.cpp::computeCosts::3728] Error Code 10: Internal Error (Could not "
        "find any implementation for node {ForeignNode[MatMul_12]}.)\n"
    )
    d = diagnose_text(log)
    assert d.fatal is True
    # Without the builder giving up, the skipped tactic was survived.
    assert diagnose_text(log.split("\n")[0] + "\n").fatal is False


def test_a_loop_that_caught_an_error_and_then_died_did_not_survive_it() -> None:
    from diagnose import diagnose_text

    died = _CAUGHT_BY_EXECUTOR + (
        "Exception in thread Thread-3 (_executor_loop):\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/py/tensorrt_llm/_torch/pyexecutor/py_executor.py", line 840, in _executor_loop\n'
        "    self._update_requests(batch)\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    d = diagnose_text(died)
    assert d.fatal is True


_AUTOTUNE_CHOICE_FAILED = """\
[rank0]:  File "/opt/py/torch/_inductor/runtime/triton_heuristics.py", line 608, in _make_launchers
[rank0]:    raise RuntimeError(f"No valid triton configs. {type(exc).__name__}: {exc}")
[rank0]:RuntimeError: No valid triton configs. OutOfMemoryError: out of resource: triton_mm Required: 300000 Hardware limit:232448 Reducing block sizes or `num_stages` may help.
[rank0]:Runtime error during autotuning:
[rank0]:No valid triton configs. OutOfMemoryError: out of resource: triton_mm Required: 300000 Hardware limit:232448 Reducing block sizes or `num_stages` may help..
[rank0]:Ignoring this choice.
"""


def test_a_candidate_autotuning_ignored_was_survived() -> None:
    from diagnose import diagnose_text

    d = diagnose_text(_AUTOTUNE_CHOICE_FAILED)
    assert d.fatal is False and d.cause == "tactic-skipped"


def test_words_of_carrying_on_do_not_hide_a_crash_after_them() -> None:
    from diagnose import diagnose_text

    died = _AUTOTUNE_CHOICE_FAILED + (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/train.py", line 90, in step\n'
        "    loss.backward()\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    assert diagnose_text(died).fatal is True


def test_a_warning_does_not_take_the_next_info_record_as_its_rest() -> None:
    from diagnose import diagnose_text

    log = (
        "(Worker pid=91) WARNING 02-22 22:09:01 custom_all_reduce.py:136] Custom allreduce is "
        "disabled because it's not supported on more than two PCIe-only GPUs.\n"
        "INFO 03-14 09:21:46 [metrics.py:455] Avg prompt throughput: 11609.8 tokens/s, "
        "Running: 101 reqs\n"
    )
    d = diagnose_text(log)
    assert [c.lines for c in d.crashes] == [(1, 1)]
    assert d.fatal is False


def test_each_step_of_the_verdict_says_what_it_did() -> None:
    kb = load_kb()
    smem = _f("smem-overflow", 5, 0.9)
    skipped = _f("tactic-skipped", 6, 0.6, fatal=False, severity="warning")
    survived = decide([smem, skipped], [100], kb)
    assert survived.steps[0] == (
        "readiness: the server said it was ready at line 100, after smem-overflow/x: "
        "marked survived"
    )
    assert survived.steps[-1].startswith("primary: tactic-skipped/x")
    ima, timeout = _f("illegal-memory-access", 10, 0.7), _f("nccl-timeout", 40, 0.9)
    crashed = decide([timeout, ima], [], kb)
    assert [s.split(":")[0] for s in crashed.steps] == ["pool", "roots", "primary", "cascade"]
    assert "nccl-timeout follow from an earlier cause" in crashed.steps[1]
    assert decide([], [], kb).steps == ("pool: no rule matched",)


def test_the_verdict_steps_are_in_the_json() -> None:
    from diagnose import diagnose_text

    d = diagnose_text("RuntimeError: CUDA error: an illegal memory access was encountered")
    steps = d.to_dict()["verdict_steps"]
    assert steps[0].startswith("pool: 1 fatal") and steps[-1].startswith("primary: ")
    unknown = diagnose_text("Traceback (most recent call last):\nFrobError: the quux broke")
    assert unknown.verdict_steps[-1].startswith("unknown: a crash region no rule explains")


def test_a_warning_whose_message_starts_on_the_next_line_is_not_fatal() -> None:
    from diagnose.api import diagnose_text

    warning = (
        "/opt/venv/lib/python3.11/site-packages/torch/cuda/__init__.py:230: UserWarning: \n"
        "NVIDIA GeForce RTX 5080 with CUDA capability sm_120 is not compatible with the current"
        " PyTorch installation.\n"
        "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80"
        " sm_86 sm_90.\n"
        "  warnings.warn(\n"
        "Serving on 127.0.0.1:8000\n"
    )
    d = diagnose_text(warning)
    assert d.cause == "arch-unsupported" and d.fatal is False
    # The failure the warning leads to is a region of its own, and fatal.
    died = warning + (
        "Traceback (most recent call last):\n"
        '  File "/srv/app.py", line 9, in <module>\n'
        "    x = torch.ones(4, device='cuda') * 2\n"
        "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    )
    assert diagnose_text(died).fatal is True


def test_a_known_failure_its_logger_called_a_warning_is_not_fatal() -> None:
    from diagnose.api import diagnose_text

    log = (
        "INFO 03-01 10:00:00 [api_server.py:1] vLLM API server version 0.9.0\n"
        "WARNING 03-01 10:00:01 [_custom_ops.py:21] Failed to import from vllm._C with "
        "ImportError('/opt/venv/lib/python3.11/site-packages/vllm/_C.abi3.so: undefined symbol: "
        "_ZN3c104cuda9SetDeviceEi')\n"
        "INFO 03-01 10:00:02 [model_runner.py:9] Loading model weights took 14.2 GiB\n"
    )
    d = diagnose_text(log)
    assert d.cause == "abi-mismatch" and d.fatal is False
    # The same record at ERROR level, with nothing after it, ended the process.
    assert diagnose_text(log.replace("WARNING 03-01", "ERROR 03-01")).fatal is True


def test_a_known_failure_only_python_warnings_report_is_not_fatal() -> None:
    """warnings.warn records (and the source line printed under each) ended nothing; the
    same message raised is fatal."""
    from diagnose.api import diagnose_text

    warned = "".join(
        f"/venv/lib/python3.10/site-packages/awq/modules/linear/{k}.py:14: UserWarning: "
        f"AutoAWQ could not load {k} kernels extension. Details: libcudart.so.12: cannot open "
        "shared object file: No such file or directory\n"
        f'  warnings.warn(f"AutoAWQ could not load {k} kernels extension. Details: {{ex}}")\n'
        for k in ("gemm", "gemv")
    )
    d = diagnose_text(warned)
    assert d.cause == "abi-mismatch" and d.fatal is False
    raised = (
        "Traceback (most recent call last):\n"
        '  File "/srv/app.py", line 3, in <module>\n'
        "    import awq_ext\n"
        "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory\n"
    )
    assert diagnose_text(raised).fatal is True
    assert diagnose_text(warned + raised).fatal is True  # a crash after the warnings


def test_what_only_records_below_error_say_ended_nothing() -> None:
    from diagnose.api import diagnose_text

    log = (
        "DEBUG 10-01 12:03:47 [__init__.py:76] Exception happens when checking CUDA platform:"
        " NVML Shared Library Not Found\n"
        "INFO 10-01 12:03:47 [__init__.py:243] No platform detected, vLLM is running on"
        " UnspecifiedPlatform\n"
        "INFO 10-01 12:03:49 [api_server.py:1] Serving on 0.0.0.0:8000 with the CPU backend\n"
    )
    d = diagnose_text(log)
    assert d.cause == "gpu-unavailable" and d.fatal is False
    # Said by an ERROR record, the same words ended the process.
    assert diagnose_text(log.replace("INFO 10-01 12:03:47", "ERROR 10-01 12:03:47")).fatal is True


def test_a_warning_record_continued_on_an_unprefixed_line_ends_nothing() -> None:
    """A logger's record whose message goes on below without a prefix is one record: its
    level is the record's (an LMCache-style "[ts] Name WARNING: ..." format)."""
    from diagnose.api import diagnose_text

    record = (
        "[2026-02-01 10:00:00,120] KVStore WARNING: Failed to allocate memory for the cache.\n"
        "The blocks of this request will not be stored. (store.py:200)\n"
    )
    # Printed for one request after another: the repeats make one region of both lines.
    log = (
        "[2026-02-01 10:00:00,100] KVStore INFO: stored 512 tokens for request 7\n"
        + record
        + "[2026-02-01 10:00:00,140] KVStore INFO: stored 640 tokens for request 8\n"
        + record
        + "[2026-02-01 10:00:00,160] KVStore INFO: stored 128 tokens for request 9\n"
    )
    d = diagnose_text(log)
    assert d.crashes and d.fatal is False
    # The same record at ERROR ended the process as far as the log shows.
    assert diagnose_text(log.replace("KVStore WARNING", "KVStore ERROR")).fatal is True
    # A line that is a record of its own (its own prefix) is not the warning's rest.
    cut = log.replace(
        "The blocks of this request will not be stored. (store.py:200)\n",
        "[2026-02-01 10:00:00,130] Failed to open segment for endpoint 10.0.0.3\n",
    )
    assert diagnose_text(cut).fatal is True
