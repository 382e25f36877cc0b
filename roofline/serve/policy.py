"""Serving policies: how an engine batches requests and manages its KV cache.

Presets (`POLICIES`) name the schedulers compared in docs/serving.md; options given on the
command line override a preset's fields (`Policy.with_overrides`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from ..errors import InvalidInputError

Batching = Literal["static", "continuous"]
Prefill = Literal["prefill-first", "decode-first", "chunked"]
KVLayout = Literal["paged", "contiguous"]
Preemption = Literal["recompute", "swap"]
Router = Literal["round-robin", "least-loaded"]
_CHOICES = {
    "batching": ("static", "continuous"),
    "prefill": ("prefill-first", "decode-first", "chunked"),
    "kv": ("paged", "contiguous"),
    "preemption": ("recompute", "swap"),
    "router": ("round-robin", "least-loaded"),
}


@dataclass(frozen=True)
class Policy:
    """One scheduler configuration.

    static: a batch of up to `max_seqs` waiting requests is prefilled together and decodes
    until its longest output is done; finished sequences keep their slot (and keep being
    computed) until then. continuous: membership changes every iteration, at most `max_seqs`
    sequences and `token_budget` new tokens (B·T) per step, and a prefill mode:
    prefill-first (a waiting prompt runs whole in a prefill-only step, pausing decodes),
    decode-first (prompts are prefilled only when nothing is decoding), chunked (every step
    decodes all running sequences and fills the rest of the budget with prompt chunks).
    """

    name: str
    batching: Batching = "continuous"
    prefill: Prefill = "prefill-first"
    max_seqs: int = 256
    token_budget: int = 2048
    kv: KVLayout = "paged"
    block_size: int = 16
    preemption: Preemption = "recompute"
    prefix_caching: bool = False
    disaggregated: bool = False
    router: Router = "round-robin"

    def __post_init__(self) -> None:
        for field, allowed in _CHOICES.items():
            if getattr(self, field) not in allowed:
                raise InvalidInputError(f"unknown {field} '{getattr(self, field)}'; use one of: "
                                        f"{', '.join(allowed)}")
        for field in ("max_seqs", "token_budget", "block_size"):
            if getattr(self, field) < 1:
                raise InvalidInputError(f"{field} must be at least 1, got {getattr(self, field)}")
        if self.batching == "continuous" and self.token_budget < self.max_seqs:
            raise InvalidInputError(
                f"token budget {self.token_budget} is below max sequences {self.max_seqs}: "
                "a decode step of every sequence would not fit; raise --token-budget")
        if self.batching == "static" and self.kv != "contiguous":
            raise InvalidInputError("static batching reserves contiguous KV for each sequence; "
                                    "use --kv contiguous with it")
        if self.prefix_caching and self.kv != "paged":
            raise InvalidInputError("prefix caching shares KV blocks; it needs --kv paged")
        if self.disaggregated and self.batching == "static":
            raise InvalidInputError("disaggregated serving needs continuous batching")

    def with_overrides(self, **fields) -> Policy:
        """This policy with every non-None field replaced."""
        return replace(self, **{k: v for k, v in fields.items() if v is not None})


POLICIES: dict[str, Policy] = {p.name: p for p in (
    Policy("static", batching="static", kv="contiguous"),
    Policy("continuous"),
    Policy("decode-first", prefill="decode-first"),
    Policy("chunked", prefill="chunked"),
    Policy("chunked+prefix", prefill="chunked", prefix_caching=True),
    Policy("disaggregated", disaggregated=True),
)}


def policy(name: str) -> Policy:
    try:
        return POLICIES[name]
    except KeyError:
        raise InvalidInputError(
            f"unknown policy '{name}'; use one of: {', '.join(POLICIES)}") from None
