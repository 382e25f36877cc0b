"""Merge a collected set of published measurements into `roofline/data/published.csv`.

    python benchmarks/derive/import_published.py ../shared/evidence/published/published-dev2.csv \
        --checks docs/evidence/dev2-row-checks.csv

What it does, row by row, and nothing else:
- names: the collected file writes a device or model outside the catalog in words ("Intel Arc
  Pro B60 24GB (456 GB/s; PCIe card, not in the catalog)"); it gets a short name here
  (`NAMES`), so that the row reads "unknown hardware 'arc-pro-b60'" until a spec exists;
- the engine profile (`profile` column) where the engine's first word is not one: a known
  alias (`lmdeploy-turbomind` runs on the `lmdeploy` profile), else `none` (the hardware
  layer alone), so that no row silently borrows another engine's terms;
- conventions of the collected file's README: rows sent as one burst or one offline batch
  (`rate_per_s` inf, or 200/s with 1000 requests) get `burst` = 1, the engine runs what its
  scheduler and KV pool take of them; rows reported per GPU get `per_gpu` = 1; rows timed
  over whole requests (llmfit's completion tokens / request time) `rate_includes_prefill` = 1;
- a row's audit (`--checks`, one verdict per row: ok, fix FIELD NEW_VALUE, drop, unverified)
  is applied, and a dropped row is left out with its reason printed;
- metrics the published gate does not predict (`speculative_speedup`) are left out: they
  belong to the speculative evidence (`docs/evidence/`), and are printed;
- `first_sight`: the signed error of the row's prediction by the code as it is when the row
  first enters the set, with `first_sight_at` = that commit. A row already in the data set
  keeps the first sight it has: re-running after a model change never rewrites it.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from pathlib import Path

from roofline.errors import RooflineError
from roofline.serve.published import load_rows, predict
from roofline.spec.catalog import load_engine

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "roofline" / "data" / "published.csv"

#: Short names for devices and models the collected file names in words (not in the catalog).
NAMES = {
    "Intel Arc Pro B60 24GB (456 GB/s; PCIe card, not in the catalog)": "arc-pro-b60",
    "Apple M5 Max (40-core GPU, 128 GB)": "m5-max",
    "Apple M1 Ultra (64-core GPU, 128 GB; not in the catalog)": "m1-ultra",
    "AMD Instinct MI350 (not in catalog)": "mi350x",
    "Apple M4 (10-core CPU, 16 GB; not in the catalog)": "m4",
    "NVIDIA L40 48GB PCIe (not in the catalog; catalog has l40s)": "l40",
    "GLM-5.1 (zai-org/GLM-5.1-FP8)": "glm-5.1",
    "TinyLlama-1.1B (tinyllama-1.1b-1t-openorca)": "tinyllama-1.1b",
    "Ministral-3-8B (mistralai/Ministral-3-8B-Reasoning-2512)": "ministral-3-8b",
}
#: Engines whose profile goes by another name.
PROFILE_ALIASES = {"lmdeploy-turbomind": "lmdeploy"}
#: Metrics kept out of the published gate.
OTHER_METRICS = {"speculative_speedup": "a speed-up ratio: speculative evidence, not a time"}


def commit() -> str:
    out = subprocess.run(
        ["git", "-C", str(REPO), "log", "-1", "--format=%h %cs"], capture_output=True, text=True
    )
    dirty = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "roofline/"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return out.stdout.strip() + (" + working tree" if dirty else "")


def profile_of(engine_text: str) -> str:
    first = engine_text.split()[0].lower() if engine_text.strip() else ""
    first = PROFILE_ALIASES.get(first, first)
    try:
        load_engine(first)
    except RooflineError:
        return "none"
    return first if first != engine_text.split()[0].lower() else ""


def conventions(r: dict) -> dict:
    note = r["note"]
    rate = r.get("rate_per_s", "").strip()
    burst = rate == "inf" or (rate and float(rate) >= 100 and int(r["batch"]) >= 500)
    # the flag rescales throughput only (a per-GPU prefill rate is restated per instance)
    per_gpu = "PER GPU" in note and r["metric"] == "throughput_tokens_per_s"
    whole_request = "llmfit" in r["source"] or "completion tokens / " in note
    return {
        "burst": "1" if burst else "",
        "per_gpu": "1" if per_gpu else "",
        "rate_includes_prefill": "1"
        if whole_request and r["metric"] == "decode_tokens_per_s"
        else "",
    }


def read_checks(path: Path | None) -> dict[str, list[dict]]:
    if path is None:
        return {}
    out: dict[str, list[dict]] = {}
    for c in csv.DictReader(path.open(newline="")):
        out.setdefault(c["id"].strip(), []).append(c)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("collected", type=Path)
    ap.add_argument("--checks", type=Path, default=None)
    args = ap.parse_args()

    with DATA.open(newline="") as f:
        reader = csv.DictReader(f)
        header = list(reader.fieldnames or [])
        have = list(reader)
    for col in (
        "profile",
        "burst",
        "lengths",
        "released",
        "first_sight",
        "first_sight_at",
        "held_at",
        "held_why",
    ):
        if col not in header:
            header.append(col)
    known = {r["id"] for r in have}
    checks = read_checks(args.checks)
    new, left_out = [], []
    for r in csv.DictReader(args.collected.open(newline="")):
        rid = r["id"].strip()
        if rid in known:
            continue
        if r["metric"] in OTHER_METRICS:
            left_out.append((rid, OTHER_METRICS[r["metric"]]))
            continue
        verdicts = checks.get(rid, [])
        drop = [c for c in verdicts if c["verdict"].strip() == "drop"]
        if drop:
            left_out.append((rid, "audit: " + drop[0]["reason"]))
            continue
        row = {k: v for k, v in r.items() if k in header or k == "note"}
        row["model"] = NAMES.get(r["model"], r["model"])
        row["hardware"] = NAMES.get(r["hardware"], r["hardware"])
        row |= conventions(r)
        for c in verdicts:
            if c["verdict"].strip() == "fix" and c["field"].strip() in row:
                row[c["field"].strip()] = c["new_value"].strip()
                row["note"] += f" [audit fix: {c['field']} -> {c['new_value']}: {c['reason']}]"
        row["profile"] = profile_of(row["engine"])
        row["released"] = r.get("released", "")
        new.append(row)

    at = commit()
    tmp = DATA.with_suffix(".new.csv")

    def write() -> None:
        with tmp.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=header, extrasaction="ignore")
            w.writeheader()
            for r in have + new:
                w.writerow({k: r.get(k, "") for k in header})

    write()
    # first sight: each row without one is predicted by the code as it is now; rows that were
    # in the set before first sight was kept get theirs marked in-sample
    need = [r for r in have + new if not r.get("first_sight", "").strip()]
    # a row that could not be predicted when it came in (a device or model not yet in the
    # catalog) gets its first sight when it first can be: the model has still never seen it
    retry = [r for r in have if r.get("first_sight", "").strip() == "none"]
    ids = {r["id"] for r in need + retry}
    first = {p.row.id: p for p in (predict(r) for r in load_rows(tmp) if r.id in ids)}
    for r in need:
        p = first[r["id"]]
        r["first_sight"] = "none" if p.error is None else f"{p.error:+.4f}"
        why = "" if p.error is not None else f" (not predicted: {p.why})"
        if r["id"] in known:
            why += " (in-sample: in the set the model was built on before first sight was kept)"
        r["first_sight_at"] = at + why
    for r in retry:
        p = first[r["id"]]
        if p.error is not None:
            r["first_sight"] = f"{p.error:+.4f}"
            r["first_sight_at"] = f"{at} (first predictable; at entry {r['first_sight_at']})"
    write()
    tmp.replace(DATA)
    print(f"{len(new)} rows added at {at}; {len(left_out)} left out:", file=sys.stderr)
    for rid, why in left_out:
        print(f"  {rid}: {why}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
