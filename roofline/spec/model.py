"""ModelSpec: a decoder's architecture, in scaling-book letters.

L layers, D model dim, N query heads, K kv heads, H head dim, F ffn dim, V vocab.
A dense transformer needs only those. Other families add validated blocks: `attention`
(softmax or MLA, with window, chunks, KV sharing), `ssm` (Mamba-1/2), `linear_attention` (the
token mixers of `roofline.spec.mixers`), `moe` (routed experts), `diffusion`, and a `layer_pattern`
saying which mixer each layer runs (cycled over the L layers). A pattern that also names FFN
entries (`dense`, `moe`) is single-block: each layer holds one block, a mixer with no FFN or an
FFN with no mixer (Nemotron-H's hybrid_override_pattern). Every layer is described by a
`LayerKind`; `layer_groups` counts the distinct kinds, and parameter counts, KV sizes and
operators are all computed from those groups, once, for every family.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, Self, get_args

from pydantic import Field, model_validator

from ..frozen import Frozen
from .mixers import (
    NO_MIXER,
    SOFTMAX_MIXERS,
    SSM,
    Attention,
    LinearMixer,
    MixerBlock,
    SoftmaxAttention,
)

Mixer = Literal["global", "local", "chunked", "linear", "ssm"]
Ffn = Literal["dense", "moe", "none"]
#: layer_pattern entries naming an FFN alone: a layer with no token mixer (Nemotron-H's '-', 'E')
FfnBlock = Literal["dense", "moe"]
FFN_BLOCKS: tuple[FfnBlock, ...] = get_args(FfnBlock)
#: One layer_pattern entry: a token mixer, or in a single-block pattern an FFN alone.
Block = Mixer | FfnBlock
#: A layer's token mixer; "none" on the FFN-only layers of a single-block pattern.
LayerMixer = Mixer | Literal["none"]


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
        return sum(dataclasses.astuple(self))


class MoESpec(Frozen):
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


class DiffusionSpec(Frozen):
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


def _mixer_of(block: Block) -> LayerMixer:
    """The token mixer of a layer_pattern entry: "none" for an FFN entry."""
    return "none" if block == "dense" or block == "moe" else block


@dataclass(frozen=True)
class LayerKind:
    """What one layer runs: its token mixer ("none": an FFN-only layer of a single-block
    pattern), its FFN ("none": a mixer-only layer), and whether it stores its own KV."""

    mixer: LayerMixer
    ffn: Ffn
    owns_kv: bool = True


@dataclass(frozen=True)
class LayerGroup:
    kind: LayerKind
    count: int


#: The most layers a spec may have: the calculator walks layers one by one, so a count beyond
#: any real model (the largest have about 100) would stall it. Every reader refuses more:
#: spec files (`catalog`), config.json (`hf_import`) and GGUF headers (`gguf_import`).
MAX_LAYERS = 100_000
#: The largest other size or count an importer accepts (beyond it 64-bit arithmetic overflows).
MAX_IMPORTED_SIZE = 2**40


class ModelSpec(Frozen):
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
    activation: Literal["silu", "gelu", "relu", "relu2", "gelu_tanh"] = Field(
        default="silu", description="the FFN activation (relu2: squared ReLU, Nemotron-H)"
    )
    vocab_size: int = Field(gt=0, description="V")
    tied_embeddings: bool = False
    mtp_layers: int = Field(
        default=0,
        ge=0,
        le=8,
        description=(
            "multi-token-prediction modules shipped with the checkpoint (config.json "
            "num_nextn_predict_layers): each one transformer layer that drafts the next token "
            "from the last hidden state and the embedding of the token before (the `mtp` "
            "drafter of `speculate`); not part of the main model's counts"
        ),
    )
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
        description="weight formats of the released checkpoint, as `weights` "
        "takes them (gpt-oss: 'bf16,experts=mxfp4'); None: one 16-bit format. Every command "
        "costs the model in them unless told otherwise",
    )
    checkpoint_activations: str | None = Field(
        default=None,
        description="the format the released checkpoint's kernels quantise activations to "
        "(DeepSeek-V3: fp8, `activation_scheme: dynamic`); None: 16-bit",
    )
    checkpoint_source: str = Field(
        default="", description="where the released formats are read (the checkpoint's config)"
    )
    parallel_block: bool = Field(
        default=False, description="attention and MLP read the same input (GPT-J, Falcon)"
    )
    norms_per_layer: int = Field(default=2, ge=1, le=4)

    layer_pattern: tuple[Block, ...] = Field(
        default=("global",),
        min_length=1,
        description="mixer of each layer, cycled over L: "
        "global (full softmax attention), local (sliding window), chunked (attention within "
        "fixed chunks of attention.attention_chunk_size tokens), linear, ssm. A pattern that "
        "also names FFNs, dense (an MLP of d_ff) or moe (the moe block), is single-block: "
        "each layer holds that one block, a mixer layer no FFN and an FFN layer no mixer "
        "(Nemotron-H's hybrid_override_pattern: M ssm, * global, - dense, E moe)",
    )
    attention: Attention = SoftmaxAttention()
    moe: MoESpec | None = None
    ssm: SSM | None = None
    linear_attention: LinearMixer | None = None
    diffusion: DiffusionSpec | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        kinds = frozenset(self.mixers)
        if kinds & {*SOFTMAX_MIXERS, "linear"} and not (self.heads and self.head_dim):
            raise ValueError("attention layers need heads and head_dim")
        self.attention.check(self, kinds)
        if "ssm" in kinds and self.ssm is None:
            raise ValueError("layer_pattern has 'ssm' layers but no ssm block")
        if "ssm" not in kinds and self.ssm is not None:
            raise ValueError("ssm block given but no layer is 'ssm'")
        if "linear" in kinds and self.linear_attention is None:
            raise ValueError("layer_pattern has 'linear' layers but no linear_attention block")
        if self.ssm is not None:
            self.ssm.check(self, kinds)
        if any(k.ffn == "dense" for k in self.layer_kinds) and not self.d_ff:
            raise ValueError("layers with a dense FFN need d_ff > 0")
        if "moe" in self.layer_pattern and self.moe is None:
            raise ValueError("layer_pattern has 'moe' layers but no moe block")
        e = self.moe
        if self.single_block and e and (e.dense_first_layers, e.period, e.offset) != (0, 1, 0):
            raise ValueError(
                "a single-block layer_pattern places the MoE layers itself ('moe' entries); "
                "drop moe.dense_first_layers, period and offset"
            )
        if self.moe is not None and not any(k.ffn == "moe" for k in self.layer_kinds):
            raise ValueError(
                "moe block given but no layer is a MoE layer (check "
                "dense_first_layers, period, offset)"
            )
        return self

    # ---- layers (computed once per spec: every step's operators read them) -------------
    _CACHED = ("mixers", "layer_kinds", "layer_groups", "placement_cache")

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with `update` applied; the layer caches are rebuilt from the new fields."""
        copy = super().model_copy(update=update, deep=deep)
        for name in self._CACHED:
            copy.__dict__.pop(name, None)
        return copy

    @cached_property
    def placement_cache(self) -> dict:
        """Shards and pipeline stages of this model by layout, built once
        (`placement.stages_of`); dropped by `model_copy` with the other caches."""
        return {}

    @property
    def single_block(self) -> bool:
        """Whether layer_pattern names FFN-only layers, so that every layer holds one block
        (a mixer with no FFN, or an FFN with no mixer)."""
        return any(b in FFN_BLOCKS for b in self.layer_pattern)

    @cached_property
    def mixers(self) -> tuple[LayerMixer, ...]:
        """Mixer of each of the L layers, the layer_pattern cycled ("none" for its FFN-only
        entries)."""
        p = [_mixer_of(b) for b in self.layer_pattern]
        return tuple(p[i % len(p)] for i in range(self.layers))

    def _ffn(self, i: int, single_block: bool) -> Ffn:
        """FFN of layer i: in a single-block pattern its own entry (none on a mixer layer),
        else MoE where the moe block places it, dense where d_ff is set, none otherwise."""
        if single_block:
            block = self.layer_pattern[i % len(self.layer_pattern)]
            return "dense" if block == "dense" else "moe" if block == "moe" else "none"
        moe = self.moe is not None and self.moe.is_moe_layer(i)
        return "moe" if moe else "dense" if self.d_ff else "none"

    @cached_property
    def layer_kinds(self) -> tuple[LayerKind, ...]:
        """Per layer i: mixer from the cycled pattern, FFN from the pattern or the MoE block
        (`_ffn`), KV ownership from cross-layer sharing (the first of each share group owns
        the cache)."""
        seen: Counter[str] = Counter()
        kinds, single = [], self.single_block
        for i, mixer in enumerate(self.mixers):
            ffn = self._ffn(i, single)
            owns = mixer not in SOFTMAX_MIXERS or self.attention.owns_kv(i, seen[mixer])
            seen[mixer] += 1
            kinds.append(LayerKind(mixer, ffn, owns))
        return tuple(kinds)

    @cached_property
    def layer_groups(self) -> tuple[LayerGroup, ...]:
        """Distinct layer kinds with their counts, in order of first appearance."""
        counts = Counter(self.layer_kinds)
        return tuple(LayerGroup(k, n) for k, n in counts.items())

    def layers_with(self, mixer: Mixer) -> int:
        return sum(k.mixer == mixer for k in self.layer_kinds)

    def mixer_block(self, mixer: LayerMixer) -> MixerBlock:
        """The block that runs layers of this mixer: `ssm`, `linear_attention` or `attention`
        (`NO_MIXER`, no weights and no operators, for an FFN-only layer)."""
        blocks: dict[str, MixerBlock | None] = {
            "ssm": self.ssm,
            "linear": self.linear_attention,
            "none": NO_MIXER,
        }
        block = blocks.get(mixer, self.attention)
        if block is None:
            raise ValueError(f"{self.name} has no block for '{mixer}' layers")
        return block

    # ---- derived widths ----------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        """N·H, width of the query projection of softmax attention."""
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """K·H, width of one of the key/value projections."""
        return self.kv_heads * self.head_dim

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
        """SSM channels: expand·D (0 without an ssm block)."""
        return self.ssm.d_inner(self) if self.ssm else 0

    # ---- per-layer parameters ----------------------------------------------------------
    def mixer_params(self, kind: LayerKind) -> int:
        """Weights of one layer's token mixer (shapes as the checkpoints store them)."""
        return self.mixer_block(kind.mixer).params(self, kind)

    def ffn_params(self, ffn: Ffn) -> int:
        D, mats = self.d_model, self.mlp_matrices
        if ffn == "dense":
            bias = (mats - 1) * self.d_ff + D if self.linear_bias in ("mlp", "all") else 0
            return mats * D * self.d_ff + bias
        e = self.moe
        if ffn == "moe" and e is not None:
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
        terms: Counter[str] = Counter()
        for g in self.layer_groups:
            terms[self.mixer_block(g.kind.mixer).param_group] += g.count * self.mixer_params(g.kind)
            terms["moe" if g.kind.ffn == "moe" else "mlp"] += g.count * self.ffn_params(g.kind.ffn)
        return ParamCounts(
            embedding=V * D,
            positional=self.max_context * D if self.position == "learned" else 0,
            attention=terms["attention"],
            mlp=terms["mlp"],
            norms=(self.layers * self.norms_per_layer + 1) * self.norm_params,
            lm_head=(0 if self.tied_embeddings else V * D) + (V if self.lm_head_bias else 0),
            moe=terms["moe"],
            ssm=terms["ssm"],
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
        return self.attention.kv_elems_per_token_layer(self)

    @property
    def kv_elems_per_token(self) -> int:
        """Cached values per token over all KV-owning attention layers, before any window or
        chunk: 2·L·K·H for a dense model (MLA: L·(kv_lora_rank + rope dim))."""
        return sum(
            g.count * self.mixer_block(g.kind.mixer).kv_elems_per_token(self, g.kind)
            for g in self.layer_groups
        )

    @property
    def state_elems_per_sequence(self) -> int:
        """Context-independent state of one sequence over all layers (SSM, linear attention)."""
        return sum(
            g.count * self.mixer_block(g.kind.mixer).state_elems(self) for g in self.layer_groups
        )
