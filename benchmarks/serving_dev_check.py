"""First sight of the serving simulator against published serving runs, row by row.

    python benchmarks/serving_dev_check.py SERVING_DEV_CSV [--out docs/measurements/x.md]

SERVING_DEV_CSV is the development set of published serving measurements (the project's
evidence `serving/serving-dev.csv`: one metric per row, `value` in SI units, with the run's
model, hardware, weights/kv formats, tp, engine, mean prompt and generated lengths, rate or
client concurrency, prompt count, and a note naming any pipeline split). Rows whose model,
hardware or engine the catalog lacks are listed and skipped.

Each run (the rows sharing one source file and configuration) is simulated once as
`roofline validate --serving` reruns a result file (`serve.validation.compare`, the engine's
own scheduler): `num_prompts` requests at the row's rate (gamma arrivals of the burstiness the
note states, else Poisson; all at once for `inf`) under its client concurrency, on the replicas
the note states (round-robin), weights and KV in the row's formats, no shared prefixes. The CSV
has no per-request lengths: a ShareGPT run takes the spread of the bundled ShareGPT profile
(`serve.workload.burst_of_profile`, the lengths vLLM's benchmark sampled) scaled to the row's
means; any other run sends every request at the mean prompt and generated lengths. Every
row's metric (ttft_s, tpot_s, itl_s at its statistic; output tokens/s; requests/s) is printed
beside the prediction with the signed error predicted/measured − 1, then the median |error| by
source and by metric. Nothing is fitted: this is the first sight of these rows.
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import statistics
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from roofline.calc.placement import Parallel
from roofline.calc.stack import Stack
from roofline.errors import RooflineError
from roofline.serve.benchmarks import BenchmarkRun
from roofline.serve.validation import compare
from roofline.serve.workload import burst_of_profile
from roofline.spec.catalog import load_engine, load_hardware, load_model
from roofline.spec.precision import Precision, released

#: the CSV's metric -> the common metric quantity; statistic -> its label
METRICS = {
    "ttft_s": "ttft",
    "tpot_s": "tpot",
    "itl_s": "itl",
    "output_tokens_per_s": "output_throughput",
    "request_throughput_per_s": "request_throughput",
}
STATISTICS = {"mean": "mean", "median": "p50", "p90": "p90", "p99": "p99"}
#: the CSV's engine (first word) -> engine spec; vllm-gaudi is vLLM's scheduler on Gaudi
ENGINES = {"vllm": "vllm", "vllm-gaudi": "vllm", "sglang": "sglang", "tensorrt-llm": "tensorrt-llm"}
#: run configuration: rows equal in all of these are one simulated run
RUN_KEYS = (
    "model", "hardware", "weights", "kv", "tp", "engine", "engine_version", "prompt_mean",
    "gen_mean", "rate_per_s", "concurrency", "num_prompts",
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Row:
    id: str
    source: str
    stack: str  # model, device as the catalog resolves it, layout, engine
    metric: str  # common name, e.g. "ttft_p50"
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1


def metric_name(r: dict) -> str | None:
    quantity, stat = METRICS.get(r["metric"]), STATISTICS.get(r["statistic"])
    if quantity is None or stat is None:
        return None
    return quantity if quantity.endswith("throughput") else f"{quantity}_{stat}"


def precision_of(r: dict, model) -> Precision:
    """The row's formats: bf16 or fp8 (W8A8, as vLLM runs an FP8 checkpoint on H100) weights;
    mxfp4 as the model is released (gpt-oss: MXFP4 experts); kv bf16 or fp8."""
    base = released(model)
    kv = r["kv"] or base.kv
    if r["weights"] == "bf16":
        return Precision("bf16", "bf16", kv)
    if r["weights"] == "fp8":
        return Precision("fp8", "fp8", kv)
    if r["weights"] == "mxfp4" and "mxfp4" in base.weights:
        return Precision(base.weights, base.activations, kv)
    raise RooflineError(f"weights '{r['weights']}' not mapped")


def from_note(r: dict, pattern: str, default: float) -> float:
    """A setting the row's note spells out ("pipeline-parallel-size 2", "2 vLLM replicas x 1
    GPU", "burstiness 100.0"), else `default`."""
    m = re.search(pattern, r["note"])
    return float(m.group(1)) if m else default


def lengths_of(r: dict) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Per-request lengths with ShareGPT's spread at the row's means; None: the means."""
    if "sharegpt" not in r["dataset"].lower():
        return None, None
    w = burst_of_profile("sharegpt", int(r["num_prompts"]), float(r["prompt_mean"]),
                         float(r["gen_mean"]))  # fmt: skip
    return w.input_tokens, w.output_tokens


def simulate_run(rows: list[dict]) -> list[Row]:
    r = rows[0]
    model, hw = load_model(r["model"]), load_hardware(r["hardware"])
    engine = load_engine(ENGINES[r["engine"].split()[0]])
    pp = int(from_note(r, r"pipeline-parallel-size (\d+)", 1))
    replicas = int(from_note(r, r"(\d+) (?:vLLM )?replicas", 1))
    inp, out = lengths_of(r)
    stack = Stack.resolve(
        model,
        hw,
        precision_of(r, model),
        "achievable",
        engine,
        Parallel(tp=int(r["tp"]) // pp, pp=pp),
    )
    names = {x["id"]: metric_name(x) for x in rows}
    run = BenchmarkRun(
        source=r["id"],
        format="serving-dev.csv",
        model=r["model"],
        requests=int(r["num_prompts"]),
        request_rate=math.inf if r["rate_per_s"] in ("", "inf") else float(r["rate_per_s"]),
        metrics={n: float(x["value"]) for x in rows if (n := names[x["id"]])},
        mean_input_tokens=float(r["prompt_mean"]) if inp is None else float(inp.mean()),
        mean_output_tokens=float(r["gen_mean"]) if out is None else float(out.mean()),
        burstiness=from_note(r, r"burstiness (\d+(?:\.\d+)?)", 1.0),
        max_concurrency=int(r["concurrency"]) if r["concurrency"] else None,
        input_tokens=inp,
        output_tokens=out,
    )
    rows_out = compare(run, model, stack, replicas=replicas).rows
    layout = f"TP{int(r['tp']) // pp}" + (f"×PP{pp}" if pp > 1 else "")
    copies = f" ×{replicas}" if replicas > 1 else ""
    label = f"{model.name} {hw.name} {layout}{copies} {engine.name}"
    predicted = {row.metric: row.predicted for row in rows_out}
    return [
        Row(
            id=x["id"],
            source=x["source"].split()[0],
            stack=label,
            metric=n,
            measured=float(x["value"]),
            predicted=predicted[n],
        )
        for x in rows
        if (n := names[x["id"]])
    ]


def skip_reason(r: dict) -> str | None:
    for what, load in (("model", load_model), ("hardware", load_hardware)):
        try:
            load(r[what])
        except RooflineError:
            return f"{what} '{r[what]}' not in the catalog"
    if r["engine"].split()[0] not in ENGINES:
        return f"engine '{r['engine']}' has no spec"
    if metric_name(r) is None:
        return f"metric {r['metric']} {r['statistic']} not compared"
    return None


def report(csv_path: Path) -> str:
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    runs: dict[tuple, list[dict]] = defaultdict(list)
    skipped: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        why = skip_reason(r)
        if why:
            skipped[why].append(r["id"])
        else:
            runs[(r["source"].split(" (")[0], *(r[k] for k in RUN_KEYS))].append(r)
    done: list[Row] = []
    for group in runs.values():
        try:
            done += simulate_run(group)
        except RooflineError as e:
            skipped[f"refused: {e}"].extend(x["id"] for x in group)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    out = [
        f"{len(rows)} rows, {len(done)} predicted in {len(runs)} simulated runs, at commit "
        f"{commit or '(unknown)'}.",
        "",
        "| id | source | stack | metric | measured | predicted | error |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    for x in done:
        out.append(
            f"| {x.id} | {x.source} | {x.stack} | {x.metric} | {x.measured:.4g} | "
            f"{x.predicted:.4g} | {x.error:+.0%} |"
        )
    for title, key in (("source", "source"), ("metric", "metric")):
        groups: dict[str, list[float]] = defaultdict(list)
        for x in done:
            label = getattr(x, key)
            if key == "metric" and not label.endswith("throughput"):
                label = label.split("_")[0]  # ttft_p50, ttft_p99 -> ttft
            groups[label].append(abs(x.error))
        out += ["", f"| {title} | rows | median abs error |", "|---|---:|---:|"]
        for label, errs in sorted(groups.items()):
            out.append(f"| {label} | {len(errs)} | {statistics.median(errs):.0%} |")
    all_errs = [abs(x.error) for x in done]
    if all_errs:
        out.append(f"| all | {len(all_errs)} | {statistics.median(all_errs):.0%} |")
    out += ["", "Skipped:", ""]
    out += [f"- {why}: {', '.join(ids)}" for why, ids in sorted(skipped.items())]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("csv", type=Path, help="serving-dev.csv")
    p.add_argument("--out", type=Path, help="also write the report here")
    args = p.parse_args(argv)
    text = report(args.csv)
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
