"""Microbenchmarks: GEMM, streaming bandwidth, decode and prefill attention, and the eager
chain of small operators between a decoder layer's GEMMs.

Each `*_case` builds its tensors (randn, never zeros: data-dependent power) and returns the
call to time, the calculator operator of the same shape, and the attention backend if any.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from roofline.measure.kernel_ops import attention_op, eager_chain_op, gemm_op, stream_op
from roofline.spec.operators import Op

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class Case:
    fn: Callable[[], object]
    op: Op
    backend: str = ""


def gemm_case(
    M: int, N: int, K: int, dtype: str, device: torch.device, cold_bytes: int = 0
) -> Case:
    """C (M,N) = A (M,K) · Wᵀ with W stored (N,K) as nn.Linear stores it (NT layout).
    `cold_bytes` > 0: successive calls cycle through enough copies of W that together exceed
    it (pass twice the last-level cache), so each call reads W from DRAM, as a model's
    layers do in a decode step; one copy otherwise (peak GEMMs, which are compute-bound)."""
    if dtype == "fp8":
        return fp8_gemm_case(M, N, K, device)
    t = TORCH_DTYPES[dtype]
    a = torch.randn(M, K, dtype=t, device=device)
    copies = 1 + cold_bytes // (N * K * t.itemsize) if cold_bytes else 1
    ws = [torch.randn(N, K, dtype=t, device=device) for _ in range(copies)]
    c = torch.randn(M, N, dtype=t, device=device)
    turn = iter(range(2**62))

    def fn() -> torch.Tensor:
        return torch.mm(a, ws[next(turn) % copies].t(), out=c)

    return Case(fn, gemm_op(M, N, K))


def fp8_gemm_case(M: int, N: int, K: int, device: torch.device) -> Case:
    """The W8A8 GEMM of an FP8 recipe: A (M,K) and W (N,K) in e4m3 with per-tensor scales,
    C in bf16 (`torch._scaled_mm`, cuBLASLt on the GPU; the second operand is Wᵀ, the
    column-major layout it requires). Native on compute capability 8.9 and later."""
    e4m3 = torch.float8_e4m3fn
    a = torch.randn(M, K, device=device).to(e4m3)
    w = torch.randn(N, K, device=device).to(e4m3)
    one = torch.ones((), device=device)

    def fn() -> torch.Tensor:
        return torch._scaled_mm(a, w.t(), one, one, out_dtype=torch.bfloat16)

    return Case(fn, gemm_op(M, N, K))


def stream_case(kernel: str, elems: int, dtype: str, device: torch.device) -> Case:
    """copy: dst ← src; read: sum(src); triad: a ← b + s·c (STREAM)."""
    t = TORCH_DTYPES[dtype]
    # constant fills: the values do not change a stream's time, and randn of the GiB buffers
    # a large last-level cache asks for takes seconds on one core
    b = torch.full((elems,), 0.5, dtype=t, device=device)
    if kernel == "read":
        out = torch.empty((), dtype=t, device=device)
        return Case(lambda: torch.sum(b, dim=0, out=out), stream_op(kernel, elems))
    a = torch.full((elems,), 0.25, dtype=t, device=device)
    if kernel == "copy":
        return Case(lambda: a.copy_(b), stream_op(kernel, elems))
    c = torch.full((elems,), 0.125, dtype=t, device=device)
    return Case(lambda: torch.add(b, c, alpha=0.5, out=a), stream_op(kernel, elems))


def sdpa_backend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, gqa: bool) -> str:
    """Which SDPA backend torch picks for these inputs (private API: guarded)."""
    try:
        from torch.nn.attention import SDPBackend

        choice = torch._fused_sdp_choice(q, k, v, None, 0.0, causal, enable_gqa=gqa)
        return SDPBackend(choice).name.lower()
    except (AttributeError, TypeError, ValueError, RuntimeError):
        return "unknown"


def attention_case(
    B: int,
    T: int,
    S: int,
    N: int,
    K: int,
    H: int,
    dtype: str,
    device: torch.device,
    cold_bytes: int = 0,
) -> Case:
    """Append T new tokens' K and V to a cache holding S, then SDPA of T queries over the
    S + T keys: decode is T = 1 (no mask), prefill is S = 0 (causal). `cold_bytes` > 0:
    successive calls cycle through enough caches that together exceed it (pass twice the
    last-level cache), so each call reads its KV from DRAM, as each layer of a decode step
    does after the other layers' weights and KV went through the cache; one cache otherwise."""
    t = TORCH_DTYPES[dtype]
    q = torch.randn(B, N, T, H, dtype=t, device=device)
    k_new, v_new = (torch.randn(B, K, T, H, dtype=t, device=device) for _ in range(2))
    cache_bytes = 2 * B * K * (S + T) * H * t.itemsize
    copies = 1 + cold_bytes // cache_bytes if cold_bytes else 1
    caches = [
        tuple(torch.randn(B, K, S + T, H, dtype=t, device=device) for _ in range(2))
        for _ in range(copies)
    ]
    causal, gqa = T > 1, N != K
    turn = iter(range(2**62))

    def fn() -> torch.Tensor:
        k_cache, v_cache = caches[next(turn) % copies]
        k_cache[:, :, S:].copy_(k_new)
        v_cache[:, :, S:].copy_(v_new)
        return F.scaled_dot_product_attention(q, k_cache, v_cache, is_causal=causal, enable_gqa=gqa)

    k0, v0 = caches[0]
    return Case(fn, attention_op(B, T, S, N, K, H), sdpa_backend(q, k0, v0, causal, gqa))


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary positions by rotate-half, as eager Llama code applies them (5 launches: neg,
    cat, 2 mul, add; `roofline.spec.operators.ROPE_LAUNCHES` counts them for q and k)."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def eager_chain_case(D: int, N: int, K: int, H: int, dtype: str, device: torch.device) -> Case:
    """The small operators of one eager decoder layer on one token, without its GEMMs and
    attention: an RMSNorm written out (pow, mean, add ε, rsqrt, 2 mul) and its residual add,
    twice, and RoPE by rotate-half (neg, cat, 2 mul, add) on q (N heads) and k (K heads) with
    the head split and transposes between, as a plain PyTorch decoder writes them. Timed as
    one call: what each launch costs inside model code (allocating its output, dispatching
    from Python), not in a tight loop over one preallocated kernel."""
    t = TORCH_DTYPES[dtype]
    x, residual = (torch.randn(1, 1, D, dtype=t, device=device) for _ in range(2))
    weight = torch.ones(D, dtype=t, device=device)
    q = torch.randn(1, 1, N * H, dtype=t, device=device)
    k = torch.randn(1, 1, K * H, dtype=t, device=device)
    cos, sin = (torch.randn(1, H, dtype=t, device=device) for _ in range(2))

    def norm(v: torch.Tensor) -> torch.Tensor:
        return v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + 1e-5) * weight

    def heads(v: torch.Tensor, n: int) -> torch.Tensor:
        return v.view(1, 1, n, H).transpose(1, 2)

    def fn() -> tuple[torch.Tensor, ...]:
        h = norm(x) + residual
        return norm(h) + residual, rope(heads(q, N), cos, sin), rope(heads(k, K), cos, sin)

    return Case(fn, eager_chain_op(D, N, K, H))
