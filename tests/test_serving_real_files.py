"""The serving-benchmark readers on real result files (tests/fixtures/serving_files, sources and
trimming in its README.md). Every expected figure is a number read in the raw file by eye and
written here with its conversion, never the reader's own output; where two files hold the same
run (an InferenceX ingest row and its vLLM result, an agentic row and its AIPerf export) they
are checked against each other. SGLang and genai-perf have no real file: their readers are
tested on lines written here to the schemas in the tools' source."""

from __future__ import annotations

import gzip
import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest

from roofline.cli import main
from roofline.errors import InvalidInputError
from roofline.serve.benchmarks import read_benchmarks

FILES = Path(__file__).parent / "fixtures" / "serving_files"
SURAJ = "vllm/surajssd_llama3.3-70b_a100-40gb_tp8_sharegpt_qps_{}_trimmed.json"
AIPERF = "aiperf/ajith_kimik2.5-mxfp4_mi355x_tp4_conc{}_profile_export_aiperf.{}"


def one(relative: str, **kw):
    (run,) = read_benchmarks(FILES / relative, **kw)
    return run


def test_every_real_file_is_read_by_content():
    """Each file of the folder, whatever its name, gives runs with TTFT and a positive load."""
    formats = set()
    for path in sorted(FILES.rglob("*")):
        if path.suffix not in (".json", ".yaml", ".csv"):
            continue
        runs = read_benchmarks(path)
        assert runs, path
        for r in runs:
            assert r.requests >= 1 and r.mean_input_tokens >= 1, path
            assert {"ttft_mean", "ttft_p50"} & set(r.metrics), path
        formats |= {r.format for r in runs}
    assert formats == {
        "vllm bench serve",
        "inferencex experimental (vLLM-derived, seconds)",
        "inferencex result row",
        "inferencex agentic row",
        "aiperf 0.8.0",
        "aiperf (CSV)",
        "guidellm v0.2",
    }


# ---- vLLM benchmark_serving.py ------------------------------------------------------------
def test_vllm_083_whole_file_with_per_request_ttfts_and_itls(tmp_path):
    """surajssd qps_16, the whole 1.1 MB original (gzip): per-request arrays read and checked
    against the summary vLLM printed from them."""
    gz = FILES / "vllm/surajssd_llama3.3-70b_a100-40gb_tp8_sharegpt_qps_16.json.gz"
    raw = gzip.decompress(gz.read_bytes())
    assert hashlib.sha256(raw).hexdigest() == (
        "6d4a5f649bc53b3b3fb50b73eb39d2fe9d1061a30f8232d247d0884f39afcf0a"
    )
    path = tmp_path / "qps_16.json"
    path.write_bytes(raw)
    (run,) = read_benchmarks(path)
    assert (run.requests, run.request_rate, run.burstiness) == (200, 16.0, 1.0)
    # "mean_ttft_ms": 59.57789878501217 -> s
    assert run.metrics["ttft_mean"] == pytest.approx(59.57789878501217 / 1000, rel=1e-12)
    # "median_itl_ms": 30.424775500023316 (ITL: the chunk gaps, kept as ITL)
    assert run.metrics["itl_p50"] == pytest.approx(30.424775500023316 / 1000, rel=1e-12)
    # "total_input_tokens": 42659 over 200 requests
    assert run.mean_input_tokens == pytest.approx(42659 / 200)
    assert run.ttft_s.size == 200 and len(run.itl_s) == 200
    # the arrays hold what vLLM summarised: mean of "ttfts" = mean_ttft_ms / 1000; pooled
    # "itls" = mean_itl_ms; TPOT per request = Σ its gaps / (output_len − 1), averaged =
    # "mean_tpot_ms": 31.575131005299614
    d = json.loads(raw)
    assert np.mean(d["ttfts"]) == pytest.approx(59.57789878501217 / 1000, rel=1e-9)
    assert np.concatenate(run.itl_s).mean() == pytest.approx(31.254736291848793 / 1000, rel=1e-9)
    tpot = [sum(g) / (n - 1) for g, n in zip(d["itls"], d["output_lens"], strict=True) if n > 1]
    assert np.mean(tpot) == pytest.approx(31.575131005299614 / 1000, rel=1e-6)
    assert not any("per-request TTFTs average" in n for n in run.notes)


@pytest.mark.parametrize(
    ("qps", "rate", "median_ttft_ms", "total_output"),
    [
        ("01", 1.0, 56.37217849994158, 42722),
        ("04", 4.0, 49.50005649993727, 42449),
        ("16", 16.0, 58.10000099995705, 42770),
        ("inf", math.inf, 349.84637349998593, 42398),  # "request_rate": "inf" (a string)
    ],
)
def test_vllm_083_trimmed_files(qps, rate, median_ttft_ms, total_output):
    run = one(SURAJ.format(qps))
    assert run.request_rate == rate and run.max_concurrency is None
    assert run.metrics["ttft_p50"] == pytest.approx(median_ttft_ms / 1000, rel=1e-12)
    # per-request "output_lens" sum to "total_output_tokens"; 200 requests
    assert run.output_tokens.sum() == total_output and run.mean_output_tokens == total_output / 200
    assert run.itl_s is None and run.ttft_s.size == 200  # itls trimmed, ttfts kept


@pytest.mark.parametrize(
    ("name", "rate", "burstiness", "p95_ttft_ms", "total_input", "n"),
    [
        ("a100_vllm-2replicas_benchmark_2025-05-11_22-45-40", 1.8, 50.0, 1408.8739372789855,
         1600000, 200),
        ("a100_vllm-3replicas_benchmark_2025-05-12_00-03-23", 2.5, 50.0, 2375.031709298491,
         2500000, 250),
        ("h100_vllm-2replicas_benchmark_2025-05-13_04-55-27", 3.6, 100.0, 257.0488001947524,
         1599800, 200),
        ("h100_vllm-3replicas_benchmark_2025-05-13_05-23-51", 5.5, 100.0, 778.7386453594078,
         2499750, 250),
    ],
)  # fmt: skip
def test_vllm_main_may_2025_llmd_files(name, rate, burstiness, p95_ttft_ms, total_input, n):
    """ "request_goodput:" (with its colon) and the odd "timestamp" metadata key are ignored;
    `--metric-percentiles 95,99` gives p95 keys."""
    run = one(f"vllm/llmd_exp7_{name}.json")
    assert (run.request_rate, run.burstiness, run.requests) == (rate, burstiness, n)
    assert run.metrics["ttft_p95"] == pytest.approx(p95_ttft_ms / 1000, rel=1e-12)
    assert run.mean_input_tokens == pytest.approx(total_input / n)  # e.g. 1599800 / 200 = 7999
    assert run.input_tokens is None and any("mean input and output" in s for s in run.notes)


def test_vllm_derived_inferencex_gaudi3_file():
    run = one("vllm/inferencex-app_glm47_gaudi3_conc16.json")
    assert run.model == "zai-org/GLM-4.7" and run.max_concurrency == 16
    assert math.isinf(run.request_rate)  # "request_rate": "inf"
    # "total_output_tokens": 117008 over "completed": 160 (no ignore-eos: below 1024)
    assert run.mean_output_tokens == pytest.approx(117008 / 160) == pytest.approx(731.3)
    # "median_itl_ms": 79.2785869925865, "mean_tpot_ms": 80.94105414421823
    assert run.metrics["itl_p50"] == pytest.approx(79.2785869925865e-3, rel=1e-12)
    assert run.metrics["tpot_mean"] == pytest.approx(80.94105414421823e-3, rel=1e-12)


def test_vllm_failed_requests_leave_the_replay(tmp_path):
    """vLLM writes a failed request with 0 output tokens, TTFT 0 and its error text."""
    d = json.loads((FILES / SURAJ.format("04")).read_text())
    d["errors"][0], d["output_lens"][0], d["ttfts"][0] = "Connection reset", 0, 0.0
    (run,) = read_benchmarks(_write(tmp_path, d))
    assert run.requests == 199 and run.output_tokens.min() >= 1
    assert any("1 failed requests of 200" in n for n in run.notes)


# ---- InferenceX experimental (seconds) ------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "conc", "median_ttft_s", "p99_tpot_s", "total_input"),
    [
        ("isl1024_osl128_conc4", 4, 4.567766260355711, 0.06304697274861079, 40960),
        ("isl1024_osl128_conc16", 16, 2.8395004882477224, 0.03811084862277791, 163840),
        ("isl1024_osl128_conc64", 64, 5.428644580300897, 0.12091887410070137, 655360),
        ("isl8192_osl128_conc16", 16, 4.631162679288536, 0.18753538471756603, 1310720),
    ],
)
def test_inferencex_experimental_seconds(name, conc, median_ttft_s, p99_tpot_s, total_input):
    run = one(f"inferencex-experimental/qwen35_vllm_tp8_{name}.json")
    assert run.max_concurrency == conc and run.requests == 10 * conc
    # "median_ttft" is already in seconds: no /1000
    assert run.metrics["ttft_p50"] == pytest.approx(median_ttft_s, rel=1e-12)
    assert run.metrics["tpot_p99"] == pytest.approx(p99_tpot_s, rel=1e-12)
    assert run.mean_input_tokens == total_input / (10 * conc)
    assert "ttft_mean" not in run.metrics  # the script writes medians and p99 only


# ---- InferenceX rows -------------------------------------------------------------------------
def test_inferencex_ingest_rows_match_their_vllm_results():
    rows = read_benchmarks(FILES / "inferencemax/inferencex-app_supplemental-bmk_glm47_gaudi3.json")
    assert [r.max_concurrency for r in rows] == [1, 2, 4, 8, 16, 32, 64, 128]
    row16 = rows[4]
    raw16 = one("vllm/inferencex-app_glm47_gaudi3_conc16.json")
    # ingest "mean_ttft": 0.49811 s = round(498.11096891944544 ms / 1000, 5)
    assert row16.metrics["ttft_mean"] == 0.49811
    assert row16.metrics["ttft_mean"] == pytest.approx(raw16.metrics["ttft_mean"], abs=5e-6)
    # "output_tput_per_gpu": 23.31 × TP 8 = 186.48; the raw file's 186.47558779609227 / 8
    # rounds to 23.31
    assert row16.metrics["output_throughput"] == pytest.approx(23.31 * 8)
    assert row16.metrics["output_throughput"] == pytest.approx(186.47558779609227, abs=0.005 * 8)
    assert row16.requests == 160 and row16.mean_input_tokens == 1024  # 10 per client, nominal isl
    assert "itl_p50" not in row16.metrics  # this row omits median_itl
    assert rows[0].metrics["itl_p50"] == 0.05256  # the conc-1 row has it
    assert row16.model == "zai-org/GLM-4.7"


def test_inferencex_agentic_rows_match_their_aiperf_exports():
    rows = read_benchmarks(FILES / "inferencemax/ajith_results_bmk1_agg_bmk_agentic.json")
    assert len(rows) == 20
    (row,) = [r for r in rows if r.max_concurrency == 4 and "offloading=none" in r.notes[0]]
    aiperf = one(AIPERF.format(4, "json"))
    # row "mean_ttft": 2.406574852541958 s; AIPerf time_to_first_token avg 2406.5748525419576 ms
    assert row.metrics["ttft_mean"] == pytest.approx(2406.5748525419576 / 1000, rel=1e-12)
    # row "mean_tpot": 0.018136649869124194 s = AIPerf inter_token_latency avg 18.1366498691242
    # ms / 1000: the agentic tpot is AIPerf's per-request ITL (= TPOT), and its itl repeats it
    assert row.metrics["tpot_mean"] == pytest.approx(aiperf.metrics["tpot_mean"], rel=1e-12)
    assert not any(k.startswith("itl_") for k in row.metrics)
    assert "ttft_p50" not in row.metrics  # no median keys in the agentic aggregate
    # "num_requests_successful": 286; "mean_input_tokens": 100915.09440559441
    assert (row.requests, row.mean_input_tokens) == (286, 100915.09440559441)
    assert row.metrics["output_throughput"] == 126.7411741224937  # "output_tput_tps"


# ---- AIPerf 0.8 ---------------------------------------------------------------------------
def test_aiperf_json_maps_its_inter_token_latency_to_tpot():
    run = one(AIPERF.format(4, "json"))
    assert run.format == "aiperf 0.8.0" and run.model == "amd/Kimi-K2.5-MXFP4"
    assert (run.requests, run.max_concurrency) == (286, 4)  # request_count, loadgen.concurrency
    m = run.metrics
    assert m["ttft_mean"] == pytest.approx(2406.5748525419576e-3, rel=1e-12)  # avg, ms -> s
    # inter_token_latency p50 14.27137768413407 ms is TPOT; inter_chunk_latency p50
    # 13.573606999999999 ms is ITL
    assert m["tpot_p50"] == pytest.approx(14.27137768413407e-3, rel=1e-12)
    assert m["itl_p50"] == pytest.approx(13.573606999999999e-3, rel=1e-12)
    assert m["e2el_p99"] == pytest.approx(132637.00176064984e-3, rel=1e-12)  # request_latency
    assert m["output_throughput"] == pytest.approx(126.74117412384639)
    assert "ttft_p25" not in m  # percentiles below the median are not kept
    assert any("prefix-cache hit 95%" in n for n in run.notes)  # 94.98460042146215 %
    conc16 = one(AIPERF.format(16, "json"))
    assert conc16.requests == 727 and any("1 request errored" in n for n in conc16.notes)


def test_aiperf_csv_is_the_json_rounded_to_two_decimals():
    run, exact = one(AIPERF.format(4, "csv")), one(AIPERF.format(4, "json"))
    # "Time to First Token (ms),2406.57,..." -> 2.40657 s; "Request Count,286.00"
    assert run.metrics["ttft_mean"] == pytest.approx(2406.57e-3, rel=1e-12)
    assert run.metrics["itl_p50"] == pytest.approx(13.57e-3, rel=1e-12)  # Inter Chunk Latency
    assert run.requests == 286 and set(run.metrics) == set(exact.metrics)
    for k, v in exact.metrics.items():  # latencies: ±0.005 ms; throughputs: ±0.005 per s
        assert run.metrics[k] == pytest.approx(v, abs=0.005 * (1 if k.endswith("put") else 1e-3))
    # the CSV holds no load settings: concurrency 1, said
    assert run.max_concurrency == 1 and any("concurrency 1" in n for n in run.notes)


# ---- GuideLLM v0.2 --------------------------------------------------------------------------
@pytest.mark.parametrize("ext", ["json", "yaml"])
def test_guidellm_report(ext):
    run = one(f"guidellm/guidellm_v0.2_benchmarks_stripped.{ext}")
    assert run.format == "guidellm v0.2" and run.model == "example_model"
    # synchronous: one request at a time; request_totals.successful 46 (1 incomplete)
    assert (run.requests, run.max_concurrency, math.isinf(run.request_rate)) == (46, 1, True)
    m = run.metrics
    # time_to_first_token_ms.successful.mean 16.792535781860348 ms
    assert m["ttft_mean"] == pytest.approx(16.792535781860348e-3, rel=1e-12)
    # inter_token_latency_ms mean 4.941609043733832 ms is TPOT, (last − first) / (G − 1) ...
    assert m["tpot_mean"] == pytest.approx(4.941609043733832e-3, rel=1e-12)
    # ... and time_per_output_token_ms mean 4.90300272307966 divides by G: with G = 128 on
    # every request the two differ by 128/127
    ratio = 4.941609043733832 / 4.90300272307966
    assert ratio == pytest.approx(128 / 127, rel=1e-6)
    # request_latency is in seconds: median 0.6424565315246582 s, no /1000
    assert m["e2el_p50"] == pytest.approx(0.6424565315246582, rel=1e-12)
    assert m["ttft_p99.9"] == pytest.approx(21.281957626342773e-3, rel=1e-12)  # percentiles.p999
    assert m["request_throughput"] == pytest.approx(1.5481806532737452)
    assert "itl_p50" not in m  # GuideLLM reports no pooled chunk gaps
    assert run.mean_input_tokens == pytest.approx(257.1086956521739)  # prompt_token_count mean


def test_guidellm_yaml_and_json_are_the_same_run():
    a = one("guidellm/guidellm_v0.2_benchmarks_stripped.json")
    b = one("guidellm/guidellm_v0.2_benchmarks_stripped.yaml")
    assert a.metrics == b.metrics and a.notes == b.notes


def test_guidellm_rate_strategies(tmp_path):
    """constant: evenly spaced at the rate; poisson: gamma shape 1; concurrent: `streams`."""
    d = json.loads((FILES / "guidellm/guidellm_v0.2_benchmarks_stripped.json").read_text())
    b = d["benchmarks"][0]
    b["args"]["strategy"] = {"type_": "constant", "rate": 4.0, "initial_burst": False}
    poisson = json.loads(json.dumps(b))
    poisson["args"]["strategy"] = {"type_": "poisson", "rate": 2.0}
    streams = json.loads(json.dumps(b))
    streams["args"]["strategy"] = {"type_": "concurrent", "streams": 8}
    d["benchmarks"] = [b, poisson, streams]
    constant, pois, conc = read_benchmarks(_write(tmp_path, d))
    assert np.diff(constant.workload().arrival_s) == pytest.approx(np.full(45, 1 / 4.0))
    assert (pois.request_rate, pois.burstiness) == (2.0, 1.0)
    assert conc.max_concurrency == 8 and math.isinf(conc.request_rate)


# ---- SGLang bench_serving (no real file: the schema of sglang@0033168 bench_serving.py) ------
def _sglang_line(**over) -> dict:
    d = {
        "backend": "sglang",
        "dataset_name": "random",
        "request_rate": math.inf,  # json.dumps writes Infinity
        "max_concurrency": 8,
        "sharegpt_output_len": None,
        "random_input_len": 1024,
        "random_output_len": 256,
        "random_range_ratio": 1.0,
        "duration": 20.0,
        "completed": 80,
        "total_input_tokens": 80 * 1024,
        "total_output_tokens": 80 * 256,
        "total_output_tokens_retokenized": 80 * 255,
        "request_throughput": 4.0,
        "input_throughput": 4096.0,
        "output_throughput": 1024.0,
        "mean_e2e_latency_ms": 2000.0,
        "median_e2e_latency_ms": 1990.0,
        "std_e2e_latency_ms": 50.0,
        "p99_e2e_latency_ms": 2200.0,
        "mean_ttft_ms": 120.0,
        "median_ttft_ms": 110.0,
        "std_ttft_ms": 20.0,
        "p99_ttft_ms": 300.0,
        "mean_tpot_ms": 7.4,
        "median_tpot_ms": 7.3,
        "std_tpot_ms": 0.2,
        "p99_tpot_ms": 8.0,
        "mean_itl_ms": 7.4,
        "median_itl_ms": 7.0,
        "std_itl_ms": 2.0,
        "p95_itl_ms": 9.0,
        "p99_itl_ms": 30.0,
        "concurrency": 7.6,
        "accept_length": None,
    }
    return d | over


def test_sglang_jsonl_one_run_a_line(tmp_path):
    lines = [
        _sglang_line(),
        _sglang_line(request_rate=2.0, max_concurrency=None, accept_length=3.2),
    ]
    path = tmp_path / "sglang_0101_80_1024_256.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert "Infinity" in path.read_text()  # what Python's json writes for inf
    first, second = read_benchmarks(path)
    assert first.format == "sglang bench_serving" and first.model is None
    assert math.isinf(first.request_rate) and first.max_concurrency == 8  # not "concurrency"
    assert first.requests == 80 and first.mean_input_tokens == 1024
    # "median_e2e_latency_ms": 1990 -> e2el_p50 1.99 s; "p95_itl_ms": 9 -> 0.009 s
    assert first.metrics["e2el_p50"] == pytest.approx(1.99)
    assert first.metrics["itl_p95"] == pytest.approx(0.009)
    assert second.request_rate == 2.0 and any("accept length 3.20" in n for n in second.notes)
    assert second.source.endswith("line 2")


# ---- refusals: one line each, never a traceback ---------------------------------------------
def _write(tmp_path, obj, name="result.json") -> Path:
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return p


def _aiperf_without(key: str) -> dict:
    d = json.loads((FILES / AIPERF.format(4, "json")).read_text())
    del d[key]
    return d


def _guidellm(edit) -> dict:
    d = json.loads((FILES / "guidellm/guidellm_v0.2_benchmarks_stripped.json").read_text())
    edit(d)
    return d


def _agentic_without(key: str) -> list:
    rows = json.loads((FILES / "inferencemax/ajith_results_bmk1_agg_bmk_agentic.json").read_text())
    del rows[3][key]
    return rows


@pytest.mark.parametrize(
    ("content", "name", "says"),
    [
        ((FILES / SURAJ.format("01")).read_text()[:3000], "r.json", "not valid JSON"),
        (
            (FILES / "guidellm/guidellm_v0.2_benchmarks_stripped.yaml").read_text()[:2000],
            "r.yaml",
            "no 'metrics.time_to_first_token_ms.successful'",
        ),
        (_aiperf_without("input_sequence_length"), "a.json", "no 'input_sequence_length'"),
        (
            _guidellm(lambda d: d["benchmarks"][0]["metrics"].pop("request_latency")),
            "g.json",
            "no 'metrics.request_latency.successful'",
        ),
        (_guidellm(lambda d: d.update(metadata={"version": 2})), "g.json", "schema version 2"),
        (
            _guidellm(lambda d: d["benchmarks"][0]["args"].update(strategy={"type_": "x"})),
            "g.json",
            "strategy 'x'",
        ),
        (
            _agentic_without("num_requests_successful"),
            "r.json",
            "row 3: no 'num_requests_successful'",
        ),
        ([{"hw": "h100", "conc": 4, "tp": 1, "median_tpot": 0.01}], "r.json", "no 'mean_ttft'"),
        (json.dumps(_sglang_line()) + "\n{}\n", "s.jsonl", "line 2: not a bench_serving"),
        (json.dumps(_sglang_line(request_rate="trace")), "s.jsonl", "trace's timestamps"),
        ("benchmarks: [", "g.yaml", "not valid YAML"),
        ("just text", "x.txt", "neither JSON, CSV nor"),
    ],
)
def test_bad_real_shaped_files_are_refused_in_one_line(tmp_path, content, name, says):
    path = _write(tmp_path, content, name)
    with pytest.raises(InvalidInputError, match=says) as e:
        read_benchmarks(path)
    assert "\n" not in str(e.value)


def test_truncated_file_through_the_cli_is_one_line(tmp_path, capsys):
    path = _write(
        tmp_path, (FILES / "vllm/inferencex-app_glm47_gaudi3_conc1.json").read_text()[:400]
    )
    with pytest.raises(SystemExit) as e:
        main(["validate", "--serving", str(path), "-H", "gaudi3"])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 1 and "\n" not in err and "truncated" in err
    assert "Traceback" not in err
