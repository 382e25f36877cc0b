"""ModelSpec: a decoder's architecture, in scaling-book letters.

L layers, D model dim, N query heads, K kv heads, H head dim, F ffn dim, V vocab.
A dense transformer needs only those. Other families add optional, validated blocks:
`attention` (MLA latents, sliding window, cross-layer KV sharing), `moe` (routed experts),
`ssm` (Mamba-1/2 mixers), `linear_attention`, `diffusion`, and a `layer_pattern` saying which
mixer each layer runs (cycled over the L layers). Every layer is described by a `LayerKind`;
`layer_groups` counts the distinct kinds, and parameter counts, KV sizes and operators are all
computed from those groups, once, for every family.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


Mixer = Literal["global", "local", "chunked", "linear", "ssm"]
#: Mixers that are softmax attention over a KV cache: full, sliding-window, chunked.
SOFTMAX_MIXERS = ("global", "local", "chunked")
Ffn = Literal["dense", "moe", "none"]


@dataclass(frozen=True)
class ParamCounts:
    """Parameter count by named term (elements). The total is derived, never stored.

    `attention` holds every token mixer's weights (softmax, MLA, linear attention), `ssm` the
    Mamba mixers, `mlp` the dense FFNs, `moe` routed + shared experts and routers."""

    embedding: int
    positional: int
    attention: int
    mlp: int
    norms: int
    lm_head: int
    moe: int = 0
    ssm: int = 0

    @property
    def total(self) -> int:
        return (
            self.embedding
            + self.positional
            + self.attention
            + self.mlp
            + self.norms
            + self.lm_head
            + self.moe
            + self.ssm
        )


class AttentionSpec(_Frozen):
    """How softmax attention is laid out beyond N, K, H."""

    kind: Literal["mha", "gqa", "mla"] = Field(
        default="gqa",
        description="mha: K = N; gqa: any K dividing N (MQA is K = 1); mla: "
        "DeepSeek multi-head latent attention",
    )
    # MLA (DeepSeek-V2/V3): KV cached as one latent of kv_lora_rank plus a shared RoPE key.
    kv_lora_rank: int | None = Field(default=None, gt=0)
    q_lora_rank: int | None = Field(default=None, gt=0, description="None: full-rank Q")
    qk_rope_head_dim: int | None = Field(default=None, gt=0)
    qk_nope_head_dim: int | None = Field(default=None, gt=0)
    v_head_dim: int | None = Field(default=None, gt=0)
    mla_decode: Literal["auto", "absorbed", "naive"] = Field(
        default="auto",
        description="absorbed: W_UK folded into the query and W_UV applied "
        "after attention, so scores run over the latent; naive: up-project every cached latent "
        "to full K, V; auto: the path with fewer FLOPs in each step (naive for prefill, absorbed "
        "for decode, as DeepSeek's and vLLM's MLA kernels do)",
    )
    qk_norm: bool = Field(default=False, description="RMSNorm on q and k per head (Qwen3, Gemma-3)")
    sinks: bool = Field(
        default=False,
        description="one learned logit per query head joins "
        "each softmax denominator (gpt-oss attention sinks): N weights a layer",
    )
    sliding_window: int | None = Field(
        default=None, gt=0, description="W, tokens a local layer attends to (itself included)"
    )
    attention_chunk_size: int | None = Field(
        default=None,
        gt=0,
        description="C, tokens per attention chunk of a chunked layer: a token at 0-based "
        "position p attends to positions C·floor(p/C) ... p (Llama 4)",
    )
    kv_share: int = Field(
        default=1,
        ge=1,
        description="consecutive attention layers of the same "
        "kind (local/global) sharing one KV cache, in groups of this many",
    )
    kv_share_map: tuple[int, ...] | None = Field(
        default=None, description="explicit map: layer i reads the KV of layer map[i] <= i"
    )

    @model_validator(mode="after")
    def _mla_fields(self) -> AttentionSpec:
        mla = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
        if self.kind == "mla":
            missing = [f for f in mla if getattr(self, f) is None]
            if missing:
                raise ValueError(f"kind 'mla' needs {', '.join(missing)}")
        elif any(getattr(self, f) is not None for f in (*mla, "q_lora_rank")):
            raise ValueError(f"MLA fields given but kind is '{self.kind}'; set kind: mla")
        if self.kv_share > 1 and self.kv_share_map is not None:
            raise ValueError("give kv_share or kv_share_map, not both")
        return self


class MoESpec(_Frozen):
    """Mixture of experts replacing the dense FFN on some layers."""

    experts: int = Field(gt=0, description="E, routed experts per MoE layer")
    top_k: int = Field(gt=0, description="k, routed experts per token")
    expert_d_ff: int = Field(gt=0, description="F of one routed expert")
    shared_experts: int = Field(default=0, ge=0, description="always-on experts")
    shared_d_ff: int | None = Field(
        default=None, gt=0, description="F of one shared expert (default: expert_d_ff)"
    )
    dense_first_layers: int = Field(default=0, ge=0, description="leading layers with a dense FFN")
    period: int = Field(default=1, ge=1, description="every period-th layer is MoE ...")
    offset: int = Field(default=0, ge=0, description="... starting at this layer index")

    @model_validator(mode="after")
    def _k_le_e(self) -> MoESpec:
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) exceeds experts ({self.experts})")
        if self.offset >= self.period:
            raise ValueError(f"offset ({self.offset}) must be below period ({self.period})")
        return self

    def is_moe_layer(self, i: int) -> bool:
        return i >= self.dense_first_layers and i % self.period == self.offset


class SSMSpec(_Frozen):
    """A Mamba mixer: d_inner = expand·D channels, each with a d_state-wide recurrent state."""

    kind: Literal["mamba1", "mamba2"]
    d_state: int = Field(gt=0)
    d_conv: int = Field(gt=0, description="causal conv kernel width")
    expand: int = Field(default=2, gt=0)
    dt_rank: int | None = Field(
        default=None, gt=0, description="mamba1: rank of Δ (default ceil(D/16))"
    )
    head_dim: int | None = Field(default=None, gt=0, description="mamba2: channels per head")
    n_groups: int = Field(default=1, gt=0, description="mamba2: B/C groups")
    conv_bias: bool = True
    inner_norms: bool = Field(default=False, description="Jamba: RMSNorm on Δ, B and C")

    @model_validator(mode="after")
    def _kind_fields(self) -> SSMSpec:
        if self.kind == "mamba2" and self.head_dim is None:
            raise ValueError("mamba2 needs head_dim")
        if self.kind == "mamba1" and self.head_dim is not None:
            raise ValueError("head_dim is a mamba2 field; mamba1 has no heads")
        return self


class LinearAttentionSpec(_Frozen):
    """Linear (lightning) attention: a d_k x d_v state per head instead of a KV cache.
    Heads and head dim are the model's N and H; `output_gate` adds a D->N·H sigmoid gate."""

    output_gate: bool = True
    norm: bool = Field(default=True, description="RMSNorm over N·H before the output projection")


class DiffusionSpec(_Frozen):
    """A masked-diffusion LM: bidirectional attention, no KV cache, answers refined in steps."""

    steps: int = Field(gt=0, description="refinement steps N for gen_length tokens")
    gen_length: int = Field(gt=0, description="tokens generated per answer")
    block_length: int | None = Field(default=None, gt=0, description="semi-autoregressive block")

    @model_validator(mode="after")
    def _blocks(self) -> DiffusionSpec:
        b = self.block_length
        if b is not None and (self.gen_length % b or self.steps % (self.gen_length // b)):
            raise ValueError(
                f"gen_length ({self.gen_length}) must be a multiple of block_length "
                f"({b}) and steps ({self.steps}) a multiple of the block count"
            )
        return self


@dataclass(frozen=True)
class LayerKind:
    """What one layer runs: its token mixer, its FFN, and whether it stores its own KV."""

    mixer: Mixer
    ffn: Ffn
    owns_kv: bool = True


@dataclass(frozen=True)
class LayerGroup:
    kind: LayerKind
    count: int


class ModelSpec(_Frozen):
    """A decoder-only LM: dense transformer by default, other families through the blocks."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    display_name: str
    aliases: tuple[str, ...] = ()
    family: str
    source: str = Field(min_length=1, description="where the architecture numbers come from")
    published_params: int | None = Field(default=None, gt=0)
    published_params_source: str = ""
    notes: str = ""

    layers: int = Field(gt=0, description="L")
    d_model: int = Field(gt=0, description="D")
    heads: int = Field(default=0, ge=0, description="N, query heads (0: no attention layers)")
    kv_heads: int = Field(default=0, ge=0, description="K, key/value heads (K=N: MHA, K=1: MQA)")
    head_dim: int = Field(default=0, ge=0, description="H")
    d_ff: int = Field(default=0, ge=0, description="F of the dense FFN (0: no dense FFN)")
    mlp: Literal["gated", "plain"] = "gated"
    activation: Literal["silu", "gelu", "relu", "gelu_tanh"] = "silu"
    vocab_size: int = Field(gt=0, description="V")
    tied_embeddings: bool = False
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    position: Literal["rope", "learned", "alibi", "none"] = "rope"
    max_context: int = Field(gt=0)
    linear_bias: Literal["none", "qkv", "mlp", "all"] = Field(
        default="none",
        description="which projections carry a bias: qkv (Qwen2), mlp (GPT-J: "
        "fc_in and fc_out only), all (every attention and MLP projection)",
    )
    lm_head_bias: bool = Field(default=False, description="the LM head adds a V-wide bias (GPT-J)")
    checkpoint_weights: str | None = Field(
        default=None,
        description="weight formats of the released checkpoint, as --weights "
        "takes them (gpt-oss: 'bf16,experts=mxfp4'); None: one 16-bit format",
    )
    parallel_block: bool = Field(
        default=False, description="attention and MLP read the same input (GPT-J, Falcon)"
    )
    norms_per_layer: int = Field(default=2, ge=1, le=4)

    layer_pattern: tuple[Mixer, ...] = Field(
        default=("global",),
        min_length=1,
        description="mixer of each layer, cycled over L: "
        "global (full softmax attention), local (sliding window), chunked (attention within "
        "fixed chunks of attention.attention_chunk_size tokens), linear, ssm",
    )
    attention: AttentionSpec = AttentionSpec()
    moe: MoESpec | None = None
    ssm: SSMSpec | None = None
    linear_attention: LinearAttentionSpec | None = None
    diffusion: DiffusionSpec | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        kinds = set(self.layer_pattern[: self.layers])
        a = self.attention
        if kinds & {*SOFTMAX_MIXERS, "linear"} and not (self.heads and self.head_dim):
            raise ValueError("attention layers need heads and head_dim")
        if kinds & set(SOFTMAX_MIXERS) and a.kind != "mla":
            if not self.kv_heads:
                raise ValueError("attention layers need kv_heads")
            if self.heads % self.kv_heads:
                raise ValueError(
                    f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})"
                )
            if a.kind == "mha" and self.kv_heads != self.heads:
                raise ValueError(
                    f"kind 'mha' needs kv_heads = heads ({self.heads}), "
                    f"got {self.kv_heads}; use kind: gqa"
                )
        if "local" in kinds and a.sliding_window is None:
            raise ValueError(
                "layer_pattern has 'local' layers but attention.sliding_window is not set"
            )
        if a.sliding_window is not None:
            if "local" not in kinds:
                raise ValueError(
                    "attention.sliding_window is set but no layer is 'local'; "
                    "add 'local' to layer_pattern"
                )
            if a.sliding_window > self.max_context:
                raise ValueError(
                    f"sliding_window ({a.sliding_window}) exceeds max_context "
                    f"({self.max_context}); the window would never bind"
                )
        if "chunked" in kinds and a.attention_chunk_size is None:
            raise ValueError(
                "layer_pattern has 'chunked' layers but attention.attention_chunk_size is not set"
            )
        if a.attention_chunk_size is not None:
            if "chunked" not in kinds:
                raise ValueError(
                    "attention.attention_chunk_size is set but no layer is 'chunked'; "
                    "add 'chunked' to layer_pattern"
                )
            if a.kind == "mla":
                raise ValueError("chunked attention is not modelled for MLA layers")
            if a.attention_chunk_size > self.max_context:
                raise ValueError(
                    f"attention_chunk_size ({a.attention_chunk_size}) exceeds max_context "
                    f"({self.max_context}); the chunks would never bind"
                )
        if "ssm" in kinds and self.ssm is None:
            raise ValueError("layer_pattern has 'ssm' layers but no ssm block")
        if "ssm" not in kinds and self.ssm is not None:
            raise ValueError("ssm block given but no layer is 'ssm'")
        if "linear" in kinds and self.linear_attention is None:
            raise ValueError("layer_pattern has 'linear' layers but no linear_attention block")
        if self.ssm is not None and self.ssm.kind == "mamba2" and self.d_inner % self.ssm.head_dim:
            raise ValueError(
                f"ssm d_inner ({self.d_inner}) must be a multiple of head_dim ({self.ssm.head_dim})"
            )
        if any(k.ffn == "dense" for k in self.layer_kinds) and not self.d_ff:
            raise ValueError("layers with a dense FFN need d_ff > 0")
        if self.moe is not None and not any(k.ffn == "moe" for k in self.layer_kinds):
            raise ValueError(
                "moe block given but no layer is a MoE layer (check "
                "dense_first_layers, period, offset)"
            )
        m = a.kv_share_map
        if m is not None:
            if len(m) != self.layers:
                raise ValueError(f"kv_share_map has {len(m)} entries for {self.layers} layers")
            mixers = self._mixers
            for i, j in enumerate(m):
                if (
                    not 0 <= j <= i
                    or m[j] != j
                    or mixers[i] != mixers[j]
                    or mixers[i] not in SOFTMAX_MIXERS
                ):
                    raise ValueError(
                        f"kv_share_map[{i}] = {j}: a layer may only reuse the KV of an earlier "
                        "attention layer of the same kind that owns its KV"
                    )
        return self

    # ---- layers ------------------------------------------------------------------------
    @property
    def _mixers(self) -> list[Mixer]:
        p = self.layer_pattern
        return [p[i % len(p)] for i in range(self.layers)]

    @property
    def layer_kinds(self) -> tuple[LayerKind, ...]:
        """Per layer i: mixer from the cycled pattern, FFN from the MoE block, KV ownership
        from cross-layer sharing (the first of each share group owns the cache)."""
        mixers = self._mixers
        a = self.attention
        seen: Counter[str] = Counter()
        kinds = []
        for i, mixer in enumerate(mixers):
            if self.moe is not None and self.moe.is_moe_layer(i):
                ffn: Ffn = "moe"
            else:
                ffn = "dense" if self.d_ff else "none"
            owns = True
            if mixer in SOFTMAX_MIXERS:
                if a.kv_share_map is not None:
                    owns = a.kv_share_map[i] == i
                else:
                    owns = seen[mixer] % a.kv_share == 0
                seen[mixer] += 1
            kinds.append(LayerKind(mixer, ffn, owns))
        return tuple(kinds)

    @property
    def layer_groups(self) -> tuple[LayerGroup, ...]:
        """Distinct layer kinds with their counts, in order of first appearance."""
        counts = Counter(self.layer_kinds)
        return tuple(LayerGroup(k, n) for k, n in counts.items())

    def layers_with(self, mixer: Mixer) -> int:
        return sum(k.mixer == mixer for k in self.layer_kinds)

    # ---- derived widths ----------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        """N·H, width of the query projection (MLA: N·(nope + rope))."""
        if self.attention.kind == "mla":
            return self.heads * self.mla_qk_head_dim
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """K·H, width of one of the key/value projections."""
        return self.kv_heads * self.head_dim

    @property
    def mla_qk_head_dim(self) -> int:
        a = self.attention
        return a.qk_nope_head_dim + a.qk_rope_head_dim

    @property
    def attn_out_dim(self) -> int:
        """Width entering the output projection: N·H (MLA: N·v_head_dim)."""
        if self.attention.kind == "mla":
            return self.heads * self.attention.v_head_dim
        return self.heads * self.head_dim

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices of D×F in one MLP: 3 when gated (gate, up, down), else 2."""
        return 3 if self.mlp == "gated" else 2

    @property
    def norm_params(self) -> int:
        """Parameters of one norm: scale (D), plus bias (D) for LayerNorm."""
        return self.d_model * (2 if self.norm == "layernorm" else 1)

    @property
    def d_inner(self) -> int:
        """SSM channels: expand·D."""
        return self.ssm.expand * self.d_model if self.ssm else 0

    @property
    def ssm_dt_rank(self) -> int:
        s = self.ssm
        return s.dt_rank if s.dt_rank is not None else math.ceil(self.d_model / 16)

    @property
    def ssm_heads(self) -> int:
        """Mamba-2 heads: d_inner / head_dim."""
        return self.d_inner // self.ssm.head_dim

    @property
    def ssm_conv_dim(self) -> int:
        """Channels the causal conv runs over: d_inner (Mamba-1), + 2·groups·d_state (Mamba-2)."""
        s = self.ssm
        extra = 2 * s.n_groups * s.d_state if s.kind == "mamba2" else 0
        return self.d_inner + extra

    # ---- per-layer parameters ----------------------------------------------------------
    def mixer_params(self, kind: LayerKind) -> int:
        """Weights of one layer's token mixer (shapes as the checkpoints store them)."""
        D, N, H = self.d_model, self.heads, self.head_dim
        a = self.attention
        if kind.mixer in SOFTMAX_MIXERS:
            norm = (2 * H if a.qk_norm else 0) + (N if a.sinks else 0)
            if a.kind == "mla":
                qk = self.mla_qk_head_dim
                q = (
                    D * N * qk
                    if a.q_lora_rank is None
                    else D * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * N * qk
                )
                kv = 0
                if kind.owns_kv:  # down (latent + rope key), latent norm, up (K_nope and V)
                    kv = (
                        D * (a.kv_lora_rank + a.qk_rope_head_dim)
                        + a.kv_lora_rank
                        + a.kv_lora_rank * N * (a.qk_nope_head_dim + a.v_head_dim)
                    )
                return q + kv + self.attn_out_dim * D + norm
            kv_out = 2 * self.kv_dim if kind.owns_kv else 0
            bias = {
                "none": 0,
                "mlp": 0,
                "qkv": self.q_dim + kv_out,
                "all": self.q_dim + kv_out + D,
            }[self.linear_bias]
            return D * (self.q_dim + kv_out) + self.q_dim * D + bias + norm
        if kind.mixer == "linear":
            la = self.linear_attention
            nh = N * H
            return D * 3 * nh + (D * nh if la.output_gate else 0) + (nh if la.norm else 0) + nh * D
        return 0

    def ssm_params(self) -> int:
        """One Mamba mixer: in_proj, conv, Δ/B/C projections, A, D skip, out_proj."""
        s, D, Di = self.ssm, self.d_model, self.d_inner
        conv = self.ssm_conv_dim * s.d_conv + (self.ssm_conv_dim if s.conv_bias else 0)
        if s.kind == "mamba1":
            R = self.ssm_dt_rank
            inner_norms = R + 2 * s.d_state if s.inner_norms else 0
            return (
                D * 2 * Di
                + conv
                + Di * (R + 2 * s.d_state)
                + R * Di
                + Di
                + Di * s.d_state
                + Di
                + Di * D
                + inner_norms
            )
        nh = self.ssm_heads
        in_proj = D * (2 * Di + 2 * s.n_groups * s.d_state + nh)  # z, x, B, C, Δ
        return in_proj + conv + 3 * nh + Di + Di * D  # Δ bias, A, D; gated norm; out_proj

    def ffn_params(self, ffn: Ffn) -> int:
        D, mats = self.d_model, self.mlp_matrices
        if ffn == "dense":
            bias = (mats - 1) * self.d_ff + D if self.linear_bias in ("mlp", "all") else 0
            return mats * D * self.d_ff + bias
        if ffn == "moe":
            e = self.moe
            shared_f = e.shared_d_ff or e.expert_d_ff
            bias = 0  # linear_bias all: every expert's projections and the router (gpt-oss)
            if self.linear_bias == "all":
                bias = (
                    e.experts * ((mats - 1) * e.expert_d_ff + D) + e.experts
                ) + e.shared_experts * ((mats - 1) * shared_f + D)
            return (
                e.experts * mats * D * e.expert_d_ff
                + e.shared_experts * mats * D * shared_f
                + D * e.experts
                + bias
            )  # router
        return 0

    @property
    def params(self) -> ParamCounts:
        D, V = self.d_model, self.vocab_size
        attn = mlp = moe = ssm = 0
        for g in self.layer_groups:
            if g.kind.mixer == "ssm":
                ssm += g.count * self.ssm_params()
            else:
                attn += g.count * self.mixer_params(g.kind)
            if g.kind.ffn == "moe":
                moe += g.count * self.ffn_params("moe")
            else:
                mlp += g.count * self.ffn_params(g.kind.ffn)
        return ParamCounts(
            embedding=V * D,
            positional=self.max_context * D if self.position == "learned" else 0,
            attention=attn,
            mlp=mlp,
            norms=(self.layers * self.norms_per_layer + 1) * self.norm_params,
            lm_head=(0 if self.tied_embeddings else V * D) + (V if self.lm_head_bias else 0),
            moe=moe,
            ssm=ssm,
        )

    @property
    def total_params(self) -> int:
        return self.params.total

    @property
    def active_params(self) -> int:
        """Parameters one token runs through: all but the (E - k) routed experts it skips."""
        if self.moe is None:
            return self.total_params
        e = self.moe
        skipped = (e.experts - e.top_k) * (
            self.mlp_matrices * self.d_model * e.expert_d_ff + self.expert_bias_params
        )
        return self.total_params - self.layers_moe * skipped

    @property
    def expert_bias_params(self) -> int:
        """Biases of one routed expert ((2 or 1)·F + D) when linear_bias is 'all', else 0."""
        if self.moe is None or self.linear_bias != "all":
            return 0
        return (self.mlp_matrices - 1) * self.moe.expert_d_ff + self.d_model

    @property
    def layers_moe(self) -> int:
        return sum(k.ffn == "moe" for k in self.layer_kinds)

    @property
    def routed_expert_params(self) -> int:
        """Weights of the routed experts over all MoE layers, L_moe·E·(2 or 3)·D·F_expert
        (what expert parallelism shards; routers and shared experts excluded)."""
        if self.moe is None:
            return 0
        e = self.moe
        return self.layers_moe * e.experts * self.mlp_matrices * self.d_model * e.expert_d_ff

    # ---- cache and state ----------------------------------------------------------------
    @property
    def kv_elems_per_token_layer(self) -> int:
        """Cached values per token in one KV-owning attention layer: 2·K·H, or for MLA the
        latent plus the shared RoPE key, kv_lora_rank + qk_rope_head_dim."""
        a = self.attention
        if a.kind == "mla":
            return a.kv_lora_rank + a.qk_rope_head_dim
        return 2 * self.kv_dim

    def kv_owner_layers(self, mixer: Literal["global", "local", "chunked"]) -> int:
        return sum(k.mixer == mixer and k.owns_kv for k in self.layer_kinds)

    @property
    def kv_elems_per_token(self) -> int:
        """Cached values per token over all KV-owning attention layers, before any window or
        chunk: 2·L·K·H for a dense model (MLA: L·(kv_lora_rank + rope dim))."""
        owners = sum(self.kv_owner_layers(k) for k in SOFTMAX_MIXERS)
        return owners * self.kv_elems_per_token_layer

    @property
    def state_elems_per_layer(self) -> int:
        """Constant recurrent state of one SSM layer: d_inner·d_state (scan) plus
        conv_dim·d_conv (conv window, as the reference implementations cache it)."""
        if self.ssm is None:
            return 0
        return self.d_inner * self.ssm.d_state + self.ssm_conv_dim * self.ssm.d_conv

    @property
    def linear_state_elems_per_layer(self) -> int:
        """Linear attention state: one d_k x d_v = H x H matrix per head, N·H²."""
        return self.heads * self.head_dim**2 if self.linear_attention else 0

    @property
    def state_elems_per_sequence(self) -> int:
        """Context-independent state of one sequence over all layers."""
        return (
            self.layers_with("ssm") * self.state_elems_per_layer
            + self.layers_with("linear") * self.linear_state_elems_per_layer
        )
