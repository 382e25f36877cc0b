"""Measured results and calibrated specs checked at their root (issue 42), one test per root
cause, each named after it:

- measure results trusted as labelled: a results file whose environment contradicts its
  points (CPU kernels under a CUDA label, a datasheet peak below what was measured, device
  memory that cannot be, no threads, a shape measured twice, an unknown dtype, a time no timer
  resolves) is refused by `validate` and `calibrate` with one `error:` line naming the field;
  a byte-order mark is read, not refused; a fit that would give a term out of range is refused;
- calibrated specs' `check_residuals` unbounded: a residual beyond ln(100), a boolean or a
  non-finite value is refused by every reader of the spec, `hardware show` included;
- a hardware spec whose achievable terms have no source: refused, while every bundled spec
  still loads.

Plus two bounded Hypothesis properties: a results file mutated at random gives one `error:`
line and exit 1, or finite and consistent output; residuals within the bound give finite
intervals. No torch."""

from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path

import pytest
import yaml
from conftest import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from roofline.calc.intervals import machine_band
from roofline.spec.catalog import hardware_catalog, load_hardware
from roofline.spec.hardware import DEFAULT_ACHIEVABLE_SOURCE, Achievable, HardwareSpec

ROOT = Path(__file__).resolve().parent.parent
MEASURED = ROOT / "docs" / "measurements" / "cpu-ci.json"
DOC = json.loads(MEASURED.read_text())
SPEC = yaml.safe_load((ROOT / "docs" / "measurements" / "cpu-ci-calibrated.yaml").read_text())
#: the bounded profile CI runs: each example validates and calibrates the committed CPU run
#: (~40 ms), so 40 examples cost a few seconds; the longer one is
#: `ROOFLINE_FUZZ_EXAMPLES=2000 python -m pytest tests/test_bad_inputs_measure.py -q`
BOUNDED = settings(
    max_examples=int(os.environ.get("ROOFLINE_FUZZ_EXAMPLES", "40")),
    deadline=10_000,  # per example: a hang fails, a loaded CI machine does not
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _set(doc: dict, path: str, value: object) -> dict:
    """A copy of `doc` with the dotted `path` (list indices as numbers) set to `value`."""
    doc = copy.deepcopy(doc)
    *parents, last = path.split(".")
    holder = doc
    for key in parents:
        holder = holder[int(key)] if isinstance(holder, list) else holder[key]
    holder[int(last) if isinstance(holder, list) else last] = value
    return doc


def _twice(doc: dict, index: int, faster: float = 1.0) -> dict:
    """`doc` with point `index` measured a second time (its times scaled by `faster`)."""
    doc = copy.deepcopy(doc)
    again = copy.deepcopy(doc["points"][index])
    again["timing"] = {k: v * faster if k.endswith("_s") else v for k, v in again["timing"].items()}
    doc["points"].append(again)
    return doc


GEMM_PEAK = next(i for i, p in enumerate(DOC["points"]) if p["family"] == "gemm_peak")
TINY = dict(median_s=1e-300, p20_s=1e-300, p80_s=1e-300, min_s=1e-300)
#: results whose environment contradicts their points, and the field the refusal names
CONTRADICTIONS = {
    "cpu-points-labelled-cuda": (_set(DOC, "environment.device.kind", "cuda"), "device.kind"),
    "cpu-points-under-h100": (
        _set(DOC, "environment.device.catalog_name", "h100-sxm"),
        "catalog_name",
    ),
    "catalog-name-unknown": (
        _set(DOC, "environment.device.catalog_name", "/etc/passwd"),
        "catalog_name",
    ),
    "peak-below-measured": (
        _set(DOC, "environment.device.datasheet_peak_flops_per_s", {"fp32": 1e6}),
        "datasheet_peak_flops_per_s",
    ),
    "memory-one-byte": (_set(DOC, "environment.device.memory_bytes", 1), "memory_bytes"),
    "memory-1e30": (_set(DOC, "environment.device.memory_bytes", 1e30), "memory_bytes"),
    "memory-negative": (_set(DOC, "environment.device.memory_bytes", -1), "memory_bytes"),
    "memory-zero": (_set(DOC, "environment.device.memory_bytes", 0), "memory_bytes"),
    "memory-below-a-point": (
        _set(DOC, "environment.device.memory_bytes", 2**21),
        "memory_bytes",
    ),
    "threads-zero": (_set(DOC, "environment.threads", 0), "threads"),
    "threads-negative": (_set(DOC, "environment.threads", -2), "threads"),
    "threads-used-zero": (_set(DOC, "environment.device.threads_used", 0), "threads_used"),
    "threads-disagree": (_set(DOC, "environment.threads", 2), "threads"),
    "a-point-twice": (_twice(DOC, 0), "points.84"),
    "a-peak-twice-faster": (_twice(DOC, GEMM_PEAK, faster=0.01), f"points.{len(DOC['points'])}"),
    "dtype-unknown": (_set(DOC, "points.0.dtype", "fp13"), "dtype"),
    "times-tiny": (_set(DOC, "points.0.timing", {**DOC["points"][0]["timing"], **TINY}), "min_s"),
    "timer-unknown": (_set(DOC, "points.0.timing.method", "sundial"), "method"),
}
READERS = {"validate": ["validate", "{}", "--json"], "calibrate": ["calibrate", "{}"]}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(("doc", "field"), CONTRADICTIONS.values(), ids=list(CONTRADICTIONS))
def test_measure_results_trusted_as_labelled(tmp_path, refused, reader, doc, field):
    f = tmp_path / "r.json"
    f.write_text(json.dumps(doc))
    err = refused([a.format(f) for a in READERS[reader]], field)
    assert str(f) in err


def test_measure_results_trusted_as_labelled_reads_a_byte_order_mark(tmp_path, capsys):
    """A results file saved by an editor that writes a UTF-8 BOM is the same results."""
    f = tmp_path / "bom.json"
    f.write_bytes(b"\xef\xbb\xbf" + MEASURED.read_bytes())
    with_bom = run_cli(capsys, "validate", str(f), "--json")
    assert with_bom == run_cli(capsys, "validate", str(MEASURED), "--json")
    assert with_bom[0] == 0


def test_measure_results_trusted_as_labelled_refuses_a_fit_out_of_range(
    tmp_path, refused, monkeypatch
):
    """A fit whose term cannot be (a negative launch cost) is refused, the term named, not
    raised as a pydantic traceback."""
    import roofline.measure.calibrate as calibrate

    real = calibrate.achieved

    def negative(results):
        a = real(results)
        return calibrate.Achieved(
            a.matmul_flops_per_s,
            a.bandwidth_bytes_per_s,
            {**a.terms, "kernel_overhead_us": -3.0},
        )

    monkeypatch.setattr(calibrate, "achieved", negative)
    err = refused(["calibrate", str(MEASURED)], "achievable.kernel_overhead_us")
    assert "re-run `roofline measure`" in err


@pytest.mark.parametrize("mhz", ["0.000", "-5", "nan", "inf", "fast"])
def test_measure_results_trusted_as_labelled_detects_no_clock_that_cannot_be(mhz):
    """A VM that reports 'cpu MHz: 0.000' gets no clock and no peak, not a zero peak the
    results would refuse."""
    from roofline.measure.device import _cpu_clock_mhz

    assert _cpu_clock_mhz({"cpu MHz": mhz})[0] in (None, _cpu_clock_mhz({})[0])


def test_committed_results_are_consistent(capsys):
    """Every committed measurement passes the checks the bad files fail."""
    for f in sorted(MEASURED.parent.glob("*.json")):
        code, out, err = run_cli(capsys, "calibrate", str(f))
        assert code == 0 and not err, err


#: values a corrupted or hand-edited file holds where a measurement belongs
ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, -1, 1, 2, 1e-300, 1e-9, 1e300, 2**63, "", "x", "fp13", "cuda", "h100-sxm"]),
    st.floats(min_value=-1e6, max_value=1e6),
    st.lists(st.integers(-1, 3), max_size=2),
    st.dictionaries(st.sampled_from(["fp32", "bf16", "x"]), st.floats(-1, 1e12), max_size=2),
)


def _leaves(doc: object, path: tuple = ()) -> list[tuple]:
    """Every path in a JSON document, containers and leaves."""
    out = [path] if path else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _leaves(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _leaves(v, (*path, i))
    return out


#: where an edit lands: the environment's fields, or a field of one point (its shape and
#: timing included); the model specs are test_fuzz's
PATHS = st.one_of(
    st.sampled_from(_leaves(DOC["environment"], ("environment",))),
    st.builds(
        lambda i, sub: ("points", i, *sub),
        st.integers(0, len(DOC["points"]) - 1),
        st.sampled_from(_leaves(DOC["points"][0])),
    ),
)


def _finite(x: object) -> bool:
    if isinstance(x, dict):
        return all(_finite(v) for v in x.values())
    if isinstance(x, list):
        return all(_finite(v) for v in x)
    return not isinstance(x, float) or math.isfinite(x)


@BOUNDED
@given(
    edits=st.lists(st.tuples(PATHS, ODD), min_size=1, max_size=3),
    twice=st.sampled_from([None, 0, GEMM_PEAK]),
    scale=st.sampled_from([None, 1e-6, 0.5, 2.0, 1e6]),
)
def test_a_mutated_results_file_is_refused_in_one_line_or_gives_finite_output(
    tmp_path, capsys, edits, scale, twice
):
    doc = copy.deepcopy(DOC) if twice is None else _twice(DOC, twice, scale or 1.0)
    for path, value in edits:
        holder = doc
        try:
            for key in path[:-1]:
                holder = holder[key]
            if scale is not None and isinstance(holder[path[-1]], float):
                value = holder[path[-1]] * scale  # a plausible number, off by a factor
            holder[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit replaced a container on the way
    f = tmp_path / "r.json"
    f.write_text(json.dumps(doc))
    for argv in (["validate", str(f), "--json", "--tolerance", "1e6"], ["calibrate", str(f)]):
        code, out, err = run_cli(capsys, *argv)
        assert "Traceback" not in err
        if code != 0:
            assert code == 1 and err.startswith("error: ") and err.count("\n") == 1, err
        if code == 0 or out:
            if argv[0] == "validate":
                report = json.loads(out)
                assert _finite(report)
                assert report["passed"] == all(p["passed"] for p in report["points"])
            else:
                spec = HardwareSpec.model_validate(yaml.safe_load(out))  # it loads again
                assert _finite(spec.model_dump())


# ---- calibrated specs' check_residuals --------------------------------------------------------
RESIDUALS = {
    "plus-800": ([800.0] * 12, "check_residuals"),
    "minus-800": ([-800.0] * 12, "check_residuals"),
    "1e308": ([1e308] * 12, "check_residuals"),
    "plus-minus-50": ([50.0, -50.0] * 6, "check_residuals"),
    "just-over-ln-100": ([0.1, 4.7] + [0.1] * 10, "residual 1 is"),
    "true": ([True] * 12, "not a number"),
    "nan": ([float("nan")] * 12, "check_residuals"),
}
SPEC_READERS = {
    "hardware-show": ["hardware", "show", "{}"],
    "estimate": ["estimate", "tiny-llama-30m", "-H", "{}", "--dtype", "fp32", "--json"],
}


@pytest.mark.parametrize("reader", SPEC_READERS)
@pytest.mark.parametrize(("residuals", "needle"), RESIDUALS.values(), ids=list(RESIDUALS))
def test_calibrated_specs_check_residuals_unbounded(tmp_path, refused, reader, residuals, needle):
    f = tmp_path / "cpu.yaml"
    f.write_text(yaml.safe_dump({**SPEC, "check_residuals": residuals}, sort_keys=False))
    err = refused([a.format(f) for a in SPEC_READERS[reader]], needle)
    assert str(f) in err


@settings(max_examples=50, deadline=5000)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=30))
def test_check_residuals_in_bound_give_finite_intervals(residuals):
    try:
        hw = HardwareSpec.model_validate({**SPEC, "check_residuals": residuals})
    except ValidationError:
        assert not all(math.isfinite(r) and abs(r) <= math.log(100) for r in residuals)
        return
    band = machine_band(hw.check_residuals, 0.8)
    if band is not None:
        assert 1 / 100 <= band.low <= 1 <= band.high <= 100


# ---- achievable terms without a source ----------------------------------------------------------
SOURCELESS = {
    "no-source": {k: v for k, v in SPEC["achievable"].items() if k != "source"},
    "empty-source": {**SPEC["achievable"], "source": ""},
    "blank-source": {**SPEC["achievable"], "source": "  "},
    "one-term-no-source": {"kernel_overhead_us": 5.0},
}


@pytest.mark.parametrize("achievable", SOURCELESS.values(), ids=list(SOURCELESS))
def test_a_hardware_spec_whose_achievable_terms_have_no_source(tmp_path, refused, achievable):
    f = tmp_path / "cpu.yaml"
    f.write_text(yaml.safe_dump({**SPEC, "achievable": achievable}, sort_keys=False))
    refused(["hardware", "show", str(f)], "achievable.source")


def test_achievable_defaults_and_the_datasheet_need_no_new_source():
    """The public defaults carry their own source; the datasheet roofline names one; every
    bundled spec, each with achievable terms, loads."""
    assert Achievable().source == DEFAULT_ACHIEVABLE_SOURCE
    assert Achievable(memory_bandwidth_fraction=0.88).source == DEFAULT_ACHIEVABLE_SOURCE
    assert Achievable.identity("datasheet").memory_bandwidth_fraction == 1.0
    for entry in hardware_catalog().entries:
        assert load_hardware(entry.name).achievable.source.strip()
