"""llama.cpp file types (Q4_K_M, Q3_K_L, ...): which block type each tensor of a model gets.

A GGUF "file type" is a per-tensor mix, not one format. `llama-quantize` starts every 2-D
weight at the file type's base block type and then moves some tensors to other types by name,
layer index and model shape (`llama_tensor_get_type` in src/llama-quant.cpp). Norms, biases,
the MoE router (`ffn_gate_inp`) and positional embeddings are never quantised; they stay F32
as `convert_hf_to_gguf.py` writes them. This module replays those rules on a ModelSpec's
tensors (llama architecture; the Falcon-only branches are not replayed) and returns, for each
tensor group, the effective bits per weight.

Define: L layers, n_v attention layers with a V projection, i their index.
use_more_bits(i, n) = i < n/8 or i >= 7n/8 or (i - n/8) % 3 == 2 (integer division), which
selects about half of the layers (16 of 32, 40 of 80).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .dtypes import parse_format
from .model import ModelSpec

#: File type -> base block type (llama_model_quantize_impl's switch).
MIXES: dict[str, str] = {
    "q3_k_s": "q3_k",
    "q3_k_m": "q3_k",
    "q3_k_l": "q3_k",
    "q4_k_s": "q4_k",
    "q4_k_m": "q4_k",
    "q5_k_s": "q5_k",
    "q5_k_m": "q5_k",
}

#: Block type used when a tensor's row length is not a multiple of the chosen type's block
#: (llama_tensor_get_type's `convert_incompatible_tensor` switch).
_FALLBACK = {
    "q2_k": "iq4_nl",
    "q3_k": "iq4_nl",
    "iq4_xs": "iq4_nl",
    "q4_k": "q5_0",
    "q5_k": "q5_1",
    "q6_k": "q8_0",
}
_BLOCK = {
    "q4_0": 32,
    "q4_1": 32,
    "q5_0": 32,
    "q5_1": 32,
    "q8_0": 32,
    "iq4_nl": 32,
    "q2_k": 256,
    "q3_k": 256,
    "q4_k": 256,
    "q5_k": 256,
    "q6_k": 256,
    "iq4_xs": 256,
}
_UNQUANTISED = "fp32"


@dataclass(frozen=True)
class Tensor:
    """One stored tensor: its group, llama.cpp role, layer, row length (ne[0]) and size."""

    group: str
    role: str
    layer: int
    row: int
    elems: int
    quantised: bool = True


def use_more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def tensors(m: ModelSpec) -> list[Tensor]:
    """The model's weights as llama.cpp stores them, in file order. Element counts add up to
    `ModelSpec.params` group by group (biases and norms as unquantised tensors)."""
    D, V = m.d_model, m.vocab_size
    out = [Tensor("embedding", "token_embd", -1, D, V * D)]
    if m.position == "learned":
        out.append(Tensor("embedding", "pos_embd", -1, D, m.max_context * D, False))
    for i, kind in enumerate(m.layer_kinds):
        block = m.mixer_block(kind.mixer)
        group = block.param_group
        proj = [Tensor(group, r, i, row, n) for r, row, n in block.gguf_matrices(m, kind)]
        rest = m.mixer_params(kind) - sum(t.elems for t in proj)  # biases, q/k norms
        out += proj + ([Tensor(group, "attn_bias_norm", i, 1, rest, False)] if rest else [])
        out += _ffn_tensors(m, i, kind.ffn)
    out.append(Tensor("norms", "norm", -1, 1, m.params.norms, False))
    if not m.tied_embeddings:
        out.append(Tensor("lm_head", "output", -1, D, V * D))
        if m.lm_head_bias:
            out.append(Tensor("lm_head", "output_bias", -1, 1, V, False))
    return out


def _ffn_tensors(m: ModelSpec, i: int, ffn: str) -> list[Tensor]:
    D = m.d_model
    if ffn == "dense":
        F = m.d_ff
        ins = ["ffn_gate", "ffn_up"] if m.mlp == "gated" else ["ffn_up"]
        ts = [Tensor("mlp", r, i, D, D * F) for r in ins] + [Tensor("mlp", "ffn_down", i, F, F * D)]
        rest = m.ffn_params("dense") - sum(t.elems for t in ts)  # biases
        return ts + ([Tensor("mlp", "ffn_bias", i, 1, rest, False)] if rest else [])
    if ffn == "moe" and m.moe is not None:
        e = m.moe
        ins = ["ffn_gate", "ffn_up"] if m.mlp == "gated" else ["ffn_up"]
        Fe, Fs = e.expert_d_ff, e.shared_d_ff or e.expert_d_ff
        bias = m.linear_bias == "all"
        ts = [
            Tensor(
                "router", "ffn_gate_inp", i, D, D * e.experts + (e.experts if bias else 0), False
            )
        ]
        ts += [Tensor("experts", f"{r}_exps", i, D, e.experts * D * Fe) for r in ins]
        ts.append(Tensor("experts", "ffn_down_exps", i, Fe, e.experts * Fe * D))
        if bias:
            ts.append(
                Tensor("experts", "ffn_exps_bias", i, 1, e.experts * m.expert_bias_params, False)
            )
        if e.shared_experts:
            n = e.shared_experts
            ts += [Tensor("shared_experts", f"{r}_shexp", i, D, n * D * Fs) for r in ins]
            ts.append(Tensor("shared_experts", "ffn_down_shexp", i, Fs, n * Fs * D))
        rest = m.ffn_params("moe") - sum(t.elems for t in ts)  # shared-expert biases
        return ts + (
            [Tensor("shared_experts", "ffn_shexp_bias", i, 1, rest, False)] if rest else []
        )
    return []


def tensor_types(mix: str, m: ModelSpec) -> list[tuple[Tensor, str]]:
    """Each tensor with the block type `llama-quantize --<mix>` gives it (no imatrix)."""
    base = MIXES[mix]
    ts = tensors(m)
    n_v = sum(t.role == "attn_v" for t in ts)
    n_layer = m.layers
    n_expert = m.moe.experts if m.moe else 0
    is_70b = m.layers == 80 and m.kv_heads < m.heads  # llama-model.cpp: 80 layers, GQA -> 70B
    i_v = 0
    typed = []
    for t in ts:
        if not t.quantised:
            typed.append((t, _UNQUANTISED))
            continue
        new = base
        if t.role == "output" or (t.role == "token_embd" and m.tied_embeddings):
            new = "q8_0" if t.row % _BLOCK[base] else "q6_k"
        elif t.role == "attn_v":
            if mix == "q3_k_m":
                new = "q5_k" if i_v < 2 else "q4_k"
            elif mix == "q3_k_l":
                new = "q5_k"
            elif mix in ("q4_k_m", "q5_k_m") and use_more_bits(i_v, n_v):
                new = "q6_k"
            elif mix == "q4_k_s" and i_v < 4:
                new = "q5_k"
            if is_70b and new in ("q3_k", "q4_k"):
                new = "q5_k"
            if n_expert == 8:
                new = "q8_0"
            i_v += 1
        elif t.role == "attn_k" and n_expert == 8:
            new = "q8_0"
        elif t.role.startswith("ffn_down"):
            i = t.layer
            if mix == "q3_k_m":
                new = "q5_k" if i < n_layer // 16 else "q4_k"
            elif mix == "q3_k_l":
                new = "q5_k"
            elif mix in ("q4_k_m", "q5_k_m") and use_more_bits(i, n_layer):
                new = "q6_k"
            elif mix == "q4_k_s" and i < n_layer // 8:
                new = "q5_k"
        elif t.role == "attn_output":
            if n_expert == 8:
                if mix in ("q3_k_s", "q3_k_m", "q4_k_s", "q4_k_m"):
                    new = "q5_k"
            elif mix == "q3_k_m":
                new = "q4_k"
            elif mix == "q3_k_l":
                new = "q5_k"
        if t.row % _BLOCK[new]:
            new = _FALLBACK.get(new, "fp16")
            if t.row % _BLOCK.get(new, 1):
                new = "fp16"
        typed.append((t, new))
    return typed


def group_bits(mix: str, m: ModelSpec) -> dict[str, float]:
    """Effective bits per weight of each tensor group of `m` under file type `mix`:
    Σ elems·bits / Σ elems over the group's tensors."""
    bits: dict[str, float] = defaultdict(float)
    elems: dict[str, int] = defaultdict(int)
    for t, fmt in tensor_types(mix, m):
        bits[t.group] += t.elems * parse_format(fmt).bits
        elems[t.group] += t.elems
    return {g: bits[g] / n for g, n in elems.items() if n}


#: Groups every K file type moves off its base type whatever the model: LM head to Q6_K,
#: norms and router unquantised. Without a model the other groups count at the base type;
#: `group_bits` adds the per-layer attn_v / ffn_down / attn_output promotions.
NOMINAL_GROUPS: dict[str, str] = {"lm_head": "q6_k", "norms": _UNQUANTISED, "router": _UNQUANTISED}
