"""KV cache of one replica in blocks of `block_tokens`, and the prompt prefixes cached in it.

A request owns ⌈(tokens − shared)/block_tokens⌉ blocks; its `shared` prefix tokens are read from
a cached prefix, whose blocks belong to the cache. The contiguous layout is one block of the
maximum sequence length per sequence.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .workload import NO_PREFIX

if TYPE_CHECKING:
    from .state import Requests


@dataclass
class CachedPrefix:
    """A prompt prefix kept in the cache; evictable while no request reads it."""

    blocks: int
    tokens: int
    readers: int


class BlockAllocator:
    """`equivalents` maps a sequence's tokens to the global-layer tokens its KV is worth (a
    model with sliding-window layers: `footprint.kv_token_equivalents`); None: one each."""

    def __init__(
        self,
        block_tokens: int,
        capacity_tokens: int,
        reqs: Requests,
        prefix_caching: bool,
        equivalents: Callable[[Any], Any] | None = None,
    ) -> None:
        self.block_tokens, self.r, self.prefix_caching = block_tokens, reqs, prefix_caching
        self.equivalents = equivalents
        self.total_blocks = capacity_tokens // block_tokens
        self.free_blocks = self.total_blocks
        self.prefixes: OrderedDict[int, CachedPrefix] = OrderedDict()  # least recently used first

    def needed(self, rids: np.ndarray | int, tokens: np.ndarray | int) -> np.ndarray:
        """Blocks each request lacks to hold `tokens` tokens of KV."""
        own = self.worth(tokens) - self.r.shared_tokens[rids]
        return -(-own // self.block_tokens) - self.r.held_blocks[rids]

    def worth(self, tokens: np.ndarray | int) -> np.ndarray | int:
        """The allocation `tokens` of one sequence's KV take (`equivalents`)."""
        return tokens if self.equivalents is None else self.equivalents(tokens)

    def grow(self, rids: np.ndarray | int, tokens: np.ndarray | int) -> bool:
        """Give the requests the blocks to hold `tokens` each, or none if they do not fit."""
        need = self.needed(rids, tokens)
        if not self.take(int(need.sum())):
            return False
        self.r.held_blocks[rids] += need
        return True

    def take(self, n: int) -> bool:
        """Take n free blocks, evicting unreferenced cached prefixes if needed."""
        while n > self.free_blocks:
            idle = next((k for k, v in self.prefixes.items() if v.readers == 0), None)
            if idle is None:
                return False
            self.free_blocks += self.prefixes.pop(idle).blocks
        self.free_blocks -= n
        return True

    def release(self, rid: int) -> None:
        """Free the request's own blocks and stop reading its cached prefix."""
        self.free_blocks += int(self.r.held_blocks[rid])
        self.r.held_blocks[rid] = 0
        if self.r.shared_tokens[rid]:
            self.prefixes[int(self.r.w.prefix_id[rid])].readers -= 1
            self.r.shared_tokens[rid] = 0

    def _shareable_tokens(self, rid: int) -> int:
        """Whole blocks of the request's prefix, leaving at least one token of its prefill to
        run (the prompt's last, or on a first-token-from-decode engine its second to last)."""
        if not self.prefix_caching or self.r.w.prefix_id[rid] == NO_PREFIX:
            return 0
        last = min(int(self.r.w.input_tokens[rid]), int(self.r.target[rid])) - 1
        n = min(int(self.r.w.prefix_tokens[rid]), last)
        return n // self.block_tokens * self.block_tokens

    def cached_prefix(self, rid: int) -> CachedPrefix | None:
        """The cached prefix a fresh request may read instead of computing it."""
        if not self._shareable_tokens(rid):
            return None
        return self.prefixes.get(int(self.r.w.prefix_id[rid]))

    def cache_prefix(self, rid: int) -> None:
        """After its prefill covers the prefix, hand the request's prefix blocks to the cache."""
        k = self._shareable_tokens(rid)
        pid = int(self.r.w.prefix_id[rid])
        if k == 0 or pid in self.prefixes or self.r.shared_tokens[rid] or self.r.computed[rid] < k:
            return
        self.prefixes[pid] = CachedPrefix(k // self.block_tokens, k, 1)
        self.r.held_blocks[rid] -= k // self.block_tokens
        self.r.shared_tokens[rid] = k
