"""What fits: the largest batch, the longest context, and why a batch does not fit.

Defined once here and used by `estimate`, `kv`, `serve`, `plan`, `plot` and the API:
- the device offers its capacity C (bytes, `HardwareSpec.memory_bytes`) less a reserve
  (1 − f)·C for the runtime context, collective buffers and the engine's own margin; f is the
  stack's `memory_fraction` (an engine's `gpu_memory_utilization`), 1 on the datasheet ceiling;
- one GPU holds what `placement.memory_per_gpu` places on the fullest GPU: its weights W, the
  KV of its b sequences at the context S they reach, and the activations of the largest step
  (a prefill of min(b·P, N) tokens under a prefill token budget N, or a decode step of b);
- a batch fits when W + KV + activations ≤ f·C; the largest batch is the edge of that, and the
  binding limit is named: the weights (nothing fits), the KV cache or the activations (whichever
  fills the room at the edge), or the model's trained context (for the longest context). The
  engine's scheduler may run fewer sequences than fit (`max_num_seqs`): `BatchFit.runnable`.

The quantities themselves (weights, KV, activations) are `footprint`'s, re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..errors import DoesNotFitError
from ..spec.model import ModelSpec
from ..spec.operators import ArrayLike, Step
from ..units import UNKNOWN_RELEASE, si, si_pair, version_key
from .cost import step_cost
from .footprint import (
    DEFAULT_MEMORY_FRACTION,
    DEFAULT_PREFILL_TOKEN_BUDGET,
    LOGIT_BYTES,
    VLLM_CUDA_CONTEXT_BYTES,
    VLLM_NON_TORCH_TP1_BYTES,
    VLLM_NON_TORCH_TP_BYTES,
    MemoryBudget,
    activation_bytes,
    check_memory_fraction,
    check_token_budget,
    kv_bytes_per_token,
    kv_cache_bytes,
    kv_elems_per_sequence,
    memory_budget,
    peak_activation_bytes,
    prefill_step_tokens,
    state_bytes_per_sequence,
    step_activation_bytes,
    vllm_profile_activation_bytes,
    weights_bytes,
)
from .placement import GpuMemory, Parallel, memory_per_gpu, min_gpus_to_fit, stages_of
from .stack import Stack

__all__ = [
    "DEFAULT_MEMORY_FRACTION",
    "DEFAULT_PREFILL_TOKEN_BUDGET",
    "LOGIT_BYTES",
    "BatchFit",
    "CacheSummary",
    "ContextFit",
    "MemoryBudget",
    "Shortfall",
    "activation_bytes",
    "batch_fit",
    "cache_summary",
    "check_memory_fraction",
    "check_token_budget",
    "context_fit",
    "context_warning",
    "held",
    "kv_bytes_per_token",
    "kv_cache_bytes",
    "kv_elems_per_sequence",
    "max_batch",
    "max_context",
    "memory_budget",
    "peak_activation_bytes",
    "prefill_step_tokens",
    "state_bytes_per_sequence",
    "shortfall",
    "step_activation_bytes",
    "weights_bytes",
]

Binding = Literal["weights", "KV", "activations", "context"]


def held(
    m: ModelSpec, stack: Stack, batch: ArrayLike, prompt: ArrayLike, context: ArrayLike
) -> GpuMemory:
    """What the fullest GPU of `stack`'s layout holds for a replica batch of B sequences of
    P-token prompts at S tokens (`placement.memory_per_gpu` under the stack's token budget)."""
    return memory_per_gpu(
        m,
        stack.precision,
        stack.parallel,
        batch,
        prompt,
        context,
        prefill_token_budget=stack.memory.prefill_token_budget,
    )


def _largest(fits: Callable[[np.ndarray], np.ndarray], hi: np.ndarray) -> np.ndarray:
    """Largest integer x in [0, hi] with fits(x), for a `fits` true up to an edge and false
    after it (0 when even fits(1) is false); bisection, elementwise over arrays."""
    lo = np.zeros_like(hi)
    while np.any(lo < hi):
        mid = (lo + hi + 1) // 2
        ok = fits(mid)
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid - 1)
    return lo


@dataclass(frozen=True, kw_only=True)
class BatchFit:
    """The largest batch of one replica that fits at `context` tokens per sequence, and what
    one GPU (the fullest) holds there. `binding` names the limit; `kv_room_bytes` is what the
    usable memory leaves for the KV cache once weights and activations are placed;
    `max_num_seqs` the engine scheduler's limit (None: none), which `runnable` applies."""

    budget: MemoryBudget
    context: int
    prompt_tokens: int
    prefill_token_budget: int | None
    weights_bytes: float
    kv_cache_bytes: float  # at max_batch (0 when nothing fits)
    activation_bytes: float  # at max_batch (one sequence's when nothing fits)
    max_batch: int
    binding: Binding
    max_num_seqs: int | None = None

    @property
    def kv_room_bytes(self) -> float:
        return max(self.budget.usable_bytes - self.weights_bytes - self.activation_bytes, 0.0)

    @property
    def runnable(self) -> int:
        """The most sequences the engine runs at once: what fits, capped by its scheduler."""
        if self.max_num_seqs is None:
            return self.max_batch
        return min(self.max_batch, self.max_num_seqs)

    @property
    def runnable_binding(self) -> str:
        """What sets `runnable`: `max_num_seqs` when the scheduler caps it, else `binding`."""
        if self.max_num_seqs is not None and self.max_num_seqs < self.max_batch:
            return "max_num_seqs"
        return self.binding

    def as_dict(self) -> dict:
        return self.budget.as_dict() | {
            "context": self.context,
            "prompt_tokens": self.prompt_tokens,
            "prefill_token_budget": self.prefill_token_budget,
            "weights_bytes": self.weights_bytes,
            "activation_bytes": self.activation_bytes,
            "kv_room_bytes": self.kv_room_bytes,
            "kv_cache_bytes": self.kv_cache_bytes,
            "max_batch": self.max_batch,
            "binding": self.binding,
        }


def batch_fit(m: ModelSpec, stack: Stack, context: int, prompt: int | None = None) -> BatchFit:
    """Largest replica batch B whose fullest GPU holds W + KV(⌈B/ep⌉, S) + activations of its
    largest step (`peak_activation_bytes`, prompt P, default P = S) within f·C. With EP n the
    n GPUs each hold ⌈B/n⌉ sequences, so B is n times one GPU's count."""
    par = stack.parallel
    budget = stack.budget
    P = context if prompt is None else prompt
    usable = budget.usable_bytes

    def mem(b: ArrayLike) -> GpuMemory:  # b sequences on the fullest GPU
        return held(m, stack, np.asarray(b) * par.ep, P, context)

    one = mem(1)
    w = float(one.weights_bytes)
    # an engine with a sequence cap and a step token budget reserves its profile run's
    # activations whatever the batch: a step of its token budget over max_num_seqs sequences
    # (vLLM V1 `profile_run`, and serve's reservation), so the batch's own step only counts
    # when it is larger
    cap, tokens = stack.memory.max_num_seqs, stack.memory.prefill_token_budget
    profile = float(mem(max(cap // par.ep, 1)).activation_bytes) if cap and tokens else 0.0
    if cap and tokens:  # vLLM: its own profile run and non-torch memory, as serve reserves
        reserve = vllm_profile_reserve_bytes(m, stack, cap, stack.memory.step_token_budget(cap))
        if reserve is not None:
            profile = max(reserve)

    def total(x: ArrayLike) -> np.ndarray:
        g = mem(x)
        return (
            np.asarray(g.total_bytes) - g.activation_bytes + np.maximum(g.activation_bytes, profile)
        )

    per_seq = float(one.kv_cache_bytes) + m.vocab_size * LOGIT_BYTES / par.tp
    hi = np.asarray(max(int((usable - w) // per_seq) + 1, 0))
    b = int(_largest(lambda x: total(x) <= usable, hi))
    at = mem(max(b, 1))
    kv, act = (
        (float(at.kv_cache_bytes), max(float(at.activation_bytes), profile))
        if b
        else (0.0, max(float(one.activation_bytes), profile))
    )
    if w > usable:
        binding: Binding = "weights"
    elif b == 0:
        binding = "activations" if w + act > usable else "KV"
    else:
        binding = "KV" if kv >= act else "activations"
    return BatchFit(
        budget=budget,
        context=int(context),
        prompt_tokens=int(P),
        prefill_token_budget=stack.memory.prefill_token_budget,
        weights_bytes=w,
        kv_cache_bytes=kv,
        activation_bytes=act,
        max_batch=b * par.ep,
        binding=binding,
        max_num_seqs=stack.memory.max_num_seqs,
    )


def max_batch(m: ModelSpec, stack: Stack, context: int, prompt: int | None = None) -> int:
    """Largest batch that fits (`batch_fit`); 0 when the weights alone fill the device."""
    return batch_fit(m, stack, context, prompt).max_batch


@dataclass(frozen=True)
class ContextFit:
    """The longest context B sequences reach: the memory edge or the model's trained context,
    whichever is shorter (`binding` says which; "weights" when not even S = 0 fits)."""

    max_context: int
    binding: Binding


def context_fit(m: ModelSpec, stack: Stack, batch: int = 1) -> ContextFit:
    """Largest S ≤ the model's max context at which B sequences (prompt = S) fit beside the
    weights, by the same per-GPU memory as `batch_fit`."""
    usable = stack.budget.usable_bytes

    def fits(s: np.ndarray) -> np.ndarray:
        return np.asarray(held(m, stack, batch, np.maximum(s, 1), s).total_bytes <= usable)

    limit = m.max_context
    if fits(np.asarray(limit)):
        return ContextFit(limit, "context")
    s = int(_largest(fits, np.asarray(limit)))
    if s > 0:
        return ContextFit(s, "KV")
    zero = held(m, stack, batch, 1, 0)
    binding: Binding = (
        "weights"
        if float(zero.weights_bytes) > usable
        else ("activations" if not fits(np.asarray(0)) else "KV")
    )
    return ContextFit(0, binding)


def max_context(m: ModelSpec, stack: Stack, batch: int = 1) -> int:
    """Longest context (tokens) B sequences reach, never beyond the model's (`context_fit`)."""
    return context_fit(m, stack, batch).max_context


@dataclass(frozen=True, kw_only=True)
class Shortfall:
    """A batch that does not fit: what its fullest GPU would need, what the device offers,
    the largest batch that fits instead, and the smallest deployment that holds this batch
    (None: not even one layer per pipeline stage over TP 8 nodes)."""

    batch: int
    context: int
    needs_bytes: float
    weights_bytes: float
    budget: MemoryBudget
    max_batch: int
    smallest: Parallel | None
    stage: int = 0  # the fullest pipeline stage, 0-based
    stages: int = 1

    @property
    def where(self) -> str:
        """' on PP stage 2 of 2 (the fullest)' with pipeline stages, else ''."""
        return (
            f" on PP stage {self.stage + 1} of {self.stages} (the fullest)"
            if self.stages > 1
            else ""
        )

    @property
    def weights_do_not_fit(self) -> bool:
        return self.weights_bytes > self.budget.usable_bytes

    @property
    def hint(self) -> str:
        s = self.smallest
        if s is None:
            return "a smaller `weights` format"
        return f"`tp={s.tp}`" + (f" `pp={s.pp}`" if s.pp > 1 else "")

    def message(self, model: str, device: str) -> str:
        need = self.weights_bytes if self.weights_do_not_fit else self.needs_bytes
        need_s, has_s = si_pair(need, self.budget.usable_bytes, "B")
        has = (
            f"has {has_s} usable ({self.budget.memory_fraction:.0%} of "
            f"{si(self.budget.capacity_bytes, 'B')})"
        )
        if self.weights_do_not_fit:
            return (
                f"{model} needs {need_s} of weights per GPU{self.where} but {device} {has}, "
                f"so no batch fits; smallest that fits batch {self.batch}: {self.hint}"
            )
        return (
            f"batch {self.batch} needs {need_s} per GPU{self.where} but {device} {has}; the "
            f"largest batch that fits at {self.context} tokens is {self.max_batch}; smallest "
            f"that fits batch {self.batch}: {self.hint}"
        )

    def require(self, model: str, device: str) -> None:
        """Refuse the configuration (for callers that want a hard check)."""
        raise DoesNotFitError(self.message(model, device))

    def as_dict(self) -> dict:
        s = self.smallest
        return {
            "batch": self.batch,
            "context": self.context,
            "needs_bytes": self.needs_bytes,
            "weights_bytes": self.weights_bytes,
            "usable_bytes": self.budget.usable_bytes,
            "weights_do_not_fit": self.weights_do_not_fit,
            "max_batch": self.max_batch,
            "smallest_fit": None if s is None else {"tp": s.tp, "pp": s.pp, "ep": s.ep},
            "fullest_stage": self.stage,
        }


def shortfall(
    m: ModelSpec, stack: Stack, batch: int, prompt: int, context: int
) -> Shortfall | None:
    """Why `batch` does not fit (None when it does): see `Shortfall`."""
    fit = batch_fit(m, stack, context, prompt)
    need = held(m, stack, batch, prompt, context)
    if float(need.total_bytes) <= fit.budget.usable_bytes:
        return None
    smallest = min_gpus_to_fit(
        m,
        stack.hardware,
        stack.precision,
        batch,
        prompt,
        context,
        memory_fraction=stack.memory.memory_fraction,
        prefill_token_budget=stack.memory.prefill_token_budget,
    )
    return Shortfall(
        batch=batch,
        context=context,
        needs_bytes=float(need.total_bytes),
        weights_bytes=fit.weights_bytes,
        budget=fit.budget,
        max_batch=fit.max_batch,
        smallest=smallest,
        stage=int(np.max(need.stage)),
        stages=need.stages,
    )


@dataclass(frozen=True)
class CacheSummary:
    """What one model keeps and reads per sequence at one context, on one device.

    `kv_bytes_per_token`: the per-token KV of the KV-owning attention layers before any window
    (0 for pure SSMs); `kv_bytes_per_sequence`: everything one sequence holds at `context`
    (windows applied, constant state included); `decode_read_bytes`: bytes one decode step
    of one sequence reads and writes at S = context (weights + KV/state + activations), all for
    the whole model. `fit`: what fits on the fullest GPU of the deployment (capacity, reserve,
    room left for KV, max batch and its binding limit); `max_context`: the longest context one
    sequence reaches, never beyond the model's."""

    model: str
    hardware: str
    context: int
    kv_dtype: str
    kv_bytes_per_token: float
    kv_bytes_per_sequence: float
    state_bytes_per_sequence: float
    decode_kv_read_bytes: float
    decode_read_bytes: float
    weights_bytes: float
    fit: BatchFit
    context_fit: ContextFit
    warnings: tuple[str, ...] = ()

    @property
    def max_batch(self) -> int:
        return self.fit.max_batch

    @property
    def max_context(self) -> int:
        return self.context_fit.max_context

    @property
    def note(self) -> str:
        """One line on what limits the fit (the weights filling the device said in words)."""
        f = self.fit
        if f.binding == "weights":
            return (
                f"weights ({f.weights_bytes / 1e9:.1f} GB per GPU) exceed the usable "
                f"{f.budget.usable_bytes / 1e9:.1f} GB: nothing fits; add GPUs (`tp`, `pp`)"
                " or pass a smaller format to `weights`"
            )
        return f"max batch bound by {f.binding}; max context bound by {self.context_fit.binding}"

    def as_dict(self) -> dict:
        d = {k: v for k, v in vars(self).items() if k not in ("fit", "context_fit", "warnings")}
        return d | {
            "max_batch": self.max_batch,
            "max_batch_binding": self.fit.binding,
            "max_context": self.max_context,
            "max_context_binding": self.context_fit.binding,
            "memory": self.fit.as_dict(),
            "note": self.note,
            "warnings": list(self.warnings),
        }


def context_warning(m: ModelSpec, tokens: int) -> tuple[str, ...]:
    """A context past the model's trained one runs (rope scaling) and the arithmetic holds:
    said, not refused."""
    if tokens <= m.max_context:
        return ()
    return (
        f"{tokens:,} tokens exceed {m.name}'s trained context of {m.max_context:,}; "
        "estimated anyway (engines run past it with rope scaling)",
    )


def cache_summary(m: ModelSpec, stack: Stack, context: int) -> CacheSummary:
    """KV/state per token and per sequence, decode bytes, and what fits (`batch_fit` at
    `context`, `context_fit` for one sequence)."""
    hw, p = stack.hardware, stack.precision
    decode = step_cost(m, hw, Step(1, 1, context), p, "datasheet")
    return CacheSummary(
        model=m.name,
        hardware=hw.name,
        context=context,
        kv_dtype=p.kv,
        kv_bytes_per_token=kv_bytes_per_token(m, p),
        kv_bytes_per_sequence=float(kv_cache_bytes(m, p, 1, context)),
        state_bytes_per_sequence=state_bytes_per_sequence(m, p),
        decode_kv_read_bytes=float(sum(o.op.kv_read_elems for o in decode.ops)) * p.kv_bytes,
        decode_read_bytes=float(decode.bytes),
        weights_bytes=weights_bytes(m, p),
        fit=batch_fit(m, stack, context),
        context_fit=context_fit(m, stack, 1),
        warnings=context_warning(m, context),
    )


def vllm_release_terms(stack: Stack) -> tuple[bool, float] | None:
    """(V1 engine?, non-torch bytes per GPU) of vLLM's KV profiler for the stack's release, or
    None when the engine is not vLLM. The release is the one asked for (`exact_release`), else
    the profile's range (`release`; the newest range when empty). V1 from 0.8.0 (a V0 run of a
    later release is asked for as `vllm@0.7`). The non-torch term is what vLLM grows outside
    torch's allocator after the worker starts (`footprint.VLLM_NON_TORCH_TP1_BYTES`, TP 1, or
    `VLLM_NON_TORCH_TP_BYTES`), plus the CUDA context (`footprint.VLLM_CUDA_CONTEXT_BYTES`) in
    the releases whose profiler counts device-level used memory: 0.6.4-0.6.x and V1 0.8.0-0.9.x
    (roofline/data/engine_releases.yaml `kv_profiler` of vllm==0.6.4.post1, 0.8.3, 0.8.5; 0.7.3
    and 0.10.2 count the growth since start, 0.6.3 the drop in free memory since start)."""
    eng = stack.engine
    if eng is None or eng.name != "vllm":
        return None
    text = eng.exact_release if eng.exact_release != UNKNOWN_RELEASE else ""
    release = version_key(text or eng.release or eng.newest_since or "0.10.0")
    v1 = release >= (0, 8, 0)
    tp = stack.parallel.tp
    non_torch = VLLM_NON_TORCH_TP1_BYTES if tp == 1 else VLLM_NON_TORCH_TP_BYTES
    if (0, 6, 4) <= release < (0, 7, 0) or (0, 8, 0) <= release < (0, 10, 0):
        non_torch += VLLM_CUDA_CONTEXT_BYTES
    return v1, non_torch


#: The first vLLM release whose V1 engine serves hybrid (Mamba / linear-attention) models with
#: the state in the shared KV pool: one block a running request (`MambaManager`,
#: vllm==0.10.2 and 0.11.0 vllm/v1/core/single_type_kv_cache_manager.py:529; absent from
#: 0.8.3 and 0.8.5, where hybrid models run the V0 engine, whose MambaCacheManager allocates
#: the state of max_num_seqs sequences up front).
VLLM_STATE_IN_POOL = (0, 10, 0)


def state_from_pool(stack: Stack) -> bool:
    """Whether the engine takes each running sequence's recurrent state from the KV pool
    (vLLM from `VLLM_STATE_IN_POOL`) rather than reserving it for every sequence slot up
    front (vLLM's V0 engine, and any engine whose allocator the profiles do not describe)."""
    eng = stack.engine
    if eng is None or eng.name != "vllm":
        return False
    text = eng.exact_release if eng.exact_release != UNKNOWN_RELEASE else ""
    return version_key(text or eng.release or eng.newest_since or "0.10.0") >= VLLM_STATE_IN_POOL


def vllm_profile_reserve_bytes(
    model: ModelSpec, stack: Stack, seqs: int, step_tokens: int
) -> list[float] | None:
    """What vLLM takes off each PP stage's GPU before the KV pool, beyond the weights: its
    profile run's peak (`footprint.vllm_profile_activation_bytes`: `step_tokens` over `seqs`
    dummy prompts, the sampler on the stage holding the LM head) plus the memory it counts
    outside torch (`vllm_release_terms`); None when the engine is not vLLM. The one definition
    `kv_capacity_tokens` (serve) reserves; `batch_fit` (estimate) reserves it too."""
    terms = vllm_release_terms(stack)
    if terms is None:
        return None
    v1, non_torch = terms
    stages = stages_of(model, stack.parallel.tp, stack.parallel.pp)
    last = len(stages) - 1
    return [
        non_torch
        + vllm_profile_activation_bytes(
            stage,
            stack.precision,
            step_tokens,
            seqs,
            model.vocab_size if k == last else 0,
            v1=v1,
        )
        for k, stage in enumerate(stages)
    ]
