"""Tables for `roofline serve`, rendered from the same summaries the JSON dumps."""

from __future__ import annotations

import numpy as np
from rich.table import Table

from ..serve.metrics import Summary
from ..serve.sweep import SweepResult
from ..units import seconds, si

_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float]) -> str:
    v = np.asarray(values, dtype=float)
    top = v.max(initial=0.0)
    if top <= 0:
        return _BARS[0] * v.size
    return "".join(_BARS[int(x)] for x in np.rint(v / top * (len(_BARS) - 1)))


def summary_table(title: str, summaries: list[Summary]) -> Table:
    t = Table(
        title=title,
        caption="TTFT/TPOT/E2E: p50 / p95; throughput: generated "
        "tokens/s; goodput: requests/s meeting both SLOs",
        caption_justify="left",
    )
    for col in (
        "policy",
        "done",
        "tok/s",
        "TTFT",
        "TPOT",
        "E2E",
        "SLO met",
        "goodput",
        "batch",
        "KV peak",
        "KV frag",
        "preempt",
        "busy",
    ):
        t.add_column(col, justify="left" if col == "policy" else "right")
    for s in summaries:
        d = s.as_dict(timeline=False)
        pct = {
            k: " / ".join("—" if d[k][p] is None else seconds(d[k][p]) for p in ("p50", "p95"))
            for k in ("ttft_s", "tpot_s", "e2e_s")
        }
        t.add_row(
            d["policy"],
            f"{d['requests_completed']}/{d['requests']}",
            f"{d['throughput_tokens_per_s']:,.0f}",
            pct["ttft_s"],
            pct["tpot_s"],
            pct["e2e_s"],
            f"{100 * d['slo']['attainment']:.1f}%",
            f"{d['slo']['goodput_requests_per_s']:.3g}",
            f"{d['batch_size']['mean']:.1f}",
            si(d["kv"]["allocated_peak_bytes"], "B"),
            f"{100 * d['kv']['fragmentation']:.1f}%",
            str(d["preemptions"]),
            " ".join(f"{k[0]}:{100 * v:.0f}%" for k, v in d["utilisation"].items()),
        )
    return t


def interval_line(s: Summary, stack, coverage: float, named: bool = False) -> str:
    """'80% intervals: p95 TTFT 0.21–0.35 s, p95 TPOT 11–17 ms, p95 E2E ...' with its basis."""
    iv = s.intervals(stack, coverage)
    if not iv:
        return ""
    parts = [
        f"p95 {label} {seconds(iv[k]['p95']['low'])}–{seconds(iv[k]['p95']['high'])}"
        for k, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "E2E"))
        if "p95" in iv.get(k, {})
    ]
    who = f"{s.result.policy.name}: " if named else ""
    return f"{who}{coverage:.0%} intervals: {', '.join(parts)} (TPOT: {iv['tpot_s']['basis']})"


def timeline_lines(s: Summary) -> list[str]:
    tl = s.timeline()
    return [
        f"batch size over time (max {max(tl['batch_size']):.0f}):  {sparkline(tl['batch_size'])}",
        f"KV allocated over time (max {si(max(tl['kv_allocated_bytes']), 'B')}):  "
        f"{sparkline(tl['kv_allocated_bytes'])}",
        f"span {seconds(tl['time_s'][-1] - tl['time_s'][0])}; prefix-cache hits "
        f"{s.result.counters.prefix_hit_tokens:,} prompt tokens",
        *speculation_lines(s),
    ]


def speculation_lines(s: Summary) -> list[str]:
    """What the drafts did, when the replica speculates."""
    spec = s.result.deployment.speculation
    if spec is None:
        return []
    d = s.speculation()
    if not d["verifications"]:
        return [f"speculation: K = {spec.k} drafted by {spec.drafted_by}; no decode step ran"]
    spread = f" (sd {spec.acceptance_sd:g} across requests)" if spec.acceptance_sd else ""
    return [
        f"speculation: K = {spec.k} drafted by {spec.drafted_by}, per-token acceptance "
        f"{spec.acceptance:g}{spread}: {d['accepted_tokens']:,} of {d['drafted_tokens']:,} drafts "
        f"accepted ({d['acceptance_rate']:.1%}), {d['tokens_per_verification']:.2f} tokens per "
        "verification"
    ]


def sweep_table(r: SweepResult) -> Table:
    t = Table(
        title=f"rate sweep: highest rate with ≥{100 * r.attainment_target:.0f}% of "
        f"requests within the SLO = {r.best_rate_per_s:.3g} req/s"
    )
    for col in ("rate req/s", "SLO met", "tok/s", "TTFT p95", "TPOT p95"):
        t.add_column(col, justify="right")
    for rate, s in sorted(r.points, key=lambda p: p[0]):
        d = s.as_dict(timeline=False)
        t.add_row(
            f"{rate:.3g}",
            f"{100 * d['slo']['attainment']:.1f}%",
            f"{d['throughput_tokens_per_s']:,.0f}",
            *("—" if d[k]["p95"] is None else seconds(d[k]["p95"]) for k in ("ttft_s", "tpot_s")),
        )
    return t
