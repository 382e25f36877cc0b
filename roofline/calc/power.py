"""The power one GPU draws while it runs a step, and the energy of a run: the one power model
of `estimate`, `serve`, `plan` and `validate --published`.

Define, for one GPU: P_s its static power (idle, a model loaded), P_d its dynamic power, P_cap
its power cap or set point (the spec's `tdp_w` unless the caller sets one). A step of wall time t
runs operators i, each for r_i (its time on the calculator's ceilings: max of compute and
memory time, or a measured GEMM's time) plus f_i of fixed per-kernel time; its collectives take
t_comm. The rest of t is the host's: per-step scheduling and sampling, and launches the device
waits for (no CUDA graphs). c_i = min(FLOPs_i / F, r_i) is the time the operator's FLOPs take at
the achievable matmul ceiling F (attention: at its own dtype's): the part of the kernel the
compute units work through.

Derive: the busy share of the step, the time-weighted share of the GPU's compute units at work,
    b = [Σ_i c_i + a_att·Σ_att (r_i − c_i) + a_s·(Σ_other (r_i − c_i) + Σ_i f_i + t_comm)] / t
A kernel's compute part keeps the units fully at work; while it waits on memory (and in launch
ramps, tails and collectives) they work a_s of the time, a_att in an attention kernel (which
keeps every unit issuing over the KV it streams). Host gaps are not in the numerator: they
lower b, so eager launches lower the power of a small batch (S6: 135 W eager against 232 W with
CUDA graphs on H200 at concurrency 1).
    P = min(P_cap, P_s + P_d · b)
    E = Σ_steps P(b_j) · t_j + P_s · t_idle,   J per output token = E / output tokens.
Simplify: a compute-bound step (prefill) draws P_s + P_d, the cap of a datacenter part; a
weight-streaming decode step with CUDA graphs draws about P_s + a_s·P_d; a batch whose time
goes to attention draws more (Llama-2-7B at batch 64 on H100: 595 W against Llama-3-8B's 455 W).
Takeaway: power follows how long the kernels run and what they do, not the roof utilisation.

The terms (`roofline/data/power.yaml`, written by `benchmarks/derive/power_terms.py` from the
power evidence) come per device where the evidence has that device (`origin` says which rows),
else from the rule of its class: static = a fraction of TDP; dynamic = TDP − static for a
datacenter part (compute-bound work reaches its TDP), (TDP − static) / a_s for a workstation
or consumer board (its board limit binds in decode). a_s comes from phase power on one device:
(P_decode − P_idle) / (P_prefill − P_idle), the decode phase streaming weights and KV, prefill
compute-bound (Splitwise's H100 and A100 parameters, PW056–PW061). No evidence measures
attention apart from the rest of a step, so a_att stays fitted to S1's whole-run vLLM rows and
is flagged so (`Activity.fitted`). Host CPUs, networking and cooling are not counted.

Under a power cap below the modelled power (`capped_estimate`), the device lowers its compute
clock to a share s of the clock it runs at by default. Define α: dynamic power goes as s^α.
The compute part of each kernel stretches to c_i / s. Memory waits, fixed time, collectives
and host time keep their length (the memory clock is not the one the cap lowers). Then
    P(s) = P_s + P_d · s^α · b(s),   b(s) = [Σ c_i / s + a_att·A + a_s·W] / (t + Σ c_i·(1/s − 1)),
and s is the largest share ≤ 1 with P(s) ≤ P_cap. A step's time becomes t + Σ c_i·(1/s − 1).
The calculator's times are taken at the spec's TDP (the default limit, where they were
checked), so a capped step adds Σ c_i·(1/s_cap − 1/s_TDP).
α comes from the one power-limit sweep of the evidence that holds the workload fixed: S9,
llmgarage.ai "Tokens-per-Second Test Bench: Power Limit Sweep" (6× RTX 3090, llama.cpp layer
split, prefill at a 198K context). Prefill runs 9,893 tok/s at a 350 W limit (PW135) and 5,941 at
200 W (PW136). A compute-bound step has b = 1, so s^α = (P_cap − P_s) / P_d and the speed goes
as s. With P_s = 17.5 W (the card's idle, PW049):
    5941 / 9893 = ((200 − 17.5) / (350 − 17.5))^(1/α),   1/α = ln 0.6005 / ln 0.5489 = 0.850,
and α = 1.18. Only P_s enters: P_d cancels. Dynamic power falls a little faster than the
clock, since the voltage drops with it. At the card's minimum limit, 100 W (PW137), this gives
0.306 of the 350 W speed against 0.1405 measured: below the 57% of TDP it was derived at, the
relation is optimistic (`CAP_CHECKED_SHARE`; `capped_estimate` warns).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Literal

import numpy as np
import yaml
from pydantic import Field, ValidationError

from ..errors import InvalidInputError, SpecError, field_error
from ..frozen import Frozen
from ..spec.hardware import HardwareSpec
from ..spec.operators import ArrayLike
from .parallel import ParallelStepCost

DeviceClass = Literal["datacenter", "workstation"]
DATA = "data/power.yaml"
#: α: dynamic power goes as (clock share)^α under a power cap (module docstring: S9,
#: PW135 against PW136, 1/α = ln(5941/9893) / ln((200 − 17.5)/(350 − 17.5)) = 0.850).
CLOCK_POWER_EXPONENT = 1.18
#: The lowest cap, as a share of TDP, the clock relation was derived at (S9: 200 of 350 W).
#: Below it, the evidence says it runs optimistic: S9's decode lost 14% of its speed at 150 W
#: (PW133) and 83% at 100 W (PW134), where the relation gives 4% and 7%
#: (docs/measurements/energy-first-sight.md, "A power cap").
CAP_CHECKED_SHARE = 200 / 350


# ---- the data ---------------------------------------------------------------------------------
class Activity(Frozen):
    """How busy the compute units are while a kernel waits on memory, by kernel kind. A weight
    the power evidence cannot set is named in `fitted` (fitted to whole-run rows, `fit_rows`),
    so nobody takes it for a derived one."""

    stream: float = Field(gt=0, le=1, description="a_s: GEMMs, norms, fixed time, collectives")
    attention: float = Field(gt=0, le=1, description="a_att: attention kernels")
    rows: tuple[str, ...] = ()
    fitted: tuple[Literal["stream", "attention"], ...] = ()
    fit_rows: tuple[str, ...] = ()
    source: str = Field(min_length=1)


class ClassRule(Frozen):
    """The terms of a device the evidence does not measure, from its TDP."""

    static_fraction_of_tdp: float = Field(gt=0, lt=1)
    dynamic: Literal["tdp-minus-static", "tdp-at-stream"]
    rows: tuple[str, ...] = ()
    source: str = Field(min_length=1)


class DeviceTerms(Frozen):
    """A device's measured terms; a dynamic power not measured comes from its class rule."""

    static_w: float = Field(gt=0)
    static_rows: tuple[str, ...] = Field(min_length=1)
    dynamic_w: float | None = Field(default=None, gt=0)
    dynamic_rows: tuple[str, ...] = ()
    source: str = Field(min_length=1)


class PowerData(Frozen):
    activity: Activity
    classes: dict[DeviceClass, ClassRule]
    devices: dict[str, DeviceTerms]
    source: str = Field(min_length=1)


def parse_power_data(text: str, where: str) -> PowerData:
    try:
        return PowerData.model_validate(yaml.safe_load(text))
    except yaml.YAMLError as e:
        raise SpecError(f"{where}: not valid YAML ({' '.join(str(e).split())[:200]})") from None
    except ValidationError as e:
        raise SpecError(f"{where}: {field_error(e)}") from None


@lru_cache(maxsize=1)
def power_data() -> PowerData:
    """The bundled terms (`roofline/data/power.yaml`)."""
    return parse_power_data(resources.files("roofline").joinpath(DATA).read_text("utf-8"), DATA)


# ---- the terms of one device ------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class PowerTerms:
    """P(b) = min(P_cap, P_s + P_d · b) for one GPU (module docstring), and where each term
    came from."""

    static_w: float
    dynamic_w: float
    cap_w: float
    activity: Activity
    origin: str

    def power_w(self, busy: ArrayLike) -> ArrayLike:
        """Average power of one GPU over steps of busy share `busy`, W."""
        return np.minimum(self.cap_w, self.static_w + self.dynamic_w * np.clip(busy, 0.0, 1.0))


def device_class(hw: HardwareSpec) -> DeviceClass:
    """GeForce and RTX workstation boards run against their board power limit; every other
    device is taken as a datacenter part (no power evidence covers TPUs, Gaudi or Apple)."""
    return "workstation" if hw.name.startswith("rtx-") else "datacenter"


def power_terms(
    hw: HardwareSpec, cap_w: float | None = None, data: PowerData | None = None
) -> PowerTerms:
    """The terms of `hw` (module docstring): measured where `power.yaml` has the device, its
    class rule otherwise; the cap is `cap_w` or the spec's TDP. Refuses a spec without TDP."""
    if hw.tdp_w is None:
        raise InvalidInputError(
            f"{hw.name}'s spec has no tdp_w, so its energy cannot be "
            "modelled; add tdp_w (watts, with its source) to the spec"
        )
    if cap_w is not None and not cap_w > 0:
        raise InvalidInputError(f"`cap_w` must be a positive number of watts, got {cap_w}")
    d = data or power_data()
    tdp, cls = hw.tdp_w, device_class(hw)
    rule, own = d.classes[cls], d.devices.get(hw.name)
    if own is not None:
        static = own.static_w
        said = f"static {static:g} W measured for {hw.name} ({', '.join(own.static_rows)})"
    else:
        static = rule.static_fraction_of_tdp * tdp
        said = (
            f"static {static:.0f} W = {rule.static_fraction_of_tdp:g} × TDP, the {cls} class "
            "rule (no measurement of this device)"
        )
    if own is not None and own.dynamic_w is not None:
        dynamic = own.dynamic_w
        said += f"; dynamic {dynamic:g} W measured ({own.dynamic_rows[0]}–{own.dynamic_rows[-1]})"
    elif rule.dynamic == "tdp-minus-static":
        dynamic = tdp - static
        said += f"; dynamic {dynamic:.0f} W = TDP − static ({cls} class rule)"
    else:
        dynamic = (tdp - static) / d.activity.stream
        said += f"; dynamic {dynamic:.0f} W = (TDP − static) / a_s ({cls} class rule)"
    cap = tdp if cap_w is None else cap_w
    said += f"; cap {cap:g} W ({'tdp_w of the spec' if cap_w is None else 'set by the caller'})"
    if d.activity.fitted:
        said += f"; activity {', '.join(d.activity.fitted)} fitted to whole-run rows, not derived"
    return PowerTerms(
        static_w=static, dynamic_w=dynamic, cap_w=cap, activity=d.activity, origin=said
    )


# ---- the busy share of a step -----------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class BusyTerms:
    """A step's kernel time split by how busy it keeps the compute units, seconds (arrays
    broadcast like the step's B and S); the kernel time is their sum, the wall time more."""

    compute_s: ArrayLike  # Σ c_i: every kernel's compute part
    stream_s: ArrayLike  # Σ (r_i − c_i) of the others + Σ f_i + t_comm
    attention_s: ArrayLike  # Σ (r_i − c_i) of attention kernels
    step_s: ArrayLike  # the step's wall time, host included

    @property
    def kernel_s(self) -> ArrayLike:
        return self.compute_s + self.stream_s + self.attention_s

    def share(self, a: Activity) -> ArrayLike:
        """b = (Σ c + a_att · attention + a_s · stream) / t."""
        busy = self.compute_s + a.attention * self.attention_s + a.stream * self.stream_s
        return busy / self.step_s


def busy_terms(cost: ParallelStepCost) -> BusyTerms:
    """The `BusyTerms` of one step on a parallel deployment (one TP rank's kernels and the
    collectives it waits in). The compute part of an operator is its FLOPs at the ceiling, not
    its modelled compute time, so a GEMM timed from a measured table splits the same way."""
    compute: ArrayLike = 0.0
    stream: ArrayLike = 0.0
    attention: ArrayLike = 0.0
    ceil = cost.compute.ceilings
    for o in cost.compute.ops:
        r = np.maximum(o.compute_s, o.memory_s)
        peak = ceil.attention_flops_per_s if o.op.kind == "attention" else None
        c = np.minimum(np.asarray(o.flops) / (peak or ceil.flops_per_s), r)
        waiting = r - c
        compute = compute + c
        if o.op.kind == "attention":
            attention = attention + waiting
        else:
            stream = stream + waiting
        stream = stream + o.overhead_s
    return BusyTerms(
        compute_s=compute,
        stream_s=stream + cost.comm_s,
        attention_s=attention,
        step_s=np.asarray(cost.time_s),
    )


def busy_share(cost: ParallelStepCost, activity: Activity | None = None) -> ArrayLike:
    """b of the module docstring for one step (the bundled activity unless one is given)."""
    return busy_terms(cost).share(activity or power_data().activity)


# ---- a power cap ------------------------------------------------------------------------------
def clock_share(
    t: BusyTerms, terms: PowerTerms, alpha: float = CLOCK_POWER_EXPONENT, steps: int = 60
) -> ArrayLike:
    """s: the largest compute-clock share ≤ 1 at which the step draws no more than the cap,
    P_s + P_d · s^α · b(s) ≤ P_cap (module docstring), by bisection; P(s) grows with s for
    α ≥ 1. A cap at or below the static power leaves no clock: refused."""
    if terms.cap_w <= terms.static_w:
        raise InvalidInputError(
            f"a power cap of {terms.cap_w:g} W is at or below the device's static power "
            f"({terms.static_w:.0f} W): nothing is left to run kernels; raise the cap"
        )
    a = terms.activity
    c = np.asarray(t.compute_s, dtype=float)
    rest_busy = a.attention * np.asarray(t.attention_s) + a.stream * np.asarray(t.stream_s)
    step = np.asarray(t.step_s, dtype=float)

    def power(s: np.ndarray) -> np.ndarray:
        busy = (c / s + rest_busy) / (step + c * (1 / s - 1))
        return terms.static_w + terms.dynamic_w * s**alpha * busy

    hi = np.ones(np.broadcast(c, step).shape)
    ok = power(hi) <= terms.cap_w
    lo = np.full(hi.shape, 1e-6)
    for _ in range(steps):
        mid = (lo + hi) / 2
        fits = power(mid) <= terms.cap_w
        lo, hi = np.where(fits, mid, lo), np.where(fits, hi, mid)
    return np.where(ok, 1.0, lo)
