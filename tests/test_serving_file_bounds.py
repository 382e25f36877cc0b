"""Issue 42, "bounds on every serving-benchmark file field, with the file and field named": a
value no benchmark can measure (negative, NaN/inf, text for a number, absurdly large, zero
requests, a run of 0 s, percentiles out of order, a first token after the last) is refused by
`roofline validate --serving FILE` in one `error:` line naming the file and the field's path,
exit 1, no traceback. The checks live in one place, `formats.common.BenchmarkRun`.

Three layers, none a hand-kept list of fields:
- discovery: every numeric field of one real file per format is set in turn to each bad value;
  the reader refuses it naming the field, or (a field it does not read) reads the same run;
- one test per root cause, through the CLI, on each format that holds the field;
- a bounded Hypothesis property: a real file mutated at random (keys dropped, values replaced
  by JSON scalars, NaN, negatives, huge numbers, text truncated) gives one `error:` line and
  exit 1, or finite JSON whose workload and measured values obey the bounds. The longer run is
  `ROOFLINE_FUZZ_EXAMPLES=500 python -m pytest tests/test_serving_file_bounds.py -q`.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roofline.errors import InvalidInputError
from roofline.serve import benchmarks
from roofline.serve.benchmarks import read_benchmarks
from roofline.serve.formats import records
from roofline.serve.formats.common import (
    LATENCY_S,
    MAX_OUTPUT_THROUGHPUT,
    QUANTITIES,
    REQUEST_RATE,
    BenchmarkRun,
)

FILES = Path(__file__).parent / "fixtures" / "serving_files"
VLLM = "vllm/inferencex-app_glm47_gaudi3_conc16.json"
VLLM_DETAILED = "vllm/surajssd_llama3.3-70b_a100-40gb_tp8_sharegpt_qps_04_trimmed.json"
EXPERIMENTAL = "inferencex-experimental/qwen35_vllm_tp8_isl1024_osl128_conc16.json"
ROWS = "inferencemax/inferencex-app_supplemental-bmk_glm47_gaudi3.json"
AGENTIC = "inferencemax/ajith_results_bmk1_agg_bmk_agentic.json"
GUIDELLM = "guidellm/guidellm_v0.2_benchmarks_stripped.json"
GUIDELLM_YAML = "guidellm/guidellm_v0.2_benchmarks_stripped.yaml"
AIPERF = "aiperf/ajith_kimik2.5-mxfp4_mi355x_tp4_conc4_profile_export_aiperf.json"
AIPERF_CSV = "aiperf/ajith_kimik2.5-mxfp4_mi355x_tp4_conc4_profile_export_aiperf.csv"
#: the stack every file is rerun on: a file does not say its hardware
STACK = ("--hardware", "h100-sxm", "--model", "llama-3.1-8b", "--json")


def _load(relative: str) -> Any:
    return json.loads((FILES / relative).read_text())


def _sglang() -> dict:
    """SGLang's bench_serving line (no real file exists): the vLLM result under SGLang's key
    names (`e2e_latency` for `e2el`), without `num_prompts` and the model id it does not write."""
    d = _load(VLLM)
    out = {k.replace("e2el", "e2e_latency"): v for k, v in d.items()}
    for gone in ("num_prompts", "model_id", "tokenizer_id"):
        out.pop(gone)
    return {**out, "total_output_tokens_retokenized": d["total_output_tokens"]}


def _genai_perf() -> dict:
    """genai-perf's export (no real file exists): AIPerf's records without `aiperf_version`."""
    d = _load(AIPERF)
    d.pop("aiperf_version")
    return d


#: format -> (the document, how it is written: json, jsonl or yaml); one real file per format
DOCS: dict[str, tuple[Any, str]] = {
    "vllm": (_load(VLLM), "json"),
    "vllm per-request": (_load(VLLM_DETAILED), "json"),
    "sglang": (_sglang(), "jsonl"),
    "inferencex experimental": (_load(EXPERIMENTAL), "json"),
    "inferencex rows": (_load(ROWS), "json"),
    "inferencex agentic": (_load(AGENTIC)[:1], "json"),
    "guidellm": (_load(GUIDELLM), "json"),
    "guidellm yaml": (yaml.safe_load((FILES / GUIDELLM_YAML).read_text()), "yaml"),
    "aiperf": (_load(AIPERF), "json"),
    "genai-perf": (_genai_perf(), "json"),
}


def _text(doc: Any, kind: str) -> str:
    if kind == "yaml":
        return yaml.safe_dump(doc, sort_keys=False)
    return json.dumps(doc) + ("\n" if kind == "jsonl" else "")


def _write(tmp: Path, text: str, kind: str) -> Path:
    path = tmp / f"result.{'yaml' if kind == 'yaml' else 'json'}"
    path.write_text(text)
    return path


def _leaves(node: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """(path, value) of every number in a document; of a list, its first and last item only (a
    per-request list of 200 is read by one loop)."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(node, list):
        for i in sorted({0, len(node) - 1}) if node else ():
            yield from _leaves(node[i], (*path, i))
    elif isinstance(node, int | float) and not isinstance(node, bool):
        yield path, node


def _set(doc: Any, path: tuple, value: Any) -> Any:
    doc = copy.deepcopy(doc)
    holder = doc
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = value
    return doc


def _field(path: tuple) -> str:
    """The last key of a path: what a refusal must name (`metrics.median_ttft` -> median_ttft)."""
    return next(str(k) for k in reversed(path) if isinstance(k, str))


def _same(a: list[BenchmarkRun], b: list[BenchmarkRun]) -> bool:
    def key(r: BenchmarkRun) -> tuple:
        arrays = (r.input_tokens, r.output_tokens, r.ttft_s)
        return (
            r.requests,
            r.request_rate,
            r.burstiness,
            r.max_concurrency,
            r.mean_input_tokens,
            r.mean_output_tokens,
            r.duration_s,
            r.model,
            sorted(r.metrics.items()),
            tuple(None if x is None else x.tolist() for x in arrays),
            r.notes,
        )

    return [key(r) for r in a] == [key(r) for r in b]


# ---- discovery: every numeric field of every format, each bad value --------------------------
#: values no field of a result file can hold; inf is allowed where it means something (a
#: request rate of inf: all sent at once)
BAD = {"negative": -1.0, "huge": 1e300, "text": "12", "boolean": True, "infinite": math.inf}
INF_MEANS_SOMETHING = {"request_rate"}


def _read(doc: Any) -> list[BenchmarkRun]:
    """The runs of a document as `read_benchmarks` reads a file holding it, without the file
    (the property below and the root-cause tests go through real files and the CLI)."""
    return benchmarks._document(doc, SRC, None)


SRC = "result.json"
#: the discovery layer's formats: YAML is the same document as the GuideLLM JSON
DISCOVERED = [f for f in DOCS if f != "guidellm yaml"]


@pytest.mark.parametrize("fmt", DISCOVERED)
def test_every_numeric_field_is_bounded_or_unread(fmt):
    """Each numeric field set to each bad value: refused in one line naming the file and the
    field, or not read at all (the run is the same as the real file's)."""
    doc = copy.deepcopy(DOCS[fmt][0])
    original = _read(doc)
    refused: set[str] = set()
    unread = 0
    for path, value in list(_leaves(doc)):
        holder = doc
        for key in path[:-1]:
            holder = holder[key]
        for bad in BAD.values():
            if bad == math.inf and _field(path) in INF_MEANS_SOMETHING:
                continue
            holder[path[-1]] = bad
            try:
                runs = _read(doc)
            except InvalidInputError as e:
                said = str(e)
                assert said.startswith(SRC) and "\n" not in said, said
                assert _field(path) in said, (path, bad, said)
                refused.add(_field(path))
            else:
                assert _same(runs, original), (path, bad)
                unread += 1
            finally:
                holder[path[-1]] = value
    # the fields every format is read from at least: some TTFT statistic and a request count
    assert len(refused) >= 4, (fmt, refused)
    _COUNTS[fmt] = (len(list(_leaves(doc))), unread)


#: format -> (numeric fields, unread (field, value) pairs): the suite size, for the report
_COUNTS: dict[str, tuple[int, int]] = {}


def test_the_csv_export_refuses_a_bad_cell_or_reads_the_same():
    """AIPerf's CSV: every numeric cell of the rows the reader knows by name (its own table,
    `records.CSV_NAMES`) set to each bad text."""
    rows = list(csv.reader(io.StringIO((FILES / AIPERF_CSV).read_text())))
    original = _read_csv(rows)
    checked = 0
    for i, row in enumerate(rows):
        if not row or row[0].split("(")[0].strip().lower() not in records.CSV_NAMES:
            continue
        for j, cell in enumerate(row[1:], 1):
            if not cell.replace(",", "").replace(".", "").strip().isdigit():
                continue
            for bad in ("-1", "1e300", "nan", "inf", "fast"):
                rows[i][j] = bad
                try:
                    runs = _read_csv(rows)
                except InvalidInputError as e:
                    assert "\n" not in str(e) and str(e).startswith(SRC), str(e)
                else:
                    assert _same(runs, original), (row[0], j, bad)
                finally:
                    rows[i][j] = cell
                checked += 1
    assert checked > 100, checked
    _COUNTS["aiperf csv"] = (checked // 5, 0)


def _read_csv(rows: list[list[str]]) -> list[BenchmarkRun]:
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return [records.read_records_csv(out.getvalue(), SRC, None)]


# ---- one test per root cause, through the CLI -------------------------------------------------
#: format -> its file and where it keeps TTFT p50 and p99, E2E p50 (seconds per unit), and the
#: request count, duration and output throughput
FIELDS = {
    "vllm": (
        "vllm",
        {
            "ttft_p50": (("median_ttft_ms",), 1e3),
            "ttft_p99": (("p99_ttft_ms",), 1e3),
            "tpot_p50": (("median_tpot_ms",), 1e3),
            "count": (("completed",), 1),
            "duration": (("duration",), 1),
            "output_throughput": (("output_throughput",), 1),
        },
    ),
    "aiperf": (
        "aiperf",
        {
            "ttft_p50": (("time_to_first_token", "p50"), 1e3),
            "ttft_p99": (("time_to_first_token", "p99"), 1e3),
            "e2el_p50": (("request_latency", "p50"), 1e3),
            "duration": (("benchmark_duration", "avg"), 1),
            "output_throughput": (("output_token_throughput", "avg"), 1),
        },
    ),
    "guidellm": (
        "guidellm",
        {
            "ttft_p50": (
                ("benchmarks", 0, "metrics", "time_to_first_token_ms", "successful", "median"),
                1e3,
            ),
            "ttft_p99": (
                (
                    "benchmarks",
                    0,
                    "metrics",
                    "time_to_first_token_ms",
                    "successful",
                    "percentiles",
                    "p99",
                ),
                1e3,
            ),
            "e2el_p50": (
                ("benchmarks", 0, "metrics", "request_latency", "successful", "median"),
                1,
            ),
            "count": (("benchmarks", 0, "request_totals", "successful"), 1),
            "duration": (("benchmarks", 0, "duration"), 1),
            "output_throughput": (
                ("benchmarks", 0, "metrics", "output_tokens_per_second", "successful", "mean"),
                1,
            ),
        },
    ),
    "inferencex rows": (
        "inferencex rows",
        {
            "ttft_p50": ((0, "metrics", "median_ttft"), 1),
            "ttft_p99": ((0, "metrics", "p99_ttft"), 1),
            "tpot_p50": ((0, "metrics", "median_tpot"), 1),
            "count": ((0, "conc"), 1),
        },
    ),
    "inferencex agentic": (
        "inferencex agentic",
        {
            "ttft_p50": ((0, "p75_ttft"), 1),
            "ttft_p99": ((0, "p95_ttft"), 1),
            "e2el_p50": ((0, "p75_e2el"), 1),
            "count": ((0, "num_requests_successful"), 1),
            "duration": ((0, "duration_seconds"), 1),
            "output_throughput": ((0, "output_tput_tps"), 1),
        },
    ),
}


def _refused(capsys, tmp_path: Path, fmt: str, changes: dict[tuple, Any]) -> str:
    """The one error line `validate --serving` gives for the format's file with `changes`."""
    doc, kind = DOCS[FIELDS[fmt][0]]
    for path, value in changes.items():
        doc = _set(doc, path, value)
    path = _write(tmp_path, _text(doc, kind), kind)
    code, out, err = run_cli(capsys, "validate", "--serving", str(path), *STACK)
    assert (code, out) == (1, ""), err
    assert err.startswith(f"error: {path}") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def _where(fmt: str, name: str) -> tuple[tuple, float]:
    return FIELDS[fmt][1][name]


def _with(*names: str) -> list[str]:
    return [f for f in FIELDS if all(n in FIELDS[f][1] for n in names)]


def _value(fmt: str, name: str) -> float:
    """The real file's value of a field, in seconds (or its own unit)."""
    (path, scale) = _where(fmt, name)
    node = DOCS[FIELDS[fmt][0]][0]
    for key in path:
        node = node[key]
    return node / scale


@pytest.mark.parametrize("fmt", _with("ttft_p50", "ttft_p99"))
def test_percentiles_out_of_order_are_refused(capsys, tmp_path, fmt):
    """p99 at half the median: the p99 field is named, below the percentile before it."""
    (p99, scale) = _where(fmt, "ttft_p99")
    err = _refused(capsys, tmp_path, fmt, {p99: 0.5 * _value(fmt, "ttft_p50") * scale})
    assert _field(p99) in err and "percentiles out of order" in err


@pytest.mark.parametrize("fmt", _with("ttft_p50", "e2el_p50"))
def test_a_ttft_larger_than_e2e_is_refused(capsys, tmp_path, fmt):
    """The E2E median lowered to half the TTFT median (its other percentiles stay above it)."""
    (ttft, _), (e2e, scale) = _where(fmt, "ttft_p50"), _where(fmt, "e2el_p50")
    err = _refused(capsys, tmp_path, fmt, {e2e: 0.5 * _value(fmt, "ttft_p50") * scale})
    assert _field(ttft) in err and "later than" in err and _field(e2e) in err


@pytest.mark.parametrize("fmt", _with("count"))
def test_zero_completed_requests_are_refused(capsys, tmp_path, fmt):
    (count, _) = _where(fmt, "count")
    err = _refused(capsys, tmp_path, fmt, {count: 0})
    assert _field(count) in err


@pytest.mark.parametrize("fmt", _with("duration"))
def test_a_duration_of_zero_is_refused(capsys, tmp_path, fmt):
    (duration, _) = _where(fmt, "duration")
    err = _refused(capsys, tmp_path, fmt, {duration: 0})
    assert _field(duration) in err


@pytest.mark.parametrize("fmt", _with("output_throughput"))
def test_an_absurd_throughput_is_refused(capsys, tmp_path, fmt):
    """2e9 tokens/s: above the 1e9 bound, ~1e5 × the fixtures' largest."""
    (tput, _) = _where(fmt, "output_throughput")
    err = _refused(capsys, tmp_path, fmt, {tput: 2 * MAX_OUTPUT_THROUGHPUT})
    assert _field(tput) in err


@pytest.mark.parametrize("fmt", list(FIELDS))
@pytest.mark.parametrize(
    ("bad", "says"),
    [(-0.5, "finite number >= 0"), ("fast", "must be a number"), (math.inf, "finite number")],
    ids=["negative", "text", "infinite"],
)
def test_a_bad_latency_is_refused_by_name(capsys, tmp_path, fmt, bad, says):
    (ttft, _) = _where(fmt, "ttft_p50")
    err = _refused(capsys, tmp_path, fmt, {ttft: bad})
    assert _field(ttft) in err and says in err


def test_a_nan_is_refused_in_one_line(capsys, tmp_path):
    """JSON's non-standard NaN is refused as the file is parsed, naming its field (issue 42:
    the refusal used to name none; tests/test_serving_nan.py covers every format)."""
    text = (
        (FILES / VLLM)
        .read_text()
        .replace('"p99_ttft_ms": 1611.2285128283838', '"p99_ttft_ms": NaN')
    )
    path = tmp_path / "r.json"
    path.write_text(text)
    code, out, err = run_cli(capsys, "validate", "--serving", str(path), *STACK)
    assert code == 1 and err.startswith(f"error: {path}") and err.count("\n") == 1
    assert "'p99_ttft_ms' is NaN" in err


def test_a_yaml_nan_is_refused_by_name(tmp_path):
    """YAML reads `.nan` as a float: the field that holds it is named."""
    doc, _ = DOCS["guidellm yaml"]
    path = ("benchmarks", 0, "metrics", "time_to_first_token_ms", "successful", "median")
    with pytest.raises(InvalidInputError, match="time_to_first_token_ms.successful.median"):
        read_benchmarks(_write(tmp_path, _text(_set(doc, path, math.nan), "yaml"), "yaml"))


def test_a_per_request_latency_beyond_the_bound_is_refused(tmp_path):
    doc, kind = DOCS["vllm per-request"]
    with pytest.raises(InvalidInputError, match="'ttfts' must hold latencies"):
        read_benchmarks(_write(tmp_path, _text(_set(doc, ("ttfts", 5), 1e300), kind), kind))


# ---- Hypothesis: a real file mutated at random -----------------------------------------------
#: the bounded profile CI runs: each example reads a file and simulates its runs (~30-70 ms),
#: ~5 s for the 8 formats; 150 examples a format also pass
BOUNDED = settings(
    max_examples=int(os.environ.get("ROOFLINE_FUZZ_EXAMPLES", "10")),
    deadline=10_000,  # per example: a hang fails, a loaded CI machine does not
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1e300, -1e300, 1e-300, "", "inf", "NaN", "12"]),
    st.text(max_size=8),
)
#: the documents the property mutates: the real files, the slow to simulate made smaller (the
#: AIPerf export's 286 requests of 1e5 tokens cut to 16; two InferenceX rows of eight); the
#: agentic row replays contexts beyond the CLI model's, and YAML is the GuideLLM JSON's
FUZZ_DOCS = {
    f: (doc, kind)
    for f, (doc, kind) in DOCS.items()
    if f not in ("inferencex agentic", "guidellm yaml")
}
for _f in ("aiperf", "genai-perf"):
    FUZZ_DOCS[_f] = (_set(DOCS[_f][0], ("request_count", "avg"), 16.0), "json")
FUZZ_DOCS["inferencex rows"] = (DOCS["inferencex rows"][0][:2], "json")


@st.composite
def mutated(draw, fmt: str) -> str:
    doc, kind = FUZZ_DOCS[fmt]
    leaves = [p for p, _ in _all_paths(doc)]
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(leaves))
        holder = doc = copy.deepcopy(doc)
        try:
            for key in path[:-1]:
                holder = holder[key]
            if draw(st.booleans()) and isinstance(holder, dict):
                holder.pop(path[-1], None)
            else:
                holder[path[-1]] = draw(SCALARS)
        except (KeyError, IndexError, TypeError):
            pass  # an earlier mutation removed the path
    text = _text(doc, kind)
    if draw(st.integers(0, 9)) == 0:  # truncated
        text = text[: draw(st.integers(0, len(text)))]
    return text


def _all_paths(node: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """Every key or item of a document (the first and last of a list), containers too."""
    if path:
        yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _all_paths(v, (*path, k))
    elif isinstance(node, list) and node:
        for i in sorted({0, len(node) - 1}):
            yield from _all_paths(node[i], (*path, i))


def _strict(name: str) -> float:
    raise ValueError(f"{name} in the JSON output")


@pytest.mark.parametrize("fmt", FUZZ_DOCS)
@BOUNDED
@given(data=st.data())
def test_a_mutated_file_is_refused_in_one_line_or_gives_finite_bounded_json(
    capsys, tmp_path, fmt, data
):
    kind = FUZZ_DOCS[fmt][1]
    path = _write(tmp_path, data.draw(mutated(fmt)), kind)
    code, out, err = run_cli(capsys, "validate", "--serving", str(path), *STACK)
    assert "Traceback" not in err
    if code != 0:
        assert code == 1 and out == "", err
        errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
        assert len(errors) == 1 and err.count("\n") == 1, err
        return
    result = json.loads(out, parse_constant=_strict)
    assert math.isfinite(result["worst_gated_error"])
    for run in result["runs"]:
        w = run["workload"]
        assert min(w["requests"], w["prompt_tokens"], w["gen_tokens"]) >= 1
        rate = w["rate_per_s"]
        assert rate is None or REQUEST_RATE[0] <= rate <= REQUEST_RATE[1]
        for row in run["metrics"]:
            measured = row["measured"]
            assert measured is None or (math.isfinite(measured) and measured > 0), row
            if row["unit"] == "s" and measured is not None:
                assert LATENCY_S[0] <= measured <= LATENCY_S[1], row
            assert row["predicted"] is None or math.isfinite(row["predicted"]), row
        latencies = {r["metric"]: r["measured"] for r in run["metrics"]}
        for q in QUANTITIES:
            ps = sorted(
                (float(m.rpartition("_p")[2]), v)
                for m, v in latencies.items()
                if m.startswith(f"{q}_p") and v is not None
            )
            assert [v for _, v in ps] == sorted(v for _, v in ps), (q, ps)


def test_the_suite_size():
    """The bad inputs the discovery layer checked (it runs first, in file order)."""
    if len(_COUNTS) < len(DISCOVERED) + 1:
        pytest.skip("run with the discovery tests")
    fields = sum(n for n, _ in _COUNTS.values())
    print(f"\n{fields} numeric fields × {len(BAD)} bad values = {fields * len(BAD)} cases")
    assert fields * len(BAD) > 300
