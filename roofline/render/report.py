"""Rich tables rendered from the same result objects the JSON dumps."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.table import Table

from ..calc.cost import StepCost
from ..calc.memory import BatchFit, CacheSummary
from ..calc.phases import Estimate
from ..spec.engine import EngineSpec
from ..spec.hardware import HardwareSpec
from ..spec.model import ModelSpec
from ..studies.diffusion import DiffusionComparison
from ..studies.economics import EstimateEconomics
from ..units import number_range, seconds, seconds_range, si, si_pair


def _measured_note(e: Estimate) -> str:
    """Where the dense GEMMs' times come from, when a measured table gives them."""
    s = e.decode.ceilings.gemm_surface
    return "" if s is None else f". Dense GEMMs: measured, {s.label}"


def estimate_table(
    e: Estimate, econ: EstimateEconomics | None = None, coverage: float | None = None
) -> Table:
    """One row per batch; with `coverage`, each time, rate and cost shows its interval
    (`roofline.calc.intervals`; none on the datasheet ceiling, a bound)."""
    p, par = e.precision, e.parallel
    gpus = (
        ""
        if par.gpus == 1
        else (
            f"; {par.gpus} GPUs = {par.label} × {par.replicas} "
            f"replica(s) over {e.hardware.interconnect.kind}"
        )
    )
    t = Table(
        title=f"{e.model.display_name} on {e.hardware.display_name} — "
        f"weights {p.weights}{' (as released)' if e.weights_as_released else ''}, "
        f"activations {p.activations}, KV {p.kv} "
        f"(compute {p.compute}){gpus}; ceiling: {e.ceiling}; engine: "
        f"{e.engine.label if e.engine else 'none'}",
        caption=f"memory columns are per GPU, at prompt+gen tokens; a row that does not "
        f"fit shows what it would need. Sources of every term: `roofline "
        f"hardware show {e.hardware.name}`"
        + (f", `roofline engines show {e.engine.name}`" if e.engine else "")
        + " (and ceiling_source in --json)"
        + _measured_note(e),
        caption_justify="left",
    )
    priced = econ is not None and econ.cases
    for col in (
        "batch",
        "prompt+gen",
        "weights",
        "KV cache",
        "activations",
        "memory/GPU",
        "fits",
        "TTFT",
        "TPOT",
        "E2E",
        "decode tok/s",
        "throughput tok/s",
        *(("$/M tok", "J/tok") if priced else ()),
    ):
        t.add_column(col, justify="right")
    for i, c in enumerate(e.cases):
        iv = e.case_intervals(c, coverage) if coverage else {}

        # in the table: TTFT, TPOT, throughput and cost (the width a terminal holds); every
        # figure's interval is in --json
        def time(name: str, c=c, iv=iv) -> str:
            v = getattr(c, name)
            return (
                seconds_range(v, iv[name]["low"], iv[name]["high"], "\n")
                if name in iv
                else seconds(v)
            )

        def rate(name: str, c=c, iv=iv) -> str:
            v = getattr(c, name)
            return (
                number_range(v, iv[name]["low"], iv[name]["high"], sep="\n")
                if name in iv
                else f"{v:,.0f}"
            )

        money: tuple[str, ...] = ()
        if econ is not None and priced:
            ce = econ.cases[i]
            cost, joules = ce.cost_per_million_tokens_usd, ce.joules_per_token
            j = "—" if joules is None else f"{joules:.3g}"  # no tdp_w in the spec: no energy
            if not c.fits:
                money = ("—", "—")  # a configuration that does not fit has no cost
            elif coverage:
                figures = {"cost_per_million_output_tokens_usd": cost}
                if joules is not None:
                    figures["joules_per_output_token"] = joules
                mi = e.figure_intervals(c, figures, coverage)
                k, kj = "cost_per_million_output_tokens_usd", "joules_per_output_token"
                money = (
                    number_range(cost, mi[k]["low"], mi[k]["high"], ".3g", "\n")
                    if k in mi
                    else f"{cost:.3g}",
                    number_range(joules, mi[kj]["low"], mi[kj]["high"], ".3g", "\n")
                    if joules is not None and kj in mi
                    else j,
                )
            else:
                money = (f"{cost:.3g}", j)
        t.add_row(
            str(c.batch),
            f"{c.prompt_tokens}+{c.gen_tokens}",
            si(c.weights_bytes, "B"),
            si(c.kv_cache_bytes, "B"),
            si(c.activation_bytes, "B"),
            si_pair(c.memory_bytes_per_gpu, c.usable_bytes, "B")[0],
            "yes"
            if c.fits
            else f"[red]no[/red] (> {si_pair(c.memory_bytes_per_gpu, c.usable_bytes, 'B')[1]})",
            time("ttft_s"),
            time("tpot_s"),
            seconds(c.e2e_s),
            f"{c.decode_tokens_per_s:,.0f}",
            rate("throughput_tokens_per_s"),
            *money,
        )
    if coverage and e.ceiling != "datasheet" and e.cases:
        basis = e.case_intervals(e.cases[0], coverage).get("tpot_s", {}).get("basis", "")
        t.caption = (
            f"{t.caption}. Under TTFT, TPOT, throughput and cost: their {coverage:.0%} "
            f"interval, low–high, from the published measurements' residuals (TPOT: {basis}); "
            "under J/tok: its interval from the measured-power rows' residuals times the "
            "time's; --json has every figure's, with its basis"
        )
    if econ is not None:
        # the price's URL is `hardware show`'s and --json's: a table caption keeps the offer
        source = re.sub(r"; https?://\S+, read", ", read", econ.price_source)
        t.caption = f"{t.caption}. Cost: {source}" + (
            f", at {econ.utilisation:.0%} utilisation; energy: static power + dynamic power × "
            "the busy share of each step's kernels (roofline/calc/power.py, docs/planning.md)"
            if priced
            else ""
        )
    return t


def _budget_words(f: BatchFit) -> str:
    b = f.budget
    return (
        f"capacity {si(b.capacity_bytes, 'B')}, reserve {si(b.reserve_bytes, 'B')} (memory "
        f"fraction {b.memory_fraction:g}), usable {si(b.usable_bytes, 'B')}"
    )


def _budget_tokens(f: BatchFit) -> str:
    n = f.prefill_token_budget
    return (
        "prefill activations charged for the whole batch's prompts"
        if n is None
        else f"prefill activations charged for a {n:,}-token prefill budget"
    )


def fit_lines(e: Estimate) -> list[str]:
    """What fits, said under the estimate table: the device's memory, the largest batch and its
    binding limit, and, when a row does not fit, what it needs and the smallest deployment."""
    f = e.fit
    lines = [
        f"memory per GPU: {_budget_words(f)}; {_budget_tokens(f)}.",
        f"largest batch that fits at {f.context:,} tokens: {f.max_batch:,} (binding: {f.binding}).",
    ]
    if e.shortfall is not None:
        why = e.shortfall.message(e.model.name, e.hardware.name)
        lines.append(f"[red]does not fit:[/red] {why}.")
    return lines


def memory_table(f: BatchFit, device: str) -> Table:
    """Where one GPU's memory goes at the largest batch that fits."""
    t = Table(
        title=f"memory on {device} at the largest batch that fits ({f.max_batch:,} "
        f"sequences of {f.context:,} tokens); {_budget_tokens(f)}"
    )
    t.add_column("term")
    t.add_column("bytes", justify="right")
    b = f.budget
    for name, value in (
        ("capacity", b.capacity_bytes),
        (f"reserve (1 - {b.memory_fraction:g})", b.reserve_bytes),
        ("usable", b.usable_bytes),
        ("weights", f.weights_bytes),
        ("activations (largest step)", f.activation_bytes),
        ("left for KV", f.kv_room_bytes),
        (f"KV of {f.max_batch:,} sequences", f.kv_cache_bytes),
    ):
        t.add_row(name, si(value, "B"))
    t.add_row("binding limit", f.binding)
    return t


def breakdown_table(title: str, s: StepCost, comm_s: float = 0.0) -> Table:
    """Per operator: counts, bound, and its time split into compute, memory, fixed per-kernel
    cost and host launch time; the caption sums the step's terms (they add up to its time)."""
    terms = {k: float(v) for k, v in s.terms_s.items()}
    total = float(s.time_s) + comm_s
    caption = (
        f"step {seconds(total)} = roofline {seconds(terms['roofline_s'])} + fixed "
        f"per-kernel {seconds(terms['fixed_s'])} + host launch not hidden "
        f"{seconds(terms['host_exposed_s'])} + host per step "
        f"{seconds(terms['host_step_s'])} + collectives {seconds(comm_s)}; "
        f"engine: {s.ceilings.engine.label if s.ceilings.engine else 'none'}"
        + (
            "; HOST-BOUND: the host launches kernels slower than the device runs them"
            if bool(s.host_bound)
            else ""
        )
    )
    t = Table(title=title, caption=caption, caption_justify="left")
    for col in (
        "operator",
        "FLOPs",
        "weights",
        "activations",
        "KV",
        "FLOP/B",
        "bound",
        "compute",
        "memory",
        "fixed",
        "host",
        "time",
        "share",
    ):
        t.add_column(col, justify="right" if col != "operator" else "left")
    for o in s.ops:
        time_s = float(o.time_s)
        t.add_row(
            o.name,
            si(float(o.flops), "FLOP"),
            si(float(o.weight_bytes), "B"),
            si(float(o.act_bytes), "B"),
            si(float(o.kv_bytes), "B"),
            f"{float(o.intensity_flops_per_byte):.3g}",
            "compute" if bool(o.compute_bound) else "memory",
            seconds(float(o.compute_s)),
            seconds(float(o.memory_s)),
            seconds(float(o.overhead_s)),
            seconds(float(o.host_s)),
            seconds(time_s),
            f"{100 * time_s / total:.1f}%",
        )
    t.add_row(
        "[b]total[/b]",
        si(float(s.flops), "FLOP"),
        si(float(s.weight_bytes), "B"),
        "",
        si(float(s.kv_bytes), "B"),
        f"{float(s.intensity_flops_per_byte):.3g}",
        "",
        "",
        "",
        seconds(terms["fixed_s"]),
        seconds(s.host_launch_s),
        seconds(total),
        "100%",
    )
    return t


def hardware_table(specs: list[HardwareSpec]) -> Table:
    t = Table(title="hardware specs (dense peaks)")
    for col in (
        "name",
        "device",
        "memory",
        "bandwidth",
        "bf16/fp16 peak",
        "fp8 peak",
        "ridge FLOP/B",
        "confidence",
    ):
        t.add_column(col)
    for h in specs:
        half = "bf16" if h.supports("bf16") else "fp16" if h.supports("fp16") else None
        t.add_row(
            h.name,
            h.display_name,
            si(h.memory_bytes, "B"),
            si(h.memory_bandwidth_bytes_per_s, "B/s"),
            si(h.peak_flops_per_s(half), "FLOP/s") if half else "—",
            si(h.peak_flops_per_s("fp8"), "FLOP/s") if h.supports("fp8") else "—",
            f"{h.ridge_point_flops_per_byte(half):.0f}" if half else "—",
            h.confidence,
        )
    return t


def engines_table(specs: list[EngineSpec], default: str) -> Table:
    t = Table(
        title=f"inference-engine profiles (default: {default}; `--engine none`: the "
        "hardware layer alone)"
    )
    for col in (
        "name",
        "engine",
        "launches",
        "CUDA graphs",
        "host/kernel",
        "host/step",
        "attention kernel",
        "decode attn BW",
        "all-reduce",
        "releases (`--engine NAME@VERSION`)",
    ):
        t.add_column(col)
    for e in specs:
        ranges = [f"{r.since}+: {r.label}" for r in e.releases]
        if e.releases:
            ranges.append(f"{e.newest_since}+: this profile (newest)")
        t.add_row(
            e.name,
            e.display_name,
            e.launches,
            "yes" if e.cuda_graphs else "no",
            seconds(e.host_launch_us * 1e-6),
            seconds(e.host_step_us * 1e-6),
            e.attention.kernel.split(" (")[0],
            f"{e.attention.decode_memory_fraction:.2f}",
            f"{e.all_reduce.kind} +{seconds(e.all_reduce.latency_us * 1e-6)}",
            "\n".join(ranges) or "one profile",
        )
    t.caption = (
        "a bare name is the newest release; NAME@VERSION takes the range at or below VERSION"
    )
    return t


def models_table(specs: list[ModelSpec]) -> Table:
    t = Table(title="model specs")
    for col in (
        "name",
        "model",
        "params",
        "active",
        "L",
        "D",
        "N",
        "K",
        "H",
        "F",
        "V",
        "max context",
    ):
        t.add_column(col)
    for m in specs:
        # MoE: F of one routed expert, with the expert count and top-k beside it
        ffn = f"{m.moe.expert_d_ff} ×{m.moe.experts} top-{m.moe.top_k}" if m.moe else str(m.d_ff)
        t.add_row(
            m.name,
            m.display_name,
            f"{m.total_params / 1e9:.2f} B",
            f"{m.active_params / 1e9:.2f} B",
            str(m.layers),
            str(m.d_model),
            str(m.heads),
            str(m.kv_heads),
            str(m.head_dim),
            ffn,
            str(m.vocab_size),
            f"{m.max_context:,}",
        )
    return t


def frontier_table(estimates: Sequence[Estimate], bar_width: int = 30) -> Table:
    """The latency-throughput frontier as text: one row per batch size, a bar of decode tok/s
    scaled to the fastest row; batches that do not fit in device memory are dimmed."""
    top = max(c.decode_tokens_per_s for e in estimates for c in e.cases)
    t = Table(title="decode latency vs throughput over batch size")
    for col in ("model", "device", "batch", "TPOT", "decode tok/s", "memory", "fits", ""):
        t.add_column(col, justify="left" if col in ("model", "device", "") else "right")
    for e in estimates:
        for c in e.cases:
            bar = "█" * max(1, round(bar_width * c.decode_tokens_per_s / top))
            t.add_row(
                e.model.display_name,
                e.hardware.display_name,
                str(c.batch),
                seconds(c.tpot_s),
                f"{c.decode_tokens_per_s:,.0f}",
                si(c.memory_bytes, "B"),
                "yes" if c.fits else "[red]no[/red]",
                bar if c.fits else f"[dim]{bar}[/dim]",
                style=None if c.fits else "dim",
            )
        t.add_section()
    return t


def kv_table(rows: list[CacheSummary], device: str) -> Table:
    r0 = rows[0]
    f0 = r0.fit
    t = Table(
        title=f"KV cache / state at S = {r0.context:,} tokens, KV {r0.kv_dtype}, on {device}"
        f" — {_budget_words(f0)}",
        caption="per token: KV-owning attention layers before any window; per sequence: "
        "windows applied, constant SSM/linear state included; room, max batch "
        f"and max context per GPU of the deployment; {_budget_tokens(f0)}",
        caption_justify="left",
    )
    for col in (
        "model",
        "KV per token",
        "per sequence",
        "of which state",
        "decode reads (B=1)",
        "weights",
        "left for KV",
        "max batch",
        "max context",
    ):
        t.add_column(col, justify="left" if col == "model" else "right")
    for r in rows:
        f, c = r.fit, r.context_fit
        batch = (
            "0 (weights fill the device)"
            if f.binding == "weights"
            else f"{f.max_batch:,} ({f.binding})"
        )
        t.add_row(
            r.model,
            si(r.kv_bytes_per_token, "B"),
            si(r.kv_bytes_per_sequence, "B"),
            si(r.state_bytes_per_sequence, "B"),
            si(r.decode_read_bytes, "B"),
            si(f.weights_bytes, "B"),
            si(f.kv_room_bytes, "B"),
            batch,
            f"{c.max_context:,} ({'model limit' if c.binding == 'context' else c.binding})",
        )
    return t


def diffusion_table(c: DiffusionComparison) -> Table:
    t = Table(
        title=f"{c.model}: diffusion ({c.steps} steps over {c.prompt_tokens}+"
        f"{c.gen_tokens} tokens) vs autoregressive, B={c.batch}, {c.hardware}"
    )
    for col in ("decoding", "per step", "steps", "total", "tokens/s"):
        t.add_column(col, justify="left" if col == "decoding" else "right")
    t.add_row(
        "diffusion (bidirectional, no KV cache)",
        seconds(c.diffusion_step_s),
        str(c.steps),
        seconds(c.diffusion_s),
        f"{c.diffusion_tokens_per_s:,.1f}",
    )
    t.add_row(
        "autoregressive (TTFT + (L-1)·TPOT)",
        seconds(c.autoregressive_tpot_s),
        str(c.gen_tokens - 1),
        seconds(c.autoregressive_s),
        f"{c.autoregressive_tokens_per_s:,.1f}",
    )
    verdict = "fits" if c.fits else "[red]does not fit[/red]"
    t.caption = (
        f"diffusion memory: weights + one full step's activations and logits = "
        f"{si(c.memory_bytes, 'B')} of {si(c.usable_bytes, 'B')} usable: {verdict}"
    )
    t.caption_justify = "left"
    return t
