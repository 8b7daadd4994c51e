"""Tests for the kernel vocabulary: arch tags, canonical dtypes, tile/cluster shapes, stages."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.frames.names import parse_name
from diagnose.frames.vocab import arch_from_tag, canonical_dtype, kernel_facts
from diagnose.model import KernelFacts

CUT_MOE = (
    "void tensorrt_llm::kernels::cutlass_kernels_oss::"
    "dispatchMoeGemmSelectClusterShapeTmaWarpSpecialized<cutlass::arch::Sm120, "
    "__nv_fp4_e2m1, __nv_fp4_e2m1, __nv_bf..."
)


def test_mission_truncated_name() -> None:
    f = kernel_facts(CUT_MOE)
    assert f.arch == "sm_120"
    # `__nv_bf` can only be the start of `__nv_bfloat16`.
    assert f.dtypes == ("fp4_e2m1", "bf16")
    assert kernel_facts(parse_name(CUT_MOE)) == f


@pytest.mark.parametrize(
    ("tag", "arch"),
    [
        ("cutlass::arch::Sm120", "sm_120"),
        ("cutlass::arch::Sm121", "sm_121"),
        ("cutlass::arch::Sm100", "sm_100"),
        ("cutlass::arch::Sm90", "sm_90"),
        ("cutlass::arch::Sm89", "sm_89"),
        ("cutlass::arch::Sm80", "sm_80"),
        ("my_gemm_sm90_bf16", "sm_90"),
        ("my_gemm_sm_90a_tn", "sm_90a"),
        ("KernelTmaWarpSpecializedSm100", "sm_100"),
        ("enable_sm100f_kernel", "sm_100f"),
        ("cutlass_80_tensorop_gemm", "sm_80"),
        ("smallest_kernel", None),
        ("sm12_kernel", None),
        ("", None),
    ],
)
def test_arch_from_tag(tag: str, arch: str | None) -> None:
    assert arch_from_tag(tag) == arch


def test_explicit_arch_tag_wins_over_mma_atom() -> None:
    name = "void k<mylib::SM80_16x8x16_F32BF16BF16F32_TN, cutlass::arch::Sm90>()"
    assert kernel_facts(name).arch == "sm_90"


@pytest.mark.parametrize(
    ("spelling", "dtype"),
    [
        ("__nv_fp4_e2m1", "fp4_e2m1"),
        ("cutlass::float_e2m1_t", "fp4_e2m1"),
        ("cutlass::nv_float4_t<cutlass::float_e2m1_t>", "fp4_e2m1"),
        ("__nv_fp8_e4m3", "fp8_e4m3"),
        ("cutlass::float_e4m3_t", "fp8_e4m3"),
        ("__nv_fp8_e5m2", "fp8_e5m2"),
        ("cutlass::float_e5m2_t", "fp8_e5m2"),
        ("__nv_bfloat16", "bf16"),
        ("cutlass::bfloat16_t", "bf16"),
        ("c10::BFloat16", "bf16"),
        ("half", "fp16"),
        ("__half", "fp16"),
        ("cutlass::half_t", "fp16"),
        ("float", "fp32"),
        ("cutlass::float_ue8m0_t", "ue8m0"),
        ("cutlass::float_ue4m3_t", "ue4m3"),
        ("int8_t", "int8"),
        ("cutlass::int4b_t", "int4"),
        ("cutlass::uint4b_t", "uint4"),
        ("cutlass::float_e3m2_t", "fp6_e3m2"),
        ("cutlass::float_e2m3_t", "fp6_e2m3"),
        ("__nv_bfloat16 const*", "bf16"),
        ("int", None),
        ("mylib::Params", None),
        ("", None),
    ],
)
def test_canonical_dtype(spelling: str, dtype: str | None) -> None:
    assert canonical_dtype(spelling) == dtype


@pytest.mark.parametrize(
    ("name", "tile", "cluster"),
    [
        (
            "void mylib::k<cutlass::arch::Sm90, cute::tuple<cute::C<128>, cute::C<256>, "
            "cute::C<128> >, cute::tuple<cute::C<2>, cute::C<1>, cute::C<1> > >(int)",
            (128, 256, 128),
            (2, 1, 1),
        ),
        (
            "void mylib::k<cute::Shape<cute::_128, cute::_256, cute::_128> >()",
            (128, 256, 128),
            None,
        ),
        (
            "void mylib::moe<mylib::CtaShape128x256x64B, mylib::ClusterShape1x2x1>()",
            (128, 256, 64),
            (1, 2, 1),
        ),
        ("void mylib::k<cutlass::gemm::GemmShape<128, 256, 64>, int>()", (128, 256, 64), None),
        ("void mylib::k<mylib::ClusterShape<2, 1, 1>, cute::C<4> >()", None, (2, 1, 1)),
        (
            "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_2x1x1_0_tnn_align8",
            (128, 256, 64),
            (2, 1, 1),
        ),
        ("mylib_gemm_tilesize64x128x32_warpgroupsize1x1x1_kernel", (64, 128, 32), None),
        (
            "void mylib::f() [with TileShape_MNK = cute::tuple<cute::_64, cute::_32, cute::_128>,"
            " ClusterShape_MNK = cute::tuple<cute::_1, cute::_2, cute::_1>]",
            (64, 32, 128),
            (1, 2, 1),
        ),
        # Stride tuples are not static shapes and must not be read as tiles.
        ("void mylib::k<cute::tuple<long, cute::C<1>, long> >()", None, None),
    ],
)
def test_shapes(
    name: str, tile: tuple[int, int, int] | None, cluster: tuple[int, int, int] | None
) -> None:
    f = kernel_facts(name)
    assert f.tile == tile
    assert f.cluster == cluster


def test_stages() -> None:
    assert kernel_facts("void mylib::k<cutlass::gemm::collective::StageCount<4> >()").stages == 4
    assert kernel_facts("void mylib::k<mylib::Stages<3> >()").stages == 3
    assert kernel_facts("mylib_gemm_bf16_3stage_kernel").stages == 3
    assert (
        kernel_facts("cutlass_80_tensorop_bf16_s16816gemm_bf16_128x64_64x5_tn_align8").stages == 5
    )


def test_tile_survives_truncation_after_it() -> None:
    name = (
        "void mylib::k<cutlass::arch::Sm100, cutlass::float_e4m3_t, cute::tuple<cute::C<256>, "
        "cute::C<128>, cute::C<64> >, cute::tuple<cute::C<2>, cute::C<1"
    )
    f = kernel_facts(name + "...")
    assert f.arch == "sm_100"
    assert f.dtypes == ("fp8_e4m3",)
    assert f.tile == (256, 128, 64)
    assert f.cluster is None  # the cluster tuple was cut: do not guess


def test_dtype_tokens_in_snake_case_names() -> None:
    f = kernel_facts("mylib_sm90_gemm_bf16bf16_bf16f32_e4m3_tn")
    assert f.dtypes == ("bf16", "fp32", "fp8_e4m3")
    # `gemm`, `tn`, `align8` are not dtypes; a partial token is not read.
    assert kernel_facts("mylib_gemm_tn_align8_bf16x").dtypes == ()


def test_params_contribute_after_template_args() -> None:
    f = kernel_facts("void mylib::norm<c10::Half>(c10::Half*, float const*, int)")
    assert f.dtypes == ("fp16", "fp32")


def test_empty_and_plain() -> None:
    assert kernel_facts("").is_empty()
    assert kernel_facts("mylib::Pool::release(int)").is_empty()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120))
def test_property_never_raises(text: str) -> None:
    assert isinstance(kernel_facts(text), KernelFacts)
    canonical_dtype(text)
    arch_from_tag(text)


@pytest.fixture(scope="module")
def shared() -> Path:
    root = Path(__file__).resolve().parents[1].parent / "shared"
    if not root.is_dir():
        pytest.skip("../shared is absent")
    return root


def test_peer_cutlass_kernels_have_facts(shared: Path) -> None:
    import json

    path = shared / "peer" / "real-symbols-pytorch" / "symbols.jsonl"
    if not path.exists():
        pytest.skip("real-symbols-pytorch is absent")
    kernels = [
        json.loads(line)
        for line in path.read_text().splitlines()
        if '"cutlass_flash_kernel"' in line
    ]
    with_dtype = sum(1 for k in kernels if k["gnu"] and kernel_facts(k["gnu"]).dtypes)
    assert len(kernels) > 500
    # Every CUTLASS/flash kernel names its element type somewhere in its arguments.
    assert with_dtype / len(kernels) > 0.95
