"""ModelSpec: a decoder-only transformer's architecture, in scaling-book letters.

L layers, D model dim, N query heads, K kv heads, H head dim, F ffn dim, V vocab.
Derived quantities (parameter counts, KV elements per token) are properties computed here
and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


@dataclass(frozen=True)
class ParamCounts:
    """Parameter count by named term (elements). The total is derived, never stored."""

    embedding: int
    positional: int
    attention: int
    mlp: int
    norms: int
    lm_head: int

    @property
    def total(self) -> int:
        return (self.embedding + self.positional + self.attention + self.mlp + self.norms
                + self.lm_head)


class ModelSpec(_Frozen):
    """A dense decoder-only transformer."""

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
    heads: int = Field(gt=0, description="N, query heads")
    kv_heads: int = Field(gt=0, description="K, key/value heads (K=N: MHA, K=1: MQA)")
    head_dim: int = Field(gt=0, description="H")
    d_ff: int = Field(gt=0, description="F")
    mlp: Literal["gated", "plain"] = "gated"
    activation: Literal["silu", "gelu", "relu", "gelu_tanh"] = "silu"
    vocab_size: int = Field(gt=0, description="V")
    tied_embeddings: bool = False
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    position: Literal["rope", "learned", "alibi", "none"] = "rope"
    max_context: int = Field(gt=0)
    linear_bias: Literal["none", "qkv", "all"] = "none"
    parallel_block: bool = Field(
        default=False, description="attention and MLP read the same input (GPT-J, Falcon)"
    )
    norms_per_layer: int = Field(default=2, ge=1, le=4)

    @model_validator(mode="after")
    def _heads_consistent(self) -> ModelSpec:
        if self.heads % self.kv_heads:
            raise ValueError(
                f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})"
            )
        return self

    # ---- derived values ---------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        """N·H, width of the query projection."""
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
    def params(self) -> ParamCounts:
        D, F, V, L = self.d_model, self.d_ff, self.vocab_size, self.layers
        qkv = D * (self.q_dim + 2 * self.kv_dim)
        out = self.q_dim * D
        attn_bias = {"none": 0, "qkv": self.q_dim + 2 * self.kv_dim,
                     "all": self.q_dim + 2 * self.kv_dim + D}[self.linear_bias]
        mlp = self.mlp_matrices * D * F
        # plain MLP biases: up (F) and down (D); gated: gate and up (2F) and down (D)
        mlp_bias = 0 if self.linear_bias != "all" else (self.mlp_matrices - 1) * F + D
        return ParamCounts(
            embedding=V * D,
            positional=self.max_context * D if self.position == "learned" else 0,
            attention=L * (qkv + out + attn_bias),
            mlp=L * (mlp + mlp_bias),
            norms=(L * self.norms_per_layer + 1) * self.norm_params,
            lm_head=0 if self.tied_embeddings else V * D,
        )

    @property
    def total_params(self) -> int:
        return self.params.total

    @property
    def kv_elems_per_token(self) -> int:
        """Cached values per token over all layers: 2 (K and V) · L · K · H."""
        return 2 * self.layers * self.kv_dim
