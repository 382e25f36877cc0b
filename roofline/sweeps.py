"""Results swept over a grid of one variable, for charts: KV memory vs context.

`KVBytesFn` is the one place the KV formula enters: any function of (model, precision, B, S)
returning bytes. It defaults to `memory.kv_cache_bytes` (2·L·K·H per token); a per-architecture
function (MLA latents, sliding windows, SSM state) plugs in through the `kv_bytes` argument.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import memory
from .errors import InvalidInputError
from .model import ModelSpec
from .operators import ArrayLike
from .precision import Precision

KVBytesFn = Callable[[ModelSpec, Precision, ArrayLike, ArrayLike], ArrayLike]

#: First context of a sweep (tokens); the grid doubles from here up to the model's max context.
FIRST_CONTEXT_TOKENS = 256


@dataclass(frozen=True)
class KVCurve:
    """KV cache (or recurrent state) of B sequences at each context length S."""

    model: ModelSpec
    precision: Precision
    batch: int
    context_tokens: np.ndarray  # S, tokens per sequence
    kv_bytes: np.ndarray  # bytes at each S, all B sequences


def context_grid(max_context: int, first: int = FIRST_CONTEXT_TOKENS) -> np.ndarray:
    """Powers of two from `first` up to `max_context`, ending exactly at `max_context`."""
    if max_context < 1:
        raise InvalidInputError(f"max context must be at least 1 token, got {max_context}")
    doubling = first * 2 ** np.arange(int(np.log2(max(max_context / first, 1))) + 1)
    return np.unique(np.append(doubling[doubling < max_context], max_context))


def kv_curve(model: ModelSpec, precision: Precision, batch: int = 1,
             kv_bytes: KVBytesFn = memory.kv_cache_bytes) -> KVCurve:
    """KV bytes of B sequences over contexts S up to the model's max context."""
    if batch < 1:
        raise InvalidInputError(f"batch size must be at least 1, got {batch}")
    S = context_grid(model.max_context)
    return KVCurve(model, precision, batch, S,
                   np.asarray(kv_bytes(model, precision, batch, S), dtype=float))
