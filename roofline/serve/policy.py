"""Serving policies: how a replica batches requests and manages its KV cache.

Presets (`POLICIES`) name the schedulers compared in docs/serving.md; options given on the
command line override a preset's fields (`Policy.with_overrides`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from ..errors import InvalidInputError

if TYPE_CHECKING:
    from ..calc.stack import MemoryPolicy
    from ..spec.engine import EngineSpec

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


#: Sequences a step runs at most when neither the user nor the engine caps them: vLLM's
#: default `max_num_seqs` on GPUs under 70 GiB and on A100 (vllm/engine/arg_utils.py).
DEFAULT_MAX_SEQS = 256


@dataclass(frozen=True)
class Policy:
    """One scheduler configuration: `batching` (static or continuous) and, for continuous
    batching, the `prefill` mode choose the scheduler class (`roofline.serve.schedulers`
    describes each); the other fields are its limits and its KV cache's options."""

    name: str
    batching: Batching = "continuous"
    prefill: Prefill = "prefill-first"
    max_seqs: int | None = None  # None: the engine's `max_num_seqs` (`on`)
    token_budget: int | None = None
    kv: KVLayout = "paged"
    block_size: int = 16
    preemption: Preemption = "recompute"
    prefix_caching: bool = False
    disaggregated: bool = False
    router: Router = "round-robin"

    def __post_init__(self) -> None:
        for field, allowed in _CHOICES.items():
            if getattr(self, field) not in allowed:
                raise InvalidInputError(
                    f"unknown {field} '{getattr(self, field)}'; use one of: {', '.join(allowed)}"
                )
        for field in ("max_seqs", "token_budget", "block_size"):
            value = getattr(self, field)
            if value is not None and value < 1:
                raise InvalidInputError(f"{field} must be at least 1, got {value}")
        tb = self.token_budget
        ms = self.max_seqs
        if self.batching == "continuous" and tb is not None and ms is not None and tb < ms:
            raise InvalidInputError(
                f"token budget {tb} is below max sequences {self.max_seqs}: "
                "a decode step of every sequence would not fit; raise `token_budget`"
            )
        if self.batching == "static" and self.kv != "contiguous":
            raise InvalidInputError(
                "static batching reserves contiguous KV for each sequence; "
                "use `kv=contiguous` with it"
            )
        if self.prefix_caching and self.kv != "paged":
            raise InvalidInputError("prefix caching shares KV blocks; it needs `kv=paged`")
        if self.disaggregated and self.batching == "static":
            raise InvalidInputError("disaggregated serving needs continuous batching")

    def with_overrides(self, **fields) -> Policy:
        """This policy with every non-None field replaced."""
        return replace(self, **{k: v for k, v in fields.items() if v is not None})

    def on(self, memory: MemoryPolicy) -> Policy:
        """This policy with its sequence cap and token budget fixed: given ones stay, else the
        engine's (`MemoryPolicy.max_num_seqs`, the one cap `estimate --batch max` applies too;
        `DEFAULT_MAX_SEQS` for an engine without one)."""
        seqs = self.max_seqs or memory.max_num_seqs or DEFAULT_MAX_SEQS
        if self.token_budget is not None:
            return replace(self, max_seqs=seqs)
        return replace(self, max_seqs=seqs, token_budget=memory.step_token_budget(seqs))

    def _fixed(self, value: int | None, what: str) -> int:
        """A limit that `on` fixes, refused while it is still open."""
        if value is None:
            raise InvalidInputError(
                f"policy '{self.name}' has no {what} yet: fix it on its stack first"
            )
        return value

    @property
    def seqs(self) -> int:
        """The sequence cap of a policy fixed by `on`."""
        return self._fixed(self.max_seqs, "sequence cap")

    @property
    def step_tokens(self) -> int:
        """The token budget of a policy fixed by `on`."""
        return self._fixed(self.token_budget, "token budget")


POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("static", batching="static", kv="contiguous"),
        Policy("continuous"),
        Policy("continuous+prefix", prefix_caching=True),
        Policy("decode-first", prefill="decode-first"),
        Policy("chunked", prefill="chunked"),
        Policy("chunked+prefix", prefill="chunked", prefix_caching=True),
        Policy("disaggregated", disaggregated=True),
    )
}


#: The policy name that means "the engine's own scheduler" (`engine_default`).
ENGINE_POLICY = "engine"


def engine_default(engine: EngineSpec | None) -> str:
    """The policy an engine schedules by (`EngineSpec.scheduler`: vLLM V1 and SGLang chunk
    prompts beside the decodes and cache prefixes), else continuous batching with whole
    prompts (the engines whose scheduler is not characterised, and the hardware alone)."""
    return engine.scheduler if engine is not None and engine.scheduler else "continuous"


def policy(name: str, engine: EngineSpec | None = None) -> Policy:
    """A preset by name; `engine` (`ENGINE_POLICY`): the engine's own (`engine_default`)."""
    if name == ENGINE_POLICY:
        name = engine_default(engine)
    try:
        return POLICIES[name]
    except KeyError:
        raise InvalidInputError(
            f"unknown policy '{name}'; use one of: {', '.join(POLICIES)}"
        ) from None
