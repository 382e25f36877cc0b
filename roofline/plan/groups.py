"""Stage 1 input: one table per (device, format, layout), from one `phases.estimate` call over a
grid of batch sizes, the KV capacity the engine allocates and the power model's terms
(`roofline.calc.power`: the busy share of the prefill step and of the decode step at each batch)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..calc import memory
from ..calc.parallel import parallel_step_cost
from ..calc.phases import estimate, first_token_split
from ..calc.placement import Parallel, pp_stage, tp_shard
from ..calc.power import busy_share, power_terms
from ..calc.stack import Stack
from ..errors import DoesNotFitError, InvalidInputError
from ..serve.simulate import kv_capacity_tokens
from ..spec.engine import EngineSpec
from ..spec.hardware import HardwareSpec
from ..spec.model import ModelSpec
from ..spec.operators import Step
from ..studies.economics import PriceTable
from .space import Requirement, Space, layouts, precision_of, robust_factors, scheduler_policy

#: Batch sizes the decode step time is evaluated at; other b are interpolated linearly.
BATCH_GRID_POINTS = 40


# ---- stage 1: one table per (device, format, layout) ----------------------------------------
@dataclass(frozen=True, kw_only=True)
class GroupTable:
    """Everything the screening needs about one replica shape: a device, a format and a
    tp × pp × ep layout. Times in seconds, per replica."""

    hardware: str
    fmt: str
    parallel: Parallel
    usd_per_gpu_hour: float
    t_prefill_s: float  # one prompt of P tokens, B = 1
    batch_grid: np.ndarray  # (K,) b, increasing, starting at 1
    tpot_grid_s: np.ndarray  # (K,) mean decode step at batch b over the G − 1 steps
    u_decode_grid: np.ndarray = field(default_factory=lambda: np.zeros(1))  # (K,) busy share
    u_prefill: float = 0.0  # busy share of the prefill step
    kv_capacity_tokens: float = math.inf
    kv_bytes_per_token: float = 0.0  # one GPU's share, moved at a hand-off
    link_bytes_per_s: float = math.inf
    link_latency_s: float = 0.0
    static_w: float = 0.0  # `power.PowerTerms` of the device
    dynamic_w: float = 0.0
    cap_w: float = 0.0
    ttft_factor: float = 1.0  # the SLO is checked on TTFT × this (`robust_factors`)
    tpot_factor: float = 1.0
    #: the max batches tried on this replica: the space's, and its batch "max" if asked
    #: (None: the space's alone)
    max_batches: np.ndarray | None = None
    batch_max: int | None = None  # what "max" resolved to here (None: not asked)
    batch_max_binding: str = ""  # what binds it: KV, activations or max_num_seqs
    #: a lower bound on any request's TTFT (s): the prompt's prefill alone, no queue, the
    #: smaller of the estimate's (`t_prefill_s`) and the serving simulator's own step for it,
    #: which the simulator's TTFT never goes below (None: `t_prefill_s`)
    t_prefill_floor_s: float | None = None
    #: the stack this table was built on (`Stack.resolve`, once per device, format and layout),
    #: carried to its candidates so that confirming them resolves nothing again (None: a table
    #: made by hand)
    stack: Stack | None = field(default=None, compare=False, repr=False)

    @property
    def prefill_floor_s(self) -> float:
        return self.t_prefill_s if self.t_prefill_floor_s is None else self.t_prefill_floor_s

    @property
    def gpus(self) -> int:
        return self.parallel.gpus_per_replica

    def tpot_at(self, n: np.ndarray) -> np.ndarray:
        """t(N): the step time at concurrency N (N < 1 runs one sequence)."""
        return np.interp(np.maximum(n, 1.0), self.batch_grid, self.tpot_grid_s)

    def u_decode_at(self, n: np.ndarray) -> np.ndarray:
        if self.u_decode_grid.size != self.batch_grid.size:
            return np.zeros_like(np.asarray(n, dtype=float))
        return np.interp(np.maximum(n, 1.0), self.batch_grid, self.u_decode_grid)

    def tried(self, space: Space) -> np.ndarray:
        """The max batches B screened on this replica."""
        if self.max_batches is not None:
            return self.max_batches
        return np.asarray(space.max_batches, dtype=float)

    def power_w(self, u: np.ndarray) -> np.ndarray:
        """Power of one GPU at busy share u (`power.PowerTerms.power_w`)."""
        return np.minimum(self.cap_w, self.static_w + self.dynamic_w * np.clip(u, 0.0, 1.0))


@dataclass(frozen=True)
class Rejected:
    """A (device, format, layout) that cannot run at all, and why."""

    hardware: str
    fmt: str
    parallel: Parallel
    reason: str  # "memory: weights" or "unsupported"
    detail: str
    weights_bytes_per_gpu: float = math.nan
    usable_bytes: float = math.nan  # what one GPU offers the engine (its memory fraction)


def batch_grid(max_batch: int, points: int = BATCH_GRID_POINTS) -> np.ndarray:
    """Integers 1..max_batch, geometrically spaced, both ends included."""
    return np.unique(np.round(np.geomspace(1, max_batch, points))).astype(float)


def simulated_prefill_s(model: ModelSpec, stack: Stack, prompt: int) -> float:
    """The serving simulator's step for one prompt alone (T = P, or P - 1 where the engine's
    first token comes from a decode step, over S = 0): its TTFT for any request is at least
    this (chunks of the prompt, sequences sharing the step and the queue only add; the
    step-cost features are sums over the sequences with non-negative coefficients). inf where
    the simulator refuses the stack (it then accepts nothing of it)."""
    from ..serve.stepcost import mixed_step_cost

    tokens = prompt - first_token_split(stack, prompt)
    try:
        timer = mixed_step_cost(model, stack)
        return float(timer.step_s(np.array([tokens]), np.array([0])))
    except (InvalidInputError, DoesNotFitError):
        return math.inf


def build_groups(
    model: ModelSpec,
    hardware: Sequence[HardwareSpec],
    req: Requirement,
    space: Space,
    prices: PriceTable,
    engine: EngineSpec | None = None,
) -> tuple[list[GroupTable], list[Rejected]]:
    """One `GroupTable` per runnable (device, format, layout); the others as `Rejected`."""
    P, G = req.prompt_tokens, req.gen_tokens
    groups: list[GroupTable] = []
    rejected: list[Rejected] = []
    for hw in hardware:
        price = prices.usd_per_gpu_hour(hw.name, space.tier)
        pw = power_terms(hw)
        for fmt in space.formats:
            prec = precision_of(fmt)
            if not hw.supports(prec.compute):
                rejected.append(
                    Rejected(
                        hardware=hw.name,
                        fmt=fmt,
                        parallel=Parallel(),
                        reason="unsupported",
                        detail=f"{hw.name} has no {prec.compute} compute",
                    )
                )
                continue
            for par in layouts(model, hw, space):
                stack = Stack.resolve(model, hw, prec, space.ceiling, engine, par)
                w = float(memory.held(model, stack, 1, P, P + G).weights_bytes)
                tried = set(space.max_batches)
                fit = memory.batch_fit(model, stack, P + G, P) if space.batch_max else None
                if fit is not None:
                    tried.add(max(fit.runnable, 1))
                policy = scheduler_policy(max(tried), False, engine)
                try:
                    kv_tokens = kv_capacity_tokens(model, stack, policy)
                except DoesNotFitError as e:
                    rejected.append(
                        Rejected(
                            hardware=hw.name,
                            fmt=fmt,
                            parallel=par,
                            reason="memory: weights",
                            detail=str(e),
                            weights_bytes_per_gpu=w,
                            usable_bytes=stack.budget.usable_bytes,
                        )
                    )
                    continue
                grid = batch_grid(max(tried))
                est = estimate(model, stack, [int(b) for b in grid], P, G)
                dec = parallel_step_cost(model, stack, Step(grid, 1, P + G // 2))
                u_dec = busy_share(dec)
                t_pf = est.cases[0].ttft_s
                t_floor = min(t_pf, simulated_prefill_s(model, stack, P))
                u_pf = float(
                    np.asarray(busy_share(parallel_step_cost(model, stack, Step(1, P, 0))))
                )
                ic = hw.interconnect
                f_ttft, f_tpot = robust_factors(stack, req.confidence)
                groups.append(
                    GroupTable(
                        hardware=hw.name,
                        fmt=fmt,
                        parallel=par,
                        stack=stack,
                        usd_per_gpu_hour=price,
                        t_prefill_s=t_pf,
                        batch_grid=grid,
                        tpot_grid_s=np.array([c.tpot_s for c in est.cases]),
                        u_decode_grid=np.asarray(u_dec, dtype=float),
                        u_prefill=u_pf,
                        kv_capacity_tokens=float(kv_tokens),
                        kv_bytes_per_token=memory.kv_bytes_per_token(
                            pp_stage(tp_shard(model, par.tp), par.pp), prec
                        ),
                        link_bytes_per_s=ic.bandwidth_bytes_per_s or math.inf,
                        link_latency_s=ic.latency_us * 1e-6,
                        static_w=pw.static_w,
                        dynamic_w=pw.dynamic_w,
                        cap_w=pw.cap_w,
                        ttft_factor=f_ttft,
                        tpot_factor=f_tpot,
                        max_batches=np.array(sorted(tried), dtype=float),
                        batch_max=None if fit is None else max(fit.runnable, 1),
                        batch_max_binding="" if fit is None else fit.runnable_binding,
                        t_prefill_floor_s=t_floor,
                    )
                )
    return groups, rejected
