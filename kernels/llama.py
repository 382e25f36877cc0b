"""A Llama-style decoder built from a ModelSpec with random weights and a real KV cache.

Pre-norm blocks: RMSNorm → fused QKV → RoPE → append K,V to the cache → SDPA (GQA) → output
projection → residual; RMSNorm → fused gate/up → SiLU·up → down → residual; final norm and
the LM head on the last position. Shapes in scaling-book letters: x (B,T,D), q (B,N,T,H),
cache (B,K,S,H). Only what the calculator models is built: gated MLP, RMSNorm, RoPE, no biases.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from roofline.errors import InvalidInputError
from roofline.spec.model import ModelSpec

from .micro import rope


def _check_supported(m: ModelSpec) -> None:
    unsupported = [
        what
        for what, bad in (
            ("a plain MLP", m.mlp != "gated"),
            ("LayerNorm", m.norm != "rmsnorm"),
            ("non-RoPE positions", m.position != "rope"),
            ("linear biases", m.linear_bias != "none"),
            ("parallel blocks", m.parallel_block),
            ("tied embeddings", m.tied_embeddings),
            ("norms_per_layer != 2", m.norms_per_layer != 2),
        )
        if bad
    ]
    if unsupported:
        raise InvalidInputError(
            f"the measured Llama block cannot build {m.name}: it has "
            f"{', '.join(unsupported)}; use a Llama-style spec"
        )


class LlamaStack:
    """Weights (L layers) and a KV cache for B sequences of up to `max_tokens` positions."""

    def __init__(
        self,
        m: ModelSpec,
        batch: int,
        max_tokens: int,
        dtype: torch.dtype,
        device: torch.device,
        seed: int = 0,
    ) -> None:
        _check_supported(m)
        g = torch.Generator(device="cpu").manual_seed(seed)
        D, F_, H = m.d_model, m.d_ff, m.head_dim

        def w(*shape: int) -> torch.Tensor:  # ~unit-variance activations through the stack
            return (torch.randn(*shape, generator=g) / shape[-1] ** 0.5).to(device, dtype)

        self.m = m
        self.embedding = w(m.vocab_size, D)
        self.layers = [
            dict(
                attn_norm=torch.ones(D, dtype=dtype, device=device),
                qkv=w(m.q_dim + 2 * m.kv_dim, D),  # (out, in) like nn.Linear
                out=w(D, m.q_dim),
                mlp_norm=torch.ones(D, dtype=dtype, device=device),
                gate_up=w(2 * F_, D),
                down=w(D, F_),
            )
            for _ in range(m.layers)
        ]
        self.final_norm = torch.ones(D, dtype=dtype, device=device)
        self.lm_head = w(m.vocab_size, D)
        cache_shape = (m.layers, batch, m.kv_heads, max_tokens, H)  # (L, B, K, S, H)
        self.k_cache = torch.randn(cache_shape, generator=g).to(device, dtype)
        self.v_cache = torch.randn(cache_shape, generator=g).to(device, dtype)
        inv_freq = 1.0 / 10000 ** (torch.arange(0, H, 2, dtype=torch.float32) / H)
        angles = torch.outer(torch.arange(max_tokens, dtype=torch.float32), inv_freq)
        self.cos = torch.cat([angles.cos()] * 2, -1).to(device, dtype)  # (S, H)
        self.sin = torch.cat([angles.sin()] * 2, -1).to(device, dtype)

    def parameters(self) -> list[torch.Tensor]:
        per_layer = [t for layer in self.layers for t in layer.values()]
        return [self.embedding, *per_layer, self.final_norm, self.lm_head]

    def _rope(self, x: torch.Tensor, start: int) -> torch.Tensor:
        T = x.shape[2]
        return rope(x, self.cos[start : start + T], self.sin[start : start + T])

    @torch.inference_mode()
    def forward(self, tokens: torch.Tensor, start: int) -> torch.Tensor:
        """Process T new tokens (B,T) after `start` cached ones; logits (B,V) of the last."""
        m = self.m
        B, T = tokens.shape
        N, K, H = m.heads, m.kv_heads, m.head_dim
        x = F.embedding(tokens, self.embedding)  # (B,T,D)
        for i, layer in enumerate(self.layers):
            h = F.rms_norm(x, (m.d_model,), layer["attn_norm"])
            q, k, v = F.linear(h, layer["qkv"]).split((N * H, K * H, K * H), dim=-1)
            q = self._rope(q.view(B, T, N, H).transpose(1, 2), start)  # (B,N,T,H)
            k = self._rope(k.view(B, T, K, H).transpose(1, 2), start)  # (B,K,T,H)
            end = start + T
            self.k_cache[i, :B, :, start:end].copy_(k)
            self.v_cache[i, :B, :, start:end].copy_(v.view(B, T, K, H).transpose(1, 2))
            a = F.scaled_dot_product_attention(
                q,
                self.k_cache[i, :B, :, :end],
                self.v_cache[i, :B, :, :end],
                is_causal=T > 1,
                enable_gqa=N != K,
            )
            x = x + F.linear(a.transpose(1, 2).reshape(B, T, N * H), layer["out"])
            h = F.rms_norm(x, (m.d_model,), layer["mlp_norm"])
            gate, up = F.linear(h, layer["gate_up"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, layer["down"])
        x = F.rms_norm(x[:, -1], (m.d_model,), self.final_norm)
        return F.linear(x, self.lm_head)
