"""Memory held on the device: weights, KV cache or recurrent state, activations; what fits.

Weights count every parameter (all experts of a MoE; the whole embedding table, though a step
reads only the gathered rows). The KV cache is sized for the context each sequence reaches:
global layers hold all S tokens, local (sliding-window) layers min(S, W), layers sharing
another layer's KV hold nothing; SSM and linear-attention layers hold a constant state. All of
it is stored at the KV format.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import InvalidInputError
from .hardware import HardwareSpec
from .model import ModelSpec
from .operators import ArrayLike, Step
from .precision import Precision, group_params

#: Logits are kept in fp32 for sampling (4 bytes per vocabulary entry).
LOGIT_BYTES = 4


def weights_bytes(m: ModelSpec, p: Precision) -> float:
    """All parameters, each tensor group at its own format: Σ_group params · bytes/param
    (weight-only formats keep the embedding, LM head and norms at 16 bits; a llama.cpp file
    type follows its per-tensor mix; see `precision`). A precision already fixed for a model
    (`Precision.for_model`) keeps that model's group bits (a TP/PP shard of the same
    checkpoint)."""
    q = p if p.model_bits is not None else p.for_model(m)
    return sum(n * q.group_bytes(g) for g, n in group_params(m).items() if n)


def kv_bytes_per_token(m: ModelSpec, p: Precision) -> float:
    """Cached values per token over the KV-owning attention layers at the KV format
    (2·L·K·H for a dense model); local layers stop growing once S reaches the window."""
    return m.kv_elems_per_token * p.kv_bytes


def kv_elems_per_sequence(m: ModelSpec, context: ArrayLike) -> ArrayLike:
    """Values one sequence of S tokens keeps: per KV-owning layer e = 2·K·H (MLA: r + R),
    L_global·S·e + L_local·min(S, W)·e, plus the constant SSM / linear-attention state."""
    e = m.kv_elems_per_token_layer
    held = m.kv_owner_layers("global") * context * e
    local = m.kv_owner_layers("local")
    if local:
        held = held + local * np.minimum(context, m.attention.sliding_window) * e
    return held + m.state_elems_per_sequence


def kv_cache_bytes(m: ModelSpec, p: Precision, batch: ArrayLike, context: ArrayLike) -> ArrayLike:
    """KV cache (and recurrent state) of B sequences of S tokens: B · per-sequence · bytes."""
    return batch * kv_elems_per_sequence(m, context) * p.kv_bytes


def activation_bytes(m: ModelSpec, p: Precision, batch: ArrayLike, new_tokens: ArrayLike
                     ) -> ArrayLike:
    """Peak live activations of one step: layers run one after another, so the largest is
    one FFN's (or SSM's) input, residual and hidden state, B·T·(2D + widest hidden),
    plus fp32 logits B·V."""
    widths = [(m.mlp_matrices - 1) * m.d_ff, 2 * m.d_inner]
    if m.moe is not None:
        widths.append(m.moe.top_k * (m.mlp_matrices - 1) * m.moe.expert_d_ff)
    hidden = 2 * m.d_model + max(widths)
    return (batch * new_tokens * hidden * p.activation_bytes
            + batch * m.vocab_size * LOGIT_BYTES)


def max_batch(m: ModelSpec, hw: HardwareSpec, p: Precision, context: ArrayLike,
              new_tokens: ArrayLike = 1) -> ArrayLike:
    """Largest B whose weights + KV at `context` + the activations of a step of `new_tokens`
    per sequence (1 for decode, P for a whole-batch prefill) fit in device memory
    (0 when the weights alone do not fit)."""
    free = hw.memory_bytes - weights_bytes(m, p)
    per_seq = kv_cache_bytes(m, p, 1, context) + activation_bytes(m, p, 1, new_tokens)
    return np.maximum(np.floor(free / per_seq), 0).astype(int)


def max_context(m: ModelSpec, hw: HardwareSpec, p: Precision, batch: ArrayLike) -> ArrayLike:
    """Longest context at which B sequences' KV and state still fit beside the weights
    (tokens; inf when the cache stops growing and what it reaches fits: SSMs, all-local
    attention; 0 when not even the constant part fits). The per-sequence cache is
    c0 + a·min(S, W) + g·S, piecewise linear, solved on each piece."""
    b = np.asarray(batch, dtype=float)
    free = (hw.memory_bytes - weights_bytes(m, p) - activation_bytes(m, p, b, 1)) \
        / (b * p.kv_bytes)  # values per sequence that fit
    e = m.kv_elems_per_token_layer
    g = m.kv_owner_layers("global") * e
    a = m.kv_owner_layers("local") * e
    c0 = m.state_elems_per_sequence
    W = m.attention.sliding_window or 0
    with np.errstate(divide="ignore", invalid="ignore"):
        before_w = np.where(a + g > 0, (free - c0) / (a + g), np.inf)
        after_w = np.where(g > 0, (free - c0 - a * W) / g if g else np.inf, np.inf)
    s = np.where(before_w <= W, before_w, after_w) if a else after_w
    s = np.where(free < c0, 0.0, s)
    return np.floor(np.maximum(s, 0.0))


@dataclass(frozen=True)
class CacheSummary:
    """What one model keeps and reads per sequence at one context, on one device.

    `kv_bytes_per_token`: the per-token KV of the KV-owning attention layers before any window
    (0 for pure SSMs); `kv_bytes_per_sequence`: everything one sequence holds at `context`
    (windows applied, constant state included); `decode_read_bytes`: bytes one decode step
    of one sequence reads and writes at S = context (weights + KV/state + activations)."""

    model: str
    hardware: str
    context: int
    kv_dtype: str
    kv_bytes_per_token: float
    kv_bytes_per_sequence: float
    state_bytes_per_sequence: float
    decode_kv_read_bytes: float
    decode_read_bytes: float
    weights_bytes: float
    max_batch: int
    max_context: float  # inf: the cache stops growing and fits at any context

    def as_dict(self) -> dict:
        d = dict(vars(self))
        d["max_context"] = None if np.isinf(self.max_context) else int(self.max_context)
        return d


def cache_summary(m: ModelSpec, hw: HardwareSpec, p: Precision, context: int) -> CacheSummary:
    """KV/state per token and per sequence, decode bytes, max batch and max context."""
    from .cost import step_cost  # cost imports operators only; kept local to read as a leaf

    if context > m.max_context:
        raise InvalidInputError(f"context {context:,} exceeds {m.name}'s max context of "
                                f"{m.max_context:,}; lower --context")
    decode = step_cost(m, hw, Step(1, 1, context), p, "datasheet")
    return CacheSummary(
        model=m.name, hardware=hw.name, context=context, kv_dtype=p.kv,
        kv_bytes_per_token=kv_bytes_per_token(m, p),
        kv_bytes_per_sequence=float(kv_cache_bytes(m, p, 1, context)),
        state_bytes_per_sequence=m.state_elems_per_sequence * p.kv_bytes,
        decode_kv_read_bytes=float(sum(o.op.kv_read_elems for o in decode.ops)) * p.kv_bytes,
        decode_read_bytes=float(decode.bytes),
        weights_bytes=weights_bytes(m, p),
        max_batch=int(max_batch(m, hw, p, context)),
        max_context=float(max_context(m, hw, p, 1)),
    )
