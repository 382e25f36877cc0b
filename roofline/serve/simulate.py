"""The discrete-event loop: route requests to replicas, step them, hand off between pools.

Every replica keeps its own clock. Before a request is routed at time t every replica of the
target pool is stepped up to t, so the least-loaded router sees the queues as they are at t.
In a disaggregated deployment the prefill pool hands each request, after its first token, to
the decode pool once its KV (P · 2LKH values) has crossed the interconnect.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import numpy as np

from ..calc.footprint import (
    TokenEquivalents,
    kv_growth_elems_per_token,
    state_bytes_per_sequence,
)
from ..calc.memory import state_from_pool, vllm_profile_reserve_bytes
from ..calc.parallel import check
from ..calc.placement import pp_stage, stage_memory, stages_of, tp_shard
from ..calc.stack import MemoryPolicy, Stack
from ..errors import DoesNotFitError, InvalidInputError
from ..spec.hardware import HardwareSpec
from ..spec.model import ModelSpec
from .loop import ServingLoop
from .policy import Policy
from .schedulers import StepTimer, scheduler_for
from .speculation import Speculation, draft_memory, speculative_timer
from .state import Counters, Requests, Timeline
from .stepcost import mixed_step_cost
from .workload import Workload

#: Host link for KV swapping: PCIe 4.0 x16, 16 GT/s x 16 lanes x 128/130 encoding
#: = 31.5 GB/s per direction (PCI-SIG PCIe 4.0 base specification).
PCIE4_X16_BYTES_PER_S = 31.5e9
#: KV token capacity of a model without per-token KV (pure SSM / linear attention): every
#: token fits, only the per-sequence state (reserved up front) takes memory.
UNBOUNDED_KV_TOKENS = 1 << 60


@dataclass(frozen=True, kw_only=True)
class Pool:
    """Identical replicas (each a group of tp·pp·ep GPUs): their step-time function and the
    KV tokens each can hold; the model and stack the steps are costed on (the power model
    reads them; None for a toy timer)."""

    name: str
    timer: StepTimer
    kv_capacity_tokens: int
    replicas: int = 1
    hardware: str = ""
    model: ModelSpec | None = None
    stack: Stack | None = None


@dataclass(frozen=True)
class Deployment:
    """One pool serving everything, or (with `decode_pool`) a prefill pool and a decode pool."""

    pool: Pool
    kv_bytes_per_token: float
    decode_pool: Pool | None = None
    kv_transfer_bytes_per_s: float = math.inf
    kv_transfer_latency_s: float = 0.0
    swap_bytes_per_s: float = PCIE4_X16_BYTES_PER_S
    state_bytes_per_sequence: float = 0.0  # SSM / linear-attention state, moved with the KV
    #: a sequence's tokens -> the global-layer tokens its KV takes (local layers stop growing at
    #: their window: `footprint.kv_token_equivalents`); None: a model without local layers
    kv_equivalents: Callable[[np.ndarray], np.ndarray] | None = None
    first_token_from_decode: bool = False  # the engine's `first_token` is `decode`
    memory: MemoryPolicy = MemoryPolicy()  # the stack's: fixes a policy's token budget
    speculation: Speculation | None = None  # every decode step verifies K drafted tokens

    @property
    def pools(self) -> tuple[Pool, ...]:
        return (self.pool,) if self.decode_pool is None else (self.pool, self.decode_pool)


def kv_capacity_tokens(
    model: ModelSpec,
    stack: Stack,
    policy: Policy,
    draft_weights_bytes: float = 0.0,
    draft_kv_bytes_per_token: float = 0.0,
) -> int:
    """KV tokens one replica holds, from its fullest GPU by the rules of `memory.batch_fit`
    (`Stack.budget`, `placement.memory_per_gpu`): (usable = fraction · capacity − weights
    per GPU − the activations of a full step of `token_budget` tokens over `max_seqs` sequences
    − the constant SSM/linear state of those sequences) / (KV bytes per token per GPU). TP and
    PP split every token's KV over the group's GPUs; EP splits the sequences, so the replica
    holds ep times one GPU's tokens. The state counts sequences, not tokens: reserved for every
    slot up front (vLLM's V0 MambaCacheManager), or, where the engine takes each running
    sequence's state from the pool (`memory.state_from_pool`: vLLM V1 from 0.10), counted by
    the block allocator as that many tokens more per sequence (`TokenEquivalents`, `state=True`)
    and reserved for none; a model without per-token KV holds
    any number of tokens
    (`UNBOUNDED_KV_TOKENS`). Tokens are the global layers' (`footprint.kv_growth_elems_per_token`);
    a sequence's local (sliding-window) layers take min(S, W) more of them
    (`footprint.kv_token_equivalents`, applied by the block allocator), as vLLM V1's hybrid
    allocator frees the blocks a window has left: the batch it holds at S tokens is the one
    `memory.batch_fit` counts. A speculative drafter's weights (per GPU) come off the free
    memory and its KV per token is held beside the target's (`speculation.draft_memory`).
    On vLLM the activations are its profile run's (`footprint.vllm_profile_activation_bytes`:
    `step_tokens` over `seqs` dummy prompts, then the sampler's sort on the LM-head stage) plus
    the memory it counts outside torch (`memory.vllm_release_terms`, by release), and the pool is
    whole blocks of `policy.block_size` tokens, as vLLM's `num_gpu_blocks` is."""
    hw, precision, par = stack.hardware, stack.precision, stack.parallel
    policy = policy.on(stack.memory)
    budget = stack.budget
    vllm = vllm_profile_reserve_bytes(model, stack, policy.seqs, policy.step_tokens)
    in_pool = state_from_pool(stack)
    per_stage = []  # (tokens, weights, act, state) of each PP stage: the tightest binds
    for k, (gpu, stage) in enumerate(
        zip(
            stage_memory(model, precision, par, policy.seqs, policy.step_tokens / policy.seqs, 0),
            stages_of(model, par.tp, par.pp),
            strict=True,
        )
    ):
        weights, act = float(gpu.weights_bytes), float(gpu.activation_bytes)
        if vllm is not None:  # vLLM's profile run and the memory it counts outside torch
            act = vllm[k]
        state = (
            0.0  # each running sequence's state comes from the pool (`TokenEquivalents`)
            if in_pool and kv_growth_elems_per_token(stage)
            else par.sequences_per_gpu(policy.seqs) * state_bytes_per_sequence(stage, precision)
        )
        weights += draft_weights_bytes
        free = budget.usable_bytes - weights - act - state
        # per token of the global layers; local layers' windows count as that many tokens more
        # per sequence (`footprint.kv_token_equivalents`), as vLLM's hybrid allocator frees
        # the blocks a window has left
        per_token = kv_growth_elems_per_token(stage) * precision.kv_bytes + draft_kv_bytes_per_token
        block = policy.block_size if vllm is not None else 1  # vLLM counts whole blocks
        tokens = (
            UNBOUNDED_KV_TOKENS
            if per_token == 0 and free >= 0
            else math.floor(free / (block * per_token)) * block * par.ep
            if per_token
            else 0
        )
        per_stage.append((tokens, weights, act, state))
    tokens, weights, act, state = min(per_stage)
    where = "" if par.gpus_per_replica == 1 else " per GPU"
    room = f"{model.name} weights{where} ({weights / 1e9:.1f} GB)" + (
        f", step activations and the state of {policy.seqs} sequences ({state / 1e9:.1f} GB)"
        if state
        else " and step activations"
    )
    if tokens < 1:
        raise DoesNotFitError(
            f"{room} leave no KV memory on {hw.name} ({budget.memory_fraction:.0%} of "
            f"{hw.memory_bytes / 1e9:.1f} GB); use a larger device, more GPUs (`tp`/`pp`/`ep`), "
            "a smaller weight format, or a lower `token_budget`/`max_seqs`"
        )
    return tokens


def build_deployment(
    model: ModelSpec,
    stack: Stack,
    policy: Policy,
    replicas: int = 1,
    prefill_hw: HardwareSpec | None = None,
    decode_hw: HardwareSpec | None = None,
    prefill_replicas: int = 1,
    decode_replicas: int = 1,
    speculation: Speculation | None = None,
) -> Deployment:
    """Pools whose step times come from the calculator for `model` on `stack`, each pool on its
    own device (`Stack.on`), every replica a group of the stack's tp·pp·ep GPUs (its
    `replicas` is not used: each pool has its own replica count). KV bytes per token are one
    GPU's (each GPU moves its own share). With `speculation` every pool drafts and verifies
    (`roofline.serve.speculation`) and holds the drafter beside the target."""
    if model.diffusion is not None:
        raise InvalidInputError(
            f"{model.name} is a diffusion LM (it denoises blocks of tokens, not one token per "
            "step); the serving simulator models autoregressive decoding: use "
            "`roofline diffusion`"
        )
    for n, what in (
        (replicas, "replicas"),
        (prefill_replicas, "prefill_replicas"),
        (decode_replicas, "decode_replicas"),
    ):
        if n < 1:
            raise InvalidInputError(f"`{what}` must be at least 1, got {n}")

    par, precision, hw = stack.parallel, stack.precision, stack.hardware
    if speculation is not None and policy.batching == "static":
        raise InvalidInputError(
            "speculative serving needs continuous batching (each sequence advances by what "
            "its step accepts); drop `speculate` or choose another policy"
        )

    def pool(name: str, device: HardwareSpec, n: int) -> Pool:
        check(model, device, par)
        on = stack.on(device)
        if speculation is None:
            timer: StepTimer = mixed_step_cost(model, on)
            draft_weights = draft_kv = 0.0
        else:
            timer = speculative_timer(model, on, speculation)
            draft_weights, draft_kv = draft_memory(model, on, speculation)
        capacity = kv_capacity_tokens(model, on, policy, draft_weights, draft_kv)
        return Pool(
            name=name,
            timer=timer,
            kv_capacity_tokens=capacity,
            replicas=n,
            hardware=device.name,
            model=model,
            stack=on,
        )

    kv_model = pp_stage(tp_shard(model, par.tp), par.pp)
    kv_per_token = kv_growth_elems_per_token(kv_model) * precision.kv_bytes
    if speculation is not None:
        kv_per_token += draft_memory(model, stack, speculation)[1]  # moved with the target's
    state = state_bytes_per_sequence(model, precision)
    worth = TokenEquivalents.of(kv_model, state=state_from_pool(stack), p=precision)
    equivalents = None if not kv_per_token or worth.identity else worth
    decode_first = stack.first_token_from_decode
    if not policy.disaggregated:
        return Deployment(
            pool("serve", hw, replicas),
            kv_per_token,
            state_bytes_per_sequence=state,
            first_token_from_decode=decode_first,
            memory=stack.memory,
            kv_equivalents=equivalents,
            speculation=speculation,
        )
    src = prefill_hw or hw
    link = src.interconnect
    if link.bandwidth_bytes_per_s is None:
        raise InvalidInputError(
            f"{src.name} has no interconnect bandwidth in its spec; disaggregated serving "
            "moves KV over it: choose a device with one (see `roofline hardware show`)"
        )
    return Deployment(
        pool("prefill", src, prefill_replicas),
        kv_per_token,
        pool("decode", decode_hw or hw, decode_replicas),
        link.bandwidth_bytes_per_s,
        link.latency_us * 1e-6,
        state_bytes_per_sequence=state,
        first_token_from_decode=decode_first,
        memory=stack.memory,
        kv_equivalents=equivalents,
        speculation=speculation,
    )


@dataclass(frozen=True)
class ReplicaUsage:
    """One replica after the run."""

    pool: str
    busy_s: float
    timeline: Timeline


@dataclass(frozen=True, kw_only=True)
class ServeResult:
    """Everything one simulation produced; `roofline.serve.metrics` summarises it."""

    policy: Policy
    deployment: Deployment
    workload: Workload
    first_token_s: np.ndarray
    finish_s: np.ndarray
    completions: np.ndarray
    counters: Counters
    engines: tuple[ReplicaUsage, ...]
    gaps: tuple[np.ndarray, np.ndarray] = (np.zeros(0), np.zeros(0))  # inter-token gaps, counts


def _route(engines: list[ServingLoop], policy: Policy, turn: int) -> ServingLoop:
    if policy.router == "least-loaded":
        return min(engines, key=lambda e: e.load)
    return engines[turn % len(engines)]


def _serve(
    engines: list[ServingLoop], policy: Policy, arrivals: Iterable[tuple[float, int]]
) -> None:
    """Route each (time, request) to a replica, stepping every replica up to that time."""
    for turn, (t, rid) in enumerate(arrivals):
        for e in engines:
            e.run_until(t)
        _route(engines, policy, turn).add(rid)
    for e in engines:
        e.run_until(math.inf)


def _kth_finish(engines: list[ServingLoop], reqs: Requests, k: int) -> float:
    """The time of the k-th request to finish, stepping the replica whose next event comes
    first until k have finished and no replica could still finish one earlier."""
    while True:
        done = reqs.finish_s[np.isfinite(reqs.finish_s)]
        f = float(np.partition(done, k - 1)[k - 1]) if done.size >= k else math.inf
        e = min(engines, key=lambda e: e.next_event_s)
        if e.next_event_s >= f:
            return f
        if math.isinf(e.next_event_s):
            raise RuntimeError("closed loop: fewer requests in flight than finishes awaited")
        e.step_once()


def _serve_closed(
    engines: list[ServingLoop], policy: Policy, w: Workload, reqs: Requests, clients: int
) -> np.ndarray:
    """At most `clients` requests in flight (`vllm bench serve --max-concurrency`): request i
    is sent at its arrival, or when one of the `clients` slots frees, at the (i − clients + 1)-th
    finish, whichever is later. Returns the send times, from which the benchmark times TTFT
    and E2E (its clock starts when the request leaves the client)."""
    sent = np.empty(w.requests)
    for i in range(w.requests):
        t = float(w.arrival_s[i])
        if i >= clients:
            t = max(t, _kth_finish(engines, reqs, i - clients + 1))
        sent[i] = reqs.ready_s[i] = t
        for e in engines:
            e.run_until(t)
        _route(engines, policy, i).add(i)
    for e in engines:
        e.run_until(math.inf)
    return sent


def simulate(
    w: Workload,
    policy: Policy,
    d: Deployment,
    max_seq_len: int | None = None,
    max_concurrency: int | None = None,
    seed: int = 0,
) -> ServeResult:
    """Serve every request of `w` under `policy` on `d`. `max_seq_len` (contiguous KV: the
    tokens reserved per sequence) defaults to the longest input + output in the workload.
    `max_concurrency`: a closed loop of that many clients (`_serve_closed`); the result's
    workload then holds the send times as arrivals. `seed` draws the speculative acceptances."""
    if max_concurrency is not None:
        if max_concurrency < 1:
            raise InvalidInputError(f"`max_concurrency` must be at least 1, got {max_concurrency}")
        if d.decode_pool is not None:
            raise InvalidInputError(
                "a client concurrency limit needs each request's finish before the next is "
                "sent, which the disaggregated simulation (prefill pool first) cannot give; "
                "use an aggregated policy"
            )
    longest = int((w.input_tokens + w.output_tokens).max())
    max_seq_len = longest if max_seq_len is None else max_seq_len
    if max_seq_len < longest:
        raise InvalidInputError(
            f"max sequence length {max_seq_len} is below the longest request "
            f"({longest} tokens); raise it"
        )
    policy = policy.on(d.memory)
    reqs, counters = Requests(w, d.first_token_from_decode, d.speculation, seed), Counters()
    events: list[tuple[float, int, int]] = []  # (time, order, request) into the decode pool
    order = iter(range(1 << 62))

    def handoff(rid: int, t: float) -> None:
        ready = (
            t
            + d.kv_transfer_latency_s
            + (int(reqs.computed[rid]) * d.kv_bytes_per_token + d.state_bytes_per_sequence)
            / d.kv_transfer_bytes_per_s
        )
        reqs.ready_s[rid] = ready
        events.append((ready, next(order), rid))

    pools: list[list[ServingLoop]] = []
    for i, p in enumerate(d.pools):
        hand = handoff if (d.decode_pool is not None and i == 0) else None
        engines = [
            ServingLoop(
                policy,
                scheduler_for(policy),
                p.timer,
                p.kv_capacity_tokens,
                max_seq_len,
                reqs,
                d.swap_bytes_per_s,
                d.kv_bytes_per_token,
                counters,
                Timeline(),
                hand,
                d.state_bytes_per_sequence,
                d.kv_equivalents,
            )
            for _ in range(p.replicas)
        ]
        blocks = engines[0].kv.total_blocks * engines[0].kv.block_tokens
        if blocks < engines[0].kv.worth(longest):
            raise DoesNotFitError(
                f"the {p.name} pool holds {blocks} KV tokens per replica, fewer than the "
                f"longest request ({longest} tokens); use a larger device or shorter requests"
            )
        if engines[0].kv.total_blocks == 0:
            raise DoesNotFitError(f"the {p.name} pool has no room for one KV block")
        pools.append(engines)
    # The decode pool only receives hand-offs, so the prefill pool can run to the end first:
    # routing each pool's arrivals in time order is then exact.
    if max_concurrency is not None:
        w = replace(w, arrival_s=_serve_closed(pools[0], policy, w, reqs, max_concurrency))
    else:
        _serve(pools[0], policy, zip(w.arrival_s.tolist(), range(w.requests), strict=True))
    if len(pools) > 1:
        _serve(pools[1], policy, ((t, rid) for t, _, rid in sorted(events)))
    usage = tuple(
        ReplicaUsage(p.name, e.busy_s, e.tl)
        for p, engines in zip(d.pools, pools, strict=True)
        for e in engines
    )
    return ServeResult(
        policy=policy,
        deployment=d,
        workload=w,
        first_token_s=reqs.first_token_s,
        finish_s=reqs.finish_s,
        completions=reqs.completions,
        counters=counters,
        engines=usage,
        gaps=reqs.gaps.arrays(),
    )
