"""Cost of one serving iteration that mixes sequences of different shapes.

A continuous-batching step runs decode sequences (T=1 over their own S) beside prefill chunks
(T=c over S already computed). `roofline.cost.step_cost` takes one T for the whole batch, so
this module reads the same operators another way. Every operator's compute time and memory
time are affine in five batch totals:

    tokens  = Σ T_i                            matmul FLOPs, activations, KV writes
    seqs    = B                                logits of the last position of each sequence
    pairs   = Σ T_i·S_i + T_i(T_i+1)/2         attention FLOPs (causal query-key pairs)
    context = Σ (S_i + T_i)                    KV read by attention
    t_max   = max T_i                          learned position rows (shared by the batch)

plus a constant (weights, read once per step). The coefficients are found once per
model/hardware/precision/ceiling by evaluating `step_cost` at a handful of uniform probe
shapes and solving for them; the fit is then checked against further shapes, so an operator
that is not affine in these totals is refused rather than mis-costed. Per step the cost is
then Σ_ops max(compute_s, memory_s) + launch overheads: a 2×ops×6 product, no objects.

Exact while Σ T_i stays below the vocabulary size V (the embedding gathers min(ΣT, V) rows);
serving token budgets are far below V.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cost import Ceiling, step_cost
from ..errors import InvalidInputError
from ..hardware import HardwareSpec
from ..model import ModelSpec
from ..operators import Step, attended_pairs
from ..precision import Precision

#: (B, T, S) probe shapes: their features span all six directions, and the last ones re-check
#: the fit. Kept small so B·T stays below every vocabulary size.
_PROBES = np.array([
    (1, 1, 0), (2, 1, 0), (1, 2, 0), (1, 1, 7), (3, 4, 2), (2, 3, 11), (5, 1, 40), (1, 16, 5),
    (4, 8, 100), (7, 2, 3), (1, 64, 900), (16, 1, 2000),
], dtype=float)
_RTOL = 1e-9


def features(B, T, S) -> np.ndarray:
    """Feature vector(s) [1, tokens, seqs, pairs, context, t_max] of uniform batches."""
    B, T, S = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (B, T, S)))
    return np.stack([np.ones_like(B), B * T, B, B * attended_pairs(T, S), B * (S + T), T],
                    axis=-1)


@dataclass(frozen=True)
class MixedStepCost:
    """Per-operator coefficients: time of op k = max(compute[k]·x, memory[k]·x) + overhead."""

    compute_coef: np.ndarray  # (ops, 6) seconds per unit of each feature
    memory_coef: np.ndarray  # (ops, 6)
    overhead_s: float  # kernel launch overheads of the whole step

    def time_s(self, tokens: float, seqs: float, pairs: float, context: float,
               t_max: float) -> float | np.ndarray:
        """Time of one step with the given batch totals (see module docstring), seconds.
        `pairs` may be an array (one entry per step, the other totals scalars or arrays of the
        same length): times then come back per step."""
        if np.ndim(pairs) == 0:  # one step: the common case, kept cheap
            x = np.array((1.0, tokens, seqs, pairs, context, t_max), dtype=float)
            return float(np.maximum(self.compute_coef @ x, self.memory_coef @ x).sum()
                         + self.overhead_s)
        x = np.empty((6, np.size(pairs)))
        for row, v in enumerate((1.0, tokens, seqs, pairs, context, t_max)):
            x[row] = v
        return np.maximum(self.compute_coef @ x, self.memory_coef @ x).sum(axis=0) \
            + self.overhead_s

    def batch_time_s(self, T: np.ndarray, S: np.ndarray) -> float:
        """Time of one step over sequences with new tokens T_i on top of S_i cached."""
        T = np.asarray(T, dtype=float)
        S = np.asarray(S, dtype=float)
        return float(self.time_s(T.sum(), T.size, attended_pairs(T, S).sum(), (S + T).sum(),
                                 T.max()))


def mixed_step_cost(model: ModelSpec, hw: HardwareSpec, precision: Precision = Precision(),
                    ceiling: Ceiling = "achievable") -> MixedStepCost:
    """Fit the per-operator coefficients from `step_cost` at the probe shapes and check them."""
    B, T, S = _PROBES.T
    sc = step_cost(model, hw, Step(B, T, S), precision, ceiling)
    X = features(B, T, S)  # (probes, 6)
    compute = np.stack([np.broadcast_to(o.compute_s, B.shape) for o in sc.ops])  # (ops, probes)
    memory = np.stack([np.broadcast_to(o.memory_s, B.shape) for o in sc.ops])
    compute_coef = np.linalg.lstsq(X, compute.T, rcond=None)[0].T  # (ops, 6)
    memory_coef = np.linalg.lstsq(X, memory.T, rcond=None)[0].T
    for name, coef, target in (("compute", compute_coef, compute), ("memory", memory_coef, memory)):
        err = np.abs(coef @ X.T - target).max(axis=1)  # (ops,)
        if np.any(err > _RTOL * target.max(axis=1)):
            worst = int(np.argmax(err / target.max(axis=1)))
            raise InvalidInputError(
                f"operator '{sc.ops[worst].name}' of {model.name} has a {name} time that is not "
                "affine in batch tokens, sequences, attended pairs and context; the serving "
                "simulator cannot cost mixed batches of this model")
    overhead = float(sum(o.overhead_s for o in sc.ops))
    return MixedStepCost(compute_coef, memory_coef, overhead)
