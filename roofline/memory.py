"""Memory held on the device: weights, KV cache, activations; and what fits.

Weights count every parameter (the whole embedding table lives in memory even though a step
reads only the gathered rows). KV cache is sized for the full context each sequence reaches.
"""

from __future__ import annotations

import numpy as np

from .hardware import HardwareSpec
from .model import ModelSpec
from .operators import ArrayLike
from .precision import Precision

#: Logits are kept in fp32 for sampling (4 bytes per vocabulary entry).
LOGIT_BYTES = 4


def weights_bytes(m: ModelSpec, p: Precision) -> float:
    """All parameters at the weight format: params · bytes/param."""
    return m.total_params * p.weight_bytes


def kv_bytes_per_token(m: ModelSpec, p: Precision) -> float:
    """2 · L · K · H values per token at the KV format."""
    return m.kv_elems_per_token * p.kv_bytes


def kv_cache_bytes(m: ModelSpec, p: Precision, batch: ArrayLike, context: ArrayLike) -> ArrayLike:
    """KV cache of B sequences of S tokens: B · S · 2LKH · bytes."""
    return batch * context * kv_bytes_per_token(m, p)


def activation_bytes(m: ModelSpec, p: Precision, batch: ArrayLike, new_tokens: ArrayLike
                     ) -> ArrayLike:
    """Peak live activations of one step: layers run one after another, so the largest is
    one MLP's input, residual and hidden state, B·T·(2D + F·inputs), plus fp32 logits B·V."""
    hidden = 2 * m.d_model + (m.mlp_matrices - 1) * m.d_ff
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
    """Longest context at which B sequences' KV still fits beside the weights (tokens)."""
    free = hw.memory_bytes - weights_bytes(m, p) - activation_bytes(m, p, batch, 1)
    return np.maximum(np.floor(free / (batch * kv_bytes_per_token(m, p))), 0).astype(int)
