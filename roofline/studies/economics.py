"""What a token costs: dollars from a GPU-hour price table, joules from the power model.

Definitions (one place; `plan`, `estimate` and `serve` reports use them):
- cost per million output tokens = price · n / (3600 · tok/s) · 10⁶, for n GPUs rented at
  `price` $ per GPU-hour producing `tok/s` output tokens per second. A deployment pays for its
  GPUs whether they are busy or not, so tok/s is what it delivers (at the offered rate, or at a
  stated utilisation), not its peak.
- power of one GPU: `roofline.calc.power` (P = min(P_cap, P_s + P_d · b), b the busy share of the
  step's kernels); `estimate`, `serve`, `plan` and `validate --published` all take it from there.
- joules per output token = Σ_GPUs ∫ power dt / output tokens: for an estimate, the prefill
  step's power over TTFT and the mid-generation decode step's over E2E − TTFT; for a simulated
  run, each recorded step's power over its time and the static power over a replica's idle time.
Host CPUs, networking and cooling are not counted.

Prices: `roofline/data/gpu_prices.yaml`, written by `benchmarks/derive/prices.py` from the
collected provider rows (one rule: per device and tier, the lower median across providers of
each provider's latest dated figure); every figure carries its provider, tier, date and URL
(`GpuPrice.provenance`), which `hardware show` prints.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..calc.parallel import parallel_step_cost
from ..calc.power import busy_share, power_terms
from ..errors import InvalidInputError, SpecError, field_error
from ..files import read_text
from ..spec.hardware import HardwareSpec
from ..spec.operators import ArrayLike, Step

SECONDS_PER_HOUR = 3600.0
#: The largest price table read (the bundled one is ~10 kB).
MAX_PRICE_FILE_BYTES = 4 * 2**20
Tier = Literal["on-demand", "discounted"]
TIERS: tuple[str, ...] = get_args(Tier)


# ---- prices ---------------------------------------------------------------------------------
class GpuPrice(BaseModel):
    """One device's rental price, $ per GPU-hour, with where and when it was read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    on_demand_usd_per_gpu_hour: float | None = Field(gt=0, allow_inf_nan=False)
    discounted_usd_per_gpu_hour: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    discounted_kind: Literal["community", "spot", "reserved"] | None = None
    # the on-demand figure's provenance (`source` is its URL, `date` the day it was read)
    provider: str = ""
    offer: str = ""
    source: str = ""
    date: str = ""
    considered_on_demand: tuple[str, ...] = ()
    # the discounted figure's provenance
    discounted_provider: str = ""
    discounted_offer: str = ""
    discounted_source: str = ""
    discounted_date: str = ""
    considered_discounted: tuple[str, ...] = ()
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

    def provenance(self, tier: Tier) -> dict[str, object]:
        """The figure used for `tier`, with its provider, tier name, date, URL and offer, and
        every provider's figure it was chosen from (empty strings where the file gives none)."""
        if tier == "on-demand":
            return {
                "usd_per_gpu_hour": self.on_demand_usd_per_gpu_hour,
                "provider": self.provider,
                "tier": "on-demand",
                "date": self.date,
                "url": self.source,
                "offer": self.offer,
                "considered": list(self.considered_on_demand),
            }
        return {
            "usd_per_gpu_hour": self.discounted_usd_per_gpu_hour,
            "provider": self.discounted_provider,
            "tier": self.discounted_kind or "",
            "date": self.discounted_date,
            "url": self.discounted_source,
            "offer": self.discounted_offer,
            "considered": list(self.considered_discounted),
        }


class PriceFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: str = ""  # how each figure was chosen from the evidence (bundled table)
    devices: dict[str, GpuPrice]


@dataclass(frozen=True)
class PriceTable:
    """Prices by device name; `overrides` (from `--price`) win over the file for every tier."""

    devices: dict[str, GpuPrice]
    source: str
    overrides: dict[str, float] | None = None
    rule: str = ""  # the file's statement of how its figures were chosen

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
        p = self.devices[hardware].provenance(tier)
        return f"{p['offer']} ({p['tier']}); {p['url']}, read {p['date']}"

    def with_overrides(self, overrides: dict[str, float]) -> PriceTable:
        return replace(self, overrides={**(self.overrides or {}), **overrides})

    def unknown_overrides(self, known: Iterable[str]) -> list[str]:
        """Override names that are neither a catalog device nor one of `known` (the devices
        this run loaded, user YAML files included): a typo the run would silently ignore."""
        from ..spec.catalog import hardware_name

        mine = set(known)
        return [n for n in (self.overrides or {}) if n not in mine and hardware_name(n) is None]

    def check_names(self, known: Iterable[str]) -> None:
        """Refuse a `price=NAME=USD` override whose NAME is neither a catalog device (or
        alias) nor one of the run's devices `known`: it would be ignored, the bundled price
        used."""
        bad = self.unknown_overrides(known)
        if bad:
            raise InvalidInputError(
                f"`price={bad[0]}=…`: no device named '{bad[0][:60]}' in the catalog or in this "
                "run; use a name from `roofline hardware list` (or the `name` of your YAML spec)"
            )


def _parse_price_file(text: str, where: str) -> PriceFile:
    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as e:
        problem = " ".join(str(e).split())  # one line: YAML's own message spans several
        raise SpecError(f"{where}: not valid YAML ({problem[:200]})") from None
    try:
        return PriceFile.model_validate(data)
    except ValidationError as e:
        raise SpecError(f"{where}: {field_error(e)}") from None


@lru_cache(maxsize=1)
def _bundled() -> PriceTable:
    where = "roofline/data/gpu_prices.yaml"
    f = _parse_price_file(
        resources.files("roofline").joinpath("data/gpu_prices.yaml").read_text("utf-8"), where
    )
    return PriceTable(f.devices, where, rule=f.rule)


def load_prices(path: str | Path | None = None) -> PriceTable:
    """The bundled price table, or the one in a YAML file of the same layout."""
    if path is None:
        return _bundled()
    p = Path(path)
    text = read_text(p, "price table", MAX_PRICE_FILE_BYTES)  # a pipe or a device is refused
    f = _parse_price_file(text, str(p))
    return PriceTable(f.devices, str(p), rule=f.rule)


def parse_price_options(values: Sequence[str], table: PriceTable | None = None) -> PriceTable:
    """`--price` values: `NAME=USD` (dollars per GPU-hour; a catalog alias names its device)
    or a YAML price-table path (which replaces the bundled table); later values win."""
    from ..spec.catalog import hardware_name

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


def case_power_w(est, cap_w: float | None = None) -> np.ndarray | None:
    """Average power of one GPU over each case of a `phases.Estimate` run back to back: the
    prefill step's power over TTFT, the decode step at the mid-generation context P + G/2 over
    E2E − TTFT (`roofline.calc.power`), W, under a power cap of `cap_w` W (default: the TDP);
    None when the spec has no tdp_w."""
    m, hw = est.model, est.hardware
    if hw.tdp_w is None:
        return None
    terms = power_terms(hw, cap_w)
    B = np.array([c.batch for c in est.cases], dtype=float)
    P, G = est.cases[0].prompt_tokens, est.cases[0].gen_tokens
    b_pre = busy_share(parallel_step_cost(m, est.stack, Step(B, P, 0)))
    b_dec = busy_share(parallel_step_cost(m, est.stack, Step(B, 1, P + G // 2)))
    ttft = np.array([c.ttft_s for c in est.cases])
    e2e = np.array([c.e2e_s for c in est.cases])
    p_pre, p_dec = terms.power_w(b_pre), terms.power_w(b_dec)
    return np.asarray((p_pre * ttft + p_dec * (e2e - ttft)) / e2e, dtype=float)


def estimate_economics(
    est, usd_per_gpu_hour: float, utilisation: float = 1.0, cap_w: float | None = None
) -> tuple[CaseEconomics, ...]:
    """Cost and energy per output token of each case of a `phases.Estimate`: batches of B run
    back to back (`case_power_w`, under a power cap of `cap_w` W) for `utilisation` of the
    time, idle otherwise."""
    if not 0 < utilisation <= 1:
        raise InvalidInputError(f"`utilisation` must be in (0, 1], got {utilisation}")
    busy = case_power_w(est, cap_w)
    if busy is not None:  # idle the rest of the time, at the static power
        idle = power_terms(est.hardware).static_w
        busy = utilisation * busy + (1 - utilisation) * idle
    return tuple(
        CaseEconomics(
            c.batch,
            usd_per_gpu_hour * c.gpus,
            c.throughput_tokens_per_s * utilisation,
            None if busy is None else float(busy[i]),
            c.gpus,
        )
        for i, c in enumerate(est.cases)
    )


# ---- columns for `serve` --------------------------------------------------------------------
@dataclass(frozen=True)
class ServeEconomics:
    """A simulated run's cost and energy: every recorded step at its power, every idle
    replica-second at the static power (`roofline.calc.power`)."""

    usd_per_hour: float
    tokens_per_s: float
    energy_j: float
    tokens: float
    gpu_seconds: float  # GPUs × run duration

    @property
    def cost_per_million_tokens_usd(self) -> float:
        return float(self.usd_per_hour / SECONDS_PER_HOUR / self.tokens_per_s * 1e6)

    @property
    def joules_per_token(self) -> float:
        return self.energy_j / self.tokens

    @property
    def power_w(self) -> float:
        """Average power of one GPU over the run."""
        return self.energy_j / self.gpu_seconds

    def as_dict(self) -> dict:
        return {
            "usd_per_hour": self.usd_per_hour,
            "cost_per_million_output_tokens_usd": self.cost_per_million_tokens_usd,
            "power_w_per_gpu": self.power_w,
            "joules_per_output_token": self.joules_per_token,
        }


def timeline_busy_share(model, stack, timeline, context: float, width: int = 1) -> np.ndarray:
    """The busy share (`roofline.calc.power`) of each recorded row of a replica's `Timeline`: a
    decode row (`width` tokens per sequence per step) is the decode step of its batch over
    `context` cached tokens; any other row one step of its tokens spread evenly over its
    sequences, uncached (a prefill, or a chunk beside decodes)."""
    n = np.maximum(np.asarray(timeline.seqs, dtype=float), 1.0)
    k = np.asarray(timeline.steps or [1] * n.size, dtype=float)
    per = np.asarray(timeline.tokens, dtype=float) / (n * k)  # T of each step
    out = np.ones(n.size)
    dec = per <= width
    if dec.any():
        B, at = np.unique(n[dec], return_inverse=True)
        b = busy_share(parallel_step_cost(model, stack, Step(B, 1, context)))
        out[dec] = np.broadcast_to(b, B.shape)[at]
    if (~dec).any():
        shapes, at = np.unique(
            np.stack([n[~dec], np.maximum(np.round(per[~dec]), 1.0)], axis=1),
            axis=0,
            return_inverse=True,
        )
        b = busy_share(parallel_step_cost(model, stack, Step(shapes[:, 0], shapes[:, 1], 0)))
        out[~dec] = np.broadcast_to(b, shapes[:, 0].shape)[at.ravel()]
    return out


def serve_economics(
    summary,
    devices: dict[str, HardwareSpec],
    prices: PriceTable,
    gpus_per_replica: int = 1,
    tier: Tier = "on-demand",
) -> ServeEconomics:
    """$ per million output tokens and J per token of a `serve.metrics.Summary`; `devices`
    maps each pool's device name (`Pool.hardware`) to its spec. A replica's energy: each
    recorded step at its power (`timeline_busy_share`; a pool without a model and stack, a toy
    timer, runs its steps at busy share 1), the static power over the rest of the run."""
    r = summary.result
    T = summary.duration_s
    w = r.workload
    context = float(np.mean(w.input_tokens) + np.mean(w.output_tokens) / 2)
    spec = r.deployment.speculation
    width = 1 if spec is None else spec.k + 1
    usd = joules = 0.0
    for e, pool in zip(r.engines, _engine_pools(r), strict=True):
        hw = devices[pool.hardware]
        usd += prices.usd_per_gpu_hour(hw.name, tier) * gpus_per_replica
        terms = power_terms(hw)
        tl = e.timeline
        dt = np.asarray(tl.end_s, dtype=float) - np.asarray(tl.start_s, dtype=float)
        if pool.model is not None and pool.stack is not None and dt.size:
            busy = timeline_busy_share(pool.model, pool.stack, tl, context, width)
        else:
            busy = np.ones(dt.size)
        stepping = float(np.sum(terms.power_w(busy) * dt))
        idle = terms.static_w * max(T - float(dt.sum()), 0.0)
        joules += gpus_per_replica * (stepping + idle)
    tokens = float(w.output_tokens.sum())
    gpu_s = T * gpus_per_replica * len(r.engines)
    return ServeEconomics(usd, summary.throughput_tokens_per_s, joules, tokens, gpu_s)


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
                if c.joules_per_token is not None and c.power_w is not None:
                    figures["joules_per_output_token"] = c.joules_per_token
                    figures["power_w_per_gpu"] = c.power_w
                d["intervals"] = est.figure_intervals(case, figures, coverage)
            cases.append(d)
        return {
            "price_usd_per_gpu_hour": self.price_usd_per_gpu_hour,
            "price_source": self.price_source,
            "utilisation": self.utilisation,
            "cases": cases,
        }


def priced_estimate(
    est,
    prices: PriceTable,
    tier: Tier = "on-demand",
    utilisation: float = 1.0,
    cap_w: float | None = None,
) -> EstimateEconomics:
    """`estimate_economics` at the table's price of the estimate's device (under a power cap
    of `cap_w` W); a device without a published price gets no figures and says so (pass
    `price=NAME=USD`)."""
    name = est.hardware.name
    if not prices.has(name, tier):
        return EstimateEconomics(
            None,
            f"no {tier} price for {name} in the price table; pass `price={name}=USD`",
            utilisation,
        )
    usd = prices.usd_per_gpu_hour(name, tier)
    return EstimateEconomics(
        usd,
        prices.citation(name, tier),
        utilisation,
        estimate_economics(est, usd, utilisation, cap_w),
    )
