"""Tests for :func:`diagnose.frames.dialects.parse_frame`: every dialect, its edges, and peers.

The fixtures are synthetic lines in each dialect's format (our own names, paths and numbers).
The peer tests at the bottom re-run ``bench/peer_frames.py``'s scoring on the peer suites in
``../shared/peer`` and skip cleanly when that folder is absent.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.frames.dialects import DIALECTS, parse_frame
from diagnose.model import Frame, LogLine


def pf(text: str, number: int = 7) -> Frame | None:
    """Parse one line of text as line ``number``."""
    return parse_frame(LogLine(number=number, text=text))


def must(text: str) -> Frame:
    """Parse a line that has to be a frame."""
    frame = pf(text)
    assert frame is not None, text
    return frame


# --- boost::stacktrace (Triton Inference Server's crash handler) ---------------------------------


@pytest.mark.parametrize(
    ("text", "function", "address", "module", "file", "line"),
    [
        (
            " 0# 0x000055D0AB12CD34 in tritonserver",
            None,
            "0x000055D0AB12CD34",
            "tritonserver",
            None,
            None,
        ),
        (
            " 2# acme::backend::Instance::Execute(Request**, unsigned int) in /opt/acme/libacme.so",
            "acme::backend::Instance::Execute",
            None,
            "/opt/acme/libacme.so",
            None,
            None,
        ),
        (
            "4# acme::step(int) at /src/acme/step.cc:42",
            "acme::step",
            None,
            None,
            "/src/acme/step.cc",
            42,
        ),
        ("12# 0x00007F00AA11BB22", None, "0x00007F00AA11BB22", None, None, None),
        (
            "5# operator new(unsigned long) in /lib/libstdc++.so.6",
            "operator new",
            None,
            "/lib/libstdc++.so.6",
            None,
            None,
        ),
    ],
)
def test_boost_stacktrace_frames(
    text: str,
    function: str | None,
    address: str | None,
    module: str | None,
    file: str | None,
    line: int | None,
) -> None:
    f = must(text)
    assert f.dialect == "boost"
    assert (f.function, f.address, f.module, f.file, f.line) == (
        function,
        address,
        module,
        file,
        line,
    )
    assert f.index == int(text.strip().split("#")[0])


@pytest.mark.parametrize(
    "text",
    [
        "3# of 5 shards loaded",
        "2# step in the right direction",
        "2# step in progress",
        "1#2 in x",
        "10#",
    ],
)
def test_numbered_prose_is_not_a_boost_frame(text: str) -> None:
    assert pf(text) is None


# --- trtllm ------------------------------------------------------------------------------------


def test_trtllm_demangled_symbol() -> None:
    f = must(
        "1       0x7a1b2c3d4e5f acme::common::throwRuntimeError(char const*, int, char const*)"
    )
    assert (f.dialect, f.index, f.address) == ("trtllm", 1, "0x7a1b2c3d4e5f")
    assert f.symbol == "acme::common::throwRuntimeError(char const*, int, char const*)"
    assert f.function == "acme::common::throwRuntimeError"
    assert f.params == ("char const*", "int", "char const*")
    assert f.module is None and f.offset is None and not f.truncated
    assert f.log_line == 7


def test_trtllm_frame_cut_inside_its_module_path() -> None:
    f = must("9       0x7fd6cf5308f6 /opt/tritonserver/backends/tensorrtll")
    assert (f.function, f.module, f.truncated) == (
        None,
        "/opt/tritonserver/backends/tensorrtll",
        True,
    )
    g = must("4       0x7fd6cf5308f6 /usr/lib/x86_64-linux-gnu/libcuda.so.1")
    assert (g.function, g.module, g.truncated) == (
        None,
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        False,
    )


def test_trtllm_module_offset_slot() -> None:
    f = must(
        "2       0x7a1b2c000341 /home/me/.cache/kern/0.1.0/ab12/ops/moe_gemm/moe_gemm.so(+0x51d341)"
    )
    assert f.dialect == "trtllm"
    assert f.module == "/home/me/.cache/kern/0.1.0/ab12/ops/moe_gemm/moe_gemm.so"
    assert f.offset == "+0x51d341"
    assert f.symbol is None and f.function is None


def test_trtllm_backtrace_symbols_slot() -> None:
    f = must(
        "6       0x7a1b2c000341 /opt/acme/libacme.so(_ZN4acme3run4stepEv+0x1a) [0x7a1b2c000341]"
    )
    assert (f.dialect, f.module, f.offset, f.function) == (
        "trtllm",
        "/opt/acme/libacme.so",
        "+0x1a",
        "acme::run::step",
    )


def test_trtllm_truncated_template_symbol() -> None:
    f = must(
        "3       0x7a1b2c3d0948 void acme::kernels::gemm_oss::dispatchGroupedGemmTma"
        "<cutlass::arch::Sm120, __nv_fp4_e2m1, __nv_fp4_e2m1, __nv_bf..."
    )
    assert f.dialect == "trtllm"
    assert f.function == "acme::kernels::gemm_oss::dispatchGroupedGemmTma"
    assert f.truncated
    assert f.template_args and f.template_args[1].text == "__nv_fp4_e2m1"
    assert f.kernel.arch is not None


def test_trtllm_decimal_offset_becomes_hex() -> None:
    f = must("12      0x55aa00001234 acme::runtime::Buffers::gpu(unsigned long) const + 230")
    assert f.function == "acme::runtime::Buffers::gpu"
    assert f.offset == "+0xe6"
    assert f.symbol == "acme::runtime::Buffers::gpu(unsigned long) const"


def test_trtllm_raw_mangled_symbol() -> None:
    f = must("4       0x7a1b2c3d4000 _ZN4acme6common3fooEi")
    assert f.mangled == "_ZN4acme6common3fooEi"
    assert f.symbol == "_ZN4acme6common3fooEi"
    assert f.function == "acme::common::foo"
    assert f.params == ("int",)


def test_trtllm_truncated_mangled_symbol_reads_prefix() -> None:
    f = must("5       0x7a1b2c3d4000 _ZN4acme7kernels12grouped_gemmILi128ELi25")
    assert f.mangled is not None
    assert f.function is not None and f.function.startswith("acme::kernels")


# --- glibc -------------------------------------------------------------------------------------


def test_glibc_module_offset_only() -> None:
    f = must("/opt/acme/lib/moe_gemm.so(+0x51d341) [0x7f00aa51d341]")
    assert (f.dialect, f.module, f.offset, f.address) == (
        "glibc",
        "/opt/acme/lib/moe_gemm.so",
        "+0x51d341",
        "0x7f00aa51d341",
    )
    assert f.symbol is None and f.index is None


def test_glibc_mangled_symbol() -> None:
    f = must("/lib/x86_64-linux-gnu/libacme.so.3(_ZN4acme3run4stepEv+0x1a) [0x7f0012345678]")
    assert f.symbol == "_ZN4acme3run4stepEv" and f.mangled == "_ZN4acme3run4stepEv"
    assert f.function == "acme::run::step"
    assert f.offset == "+0x1a"


def test_glibc_relative_exe_and_no_address() -> None:
    f = must("./server(main+0x2d) [0x401a2d]")
    assert (f.module, f.function, f.offset) == ("./server", "main", "+0x2d")
    g = must("libacme.so(+0x1234)")
    assert (g.dialect, g.module, g.offset, g.address) == ("glibc", "libacme.so", "+0x1234", None)


def test_glibc_rejects_prose() -> None:
    assert pf("see foo(bar) for details") is None
    assert pf("call(x)") is None
    assert pf("tensor([1, 2, 3])") is None


# --- c10 ---------------------------------------------------------------------------------------


def test_c10_named_frame() -> None:
    f = must(
        "frame #3: c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, "
        "bool) + 0x1a (0x7f11aa0b1c2d in /venv/lib/python3.11/site-packages/acme/libc10_cuda.so)"
    )
    assert (f.dialect, f.index, f.offset, f.address) == ("c10", 3, "+0x1a", "0x7f11aa0b1c2d")
    assert f.function == "c10::cuda::c10_cuda_check_implementation"
    assert f.module is not None and f.module.endswith("libc10_cuda.so")
    assert f.params is not None and len(f.params) == 5


def test_c10_unknown_function() -> None:
    f = must(
        "frame #0: <unknown function> + 0x1b8f5c (0x7f11aa1b8f5c in /usr/lib/libtorch_cuda.so)"
    )
    assert f.symbol == "<unknown function>" and f.function is None
    assert (f.offset, f.module) == ("+0x1b8f5c", "/usr/lib/libtorch_cuda.so")


def test_c10_tail_cut_mid_line() -> None:
    f = must("frame #2: acme::check_impl(int, bool) + 0x3c2 (0")
    assert f.function == "acme::check_impl" and f.offset == "+0x3c2"
    assert f.module is None and f.truncated


def test_c10_exception_header_is_not_a_frame() -> None:
    assert (
        pf(
            "Exception raised from c10_cuda_check_implementation at "
            "/src/c10/cuda/CUDAException.cpp:44 (most recent call first):"
        )
        is None
    )


@pytest.mark.parametrize(
    ("text", "module", "function", "file", "line", "truncated"),
    [
        # Two addresses run together, no source: what a paste of c10's Windows handler shows.
        (
            "00007FFA10AB3C2100007FFA10AB3000 acme_torch.dll!THPAcme_initModule "
            "[<unknown file> @ <unknown line number>]",
            "acme_torch.dll",
            "THPAcme_initModule",
            None,
            None,
            False,
        ),
        # Addresses apart, a qualified name and its source.
        (
            "00007FFA11223344 00007FFA11220000 c10.dll!c10::detail::torchCheckFail "
            "[D:\\build\\c10\\util\\Exception.cpp @ 557]",
            "c10.dll",
            "c10::detail::torchCheckFail",
            "D:\\build\\c10\\util\\Exception.cpp",
            557,
            False,
        ),
        # The paste cut inside the source slot.
        (
            "00007FFA55667788 00007FFA55660000 acme_plugin.dll!setAcmeFinder [<un",
            "acme_plugin.dll",
            "setAcmeFinder",
            None,
            None,
            True,
        ),
    ],
)
def test_c10_windows_frames(
    text: str, module: str, function: str, file: str | None, line: int | None, truncated: bool
) -> None:
    f = must(text)
    assert (f.dialect, f.module, f.function) == ("c10", module, function)
    assert (f.file, f.line, f.truncated) == (file, line, truncated)
    assert f.address is not None and f.address.startswith("0x00007ffa")


def test_a_hex_dump_line_is_not_a_windows_frame() -> None:
    assert pf("0000000000000000 0000000000000001 00000000deadbeef") is None


# --- gdb ---------------------------------------------------------------------------------------


def test_gdb_values_are_not_params() -> None:
    f = must(
        "#0  0x00007f1234567890 in acme::Engine::step (this=0x55aa, n=1, p=0x0) at engine.cc:12"
    )
    assert (f.dialect, f.index, f.address) == ("gdb", 0, "0x00007f1234567890")
    assert f.function == "acme::Engine::step"
    assert f.params is None
    assert (f.file, f.line) == ("engine.cc", 12)


def test_gdb_from_library_and_typed_name() -> None:
    f = must("#1  0x00007f0000001234 in acme_fail(char const*, int) () from /usr/lib/libacme.so.1")
    assert f.function == "acme_fail" and f.params == ("char const*", "int")
    assert f.module == "/usr/lib/libacme.so.1"
    g = must("#1  0x00007f0000001234 in raise () from /lib64/libc.so.6")
    assert g.function == "raise" and g.module == "/lib64/libc.so.6"


def test_gdb_no_address_and_signal_handler() -> None:
    f = must('#2  acme::f<int> (x=3, s="a (b") at src/f.cc:3')
    assert f.dialect == "gdb" and f.address is None
    assert f.function == "acme::f" and f.line == 3
    s = must("#3  <signal handler called>")
    assert s.dialect == "gdb" and s.function is None and s.index == 3


def test_gdb_unknown_symbol() -> None:
    f = must("#4  0x0000000000000000 in ?? ()")
    assert f.dialect == "gdb" and f.symbol == "??" and f.function is None


def test_gdb_anonymous_namespace_and_operator() -> None:
    f = must(
        "#5  0x0000555500001000 in (anonymous namespace)::Worker::operator() (this=0x1) at w.cc:9"
    )
    assert f.function == "(anonymous namespace)::Worker::operator()"
    g = must("#6  0x0000555500002000 in acme::operator<< (os=..., v=...) at p.cc:4")
    assert g.function == "acme::operator<<"


def test_cuda_gdb_kernel_launch_config() -> None:
    f = must(
        "#0  0x00007fffd0001230 in scale_kernel<<<(64,1,1),(256,1,1)>>> (p=0x7f, n=8) at k.cu:21"
    )
    assert f.function == "scale_kernel" and (f.file, f.line) == ("k.cu", 21)


def test_gdb_thread_header_is_not_a_frame() -> None:
    assert pf('Thread 3 "python" received signal SIGSEGV, Segmentation fault.') is None
    assert pf("Thread 2 (Thread 0x7f00 (LWP 123)):") is None
    assert pf("#1 priority for the next release") is None
    assert pf("# comment line") is None


# --- sanitizer ---------------------------------------------------------------------------------


def test_asan_symbolized() -> None:
    f = must("    #0 0x4f8a2b in acme::Parser::feed(int) /src/acme/parser.cc:12:3")
    assert (f.dialect, f.index, f.address) == ("sanitizer", 0, "0x4f8a2b")
    assert f.function == "acme::Parser::feed" and f.params == ("int",)
    assert (f.file, f.line) == ("/src/acme/parser.cc", 12)


def test_asan_module_forms() -> None:
    f = must("    #1 0x7f0011223344 in acme_run (/usr/lib/libacme.so+0x1234)")
    assert (f.function, f.module, f.offset) == ("acme_run", "/usr/lib/libacme.so", "+0x1234")
    g = must("    #2 0x7f0011220abc (/usr/lib/libother.so+0xabc) (BuildId: 0123abcd)")
    assert (g.dialect, g.function, g.module, g.offset) == (
        "sanitizer",
        None,
        "/usr/lib/libother.so",
        "+0xabc",
    )
    h = must("    #3 0x55550000aaaa in acme_main acme.c:12")
    assert (h.function, h.file, h.line) == ("acme_main", "acme.c", 12)


def test_asan_buildid_with_source() -> None:
    f = must("#4 0x55d0 in acme::Go::run() const /b/go.cc:8:1 (BuildId: 9f8e7d6c5b4a)")
    assert f.dialect == "sanitizer" and f.function == "acme::Go::run"
    assert (f.file, f.line) == ("/b/go.cc", 8)


def test_tsan_without_address() -> None:
    f = must("    #0 acme::Queue::push(int) /src/q.cc:40:7 (app+0x4a2b)")
    assert (f.dialect, f.address, f.function) == ("sanitizer", None, "acme::Queue::push")
    assert (f.file, f.line, f.module, f.offset) == ("/src/q.cc", 40, "app", "+0x4a2b")
    g = must("    #1 pthread_mutex_lock <null> (libtsan.so.2+0x3c9a1)")
    assert g.function == "pthread_mutex_lock" and g.file is None


def test_sanitizer_bare_and_unknown() -> None:
    f = must("#8 0x7fff8d05641d in acmeProcessPixels")
    assert f.dialect == "sanitizer" and f.function == "acmeProcessPixels"
    g = must("#3 0x7c8d00f71ec6 <unknown>")
    assert g.function is None and g.address == "0x7c8d00f71ec6"
    h = must("#0 0x00000046bef1 __interceptor_backtrace")
    assert h.function == "__interceptor_backtrace"


def test_windows_symbolizer_offset_in_name() -> None:
    f = must(r"#26 0xf756097 in AcmeVerifier+0xd7ff7 (C:\acme\bin\acme_child.dll+0x10d7ff7)")
    assert f.function == "AcmeVerifier" and f.offset == "+0x10d7ff7"
    assert f.module == r"C:\acme\bin\acme_child.dll"


def test_sanitizer_unknown_module_and_location() -> None:
    f = must("    #0 0x631000001000  (<unknown module>)")
    assert (f.dialect, f.function, f.module, f.symbol) == ("sanitizer", None, None, None)
    g = must("    #0 0x7f3b595f8acb in acme_alloc ??:?")
    assert (g.function, g.file, g.line) == ("acme_alloc", None, None)
    h = must("    #2 0x7fff8e1abc10  (/usr/lib/libacme.dylib:x86_64+0xc10)")
    assert (h.module, h.offset) == ("/usr/lib/libacme.dylib", "+0xc10")


def test_fuchsia_inline_index_and_angle_module() -> None:
    f = must("   #1.1  0x0000658e5ed9863c in Unwind ../lib/unwind.h:115 <libacme_rt.so>+0x4363c")
    assert (f.index, f.function, f.module, f.offset) == (1, "Unwind", "libacme_rt.so", "+0x4363c")
    assert (f.file, f.line) == ("../lib/unwind.h", 115)
    g = must("   #2    0x0000227def927355 in acme::Print() <<application>>+0x21d355")
    assert (g.function, g.module) == ("acme::Print", "application")


def test_android_unsymbolized_module_offset() -> None:
    f = must("#00 0xa3832e11 /data/app/com.acme-1/lib/arm/libacme.so+0x002dce11")
    assert (f.function, f.module, f.offset) == (
        None,
        "/data/app/com.acme-1/lib/arm/libacme.so",
        "+0x002dce11",
    )


def test_gdb_wrapped_argument_list() -> None:
    # gdb wrapped "(QObject*, QEvent*) () from lib" onto the next line.
    f = must("#18 0x00007f8c37e871bd in Acme::notify_helper(AcmeObject*, AcmeEvent*)")
    assert (f.dialect, f.function) == ("gdb", "Acme::notify_helper")
    g = must("#27 0x00007f8c3a8de4ef in")
    assert (g.dialect, g.function, g.address) == ("gdb", None, "0x00007f8c3a8de4ef")
    h = must("#5  0x00007f0000001234 in Acme::run (this=0x1,")
    assert (h.dialect, h.function, h.params) == ("gdb", "Acme::run", None)


def test_kernel_oops_frames() -> None:
    f = must(" nvacme_ioctl+0x5d/0x90 [nvacme]")
    assert (f.dialect, f.function, f.offset, f.module) == (
        "other",
        "nvacme_ioctl",
        "+0x5d",
        "nvacme",
    )
    g = must(" [<ffffffff926dbfd0>] process_work+0x572/0x7e1 kernel/work.c:2302 (discriminator 3)")
    assert (g.address, g.function, g.file, g.line) == (
        "0xffffffff926dbfd0",
        "process_work",
        "kernel/work.c",
        2302,
    )
    for name in ("acme_irq", "fence_wait", "File_op", "frame_free"):
        assert must(f"{name}+0x11/0x40").function == name
    h = must("RIP: 0010:acme_timer+0x74/0x80")
    assert h.function == "acme_timer"
    k = must("[    0.058680] #0 [<0x000000000062a66a>] acme_describe+0x6a/0x5c0")
    assert (k.index, k.function) == (0, "acme_describe")
    # "?" marks a stale return address the unwinder could not vouch for.
    assert pf(" ? acme_poll+0xe0/0xe0") is None


# --- python ------------------------------------------------------------------------------------


def test_python_traceback_and_faulthandler() -> None:
    f = must('  File "/srv/app/worker.py", line 116, in forward_loop')
    assert (f.dialect, f.file, f.line, f.function) == (
        "python",
        "/srv/app/worker.py",
        116,
        "forward_loop",
    )
    g = must('  File "/srv/app/worker.py", line 12 in step')
    assert (g.line, g.function) == (12, "step")
    h = must('File "<string>", line 1, in <module>')
    assert (h.file, h.function) == ("<string>", "<module>")
    s = must('  File "/srv/app/bad.py", line 15')
    assert s.function is None and s.line == 15


def test_python_prose_is_not_a_frame() -> None:
    assert pf('File "x.py" could not be opened') is None
    assert pf("FileNotFoundError: [Errno 2] No such file") is None


# --- other -------------------------------------------------------------------------------------


def test_java_rust_glog_tombstone() -> None:
    j = must("\tat com.acme.Parser.feed(Parser.java:12)")
    assert (j.dialect, j.function, j.file, j.line) == (
        "other",
        "com.acme.Parser.feed",
        "Parser.java",
        12,
    )
    r = must("  14: acme_core::engine::Engine::step::h0123456789abcdef")
    assert (r.index, r.function) == (14, "acme_core::engine::Engine::step")
    g = must("    @     0x7f9c3d0b9c2d  acme::LogMessage::Fail()")
    assert g.function == "acme::LogMessage::Fail"
    t = must("#00 pc 000000000001e2fc  /system/lib64/libacme.so (acme_abort+164) (BuildId: 12ab)")
    assert (t.index, t.module, t.function, t.offset) == (
        0,
        "/system/lib64/libacme.so",
        "acme_abort",
        "+0xa4",
    )


# --- edges -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "\t#0  0x00007f1234567890 in acme::step (n=1) at e.cc:12\r",
        "   #0  0x00007f1234567890 in acme::step (n=1) at e.cc:12   ",
        "#0  0x00007f1234567890 in acme::step (n=1) at e.cc:12\r",
    ],
)
def test_whitespace_tabs_and_cr(text: str) -> None:
    f = must(text)
    assert (f.function, f.file, f.line) == ("acme::step", "e.cc", 12)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "INFO 12-01 10:00:00 engine started",
        "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered",
        "Traceback (most recent call last):",
        "12 GiB free (0x0 reserved)",
        "3 tensors allocated",
        "#",
        "frame #",
        'File "',
        "at ",
        "@",
    ],
)
def test_non_frames(text: str) -> None:
    assert pf(text) is None


def test_every_dialect_is_declared() -> None:
    samples = [
        "1       0x7a00 acme::f()",
        "./app(main+0x2d) [0x401a2d]",
        "frame #0: acme::f() + 0x1 (0x7f00 in /x/libacme.so)",
        "#0  0x00007f00 in acme::f () at f.cc:1",
        "    #0 0x4f8a2b in acme::f() /src/f.cc:1:1",
        '  File "/x.py", line 1, in f',
        " 2# acme::f(int) in /x/libacme.so",
        "\tat com.acme.F.f(F.java:1)",
    ]
    assert {must(s).dialect for s in samples} == set(DIALECTS)


@pytest.mark.parametrize(
    "text",
    [
        "#0 " + "a" * 1_000_000,
        "#0  0x1 in " + "<" * 500_000 + " (" * 250_000,
        "frame #0: " + "(" * 1_000_000,
        "1       0x7a00 " + "x<" * 500_000,
        "/lib/a.so(" + "+0x" * 300_000 + ") [0x1]",
        "x" * 1_000_000 + "(+0x1)",
        'File "' + "a" * 1_000_000,
        " " * 1_000_000,
        "#0 0x1 in f " + "(" * 500_000 + "a+0x1)",
    ],
)
def test_megabyte_lines_are_fast(text: str) -> None:
    start = time.perf_counter()
    pf(text)
    # Generous bound: catches quadratic backtracking (minutes), not micro-regressions.
    assert time.perf_counter() - start < 2.0


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        st.text(max_size=300),
        st.builds(
            lambda p, s: p + s,
            st.sampled_from(
                [
                    "#0 0x1 in ",
                    "#1  ",
                    "frame #2: ",
                    '  File "',
                    "3       0x7f ",
                    "./a(",
                    "at ",
                    "@ ",
                ]
            ),
            st.text(alphabet="_ZN0123456789abc<>()[]{}:+-x ., \"'#=*&~", max_size=200),
        ),
    )
)
def test_never_raises(text: str) -> None:
    frame = pf(text)
    assert frame is None or frame.dialect in DIALECTS


# --- peer suites -------------------------------------------------------------------------------

SHARED = Path(__file__).resolve().parents[1].parent / "shared"

# Scores measured with `python bench/peer_frames.py` (see bench/results/peer_frames.md); a drop
# by more than the margin means a dialect regressed.
MEASURED = {
    "clusterfuzz_state": 0.767,
    "clusterfuzz_top3": 0.493,
    "satyr_gdb": 1.0,
    "satyr_python": 1.0,
    "drkonqi": 1.0,
}
MARGIN = 0.02


@pytest.fixture(scope="module")
def peer_bench() -> ModuleType:
    """Load bench/peer_frames.py, skipping when ../shared/peer is absent."""
    if not (SHARED / "peer").is_dir():
        pytest.skip("../shared/peer is not available")
    path = Path(__file__).resolve().parents[1] / "bench" / "peer_frames.py"
    spec = importlib.util.spec_from_file_location("peer_frames", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["peer_frames"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def peer_scores(peer_bench: ModuleType) -> dict[str, float]:
    """Score every peer suite once for the whole module."""
    scores: dict[str, float] = peer_bench.score_all(SHARED / "peer")
    return scores


@pytest.mark.parametrize("suite", sorted(MEASURED))
def test_peer_scores_hold(peer_scores: dict[str, float], suite: str) -> None:
    assert peer_scores[suite] >= MEASURED[suite] - MARGIN, (suite, peer_scores[suite])


def test_ucx_backtrace_frames_keep_their_function_and_source() -> None:
    frame = parse_frame(LogLine(4, " 7 0x00000000007b13e4 cublasLtMatmulAlgoGetHeuristic()  ???:0"))
    assert frame is not None
    assert (frame.function, frame.file, frame.line) == (
        "cublasLtMatmulAlgoGetHeuristic",
        None,
        None,
    )
    frame = parse_frame(
        LogLine(5, " 9 0x00000000036f4255 at::native::(anonymous namespace)::addmm()  Blas.cpp:41")
    )
    assert frame is not None
    assert (frame.function, frame.file, frame.line) == (
        "at::native::(anonymous namespace)::addmm",
        "Blas.cpp",
        41,
    )


def test_open_mpi_numbers_its_glibc_frames() -> None:
    line = "[ 1] /opt/venv/nvidia/cublas/lib/libcublasLt.so.12(+0x7a1b3c)[0x7f10d27a1b3c]"
    frame = parse_frame(LogLine(3, line))
    assert frame is not None and frame.dialect == "glibc"
    assert (frame.index, frame.module, frame.offset) == (
        1,
        "/opt/venv/nvidia/cublas/lib/libcublasLt.so.12",
        "+0x7a1b3c",
    )


def test_gdb_frame_without_a_name_keeps_its_library_as_module() -> None:
    frame = parse_frame(
        LogLine(3, "#2  0x00007fff7cf3b52a in  () at /lib/x86_64-linux-gnu/libstdc++.so.6")
    )
    assert frame is not None
    assert (frame.function, frame.module, frame.file) == (
        None,
        "/lib/x86_64-linux-gnu/libstdc++.so.6",
        None,
    )
    frame = parse_frame(
        LogLine(
            4,
            "#3  0x00007fffe00722dc in at::Tensor::index_put_(c10::Scalar const&) "
            "[clone .cold] () at /opt/libtorch/lib/libtorch_cpu.so",
        )
    )
    assert frame is not None
    assert (frame.function, frame.module) == (
        "at::Tensor::index_put_",
        "/opt/libtorch/lib/libtorch_cpu.so",
    )


def test_open_mpi_frame_without_a_symbol() -> None:
    frame = parse_frame(LogLine(6, "[ 3] python3[0x598f69]"))
    assert frame is not None
    assert (frame.dialect, frame.index, frame.module, frame.address) == (
        "glibc",
        3,
        "python3",
        "0x598f69",
    )
    assert parse_frame(LogLine(6, "python3[0x598f69]")) is None  # no index: not enough to go on
