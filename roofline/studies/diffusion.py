"""Diffusion LMs against autoregressive decoding, with the same calculator for both.

A masked-diffusion LM (LLaDA) writes an answer of L tokens by refining all of them over N
steps; each step is a full bidirectional forward over prompt + answer, P + L tokens, with no
KV cache (the answer changes every step), logits for every position. Its time is
N · t_step(B, T = P + L). The autoregressive model of the same size (the same spec with
causal attention and a KV cache) takes TTFT + (L − 1) · TPOT. Decode at small batch reads all
weights once per token, so it is memory-bound; a diffusion step reads them once per N/L
tokens but does (P + L)·L/N times the FLOPs per token, so it turns compute-bound quickly.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..calc import memory
from ..calc.cost import step_cost
from ..calc.phases import estimate
from ..calc.stack import Stack
from ..errors import InvalidInputError
from ..spec.model import ModelSpec
from ..spec.operators import Step


@dataclass(frozen=True, kw_only=True)
class DiffusionComparison:
    model: str
    hardware: str
    batch: int
    prompt_tokens: int
    gen_tokens: int
    steps: int
    diffusion_step_s: float  # one full forward over P + L tokens
    autoregressive_ttft_s: float
    autoregressive_tpot_s: float
    memory_bytes: float = 0.0  # diffusion: weights + one full step's activations and logits
    usable_bytes: float = float("inf")  # device memory the engine may fill

    @property
    def fits(self) -> bool:
        return self.memory_bytes <= self.usable_bytes

    @property
    def diffusion_s(self) -> float:
        return self.steps * self.diffusion_step_s

    @property
    def autoregressive_s(self) -> float:
        return self.autoregressive_ttft_s + (self.gen_tokens - 1) * self.autoregressive_tpot_s

    @property
    def diffusion_tokens_per_s(self) -> float:
        return self.batch * self.gen_tokens / self.diffusion_s

    @property
    def autoregressive_tokens_per_s(self) -> float:
        return self.batch * self.gen_tokens / self.autoregressive_s

    @property
    def diffusion_speedup(self) -> float:
        """Autoregressive time over diffusion time (> 1: diffusion is faster)."""
        return self.autoregressive_s / self.diffusion_s

    def intervals(self, stack: Stack, coverage: float) -> dict[str, dict]:
        """Bands of `roofline.calc.intervals`: the diffusion times take the prefill band (a
        full-sequence forward, compute-bound like a prefill; no published diffusion row is in
        the evidence, the basis says so), the autoregressive ones prefill, decode and e2e.
        Empty on the datasheet ceiling (a bound)."""
        if stack.ceiling == "datasheet":
            return {}
        from ..calc.intervals import band_for

        def band(quantity: str):
            return band_for(
                quantity,
                stack.engine_name,
                stack.parallel.gpus_per_replica,
                self.batch,
                stack.hardware,
                coverage,
                weights=stack.precision.weights,
            )

        out = {}
        for name, quantity in (
            ("diffusion_step_s", "prefill"),
            ("diffusion_s", "prefill"),
            ("autoregressive_ttft_s", "prefill"),
            ("autoregressive_tpot_s", "decode"),
            ("autoregressive_s", "e2e"),
        ):
            d = band(quantity).as_dict(getattr(self, name))
            if name.startswith("diffusion"):
                d["basis"] += "; no published diffusion-LM row: a prefill's band"
            out[name] = d
        return out

    def as_dict(self) -> dict:
        d = dict(vars(self))
        for k in (
            "diffusion_s",
            "autoregressive_s",
            "diffusion_tokens_per_s",
            "autoregressive_tokens_per_s",
            "diffusion_speedup",
            "fits",
        ):
            d[k] = getattr(self, k)
        return d


def compare_diffusion(
    model: ModelSpec,
    stack: Stack,
    prompt: int,
    gen: int | None = None,
    steps: int | None = None,
    batch: int = 1,
) -> DiffusionComparison:
    """N diffusion steps over P + L tokens vs autoregressive TTFT + (L − 1)·TPOT, same model
    on the same stack. `gen` and `steps` default to the spec's `diffusion` block."""
    d = model.diffusion
    gen = gen if gen is not None else (d.gen_length if d else None)
    steps = steps if steps is not None else (d.steps if d else None)
    if gen is None or steps is None:
        raise InvalidInputError(f"{model.name} has no diffusion block; give `gen` and `steps`")
    if min(prompt, gen, steps, batch) < 1:
        raise InvalidInputError("prompt, gen, steps and batch must each be at least 1")
    if prompt + gen > model.max_context:
        raise InvalidInputError(
            f"prompt + gen = {prompt + gen} exceeds {model.name}'s max "
            f"context of {model.max_context}; shorten them"
        )
    hw, precision = stack.hardware, stack.precision
    full = Step(batch, prompt + gen, 0, logits="all", causal=False)
    step_s = float(step_cost(model, hw, full, precision, stack.ceiling, engine=stack.engine).time_s)
    # no KV cache: the weights and one full step (B·(P + L) tokens, logits for each of them)
    tokens = batch * (prompt + gen)
    need = memory.weights_bytes(model, precision) + float(
        memory.step_activation_bytes(model, precision, tokens, tokens)
    )
    usable = stack.budget.usable_bytes
    ar = estimate(model.model_copy(update={"diffusion": None}), stack, [batch], prompt, gen).cases[
        0
    ]
    return DiffusionComparison(
        model=model.name,
        hardware=hw.name,
        batch=batch,
        prompt_tokens=prompt,
        gen_tokens=gen,
        steps=steps,
        diffusion_step_s=step_s,
        autoregressive_ttft_s=ar.ttft_s,
        autoregressive_tpot_s=ar.tpot_s,
        memory_bytes=need,
        usable_bytes=usable,
    )
