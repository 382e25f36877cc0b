"""Placement: how one model is spread over GPUs and what the fullest GPU holds.

- Tensor parallel (TP, n GPUs, Megatron-style): each rank holds N/n query heads, max(1, K/n)
  kv heads (kv heads are replicated when K < n), F/n of the MLP and ⌈V/n⌉ of the vocabulary;
  norms are replicated. One rank is itself a ModelSpec (`tp_shard`), so its ops, bytes and
  memory come from the one calculator unchanged.
- Pipeline parallel (PP, p stages): the layers are split as vLLM splits them (`pp_partition`:
  ⌊L/p⌋ each, the remainder one more each on the stages before the last); stage 0 holds the
  embedding, the last the LM head (tied: its own copy of the table). Memory is the fullest
  stage's, which need not be the one with the most layers (DeepSeek-V3 at PP 2: layers 0–30
  hold the 3 dense ones, layers 31–60 are all MoE and the LM head); `pp_stages` are the
  stages as models, `pp_stage` the one with the most layers (per-token KV).
- Expert parallel (EP, n GPUs): each GPU holds E/n of every MoE layer's routed experts and a
  full copy of everything else; the fullest GPU holds ⌈B/n⌉ of the replica's sequences.
- Replicas: m independent copies.

`memory_per_gpu` is the one definition of what the fullest GPU holds (weights, KV, the
activations of the largest step), used by `memory` (what fits) and `parallel` (step cost);
`min_gpus_to_fit` the smallest layout that holds a batch. This module imports neither.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError
from ..spec.hardware import HardwareSpec
from ..spec.model import ModelSpec
from ..spec.operators import ArrayLike
from ..spec.precision import Precision
from . import footprint


@dataclass(frozen=True)
class Parallel:
    """How one model is spread: tp × pp × ep GPUs per replica, `replicas` copies."""

    tp: int = 1
    pp: int = 1
    ep: int = 1
    replicas: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "ep", "replicas"):
            if getattr(self, name) < 1:
                raise InvalidInputError(f"`{name}` must be at least 1, got {getattr(self, name)}")

    @property
    def label(self) -> str:
        """The one spelling of a replica's layout, in every message and table: its degrees
        above 1 ("TP4 PP2", "TP2 EP8"); "TP1" for one GPU a replica. Replicas are not part of
        it (each caller says them its own way: "2×", "× 2 replica(s)")."""
        parts = [f"{k}{v}" for k, v in (("TP", self.tp), ("PP", self.pp), ("EP", self.ep)) if v > 1]
        return " ".join(parts) or "TP1"

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp * self.ep

    @property
    def gpus(self) -> int:
        return self.gpus_per_replica * self.replicas

    def as_dict(self) -> dict:
        """The one JSON shape of a parallel layout, in every command (docs/json.md)."""
        return {
            "tp": self.tp,
            "pp": self.pp,
            "ep": self.ep,
            "replicas": self.replicas,
            "gpus": self.gpus,
        }

    def sequences_per_gpu(self, batch: ArrayLike) -> ArrayLike:
        """Sequences on the fullest GPU of an EP group: ⌈B/ep⌉ (B itself without EP)."""
        return batch if self.ep == 1 else np.ceil(np.asarray(batch) / self.ep)


# ---- the sharded model ----------------------------------------------------------------------
def tp_shard(m: ModelSpec, tp: int) -> ModelSpec:
    """The part of `m` one of `tp` tensor-parallel ranks holds and runs (see module docstring).
    Refuses degrees that do not split the heads, kv heads or MLP evenly."""
    if tp == 1:
        return m
    N, K, F = m.heads, m.kv_heads, m.d_ff
    if N % tp:
        raise InvalidInputError(
            f"`tp={tp}` does not divide {m.name}'s {N} query heads; use a divisor of {N}"
        )
    if K % tp and tp % K:
        raise InvalidInputError(
            f"`tp={tp}` neither divides {m.name}'s {K} kv heads nor is a multiple of them "
            "(kv heads cannot be split or evenly replicated); use a divisor or multiple of "
            f"{K} that divides {N}"
        )
    if F % tp:
        raise InvalidInputError(f"`tp={tp}` does not divide {m.name}'s MLP width F = {F}")
    if m.ssm is not None:
        raise InvalidInputError(
            f"`tp={tp}`: tensor parallelism of {m.name}'s SSM (Mamba) "
            "layers is not modelled; use `pp`"
        )
    update = {
        "name": f"{m.name}-tp{tp}",
        "heads": N // tp,
        "kv_heads": max(1, K // tp),
        "d_ff": F // tp,
        "vocab_size": -(-m.vocab_size // tp),
    }
    if m.moe is not None:  # every expert's FFN split like a dense MLP (Megatron TP on experts)
        e = m.moe
        widths = [e.expert_d_ff] + ([e.shared_d_ff] if e.shared_d_ff else [])
        if any(w % tp for w in widths):
            raise InvalidInputError(
                f"`tp={tp}` does not divide {m.name}'s expert width {e.expert_d_ff}"
            )
        update["moe"] = e.model_dump() | {
            "expert_d_ff": e.expert_d_ff // tp,
            "shared_d_ff": e.shared_d_ff and e.shared_d_ff // tp,
        }
    return ModelSpec.model_validate(m.model_dump() | update)


def pp_partition(layers: int, pp: int) -> list[int]:
    """Layers per pipeline stage as vLLM assigns them (`get_pp_indices`,
    vllm/distributed/utils.py): ⌊L/p⌋ each, and the L mod p left over one more each on the
    stages before the last, from the second-to-last backwards (the last stage also runs the
    LM head). 61 layers on 2 stages: [31, 30]; 80 on 3: [27, 27, 26]."""
    parts = [layers // pp] * pp
    for i in range(2, layers % pp + 2):
        parts[-i] += 1
    return parts


def _layer_range(m: ModelSpec, start: int, n: int) -> ModelSpec:
    """Layers start … start + n − 1 of `m` as a model of n layers (its pattern and MoE layout
    shifted to start there); cross-layer KV sharing, whose groups a cut would split, and any
    shift the spec cannot express keep the first n layers instead."""
    first = ModelSpec.model_validate(m.model_dump() | {"layers": n})
    a = m.attention
    if start == 0 or a.kv_share > 1 or a.kv_share_map is not None:
        return first
    k = start % len(m.layer_pattern)
    update: dict = {"layers": n, "layer_pattern": m.layer_pattern[k:] + m.layer_pattern[:k]}
    if m.moe is not None:
        e = m.moe
        update["moe"] = e.model_dump() | {
            "dense_first_layers": max(0, e.dense_first_layers - start),
            "offset": (e.offset - start) % e.period,
        }
    try:
        return ModelSpec.model_validate(m.model_dump() | update)
    except ValueError:  # e.g. a window set with no local layer left in this stage
        return first


def pp_stages(m: ModelSpec, pp: int) -> list[ModelSpec]:
    """Every pipeline stage's layers as a model (`pp_partition`), in order."""
    if pp > m.layers:
        raise InvalidInputError(f"`pp={pp}` exceeds {m.name}'s {m.layers} layers")
    if pp == 1:
        return [m]
    out, start = [], 0
    for n in pp_partition(m.layers, pp):
        out.append(_layer_range(m, start, n))
        start += n
    return out


def stages_of(m: ModelSpec, tp: int, pp: int) -> list[ModelSpec]:
    """`pp_stages(tp_shard(m, tp), pp)`, built once per model and layout (a stage is a
    validated ModelSpec: rebuilding them at every memory query cost a plan 0.5 s)."""
    cache = m.placement_cache
    if (tp, pp) not in cache:
        cache[(tp, pp)] = pp_stages(tp_shard(m, tp), pp)
    return cache[(tp, pp)]


def pp_stage(m: ModelSpec, pp: int) -> ModelSpec:
    """The stage with the most layers, ⌈L/p⌉ (the first: its per-token KV is the largest)."""
    if pp > m.layers:
        raise InvalidInputError(f"`pp={pp}` exceeds {m.name}'s {m.layers} layers")
    if pp == 1:
        return m
    return ModelSpec.model_validate(m.model_dump() | {"layers": -(-m.layers // pp)})


def check_ep(m: ModelSpec, par: Parallel) -> None:
    """Refuse expert parallelism where it is not modelled (see module docstring)."""
    ep = par.ep
    if ep == 1:
        return
    if m.moe is None:
        raise InvalidInputError(
            f"`ep={ep}`: {m.name} is a dense model with no experts to shard; use `tp` or `pp`"
        )
    E = m.moe.experts
    if E % ep:
        raise InvalidInputError(
            f"`ep={ep}` does not divide {m.name}'s {E} routed experts; use a divisor of {E}"
        )
    if par.tp > 1:
        raise InvalidInputError(
            f"`ep={ep}` with `tp={par.tp}`: tensor-parallel experts inside "
            "an expert-parallel group are not modelled; use `ep` with `pp`, "
            "or `tp` alone"
        )


# ---- memory per GPU -------------------------------------------------------------------------
@dataclass(frozen=True)
class GpuMemory:
    """Bytes on the fullest GPU: TP or EP rank of the fullest PP stage (`stage`, 0-based, of
    `stages`). Total is derived."""

    weights_bytes: ArrayLike
    kv_cache_bytes: ArrayLike
    activation_bytes: ArrayLike
    stage: ArrayLike = 0
    stages: int = 1

    @property
    def total_bytes(self) -> ArrayLike:
        return self.weights_bytes + self.kv_cache_bytes + self.activation_bytes


def memory_per_gpu(
    m: ModelSpec,
    p: Precision,
    par: Parallel,
    batch: ArrayLike,
    prompt: ArrayLike,
    context: ArrayLike,
    *,
    prefill_token_budget: int | None = footprint.DEFAULT_PREFILL_TOKEN_BUDGET,
) -> GpuMemory:
    """Weights, KV for `context` tokens and the activations of the largest step
    (`footprint.peak_activation_bytes`: prompts of P tokens under the prefill token budget) on the
    fullest GPU, for a replica batch of B sequences. A stage holds the embedding or the LM
    head, not both, unless there is one stage (or they are tied and the last stage keeps its own
    copy). With EP n a GPU holds E/n routed experts and the KV and activations of ⌈B/n⌉
    sequences."""
    check_ep(m, par)
    per = stage_memory(m, p, par, batch, prompt, context, prefill_token_budget)
    if len(per) == 1:
        return per[0]
    totals = np.stack([np.broadcast_to(g.total_bytes, np.shape(per[0].total_bytes)) for g in per])
    i = np.argmax(totals, axis=0)  # the fullest stage, per batch and context

    def pick(field: str) -> ArrayLike:
        values = np.stack([np.broadcast_to(getattr(g, field), i.shape) for g in per])
        chosen = np.take_along_axis(values, i[None], 0)[0]
        return chosen if chosen.ndim else float(chosen)

    return GpuMemory(
        pick("weights_bytes"),
        pick("kv_cache_bytes"),
        pick("activation_bytes"),
        i if i.ndim else int(i),
        len(per),
    )


def stage_memory(
    m: ModelSpec,
    p: Precision,
    par: Parallel,
    batch: ArrayLike,
    prompt: ArrayLike,
    context: ArrayLike,
    prefill_token_budget: int | None = footprint.DEFAULT_PREFILL_TOKEN_BUDGET,
) -> list[GpuMemory]:
    """What one GPU of each pipeline stage holds (`memory_per_gpu`, stage by stage)."""
    stages = stages_of(m, par.tp, par.pp)
    q = p if p.model_bits is not None else p.for_model(m)  # the checkpoint's group formats
    last = len(stages) - 1
    b = par.sequences_per_gpu(batch)
    out = []
    for k, stage in enumerate(stages):
        ends = stage.params
        embed = (ends.embedding + ends.positional) * q.group_bytes("embedding")
        head = ends.lm_head * q.group_bytes("lm_head")
        # stage 0 holds the embedding, the last the LM head (tied: its own copy of the table)
        keeps_embed = k == 0 or (k == last and m.tied_embeddings)
        not_here = (0 if keeps_embed else embed) + (0 if k == last else head)
        elsewhere = stage.routed_expert_params * (par.ep - 1) // par.ep  # other EP ranks
        weights = (
            footprint.weights_bytes(stage, q) - not_here - elsewhere * q.group_bytes("experts")
        )
        out.append(
            GpuMemory(
                weights,
                footprint.kv_cache_bytes(stage, p, b, context),
                footprint.peak_activation_bytes(stage, p, b, prompt, prefill_token_budget),
                k,
                len(stages),
            )
        )
    return out


#: TP degrees tried before adding pipeline stages: one node of up to 8 GPUs.
TP_DEGREES: tuple[int, ...] = (1, 2, 4, 8)


def min_gpus_to_fit(
    m: ModelSpec,
    hw: HardwareSpec,
    p: Precision,
    batch: int,
    prompt: int,
    context: int,
    *,
    memory_fraction: float = footprint.DEFAULT_MEMORY_FRACTION,
    prefill_token_budget: int | None = footprint.DEFAULT_PREFILL_TOKEN_BUDGET,
) -> Parallel | None:
    """The smallest deployment whose fullest GPU holds `batch` within the usable memory
    (`footprint.memory_budget`): TP 1, 2, 4, 8 (those that split the model), then pipeline stages
    over TP 8 nodes. None when even one layer per stage does not fit."""
    usable = footprint.memory_budget(hw, memory_fraction).usable_bytes
    tps = [t for t in TP_DEGREES if _splits(m, t)]
    candidates = [Parallel(tp=t) for t in tps]
    candidates += [Parallel(tp=tps[-1], pp=s) for s in range(2, m.layers + 1)]
    for par in candidates:
        if (
            memory_per_gpu(
                m, p, par, batch, prompt, context, prefill_token_budget=prefill_token_budget
            ).total_bytes
            <= usable
        ):
            return par
    return None


def _splits(m: ModelSpec, tp: int) -> bool:
    try:
        tp_shard(m, tp)
    except InvalidInputError:
        return False
    return True
