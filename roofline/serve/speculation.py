"""Speculative decoding in the serving simulator: what each decode step of a request yields,
and what the step costs with a drafter beside the target.

Every running sequence verifies K drafted tokens per step (T = K + 1 positions over its cached
S, logits at each), as vLLM V1 schedules it: the K + 1 tokens count against the step's token
budget and its KV blocks are reserved for them. The drafter is the one `roofline speculate`
costs (`speculative.Drafter`): a draft model or the target's MTP module runs K passes inside
the step (the first beside the step's prompt chunks, which it prefills too; the rest over the
decoding sequences alone, from the CUDA graph), without the engine's per-step host time, which
the step pays once; heads cost K · f of one target layer.

Acceptance is per request: request i accepts each drafted token with probability α_i (i.i.d.
within the request, Leviathan et al. 2023), α_i drawn once from a beta distribution of mean α
and standard deviation `acceptance_sd` (0: every request α). A step accepts A tokens,
P(A ≥ j) = α_i^j for j ≤ K, and yields A + 1 (the target's token at the first rejection, or the
bonus token when all K pass), at most what the request still has to generate. The mean yield
of a step is then E = (1 − α^(K+1)) / (1 − α), the cycle of `speculative.SpeculativeCost`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..calc.footprint import kv_growth_elems_per_token
from ..calc.placement import pp_stage, tp_shard
from ..calc.stack import Stack
from ..errors import InvalidInputError
from ..spec.model import ModelSpec
from ..studies.speculative import (
    Drafter,
    check_acceptance,
    check_k,
    draft_weights_bytes,
    mtp_projection_s,
)
from .stepcost import MixedStepCost, MlaPathsStepCost, mixed_step_cost

StepTimer = MixedStepCost | MlaPathsStepCost


@dataclass(frozen=True)
class Speculation:
    """K drafted tokens per step, per-token acceptance α of mean `acceptance` across requests
    (standard deviation `acceptance_sd`), drafted by `drafter`."""

    k: int
    acceptance: float
    drafter: Drafter
    acceptance_sd: float = 0.0

    def __post_init__(self) -> None:
        check_k(self.k)
        check_acceptance(self.acceptance)
        sd, a = self.acceptance_sd, self.acceptance
        if not (np.isfinite(sd) and sd >= 0):
            raise InvalidInputError(f"acceptance spread must be ≥ 0, got {sd}")
        if sd > 0 and not sd**2 < a * (1 - a):
            raise InvalidInputError(
                f"an acceptance spread of {sd:g} around a mean of {a:g} is no distribution on "
                f"[0, 1] (it needs sd² < α(1 − α) = {a * (1 - a):.4g}); give a smaller "
                "`acceptance_sd`"
            )

    def per_request(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """α_i of n requests: beta of the mean and spread, or the mean for all."""
        a, var = self.acceptance, self.acceptance_sd**2
        if var == 0:  # no spread (or one too small to square)
            return np.full(n, a)
        concentration = a * (1 - a) / var - 1
        return rng.beta(a * concentration, (1 - a) * concentration, n)

    @property
    def drafted_by(self) -> str:
        return self.drafter.name

    def as_dict(self) -> dict:
        return {
            "k": self.k,
            "acceptance": self.acceptance,
            "acceptance_sd": self.acceptance_sd,
            "draft": self.drafted_by,
        }


def inverse_log(alpha: np.ndarray) -> np.ndarray:
    """1 / ln α_i, the form `accepted` draws from: −0 at α = 0 (never accepts), −inf at α = 1
    (always accepts)."""
    a = np.asarray(alpha, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(a < 1, 1.0 / np.log(a), -np.inf)


def accepted(inv_log_alpha: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Drafted tokens accepted in one step by sequences of per-token acceptance α_i (given as
    `inverse_log(α_i)`): P(A ≥ j) = α^j, capped at k. Inverse transform: A = ⌊ln u / ln α⌋ for
    u uniform on (0, 1]; fmin caps it and takes k where the product is undefined (u = 1 at
    α = 1)."""
    u = 1.0 - rng.random(inv_log_alpha.size)  # (0, 1]
    return np.fmin(np.floor(np.log(u) * inv_log_alpha), k).astype(np.int64)


@dataclass(frozen=True)
class SpeculativeTimer:
    """Step times of a replica that speculates: the target's verification step plus the
    drafter's K passes (module docstring). `draft` is the step cost of the draft model (or of
    the MTP module or EAGLE head), `eh_proj_s` the time of that module's 2D → D projection over
    B rows, `fewer_layers` the target with one layer fewer (heads: a layer's time is the
    difference)."""

    target: StepTimer
    k: int
    draft: StepTimer | None = None
    eh_proj_s: Callable[[float], float] | None = None
    head_layer_fraction: float = 0.0
    fewer_layers: StepTimer | None = None

    @property
    def width(self) -> int:
        """Positions a decoding sequence runs per step: its last token and K drafts."""
        return self.k + 1

    def step_s(self, T: np.ndarray, S: np.ndarray, verify: int = 0) -> float:
        """A step over (T_i, S_i) whose first `verify` sequences verify K drafts each."""
        return self.target.step_s(T, S, verify) + self.draft_s(T, S, verify)

    def draft_s(self, T: np.ndarray, S: np.ndarray, verify: int) -> float:
        """The drafter's share of the step: K passes of a draft model (the first also over the
        prompt chunks), or K heads over the decoding sequences."""
        S_dec = S[:verify]
        if self.draft is None:  # heads: K · f · one target layer at the decode batch
            if not verify or self.fewer_layers is None:
                return 0.0
            rows = S_dec[None, :]
            layer = float(self.target.passes_s(rows)[0] - self.fewer_layers.passes_s(rows)[0])
            return self.k * self.head_layer_fraction * layer
        host = self.draft.host_step_s
        first = np.concatenate((np.ones(verify), T[verify:]))
        total = self.draft.step_s(first, S) - host
        if self.eh_proj_s is not None:
            total += self.eh_proj_s(float(first.sum()))
        if verify and self.k > 1:  # passes 1 .. K − 1 over the decoding sequences alone
            later = S_dec[None, :] + np.arange(1, self.k)[:, None]
            total += float((self.draft.passes_s(later) - host).sum())
            if self.eh_proj_s is not None:
                total += (self.k - 1) * self.eh_proj_s(float(verify))
        return float(total)

    def verify_steps_s(self, S: np.ndarray) -> np.ndarray:
        """Times of steps in which every sequence verifies (rows of S: (steps, sequences)),
        the drafter's passes included: `step_s` of each row with `verify` all of them."""
        t = self.target.verify_s(S, self.width)
        if self.draft is None:
            if self.fewer_layers is None:
                return t
            layer = self.target.passes_s(S) - self.fewer_layers.passes_s(S)
            return t + self.k * self.head_layer_fraction * layer
        host = self.draft.host_step_s
        passes = S[None, ...] + np.arange(self.k).reshape(-1, *([1] * S.ndim))  # pass i: S + i
        t = t + (self.draft.passes_s(passes) - host).sum(axis=0)
        if self.eh_proj_s is not None:
            t = t + self.k * self.eh_proj_s(float(S.shape[-1]))
        return t

    def decode_s(self, S: np.ndarray, steps: int) -> np.ndarray:
        """Not used: a speculating replica's contexts grow by what each step accepts
        (`verify_steps_s` takes every step's contexts)."""
        raise NotImplementedError("a speculating replica verifies: use verify_steps_s")


def speculative_timer(target: ModelSpec, stack: Stack, spec: Speculation) -> SpeculativeTimer:
    """The timer of a replica of `target` on `stack` speculating as `spec` says."""
    d = spec.drafter
    timer = mixed_step_cost(target, stack)
    if d.model is None:
        fewer = ModelSpec.model_validate(target.model_dump() | {"layers": target.layers - 1})
        return SpeculativeTimer(
            timer,
            spec.k,
            head_layer_fraction=float(d.head_layer_fraction or 0.0),
            fewer_layers=mixed_step_cost(fewer, stack.for_model(fewer)),
        )
    draft = mixed_step_cost(d.model, stack.for_model(d.model))
    eh: Callable[[float], float] | None = None
    if d.mtp:

        def eh(rows: float) -> float:
            return mtp_projection_s(target, stack, rows)

    return SpeculativeTimer(timer, spec.k, draft, eh)


def draft_memory(target: ModelSpec, stack: Stack, spec: Speculation) -> tuple[float, float]:
    """What the drafter takes on the fullest GPU: its weights (bytes,
    `speculative.draft_weights_bytes`) and its KV per token of a sequence (bytes), which the
    replica's KV pool holds beside the target's (vLLM allocates the draft's layers from the
    same pool). Heads: none (their weights and KV are not modelled)."""
    d = spec.drafter
    if d.model is None:
        return 0.0, 0.0
    weights = draft_weights_bytes(target, d.model, stack, d.mtp)
    kv_model = pp_stage(tp_shard(d.model, stack.parallel.tp), 1)
    per_token = kv_growth_elems_per_token(kv_model) * stack.precision.kv_bytes
    return weights, float(per_token)
