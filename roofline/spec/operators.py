"""One operator decomposition of a forward step, for prefill and decode alike, every family.

A step processes B sequences, each with T new tokens on top of S cached tokens:
prefill is T = prompt, S = 0; decode is T = 1, S = context so far. B and S may be numpy
arrays (they broadcast), so a whole batch x context grid is one call.

This module is the vocabulary (`Op`, `Step`, `ExpertShard` and the counting helpers every
family's operators are built from); `roofline.spec.forward` walks a model with it.

Every operator reports element counts, not bytes: FLOPs, weights read, activations read and
written, KV-cache (or recurrent state) values read and written. `roofline.calc.cost` turns elements
into bytes with a `Precision`, so a format change never touches this file. Counts follow what
kernels move: a matmul reads its whole weight once per step, an embedding lookup reads only
the gathered rows, attention reads K and V once per step (FlashAttention-style, scores never
stored), and a recurrent state is read and written once per step.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..errors import InvalidInputError

ArrayLike = int | float | np.ndarray
OpKind = Literal["matmul", "attention", "elementwise", "gather", "scan"]

#: Kernels a typical eager PyTorch implementation launches (the count the per-kernel overhead of
#: `roofline.calc.cost` multiplies; kernels/llama.py is such an implementation: 206 counted here
#: per tiny-llama-30m decode step, ~250 ATen kernel calls in torch.profiler): RoPE on q and k,
#: HF-style rotate_half (neg, cat, two muls, add) = 5 each; an unfused RMSNorm (pow, mean,
#: add ε, rsqrt, scale, weight) = 6, LayerNorm 1 (fused native kernel); attention = the cache
#: writes of K and V + 1 kernel; a gated activation = act + multiply.
ROPE_LAUNCHES = 2 * 5
NORM_LAUNCHES = {"rmsnorm": 6, "layernorm": 1}

_COUNTED = (
    "flops",
    "weight_elems",
    "act_elems",
    "kv_read_elems",
    "kv_write_elems",
    "weight_rows",
    "launches",
    "instances",
)


@dataclass(frozen=True)
class Op:
    """One operator summed over the `launches` layers it runs in (element counts)."""

    name: str
    kind: OpKind
    flops: ArrayLike
    weight_elems: ArrayLike = 0
    act_elems: ArrayLike = 0  # activations read + written
    kv_read_elems: ArrayLike = 0
    kv_write_elems: ArrayLike = 0
    weight_rows: ArrayLike = 0  # matmul: weight rows (output features) streamed, N per matrix
    launches: int = 1  # kernels a typical eager implementation launches, for a per-kernel cost
    instances: int = 1  # times the operator runs (layers, norms): kernels when fused
    #: the tensor group its weights are stored in (`precision.WEIGHT_GROUPS`), whose format
    #: they are read at; None: the base weight format. A mixer's operators take its block's
    #: `param_group` (`forward.layer_ops`), so a new mixer names no group of its own.
    group: str | None = None


def projection(
    name: str,
    tokens: ArrayLike,
    d_in: int,
    d_out: int,
    bias: int = 0,
    launches: int = 1,
    heads: int = 1,
    group: str | None = None,
) -> Op:
    """x (tokens, heads, d_in) · W (heads, d_in, d_out) + a bias of `bias` values:
    2·tokens·heads·d_in·d_out FLOPs, W read once (heads·d_out rows streamed), x read, y written."""
    return Op(
        name,
        "matmul",
        flops=2 * tokens * heads * d_in * d_out,
        weight_elems=heads * d_in * d_out + bias,
        act_elems=tokens * heads * (d_in + d_out),
        weight_rows=heads * d_out,
        launches=launches,
        group=group,
    )


def scaled(op: Op, n: ArrayLike) -> Op:
    """`op` counted n times (n an array: per grid element, 0 where it does not run)."""
    return dataclasses.replace(op, **{f: getattr(op, f) * n for f in _COUNTED})


def summed(a: Op, b: Op) -> Op:
    """`a` and `b`, one operator under `a`'s name, counted together."""
    return dataclasses.replace(a, **{f: getattr(a, f) + getattr(b, f) for f in _COUNTED})


@dataclass(frozen=True)
class Step:
    """Shape of one forward step. B and S may be arrays; T is the same for every sequence.
    `causal=False` is bidirectional attention over all S + T positions (diffusion LMs)."""

    batch: ArrayLike  # B
    new_tokens: ArrayLike  # T
    cached_tokens: ArrayLike = 0  # S
    logits: Literal["last", "all"] = "last"  # LM head on the last position or all T
    causal: bool = True

    def __post_init__(self) -> None:
        if np.any(np.asarray(self.batch) < 1):
            raise InvalidInputError("batch size must be at least 1")
        if np.any(np.asarray(self.new_tokens) < 1):
            raise InvalidInputError("new tokens per step must be at least 1")
        if np.any(np.asarray(self.cached_tokens) < 0):
            raise InvalidInputError("cached tokens cannot be negative")


def attended_pairs(
    T: ArrayLike,
    S: ArrayLike,
    window: int | None = None,
    causal: bool = True,
    chunk: int | None = None,
) -> ArrayLike:
    """Query-key pairs a step computes. Causal: each of T new tokens sees the S cached tokens
    and the new ones up to itself, T·S + T(T+1)/2 (decode: S + 1). With a window W, new token
    t (1-based) sees min(S + t, W): for the a = clip(W - S, 0, T) tokens still inside the
    window a·S + a(a+1)/2, then W each. With chunks of C tokens (chunked attention: the token
    at 0-based position p sees positions C·⌊p/C⌋ … p, p mod C + 1 of them), the pairs of the
    first n positions are f(n) = q·C(C+1)/2 + r(r+1)/2 with q = ⌊n/C⌋, r = n mod C, and a step
    computes f(S + T) − f(S). Bidirectional: T·(S + T)."""
    if not causal:
        if chunk is not None:
            raise InvalidInputError(
                "chunked attention is causal; bidirectional chunks are not modelled"
            )
        return T * (S + T)
    if chunk is not None:
        return _chunked_prefix_pairs(S + T, chunk) - _chunked_prefix_pairs(S, chunk)
    if window is None:
        return T * S + T * (T + 1) / 2
    a = np.clip(window - S, 0, T)
    return a * S + a * (a + 1) / 2 + (T - a) * window


def _chunked_prefix_pairs(n: ArrayLike, chunk: int) -> ArrayLike:
    """f(n): causal pairs of positions 0 … n − 1 under chunks of C, q·C(C+1)/2 + r(r+1)/2."""
    q, r = n // chunk, n % chunk
    return q * (chunk * (chunk + 1) / 2) + r * (r + 1) / 2


def kv_tokens_read(
    T: ArrayLike, S: ArrayLike, window: int | None = None, chunk: int | None = None
) -> ArrayLike:
    """Cached + new tokens whose K,V one attention layer reads: S + T; with a window W only
    positions from S - W + 1 on are needed, min(S + T, W + T - 1); with chunks of C only the
    cached part of the current chunk, S mod C, and the T new tokens, (S mod C) + T (never more
    than S + T, as S mod C ≤ S)."""
    if chunk is not None:
        return S % chunk + T
    if window is None:
        return S + T
    return np.minimum(S + T, window + T - 1)


def expected_experts_touched(E: int, k: int, tokens: ArrayLike) -> ArrayLike:
    """Distinct experts a batch of n = B·T tokens routes to, per MoE layer, assuming each token
    picks its k of E experts uniformly: E·(1 − (1 − k/E)^n). One token touches k; many
    tokens touch nearly all E, so decode bytes grow with batch until every expert is read."""
    return E * (1 - (1 - k / E) ** tokens)


#: Standard deviations either side of the mean over which `expected_max_binomial` sums the
#: binomial pmf; beyond 12σ the tail mass is below 1e-32, far under float resolution.
_TAIL_SIGMAS = 12


def _expected_max_binomial(trials: int, p: float, ranks: int) -> float:
    if ranks == 1 or p in (0.0, 1.0) or trials == 0:
        return trials * p
    mu, sd = trials * p, math.sqrt(trials * p * (1 - p))
    lo = max(int(mu - _TAIL_SIGMAS * sd) - 1, 0)
    hi = min(int(mu + _TAIL_SIGMAS * sd) + 2, trials)
    x = np.arange(lo, hi + 1)
    lg = np.array([math.lgamma(v + 1) + math.lgamma(trials - v + 1) for v in x])
    log_pmf = math.lgamma(trials + 1) - lg + x * math.log(p) + (trials - x) * math.log1p(-p)
    cdf = np.minimum(np.cumsum(np.exp(log_pmf)), 1.0)  # F(x) for x = lo..hi; F(lo − 1) ≈ 0
    return float(lo + np.sum(1 - cdf[:-1] ** ranks))


def expected_max_binomial(trials: ArrayLike, p: float, ranks: int) -> ArrayLike:
    """E[max of r independent Binomial(n, p)] = Σ_{x=0}^{n−1} (1 − F(x)^r), F the binomial
    CDF, summed where the pmf lives (μ ± 12σ; below it every term is 1). Elementwise over n
    (rounded to whole trials)."""
    n = np.rint(np.asarray(trials, dtype=float)).astype(np.int64)
    flat = {v: _expected_max_binomial(int(v), p, ranks) for v in np.unique(n)}
    out = np.vectorize(flat.__getitem__, otypes=[float])(n)
    return out if out.ndim else float(out)


def busiest_rank_experts(E: int, k: int, tokens: ArrayLike, ep: int) -> ArrayLike:
    """Experts the busiest of `ep` ranks runs in one MoE layer for n = B·T tokens routed
    uniformly: each rank holds E/ep experts, each touched w.p. q = 1 − (1 − k/E)^n; the busiest
    rank's count is the expected maximum of ep Binomial(E/ep, q) (independence assumed; see
    docs/architectures.md). ep = 1: the mean E·q."""
    if ep == 1:
        return expected_experts_touched(E, k, tokens)
    q = 1 - (1 - k / E) ** np.asarray(tokens, dtype=float)
    qs = np.atleast_1d(q)
    out = np.array([_expected_max_binomial(E // ep, float(v), ep) for v in qs.ravel()]).reshape(
        qs.shape
    )
    return out if np.ndim(q) else float(out[0])


def busiest_rank_pairs(k: int, tokens: ArrayLike, ep: int) -> ArrayLike:
    """Token-expert pairs the busiest of `ep` ranks computes: the n·k pairs of n tokens land on
    a rank w.p. 1/ep each, so the busiest rank's share is the expected maximum of ep
    Binomial(n·k, 1/ep) (independence assumed). ep = 1: all n·k."""
    if ep == 1:
        return tokens * k
    return expected_max_binomial(np.asarray(tokens) * k, 1 / ep, ep)


def sdpa_op(
    B: ArrayLike,
    T: ArrayLike,
    S: ArrayLike,
    N: int,
    K: int,
    H: int,
    window: int | None = None,
    causal: bool = True,
    writes_kv: bool = True,
    name: str = "attention/scores+av",
    chunk: int | None = None,
) -> Op:
    """Attention core of one layer: append T new K,V to the cache (unless the layer shares
    another's), then scores Q·Kᵀ and probabilities·V (2 FLOPs per multiply-add, N·H per pair
    each). Q (B,N,T,H) is read and O written; the cache (B,K,S+T,H) is read once, K and V each.
    The measured attention kernels are predicted from this same operator."""
    return Op(
        name,
        "attention",
        flops=B * 4 * attended_pairs(T, S, window, causal, chunk) * N * H,
        act_elems=B * T * 2 * N * H,  # read Q, write O
        kv_read_elems=B * kv_tokens_read(T, S, window, chunk) * 2 * K * H,
        kv_write_elems=B * T * 2 * K * H if writes_kv else 0,
        launches=3 if writes_kv else 1,
    )


@dataclass(frozen=True)
class ExpertShard:
    """The busiest of `ep` expert-parallel ranks (it sets the step: the others wait at the
    combine). It holds E/ep of each MoE layer's routed experts and runs them for the tokens the
    whole EP group routes there: of the group's `group_tokens` = B·T tokens, the expected
    maximum over ranks of the token-expert pairs (`busiest_rank_pairs`, mean B·T·k/ep) and of
    the experts touched (`busiest_rank_experts`, mean E/ep · (1 − (1 − k/E)^(B·T))), under
    uniform routing. Everything else (attention, router, shared experts) runs on the rank's own
    sequences, the `Step` it is costed with."""

    ep: int
    group_tokens: ArrayLike
