"""Representative Triton kernels the compile level builds for a crash's arch.

Imported only inside :mod:`diagnose.verify._triton_child` (it imports ``triton``).
The kernels are ours, fixed text: a log can only choose their ``tl.constexpr``
block sizes, element type, ``num_stages`` and ``num_warps``, all validated
before they get here.  They are plain functions; the child wraps them with
``triton.jit`` so Triton reads their source from this file.

Both load their tiles the way Triton's own tutorials do, with unit inner strides
as ``constexpr`` and 16-divisible pointers, so the software pipeliner multi-buffers
the loads exactly as it does under the JIT (gpu-facts §5.3: without those hints
the loads are not pipelined and shared memory is under-reported).
"""

from __future__ import annotations

import triton.language as tl


def matmul_kernel(
    a_ptr: tl.tensor,
    b_ptr: tl.tensor,
    c_ptr: tl.tensor,
    m_size: int,
    n_size: int,
    k_size: int,
    stride_am: int,
    stride_ak: tl.constexpr,
    stride_bk: int,
    stride_bn: tl.constexpr,
    stride_cm: int,
    stride_cn: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
) -> None:
    """C = A @ B over BLOCK_M x BLOCK_N output tiles, stepping K by BLOCK_K with ``tl.dot``."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, tl.cdiv(k_size, BLOCK_K)):
        acc = tl.dot(tl.load(a), tl.load(b), acc)
        a += BLOCK_K * stride_ak
        b += BLOCK_K * stride_bk
    c = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    mask = (rm[:, None] < m_size) & (rn[None, :] < n_size)
    tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=mask)


def attention_kernel(
    q_ptr: tl.tensor,
    k_ptr: tl.tensor,
    v_ptr: tl.tensor,
    o_ptr: tl.tensor,
    stride_q: int,
    stride_k: int,
    stride_v: int,
    stride_o: int,
    seq_len: int,
    sm_scale: float,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    HEAD_DIM: tl.constexpr,
) -> None:
    """Flash-attention forward: one BLOCK_M query tile against BLOCK_N key/value tiles.

    Online softmax in base 2 as in Triton's fused-attention tutorial; Q stays
    resident, K and V stream through the pipeline, so shared memory holds Q
    plus the K and V buffers of each stage.
    """
    start_m = tl.program_id(0)
    head = tl.program_id(1)
    rm = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rd = tl.arange(0, HEAD_DIM)
    base = head * seq_len
    q = tl.load(q_ptr + (base + rm[:, None]) * stride_q + rd[None, :])
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    k_tile = k_ptr + (base + rn[None, :]) * stride_k + rd[:, None]
    v_tile = v_ptr + (base + rn[:, None]) * stride_v + rd[None, :]
    for start_n in range(0, seq_len, BLOCK_N):
        qk = tl.dot(q, tl.load(k_tile + start_n * stride_k)) * sm_scale
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_tile + start_n * stride_v)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_ij
    out = acc / l_i[:, None]
    tl.store(o_ptr + (base + rm[:, None]) * stride_o + rd[None, :], out.to(o_ptr.dtype.element_ty))


#: Kernel name -> (function, argument names that are 16-divisible pointers or strides, and the
#: unit-stride constexpr arguments).  The child builds Triton's signature from these.
KERNELS = {
    "matmul": (
        matmul_kernel,
        ("a_ptr", "b_ptr", "c_ptr", "m_size", "n_size", "k_size", "stride_am", "stride_bk",
         "stride_cm"),
        ("stride_ak", "stride_bn", "stride_cn"),
    ),
    "attention": (
        attention_kernel,
        ("q_ptr", "k_ptr", "v_ptr", "o_ptr", "stride_q", "stride_k", "stride_v", "stride_o",
         "seq_len"),
        (),
    ),
}  # fmt: skip
