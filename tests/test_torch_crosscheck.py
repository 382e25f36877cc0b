"""Cross-check parameter counts and KV/state sizes against tensors of tiny torch modules built
from the same ModelSpec (shapes as the reference implementations lay them out).
Skipped when torch is not installed."""

from __future__ import annotations

import pytest

from roofline.calc.memory import kv_cache_bytes
from roofline.spec.model import LayerKind, ModelSpec
from roofline.spec.precision import Precision

torch = pytest.importorskip("torch")
nn = torch.nn

BF16 = Precision()
TINY = dict(
    name="tiny",
    display_name="tiny",
    family="test",
    source="test",
    layers=6,
    d_model=64,
    heads=4,
    kv_heads=2,
    head_dim=16,
    d_ff=96,
    vocab_size=100,
    max_context=512,
)


def _spec(**update) -> ModelSpec:
    return ModelSpec.model_validate({**TINY, **update})


def _mixer(m: ModelSpec, kind: LayerKind) -> nn.Module:
    D, N, K, H = m.d_model, m.heads, m.kv_heads, m.head_dim
    a = m.attention
    mods: dict[str, nn.Module] = {}
    if kind.mixer == "ssm":
        s, Di = m.ssm, m.d_inner
        R = s.rank(m)
        mods = {
            "in_proj": nn.Linear(D, 2 * Di, bias=False),
            "conv1d": nn.Conv1d(Di, Di, s.d_conv, groups=Di, bias=s.conv_bias),
            "x_proj": nn.Linear(Di, R + 2 * s.d_state, bias=False),
            "dt_proj": nn.Linear(R, Di),
            "out_proj": nn.Linear(Di, D, bias=False),
        }
        mix = nn.ModuleDict(mods)
        mix.A_log = nn.Parameter(torch.zeros(Di, s.d_state))
        mix.D = nn.Parameter(torch.ones(Di))
        return mix
    if a.kind == "mla":
        mods["q_proj"] = nn.Linear(D, N * (a.qk_nope_head_dim + a.qk_rope_head_dim), bias=False)
        mods["kv_a_proj_with_mqa"] = nn.Linear(D, a.kv_lora_rank + a.qk_rope_head_dim, bias=False)
        mods["kv_a_layernorm"] = nn.RMSNorm(a.kv_lora_rank)
        mods["kv_b_proj"] = nn.Linear(
            a.kv_lora_rank, N * (a.qk_nope_head_dim + a.v_head_dim), bias=False
        )
        mods["o_proj"] = nn.Linear(N * a.v_head_dim, D, bias=False)
    else:
        mods["q_proj"] = nn.Linear(D, N * H, bias=False)
        if kind.owns_kv:
            mods["k_proj"] = nn.Linear(D, K * H, bias=False)
            mods["v_proj"] = nn.Linear(D, K * H, bias=False)
        mods["o_proj"] = nn.Linear(N * H, D, bias=False)
    return nn.ModuleDict(mods)


def _ffn(m: ModelSpec, kind: LayerKind) -> nn.Module:
    D = m.d_model

    def mlp(F: int) -> nn.Module:
        return nn.ModuleDict(
            {p: nn.Linear(D, F, bias=False) for p in ("gate", "up")}
            | {"down": nn.Linear(F, D, bias=False)}
        )

    if kind.ffn == "dense":
        return mlp(m.d_ff)
    if kind.ffn == "moe":
        e = m.moe
        return nn.ModuleDict(
            {
                "router": nn.Linear(D, e.experts, bias=False),
                "experts": nn.ModuleList(mlp(e.expert_d_ff) for _ in range(e.experts)),
                "shared": nn.ModuleList(mlp(e.expert_d_ff) for _ in range(e.shared_experts)),
            }
        )
    return nn.Identity()


def _build(m: ModelSpec) -> nn.Module:
    D = m.d_model
    layers = nn.ModuleList(
        nn.ModuleDict(
            {"mixer": _mixer(m, k), "ffn": _ffn(m, k)}
            | {f"norm{i}": nn.RMSNorm(D) for i in range(m.norms_per_layer)}
        )
        for k in m.layer_kinds
    )
    return nn.ModuleDict(
        {
            "embed": nn.Embedding(m.vocab_size, D),
            "layers": layers,
            "norm": nn.RMSNorm(D),
            "lm_head": nn.Linear(D, m.vocab_size, bias=False),
        }
    )


def _numel(mod: nn.Module) -> int:
    return sum(p.numel() for p in mod.parameters())


def _run_cache(m: ModelSpec, model: nn.Module, B: int, S: int) -> int:
    """Feed S tokens through the K/V (or latent) projections one token at a time, keeping a
    cache the way a decoder does (rolling buffer of W on local layers, none on layers that
    reuse another layer's KV); return the cache's bytes in bf16."""
    W = m.attention.sliding_window
    caches: dict[int, torch.Tensor] = {}
    x = torch.randn(B, S, m.d_model)
    with torch.no_grad():
        for i, (kind, layer) in enumerate(zip(m.layer_kinds, model["layers"], strict=True)):
            if not kind.owns_kv:
                continue
            mix = layer["mixer"]
            for t in range(S):
                xt = x[:, t : t + 1]
                if "kv_a_proj_with_mqa" in mix:  # MLA: latent + rope key, (B, 1, r + R)
                    new = mix["kv_a_proj_with_mqa"](xt)
                else:  # (B, 1, 2·K·H): K and V of the K kv heads
                    new = torch.cat([mix["k_proj"](xt), mix["v_proj"](xt)], dim=-1)
                c = torch.cat([caches[i], new], dim=1) if i in caches else new
                if kind.mixer == "local":
                    c = c[:, -W:]
                caches[i] = c.to(torch.bfloat16)
    return sum(c.numel() * c.element_size() for c in caches.values())


@pytest.mark.parametrize(
    "update",
    [
        {},  # GQA
        {"kv_heads": 4, "attention": {"kind": "mha"}},  # MHA
        {"layer_pattern": ["local", "local", "global"], "attention": {"sliding_window": 8}},
        {"layer_pattern": ["local", "global"], "attention": {"sliding_window": 8, "kv_share": 2}},
        {
            "attention": {
                "kind": "mla",
                "kv_lora_rank": 24,
                "qk_rope_head_dim": 8,
                "qk_nope_head_dim": 16,
                "v_head_dim": 12,
            }
        },
    ],
    ids=["gqa", "mha", "sliding-window", "window+sharing", "mla"],
)
def test_cache_bytes_match_torch(update: dict) -> None:
    m = _spec(**update)
    model = _build(m)
    assert _numel(model) == m.total_params
    for S in (5, 20):  # inside and beyond the window of 8
        assert _run_cache(m, model, 2, S) == kv_cache_bytes(m, BF16, 2, S)


def test_moe_params_match_torch() -> None:
    m = _spec(
        moe={
            "experts": 4,
            "top_k": 2,
            "expert_d_ff": 32,
            "shared_experts": 1,
            "dense_first_layers": 1,
        }
    )
    assert _numel(_build(m)) == m.total_params


def test_mamba_params_and_state_match_torch() -> None:
    m = _spec(
        heads=0,
        kv_heads=0,
        head_dim=0,
        d_ff=0,
        norms_per_layer=1,
        layer_pattern=["ssm"],
        ssm={"kind": "mamba1", "d_state": 8, "d_conv": 4, "expand": 2},
    )
    model = _build(m)
    assert _numel(model) == m.total_params
    # reference inference cache per layer: conv_state (B, d_inner, d_conv), ssm_state
    # (B, d_inner, d_state)
    B, Di, s = 3, m.d_inner, m.ssm
    state = [torch.zeros(B, Di, s.d_conv, dtype=torch.bfloat16) for _ in range(m.layers)] + [
        torch.zeros(B, Di, s.d_state, dtype=torch.bfloat16) for _ in range(m.layers)
    ]
    held = sum(t.numel() * t.element_size() for t in state)
    assert held == kv_cache_bytes(m, BF16, B, 1) == kv_cache_bytes(m, BF16, B, 10_000)
