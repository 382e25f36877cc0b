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
- Memory terms are per GPU (the fullest one, see `placement.memory_per_gpu`); `memory_bytes`
  is what all GPUs together provision. A batch fits when its per-GPU memory at P + G tokens is
  within the usable memory (`memory.batch_fit`: capacity less the reserve, activations of the
  prefill token budget); one that does not is still estimated, marked, and diagnosed
  (`memory.shortfall`). The memory fraction defaults to 1 on the datasheet ceiling (the speed
  of light keeps the full capacity) and to `memory.DEFAULT_MEMORY_FRACTION` otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Literal

import numpy as np

from ..errors import InvalidInputError
from ..spec.engine import EngineSpec
from ..spec.hardware import HardwareSpec
from ..spec.model import ModelSpec
from ..spec.operators import Step
from ..spec.precision import Precision
from . import memory
from .cost import Ceiling, StepCost
from .parallel import ParallelStepCost, parallel_step_cost
from .placement import Parallel
from .stack import Stack

#: The figures of a case that carry an interval (`Estimate.case_intervals`).
INTERVAL_FIGURES = (
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "decode_tokens_per_s",
    "throughput_tokens_per_s",
    "memory_bytes_per_gpu",
)


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
class Estimate:
    """An estimate for one model on one stack over several batch sizes."""

    model: ModelSpec
    stack: Stack
    cases: tuple[Case, ...]
    prefill: StepCost  # breakdown at the first batch size (one TP rank)
    decode: StepCost  # breakdown at the first batch size, S = P (first decode step)
    fit: memory.BatchFit  # largest B per replica whose per-GPU memory fits at P + G tokens
    prefill_comm_s: float = 0.0  # collectives of the prefill step at the first batch size
    decode_comm_s: float = 0.0
    shortfall: memory.Shortfall | None = None  # the largest batch asked for that does not fit
    warnings: tuple[str, ...] = ()
    asked_max: bool = False  # a batch of "max" was asked for (`batch_max`)

    @property
    def batch_max(self) -> dict | None:
        """The batch "max" resolved to: its size and what binds it (the KV pool, the
        activations, the weights, or the scheduler's `max_num_seqs`)."""
        if not self.asked_max:
            return None
        f = self.fit
        return {
            "batch": max(f.runnable, 1),
            "binding": f.runnable_binding,
            "fits_in_memory": f.max_batch,
            "max_num_seqs": f.max_num_seqs,
        }

    @property
    def hardware(self) -> HardwareSpec:
        return self.stack.hardware

    @property
    def precision(self) -> Precision:
        return self.stack.precision

    @property
    def ceiling(self) -> Ceiling:
        return self.stack.ceiling

    @property
    def ceiling_source(self) -> str:
        return self.prefill.ceilings.source

    @property
    def parallel(self) -> Parallel:
        return self.stack.parallel

    @property
    def engine(self) -> EngineSpec | None:
        """The software stack (None: the hardware layer alone)."""
        return self.stack.engine

    @property
    def weights_as_released(self) -> bool:
        """Whether the weights are costed in the formats the model is released in
        (`precision.released`; an engine's storage of them counts as the same)."""
        from ..spec.precision import released
        from .stack import resolve_precision

        mine = released(self.model)
        return self.precision.weights in (
            mine.weights,
            resolve_precision(self.model, mine, self.engine).weights,
        )

    @property
    def max_batch(self) -> int:
        return self.fit.max_batch

    @property
    def fits(self) -> bool:
        return all(c.fits for c in self.cases)

    def case_intervals(self, c: Case, coverage: float) -> dict[str, dict]:
        """The interval of each of case `c`'s times, rates and memory (`roofline.calc.intervals`);
        none on the datasheet ceiling, which is a bound, not a prediction."""
        return self.figure_intervals(
            c, {k: float(getattr(c, k)) for k in INTERVAL_FIGURES}, coverage
        )

    def figure_intervals(
        self, c: Case, values: dict[str, float], coverage: float
    ) -> dict[str, dict]:
        """The intervals of `values`, figures of case `c` (`intervals.FIGURES` names them)."""
        if self.ceiling == "datasheet":
            return {}
        from .intervals import intervals_of

        s = self.stack
        out = intervals_of(
            values,
            s.engine_name,
            s.parallel.gpus_per_replica,
            c.batch,
            s.hardware,
            coverage,
            weights=s.precision.weights,
        )
        if "memory_bytes_per_gpu" in out:  # weights and KV are exact counts: never below them
            band = out["memory_bytes_per_gpu"]
            band["low"] = max(band["low"], c.weights_bytes + c.kv_cache_bytes)
        bound = self._speed_of_light.get(c.batch, {})
        for name, band in out.items():  # never faster than the datasheet roofline
            if name in bound and name in ("ttft_s", "tpot_s", "e2e_s"):
                band["low"] = max(band["low"], min(bound[name], values[name]))
            elif name in bound:
                band["high"] = min(band["high"], max(bound[name], values[name]))
        return out

    @cached_property
    def _speed_of_light(self) -> dict[int, dict[str, float]]:
        """The datasheet roofline's times and rates of every case: the bound an interval
        never crosses."""
        s = self.stack
        ds = replace(s, ceiling="datasheet", engine=None)
        c0 = self.cases[0]
        e = estimate(self.model, ds, [c.batch for c in self.cases], c0.prompt_tokens, c0.gen_tokens)
        keys = ("ttft_s", "tpot_s", "e2e_s", "decode_tokens_per_s", "throughput_tokens_per_s")
        return {c.batch: {k: float(getattr(c, k)) for k in keys} for c in e.cases}

    def as_dict(self, coverage: float | None = None) -> dict:
        """The JSON of the estimate; with `coverage`, each case carries its `intervals`."""
        cases = [c.as_dict() for c in self.cases]
        if coverage:
            cases = [
                d | {"intervals": self.case_intervals(c, coverage)}
                for d, c in zip(cases, self.cases, strict=True)
            ]
        return {
            "model": self.model.name,
            "hardware": self.hardware.name,
            "ceiling": self.ceiling,
            "ceiling_source": self.ceiling_source,
            "engine": self.engine.flag if self.engine else None,
            "precision": self.precision.as_dict(),
            "weights_as_released": self.weights_as_released,
            "parallel": self.parallel.as_dict() | {"interconnect": self.hardware.interconnect.kind},
            "ridge_point_flops_per_byte": self.hardware.ridge_point_flops_per_byte(
                self.precision.compute
            ),
            "max_batch": self.max_batch,
            "memory": self.fit.as_dict(),
            "does_not_fit": None if self.shortfall is None else self.shortfall.as_dict(),
            "warnings": list(self.warnings),
            "cases": cases,
        } | ({"batch_max": self.batch_max} if self.asked_max else {})

    def breakdown_dict(self) -> dict:
        """The per-operator costs of the first case's prefill and first decode step, with the
        collectives; when the engine yields the first token from a decode step, the prefill
        covers P - 1 tokens and the dict says so."""
        out: dict[str, object] = {
            "prefill": self.prefill.as_dict() | {"collectives_s": self.prefill_comm_s},
            "decode": self.decode.as_dict() | {"collectives_s": self.decode_comm_s},
        }
        P = self.cases[0].prompt_tokens
        if first_token_split(self.stack, P):  # TTFT = this prefill of P - 1 + a decode step
            out["prefill_tokens"] = P - 1
            out["first_token"] = "decode step at S = P - 1 after the prefill"
        return out


def first_token_split(stack: Stack, prompt: int) -> int:
    """1 when the engine's first token comes from a decode step over the last prompt token
    (`EngineSpec.first_token` = decode): TTFT = prefill of P - 1 tokens + that step; else 0."""
    return int(stack.first_token_from_decode and prompt > 1)


def mean_tpot_s(
    model: ModelSpec, stack: Stack, batch: np.ndarray, prompt: int, gen: int
) -> np.ndarray:
    """Mean decode step time over the G-1 steps after the first token, per batch size.
    With G = 1 there is no such step; the next step's time (S = P) is reported."""
    S = prompt + np.arange(max(gen - 1, 1))  # cached tokens before each step
    B = np.asarray(batch)[:, None]
    t = parallel_step_cost(model, stack, Step(B, 1, S[None, :])).time_s
    return np.asarray(t).mean(axis=1)


#: The batch "max": the most sequences the engine runs at once (`BatchFit.runnable`).
MAX_BATCH = "max"


def estimate(
    model: ModelSpec,
    stack: Stack,
    batches: Sequence[int | Literal["max"]] = (1,),
    prompt: int = 1024,
    gen: int = 256,
) -> Estimate:
    """Prefill + decode metrics and memory for each batch size (see module docstring) of
    `model` on `stack` (`Stack.resolve`: device, formats, ceiling, engine, layout, memory).
    A batch of `"max"` is the most sequences the engine runs at P + G tokens: what fits in
    its memory, capped by its scheduler's `max_num_seqs` (`BatchFit.runnable`; the estimate's
    `batch_max` says which binds); 1 when nothing fits (shown as not fitting)."""
    if not batches:
        raise InvalidInputError("give at least one batch size")
    if any(b != MAX_BATCH and not isinstance(b, int | np.integer) for b in batches):
        raise InvalidInputError(f"batch sizes are integers or '{MAX_BATCH}', got {batches}")
    sizes = [int(b) for b in batches if b != MAX_BATCH]
    if sizes and min(sizes) < 1:
        raise InvalidInputError(f"batch sizes must be at least 1, got {min(sizes)}")
    if prompt < 1 or gen < 1:
        raise InvalidInputError("`prompt` and `gen` must be at least 1 token")
    hw, precision, parallel = stack.hardware, stack.precision, stack.parallel
    precision.check(hw)
    context = prompt + gen
    fit = memory.batch_fit(model, stack, context, prompt)
    asked_max = len(sizes) < len(batches)
    runs = [max(fit.runnable, 1) if b == MAX_BATCH else int(b) for b in batches]
    B = np.asarray(runs, dtype=float)

    def cost(step: Step) -> ParallelStepCost:
        return parallel_step_cost(model, stack, step)

    split = first_token_split(stack, prompt)
    ttft = cost(Step(B, prompt - split, 0)).time_s
    if split:
        ttft = ttft + cost(Step(B, 1, prompt - 1)).time_s
    ttft = np.asarray(ttft)
    tpot = mean_tpot_s(model, stack, B, prompt, gen)
    mem = memory.held(model, stack, B, prompt, context)
    kv_at_prompt = np.asarray(memory.held(model, stack, B, prompt, prompt).kv_cache_bytes)
    kv_bytes, act_bytes = np.asarray(mem.kv_cache_bytes), np.asarray(mem.activation_bytes)
    # the fullest pipeline stage may differ with the batch: its weights with it
    w_bytes = np.broadcast_to(np.asarray(mem.weights_bytes, dtype=float), B.shape)
    cases = tuple(
        Case(
            batch=int(b),
            prompt_tokens=prompt,
            gen_tokens=gen,
            weights_bytes=float(w_bytes[i]),
            kv_cache_bytes=float(kv_bytes[i]),
            activation_bytes=float(act_bytes[i]),
            usable_bytes=fit.budget.usable_bytes,
            ttft_s=float(ttft[i]),
            tpot_s=float(tpot[i]),
            gpus=parallel.gpus,
            replicas=parallel.replicas,
            kv_cache_bytes_at_prompt=float(kv_at_prompt[i]),
        )
        for i, b in enumerate(runs)
    )
    over = [c.batch for c in cases if not c.fits]
    short = memory.shortfall(model, stack, max(over), prompt, context) if over else None
    first = runs[0]
    prefill, decode = cost(Step(first, prompt - split, 0)), cost(Step(first, 1, prompt))
    return Estimate(
        model=model,
        stack=stack,
        cases=cases,
        prefill=prefill.compute,
        decode=decode.compute,
        fit=fit,
        prefill_comm_s=float(prefill.comm_s),
        decode_comm_s=float(decode.comm_s),
        shortfall=short,
        warnings=memory.context_warning(model, context),
        asked_max=asked_max,
    )


def capped_estimate(est: Estimate, cap_w: float, alpha: float | None = None) -> Estimate:
    """`est` with its device run under a power cap of `cap_w` W per GPU: each case's prefill
    (B prompts of P tokens) and decode step (at P + G/2 cached tokens, as its power is priced)
    take Σ c·(1/s_cap − 1/s_TDP) longer (`roofline.calc.power`, "a power cap"), so TTFT and
    TPOT stretch where the modelled power would exceed the cap; a cap above what the steps draw
    changes nothing."""
    from .power import (
        CAP_CHECKED_SHARE,
        CLOCK_POWER_EXPONENT,
        busy_terms,
        clock_share,
        power_terms,
    )

    alpha = CLOCK_POWER_EXPONENT if alpha is None else alpha
    m, stack, hw = est.model, est.stack, est.hardware
    at_cap, at_tdp = power_terms(hw, cap_w), power_terms(hw)
    B = np.array([c.batch for c in est.cases], dtype=float)
    P, G = est.cases[0].prompt_tokens, est.cases[0].gen_tokens
    added = []
    for step in (Step(B, P, 0), Step(B, 1, P + G // 2)):
        t = busy_terms(parallel_step_cost(m, stack, step))
        grow = 1 / clock_share(t, at_cap, alpha) - 1 / clock_share(t, at_tdp, alpha)
        added.append(np.broadcast_to(np.asarray(t.compute_s) * grow, B.shape))
    cases = tuple(
        replace(c, ttft_s=c.ttft_s + float(added[0][i]), tpot_s=c.tpot_s + float(added[1][i]))
        for i, c in enumerate(est.cases)
    )
    warnings = est.warnings
    if hw.tdp_w is not None and cap_w < CAP_CHECKED_SHARE * hw.tdp_w:
        warnings += (
            f"a power cap of {cap_w:g} W is below {CAP_CHECKED_SHARE:.0%} of {hw.name}'s TDP "
            f"({hw.tdp_w:g} W), the lowest share its clock relation was derived at; there it "
            "has run optimistic (an RTX 3090's decode lost 14% at 150 W and 83% at 100 W where "
            "it gives 4% and 7%)",
        )
    return replace(est, cases=cases, warnings=warnings)
