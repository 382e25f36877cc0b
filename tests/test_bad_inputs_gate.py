"""Bad and edge inputs on the CPU gate's files (issue 26): results files whose points lack the
shape their kernel needs, carry a dimension that cannot be, time the wrong kernel for their
family, or hold times out of order; hardware specs whose decode-shape table (`achievable.
matmul_half_rows_by_m`) cannot be. Each read by every command that reads it: one `error:`
line, a non-zero exit, no traceback, no file changed (`test_bad_inputs.refuse`). No torch."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from test_bad_inputs import bad, refuse  # noqa: F401  # the shared folder of bad files

from roofline.measure.results import FAMILY_KERNELS, KERNEL_DIMS

MEASUREMENTS = Path(__file__).resolve().parent.parent / "docs" / "measurements"
COMMITTED = MEASUREMENTS / "cpu-ci.json"
DOC = json.loads(COMMITTED.read_text())
#: every command that reads a results file, `{}` the file
READERS = [
    ["validate", "{}"],
    ["validate", "{}", "--json"],
    ["calibrate", "{}"],
    ["plot", "validate", "{}", "-o", "BAD/out/v.png"],
]
READER_IDS = ["validate", "validate-json", "calibrate", "plot-validate"]


def _first(kernel: str) -> int:
    return next(i for i, p in enumerate(DOC["points"]) if p["kernel"] == kernel)


def _write(folder: Path, name: str, doc: dict) -> str:
    path = folder / name
    path.write_text(json.dumps(doc))
    return str(path)


#: (kernel, dimension) for every dimension of every kernel the committed run holds
DIMS = [(k, d) for k, dims in KERNEL_DIMS.items() for d in dims]


@pytest.mark.parametrize("argv", READERS, ids=READER_IDS)
@pytest.mark.parametrize(("kernel", "dim"), DIMS, ids=[f"{k}-{d}" for k, d in DIMS])
def test_a_point_without_a_dimension(capsys, bad, tmp_path, argv, kernel, dim):  # noqa: F811
    doc = copy.deepcopy(DOC)
    doc["points"][_first(kernel)]["shape"].pop(dim)
    f = _write(tmp_path, "r.json", doc)
    refuse(capsys, bad, [a.format(f) for a in argv], f"needs shape {dim}")


#: a dimension below what it can be: 0 (-1 for the context S, which may be 0)
LOW = [(k, d, -1 if d == "S" else 0) for k, d in DIMS]


@pytest.mark.parametrize("argv", READERS[:3], ids=READER_IDS[:3])
@pytest.mark.parametrize(("kernel", "dim", "value"), LOW, ids=[f"{k}-{d}" for k, d, _ in LOW])
def test_a_point_with_a_dimension_that_cannot_be(capsys, bad, tmp_path, argv, kernel, dim, value):  # noqa: F811
    doc = copy.deepcopy(DOC)
    doc["points"][_first(kernel)]["shape"][dim] = value
    f = _write(tmp_path, "r.json", doc)
    refuse(capsys, bad, [a.format(f) for a in argv], f"shape {dim} = {value}")


#: each family given a kernel it does not time
WRONG = [
    (fam, next(k for k in KERNEL_DIMS if k not in kernels))
    for fam, kernels in FAMILY_KERNELS.items()
]


@pytest.mark.parametrize("argv", READERS[:3], ids=READER_IDS[:3])
@pytest.mark.parametrize(("family", "kernel"), WRONG, ids=[f for f, _ in WRONG])
def test_a_family_timing_another_kernel(capsys, bad, tmp_path, argv, family, kernel):  # noqa: F811
    doc = copy.deepcopy(DOC)
    p = doc["points"][0]
    p["family"], p["kernel"] = family, kernel
    p["shape"] = dict.fromkeys(KERNEL_DIMS[kernel], 4)
    p["model"] = "tiny-llama-30m"
    f = _write(tmp_path, "r.json", doc)
    refuse(capsys, bad, [a.format(f) for a in argv], f"a {family} point times")


TIMINGS = {
    "p20-above-median": ({"p20_s": 2.0, "median_s": 1.0, "p80_s": 3.0, "min_s": 0.5}, "ordered"),
    "median-above-p80": ({"p20_s": 1.0, "median_s": 4.0, "p80_s": 3.0, "min_s": 0.5}, "ordered"),
    "min-above-p20": ({"p20_s": 1.0, "median_s": 2.0, "p80_s": 3.0, "min_s": 1.5}, "ordered"),
    "median-zero": ({"median_s": 0.0}, "greater than 0"),
    "median-negative": ({"median_s": -1e-3}, "greater than 0"),
    "median-a-year": ({"median_s": 3.2e7, "p80_s": 3.2e7}, "less than or equal to 86400"),
    "median-text": ({"median_s": "fast"}, "valid number"),
    "median-null": ({"median_s": None}, "valid number"),
    "repeats-zero": ({"repeats": 0}, "greater than or equal to 1"),
    "repeats-fraction": ({"repeats": 2.5}, "valid integer"),
}


@pytest.mark.parametrize("argv", READERS[:3], ids=READER_IDS[:3])
@pytest.mark.parametrize(("change", "needle"), TIMINGS.values(), ids=list(TIMINGS))
def test_times_that_cannot_be(capsys, bad, tmp_path, argv, change, needle):  # noqa: F811
    doc = copy.deepcopy(DOC)
    doc["points"][_first("model")]["timing"].update(change)
    f = _write(tmp_path, "r.json", doc)
    refuse(capsys, bad, [a.format(f) for a in argv], needle)


POINT_VALUES = {
    "flops-negative": ({"flops": -1.0}, "greater than or equal to 0"),
    "bytes-huge": ({"bytes": 1e31}, "less than or equal to 1000000000000000000000000000000"),
    "bytes-text": ({"bytes": "many"}, "valid number"),
    "family-unknown": ({"family": "gemm_tiny"}, "family"),
    "kernel-unknown": ({"kernel": "conv2d"}, "unknown kernel 'conv2d'"),
    "shape-text": ({"shape": {"M": "eight", "N": 4, "K": 4}}, "valid integer"),
    "shape-list": ({"shape": [8, 4, 4]}, "should be an object"),
    "extra-key": ({"colour": "red"}, "colour"),
}


@pytest.mark.parametrize("argv", READERS[:3], ids=READER_IDS[:3])
@pytest.mark.parametrize(("change", "needle"), POINT_VALUES.values(), ids=list(POINT_VALUES))
def test_point_values_that_cannot_be(capsys, bad, tmp_path, argv, change, needle):  # noqa: F811
    doc = copy.deepcopy(DOC)
    doc["points"][_first("gemm")].update(change)
    f = _write(tmp_path, "r.json", doc)
    refuse(capsys, bad, [a.format(f) for a in argv], needle)


SPEC = yaml.safe_load((MEASUREMENTS / "cpu-ci-calibrated.yaml").read_text())
TABLES = {
    "m-one": ({1: 5.0}, "M ≥ 2"),
    "m-zero": ({0: 5.0}, "M ≥ 2"),
    "m-negative": ({-4: 5.0}, "M ≥ 2"),
    "half-negative": ({4: -1.0}, "0 ≤ M½"),
    "half-huge": ({4: 1e12}, "0 ≤ M½"),
    "half-text": ({4: "many"}, "valid number"),
    "m-text": ({"four": 3.0}, "valid integer"),
    "list": ([[4, 3.0]], "valid dictionary"),
    "half-inf": ({4: float("inf")}, "finite number"),
}
SPEC_READERS = [
    ["estimate", "tiny-llama-30m", "-H", "{}", "--dtype", "fp32"],
    ["kv", "tiny-llama-30m", "-H", "{}"],
    ["serve", "tiny-llama-30m", "-H", "{}", "--dtype", "fp32", "--requests", "10"],
    ["hardware", "show", "{}"],
]


@pytest.mark.parametrize("argv", SPEC_READERS, ids=["estimate", "kv", "serve", "hardware-show"])
@pytest.mark.parametrize(("table", "needle"), TABLES.values(), ids=list(TABLES))
def test_decode_shape_tables_that_cannot_be(capsys, bad, tmp_path, argv, table, needle):  # noqa: F811
    spec = copy.deepcopy(SPEC)
    spec["achievable"]["matmul_half_rows_by_m"] = table
    f = tmp_path / "cpu.yaml"
    f.write_text(yaml.safe_dump(spec, sort_keys=False))
    refuse(capsys, bad, [a.format(f) for a in argv], needle)
