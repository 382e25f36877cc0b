"""Cost of one serving iteration that mixes sequences of different shapes.

A continuous-batching step runs decode sequences (T=1 over their own S) beside prefill chunks
(T=c over S already computed). `roofline.cost.step_cost` takes one T for the whole batch, so
this module reads the same operators another way. Every operator's compute time and memory
time are affine in a few batch totals (features), with n = Σ T_i the step's new tokens:

    tokens        = n                              matmul FLOPs, activations, KV writes
    seqs          = B                              logits of the last position, SSM state
    pairs         = Σ T_i·S_i + T_i(T_i+1)/2       attention FLOPs (causal query-key pairs)
    context       = Σ (S_i + T_i)                  KV read by attention
    t_max         = max T_i                        learned position rows (shared by the batch)
  with a sliding window W (local layers):
    local_pairs   = Σ attended_pairs(T_i, S_i, W)  pairs capped by the window
    local_context = Σ min(S_i + T_i, W + T_i − 1)  KV a local layer reads
  with a mixture of experts (E experts, top k):
    experts       = E·(1 − (1 − k/E)^n)            experts the step's tokens touch (weights)

plus a constant (weights, read once per step). Every feature is a known function of the
sequences' (T_i, S_i), evaluated per step; the coefficients are found once per
model/hardware/precision/ceiling by evaluating `step_cost` at uniform probe shapes (inside,
across and beyond the window) and solving for them; the fit is checked against every probe,
so an operator that is not affine in these features is refused rather than mis-costed. Per
step the cost is then Σ_ops max(compute_s, memory_s) + launch overheads: an ops × features
product, no objects.

On a parallel deployment (`roofline.parallel`) the probes are `parallel_step_cost`: one TP
rank's operators plus the collectives, each collective an extra row whose time is affine in
the tokens (all-reduce and hand-off of B·T·D activations, all-to-all of B·T·k·D). With expert
parallelism over ep GPUs the fullest GPU runs ⌈B/ep⌉ of the B sequences: the per-sequence
features are those of its share, the step's sums scaled by ⌈B/ep⌉/B (exact for uniform
batches, the average sequence for mixed ones), while the routed experts see the whole group's
tokens n (one more feature, `group_tokens`, and experts touched by n).

Exact while n stays below the vocabulary size V (the embedding gathers min(n, V) rows);
serving token budgets are far below V. Device terms that are step functions of a GEMM's rows
(tile and wave quantisation, the calibrated CPU terms M½ and gemv row cost) are not affine in
these features, so the simulator runs the device's spec without them (`affine_spec`) and says
so; every other achievable and engine term is kept: the fixed per-kernel and per-GEMM times
(constant per step), the engine's decode attention cost (pure-decode steps), and the host:
a step takes max(device time, host launch time) + the engine's per-step host time, with no
host launch cost for pure-decode steps an engine replays from CUDA graphs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cost import Ceiling
from ..engine import EngineSpec
from ..errors import InvalidInputError
from ..hardware import HardwareSpec
from ..model import ModelSpec
from ..operators import Step, attended_pairs, expected_experts_touched, kv_tokens_read
from ..parallel import Parallel, parallel_step_cost
from ..precision import Precision

#: (B, T, S) probe shapes: their features span every direction, the rest re-check the fit.
#: Kept small so B·T stays below every vocabulary size.
_PROBES = [
    (1, 1, 0), (2, 1, 0), (1, 2, 0), (1, 1, 7), (3, 4, 2), (2, 3, 11), (5, 1, 40), (1, 16, 5),
    (4, 8, 100), (7, 2, 3), (1, 64, 900), (16, 1, 2000), (32, 4, 1), (8, 32, 0),
]
#: With expert parallelism, shapes whose ⌈B/ep⌉/B differs from the others' (group tokens and
#: the fullest GPU's tokens then vary apart).
_EP_PROBES = [(3, 2, 9), (5, 3, 1), (9, 1, 30), (6, 4, 0)]
_RTOL = 1e-9


def _window_probes(W: int) -> list[tuple[int, int, int]]:
    """Shapes inside, straddling and beyond a window of W tokens."""
    return [(1, 1, W + 3), (2, 1, 2 * W), (1, 8, W - 3), (3, 4, W + 10), (1, 16, W - 5),
            (2, 2, 3 * W), (1, 64, W // 2)]


#: Device terms that are step functions of a GEMM's rows, off in the serving simulator.
NON_AFFINE_TERMS = {"gemm_tile": None, "matmul_half_rows": 0.0, "gemv_row_ns": 0.0}


def affine_spec(hw: HardwareSpec) -> HardwareSpec:
    """`hw` without the device terms that are not affine in the batch features."""
    a = hw.achievable.model_copy(update=NON_AFFINE_TERMS)
    return hw.model_copy(update={"achievable": a})


@dataclass(frozen=True)
class MixedStepCost:
    """Per-operator coefficients: time of op k = max(compute[k]·x, memory[k]·x), plus the
    step's fixed device times, for the feature vector x of the step; then the host
    (module docstring)."""

    compute_coef: np.ndarray  # (ops, features) seconds per unit of each feature
    memory_coef: np.ndarray  # (ops, features)
    overhead_s: float  # fixed device time of the whole step's kernels
    window: int | None = None  # W of the local layers
    experts: tuple[int, int] | None = None  # (E, k) of the MoE layers
    ep: int = 1  # expert-parallel GPUs the replica's sequences are split over
    decode_overhead_s: float = 0.0  # extra fixed device time of a pure-decode step
    host_launch_s: float = 0.0  # host time to launch one step's kernels (no graph)
    graphs: bool = False  # pure-decode steps replay a CUDA graph: no host launch time
    host_step_s: float = 0.0  # the engine's per-step host work

    def _share(self, B: float) -> float:
        """Share of a replica's B sequences on its fullest GPU: ⌈B/ep⌉/B (1 without EP)."""
        return 1.0 if self.ep == 1 else float(np.ceil(B / self.ep) / B)

    def features(self, B, T, S) -> np.ndarray:
        """Feature vector(s) of uniform batches: B sequences of T new tokens on S cached."""
        B, T, S = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (B, T, S)))
        n = B * T  # the group's tokens
        if self.ep > 1:
            B = np.ceil(B / self.ep)  # sequences on the fullest GPU
        cols = [np.ones_like(B), B * T, B, B * attended_pairs(T, S), B * (S + T), T]
        if self.window is not None:
            cols += [B * attended_pairs(T, S, self.window), B * kv_tokens_read(T, S, self.window)]
        if self.ep > 1:
            cols.append(n)
        if self.experts is not None:
            cols.append(expected_experts_touched(*self.experts, n))
        return np.stack(cols, axis=-1)

    def _times(self, x: np.ndarray, decode: bool = False) -> np.ndarray:
        """Step times of feature rows x (..., features); `decode`: every sequence has T=1."""
        device = np.maximum(x @ self.compute_coef.T, x @ self.memory_coef.T).sum(axis=-1) \
            + self.overhead_s + (self.decode_overhead_s if decode else 0.0)
        host = 0.0 if decode and self.graphs else self.host_launch_s
        return np.maximum(device, host) + self.host_step_s

    def step_s(self, T: np.ndarray, S: np.ndarray) -> float:
        """Time of one step over sequences with new tokens T_i on top of S_i cached."""
        n = float(T.sum())
        cols = [1.0, n, float(T.size), float((T * S + T * (T + 1) / 2).sum()),
                float((S + T).sum()), float(T.max())]
        if self.window is not None:
            cols += [float(attended_pairs(T, S, self.window).sum()),
                     float(kv_tokens_read(T, S, self.window).sum())]
        if self.ep > 1:
            share = self._share(T.size)
            cols = [cols[0], *(c * share for c in cols[1:5]), cols[5],
                    *(c * share for c in cols[6:]), n]
        if self.experts is not None:
            cols.append(float(expected_experts_touched(*self.experts, n)))
        return float(self._times(np.array(cols), decode=bool(np.all(T == 1))))

    def decode_s(self, S: np.ndarray, steps: int) -> np.ndarray:
        """Times of `steps` consecutive decode steps (T=1) of the sequences whose contexts
        start at S_i: step j runs every sequence over S_i + j cached tokens."""
        n = float(S.size)
        j = np.arange(steps, dtype=float)
        pairs = float((S + 1).sum()) + n * j  # Σ (S_i + j + 1)
        x = np.empty((steps, self.compute_coef.shape[1]))
        share = self._share(n)
        x[:, :6] = (1.0, n * share, n * share, 0.0, 0.0, 1.0)
        x[:, 3] = x[:, 4] = pairs * share
        col = 6
        if self.window is not None:
            # Σ min(S_i + j + 1, W): the sequences still inside the window add S_i + j + 1,
            # the rest W each (both pairs and KV read of a local decode).
            s = np.sort(S.astype(float))
            inside = np.searchsorted(s, self.window - 1 - j, side="left")  # S_i + j + 1 < W
            head = np.concatenate(([0.0], np.cumsum(s)))[inside]
            x[:, col] = x[:, col + 1] = (head + inside * (j + 1)
                                         + (n - inside) * self.window) * share
            col += 2
        if self.ep > 1:
            x[:, col] = n
            col += 1
        if self.experts is not None:
            x[:, col] = expected_experts_touched(*self.experts, n)
        return self._times(x, decode=True)


def mixed_step_cost(model: ModelSpec, hw: HardwareSpec, precision: Precision = Precision(),
                    ceiling: Ceiling = "achievable", par: Parallel = Parallel(),
                    engine: EngineSpec | None = None) -> MixedStepCost:
    """Fit the per-operator coefficients from `parallel_step_cost` (one GPU: `step_cost`) at
    the probe shapes and check them; collectives are rows with a memory time only. The
    device runs without its non-affine terms (`affine_spec`)."""
    hw = affine_spec(hw)
    engine = engine if ceiling == "achievable" else None
    W = model.attention.sliding_window if model.layers_with("local") else None
    moe = (model.moe.experts, model.moe.top_k) if model.moe is not None else None
    shape = MixedStepCost(np.zeros((0, 0)), np.zeros((0, 0)), 0.0, W, moe, par.ep)
    B, T, S = np.array(_PROBES + _EP_PROBES * (par.ep > 1) + (_window_probes(W) if W else []),
                       dtype=float).T
    psc = parallel_step_cost(model, hw, Step(B, T, S), precision, par, ceiling, engine)
    sc = psc.compute
    names = [o.name for o in sc.ops] + [c.name for c in psc.collectives]
    zero = np.zeros_like(B)
    compute = np.stack([np.broadcast_to(o.compute_s, B.shape) for o in sc.ops]
                       + [zero for _ in psc.collectives])  # (ops, probes)
    memory = np.stack([np.broadcast_to(o.memory_s, B.shape) for o in sc.ops]
                      + [np.broadcast_to(c.time_s, B.shape) for c in psc.collectives])
    X = shape.features(B, T, S)  # (probes, features)
    compute_coef = np.linalg.lstsq(X, compute.T, rcond=None)[0].T  # (ops, features)
    memory_coef = np.linalg.lstsq(X, memory.T, rcond=None)[0].T
    scale = np.maximum(compute, memory).max()  # an op's error is judged against the step's
    for name, coef, target in (("compute", compute_coef, compute), ("memory", memory_coef, memory)):
        err = np.abs(coef @ X.T - target).max(axis=1)  # (ops,)
        if np.any(err > _RTOL * np.maximum(target.max(axis=1), 1e-6 * scale)):
            worst = int(np.argmax(err / np.maximum(target.max(axis=1), 1e-6 * scale)))
            raise InvalidInputError(
                f"operator '{names[worst]}' of {model.name} has a {name} time that is not "
                "affine in the batch features (tokens, sequences, attended pairs, context, "
                "windowed pairs and context, experts touched); the serving simulator cannot "
                "cost mixed batches of this model on this hardware spec")
    overhead = float(sum(o.overhead_s for o in sc.ops))
    one = Step(1, 1, 1)  # a pure-decode step: its fixed device and host terms
    decode = parallel_step_cost(model, hw, one, precision, par, ceiling, engine).compute
    decode_overhead = float(sum(o.overhead_s for o in decode.ops)) - overhead
    return MixedStepCost(compute_coef, memory_coef, overhead, W, moe, par.ep,
                         decode_overhead, sc.host_launch_s,
                         engine is not None and engine.cuda_graphs, sc.host_step_s)
