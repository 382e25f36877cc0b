"""Decode steps of a decoder the CPU suite never measures, predicted from this machine's
calibrated spec: does the CI gate's calibration generalise beyond the suite's own models?

The decoder is written here from scratch, not with kernels/llama.py: `torch.nn.Module`s, one
`nn.Linear` per projection (q, k, v, o, gate, up, down: seven GEMMs per layer where the suite's
stack fuses them into four), an RMSNorm written out (x · rsqrt(mean(x²) + ε) · w), RoPE by
rotate-half, a pre-allocated KV cache and SDPA with GQA. Two sizes, neither in the suite
(tiny-llama-30m: D 512, 6 layers; tiny-llama-120m: D 768, 12 layers):

    small  D 384,  8 layers,  6 heads / 2 KV heads, F 1024, vocab 12,288  (~19 M parameters)
    large  D 1024, 8 layers, 16 heads / 4 KV heads, F 2816, vocab 24,576  (~128 M)

B ∈ {1, 4, 16}, S ∈ {128, 1024}, fp32, one intra-op thread (the ci suite's). Each decode step
is predicted by `roofline.step_cost` on the spec `roofline calibrate` writes from the ci suite,
ceiling achievable. As `roofline check` does, the suite is measured in several rounds (each
point the median round's) and so is every decoder step, each round measuring both in one
process: on a shared VM a whole run is faster or slower by 10–30%, the calibration with it.

    PYTHONPATH=. python benchmarks/independent_decoder.py [--rounds 3] [--json out.json]

Prints one row per step (predicted, measured, signed error) and the median and worst |error|.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from kernels.timing import Budget, time_fn
from roofline.calc.cost import step_cost
from roofline.measure.calibrate import calibrated_spec
from roofline.measure.results import Results, median_of_runs, run_spread
from roofline.spec.model import ModelSpec
from roofline.spec.operators import Step
from roofline.spec.precision import Precision

SIZES = {
    "indep-small": dict(d_model=384, layers=8, heads=6, kv_heads=2, d_ff=1024, vocab_size=12288),
    "indep-large": dict(d_model=1024, layers=8, heads=16, kv_heads=4, d_ff=2816, vocab_size=24576),
}
BATCHES = (1, 4, 16)
CONTEXTS = (128, 1024)


def spec(name: str) -> ModelSpec:
    s = SIZES[name]
    return ModelSpec(
        name=name,
        display_name=f"independent decoder ({name})",
        family="synthetic",
        source="synthetic: benchmarks/independent_decoder.py",
        head_dim=s["d_model"] // s["heads"],
        mlp="gated",
        activation="silu",
        tied_embeddings=False,
        norm="rmsnorm",
        position="rope",
        max_context=2048,
        **s,
    )


class RMSNorm(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight


class Block(nn.Module):
    def __init__(self, m: ModelSpec, batch: int, max_tokens: int) -> None:
        super().__init__()
        D, H = m.d_model, m.head_dim
        self.n, self.k, self.h = m.heads, m.kv_heads, H
        self.q = nn.Linear(D, m.heads * H, bias=False)
        self.kp = nn.Linear(D, m.kv_heads * H, bias=False)
        self.vp = nn.Linear(D, m.kv_heads * H, bias=False)
        self.o = nn.Linear(m.heads * H, D, bias=False)
        self.gate = nn.Linear(D, m.d_ff, bias=False)
        self.up = nn.Linear(D, m.d_ff, bias=False)
        self.down = nn.Linear(m.d_ff, D, bias=False)
        self.norm1, self.norm2 = RMSNorm(D), RMSNorm(D)
        self.register_buffer("kc", torch.randn(batch, m.kv_heads, max_tokens, H))
        self.register_buffer("vc", torch.randn(batch, m.kv_heads, max_tokens, H))

    def forward(self, x: torch.Tensor, start: int, cos: torch.Tensor, sin: torch.Tensor):
        B, T, _ = x.shape
        h = self.norm1(x)
        q = self.q(h).view(B, T, self.n, self.h).transpose(1, 2)
        k = self.kp(h).view(B, T, self.k, self.h).transpose(1, 2)
        v = self.vp(h).view(B, T, self.k, self.h).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        end = start + T
        self.kc[:B, :, start:end] = k
        self.vc[:B, :, start:end] = v
        a = F.scaled_dot_product_attention(
            q, self.kc[:B, :, :end], self.vc[:B, :, :end], enable_gqa=True
        )
        x = x + self.o(a.transpose(1, 2).reshape(B, T, self.n * self.h))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class Decoder(nn.Module):
    def __init__(self, m: ModelSpec, batch: int, max_tokens: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(m.vocab_size, m.d_model)
        self.blocks = nn.ModuleList(Block(m, batch, max_tokens) for _ in range(m.layers))
        self.norm = RMSNorm(m.d_model)
        self.head = nn.Linear(m.d_model, m.vocab_size, bias=False)
        H = m.head_dim
        inv = 1.0 / 10000 ** (torch.arange(0, H, 2, dtype=torch.float32) / H)
        ang = torch.outer(torch.arange(max_tokens, dtype=torch.float32), inv)
        self.register_buffer("cos", torch.cat([ang.cos()] * 2, -1))
        self.register_buffer("sin", torch.cat([ang.sin()] * 2, -1))

    @torch.inference_mode()
    def forward(self, tokens: torch.Tensor, start: int) -> torch.Tensor:
        T = tokens.shape[1]
        cos, sin = self.cos[start : start + T], self.sin[start : start + T]
        x = self.embed(tokens)
        for b in self.blocks:
            x = b(x, start, cos, sin)
        return self.head(self.norm(x[:, -1]))


def one_round(threads: int) -> tuple[Results, list[float]]:
    """The ci suite (what `roofline check` measures and calibrates on) and then every decode
    step of the two decoders, in one process: a run's speed on a shared VM moves as a whole."""
    from kernels import suite
    from roofline.measure.device import detect

    info = detect("cpu", threads)
    results = suite.run(info, "ci", suite.default_dtypes(info))
    torch.set_num_threads(results.environment.threads)
    torch.manual_seed(0)
    budget = Budget(0.05, 0.3, min_repeats=5)
    times = []
    for name in SIZES:
        m = spec(name)
        net = Decoder(m, max(BATCHES), max(CONTEXTS) + 1).eval()
        for B in BATCHES:
            for S in CONTEXTS:
                times.append(_time_step(net, B, S, budget))
        del net
    return results, times


def _time_step(net: Decoder, B: int, S: int, budget: Budget) -> float:
    tokens = torch.randint(0, net.embed.num_embeddings, (B, 1))
    return time_fn(lambda: net(tokens, S), budget, torch.device("cpu")).median_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="suite + decoder rounds (odd)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    runs, measured = [], []
    for i in range(args.rounds):
        r, t = one_round(args.threads)
        runs.append(r)
        measured.append(t)
        print(f"round {i + 1}/{args.rounds} measured", flush=True)
    results = median_of_runs(runs)
    hw = calibrated_spec(results, "independent_decoder rounds")
    keys = [(n, B, S) for n in SIZES for B in BATCHES for S in CONTEXTS]
    rows = []
    for j, (name, B, S) in enumerate(keys):
        meas = float(np.median([t[j] for t in measured]))
        cost = step_cost(spec(name), hw, Step(B, 1, S), Precision.uniform("fp32"), "achievable")
        pred = float(cost.time_s)
        rows.append(dict(model=name, B=B, S=S, predicted_s=pred, measured_s=meas))
        print(
            f"{name:12s} B={B:<3d} S={S:<5d} predicted {pred * 1e3:7.2f} ms  "
            f"measured {meas * 1e3:7.2f} ms  error {pred / meas - 1:+6.1%}"
        )
    errs = np.abs([r["predicted_s"] / r["measured_s"] - 1 for r in rows])
    print(
        f"decode steps: {len(rows)}, median |error| {np.median(errs):.1%}, worst {errs.max():.1%} "
        f"({args.rounds} rounds; runs disagree by {run_spread(runs):.0%} at the median point)"
    )
    if args.json:
        out = dict(rounds=args.rounds, terms=hw.achievable.model_dump(mode="json"), rows=rows)
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
