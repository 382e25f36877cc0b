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
source and by metric. Nothing is fitted.

The project's serving dev set, `roofline/data/serving.csv`, is written from the same run:

    python benchmarks/serving_dev_check.py SERVING_DEV_CSV --dev-set roofline/data/serving.csv \
        [--first-sight-at LABEL] [--seed REPORT.md=LABEL ...]

one row per checked serving-dev row (a row dropped by its check, `DROPPED`, is left out with its
reason), carrying its id, source, stack, metric and unit, measured value, conditions and check
note, and two signed errors predicted/measured − 1: `first_sight`, the error when the row was
first predicted, with `first_sight_at` naming the code that predicted it, and `now`, this run's,
with `now_at`. A row the file already has keeps its first sight: a rerun refreshes `now` only,
and never rewrites a first sight (as `benchmarks/derive/import_published.py` does for
published.csv). A row without one takes it from the first `--seed` report that printed it (an
earlier run's output, its predicted/measured at 4 significant figures), else from this run,
labelled `--first-sight-at` (default: this checkout's commit). Rows the catalog cannot predict
yet are kept with empty errors and the reason in `now_at`.
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's roofline, not an installed copy
from roofline.calc.placement import Parallel  # noqa: E402
from roofline.calc.stack import Stack  # noqa: E402
from roofline.errors import RooflineError  # noqa: E402
from roofline.serve.benchmarks import BenchmarkRun  # noqa: E402
from roofline.serve.validation import compare  # noqa: E402
from roofline.serve.workload import burst_of_profile  # noqa: E402
from roofline.spec.catalog import load_engine, load_hardware, load_model  # noqa: E402
from roofline.spec.engine import EngineSpec  # noqa: E402
from roofline.spec.precision import Precision, released  # noqa: E402
from roofline.units import UNKNOWN_RELEASE  # noqa: E402

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
#: the unit each compared quantity is in (the CSV's `value` is SI: latencies in s)
UNITS = {
    "ttft": "s", "tpot": "s", "itl": "s",
    "output_throughput": "tokens/s", "request_throughput": "requests/s",
}  # fmt: skip
#: rows whose check (docs/evidence/serving-dev-row-checks.md) drops them, and why: none so far
DROPPED: dict[str, str] = {}
#: the check's caveat per row (every row's value and conditions were read back from its source,
#: docs/evidence/serving-dev-row-checks.md); rows not named here: "ok"
_IDS = lambda a, b: [f"sd{i:03d}" for i in range(a, b + 1)]  # noqa: E731
CAVEATS: dict[str, str] = {
    **{
        i: "ok; the server had served the same prompts at qps 1, 4 and 16 before with prefix "
        "caching on (TTFT of the all-at-once run mostly cache hits)"
        for i in _IDS(16, 17)
    },
    **{
        i: "ok; two nodes over InfiniBand (TP4 x PP2), read from the run's benchmark_results.md "
        "(JSON not copied)"
        for i in _IDS(21, 24)
    },
    **{
        i: "ok; GPU SKU not stated (folder name H100 / A100 only): h100-sxm and a100-sxm-80gb "
        "assumed"
        for i in _IDS(25, 35)
    },
    **{
        i: "ok; no --ignore-eos: output lengths vary (mean < 1024), simulated at the mean"
        for i in _IDS(36, 47)
    },
    **{
        i: "ok; agentic multi-turn trace replay (mean ISL ~1e5, heavy prefix reuse, prefix cache "
        "on, hit rate not recorded; ISL/OSL heavy-tailed), simulated as fresh prompts at the mean "
        "lengths; run ended on its 1800 s duration; rate empty in serving-dev.csv = closed loop "
        "(inf)"
        for i in _IDS(48, 57)
    },
    **{
        i: "ok; read from a later stored commit of the same gpustack doc (same printed values)"
        for i in _IDS(58, 95)
    },
    **{
        i: "ok; read from a later stored commit of the same gpustack doc (same printed "
        "values); 16 of 1000 prompts not sent (984 requests, 'Peak concurrent requests: 984')"
        for i in _IDS(88, 91)
    },
    **{
        i: "ok; read from a later stored commit of the same gpustack doc (same printed "
        "values); the doc's 'Model' heading says Qwen3-30B-A3B while every command serves "
        "Qwen/Qwen3-8B (commands taken)"
        for i in _IDS(92, 95)
    },
    **{
        i: "ok; 'W4A8 (no EAGLE3)' column, reproduced by the blog from its earlier W4A8 post; "
        "KV dtype not stated (bf16 taken)"
        for i in _IDS(96, 99)
    },
    **{
        i: "ok; experimental WIP client ('likely contains errors'); TTFT 2.8 s for 1k-token "
        "prompts and higher at concurrency 4 (4.6 s, not copied to the set) than at 16: low "
        "confidence"
        for i in _IDS(106, 110)
    },
}
#: why a row is not predicted (kept in the set with empty errors)
NOT_PREDICTED = {
    "nemotron-3-nano-30b-a3b": "hybrid Mamba-2/attention/MoE layers of one mixer or one FFN "
    "each (Nemotron-H pattern), a layer structure the model spec does not express",
    "ascend-910b": "no public datasheet for the unstated 910B SKU (910B1-B4 differ in peak and "
    "memory); no hardware spec",
}


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
    mxfp4 as the model is released (gpt-oss: MXFP4 experts), or for another model AMD Quark's
    MXFP4 recipe, the routed experts alone (amd/Kimi-K2.5-MXFP4: "all 384 routed experts ...
    quantized to MXFP4", attention, shared experts, dense MLP and LM head kept bf16, as the
    wafer-ai/Kimi-K2.6-MXFP4 card quotes AMD's exclude list); int4 (W4A8) as the model's released
    INT4 experts (amd/Kimi-K2.5-W4A8: INT4 expert weights, attention and shared experts bf16).
    Both quantised recipes also quantise the experts' activations (MXFP4, INT8); one step has
    one activation format here, so the experts' matmuls are costed at the bf16 peak (W4A16):
    prefill-bound figures of those rows lean slow. kv bf16 or fp8."""
    base = released(model)
    kv = r["kv"] or base.kv
    if r["weights"] == "bf16":
        return Precision("bf16", "bf16", kv)
    if r["weights"] == "fp8":
        return Precision("fp8", "fp8", kv)
    if r["weights"] == "mxfp4" and "mxfp4" in base.weights:
        return Precision(base.weights, base.activations, kv)
    if r["weights"] == "mxfp4" and model.moe is not None:
        return Precision("bf16,experts=mxfp4", "bf16", kv)
    if r["weights"] == "int4 (W4A8)" and "experts=int4" in base.weights:
        return Precision(base.weights, "bf16", kv)
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


MONTHS = {
    m: i + 1
    for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                           "nov", "dec"))
}  # fmt: skip


def release_of(r: dict, engine: EngineSpec) -> EngineSpec:
    """The profile of the release the row ran, as `roofline.serve.published.release_of` takes
    a published row's: the version its `engine_version` names when its engine is this profile's
    own (vllm-gaudi's numbers are the plugin's, not vLLM's), else the release current in the
    month it names ('latest image, May 2025'), else a release nobody stated (no kernel table
    measured later stands for it)."""
    text = r["engine_version"].strip()
    own = r["engine"].split()[0].lower() == engine.name.lower()
    if own and re.match(r"^v?\d+\.\d+", text):
        try:
            return engine.at(text.split()[0])
        except ValueError:
            pass
    m = re.search(r"\b([A-Za-z]{3})[a-z]* (20\d\d)\b", text)
    if m and m.group(1).lower() in MONTHS:
        return engine.at_date(f"{m.group(2)}-{MONTHS[m.group(1).lower()]:02d}")
    return engine.model_copy(update={"exact_release": UNKNOWN_RELEASE})


def simulate_run(rows: list[dict]) -> list[Row]:
    r = rows[0]
    model, hw = load_model(r["model"]), load_hardware(r["hardware"])
    engine = release_of(r, load_engine(ENGINES[r["engine"].split()[0]]))
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


@dataclass
class Run:
    rows: list[dict]  # the CSV's rows
    done: list[Row]  # the predicted ones
    skipped: dict[str, list[str]]  # reason -> ids
    runs: int  # simulated runs


def predict(csv_path: Path, only: set[str] | None = None) -> Run:
    """Predict every row of `csv_path` the catalog can (or only the runs holding `only`)."""
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
    if only is not None:
        runs = {k: g for k, g in runs.items() if any(x["id"] in only for x in g)}
    done: list[Row] = []
    for group in runs.values():
        try:
            done += simulate_run(group)
        except RooflineError as e:
            skipped[f"refused: {e}"].extend(x["id"] for x in group)
    return Run(rows, done, dict(skipped), len(runs))


def git_commit() -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()


def report(csv_path: Path, run: Run | None = None) -> str:
    run = run or predict(csv_path)
    rows, done, skipped = run.rows, run.done, run.skipped
    commit = git_commit()
    out = [
        f"{len(rows)} rows, {len(done)} predicted in {run.runs} simulated runs, at commit "
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


#: columns of roofline/data/serving.csv
DEV_COLUMNS = (
    "id", "source", "stack", "model", "hardware", "weights", "kv", "tp", "engine",
    "engine_version", "dataset", "prompt_mean", "gen_mean", "rate_per_s", "concurrency",
    "num_prompts", "metric", "unit", "measured", "check", "first_sight", "first_sight_at",
    "now", "now_at",
)  # fmt: skip
_REPORT_ROW = re.compile(
    r"^\| (sd\d+) \| [^|]+ \| [^|]+ \| [^|]+ \| ([-+.\de]+) \| ([-+.\de]+) \| [^|]+ \|$"
)


def seed_errors(report_md: Path) -> dict[str, float]:
    """Signed errors of an earlier run's printed table (predicted/measured − 1 from the printed
    4-significant-figure values: within ±0.1 points of the run's own error)."""
    out = {}
    for line in report_md.read_text().splitlines():
        m = _REPORT_ROW.match(line.strip())
        if m:
            out[m.group(1)] = float(m.group(3)) / float(m.group(2)) - 1
    return out


def _fmt(x: float) -> str:
    return f"{x:.4f}"


def stack_label(r: dict) -> str:
    pp = int(from_note(r, r"pipeline-parallel-size (\d+)", 1))
    replicas = int(from_note(r, r"(\d+) (?:vLLM )?replicas", 1))
    layout = f"TP{int(r['tp']) // pp}" + (f"xPP{pp}" if pp > 1 else "")
    return (
        f"{r['model']} {r['hardware']} {layout}"
        + (f" x{replicas}" if replicas > 1 else "")
        + (f" {r['engine'].split()[0]}")
    )


def write_dev_set(
    run: Run,
    out: Path,
    now_at: str,
    first_sight_at: str,
    seeds: list[tuple[dict[str, float], str]],
) -> list[dict]:
    """Write (or refresh) the dev set: first sights kept, `now` from `run`."""
    old: dict[str, dict] = {}
    if out.is_file():
        with open(out, newline="") as f:
            old = {r["id"]: r for r in csv.DictReader(f)}
    predicted = {x.id: x for x in run.done}
    why_not = {i: why for why, ids in run.skipped.items() for i in ids}
    table = []
    for r in run.rows:
        if r["id"] in DROPPED:
            continue
        name = metric_name(r)
        x = predicted.get(r["id"])
        quantity = name if name is None or name.endswith("throughput") else name.split("_")[0]
        row = {
            "id": r["id"],
            "source": r["source"].split(" (")[0],
            "stack": stack_label(r),
            **{k: r[k] for k in ("model", "hardware", "weights", "kv", "tp", "engine")},
            "engine_version": r["engine_version"],
            "dataset": r["dataset"],
            "prompt_mean": r["prompt_mean"],
            "gen_mean": r["gen_mean"],
            "rate_per_s": r["rate_per_s"] or "inf",
            "concurrency": r["concurrency"],
            "num_prompts": r["num_prompts"],
            "metric": name or f"{r['metric']}_{r['statistic']}",
            "unit": UNITS.get(quantity or "", r["unit"]),
            "measured": r["value"],
            "check": CAVEATS.get(r["id"], "ok"),
            "first_sight": "",
            "first_sight_at": "",
            "now": _fmt(x.error) if x else "",
            "now_at": now_at if x else f"not predicted: {_not_predicted(r, why_not)}",
        }
        prev = old.get(r["id"])
        if prev and prev.get("first_sight"):
            row["first_sight"], row["first_sight_at"] = prev["first_sight"], prev["first_sight_at"]
        else:
            for errors, label in seeds:
                if r["id"] in errors:
                    row["first_sight"], row["first_sight_at"] = _fmt(errors[r["id"]]), label
                    break
            else:
                if x:
                    row["first_sight"], row["first_sight_at"] = _fmt(x.error), first_sight_at
        table.append(row)
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=DEV_COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(table)
    return table


def _not_predicted(r: dict, why_not: dict[str, str]) -> str:
    for key in (r["model"], r["hardware"]):
        if key in NOT_PREDICTED:
            return NOT_PREDICTED[key]
    return why_not.get(r["id"], "unknown")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("csv", type=Path, help="serving-dev.csv")
    p.add_argument("--out", type=Path, help="also write the report here")
    p.add_argument("--dev-set", type=Path, help="write/refresh the dev set (serving.csv) here")
    p.add_argument("--first-sight-at", help="label of this run's first sights (default: commit)")
    p.add_argument("--now-at", help="label of this run's 'now' (default: commit)")
    p.add_argument(
        "--seed",
        action="append",
        default=[],
        metavar="REPORT.md=LABEL",
        help="take first sights from an earlier run's printed report",
    )
    args = p.parse_args(argv)
    if not args.csv.is_file():
        sys.exit(f"error: {args.csv}: no such file")
    seeds = []
    for item in args.seed:
        path, sep, label = item.partition("=")
        if not sep or not Path(path).is_file():
            sys.exit(f"error: --seed {item!r}: expected an existing REPORT.md=LABEL")
        seeds.append((seed_errors(Path(path)), label))
    run = predict(args.csv)
    text = report(args.csv, run)
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text)
    if args.dev_set:
        commit = git_commit() or "(unknown commit)"
        write_dev_set(
            run, args.dev_set, args.now_at or commit, args.first_sight_at or commit, seeds
        )


if __name__ == "__main__":
    main()
