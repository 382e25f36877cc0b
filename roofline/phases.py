"""Phases of a request: prefill, then decode token by token, and the metrics users quote.

Definitions (used everywhere, written once):
- TTFT: time to first token = the prefill step of B prompts of P tokens (it yields token 1).
- TPOT: mean time per output token after the first: decode steps j = 1..G-1, each over the
  S = P + j - 1 tokens cached before it (the KV cache grows step by step).
- E2E: TTFT + (G - 1) · TPOT.
- decode tokens/s: B / TPOT. Throughput: B · G / E2E, all sequences' generated tokens over
  the whole request time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from . import memory
from .cost import Ceiling, StepCost, step_cost
from .errors import InvalidInputError
from .hardware import HardwareSpec
from .model import ModelSpec
from .operators import Step
from .precision import Precision


@dataclass(frozen=True)
class Case:
    """One batch size's results. Totals are derived from the named terms."""

    batch: int
    prompt_tokens: int
    gen_tokens: int
    weights_bytes: float
    kv_cache_bytes: float
    activation_bytes: float
    capacity_bytes: float
    ttft_s: float
    tpot_s: float

    @property
    def memory_bytes(self) -> float:
        return self.weights_bytes + self.kv_cache_bytes + self.activation_bytes

    @property
    def fits(self) -> bool:
        return self.memory_bytes <= self.capacity_bytes

    @property
    def e2e_s(self) -> float:
        return self.ttft_s + (self.gen_tokens - 1) * self.tpot_s

    @property
    def decode_tokens_per_s(self) -> float:
        return self.batch / self.tpot_s

    @property
    def throughput_tokens_per_s(self) -> float:
        return self.batch * self.gen_tokens / self.e2e_s

    def as_dict(self) -> dict:
        keys = ("batch", "prompt_tokens", "gen_tokens", "weights_bytes", "kv_cache_bytes",
                "activation_bytes", "memory_bytes", "fits", "ttft_s", "tpot_s", "e2e_s",
                "decode_tokens_per_s", "throughput_tokens_per_s")
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
    prefill: StepCost  # breakdown at the first batch size
    decode: StepCost  # breakdown at the first batch size, S = P (first decode step)
    max_batch: int  # largest B whose memory (as in Case.memory_bytes) fits at P + G tokens

    def as_dict(self) -> dict:
        return {
            "model": self.model.name,
            "hardware": self.hardware.name,
            "ceiling": self.ceiling,
            "ceiling_source": self.ceiling_source,
            "precision": {"weights": self.precision.weights,
                          "activations": self.precision.activations, "kv": self.precision.kv},
            "ridge_point_flops_per_byte": self.hardware.ridge_point_flops_per_byte(
                self.precision.compute),
            "max_batch": self.max_batch,
            "cases": [c.as_dict() for c in self.cases],
        }


def mean_tpot_s(model: ModelSpec, hw: HardwareSpec, batch: np.ndarray, prompt: int, gen: int,
                precision: Precision, ceiling: Ceiling) -> np.ndarray:
    """Mean decode step time over the G-1 steps after the first token, per batch size.
    With G = 1 there is no such step; the next step's time (S = P) is reported."""
    S = prompt + np.arange(max(gen - 1, 1))  # cached tokens before each step
    B = np.asarray(batch)[:, None]
    return step_cost(model, hw, Step(B, 1, S[None, :]), precision, ceiling).time_s.mean(axis=1)


def estimate(model: ModelSpec, hw: HardwareSpec, batches: Sequence[int] = (1,),
             prompt: int = 1024, gen: int = 256, precision: Precision = Precision(),
             ceiling: Ceiling = "achievable") -> Estimate:
    """Prefill + decode metrics and memory for each batch size (see module docstring)."""
    if not batches:
        raise InvalidInputError("give at least one batch size")
    if min(batches) < 1:
        raise InvalidInputError(f"batch sizes must be at least 1, got {min(batches)}")
    if prompt < 1 or gen < 1:
        raise InvalidInputError("--prompt and --gen must be at least 1 token")
    if prompt + gen > model.max_context:
        raise InvalidInputError(
            f"prompt + gen = {prompt + gen} tokens exceeds {model.name}'s max context of "
            f"{model.max_context}; shorten them")
    B = np.asarray(batches, dtype=float)
    ttft = step_cost(model, hw, Step(B, prompt, 0), precision, ceiling).time_s
    tpot = mean_tpot_s(model, hw, B, prompt, gen, precision, ceiling)
    kv = memory.kv_cache_bytes(model, precision, B, prompt + gen)
    act = memory.activation_bytes(model, precision, B, prompt)
    w = memory.weights_bytes(model, precision)
    cases = tuple(
        Case(int(b), prompt, gen, w, float(kv[i]), float(act[i]), hw.memory_bytes,
             float(ttft[i]), float(tpot[i]))
        for i, b in enumerate(batches)
    )
    first = batches[0]
    prefill = step_cost(model, hw, Step(first, prompt, 0), precision, ceiling)
    decode = step_cost(model, hw, Step(first, 1, prompt), precision, ceiling)
    fit = int(memory.max_batch(model, hw, precision, prompt + gen, prompt))
    return Estimate(model, hw, precision, ceiling, prefill.ceilings.source, cases, prefill, decode,
                    fit)
