"""The bundled achievable surfaces (roofline/data/surfaces/*.csv, derived from aiconfigurator-core's
measured kernel database by benchmarks/derive/aic_surfaces.py): every file parses, its values are
finite and positive, its rows are sorted with unique keys, and log-log interpolation in it
reproduces raw source points (tests/fixtures/surfaces_sample.csv) within 5% (median per family
and system). Standard library only: no roofline, pyarrow or numpy import.
"""

from __future__ import annotations

import csv
import math
import statistics
from bisect import bisect_left
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SURFACES = ROOT / "roofline" / "data" / "surfaces"
SAMPLE = ROOT / "tests" / "fixtures" / "surfaces_sample.csv"

IDENT = ("system", "framework", "framework_version", "implementation", "dtype")
#: family -> (key columns, the last one interpolated in log-log; value columns)
SCHEMA: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "collectives": ((*IDENT, "collective", "gpus", "message_bytes"), ("latency_us",)),
    "gemm": ((*IDENT, "n", "k", "m"), ("latency_us",)),
    "gemm_efficiency": (
        (*IDENT, "m"),
        ("shapes", "tflops_p25", "tflops_median", "tflops_p75", "gb_per_s_median"),
    ),
    "decode_attention": (
        (*IDENT, "kv_dtype", "num_heads", "num_kv_heads", "head_dim", "batch", "kv_tokens"),
        ("latency_us",),
    ),
    "prefill_attention": (
        (*IDENT, "kv_dtype", "num_heads", "num_kv_heads", "head_dim", "batch", "seq_tokens"),
        ("latency_us",),
    ),
    "moe": (
        (
            *IDENT,
            "hidden",
            "inter",
            "topk",
            "experts",
            "moe_tp",
            "moe_ep",
            "distribution",
            "tokens",
        ),
        ("latency_us",),
    ),
}
NUMERIC_KEYS = {
    "gpus",
    "message_bytes",
    "n",
    "k",
    "m",
    "num_heads",
    "num_kv_heads",
    "head_dim",
    "batch",
    "kv_tokens",
    "seq_tokens",
    "hidden",
    "inter",
    "topk",
    "experts",
    "moe_tp",
    "moe_ep",
    "tokens",
}
TOLERANCE = 0.05


def read(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(encoding="utf-8") as f:
        rows = list(csv.reader(line for line in f if not line.startswith("#")))
    return rows[0], rows[1:]


def typed_key(columns: tuple[str, ...], values: list[str]) -> tuple:
    return tuple(int(v) if c in NUMERIC_KEYS else v for c, v in zip(columns, values, strict=True))


def _surfaces() -> dict[str, tuple[list[str], list[list[str]]]]:
    return {family: read(SURFACES / f"{family}.csv") for family in SCHEMA}


SURFACE_DATA = _surfaces()


@pytest.mark.parametrize("family", sorted(SCHEMA))
def test_surface_parses_sorted_finite_positive(family: str) -> None:
    keys, values = SCHEMA[family]
    columns, rows = SURFACE_DATA[family]
    assert tuple(columns) == keys + values, f"{family}.csv columns {columns}"
    assert rows, f"{family}.csv has no rows"
    typed = []
    for row in rows:
        assert len(row) == len(columns), f"{family}.csv: {row}"
        assert all(row[: len(IDENT)]), f"{family}.csv: empty identity in {row}"
        typed.append(typed_key(keys, row[: len(keys)]))
        for name, text in zip(values, row[len(keys) :], strict=True):
            x = float(text)
            assert math.isfinite(x) and x > 0, f"{family}.csv {name}={text} in {row}"
    assert typed == sorted(typed), f"{family}.csv rows are not sorted by {keys}"
    assert len(set(typed)) == len(typed), f"{family}.csv repeats a key"
    if family == "gemm_efficiency":
        for row in rows:
            p25, p50, p75 = (float(x) for x in row[len(keys) + 1 : len(keys) + 4])
            assert p25 <= p50 <= p75, row


def interpolate(points: list[tuple[float, float]], x: float) -> float | None:
    """Log-log linear interpolation in sorted (x, y) points; None outside their range."""
    xs = [p[0] for p in points]
    i = bisect_left(xs, x)
    if i < len(xs) and xs[i] == x:
        return points[i][1]
    if i == 0 or i == len(xs):
        return None
    (x0, y0), (x1, y1) = points[i - 1], points[i]
    t = math.log(x / x0) / math.log(x1 / x0)
    return math.exp(math.log(y0) + t * math.log(y1 / y0))


def lines(family: str) -> dict[tuple[str, ...], list[tuple[float, float]]]:
    """Each line of the surface: all keys but the last -> sorted (last key, latency_us)."""
    keys, _ = SCHEMA[family]
    columns, rows = SURFACE_DATA[family]
    at = columns.index("latency_us")
    out: dict[tuple[str, ...], list[tuple[float, float]]] = defaultdict(list)
    for row in rows:
        out[tuple(row[: len(keys) - 1])].append((float(row[len(keys) - 1]), float(row[at])))
    for pts in out.values():
        pts.sort()
    return out


def sample_errors() -> dict[tuple[str, str], list[float]]:
    columns, rows = read(SAMPLE)
    assert 0 < len(rows) <= 400
    by_family: dict[str, dict] = {}
    errors: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in rows:
        point = dict(zip(columns, row, strict=True))
        family = point["family"]
        if family not in by_family:
            by_family[family] = lines(family)
        keys, _ = SCHEMA[family]
        line = by_family[family].get(tuple(point[c] for c in keys[:-1]))
        assert line, f"sample point outside the {family} surface: {point}"
        predicted = interpolate(line, float(point[keys[-1]]))
        assert predicted is not None, f"sample point outside the {family} range: {point}"
        errors[(family, point["system"])].append(abs(predicted / float(point["latency_us"]) - 1))
    return errors


def test_surfaces_reproduce_raw_sample() -> None:
    errors = sample_errors()
    assert {family for family, _ in errors} == set(SCHEMA) - {"gemm_efficiency"}
    worst = {k: statistics.median(v) for k, v in errors.items()}
    bad = {k: round(v, 4) for k, v in worst.items() if v > TOLERANCE}
    assert not bad, f"median |interpolated / raw - 1| above {TOLERANCE}: {bad}"
