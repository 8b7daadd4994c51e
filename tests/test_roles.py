"""Frame roles: error-reporting machinery is never the culprit; kernels are."""

from __future__ import annotations

from diagnose.api import diagnose_text
from diagnose.model import Frame, KernelFacts
from diagnose.roles import culprit_first, frame_role

TRACE = """\
[TensorRT-LLM][ERROR] Assertion failed: Something failed (/src/x.h:10)
1       0x7f0000000ca6 tensorrt_llm::common::throwRuntimeError(char const*, int, char const*)
2       0x7f0000000d00 /opt/lib/libth_common.so(+0x1234)
3       0x7f0000000e00 void tensorrt_llm::kernels::cutlass_kernels_oss::dispatchMoeGemmSelectClusterShapeTmaWarpSpecialized<cutlass::arch::Sm90, __nv_fp8_e4m3, __nv_fp8_e4m3, __nv_bfloat16>(int)
4       0x7f0000000f00 my_app::Server::handle(int)
"""


def test_roles_from_names_and_kernel_vocabulary() -> None:
    assert frame_role(Frame(1, "trtllm", function="tensorrt_llm::common::throwRuntimeError")) == (
        "machinery"
    )
    assert frame_role(Frame(1, "c10", function="c10::detail::torchCheckFail")) == "machinery"
    assert frame_role(Frame(1, "python", function="_call_impl")) == "machinery"
    assert frame_role(Frame(1, "glibc", module="/usr/lib/libcuda.so.1")) == "runtime"
    assert frame_role(Frame(1, "gdb", function="my_app::Server::handle")) == "app"
    # Kernel vocabulary in the template arguments makes any name a kernel frame.
    facts = KernelFacts(arch="sm_120", dtypes=("fp4_e2m1",))
    assert frame_role(Frame(1, "trtllm", function="ns::launch", kernel=facts)) == "kernel"


def test_culprit_order_puts_machinery_last() -> None:
    frames = [
        Frame(1, "trtllm", function="x", role="machinery"),
        Frame(2, "trtllm", function="y", role="app"),
        Frame(3, "trtllm", function="z", role="kernel"),
    ]
    assert [f.log_line for f in culprit_first(frames)] == [3, 2, 1]


def test_pipeline_assigns_roles_and_json_carries_them() -> None:
    d = diagnose_text(TRACE)
    frames = [f for r in d.crashes for f in r.frames]
    roles = {f.function: f.role for f in frames if f.function}
    assert roles["tensorrt_llm::common::throwRuntimeError"] == "machinery"
    kernel_fn = "tensorrt_llm::kernels::cutlass_kernels_oss::dispatchMoeGemmSelectClusterShapeTmaWarpSpecialized"
    assert roles[kernel_fn] == "kernel"
    assert all("role" in f for r in d.to_dict()["crashes"] for f in r["frames"])


def test_top_frames_of_a_python_traceback_are_its_innermost() -> None:
    from dataclasses import replace

    from diagnose.model import Frame, Region
    from diagnose.render.common import MAX_FRAMES, top_frames

    frames = tuple(
        Frame(
            log_line=i,
            dialect="python",
            function=f"f{i}",
            file="x.py",
            line=i + 1,
            role="kernel" if i in (2, 9) else "app",
        )
        for i in range(12)
    )
    region = Region("python-traceback", (1, 12), "E: x", 12, frames=frames)
    shown = top_frames(region)
    assert len(shown) == MAX_FRAMES
    assert shown[-1] == "f11 (x.py:12)"
    assert [s for s in shown if "likely culprit" in s] == ["f9 (x.py:10)  <- likely culprit"]
    # A native backtrace lists its innermost frame first.
    native = tuple(replace(f, dialect="gdb") for f in frames)
    shown = top_frames(Region("gdb-backtrace", (1, 12), "E: x", 1, frames=native))
    assert shown[0] == "f0 (x.py:1)"
    assert "f2 (x.py:3)  <- likely culprit" in shown


def test_ggml_backtrace_reporter_is_machinery() -> None:
    # ggml forks gdb to print its backtrace: its own frames wait for that child.
    for name in ("__GI___wait4", "ggml_print_backtrace", "ggml_abort"):
        assert frame_role(Frame(1, "gdb", function=name)) == "machinery"
    assert frame_role(Frame(1, "gdb", function="ggml_cuda_op_mul_mat")) == "kernel"
