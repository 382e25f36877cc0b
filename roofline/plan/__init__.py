"""Planning: the cheapest deployment that meets a TTFT/TPOT SLO at an arrival rate.

Search space: hardware × weight/KV format × TP/PP/EP × max batch B (the scheduler's max
sequences) × replicas m, and disaggregated prefill/decode pools (prefill device × decode device
× m_p prefill and m_d decode replicas, one parallel layout and format for both, as the simulator
runs them). Two stages:

1. Analytical screening of every point. Per (device, format, layout) one `phases.estimate` call
   over a grid of batch sizes b gives the prefill time of one prompt t_pf (B = 1, T = P) and the
   mean decode step time t(b) over the G − 1 steps; the rest is arithmetic on arrays. A replica
   receives λ = R/m requests per second (Poisson), each a prompt of P tokens and G output tokens,
   under continuous batching with whole-prompt (prefill-first) steps:
   - prefill share of time ρ = λ·t_pf (≥ 1: the replica cannot keep up);
   - decode concurrency N (Little's law, decodes pause while a prompt runs):
     N = λ·(G−1)·t(N) / (1 − ρ), the least fixed point on the grid; its p95 N + 1.645·√N
     (Poisson) must stay within the max batch B (otherwise requests queue for a slot, which the
     TTFT below does not model: the point counts as saturated), and N must fit the KV capacity
     (paged, `kv_capacity_tokens`) at the mean context P + G/2;
   - TPOT: t(N) plus the prompts that arrive during a request's decode, k of them at t_pf each,
     spread over its G − 1 tokens; k is Poisson with mean μ = λ·(G−1)·t(N)/(1−ρ) and its p95 is
     taken as μ + 1.645·√μ (normal approximation): TPOT₉₅ = t(N) + (μ + 1.645√μ)·t_pf/(G−1);
   - TTFT: the prompt queue is M/D/1 with service t_pf: mean wait W = ρ·t_pf / (2(1−ρ)), its tail
     taken exponential given a wait (Kingman's heavy-traffic approximation), P(wait > x) ≈
     ρ·exp(−x·ρ/W), so wait₉₅ = (W/ρ)·ln(20ρ) (0 when ρ ≤ 1/20); plus t_pf, plus one decode step
     t(N) already running: TTFT₉₅ = t_pf + wait₉₅ + t(N).
   Disaggregated: the prefill pool is the same M/D/1 queue with λ = R/m_p and no decode step to
   wait for; the decode pool has no prompt interruptions (ρ = 0, μ = 0) and adds the KV hand-off
   (P tokens over the prefill device's link) to the first decode token, spread over G − 1.
   The screen rejects on TTFT only by a lower bound, the prompt's prefill alone at batch 1 with
   no queue (`PoolLatency.ttft_floor_s`): the M/D/1 figure runs 2-3x over the simulator (it
   serves prompts one at a time where chunked prefill batches them), so a point it puts over
   the SLO but whose bound meets it is shortlisted at its cost and the simulator decides.
2. The serving simulator (`roofline.serve`) replays Poisson arrivals at the rate (or the trace)
   on the shortlist, cheapest first (`confirm_top` of them, and on past that until one meets
   the SLO); a candidate is chosen only when its simulated p95 TTFT and TPOT meet the SLO. Both
   numbers are reported.

Cost: GPUs are paid whether busy or not, so cost per million output tokens is the deployment's
$/hour over the R·G tokens/s it delivers at the offered rate (`economics`). Energy: each GPU's
average power from the time it spends in prefill (ρ) and decode steps and idle, through the power
model in `economics`.

The Pareto frontier is over (cost per million tokens, TPOT₉₅, TTFT₉₅), all minimised, among the
points that sustain the rate and fit in memory (whether or not they meet the SLO): a point is on
it when no other point is at least as good in all three and better in one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..errors import DoesNotFitError, InvalidInputError
from ..serve.workload import Lengths, Workload, synthetic
from ..spec.engine import EngineSpec
from ..spec.hardware import HardwareSpec
from ..spec.model import ModelSpec
from ..studies.economics import PriceTable
from .confirm import candidate_intervals, candidate_stack, confirm
from .diagnose import RejectedRegion, check_feasible, no_point_meets, rejected_regions
from .groups import BATCH_GRID_POINTS, GroupTable, Rejected, batch_grid, build_groups
from .queueing import (
    Z95,
    PoolLatency,
    aggregated_latency,
    concurrency,
    decode_pool_latency,
    max_rate_per_replica,
    peak_concurrency,
    prefill_pool_ttft_p95_s,
    wait_p95_s,
)
from .screen import (
    KV,
    OK,
    REASONS,
    SATURATED,
    TPOT,
    TTFT,
    Candidate,
    Points,
    SimCheck,
    aggregated_points,
    candidate,
    disaggregated_points,
    frontier,
    pareto_mask,
    screen,
    shortlist,
)
from .space import (
    SERVING,
    InfeasibleError,
    Requirement,
    Serving,
    Space,
    default_hardware,
    layouts,
    precision_of,
    robust_factors,
    scheduler_policy,
)

__all__ = [
    "BATCH_GRID_POINTS",
    "KV",
    "OK",
    "REASONS",
    "SATURATED",
    "SERVING",
    "TPOT",
    "TTFT",
    "Z95",
    "Candidate",
    "GroupTable",
    "InfeasibleError",
    "PlanResult",
    "Points",
    "PoolLatency",
    "Rejected",
    "RejectedRegion",
    "Requirement",
    "Serving",
    "SimCheck",
    "Space",
    "aggregated_latency",
    "aggregated_points",
    "batch_grid",
    "build_groups",
    "candidate",
    "check_feasible",
    "concurrency",
    "confirm",
    "decode_pool_latency",
    "default_hardware",
    "disaggregated_points",
    "frontier",
    "layouts",
    "max_rate_per_replica",
    "no_point_meets",
    "pareto_mask",
    "peak_concurrency",
    "plan",
    "precision_of",
    "prefill_pool_ttft_p95_s",
    "rejected_regions",
    "robust_factors",
    "scheduler_policy",
    "screen",
    "shortlist",
    "wait_p95_s",
]


@dataclass(frozen=True)
class PlanResult:
    """What `plan` found: the chosen deployment (None when no simulated candidate met the
    SLO), the confirmed candidates, the analytic frontier, the rejected regions and the prices
    behind the costs; `requests` and `seed` are the simulated workload's."""

    model: str
    requirement: Requirement
    space: Space
    configurations: int
    analytic_s: float
    simulated_s: float
    chosen: Candidate | None
    confirmed: tuple[Candidate, ...]
    frontier: tuple[Candidate, ...]
    rejected: tuple[RejectedRegion, ...]
    prices: dict[str, str]
    requests: int
    seed: int
    engine: str = "none"
    unconfirmed: tuple[tuple[str, str], ...] = ()  # (candidate, why the simulator refused it)
    #: with the central check: what the choice would be at confidence 0.9 (`at_confidence`)
    robust_choice: str = ""

    def as_dict(self) -> dict:
        r = self.requirement
        return {
            "model": self.model,
            "requirement": {
                "rate_per_s": r.rate_per_s,
                "prompt_tokens": r.prompt_tokens,
                "gen_tokens": r.gen_tokens,
                "slo_ttft_p95_s": r.slo_ttft_s,
                "slo_tpot_p95_s": r.slo_tpot_s,
                "confidence": r.confidence,
            },
            "configurations": self.configurations,
            "analytic_s": self.analytic_s,
            "simulated_s": self.simulated_s,
            "chosen": None if self.chosen is None else self.chosen.as_dict(),
            "confirmed": [c.as_dict() for c in self.confirmed],
            "frontier": [c.as_dict() for c in self.frontier],
            "rejected": [vars(x) for x in self.rejected],
            "engine": self.engine,
            "unconfirmed": [{"label": k, "reason": v} for k, v in self.unconfirmed],
            "robust_choice": self.robust_choice or None,
            "prices": self.prices,
        }


def plan(
    model: ModelSpec,
    hardware: Sequence[HardwareSpec],
    req: Requirement,
    space: Space,
    prices: PriceTable,
    workload: Workload | None = None,
    confirm_top: int = 10,
    requests: int = 1000,
    seed: int = 0,
    engine: EngineSpec | None = None,
) -> PlanResult:
    """Screen the whole space analytically, confirm the cheapest feasible candidates in the
    simulator, and return the chosen deployment, the frontier and the rejected regions.
    `workload` defaults to `requests` Poisson arrivals at the rate, fixed P and G."""
    t0 = time.perf_counter()
    loaded = {hw.name: hw for hw in hardware}
    groups, rejected = build_groups(model, hardware, req, space, prices, engine)
    engine_name = engine.flag if engine is not None else "none"
    check_feasible(model, groups, rejected, req, space, engine_name)
    points = screen(groups, req, space)
    front = frontier(points, groups)
    regions = rejected_regions(points, groups, rejected, req, space)
    # more than `confirm_top`: a candidate the simulator refuses makes room for the next one
    short = shortlist(points, groups, max(3 * confirm_top, 1), req)  # one: is anything feasible
    analytic_s = time.perf_counter() - t0
    if not short:
        raise no_point_meets(points, groups, req, space)
    t1 = time.perf_counter()
    if workload is None:
        workload = synthetic(
            requests,
            req.rate_per_s,
            Lengths("fixed", req.prompt_tokens),
            Lengths("fixed", req.gen_tokens),
            "poisson",
            seed,
        )
    checked: list[Candidate] = []
    refused: list[tuple[str, str]] = []
    for c in short:
        # cheapest first; past `confirm_top` (0: none), on only until one meets the SLO
        if len(checked) >= confirm_top and (
            confirm_top == 0 or any(x.sim and x.sim.meets_slo for x in checked)
        ):
            break
        try:
            sim = confirm(model, c, workload, req, loaded, space.ceiling, engine)
        except (DoesNotFitError, InvalidInputError) as err:
            refused.append((c.label, str(err)))
            continue
        c = replace(c, sim=sim)
        checked.append(
            replace(c, intervals=candidate_intervals(model, c, loaded, space.ceiling, engine))
        )
    simulated_s = time.perf_counter() - t1
    passed = [c for c in checked if c.sim is not None and c.sim.meets_slo]
    used = {g.hardware for g in groups}
    robust = "" if req.confidence else at_confidence(model, checked, req, loaded, space, engine)
    return PlanResult(
        model=model.name,
        requirement=req,
        space=space,
        configurations=points.size + len(rejected),
        analytic_s=analytic_s,
        simulated_s=simulated_s,
        chosen=passed[0] if passed else None,
        confirmed=tuple(checked),
        frontier=tuple(front),
        rejected=tuple(regions),
        prices={h: prices.citation(h, space.tier) for h in sorted(used)},
        requests=workload.requests,
        seed=seed,
        engine=engine_name,
        unconfirmed=tuple(refused),
        robust_choice=robust,
    )


#: The confidence the default (central) plan reports its choice at, beside its own.
ROBUST_CONFIDENCE = 0.9


def at_confidence(
    model: ModelSpec,
    checked: Sequence[Candidate],
    req: Requirement,
    hardware: dict[str, HardwareSpec],
    space: Space,
    engine: EngineSpec | None,
    confidence: float = ROBUST_CONFIDENCE,
) -> str:
    """How the choice among the simulated candidates (cheapest first) would change if the SLO
    were checked against the upper end of the `confidence` interval (`robust_factors`)."""

    def meets(c: Candidate) -> bool:
        if c.sim is None or not c.sim.meets_slo:
            return False
        stack = candidate_stack(model, c, hardware, space.ceiling, engine)
        f_ttft, f_tpot = robust_factors(stack, confidence)
        return (
            c.sim.ttft_p95_s * f_ttft <= req.slo_ttft_s
            and c.sim.tpot_p95_s * f_tpot <= req.slo_tpot_s
        )

    central = next((c for c in checked if c.sim is not None and c.sim.meets_slo), None)
    robust = next((c for c in checked if meets(c)), None)
    if central is None:
        return ""
    if robust is central:
        return f"at confidence {confidence:g} the choice is the same: {central.label}"
    if robust is None:
        return (
            f"at confidence {confidence:g} none of the {len(checked)} simulated candidates "
            f"meets the SLO; run with `confidence={confidence:g}` to search for one"
        )
    return (
        f"at confidence {confidence:g} the choice would be {robust.label} "
        f"(${robust.cost_per_million_tokens_usd:.3f}/M tokens against "
        f"${central.cost_per_million_tokens_usd:.3f})"
    )
