"""Memory causes at level 1: replay the budget from the log's numbers and size A2A buffers.

DeepEP's buffer formulas follow its ``config.hpp`` size hints (research notes
gpu-facts.md §4); the tests pin the byte-exact values logged in
deepseek-ai/DeepEP#128 and #38.  Like the GEMM model, arithmetic alone never
says ``confirmed``.
"""

from __future__ import annotations

import math

from diagnose.verify.result import Verification
from diagnose.verify.spec import MemorySpec

GIB = 1 << 30
MARGIN = GIB  # headroom kept for CUDA graphs / activations when recommending a fraction


def _up(x: int, m: int) -> int:
    return -(-x // m) * m


def deepep_low_latency_bytes(
    tokens: int, hidden: int, experts: int, combine: str = "logfmt"
) -> int:
    """``Buffer.get_low_latency_rdma_size_hint(T, H, R, E)``: RDMA bytes per rank (R drops out).

    ``combine`` picks the combine message size by DeepEP era: ``"logfmt"`` (Aug 2025 on:
    4·H/128 + 2H), ``"mar2025"`` (16 + 2H) or ``"initial"`` (2H).
    """
    scales = hidden // 128
    dispatch = 16 + max(2 * hidden, hidden + 4 * scales)
    msg = {"logfmt": 4 * scales + 2 * hidden, "mar2025": 16 + 2 * hidden, "initial": 2 * hidden}
    comb = msg[combine]
    send = max(tokens * dispatch, experts * tokens * comb)
    recv = max(experts * tokens * dispatch, experts * tokens * comb)
    signal = _up(4 * experts, 128)
    total = 2 * send + 2 * recv + 2 * signal
    return (total + 128) // 128 * 128  # the code adds the alignment before dividing


def deepep_normal_nvl_bytes(
    hidden_bytes: int, ranks: int, recv_tokens: int = 256, num_sms: int = 20
) -> int:
    """``get_nvl_buffer_size_hint``: DeepEP normal-mode intranode bytes (top-k fixed at 128)."""
    channels = num_sms // 2
    nvl = min(ranks, 8)
    rdma = max(ranks // 8, 1)
    per_token = hidden_bytes + 8 + 128 * 8 + 128 * 4 + 128 * 4
    return _up(channels * nvl * ((2 * rdma + 3) * 4 + recv_tokens * per_token), 128)


def verify_memory_model(spec: MemorySpec, requested: str) -> Verification:
    """Replay the budget; recommend the fraction (or token budget) that leaves room."""
    meas: list[tuple[str, int | float | str]] = []
    notes: list[str] = []
    for name in ("total", "free", "requested", "weights"):
        value = getattr(spec, name)
        if value is not None:
            meas.append((f"{name}_bytes", value))
    if spec.fraction is not None:
        meas.append((spec.fraction_flag, spec.fraction))
    buffer = None
    if spec.tokens_per_rank and spec.hidden and spec.experts:
        buffer = deepep_low_latency_bytes(spec.tokens_per_rank, spec.hidden, spec.experts)
        meas.append(("deepep_ll_rdma_bytes", buffer))
        notes.append(
            f"DeepEP low-latency buffer for T={spec.tokens_per_rank}, "
            f"H={spec.hidden}, E={spec.experts}: {buffer / GIB:.3f} GiB per rank."
        )
    need = spec.requested or buffer
    status, rec = "inconclusive", ""
    shortfall = None
    if need is not None and spec.free is not None:
        shortfall = need - spec.free
        meas.append(("shortfall_bytes", shortfall))
        if shortfall <= 0:
            status = "refuted"
            notes.append(
                f"{need} B requested but {spec.free} B were free: the allocation fits; "
                "fragmentation or another process is the suspect, not the budget."
            )
        else:
            notes.append(
                f"Short by {shortfall / GIB:.2f} GiB; arithmetic alone does not "
                "confirm (run level reserves the same memory on a GPU)."
            )
    elif spec.total is not None and spec.fraction is not None:
        headroom = int(spec.total * (1 - spec.fraction))
        meas.append(("headroom_bytes", headroom))
        if need is not None:
            shortfall = need - headroom
            meas.append(("shortfall_bytes", shortfall))
    if spec.total and spec.fraction is not None and shortfall is not None and shortfall > 0:
        if spec.cause == "kv-cache-oom":
            new = math.ceil((spec.fraction + (shortfall + MARGIN) / spec.total) * 100) / 100
        else:
            new = math.floor((spec.fraction - (shortfall + MARGIN) / spec.total) * 100) / 100
        if 0.05 <= new <= 0.98:
            meas.append((f"recommended_{spec.fraction_flag}", new))
            flag = spec.fraction_flag.replace("_", "-")
            rec = f"Set --{flag} {new:.2f} (was {spec.fraction:.2f}) to leave room for it."
    if not rec and spec.cause == "a2a-buffer-oom" and spec.tokens_per_rank:
        rec = (
            f"Lower the dispatch token cap (now {spec.tokens_per_rank} per rank): the "
            "low-latency buffer grows linearly with it."
        )
    if not meas:
        notes.append("The log shows no memory numbers to replay.")
    return Verification(
        status,
        "model",
        requested,
        spec.cause,
        method="memory budget replay",
        measurements=tuple(meas),
        notes=tuple(notes),
        recommendation=rec,
        smem_required=None,
        device=spec.gpu or None,
    )
