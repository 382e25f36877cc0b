"""Many GPUs: tensor, pipeline and expert parallelism, and replicas.

A transformation of the one calculator, not a second one:
- Tensor parallel (TP, n GPUs, Megatron-style): each rank holds N/n query heads, max(1, K/n)
  kv heads (kv heads are replicated when K < n), F/n of the MLP and ⌈V/n⌉ of the vocabulary;
  norms are replicated. One rank is itself a ModelSpec (`tp_shard`), so its ops, bytes and
  memory come from `operators`/`step_cost`/`memory` unchanged. Each layer adds two all-reduces
  (after attention out and after MLP down) of the B·T·D activations.
- Pipeline parallel (PP, p stages): each GPU holds ⌈L/p⌉ layers. One batch passes the stages
  one after another, so a step still costs all L layers plus p−1 hand-offs of B·T·D
  activations: PP buys memory, never TPOT for one request. (Interleaving micro-batches of
  many requests to keep stages busy is not modelled.)
- Expert parallel (EP, n GPUs; DeepSeek-V3's deployment, vLLM/SGLang "data-parallel attention
  + expert parallel"): each GPU holds E/n of every MoE layer's routed experts and a full copy of
  everything else (attention, router, shared experts, dense layers, embedding, head). The
  replica's B sequences are split over the n GPUs, the fullest holding ⌈B/n⌉ (its KV, its
  attention). Each MoE layer dispatches every token's hidden state to its k experts' GPUs and
  combines the outputs back: two all-to-alls, B·T·k·D activations over the group, ⌈B/n⌉·T·k·D
  per GPU. The busiest GPU sets the step: its expert GEMMs run the expected maximum over the
  n GPUs of the token-expert pairs routed to each (mean B·T·k/n) and read the expected maximum
  of the experts the batch touches among each GPU's E/n (mean E·(1 − (1 − k/E)^(B·T))/n)
  (`operators.ExpertShard`, derived in docs/architectures.md).
  Refused: dense models, n not dividing E, EP together with TP (TP-split experts inside an EP
  group are not modelled).
- Replicas: m independent copies; throughput ×m, latency unchanged.

Collective cost on the spec's interconnect (bandwidth β per direction per GPU, hop latency λ),
for a message of M bytes per GPU over n GPUs (Patarasuk & Yuan ring; NCCL's "bus bandwidth"):
- all-reduce (ring): 2(n−1)/n · M/β + 2(n−1)·λ
- all-to-all: (n−1)/n · M/β + (n−1)·λ
- send/recv (stage hand-off): M/β + λ
Communication is not overlapped with compute (conservative for decode, where it cannot hide).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from . import memory
from .cost import Ceiling, StepCost, step_cost
from .engine import EngineSpec
from .errors import InvalidInputError
from .hardware import HardwareSpec, Interconnect
from .model import ModelSpec
from .operators import ArrayLike, ExpertShard, Step
from .precision import Precision


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
                raise InvalidInputError(f"--{name} must be at least 1, got {getattr(self, name)}")

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


# ---- collectives ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Link:
    """What one collective call pays on the interconnect: β (bytes/s per direction, times the
    bus-bandwidth fraction collectives reach), λ per hop, and a fixed cost per call."""

    bytes_per_s: float
    hop_s: float = 0.0
    call_s: float = 0.0
    algorithm: Literal["ring", "one-shot", "two-shot"] = "ring"

    @classmethod
    def of(
        cls,
        ic: Interconnect,
        n: int,
        ceiling: Ceiling = "datasheet",
        engine: EngineSpec | None = None,
    ) -> Link:
        """The datasheet link: full bandwidth, no latency (speed of light). Achievable: the
        spec's bus fraction and hop latency, plus the engine's all-reduce algorithm and call
        cost. Refuses a multi-GPU group without a link."""
        bw = ic.bandwidth_bytes_per_s
        if n > 1 and (bw is None or ic.kind in ("none", "unified")):
            raise InvalidInputError(
                f"this device's spec has no interconnect bandwidth (kind '{ic.kind}'), so a "
                f"group of {n} GPUs cannot be costed; use 1 GPU or a device with a link in its "
                "spec"
            )
        bw = bw or math.inf
        if ceiling == "datasheet":
            return cls(bw)
        ar = engine.all_reduce if engine is not None else None
        return cls(
            bw * ic.bus_bandwidth_fraction,
            ic.latency_us * 1e-6,
            ar.latency_us * 1e-6 if ar else 0.0,
            ar.kind if ar else "ring",
        )


def all_reduce_s(message_bytes: ArrayLike, n: int, link: Link) -> ArrayLike:
    """All-reduce of M bytes on each of n GPUs, by algorithm (Patarasuk & Yuan ring; NCCL's
    bus bandwidth is 2(n−1)/n · M / t):
      ring:     2(n−1)/n · M/β + 2(n−1)·λ + call
      two-shot: 2(n−1)/n · M/β + 2·λ + call      (reduce-scatter then all-gather, direct)
      one-shot: (n−1)·M/β + λ + call             (every GPU reads all peers' buffers)
    An engine with a one- or two-shot kernel uses it where it is faster and falls back to the
    ring for large messages (vLLM's custom all-reduce stops at a size limit, TensorRT-LLM
    switches by message size), so those algorithms cost the least of theirs and the ring's."""
    if n == 1:
        return 0 * message_bytes
    ring = (
        2 * (n - 1) / n * message_bytes / link.bytes_per_s + 2 * (n - 1) * link.hop_s + link.call_s
    )
    if link.algorithm == "ring":
        return ring
    if link.algorithm == "one-shot":
        direct = (n - 1) * message_bytes / link.bytes_per_s + link.hop_s + link.call_s
    else:
        direct = 2 * (n - 1) / n * message_bytes / link.bytes_per_s + 2 * link.hop_s + link.call_s
    return np.minimum(direct, ring)


def all_to_all_s(message_bytes: ArrayLike, n: int, link: Link) -> ArrayLike:
    """All-to-all of M bytes per GPU (M/n to each peer): (n−1)/n · M/β + (n−1)·λ + call."""
    if n == 1:
        return 0 * message_bytes
    return (n - 1) / n * message_bytes / link.bytes_per_s + (n - 1) * link.hop_s + link.call_s


def send_recv_s(message_bytes: ArrayLike, link: Link) -> ArrayLike:
    """Point-to-point hand-off of M bytes between neighbouring stages: M/β + λ."""
    return message_bytes / link.bytes_per_s + link.hop_s


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


def pp_stage(m: ModelSpec, pp: int) -> ModelSpec:
    """The largest pipeline stage's layers, ⌈L/p⌉ (it sets per-GPU KV and weight memory)."""
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


def check(m: ModelSpec, hw: HardwareSpec, par: Parallel) -> None:
    """Refuse what cannot be modelled: EP on a dense model or not splitting the experts, EP
    with TP, degrees that do not split the model, a group without a link."""
    check_ep(m, par)
    tp_shard(m, par.tp)
    pp_stage(m, par.pp)
    Link.of(hw.interconnect, par.gpus_per_replica)


# ---- step cost ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Collective:
    """`count` collectives of one kind per step, each moving `message_bytes` per GPU."""

    name: str
    kind: Literal["all-reduce", "all-to-all", "send-recv"]
    count: int
    message_bytes: ArrayLike
    each_s: ArrayLike

    @property
    def time_s(self) -> ArrayLike:
        return self.count * self.each_s


@dataclass(frozen=True)
class ParallelStepCost:
    """One step on a parallel deployment: one TP rank's operators over all L layers (the PP
    stages run one after another) plus the collectives, not overlapped."""

    compute: StepCost
    collectives: tuple[Collective, ...]

    @property
    def comm_s(self) -> ArrayLike:
        return sum((c.time_s for c in self.collectives), 0 * self.compute.time_s)

    @property
    def time_s(self) -> ArrayLike:
        return self.compute.time_s + self.comm_s


def parallel_step_cost(
    model: ModelSpec,
    hw: HardwareSpec,
    step: Step,
    precision: Precision,
    par: Parallel,
    ceiling: Ceiling = "achievable",
    engine: EngineSpec | None = None,
) -> ParallelStepCost:
    """Cost of one forward step of `model` spread over `par` (see module docstring). `step`
    holds the replica's B sequences; with EP the fullest GPU runs ⌈B/ep⌉ of them. Collective
    payloads are the residual stream (`Precision.residual_bytes`); a parallel attention + MLP block
    (GPT-J, Falcon) reduces once per layer, a sequential one twice."""
    check(model, hw, par)
    local, shard = step, None
    if par.ep > 1:
        local = dataclasses.replace(step, batch=par.sequences_per_gpu(step.batch))
        shard = ExpertShard(par.ep, step.batch * step.new_tokens)
    compute = step_cost(tp_shard(model, par.tp), hw, local, precision, ceiling, shard, engine)
    hidden_bytes = local.batch * step.new_tokens * model.d_model * precision.residual_bytes
    link = Link.of(
        hw.interconnect, par.gpus_per_replica, ceiling, engine if ceiling == "achievable" else None
    )
    collectives = []
    if par.tp > 1:
        per_layer = 1 if model.parallel_block else 2
        collectives.append(
            Collective(
                "tp/all-reduce",
                "all-reduce",
                per_layer * model.layers,
                hidden_bytes,
                all_reduce_s(hidden_bytes, par.tp, link),
            )
        )
    if par.ep > 1 and model.moe is not None:  # dispatch to and combine from the top-k experts
        routed_bytes = hidden_bytes * model.moe.top_k
        collectives.append(
            Collective(
                "ep/all-to-all",
                "all-to-all",
                2 * model.layers_moe,
                routed_bytes,
                all_to_all_s(routed_bytes, par.ep, link),
            )
        )
    if par.pp > 1:
        collectives.append(
            Collective(
                "pp/hand-off",
                "send-recv",
                par.pp - 1,
                hidden_bytes,
                send_recv_s(hidden_bytes, link),
            )
        )
    return ParallelStepCost(compute, tuple(collectives))


# ---- memory per GPU -------------------------------------------------------------------------
@dataclass(frozen=True)
class GpuMemory:
    """Bytes on the fullest GPU: TP or EP rank of the largest PP stage. Total is derived."""

    weights_bytes: float
    kv_cache_bytes: ArrayLike
    activation_bytes: ArrayLike

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
    prefill_token_budget: int | None = memory.DEFAULT_PREFILL_TOKEN_BUDGET,
) -> GpuMemory:
    """Weights, KV for `context` tokens and the activations of the largest step
    (`memory.peak_activation_bytes`: prompts of P tokens under the prefill token budget) on the
    fullest GPU, for a replica batch of B sequences. A stage holds the embedding or the LM
    head, not both, unless there is one stage (or they are tied and the last stage keeps its own
    copy). With EP n a GPU holds E/n routed experts and the KV and activations of ⌈B/n⌉
    sequences."""
    check_ep(m, par)
    stage = pp_stage(tp_shard(m, par.tp), par.pp)
    q = p if p.model_bits is not None else p.for_model(m)  # the checkpoint's group formats
    ends = stage.params
    embed = ends.embedding + ends.positional
    shared_end = (
        0
        if par.pp == 1 or m.tied_embeddings
        else min(embed * q.group_bytes("embedding"), ends.lm_head * q.group_bytes("lm_head"))
    )
    elsewhere = stage.routed_expert_params * (par.ep - 1) // par.ep  # on the other EP ranks
    weights = memory.weights_bytes(stage, q) - shared_end - elsewhere * q.group_bytes("experts")
    b = par.sequences_per_gpu(batch)
    return GpuMemory(
        weights,
        memory.kv_cache_bytes(stage, p, b, context),
        memory.peak_activation_bytes(stage, p, b, prompt, prefill_token_budget),
    )


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
    memory_fraction: float = memory.DEFAULT_MEMORY_FRACTION,
    prefill_token_budget: int | None = memory.DEFAULT_PREFILL_TOKEN_BUDGET,
) -> Parallel | None:
    """The smallest deployment whose fullest GPU holds `batch` within the usable memory
    (`memory.memory_budget`): TP 1, 2, 4, 8 (those that split the model), then pipeline stages
    over TP 8 nodes. None when even one layer per stage does not fit."""
    usable = memory.memory_budget(hw, memory_fraction).usable_bytes
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
