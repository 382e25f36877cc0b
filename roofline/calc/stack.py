"""The stack a step runs on, resolved once at the edge and passed whole.

A prediction needs the device, the formats as the model and the engine store them, the
ceilings, the software stack, the parallel layout and how the engine claims memory. Each is
decided here, once, from what the caller asked for:

- the engine: the datasheet ceiling is the speed of light, so it runs no engine (the one
  place this rule lives); the achievable ceiling runs the engine given, or the hardware
  layer alone when none is;
- the precision: the weights string as the engine stores that format (`EngineSpec.formats`:
  llama.cpp's Q4_0 file keeps the output layer in Q6_K), its group bits fixed for the model
  (`Precision.for_model`: a llama.cpp file type places tensors layer by layer), so every
  shard and every command reads the same bytes;
- the ceilings (`cost.Ceilings`) for the precision's compute dtype;
- the memory policy: the fraction of device memory the engine claims, the tokens one
  prefill step takes (chunked prefill) and the most sequences the scheduler runs at once,
  the engine's unless the caller overrides them (`MemoryPolicy`).

Core functions take `(model, stack, ...)`; `Stack.on(hw)` is the same stack on another device
(the prefill pool of a disaggregated deployment), `Stack.with_parallel` on another layout.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Literal

from ..errors import InvalidInputError
from ..spec.engine import EngineSpec
from ..spec.hardware import HardwareSpec
from ..spec.model import ModelSpec
from ..spec.precision import Precision
from .cost import CEILINGS, Ceiling, Ceilings, attention_dtype_of
from .footprint import (
    DEFAULT_MEMORY_FRACTION,
    DEFAULT_PREFILL_TOKEN_BUDGET,
    MemoryBudget,
    check_memory_fraction,
    check_token_budget,
    memory_budget,
)
from .placement import Parallel


@dataclass(frozen=True)
class MemoryPolicy:
    """How the engine claims memory and forms steps.

    `memory_fraction` f: the share of device memory it fills (vLLM's `gpu_memory_utilization`),
    the rest is the reserve; `prefill_token_budget` N: tokens one step takes (None: whole
    prompts at once); `max_num_seqs`: sequences the scheduler runs at once (None: memory alone
    limits the batch)."""

    memory_fraction: float = DEFAULT_MEMORY_FRACTION
    prefill_token_budget: int | None = DEFAULT_PREFILL_TOKEN_BUDGET
    max_num_seqs: int | None = None

    def __post_init__(self) -> None:
        check_memory_fraction(self.memory_fraction)
        check_token_budget(self.prefill_token_budget)
        if self.max_num_seqs is not None and self.max_num_seqs < 1:
            raise InvalidInputError(f"`max_num_seqs` must be at least 1, got {self.max_num_seqs}")

    @classmethod
    def of(
        cls,
        engine: EngineSpec | None,
        ceiling: Ceiling,
        memory_fraction: float | None = None,
        prefill_token_budget: int | None | Literal["engine"] = "engine",
        max_num_seqs: int | None | Literal["engine"] = "engine",
        hw: HardwareSpec | None = None,
    ) -> MemoryPolicy:
        """Given values win; else the engine profile's, as it sets them on device `hw` (vLLM's
        limits depend on the device: `EngineSpec.batch_defaults`); with no engine, f = 1 on the
        datasheet ceiling (the speed of light keeps the whole capacity) or
        `DEFAULT_MEMORY_FRACTION`, and `DEFAULT_PREFILL_TOKEN_BUDGET`."""
        if memory_fraction is None:
            memory_fraction = (
                engine.memory_fraction
                if engine is not None
                else 1.0
                if ceiling == "datasheet"
                else DEFAULT_MEMORY_FRACTION
            )
        if prefill_token_budget == "engine":
            prefill_token_budget = (
                DEFAULT_PREFILL_TOKEN_BUDGET
                if engine is None
                else engine.prefill_token_budget
                if hw is None
                else engine.prefill_token_budget_on(hw)
            )
        if max_num_seqs == "engine":
            max_num_seqs = (
                None
                if engine is None
                else engine.max_num_seqs
                if hw is None
                else engine.max_num_seqs_on(hw)
            )
        return cls(memory_fraction, prefill_token_budget, max_num_seqs)

    def budget(self, hw: HardwareSpec) -> MemoryBudget:
        """What one device of `hw` offers under this policy."""
        return memory_budget(hw, self.memory_fraction)

    def step_token_budget(self, max_seqs: int) -> int:
        """New tokens a serving step may take with at most `max_seqs` sequences: the engine's
        prefill token budget, or `DEFAULT_PREFILL_TOKEN_BUDGET` for an engine that takes whole
        prompts (whole prompts up to that many tokens share a step; a longer one runs alone),
        raised to `max_seqs` so that a decode step of every sequence fits (vLLM refuses
        `max_num_batched_tokens` below `max_num_seqs`). The one place the step budget of the
        simulator and of `plan` is decided."""
        n = self.prefill_token_budget
        return max(DEFAULT_PREFILL_TOKEN_BUDGET if n is None else n, max_seqs)


def resolve_engine(engine: EngineSpec | None, ceiling: Ceiling) -> EngineSpec | None:
    """The engine a step runs on this ceiling: none on the datasheet one (the speed of light)."""
    if ceiling not in CEILINGS:
        raise InvalidInputError(f"unknown ceiling '{ceiling}'; use one of: {', '.join(CEILINGS)}")
    return engine if ceiling == "achievable" else None


def resolve_precision(
    model: ModelSpec, precision: Precision, engine: EngineSpec | None
) -> Precision:
    """`precision` as `engine` stores its weights, with the group bits fixed for `model`."""
    if engine is not None:
        stored = engine.weights_as_run(precision.weights)
        if stored != precision.weights:
            precision = replace(precision, weights=stored, model_bits=None)
    return precision if precision.model_bits is not None else precision.for_model(model)


@dataclass(frozen=True)
class Stack:
    """Hardware, resolved precision, ceiling, engine (None on the datasheet ceiling), parallel
    layout and memory policy of one prediction. Build it with `Stack.resolve`."""

    hardware: HardwareSpec
    precision: Precision
    ceiling: Ceiling = "achievable"
    engine: EngineSpec | None = None
    parallel: Parallel = Parallel()
    memory: MemoryPolicy = field(default_factory=MemoryPolicy)

    @classmethod
    def resolve(
        cls,
        model: ModelSpec,
        hardware: HardwareSpec,
        precision: Precision = Precision(),
        ceiling: Ceiling = "achievable",
        engine: EngineSpec | None = None,
        parallel: Parallel = Parallel(),
        *,
        memory_fraction: float | None = None,
        prefill_token_budget: int | None | Literal["engine"] = "engine",
        max_num_seqs: int | None | Literal["engine"] = "engine",
    ) -> Stack:
        """Resolve every part once (module docstring); overrides of the engine's memory
        policy win over the profile."""
        eng = resolve_engine(engine, ceiling)
        return cls(
            hardware,
            resolve_precision(model, precision, eng),
            ceiling,
            eng,
            parallel,
            MemoryPolicy.of(
                eng, ceiling, memory_fraction, prefill_token_budget, max_num_seqs, hardware
            ),
        )

    @cached_property
    def ceilings(self) -> Ceilings:
        att = attention_dtype_of(self.precision, self.ceiling, self.engine)
        return Ceilings.of(self.hardware, self.precision.compute, self.ceiling, self.engine, att)

    @property
    def budget(self) -> MemoryBudget:
        return self.memory.budget(self.hardware)

    @property
    def engine_name(self) -> str:
        """The engine's name, or `none` for the hardware layer alone."""
        return self.engine.name if self.engine is not None else "none"

    @property
    def first_token_from_decode(self) -> bool:
        """The engine yields a request's first token from a decode step (`first_token`)."""
        return self.engine is not None and self.engine.first_token == "decode"

    def on(self, hardware: HardwareSpec) -> Stack:
        """The same stack on another device (its own ceilings)."""
        return replace(self, hardware=hardware)

    def for_model(self, model: ModelSpec) -> Stack:
        """The same stack with the precision's group bits fixed for another model (a draft)."""
        return replace(self, precision=replace(self.precision, model_bits=None).for_model(model))

    def with_parallel(self, parallel: Parallel) -> Stack:
        return replace(self, parallel=parallel)

    def with_memory(self, **changes: Any) -> Stack:
        """The stack with some memory-policy fields replaced (`memory_fraction=0.95`, ...)."""
        return replace(self, memory=replace(self.memory, **changes))
