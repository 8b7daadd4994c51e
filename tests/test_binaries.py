"""Reading the device code of real CUDA binaries built here with nvcc (skipped without it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("elftools", reason="pyelftools is in the test and verify extras")

from diagnose.verify.binaries import BinaryReport, read_binary, runs_on

KERNEL = """
__global__ void frob_kernel(float* x) { x[threadIdx.x] *= 2.0f; }
extern "C" void launch(float* x) { frob_kernel<<<1, 32>>>(x); }
"""
BUILDS = {
    "sm90a": ["-gencode", "arch=compute_90a,code=sm_90a"],
    "sm120a": ["-gencode", "arch=compute_120a,code=sm_120a"],
    "ptx90": ["-gencode", "arch=compute_90,code=compute_90"],
    "fat": ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90",
            "-gencode", "arch=compute_90,code=compute_90"],
}  # fmt: skip


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH: the binaries cannot be built here")
    folder = tmp_path_factory.mktemp("cuda-libs")
    source = folder / "k.cu"
    source.write_text(KERNEL)
    out = {}
    for name, flags in BUILDS.items():
        target = folder / f"lib{name}.so"
        cmd = [nvcc, "-shared", "-Xcompiler", "-fPIC", *flags, "-o", str(target), str(source)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            pytest.skip(f"nvcc could not build {name}: {proc.stderr.strip()[:200]}")
        out[name] = target
    return out


def test_each_build_lists_its_sass_ptx_and_kernels(libs: dict[str, Path]) -> None:
    sm90a = read_binary(libs["sm90a"])
    assert sm90a.sass == ("sm_90a",) and sm90a.ptx == ()
    assert "_Z11frob_kernelPf" in sm90a.kernels
    assert sm90a.sha256 and len(sm90a.sha256) == 64
    assert read_binary(libs["sm120a"]).sass == ("sm_120a",)
    ptx = read_binary(libs["ptx90"])
    assert ptx.sass == () and ptx.ptx == ("compute_90",)
    fat = read_binary(libs["fat"])
    assert set(fat.sass) == {"sm_80", "sm_90"} and fat.ptx == ("compute_90",)


@pytest.mark.parametrize(
    ("lib", "arch", "expect"),
    [
        ("sm90a", "sm_90", "sass"),
        ("sm90a", "sm_120", None),  # arch-specific SASS runs on that arch only
        ("sm120a", "sm_120", "sass"),
        ("sm120a", "sm_121", None),  # sm_120a does not run on GB10
        ("ptx90", "sm_120", "ptx"),  # the driver JITs compute_90 PTX for a newer GPU
        ("ptx90", "sm_86", None),  # but not for an older one
        ("fat", "sm_86", "sass"),  # sm_80 SASS runs on later minors of major 8
        ("fat", "sm_100", "ptx"),
    ],
)
def test_runs_on_follows_the_compatibility_rules(
    libs: dict[str, Path], lib: str, arch: str, expect: str | None
) -> None:
    assert runs_on(read_binary(libs[lib]), arch) == expect


def test_a_host_library_has_no_device_code(tmp_path: Path) -> None:
    libc = next(
        (
            Path(p)
            for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6")
            if Path(p).exists()
        ),
        None,
    )
    if libc is None:
        pytest.skip("no libc to read")
    report = read_binary(libc)
    assert report.sass == () and report.ptx == ()
    assert any("no .nv_fatbin" in n for n in report.notes)


def test_hostile_binaries_give_notes_in_bounded_time(libs: dict[str, Path], tmp_path: Path) -> None:
    junk = tmp_path / "junk.so"
    junk.write_bytes(b"\x7fELF\x02\x01\x01" + os.urandom(4096))
    lying = tmp_path / "lying.so"
    data = bytearray(libs["fat"].read_bytes())
    at = data.find((0xBA55ED50).to_bytes(4, "little"))
    data[at + 8 : at + 16] = (1 << 60).to_bytes(8, "little")  # a container claiming 1 EiB
    lying.write_bytes(bytes(data))
    sparse = tmp_path / "sparse.so"
    with sparse.open("wb") as fh:
        fh.write(b"\x7fELF\x02\x01\x01" + bytes(57))
        fh.truncate(2 << 30)  # 2 GiB, nearly all a hole
    for path in (junk, lying, sparse):
        t0 = time.monotonic()
        report: BinaryReport = read_binary(path)
        assert time.monotonic() - t0 < 5
        assert report.notes, path.name
    assert read_binary(tmp_path / "missing.so").notes


def _crash(gpu_line: str, error: str, *modules: Path) -> str:
    frames = "".join(f"{i}       0x7f00000{i}1000 {m}(+0x1234)\n" for i, m in enumerate(modules, 1))
    return f"INFO using {gpu_line}\n{error}\n{frames}"


NO_IMAGE = (
    "terminate called after throwing an instance of 'std::runtime_error'\n"
    "  what():  CUDA error: no kernel image is available for execution on the device"
)


def test_a_binary_without_the_gpus_arch_confirms_arch_unsupported(libs: dict[str, Path]) -> None:
    from diagnose import diagnose_text

    log = _crash("GPU 0: NVIDIA GeForce RTX 5090", NO_IMAGE, libs["sm90a"])
    d = diagnose_text(log, verify=True)
    assert d.cause == "arch-unsupported"
    v = d.verification
    assert v is not None and v.status == "confirmed" and v.arch == "sm_120"
    assert [b.sass for b in v.binaries] == [("sm_90a",)]
    assert v.to_dict()["binaries"][0]["kernels_found"] == ["_Z11frob_kernelPf"]


def test_binaries_with_the_arch_refute_it(libs: dict[str, Path]) -> None:
    from diagnose import diagnose_text

    log = _crash("GPU 0: NVIDIA GeForce RTX 3090", NO_IMAGE, libs["fat"])
    v = diagnose_text(log, verify=True).verification
    assert v is not None and v.status == "refuted"


def test_error_internal_on_a_gpu_the_binary_lacks_is_redirected(libs: dict[str, Path]) -> None:
    from diagnose import diagnose_text

    error = (
        "[TensorRT-LLM][ERROR] Assertion failed: Failed to initialize cutlass TMA WS grouped "
        "gemm. Error: Error Internal (/src/moe_gemm/moe_gemm_tma_ws.inl:311)"
    )
    log = _crash("GPU 0: NVIDIA GB10", error, libs["sm120a"])
    d = diagnose_text(log, verify=True)
    assert d.cause == "smem-overflow"
    v = d.verification
    assert v is not None and v.status == "refuted" and v.better_cause == "arch-unsupported"
    assert v.arch == "sm_121"


def test_binaries_from_another_machine_are_found_by_name(
    libs: dict[str, Path], tmp_path: Path
) -> None:
    from diagnose import diagnose_text

    elsewhere = Path("/nonexistent/build") / libs["sm90a"].name
    log = _crash("GPU 0: NVIDIA GeForce RTX 5090", NO_IMAGE, elsewhere)
    assert diagnose_text(log, verify=True).verification.binaries == ()  # type: ignore[union-attr]
    found = diagnose_text(log, verify=True, binaries=libs["sm90a"].parent)
    assert found.verification is not None and found.verification.status == "confirmed"


def test_no_arch_in_the_log_lists_the_binaries_without_a_verdict(libs: dict[str, Path]) -> None:
    from diagnose import diagnose_text

    log = NO_IMAGE + f"\n1       0x7f0000001000 {libs['sm90a']}(+0x1234)\n"
    v = diagnose_text(log, verify=True).verification
    assert v is not None and v.binaries and v.status != "confirmed"
    assert any("--arch" in n for n in v.notes)
    given = diagnose_text(log, verify=True, arch="sm_120").verification
    assert given is not None and given.status == "confirmed"


def _fake_cuobjdump(tmp_path: Path, listing: str, code: int = 0) -> str:
    tool = tmp_path / "cuobjdump"
    tool.write_text(f"#!/bin/sh\ncat <<'EOF'\n{listing}\nEOF\nexit {code}\n")
    tool.chmod(0o755)
    return str(tool)


def test_cross_check_notes_agreement_and_disagreement(tmp_path: Path) -> None:
    from diagnose.verify.binaries import cross_check

    report = BinaryReport("/x/libk.so", 10, "0" * 64, sass=("sm_90a",), ptx=("compute_90",))
    same = _fake_cuobjdump(
        tmp_path, "ELF file    1: libk.1.sm_90a.cubin\nPTX file    1: libk.1.sm_90.ptx"
    )
    assert cross_check(report, same).notes[-1] == "cuobjdump --list-elf --list-ptx agrees"
    other = tmp_path / "other"
    other.mkdir()
    differs = _fake_cuobjdump(other, "ELF file    1: libk.1.sm_120a.cubin")
    note = cross_check(report, differs).notes[-1]
    assert "cuobjdump lists sm_120a" in note and "sm_90a, compute_90" in note
    broken = tmp_path / "broken"
    broken.mkdir()
    failing = _fake_cuobjdump(broken, "", code=1)
    assert "lists no device code" in cross_check(report, failing).notes[-1]


def _cuobjdump() -> str | None:
    from diagnose.verify.binaries import find_cuobjdump

    return find_cuobjdump()


@pytest.mark.skipif(
    _cuobjdump() is None,
    reason="no cuobjdump: not on PATH, and no nvidia-cuda-cuobjdump wheel (the test extra has it)",
)
def test_cuobjdump_agrees_with_the_reader_on_real_builds(libs: dict[str, Path]) -> None:
    from diagnose.verify.binaries import cross_check

    for name, path in libs.items():
        checked = cross_check(read_binary(path))
        assert checked.notes[-1] == "cuobjdump --list-elf --list-ptx agrees", (name, checked)
