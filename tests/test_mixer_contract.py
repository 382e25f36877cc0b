"""The mixer contract: a new attention variant is one class (and, in the catalog, one line in
the `mixers.Attention` union). Here a toy variant, "tied" attention whose keys are its values
(one K = V projection and one cached tensor per kv head), is written in one class and plugged
into a model type whose union lists it; every layer of the tool then runs it unchanged:
parameter counts, KV bytes and what fits, the estimate, the tensor group of its operators, its
llama.cpp tensors and the serving simulator's step-cost fit.

Shape: tiny-llama-30m (L = 6, D = 512, N = 8 query heads, K = 4 kv heads, H = 64, vocab 8192,
untied, gated MLP d_ff 1536), its attention replaced by the toy."""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
import pytest
from pydantic import Discriminator, Tag

from roofline.calc import memory
from roofline.calc.phases import estimate
from roofline.calc.stack import Stack
from roofline.serve.stepcost import MixedStepCost, mixed_step_cost
from roofline.spec import llamacpp
from roofline.spec.catalog import load_hardware, load_model
from roofline.spec.forward import operators
from roofline.spec.mixers import MLAAttention, SoftmaxAttention, _Attention
from roofline.spec.model import LayerKind, ModelSpec
from roofline.spec.operators import Op, Step, attended_pairs, kv_tokens_read, projection
from roofline.spec.precision import Precision

L, D, N, K, H = 6, 512, 8, 4, 64


class TiedAttention(_Attention):
    """Keys are values: one D→K·H projection and one cached tensor per kv head (K·H values a
    token and layer, half of GQA's 2·K·H)."""

    kind: Literal["tied"]

    def kv_elems_per_token_layer(self, m: ModelSpec) -> int:
        return m.kv_dim

    def params(self, m: ModelSpec, kind: LayerKind) -> int:
        kv = m.kv_dim if kind.owns_kv else 0
        return m.d_model * (m.q_dim + kv) + m.q_dim * m.d_model

    def ops(self, m: ModelSpec, s: Step, kind: LayerKind) -> list[Op]:
        B, T, S = s.batch, s.new_tokens, s.cached_tokens
        qd, kvd = m.q_dim, m.kv_dim
        return [
            projection("tied/qkv", B * T, m.d_model, qd + kvd),
            Op(
                "tied/scores+av",
                "attention",
                flops=B * 4 * attended_pairs(T, S) * m.heads * m.head_dim,
                act_elems=B * T * 2 * qd,
                kv_read_elems=B * kv_tokens_read(T, S) * kvd,
                kv_write_elems=B * T * kvd,
            ),
            projection("tied/out", B * T, qd, m.d_model),
        ]


#: `mixers.Attention` with the toy's line added: the one edit the catalog would make.
ToyUnion = Annotated[
    Annotated[SoftmaxAttention, Tag("gqa")]
    | Annotated[SoftmaxAttention, Tag("mha")]
    | Annotated[MLAAttention, Tag("mla")]
    | Annotated[TiedAttention, Tag("tied")],
    Discriminator(lambda d: d.get("kind", "gqa") if isinstance(d, dict) else d.kind),
]


class ToyModelSpec(ModelSpec):
    attention: ToyUnion = SoftmaxAttention()  # type: ignore[assignment]


@pytest.fixture(scope="module")
def toy() -> ModelSpec:
    base = load_model("tiny-llama-30m").model_dump()
    return ToyModelSpec.model_validate(base | {"name": "toy-tied", "attention": {"kind": "tied"}})


def test_parameters_and_kv_by_hand(toy: ModelSpec) -> None:
    # per layer: Q 512·512 = 262,144; K=V 512·256 = 131,072; out 512·512 = 262,144
    assert toy.params.attention == L * (262_144 + 131_072 + 262_144) == 3_932_160
    # the rest is tiny-llama-30m's own: only the attention term differs
    gqa = load_model("tiny-llama-30m")
    assert toy.total_params - gqa.total_params == L * (655_360 - 786_432)
    # K·H = 256 values a token and layer, 6 layers, 2 B in bf16
    assert memory.kv_bytes_per_token(toy, Precision()) == L * 256 * 2 == 3_072
    assert memory.kv_elems_per_sequence(toy, 1_000) == 1_000 * L * 256


def test_the_estimate_runs_it_with_its_operators(toy: ModelSpec) -> None:
    hw = load_hardware("h100-sxm")
    e = estimate(toy, Stack.resolve(toy, hw, ceiling="datasheet"), [1, 4], 128, 32)
    assert all(c.tpot_s > 0 and c.ttft_s > 0 for c in e.cases)
    ops = {o.name: o for o in operators(toy, Step(1, 1, 100))}
    # its operators read the attention group's format: the group comes from the block
    assert {ops[n].group for n in ("tied/qkv", "tied/scores+av", "tied/out")} == {"attention"}
    # decode at S = 100 reads (100 + 1) tokens of K·H = 256 values in each of 6 layers
    assert ops["tied/scores+av"].kv_read_elems == L * 101 * 256
    fit = memory.batch_fit(toy, Stack.resolve(toy, hw), 1024, 256)
    assert fit.max_batch > 0


def test_llamacpp_stores_it_by_the_default_roles(toy: ModelSpec) -> None:
    ts = [t for t in llamacpp.tensors(toy) if t.group == "attention"]
    assert [t.role for t in ts] == ["attention_global"] * L
    assert sum(t.elems for t in ts) == toy.params.attention


def test_the_serving_simulator_fits_its_step_cost(toy: ModelSpec) -> None:
    hw = load_hardware("h100-sxm")
    cost = mixed_step_cost(toy, Stack.resolve(toy, hw, ceiling="datasheet"))
    assert isinstance(cost, MixedStepCost)
    assert [f.name for f in cost.table] == [
        "constant",
        "tokens",
        "sequences",
        "pairs",
        "context",
        "t_max",
    ]
    assert cost.step_s(np.array([1.0, 1.0, 64.0]), np.array([10.0, 200.0, 0.0])) > 0
