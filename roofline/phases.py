"""Phases of a request: prefill, then decode token by token, and the metrics users quote.

Definitions (used everywhere, written once):
- TTFT: time to first token = the prefill step of B prompts of P tokens (it yields token 1);
  on an engine whose first token comes from a decode step (`EngineSpec.first_token`), the
  prefill of P - 1 tokens plus one decode step over the last prompt token (S = P - 1).
- TPOT: mean time per output token after the first: decode steps j = 1..G-1, each over the
  S = P + j - 1 tokens cached before it (the KV cache grows step by step).
- E2E: TTFT + (G - 1) · TPOT.
- decode tokens/s: B / TPOT. Throughput: B · G / E2E, all sequences' generated tokens over
  the whole request time. With m replicas both are ×m; B is the batch of one replica.
- Memory terms are per GPU (the fullest one, see `parallel.memory_per_gpu`); `memory_bytes`
  is what all GPUs together provision. A batch fits when its per-GPU memory at P + G tokens is
  within the usable memory (`memory.batch_fit`: capacity less the reserve, activations of the
  prefill token budget); one that does not is still estimated, marked, and diagnosed
  (`memory.shortfall`). The memory fraction defaults to 1 on the datasheet ceiling (the speed
  of light keeps the full capacity) and to `memory.DEFAULT_MEMORY_FRACTION` otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from . import memory
from .cost import Ceiling, StepCost
from .engine import EngineSpec
from .errors import InvalidInputError
from .hardware import HardwareSpec
from .model import ModelSpec
from .operators import Step
from .parallel import Parallel, ParallelStepCost, memory_per_gpu, parallel_step_cost
from .precision import Precision


@dataclass(frozen=True)
class Case:
    """One batch size's results. Totals are derived from the named terms."""

    batch: int
    prompt_tokens: int
    gen_tokens: int
    weights_bytes: float
    kv_cache_bytes: float  # at P + G tokens, the end of generation
    activation_bytes: float
    usable_bytes: float  # what one GPU offers: capacity less the reserve
    ttft_s: float
    tpot_s: float
    gpus: int = 1  # all GPUs of all replicas
    replicas: int = 1
    kv_cache_bytes_at_prompt: float = 0.0  # at P tokens, when decoding starts

    @property
    def memory_bytes_per_gpu(self) -> float:
        """What the fullest GPU needs to finish every sequence: KV at P + G tokens."""
        return self.weights_bytes + self.kv_cache_bytes + self.activation_bytes

    @property
    def memory_bytes_per_gpu_at_prompt(self) -> float:
        """What it needs when the prompts are cached and decoding starts (KV at P)."""
        return self.weights_bytes + self.kv_cache_bytes_at_prompt + self.activation_bytes

    @property
    def memory_bytes(self) -> float:
        return self.memory_bytes_per_gpu * self.gpus

    @property
    def fits(self) -> bool:
        return self.memory_bytes_per_gpu <= self.usable_bytes

    @property
    def e2e_s(self) -> float:
        return self.ttft_s + (self.gen_tokens - 1) * self.tpot_s

    @property
    def decode_tokens_per_s(self) -> float:
        return self.replicas * self.batch / self.tpot_s

    @property
    def throughput_tokens_per_s(self) -> float:
        return self.replicas * self.batch * self.gen_tokens / self.e2e_s

    def as_dict(self) -> dict:
        keys = (
            "batch",
            "prompt_tokens",
            "gen_tokens",
            "gpus",
            "weights_bytes",
            "kv_cache_bytes",
            "activation_bytes",
            "memory_bytes_per_gpu",
            "memory_bytes",
            "kv_cache_bytes_at_prompt",
            "memory_bytes_per_gpu_at_prompt",
            "usable_bytes",
            "fits",
            "ttft_s",
            "tpot_s",
            "e2e_s",
            "decode_tokens_per_s",
            "throughput_tokens_per_s",
        )
        return {k: _plain(getattr(self, k)) for k in keys}


def _plain(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    return float(v)


@dataclass(frozen=True)
class Estimate:
    """An estimate for one model on one device over several batch sizes."""

    model: ModelSpec
    hardware: HardwareSpec
    precision: Precision
    ceiling: Ceiling
    ceiling_source: str
    cases: tuple[Case, ...]
    prefill: StepCost  # breakdown at the first batch size (one TP rank)
    decode: StepCost  # breakdown at the first batch size, S = P (first decode step)
    fit: memory.BatchFit  # largest B per replica whose per-GPU memory fits at P + G tokens
    parallel: Parallel = Parallel()
    prefill_comm_s: float = 0.0  # collectives of the prefill step at the first batch size
    decode_comm_s: float = 0.0
    engine: EngineSpec | None = None  # the software stack (None: the hardware layer alone)
    shortfall: memory.Shortfall | None = None  # the largest batch asked for that does not fit
    warnings: tuple[str, ...] = ()

    @property
    def max_batch(self) -> int:
        return self.fit.max_batch

    @property
    def fits(self) -> bool:
        return all(c.fits for c in self.cases)

    def as_dict(self) -> dict:
        return {
            "model": self.model.name,
            "hardware": self.hardware.name,
            "ceiling": self.ceiling,
            "ceiling_source": self.ceiling_source,
            "engine": self.engine.name if self.engine else None,
            "precision": self.precision.as_dict(),
            "parallel": self.parallel.as_dict() | {"interconnect": self.hardware.interconnect.kind},
            "ridge_point_flops_per_byte": self.hardware.ridge_point_flops_per_byte(
                self.precision.compute
            ),
            "max_batch": self.max_batch,
            "memory": self.fit.as_dict(),
            "does_not_fit": None if self.shortfall is None else self.shortfall.as_dict(),
            "warnings": list(self.warnings),
            "cases": [c.as_dict() for c in self.cases],
        }


def first_token_split(engine: EngineSpec | None, prompt: int) -> int:
    """1 when the engine's first token comes from a decode step over the last prompt token
    (`EngineSpec.first_token` = decode): TTFT = prefill of P - 1 tokens + that step; else 0."""
    return int(engine is not None and engine.first_token == "decode" and prompt > 1)


def mean_tpot_s(
    model: ModelSpec,
    hw: HardwareSpec,
    batch: np.ndarray,
    prompt: int,
    gen: int,
    precision: Precision,
    ceiling: Ceiling,
    parallel: Parallel = Parallel(),
    engine: EngineSpec | None = None,
) -> np.ndarray:
    """Mean decode step time over the G-1 steps after the first token, per batch size.
    With G = 1 there is no such step; the next step's time (S = P) is reported."""
    S = prompt + np.arange(max(gen - 1, 1))  # cached tokens before each step
    B = np.asarray(batch)[:, None]
    step = Step(B, 1, S[None, :])
    t = parallel_step_cost(model, hw, step, precision, parallel, ceiling, engine).time_s
    return np.asarray(t).mean(axis=1)


def estimate(
    model: ModelSpec,
    hw: HardwareSpec,
    batches: Sequence[int] = (1,),
    prompt: int = 1024,
    gen: int = 256,
    precision: Precision = Precision(),
    ceiling: Ceiling = "achievable",
    parallel: Parallel = Parallel(),
    engine: EngineSpec | None = None,
    *,
    memory_fraction: float | None = None,
    prefill_token_budget: int | None | Literal["engine"] = "engine",
) -> Estimate:
    """Prefill + decode metrics and memory for each batch size (see module docstring), on
    the `ceiling` and, for the achievable one, the software stack `engine`.
    `memory_fraction` and `prefill_token_budget`: `memory.memory_terms` (the engine's unless
    given; None as a budget charges the whole batch's prompts at once)."""
    engine = engine if ceiling == "achievable" else None
    if not batches:
        raise InvalidInputError("give at least one batch size")
    if min(batches) < 1:
        raise InvalidInputError(f"batch sizes must be at least 1, got {min(batches)}")
    if prompt < 1 or gen < 1:
        raise InvalidInputError("--prompt and --gen must be at least 1 token")
    precision.check(hw)
    memory_fraction, prefill_token_budget = memory.memory_terms(
        engine, ceiling, memory_fraction, prefill_token_budget
    )
    B = np.asarray(batches, dtype=float)

    def cost(step: Step) -> ParallelStepCost:
        return parallel_step_cost(model, hw, step, precision, parallel, ceiling, engine)

    split = first_token_split(engine, prompt)
    ttft = cost(Step(B, prompt - split, 0)).time_s
    if split:
        ttft = ttft + cost(Step(B, 1, prompt - 1)).time_s
    ttft = np.asarray(ttft)
    tpot = mean_tpot_s(model, hw, B, prompt, gen, precision, ceiling, parallel, engine)
    context = prompt + gen
    fit = memory.batch_fit(
        model,
        hw,
        precision,
        context,
        prompt,
        parallel,
        memory_fraction=memory_fraction,
        prefill_token_budget=prefill_token_budget,
    )
    mem = memory_per_gpu(
        model, precision, parallel, B, prompt, context, prefill_token_budget=prefill_token_budget
    )
    kv_at_prompt = np.asarray(
        memory_per_gpu(
            model, precision, parallel, B, prompt, prompt, prefill_token_budget=prefill_token_budget
        ).kv_cache_bytes
    )
    kv_bytes, act_bytes = np.asarray(mem.kv_cache_bytes), np.asarray(mem.activation_bytes)
    cases = tuple(
        Case(
            int(b),
            prompt,
            gen,
            float(mem.weights_bytes),
            float(kv_bytes[i]),
            float(act_bytes[i]),
            fit.budget.usable_bytes,
            float(ttft[i]),
            float(tpot[i]),
            parallel.gpus,
            parallel.replicas,
            float(kv_at_prompt[i]),
        )
        for i, b in enumerate(batches)
    )
    over = [c.batch for c in cases if not c.fits]
    short = (
        memory.shortfall(
            model,
            hw,
            precision,
            max(over),
            prompt,
            context,
            parallel,
            memory_fraction=memory_fraction,
            prefill_token_budget=prefill_token_budget,
        )
        if over
        else None
    )
    first = batches[0]
    prefill, decode = cost(Step(first, prompt - split, 0)), cost(Step(first, 1, prompt))
    return Estimate(
        model,
        hw,
        precision,
        ceiling,
        prefill.compute.ceilings.source,
        cases,
        prefill.compute,
        decode.compute,
        fit,
        parallel,
        float(prefill.comm_s),
        float(decode.comm_s),
        engine,
        short,
        memory.context_warning(model, context),
    )
