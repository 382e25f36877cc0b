"""The forward walk: every operator of one step of a model, built from `roofline.spec.operators`.

`operators` walks the model's layer groups (distinct layer kinds with their counts): each
contributes its token mixer's operators (`roofline.spec.mixers`, one class per family) and its
FFN's (dense MLP or MoE here), once per kind, scaled by the count; same-named operators of
different groups are summed. Family operators carry a prefix: `mla/kv_down`, `local/scores+av`,
`linear/state_update`, `moe/experts`, `ssm/scan`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from .operators import (
    NORM_LAUNCHES,
    ExpertShard,
    Op,
    Step,
    busiest_rank_experts,
    busiest_rank_pairs,
    projection,
    scaled,
    summed,
)

if TYPE_CHECKING:
    from .model import LayerKind, ModelSpec, MoESpec


def _dense_mlp(m: ModelSpec, s: Step) -> list[Op]:
    """One dense MLP. Gated: (gate, up) D→2F, act·mul, down F→D; plain: D→F, act, F→D."""
    B, T, D, F = s.batch, s.new_tokens, m.d_model, m.d_ff
    n_in = m.mlp_matrices - 1  # 2 input projections when gated, else 1
    bias = m.linear_bias in ("mlp", "all")
    return [
        projection("mlp/up", B * T, D, n_in * F, n_in * F if bias else 0, group="mlp"),
        Op(
            "mlp/act",
            "elementwise",
            flops=B * T * F * (5 if n_in == 2 else 4),
            act_elems=B * T * F * (n_in + 1),
            launches=n_in,
            group="mlp",
        ),  # act (· up when gated)
        projection("mlp/down", B * T, F, D, D if bias else 0, group="mlp"),
    ]


def _moe(m: ModelSpec, e: MoESpec, s: Step, shard: ExpertShard | None) -> list[Op]:
    """One MoE layer: router D→E, k routed experts per token, plus always-on shared experts.
    FLOPs follow the k experts each token uses; weight bytes follow the experts the batch
    touches, `expected_experts_touched(E, k, B·T)` (all E once the batch is large). With an
    expert-parallel `shard`, the routed experts see the group's tokens spread over ep ranks and
    the busiest rank is costed: its expected maximum of pairs and of experts touched (about
    2.5 experts at one token, top-8 of 256 on EP 8, against a mean of 1)."""
    B, T, D, mats = s.batch, s.new_tokens, m.d_model, m.mlp_matrices
    tokens, ep = (B * T, 1) if shard is None else (shard.group_tokens, shard.ep)
    touched = busiest_rank_experts(e.experts, e.top_k, tokens, ep)
    pairs = busiest_rank_pairs(e.top_k, tokens, ep)  # token-expert pairs this GPU computes
    per_expert = mats * D * e.expert_d_ff
    ops = [
        projection("moe/router", B * T, D, e.experts, group="router"),
        Op(
            "moe/experts",
            "matmul",
            flops=2 * pairs * per_expert,
            weight_elems=touched * per_expert,
            act_elems=pairs * (2 * D + mats * e.expert_d_ff),
            weight_rows=touched * ((mats - 1) * e.expert_d_ff + D),
            group="experts",
        ),
    ]
    if e.shared_experts:
        per_shared = e.shared_experts * mats * D * (e.shared_d_ff or e.expert_d_ff)
        ops.append(
            Op(
                "moe/shared_experts",
                "matmul",
                flops=2 * B * T * per_shared,
                weight_elems=per_shared,
                act_elems=B * T * (2 * D + per_shared // D),
                weight_rows=e.shared_experts * ((mats - 1) * (e.shared_d_ff or e.expert_d_ff) + D),
                group="shared_experts",
            )
        )
    return ops


def _ffn_ops(m: ModelSpec, s: Step, kind: LayerKind, shard: ExpertShard | None) -> list[Op]:
    if kind.ffn == "moe" and m.moe is not None:
        return _moe(m, m.moe, s, shard)
    if kind.ffn == "dense":
        return _dense_mlp(m, s)
    return []


def layer_ops(m: ModelSpec, s: Step, shard: ExpertShard | None = None) -> list[Op]:
    """Every layer's operators: per layer group, one layer's ops times the group's count;
    same-named operators of different groups summed (launches add up)."""
    merged: dict[str, Op] = {}
    for g in m.layer_groups:
        block = m.mixer_block(g.kind.mixer)
        mixer = [
            op if op.group else dataclasses.replace(op, group=block.param_group)
            for op in block.ops(m, s, g.kind)
        ]
        for op in (*mixer, *_ffn_ops(m, s, g.kind, shard)):
            op = scaled(op, g.count)
            merged[op.name] = summed(merged[op.name], op) if op.name in merged else op
    return list(merged.values())


def norm_ops(m: ModelSpec, s: Step) -> list[Op]:
    """Norms with their residual adds: per norm read x and residual, write x (3·B·T·D);
    launches: each norm's kernels (`NORM_LAUNCHES`) and one residual add per norm but the
    final one."""
    B, T, D = s.batch, s.new_tokens, m.d_model
    n = m.layers * m.norms_per_layer + 1  # + the final norm
    return [
        Op(
            "norms+residual",
            "elementwise",
            flops=n * 5 * B * T * D,
            weight_elems=n * m.norm_params,
            act_elems=n * 3 * B * T * D,
            launches=n * NORM_LAUNCHES[m.norm] + n - 1,
            instances=n,
            group="norms",
        )
    ]


def embedding_ops(m: ModelSpec, s: Step) -> list[Op]:
    """Token (and learned position) lookup: reads only the gathered rows, at most the table."""
    B, T, D = s.batch, s.new_tokens, m.d_model
    rows = np.minimum(B * T, m.vocab_size)
    if m.position == "learned":
        rows = rows + np.minimum(T, m.max_context)  # positions shared across the batch
    return [
        Op(
            "embedding",
            "gather",
            flops=0,
            weight_elems=rows * D,
            act_elems=B * T * D,
            group="embedding",
        )
    ]


def lm_head_ops(m: ModelSpec, s: Step) -> list[Op]:
    """Logits D→V for the last position of each sequence (sampling) or all T (verification)."""
    tokens = s.batch * (s.new_tokens if s.logits == "all" else 1)
    D, V = m.d_model, m.vocab_size
    return [projection("lm_head", tokens, D, V, group="lm_head")]


def operators(m: ModelSpec, s: Step, shard: ExpertShard | None = None) -> list[Op]:
    """All operators of one forward step of model `m`, in execution order (on one
    expert-parallel rank when `shard` is given)."""
    return [*embedding_ops(m, s), *layer_ops(m, s, shard), *norm_ops(m, s), *lm_head_ops(m, s)]
