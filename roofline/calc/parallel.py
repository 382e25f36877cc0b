"""Many GPUs: tensor, pipeline and expert parallelism, and replicas.

A transformation of the one calculator, not a second one:
- Tensor parallel (TP, n GPUs, Megatron-style): each rank holds N/n query heads, max(1, K/n)
  kv heads (kv heads are replicated when K < n), F/n of the MLP and ⌈V/n⌉ of the vocabulary;
  norms are replicated. One rank is itself a ModelSpec (`tp_shard`), so its ops, bytes and
  memory come from `operators`/`step_cost`/`memory` unchanged. Each layer adds two all-reduces
  (after attention out and after MLP down) of the B·T·D activations.
- Pipeline parallel (PP, p stages): each GPU holds one stage's layers (`placement.pp_partition`,
  vLLM's split; memory is the fullest stage's). One batch passes the stages
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

from ..errors import InvalidInputError
from ..spec.engine import EngineSpec
from ..spec.hardware import HardwareSpec, Interconnect
from ..spec.model import ModelSpec
from ..spec.operators import ArrayLike, ExpertShard, Step
from ..spec.surfaces import AllReduceSurface, all_reduce_surface, measured_for
from .cost import Ceiling, StepCost, step_cost
from .placement import Parallel, check_ep, pp_stage, tp_shard
from .stack import Stack


# ---- collectives ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Link:
    """What one collective call pays on the interconnect: β (bytes/s per direction, times the
    bus-bandwidth fraction collectives reach), λ per hop, and a fixed cost per call."""

    bytes_per_s: float
    hop_s: float = 0.0
    call_s: float = 0.0
    algorithm: Literal["ring", "one-shot", "two-shot"] = "ring"
    measured: AllReduceSurface | None = None  # the engine's own all-reduce, measured

    @classmethod
    def of(
        cls,
        ic: Interconnect,
        n: int,
        ceiling: Ceiling = "datasheet",
        engine: EngineSpec | None = None,
        system: str | None = None,
    ) -> Link:
        """The datasheet link: full bandwidth, no latency (speed of light). Achievable: the
        spec's bus fraction and hop latency, plus the engine's all-reduce algorithm and call
        cost, and, where the device's `surface_system` has tables of the engine's all-reduce
        at n GPUs, that measured curve for its all-reduces (`surfaces.all_reduce_surface`:
        under CUDA graphs when the engine captures them). Refuses a multi-GPU group without a
        link."""
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
        measured = (
            all_reduce_surface(system, engine.name, n, engine.cuda_graphs)
            if engine is not None and n > 1
            else None
        )
        if (
            measured is not None
            and engine is not None
            and not measured_for(engine.known_release, measured.since)
        ):
            measured = None  # a newer release's kernel is not assumed for an older one
        return cls(
            bw * ic.bus_bandwidth_fraction,
            ic.latency_us * 1e-6,
            ar.latency_us * 1e-6 if ar else 0.0,
            ar.kind if ar else "ring",
            measured,
        )


def all_reduce_s(message_bytes: ArrayLike, n: int, link: Link) -> ArrayLike:
    """All-reduce of M bytes on each of n GPUs, by algorithm (Patarasuk & Yuan ring; NCCL's
    bus bandwidth is 2(n−1)/n · M / t):
      ring:     2(n−1)/n · M/β + 2(n−1)·λ + call
      two-shot: 2(n−1)/n · M/β + 2·λ + call      (reduce-scatter then all-gather, direct)
      one-shot: (n−1)·M/β + λ + call             (every GPU reads all peers' buffers)
    An engine with a one- or two-shot kernel uses it where it is faster and falls back to the
    ring for large messages (vLLM's custom all-reduce stops at a size limit, TensorRT-LLM
    switches by message size), so those algorithms cost the least of theirs and the ring's.
    A link with the engine's measured all-reduce at n GPUs (`Link.measured`) reads its time
    off that curve instead."""
    if n == 1:
        return 0 * message_bytes
    if link.measured is not None and link.measured.gpus == n:
        return link.measured.at(np.asarray(message_bytes))
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


def parallel_step_cost(model: ModelSpec, stack: Stack, step: Step) -> ParallelStepCost:
    """Cost of one forward step of `model` on `stack`, spread over its layout (see module
    docstring). `step` holds the replica's B sequences; with EP the fullest GPU runs ⌈B/ep⌉
    of them. Collective payloads are the residual stream (`Precision.residual_bytes`); a
    parallel attention + MLP block (GPT-J, Falcon) reduces once per layer, a sequential one
    twice."""
    hw, precision, par = stack.hardware, stack.precision, stack.parallel
    check(model, hw, par)
    local, shard = step, None
    if par.ep > 1:
        local = dataclasses.replace(step, batch=par.sequences_per_gpu(step.batch))
        shard = ExpertShard(par.ep, step.batch * step.new_tokens)
    compute = step_cost(
        tp_shard(model, par.tp), hw, local, precision, stack.ceiling, shard, stack.engine
    )
    hidden_bytes = local.batch * step.new_tokens * model.d_model * precision.residual_bytes
    link = Link.of(
        hw.interconnect,
        par.gpus_per_replica,
        stack.ceiling,
        stack.engine,
        hw.achievable.surface_system,
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
