"""Derive the power model's terms (`roofline/power.py`) from the power evidence.

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
4. Activity a_s, a_att (`power.Activity`): least squares (relative) over the vLLM runs of S1 on
   H100 and A100 (PW001-PW016): each run's measured mean power against the model's, the run
   being prefill + G − 1 decode steps (`power.busy_terms` of the calculator's steps, as
   `economics.case_power_w` does) followed by the 1 s of idle the source's sampling window
   includes. This step uses the calculator's step times: re-run it after a change to them.
"""

from __future__ import annotations

import argparse
import csv
import re
from pathlib import Path

import numpy as np
import yaml

from roofline.catalog import load_engine, load_hardware, load_model
from roofline.memory import batch_fit
from roofline.operators import Step
from roofline.parallel import parallel_step_cost
from roofline.phases import estimate
from roofline.placement import Parallel
from roofline.power import Activity, busy_terms
from roofline.published import Row, precision_of, release_of
from roofline.stack import Stack

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


def activity_fit(
    rows: dict[str, dict], checks: list[dict[str, str]], static: dict, classes: dict
) -> tuple[float, float, list[tuple[str, float]]]:
    """(a_s, a_att, [(row, relative residual)]) of the least-squares fit (module docstring)."""
    A, y, ids = [], [], []
    for c in checks:
        r = rows[c["id"]]
        if c["use"] != "both" or r["metric"] != "power_w" or not r["source"].startswith("argonne"):
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
        terms = [
            float(getattr(pre, k) / pre.step_s * t_pre + getattr(dec, k) / dec.step_s * t_dec)
            for k in ("compute_s", "stream_s", "attention_s")
        ]
        tdp = tdp_of(row.hardware)
        p_s = static[row.hardware][0] if row.hardware in static else classes["datacenter"] * tdp
        p_d = tdp - p_s
        window = case.e2e_s + TAIL_S
        # P = (P_s·window + P_d·(C + a_s·S + a_att·A)) / window: linear in (a_s, a_att)
        A.append([p_d * terms[1] / window, p_d * terms[2] / window])
        y.append(float(r["value"]) - (p_s * window + p_d * terms[0]) / window)
        ids.append((c["id"], float(r["value"])))
    A_, y_ = np.array(A), np.array(y)
    w = 1 / np.array([v for _, v in ids])
    (a_s, a_att), *_ = np.linalg.lstsq(A_ * w[:, None], y_ * w, rcond=None)
    resid = (A_ @ np.array([a_s, a_att]) - y_) * w
    return float(a_s), float(a_att), [(i, float(e)) for (i, _), e in zip(ids, resid, strict=True)]


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
    for rid in (*IDLE_DEVICE, *H200_FIT, *COMPUTE_BOUND_AT_TDP, *AT_THE_LIMIT):
        assert use[rid] in ("terms", "both"), f"{rid} is not a terms row in the audit"

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
    a_s, a_att, resid = activity_fit(rows, checks, static, classes)
    a_s, a_att = round(a_s, 2), round(a_att, 2)
    print(
        f"activity: a_s {a_s}, a_att {a_att}; residuals "
        + ", ".join(f"{i} {100 * e:+.1f}%" for i, e in resid)
    )
    Activity(stream=a_s, attention=a_att, source="check")  # in range

    src = "shared/evidence/power/power-dev.csv via docs/evidence/power-row-checks.csv"
    data = {
        "source": f"written by benchmarks/derive/power_terms.py from {src}; do not edit by hand",
        "activity": {
            "stream": a_s,
            "attention": a_att,
            "rows": [i for i, _ in resid],
            "source": (
                "least squares (relative) of the mean power of S1's vLLM runs (argonne-lcf/"
                "LLM-Inference-Bench@4211f5d, H100 SXM and A100 40GB, Llama-2-7B and Llama-3-8B, "
                "batch 1-64, in=out=1024) against the calculator's prefill and decode steps and "
                "the 1 s idle tail of the source's window; residuals "
                f"{min(e for _, e in resid):+.1%} to {max(e for _, e in resid):+.1%}"
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
