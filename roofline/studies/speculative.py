"""Speculative decoding: a cheap drafter proposes K tokens, the target verifies them at once.

One cycle (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding"):
- draft: K decode steps of the draft model (T=1, over S, S+1, ..., S+K−1 cached tokens);
- verify: one target step over the K+1 positions (T=K+1 on S cached, logits at all T) —
  from the same calculator, so a large B·(K+1) can turn the target compute-bound;
- each drafted token is accepted with probability min(1, p/q); with a per-token acceptance
  α (i.i.d.), the tokens produced per cycle are E = Σ_{i=0..K} α^i = (1 − α^(K+1)) / (1 − α)
  (K+1 when α = 1): the accepted prefix plus one token from the target at the first rejection
  (or a bonus token when all K are accepted).
Speed-up over plain decoding = t_target_step · E / (K·t_draft + t_verify) ≤ K+1, since
E ≤ K+1 and verifying K+1 tokens costs at least one plain step (`cost.is_decode`: the verify
step runs the decode attention kernel under the same CUDA graph). The K draft passes run
inside one engine step, so the engine's per-step host time is paid once, by the verify step.

Draft-free heads (Medusa-style): K extra heads on the target, each costing a fraction f of
one target layer's decode time; they are evaluated beside the verification step, so a cycle
is K·f·t_layer + t_verify. The same E applies with α the per-head acceptance.

Multi-token prediction (DeepSeek-V3 §2.2, `mtp_module`): the checkpoint's MTP module, one
transformer layer of the target's MoE kind, drafts the next token from the target's last hidden
state and the embedding of the token before: concatenated (2D), projected back to D (eh_proj),
run through the layer and the target's shared LM head. K > 1 reuses the module K times (as
vLLM's deepseek_mtp does). Its weights live beside the target's; the embedding and LM head
are the target's own and are not held twice. An EAGLE head (`eagle_module`) is drafted the
same way: one decoder layer of the target's own dense kind behind a 2D → D fc.

Both models run on the same deployment (`Parallel`: the draft is sharded like the target) and
must fit on it together: the fullest GPU holds both models' weights and KV caches at S + K + 1
tokens, and the larger of their step activations (they run one after the other), within the
usable memory of `memory.batch_fit` (`pair_fit`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..calc import memory
from ..calc.cost import MAX_VERIFY_TOKENS
from ..calc.parallel import parallel_step_cost
from ..calc.stack import Stack
from ..errors import DoesNotFitError, InvalidInputError
from ..spec.model import ModelSpec
from ..spec.operators import ArrayLike, Op, Step, projection

#: Draft tokens per cycle at most: a verification of K + 1 positions is costed as a decode
#: step up to `cost.MAX_VERIFY_TOKENS` positions.
MAX_DRAFT_TOKENS = MAX_VERIFY_TOKENS - 1


def check_k(k: int) -> None:
    if not 1 <= k <= MAX_DRAFT_TOKENS:
        raise InvalidInputError(
            f"K (draft tokens per step) must be in 1..{MAX_DRAFT_TOKENS}, got {k}"
        )


def check_acceptance(alpha: ArrayLike) -> None:
    a = np.asarray(alpha, dtype=float)
    if np.any(~np.isfinite(a)) or np.any(a < 0) or np.any(a > 1):
        raise InvalidInputError(f"acceptance must be a probability in [0, 1], got {alpha}")


def expected_tokens_per_step(alpha: ArrayLike, k: ArrayLike) -> ArrayLike:
    """E = (1 − α^(K+1)) / (1 − α): tokens one target step yields; K+1 at α = 1."""
    check_acceptance(alpha)
    a = np.asarray(alpha, dtype=float)
    k = np.asarray(k)
    safe = np.where(a < 1, a, 0.5)  # avoid 0/0; the α = 1 branch is taken below
    return np.where(a < 1, (1 - safe ** (k + 1)) / (1 - safe), k + 1.0)


@dataclass(frozen=True)
class SpeculativeCost:
    """One speculative cycle's named terms (seconds); derived rates follow from them."""

    k: int  # K drafted tokens per cycle
    acceptance: float  # α
    draft_s: float  # K draft steps (or K heads)
    verify_s: float  # target step over K+1 tokens
    target_step_s: float  # plain target decode step, the baseline

    @property
    def cycle_s(self) -> float:
        return self.draft_s + self.verify_s

    @property
    def expected_tokens_per_step(self) -> float:
        return float(expected_tokens_per_step(self.acceptance, self.k))

    @property
    def time_per_token_s(self) -> float:
        return self.cycle_s / self.expected_tokens_per_step

    @property
    def speedup(self) -> float:
        return self.target_step_s / self.time_per_token_s

    def as_dict(self) -> dict:
        keys = (
            "k",
            "acceptance",
            "draft_s",
            "verify_s",
            "target_step_s",
            "cycle_s",
            "expected_tokens_per_step",
            "time_per_token_s",
            "speedup",
        )
        return {key: getattr(self, key) for key in keys}


@dataclass(frozen=True)
class Drafter:
    """Where the K proposals come from: a draft model, `heads` on the target costing
    `head_layer_fraction` of one target layer each, or a module on the target's hidden state
    that shares the target's embedding and LM head and adds a 2D → D projection (`mtp`): the
    checkpoint's MTP module (`mtp_of`) or an EAGLE head (`eagle_of`)."""

    model: ModelSpec | None = None
    head_layer_fraction: float | None = None
    mtp: bool = False
    eagle: bool = False  # the module is an EAGLE head (`mtp` is then true too)

    def __post_init__(self) -> None:
        if (self.model is None) == (self.head_layer_fraction is None):
            raise InvalidInputError("give either a draft model or a head cost, not both")
        if self.head_layer_fraction is not None and self.head_layer_fraction <= 0:
            raise InvalidInputError("the head cost must be a positive fraction of a layer")

    @classmethod
    def mtp_of(cls, target: ModelSpec) -> Drafter:
        return cls(model=mtp_module(target), mtp=True)

    @classmethod
    def eagle_of(cls, target: ModelSpec) -> Drafter:
        return cls(model=eagle_module(target), mtp=True, eagle=True)

    @property
    def name(self) -> str:
        """What drafts, as a report says it."""
        if self.eagle:
            return "an EAGLE head (one decoder layer of the target's, and its fc)"
        if self.mtp and self.model is not None:
            return f"its multi-token-prediction module ({self.model.layers} layer)"
        if self.model is not None:
            return self.model.name
        return f"heads at {self.head_layer_fraction} of a layer each"


def mtp_module(target: ModelSpec) -> ModelSpec:
    """The target's multi-token-prediction module as a model: `mtp_layers` layers of the
    target's last (MoE) kind on the target's vocabulary; `eh_proj` and the sharing of the
    embedding and LM head are added by the callers (`mtp_projection`, `pair_fit`)."""
    if not target.mtp_layers:
        raise InvalidInputError(
            f"{target.name} has no multi-token-prediction module (mtp_layers 0: its "
            "checkpoint ships none); draft with a model (`draft`) or heads (`heads`)"
        )
    fields = target.model_dump() | {
        "name": f"{target.name}-mtp",
        "display_name": f"{target.display_name} MTP module",
        "layers": target.mtp_layers,
        "mtp_layers": 0,
        "published_params": None,
        "published_params_source": "",
    }
    if target.moe is not None:
        fields["moe"] = target.moe.model_dump() | {"dense_first_layers": 0}
    return ModelSpec.model_validate(fields)


def eagle_module(target: ModelSpec) -> ModelSpec:
    """An EAGLE draft head for `target` as a model (Li et al. 2024, "EAGLE: Speculative Sampling
    Requires Rethinking Feature Uncertainty", §3: an FC layer taking the target's feature and
    the next token's embedding, 2D → D, then one decoder layer, through the target's frozen
    LM head): one layer of the target's own attention and dense FFN on its vocabulary. The fc
    and the sharing of the embedding and LM head are added by the callers, as for an MTP module
    (`mtp_projection`, `pair_fit`). Targets whose layers are not all full attention with a
    dense FFN (MoE, sliding or chunked windows, SSM and linear mixers) are refused: their
    heads' layer is not one the calculator can read off the target."""
    kinds = {(k.mixer, k.ffn) for k in target.layer_kinds}
    if kinds != {("global", "dense")} or target.diffusion is not None:
        raise InvalidInputError(
            f"{target.name} is not a stack of full-attention layers with dense FFNs; an EAGLE "
            "head of it is not modelled: draft with a model (`draft`) or heads (`heads`)"
        )
    fields = target.model_dump() | {
        "name": f"{target.name}-eagle",
        "display_name": f"{target.display_name} EAGLE head",
        "aliases": (),
        "layers": 1,
        "mtp_layers": 0,
        "published_params": None,
        "published_params_source": "",
    }
    return ModelSpec.model_validate(fields)


def mtp_projection_s(target: ModelSpec, stack: Stack, batch: ArrayLike) -> float:
    """One eh_proj GEMM on `stack`'s ceilings, inside the decode step's graph."""
    from ..calc.cost import Ceilings, attention_dtype_of, op_cost

    p = stack.precision
    att = attention_dtype_of(p, stack.ceiling, stack.engine)
    c = Ceilings.of(stack.hardware, p.compute, stack.ceiling, stack.engine, att)
    return float(op_cost(mtp_projection(target, batch), p, c, graphs=True, decode=True).time_s)


def mtp_projection(target: ModelSpec, batch: ArrayLike) -> Op:
    """eh_proj of one MTP pass: [norm(embedding); norm(hidden)] (2D) -> D for B tokens, one
    unsharded matrix on every GPU (vLLM's DeepSeekMTP builds it as a plain nn.Linear); an
    EAGLE head's fc is the same 2D -> D matrix."""
    D = target.d_model
    return projection("mtp_eh_proj", np.asarray(batch), 2 * D, D)


def check_pair(target: ModelSpec, draft: ModelSpec) -> None:
    if draft.vocab_size != target.vocab_size:
        raise InvalidInputError(
            f"draft {draft.name} has a {draft.vocab_size:,}-token vocabulary but target "
            f"{target.name} has {target.vocab_size:,}: speculative decoding compares the two "
            "distributions token by token; pick a draft with the target's tokenizer"
        )


def _step_s(m: ModelSpec, stack: Stack, step: Step) -> ArrayLike:
    return parallel_step_cost(m, stack, step).time_s


def _draft_step_s(m: ModelSpec, stack: Stack, step: Step) -> ArrayLike:
    """A draft forward pass without the engine's per-step host time: the K proposals run
    inside one engine step (vLLM V1 drafts in the model runner, EAGLE and draft models
    alike), so the scheduling and input preparation of `host_step_us` are paid once per
    cycle, by the verify step."""
    c = parallel_step_cost(m, stack, step)
    return c.time_s - c.compute.host_step_s


def layer_decode_s(m: ModelSpec, stack: Stack, step: Step) -> ArrayLike:
    """One transformer layer's share of a step: the step of L layers minus that of L−1."""
    fewer = ModelSpec.model_validate(m.model_dump() | {"layers": m.layers - 1})
    return _step_s(m, stack, step) - _step_s(fewer, stack.for_model(fewer), step)


@dataclass(frozen=True)
class PairFit:
    """Target and draft on the fullest GPU at S + K + 1 tokens: bytes of each, and the budget."""

    target_bytes: float  # weights + KV + activations of the target
    draft_bytes: float  # weights + KV of the draft (its activations come one after the other)
    extra_activation_bytes: float  # what the draft's step activations exceed the target's by
    budget: memory.MemoryBudget

    @property
    def needs_bytes(self) -> float:
        return self.target_bytes + self.draft_bytes + self.extra_activation_bytes

    @property
    def fits(self) -> bool:
        return self.needs_bytes <= self.budget.usable_bytes

    def require(self, target: str, device: str, batch: int) -> None:
        """Refuse a pair that does not fit (for callers that want a hard check)."""
        if not self.fits:
            raise DoesNotFitError(
                f"{target} and its draft need {self.needs_bytes / 1e9:.1f} GB per GPU at batch "
                f"{batch} but {device} has {self.budget.usable_bytes / 1e9:.1f} GB usable; add "
                "GPUs (`tp`/`pp`) or use a smaller `weights` format"
            )

    def as_dict(self) -> dict:
        return self.budget.as_dict() | {
            "target_bytes": self.target_bytes,
            "draft_bytes": self.draft_bytes,
            "needs_bytes": self.needs_bytes,
            "fits": self.fits,
        }


def pair_fit(
    target: ModelSpec,
    draft: ModelSpec | None,
    stack: Stack,
    batch: int,
    context: int,
    k: int,
    mtp: bool = False,
) -> PairFit:
    """Whether the target and its draft fit together on `stack` (see module docstring); heads
    only (draft None) leave the target alone. Prompts of S tokens are prefilled under the
    stack's token budget. An MTP module (`mtp`) holds no embedding or LM head of its own (the
    target's, 1/tp of each per GPU) and adds its unsharded eh_proj."""
    reach = context + k + 1
    t = memory.held(target, stack, batch, context, reach)
    draft_bytes = extra = 0.0
    if draft is not None:
        d = memory.held(draft, stack.for_model(draft), batch, context, reach)
        draft_bytes = draft_weights_bytes(target, draft, stack, mtp) + float(d.kv_cache_bytes)
        extra = max(float(d.activation_bytes - t.activation_bytes), 0.0)
    return PairFit(float(t.total_bytes), draft_bytes, extra, stack.budget)


def draft_weights_bytes(target: ModelSpec, draft: ModelSpec, stack: Stack, mtp: bool) -> float:
    """The draft's weights on the fullest GPU of `stack` (sharded like the target); an MTP
    module (`mtp`) without the target's embedding and LM head, which it shares (1/tp of each
    per GPU), and with its unsharded eh_proj."""
    weights = float(memory.held(draft, stack.for_model(draft), 1, 1, 1).weights_bytes)
    if not mtp:
        return weights
    p, prec, tp = draft.params, stack.precision, stack.parallel.tp
    shared = p.embedding * prec.weight_bytes_for("embedding") + p.lm_head * (
        prec.weight_bytes_for("lm_head")
    )
    eh = mtp_projection(target, 1).weight_elems * prec.weight_bytes_for(None)
    return weights + float(eh) - shared / tp


def speculative_cost(
    target: ModelSpec,
    drafter: Drafter,
    stack: Stack,
    k: int,
    acceptance: float,
    batch: int = 1,
    context: int = 1024,
) -> SpeculativeCost:
    """One cycle of K proposals verified by the target, for B sequences at S cached tokens,
    both models on `stack`'s deployment."""
    check_k(k)
    check_acceptance(acceptance)
    if context + k + 1 > target.max_context:
        raise InvalidInputError(
            f"context {context} + K + 1 exceeds {target.name}'s max context of {target.max_context}"
        )
    stack.precision.check(stack.hardware)
    plain = Step(batch, 1, context)
    target_step_s = float(_step_s(target, stack, plain))
    verify_s = float(_step_s(target, stack, Step(batch, k + 1, context, logits="all")))
    if drafter.model is not None:
        check_pair(target, drafter.model)
        S = context + np.arange(k)  # the draft's cache grows by one per proposal
        draft_s = float(
            np.sum(_draft_step_s(drafter.model, stack.for_model(drafter.model), Step(batch, 1, S)))
        )
        if drafter.mtp:
            draft_s += k * mtp_projection_s(target, stack, batch)
    else:
        draft_s = float(
            k
            * (drafter.head_layer_fraction or 0.0)  # a Drafter without a model has heads
            * layer_decode_s(target, stack, plain)
        )
    return SpeculativeCost(k, float(acceptance), draft_s, verify_s, target_step_s)


def best_k(costs: list[SpeculativeCost]) -> int:
    """K with the largest speed-up among cycles of one acceptance."""
    return max(costs, key=lambda c: c.speedup).k


def break_even_acceptance(
    target: ModelSpec,
    drafter: Drafter,
    stack: Stack,
    k: int,
    batch: int = 1,
    context: int = 1024,
) -> float | None:
    """The α below which speculation slows generation down: E(α) = cycle / target step,
    solved by bisection (E rises with α, the costs do not depend on it). None if even α = 1
    does not pay."""
    c = speculative_cost(target, drafter, stack, k, 1.0, batch, context)
    needed = c.cycle_s / c.target_step_s  # tokens per cycle to break even
    if needed > k + 1:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_tokens_per_step(mid, k) < needed else (lo, mid)
    return hi


@dataclass(frozen=True)
class SpeculationStudy:
    """A grid of speculative cycles: per batch B the pair's memory (`fits`), per (B, α) the
    cycles of every K (`cycles`, in the order of `ks`), per (B, K) the break-even α (None:
    never pays)."""

    target: ModelSpec
    drafter: Drafter
    stack: Stack
    ks: tuple[int, ...]
    alphas: tuple[float, ...]
    batches: tuple[int, ...]
    context: int
    fits: dict[int, PairFit]
    cycles: dict[tuple[int, float], list[SpeculativeCost]]
    break_even: dict[tuple[int, int], float | None]

    @property
    def drafted_by(self) -> str:
        return self.drafter.name

    def best(self, batch: int, alpha: float) -> SpeculativeCost:
        """The cycle of the K with the largest speed-up at (B, α)."""
        return max(self.cycles[(batch, alpha)], key=lambda c: c.speedup)

    def intervals(self, batch: int, c: SpeculativeCost, coverage: float) -> dict[str, dict]:
        """The decode band (`roofline.calc.intervals`) of the cycle, the plain step and the time per
        token; none for the speed-up, a ratio of two predictions whose errors largely cancel
        (no published speculative row says by how much). Empty on the datasheet ceiling."""
        s = self.stack
        if s.ceiling == "datasheet":
            return {}
        from ..calc.intervals import band_for

        band = band_for(
            "decode",
            s.engine_name,
            s.parallel.gpus_per_replica,
            batch,
            s.hardware,
            coverage,
            weights=s.precision.weights,
        )
        return {
            k: band.as_dict(getattr(c, k)) for k in ("cycle_s", "target_step_s", "time_per_token_s")
        }

    def as_dict(self, coverage: float | None = None) -> dict:
        """The JSON; with `coverage`, each case carries its `intervals`."""

        def case(b: int, c: SpeculativeCost) -> dict:
            d = {"batch": b} | c.as_dict()
            return d | {"intervals": self.intervals(b, c, coverage)} if coverage else d

        return {
            "target": self.target.name,
            "draft": self.drafted_by,
            "context": self.context,
            "memory": [{"batch": b} | f.as_dict() for b, f in self.fits.items()],
            "cases": [case(b, c) for (b, _), cs in self.cycles.items() for c in cs],
            "best_k": [
                {
                    "batch": b,
                    "acceptance": a,
                    "best_k": self.best(b, a).k,
                    "speedup": self.best(b, a).speedup,
                }
                for (b, a) in self.cycles
            ],
            "break_even_acceptance": [
                {"batch": b, "k": kk, "acceptance": v} for (b, kk), v in self.break_even.items()
            ],
        }


def study(
    target: ModelSpec,
    drafter: Drafter,
    stack: Stack,
    ks: list[int],
    alphas: list[float],
    batches: list[int],
    context: int,
) -> SpeculationStudy:
    """Every (B, α, K) cycle, the break-even α of every (B, K), and whether the pair fits at
    each B with the largest K's S + K + 1 tokens."""
    for a in alphas:
        check_acceptance(a)
    fits = {
        b: pair_fit(target, drafter.model, stack, b, context, max(ks), drafter.mtp) for b in batches
    }
    cycles = {
        (b, a): [speculative_cost(target, drafter, stack, kk, a, b, context) for kk in ks]
        for b in batches
        for a in alphas
    }
    even = {
        (b, kk): break_even_acceptance(target, drafter, stack, kk, b, context)
        for b in batches
        for kk in ks
    }
    return SpeculationStudy(
        target=target,
        drafter=drafter,
        stack=stack,
        ks=tuple(ks),
        alphas=tuple(alphas),
        batches=tuple(batches),
        context=context,
        fits=fits,
        cycles=cycles,
        break_even=even,
    )
