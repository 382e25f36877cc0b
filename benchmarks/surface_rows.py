"""Rows of the bundled kernel surfaces (`roofline/data/surfaces/*.csv`, derived from
aiconfigurator-core 0.12.0 by benchmarks/derive/aic_surfaces.py), for the comparison scripts
beside this file, and the catalog name of each of their systems."""

from __future__ import annotations

import csv
from pathlib import Path

SURFACES = Path(__file__).resolve().parents[1] / "roofline" / "data" / "surfaces"
#: aiconfigurator's system name → the catalog's device
DEVICES = {
    "h100_sxm": "h100-sxm",
    "h200_sxm": "h200",
    "a100_sxm": "a100-sxm-80gb",
    "b200_sxm": "b200",
}


def rows(family: str, **match: str) -> list[dict[str, str]]:
    """The rows of `family`.csv whose columns equal `match` (the `#` provenance header
    skipped)."""
    with (SURFACES / f"{family}.csv").open(newline="") as f:
        table = csv.DictReader(line for line in f if not line.startswith("#"))
        return [r for r in table if all(r[k] == v for k, v in match.items())]
