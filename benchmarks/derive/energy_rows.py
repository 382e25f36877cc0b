"""Turn the checked power measurements into `validate --published` rows of their own data set.

    python benchmarks/derive/energy_rows.py [../shared/evidence/power/power-dev.csv]

Reads the collected power rows and their audit (`docs/evidence/power-row-checks.csv`: one verdict
per row, `use` = check, both, terms or drop, and for a row to predict the catalog model,
device, formats, batch, lengths, GPUs and engine it ran), and writes the rows to predict,
`power_w` and `joules_per_output_token` only, to `roofline/data/published-energy.csv` in the
columns (and CRLF line endings) of `roofline/data/published.csv`:

    roofline validate --published roofline/data/published-energy.csv

`first_sight`: the signed error of the row's prediction by the code as it is when the row first
enters the set, `first_sight_at` that commit; a row already in the file keeps the first sight it
has, so re-running after a model change never rewrites it. A `both` row also sets a term of the
power model (`benchmarks/derive/power_terms.py`); its `first_sight_at` says so, and the
accuracy report counts it in-sample.

    python benchmarks/derive/energy_rows.py --write-residuals

writes the rows' residuals against the model as it is now to `roofline/data/energy-residuals.csv`
(the columns of `roofline/data/residuals.csv`), the evidence of the power and energy bands of
`estimate` (`roofline.calc.intervals`, "energy"); refresh it after a change to the model.

    python benchmarks/derive/energy_rows.py --explain

writes nothing: it prints, per row, whether its error is the power's or the time's (a markdown
table for docs/measurements/energy-first-sight.md). A J-per-output-token row is P · n / (tok/s),
so 1 + e_J = (1 + e_P)(1 + e_t): e_P from the same run's power row, e_t = (1 + e_J) / (1 + e_P)
− 1 the time per output token's. A power row whose source states the run's latency (S1: its
mean is over the generate call plus 1 s of idle) gets the predicted E2E against it and the
prediction over the source's own window, (P · E2E + P_s · 1 s) / (E2E + 1 s).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import re
import subprocess
from pathlib import Path

from roofline.calc.intervals import Residual, energy_path, write_residuals
from roofline.calc.power import power_terms
from roofline.serve.published import ENERGY_METRICS, Prediction, load_rows, predict, predict_all
from roofline.spec.catalog import load_hardware

REPO = Path(__file__).resolve().parents[2]
EVIDENCE = REPO.parent / "shared" / "evidence" / "power" / "power-dev.csv"
CHECKS = REPO / "docs" / "evidence" / "power-row-checks.csv"
OUT = REPO / "roofline" / "data" / "published-energy.csv"
# the columns of the time rows' data set, so both files read alike (`roofline.serve.published`)
with (REPO / "roofline" / "data" / "published.csv").open(newline="", encoding="utf-8") as _f:
    COLUMNS = next(csv.reader(_f))
IN_SAMPLE = "; a term of the power model is fitted on it (in-sample since)"


def rows_to_predict(evidence: Path, checks: Path) -> list[dict[str, str]]:
    with evidence.open(encoding="utf-8") as f:
        measured = {r["id"]: r for r in csv.DictReader(f)}
    with checks.open(encoding="utf-8") as f:
        audit = list(csv.DictReader(f))
    out = []
    for c in audit:
        r = measured[c["id"]]
        if c["use"] not in ("check", "both") or r["metric"] not in ENERGY_METRICS:
            continue
        out.append(
            {
                "id": c["id"],
                **{k: c[k] for k in ("model", "hardware", "weights", "kv", "batch")},
                **{k: c[k] for k in ("prompt", "gen", "tp", "engine", "confidence")},
                "metric": r["metric"],
                "value": r["value"],
                "source": r["source"],
                "note": f"{c['reason']}. Collected: {r['note']}",
                "burst": "1" if c["burst"] == "1" else "",
                "released": c["released"],
                "use": c["use"],
            }
        )
    return out


def energy_residuals(preds: list[Prediction]) -> list[Residual]:
    """The predicted measured-power rows as `intervals.Residual`s, classed as the time rows
    are (`roofline.serve.published.residuals`, which leaves these rows out)."""
    return [
        Residual(
            id=p.row.id,
            source=p.row.source,
            metric=p.row.metric,
            engine=(p.engine or "none").split("@")[0],
            gpus=p.row.tp,
            batch=float(p.row.batch),
            vendor=load_hardware(p.row.hardware).vendor,
            predicted=float(p.predicted),
            published=float(p.row.value),
            weights=p.row.weights,
        )
        for p in preds
        if p.row.metric in ENERGY_METRICS
        and p.predicted is not None
        and p.predicted > 0
        and p.row.value > 0
    ]


def _run(r) -> tuple:
    return (r.source.split(" ")[0], r.model, r.hardware, r.batch, r.prompt, r.gen, r.tp)


def explain(path: Path) -> None:
    """Print the per-row table of `--explain` (module docstring)."""
    rows = load_rows(path)
    with path.open(encoding="utf-8", newline="") as f:
        notes = {r["id"]: r["note"] for r in csv.DictReader(f)}
    preds = {r.id: predict(r) for r in rows}
    power = {_run(r): preds[r.id] for r in rows if r.metric == "power_w"}
    head = ("row", "metric", "device, model, B, TP", "published", "predicted", "error")
    print("| " + " | ".join((*head, "power part", "time part")) + " |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        p = preds[r.id]
        if p.error is None:
            print(f"| {r.id} | {r.metric} | not predicted: {p.why} |")
            continue
        what = f"{r.hardware}, {r.model}, {r.batch}, {r.tp}"
        pw = tm = ""
        if r.metric == "joules_per_output_token":
            pp = power.get(_run(r))
            if pp is not None and pp.error is not None:
                pw = f"{pp.error:+.0%} ({pp.row.id})"
                tm = f"{(1 + p.error) / (1 + pp.error) - 1:+.0%}"
        else:
            m = re.search(r"latency ([\d.]+) s", notes[r.id])
            if m is not None:
                lat = float(m.group(1))
                e2e = predict(dataclasses.replace(r, metric="e2e_s", value=lat)).predicted
                assert e2e is not None
                p_s = power_terms(load_hardware(r.hardware)).static_w
                window = (p.predicted * e2e + p_s * 1.0) / (e2e + 1.0)
                pw = f"{window / r.value - 1:+.0%} over the source's window"
                tm = f"E2E {e2e:.2f} s against {lat:g} s ({e2e / lat - 1:+.0%})"
        print(
            f"| {r.id} | {r.metric} | {what} | {r.value:g} | {p.predicted:.4g} | "
            f"{p.error:+.0%} | {pw} | {tm} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("evidence", nargs="?", type=Path, default=EVIDENCE)
    ap.add_argument("--checks", type=Path, default=CHECKS)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--explain", action="store_true", help="print the per-row table, write nothing")
    ap.add_argument(
        "--write-residuals",
        action="store_true",
        help="write the rows' residuals now to roofline/data/energy-residuals.csv, nothing else",
    )
    args = ap.parse_args()
    if args.explain:
        explain(args.out)
        return
    if args.write_residuals:
        res = energy_residuals(predict_all(load_rows(args.out)))
        write_residuals(res, energy_path())
        print(f"{len(res)} residuals -> {energy_path().relative_to(REPO)}")
        return
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    kept = {}
    if args.out.exists():
        kept = {r.id: (r.first_sight, r.first_sight_at) for r in load_rows(args.out)}
    rows = rows_to_predict(args.evidence, args.checks)
    tmp = args.out.with_suffix(".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as f:  # without first sights, to predict
        w = csv.DictWriter(f, COLUMNS, extrasaction="ignore", lineterminator="\r\n")
        w.writeheader()
        w.writerows(rows)
    preds = {p.row.id: p for p in (predict(r) for r in load_rows(tmp))}
    tmp.unlink()
    for r in rows:
        if r["id"] in kept:
            fs, at = kept[r["id"]]
            r["first_sight"] = "" if fs is None else f"{fs:.4f}"
            r["first_sight_at"] = at
            continue
        err = preds[r["id"]].error
        r["first_sight"] = "" if err is None else f"{err:.4f}"
        r["first_sight_at"] = head + (IN_SAMPLE if r["use"] == "both" else "")
        if err is None:
            print(f"{r['id']}: not predicted ({preds[r['id']].why})")
    with args.out.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, COLUMNS, extrasaction="ignore", lineterminator="\r\n")
        w.writeheader()
        w.writerows(rows)
    out = args.out.resolve()
    print(f"{len(rows)} rows -> {out.relative_to(REPO) if out.is_relative_to(REPO) else out}")


if __name__ == "__main__":
    main()
