"""What `plan` searches: the requirement (rate, lengths, p95 SLOs), the space of deployments
(devices × formats × layouts × max batches, aggregated and disaggregated), a format string read
as a precision, and the layouts a device can run a model in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from ..calc.cost import Ceiling
from ..calc.intervals import band_for, check_coverage
from ..calc.parallel import check
from ..calc.placement import Parallel
from ..calc.stack import Stack
from ..errors import InvalidInputError, RooflineError
from ..serve.policy import ENGINE_POLICY, POLICIES, Policy, policy
from ..spec.engine import EngineSpec
from ..spec.hardware import HardwareSpec
from ..spec.model import ModelSpec
from ..spec.precision import Precision
from ..studies.economics import PriceTable, Tier

Serving = Literal["both", "aggregated", "disaggregated"]
SERVING: tuple[str, ...] = get_args(Serving)


class InfeasibleError(RooflineError):
    """No deployment in the search space can meet the requirement; the message names the
    requirement that cannot be met and the closest achievable value."""


@dataclass(frozen=True)
class Requirement:
    """What must be served: R requests/s of P prompt and G output tokens, p95 SLOs."""

    rate_per_s: float
    prompt_tokens: int
    gen_tokens: int
    slo_ttft_s: float
    slo_tpot_s: float
    #: None: the SLO is checked against the central p95; c: against the upper end of its c
    #: interval (`robust_factors`), the robust choice
    confidence: float | None = None

    def __post_init__(self) -> None:
        if self.confidence is not None:
            check_coverage(self.confidence)
        if not self.rate_per_s > 0:
            raise InvalidInputError(f"`rate_per_s` must be positive, got {self.rate_per_s}")
        if self.prompt_tokens < 1 or self.gen_tokens < 2:
            raise InvalidInputError(
                "`prompt_tokens` must be at least 1 token and `gen_tokens` at least 2 "
                "(TPOT needs a token after the first)"
            )
        if not (self.slo_ttft_s > 0 and self.slo_tpot_s > 0):
            raise InvalidInputError("`slo_ttft_s` and `slo_tpot_s` must be positive seconds")

    @property
    def output_tokens_per_s(self) -> float:
        return self.rate_per_s * self.gen_tokens


@dataclass(frozen=True)
class Space:
    """The deployments searched."""

    hardware: tuple[str, ...]
    formats: tuple[str, ...] = ("bf16", "fp8", "int4-g128")
    max_gpus: int = 64
    max_batches: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512)
    #: also try, on each replica, the most sequences its engine runs at P + G tokens (the
    #: batch "max" of `estimate`: its KV pool capped by `max_num_seqs`)
    batch_max: bool = False
    tp: tuple[int, ...] = (1, 2, 4, 8)
    pp: tuple[int, ...] = (1, 2)
    ep: tuple[int, ...] = (1, 2, 4, 8)
    serving: Serving = "both"
    max_prefill_replicas: int = 8
    tier: Tier = "on-demand"
    ceiling: Ceiling = "achievable"

    def __post_init__(self) -> None:
        if not self.hardware:
            raise InvalidInputError("give at least one device to search (`hardware`)")
        if self.max_gpus < 1:
            raise InvalidInputError(f"`max_gpus` must be at least 1, got {self.max_gpus}")
        if not self.formats or not (self.max_batches or self.batch_max):
            raise InvalidInputError("give at least one format and one max batch")
        if self.max_batches and min(self.max_batches) < 1:
            raise InvalidInputError("max batches must be at least 1")
        if self.serving not in SERVING:
            raise InvalidInputError(
                f"unknown `serving` '{self.serving}'; use one of: {', '.join(SERVING)}"
            )


def precision_of(fmt: str) -> Precision:
    """A plan format: `W` (as `--dtype W`) or `W/KV` (weights W, KV cache KV)."""
    w, _, kv = fmt.partition("/")
    base = Precision.uniform(w)
    return Precision(base.weights, base.activations, kv) if kv else base


def layouts(m: ModelSpec, hw: HardwareSpec, space: Space) -> list[Parallel]:
    """The tp × pp × ep layouts of at most max_gpus GPUs that split `m` and that `hw` links."""
    eps = space.ep if m.moe is not None else (1,)
    out = []
    for tp in space.tp:
        for pp in space.pp:
            for ep in eps:
                if (ep > 1 and tp > 1) or tp * pp * ep > space.max_gpus:
                    continue
                par = Parallel(tp, pp, ep)
                try:
                    check(m, hw, par)
                except InvalidInputError:
                    continue
                out.append(par)
    return out


def default_hardware(prices: PriceTable, tier: Tier = "on-demand") -> tuple[str, ...]:
    """The catalog devices the price table prices (the datacenter GPUs)."""
    return tuple(sorted(n for n in prices.devices if prices.has(n, tier)))


def scheduler_policy(
    max_batch: int, disaggregated: bool, engine: EngineSpec | None = None
) -> Policy:
    """The scheduler a candidate runs: B max sequences, the engine's step token budget (fixed
    on the candidate's stack, `Policy.on`), the engine's own scheduling for one pool
    (`policy.engine_default`: vLLM V1 chunks prompts beside the decodes), as `serve` runs it."""
    base = POLICIES["disaggregated"] if disaggregated else policy(ENGINE_POLICY, engine)
    return base.with_overrides(max_seqs=max_batch)


#: Batch classes a replica's decode runs through as its concurrency grows.
_BATCHES = (1.0, 16.0, 64.0)


def robust_factors(stack: Stack, confidence: float | None) -> tuple[float, float]:
    """(TTFT, TPOT) multipliers the SLO is checked with: 1 for the central value; with a
    confidence c, the upper end of the c interval of prefill and of decode for the stack's
    engine, GPUs and vendor (`roofline.calc.intervals`), the widest over the batch classes a
    replica runs through; 1 on the datasheet ceiling (a bound)."""
    if confidence is None or stack.ceiling == "datasheet":
        return 1.0, 1.0
    args = (stack.engine_name, stack.parallel.gpus_per_replica)

    def high(quantity: str) -> float:
        return max(band_for(quantity, *args, b, stack.hardware, confidence).high for b in _BATCHES)

    return max(high("prefill"), 1.0), max(high("decode"), 1.0)
