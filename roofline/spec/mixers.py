"""Token mixers, one class per family owning its parameters, cache or state, checks and
operators. L layers, D model dim, N query heads, K kv heads, H head dim, B batch, T new tokens,
S cached tokens. A `ModelSpec` has an `attention` block (`SoftmaxAttention`: MHA/GQA/MQA, or
`MLAAttention`, by `kind`), optional `ssm` (`Mamba1`, `Mamba2`, by `kind`) and
`linear_attention`; `layer_pattern` says which each layer runs (`NO_MIXER` runs the FFN-only
layers of a single-block pattern). A new variant is one `MixerBlock` subclass and one line in
its union."""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, get_args

import numpy as np
from pydantic import Discriminator, Field, Tag, model_validator

from ..frozen import Frozen
from .operators import (
    ROPE_LAUNCHES,
    ArrayLike,
    Op,
    attended_pairs,
    kv_tokens_read,
    projection,
    scaled,
    sdpa_op,
)

if TYPE_CHECKING:
    from .model import LayerKind, ModelSpec
    from .operators import Step

SoftmaxMixer = Literal["global", "local", "chunked"]
#: Mixers that are softmax attention over a KV cache: full, sliding-window, chunked.
SOFTMAX_MIXERS: tuple[SoftmaxMixer, ...] = get_args(SoftmaxMixer)


#: Bytes per element of a recurrent state a checkpoint keeps apart from its KV format.
STATE_DTYPE_BYTES: dict[str, int] = {"fp32": 4}

StateDtype = Annotated[
    Literal["fp32"] | None,
    Field(
        description="the recurrent (SSM / delta-rule) state's number format where the "
        "checkpoint sets one apart from the model's (HF config `mamba_ssm_dtype`, "
        "`mamba_ssm_cache_dtype`), which vLLM keeps it in (Qwen3.5 from 0.17.0: "
        "vllm/model_executor/models/config.py Qwen3_5ForConditionalGenerationConfig); "
        "null: at the KV format, as the conv window"
    ),
]


class MixerBlock(Frozen):
    """What every family answers for one layer of model `m` (element counts)."""

    #: the `ParamCounts` term its weights count under
    param_group: ClassVar[str] = "attention"
    #: its own fields that a whole-family dump may carry onto a sibling variant, which the
    #: sibling drops whatever their value (an option, not a shape)
    sibling_options: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="before")
    @classmethod
    def _other_variants_unset(cls, data: Any) -> Any:
        """A field of another variant of the family, null, at its default or one of that
        variant's `sibling_options`, reads as absent, so a dump listing every variant's fields
        (kv_lora_rank: null on a gqa block) loads."""
        if not isinstance(data, dict):
            return data
        root = next(c for c in MixerBlock.__subclasses__() if issubclass(cls, c))
        siblings = root.__subclasses__()
        other = {k: f.default for c in siblings for k, f in c.model_fields.items()}
        options = {k for c in siblings for k in c.sibling_options}
        for k in other.keys() & data.keys() - cls.model_fields.keys():
            if data[k] in (None, other[k]) or k in options:
                data = {f: v for f, v in data.items() if f != k}
        return data

    @abstractmethod
    def params(self, m: ModelSpec, kind: LayerKind) -> int:
        """Weights of one layer, shapes as the checkpoints store them."""

    @abstractmethod
    def ops(self, m: ModelSpec, s: Step, kind: LayerKind) -> list[Op]:
        """Operators of one layer for the step `s`."""

    def state_elems(self, m: ModelSpec) -> int:
        """Context-independent state of one sequence in one layer."""
        return 0

    def recurrent_state_elems(self, m: ModelSpec) -> int:
        """The part of `state_elems` a recurrence carries step to step (an SSM's h, a delta
        rule's S), the part a checkpoint may keep at its own `state_dtype`; the rest is the
        conv window."""
        return 0

    def state_width_bytes(self, kv_bytes: float) -> float:
        """Bytes per element of the recurrent state: the KV format's, `kv_bytes`."""
        return kv_bytes

    def state_bytes(self, m: ModelSpec, kv_bytes: float) -> float:
        """One sequence's state in one layer, bytes: the recurrent part at
        `state_width_bytes`, the conv window at the KV format (`kv_bytes` per element)."""
        recurrent = self.recurrent_state_elems(m)
        conv = self.state_elems(m) - recurrent
        return recurrent * self.state_width_bytes(kv_bytes) + conv * kv_bytes

    def kv_elems_per_token(self, m: ModelSpec, kind: LayerKind) -> int:
        """Values one layer of `kind` caches per token (0: no per-token cache)."""
        return 0

    def gguf_matrices(self, m: ModelSpec, kind: LayerKind) -> list[tuple[str, int, int]]:
        """The layer's quantisable matrices as llama.cpp stores them, (role, row length ne[0],
        elements); the rest of `params` (biases, norms) is stored unquantised. By default one
        tensor of all its weights at the file's base type, role `<param_group>_<mixer>`."""
        return [(f"{self.param_group}_{kind.mixer}", m.d_model, self.params(m, kind))]

    def kv_limit(self, kind: LayerKind) -> int | None:
        """Context beyond which a layer of `kind` caches no more tokens (None: it never stops
        growing)."""
        return None

    def kv_elems(self, m: ModelSpec, kind: LayerKind, context: ArrayLike) -> ArrayLike:
        """Values one layer of `kind` holds for one sequence of `context` tokens: min(S, limit)
        tokens' (`kv_limit`), every token's when it has none."""
        e = self.kv_elems_per_token(m, kind)
        limit = self.kv_limit(kind)
        return (context if limit is None else np.minimum(context, limit)) * e

    def check(self, m: ModelSpec, mixers: frozenset[str]) -> None:
        """Refuse a model this block cannot run (`mixers`: the layer_pattern's)."""


class _Attention(MixerBlock):
    """Options every softmax attention variant takes: window, chunks, KV sharing, norms."""

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
    output_gate: bool = Field(
        default=False,
        description="gated attention (Qwen3-Next): q_proj also yields an N·H sigmoid gate "
        "applied to the attention output before o_proj, doubling q_proj's width",
    )

    @abstractmethod
    def kv_elems_per_token_layer(self, m: ModelSpec) -> int:
        """Cached values per token in one KV-owning layer."""

    def kv_elems_per_token(self, m: ModelSpec, kind: LayerKind) -> int:
        return self.kv_elems_per_token_layer(m) if kind.owns_kv else 0

    def kv_limit(self, kind: LayerKind) -> int | None:
        """None on a global layer (S·e), W on a local one (min(S, W)·e), C on a chunked one
        (min(S, C)·e). A chunked layer needs only the current chunk's S mod C cached tokens,
        but that falls to 0 at every chunk boundary; it is sized by the allocation bound
        min(S, C), the most it holds at any point up to S, so the size grows monotonically
        with S."""
        return {"local": self.sliding_window, "chunked": self.attention_chunk_size}.get(kind.mixer)

    def owns_kv(self, i: int, nth: int) -> bool:
        """Whether layer i, the nth of its mixer, stores its own KV (the first of each share
        group does)."""
        return (
            self.kv_share_map[i] == i if self.kv_share_map is not None else nth % self.kv_share == 0
        )

    def _norm_params(self, m: ModelSpec) -> int:
        """q/k norms (2·H) and sinks (N) of one layer."""
        return (2 * m.head_dim if self.qk_norm else 0) + (m.heads if self.sinks else 0)

    def check(self, m: ModelSpec, mixers: frozenset[str]) -> None:
        for mixer, field, value, what in (
            ("local", "sliding_window", self.sliding_window, "window"),
            ("chunked", "attention_chunk_size", self.attention_chunk_size, "chunks"),
        ):
            if mixer in mixers and value is None:
                raise ValueError(
                    f"layer_pattern has '{mixer}' layers but attention.{field} is not set"
                )
            if value is not None and mixer not in mixers:
                raise ValueError(
                    f"attention.{field} is set but no layer is '{mixer}'; "
                    f"add '{mixer}' to layer_pattern"
                )
            if value is not None and value > m.max_context:
                raise ValueError(
                    f"{field} ({value}) exceeds max_context ({m.max_context}); "
                    f"the {what} would never bind"
                )
        share = self.kv_share_map
        if share is None:
            return
        if self.kv_share > 1:
            raise ValueError("give kv_share or kv_share_map, not both")
        if len(share) != m.layers:
            raise ValueError(f"kv_share_map has {len(share)} entries for {m.layers} layers")
        kinds = m.mixers
        for i, j in enumerate(share):
            if not (0 <= j <= i and share[j] == j and kinds[i] == kinds[j] in SOFTMAX_MIXERS):
                raise ValueError(
                    f"kv_share_map[{i}] = {j}: a layer may only reuse the KV of an earlier "
                    "attention layer of the same kind that owns its KV"
                )


class SoftmaxAttention(_Attention):
    """MHA, GQA, MQA: N query heads over K kv heads of H (K = N, K | N, K = 1); caches K and V,
    2·K·H values per token and layer."""

    kind: Literal["mha", "gqa"] = Field(
        default="gqa", description="mha: K = N; gqa: any K dividing N (MQA is K = 1)"
    )

    def check(self, m: ModelSpec, mixers: frozenset[str]) -> None:
        if mixers & set(SOFTMAX_MIXERS):
            if not m.kv_heads:
                raise ValueError("attention layers need kv_heads")
            if m.heads % m.kv_heads:
                raise ValueError(f"heads ({m.heads}) must be a multiple of kv_heads ({m.kv_heads})")
            if self.kind == "mha" and m.kv_heads != m.heads:
                raise ValueError(
                    f"kind 'mha' needs kv_heads = heads ({m.heads}), "
                    f"got {m.kv_heads}; use kind: gqa"
                )
        super().check(m, mixers)

    def kv_elems_per_token_layer(self, m: ModelSpec) -> int:
        return 2 * m.kv_dim

    def gguf_matrices(self, m: ModelSpec, kind: LayerKind) -> list[tuple[str, int, int]]:
        """attn_q, attn_k and attn_v (unless the layer shares another's KV), attn_output: the
        roles llama.cpp's type mixes give more bits to."""
        D, qd, kvd = m.d_model, m.q_dim, m.kv_dim
        kv = [("attn_k", D, D * kvd), ("attn_v", D, D * kvd)] if kind.owns_kv else []
        return [("attn_q", D, D * qd), *kv, ("attn_output", qd, qd * D)]

    def params(self, m: ModelSpec, kind: LayerKind) -> int:
        """Q, K, V (D→N·H, 2·D→K·H unless the layer shares another's KV), out N·H→D, biases."""
        D, q = m.d_model, m.q_dim
        kv = 2 * m.kv_dim if kind.owns_kv else 0
        gate = q if self.output_gate else 0
        bias = {"none": 0, "mlp": 0, "qkv": q + kv, "all": q + kv + D}[m.linear_bias]
        return D * (q + gate + kv) + q * D + bias + self._norm_params(m)

    def ops(self, m: ModelSpec, s: Step, kind: LayerKind) -> list[Op]:
        """x (B,T,D), q (B,T,N,H), kv (B,S+T,K,H)."""
        B, T, S = s.batch, s.new_tokens, s.cached_tokens
        D, N, K, H, qd = m.d_model, m.heads, m.kv_heads, m.head_dim, m.q_dim
        window = self.sliding_window if kind.mixer == "local" else None
        chunk = self.attention_chunk_size if kind.mixer == "chunked" else None
        qkv_out = qd + (2 * m.kv_dim if kind.owns_kv else 0)  # shared-KV layers project only Q
        qkv_out += qd if self.output_gate else 0  # the gate comes out of q_proj
        bias = m.linear_bias in ("qkv", "all")
        launches = 1 + (ROPE_LAUNCHES if m.position == "rope" else 0)
        core = f"{'attention' if kind.mixer == 'global' else kind.mixer}/scores+av"
        return [
            projection("attention/qkv", B * T, D, qkv_out, qkv_out if bias else 0, launches),
            sdpa_op(B, T, S, N, K, H, window, s.causal, kind.owns_kv, core, chunk),
            projection("attention/out", B * T, qd, D, D if m.linear_bias == "all" else 0),
        ]


class MLAAttention(_Attention):
    """Multi-head latent attention (DeepSeek-V2/V3). The cache holds, per token, a latent c of
    r = kv_lora_rank and one RoPE key of R = qk_rope_head_dim shared by all heads: r + R values
    per token and layer. Queries and keys have n + R = qk_nope_head_dim + qk_rope_head_dim per
    head, values v = v_head_dim."""

    kind: Literal["mla"]
    sibling_options: ClassVar[tuple[str, ...]] = ("mla_decode",)  # a whole-family dump has it
    kv_lora_rank: int = Field(gt=0, description="r")
    q_lora_rank: int | None = Field(default=None, gt=0, description="None: full-rank Q")
    qk_rope_head_dim: int = Field(gt=0, description="R")
    qk_nope_head_dim: int = Field(gt=0, description="n")
    v_head_dim: int = Field(gt=0, description="v")
    index_topk: int | None = Field(
        default=None,
        gt=0,
        description="DeepSeek Sparse Attention (V3.2): a lightning indexer scores every cached "
        "token for each query and attention runs over the top k of them only",
    )
    index_heads: int = Field(default=0, ge=0, description="indexer heads (index_n_heads)")
    index_head_dim: int = Field(default=0, ge=0, description="indexer key/query width")
    mla_decode: Literal["auto", "absorbed", "naive"] = Field(
        default="auto",
        description="absorbed: W_UK folded into the query and W_UV applied "
        "after attention, so scores run over the latent; naive: up-project every cached latent "
        "to full K, V; auto: the path with fewer FLOPs in each step (naive for prefill, absorbed "
        "for decode, as DeepSeek's and vLLM's MLA kernels do)",
    )

    @model_validator(mode="before")
    @classmethod
    def _dims_given(cls, data: Any) -> Any:
        dims = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
        missing = [f for f in dims if isinstance(data, dict) and data.get(f) is None]
        if missing:
            raise ValueError(f"kind 'mla' needs {', '.join(missing)}")
        return data

    def check(self, m: ModelSpec, mixers: frozenset[str]) -> None:
        if self.attention_chunk_size is not None and "chunked" in mixers:
            raise ValueError("chunked attention is not modelled for MLA layers")
        if self.index_topk is not None:
            if not (self.index_heads and self.index_head_dim):
                raise ValueError("index_topk needs index_heads and index_head_dim")
            if self.sliding_window is not None:
                raise ValueError(
                    "sparse attention (index_topk) with a sliding window is not modelled"
                )
        elif self.index_heads or self.index_head_dim:
            raise ValueError("index_heads and index_head_dim need index_topk")
        super().check(m, mixers)

    def kv_elems_per_token_layer(self, m: ModelSpec) -> int:
        """The latent r and RoPE key R; with sparse attention also the indexer's key."""
        return self.kv_lora_rank + self.qk_rope_head_dim + self.index_head_dim

    def _indexer_params(self, m: ModelSpec) -> int:
        """wq_b from the query latent (or D) to heads x width, wk D→width and its LayerNorm
        (weight and bias), and the per-head weights D→heads."""
        if self.index_topk is None:
            return 0
        hi, di, src = self.index_heads, self.index_head_dim, self.q_lora_rank or m.d_model
        return src * hi * di + m.d_model * di + 2 * di + m.d_model * hi

    def params(self, m: ModelSpec, kind: LayerKind) -> int:
        """Q (D→N·(n+R), or through a q_lora_rank latent and its norm); if the layer owns
        its KV: down D→r+R, the latent norm r, up r→N·(n+v); out N·v→D."""
        D, N, r = m.d_model, m.heads, self.kv_lora_rank
        qk, ql = self.qk_nope_head_dim + self.qk_rope_head_dim, self.q_lora_rank
        q = D * N * qk if ql is None else D * ql + ql + ql * N * qk
        kv = D * (r + self.qk_rope_head_dim) + r + r * N * (self.qk_nope_head_dim + self.v_head_dim)
        own = q + (kv if kind.owns_kv else 0) + N * self.v_head_dim * D + self._norm_params(m)
        return own + self._indexer_params(m)

    def naive_is_cheaper(
        self, T: ArrayLike, S: ArrayLike, window: int | None = None, causal: bool = True
    ) -> ArrayLike:
        """Whether one sequence's step of T new tokens on S cached takes fewer FLOPs on the
        naive path than on the absorbed one (per layer and head, see `ops`): naive
        2·ctx·r·(n + v) + 2·pairs·(n + R + v) against absorbed 2·T·r·(n + v) + 2·pairs·(2r + R),
        i.e. r·(n + v)·(ctx − T) < pairs·(2r − n − v) with ctx the tokens read. Decode (T = 1,
        S ≥ 1) absorbs; a prefill from an empty cache decompresses."""
        r, nv = self.kv_lora_rank, self.qk_nope_head_dim + self.v_head_dim
        pairs = attended_pairs(T, S, window, causal)
        return r * nv * (kv_tokens_read(T, S, window) - T) < pairs * (2 * r - nv)

    def ops(self, m: ModelSpec, s: Step, kind: LayerKind) -> list[Op]:
        """absorbed: W_UK folds into the query (q_nope·W_UK: N·n → N·r) and W_UV applies after
        attention, so scores and AV run over the latent like MQA with head dim r + R,
        2·(2r + R)·N FLOPs per query-key pair; naive: every cached latent is up-projected to N
        heads of K (n + R) and V (v), 2·r·N·(n + v) FLOPs per context token, then attention
        costs 2·(n + R + v)·N per pair. Absorbing pays per pair, decompressing per token: with
        T = 1 (decode) the absorbed path is far cheaper, with T ≫ 1 (prefill) the naive one.
        `mla_decode: auto` takes the path with fewer FLOPs in each step (`naive_is_cheaper`;
        op names say which: `mla/absorbed_scores` or `mla/kv_up` + `mla/scores+av`)."""
        B, T, S = s.batch, s.new_tokens, s.cached_tokens
        D, N, r, R = m.d_model, m.heads, self.kv_lora_rank, self.qk_rope_head_dim
        n, v, ql = self.qk_nope_head_dim, self.v_head_dim, self.q_lora_rank
        window = self.sliding_window if kind.mixer == "local" else None
        # sparse attention: each query attends to the indexer's top k of the tokens before it,
        # which costs what a window of k does (k pairs per query once S + t > k)
        window = self.index_topk if self.index_topk is not None else window
        pairs = attended_pairs(T, S, window, s.causal)
        ctx = kv_tokens_read(T, S, window)
        latent = r + R
        q_w = D * N * (n + R) if ql is None else ql * (D + N * (n + R))
        ops = [
            Op(
                "mla/q_proj",
                "matmul",
                flops=2 * B * T * q_w,
                weight_elems=q_w,
                act_elems=B * T * (D + N * (n + R)),
                weight_rows=N * (n + R) + (ql or 0),
            )
        ]
        if kind.owns_kv:
            ops.append(
                Op(
                    "mla/kv_down",
                    "matmul",
                    flops=2 * B * T * D * latent,
                    weight_elems=D * latent,
                    act_elems=B * T * D,
                    kv_write_elems=B * T * latent,
                    weight_rows=latent,
                )
            )
        absorbed = [
            projection("mla/q_absorb", B * T, n, r, heads=N),
            Op(
                "mla/absorbed_scores",
                "attention",
                flops=B * 2 * pairs * N * (2 * r + R),
                act_elems=B * T * N * (2 * r + R),
                kv_read_elems=B * ctx * latent,
            ),
            projection("mla/v_up", B * T, r, v, heads=N),
        ]
        naive = [
            Op(
                "mla/kv_up",
                "matmul",
                flops=2 * B * ctx * r * N * (n + v),
                weight_elems=r * N * (n + v),
                act_elems=B * ctx * N * (n + v),
                kv_read_elems=B * ctx * latent,
                weight_rows=N * (n + v),
                launches=2,
            ),  # the up-projection, then K = [k_nope, k_rope] concatenated
            Op(
                "mla/scores+av",
                "attention",
                flops=B * 2 * pairs * N * (n + R + v),
                act_elems=B * T * N * (n + R + v) + B * ctx * N * (n + v),
            ),
        ]
        auto = self.mla_decode == "auto"
        naive_step = np.asarray(
            self.naive_is_cheaper(T, S, window, s.causal) if auto else self.mla_decode == "naive"
        )
        if naive_step.all() or not naive_step.any():
            ops += naive if naive_step.all() else absorbed
        else:  # a grid whose steps take different paths: each op counts where it runs
            where = naive_step.astype(float)
            ops += [scaled(o, 1 - where) for o in absorbed] + [scaled(o, where) for o in naive]
        return [*ops, *self._indexer_ops(m, s), projection("attention/out", B * T, N * v, D)]

    def _indexer_ops(self, m: ModelSpec, s: Step) -> list[Op]:
        """DSA's lightning indexer: its projections (queries from the q latent, one key and
        one weight per head from x), then every query scores every token before it in each of
        its heads, 2·heads·width FLOPs per pair, reading all cached index keys (Liu et al.,
        DeepSeek-V3.2-Exp report: the indexer is O(L²) but light, the top-k attention
        O(L·k))."""
        if self.index_topk is None:
            return []
        B, T, S, D = s.batch, s.new_tokens, s.cached_tokens, m.d_model
        hi, di, src = self.index_heads, self.index_head_dim, self.q_lora_rank or D
        return [
            projection("dsa/index_q", B * T, src, hi * di),
            replace(projection("dsa/index_kw", B * T, D, di + hi), kv_write_elems=B * T * di),
            Op(
                "dsa/index_scores",
                "attention",
                flops=B * 2 * attended_pairs(T, S, None, s.causal) * hi * di,
                act_elems=B * T * hi * (di + 1),
                kv_read_elems=B * kv_tokens_read(T, S, None) * di,
            ),
        ]


#: The softmax attention block, chosen by its `kind` (gqa when absent).
Attention = Annotated[
    Annotated[SoftmaxAttention, Tag("gqa")]
    | Annotated[SoftmaxAttention, Tag("mha")]
    | Annotated[MLAAttention, Tag("mla")],
    Discriminator(lambda d: d.get("kind", "gqa") if isinstance(d, dict) else d.kind),
]


def mla_naive_is_cheaper(
    m: ModelSpec, T: ArrayLike, S: ArrayLike, window: int | None = None, causal: bool = True
) -> ArrayLike:
    """`MLAAttention.naive_is_cheaper` of model `m`'s attention."""
    assert isinstance(m.attention, MLAAttention), f"{m.name} has no MLA layers"
    return m.attention.naive_is_cheaper(T, S, window, causal)


class LinearAttention(MixerBlock):
    """Linear (lightning) attention: one H x H state per head (N of them) instead of a KV
    cache. `output_gate` adds a D→N·H sigmoid gate."""

    kind: Literal["lightning"] = "lightning"
    output_gate: bool = True
    norm: bool = Field(default=True, description="RMSNorm over N·H before the output projection")

    def _proj(self, m: ModelSpec) -> int:
        """Width of the input projections: q, k, v (and the gate), 3 or 4 × N·H."""
        return (4 if self.output_gate else 3) * m.heads * m.head_dim

    def params(self, m: ModelSpec, kind: LayerKind) -> int:
        nh = m.heads * m.head_dim
        return m.d_model * self._proj(m) + (nh if self.norm else 0) + nh * m.d_model

    def state_elems(self, m: ModelSpec) -> int:
        """N·H² (d_k x d_v = H x H per head)."""
        return m.heads * m.head_dim**2

    def ops(self, m: ModelSpec, s: Step, kind: LayerKind) -> list[Op]:
        """State Z (H x H per head) updated Z += k·vᵀ and read o = q·Z per token (2·H² FLOPs
        each per head); the N·H² state is read and written once per step."""
        B, T, D = s.batch, s.new_tokens, m.d_model
        nh, proj, state = m.heads * m.head_dim, self._proj(m), self.state_elems(m)
        return [
            projection("linear/qkv", B * T, D, proj),
            Op(
                "linear/state_update",
                "scan",
                flops=B * T * 4 * nh * m.head_dim,
                act_elems=B * T * 4 * nh,
                kv_read_elems=B * state,
                kv_write_elems=B * state,
            ),
            projection("linear/out", B * T, nh, D),
        ]


class GatedDeltaNet(MixerBlock):
    """Gated DeltaNet (Yang, Kautz & Hatamizadeh 2024, arXiv:2412.06464; Qwen3-Next's linear
    layers): q and k in `key_heads` heads of d_k, v and an output gate z in `value_heads`
    heads of d_v, a short causal conv over q, k, v, and per value head a d_k x d_v state
    updated by the gated delta rule S ← α·S(I − β·k·kᵀ) + β·v·kᵀ and read o = S·q. Weights
    as the checkpoint stores them: in_proj_qkvz D→2·Kh·d_k + 2·Vh·d_v, in_proj_ba D→2·Vh
    (β and the decay α per value head), conv1d (2·Kh·d_k + Vh·d_v) x kernel, dt_bias and
    A_log (Vh each), a gated RMSNorm of d_v, out_proj Vh·d_v→D."""

    kind: Literal["gated_deltanet"]
    key_heads: int = Field(gt=0, description="Kh, heads of q and k (linear_num_key_heads)")
    value_heads: int = Field(gt=0, description="Vh, heads of v, z and the state")
    key_head_dim: int = Field(gt=0, description="d_k (linear_key_head_dim)")
    value_head_dim: int = Field(gt=0, description="d_v (linear_value_head_dim)")
    conv_kernel: int = Field(default=4, gt=0, description="linear_conv_kernel_dim")
    state_dtype: StateDtype = None

    def _qk(self) -> int:
        return self.key_heads * self.key_head_dim

    def _v(self) -> int:
        return self.value_heads * self.value_head_dim

    def _conv_channels(self) -> int:
        return 2 * self._qk() + self._v()

    def params(self, m: ModelSpec, kind: LayerKind) -> int:
        D, qk, v, vh = m.d_model, self._qk(), self._v(), self.value_heads
        in_proj = D * (2 * qk + 2 * v) + D * 2 * vh
        conv = self._conv_channels() * self.conv_kernel
        return in_proj + conv + 2 * vh + self.value_head_dim + v * D

    def state_elems(self, m: ModelSpec) -> int:
        """Vh·d_k·d_v of recurrent state plus the conv's last kernel − 1 inputs."""
        return self.recurrent_state_elems(m) + (self.conv_kernel - 1) * self._conv_channels()

    def recurrent_state_elems(self, m: ModelSpec) -> int:
        """Vh·d_k·d_v: one d_k x d_v state S per value head."""
        return self.value_heads * self.key_head_dim * self.value_head_dim

    def state_width_bytes(self, kv_bytes: float) -> float:
        return STATE_DTYPE_BYTES[self.state_dtype] if self.state_dtype else kv_bytes

    def ops(self, m: ModelSpec, s: Step, kind: LayerKind) -> list[Op]:
        """Per token and value head: S·k, the rank-1 update and S·q, 2·d_k·d_v FLOPs each
        (the recurrent form; the chunked form prefill kernels run costs O(C) more per token
        for chunks of C, not counted); the state is read and written once per step."""
        B, T, D = s.batch, s.new_tokens, m.d_model
        qk, v, vh = self._qk(), self._v(), self.value_heads
        dkdv = self.key_head_dim * self.value_head_dim
        channels = self._conv_channels()
        recurrent = vh * dkdv
        return [
            projection("deltanet/in_proj", B * T, D, 2 * qk + 2 * v + 2 * vh),
            Op(
                "deltanet/conv",
                "elementwise",
                flops=B * T * 2 * self.conv_kernel * channels,
                weight_elems=channels * self.conv_kernel,
                act_elems=B * T * 2 * channels,
            ),
            Op(
                "deltanet/state_update",
                "scan",
                flops=B * T * 6 * recurrent,
                act_elems=B * T * (channels + 2 * v),
                kv_read_elems=B * recurrent,
                kv_write_elems=B * recurrent,
            ),
            projection("deltanet/out", B * T, v, D),
        ]


class NoMixer(MixerBlock):
    """The token mixer of an FFN-only layer of a single-block layer_pattern (Nemotron-H's MoE
    and MLP layers): no weights, no cache or state, no operators."""

    def params(self, m: ModelSpec, kind: LayerKind) -> int:
        return 0

    def ops(self, m: ModelSpec, s: Step, kind: LayerKind) -> list[Op]:
        return []

    def gguf_matrices(self, m: ModelSpec, kind: LayerKind) -> list[tuple[str, int, int]]:
        return []


#: The one no-mixer block every FFN-only layer runs (`ModelSpec.mixer_block("none")`).
NO_MIXER = NoMixer()


LinearMixer = Annotated[
    Annotated[LinearAttention, Tag("lightning")] | Annotated[GatedDeltaNet, Tag("gated_deltanet")],
    Discriminator(lambda d: d.get("kind", "lightning") if isinstance(d, dict) else d.kind),
]


class _Mamba(MixerBlock):
    """A Mamba mixer: d_inner = expand·D channels, each with a d_state-wide recurrent state;
    in_proj D→(z, x), a causal conv over x, one group of B and C (Mamba-1's layout, which
    Mamba-2 widens). A variant adds its weights beside in_proj, conv and out_proj
    (`_own_params`), the ones the scan reads (`_scan_weights`), and any Δ ops."""

    param_group: ClassVar[str] = "ssm"

    d_state: int = Field(gt=0)
    d_conv: int = Field(gt=0, description="causal conv kernel width")
    expand: int = Field(default=2, gt=0)
    conv_bias: bool = True
    state_dtype: StateDtype = None

    def d_inner(self, m: ModelSpec) -> int:
        """Channels: expand·D."""
        return self.expand * m.d_model

    def bc_width(self) -> int:
        """Width of B and C together."""
        return 2 * self.d_state

    def in_proj_width(self, m: ModelSpec) -> int:
        return 2 * self.d_inner(m)

    def conv_dim(self, m: ModelSpec) -> int:
        """Channels the causal conv runs over."""
        return self.d_inner(m)

    @abstractmethod
    def _own_params(self, m: ModelSpec) -> int: ...

    def _dt_ops(self, m: ModelSpec, s: Step) -> list[Op]:
        return []

    @abstractmethod
    def _scan_weights(self, m: ModelSpec) -> int: ...

    def state_elems(self, m: ModelSpec) -> int:
        """d_inner·d_state (scan) plus conv_dim·d_conv (conv window, as the reference
        implementations cache it)."""
        return self.recurrent_state_elems(m) + self.conv_dim(m) * self.d_conv

    def recurrent_state_elems(self, m: ModelSpec) -> int:
        """d_inner·d_state: the scan's h (Mamba-2: heads·head_dim·d_state, the same)."""
        return self.d_inner(m) * self.d_state

    def state_width_bytes(self, kv_bytes: float) -> float:
        return STATE_DTYPE_BYTES[self.state_dtype] if self.state_dtype else kv_bytes

    def params(self, m: ModelSpec, kind: LayerKind) -> int:
        """in_proj, conv (and its bias), the family's own weights, out_proj d_inner→D."""
        cd, D = self.conv_dim(m), m.d_model
        conv = cd * (self.d_conv + self.conv_bias)  # weights, bias
        return D * self.in_proj_width(m) + conv + self._own_params(m) + self.d_inner(m) * D

    def ops(self, m: ModelSpec, s: Step, kind: LayerKind) -> list[Op]:
        """in_proj D → (z, x[, B, C, Δ]); causal conv over conv_dim channels (window d_conv);
        Δ/B/C from x (Mamba-1: x_proj + dt_proj); the selective scan updates
        h = exp(Δ·A)·h + Δ·B·x and reads y = C·h, ≈6 FLOPs per state element per token;
        out_proj d_inner → D. The scan state d_inner·d_state and the conv window are read and
        written once per step (constant in S)."""
        B, T, D, Di = s.batch, s.new_tokens, m.d_model, self.d_inner(m)
        conv_dim, ds = self.conv_dim(m), self.d_state
        conv_state, scan_state = conv_dim * self.d_conv, Di * ds
        return [
            projection("ssm/in_proj", B * T, D, self.in_proj_width(m)),
            Op(
                "ssm/conv",
                "elementwise",
                flops=2 * B * T * conv_state,
                weight_elems=conv_state + conv_dim,
                act_elems=2 * B * T * conv_dim,
                kv_read_elems=B * conv_state,
                kv_write_elems=B * conv_state,
            ),
            *self._dt_ops(m, s),
            Op(
                "ssm/scan",
                "scan",
                flops=6 * B * T * scan_state,
                weight_elems=self._scan_weights(m),
                act_elems=B * T * (3 * Di + self.bc_width()),
                kv_read_elems=B * scan_state,
                kv_write_elems=B * scan_state,
            ),
            projection("ssm/out_proj", B * T, Di, D),
        ]


class Mamba1(_Mamba):
    """Mamba-1: x_proj d_inner→(Δ rank R, B, C) and dt_proj R→d_inner; A d_inner x d_state."""

    kind: Literal["mamba1"]
    dt_rank: int | None = Field(default=None, gt=0, description="R, rank of Δ (default ceil(D/16))")
    inner_norms: bool = Field(default=False, description="Jamba: RMSNorm on Δ, B and C")

    def rank(self, m: ModelSpec) -> int:
        return self.dt_rank if self.dt_rank is not None else -(-m.d_model // 16)

    def _dt_weights(self, m: ModelSpec) -> int:
        """x_proj d_inner→R + 2·d_state and dt_proj R→d_inner."""
        R, Di = self.rank(m), self.d_inner(m)
        return Di * (R + self.bc_width()) + R * Di

    def _own_params(self, m: ModelSpec) -> int:
        """x_proj, dt_proj and its bias, A, the D skip, Jamba's inner norms."""
        Di, R = self.d_inner(m), self.rank(m)
        norms = R + self.bc_width() if self.inner_norms else 0
        return self._dt_weights(m) + Di + Di * self.d_state + Di + norms

    def _dt_ops(self, m: ModelSpec, s: Step) -> list[Op]:
        B, T, Di, R, w = s.batch, s.new_tokens, self.d_inner(m), self.rank(m), self._dt_weights(m)
        return [
            Op(
                "ssm/dt_proj",
                "matmul",
                flops=2 * B * T * w,
                weight_elems=w,
                act_elems=B * T * (Di + R + self.bc_width() + Di),
                weight_rows=R + self.bc_width() + Di,
            )
        ]

    def _scan_weights(self, m: ModelSpec) -> int:
        return self.d_inner(m) * self.d_state


class Mamba2(_Mamba):
    """Mamba-2: in_proj D→(z, x, B, C, Δ) with B, C in n_groups groups and one Δ per head of
    head_dim channels; conv over x, B, C; a scalar A per head."""

    kind: Literal["mamba2"]
    head_dim: int = Field(gt=0, description="channels per head")
    n_groups: int = Field(default=1, gt=0, description="B/C groups")
    num_heads: int | None = Field(
        default=None,
        gt=0,
        description="heads, when the checkpoint sets them apart from D (Nemotron-H's "
        "mamba_num_heads: d_inner = num_heads·head_dim, and its `expand` goes unused); "
        "None: d_inner = expand·D",
    )

    def d_inner(self, m: ModelSpec) -> int:
        """Channels: num_heads·head_dim where the heads are given, else expand·D."""
        return self.num_heads * self.head_dim if self.num_heads else super().d_inner(m)

    def heads(self, m: ModelSpec) -> int:  # d_inner / head_dim
        return self.d_inner(m) // self.head_dim

    def check(self, m: ModelSpec, mixers: frozenset[str]) -> None:
        if (Di := self.d_inner(m)) % self.head_dim:
            raise ValueError(f"ssm d_inner ({Di}) must be a multiple of head_dim ({self.head_dim})")

    def bc_width(self) -> int:
        return 2 * self.n_groups * self.d_state

    def in_proj_width(self, m: ModelSpec) -> int:
        return 2 * self.d_inner(m) + self.bc_width() + self.heads(m)

    def conv_dim(self, m: ModelSpec) -> int:
        return self.d_inner(m) + self.bc_width()

    def _own_params(self, m: ModelSpec) -> int:
        """Δ bias, A and D per head; the gated norm over d_inner."""
        return 3 * self.heads(m) + self.d_inner(m)

    def _scan_weights(self, m: ModelSpec) -> int:
        return 3 * self.heads(m)


#: The SSM block, chosen by its `kind`.
SSM = Annotated[Mamba1 | Mamba2, Field(discriminator="kind")]
