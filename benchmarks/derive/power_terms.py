"""Derive the power model's terms (`roofline/calc/power.py`) from the power evidence.

    python benchmarks/derive/power_terms.py [../shared/evidence/power/power-dev.csv]

Reads the collected rows and their audit (`docs/evidence/power-row-checks.csv`; only rows whose
`use` is `terms` or `both` set a term) and writes `roofline/data/power.yaml`, byte-identical on
re-run. Printed: every figure with the rows behind it and the fit's residuals.

1. Static power per device: the median of its idle rows (a model loaded where the row says so).
2. Class rules: static as a share of TDP, the median over the measured devices of the class
   (datacenter: H100, H200, A100, MI300X, MI325X; workstation: RTX 3090, 5090, 6000 Ada).
   Dynamic = TDP − static for a datacenter part: compute-bound work reaches the TDP (H100
   prefill 689 W of 700, PW054; Splitwise prompt power = TDP on A100 and H100, PW057/PW060).
   Workstation boards sit on their limit in decode (RTX 3090 335-338 W of 350, RTX 6000 Ada
   262-282 W of 300 under vLLM): dynamic = (TDP − static) / a_s, so a weight-streaming step
   reaches the limit.
3. H200 dynamic power: least squares of power against DCGM sm_active over the 14 decode points of
   S6 (PW083-PW096, CUDA graphs and eager); its slope is the dynamic power, its intercept is
   printed beside the measured idle power (PW144).
4. Activity a_s (`power.Activity.stream`), from phase power on one device, not from a run:
   a decode step streams weights and KV, a prefill step is compute-bound, so with P_idle the
   static power, a_s = (P_decode − P_idle) / (P_prefill − P_idle) (module docstring of
   `roofline/calc/power.py`: b = 1 in prefill, ≈ a_s in a decode step whose time is its kernels').
   Splitwise's per-GPU phase parameters (S4, Patel et al. ISCA'24, measured on DGX-H100 and
   DGX-A100): H100 (380 − 75) / (700 − 75), A100 (250 − 63) / (400 − 63); a_s is their median,
   to 2 decimals. PW058/PW061 are audited `terms` (not rows to predict: no model, batch or
   lengths), the decode side of a phase ratio like PW057/PW060. Printed beside it, not
   used: S3's H100 batch-1 HF generate (PW054/PW055), an upper-side check (eager host gaps
   lower it, the prefill share in its window raises it).
5. Activity a_att: no power evidence isolates attention kernels from the rest of a step, so it
   cannot be derived; the value fitted at issue 39's first pass (least squares with a_s over
   S1's vLLM runs PW001-PW016, 0.89) is kept and flagged `fitted` in the data file. Printed,
   not written: the one-parameter refit of a_att over the same runs with the derived a_s (the
   run being prefill + G − 1 decode steps of the calculator, `power.busy_terms`, then the 1 s
   idle tail of S1's sampling window); it moves with the calculator's step times.
"""

from __future__ import annotations

import argparse
import csv
import re
from pathlib import Path

import numpy as np
import yaml

from roofline.calc.memory import batch_fit
from roofline.calc.parallel import parallel_step_cost
from roofline.calc.phases import estimate
from roofline.calc.placement import Parallel
from roofline.calc.power import Activity, busy_terms
from roofline.calc.stack import Stack
from roofline.serve.published import Row, precision_of, release_of
from roofline.spec.catalog import load_engine, load_hardware, load_model
from roofline.spec.operators import Step

REPO = Path(__file__).resolve().parents[2]
EVIDENCE = REPO.parent / "shared" / "evidence" / "power" / "power-dev.csv"
CHECKS = REPO / "docs" / "evidence" / "power-row-checks.csv"
OUT = REPO / "roofline" / "data" / "power.yaml"

#: The catalog device of each idle row (the collected file names devices in words).
IDLE_DEVICE = {
    "PW031": "a100-sxm-80gb",
    "PW056": "a100-sxm-80gb",
    "PW059": "h100-sxm",
    "PW143": "h100-sxm",
    "PW144": "h200",
    "PW145": "mi300x",
    "PW119": "mi325x",
    "PW049": "rtx-3090",
    "PW067": "rtx-5090",
    "PW040": "rtx-6000-ada",
}
#: TDP of a device without a spec whose idle row informs its class rule (the row's note).
TDP_NOT_IN_CATALOG = {"rtx-6000-ada": 300.0}
WORKSTATION = ("rtx-",)
H200_FIT = [f"PW{i:03d}" for i in range(83, 97)]
COMPUTE_BOUND_AT_TDP = ("PW054", "PW057", "PW060")
AT_THE_LIMIT = ("PW038", "PW041", "PW043", "PW045", "PW047", "PW050", "PW052")
TAIL_S = 1.0  # S1's sampling window runs 1 s past the generate call (README caveat)
#: Splitwise phase parameters (S4) by device: (idle, prompt, token) power rows.
PHASE_ROWS = {"h100-sxm": ("PW059", "PW060", "PW061"), "a100-sxm-80gb": ("PW056", "PW057", "PW058")}
#: Audited `drop` as rows to predict, used here as terms (item 4 of the docstring).
#: a_att as fitted at issue 39's first pass (item 5), kept and flagged `fitted`.
ATTENTION_FITTED = 0.89
FIT_ROWS = tuple(f"PW{i:03d}" for i in range(1, 17))


def tdp_of(device: str) -> float:
    if device in TDP_NOT_IN_CATALOG:
        return TDP_NOT_IN_CATALOG[device]
    tdp = load_hardware(device).tdp_w
    assert tdp is not None, device
    return tdp


def class_of(device: str) -> str:
    return "workstation" if device.startswith(WORKSTATION) else "datacenter"


def static_terms(rows: dict[str, dict]) -> dict[str, tuple[float, list[str]]]:
    by: dict[str, list[str]] = {}
    for rid, dev in sorted(IDLE_DEVICE.items()):
        assert rows[rid]["metric"] == "idle_power_w", rid
        by.setdefault(dev, []).append(rid)
    return {
        d: (float(np.median([float(rows[i]["value"]) for i in ids])), ids) for d, ids in by.items()
    }


def h200_fit(rows: dict[str, dict]) -> tuple[float, float, float]:
    """(intercept W, slope W, RMSE W) of power against sm_active."""
    x = np.array(
        [float(re.search(r"sm_active ([\d.]+)%", rows[i]["note"]).group(1)) / 100 for i in H200_FIT]
    )
    y = np.array([float(rows[i]["value"]) for i in H200_FIT])
    slope, intercept = np.polyfit(x, y, 1)
    rmse = float(np.sqrt(np.mean((intercept + slope * x - y) ** 2)))
    return float(intercept), float(slope), rmse


def _row(c: dict[str, str], r: dict[str, str]) -> Row:
    return Row(
        id=c["id"], model=c["model"], hardware=c["hardware"], weights=c["weights"], kv=c["kv"],
        batch=int(c["batch"]), prompt=int(c["prompt"]), gen=int(c["gen"]), tp=int(c["tp"]),
        metric=r["metric"], value=float(r["value"]), engine=c["engine"], burst=c["burst"] == "1",
        released=c["released"],
    )  # fmt: skip


def stream_activity(rows: dict[str, dict]) -> tuple[float, list[str], list[str]]:
    """(a_s, rows, the arithmetic) from the phase rows (docstring item 4)."""
    ratios, said, used = [], [], []
    for dev, (idle, prompt, token) in PHASE_ROWS.items():
        assert rows[idle]["phase"] == "idle" and rows[prompt]["phase"] == "prefill", dev
        assert rows[token]["phase"] == "decode", dev
        p_i, p_p, p_t = (float(rows[i]["value"]) for i in (idle, prompt, token))
        ratios.append((p_t - p_i) / (p_p - p_i))
        said.append(
            f"{dev} ({p_t:g} - {p_i:g}) / ({p_p:g} - {p_i:g}) = {ratios[-1]:.3f} "
            f"({token}, {idle}, {prompt})"
        )
        used += [idle, prompt, token]
    a_s = round(float(np.median(ratios)), 2)
    said.append(f"median {float(np.median(ratios)):.4f} -> {a_s}")
    return a_s, used, said


def s3_check(rows: dict[str, dict], static_h100: float) -> str:
    pre, gen = float(rows["PW054"]["value"]), float(rows["PW055"]["value"])
    r = (gen - static_h100) / (pre - static_h100)
    return (
        f"S3 check (not used): H100 HF batch-1 generate ({gen:g} - {static_h100:g}) / "
        f"({pre:g} - {static_h100:g}) = {r:.3f}"
    )


def attention_refit(
    rows: dict[str, dict], checks: list[dict[str, str]], static: dict, classes: dict, a_s: float
) -> tuple[float, list[tuple[str, float]]]:
    """(a_att, [(row, relative residual)]): least squares (relative) of a_att alone over S1's
    vLLM runs, a_s held at its derived value (docstring item 5; printed, not written)."""
    A, y, ids = [], [], []
    for c in checks:
        r = rows[c["id"]]
        if c["id"] not in FIT_ROWS or r["metric"] != "power_w":
            continue
        row = _row(c, r)
        m, hw = load_model(row.model), load_hardware(row.hardware)
        eng = release_of(row, load_engine(row.engine))
        stack = Stack.resolve(m, hw, precision_of(row, eng), "achievable", eng, Parallel(tp=row.tp))
        B = min(row.batch, max(batch_fit(m, stack, row.prompt + row.gen, row.prompt).runnable, 1))
        case = estimate(m, stack, [B], row.prompt, row.gen).cases[0]
        pre = busy_terms(parallel_step_cost(m, stack, Step(B, row.prompt, 0)))
        dec = busy_terms(parallel_step_cost(m, stack, Step(B, 1, row.prompt + row.gen // 2)))
        t_pre, t_dec = case.ttft_s, case.e2e_s - case.ttft_s
        # busy-seconds of the run by kind: the step's share of each, over the phase's time
        c_, s_, a_ = (
            float(getattr(pre, k) / pre.step_s * t_pre + getattr(dec, k) / dec.step_s * t_dec)
            for k in ("compute_s", "stream_s", "attention_s")
        )
        tdp = tdp_of(row.hardware)
        p_s = static[row.hardware][0] if row.hardware in static else classes["datacenter"] * tdp
        p_d = tdp - p_s
        window = case.e2e_s + TAIL_S
        # P = (P_s·window + P_d·(C + a_s·S + a_att·A)) / window: linear in a_att
        A.append(p_d * a_ / window)
        y.append(float(r["value"]) - (p_s * window + p_d * (c_ + a_s * s_)) / window)
        ids.append((c["id"], float(r["value"])))
    A_, y_ = np.array(A), np.array(y)
    w = 1 / np.array([v for _, v in ids])
    a_att = float(np.sum(A_ * w * y_ * w) / np.sum((A_ * w) ** 2))
    resid = (A_ * a_att - y_) * w
    return a_att, [(i, float(e)) for (i, _), e in zip(ids, resid, strict=True)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("evidence", nargs="?", type=Path, default=EVIDENCE)
    ap.add_argument("--checks", type=Path, default=CHECKS)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    with args.evidence.open(encoding="utf-8") as f:
        rows = {r["id"]: r for r in csv.DictReader(f)}
    with args.checks.open(encoding="utf-8") as f:
        checks = list(csv.DictReader(f))
    use = {c["id"]: c["use"] for c in checks}
    for rid in (*IDLE_DEVICE, *H200_FIT, *COMPUTE_BOUND_AT_TDP, *AT_THE_LIMIT, *FIT_ROWS):
        assert use[rid] in ("terms", "both"), f"{rid} is not a terms row in the audit"
    for rid in (i for ids in PHASE_ROWS.values() for i in ids):
        assert use[rid] in ("terms", "both"), f"{rid}: audit says {use[rid]}"

    static = static_terms(rows)
    shares: dict[str, list[tuple[str, float]]] = {}
    for dev, (w, _) in static.items():
        shares.setdefault(class_of(dev), []).append((dev, w / tdp_of(dev)))
    classes = {k: round(float(np.median([s for _, s in v])), 3) for k, v in shares.items()}
    for k, v in shares.items():
        print(
            f"{k}: static/TDP "
            + ", ".join(f"{d} {s:.3f}" for d, s in v)
            + f" -> median {classes[k]}"
        )
    b0, b1, rmse = h200_fit(rows)
    print(
        f"h200: P = {b0:.1f} W + {b1:.1f} W x sm_active (RMSE {rmse:.1f} W, "
        f"{len(H200_FIT)} points); idle with a model {static['h200'][0]:g} W"
    )
    a_s, phase_rows, arithmetic = stream_activity(rows)
    print("activity a_s: " + "; ".join(arithmetic))
    print(s3_check(rows, static["h100-sxm"][0]))
    refit, resid = attention_refit(rows, checks, static, classes, a_s)
    print(
        f"activity a_att: kept {ATTENTION_FITTED} (fitted, flagged); refit with a_s {a_s}: "
        f"{refit:.3f}, residuals " + ", ".join(f"{i} {100 * e:+.1f}%" for i, e in resid)
    )
    Activity(stream=a_s, attention=ATTENTION_FITTED, source="check")  # in range

    src = "shared/evidence/power/power-dev.csv via docs/evidence/power-row-checks.csv"
    data = {
        "source": f"written by benchmarks/derive/power_terms.py from {src}; do not edit by hand",
        "activity": {
            "stream": a_s,
            "attention": ATTENTION_FITTED,
            "rows": phase_rows,
            "fitted": ["attention"],
            "fit_rows": list(FIT_ROWS),
            "source": (
                "stream (a_s): decode over prefill power above idle on one device, Splitwise's "
                "per-GPU phase parameters (S4, Mutinifni/splitwise-sim@3780880 configs/"
                "power_model/constant.yaml): "
                + "; ".join(arithmetic)
                + ". attention (a_att): FITTED, not derived - no power evidence isolates "
                "attention kernels; least squares with a_s over S1's vLLM runs (argonne-lcf/"
                "LLM-Inference-Bench@4211f5d, H100 SXM and A100 40GB, Llama-2-7B and "
                "Llama-3-8B, batch 1-64, in=out=1024) at issue 39's first pass, kept"
            ),
        },
        "classes": {
            "datacenter": {
                "static_fraction_of_tdp": classes["datacenter"],
                "dynamic": "tdp-minus-static",
                "rows": sorted(
                    i for d, (_, ids) in static.items() if class_of(d) == "datacenter" for i in ids
                )
                + list(COMPUTE_BOUND_AT_TDP),
                "source": (
                    "static: median idle power over TDP of H100 SXM, H200, A100 80GB, MI300X, "
                    "MI325X; dynamic: compute-bound work reaches the TDP (H100 prefill 689 W of "
                    "700, PW054; Splitwise prompt power = TDP, PW057, PW060)"
                ),
            },
            "workstation": {
                "static_fraction_of_tdp": classes["workstation"],
                "dynamic": "tdp-at-stream",
                "rows": sorted(
                    i for d, (_, ids) in static.items() if class_of(d) == "workstation" for i in ids
                )
                + list(AT_THE_LIMIT),
                "source": (
                    "static: median idle power over TDP of RTX 3090, RTX 5090, RTX 6000 Ada; "
                    "dynamic: the board limit binds in decode (RTX 3090 335-338 W of 350, RTX 6000 "
                    "Ada 262-282 W of 300 under 8 vLLM clients), so a weight-streaming step "
                    "reaches it: (TDP - static) / a_s"
                ),
            },
        },
        "devices": {},
    }
    for dev, (w, ids) in sorted(static.items()):
        if dev in TDP_NOT_IN_CATALOG:
            continue  # no spec: its row informs its class rule only
        entry = {"static_w": round(w, 1), "static_rows": ids}
        what = "median of its idle rows" if len(ids) > 1 else "its idle row"
        if dev == "h200":
            entry |= {"dynamic_w": round(b1, 1), "dynamic_rows": [H200_FIT[0], H200_FIT[-1]]}
            what += (
                f"; dynamic: slope of power against DCGM sm_active over S6's 14 decode points "
                f"(intercept {b0:.0f} W, RMSE {rmse:.0f} W)"
            )
        entry["source"] = f"static: {what}"
        data["devices"][dev] = entry
    text = (
        "# "
        + data.pop("source")
        + "\n"
        + yaml.safe_dump(
            {"source": src, **data},
            sort_keys=False,
            width=100,
            allow_unicode=True,
            default_flow_style=None,
        )
    )
    args.out.write_text(text, encoding="utf-8")
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
