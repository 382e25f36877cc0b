"""What a token costs: dollars from a GPU-hour price table, joules from a power model.

Definitions (one place; `plan`, `estimate` and `serve` reports use them):
- cost per million output tokens = price · n / (3600 · tok/s) · 10⁶, for n GPUs rented at
  `price` $ per GPU-hour producing `tok/s` output tokens per second. A deployment pays for its
  GPUs whether they are busy or not, so tok/s is what it delivers (at the offered rate, or at a
  stated utilisation), not its peak.
- power of one GPU = P_idle + (P_TDP − P_idle) · u with u = min(1, max(u_c, s_m · u_m)):
  u_c = FLOPs / (t · F) and u_m = bytes / (t · β) the utilisations of the *achievable* matmul
  peak F and bandwidth β (`cost.Ceilings`) during a step of t seconds, and s_m the share of the
  dynamic power a step saturating only the memory roof draws (`MEMORY_ROOF_POWER_SHARE`). A
  step on the compute roof draws TDP; an idle GPU draws P_idle.
- joules per output token = Σ_GPUs ∫ power dt / output tokens.

Power model, stated simplification: power linear in utilisation between idle and TDP (the
linear utilisation model of Fan, Weber & Barroso, "Power provisioning for a warehouse-sized
computer", ISCA 2007, applied to a GPU), one utilisation per step (the busier of the compute and
the weighted memory roof, not their sum), no clock or power-cap behaviour. Idle and the memory
share are fixed fractions from one public measurement (below) applied to every device: a
device-specific figure would replace them. Host CPUs, networking and cooling are not counted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .cost import Ceilings
from .errors import InvalidInputError, SpecError, field_error
from .files import read_text
from .hardware import HardwareSpec
from .operators import ArrayLike, Step
from .parallel import parallel_step_cost

#: Idle power of a datacenter GPU as a share of its TDP: an H200 SXM measured at 80.3 W idle
#: against its 700 W TDP (80.3 / 700 = 0.1147), serialalice.pt "GPU Energy Benchmark"
#: (http://api.serialalice.pt/alice-benchmark, June 2026, TDX-attested nvidia-smi samples).
IDLE_FRACTION_OF_TDP = 80.3 / 700
IDLE_SOURCE = (
    "idle = 0.1147 × TDP: H200 SXM measured 80.3 W idle of 700 W TDP "
    "(serialalice.pt GPU Energy Benchmark, June 2026), applied to every device"
)
#: Share of the dynamic power (TDP − idle) drawn by a step that saturates the memory roof only
#: (batch-1 decode): the same benchmark's H100 SXM runs span 267 W at batch 1 (weights streamed
#: at the memory roof) to 680 W at batch 128 (near its 700 W TDP), so (267 − 80.3) / (700 − 80.3)
#: = 0.301 with the idle above.
MEMORY_ROOF_POWER_SHARE = (267 - 80.3) / (700 - 80.3)
SECONDS_PER_HOUR = 3600.0
#: The largest price table read (the bundled one is ~10 kB).
MAX_PRICE_FILE_BYTES = 4 * 2**20
Tier = Literal["on-demand", "discounted"]
TIERS: tuple[str, ...] = ("on-demand", "discounted")


# ---- prices ---------------------------------------------------------------------------------
class GpuPrice(BaseModel):
    """One device's rental price, $ per GPU-hour, with where and when it was read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    on_demand_usd_per_gpu_hour: float | None = Field(gt=0, allow_inf_nan=False)
    discounted_usd_per_gpu_hour: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    discounted_kind: Literal["community", "spot", "reserved"] | None = None
    offer: str = ""
    source: str = ""
    date: str = ""
    note: str = ""

    @field_validator("on_demand_usd_per_gpu_hour", "discounted_usd_per_gpu_hour", mode="before")
    @classmethod
    def _a_number(cls, v: object) -> object:
        if isinstance(v, bool):  # YAML `true` would read as $1
            raise ValueError("a price is a number of dollars per GPU-hour, not true/false")
        return v

    def usd_per_gpu_hour(self, tier: Tier) -> float | None:
        return (
            self.on_demand_usd_per_gpu_hour
            if tier == "on-demand"
            else self.discounted_usd_per_gpu_hour
        )


class PriceFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    devices: dict[str, GpuPrice]


@dataclass(frozen=True)
class PriceTable:
    """Prices by device name; `overrides` (from `--price`) win over the file for every tier."""

    devices: dict[str, GpuPrice]
    source: str
    overrides: dict[str, float] | None = None

    def usd_per_gpu_hour(self, hardware: str, tier: Tier = "on-demand") -> float:
        """The price of one GPU-hour of `hardware`; refuses a device without one, by name."""
        if tier not in TIERS:
            raise InvalidInputError(f"unknown price tier '{tier}'; use one of: {', '.join(TIERS)}")
        if self.overrides and hardware in self.overrides:
            return self.overrides[hardware]
        entry = self.devices.get(hardware)
        price = entry.usd_per_gpu_hour(tier) if entry else None
        if price is None:
            why = f" ({entry.note})" if entry and entry.note else ""
            raise InvalidInputError(
                f"no {tier} price for {hardware} in {self.source}{why}; pass "
                f"`price={hardware}=USD_PER_GPU_HOUR`"
            )
        return price

    def has(self, hardware: str, tier: Tier = "on-demand") -> bool:
        try:
            self.usd_per_gpu_hour(hardware, tier)
        except InvalidInputError:
            return False
        return True

    def citation(self, hardware: str, tier: Tier = "on-demand") -> str:
        """Where the price used for `hardware` comes from."""
        if self.overrides and hardware in self.overrides:
            return "given by the user"
        e = self.devices[hardware]
        return f"{e.offer}; {e.source}, read {e.date}"

    def with_overrides(self, overrides: dict[str, float]) -> PriceTable:
        return replace(self, overrides={**(self.overrides or {}), **overrides})

    def unknown_overrides(self, known: Iterable[str]) -> list[str]:
        """Override names that are neither a catalog device nor one of `known` (the devices
        this run loaded, user YAML files included): a typo the run would silently ignore."""
        from .catalog import hardware_name

        mine = set(known)
        return [n for n in (self.overrides or {}) if n not in mine and hardware_name(n) is None]


def _parse_price_file(text: str, where: str) -> dict[str, GpuPrice]:
    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as e:
        problem = " ".join(str(e).split())  # one line: YAML's own message spans several
        raise SpecError(f"{where}: not valid YAML ({problem[:200]})") from None
    try:
        return PriceFile.model_validate(data).devices
    except ValidationError as e:
        raise SpecError(f"{where}: {field_error(e)}") from None


@lru_cache(maxsize=1)
def _bundled() -> PriceTable:
    text = resources.files("roofline").joinpath("data/gpu_prices.yaml").read_text("utf-8")
    return PriceTable(
        _parse_price_file(text, "roofline/data/gpu_prices.yaml"), "roofline/data/gpu_prices.yaml"
    )


def load_prices(path: str | Path | None = None) -> PriceTable:
    """The bundled price table, or the one in a YAML file of the same layout."""
    if path is None:
        return _bundled()
    p = Path(path)
    text = read_text(p, "price table", MAX_PRICE_FILE_BYTES)  # a pipe or a device is refused
    return PriceTable(_parse_price_file(text, str(p)), str(p))


def parse_price_options(values: Sequence[str], table: PriceTable | None = None) -> PriceTable:
    """`--price` values: `NAME=USD` (dollars per GPU-hour; a catalog alias names its device)
    or a YAML price-table path (which replaces the bundled table); later values win."""
    from .catalog import hardware_name

    table = table or load_prices()
    overrides: dict[str, float] = {}
    for v in values:
        if "=" not in v:
            table = load_prices(v).with_overrides(overrides) if overrides else load_prices(v)
            continue
        name, _, usd = v.partition("=")
        try:
            price = float(usd)
        except ValueError:
            raise InvalidInputError(
                f"`price={v}`: '{usd}' is not a number of dollars per "
                "GPU-hour (e.g. `price=h100-sxm=2.1`)"
            ) from None
        if not (price > 0 and math.isfinite(price)):
            raise InvalidInputError(f"`price={v}`: the price must be a positive, finite number")
        given = name.strip()
        overrides[hardware_name(given) or given] = price  # an alias (`H100`) is its device
    return table.with_overrides(overrides) if overrides else table


# ---- the two quantities ---------------------------------------------------------------------
def cost_per_million_tokens(
    usd_per_gpu_hour: ArrayLike, gpus: ArrayLike, tokens_per_s: ArrayLike
) -> ArrayLike:
    """$ per 10⁶ output tokens: price · n / 3600 / (tok/s) · 10⁶."""
    return np.asarray(usd_per_gpu_hour) * gpus / SECONDS_PER_HOUR / tokens_per_s * 1e6


def joules_per_token(
    power_w_per_gpu: ArrayLike, gpus: ArrayLike, tokens_per_s: ArrayLike
) -> ArrayLike:
    """J per output token: P · n / (tok/s) (average power of each GPU, n GPUs)."""
    return np.asarray(power_w_per_gpu) * gpus / tokens_per_s


# ---- power ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class PowerModel:
    """P(u) = P_idle + (P_TDP − P_idle) · u for one GPU (module docstring)."""

    idle_w: float
    tdp_w: float
    source: str

    def power_w(self, utilisation: ArrayLike) -> ArrayLike:
        u = np.clip(utilisation, 0.0, 1.0)
        return self.idle_w + (self.tdp_w - self.idle_w) * u


def power_model(hw: HardwareSpec) -> PowerModel:
    """TDP from the spec, idle as `IDLE_FRACTION_OF_TDP` of it. Refuses a spec without TDP."""
    if hw.tdp_w is None:
        raise InvalidInputError(
            f"{hw.name}'s spec has no tdp_w, so its energy cannot be "
            "modelled; add tdp_w (watts, with its source) to the spec"
        )
    return PowerModel(
        IDLE_FRACTION_OF_TDP * hw.tdp_w,
        hw.tdp_w,
        f"TDP {hw.tdp_w:g} W from the {hw.name} spec; {IDLE_SOURCE}",
    )


def roof_utilisation(
    flops: ArrayLike, bytes_: ArrayLike, time_s: ArrayLike, hw: HardwareSpec, compute_dtype: str
) -> ArrayLike:
    """u = min(1, max(u_c, s_m · u_m)) on the achievable ceilings (module docstring)."""
    c = Ceilings.of(hw, compute_dtype, "achievable")
    u = np.maximum(
        np.asarray(flops) / (np.asarray(time_s) * c.flops_per_s),
        MEMORY_ROOF_POWER_SHARE * np.asarray(bytes_) / (np.asarray(time_s) * c.bytes_per_s),
    )
    return np.minimum(u, 1.0)


# ---- columns for `estimate` -----------------------------------------------------------------
@dataclass(frozen=True)
class CaseEconomics:
    """One batch size of an estimate, served back to back at `utilisation` of the time."""

    batch: int
    usd_per_hour: float  # all GPUs of all replicas
    tokens_per_s: float  # output tokens delivered, all replicas, at the utilisation
    power_w: float | None  # average per GPU (None: the spec has no tdp_w)
    gpus: int

    @property
    def cost_per_million_tokens_usd(self) -> float:
        return float(self.usd_per_hour / SECONDS_PER_HOUR / self.tokens_per_s * 1e6)

    @property
    def joules_per_token(self) -> float | None:
        if self.power_w is None:
            return None
        return float(joules_per_token(self.power_w, self.gpus, self.tokens_per_s))

    def as_dict(self) -> dict:
        return {
            "batch": self.batch,
            "usd_per_hour": self.usd_per_hour,
            "tokens_per_s": self.tokens_per_s,
            "power_w_per_gpu": self.power_w,
            "cost_per_million_output_tokens_usd": self.cost_per_million_tokens_usd,
            "joules_per_output_token": self.joules_per_token,
        }


def estimate_economics(
    est, usd_per_gpu_hour: float, utilisation: float = 1.0
) -> tuple[CaseEconomics, ...]:
    """Cost and energy per output token of each case of a `phases.Estimate`: batches of B run
    back to back (prefill, then G−1 decode steps at the mid-generation context P + G/2) for
    `utilisation` of the time, idle otherwise."""
    if not 0 < utilisation <= 1:
        raise InvalidInputError(f"`utilisation` must be in (0, 1], got {utilisation}")
    m, hw, prec = est.model, est.hardware, est.precision
    if hw.tdp_w is None:  # priced but no power: the cost stands, the energy is unknown
        return tuple(
            CaseEconomics(
                c.batch,
                usd_per_gpu_hour * c.gpus,
                c.throughput_tokens_per_s * utilisation,
                None,
                c.gpus,
            )
            for c in est.cases
        )
    pm = power_model(hw)
    B = np.array([c.batch for c in est.cases], dtype=float)
    P, G = est.cases[0].prompt_tokens, est.cases[0].gen_tokens
    pre = parallel_step_cost(m, est.stack, Step(B, P, 0))
    dec = parallel_step_cost(m, est.stack, Step(B, 1, P + G // 2))
    u_pre = np.asarray(
        roof_utilisation(pre.compute.flops, pre.compute.bytes, pre.time_s, hw, prec.compute)
    )
    u_dec = np.asarray(
        roof_utilisation(dec.compute.flops, dec.compute.bytes, dec.time_s, hw, prec.compute)
    )
    out = []
    for i, c in enumerate(est.cases):
        busy_w = (
            pm.power_w(u_pre[i]) * c.ttft_s + pm.power_w(u_dec[i]) * (c.e2e_s - c.ttft_s)
        ) / c.e2e_s
        power = utilisation * busy_w + (1 - utilisation) * pm.idle_w
        out.append(
            CaseEconomics(
                c.batch,
                usd_per_gpu_hour * c.gpus,
                c.throughput_tokens_per_s * utilisation,
                float(power),
                c.gpus,
            )
        )
    return tuple(out)


# ---- columns for `serve` --------------------------------------------------------------------
@dataclass(frozen=True)
class ServeEconomics:
    """A simulated run's cost and an upper bound on its energy: every busy replica-second at
    TDP, every idle one at P_idle (the simulator records busy time, not each step's roof use)."""

    usd_per_hour: float
    tokens_per_s: float
    energy_j_upper: float
    tokens: float

    @property
    def cost_per_million_tokens_usd(self) -> float:
        return float(self.usd_per_hour / SECONDS_PER_HOUR / self.tokens_per_s * 1e6)

    @property
    def joules_per_token_upper(self) -> float:
        return self.energy_j_upper / self.tokens

    def as_dict(self) -> dict:
        return {
            "usd_per_hour": self.usd_per_hour,
            "cost_per_million_output_tokens_usd": self.cost_per_million_tokens_usd,
            "joules_per_output_token_upper_bound": self.joules_per_token_upper,
        }


def serve_economics(
    summary,
    devices: dict[str, HardwareSpec],
    prices: PriceTable,
    gpus_per_replica: int = 1,
    tier: Tier = "on-demand",
) -> ServeEconomics:
    """$ per million output tokens and J per token (upper bound) of a `serve.metrics.Summary`;
    `devices` maps each pool's device name (`Pool.hardware`) to its spec."""
    r = summary.result
    T = summary.duration_s
    usd = joules = 0.0
    for e, pool in zip(r.engines, _engine_pools(r), strict=True):
        hw = devices[pool.hardware]
        usd += prices.usd_per_gpu_hour(hw.name, tier) * gpus_per_replica
        pm = power_model(hw)
        busy = min(e.busy_s, T)
        joules += gpus_per_replica * (pm.tdp_w * busy + pm.idle_w * (T - busy))
    tokens = float(r.workload.output_tokens.sum())
    return ServeEconomics(usd, summary.throughput_tokens_per_s, joules, tokens)


def _engine_pools(result) -> list:
    """The pool of each engine, in `ServeResult.engines` order."""
    return [p for p in result.deployment.pools for _ in range(p.replicas)]


@dataclass(frozen=True)
class EstimateEconomics:
    """Cost and energy of every case of an estimate, or why they cannot be given."""

    price_usd_per_gpu_hour: float | None
    price_source: str
    utilisation: float
    cases: tuple[CaseEconomics, ...] = ()

    def as_dict(self, est=None, coverage: float | None = None) -> dict:
        """The JSON; with the `phases.Estimate` it came from, a case that does not fit has no
        cost or energy (null), and with `coverage` each case carries its `intervals`."""
        cases = []
        for i, c in enumerate(self.cases):
            d = c.as_dict()
            case = est.cases[i] if est is not None else None
            if case is not None and not case.fits:
                d |= {"cost_per_million_output_tokens_usd": None, "joules_per_output_token": None}
            elif case is not None and coverage:
                figures = {"cost_per_million_output_tokens_usd": c.cost_per_million_tokens_usd}
                if c.joules_per_token is not None:
                    figures["joules_per_output_token"] = c.joules_per_token
                d["intervals"] = est.figure_intervals(case, figures, coverage)
            cases.append(d)
        return {
            "price_usd_per_gpu_hour": self.price_usd_per_gpu_hour,
            "price_source": self.price_source,
            "utilisation": self.utilisation,
            "cases": cases,
        }


def priced_estimate(
    est, prices: PriceTable, tier: Tier = "on-demand", utilisation: float = 1.0
) -> EstimateEconomics:
    """`estimate_economics` at the table's price of the estimate's device; a device without a
    published price gets no figures and says so (pass `price=NAME=USD`)."""
    name = est.hardware.name
    if not prices.has(name, tier):
        return EstimateEconomics(
            None,
            f"no {tier} price for {name} in the price table; pass `price={name}=USD`",
            utilisation,
        )
    usd = prices.usd_per_gpu_hour(name, tier)
    return EstimateEconomics(
        usd, prices.citation(name, tier), utilisation, estimate_economics(est, usd, utilisation)
    )
