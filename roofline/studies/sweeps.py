"""Results swept over a grid of one variable, for charts: KV cache / state memory vs context.

The bytes come from `memory.kv_cache_bytes`, the one per-architecture function the tables use:
global attention grows with S (2·K·H per token and layer, MLA's latent r + R), sliding-window
layers stop at W, layers sharing another's KV add nothing, SSM and linear-attention layers hold
a constant state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..calc import memory
from ..errors import InvalidInputError
from ..spec.model import ModelSpec
from ..spec.precision import Precision

#: First context of a sweep (tokens); the grid doubles from here up to the model's max context.
FIRST_CONTEXT_TOKENS = 256


@dataclass(frozen=True)
class KVCurve:
    """KV cache and recurrent state of B sequences at each context length S."""

    model: ModelSpec
    precision: Precision
    batch: int
    context_tokens: np.ndarray  # S, tokens per sequence
    kv_bytes: np.ndarray  # KV + state bytes at each S, all B sequences


def context_grid(max_context: int, first: int = FIRST_CONTEXT_TOKENS) -> np.ndarray:
    """Powers of two from `first` up to `max_context`, ending exactly at `max_context`."""
    if max_context < 1:
        raise InvalidInputError(f"max context must be at least 1 token, got {max_context}")
    doubling = first * 2 ** np.arange(int(np.log2(max(max_context / first, 1))) + 1)
    return np.unique(np.append(doubling[doubling < max_context], max_context))


def kv_curve(model: ModelSpec, precision: Precision, batch: int = 1) -> KVCurve:
    """KV cache / state bytes of B sequences over contexts S up to the model's max context."""
    if batch < 1:
        raise InvalidInputError(f"batch size must be at least 1, got {batch}")
    S = context_grid(model.max_context)
    for knee in (model.attention.sliding_window, model.attention.attention_chunk_size):
        if knee is not None:  # where local (chunked) layers stop growing, exactly on the grid
            S = np.union1d(S, [knee])
    return KVCurve(
        model,
        precision,
        batch,
        S,
        np.asarray(memory.kv_cache_bytes(model, precision, batch, S), dtype=float),
    )
