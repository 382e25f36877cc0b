"""The power model before and after issue 39, on the figures the issue names.

    python benchmarks/energy_report.py > docs/measurements/energy-first-sight.md

1. H100 SXM decode power of Llama-3.1-8B on vLLM (P = 1024, G = 256, the decode step at
   P + G/2) at batch 1, 32 and 128: the model before (idle 11.47% of TDP, linear in the roof
   utilisation, `MEMORY_ROOF_POWER_SHARE` 0.301; restated below from commit 1667d26) and now
   (`roofline.calc.power`).
2. `estimate` against `serve` on one steady state (B requests sent together, static batching):
   J per output token, before (estimate: roof utilisation; serve: busy at TDP, idle at 11.47%)
   and now (one function).
3. The energy rows (`roofline/data/published-energy.csv`): median |error| at first sight (the
   model before) and now, by metric and by source; and, where a row states the GPU's measured
   activity (nvidia-smi utilisation, DCGM sm_active), the model's kernel share beside it.

    python benchmarks/energy_report.py --band

prints only the energy band's check (`roofline.calc.intervals`, "energy"): leave-one-source-out
coverage of the 80% power and J-per-token bands over the stored energy residuals
(`roofline/data/energy-residuals.csv`), by metric, source and GPUs, and the median half-width
of each row's own band.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from roofline.calc import intervals as iv
from roofline.calc.parallel import parallel_step_cost
from roofline.calc.phases import estimate
from roofline.calc.power import busy_share, busy_terms, power_terms
from roofline.calc.stack import Stack
from roofline.serve.metrics import Summary
from roofline.serve.policy import policy
from roofline.serve.published import load_rows, predict_all
from roofline.serve.simulate import build_deployment, simulate
from roofline.serve.workload import NO_PREFIX, Workload
from roofline.spec.catalog import load_engine, load_hardware, load_model
from roofline.spec.operators import Step
from roofline.studies.economics import estimate_economics, load_prices, serve_economics

ROOT = Path(__file__).resolve().parents[1]
ROWS = ROOT / "roofline" / "data" / "published-energy.csv"
IDLE_BEFORE = 80.3 / 700  # the model before: idle share of TDP
MEMORY_SHARE_BEFORE = (267 - 80.3) / (700 - 80.3)


def power_before_w(cost, stack: Stack) -> np.ndarray:
    """P = idle + (TDP − idle)·min(1, max(u_c, 0.301·u_m)) on the achievable roofs."""
    hw, c = stack.hardware, stack.ceilings
    assert hw.tdp_w is not None
    t = np.asarray(cost.time_s)
    u = np.maximum(
        np.asarray(cost.compute.flops) / (t * c.flops_per_s),
        MEMORY_SHARE_BEFORE * np.asarray(cost.compute.bytes) / (t * c.bytes_per_s),
    )
    idle = IDLE_BEFORE * hw.tdp_w
    return idle + (hw.tdp_w - idle) * np.minimum(u, 1.0)


def decode_curve(m, stack: Stack) -> None:
    B = np.array([1.0, 32.0, 128.0])
    dec = parallel_step_cost(m, stack, Step(B, 1, 1024 + 256 // 2))
    now = power_terms(stack.hardware).power_w(busy_share(dec))
    print("| batch | before (W) | now (W) | busy share now |")
    print("|---|---|---|---|")
    for i, b in enumerate(B):
        print(
            f"| {b:.0f} | {power_before_w(dec, stack)[i]:.0f} | {now[i]:.0f} | "
            f"{np.asarray(busy_share(dec))[i]:.3f} |"
        )


def estimate_vs_serve(m, stack: Stack) -> None:
    hw = stack.hardware
    assert hw.tdp_w is not None
    print(
        "| batch | estimate before | serve before (upper bound) | estimate now | serve now | "
        "W per GPU now: estimate / serve | time: estimate / serve |"
    )
    print("|---|---|---|---|---|---|---|")
    for B in (1, 32, 128):
        est = estimate(m, stack, [B], 1024, 256)
        c = est.cases[0]
        pre = parallel_step_cost(m, stack, Step(B, 1024, 0))
        dec = parallel_step_cost(m, stack, Step(B, 1, 1024 + 128))
        t_dec = c.e2e_s - c.ttft_s
        p_before = (
            power_before_w(pre, stack) * c.ttft_s + power_before_w(dec, stack) * t_dec
        ) / c.e2e_s
        e_before = float(np.asarray(p_before)) / c.throughput_tokens_per_s
        w = Workload(
            np.zeros(B), np.full(B, 1024), np.full(B, 256), np.full(B, NO_PREFIX), np.zeros(B, int)
        )
        p = policy("static", stack.engine).on(stack.memory)
        s = Summary(simulate(w, p, build_deployment(m, stack, p)), np.inf, np.inf)
        busy = min(s.result.engines[0].busy_s, s.duration_s)
        idle = IDLE_BEFORE * hw.tdp_w
        s_before = (hw.tdp_w * busy + idle * (s.duration_s - busy)) / (B * 256)
        e, se = estimate_economics(est, 1.0)[0], serve_economics(s, {hw.name: hw}, load_prices())
        assert e.joules_per_token is not None and e.power_w is not None
        e_now, s_now = e.joules_per_token, se.joules_per_token
        print(
            f"| {B} | {e_before:.3f} | {s_before:.3f} ({s_before / e_before:.1f}×) | "
            f"{e_now:.3f} | {s_now:.3f} ({s_now / e_now - 1:+.1%}) | "
            f"{e.power_w:.0f} / {se.power_w:.0f} | {c.e2e_s:.3f} / {s.duration_s:.3f} s |"
        )


def energy_rows() -> None:
    preds = predict_all(load_rows(ROWS))
    print("| metric | group | rows | median abs error, first sight | median abs error, now |")
    print("|---|---|---|---|---|")
    for metric in ("power_w", "joules_per_output_token"):
        groups: dict[str, list] = {"all": []}
        for p in preds:
            if p.row.metric == metric:
                groups["all"].append(p)
                groups.setdefault(p.row.source.split(" ")[0].split("@")[0][:45], []).append(p)
        for g, ps in groups.items():
            then = np.median([abs(p.row.first_sight) for p in ps])
            now = np.median([abs(p.error) for p in ps])
            print(f"| {metric} | {g} | {len(ps)} | {then:.0%} | {now:.0%} |")
    print()
    print("Rows that state the GPU's activity, against the model's kernel share of the step:")
    print()
    print("| row | measured | published W | predicted W | model kernel share (decode) |")
    print("|---|---|---|---|---|")
    for p in preds:
        note = p.row.source + " " + _note(p.row.id)
        m = re.search(r"(GPU util [\d.]+%|sm_active [\d.]+%)", note)
        if p.row.metric != "power_w" or m is None:
            continue
        share = _kernel_share(p.row)
        print(f"| {p.row.id} | {m.group(1)} | {p.row.value:g} | {p.predicted:.0f} | {share:.0%} |")


def _note(rid: str) -> str:
    import csv

    with ROWS.open(encoding="utf-8", newline="") as f:
        return next(r["note"] for r in csv.DictReader(f) if r["id"] == rid)


def _kernel_share(row) -> float:
    from roofline.calc.memory import batch_fit
    from roofline.calc.placement import Parallel
    from roofline.serve.published import precision_of, release_of

    m, hw = load_model(row.model), load_hardware(row.hardware)
    eng = release_of(row, load_engine(row.engine_profile))
    stack = Stack.resolve(m, hw, precision_of(row, eng), "achievable", eng, Parallel(tp=row.tp))
    B = row.batch
    if row.burst:
        B = min(B, max(batch_fit(m, stack, row.prompt + row.gen, row.prompt).runnable, 1))
    t = busy_terms(parallel_step_cost(m, stack, Step(B, 1, row.prompt + row.gen // 2)))
    return float(np.asarray(t.kernel_s / t.step_s))


def energy_band(coverage: float = 0.8) -> None:
    """The leave-one-source-out check of the energy band (module docstring)."""
    res = iv.read_residuals(iv.energy_path())
    c = iv.energy_loso_coverage(res, iv.bundled(), coverage)
    width = iv.energy_half_width(res, iv.bundled(), coverage)
    names = {"power": "power_w", "energy": "joules_per_output_token"}
    print(f"{coverage:.0%} band, {c.rows} rows: leave-one-source-out coverage {c.overall:.1%}\n")
    print("| group | covered / rows | share |")
    print("|---|---|---|")
    for title, groups in (("metric", c.by_quantity), ("source", c.by_source), ("", c.by_gpus)):
        for k, (n_in, n) in groups.items():
            name = names.get(k, k) if title == "metric" else k
            print(f"| {name} | {n_in} / {n} | {n_in / n:.0%} |")
    print()
    print("Median half-width (high − low)/2 of each row's own band, share of the prediction:")
    print(", ".join(f"{names[k]} {v:.0%}" for k, v in width.items()) + ".")


def main() -> None:
    if sys.argv[1:] == ["--band"]:
        energy_band()
        return
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "roofline"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    print("# Energy: the power model before and after issue 39\n")
    print(f"`python benchmarks/energy_report.py` at {head}{' + working tree' if dirty else ''}.\n")
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    stack = Stack.resolve(m, hw, engine=load_engine("vllm"))
    print("## H100 SXM decode power, Llama-3.1-8B, vLLM, P = 1024, G = 256 (step at S = 1152)\n")
    decode_curve(m, stack)
    print("\n## J per output token: `estimate` against `serve`, B requests sent together\n")
    estimate_vs_serve(m, stack)
    print("\n## The energy rows\n")
    print("`roofline validate --published roofline/data/published-energy.csv`\n")
    energy_rows()


if __name__ == "__main__":
    main()
