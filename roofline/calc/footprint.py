"""What a model holds on a device, quantity by quantity: weights, KV cache or recurrent state,
activations, and what a device offers them. Pure functions of a model, a precision and sizes;
no parallel layout (`placement` shards and places them) and no fit (`memory` decides what fits).

Weights count every parameter (all experts of a MoE; the whole embedding table, though a step
reads only the gathered rows). The KV cache is sized for the context each sequence reaches:
global layers hold all S tokens, local (sliding-window) layers min(S, W), chunked layers
min(S, chunk size) (the allocation bound of the current chunk), layers sharing another layer's
KV hold nothing; SSM and linear-attention layers hold a constant state. All of it is stored at
the KV format.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError
from ..spec.hardware import HardwareSpec
from ..spec.model import ModelSpec
from ..spec.operators import ArrayLike
from ..spec.precision import Precision, group_params

#: Bytes per vocabulary entry of each sequence while it is sampled: the logits upcast to fp32,
#: their softmax and their log-softmax, all fp32 and alive together (vllm==0.6.3
#: vllm/model_executor/layers/sampler.py:257 `logits.to(torch.float)`, :269
#: `torch.softmax(logits, dtype=torch.float)`, :271 `torch.log_softmax(..., dtype=torch.float)`).
LOGIT_BYTES = 3 * 4
#: Share of device memory the engine may fill; the rest is the reserve (CUDA context, NCCL
#: buffers, allocator fragmentation). vLLM's `gpu_memory_utilization` default,
#: `gpu_memory_utilization: float = 0.90` in vllm/engine/arg_utils.py (EngineArgs); the seeds'
#: author runs 0.88 on A100s and 0.92 on H100s. The datasheet ceiling uses 1 (no reserve).
DEFAULT_MEMORY_FRACTION = 0.9
#: Tokens a prefill step processes at most (chunked prefill): vLLM's default
#: `max_num_batched_tokens` for the offline `LLM` class, 8192 (vllm/engine/arg_utils.py
#: `_set_default_args`; 16384 on ≥ 70 GiB non-A100 GPUs, 2048/8192 for the OpenAI server).
DEFAULT_PREFILL_TOKEN_BUDGET = 8192


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
    """Values one sequence of S tokens keeps: each layer's cache as its mixer grows it
    (`MixerBlock.kv_elems`: per KV-owning layer e = 2·K·H, MLA r + R; S·e on global layers,
    min(S, W)·e on local ones, min(S, C)·e on chunked ones), plus the constant SSM /
    linear-attention state."""
    held: ArrayLike = 0
    for g in m.layer_groups:
        if g.kind.owns_kv:
            held = held + g.count * m.mixer_block(g.kind.mixer).kv_elems(m, g.kind, context)
    return held + m.state_elems_per_sequence


def state_bytes_per_sequence(m: ModelSpec, p: Precision) -> float:
    """One sequence's context-independent state over all layers, bytes: each mixer's
    `state_bytes`, its recurrent part at the checkpoint's `state_dtype` where it sets one
    (Qwen3.5's fp32 delta-rule state), the rest (conv windows) at the KV format."""
    return sum(
        g.count * m.mixer_block(g.kind.mixer).state_bytes(m, p.kv_bytes) for g in m.layer_groups
    )


def kv_growth_elems_per_token(m: ModelSpec) -> float:
    """Values a sequence adds per token once past every window and chunk: the global layers'
    per-token KV (all of `kv_elems_per_token` for a model without local layers)."""
    S = m.max_context
    return float((kv_elems_per_sequence(m, 2 * S) - kv_elems_per_sequence(m, S)) / S)


@dataclass(frozen=True)
class TokenEquivalents:
    """What a sequence of S tokens holds in units of one token of the global layers' KV:
    S plus its local (sliding-window) and chunked layers' Σ_L a_L · min(S, L) values over the
    global per-token ones g, rounded up (a_L: the values per token of the layers that stop
    growing at L, `MixerBlock.kv_limit`). This is the block budget an engine's hybrid
    allocator spends on it (vLLM V1 frees the blocks a window has left), so one definition
    serves `kv` and `serve`; the terms are read from the model once, for the serving loop,
    which asks at every step."""

    limits: np.ndarray  # (n,) tokens at which the bounded layers stop growing, ascending
    per_token: np.ndarray  # (n,) values per token of the layers bounded at each limit
    growth: float  # g, values per token of the global layers (`kv_growth_elems_per_token`)

    @classmethod
    def of(cls, m: ModelSpec, state: bool = False, p: Precision | None = None) -> TokenEquivalents:
        """With `state`, a sequence's recurrent (SSM / linear-attention) state is worth its
        values over g tokens too, from its first token on (a bounded entry at 1 token): an
        allocator that takes each running request's state from the KV pool (vLLM V1's
        `MambaManager`: `memory.state_from_pool`). With the precision `p`, the state counts
        as its bytes over the KV format's bytes per value (a state kept at fp32 under a bf16
        KV cache is worth twice its values); without, as its values."""
        bounded: dict[int, int] = {}
        for g in m.layer_groups:
            block = m.mixer_block(g.kind.mixer)
            limit = block.kv_limit(g.kind)
            if g.kind.owns_kv and limit is not None:
                e = g.count * block.kv_elems_per_token(m, g.kind)
                bounded[limit] = bounded.get(limit, 0) + e
        if state and m.state_elems_per_sequence:
            values = m.state_elems_per_sequence
            if p is not None:
                values = int(np.ceil(state_bytes_per_sequence(m, p) / p.kv_bytes))
            bounded[1] = bounded.get(1, 0) + values
        limits = sorted(bounded)
        return cls(
            np.array(limits, dtype=np.int64),
            np.array([bounded[L] for L in limits], dtype=float),
            kv_growth_elems_per_token(m),
        )

    @property
    def identity(self) -> bool:
        """Whether every sequence is worth its own tokens (no bounded layer beside a global
        one)."""
        return not self.growth or not np.any(self.per_token)

    def __call__(self, context: ArrayLike) -> np.ndarray:
        S = np.asarray(context, dtype=np.int64)
        if self.identity:
            return S
        held = np.minimum(S[..., None], self.limits) @ self.per_token
        return np.asarray(S + np.ceil(held / self.growth), dtype=np.int64)


def kv_token_equivalents(m: ModelSpec, context: ArrayLike) -> np.ndarray:
    """`TokenEquivalents` of `m` at S = `context` (one sequence, or an array of them)."""
    return TokenEquivalents.of(m)(context)


def kv_cache_bytes(m: ModelSpec, p: Precision, batch: ArrayLike, context: ArrayLike) -> ArrayLike:
    """KV cache (and recurrent state) of B sequences of S tokens: B · (per-sequence KV values ·
    bytes + the state's bytes, `state_bytes_per_sequence`)."""
    kv = kv_elems_per_sequence(m, context) - m.state_elems_per_sequence
    return batch * (kv * p.kv_bytes + state_bytes_per_sequence(m, p))


def step_activation_bytes(
    m: ModelSpec, p: Precision, tokens: ArrayLike, sequences: ArrayLike
) -> ArrayLike:
    """Peak live activations of one step of n tokens over s sequences: layers run one after
    another, so the largest is one FFN's (or SSM's) input, residual and hidden states,
    n·(2D + widest hidden), plus the sampler's s·V·`LOGIT_BYTES`. A gated FFN holds its fused
    gate-and-up output (2F) and the activation's output (F) at once, n·(2D + 3F) (vLLM's
    LlamaMLP: `gate_up = gate_up_proj(x); x = act_fn(gate_up)`); a plain one up (F) and
    activation (F), n·(2D + 2F): the FFN's matrices × F."""
    widths = [m.mlp_matrices * m.d_ff, 2 * m.d_inner]
    if m.moe is not None:
        widths.append(m.moe.top_k * m.mlp_matrices * m.moe.expert_d_ff)
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


#: vLLM's profile run samples `max_num_seqs` dummy requests with top_k = V - 1 and top_p < 1
#: (V0 `model_runner.profile_run`: SamplingParams(top_p=0.99, top_k=vocab_size - 1); V1
#: `_dummy_sampler_run`: top_p 0.9, top_k V - 1), so the torch sampler sorts the logits. Bytes
#: per (sequence × vocabulary entry) alive during that sort: the model's 16-bit logits (2, held
#: by the caller), their fp32 copy (4, `logits.to(torch.float)`), the sort's values (4) and
#: int64 indices (8) (`logits.sort(dim=-1)` in `_apply_top_k_top_p`), and the sort's own
#: temporaries, 20 (PyTorch aten/src/ATen/native/cuda/SortStable.cu: with >= 128 rows
#: `segmented_sort_pairs` allocates int64 reverse indices (8) and CUB's SortPairs its alternate
#: key (4) and value (8) buffers; with fewer rows `segmented_sort_pairs_by_full_sort` two int2
#: buffers (8 + 8) and a key buffer (4)). Read in vllm==0.5.4, 0.6.3, 0.6.4.post1, 0.7.3, 0.8.3
#: vllm/model_executor/layers/sampler.py (`logits.sort`) and vllm==0.8.3
#: vllm/v1/sample/ops/topk_topp_sampler.py:186 (the native path, without FlashInfer).
#: Component check: kv010's printed activation peak, 1.43 GiB = 256 × 152064 × 38 B + 6600 ×
#: 3584 × 2 B = 1.422 GiB (the sampler is its peak there).
VLLM_SAMPLER_PEAK_BYTES = 2 + 4 + 4 + 8 + 20
#: Memory vLLM counts outside torch's allocator, grown from the worker's start to the end of
#: its profile run (cuBLAS/cuDNN handles, NCCL and custom all-reduce buffers), as vLLM prints it
#: ("non_torch_memory takes X GiB", vllm 0.7-0.8 V0; roofline/data/kv_capacity_logs.csv, a
#: measured component): 0.06 GiB at TP 1 (kv010, A10G), 0.25-0.48 GiB at TP 2-4 on PCIe boxes
#: (kv012 0.25, kv011 0.30, kv021 0.40 and 0.48: the median, 0.35 GiB, is used). NVSwitch
#: boxes take more (NCCL NVLS buffers: kv008's H200 TP 8 printed 5.7-7.7 GiB): not modelled.
VLLM_NON_TORCH_TP1_BYTES = 0.06 * 2**30
VLLM_NON_TORCH_TP_BYTES = 0.35 * 2**30
#: The CUDA context, which vLLM 0.6.4 and V1 0.8.x count too (their non-torch term is the
#: device's used memory less torch's, `mem_get_info` total - free, vllm==0.6.4.post1
#: vllm/worker/worker.py:209, vllm==0.8.3 vllm/v1/worker/gpu_worker.py:177), while 0.3-0.6.3
#: subtract the free memory after the profile from the free memory at worker start and 0.7+
#: (V0) / 0.10+ (V1) count only the growth since start: kv006's device-level 0.35 GiB (RTX
#: 3090, TP 1, vllm 0.6.4) less the TP-1 growth above, 0.29 GiB.
VLLM_CUDA_CONTEXT_BYTES = 0.29 * 2**30


def vllm_profile_activation_bytes(
    shard: ModelSpec,
    p: Precision,
    tokens: int,
    seqs: int,
    vocab: int,
    *,
    v1: bool = True,
) -> float:
    """Peak torch allocation beyond the weights of vLLM's profile run on one GPU: `tokens`
    (`max_num_batched_tokens`) over `seqs` (`max_num_seqs`) dummy prompts through `shard` (one
    TP rank's part of the model), then the sampler over `seqs` rows of the full `vocab` (the
    logits are gathered on the rank that samples; 0 on a PP stage without the LM head). The
    two peaks do not overlap, so the larger counts:

    - a layer: n·(3D + widest FFN hidden) at the activation width. In an FFN the residual,
      the normed input the caller holds, the fused gate-and-up output (2F/tp), the activation's
      output (F/tp) and the down projection's output are alive together (vLLM LlamaMLP.forward
      keeps `gate_up` until it returns): 3D + 3F/tp for a gated FFN, 3D + 2F/tp for a plain one.
      Component check: kv006 / kv007 (Llama-3.1-8B, 20000 / 29000 tokens, vllm 0.6.4) printed
      peak_torch_memory 17.06 / 17.98 GiB: 0.92 GiB for 9000 tokens = 109.8 kB per token,
      against (3·4096 + 3·14336)·2 B = 110.6 kB;
    - the sampler: `seqs` · vocab · `VLLM_SAMPLER_PEAK_BYTES`, beside the hidden states the
      model returned: all n tokens' in V0 (`execute_model` holds them), the `seqs` sampled rows'
      in V1 (`_dummy_run` returns `hidden_states[logit_indices]`)."""
    a = p.activation_bytes
    widths = [shard.mlp_matrices * shard.d_ff, 2 * shard.d_inner]
    if shard.moe is not None:
        widths.append(shard.moe.top_k * shard.mlp_matrices * shard.moe.expert_d_ff)
    D = shard.d_model
    layer = tokens * (3 * D + max(widths)) * a
    if not vocab:
        return float(layer)
    sampler = (seqs if v1 else tokens) * D * a + seqs * vocab * VLLM_SAMPLER_PEAK_BYTES
    return float(max(layer, sampler))
