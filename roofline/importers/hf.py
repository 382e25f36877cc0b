"""Hugging Face `config.json` → ModelSpec, for the architectures listed in `SUPPORTED`.

Pure: the caller reads the files; nothing here touches the network or the disk. Each
supported `architectures` value maps to one reader that translates the config's fields
(with the transformers class defaults where a config omits them) into ModelSpec fields;
the result is validated like any YAML spec.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ..calc.memory import weights_bytes
from ..errors import SpecError, field_error
from ..spec.dtypes import bytes_per_element
from ..spec.model import MAX_IMPORTED_SIZE, MAX_LAYERS, ModelSpec
from ..spec.precision import Precision

Config = dict[str, Any]

_ACT = {
    "silu": "silu",
    "swish": "silu",
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "relu": "relu",
}
_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


# ---- the schema of what is read: every key, its type and range, checked before use ---------
#: layer counts, and the periods a layer pattern is built from (a list that long is built)
_LAYER_KEYS = frozenset((
    "num_hidden_layers", "n_layer", "n_layers", "sliding_window_pattern",
    "no_rope_layer_interval", "attn_layer_period", "expert_layer_period",
    "interleave_moe_layer_step", "moe_layer_freq", "decoder_sparse_step",
    "attn_layer_offset", "expert_layer_offset", "first_k_dense_replace",
    "num_nextn_predict_layers",
))  # fmt: skip
#: sizes that must be at least 1
_POSITIVE = frozenset((
    "hidden_size", "num_attention_heads", "num_hidden_layers", "n_layer", "n_layers", "n_head",
    "n_heads", "n_embd", "d_model", "vocab_size", "num_key_value_heads", "num_kv_heads",
    "kv_n_heads", "head_dim", "max_position_embeddings", "n_positions", "max_seq_len",
    "num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts",
    "num_experts_per_tok", "experts_per_token", "moe_top_k", "kv_lora_rank", "q_lora_rank",
    "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "mamba_d_state", "state_size",
    "mamba_d_conv", "conv_kernel", "mamba_expand", "expand", "n_groups", "sliding_window",
    "attention_chunk_size", "attn_layer_period", "expert_layer_period", "moe_layer_freq",
    "interleave_moe_layer_step", "no_rope_layer_interval", "sliding_window_pattern",
    "decoder_sparse_step", "time_step_rank", "bits", "w_bit", "q_group_size",
    "index_topk", "index_n_heads", "index_head_dim", "mamba_num_heads", "mamba_head_dim",
    "ssm_state_size",
))  # fmt: skip
#: counts and sizes that may be 0
_NON_NEGATIVE = frozenset((
    "intermediate_size", "moe_intermediate_size", "intermediate_size_mlp", "n_inner",
    "ffn_hidden_size", "n_shared_experts", "first_k_dense_replace", "attn_layer_offset",
    "expert_layer_offset", "num_nextn_predict_layers", "moe_shared_expert_intermediate_size",
    "moe_latent_size",
))  # fmt: skip
_BOOLEAN = frozenset((
    "tie_word_embeddings", "attention_bias", "use_sliding_window", "multi_query",
    "new_decoder_architecture", "parallel_attn", "use_parallel_residual", "mamba_conv_bias",
    "use_conv_bias", "bias", "alibi", "load_in_8bit", "load_in_4bit", "sym", "zero_point",
    "bnb_4bit_use_double_quant", "mlp_bias", "use_bias", "mamba_proj_bias",
))  # fmt: skip
_TEXT = frozenset((
    "model_type", "hidden_act", "hidden_activation", "activation_function", "torch_dtype",
    "quant_method", "quant_algo", "activation_scheme", "bnb_4bit_quant_type", "name",
    "_name_or_path", "fmt", "hybrid_override_pattern", "mlp_hidden_act", "mamba_ssm_cache_dtype",
))  # fmt: skip
_TEXT_LISTS = frozenset(("architectures", "layer_types"))
_INT_LISTS = frozenset(("mlp_only_layers",))
_FRACTIONS = frozenset(("rotary_pct", "partial_rotary_factor"))
#: nested sections read with the same keys (quantization_config holds its own)
_SECTIONS = frozenset(
    ("text_config", "attn_config", "ffn_config", "quantization_config", "ffn_act_fn")
)


def check_config(c: Config, source: str = "config.json", depth: int = 0) -> None:
    """Refuse, naming the key, any value this importer reads that has the wrong type or a size
    no model has (`"hidden_size": "4096"`, zero heads, `"no"` for a flag, 10⁷ layers under any
    spelling), in the top level and in the nested sections, before anything reads them. A
    null is an absent key."""

    def bad(key: str, v: Any, want: str) -> SpecError:
        shown = json.dumps(v, default=str)[:40]
        return SpecError(f"{source}: '{key}' must be {want}, got {shown}; fix the config")

    for key, v in c.items():
        if v is None:
            continue
        if key in _POSITIVE or key in _NON_NEGATIVE:
            low = 1 if key in _POSITIVE else 0
            high = MAX_LAYERS if key in _LAYER_KEYS else MAX_IMPORTED_SIZE
            if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
                raise bad(key, v, f"a whole number from {low} to {high:,}")
        elif key == "group_size":
            if isinstance(v, bool) or not isinstance(v, int) or not (v == -1 or 1 <= v <= 2**20):
                raise bad(key, v, "a positive group size or -1 (per channel)")
        elif key == "mamba_dt_rank":
            if v != "auto" and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise bad(key, v, 'a positive whole number or "auto"')
        elif key in _BOOLEAN:
            if not isinstance(v, bool):
                raise bad(key, v, "true or false")
        elif key in _TEXT:
            if not isinstance(v, str):
                raise bad(key, v, "text")
        elif key in _TEXT_LISTS:
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise bad(key, v, "a list of names")
            if len(v) > MAX_LAYERS:
                raise bad(key, f"{len(v)} entries", f"at most {MAX_LAYERS:,} entries")
        elif key in _INT_LISTS:
            if not isinstance(v, list) or not all(
                isinstance(x, int) and not isinstance(x, bool) and 0 <= x < MAX_LAYERS for x in v
            ):
                raise bad(key, v, "a list of layer indices")
        elif key in _FRACTIONS:
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= 1:
                raise bad(key, v, "a fraction in (0, 1]")
        elif key in _SECTIONS:
            if not isinstance(v, dict):
                raise bad(key, v, "an object of fields")
            if depth < 2:
                check_config(v, f"{source}: {key}", depth + 1)


def _without_nulls(c: Config) -> Config:
    """The config with null values dropped, in its sections too: a null is an absent key, so
    every `get` with a default sees the default."""
    return {
        k: (_without_nulls(v) if isinstance(v, dict) else v) for k, v in c.items() if v is not None
    }


def _get(c: Config, key: str, default: Any = None) -> Any:
    v = c.get(key, default)
    if v is None and default is None:
        raise SpecError(f"config.json has no '{key}', which this architecture needs")
    return default if v is None else v


def _decoder(c: Config, tie_default: bool) -> dict:
    """Fields every Llama-like decoder config shares."""
    D, N = _get(c, "hidden_size"), _get(c, "num_attention_heads")
    act = c.get("hidden_act") or c.get("hidden_activation") or "silu"
    if act not in _ACT:
        raise SpecError(
            f"config.json: activation '{act}' is not modelled; known: {', '.join(_ACT)}"
        )
    return dict(
        layers=_get(c, "num_hidden_layers"),
        d_model=D,
        heads=N,
        kv_heads=c.get("num_key_value_heads") or N,
        head_dim=c.get("head_dim") or D // N,
        d_ff=_get(c, "intermediate_size", 0),
        activation=_ACT[act],
        vocab_size=_get(c, "vocab_size"),
        tied_embeddings=bool(c.get("tie_word_embeddings", tie_default)),
        max_context=_get(c, "max_position_embeddings", 1 << 20),
    )


def _window(spec: dict, c: Config) -> dict:
    """A set sliding_window narrower than the context makes every layer local."""
    w = c.get("sliding_window")
    use = c.get("use_sliding_window", True)
    if w and use and w < spec["max_context"]:
        spec["layer_pattern"] = ["local"]
        spec["attention"] = {**spec.get("attention", {}), "sliding_window": w}
    return spec


def _llama(c: Config) -> dict:
    s = _decoder(c, tie_default=False)
    if c.get("attention_bias"):
        s["linear_bias"] = "qkv"
    return _window(s, c)


def _qwen2(c: Config) -> dict:
    return _window({**_decoder(c, tie_default=False), "linear_bias": "qkv"}, c)


def _qwen3(c: Config) -> dict:
    return _window({**_decoder(c, tie_default=False), "attention": {"qk_norm": True}}, c)


def _mixtral(c: Config) -> dict:
    s = _decoder(c, tie_default=False)
    s["moe"] = {
        "experts": _get(c, "num_local_experts"),
        "top_k": _get(c, "num_experts_per_tok"),
        "expert_d_ff": s.pop("d_ff"),
    }
    return _window(s, c)


def _qwen3_moe(c: Config) -> dict:
    s = _qwen3(c)
    if c.get("mlp_only_layers"):
        raise SpecError(
            "config.json: mlp_only_layers (dense layers at listed indices) is not "
            "modelled; use dense_first_layers/period in a YAML spec"
        )
    period = c.get("decoder_sparse_step", 1)
    s["moe"] = {
        "experts": _get(c, "num_experts"),
        "top_k": _get(c, "num_experts_per_tok"),
        "expert_d_ff": _get(c, "moe_intermediate_size"),
        "period": period,
        "offset": period - 1,
    }
    if period == 1:
        s["d_ff"] = 0
    return s


def _layer_types(c: Config, types: list[str]) -> list[str]:
    """transformers' per-layer `layer_types` as a layer pattern; a list as long as the model
    (the transformers default) or one period of it. A list that is neither (too few entries
    for the layers, or not a divisor) would cycle into a pattern the model does not have."""
    known = {"sliding_attention": "local", "full_attention": "global"}
    bad = sorted(set(types) - set(known))
    if bad:
        raise SpecError(f"config.json: layer_types entry '{bad[0]}' is not modelled")
    layers = c.get("num_hidden_layers")
    if isinstance(layers, int) and len(types) != layers and layers % len(types):
        raise SpecError(
            f"config.json: layer_types has {len(types)} entries for {layers} layers; give one "
            "per layer"
        )
    return [known[t] for t in types]


def _gemma(c: Config, pattern: list[str], qk_norm: bool) -> dict:
    s = _decoder(c, tie_default=True)
    if c.get("layer_types"):
        pattern = _layer_types(c, c["layer_types"])
    s.update(
        norms_per_layer=4,
        layer_pattern=pattern,
        attention={"sliding_window": _get(c, "sliding_window"), "qk_norm": qk_norm},
    )
    return s


def _gemma2(c: Config) -> dict:
    return _gemma(c, ["local", "global"], qk_norm=False)


def _gemma3(c: Config) -> dict:
    c = c.get("text_config", c)
    every = c.get("sliding_window_pattern", 6)
    return _gemma(c, ["local"] * (every - 1) + ["global"], qk_norm=True)


def _llama4(c: Config) -> dict:
    """Llama 4 (Scout, Maverick): the text model of `text_config`. RoPE layers attend within
    chunks of attention_chunk_size; every no_rope_layer_interval-th layer (NoPE) attends to
    everything; MoE on every interleave_moe_layer_step-th layer (transformers'
    Llama4TextConfig: layers step−1, 2·step−1, ...), one shared expert of the routed width,
    dense layers of intermediate_size_mlp between them."""
    c = c.get("text_config", c)
    s = _decoder(c, tie_default=False)
    every = c.get("no_rope_layer_interval", 4)
    step = c.get("interleave_moe_layer_step", 1)
    expert_ff = _get(c, "intermediate_size")
    s.update(
        d_ff=0 if step == 1 else _get(c, "intermediate_size_mlp"),
        layer_pattern=["chunked"] * (every - 1) + ["global"],
        attention={"attention_chunk_size": _get(c, "attention_chunk_size")},
        moe={
            "experts": _get(c, "num_local_experts"),
            "top_k": _get(c, "num_experts_per_tok"),
            "expert_d_ff": expert_ff,
            "shared_experts": 1,
            "period": step,
            "offset": step - 1,
        },
    )
    return s


def _deepseek(c: Config) -> dict:
    s = _decoder(c, tie_default=False)
    rope, nope = _get(c, "qk_rope_head_dim"), _get(c, "qk_nope_head_dim")
    s.update(kv_heads=s["heads"], head_dim=rope + nope)
    if c.get("num_nextn_predict_layers"):  # the MTP module (`speculate --mtp`); the spec
        s["mtp_layers"] = c["num_nextn_predict_layers"]  # validates it (0..8)
    s["attention"] = {
        "kind": "mla",
        "kv_lora_rank": _get(c, "kv_lora_rank"),
        "q_lora_rank": c.get("q_lora_rank"),
        "qk_rope_head_dim": rope,
        "qk_nope_head_dim": nope,
        "v_head_dim": _get(c, "v_head_dim"),
    }
    if c.get("n_routed_experts"):
        s["moe"] = {
            "experts": c["n_routed_experts"],
            "top_k": _get(c, "num_experts_per_tok"),
            "expert_d_ff": _get(c, "moe_intermediate_size"),
            "shared_experts": c.get("n_shared_experts") or 0,
            "dense_first_layers": c.get("first_k_dense_replace", 0),
            "period": c.get("moe_layer_freq", 1),
        }
    return s


def _falcon(c: Config) -> dict:
    D, N = _get(c, "hidden_size"), _get(c, "num_attention_heads")
    new = bool(c.get("new_decoder_architecture"))
    kv = c.get("num_kv_heads") if new else (1 if c.get("multi_query", True) else N)
    return dict(
        layers=_get(c, "num_hidden_layers"),
        d_model=D,
        heads=N,
        kv_heads=kv,
        head_dim=D // N,
        d_ff=c.get("ffn_hidden_size") or 4 * D,
        mlp="plain",
        activation="gelu",
        vocab_size=_get(c, "vocab_size"),
        tied_embeddings=bool(c.get("tie_word_embeddings", True)),
        norm="layernorm",
        position="alibi" if c.get("alibi") else "rope",
        max_context=c.get("max_position_embeddings", 2048),
        linear_bias="all" if c.get("bias") else "none",
        parallel_block=bool(c.get("parallel_attn", True)),
        norms_per_layer=2 if new else 1,
    )


def _gpt_neox(c: Config) -> dict:
    s = _decoder(c, tie_default=False)
    s.update(
        kv_heads=s["heads"],
        mlp="plain",
        norm="layernorm",
        linear_bias="all",
        activation=_ACT[c.get("hidden_act", "gelu")],
        parallel_block=bool(c.get("use_parallel_residual", True)),
    )
    return s


def _mamba_common(c: Config, tie_default: bool) -> dict:
    return dict(
        layers=_get(c, "num_hidden_layers"),
        d_model=_get(c, "hidden_size"),
        vocab_size=_get(c, "vocab_size"),
        tied_embeddings=bool(c.get("tie_word_embeddings", tie_default)),
        position="none",
        max_context=1 << 20,
        norms_per_layer=1,
        layer_pattern=["ssm"],
    )


def _mamba(c: Config) -> dict:
    s = _mamba_common(c, tie_default=True)
    D = s["d_model"]
    rank = c.get("time_step_rank", "auto")
    s["ssm"] = {
        "kind": "mamba1",
        "d_state": _get(c, "state_size"),
        "d_conv": _get(c, "conv_kernel"),
        "expand": _get(c, "expand"),
        "dt_rank": -(-D // 16) if rank == "auto" else rank,
        "conv_bias": bool(c.get("use_conv_bias", True)),
    }
    return s


def _mamba2(c: Config) -> dict:
    s = _mamba_common(c, tie_default=False)
    s["ssm"] = {
        "kind": "mamba2",
        "d_state": _get(c, "state_size"),
        "d_conv": _get(c, "conv_kernel"),
        "expand": _get(c, "expand"),
        "head_dim": _get(c, "head_dim"),
        "n_groups": c.get("n_groups", 1),
        "conv_bias": bool(c.get("use_conv_bias", True)),
    }
    return s


def _jamba(c: Config) -> dict:
    s = _decoder(c, tie_default=False)
    period, offset = _get(c, "attn_layer_period"), _get(c, "attn_layer_offset", 0)
    s.update(
        position="none", layer_pattern=["global" if i == offset else "ssm" for i in range(period)]
    )
    s["ssm"] = {
        "kind": "mamba1",
        "d_state": _get(c, "mamba_d_state"),
        "d_conv": _get(c, "mamba_d_conv"),
        "expand": _get(c, "mamba_expand"),
        "dt_rank": _get(c, "mamba_dt_rank"),
        "conv_bias": bool(c.get("mamba_conv_bias", True)),
        "inner_norms": True,
    }
    if c.get("num_experts", 1) > 1:
        s["moe"] = {
            "experts": c["num_experts"],
            "top_k": _get(c, "num_experts_per_tok"),
            "expert_d_ff": s["d_ff"],
            "period": _get(c, "expert_layer_period"),
            "offset": _get(c, "expert_layer_offset", 0),
        }
    return s


#: hybrid_override_pattern's letters (NemotronHConfig): the one block each layer holds
_NEMOTRON_H_BLOCKS = {"M": "ssm", "*": "global", "-": "dense", "E": "moe"}


def _nemotron_h(c: Config) -> dict:
    """Nemotron-H (NemotronHForCausalLM): one block a layer, as hybrid_override_pattern lists
    them, read as a single-block layer_pattern (M ssm, * global, - dense, E moe); one pre-norm a
    block, no position encoding; plain squared-ReLU MLPs and experts; Mamba-2 of
    mamba_num_heads·mamba_head_dim channels, its scan state at mamba_ssm_cache_dtype. Latent MoE
    (moe_latent_size: Nemotron 3 Super, Ultra) and linear biases are refused."""
    L, pattern = _get(c, "num_hidden_layers"), _get(c, "hybrid_override_pattern")
    if len(pattern) != L or set(pattern) - _NEMOTRON_H_BLOCKS.keys():
        raise SpecError(
            f"config.json: hybrid_override_pattern must be {L} letters of M, *, -, E (one a "
            "layer); fix the config"
        )
    if c.get("moe_latent_size"):
        raise SpecError("config.json: latent MoE (moe_latent_size) is not modelled")
    biases = [k for k in ("attention_bias", "mlp_bias", "use_bias", "mamba_proj_bias") if c.get(k)]
    if biases:
        raise SpecError(f"config.json: Nemotron-H biases ({', '.join(biases)}) are not modelled")
    if (act := c.get("mlp_hidden_act", "relu2")) != "relu2":
        raise SpecError(f"config.json: Nemotron-H mlp_hidden_act '{act}' is not modelled")
    D, N = _get(c, "hidden_size"), _get(c, "num_attention_heads")
    s: dict = dict(
        layers=L,
        d_model=D,
        heads=N,
        kv_heads=c.get("num_key_value_heads") or N,
        head_dim=c.get("head_dim") or D // N,
        d_ff=_get(c, "intermediate_size") if "-" in pattern else 0,
        mlp="plain",
        activation="relu2",
        vocab_size=_get(c, "vocab_size"),
        tied_embeddings=bool(c.get("tie_word_embeddings", False)),
        position="none",
        max_context=_get(c, "max_position_embeddings", 1 << 20),
        norms_per_layer=1,
        layer_pattern=[_NEMOTRON_H_BLOCKS[b] for b in pattern],
    )
    if "*" not in pattern:
        s.update(heads=0, kv_heads=0, head_dim=0)
    if "M" in pattern:
        s["ssm"] = {
            "kind": "mamba2",
            "d_state": _get(c, "ssm_state_size"),
            "d_conv": _get(c, "conv_kernel"),
            "head_dim": _get(c, "mamba_head_dim"),
            "num_heads": _get(c, "mamba_num_heads"),
            "n_groups": c.get("n_groups", 1),
            "conv_bias": bool(c.get("use_conv_bias", True)),
            "state_dtype": "fp32" if c.get("mamba_ssm_cache_dtype") == "float32" else None,
        }
    if "E" in pattern:  # the shared experts are one MLP of moe_shared_expert_intermediate_size
        shared = _get(c, "moe_shared_expert_intermediate_size", 0)
        s["moe"] = {
            "experts": _get(c, "n_routed_experts"),
            "top_k": _get(c, "num_experts_per_tok"),
            "expert_d_ff": _get(c, "moe_intermediate_size"),
            "shared_experts": 1 if shared and c.get("n_shared_experts", 1) else 0,
            "shared_d_ff": shared or None,
        }
    return s


def _gptj(c: Config) -> dict:
    """GPT-J: parallel attention + MLP off one LayerNorm; biases on fc_in/fc_out and the LM
    head only; partial rotary (rotary_dim of each head)."""
    D, N = _get(c, "n_embd"), _get(c, "n_head")
    act = c.get("activation_function", "gelu_new")
    if act not in _ACT:
        raise SpecError(f"config.json: activation '{act}' is not modelled")
    return dict(
        layers=_get(c, "n_layer"),
        d_model=D,
        heads=N,
        kv_heads=N,
        head_dim=D // N,
        d_ff=c.get("n_inner") or 4 * D,
        mlp="plain",
        activation=_ACT[act],
        vocab_size=_get(c, "vocab_size"),
        tied_embeddings=bool(c.get("tie_word_embeddings", False)),
        norm="layernorm",
        max_context=_get(c, "n_positions", 2048),
        linear_bias="mlp",
        lm_head_bias=True,
        parallel_block=True,
        norms_per_layer=1,
        attention={"kind": "mha"},
    )


def _dbrx(c: Config) -> dict:
    """DBRX: d_model/n_heads/n_layers at the top, kv heads in attn_config, experts in
    ffn_config; GLU experts; LayerNorm."""
    D, N = _get(c, "d_model"), _get(c, "n_heads")
    attn, ffn = c.get("attn_config") or {}, c.get("ffn_config") or {}
    act = (ffn.get("ffn_act_fn") or {}).get("name", "silu")
    if act not in _ACT:
        raise SpecError(f"config.json: ffn_act_fn '{act}' is not modelled")
    return dict(
        layers=_get(c, "n_layers"),
        d_model=D,
        heads=N,
        kv_heads=attn.get("kv_n_heads", 1),
        head_dim=D // N,
        activation=_ACT[act],
        vocab_size=_get(c, "vocab_size"),
        tied_embeddings=bool(c.get("tie_word_embeddings", False)),
        norm="layernorm",
        max_context=_get(c, "max_seq_len", 2048),
        moe={
            "experts": _get(ffn, "moe_num_experts"),
            "top_k": _get(ffn, "moe_top_k"),
            "expert_d_ff": _get(ffn, "ffn_hidden_size"),
        },
    )


def _gpt_oss(c: Config) -> dict:
    """gpt-oss: every layer MoE with biased experts and router, biased attention with one
    sink per head, sliding/full layers as `layer_types` lists them."""
    s = _decoder(c, tie_default=False)
    top_k = c.get("num_experts_per_tok") or _get(c, "experts_per_token")
    s["moe"] = {
        "experts": _get(c, "num_local_experts"),
        "top_k": top_k,
        "expert_d_ff": s.pop("d_ff"),
    }
    s["d_ff"] = 0
    s["linear_bias"] = "all" if c.get("attention_bias", True) else "none"
    s["layer_pattern"] = _layer_types(
        c, c.get("layer_types") or ["sliding_attention", "full_attention"]
    )
    s["attention"] = {"sliding_window": _get(c, "sliding_window"), "sinks": True}
    return s


def checkpoint_weights(c: Config, spec: dict) -> str | None:
    """The released checkpoint's weight formats from config.json's `quantization_config`, in
    --weights syntax; None for an unquantised checkpoint. GPTQ/AWQ: int<b>-g<group> (with
    -sym when there is no zero point; group_size -1 is per channel); mxfp4 (gpt-oss): the
    routed experts, the rest at the config dtype; fp8: every block matrix, embedding, LM head
    and norms at the config dtype; bitsandbytes: nf4 / nf4-dq / int8."""
    q = c.get("quantization_config") or c.get("text_config", {}).get("quantization_config")
    if not q:
        return None
    method = str(q.get("quant_method", "")).lower()
    dense = _DTYPE.get(str(c.get("torch_dtype", "bfloat16")), "bf16")
    if method in ("gptq", "awq"):
        bits, group = (
            int(q.get("bits", q.get("w_bit", 4))),
            int(q.get("group_size", q.get("q_group_size", 128))),
        )
        symmetric = bool(q.get("sym", False)) if method == "gptq" else not q.get("zero_point", True)
        if bits not in (4, 8):
            raise SpecError(f"quantization_config: {bits}-bit {method} is not modelled")
        if group == -1:
            return f"int{bits}"
        return f"int{bits}-g{group}" + ("-sym" if symmetric else "")
    if method == "mxfp4":
        return f"{dense},experts=mxfp4" if spec.get("moe") else "mxfp4"
    if method == "fp8":
        return f"fp8,embedding={dense},lm_head={dense},norms={dense}"
    if method == "bitsandbytes":
        if q.get("load_in_8bit"):
            return "int8"
        kind = str(q.get("bnb_4bit_quant_type", "nf4"))
        if kind != "nf4":
            raise SpecError(f"quantization_config: bitsandbytes {kind} is not modelled")
        return "nf4-dq" if q.get("bnb_4bit_use_double_quant") else "nf4"
    if method == "modelopt":
        return modelopt_weights(q, dense)
    raise SpecError(
        f"quantization_config: quant_method '{method}' is not modelled (known: "
        "gptq, awq, mxfp4, fp8, bitsandbytes, modelopt); remove it to import the "
        "shapes"
    )


def checkpoint_activations(c: Config) -> str | None:
    """The activation format of a quantised checkpoint's kernels: fp8 for an fp8 checkpoint
    that quantises activations (`activation_scheme` dynamic or static; ModelOpt FP8), else
    None (16-bit: weight-only)."""
    q = c.get("quantization_config") or c.get("text_config", {}).get("quantization_config")
    if not isinstance(q, dict):
        return None
    method = str(q.get("quant_method", "")).lower()
    if method == "fp8" and str(q.get("activation_scheme", "")).lower() in ("dynamic", "static"):
        return "fp8"
    if method == "modelopt" and str(q.get("quant_algo", "")).upper() == "FP8":
        return "fp8"
    return None


def modelopt_weights(q: Config, dense: str = "bf16") -> str:
    """NVIDIA ModelOpt checkpoints (hf_quant_config.json's `quantization`, or a config.json
    quantization_config with quant_method modelopt): FP8 and NVFP4 (E4M3 scale per 16) on the
    block matrices, W4A16_AWQ as int4-g<group_size>; the LM head (in exclude_modules) and the
    embedding and norms stay at the config dtype."""
    algo = str(q.get("quant_algo", "")).upper()
    formats = {
        "FP8": "fp8",
        "NVFP4": "nvfp4",
        "W4A16_AWQ": f"int4-g{int(q.get('group_size', 128))}",
    }
    if algo not in formats:
        raise SpecError(
            f"ModelOpt quant_algo '{algo}' is not modelled; known: {', '.join(formats)}"
        )
    ends = [f"{g}={dense}" for g in ("embedding", "lm_head", "norms")]
    return ",".join([formats[algo], *ends])


SUPPORTED: dict[str, Callable[[Config], dict]] = {
    "LlamaForCausalLM": _llama,
    "MistralForCausalLM": _llama,
    "Phi3ForCausalLM": _llama,
    "MixtralForCausalLM": _mixtral,
    "Qwen2ForCausalLM": _qwen2,
    "Qwen3ForCausalLM": _qwen3,
    "Qwen3MoeForCausalLM": _qwen3_moe,
    "Gemma2ForCausalLM": _gemma2,
    "Gemma3ForCausalLM": _gemma3,
    "Gemma3ForConditionalGeneration": _gemma3,
    "DeepseekV2ForCausalLM": _deepseek,
    "DeepseekV3ForCausalLM": _deepseek,
    "FalconForCausalLM": _falcon,
    "GPTNeoXForCausalLM": _gpt_neox,
    "MambaForCausalLM": _mamba,
    "Mamba2ForCausalLM": _mamba2,
    "JambaForCausalLM": _jamba,
    "NemotronHForCausalLM": _nemotron_h,
    "GPTJForCausalLM": _gptj,
    "DbrxForCausalLM": _dbrx,
    "GptOssForCausalLM": _gpt_oss,
    "Llama4ForConditionalGeneration": _llama4,
    "Llama4ForCausalLM": _llama4,
}


def spec_name(text: str) -> str:
    """'mistralai/Mixtral-8x7B-v0.1' -> 'mixtral-8x7b-v0.1' (a valid spec name)."""
    base = text.rstrip("/").split("/")[-1].lower()
    name = re.sub(r"[^a-z0-9.\-]+", "-", base).strip("-.")
    if not name:
        raise SpecError(f"cannot make a spec name from '{text}'; pass `name`")
    return name


def spec_from_hf_config(config: Config, name: str, source: str) -> ModelSpec:
    """Translate one config.json (already parsed) into a validated ModelSpec (`check_config`
    first: every value read is checked for type and range)."""
    check_config(config, source)
    config = _without_nulls(config)
    archs = config.get("architectures") or []
    arch = next((a for a in archs if a in SUPPORTED), None)
    if arch is None:
        got = ", ".join(archs) if archs else "none given"
        raise SpecError(
            f"{source}: unsupported architectures ({got}); supported: "
            f"{', '.join(sorted(SUPPORTED))}"
        )
    fields = SUPPORTED[arch](config)
    weights = checkpoint_weights(config, fields)
    if weights is not None:
        fields["checkpoint_weights"] = weights
        if (acts := checkpoint_activations(config)) is not None:
            fields["checkpoint_activations"] = acts
        fields["checkpoint_source"] = f"{source}: quantization_config"
    data = {
        "name": spec_name(name),
        "display_name": name,
        "family": config.get("model_type", arch),
        "source": f"{source} ({arch}, imported by `roofline models import`)",
        **fields,
    }
    try:
        return ModelSpec.model_validate(data)
    except ValidationError as e:
        raise SpecError(f"{source}: the imported spec is invalid: {field_error(e)}") from None


@dataclass(frozen=True)
class CheckpointCheck:
    """The spec's weight bytes at the checkpoint dtype against the index's total_size."""

    checkpoint_bytes: int
    dtype: str
    spec_weights_bytes: float

    @property
    def difference_bytes(self) -> float:
        return self.spec_weights_bytes - self.checkpoint_bytes

    @property
    def relative_difference(self) -> float:
        return self.difference_bytes / self.checkpoint_bytes


def check_checkpoint(spec: ModelSpec, config: Config, total_size_bytes: int) -> CheckpointCheck:
    """Compare total_size of model.safetensors.index.json with the spec's weight bytes at the
    checkpoint's formats: `checkpoint_weights` when the config is quantised, else params ·
    bytes at its torch_dtype (bf16 when the config does not say)."""
    if spec.checkpoint_weights is not None:
        p = Precision(spec.checkpoint_weights)
        return CheckpointCheck(
            int(total_size_bytes), spec.checkpoint_weights, weights_bytes(spec, p)
        )
    dtype = _DTYPE.get(str(config.get("torch_dtype", "bfloat16")), "bf16")
    return CheckpointCheck(
        int(total_size_bytes), dtype, spec.total_params * bytes_per_element(dtype)
    )
