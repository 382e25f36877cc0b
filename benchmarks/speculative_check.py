"""First sight of speculative serving against published runs with and without speculation.

    python benchmarks/speculative_check.py SPECULATIVE_CSV [--out FILE]

SPECULATIVE_CSV is the project's evidence `serving/speculative.csv`: one metric per row, the run
with and without speculation (`baseline_value`, `spec_value`, in SI units) and the published
`speedup` (baseline/spec for latencies, spec/baseline for throughputs). For every row whose
target, drafter, hardware, engine, load and metric the catalog and the simulator can express,
both runs are simulated as `roofline serve` would run them (the engine's own scheduler, the
row's client concurrency or all requests at once, ShareGPT's length spread at the row's means
via `serve.workload.burst_of_profile`), the speculative one with `serve.speculation`: K drafted
tokens per step by the row's drafter (`--eagle`, `--mtp`), acceptance from the row's published
accept length where it gives one, else the simulator's default α (`ServeConfig.acceptance`),
never fitted. The predicted speed-up of the row's metric is printed beside the published one
with error = predicted / published − 1, and the median |error| overall, by engine and by
client concurrency (≤ 8 against large). Rows that cannot be expressed are listed with every
reason. Nothing in the model is changed; the settings the engines apply by themselves are read
from their sources, each named below.
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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import roofline
from roofline.calc.placement import Parallel
from roofline.calc.stack import Stack
from roofline.errors import RooflineError
from roofline.serve.config import ServeConfig
from roofline.serve.metrics import Summary
from roofline.serve.policy import engine_default, policy
from roofline.serve.simulate import build_deployment, simulate
from roofline.serve.speculation import Speculation
from roofline.serve.validation import _predict  # the metric as `validate --serving` takes it
from roofline.serve.workload import Workload, burst_of_profile
from roofline.spec.catalog import load_engine, load_hardware, load_model, model_catalog
from roofline.spec.precision import Precision, released
from roofline.studies.speculative import Drafter, expected_tokens_per_step

#: the simulator's default per-token acceptance (`serve --acceptance`), used where a row
#: publishes none
DEFAULT_ALPHA: float = ServeConfig.__dataclass_fields__["acceptance"].default
#: the band shown beside a prediction made at the default α (not a fit: how much it matters)
ALPHA_BAND = (0.5, 0.9)
#: the CSV's metric and statistic -> (the simulator's metric, lower is better)
METRICS = {
    ("tpot_s", "median"): ("tpot_p50", True),
    ("itl_s", "median"): ("itl_p50", True),
    ("ttft_s", "median"): ("ttft_p50", True),
    ("output_tokens_per_s", "mean"): ("output_throughput", False),
}
#: SGLang caps the running requests at 48 when it speculates (EAGLE, EAGLE3, MTP through
#: EAGLE) and --max-running-requests is not given: sglang==0.5.3.post3, 0.5.6.post2 and
#: 0.5.10rc0 (PyPI wheels) sglang/srt/server_args.py ("Max running requests is reset to 48 for
#: speculative decoding"). vLLM has no such cap.
SGLANG_SPEC_MAX_RUNNING = 48
#: SGLang's own EAGLE settings when none are given (auto_choose_speculative_params in
#: sglang==0.5.3.post3 server_args.py: (num_steps, topk, num_draft_tokens) = (5, 4, 8) for every
#: architecture but Llama, DeepSeek, gpt-oss, Bailing and Grok; Qwen3ForCausalLM takes it)
SGLANG_AUTO = {"qwen3-8b": (5, 4, 8)}
#: targets missing from the catalog whose text decoder a catalog model shares: used only to say
#: what else stops a row, never to predict it (Kimi-K2.5 is Kimi K2's decoder, DeepSeek-V3 kind)
SAME_DECODER = {"kimi-k2.5": "kimi-k2"}


@dataclass(frozen=True)
class Side:
    """One of the two runs of a row: what the simulator is told."""

    model: str
    hardware: str
    precision: Precision
    engine: str  # catalog name (with @version where the catalog has releases)
    tp: int
    workload: tuple  # ("sharegpt", n, prompt_mean, gen_mean) or ("fixed", n, prompt, gen)
    concurrency: int | None
    k: int | None = None  # None: no speculation
    drafter: str | None = None  # "eagle" or "mtp"
    alpha: float | None = None
    max_seqs: int | None = None


@dataclass
class Case:
    row: dict
    base: Side | None = None
    spec: Side | None = None
    metric: str = ""
    lower_better: bool = True
    alpha_source: str = ""  # "published accept length 3.93" or "default"
    why_not: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    confounded: bool = False


def _num(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


def alpha_of_accept_length(e: float, k: int) -> float:
    """Per-token acceptance α at which a chain of K drafts yields E tokens per step:
    E = (1 − α^(K+1)) / (1 − α), solved by bisection (E rises with α)."""
    if not 1 <= e <= k + 1:
        raise ValueError(f"accept length {e} outside 1..{k + 1}")
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if float(expected_tokens_per_step(mid, k)) < e else (lo, mid)
    return hi


def split_sides(value: str) -> tuple[str, str]:
    """'a baseline / b spec' or 'a / b' -> (a, b); a plain value is both."""
    if " / " in value:
        a, b = value.split(" / ", 1)
        return a.replace("baseline", "").strip(), b.replace("spec", "").strip()
    return value.strip(), value.strip()


def precision_for(weights: str, kv: str, model) -> Precision:
    """The row's formats: the model as released when the row names its release format (the
    KV from the row), else W8A8 fp8 or bf16 (as serving_dev_check reads them)."""
    base = released(model)
    kv = kv if kv in ("bf16", "fp8") else base.kv
    if weights.split(",")[0] == base.weights.split(",")[0]:
        return Precision(base.weights, base.activations, kv)
    if weights in ("bf16", "fp8"):
        return Precision(weights, weights, kv)
    raise RooflineError(f"weights '{weights}' not mapped")


def engine_name(engine: str, version: str) -> str:
    """Catalog engine for the row's engine and version ('vLLM 0.11.0' -> vllm@0.11.0)."""
    e = engine.split()[0].lower()
    v = re.search(r"\d+\.\d+(?:\.\d+)?", version)
    if e == "vllm" and v:
        return f"vllm@{v.group(0)}"
    return e


def sglang_chain(params: str, model: str) -> tuple[int, str]:
    """K of an SGLang EAGLE run (the depth of its draft tree) and how it was read."""
    if "defaults" in params:
        steps, topk, draft = SGLANG_AUTO[model]
        how = f"SGLang defaults for {model}: steps {steps}, topk {topk}, draft tokens {draft}"
    else:
        m = re.search(r"num-steps (\d+)", params)
        t = re.search(r"topk (\d+)", params)
        d = re.search(r"num-draft-tokens (\d+)", params)
        if not (m and t and d):
            raise RooflineError(f"SGLang speculative settings not read from '{params}'")
        steps, topk, draft = int(m.group(1)), int(t.group(1)), int(d.group(1))
        how = f"steps {steps}, topk {topk}, draft tokens {draft}"
    if topk == 1 and draft != steps + 1:
        how += f" (SGLang sets draft tokens to steps + 1 = {steps + 1} at topk 1)"
        draft = steps + 1
    if topk > 1:
        how += f"; a tree verifying {draft} positions, modelled as a chain of K = {steps}"
    return steps, how


def workload_of(side: Side) -> Workload:
    kind, n, p, g = side.workload
    if kind == "sharegpt":
        return burst_of_profile("sharegpt", n, p, g)
    return Workload(
        np.zeros(n), np.full(n, p), np.full(n, g), np.full(n, -1), np.zeros(n, np.int64)
    )


#: what the predictions depend on: the package and its specs
SOURCES = ("roofline", "engine_specs", "hardware_specs", "model_specs")

_CACHE: dict[Side, dict[str, float]] = {}


def simulate_side(side: Side) -> dict[str, float]:
    """The side's metrics as `validate --serving` predicts them (all requests sent at once,
    at most `concurrency` in flight)."""
    if side in _CACHE:
        return _CACHE[side]
    m, hw, eng = load_model(side.model), load_hardware(side.hardware), load_engine(side.engine)
    stack = Stack.resolve(m, hw, side.precision, "achievable", eng, Parallel(tp=side.tp))
    p = policy(engine_default(stack.engine), stack.engine).with_overrides(max_seqs=side.max_seqs)
    p = p.on(stack.memory)
    spec = None
    if side.k is not None:
        drafter = Drafter.eagle_of(m) if side.drafter == "eagle" else Drafter.mtp_of(m)
        spec = Speculation(side.k, side.alpha, drafter)
    w = workload_of(side)
    w.check(m.max_context, m.name)
    result = simulate(
        w, p, build_deployment(m, stack, p, 1, speculation=spec), max_concurrency=side.concurrency
    )
    s = Summary(result, math.inf, math.inf)
    out = {k: float(_predict(s, k)) for k, _ in METRICS.values()}
    out["max_seqs"] = p.max_seqs
    _CACHE[side] = out
    return out


def build_case(r: dict) -> Case:
    c = Case(r)
    why = c.why_not
    # target and hardware
    try:
        model = load_model(r["model"])
    except RooflineError:
        model = None
        why.append(f"target '{r['model']}' is not in the catalog")
        if r["model"] in SAME_DECODER and r["spec_method"].startswith("EAGLE"):
            proxy = load_model(SAME_DECODER[r["model"]])
            try:
                Drafter.eagle_of(proxy)
            except RooflineError:
                same_vocab = [
                    n
                    for n in model_catalog().names()
                    if n != proxy.name and load_model(n).vocab_size == proxy.vocab_size
                ]
                why.append(
                    f"its decoder is {proxy.name}'s, a MoE, and the catalog refuses an EAGLE head "
                    "on a MoE target (`speculative.eagle_module`); draft models with its "
                    f"{proxy.vocab_size:,}-token vocabulary: {', '.join(same_vocab) or 'none'}; "
                    f"MTP layers in {proxy.name}'s spec: {proxy.mtp_layers}"
                )
    try:
        load_hardware(r["hardware"])
    except RooflineError:
        why.append(f"hardware '{r['hardware']}' is not in the catalog (SKU not stated)")
    # load
    prompt, gens = _num(r["prompt_mean"]), r["gen_mean"].split(" / ")
    if prompt is None or _num(gens[0]) is None:
        why.append("prompt and output lengths not stated")
    rate = r["rate_per_s"]
    if rate != "inf" and _num(rate) is None:
        why.append(f"request rate '{rate}'")
    if not r["num_prompts"]:
        why.append("request count not stated")
    metric = METRICS.get((r["metric"], r["statistic"]))
    if metric is None:
        why.append(f"metric '{r['metric']}' names no latency or throughput the simulator gives")
    else:
        c.metric, c.lower_better = metric
    # drafter, K, acceptance
    method, params = r["spec_method"], r["spec_params"]
    engines = split_sides(r["engine"])
    versions = split_sides(r["engine_version"])
    weights = split_sides(r["weights"])
    k = drafter = None
    if method.startswith("EAGLE"):
        drafter = "eagle"
        if model is not None:
            try:
                Drafter.eagle_of(model)
            except RooflineError:
                why.append(f"an EAGLE head on {model.name} (MoE) is refused by the catalog")
    elif method.startswith("MTP"):
        drafter = "mtp"
        if model is not None and not model.mtp_layers:
            why.append(f"{model.name} has no MTP module in the catalog")
    elif method.startswith("draft model"):
        try:
            load_model(r["draft_model"])
        except RooflineError:
            why.append(f"draft model '{r['draft_model']}' is not in the catalog")
    elif method.startswith("n-gram"):
        why.append("n-gram (prompt lookup) drafting has no drafter in the simulator")
    else:
        why.append("speculation method not stated")
    if "not stated" in params:
        why.append("K (draft tokens per step) not stated")
    elif drafter is not None and engines[1] == "sglang":
        try:
            k, how = sglang_chain(params, r["model"])
            c.notes.append(how)
        except (RooflineError, KeyError) as e:
            why.append(str(e))
    elif drafter is not None:
        m = re.search(r'"num_speculative_tokens":\s*(\d+)', params)
        if m:
            k = int(m.group(1))
            c.notes.append(f"num_speculative_tokens {k}")
        else:
            why.append(f"K not read from '{params}'")
    acc = re.search(r"accept length ([\d.]+)", r["acceptance"])
    alpha = DEFAULT_ALPHA
    if acc and k is not None:
        alpha = alpha_of_accept_length(float(acc.group(1)), k)
        c.alpha_source = f"published accept length {acc.group(1)} → α {alpha:.3f}"
    else:
        c.alpha_source = f"not published: default α {DEFAULT_ALPHA:g}"
    if why or model is None or metric is None or k is None:
        return c
    c.confounded = engines[0] != engines[1] or weights[0] != weights[1]
    tp = int(r["tp"])
    n = int(r["num_prompts"])
    conc = int(r["concurrency"]) if r["concurrency"] else None
    g_base, g_spec = float(gens[0]), float(gens[-1])
    kind = "sharegpt" if "sharegpt" in r["dataset"].lower() else "fixed"
    sides = []
    for i, g in ((0, g_base), (1, g_spec)):
        eng = engine_name(engines[i], versions[i])
        try:
            prec = precision_for(weights[i], r["kv"], model)
        except RooflineError as e:
            why.append(str(e))
            return c
        sides.append(
            Side(
                model.name,
                r["hardware"],
                prec,
                eng,
                tp,
                (kind, n, prompt, g) if kind == "sharegpt" else (kind, n, int(prompt), int(g)),
                conc,
            )
        )
    c.base = sides[0]
    cap = SGLANG_SPEC_MAX_RUNNING if engines[1] == "sglang" else None
    c.spec = Side(
        **{**sides[1].__dict__, "k": k, "drafter": drafter, "alpha": alpha, "max_seqs": cap}
    )
    return c


def with_alpha(side: Side, alpha: float) -> Side:
    return Side(**{**side.__dict__, "alpha": alpha})


def speedup(c: Case, base: dict, spec: dict) -> float:
    b, s = base[c.metric], spec[c.metric]
    return b / s if c.lower_better else s / b


def group_of(c: Case) -> tuple[str, str]:
    engines = split_sides(c.row["engine"])
    engine = engines[0] if engines[0] == engines[1] else f"{engines[0]}→{engines[1]} (confounded)"
    conc = c.row["concurrency"]
    load = "concurrency ≤ 8" if conc and int(conc) <= 8 else "large (≥ 40 or all at once)"
    return engine, load


def commit() -> str:
    """Where the `roofline` that ran comes from: its checkout's commit, and whether the model or
    the specs there differ from it; for an exported tree (`git archive`), its COMMIT file."""
    root = Path(roofline.__file__).resolve().parent.parent

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD")
    if head:
        dirty = git("status", "--porcelain", "--", *SOURCES)
        return f"commit {head}" + (" with uncommitted changes to the model" if dirty else "")
    stamp = root / "COMMIT"
    label = stamp.read_text().strip() if stamp.is_file() else "unknown"
    return f"an export of commit {label} ({root})"


def fmt(x: float, unit: str) -> str:
    if unit == "s":
        return f"{x * 1e3:.4g} ms"
    return f"{x:.4g}"


def kimi_bounds(rows: list[dict]) -> list[str]:
    """Not predictions: Kimi-K2.5 (as kimi-k2, its text decoder, where the catalog lacks it), the
    EAGLE-3 drafter as one head costing 0.01 or 1 of a target layer per pass (the catalog has no
    EAGLE head for MoE targets), W4A8 = int4 weights, int8 activations, at the published accept
    length."""
    out = []
    for r in rows:
        if not r["model"].startswith("kimi") or (r["metric"], r["statistic"]) not in METRICS:
            continue
        metric, lower = METRICS[(r["metric"], r["statistic"])]
        try:
            target = load_model(r["model"]).name
        except RooflineError:
            target = SAME_DECODER[r["model"]]
        k = 3  # num-steps 3, topk 1: a chain of three drafts
        alpha = alpha_of_accept_length(
            float(re.search(r"accept length ([\d.]+)", r["acceptance"]).group(1)), k
        )
        vals = []
        for f in (0.01, 1.0):
            m, hw, eng = load_model(target), load_hardware(r["hardware"]), load_engine("sglang")
            stack = Stack.resolve(
                m,
                hw,
                Precision("int4", "int8", "bf16"),
                "achievable",
                eng,
                Parallel(tp=int(r["tp"])),
            )
            p = policy(engine_default(stack.engine), stack.engine).on(stack.memory)
            n, conc = int(r["num_prompts"]), int(r["concurrency"])
            w = Workload(
                np.zeros(n),
                np.full(n, int(float(r["prompt_mean"]))),
                np.full(n, int(float(r["gen_mean"]))),
                np.full(n, -1),
                np.zeros(n, np.int64),
            )
            res = {}
            for name, spec in (
                ("base", None),
                ("spec", Speculation(k, alpha, Drafter(head_layer_fraction=f))),
            ):
                sim = simulate(
                    w, p, build_deployment(m, stack, p, 1, speculation=spec), max_concurrency=conc
                )
                res[name] = float(_predict(Summary(sim, math.inf, math.inf), metric))
            vals.append(res["base"] / res["spec"] if lower else res["spec"] / res["base"])
        pub = float(r["speedup"])
        out.append(
            f"| {r['id']} | {r['concurrency']} | {metric} | α {alpha:.3f} (K 3) | {pub:.3g} | "
            f"{vals[0]:.3g} / {vals[1]:.3g} | {vals[0] / pub - 1:+.0%} / {vals[1] / pub - 1:+.0%} |"
        )
    return out


def report(csv_path: Path) -> str:
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    cases = [build_case(r) for r in rows]
    done = [c for c in cases if c.base is not None]
    out = [
        f"{len(rows)} rows; {len(done)} predicted, {len(rows) - len(done)} not expressible; "
        f"{commit()}; default α {DEFAULT_ALPHA:g} where a row publishes no acceptance.",
        "",
        "Speed-up = baseline/spec for latencies, spec/baseline for throughput; error = "
        "predicted/published − 1. `pub` and `pred` give the two runs' values (baseline → spec).",
        "",
        "| id | engine | conc | metric | drafter, K | α from | pub base → spec | "
        "pred base → spec | pub speed-up | pred speed-up | error | pred at α "
        f"{ALPHA_BAND[0]:g} … {ALPHA_BAND[1]:g} |",
        "|---|---|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    errors: list[tuple[Case, float]] = []
    extra: list[str] = []
    for c in done:
        r = c.row
        base, spec = simulate_side(c.base), simulate_side(c.spec)
        pred = speedup(c, base, spec)
        pub = float(r["speedup"])
        err = pred / pub - 1
        errors.append((c, err))
        unit = "s" if c.lower_better else ""
        band = "—"
        if c.alpha_source.startswith("not published"):
            lo, hi = (speedup(c, base, simulate_side(with_alpha(c.spec, a))) for a in ALPHA_BAND)
            band = f"{lo:.3g} … {hi:.3g}"
        engines = split_sides(r["engine"])
        eng = engines[0] if engines[0] == engines[1] else f"{engines[0]}→{engines[1]}"
        cap = f", ≤{c.spec.max_seqs} running" if c.spec.max_seqs else ""
        out.append(
            f"| {r['id']} | {eng} | {r['concurrency'] or 'all ' + r['num_prompts']} | "
            f"{c.metric} | {c.spec.drafter} K={c.spec.k}{cap} | "
            f"{'pub' if c.alpha_source.startswith('published') else 'default'} "
            f"{c.spec.alpha:.3g} | {fmt(float(r['baseline_value']), unit)} → "
            f"{fmt(float(r['spec_value']), unit)} | {fmt(base[c.metric], unit)} → "
            f"{fmt(spec[c.metric], unit)} | {pub:.3g} | {pred:.3g} | {err:+.0%} | {band} |"
        )
        if c.spec.max_seqs and (c.spec.concurrency is None or c.spec.concurrency > c.spec.max_seqs):
            free = simulate_side(Side(**{**c.spec.__dict__, "max_seqs": None}))
            p2 = speedup(c, base, free)
            extra.append(
                f"| {r['id']} | {c.metric} | {pub:.3g} | {pred:.3g} ({err:+.0%}) | "
                f"{p2:.3g} ({p2 / pub - 1:+.0%}), ≤{free['max_seqs']:g} running | "
                f"{fmt(free[c.metric], unit)} |"
            )

    def medians(title: str, key) -> list[str]:
        groups: dict[str, list[float]] = defaultdict(list)
        for c, e in errors:
            groups[key(c)].append(abs(e))
        lines = ["", f"| {title} | rows | median abs error |", "|---|---:|---:|"]
        lines += [
            f"| {g} | {len(v)} | {statistics.median(v):.0%} |" for g, v in sorted(groups.items())
        ]
        return lines

    all_abs = [abs(e) for _, e in errors]
    clean = [abs(e) for c, e in errors if not c.confounded]
    out += ["", "Median |error| of the predicted speed-ups:", ""]
    out += ["| set | rows | median abs error |", "|---|---:|---:|"]
    if all_abs:
        out.append(f"| all predicted | {len(all_abs)} | {statistics.median(all_abs):.0%} |")
    if clean:
        out.append(
            f"| without the confounded sp007, sp008 | {len(clean)} | "
            f"{statistics.median(clean):.0%} |"
        )
    out += medians("engine", lambda c: group_of(c)[0])
    out += medians("client concurrency", lambda c: group_of(c)[1])
    out += medians("metric", lambda c: c.metric)
    if extra:
        out += [
            "",
            f"SGLang's cap of {SGLANG_SPEC_MAX_RUNNING} running requests under speculation "
            "(applied above) against the simulator's own batch cap:",
            "",
            "| id | metric | published | predicted with the cap | predicted without it | "
            "spec value without it |",
            "|---|---|---:|---:|---:|---:|",
            *extra,
        ]
    out += ["", "How each predicted row's speculation was read:", ""]
    out += [f"- {c.row['id']}: {'; '.join(c.notes)}; α {c.alpha_source}" for c in done]
    out += ["", "Not expressible:", ""]
    out += [
        f"- {c.row['id']} ({c.row['model']}, {c.row['spec_method']}): {'; '.join(c.why_not)}"
        for c in cases
        if c.base is None
    ]
    bounds = kimi_bounds(rows)
    if bounds:
        out += [
            "",
            "Not predictions, outside every median: Kimi-K2.5 rows (kimi-k2, the same text "
            "decoder, standing in where the catalog lacks it), int4 weights and int8 "
            "activations, and the EAGLE-3 drafter as one head per draft costing 0.01 or 1 of a "
            "target layer:",
            "",
            "| id | conc | metric | acceptance | published | head 0.01 / 1 | error |",
            "|---|---|---|---|---:|---:|---:|",
            *bounds,
        ]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("csv", type=Path, help="speculative.csv")
    p.add_argument("--out", type=Path, help="also write the report here")
    args = p.parse_args(argv)
    text = report(args.csv)
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
