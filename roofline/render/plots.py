"""Charts drawn from the calculator's result objects, written as PNG or SVG (Agg canvas).

Each function receives finished results (`Estimate`, `KVCurve`, measured or simulated samples)
and only draws them: no model arithmetic happens here, so a chart shows exactly the numbers the
tables and JSON show. Data stay in SI units; tick labels carry the prefixes (`10 ms`, `1 TFLOP/s`).
matplotlib (the `plot` extra) is imported when a chart is drawn, never at import time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..calc import memory
from ..calc.phases import Estimate
from ..errors import InvalidInputError, RooflineError
from ..spec.hardware import HardwareSpec
from ..spec.model import ModelSpec
from ..studies.sweeps import KVCurve
from ..units import si

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..measure.results import Point
    from ..measure.validate import Validation

#: Figure size in inches at DPI dots per inch: a chart is 900 x 560 pixels, two panels 1200 x 480.
FIGSIZE_IN = (9.0, 5.6)
WIDE_FIGSIZE_IN = (12.0, 4.8)
DPI = 100
FORMATS = (".png", ".svg")

PHASE_COLOURMAPS = {"prefill": "Blues", "decode": "Oranges"}
KIND_MARKERS = {"matmul": "o", "attention": "^", "elementwise": "s", "gather": "D"}


class MissingDependencyError(RooflineError):
    """An optional extra the command needs is not installed."""


@dataclass(frozen=True)
class RateSweep:
    """Throughput a serving policy sustains at each request arrival rate."""

    policy: str
    arrival_rate_per_s: Sequence[float]
    throughput_tokens_per_s: Sequence[float]


# ---- figure plumbing ---------------------------------------------------------------------
def _figure(figsize: tuple[float, float] = FIGSIZE_IN, ncols: int = 1) -> tuple[Figure, list[Axes]]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingDependencyError(
            "charts need matplotlib; install it with: pip install 'roofline[plot]'"
        ) from None
    fig = Figure(figsize=figsize, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


def _log_axes(ax: Axes, xlabel: str, ylabel: str, x_unit: str | None, y_unit: str | None) -> None:
    """Log-log axes; a unit gives engineering-prefixed tick labels, None gives plain numbers."""
    from matplotlib.ticker import NullFormatter

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(_tick_formatter(x_unit))
    ax.yaxis.set_major_formatter(_tick_formatter(y_unit))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.1)


def _tick_formatter(unit: str | None):
    """Engineering prefixes with a unit (`20 ms`), plain numbers without one (`0.1`)."""
    from matplotlib.ticker import EngFormatter, FuncFormatter

    return EngFormatter(unit=unit) if unit is not None else FuncFormatter(lambda v, _: f"{v:g}")


def _label_minor_ticks(axis, unit: str | None) -> None:
    """Label the 2x and 5x ticks between decades too, for axes spanning few decades."""
    from matplotlib.ticker import LogLocator

    axis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
    axis.set_minor_formatter(_tick_formatter(unit))
    axis.set_tick_params(which="minor", labelsize=8)


def save(fig: Figure, path: Path) -> Path:
    """Write `fig` as PNG or SVG, chosen by the file suffix."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise InvalidInputError(f"cannot write '{path}': give a file ending in .png or .svg")
    if not path.parent.is_dir():
        raise InvalidInputError(f"folder '{path.parent}' does not exist; create it first")
    fig.savefig(path, format=suffix[1:])
    return path


# ---- roofline ----------------------------------------------------------------------------
def _peaks_by_value(hw: HardwareSpec) -> list[tuple[float, list[str]]]:
    """Distinct dense peaks, highest first, each with the dtypes that share it (bf16/fp16)."""
    groups: dict[float, list[str]] = {}
    for dtype in hw.dense_peak_tflops:
        groups.setdefault(hw.peak_flops_per_s(dtype), []).append(dtype)
    return sorted(groups.items(), reverse=True)


def roofline_chart(
    hw: HardwareSpec, estimates: Sequence[Estimate] = (), measured: Sequence[Point] = ()
) -> Figure:
    """Log-log roofline of `hw`: one datasheet roof per distinct dtype peak (shared bandwidth
    slope, ridge point labelled), the estimate's achievable roof dashed, and every operator of
    each estimate's prefill and decode step as a point (x: FLOP/byte, y: FLOPs / predicted
    time). Colour is the phase, darker for larger batches; marker shape is the operator kind;
    each step's rightmost operator carries its batch label. Operators without FLOPs (the
    embedding gather) have no place on a log intensity axis and are left out."""
    from matplotlib import colormaps
    from matplotlib.lines import Line2D

    fig, (ax,) = _figure()
    _log_axes(
        ax, "arithmetic intensity (FLOP / byte)", "attained performance (FLOP/s)", None, "FLOP/s"
    )
    bw = hw.memory_bandwidth_bytes_per_s
    peaks = _peaks_by_value(hw)
    steps = [
        (phase, e.cases[0].batch, cost)
        for e in estimates
        for phase, cost in (("prefill", e.prefill), ("decode", e.decode))
    ]
    xs = [float(o.intensity_flops_per_byte) for _, _, s in steps for o in s.ops if o.flops > 0]
    xs += [k.intensity_flops_per_byte for k in measured if k.flops > 0 and k.native]
    ridges = [hw.ridge_point_flops_per_byte(dtypes[0]) for _, dtypes in peaks]
    lo = min([0.1, *xs]) / 2
    hi = max([4 * max(ridges), *xs]) * 20  # room right of the data for the roof labels

    for i, (peak, dtypes) in enumerate(peaks):
        name, ridge = "/".join(dtypes), ridges[i]
        ax.plot(
            [lo, ridge, hi],
            [bw * lo, peak, peak],
            color="0.25",
            lw=1.6 if i == 0 else 1,
            gid=f"roof:{name}",
        )
        ax.annotate(
            f"{name}  {si(peak, 'FLOP/s')}",
            (hi, peak),
            ha="right",
            va="bottom",
            fontsize=8,
            xytext=(-4, 2),
            textcoords="offset points",
        )
        ax.plot([ridge], [peak], "o", color="0.25", ms=4, gid=f"ridge:{name}")
        ax.annotate(
            f"ridge {ridge:.0f} FLOP/B",
            (ridge, peak),
            ha="right",
            va="bottom",
            fontsize=8,
            xytext=(-4, 2),
            textcoords="offset points",
        )
    ax.annotate(
        f"slope: {si(bw, 'B/s')} memory bandwidth",
        (lo, bw * lo),
        xytext=(6, 2),
        textcoords="offset points",
        fontsize=8,
    )

    achievable = {
        (s.ceilings.flops_per_s, s.ceilings.bytes_per_s): s.ceilings
        for _, _, s in steps
        if s.ceilings.name == "achievable"
    }
    for c in achievable.values():
        ax.plot(
            [lo, c.ridge_point_flops_per_byte, hi],
            [c.bytes_per_s * lo, c.flops_per_s, c.flops_per_s],
            ls="--",
            color="tab:green",
            lw=1,
            gid="roof:achievable",
            label=f"achievable: {si(c.flops_per_s, 'FLOP/s')}, {si(c.bytes_per_s, 'B/s')}",
        )

    batches = sorted({b for _, b, _ in steps})
    kinds = sorted({o.op.kind for _, _, s in steps for o in s.ops if o.flops > 0})
    for phase, batch, s in steps:
        shade = 0.45 + 0.5 * batches.index(batch) / max(len(batches) - 1, 1)
        colour = colormaps[PHASE_COLOURMAPS[phase]](shade)
        for kind in kinds:
            ops = [o for o in s.ops if o.flops > 0 and o.op.kind == kind]
            if ops:
                ax.scatter(
                    [float(o.intensity_flops_per_byte) for o in ops],
                    [float(o.attained_flops_per_s) for o in ops],
                    color=colour,
                    marker=KIND_MARKERS[kind],
                    edgecolor="black",
                    linewidth=0.4,
                    s=40,
                    zorder=3,
                    gid=f"ops:{phase}:B={batch}:{kind}",
                )
        right = max((o for o in s.ops if o.flops > 0), key=lambda o: o.intensity_flops_per_byte)
        ax.annotate(
            f"{phase} B={batch}",
            (float(right.intensity_flops_per_byte), float(right.attained_flops_per_s)),
            xytext=(0, -7) if phase == "prefill" else (6, -4),
            ha="right" if phase == "prefill" else "left",
            va="top",
            textcoords="offset points",
            fontsize=7.5,
            color=colour,
            fontweight="bold",
        )
    handles = [
        Line2D([], [], ls="", marker=KIND_MARKERS[k], color="0.6", markeredgecolor="black", label=k)
        for k in kinds
    ]
    handles += [
        Line2D([], [], ls="", marker="o", color=colormaps[PHASE_COLOURMAPS[p]](0.7), label=p)
        for p in PHASE_COLOURMAPS
        if steps
    ]
    measured = [k for k in measured if k.flops > 0 and k.native]  # emulated dtypes: no roof
    for i, fam in enumerate(dict.fromkeys(k.family for k in measured)):
        ks = [k for k in measured if k.family == fam]
        ax.scatter(
            [k.intensity_flops_per_byte for k in ks],
            [k.flops_per_s for k in ks],
            marker="x",
            color=f"C{i}",
            s=40,
            zorder=4,
            gid=f"measured:{fam}",
        )
        handles.append(Line2D([], [], ls="", marker="x", color=f"C{i}", label=f"measured: {fam}"))

    ax.set_xlim(lo, hi)
    ax.set_ylim(bw * lo, peaks[0][0] * 2.5)
    title = f"{hw.display_name}: roofline (datasheet dense peaks)"
    if estimates:
        e = estimates[0]
        title += (
            f"\n{e.model.display_name}, prompt {e.cases[0].prompt_tokens} tokens, "
            f"decode at S={e.cases[0].prompt_tokens}, compute {e.precision.compute}"
        )
    ax.set_title(title, fontsize=10)
    if achievable or handles:
        ax.legend(
            handles=[*ax.get_legend_handles_labels()[0], *handles],
            loc="lower right" if measured else "upper left",
            fontsize=8,
        )
    return fig


# ---- latency-throughput frontier ---------------------------------------------------------
def frontier_chart(estimates: Sequence[Estimate], coverage: float | None = None) -> Figure:
    """Decode latency (TPOT) against decode throughput (B / TPOT) over the batch sizes of each
    estimate, one curve per model x device. Batches that fit in device memory are solid dots;
    those that do not are crosses on a dotted continuation, and the last batch that fits is
    labelled as the memory limit. With `coverage`, the TPOT interval of each batch is a shaded
    band around the curve (a slower TPOT is a lower throughput: the band runs along B / TPOT)."""
    if not estimates:
        raise InvalidInputError("give at least one estimate to draw a frontier")
    fig, (ax,) = _figure()
    _log_axes(
        ax,
        "time per output token, TPOT (s)",
        "decode throughput, all sequences (tokens/s)",
        "s",
        "tok/s",
    )
    _label_minor_ticks(ax.xaxis, "s")
    for i, e in enumerate(estimates):
        colour, label = f"C{i}", f"{e.model.display_name} · {e.hardware.display_name}"
        x = np.array([c.tpot_s for c in e.cases])
        y = np.array([c.decode_tokens_per_s for c in e.cases])
        fits = np.array([c.fits for c in e.cases])
        bands = (
            [e.case_intervals(c, coverage).get("tpot_s", {}) for c in e.cases] if coverage else []
        )
        if bands and all(bands):
            lo = np.array([b["low"] for b in bands])
            hi = np.array([b["high"] for b in bands])
            batch = np.array([c.batch * c.replicas for c in e.cases], dtype=float)
            ax.fill(
                np.concatenate([lo, hi[::-1]]),
                np.concatenate([batch / lo, (batch / hi)[::-1]]),
                color=colour,
                alpha=0.15,
                lw=0,
                label=f"{coverage:.0%} interval",
                gid=f"band:{e.model.name}:{e.hardware.name}",
            )
        ax.plot(
            x[fits],
            y[fits],
            "-o",
            color=colour,
            ms=5,
            label=label,
            gid=f"frontier:{e.model.name}:{e.hardware.name}",
        )
        over = ~fits
        if over.any():
            # continue from the last fitting point so the curve stays one piece
            joined = np.flatnonzero(over)
            if fits.any():
                joined = np.concatenate([[np.flatnonzero(fits)[-1]], joined])
            ax.plot(x[joined], y[joined], ":", color=colour)
            ax.plot(
                x[over],
                y[over],
                "x",
                color=colour,
                ms=7,
                gid=f"over-memory:{e.model.name}:{e.hardware.name}",
            )
        for c, xi, yi in zip(e.cases, x, y, strict=True):
            ax.annotate(
                f"B={c.batch}",
                (xi, yi),
                xytext=(5, -10),
                textcoords="offset points",
                fontsize=7,
                color=colour,
            )
        capacity = f"{si(e.fit.budget.usable_bytes, 'B')} usable"
        if fits.any() and over.any():
            last = np.flatnonzero(fits)[-1]
            ax.annotate(
                f"memory limit: B={e.cases[last].batch} fits in {capacity} (largest {e.max_batch})",
                (x[last], y[last]),
                xytext=(14, -34),
                textcoords="offset points",
                ha="left",
                fontsize=8,
                color=colour,
                fontweight="bold",
                arrowprops={"arrowstyle": "->", "color": colour},
            )
        elif not fits.any():
            ax.annotate(
                f"nothing fits in {capacity}",
                (x[0], y[0]),
                xytext=(5, 8),
                textcoords="offset points",
                fontsize=8,
                color=colour,
            )
    ax.plot([], [], "x", color="0.3", label="exceeds device memory")
    e = estimates[0]
    ax.set_title(
        f"Decode latency vs throughput over batch size\nprompt "
        f"{e.cases[0].prompt_tokens} + {e.cases[0].gen_tokens} generated tokens, "
        f"{e.precision.weights} weights, {e.ceiling} ceiling",
        fontsize=10,
    )
    ax.margins(x=0.12, y=0.08)
    ax.legend(loc="lower right", fontsize=8)
    return fig


# ---- KV memory vs context ----------------------------------------------------------------
def cache_kind(m: ModelSpec) -> str:
    """What a model keeps per sequence, for a legend: attention kind (MHA/GQA/MQA/MLA), its
    window and KV sharing, and any constant SSM or linear-attention state."""
    parts = []
    local, chunked = m.layers_with("local"), m.layers_with("chunked")
    total = local + chunked + m.layers_with("global")
    if total:
        a = m.attention
        kind = (
            "MLA"
            if a.kind == "mla"
            else "MQA"
            if m.kv_heads == 1
            else "MHA"
            if m.kv_heads == m.heads
            else "GQA"
        )
        if local:
            kind += f", window {a.sliding_window:,}"
            kind += "" if local == total else f" on {local}/{total} layers"
        if chunked:
            kind += f", chunks of {a.attention_chunk_size:,}"
            kind += "" if chunked == total else f" on {chunked}/{total} layers"
        if a.kv_share > 1 or a.kv_share_map is not None:
            kind += ", shared KV"
        parts.append(kind)
    if m.layers_with("ssm"):
        parts.append("SSM state")
    if m.layers_with("linear"):
        parts.append("linear-attention state")
    return " + ".join(parts)


def kv_chart(curves: Sequence[KVCurve], devices: Sequence[HardwareSpec] = ()) -> Figure:
    """KV cache / state bytes against context length per model (log-log, powers of two on x),
    with a dashed line at each device's memory capacity and, per model, a dotted line in the
    model's colour at what that capacity leaves after the model's weights: where a curve
    crosses its dotted line, the KV no longer fits beside the weights."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    if not curves:
        raise InvalidInputError("give at least one model to draw KV memory")
    fig, (ax,) = _figure()
    _log_axes(
        ax, "context per sequence, S (tokens)", "KV cache / state, all sequences (bytes)", None, "B"
    )
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=2, numticks=32))
    ax.xaxis.set_major_formatter(
        FuncFormatter(lambda v, _pos: f"{v / 1024:g}k" if v >= 1024 else f"{v:g}")
    )
    for i, c in enumerate(curves):
        ax.plot(
            c.context_tokens,
            c.kv_bytes,
            ms=4,
            color=f"C{i}",
            marker="os^Dv"[i % 5],
            ls=("-", "--", "-.", ":")[i % 4],
            label=f"{c.model.display_name}: {cache_kind(c.model)} ({c.precision.kv})",
            gid=f"kv:{c.model.name}",
        )
    for j, hw in enumerate(devices):
        ax.axhline(
            hw.memory_bytes, ls="--", lw=1, color=str(0.2 + 0.2 * (j % 3)), gid=f"memory:{hw.name}"
        )
        ax.annotate(
            f"{hw.display_name}: {si(hw.memory_bytes, 'B')}",
            (0.01, hw.memory_bytes),
            xycoords=("axes fraction", "data"),
            xytext=(0, 3),
            textcoords="offset points",
            fontsize=8,
        )
        for i, c in enumerate(curves):
            left = hw.memory_bytes - memory.weights_bytes(c.model, c.precision)
            if left <= 0:
                continue
            ax.axhline(left, ls=":", lw=1, color=f"C{i}", gid=f"left:{hw.name}:{c.model.name}")
            ax.annotate(
                f"{hw.display_name} − {c.model.display_name} weights: {si(left, 'B')}",
                (0.99, left),
                xycoords=("axes fraction", "data"),
                xytext=(0, 3),
                textcoords="offset points",
                fontsize=7,
                ha="right",
                color=f"C{i}",
            )
    batches = sorted({c.batch for c in curves})
    ax.set_title(
        f"KV cache / state vs context, batch {', '.join(map(str, batches))}; each "
        "curve ends at the model's max context",
        fontsize=10,
    )
    ax.legend(loc="best", fontsize=8)
    return fig


# ---- validation: predicted vs measured ---------------------------------------------------
def validation_chart(v: Validation) -> Figure:
    """Measured against predicted time per gated point of a `Validation` (log-log), with the
    y = x line and, per distinct band, the region a point passes in: validate's rule
    |predicted − measured| / measured ≤ band means measured ∈ [predicted / (1 + band),
    predicted / (1 − band)]. Colour is the kernel family; failing points are red crosses
    and carry their name."""
    rows = [r for r in v.rows if r.gated]
    if not rows:
        raise InvalidInputError("no gated validation points to draw")
    fig, (ax,) = _figure()
    _log_axes(ax, "predicted time (s)", "measured time (s)", "s", "s")
    values = [t for r in rows for t in (r.predicted_s, r.measured_s)]
    lo, hi = min(values) / 2, max(values) * 2
    ax.plot([lo, hi], [lo, hi], color="0.3", lw=1, label="measured = predicted", gid="identity")
    for band in sorted({r.band for r in rows}, reverse=True):
        upper = [hi * 10, hi * 10] if band >= 1 else [lo / (1 - band), hi / (1 - band)]
        ax.fill_between(
            [lo, hi],
            [lo / (1 + band), hi / (1 + band)],
            upper,
            color="tab:green",
            alpha=0.08,
            lw=0,
            gid=f"band:{band:g}",
        )
    families = list(dict.fromkeys(r.point.family for r in rows))
    for i, fam in enumerate(families):
        ok = [r for r in rows if r.point.family == fam and r.passed]
        if ok:
            ax.scatter(
                [r.predicted_s for r in ok],
                [r.measured_s for r in ok],
                s=30,
                color=f"C{i}",
                zorder=3,
                label=f"{fam} (±{ok[0].band:.0%})",
                gid=f"pass:{fam}",
            )
    failed = [r for r in rows if not r.passed]
    if failed:
        ax.scatter(
            [r.predicted_s for r in failed],
            [r.measured_s for r in failed],
            s=50,
            marker="x",
            color="tab:red",
            zorder=4,
            label="outside its band",
            gid="fail",
        )
        for r in failed:
            ax.annotate(
                r.point.name,
                (r.predicted_s, r.measured_s),
                xytext=(4, 4),
                textcoords="offset points",
                fontsize=7,
                color="tab:red",
            )
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_title(
        f"Predicted vs measured on {v.hardware.name} ({v.ceiling} ceiling): "
        f"{len(rows) - len(failed)}/{len(rows)} points within their band",
        fontsize=10,
    )
    ax.legend(loc="upper left", fontsize=8)
    return fig


# ---- serving: latency distributions and throughput vs load -------------------------------
def serve_chart(
    latency_samples_s: Mapping[str, Sequence[float] | np.ndarray],
    sweeps: Sequence[RateSweep] = (),
    latency_name: str = "request latency",
    title: str | None = None,
    bands: Mapping[str, tuple[float, float]] | None = None,
) -> Figure:
    """Empirical CDF of latency samples per serving policy (left), and throughput against
    request arrival rate per policy (right, when `sweeps` are given). `bands`: per policy the
    (low, high) factors of its latency's interval, shaded around its CDF."""
    if not latency_samples_s or not all(len(v) for v in latency_samples_s.values()):
        raise InvalidInputError("every serving policy needs at least one latency sample")
    fig, axes = _figure(WIDE_FIGSIZE_IN, 2) if sweeps else _figure()
    ax = axes[0]
    _log_axes(ax, f"{latency_name} (s)", "fraction of requests at or below", "s", None)
    _label_minor_ticks(ax.xaxis, "s")
    ax.set_yscale("linear")
    ax.set_ylim(0, 1.02)
    for i, (policy, samples) in enumerate(latency_samples_s.items()):
        x = np.sort(np.asarray(samples, dtype=float))
        if bands and policy in bands:
            lo, hi = bands[policy]
            ax.fill_betweenx(
                np.arange(1, len(x) + 1) / len(x),
                x * lo,
                x * hi,
                step="post",
                color=f"C{i}",
                alpha=0.15,
                lw=0,
                gid=f"band:{policy}",
            )
        ax.step(
            x,
            np.arange(1, len(x) + 1) / len(x),
            where="post",
            color=f"C{i}",
            label=policy,
            gid=f"cdf:{policy}",
        )
    ax.set_title(f"{latency_name} distribution per policy", fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    if sweeps:
        ax = axes[1]
        names = list(latency_samples_s)
        _log_axes(ax, "arrival rate (requests/s)", "throughput (tokens/s)", None, "tok/s")
        _label_minor_ticks(ax.xaxis, None)
        _label_minor_ticks(ax.yaxis, "tok/s")
        for r in sweeps:
            i = names.index(r.policy) if r.policy in names else len(names)
            ax.plot(
                r.arrival_rate_per_s,
                r.throughput_tokens_per_s,
                "-o",
                ms=4,
                color=f"C{i}",
                label=r.policy,
                gid=f"rate:{r.policy}",
            )
        ax.set_title("throughput vs offered load", fontsize=10)
        ax.legend(loc="upper left", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


# ---- plan --------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlanPoint:
    """One deployment on the cost/latency plane."""

    label: str
    cost_per_million_tokens_usd: float
    tpot_p95_s: float
    ttft_p95_s: float


def plan_chart(
    frontier: Sequence[PlanPoint],
    chosen: PlanPoint | None,
    slo_tpot_s: float,
    slo_ttft_s: float,
    title: str = "",
) -> Figure:
    """The Pareto frontier of cost per million output tokens against p95 TPOT (left) and p95
    TTFT (right), the SLOs as dashed lines and the chosen deployment as a star."""
    if not frontier:
        raise InvalidInputError("the plan has no frontier point to draw")
    fig, axes = _figure(WIDE_FIGSIZE_IN, 2)
    cost = np.array([p.cost_per_million_tokens_usd for p in frontier])
    for ax, attr, slo, name in (
        (axes[0], "tpot_p95_s", slo_tpot_s, "p95 TPOT (s)"),
        (axes[1], "ttft_p95_s", slo_ttft_s, "p95 TTFT (s)"),
    ):
        y = np.array([getattr(p, attr) for p in frontier])
        _log_axes(ax, "cost per million output tokens ($)", name, None, "s")
        ax.scatter(
            cost, y, s=14, color="C0", label="Pareto frontier (analytic)", gid=f"frontier:{attr}"
        )
        ax.axhline(slo, color="C3", ls="--", lw=1, label="SLO")
        if chosen is not None:
            ax.scatter(
                [chosen.cost_per_million_tokens_usd],
                [getattr(chosen, attr)],
                s=160,
                marker="*",
                color="C1",
                zorder=3,
                label=f"chosen: {chosen.label}",
                gid=f"chosen:{attr}",
            )
        ax.legend(loc="upper right", fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
