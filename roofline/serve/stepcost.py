"""Cost of one serving iteration that mixes sequences of different shapes.

A continuous-batching step runs decode sequences (T=1 over their own S) beside prefill chunks
(T=c over S already computed). `roofline.calc.cost.step_cost` takes one T for the whole batch, so
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
    experts       = E·(1 − (1 − k/E)^n)            experts the step's tokens touch (weights; with EP
                                                   the busiest rank's expected maximum)

plus a constant (weights, read once per step). The features are one named table
(`serving_features`: `BASE_FEATURES`, `window_features`, `expert_features`), each written once
for the three shapes a step comes in (uniform probes, a mixed step, a run of decode steps).
Every feature is a known function of the
sequences' (T_i, S_i), evaluated per step; the coefficients are found once per
model/hardware/precision/ceiling by evaluating `step_cost` at uniform probe shapes (inside,
across and beyond the window) and solving for them; the fit is checked against every probe,
so an operator that is not affine in these features is refused rather than mis-costed. Per
step the cost is then Σ_ops max(compute_s, memory_s) + launch overheads: an ops × features
product, no objects.

On a parallel deployment (`roofline.calc.parallel`) the probes are `parallel_step_cost`: one TP
rank's operators plus the collectives, each collective an extra row whose time is affine in
the tokens (all-reduce and hand-off of B·T·D activations, all-to-all of B·T·k·D). With expert
parallelism over ep GPUs the fullest GPU runs ⌈B/ep⌉ of the B sequences: the per-sequence
features are those of its share, the step's sums scaled by ⌈B/ep⌉/B (exact for uniform
batches, the average sequence for mixed ones), while the routed experts see the whole group's
tokens n and the busiest rank sets the step: one more feature, its expected maximum of
token-expert pairs (`operators.busiest_rank_pairs`), and its expected maximum of experts
touched (`operators.busiest_rank_experts`) in place of the mean.

Exact while n stays below the vocabulary size V (the embedding gathers min(n, V) rows);
serving token budgets are far below V. Device terms that are step functions of a GEMM's rows
(tile and wave quantisation, the calibrated CPU terms M½ and gemv row cost) are not affine in
these features, so the simulator fits the device's spec without them (`affine_spec`) and adds
back, per operator row, what they make of a GEMM of the step's rows (`gemm_rows_delta`: the
difference tabulated by rows: every count to 256, every multiple of 64 to 32,768, linear between;
a dense GEMM has the step's n = Σ T_i rows however the step mixes them, the LM head one per
sequence), so a decode step of a dense model costs what `estimate` says (routed experts and
expert parallelism keep the affine spec: `gemm_rows_delta` says why); the engine's measured
decode attention is repriced the same way in every decode step, by the step's sequences and
the bytes its fit says they move (`AttentionDecodeRows`; prefill and mixed steps keep the
attention fractions: a chunk over a cached prefix is not the tables' shape); every
other achievable and engine term is kept: the fixed per-kernel and per-GEMM times
(constant per step), the engine's decode attention cost (pure-decode steps), and the host:
a step takes max(device time, host launch time) + the engine's per-step host time, with no
host launch cost for pure-decode steps an engine replays from CUDA graphs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..calc.cost import (
    MAX_VERIFY_TOKENS,
    attention_heads_dim,
    attention_surface_for,
    gemm_rows,
    is_decode,
)
from ..calc.parallel import (
    Collective,
    Link,
    ParallelStepCost,
    all_reduce_s,
    all_to_all_s,
    parallel_step_cost,
    send_recv_s,
)
from ..calc.stack import Stack
from ..errors import InvalidInputError
from ..spec.hardware import HardwareSpec
from ..spec.mixers import mla_naive_is_cheaper
from ..spec.model import ModelSpec
from ..spec.operators import (
    ArrayLike,
    Step,
    attended_pairs,
    busiest_rank_experts,
    busiest_rank_pairs,
    kv_tokens_read,
)
from ..spec.surfaces import AttentionSurface

#: (B, T, S) probe shapes: their features span every direction, the rest re-check the fit.
#: Kept small so B·T stays below every vocabulary size.
_PROBES = [
    (1, 1, 0),
    (2, 1, 0),
    (1, 2, 0),
    (1, 1, 7),
    (3, 4, 2),
    (2, 3, 11),
    (5, 1, 40),
    (1, 16, 5),
    (4, 8, 100),
    (7, 2, 3),
    (1, 64, 900),
    (16, 1, 2000),
    (32, 4, 1),
    (8, 32, 0),
]
#: With expert parallelism, shapes whose ⌈B/ep⌉/B differs from the others' (group tokens and
#: the fullest GPU's tokens then vary apart).
_EP_PROBES = [(3, 2, 9), (5, 3, 1), (9, 1, 30), (6, 4, 0)]
_RTOL = 1e-9


def _window_probes(W: int) -> list[tuple[int, int, int]]:
    """Shapes inside, straddling and beyond a window of W tokens."""
    return [
        (1, 1, W + 3),
        (2, 1, 2 * W),
        (1, 8, W - 3),
        (3, 4, W + 10),
        (1, 16, W - 5),
        (2, 2, 3 * W),
        (1, 64, W // 2),
    ]


@dataclass(frozen=True)
class Feature:
    """One batch total the operators' times are affine in, written once for the three shapes a
    step comes in: `uniform(b, T, S, n)`, b sequences of T new tokens on S cached (arrays);
    `mixed(T, S)`, one step over sequences (T_i, S_i) (the last axis; leading axes are steps);
    `decode(S, j)`, consecutive decode steps
    j = 0, 1, … of sequences whose contexts start at S_i (T = 1). n is the replica's new tokens
    (the expert-parallel group's). `per_sequence`: a sum over the replica's sequences, of which
    the fullest GPU runs ⌈B/ep⌉ (its share is applied outside)."""

    name: str
    uniform: Callable[..., ArrayLike]
    mixed: Callable[[np.ndarray, np.ndarray], ArrayLike]
    decode: Callable[[np.ndarray, np.ndarray], ArrayLike]
    per_sequence: bool = True


def _window_decode(W: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Σ_i min(S_i + j + 1, W) over decode steps j: the sequences still inside the window add
    S_i + j + 1, the rest W each (both the pairs and the KV read of a local decode)."""

    def f(S: np.ndarray, j: np.ndarray) -> np.ndarray:
        s = np.sort(S.astype(float))
        inside = np.searchsorted(s, W - 1 - j, side="left")  # S_i + j + 1 < W
        head = np.concatenate(([0.0], np.cumsum(s)))[inside]
        return head + inside * (j + 1) + (s.size - inside) * W

    return f


def _decode_pairs(S: np.ndarray, j: np.ndarray) -> np.ndarray:
    return float((S + 1).sum()) + S.size * j  # Σ (S_i + j + 1)


#: The features every model has, in column order.
BASE_FEATURES: tuple[Feature, ...] = (
    Feature(
        "constant",
        uniform=lambda b, T, S, n: np.ones_like(b),
        mixed=lambda T, S: np.ones(T.shape[:-1]),
        decode=lambda S, j: 1.0,
        per_sequence=False,
    ),
    Feature(
        "tokens",
        uniform=lambda b, T, S, n: b * T,
        mixed=lambda T, S: T.sum(axis=-1),
        decode=lambda S, j: float(S.size),
    ),
    Feature(
        "sequences",
        uniform=lambda b, T, S, n: b,
        mixed=lambda T, S: np.full(T.shape[:-1], float(T.shape[-1])),
        decode=lambda S, j: float(S.size),
    ),
    Feature(
        "pairs",
        uniform=lambda b, T, S, n: b * attended_pairs(T, S),
        mixed=lambda T, S: (T * S + T * (T + 1) / 2).sum(axis=-1),
        decode=_decode_pairs,
    ),
    Feature(
        "context",
        uniform=lambda b, T, S, n: b * (S + T),
        mixed=lambda T, S: (S + T).sum(axis=-1),
        decode=_decode_pairs,
    ),
    Feature(
        "t_max",
        uniform=lambda b, T, S, n: T,
        mixed=lambda T, S: T.max(axis=-1),
        decode=lambda S, j: 1.0,
        per_sequence=False,
    ),
)


def window_features(W: int) -> tuple[Feature, ...]:
    """A sliding-window layer's pairs and KV read, capped by the window W."""
    decode = _window_decode(W)
    return (
        Feature(
            "local_pairs",
            uniform=lambda b, T, S, n: b * attended_pairs(T, S, W),
            mixed=lambda T, S: np.sum(attended_pairs(T, S, W), axis=-1),
            decode=decode,
        ),
        Feature(
            "local_context",
            uniform=lambda b, T, S, n: b * kv_tokens_read(T, S, W),
            mixed=lambda T, S: np.sum(kv_tokens_read(T, S, W), axis=-1),
            decode=decode,
        ),
    )


def expert_features(E: int, k: int, ep: int) -> tuple[Feature, ...]:
    """The routed experts of n tokens on the busiest EP rank: its token-expert pairs (with EP)
    and the experts it touches."""
    pairs = Feature(
        "expert_pairs",
        uniform=lambda b, T, S, n: busiest_rank_pairs(k, n, ep),
        mixed=lambda T, S: busiest_rank_pairs(k, T.sum(axis=-1), ep),
        decode=lambda S, j: float(busiest_rank_pairs(k, float(S.size), ep)),
        per_sequence=False,
    )
    touched = Feature(
        "experts",
        uniform=lambda b, T, S, n: busiest_rank_experts(E, k, n, ep),
        mixed=lambda T, S: busiest_rank_experts(E, k, T.sum(axis=-1), ep),
        decode=lambda S, j: float(busiest_rank_experts(E, k, float(S.size), ep)),
        per_sequence=False,
    )
    return (pairs, touched) if ep > 1 else (touched,)


def serving_features(
    window: int | None, experts: tuple[int, int] | None, ep: int = 1
) -> tuple[Feature, ...]:
    """The one table of a model's serving features: the base ones, a window's if it has local
    layers, the experts' if it has MoE layers. Every encoding of a step reads it."""
    return (
        BASE_FEATURES
        + (window_features(window) if window is not None else ())
        + (expert_features(*experts, ep) if experts is not None else ())
    )


#: Device terms that are step functions of a GEMM's rows, off in the serving simulator.
NON_AFFINE_TERMS: dict[str, object] = {
    "gemm_tile": None,
    "matmul_half_rows": 0.0,
    "matmul_half_rows_by_m": {},
    "gemv_row_ns": 0.0,
    "gemv_memory_fraction": 1.0,
    "gemm_surface": False,  # FLOPs / measured FLOP/s at M: not affine in the tokens
}


def affine_spec(hw: HardwareSpec) -> HardwareSpec:
    """`hw` without the device terms that are not affine in the batch features."""
    a = hw.achievable.model_copy(update=NON_AFFINE_TERMS)
    return hw.model_copy(update={"achievable": a})


@dataclass(frozen=True)
class CollectiveRow:
    """`count` collectives per step whose message is `bytes_per_token` × the step's tokens on
    the fullest GPU, costed exactly (a one-shot all-reduce that falls back to the ring is
    piecewise, not affine, in the message size)."""

    name: str
    kind: str
    count: int
    bytes_per_token: float
    n: int
    link: Link

    def time_s(self, tokens: ArrayLike) -> ArrayLike:
        m = np.asarray(tokens, dtype=float) * self.bytes_per_token
        if self.kind == "all-reduce":
            return self.count * all_reduce_s(m, self.n, self.link)
        if self.kind == "all-to-all":
            return self.count * all_to_all_s(m, self.n, self.link)
        return self.count * send_recv_s(m, self.link)


@dataclass(frozen=True, kw_only=True)
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
    names: tuple[str, ...] = ()  # one per row: operators, then collectives
    op_overhead_s: tuple[float, ...] = ()  # fixed device time per operator row
    collectives: tuple[CollectiveRow, ...] = ()  # costed from the tokens feature (column 1)
    #: the non-affine GEMM terms' share of each operator row (`gemm_rows_delta`): rows of the
    #: grid (GEMM rows), then one column per operator row, seconds; None: none to add
    rows_delta: tuple[np.ndarray, np.ndarray] | None = None
    #: the measured decode attention of single-token decode steps (`AttentionDecodeRows`)
    attention_decode: AttentionDecodeRows | None = None

    @cached_property
    def table(self) -> tuple[Feature, ...]:
        """The columns of the coefficients (`serving_features`)."""
        return serving_features(self.window, self.experts, self.ep)

    @cached_property
    def _per_sequence(self) -> np.ndarray:
        return np.array([f.per_sequence for f in self.table])

    def _share(self, B: float) -> float:
        """Share of a replica's B sequences on its fullest GPU: ⌈B/ep⌉/B (1 without EP)."""
        return 1.0 if self.ep == 1 else float(np.ceil(B / self.ep) / B)

    def features(self, B, T, S) -> np.ndarray:
        """Feature vector(s) of uniform batches: B sequences of T new tokens on S cached."""
        B, T, S = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (B, T, S)))
        n = B * T  # the group's tokens
        b = np.ceil(B / self.ep) if self.ep > 1 else B  # sequences on the fullest GPU
        return np.stack(
            [np.broadcast_to(f.uniform(b, T, S, n), B.shape) for f in self.table], axis=-1
        )

    @cached_property
    def _lm_head(self) -> int | None:
        """Row of the LM head, whose rows are the logits (one per sequence unless verifying)."""
        return self.names.index("lm_head") if "lm_head" in self.names else None

    @cached_property
    def _both_coef(self) -> np.ndarray:
        """(features, 2·ops): the compute and memory coefficients side by side, one product."""
        return np.ascontiguousarray(np.concatenate((self.compute_coef, self.memory_coef)).T)

    def _op_s(self, x: np.ndarray, logit_rows: float | None = None) -> np.ndarray:
        """max(compute, memory) of every operator row for feature rows x (..., ops); with
        `logit_rows`, the LM head runs over that many rows instead of one per sequence (a
        verification's logits at every position; the fullest GPU's share with EP)."""
        both = x @ self._both_coef  # (..., 2·ops): compute, then memory
        n = self.compute_coef.shape[0]
        ops = np.maximum(both[..., :n], both[..., n:])
        lm = self._lm_head
        seq = self._sequences_col
        if logit_rows is not None and lm is not None:
            rows = np.array(x, dtype=float, copy=True)
            rows[..., seq] = logit_rows
            ops[..., lm] = np.maximum(rows @ self.compute_coef[lm], rows @ self.memory_coef[lm])
        if self.rows_delta is not None:
            grid, delta = self.rows_delta
            ops = ops + _interp_rows(x[..., 1], grid, delta)  # every GEMM has the step's n rows
            if lm is not None:  # but the LM head one per sequence (or per verified position)
                m = np.asarray(x[..., seq] if logit_rows is None else logit_rows, dtype=float)
                ops[..., lm] += (
                    _interp_rows(m, grid, delta)[..., lm]
                    - _interp_rows(x[..., 1], grid, delta)[..., lm]
                )
        return ops

    @cached_property
    def _sequences_col(self) -> int:
        return [f.name for f in self.table].index("sequences")

    def _times(
        self,
        x: np.ndarray,
        decode: bool = False,
        logit_rows: float | None = None,
    ) -> np.ndarray:
        """Step times of feature rows x (..., features); `decode`: every sequence has T=1 (or
        is a speculative verification: the measured decode attention, `AttentionDecodeRows`);
        `logit_rows` as in `_op_s`."""
        ops = self._op_s(x, logit_rows)
        att = self.attention_decode if decode else None
        if att is not None:
            ops = att.apply(ops, x, self._sequences_col, self.compute_coef, self.memory_coef)
        device = (
            ops.sum(axis=-1)
            + self.overhead_s
            + (self.decode_overhead_s if decode else 0.0)
            + (att.fixed_delta_s if att is not None else 0.0)
        )
        for c in self.collectives:
            device = device + c.time_s(x[..., 1])
        return np.maximum(device, self._host_launch_s(decode)) + self.host_step_s

    def _host_launch_s(self, decode: bool) -> float:
        """Host launch time of a step (graphs replay a pure-decode step without it)."""
        return 0.0 if decode and self.graphs else self.host_launch_s

    def op_times(self, T: np.ndarray, S: np.ndarray, verify: int = 0) -> np.ndarray:
        """Per-row device times (fixed per-kernel times included) of one step over the
        sequences (T_i, S_i), not a pure decode (`step_s` for `verify`); all zeros for no
        sequences."""
        if T.size == 0:
            return np.zeros(len(self.names))
        x = self.step_features(T, S)
        ops = self._op_s(x, self._logit_rows(T, verify)) + np.asarray(self.op_overhead_s)
        return np.concatenate([ops, [float(c.time_s(x[1])) for c in self.collectives]])

    def _logit_rows(self, T: np.ndarray, verify: int) -> float | None:
        """LM-head rows of a step whose first `verify` sequences are verifications (None:
        one per sequence), on the fullest GPU."""
        if not verify:
            return None
        return float(T[:verify].sum() + (T.size - verify)) * self._share(T.size)

    def step_s(self, T: np.ndarray, S: np.ndarray, verify: int = 0) -> float:
        """Time of one step over sequences with new tokens T_i on top of S_i cached. The first
        `verify` of them are speculative verifications (T_i = K + 1 positions, logits at each):
        a step of verifications only is a decode step (`cost.is_decode`: the decode attention
        kernel under the CUDA graph), so it never costs less than a plain decode step."""
        decode = bool(np.all(T == 1)) or (
            verify == T.size and bool(np.all(T <= MAX_VERIFY_TOKENS)) and bool(np.all(S > 0))
        )
        x = self.step_features(T, S)
        return float(self._times(x, decode, self._logit_rows(T, verify)))

    def host_s(self, device_s: float, decode: bool) -> float:
        """A step's time from its device time: the host launches overlap it (graphs replay a
        pure-decode step without them), then the per-step host work."""
        return max(device_s, self._host_launch_s(decode)) + self.host_step_s

    def step_features(self, T: np.ndarray, S: np.ndarray) -> np.ndarray:
        """The feature vector of one step over sequences with T_i new tokens on S_i cached
        (the last axis; with leading axes, one vector per step: (..., features))."""
        T, S = np.asarray(T, dtype=float), np.asarray(S, dtype=float)
        if T.shape != S.shape:
            T, S = np.broadcast_arrays(T, S)
        x = np.empty((*T.shape[:-1], len(self.table)))
        for col, f in enumerate(self.table):
            x[..., col] = f.mixed(T, S)
        if self.ep > 1:
            x = np.where(self._per_sequence, x * self._share(T.shape[-1]), x)
        return x

    def verify_s(self, S: np.ndarray, width: int) -> np.ndarray:
        """Times of steps (rows of S: (steps, sequences)) in which every sequence verifies
        `width` − 1 drafts: `width` positions over its S_i, logits at each (`step_s`)."""
        n = S.shape[-1]
        x = self.step_features(np.full(S.shape, float(width)), S)
        return self._times(
            x, decode=width <= MAX_VERIFY_TOKENS, logit_rows=n * width * self._share(n)
        )

    def passes_s(self, S: np.ndarray) -> np.ndarray:
        """Times of decode steps (T = 1) over the rows of S ((steps, sequences))."""
        return self._times(self.step_features(np.ones(S.shape), S), decode=True)

    def decode_s(self, S: np.ndarray, steps: int) -> np.ndarray:
        """Times of `steps` consecutive decode steps (T=1) of the sequences whose contexts
        start at S_i: step j runs every sequence over S_i + j cached tokens."""
        j = np.arange(steps, dtype=float)
        x = np.empty((steps, len(self.table)))
        done: dict[int, ArrayLike] = {}  # a window's pairs and KV read share one sum
        for col, f in enumerate(self.table):
            key = id(f.decode)
            if key not in done:
                done[key] = f.decode(S, j)
            x[:, col] = done[key]
        if self.ep > 1:
            x[:, self._per_sequence] *= self._share(float(S.size))
        return self._times(x, decode=True)


@dataclass(frozen=True)
class AttentionDecodeRows:
    """The engine's measured decode attention (`cost.measured_attention_cost`) in a decode
    step (one new token per sequence, or a speculative verification). Its time is not affine
    in the features (the surface's efficiency depends on the batch and each sequence's
    bytes), so the fit keeps the fractions and this reprices the rows it covers: row k
    moves bytes = affine memory time × `bytes_per_s[k]` (the affine ceiling those bytes
    were priced at) over B = the step's sequences, and takes
    `instances[k]` × the surface's time of a call of bytes / instances over B sequences at
    N·H `nh[k]` (each sequence's mean bytes: a mixed batch's calls read Σ (S_i + 1) tokens),
    its compute time kept; the decode step's fixed time changes by `fixed_delta_s` (the
    tables hold the kernel's fixed cost: no `decode_fixed_us`). So a decode step costs what
    `estimate` says; prefill and mixed steps keep the fractions (module docstring)."""

    rows: tuple[int, ...]
    instances: tuple[float, ...]
    nh: tuple[float, ...]
    bytes_per_s: tuple[float, ...]
    surface: AttentionSurface
    fixed_delta_s: float

    def apply(
        self,
        ops: np.ndarray,
        x: np.ndarray,
        seq_col: int,
        compute_coef: np.ndarray,
        memory_coef: np.ndarray,
    ) -> np.ndarray:
        """`ops` (..., ops) with the covered rows repriced for feature rows x (..., features)."""
        ops = np.array(ops, dtype=float, copy=True)
        B = np.asarray(x[..., seq_col], dtype=float)
        for k, inst, nh, bw in zip(
            self.rows, self.instances, self.nh, self.bytes_per_s, strict=True
        ):
            moved = (x @ memory_coef[k]) * bw
            memory = inst * self.surface.time_s(moved / inst, B, nh)
            ops[..., k] = np.maximum(x @ compute_coef[k], memory)
        return ops


def attention_decode_rows(
    model: ModelSpec, stack: Stack, affine: Stack
) -> AttentionDecodeRows | None:
    """The rows of a decode step that `stack` prices on its measured decode
    attention and `affine` on the fractions, read off one probe (one sequence over one cached
    token); None where none is (no surface, expert parallelism as in `gemm_rows_delta`)."""
    if not _adds_back(stack, affine):
        return None
    one = Step(1, 1, 1)
    full = parallel_step_cost(model, stack, one).compute
    aff = parallel_step_cost(model, affine, one).compute
    surface = full.ceilings.decode_attention
    rows = [
        k
        for k, o in enumerate(full.ops)
        if attention_surface_for(o.op, full.ceilings, one) is not None
    ]
    if surface is None or not rows:
        return None
    a = [aff.ops[k] for k in rows]
    return AttentionDecodeRows(
        tuple(rows),
        tuple(float(o.op.instances) for o in a),
        tuple(attention_heads_dim(o.op, one) for o in a),
        tuple(float((o.act_bytes + o.kv_bytes) / o.memory_s) for o in a),
        surface,
        float(sum(full.ops[k].overhead_s - aff.ops[k].overhead_s for k in rows)),
    )


@dataclass(frozen=True)
class MlaPathsStepCost:
    """MLA with `mla_decode: auto`: each sequence of a step takes the cheaper path
    (`operators.mla_naive_is_cheaper`: prefill chunks decompress, decodes absorb, as vLLM's MLA
    backend splits a mixed batch). Two fits, one per path (each exact for its uniform shapes);
    a mixed step runs the shared operators over all its sequences and each path's own
    operators over that path's sequences."""

    model: ModelSpec
    naive: MixedStepCost
    absorbed: MixedStepCost

    def _naive(self, T: np.ndarray, S: np.ndarray) -> np.ndarray:
        W = self.model.attention.sliding_window if self.model.layers_with("local") else None
        return np.asarray(mla_naive_is_cheaper(self.model, T, S, W), dtype=bool)

    @property
    def host_step_s(self) -> float:
        return self.absorbed.host_step_s

    def step_s(self, T: np.ndarray, S: np.ndarray, verify: int = 0) -> float:
        naive = self._naive(T, S)
        if naive.all() or not naive.any():
            return (self.naive if naive.all() else self.absorbed).step_s(T, S, verify)
        a, n = self.absorbed, self.naive
        shared = np.array([name in n.names for name in a.names])
        own = np.array([name not in a.names for name in n.names])
        first = np.arange(T.size) < verify  # verifications, which come first
        device = float(
            a.op_times(T, S, verify)[shared].sum()
            + a.op_times(T[~naive], S[~naive], int(first[~naive].sum()))[~shared].sum()
            + n.op_times(T[naive], S[naive], int(first[naive].sum()))[own].sum()
        )
        return a.host_s(device, decode=False)  # a prefill chunk is in the step

    def verify_s(self, S: np.ndarray, width: int) -> np.ndarray:
        """`MixedStepCost.verify_s`, each sequence on its cheaper path."""
        T = np.full(S.shape, float(width))
        if not self._naive(T, S).any():
            return self.absorbed.verify_s(S, width)
        return np.array([self.step_s(T[j], S[j], S.shape[-1]) for j in range(S.shape[0])])

    def passes_s(self, S: np.ndarray) -> np.ndarray:
        """`MixedStepCost.passes_s`, each sequence on its cheaper path."""
        one = np.ones(S.shape)
        if not self._naive(one, S).any():
            return self.absorbed.passes_s(S)
        return np.array([self.step_s(one[j], S[j]) for j in range(S.shape[0])])

    def decode_s(self, S: np.ndarray, steps: int) -> np.ndarray:
        one = np.ones_like(S, dtype=float)
        # for T = 1 the naive path wins only on an empty cache, so checking the first step
        # covers the later ones
        if not self._naive(one, S).any():
            return self.absorbed.decode_s(S, steps)
        return np.array([self.step_s(one, S + j) for j in range(steps)])


#: GEMM rows at which the non-affine terms' share is tabulated: every count to 256 (decode
#: batches), every multiple of 64 to 32,768 (prefill chunks and token budgets: the tile and
#: wave steps of a GEMM fall on multiples of its tile's rows), then eight a factor of two up
#: to 2^18; linear between them and held past the last
ROWS_GRID = np.unique(
    np.concatenate(
        (
            np.arange(1, 257),
            np.arange(256, 32768 + 1, 64),
            np.round(np.geomspace(32768, 2**18, 3 * 8 + 1)),
        )
    )
).astype(float)


def _interp_rows(n: np.ndarray, grid: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """delta (grid, ops) at row counts n (...): (..., ops), linear between grid points."""
    n = np.clip(np.asarray(n, dtype=float), grid[0], grid[-1])
    i = np.clip(np.searchsorted(grid, n, side="right") - 1, 0, grid.size - 2)
    w = ((n - grid[i]) / (grid[i + 1] - grid[i]))[..., None]
    return delta[i] * (1 - w) + delta[i + 1] * w


def gemm_rows_delta(
    model: ModelSpec, stack: Stack, affine: Stack
) -> tuple[np.ndarray, np.ndarray] | None:
    """What the device's non-affine GEMM terms (`NON_AFFINE_TERMS`: the measured GEMM table by
    M, tile and wave quantisation, the calibrated M½ and gemv row cost) add to each GEMM row of
    a step, by the GEMM's rows: time and fixed time on `stack` less those on its `affine` spec
    (a measured table's time holds the kernel's launch, the affine spec a fixed time), of
    pure-decode steps of n = 1 … 2^18 sequences over one cached token (a dense GEMM has n rows
    whatever mixes them; the LM head one per sequence). Other operator rows get 0: GEMMs over
    the context (MLA's decompression of the cached latent, rows Σ(S_i + T_i)) and routed
    experts: `cost` prices their ragged per-expert shapes one way for one batch and another
    for a vector of batches (8.29 against 7.97 ms for Qwen3-30B-A3B's experts at 7 sequences on
    an H100), so no table of them read off vector probes is what `estimate` says. None when
    the spec has no such term, or with expert parallelism (the fullest GPU's rows are not the
    step's tokens): the simulator then runs the affine spec alone."""
    if not _adds_back(stack, affine):
        return None
    B = ROWS_GRID
    step = Step(B, np.ones_like(B), np.ones_like(B))
    full = parallel_step_cost(model, stack, step).compute
    aff = parallel_step_cost(model, affine, step).compute

    def time(o) -> np.ndarray:  # with its fixed time: a measured GEMM's includes its launch
        return np.broadcast_to(np.maximum(o.compute_s, o.memory_s) + o.overhead_s, B.shape)

    longer = parallel_step_cost(model, affine, Step(B, np.ones_like(B), 65 * np.ones_like(B)))
    delta = np.stack(
        [
            time(f) - time(a) if _by_tokens(a, o64) else np.zeros(B.shape)
            for f, a, o64 in zip(full.ops, aff.ops, longer.compute.ops, strict=True)
        ],
        axis=-1,
    )  # (grid, ops)
    return (B, delta) if np.any(delta) else None


def serving_step_cost(model: ModelSpec, stack: Stack, step: Step) -> ParallelStepCost:
    """A uniform step as the simulator costs it, evaluated directly (the reference its fitted
    coefficients reproduce): `parallel_step_cost` on the device as specified for the GEMMs of
    the step's tokens (the rows `gemm_rows_delta` adds back), every other row, and every row
    with expert parallelism, on the `affine_spec`. MLA with `mla_decode: auto` takes the path
    the simulator's `MlaPathsStepCost` gives the step's (uniform) sequences."""
    if model.attention.kind == "mla" and model.attention.mla_decode == "auto":
        W = model.attention.sliding_window if model.layers_with("local") else None
        naive = bool(np.all(mla_naive_is_cheaper(model, step.new_tokens, step.cached_tokens, W)))
        spec = _on_mla_path(model, "naive" if naive else "absorbed")
        return serving_step_cost(spec, stack.for_model(spec), step)
    affine = stack.on(affine_spec(stack.hardware))
    aff = parallel_step_cost(model, affine, step)
    if not _adds_back(stack, affine):
        return aff
    full = parallel_step_cost(model, stack, step)
    longer = parallel_step_cost(
        model, affine, dataclasses.replace(step, cached_tokens=np.asarray(step.cached_tokens) + 64)
    )
    ceil = full.compute.ceilings
    measured = is_decode(step)  # decode attention on its surface (`AttentionDecodeRows`)
    ops = tuple(
        f if _by_tokens(a, o64) or (measured and attention_surface_for(f.op, ceil, step)) else a
        for f, a, o64 in zip(full.compute.ops, aff.compute.ops, longer.compute.ops, strict=True)
    )
    return ParallelStepCost(dataclasses.replace(full.compute, ops=ops), full.collectives)


def _on_mla_path(model: ModelSpec, path: str) -> ModelSpec:
    """`model` with its MLA decode path fixed (`naive` or `absorbed`) instead of `auto`."""
    return ModelSpec.model_validate(
        model.model_dump() | {"attention": model.attention.model_dump() | {"mla_decode": path}}
    )


def _adds_back(stack: Stack, affine: Stack) -> bool:
    """Whether the device has non-affine GEMM terms the simulator adds back: some, and no
    expert parallelism (the fullest GPU's rows are not the step's tokens)."""
    return stack.hardware.achievable != affine.hardware.achievable and stack.parallel.ep == 1


def _by_tokens(o, longer) -> bool:
    """A GEMM of the step's tokens: the same rows over a longer context (one over the context,
    MLA's decompression of the cached latent, is not), and not the routed experts."""
    rows, rows64 = (np.asarray(gemm_rows(x.op), dtype=float) for x in (o, longer))
    return o.op.kind == "matmul" and o.op.group != "experts" and bool(np.allclose(rows, rows64))


def mixed_step_cost(model: ModelSpec, stack: Stack) -> MixedStepCost | MlaPathsStepCost:
    """Fit the per-operator coefficients from `parallel_step_cost` (one GPU: `step_cost`) at
    the probe shapes and check them; collectives are rows with a memory time only. The
    device runs without its non-affine terms (`affine_spec`). MLA with the per-step path
    choice gets one fit per path (`MlaPathsStepCost`). Chunked attention is refused before any
    fit: its pairs and KV read depend on each sequence's S mod C, which no affine feature of
    the batch totals follows."""
    chunked = model.layers_with("chunked")
    if chunked:
        raise InvalidInputError(
            f"{model.name} has chunked attention (chunks of "
            f"{model.attention.attention_chunk_size:,} tokens on {chunked}/{model.layers} "
            "layers); the serving simulator cannot cost mixed batches of it yet"
        )
    if model.attention.kind == "mla" and model.attention.mla_decode == "auto":

        def forced(path: str) -> MixedStepCost:
            spec = _on_mla_path(model, path)
            return mixed_step_cost(spec, stack.for_model(spec))  # type: ignore[return-value]

        return MlaPathsStepCost(model, forced("naive"), forced("absorbed"))
    hw = affine_spec(stack.hardware)
    rows_delta = gemm_rows_delta(model, stack, stack.on(hw))
    attention = attention_decode_rows(model, stack, stack.on(hw))
    stack, par, engine = stack.on(hw), stack.parallel, stack.engine
    W = model.attention.sliding_window if model.layers_with("local") else None
    moe = (model.moe.experts, model.moe.top_k) if model.moe is not None else None
    shape = MixedStepCost(
        compute_coef=np.zeros((0, 0)),
        memory_coef=np.zeros((0, 0)),
        overhead_s=0.0,
        window=W,
        experts=moe,
        ep=par.ep,
    )
    B, T, S = np.array(
        _PROBES + _EP_PROBES * (par.ep > 1) + (_window_probes(W) if W else []), dtype=float
    ).T
    psc = parallel_step_cost(model, stack, Step(B, T, S))
    sc = psc.compute
    names = [o.name for o in sc.ops] + [c.name for c in psc.collectives]
    compute = np.stack([np.broadcast_to(o.compute_s, B.shape) for o in sc.ops])  # (ops, probes)
    memory = np.stack([np.broadcast_to(o.memory_s, B.shape) for o in sc.ops])
    X = shape.features(B, T, S)  # (probes, features)
    collectives = tuple(_collective_row(c, X[:, 1], model, stack) for c in psc.collectives)
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
                "cost mixed batches of this model on this hardware spec"
            )
    per_row = [float(o.overhead_s) for o in sc.ops]
    overhead = sum(per_row)
    one = Step(1, 1, 1)  # a pure-decode step: its fixed device and host terms
    decode = parallel_step_cost(model, stack, one).compute
    decode_overhead = float(sum(o.overhead_s for o in decode.ops)) - overhead
    return MixedStepCost(
        compute_coef=compute_coef,
        memory_coef=memory_coef,
        overhead_s=overhead,
        window=W,
        experts=moe,
        ep=par.ep,
        decode_overhead_s=decode_overhead,
        host_launch_s=sc.host_launch_s,
        graphs=engine is not None and engine.cuda_graphs,
        host_step_s=sc.host_step_s,
        names=tuple(names),
        op_overhead_s=tuple(per_row),
        collectives=collectives,
        rows_delta=rows_delta,
        attention_decode=attention,
    )


def _collective_row(
    c: Collective, tokens: np.ndarray, model: ModelSpec, stack: Stack
) -> CollectiveRow:
    """A step's collective as a function of its tokens: its message per token read off the
    probes (and checked on every one), its group size and link."""
    message = np.broadcast_to(c.message_bytes, tokens.shape)
    per_token = float(message[0] / tokens[0])
    if not np.allclose(message, per_token * tokens, rtol=_RTOL):
        raise InvalidInputError(
            f"collective '{c.name}' of {model.name} does not scale with "
            "the step's tokens; the serving simulator cannot cost it"
        )
    par = stack.parallel
    n = {"all-reduce": par.tp, "all-to-all": par.ep}.get(c.kind, 2)
    link = Link.of(
        stack.hardware.interconnect,
        par.gpus_per_replica,
        stack.ceiling,
        stack.engine,
        stack.hardware.achievable.surface_system,
    )
    row = CollectiveRow(c.name, c.kind, c.count, per_token, n, link)
    if not np.allclose(row.time_s(tokens), np.broadcast_to(c.time_s, tokens.shape), rtol=1e-9):
        raise InvalidInputError(
            f"collective '{c.name}' of {model.name}: the serving "
            "simulator's cost disagrees with the step cost"
        )
    return row
