"""Tests for diagnose.context (log-wide facts) and diagnose.versions.

Every fixture line below is written for this project in the formats the tools
print; none is copied from a user's log.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnose.context import CONTEXT_LITERALS, Fact, LogContext, extract_context
from diagnose.model import LogLine
from diagnose.versions import Version, compare, is_before, parse_version

GiB = 1 << 30
MiB = 1 << 20


def ctx_of(*texts: str, start: int = 1) -> LogContext:
    """Context of ``texts`` numbered from ``start`` (odd numbers, to catch renumbering)."""
    return extract_context(LogLine(start + 2 * i, t) for i, t in enumerate(texts))


def args(*texts: str) -> dict[str, str]:
    return {k: f.value for k, f in ctx_of(*texts).server_args.items()}


def versions(*texts: str) -> dict[str, str]:
    return {k: f.value for k, f in ctx_of(*texts).versions.items()}


def memory(*texts: str) -> dict[str, int]:
    return {k: int(f.value) for k, f in ctx_of(*texts).memory.items()}


def gpus(*texts: str) -> list[str]:
    return [f.value for f in ctx_of(*texts).gpus]


def archs(*texts: str) -> list[str]:
    return [f.value for f in ctx_of(*texts).archs]


# --------------------------------------------------------------------------- server args

SGLANG_REPR = (
    "[2026-01-04 08:11:02] server_args=ServerArgs(model_path='acme/Orca-MoE-300B', "
    "tokenizer_path='acme/Orca-MoE-300B', tp_size=16, ep_size=16, dp_size=2, "
    "mem_fraction_static=0.82, json_model_override_args='{\"a\": [1, 2]}', "
    "cuda_graph_bs=[1, 2, 4, 8], moe_a2a_backend='deepep', "
    "moe_runner_backend='flashinfer_cutlass', deepep_mode='low_latency', "
    "disable_cuda_graph=False, enable_dp_attention=True, quantization=None, "
    "kv_cache_dtype='fp8_e4m3', chunked_prefill_size=4096, context_length=65536)"
)


def test_sglang_server_args_repr() -> None:
    got = args(SGLANG_REPR)
    assert got["model"] == "acme/Orca-MoE-300B"
    assert (got["tp_size"], got["ep_size"], got["dp_size"]) == ("16", "16", "2")
    assert got["mem_fraction_static"] == "0.82"
    assert got["moe_a2a_backend"] == "deepep"
    assert got["moe_runner_backend"] == "flashinfer_cutlass"
    assert got["deepep_mode"] == "low_latency"
    assert got["disable_cuda_graph"] == "false"
    assert got["enable_dp_attention"] == "true"
    assert got["kv_cache_dtype"] == "fp8_e4m3"
    assert got["chunked_prefill_size"] == "4096"
    assert got["max_model_len"] == "65536"  # sglang context_length
    assert "quantization" not in got  # None carries nothing
    assert "cuda_graph_bs" not in got  # not a canonical key


def test_truncated_repr_keeps_what_was_printed() -> None:
    got = args("server_args=ServerArgs(model_path='acme/m', tp_size=4, json='{unclosed")
    assert got == {"model": "acme/m", "tp_size": "4"}


def test_sglang_command_line() -> None:
    got = args(
        "$ python3 -m sglang.launch_server --model-path acme/Lark-9B --tp 4 --ep-size 4 "
        "--mem-fraction-static 0.77 --moe-a2a-backend deepep --enable-dp-attention "
        "--cuda-graph-max-bs 64 --port 31000"
    )
    assert got == {
        "model": "acme/Lark-9B",
        "tp_size": "4",
        "ep_size": "4",
        "mem_fraction_static": "0.77",
        "moe_a2a_backend": "deepep",
        "enable_dp_attention": "true",
        "cuda_graph_max_bs": "64",
    }


def test_vllm_serve_multiline_command() -> None:
    got = args(
        "vllm serve acme/Heron-70B-Instruct \\",
        "    --tensor-parallel-size 4 \\",
        "    --gpu-memory-utilization=0.93 \\",
        "    --max-model-len 24576 --max-num-seqs 96 \\",
        "    --enable-expert-parallel \\",
        "    -pp 2 --kv-cache-dtype fp8",
    )
    assert got == {
        "model": "acme/Heron-70B-Instruct",
        "tp_size": "4",
        "gpu_memory_utilization": "0.93",
        "max_model_len": "24576",
        "max_num_seqs": "96",
        "enable_expert_parallel": "true",
        "pp_size": "2",
        "kv_cache_dtype": "fp8",
    }


def test_vllm_engine_config_and_banner_version() -> None:
    line = (
        "INFO 02-11 17:40:12 [core.py:71] Initializing a V1 LLM engine (v0.11.2) with config: "
        "model='acme/Wren-32B', speculative_config=None, tokenizer='acme/Wren-32B', "
        "dtype=torch.bfloat16, max_seq_len=40960, tensor_parallel_size=2, "
        "pipeline_parallel_size=1, data_parallel_size=1, quantization=fp8, enforce_eager=False, "
        'kv_cache_dtype=auto, compilation_config={"level":3,"splitting_ops":["x.y","z"]}, '
        "use_cached_outputs=True"
    )
    ctx = ctx_of(line, start=41)
    got = {k: f.value for k, f in ctx.server_args.items()}
    assert got == {
        "model": "acme/Wren-32B",
        "dtype": "bfloat16",
        "max_model_len": "40960",
        "tp_size": "2",
        "pp_size": "1",
        "dp_size": "1",
        "quantization": "fp8",
        "enforce_eager": "false",
        "kv_cache_dtype": "auto",
    }
    assert ctx.versions["vllm"].value == "0.11.2"
    assert ctx.server_args["tp_size"].line == 41


def test_vllm_non_default_args_dict() -> None:
    got = args(
        "INFO 02-11 17:40:01 [utils.py:233] non-default args: {'model': 'acme/Kite-8B', "
        "'tensor_parallel_size': 2, 'enable_expert_parallel': True, 'all2all_backend': "
        "'deepep_low_latency'}"
    )
    assert got == {
        "model": "acme/Kite-8B",
        "tp_size": "2",
        "enable_expert_parallel": "true",
        "moe_a2a_backend": "deepep_low_latency",
    }


def test_model_config_json_members_one_a_line_or_inline() -> None:
    got = args(
        "Qwen3MoeConfig {",
        '  "hidden_size": 2048,',
        '  "n_routed_experts": 128, "num_experts_per_tok": 8,',
        'config: {"moe_intermediate_size": 768, "hidden_size": "big", "vocab_size": 151936}',
    )
    assert got == {
        "hidden_size": "2048",
        "num_experts": "128",
        "top_k": "8",
        "moe_intermediate_size": "768",
    }


def test_trtllm_serve_command() -> None:
    got = args("trtllm-serve /models/acme-finch --backend pytorch --tp_size 8 --ep_size 4")
    assert got == {"model": "/models/acme-finch", "tp_size": "8", "ep_size": "4"}


def test_env_dump_and_yaml_env() -> None:
    got = args(
        "export NCCL_DEBUG=INFO CUDA_VISIBLE_DEVICES=4,5,6,7",
        "  SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK: '512'",
        "NCCL_IB_HCA set by environment to mlx5_0",
    )
    assert got == {
        "nccl_debug": "INFO",
        "cuda_visible_devices": "4,5,6,7",
        "num_max_dispatch_tokens_per_rank": "512",
        "nccl_ib_hca": "mlx5_0",
    }


def test_suggested_settings_are_not_configuration() -> None:
    got = args(
        "NCCL error in: x.cpp:12, unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        "If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
        "try reducing --max-running-requests 32 or --chunked-prefill-size 1024",
        "usage: launch_server.py [-h] --model-path MODEL_PATH [--tp-size TP_SIZE]",
        "I bumped --mem-fraction-static to see if it helps",
        "launch_server.py: error: argument --tp-size/--tp: invalid int value: 'x'",
    )
    assert got == {}


def test_explicit_repr_beats_flag_and_first_line_wins_a_tie() -> None:
    ctx = ctx_of("--tp 2 --ep-size 2", SGLANG_REPR, "--tp 8")
    assert ctx.server_args["tp_size"].value == "16"
    assert ctx.server_args["tp_size"].line == 3
    assert ctx_of("--tp 2", "--tp 8").server_args["tp_size"].value == "2"


def test_backticked_values_are_unwrapped() -> None:
    got = args("I launch with `--tp-size 8` and `NCCL_P2P_LEVEL=NVL`")
    assert got == {"tp_size": "8", "nccl_p2p_level": "NVL"}


# --------------------------------------------------------------------------- GPUs and archs


def test_gpu_names_from_every_printer() -> None:
    got = gpus(
        "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:1B:00.0 Off |      0 |",
        "|   1  NVIDIA A100-SXM4-40GB          On  |   00000000:2C:00.0 Off |      0 |",
        ">>> torch.cuda.get_device_name(0)",
        "'NVIDIA RTX PRO 6000 Blackwell Workstation Edition'",
        "  Device 0: NVIDIA GeForce RTX 5070 Ti, compute capability 12.0, VMM: yes",
        "GPU models and configuration: GPU 0: NVIDIA GB10",
        "rocm-smi: card0 AMD Instinct MI300X OAM",
        "Testing on a Tesla V100-SXM2-32GB and an RTX3080 16G box",
    )
    assert got == [
        "NVIDIA H100 80GB HBM3",
        "NVIDIA A100-SXM4-40GB",
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
        "NVIDIA GeForce RTX 5070 Ti",
        "NVIDIA GB10",
        "AMD Instinct MI300X OAM",
        "Tesla V100-SXM2-32GB",
        "RTX3080 16G",
    ]


def test_short_gpu_names_need_vendor_or_gpu_word() -> None:
    assert gpus("Tesla T4 and NVIDIA A10G and two L4 GPU nodes") == [
        "Tesla T4",
        "NVIDIA A10G",
        "L4",
    ]
    # Bare short names collide with other tokens: a T4 tag, an A10 cell, an H20 formula.
    assert gpus("layer T4 of A10 feeding H20 into the P4 stage") == []
    # Kernel and symbol names are not GPU mentions.
    assert gpus("sm90_xmma_gemm_H100_tuned NVIDIA_A100_cfg 0x7fB200") == []


def test_gpu_from_moe_config_filename() -> None:
    line = (
        "Config file not found at /opt/sgl/configs/E=64,N=512,device_name=NVIDIA_H20-3e,"
        "dtype=fp8_w8a8.json; using default"
    )
    assert gpus(line) == ["NVIDIA H20-3e"]


def test_gpu_dedupes_and_keeps_first_line() -> None:
    ctx = ctx_of("NVIDIA L40S", "NVIDIA L40S", "NVIDIA L40S", start=7)
    assert [(f.value, f.line) for f in ctx.gpus] == [("NVIDIA L40S", 7)]


def test_arch_spellings() -> None:
    got = archs(
        "Device 0: NVIDIA GeForce RTX 5060, compute capability 12.0",
        "ptxas fatal: Value 'sm_121a' is not defined for option 'gpu-name'",
        "Detected SM100 device",
        "torch.cuda.get_device_capability() returned (8, 9): capability check failed",
        "nvcc -gencode=arch=compute_90a,code=sm_90a -c x.cu",
        "ninja: Entering directory `/root/.cache/flashinfer/0.7.1/103a/cached_ops'",
        "HIP error on gfx942: invalid device function",
    )
    assert got == ["sm_120", "sm_121a", "sm_100", "sm_89", "sm_90a", "sm_103a", "gfx942"]


def test_supported_arch_list_is_not_this_gpu() -> None:
    got = archs(
        "NVIDIA GeForce RTX 5080 with CUDA capability sm_120 is not compatible with the "
        "current PyTorch installation.",
        "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_80 sm_90.",
        "TORCH_CUDA_ARCH_LIST=8.0;9.0 sm_80",
        "cutlass3x_sm90_tensorop_gemm and sparse_mla_sm120_decode kernels",
    )
    assert got == ["sm_120"]


# --------------------------------------------------------------------------- versions


def test_versions_every_form() -> None:
    got = versions(
        "[pip3] torch==2.9.1",
        "vllm                      0.11.2",
        "sglang: 0.5.3.post2",
        "flashinfer-python 0.6.1",
        "[TensorRT-LLM] TensorRT-LLM version: 1.3.0rc4",
        "node7:811:811 [0] NCCL INFO NCCL version 2.27.3+cuda12.9",
        "triton==3.5.0",
        "deep_ep 1.2.1+a1b2c3d",
        "nvidia-nvshmem-cu12==3.3.24",
        "nvidia-cutlass-dsl==4.3.0",
        "transformers: 4.57.1",
        "Python version: 3.12.4 (main, Jun  1 2026, 10:00:00) [GCC 11.4.0] (64-bit runtime)",
        "sgl_kernel==0.3.16",
    )
    assert got == {
        "torch": "2.9.1",
        "vllm": "0.11.2",
        "sglang": "0.5.3.post2",
        "flashinfer": "0.6.1",
        "tensorrt_llm": "1.3.0rc4",
        "nccl": "2.27.3+cuda12.9",
        "triton": "3.5.0",
        "deepep": "1.2.1+a1b2c3d",
        "nvshmem": "3.3.24",
        "cutlass_dsl": "4.3.0",
        "transformers": "4.57.1",
        "python": "3.12.4",
        "sgl_kernel": "0.3.16",
    }


def test_cuda_toolkit_driver_and_torch_build_are_kept_apart() -> None:
    got = versions(
        "| NVIDIA-SMI 580.65.06      Driver Version: 580.65.06      CUDA Version: 13.0     |",
        "nvcc: NVIDIA (R) Cuda compiler driver",
        "Cuda compilation tools, release 12.6, V12.6.85",
        "torch 2.8.0+cu128",
    )
    assert got == {
        "driver": "580.65.06",
        "cuda_driver": "13.0",
        "cuda": "12.6.85",
        "torch": "2.8.0+cu128",
        "torch_cuda": "12.8",
    }


def test_driver_too_old_code_and_collect_env() -> None:
    got = versions(
        "RuntimeError: The NVIDIA driver on your system is too old (found version 11080).",
        "PyTorch version: 2.4.0+cu121",
        "CUDA used to build PyTorch: 12.1",
        "CUDA runtime version: 12.1.105",
        "Nvidia driver version: 535.104.05",
    )
    assert got == {
        "cuda_driver": "11.8",
        "torch": "2.4.0+cu121",
        "torch_cuda": "12.1",
        "cuda": "12.1.105",
        "driver": "535.104.05",
    }


def test_flashinfer_cache_path_gives_version_and_arch() -> None:
    ctx = ctx_of("FAILED: /root/.cache/flashinfer/0.6.3/120a/cached_ops/fmha/x.cuda.o")
    assert ctx.versions["flashinfer"].value == "0.6.3"
    assert [f.value for f in ctx.archs] == ["sm_120a"]


def test_path_versions_lose_to_printed_ones() -> None:
    got = versions(
        '  File "/usr/local/lib/python3.11/dist-packages/vllm-0.9.0.dist-info/x.py", line 1',
        "-isystem /usr/local/cuda-12.2/include",
        "Python 3.11.9",
        "vLLM version 0.9.1",
    )
    assert got == {"python": "3.11.9", "vllm": "0.9.1", "cuda": "12.2"}


def test_requirements_and_suggestions_are_not_installed_versions() -> None:
    got = versions(
        "vllm-x 1.0 requires torch==2.7.1, but you have torch 2.8.0 which is incompatible.",
        "pip install flashinfer-python==0.6.4",
        "This was fixed in flashinfer 0.6.4",
        "torch>=2.6,<2.10",
    )
    assert got == {"torch": "2.8.0"}


# --------------------------------------------------------------------------- readiness


def test_readiness_lines() -> None:
    ctx = ctx_of(
        "INFO:     Started server process [4242]",
        "INFO:     Waiting for application startup.",
        "INFO:     Application startup complete.",
        "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
        "[2026-01-04 08:15:40] The server is fired up and ready to roll!",
        "I0104 08:15:41.1 1 http_server.cc:4500] Started HTTPService at 0.0.0.0:8000",
        "INFO:     Application startup complete.",
        start=100,
    )
    assert [(f.value, f.line) for f in ctx.ready] == [
        ("Started server process", 100),
        ("Application startup complete.", 104),
        ("Uvicorn running on", 106),
        ("The server is fired up and ready to roll!", 108),
        ("Started HTTPService at", 110),
    ]


# --------------------------------------------------------------------------- memory


def test_torch_oom_message_current() -> None:
    got = memory(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 3 has a "
        "total capacity of 79.19 GiB of which 211.06 MiB is free. Including non-PyTorch memory, "
        "this process has 78.97 GiB memory in use. Of the allocated memory 76.50 GiB is "
        "allocated by PyTorch, and 1.25 GiB is reserved by PyTorch but unallocated."
    )
    assert got == {
        "requested": 512 * MiB,
        "total": round(79.19 * GiB),
        "free": round(211.06 * MiB),
        "process_used": round(78.97 * GiB),
        "torch_allocated": round(76.50 * GiB),
        "torch_reserved_unallocated": round(1.25 * GiB),
    }


def test_torch_oom_message_old() -> None:
    got = memory(
        "RuntimeError: CUDA out of memory. Tried to allocate 64.00 MiB (GPU 0; 10.76 GiB total "
        "capacity; 9.87 GiB already allocated; 17.44 MiB free; 9.95 GiB reserved in total by "
        "PyTorch)"
    )
    assert got == {
        "requested": 64 * MiB,
        "total": round(10.76 * GiB),
        "torch_allocated": round(9.87 * GiB),
        "free": round(17.44 * MiB),
        "torch_reserved": round(9.95 * GiB),
    }


def test_sglang_memory_lines_last_reading_wins() -> None:
    ctx = ctx_of(
        "Load weight begin. avail mem=78.10 GB",
        "Load weight end. type=AcmeForCausalLM, dtype=torch.bfloat16, avail mem=61.25 GB, "
        "mem usage=16.85 GB.",
        "KV Cache is allocated. #tokens: 812345, K size: 21.70 GB, V size: 21.70 GB",
        "Memory pool end. avail mem=16.02 GB",
        "Capture cuda graph end. Time elapsed: 4.1 s. mem usage=0.92 GB. avail mem=15.10 GB.",
    )
    got = {k: int(f.value) for k, f in ctx.memory.items()}
    assert got == {
        "free": round(15.10 * GiB),
        "weights": round(16.85 * GiB),
        "kv_tokens": 812345,
        "kv_k": round(21.70 * GiB),
        "kv_v": round(21.70 * GiB),
        "cuda_graph": round(0.92 * GiB),
    }
    assert ctx.memory["free"].line == 9


def test_vllm_memory_lines() -> None:
    got = memory(
        "INFO [gpu_model_runner.py:1] Model loading took 14.2 GiB and 8.3 seconds",
        "INFO [gpu_worker.py:2] Available KV cache memory: 51.37 GiB",
        "INFO [kv_cache_utils.py:3] GPU KV cache size: 1,234,560 tokens",
        "INFO [executor_base.py:4] # GPU blocks: 9000, # CPU blocks: 2048",
    )
    assert got == {
        "weights": round(14.2 * GiB),
        "kv_cache": round(51.37 * GiB),
        "kv_tokens": 1234560,
        "gpu_blocks": 9000,
    }


def test_vllm_kv_too_small_gives_tokens_and_model_len() -> None:
    ctx = ctx_of(
        "ValueError: The model's max seq len (65536) is larger than the maximum number of tokens "
        "that can be stored in KV cache (5120). Try increasing `gpu_memory_utilization` or "
        "decreasing `max_model_len` when initializing the engine."
    )
    assert ctx.memory["kv_tokens"].value == "5120"
    assert ctx.server_args["max_model_len"].value == "65536"


def test_xla_llamacpp_ollama_and_smi_memory() -> None:
    got = memory(
        "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 3221225472 bytes.",
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 2048.00 MiB on device 1: "
        "cudaMalloc failed: out of memory",
        "Error: model requires more system memory (6.2 GiB) than is available (4.0 GiB)",
        "| N/A   41C    P0    88W / 700W |   4321MiB / 97871MiB |      3%      Default |",
    )
    assert got == {
        "requested": 2048 * MiB,  # the later reading wins
        "host_requested": round(6.2 * GiB),
        "host_available": 4 * GiB,
        "used": 4321 * MiB,
        "total": 97871 * MiB,
    }


# --------------------------------------------------------------------------- contracts

ALL_FIXTURE_LINES = [
    SGLANG_REPR,
    "python -m sglang.launch_server --tp 8 --ep 8 --moe-a2a-backend deepep",
    "vllm serve acme/x -tp 2 --max-model-len=8192",
    "trtllm-serve acme/y --ep_size 2",
    "CUDA_VISIBLE_DEVICES=0,1 NCCL_DEBUG=WARN python run.py",
    "  NVSHMEM_SYMMETRIC_SIZE: 4G",
    "|   0  NVIDIA B200                    On  |",
    "device_name=NVIDIA_L20,dtype=int8.json",
    "Jetson AGX Orin and a DGX Spark",
    "compute capability 8.6",
    "Cuda compilation tools, release 12.9, V12.9.41",
    "The NVIDIA driver on your system is too old (found version 12020)",
    "deep-ep==1.0.0",
    "Initializing an LLM engine (v0.6.3.post1) with config: model='m', tensor_parallel_size=1",
    "INFO:     Application startup complete.",
    "main: server is listening on http://127.0.0.1:8080",
    "avail mem=3.50 GB",
    "Out of memory while trying to allocate 15.50GiB.",
    "Loading model weights took 3.1 GB",
    "max_total_num_tokens=91000, chunked_prefill_size=8192",
]


@pytest.mark.parametrize("text", ALL_FIXTURE_LINES)
def test_every_fact_line_carries_a_literal(text: str) -> None:
    ctx = ctx_of(text)
    assert not ctx.is_empty(), text
    raw = text.encode()
    assert any(lit in raw for lit in CONTEXT_LITERALS), text


def test_literals_are_minimal_bytes() -> None:
    assert CONTEXT_LITERALS and all(isinstance(lit, bytes) and lit for lit in CONTEXT_LITERALS)
    for a in CONTEXT_LITERALS:
        assert not any(b != a and b in a for b in CONTEXT_LITERALS), a


def test_context_is_frozen_hashable_and_json() -> None:
    ctx = ctx_of(*ALL_FIXTURE_LINES)
    with pytest.raises(TypeError):
        ctx.server_args["tp_size"] = ctx.server_args["tp_size"]  # type: ignore[index]
    with pytest.raises(AttributeError):
        ctx.gpus = ()  # type: ignore[misc]
    hash(ctx)
    assert ctx == ctx_of(*ALL_FIXTURE_LINES)
    data = json.loads(json.dumps(ctx.to_dict()))
    assert data["server_args"]["tp_size"] == {"value": "16", "line": 1}
    assert set(data) == {"server_args", "gpus", "archs", "versions", "ready", "memory"}
    assert LogContext().is_empty() and LogContext().to_dict()["gpus"] == []


def test_memory_values_are_integer_byte_strings() -> None:
    ctx = ctx_of(*ALL_FIXTURE_LINES)
    for key, fact in ctx.memory.items():
        assert re.fullmatch(r"\d+", fact.value), (key, fact)


def test_hostile_long_lines_finish() -> None:
    # Repeated openers, unbalanced quotes and brackets, and lines far beyond the scan cap.
    lines = [
        "ServerArgs(" + "a='" * 20000,
        "with config: " + "k=[(" * 20000,
        "--tp " * 30000,
        "torch " * 30000 + "2.1",
        "NVIDIA " * 30000,
        "Tried to allocate " + "9" * 100000,
        "flashinfer/" * 30000,
    ]
    ctx = ctx_of(*lines)
    assert ctx.versions == {} and ctx.gpus == ()


_FRAGMENTS = st.sampled_from(
    [
        "ServerArgs(",
        "tp_size=",
        "'",
        '"',
        "(",
        ")",
        "[",
        "{",
        "}",
        ",",
        "=",
        ": ",
        " ",
        "--tp",
        "--model",
        "-pp",
        "vllm serve",
        "NCCL_DEBUG=",
        "NVIDIA ",
        "RTX ",
        "H100",
        "T4",
        "compute capability ",
        "sm_",
        "(9, 0)",
        "flashinfer/",
        "0.6.3/",
        "120a/",
        "torch",
        "==",
        " version: ",
        "2.8.0+cu128",
        "1.2.0rc1",
        "12.8",
        "Tried to allocate ",
        "GiB",
        " MiB",
        "avail mem=",
        "KV cache (",
        "#tokens: ",
        "9",
        "0.",
        "\\",
        "`",
        "ready to roll!",
        "\x00",
        "é",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_FRAGMENTS, max_size=14).map("".join), max_size=6))
def test_never_raises_and_facts_only_from_literal_lines(texts: list[str]) -> None:
    ctx = ctx_of(*texts)
    ctx.to_dict()
    for text in texts:
        if not ctx_of(text).is_empty():
            assert any(lit in text.encode() for lit in CONTEXT_LITERALS), text


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_never_raises_on_arbitrary_text(text: str) -> None:
    extract_context([LogLine(1, text), LogLine(2, "")])


# --------------------------------------------------------------------------- versions


@pytest.mark.parametrize(
    ("text", "release", "pre", "post", "dev", "local"),
    [
        ("0.4.6.post1", (0, 4, 6), None, 1, None, ""),
        ("2.8.0+cu128", (2, 8, 0), None, None, None, "cu128"),
        ("1.2.0rc1", (1, 2, 0), ("rc", 1), None, None, ""),
        ("12.8", (12, 8), None, None, None, ""),
        ("v0.10.1", (0, 10, 1), None, None, None, ""),
        ("V12.4.131", (12, 4, 131), None, None, None, ""),
        ("0.18.0.dev2025022500", (0, 18, 0), None, None, 2025022500, ""),
        ("2.5.0a0+git1a2b3c", (2, 5, 0), ("a", 0), None, None, "git1a2b3c"),
        ("1.0.0-beta.2", (1, 0, 0), ("b", 2), None, None, ""),
    ],
)
def test_parse_version(
    text: str,
    release: tuple[int, ...],
    pre: tuple[str, int] | None,
    post: int | None,
    dev: int | None,
    local: str,
) -> None:
    v = parse_version(text)
    assert v is not None
    assert (v.release, v.pre, v.post, v.dev, v.local) == (release, pre, post, dev, local)
    assert v.text == text


@pytest.mark.parametrize("text", ["", "abc", "3.10.12 (main)", "1..2", "2.x", "v", "+cu128"])
def test_parse_version_rejects(text: str) -> None:
    assert parse_version(text) is None


def test_ordering_and_is_before() -> None:
    chain = ["0.6.3.dev1", "0.6.3a1", "0.6.3rc2", "0.6.3", "0.6.3.post1", "0.6.4rc1", "0.6.4"]
    parsed = [parse_version(t) for t in chain]
    assert all(parsed) and parsed == sorted(parsed)  # type: ignore[type-var]
    assert is_before("0.6.3", "0.6.4") is True
    assert is_before("0.6.4", "0.6.4") is False
    assert is_before("0.6.4rc1", "0.6.4") is True
    assert is_before("2.8.0+cu128", "2.8.0") is False
    assert is_before("v0.10.1", "0.10.1") is False
    assert is_before("0.10.1", "0.9.2") is False  # numeric, not string, order
    assert is_before("12.8", "12.10") is True
    assert is_before("garbage", "1.0") is None
    assert compare("1.0", "1.0.0") == 0
    assert parse_version("1.0") == parse_version("1.0.0")
    assert isinstance(parse_version("1"), Version)


_VERSION_STRINGS = st.builds(
    lambda rel, pre, post, dev, local: (
        ".".join(map(str, rel))
        + (f"{pre[0]}{pre[1]}" if pre else "")
        + (f".post{post}" if post is not None else "")
        + (f".dev{dev}" if dev is not None else "")
        + (f"+{local}" if local else "")
    ),
    st.lists(st.integers(0, 30), min_size=1, max_size=4),
    st.none() | st.tuples(st.sampled_from(["a", "b", "rc"]), st.integers(0, 5)),
    st.none() | st.integers(0, 5),
    st.none() | st.integers(0, 5),
    st.sampled_from(["", "cu128", "cu121", "git1", "1.2", "abc.7"]),
)


@settings(max_examples=400, deadline=None)
@given(_VERSION_STRINGS, _VERSION_STRINGS)
def test_order_matches_packaging(a: str, b: str) -> None:
    packaging_version = pytest.importorskip("packaging.version")
    pa, pb = packaging_version.Version(a), packaging_version.Version(b)
    expected = (pa > pb) - (pa < pb)
    assert compare(a, b) == expected, (a, b)


# --------------------------------------------------------------------------- dev corpus


@pytest.fixture(scope="module")
def corpus_dir() -> Path:
    root = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "dev"
    if not root.is_dir():
        pytest.skip("../shared/corpus/dev is not present")
    return root


def _lines(text: str) -> list[LogLine]:
    try:
        from diagnose.ingest.normalize import normalize
    except ImportError:  # the normaliser is optional for this check
        return [LogLine(i + 1, t) for i, t in enumerate(text.splitlines())]
    return normalize(text)


def _corpus(root: Path) -> Iterator[tuple[str, dict[str, object], LogContext]]:
    for log in sorted(root.glob("*.log")):
        label = tomllib.loads(log.with_suffix(".toml").read_text(encoding="utf-8"))
        text = log.read_text(encoding="utf-8", errors="replace")
        yield log.stem, label, extract_context(_lines(text))


def _model_token(name: str) -> str:
    """The model part of a GPU name: 'NVIDIA GeForce RTX 4090' -> 'rtx4090'."""
    s = re.sub(r"nvidia|geforce|tesla|amd|instinct|dgx|[\s_-]", "", name.lower())
    return s


def test_dev_corpus_yield_and_gpu_agreement(corpus_dir: Path) -> None:
    n = with_gpu = with_versions = with_args = with_arch = 0
    labelled_found = agree = 0
    for stem, label, ctx in _corpus(corpus_dir):
        n += 1
        with_gpu += bool(ctx.gpus)
        with_versions += bool(ctx.versions)
        with_args += bool(ctx.server_args)
        with_arch += bool(ctx.archs)
        gpu_label = str(label.get("gpu", ""))
        if ctx.gpus and gpu_label:
            labelled_found += 1
            wanted = _model_token(gpu_label)
            if any(
                _model_token(f.value)[:5] in wanted or wanted[:5] in _model_token(f.value)
                for f in ctx.gpus
            ):
                agree += 1
            else:
                print(f"disagree {stem}: {[f.value for f in ctx.gpus]} vs {gpu_label!r}")
        arch_label = str(label.get("arch", ""))
        if ctx.archs and arch_label.startswith("sm_"):
            assert any(f.value.startswith(arch_label) for f in ctx.archs), (stem, ctx.archs)
    print(
        f"dev corpus: {n} logs, gpus {with_gpu}, versions {with_versions}, "
        f"server args {with_args}, archs {with_arch}, gpu label agreement {agree}/{labelled_found}"
    )
    # Measured on the dev set (86 logs): gpus 16, versions 33, args 10, archs 7, agreement 16/16.
    # Most excerpts never print the GPU; the label came from the thread around them.
    assert with_gpu >= 14
    assert with_versions >= 30
    assert with_args >= 8
    assert with_arch >= 6
    assert agree == labelled_found


def test_dev_corpus_spot_checks(corpus_dir: Path) -> None:
    by_stem = {stem: ctx for stem, _, ctx in _corpus(corpus_dir)}

    def find(prefix: str) -> LogContext:
        hits = [c for s, c in by_stem.items() if s.startswith(prefix)]
        if not hits:
            pytest.skip(f"{prefix} not in this corpus")
        return hits[0]

    # Checked by hand against each case's labels.
    c = find("crispasr-30-")
    assert [f.value for f in c.gpus] == ["NVIDIA GeForce RTX 5060"]
    assert [f.value for f in c.archs] == ["sm_120"]
    c = find("sglang-28019-")
    assert "sm_121" in [f.value for f in c.archs]
    c = find("vllm-3358-")
    assert c.server_args["tp_size"].value == "2"
    assert c.memory["kv_tokens"].value
    c = find("iglm-3-")
    assert c.versions["driver"].value == "470.94"
    assert c.versions["cuda_driver"].value == "11.4"


def test_prose_versions() -> None:
    got = versions(
        "My card is old, the cuda version is 11.8 and my torch version is 2.7.1 + CU128.",
        "python3.10: /src/lib/Alloc.cpp:41: assertion failed",
    )
    assert got == {"cuda": "11.8", "torch": "2.7.1", "python": "3.10"}


def test_python_gate_gives_the_same_context(monkeypatch: pytest.MonkeyPatch) -> None:
    import diagnose.context as context_mod

    expected = ctx_of(*ALL_FIXTURE_LINES)
    monkeypatch.setattr(context_mod, "_re2_gate", lambda table: None)
    monkeypatch.setattr(context_mod, "_GATE", {})
    assert ctx_of(*ALL_FIXTURE_LINES) == expected


def test_lone_surrogates_do_not_break_the_gate() -> None:
    assert versions("torch==2.1.0 \udcff junk") == {"torch": "2.1.0"}


def test_context_built_from_plain_dicts_is_still_immutable() -> None:
    ctx = LogContext(server_args={"tp_size": Fact("8", 3)}, versions={}, memory={})
    with pytest.raises(TypeError):
        ctx.server_args["tp_size"] = Fact("4", 5)  # type: ignore[index]
    assert ctx.to_dict()["server_args"] == {"tp_size": {"value": "8", "line": 3}}


@pytest.mark.parametrize("gate_after", [0, 1, 10_000])
def test_python_and_re2_gates_read_the_same_facts(
    gate_after: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Lines before PYTHON_GATE_LINES are gated in Python, later ones by the RE2 set.
    import diagnose.context as context

    expected = ctx_of(*ALL_FIXTURE_LINES)
    monkeypatch.setattr(context, "_GATE", {})
    monkeypatch.setattr(context, "PYTHON_GATE_LINES", gate_after)
    assert ctx_of(*ALL_FIXTURE_LINES) == expected
    assert ctx_of("", *ALL_FIXTURE_LINES, start=0).gpus  # the gate is built on empty lines too
