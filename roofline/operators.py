"""One operator decomposition of a forward step, for prefill and decode alike.

A step processes B sequences, each with T new tokens on top of S cached tokens:
prefill is T = prompt, S = 0; decode is T = 1, S = context so far. B and S may be numpy
arrays (they broadcast), so a whole batch x context grid is one call.

Every operator reports element counts, not bytes: FLOPs, weights read, activations read and
written, KV-cache values read and written. `roofline.cost` turns elements into bytes with a
`Precision`, so a format change never touches this file. Counts follow what kernels move:
a matmul reads its whole weight once per step, an embedding lookup reads only the gathered
rows, and attention reads K and V once per step (FlashAttention-style, scores never stored).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from .errors import InvalidInputError
from .model import ModelSpec

ArrayLike = int | float | np.ndarray
OpKind = Literal["matmul", "attention", "elementwise", "gather"]


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
    launches: int = 1  # kernels per step, for a fixed per-kernel overhead


@dataclass(frozen=True)
class Step:
    """Shape of one forward step. B and S may be arrays; T is the same for every sequence."""

    batch: ArrayLike  # B
    new_tokens: ArrayLike  # T
    cached_tokens: ArrayLike = 0  # S
    logits: Literal["last", "all"] = "last"  # LM head on the last position or all T

    def __post_init__(self) -> None:
        if np.any(np.asarray(self.batch) < 1):
            raise InvalidInputError("batch size must be at least 1")
        if np.any(np.asarray(self.new_tokens) < 1):
            raise InvalidInputError("new tokens per step must be at least 1")
        if np.any(np.asarray(self.cached_tokens) < 0):
            raise InvalidInputError("cached tokens cannot be negative")


def attended_pairs(T: ArrayLike, S: ArrayLike) -> ArrayLike:
    """Query-key pairs a causal step computes: each of T new tokens sees the S cached
    tokens and the new ones up to itself, T·S + T(T+1)/2. Decode (T=1): S + 1."""
    return T * S + T * (T + 1) / 2


def sdpa_op(B: ArrayLike, T: ArrayLike, S: ArrayLike, N: int, K: int, H: int,
            layers: int = 1) -> Op:
    """Attention core of `layers` layers: append T new K,V to the cache, then scores Q·Kᵀ
    and probabilities·V over S + T keys (2 FLOPs per multiply-add, N·H per pair each).
    Q (B,N,T,H) is read and O written; the cache (B,K,S+T,H) is read once, K and V each."""
    return Op("attention/scores+av", "attention",
              flops=layers * B * 4 * attended_pairs(T, S) * N * H,
              act_elems=layers * B * T * 2 * N * H,  # read Q, write O
              kv_read_elems=layers * B * (S + T) * 2 * K * H,
              kv_write_elems=layers * B * T * 2 * K * H, launches=layers)


def attention_ops(m: ModelSpec, s: Step) -> list[Op]:
    """Self-attention of one layer type, times L. Shapes: x (B,T,D), q (B,T,N,H), kv (B,S+T,K,H)."""
    B, T, S, L = s.batch, s.new_tokens, s.cached_tokens, m.layers
    D, qd, kvd = m.d_model, m.q_dim, m.kv_dim
    qkv_out = qd + 2 * kvd
    bias = m.linear_bias != "none"
    return [
        Op("attention/qkv", "matmul",
           flops=L * 2 * B * T * D * qkv_out,
           weight_elems=L * (D * qkv_out + (qkv_out if bias else 0)),
           act_elems=L * B * T * (D + qkv_out), launches=L),
        sdpa_op(B, T, S, m.heads, m.kv_heads, m.head_dim, layers=L),
        Op("attention/out", "matmul",
           flops=L * 2 * B * T * qd * D,
           weight_elems=L * (qd * D + (D if m.linear_bias == "all" else 0)),
           act_elems=L * B * T * (qd + D), launches=L),
    ]


def mlp_ops(m: ModelSpec, s: Step) -> list[Op]:
    """Dense MLP, times L. Gated: (gate, up) D→2F, act·mul, down F→D; plain: D→F, act, F→D."""
    B, T, L, D, F = s.batch, s.new_tokens, m.layers, m.d_model, m.d_ff
    n_in = m.mlp_matrices - 1  # 2 input projections when gated, else 1
    bias = m.linear_bias == "all"
    return [
        Op("mlp/up", "matmul",
           flops=L * 2 * B * T * D * F * n_in,
           weight_elems=L * (D * F * n_in + (n_in * F if bias else 0)),
           act_elems=L * B * T * (D + n_in * F), launches=L),
        Op("mlp/act", "elementwise",
           flops=L * B * T * F * (5 if n_in == 2 else 4),
           act_elems=L * B * T * F * (n_in + 1), launches=L),
        Op("mlp/down", "matmul",
           flops=L * 2 * B * T * F * D,
           weight_elems=L * (F * D + (D if bias else 0)),
           act_elems=L * B * T * (F + D), launches=L),
    ]


def norm_ops(m: ModelSpec, s: Step) -> list[Op]:
    """Norms with their residual adds: per norm read x and residual, write x (3·B·T·D)."""
    B, T, D = s.batch, s.new_tokens, m.d_model
    n = m.layers * m.norms_per_layer + 1  # + the final norm
    return [Op("norms+residual", "elementwise", flops=n * 5 * B * T * D,
               weight_elems=n * m.norm_params, act_elems=n * 3 * B * T * D, launches=n)]


def embedding_ops(m: ModelSpec, s: Step) -> list[Op]:
    """Token (and learned position) lookup: reads only the gathered rows, at most the table."""
    B, T, D = s.batch, s.new_tokens, m.d_model
    rows = np.minimum(B * T, m.vocab_size)
    if m.position == "learned":
        rows = rows + np.minimum(T, m.max_context)  # positions shared across the batch
    return [Op("embedding", "gather", flops=0, weight_elems=rows * D, act_elems=B * T * D)]


def lm_head_ops(m: ModelSpec, s: Step) -> list[Op]:
    """Logits D→V for the last position of each sequence (sampling) or all T (verification)."""
    tokens = s.batch * (s.new_tokens if s.logits == "all" else 1)
    D, V = m.d_model, m.vocab_size
    return [Op("lm_head", "matmul", flops=2 * tokens * D * V, weight_elems=D * V,
               act_elems=tokens * (D + V))]


def operators(m: ModelSpec, s: Step) -> list[Op]:
    """All operators of one forward step of model `m`, in execution order."""
    return [*embedding_ops(m, s), *attention_ops(m, s), *mlp_ops(m, s), *norm_ops(m, s),
            *lm_head_ops(m, s)]
