"""Memory held on the device: weights, KV cache or recurrent state, activations; what fits.

Weights count every parameter (all experts of a MoE; the whole embedding table, though a step
reads only the gathered rows). The KV cache is sized for the context each sequence reaches:
global layers hold all S tokens, local (sliding-window) layers min(S, W), chunked layers
min(S, chunk size) (the allocation bound of the current chunk), layers sharing another layer's
KV hold nothing; SSM and linear-attention layers hold a constant state. All of
it is stored at the KV format.

What fits, defined once here and used by `estimate`, `kv`, `serve`, `plot` and the API:
- the device offers its capacity C (bytes, `HardwareSpec.memory_bytes`) less a reserve
  (1 − f)·C for the runtime context, collective buffers and the engine's own margin; f is the
  `memory_fraction` (an engine's `gpu_memory_utilization`), 1 on the datasheet ceiling;
- one GPU holds its weights W, the KV of its b sequences at the context S they reach, and the
  activations of the largest step: a prefill of min(b·P, N) tokens under a prefill token budget
  N (chunked prefill; N = None charges the whole batch's b·P), or a decode step of b tokens;
- a batch fits when W + KV + activations ≤ f·C; the largest batch is the edge of that, and the
  binding limit is named: the weights (nothing fits), the KV cache or the activations (whichever
  fills the room at the edge), or the model's trained context (for the longest context).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from .errors import DoesNotFitError, InvalidInputError
from .hardware import HardwareSpec
from .model import ModelSpec
from .operators import ArrayLike, Step
from .precision import Precision, group_params
from .units import si, si_pair

if TYPE_CHECKING:
    from .engine import EngineSpec
    from .parallel import Parallel

#: Logits are kept in fp32 for sampling (4 bytes per vocabulary entry).
LOGIT_BYTES = 4
#: Share of device memory the engine may fill; the rest is the reserve (CUDA context, NCCL
#: buffers, allocator fragmentation). vLLM's `gpu_memory_utilization` default,
#: `gpu_memory_utilization: float = 0.90` in vllm/engine/arg_utils.py (EngineArgs); the seeds'
#: author runs 0.88 on A100s and 0.92 on H100s. The datasheet ceiling uses 1 (no reserve).
DEFAULT_MEMORY_FRACTION = 0.9
#: Tokens a prefill step processes at most (chunked prefill): vLLM's default
#: `max_num_batched_tokens` for the offline `LLM` class, 8192 (vllm/engine/arg_utils.py
#: `_set_default_args`; 16384 on ≥ 70 GiB non-A100 GPUs, 2048/8192 for the OpenAI server).
DEFAULT_PREFILL_TOKEN_BUDGET = 8192

Binding = Literal["weights", "KV", "activations", "context"]


def weights_bytes(m: ModelSpec, p: Precision) -> float:
    """All parameters, each tensor group at its own format: Σ_group params · bytes/param
    (weight-only formats keep the embedding, LM head and norms at 16 bits; a llama.cpp file
    type follows its per-tensor mix; see `precision`). A precision already fixed for a model
    (`Precision.for_model`) keeps that model's group bits (a TP/PP shard of the same
    checkpoint)."""
    q = p if p.model_bits is not None else p.for_model(m)
    return sum(n * q.group_bytes(g) for g, n in group_params(m).items() if n)


def kv_bytes_per_token(m: ModelSpec, p: Precision) -> float:
    """Cached values per token over the KV-owning attention layers at the KV format
    (2·L·K·H for a dense model); local layers stop growing once S reaches the window."""
    return m.kv_elems_per_token * p.kv_bytes


def kv_elems_per_sequence(m: ModelSpec, context: ArrayLike) -> ArrayLike:
    """Values one sequence of S tokens keeps: per KV-owning layer e = 2·K·H (MLA: r + R),
    L_global·S·e + L_local·min(S, W)·e + L_chunked·min(S, C)·e, plus the constant SSM /
    linear-attention state. A chunked layer needs only the current chunk's S mod C cached
    tokens, but that falls to 0 at every chunk boundary; it is sized here by the allocation
    bound min(S, C), the most it holds at any point up to S (the C − 1 earlier tokens of a
    chunk plus the one being written), so the size grows monotonically with S."""
    e = m.kv_elems_per_token_layer
    held = m.kv_owner_layers("global") * context * e
    window, chunk = m.attention.sliding_window, m.attention.attention_chunk_size
    local, chunked = m.kv_owner_layers("local"), m.kv_owner_layers("chunked")
    if local and window is not None:
        held = held + local * np.minimum(context, window) * e
    if chunked and chunk is not None:
        held = held + chunked * np.minimum(context, chunk) * e
    return held + m.state_elems_per_sequence


def kv_cache_bytes(m: ModelSpec, p: Precision, batch: ArrayLike, context: ArrayLike) -> ArrayLike:
    """KV cache (and recurrent state) of B sequences of S tokens: B · per-sequence · bytes."""
    return batch * kv_elems_per_sequence(m, context) * p.kv_bytes


def step_activation_bytes(
    m: ModelSpec, p: Precision, tokens: ArrayLike, sequences: ArrayLike
) -> ArrayLike:
    """Peak live activations of one step of n tokens over s sequences: layers run one after
    another, so the largest is one FFN's (or SSM's) input, residual and hidden state,
    n·(2D + widest hidden), plus fp32 logits s·V."""
    widths = [(m.mlp_matrices - 1) * m.d_ff, 2 * m.d_inner]
    if m.moe is not None:
        widths.append(m.moe.top_k * (m.mlp_matrices - 1) * m.moe.expert_d_ff)
    hidden = 2 * m.d_model + max(widths)
    return tokens * hidden * p.activation_bytes + sequences * m.vocab_size * LOGIT_BYTES


def activation_bytes(
    m: ModelSpec, p: Precision, batch: ArrayLike, new_tokens: ArrayLike
) -> ArrayLike:
    """Activations of a step of B sequences with T new tokens each (B·T tokens, B logits)."""
    return step_activation_bytes(m, p, batch * new_tokens, batch)


def prefill_step_tokens(batch: ArrayLike, prompt: ArrayLike, token_budget: int | None) -> ArrayLike:
    """Tokens of the largest step a batch of B prompts of P tokens runs: B·P when the whole
    batch is prefilled at once (no budget), else max(min(B·P, N), B) under a budget of N
    tokens (chunks of N prompt tokens, or a decode step of B tokens if that is larger)."""
    if token_budget is None:
        return batch * prompt
    return np.maximum(np.minimum(batch * prompt, token_budget), batch)


def peak_activation_bytes(
    m: ModelSpec,
    p: Precision,
    batch: ArrayLike,
    prompt: ArrayLike,
    token_budget: int | None = DEFAULT_PREFILL_TOKEN_BUDGET,
) -> ArrayLike:
    """Activations of the largest step of B sequences with P-token prompts (B logits)."""
    return step_activation_bytes(m, p, prefill_step_tokens(batch, prompt, token_budget), batch)


def memory_terms(
    engine: EngineSpec | None,
    ceiling: str,
    memory_fraction: float | None = None,
    prefill_token_budget: int | None | Literal["engine"] = "engine",
) -> tuple[float, int | None]:
    """(memory fraction, prefill token budget) of a prediction. Given values win; else the
    engine profile's; with no engine, 1 on the datasheet ceiling (no reserve) or
    `DEFAULT_MEMORY_FRACTION`, and `DEFAULT_PREFILL_TOKEN_BUDGET`. A budget of None charges
    the whole batch's prompts at once."""
    if memory_fraction is None:
        memory_fraction = (
            engine.memory_fraction
            if engine is not None
            else 1.0
            if ceiling == "datasheet"
            else DEFAULT_MEMORY_FRACTION
        )
    if prefill_token_budget == "engine":
        prefill_token_budget = (
            engine.prefill_token_budget if engine is not None else DEFAULT_PREFILL_TOKEN_BUDGET
        )
    return check_memory_fraction(memory_fraction), check_token_budget(prefill_token_budget)


def check_memory_fraction(memory_fraction: float) -> float:
    if not 0 < memory_fraction <= 1:
        raise InvalidInputError(f"`memory_fraction` must be in (0, 1], got {memory_fraction}")
    return memory_fraction


def check_token_budget(token_budget: int | None) -> int | None:
    if token_budget is not None and token_budget < 1:
        raise InvalidInputError(f"`prefill_token_budget` must be at least 1, got {token_budget}")
    return token_budget


@dataclass(frozen=True)
class MemoryBudget:
    """What one device offers the engine: capacity C, reserve (1 − f)·C, usable f·C (bytes)."""

    capacity_bytes: float
    memory_fraction: float

    @property
    def reserve_bytes(self) -> float:
        return self.capacity_bytes - self.usable_bytes

    @property
    def usable_bytes(self) -> float:
        return self.capacity_bytes * self.memory_fraction

    def as_dict(self) -> dict:
        return {
            "capacity_bytes": self.capacity_bytes,
            "memory_fraction": self.memory_fraction,
            "reserve_bytes": self.reserve_bytes,
            "usable_bytes": self.usable_bytes,
        }


def memory_budget(
    hw: HardwareSpec, memory_fraction: float = DEFAULT_MEMORY_FRACTION
) -> MemoryBudget:
    return MemoryBudget(float(hw.memory_bytes), check_memory_fraction(memory_fraction))


def _largest(fits: Callable[[np.ndarray], np.ndarray], hi: np.ndarray) -> np.ndarray:
    """Largest integer x in [0, hi] with fits(x), for a `fits` true up to an edge and false
    after it (0 when even fits(1) is false); bisection, elementwise over arrays."""
    lo = np.zeros_like(hi)
    while np.any(lo < hi):
        mid = (lo + hi + 1) // 2
        ok = fits(mid)
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid - 1)
    return lo


@dataclass(frozen=True)
class BatchFit:
    """The largest batch of one replica that fits at `context` tokens per sequence, and what
    one GPU (the fullest) holds there. `binding` names the limit; `kv_room_bytes` is what the
    usable memory leaves for the KV cache once weights and activations are placed."""

    budget: MemoryBudget
    context: int
    prompt_tokens: int
    prefill_token_budget: int | None
    weights_bytes: float
    kv_cache_bytes: float  # at max_batch (0 when nothing fits)
    activation_bytes: float  # at max_batch (one sequence's when nothing fits)
    max_batch: int
    binding: Binding

    @property
    def kv_room_bytes(self) -> float:
        return max(self.budget.usable_bytes - self.weights_bytes - self.activation_bytes, 0.0)

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


def _memory(
    m: ModelSpec,
    p: Precision,
    par: Parallel | None,
    batch: ArrayLike,
    prompt: ArrayLike,
    context: ArrayLike,
    token_budget: int | None,
):
    from .parallel import Parallel, memory_per_gpu  # parallel imports this module

    return memory_per_gpu(
        m, p, par or Parallel(), batch, prompt, context, prefill_token_budget=token_budget
    )


def batch_fit(
    m: ModelSpec,
    hw: HardwareSpec,
    p: Precision,
    context: int,
    prompt: int | None = None,
    par: Parallel | None = None,
    *,
    memory_fraction: float = DEFAULT_MEMORY_FRACTION,
    prefill_token_budget: int | None = DEFAULT_PREFILL_TOKEN_BUDGET,
) -> BatchFit:
    """Largest replica batch B whose fullest GPU holds W + KV(⌈B/ep⌉, S) + activations of its
    largest step (`peak_activation_bytes`, prompt P, default P = S) within f·C. With EP n the
    n GPUs each hold ⌈B/n⌉ sequences, so B is n times one GPU's count."""
    from .parallel import Parallel

    par = par or Parallel()
    budget = memory_budget(hw, memory_fraction)
    check_token_budget(prefill_token_budget)
    P = context if prompt is None else prompt
    usable = budget.usable_bytes

    def mem(b: ArrayLike):  # b sequences on the fullest GPU
        return _memory(m, p, par, np.asarray(b) * par.ep, P, context, prefill_token_budget)

    one = mem(1)
    w = float(one.weights_bytes)
    per_seq = float(one.kv_cache_bytes) + m.vocab_size * LOGIT_BYTES / par.tp
    hi = np.asarray(max(int((usable - w) // per_seq) + 1, 0))
    b = int(_largest(lambda x: mem(x).total_bytes <= usable, hi))
    at = mem(max(b, 1))
    kv, act = (
        (float(at.kv_cache_bytes), float(at.activation_bytes))
        if b
        else (0.0, float(one.activation_bytes))
    )
    if w > usable:
        binding: Binding = "weights"
    elif b == 0:
        binding = "activations" if w + act > usable else "KV"
    else:
        binding = "KV" if kv >= act else "activations"
    return BatchFit(
        budget, int(context), int(P), prefill_token_budget, w, kv, act, b * par.ep, binding
    )


def max_batch(
    m: ModelSpec,
    hw: HardwareSpec,
    p: Precision,
    context: int,
    prompt: int | None = None,
    par: Parallel | None = None,
    *,
    memory_fraction: float = DEFAULT_MEMORY_FRACTION,
    prefill_token_budget: int | None = DEFAULT_PREFILL_TOKEN_BUDGET,
) -> int:
    """Largest batch that fits (`batch_fit`); 0 when the weights alone fill the device."""
    return batch_fit(
        m,
        hw,
        p,
        context,
        prompt,
        par,
        memory_fraction=memory_fraction,
        prefill_token_budget=prefill_token_budget,
    ).max_batch


@dataclass(frozen=True)
class ContextFit:
    """The longest context B sequences reach: the memory edge or the model's trained context,
    whichever is shorter (`binding` says which; "weights" when not even S = 0 fits)."""

    max_context: int
    binding: Binding


def context_fit(
    m: ModelSpec,
    hw: HardwareSpec,
    p: Precision,
    batch: int = 1,
    par: Parallel | None = None,
    *,
    memory_fraction: float = DEFAULT_MEMORY_FRACTION,
    prefill_token_budget: int | None = DEFAULT_PREFILL_TOKEN_BUDGET,
) -> ContextFit:
    """Largest S ≤ the model's max context at which B sequences (prompt = S) fit beside the
    weights, by the same per-GPU memory as `batch_fit`."""
    usable = memory_budget(hw, memory_fraction).usable_bytes
    check_token_budget(prefill_token_budget)

    def fits(s: ArrayLike):
        return (
            _memory(m, p, par, batch, np.maximum(s, 1), s, prefill_token_budget).total_bytes
            <= usable
        )

    limit = m.max_context
    if fits(np.asarray(limit)):
        return ContextFit(limit, "context")
    s = int(_largest(fits, np.asarray(limit)))
    if s > 0:
        return ContextFit(s, "KV")
    zero = _memory(m, p, par, batch, 1, 0, prefill_token_budget)
    binding: Binding = (
        "weights"
        if float(zero.weights_bytes) > usable
        else ("activations" if not fits(np.asarray(0)) else "KV")
    )
    return ContextFit(0, binding)


def max_context(
    m: ModelSpec,
    hw: HardwareSpec,
    p: Precision,
    batch: int = 1,
    par: Parallel | None = None,
    *,
    memory_fraction: float = DEFAULT_MEMORY_FRACTION,
    prefill_token_budget: int | None = DEFAULT_PREFILL_TOKEN_BUDGET,
) -> int:
    """Longest context (tokens) B sequences reach, never beyond the model's (`context_fit`)."""
    return context_fit(
        m,
        hw,
        p,
        batch,
        par,
        memory_fraction=memory_fraction,
        prefill_token_budget=prefill_token_budget,
    ).max_context


@dataclass(frozen=True)
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
                f"{model} needs {need_s} of weights per GPU but {device} {has}, so no batch "
                f"fits; smallest that fits batch {self.batch}: {self.hint}"
            )
        return (
            f"batch {self.batch} needs {need_s} per GPU but {device} {has}; the largest batch "
            f"that fits at {self.context} tokens is {self.max_batch}; smallest that fits batch "
            f"{self.batch}: {self.hint}"
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
        }


def shortfall(
    m: ModelSpec,
    hw: HardwareSpec,
    p: Precision,
    batch: int,
    prompt: int,
    context: int,
    par: Parallel | None = None,
    *,
    memory_fraction: float = DEFAULT_MEMORY_FRACTION,
    prefill_token_budget: int | None = DEFAULT_PREFILL_TOKEN_BUDGET,
) -> Shortfall | None:
    """Why `batch` does not fit (None when it does): see `Shortfall`."""
    from .parallel import min_gpus_to_fit

    fit = batch_fit(
        m,
        hw,
        p,
        context,
        prompt,
        par,
        memory_fraction=memory_fraction,
        prefill_token_budget=prefill_token_budget,
    )
    need = _memory(m, p, par, batch, prompt, context, prefill_token_budget)
    if float(need.total_bytes) <= fit.budget.usable_bytes:
        return None
    smallest = min_gpus_to_fit(
        m,
        hw,
        p,
        batch,
        prompt,
        context,
        memory_fraction=memory_fraction,
        prefill_token_budget=prefill_token_budget,
    )
    return Shortfall(
        batch,
        context,
        float(need.total_bytes),
        fit.weights_bytes,
        fit.budget,
        fit.max_batch,
        smallest,
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


def cache_summary(
    m: ModelSpec,
    hw: HardwareSpec,
    p: Precision,
    context: int,
    par: Parallel | None = None,
    *,
    memory_fraction: float = DEFAULT_MEMORY_FRACTION,
    prefill_token_budget: int | None = DEFAULT_PREFILL_TOKEN_BUDGET,
) -> CacheSummary:
    """KV/state per token and per sequence, decode bytes, and what fits (`batch_fit` at
    `context`, `context_fit` for one sequence)."""
    from .cost import step_cost  # cost imports operators only; kept local to read as a leaf

    decode = step_cost(m, hw, Step(1, 1, context), p, "datasheet")
    return CacheSummary(
        model=m.name,
        hardware=hw.name,
        context=context,
        kv_dtype=p.kv,
        kv_bytes_per_token=kv_bytes_per_token(m, p),
        kv_bytes_per_sequence=float(kv_cache_bytes(m, p, 1, context)),
        state_bytes_per_sequence=m.state_elems_per_sequence * p.kv_bytes,
        decode_kv_read_bytes=float(sum(o.op.kv_read_elems for o in decode.ops)) * p.kv_bytes,
        decode_read_bytes=float(decode.bytes),
        weights_bytes=weights_bytes(m, p),
        fit=batch_fit(
            m,
            hw,
            p,
            context,
            None,
            par,
            memory_fraction=memory_fraction,
            prefill_token_budget=prefill_token_budget,
        ),
        context_fit=context_fit(
            m,
            hw,
            p,
            1,
            par,
            memory_fraction=memory_fraction,
            prefill_token_budget=prefill_token_budget,
        ),
        warnings=context_warning(m, context),
    )
