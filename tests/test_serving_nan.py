"""Issue 42: a NaN (or -Infinity) in a serving-benchmark JSON file was refused as the file was
parsed, with a message that named no field ("not valid JSON (NaN is not a measurement)"). Now
the refusal names the file and the JSON path of the field, as every other bound of these files
does. One numeric field of each real JSON file (one per format, found by walking the file, not
hand-picked) is set to each constant."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli

from roofline.errors import InvalidInputError
from roofline.serve.benchmarks import read_benchmarks

FILES = Path(__file__).parent / "fixtures" / "serving_files"
#: one real file of each JSON format the reader takes
REAL = (
    "vllm/inferencex-app_glm47_gaudi3_conc16.json",
    "vllm/surajssd_llama3.3-70b_a100-40gb_tp8_sharegpt_qps_01_trimmed.json",  # per request
    "guidellm/guidellm_v0.2_benchmarks_stripped.json",
    "aiperf/ajith_kimik2.5-mxfp4_mi355x_tp4_conc4_profile_export_aiperf.json",
    "inferencemax/inferencex-app_supplemental-bmk_glm47_gaudi3.json",
)


def _last_number(doc: Any, path: str = "") -> tuple[str, list[Any]] | None:
    """(JSON path, the path's keys) of the last number in `doc`, depth first: a field deep in
    the file (a percentile, a per-request list item), not the first header value."""
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    found = None
    for key, value in items:
        where = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else key
        if isinstance(value, float | int) and not isinstance(value, bool):
            found = (where, [key])
        elif (inner := _last_number(value, where)) is not None:
            found = (inner[0], [key, *inner[1]])
    return found


def _set(doc: Any, keys: list[Any], value: float) -> None:
    for k in keys[:-1]:
        doc = doc[k]
    doc[keys[-1]] = value


@pytest.mark.parametrize("constant", [float("nan"), float("-inf")], ids=["NaN", "-Infinity"])
@pytest.mark.parametrize("relative", REAL)
def test_a_nan_is_refused_naming_the_file_and_its_json_path(tmp_path, relative, constant):
    doc = json.loads((FILES / relative).read_text())
    assert read_benchmarks(FILES / relative)  # the real file reads
    path, keys = _last_number(doc)
    _set(doc, keys, constant)
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(doc))  # Python writes NaN / -Infinity, as the tools that made them
    name = "NaN" if constant != constant else "-Infinity"
    with pytest.raises(InvalidInputError) as e:
        read_benchmarks(f)
    assert str(e.value) == (
        f"{f}: '{path}' is {name}, not a measurement; give a number or leave the field out"
    )


def test_a_per_request_nan_names_its_list_index(tmp_path):
    """vLLM's per-request lists: the index of the request is in the path."""
    doc = json.loads((FILES / REAL[1]).read_text())
    doc["ttfts"][2] = float("nan")
    f = tmp_path / "r.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(InvalidInputError, match=r"'ttfts\[2\]' is NaN"):
        read_benchmarks(f)


def test_a_json_lines_nan_names_the_line_and_field(tmp_path):
    """SGLang appends one JSON object a run: the line and the field are named."""
    run = json.loads((FILES / REAL[0]).read_text())
    bad = dict(run, median_ttft_ms=float("nan"))
    f = tmp_path / "runs.jsonl"
    f.write_text(json.dumps(run) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(InvalidInputError) as e:
        read_benchmarks(f)
    assert str(e.value).startswith(f"{f} line 2: 'median_ttft_ms' is NaN")


def test_infinity_stays_a_rate(tmp_path):
    """Only JSON's Infinity is read (vLLM writes `request_rate: Infinity` for all at once)."""
    doc = json.loads((FILES / REAL[0]).read_text()) | {"request_rate": float("inf")}
    f = tmp_path / "r.json"
    f.write_text(json.dumps(doc))
    (run,) = read_benchmarks(f)
    assert run.request_rate == float("inf")


def test_the_cli_says_it_in_one_line(capsys, tmp_path):
    doc = json.loads((FILES / REAL[0]).read_text()) | {"p99_ttft_ms": float("nan")}
    f = tmp_path / "r.json"
    f.write_text(json.dumps(doc))
    code, out, err = run_cli(capsys, "validate", "--serving", str(f), "-H", "h100-sxm")
    assert (code, out) == (1, "")
    assert err == (
        f"error: {f}: 'p99_ttft_ms' is NaN, not a measurement; give a number or leave the "
        "field out\n"
    )


def _strict(name: str) -> float:
    raise AssertionError(f"{name} in the JSON output: not valid JSON")


def test_validate_json_stays_strict_on_guidellm_constant_rate(capsys, tmp_path):
    """Issue 42: GuideLLM's constant strategy is evenly spaced arrivals, read as an infinite
    gamma shape (burstiness), which `validate --serving --json` printed as `Infinity`. The real
    GuideLLM report (a synchronous run) with its strategy set to constant at 4 requests/s:
    every value is strict JSON, the shape a null (docs/json.md), the rate kept."""
    doc = json.loads((FILES / REAL[2]).read_text())
    doc["benchmarks"][0]["args"]["strategy"] = {"type_": "constant", "rate": 4.0}
    f = tmp_path / "guidellm.json"
    f.write_text(json.dumps(doc))
    argv = ("validate", "--serving", str(f), "-H", "h100-sxm", "--model", "llama-3.1-8b")
    code, out, err = run_cli(capsys, *argv, "--json")
    assert code == 0, err
    (run,) = json.loads(out, parse_constant=_strict)["runs"]
    assert run["workload"]["burstiness"] is None and run["workload"]["rate_per_s"] == 4.0
    assert "evenly spaced arrivals at the rate" in run["notes"]
