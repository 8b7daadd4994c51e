"""Region finding on our own synthetic logs: every kind, chains, rank copies, cuts, size."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.model import LogLine, Region
from diagnose.regions import REGION_KINDS, find_regions


def _lines(text: str, ranks: Sequence[str | None] | None = None, first: int = 1) -> list[LogLine]:
    """LogLines numbered from ``first``; ``ranks`` gives each line's rank when set."""
    rows = text.split("\n")
    return [
        LogLine(first + i, row, None if ranks is None else ranks[i]) for i, row in enumerate(rows)
    ]


def _one(text: str) -> Region:
    regions = find_regions(_lines(text))
    assert len(regions) == 1, [(r.kind, r.message) for r in regions]
    return regions[0]


PY_TRACEBACK = """\
INFO booting the frobnicator
Traceback (most recent call last):
  File "/srv/app/runner.py", line 41, in main
    run(cfg)
  File "/srv/app/engine.py", line 7, in run
    step = model.forward(batch)
           ^^^^^^^^^^^^^^^^^^^^
ValueError: batch size 96 exceeds limit 64
INFO shutting down"""


def test_python_traceback_message_is_the_exception_line() -> None:
    r = _one(PY_TRACEBACK)
    assert r.kind == "python-traceback"
    assert r.message == "ValueError: batch size 96 exceeds limit 64"
    assert r.lines == (2, 8) and r.message_line == 8
    assert not r.truncated
    assert [f.function for f in r.frames] == ["main", "run"]


def test_chained_traceback_is_one_region_with_the_final_exception() -> None:
    text = """\
Traceback (most recent call last):
  File "/srv/app/io.py", line 3, in load
    return open(p).read()
FileNotFoundError: [Errno 2] No such file or directory: '/data/w.bin'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/srv/app/main.py", line 9, in boot
    weights = load(p)
RuntimeError: could not load weights from /data/w.bin

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/srv/app/main.py", line 20, in <module>
    boot()
SystemExit: 3"""
    r = _one(text)
    assert r.kind == "python-traceback"
    assert r.message == "SystemExit: 3"
    assert r.lines == (1, 18)
    assert [f.function for f in r.frames] == ["load", "boot", "<module>"]


def test_chain_cut_after_next_header_keeps_the_earlier_exception() -> None:
    # A paste that stops at the next link's header: the failure shown is the exception before
    # it, not a frame line (vllm-project/vllm#16336 lost its CalledProcessError this way).
    text = """\
Traceback (most recent call last):
  File "/srv/tool/build.py", line 12, in compile_one
    subprocess.run(cmd, check=True)
  File "/usr/lib/python3.12/subprocess.py", line 571, in run
    raise CalledProcessError(retcode, process.args,
subprocess.CalledProcessError: Command '['/srv/bin/asm', '-o', 'k.o']' returned non-zero exit status 3.

During handling of the above exception, another exception occurred:

Traceback (most recent call last):"""
    r = _one(text)
    assert r.kind == "python-traceback"
    assert r.message.startswith("subprocess.CalledProcessError: Command")
    assert r.message_line == 6
    assert r.truncated


def test_chain_cut_inside_next_frames_keeps_the_earlier_exception() -> None:
    text = """\
Traceback (most recent call last):
  File "/srv/app/io.py", line 3, in load
    return open(p).read()
OSError: [Errno 5] Input/output error

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/srv/app/main.py", line 20, in <module>
    boot()"""
    r = _one(text)
    assert r.message == "OSError: [Errno 5] Input/output error"
    assert r.truncated
    assert [f.function for f in r.frames] == ["load", "<module>"]


def test_traceback_with_c10_backtrace_in_its_message() -> None:
    text = """\
Traceback (most recent call last):
  File "/srv/app/step.py", line 5, in step
    torch.cuda.synchronize()
RuntimeError: CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.

Exception raised from check_impl at /src/c10/cuda/Exc.cpp:43 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f00aa0010 in /l/c10.so)
frame #1: c10::cuda::check_impl(int, char const*, int, bool) + 0x118 (0x7f00ab0020 in /l/c10c.so)
INFO next record"""
    r = _one(text)
    assert r.kind == "python-traceback"
    assert r.message.startswith("RuntimeError: CUDA error: an illegal memory access")
    assert r.lines == (1, 11)
    assert [f.dialect for f in r.frames] == ["python", "c10", "c10"]


def test_cut_paste_starting_mid_traceback() -> None:
    text = """\
    x = self.layer(x)
  File "/srv/mod/block.py", line 88, in forward
    return kernel(x)
triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 140000"""
    r = _one(text)
    assert r.kind == "python-traceback"
    assert r.lines == (1, 4)
    assert r.message.startswith("triton.runtime.errors.OutOfResources")


def test_truncated_traceback_without_exception_line() -> None:
    text = """\
Traceback (most recent call last):
  File "/srv/app/a.py", line 1, in f
    g()
  File "/srv/app/b.py", line 2, in g"""
    r = _one(text)
    assert r.kind == "python-traceback" and r.truncated
    assert r.message_line == 4


def test_last_line_cut_mid_word_is_truncated() -> None:
    r = _one(
        "terminate called after throwing an instance of 'std::runtime_error'\n"
        "  what():  bad shape (got [4, 8"
    )
    assert r.kind == "cpp-terminate" and r.truncated


def test_trtllm_assertion_with_numbered_backtrace() -> None:
    text = """\
[TensorRT-LLM][ERROR] Assertion failed: workspace too small for tile 128x64 (/src/gemm.cu:311)
1       0x7f11c0a0b0c0 tensorrt_llm::common::throwRuntimeError(char const*, int) + 82
2       0x7f11c0b0c0d0 void tensorrt_llm::kernels::runGemm<float>(int, int) + 1024
3       0x7f11c0c0d0e0 /opt/lib/libth_common.so(+0x51a2b) [0x7f11c0c0d0e0]
[TensorRT-LLM][INFO] engine shut down"""
    r = _one(text)
    assert r.kind == "trtllm-error"
    assert r.message.startswith("Assertion failed: workspace too small")
    assert r.lines == (1, 4)
    assert len(r.frames) == 3


def test_terminate_with_what_and_c10_frames() -> None:
    text = """\
terminate called after throwing an instance of 'c10::DistBackendError'
  what():  [PG 0 Rank 5] Process group watchdog thread terminated with exception: CUDA error
Exception raised from check_impl at /src/c10/cuda/Exc.cpp:43 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f22aa0010 in /l/c10.so)
Aborted (core dumped)"""
    regions = find_regions(_lines(text))
    assert regions[0].kind == "cpp-terminate"
    assert regions[0].message.startswith("[PG 0 Rank 5] Process group watchdog thread terminated")
    assert regions[0].lines[1] >= 4


def test_glibc_backtrace_without_header() -> None:
    text = """\
/opt/app/libfrob.so(_ZN4frob6engine4stepEv+0x1c)[0x7f33bb000100]
/opt/app/libfrob.so(+0x2a0f0)[0x7f33bb0a0f0]
/lib/x86_64-linux-gnu/libc.so.6(__libc_start_main+0xf3)[0x7f33cc000200]"""
    r = _one(text)
    assert r.kind == "cpp-backtrace"
    assert r.lines == (1, 3)
    assert len(r.frames) == 3


def _long_kernel_symbol(size: int) -> str:
    """A mangled CUTLASS-like kernel name of about ``size`` characters (ours, made up)."""
    args = "".join(f"N4cute1CILi{n}EEE" for n in range(size // 16))
    return f"_ZN7cutlass13device_kernelIN4frob6kernel9GemmTileI{args}EEEvNT_6ParamsE"


def test_glibc_frame_whose_symbol_runs_past_the_window_stays_in_its_backtrace() -> None:
    # backtrace_symbols prints its marker at the end of the line; a 3 KB kernel name pushed
    # it out of the classified window, which split one backtrace into many regions.
    long = _long_kernel_symbol(3000)
    text = f"""\
terminate called after throwing an instance of 'std::runtime_error'
  what():  frob kernel launch failed
/opt/app/libfrob.so(_ZN4frob6engine4stepEv+0x1c) [0x7f33bb000100]
/opt/app/libfrob.so({long}+0x2a0f0) [0x7f33bb0a0f0]
/opt/app/libfrob.so(+0x2a0f0)[0x7f33bb0a0f1]
/lib/x86_64-linux-gnu/libc.so.6(__libc_start_main+0xf3)[0x7f33cc000200]
INFO shutting down"""
    r = _one(text)
    assert r.kind == "cpp-terminate"
    assert r.lines == (1, 6)
    assert len(r.frames) == 4
    frame = r.frames[1]
    assert frame.dialect == "glibc" and frame.module == "/opt/app/libfrob.so"
    assert frame.offset == "+0x2a0f0" and frame.address == "0x7f33bb0a0f0"
    assert frame.function == "cutlass::device_kernel"


@pytest.mark.parametrize(
    "line",
    [
        # Long, ends like a frame, but prose or a list: a blank inside the window.
        "x" * 10 + " " + "y" * 3000 + "(_Z3fooCv+0x1c) [0x7f00]",
        # Long word with no parenthesis at all.
        "z" * 3000 + "+0x1c) [0x7f00]",
        # Long symbol-like word that does not close as a frame.
        "/opt/app/libfrob.so(" + "a" * 3000 + " [0x7f00]",
    ],
)
def test_long_lines_that_only_end_like_a_glibc_frame_are_not_frames(line: str) -> None:
    regions = find_regions(_lines(f"INFO start\n{line}\nINFO done"))
    assert all(r.kind != "cpp-backtrace" for r in regions)


def test_boost_stacktrace_after_a_signal_line_is_one_backtrace() -> None:
    # Triton Inference Server's crash handler (it hosts the TensorRT-LLM backend).
    text = """\
INFO serving
Signal (11) received.
 0# 0x000055D0AB12CD34 in acmeserver
 1# 0x00007F00AA11BB22 in /lib/x86_64-linux-gnu/libc.so.6
 2# acme::backend::Instance::Execute(Request**, unsigned int) in /opt/acme/libacme.so
 3# 0x00007F00AA11CC33 in /lib/x86_64-linux-gnu/libc.so.6
INFO after"""
    regions = find_regions(_lines(text))
    assert [(r.kind, r.lines, r.message, len(r.frames)) for r in regions] == [
        ("cpp-backtrace", (2, 6), "Signal (11) received.", 4)
    ]
    assert regions[0].frames[2].function == "acme::backend::Instance::Execute"


def test_an_llvm_assertion_and_its_stack_dump_are_one_region() -> None:
    text = """\
python3: /src/acme/lib/IR/Types.cpp:126: unsigned int acme::Type::width() const: Assertion `isInt()' failed.
PLEASE submit a bug report to https://example.org/acme/issues/ and include the crash backtrace.
Stack dump:
0.\tProgram arguments: python3 run.py
 #0 0x00007f3c2a8e4b3b acme::sys::PrintStackTrace(acme::raw_ostream&, int) (/opt/acme/libacme.so+0x6ae4b3b)
 #1 0x00007f3c2c1a2d10 acme::gpu::shapePerTile(acme::Attribute) (/opt/acme/libacme.so+0x83a2d10)
INFO next"""
    r = _one(text)
    assert r.kind == "cpp-backtrace" and r.lines == (1, 6) and len(r.frames) == 2
    assert "Assertion `isInt()' failed" in r.message


def test_cuda_error_lines_group_with_their_hints() -> None:
    text = """\
frob_compute: GATHER failed
CUDA error: no kernel image is available for execution on the device
  current device: 0, in function frob_compute at /src/frob.cu:812
  err
INFO retrying"""
    r = _one(text)
    assert r.kind == "cuda-error"
    assert r.message == "CUDA error: no kernel image is available for execution on the device"
    assert r.lines == (1, 4)


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("CUDA_ERROR_OUT_OF_MEMORY while mapping 2 GiB", "cuda-error"),
        (
            "NVRM: Xid (PCI:0000:3b:00): 79, pid=77, name=python3, GPU has fallen off the bus.",
            "cuda-error",
        ),
        ("Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.", "cuda-error"),
        ("cudaErrorIllegalAddress returned by cudaStreamSynchronize", "cuda-error"),
        ("CUBLAS_STATUS_NOT_SUPPORTED when calling cublasLtMatmul", "cuda-error"),
        (
            "NCCL error in: /src/comm.cpp:77, unhandled system error, NCCL version 2.21.5",
            "nccl-error",
        ),
        ("ncclUnhandledCudaError: Call to CUDA function failed.", "nccl-error"),
        (
            "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
            "OpType=ALLGATHER, Timeout(ms)=600000) ran for 600321 milliseconds before timing out.",
            "nccl-error",
        ),
        (
            "/build/nvshmem/src/host/init/init.cu:412: non-zero status: 7 heap reserve failed",
            "nvshmem-error",
        ),
        ("triton.compiler.errors.CompilationError: at 3:8: unsupported dtype", "triton-error"),
        # ptxas with the JIT's temp file name and no other error word (vllm-project/vllm#15511).
        (
            "ptxas /tmp/tmpx0a1b2.ptx, line 93; error   : Modifier '.evict_first' cannot be "
            "combined with modifier '.cs'",
            "triton-error",
        ),
        # ... and older Triton's temp file without an extension (unslothai/unsloth#501).
        (
            "ptxas /tmp/compile-ptx-src-0c0ffee, line 12; error   : Feature '.bf16' requires "
            ".target sm_80 or higher",
            "triton-error",
        ),
        # nccl-tests' own failure line (NVIDIA/nccl-tests#322).
        (
            "node-7: Test NCCL failure common.cu:1088 'unhandled system error (run with "
            "NCCL_DEBUG=INFO for details) / '",
            "nccl-error",
        ),
        # A failed IB work completion, newer and plugin wordings (NVIDIA/nccl#1814, #1664).
        (
            "gpu-3:771:802 [2] net_ib.cc:1438 NCCL WARN NET/IB : Got completion from peer "
            "10.0.4.9<41100> with status=12 opcode=0 len=0 vendor err 129 (Recv)",
            "nccl-error",
        ),
        (
            "NET/IBP:Got completion from peer 10.0.4.9<41100> with status=12 opcode=32698 "
            "len=0 vendor err 129 (Send)",
            "nccl-error",
        ),
        ("ValueError: tokenizer file /m/tok.json is empty", "error-line"),
        # Open MPI's report of a rank a signal ended (NVIDIA/TensorRT-LLM#1700).
        (
            "mpirun noticed that process rank 3 with PID 0 on node n7 exited on signal 9 (Killed).",
            "error-line",
        ),
        # vLLM's executor once its "ERROR ..." prefix is stripped (vllm-project/vllm#23582).
        ("Worker proc VllmWorker-3 died unexpectedly, shutting down executor.", "error-line"),
        ("torch.OutOfMemoryError: tried to allocate 3.00 GiB", "error-line"),
        ("AssertionError", "error-line"),
        ("Killed", "error-line"),
        ("Segmentation fault (core dumped)", "error-line"),
        ("EP_HOST_ASSERT(num_tokens <= capacity) failed", "error-line"),
        ("Got frob error: Error Internal at: 77", "error-line"),
        ('frob.cu(12): error: identifier "half8" is undefined', "error-line"),
    ],
)
def test_lone_error_lines(line: str, kind: str) -> None:
    text = f"INFO warming up\n{line}\nINFO still here"
    r = _one(text)
    assert r.kind == kind
    assert r.lines == (2, 2)


def test_healthy_lines_make_no_region() -> None:
    text = """\
[2025-01-01 10:00:00 TP0] Decode batch. #running-req: 12, #token: 4000, gen throughput: 900.1
[2025-01-01 10:00:01] INFO:     10.1.2.3:40000 - "POST /v1/completions HTTP/1.1" 200
Using the default chat template; avail mem=40.11 GB
[2025-01-01 10:00:02 TP0] Capture cuda graph end. Time elapsed: 4.2 s"""
    assert find_regions(_lines(text)) == []


def test_healthy_network_and_ptx_lines_make_no_region() -> None:
    # Near misses of the NCCL/ptxas vocabulary: start-up INFO lines naming the IB devices,
    # nccl-tests' results table, and ptxas's verbose register report.
    text = """\
gpu-3:771:771 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.4.8<0>
gpu-3:771:802 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0
    33554432       8388608     float     sum      -1   1312.4   25.57   47.94      0
ptxas info    : Used 168 registers, 416 bytes cmem[0]"""
    assert find_regions(_lines(text)) == []


def test_faulthandler_dump() -> None:
    text = """\
Fatal Python error: Segmentation fault

Current thread 0x00007f44dd001700 (most recent call first):
  File "/srv/app/kernels.py", line 77 in launch
  File "/srv/app/main.py", line 12 in <module>

Extension modules: numpy.core._multiarray_umath, torch._C (total: 2)"""
    r = _one(text)
    assert r.kind == "faulthandler"
    assert r.message == "Fatal Python error: Segmentation fault"
    assert r.lines == (1, 7)
    assert [f.function for f in r.frames] == ["launch", "<module>"]


def test_torch_signal_handler_banner_and_native_frames() -> None:
    text = """\
[engine] loading communicator
!!!!!!! Segfault encountered !!!!!!!
  File "./signal/../sysdeps/unix/sysv/linux/x86_64/libc_sigaction.c", line 0, in 0x00007f3a1204532f
  File "<unknown>", line 0, in ncclCommWindowRegister
  File "<unknown>", line 0, in acme::comm::WindowPool::registerBuffer(ncclComm*, unsigned long)
  File "/srv/app/step.py", line 40, in step"""
    r = _one(text)
    assert r.kind == "faulthandler" and r.lines == (2, 6)
    assert r.message == "!!!!!!! Segfault encountered !!!!!!!"
    signal, nccl, pool, step = r.frames
    assert signal.address == "0x00007f3a1204532f" and signal.function is None
    assert (
        signal.file is not None and signal.file.endswith("libc_sigaction.c") and signal.line is None
    )
    assert (nccl.function, nccl.file) == ("ncclCommWindowRegister", None)
    assert pool.function == "acme::comm::WindowPool::registerBuffer"
    assert pool.params == ("ncclComm*", "unsigned long")
    assert (step.dialect, step.function, step.line) == ("python", "step", 40)


def test_mlir_diagnostic_notes_and_pass_failure_are_one_region() -> None:
    text = """\
error: operand #0 does not dominate this use
    acc_mask = row_mask[:, None] & (cols[None, :] < N)
                       ^
note: operand defined here (op in a child region)
            mask=row_mask[:, None] & (k_idx[None, :] < K),
                         ^
RuntimeError: PassManager::run failed"""
    r = _one(text)
    assert r.lines == (1, 7)


def test_a_bare_exception_name_takes_its_message_from_the_next_line() -> None:
    text = """\
triton.compiler.errors.CompilationError
AssertionError("Mismatched type for acc between then block (fp32) and else block (fp16)")"""
    r = _one(text)
    assert r.message == (
        'triton.compiler.errors.CompilationError: AssertionError("Mismatched type for acc'
        ' between then block (fp32) and else block (fp16)")'
    )


def test_gdb_stop_report_and_its_noise_stay_with_the_backtrace() -> None:
    text = """\
Thread 1 "acme-server" received signal SIGABRT, Aborted.
Download failed: Invalid argument.  Continuing without source file ./nptl/./nptl/pthread_kill.c.
__pthread_kill_implementation (no_tid=0, signo=6, threadid=<optimized out>) at ./nptl/pthread_kill.c:44
warning: 44\t./nptl/pthread_kill.c: No such file or directory
(gdb) backtrace
#0  __pthread_kill_implementation (no_tid=0, signo=6, threadid=<optimized out>) at ./nptl/pthread_kill.c:44
#1  0x00007ffff7a4527e in __GI_raise (sig=sig@entry=6) at ../sysdeps/posix/raise.c:26"""
    r = _one(text)
    assert r.kind == "gdb-backtrace" and r.lines == (1, 7) and len(r.frames) == 2


def test_an_error_with_a_location_is_no_gdb_stop_line() -> None:
    r = _one("cudaErrorIllegalAddress (700) at kernels/topk.cu:88")
    assert r.kind != "gdb-backtrace"


def test_nvshmem_error_print_opens_a_region_whatever_its_words() -> None:
    text = (
        "/opt/src/nvshmem_src/src/modules/bootstrap/uid/bootstrap_uid.cpp:bootstrap_net_recv:99:"
        " Message truncated : received 36 bytes instead of 1"
    )
    r = _one(text)
    assert r.kind == "nvshmem-error"
    assert r.message.endswith("received 36 bytes instead of 1")


def test_a_pasted_host_assertion_opens_a_region() -> None:
    r = _one("Assertion error  num_recv_tokens / num_ranks > std::max(num_send_a, num_send_b)")
    assert r.kind == "error-line"


def test_faulthandler_without_its_header_is_named_by_the_current_thread() -> None:
    text = """\
Thread 0x00007ffc398fc6c0 (most recent call first):
  File "/usr/lib/python3.10/threading.py", line 324 in wait
  File "/opt/py/tqdm/_monitor.py", line 69 in run

Current thread 0x00007ffff7ca8740 (most recent call first):
  File "/srv/app/gemm.py", line 126 in forward"""
    r = _one(text)
    assert r.kind == "faulthandler" and r.lines == (1, 6)
    assert r.message.startswith("Current thread 0x00007ffff7ca8740")


def test_a_pytest_banner_with_its_first_entry_glued_on_is_no_sanitizer_report() -> None:
    text = (
        "=========================== short test summary info ============================ "
        "ERROR tests/test_acme.py - RuntimeError: acme needs the DSL wheel"
    )
    assert _one(text).kind == "error-line"


def test_asan_report() -> None:
    text = """\
==4242==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x602000000018 at pc 0x55aa00001000
READ of size 4 at 0x602000000018 thread T0
    #0 0x55aa00001000 in frob::pack(int*) /src/frob/pack.cc:31:7
    #1 0x55aa00002000 in main /src/frob/main.cc:9:3

0x602000000018 is located 0 bytes after 8-byte region [0x602000000010,0x602000000018)
SUMMARY: AddressSanitizer: heap-buffer-overflow /src/frob/pack.cc:31:7 in frob::pack(int*)
==4242==ABORTING
INFO unrelated"""
    r = _one(text)
    assert r.kind == "sanitizer"
    assert r.message.startswith("AddressSanitizer: heap-buffer-overflow")
    assert r.lines == (1, 8)
    assert len(r.frames) == 2


def test_compute_sanitizer_errors_fold_by_signature() -> None:
    per_thread = """\
========= Invalid __global__ read of size 4 bytes
=========     at frob_kernel(float*)+0x90 in /src/frob.cu:21
=========     by thread ({t},0,0) in block (0,0,0)
=========     Address 0x7f00000{t:03d} is out of bounds"""
    text = "\n".join(
        ["========= COMPUTE-SANITIZER"]
        + [per_thread.format(t=t) for t in range(3)]
        + ["========= ERROR SUMMARY: 3 errors"]
    )
    r = _one(text)
    assert r.kind == "sanitizer"
    assert r.message == "Invalid __global__ read of size 4 bytes"
    assert r.count == 3


def test_gdb_backtrace_with_signal() -> None:
    text = """\
Thread 1 "frobd" received signal SIGSEGV, Segmentation fault.
0x00007f55ee000100 in frob_step (ctx=0x0) at /src/frob.c:55
#0  0x00007f55ee000100 in frob_step (ctx=0x0) at /src/frob.c:55
#1  0x00007f55ee000200 in frob_loop () from /opt/lib/libfrob.so
#2  0x00007f55ee000300 in main ()"""
    r = _one(text)
    assert r.kind == "gdb-backtrace"
    assert "received signal SIGSEGV" in r.message
    assert r.lines == (1, 5)
    assert [f.index for f in r.frames] == [0, 1, 2]


RANK_TRACE = [
    "Traceback (most recent call last):",
    '  File "/srv/dist/worker.py", line 300, in loop',
    "    out = self.model(batch)",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
]


def test_interleaved_ranks_are_deinterleaved_and_merged() -> None:
    rows: list[str] = []
    ranks: list[str | None] = []
    for line in RANK_TRACE:  # each line printed by 8 ranks before the next line
        for rank in range(8):
            rows.append(line)
            ranks.append(str(rank))
    regions = find_regions(_lines("\n".join(rows), ranks))
    assert len(regions) == 1
    r = regions[0]
    assert r.kind == "python-traceback"
    assert r.count == 8
    assert r.ranks == tuple(str(i) for i in range(8))
    assert len(r.body) == len(RANK_TRACE)
    assert r.message == RANK_TRACE[-1]


def test_sequential_copies_without_prefix_merge() -> None:
    copies = []
    for pid in (101, 202, 303, 404):
        copies += [
            *RANK_TRACE[:-1],
            f"RuntimeError: worker pid={pid} at 0x7f{pid:04x}: CUDA error: illegal memory access",
            "",
        ]
    regions = find_regions(_lines("\n".join(copies)))
    assert len(regions) == 1
    assert regions[0].count == 4
    assert regions[0].lines == (1, 4)
    assert regions[0].ranks == ()


def test_copies_from_nodes_with_their_own_install_paths_merge() -> None:
    # Each node of a job installs into its own venv: the frames' directories differ, the
    # failure does not (one crash identity, diagnose.signature.mask).
    copies = []
    for node in ("node-a", "node-b"):
        copies += [
            "Traceback (most recent call last):",
            f'  File "/scratch/{node}/venv/lib/python3.11/site-packages/srv/run.py", line 9, in go',
            "    step()",
            f"RuntimeError: could not open /scratch/{node}/venv/lib/libkern.so: bad ELF header",
            "",
        ]
    regions = find_regions(_lines("\n".join(copies)))
    assert len(regions) == 1 and regions[0].count == 2


def test_rank_named_in_the_message_when_no_prefix() -> None:
    text = "\n".join(
        f"[E ProcessGroupNCCL.cpp:475] [Rank {r}] Watchdog caught collective operation timeout: "
        f"WorkNCCL(SeqNum=12, OpType=BROADCAST) ran for 180{r}021 milliseconds before timing out."
        for r in (3, 1, 2)
    )
    r = _one(text)
    assert r.kind == "nccl-error"
    assert r.count == 3 and r.ranks == ("1", "2", "3")


def test_repeated_error_line_counts() -> None:
    line = "/opt/nvshmem/src/host/mem/heap.cpp:99: non-zero status: 2 cuMemCreate failed"
    text = "\n\n".join(
        [line] * 4 + ["/opt/nvshmem/src/host/mem/heap.cpp:150: non-zero status: 7 map failed"]
    )
    regions = find_regions(_lines(text))
    assert [(r.kind, r.count) for r in regions] == [("nvshmem-error", 4), ("nvshmem-error", 1)]


def test_two_distinct_failures_stay_apart_in_order() -> None:
    text = PY_TRACEBACK + "\n\n" + "Segmentation fault (core dumped)"
    regions = find_regions(_lines(text))
    assert [r.kind for r in regions] == ["python-traceback", "error-line"]
    assert regions[0].lines[0] < regions[1].lines[0]


def test_region_invariants_and_json_contract() -> None:
    for r in find_regions(_lines(PY_TRACEBACK)):
        assert r.kind in REGION_KINDS
        assert r.lines[0] <= r.message_line <= r.lines[1]
        assert r.body[0].number == r.lines[0] and r.body[-1].number == r.lines[1]
        d = r.to_dict()
        assert d["kind"] == r.kind and d["count"] == 1


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n\n",
        "\x00\x01\x02",
        "Traceback (most recent call last):",
        "(" * 10_000,
        "#" * 50_000,
    ],
)
def test_odd_input_never_raises(text: str) -> None:
    for r in find_regions(_lines(text)):
        assert r.kind in REGION_KINDS


def test_a_million_frames() -> None:
    n = 1_000_000
    lines = [
        LogLine(1, "terminate called after throwing an instance of 'std::bad_alloc'"),
        LogLine(2, "  what():  std::bad_alloc"),
    ]
    lines += [
        LogLine(
            3 + i, f"frame #{i}: frob::recurse(int) + 0x1c (0x7f00{i:08x} in /opt/lib/libfrob.so)"
        )
        for i in range(n)
    ]
    lines.append(LogLine(n + 3, "INFO after the crash"))
    regions = find_regions(lines)
    assert len(regions) == 1
    r = regions[0]
    assert r.kind == "cpp-terminate" and r.message == "std::bad_alloc"
    assert r.lines == (1, n + 2)
    assert len(r.body) == n + 2
    assert 0 < len(r.frames) <= 256  # parsed frames are capped, the body keeps every line


# --- ROCm/HIP vocabulary ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!",
        "Unable to find code object for all current devices!",
        "HIP error: hipErrorIllegalAddress at /src/frob_hip.cpp:91",
        "hipMemcpyAsync failed with code 700",
        "HIPBLAS_STATUS_NOT_SUPPORTED in hipblasLtMatmul",
        "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory",
        "Memory access fault by GPU node-5 (Agent handle: 0x55aa1c) on address 0x7e0000001000."
        " Reason: Page not present or supervisor privilege.",
    ],
)
def test_hip_error_lines_open_a_gpu_runtime_region(line: str) -> None:
    r = _one(f"INFO warming up\n{line}\nINFO still here")
    assert r.kind == "cuda-error"
    assert r.lines == (2, 2)


def test_hip_error_takes_the_rocm_hints() -> None:
    text = """\
RuntimeError: HIP error: invalid device function
HIP kernel errors might be asynchronously reported at some other API call, so the trace lies.
For debugging consider passing AMD_SERIALIZE_KERNEL=3

INFO shutting down"""
    r = _one(text)
    assert r.kind == "cuda-error"
    assert r.message == "RuntimeError: HIP error: invalid device function"
    assert r.lines == (1, 3)


def test_hip_success_status_is_not_an_error() -> None:
    assert find_regions(_lines("frob sync returned hipErrorSuccess after 3 tries")) == []


# --- message continuations outside a traceback ------------------------------------------------

INDUCTOR_SMEM = (
    "torch._inductor.exc.InductorError: RuntimeError: No valid triton configs. "
    "OutOfMemoryError: out of resource: triton_tem_fused_bmm_3 Required: 172032 "
    "Hardware limit: 166912 Reducing block sizes or `num_stages` may help."
)


def test_error_line_takes_its_figures_and_advice() -> None:
    text = f"""\
INFO compiling graph 4
{INDUCTOR_SMEM}
Required: 172032  Hardware limit: 166912
Reducing block sizes or `num_stages` may help.
98304 bytes were already reserved by the frob pool
INFO compile worker exited"""
    r = _one(text)
    assert r.kind == "error-line"
    assert r.lines == (2, 5)
    assert r.message_line == 2


@pytest.mark.parametrize(
    "follower",
    [
        "INFO compile worker exited",
        "[2025-03-04 11:00:00] scheduler restarted",
        "frobhost:4411:4420 [0] NCCL INFO channel 00 ready",
        "The server will now keep serving other requests",
    ],
)
def test_error_line_does_not_take_a_new_record_or_prose(follower: str) -> None:
    regions = find_regions(_lines(f"{INDUCTOR_SMEM}\n{follower}"))
    assert regions[0].lines == (1, 1)


# --- TensorRT-LLM tactic dumps ----------------------------------------------------------------

TACTIC_DUMP = """\
Config was Cutlass GEMM Tactic
\tstyle=TMA Warp Specialized
\tsm: 100
\ttile shape ID: 128x128x256
\tcluster shape ID: 2x1x1
\tmainloop sched: 2
\tepi sched: 1
\tswap_ab: false"""


def test_tactic_dump_belongs_to_the_trtllm_error() -> None:
    text = (
        "[TensorRT-LLM][ERROR] Assertion failed: Failed to initialize frob grouped gemm. "
        "Error: Error Internal (/src/frob_moe.cu:2048)\n"
        f"{TACTIC_DUMP}\n"
        "[TensorRT-LLM][INFO] trying the next tactic"
    )
    r = _one(text)
    assert r.kind == "trtllm-error"
    assert r.lines == (1, 9)
    assert r.message_line == 1


def test_tactic_dump_without_indentation_belongs_to_the_error_line() -> None:
    dump = "\n".join(row.lstrip() for row in TACTIC_DUMP.split("\n"))
    text = (
        "Unsupported tile (64, 128, 64) and cluster (2, 2, 1) shape combination for arch 90.\n"
        f"{dump}\n\n"
        "INFO engine stopped"
    )
    r = _one(text)
    assert r.kind == "error-line"
    assert r.lines == (1, 9)


# --- prose in a chat paste --------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "I get a CUDA out of memory error when I run the frob server",
        "Has anyone seen `illegal memory access` before?",
        "my job keeps failing after 10 minutes with a timeout",
        "Any idea why the NCCL init failed on node 3?",
        "How to fix Segmentation fault (core dumped) in the frob kernel",
        "Is this the same illegal instruction crash as last week?",
    ],
)
def test_a_persons_sentence_opens_no_region(line: str) -> None:
    assert find_regions(_lines(f"{line}\nthanks in advance")) == []


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: I/O error while reading shard 3 of 8",
        "CUDA error: out of memory. Is the GPU used by another process?",
        "ERROR why did the frob worker fail? exit code 9",
        "When I run it I get torch.OutOfMemoryError: tried to allocate 2.00 GiB",
        "I see CUDA_ERROR_ILLEGAL_ADDRESS in the frob kernel",
        "Failed to load my_adapter.safetensors: file is truncated",
    ],
)
def test_real_error_lines_with_sentence_words_still_open(line: str) -> None:
    r = _one(f"INFO warming up\n{line}\nINFO still here")
    assert r.lines == (2, 2)


def test_prose_before_the_log_leaves_only_the_real_region() -> None:
    text = """\
I get a CUDA illegal memory access error when I run it, any ideas?

RuntimeError: CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call"""
    r = _one(text)
    assert r.kind == "cuda-error"
    assert r.lines == (3, 4)


def test_a_sentence_that_quotes_the_error_after_a_colon_holds_it() -> None:
    """'Here is the error I get: "... CUDA error: out of memory' is the log's text after the
    quote mark (a koboldcpp thread, round 225); the same sentence without a quoted error is
    still the poster's."""
    from diagnose.ingest.normalize import normalize

    quoted = 'Here is the exact error I get when it crashes: "Prompt (35 / 55 tokens)CUDA error: out of memory'
    assert [r.kind for r in find_regions(normalize(quoted))] != []
    unquoted = "I get a CUDA out of memory error when it crashes, any ideas?"
    assert find_regions(normalize(unquoted)) == []


def test_a_posters_paragraph_opens_no_region() -> None:
    """Two sentences of plain English, no first person, no question (vllm-project/vllm#56824)."""
    from diagnose.ingest.normalize import normalize

    para = (
        "The one run that really failed printed nothing at all. It is also worth saying how"
        " often this shows up at rest: the box had 40 of them over two days, and a burst of 9."
    )
    assert find_regions(normalize(para)) == []


@pytest.mark.parametrize(
    "line",
    [
        # Wordy, but a logged message: it names code.
        "WARNING 06-16 21:24:15 scheduler.py:1089] Sequence group 7 is preempted by"
        " PreemptionMode.SWAP mode because there is not enough KV cache space. This can"
        " affect the end-to-end performance.",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a"
        " total capacity of 79.1 GiB of which 1.2 GiB is free. Of the allocated memory 70 GiB"
        " is allocated by PyTorch.",
    ],
)
def test_a_wordy_logged_message_is_no_paragraph(line: str) -> None:
    from diagnose.regions.prose import _reads_as_paragraph

    assert not _reads_as_paragraph(line)


def test_ptxas_error_line_opens_a_region() -> None:
    text = (
        "Build log:\n"
        "ptxas error   : Entry function 'kern_a' uses too much shared data (0x5000 bytes, 0x4000 max)\n"
        "clBuildProgram failed: CL_BUILD_PROGRAM_FAILURE\n"
    )
    from diagnose.ingest.normalize import normalize

    regions = find_regions(normalize(text))
    assert any(r.lines[0] <= 2 <= r.lines[1] for r in regions)


def test_small_and_large_inputs_flag_the_same_error_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    import diagnose.regions.lines as regions

    texts = [
        "INFO ready",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "Segmentation fault (core dumped)",
        "multi\nfault inside one text",  # the automaton sees the newline as a space
        "terminate called after throwing an instance of 'std::runtime_error'",
        "x" * (regions.WINDOW + 10) + "Error past the window",
        "",
    ]
    monkeypatch.setattr(regions, "_AUTOMATON", {})  # not built yet, as in a fresh CLI run
    small = regions.literal_lines(texts)
    assert regions._AUTOMATON == {}
    monkeypatch.setattr(regions, "SMALL_TEXT", -1)
    assert regions.literal_lines(texts) == small
    assert small[:3] == [False, True, True] and small[5] is False


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="> ([]0129٣IWEFDCRNGTAOLK=wht():-/.+ _|#", min_size=1, max_size=30))
def test_prefix_heads_cover_every_prefix_match(text: str) -> None:
    import diagnose.regions.messages as regions

    text = text.strip()
    m = regions._PREFIX_RE.match(text)
    if m is not None and m.end() > 0:
        assert regions._may_have_prefix(text), text


@pytest.mark.parametrize(
    "prefix",
    [
        "> ", "(VllmWorker rank=2 pid=123) ", "[2026-01-02 10:00:00 TP3] ", "2026-01-02T10:00:00Z ",
        "[01/02/2026-10:00:00] ", "ERROR 01-02 12:00:00 [x.py:12] ", "I0102 10:00:00.1 123 f.cc:9] ",
        "[E f.cc:9] ", "[TensorRT-LLM][ERROR] ", "==123==ERROR: ", "=== ", "what():  ",
        "CRITICAL: ", "FATAL ", "WARN ", "DEBUG ", "[W0102 10:00:00.1 x.cc:1] ",
        "\u0662\u0660\u0662\u0666-\u0660\u0661-\u0660\u0662 10:00:00 ",  # \d: any decimal digit
    ],
)  # fmt: skip
def test_each_prefix_kind_starts_with_a_head(prefix: str) -> None:
    import diagnose.regions.messages as regions

    m = regions._PREFIX_RE.match(prefix + "RuntimeError: boom")
    assert m is not None and m.end() > 0, prefix
    assert regions._may_have_prefix(prefix)
    assert regions.strip_prefixes(prefix + "RuntimeError: boom") == "RuntimeError: boom"


EXCEPTION_GROUP = """\
ERROR:    Exception in ASGI application
  + Exception Group Traceback (most recent call last):
  |   File "/srv/venv/lib/python3.12/site-packages/uvicorn/protocols/http/h11_impl.py", line 403, in run_asgi
  |     result = await app(self.scope, self.receive, self.send)
  | ExceptionGroup: unhandled errors in a TaskGroup (2 sub-exceptions)
  +-+---------------- 1 ----------------
    | Traceback (most recent call last):
    |   File "/srv/app/server.py", line 88, in generate
    |     out = engine.step(batch)
    | RuntimeError: CUDA error: an illegal memory access was encountered
    | CUDA kernel errors might be asynchronously reported at some other API call.
    +---------------- 2 ----------------
    | Traceback (most recent call last):
    |   File "/srv/app/server.py", line 95, in stream
    |     await queue.get()
    | asyncio.exceptions.CancelledError
    +------------------------------------"""


def test_an_exception_group_is_one_failure_named_by_its_first_sub_exception() -> None:
    from diagnose.ingest.normalize import normalize

    regions = find_regions(normalize(EXCEPTION_GROUP))  # normalize drops the "| " gutters
    group = [r for r in regions if r.kind == "python-traceback"]
    assert len(group) == 1
    assert group[0].lines == (1, 17)  # uvicorn's line above it, through the closing rule
    assert group[0].message == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert [f.function for f in group[0].frames] == ["run_asgi", "generate", "stream"]


def test_an_exception_group_with_one_sub_exception() -> None:
    from diagnose.ingest.normalize import normalize

    text = "\n".join(EXCEPTION_GROUP.split("\n")[:11])
    [tb] = [r for r in find_regions(normalize(text)) if r.kind == "python-traceback"]
    assert tb.message == "RuntimeError: CUDA error: an illegal memory access was encountered"


def test_a_qualified_exception_without_error_in_its_name_is_an_error_line() -> None:
    text = (
        "W0110 12:27:06.332000 158 torch/_dynamo/convert_frame.py:1551] [2/8] hit recompile_limit\n"
        "\n"
        "torch._dynamo.exc.FailOnRecompileLimitHit: recompile_limit reached with fullgraph=True.\n"
        "sglang.srt.utils: a logger name then a colon is no exception\n"
    )
    messages = [r.message for r in find_regions(_lines(text))]
    assert (
        "torch._dynamo.exc.FailOnRecompileLimitHit: recompile_limit reached with fullgraph=True."
        in (messages)
    )
    assert not any(m.startswith("sglang.srt.utils") for m in messages)


def test_terminate_called_recursively_is_part_of_the_same_failure() -> None:
    region = _one(
        "terminate called after throwing an instance of 'c10::Error'\n"
        "terminate called recursively\n"
        "  what():  The expanded size of the tensor (8561) must match the existing size (7819)"
    )
    assert region.kind == "cpp-terminate" and region.lines == (1, 3)
    assert region.message.startswith("The expanded size of the tensor")


@pytest.mark.parametrize(
    "line",
    [
        "... (many NCCL timeout errors from different ranks) ...",
        "error:",
        "Error log:",
        "Traceback:",
    ],
)
def test_a_posters_placeholder_or_heading_is_no_failure(line: str) -> None:
    assert find_regions(_lines(f"Some text\n{line}\nmore text")) == []


def test_an_error_line_right_above_its_traceback_is_the_same_failure() -> None:
    text = (
        "cuBLAS API failed with status 15\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/gen.py", line 117, in <module>\n'
        "    out = model(x)\n"
    )
    region = _one(text)
    assert (region.kind, region.lines) == ("python-traceback", (1, 5))
    # The paste stops before the exception line: the error line says what failed.
    assert region.message == "cuBLAS API failed with status 15" and region.truncated
    whole = _one(text + "RuntimeError: cublasLt ran into an error!")
    assert whole.message == "RuntimeError: cublasLt ran into an error!"
    # Two lines apart, they stay two failures.
    assert (
        len(find_regions(_lines("cuBLAS API failed with status 15\nINFO retry\n" + text[34:]))) == 2
    )


def test_held_out_round_13_messages() -> None:
    cases = {
        # the paste glued Python's underline onto the exception line
        "RuntimeError: Failed: Assertion error /x/deep_ep.cpp:1134 'x.size(0) <= n'    ^^^^^^^^": (
            "RuntimeError: Failed: Assertion error /x/deep_ep.cpp:1134 'x.size(0) <= n'"
        ),
        # a sentence that ends in a (full-width) colon before the exception
        "I use v0.5.15 as prefill node, startup failed with the following error\uff1aRuntimeError: "
        "CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx(...)`": (
            "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx(...)`"
        ),
        "[W] [TRT] UNSUPPORTED_STATE: Skipping tactic 0 due to insufficient memory": (
            "UNSUPPORTED_STATE: Skipping tactic 0 due to insufficient memory"
        ),
        "[gpu-host:994396:0]      ib_mlx5_dv.c:452  UCX  ERROR   mlx5dv_devx_obj_create(CQ) failed": (
            "mlx5dv_devx_obj_create(CQ) failed"
        ),
    }
    for line, message in cases.items():
        assert _one(line).message == message


def test_a_markdown_heading_is_no_failure() -> None:
    text = (
        "### Originating CUDA error (all 8 TP ranks, simultaneously)\n"
        "CUDA error (/src/decode/sched_meta.cu:111): invalid argument"
    )
    assert _one(text).lines == (2, 2)


def test_an_elision_line_inside_a_traceback_does_not_split_it() -> None:
    region = _one(
        "Traceback (most recent call last):\n"
        '  File "/env/vllm/v1/engine/core.py", line 699, in run_engine_core\n'
        "    engine_core = EngineCoreProc(*args, **kwargs)\n"
        "...\n"
        '  File "/env/vllm/v1/executor/multiproc_executor.py", line 248, in get_response\n'
        "    raise RuntimeError(\n"
        "RuntimeError: Worker failed with error 'CUDA error: out of memory'"
    )
    assert region.lines == (1, 7)
    assert [f.function for f in region.frames] == ["run_engine_core", "get_response"]


def test_a_rust_panic_is_named_by_its_payload_and_keeps_its_backtrace() -> None:
    region = _one(
        "thread 'main' (74) panicked at /root/.cargo/git/cudarc/src/driver/safe/core.rs:264:80:\n"
        "called `Result::unwrap()` on an `Err` value: DriverError(CUDA_ERROR_ILLEGAL_ADDRESS, "
        '"an illegal memory access was encountered")\n'
        "stack backtrace:\n"
        "   0:     0x55a36bcdb93a - std[e28293b1aa0f68bd]::sys::backtrace::print\n"
        "   1:     0x55a36bcf457a - core[c1f1a4ba060b9bfa]::fmt::write"
    )
    assert region.lines == (1, 5)
    assert region.message.startswith("called `Result::unwrap()` on an `Err` value: DriverError(")
    assert [f.function for f in region.frames] == ["std::sys::backtrace::print", "core::fmt::write"]


def test_a_message_ending_in_a_colon_takes_the_indented_lines_that_carry_it_on() -> None:
    text = (
        "RuntimeError: Error in function 'aligned_alloc' at /src/flashinfer/allocator.h:49:\n"
        "  Buffer overflow when allocating memory for batch_prefill_tmp_v\n"
        "  with size 536346624 and alignment 16,\n"
        "  but only 413138944 bytes available in AlignedAllocator.\n"
        "INFO shutting down"
    )
    region = _one(text)
    assert region.message == (
        "RuntimeError: Error in function 'aligned_alloc' at /src/flashinfer/allocator.h:49: "
        "Buffer overflow when allocating memory for batch_prefill_tmp_v with size 536346624 "
        "and alignment 16, but only 413138944 bytes available in AlignedAllocator."
    )
    traceback = _one(
        'Traceback (most recent call last):\n  File "/srv/a.py", line 3, in f\n    g()\n' + text
    )
    assert traceback.message == region.message


def test_held_out_round_14_prose_and_messages() -> None:
    text = (
        "Some tests such as test_addbmm_cuda would fail with the following error:\n"
        "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasSgemm(h)`\n"
        "The corresponding test for `addmm` also failed with the same error.\n"
        "It runs well with tp=1, but failed with below error when tp=2:\n"
    )
    [region] = find_regions(_lines(text))
    assert region.lines == (2, 2)
    quoted = (
        "@someone Thanks. I tried that but its shared memory limit error `'triton.runtime.errors."
        "OutOfResources: out of resource: shared memory, Required: 98304, Hardware limit: 65536.`"
    )
    assert _one(quoted).message.startswith("triton.runtime.errors.OutOfResources: out of resource")


def test_an_exception_with_nothing_after_its_colon_takes_the_lines_below() -> None:
    region = _one(
        "Traceback (most recent call last):\n"
        '  File "/x/torch/cuda/__init__.py", line 108, in _check_driver\n'
        '    of the CUDA driver.""".format(str(torch._C._cuda_getDriverVersion())))\n'
        "AssertionError: \n"
        "The NVIDIA driver on your system is too old (found version 9000).\n"
        "Please update your GPU driver."
    )
    assert region.message == (
        "AssertionError: The NVIDIA driver on your system is too old (found version 9000). "
        "Please update your GPU driver."
    )


def test_a_stub_the_paste_cut_off_at_the_end_is_not_the_exception() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/a/b.py", line 3, in f\n'
        "    g()\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "\n"
        "During handling of the above exception, another exception occurred:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "/a/c.py", line 5, in h\n'
        "Runt"
    )
    region = _one(text)
    assert region.message == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert region.truncated


def test_pytorch_windows_abort_handler_and_its_frames_are_one_region() -> None:
    # c10's terminate handler on Windows prints this line, then dbghelp frames
    # (NVIDIA/TensorRT-LLM#2540).
    log = (
        "Loading Model: [2/2]\tBuilding engine\n"
        "Unhandled exception caught in c10/util/AbortHandler.h\n"
        "00007FFA10AB3C2100007FFA10AB3000 acme_torch.dll!THPAcme_initModule "
        "[<unknown file> @ <unknown line number>]\n"
        "00007FFA20CD4E2200007FFA20CD4000 ucrtbase.dll!terminate [<unknown file> @ <unknown line number>]\n"
        "00007FFA55667788 00007FFA55660000 acme_plugin.dll!setAcmeFinder [<un"
    )
    r = _one(log)
    assert (
        r.lines == (2, 5) and r.message == "Unhandled exception caught in c10/util/AbortHandler.h"
    )
    assert [f.module for f in r.frames] == ["acme_torch.dll", "ucrtbase.dll", "acme_plugin.dll"]


def test_repeats_of_one_failure_across_windows_are_one_region_with_a_count() -> None:
    """A warning a loaded server repeats opens a window each time; the log gets one region."""
    from diagnose.model import Region
    from diagnose.regions import merge_repeats

    def warn(line: int, group: int, rank: str) -> Region:
        text = f"Sequence group {group} is preempted by PreemptionMode.RECOMPUTE mode"
        return Region("error-line", (line, line), text, line, ranks=(rank,))

    crash = Region("python-traceback", (500, 520), "RuntimeError: CUDA error", 520)
    got = merge_repeats([warn(10, 1, "TP1"), warn(200, 77, "TP0"), crash, warn(900, 5, "TP1")])
    assert [r.kind for r in got] == ["error-line", "python-traceback"]
    first = got[0]
    assert (first.count, first.lines, first.last_line, first.ranks) == (
        3,
        (10, 10),
        900,
        ("TP0", "TP1"),
    )
    assert first.to_dict()["last_line"] == 900 and got[1].to_dict()["last_line"] == 520


def test_a_compiler_report_with_its_source_line_and_caret_is_one_region() -> None:
    from diagnose.ingest.normalize import normalize

    text = (
        "triton.compiler.errors.CompilationError: at 1:0:\n"
        "def triton_poi_fused_to_copy_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):\n"
        "^\n"
        'ValueError("type fp8e4nv not supported in this architecture. The supported fp8 dtypes'
        " are ('fp8e4b15', 'fp8e5')\")\n"
    )
    regions = find_regions(normalize(text))
    assert len(regions) == 1 and regions[0].lines == (1, 4)


@pytest.mark.parametrize("blank", ["\n", ""])
def test_a_cause_chain_under_an_error_is_part_of_its_region(blank: str) -> None:
    """Rust's anyhow prints the causes under "Caused by:", after a blank line; the region
    holds them, and a second, unrelated error after another blank line is its own."""
    text = (
        "Error: Could not create backend\n"
        f"{blank}"
        "Caused by:\n"
        "    0: Could not start backend\n"
        "    1: Runtime compute cap 75 is not compatible with compile time compute cap 80\n"
        "\n\n"
        "INFO restarting\n"
        "RuntimeError: frobnication failed"
    )
    first, second = find_regions(_lines(text))
    cause = (
        text.split("\n").index(
            "    1: Runtime compute cap 75 is not compatible with compile time compute cap 80"
        )
        + 1
    )
    assert first.lines[0] == 1 and first.lines[1] == cause
    assert second.message == "RuntimeError: frobnication failed"


def test_xformers_reasons_for_each_operator_are_part_of_its_region() -> None:
    text = (
        "NotImplementedError: No operator found for `memory_efficient_attention_forward` with inputs:\n"
        "     query       : shape=(1, 128, 8, 64) (torch.float16)\n"
        "\n"
        "`fa3F@0.0.0` is not supported because:\n"
        "    requires device with capability <= (9, 0) but your GPU has capability (12, 0) (too new)\n"
        "\n"
        "`fa2F@0.0.0` is not supported because:\n"
        "    operator wasn't built"
    )
    region = _one(text)
    assert region.lines == (1, 8)
