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
"""

from __future__ import annotations

import argparse
import csv
import subprocess
from pathlib import Path

from roofline.published import ENERGY_METRICS, load_rows, predict

REPO = Path(__file__).resolve().parents[2]
EVIDENCE = REPO.parent / "shared" / "evidence" / "power" / "power-dev.csv"
CHECKS = REPO / "docs" / "evidence" / "power-row-checks.csv"
OUT = REPO / "roofline" / "data" / "published-energy.csv"
# the columns of the time rows' data set, so both files read alike (`roofline.published`)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("evidence", nargs="?", type=Path, default=EVIDENCE)
    ap.add_argument("--checks", type=Path, default=CHECKS)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
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
    print(f"{len(rows)} rows -> {args.out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
