"""`roofline validate --serving`: serving benchmark results read (`serve.benchmarks`) and rerun
in the simulator (`serve.validation`). Each parser reads a small file written here to its
format's schema (the keys vLLM's benchmark_serving.py / `vllm bench serve --save-result` and
genai-perf's profile export write); the values in them are made up for the parsing, they are
not measurements."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from roofline.calc.stack import Stack
from roofline.cli import main
from roofline.errors import InvalidInputError
from roofline.serve.benchmarks import read_benchmarks
from roofline.serve.metrics import Summary, weighted_percentile
from roofline.serve.policy import policy
from roofline.serve.simulate import build_deployment, simulate
from roofline.serve.validation import compare
from roofline.spec.catalog import load_engine, load_hardware, load_model
from roofline.spec.precision import released


def vllm_result(**over) -> dict:
    """A `vllm bench serve --save-result --save-detailed` object (benchmark_serving.py keys)."""
    inp, out = [300, 500, 700, 900], [40, 60, 80, 100]
    d = {
        "date": "20260301-120000",
        "backend": "vllm",
        "model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct",
        "num_prompts": 4,
        "request_rate": 2.0,
        "burstiness": 1.0,
        "max_concurrency": None,
        "duration": 3.0,
        "completed": 4,
        "total_input_tokens": sum(inp),
        "total_output_tokens": sum(out),
        "request_throughput": 1.3,
        "output_throughput": 95.0,
        "total_token_throughput": 900.0,
        "input_lens": inp,
        "output_lens": out,
        "mean_ttft_ms": 30.0,
        "median_ttft_ms": 28.0,
        "std_ttft_ms": 3.0,
        "p99_ttft_ms": 40.0,
        "p99.9_ttft_ms": 41.0,
        "mean_tpot_ms": 8.0,
        "median_tpot_ms": 7.9,
        "p99_tpot_ms": 9.0,
        "mean_itl_ms": 8.0,
        "median_itl_ms": 7.5,
        "p99_itl_ms": 20.0,
        "mean_e2el_ms": 600.0,
        "median_e2el_ms": 590.0,
        "p99_e2el_ms": 900.0,
    }
    return d | over


def write(tmp_path, obj, name="result.json"):
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return p


def test_vllm_result_is_read(tmp_path):
    (run,) = read_benchmarks(write(tmp_path, vllm_result()))
    assert run.format == "vllm bench serve" and run.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert (run.requests, run.request_rate, run.max_concurrency) == (4, 2.0, None)
    assert run.input_tokens.tolist() == [300, 500, 700, 900]
    assert run.mean_output_tokens == 70
    m = run.metrics
    # milliseconds to seconds; median is p50; p99.9 keeps its decimal
    assert m["ttft_mean"] == pytest.approx(0.030) and m["ttft_p50"] == pytest.approx(0.028)
    assert m["ttft_p99"] == pytest.approx(0.040) and m["ttft_p99.9"] == pytest.approx(0.041)
    assert m["e2el_p50"] == pytest.approx(0.590)
    assert (m["output_throughput"], m["request_throughput"]) == (95.0, 1.3)
    assert "ttft_std" not in m and "ttft_p99" in m


def test_vllm_result_without_lengths_uses_the_means_and_says_so(tmp_path):
    d = vllm_result(request_rate="inf", max_concurrency=2)
    del d["input_lens"], d["output_lens"]
    (run,) = read_benchmarks(write(tmp_path, d))
    assert run.input_tokens is None and run.mean_input_tokens == 2400 / 4
    assert math.isinf(run.request_rate) and run.max_concurrency == 2
    assert any("mean input and output lengths" in n for n in run.notes)
    w = run.workload()
    assert (w.arrival_s == 0).all() and (w.input_tokens == 600).all()


def test_vllm_gamma_arrivals_have_the_rate_and_the_burstiness(tmp_path):
    """vllm bench: gaps ~ Gamma(shape b, scale 1/(rate·b)): mean 1/rate, CV 1/√b."""
    d = vllm_result(num_prompts=20000, completed=20000, request_rate=5.0, burstiness=4.0)
    d |= {"total_input_tokens": 20000 * 600, "total_output_tokens": 20000 * 70}
    del d["input_lens"], d["output_lens"]
    (run,) = read_benchmarks(write(tmp_path, d))
    gaps = np.diff(run.workload(seed=3).arrival_s)
    assert gaps.mean() == pytest.approx(1 / 5.0, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1 / math.sqrt(4.0), rel=0.05)


GENAI = {
    "time_to_first_token": {"unit": "ms", "avg": 50.0, "p50": 48.0, "p90": 60.0, "p99": 75.0},
    "inter_token_latency": {"unit": "ms", "avg": 9.0, "p50": 8.8, "p99": 12.0},
    "request_latency": {"unit": "ms", "avg": 2000.0, "p50": 1990.0, "p99": 2500.0},
    "output_sequence_length": {"unit": "tokens", "avg": 200.0},
    "input_sequence_length": {"unit": "tokens", "avg": 1000.0},
    "output_token_throughput": {"unit": "tokens/sec", "avg": 1500.0},
    "request_throughput": {"unit": "requests/sec", "avg": 7.5},
    "input_config": {"model": ["meta-llama/Llama-3.1-8B-Instruct"], "concurrency": 16},
}


def test_genai_perf_json_is_read(tmp_path):
    (run,) = read_benchmarks(write(tmp_path, GENAI), requests=300)
    assert run.format == "genai-perf" and run.max_concurrency == 16 and run.requests == 300
    assert math.isinf(run.request_rate)  # concurrency mode: clients send as fast as they can
    # genai-perf's inter-token latency is per request, (E2E − TTFT) / (G − 1): vLLM's TPOT
    assert run.metrics["tpot_p50"] == pytest.approx(0.0088) and "itl_p50" not in run.metrics
    assert run.metrics["e2el_p99"] == pytest.approx(2.5)
    assert (run.mean_input_tokens, run.mean_output_tokens) == (1000.0, 200.0)


def test_genai_perf_csv_is_read(tmp_path):
    text = (
        "Metric,avg,min,max,p99,p90,p75,p50,p25\n"
        "Time To First Token (ms),50.00,20.00,90.00,75.00,60.00,55.00,48.00,40.00\n"
        "Inter Token Latency (ms),9.00,7.00,14.00,12.00,10.00,9.50,8.80,8.00\n"
        'Request Latency (ms),"2,000.00",900.00,"3,000.00","2,500.00","2,200","2,100",'
        '"1,990.00","1,800"\n'
        "Output Sequence Length (tokens),200.00,150.00,250.00,250.00,230.00,210.00,200.00,190.00\n"
        'Input Sequence Length (tokens),"1,000.00",900,"1,100","1,100","1,050","1,020",'
        '"1,000",980\n'
        "\n"
        "Metric,Value\n"
        'Output Token Throughput (per sec),"1,500.00"\n'
        "Request Throughput (per sec),7.50\n"
    )
    (run,) = read_benchmarks(write(tmp_path, text, "profile_export_genai_perf.csv"), requests=50)
    assert run.metrics["ttft_p50"] == pytest.approx(0.048)
    assert run.metrics["e2el_mean"] == pytest.approx(2.0)
    assert run.metrics["output_throughput"] == 1500.0 and run.mean_input_tokens == 1000.0
    assert run.max_concurrency == 1 and any("concurrency 1" in n for n in run.notes)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not of InferenceX result rows"),
        ('{"a": 1}', "not a result this version reads"),
        ('{"mean_ttft_ms": 1,', "truncated"),
        (json.dumps(vllm_result(mean_ttft_ms=-1)), "finite number >= 0"),
        (json.dumps(vllm_result(mean_ttft_ms="fast")), "must be a number"),
        ('{"mean_ttft_ms": NaN, "completed": 1}', "'mean_ttft_ms' is NaN, not a measurement"),
        (json.dumps(vllm_result(input_lens=[0, 1, 2, 3])), "no tokens"),
        (json.dumps(vllm_result(num_prompts=0, completed=0, input_lens=None)), "no request"),
        (json.dumps(vllm_result(request_rate=0)), "rate must be positive"),
        (json.dumps({**GENAI, "time_to_first_token": {"unit": "fortnights", "avg": 1}}), "unit"),
        ("Metric,avg\nSomething Else (ms),1\n", "Time To First Token"),
        ("\x00\x01binary", "neither JSON"),
    ],
)
def test_bad_result_files_are_refused_in_one_line(tmp_path, content, says):
    with pytest.raises(InvalidInputError, match=says):
        read_benchmarks(write(tmp_path, content))


def test_weighted_percentile_is_the_repeated_samples():
    rng = np.random.default_rng(0)
    for _ in range(100):
        n = int(rng.integers(1, 20))
        x, w, q = rng.random(n), rng.integers(1, 9, n), float(rng.uniform(0, 100))
        assert weighted_percentile(x, w.astype(float), q) == pytest.approx(
            float(np.percentile(np.repeat(x, w), q)), abs=1e-12
        )


def _stack(model="llama-3.1-8b"):
    m = load_model(model)
    return m, Stack.resolve(m, load_hardware("h100-sxm"), released(m), engine=load_engine("vllm"))


def test_prediction_is_the_simulation_of_the_files_workload(tmp_path):
    """Every predicted figure is the simulator's on the file's requests: the same requests
    simulated directly under vLLM's own policy (chunked prefill with prefix caching) give the
    same TTFT median and output throughput."""
    (run,) = read_benchmarks(write(tmp_path, vllm_result()))
    m, stack = _stack()
    c = compare(run, m, stack)
    assert c.policy == "chunked+prefix" == load_engine("vllm").scheduler
    p = policy("chunked+prefix").on(stack.memory)
    s = Summary(simulate(run.workload(0), p, build_deployment(m, stack, p)), 1, 1)
    got = {r.metric: r for r in c.rows}
    assert got["ttft_p50"].predicted == pytest.approx(float(np.percentile(s.ttft_s, 50)))
    assert got["output_throughput"].predicted == pytest.approx(s.throughput_tokens_per_s)
    assert got["ttft_p50"].error == pytest.approx(got["ttft_p50"].predicted / 0.028 - 1)


def test_one_client_back_to_back_throughput_by_hand(tmp_path):
    """One client, requests sent back to back: the run lasts Σ E2E, so request throughput is
    n / Σ E2E and output throughput n·G / Σ E2E, from the simulated E2E of each request."""
    d = vllm_result(request_rate="inf", max_concurrency=1, num_prompts=5, completed=5)
    d |= {"input_lens": [512] * 5, "output_lens": [64] * 5}
    (run,) = read_benchmarks(write(tmp_path, d))
    m, stack = _stack()
    c = compare(run, m, stack)
    got = {r.metric: r.predicted for r in c.rows}
    e2e_sum = 5 * got["e2el_mean"]
    assert got["request_throughput"] == pytest.approx(5 / e2e_sum, rel=1e-9)
    assert got["output_throughput"] == pytest.approx(5 * 64 / e2e_sum, rel=1e-9)
    # alone on the GPU, each request has the same TTFT: one 512-token prefill
    assert got["ttft_p99"] == pytest.approx(got["ttft_p50"], rel=1e-9)


def test_validate_serving_cli(tmp_path, capsys):
    f = write(tmp_path, vllm_result())
    main(["validate", "--serving", str(f), "-H", "h100", "--json"])
    out = json.loads(capsys.readouterr().out)
    (r,) = out["runs"]
    assert r["policy"] == "chunked+prefix" and r["workload"]["requests"] == 4
    assert {row["metric"] for row in r["metrics"]} >= {"ttft_p50", "output_throughput"}
    with pytest.raises(SystemExit) as e:  # far-off made-up figures fail a tight gate
        main(["validate", "--serving", str(f), "-H", "h100", "--max-error", "0.0001"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert e.value.code == 1 and "above --max-error" in err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--serving"], "give the result files"),
        (["--serving", "{f}"], "give --hardware"),
        (["--serving", "{f}", "-H", "h100", "--published"], "not both"),
        (["--serving", "{f}", "-H", "h100", "--model", "no-such-model"], "no-such-model"),
        (["{f}", "{f}"], "give one results file"),
    ],
)
def test_validate_serving_refusals(tmp_path, capsys, args, says):
    f = write(tmp_path, vllm_result())
    with pytest.raises(SystemExit) as e:
        main(["validate", *[a.format(f=f) for a in args]])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 1 and "\n" not in err and says in err


def test_serve_from_a_benchmark_reruns_its_workload(tmp_path, capsys):
    """`serve --from FILE` simulates the same requests and clients `validate --serving` does:
    its TTFT median is the prediction validate prints."""
    f = write(tmp_path, vllm_result(max_concurrency=2))
    main(["serve", "llama-3.1-8b", "--from", str(f), "--json"])
    served = json.loads(capsys.readouterr().out)
    assert served["workload"]["benchmark"] == str(f) and served["requests"] == 4
    main(["validate", "--serving", str(f), "-H", "h100-sxm", "--json"])
    rows = {r["metric"]: r for r in json.loads(capsys.readouterr().out)["runs"][0]["metrics"]}
    assert served["ttft_s"]["p50"] == pytest.approx(rows["ttft_p50"]["predicted"])
    assert served["batch_size"]["max"] <= 2


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--from", "{f}", "--rate", "3"], "--rate shapes the synthetic workload"),
        (["--trace", "{f}", "--requests", "9", "--prompt", "9"], "--requests, --prompt shape"),
        (["--from", "{f}", "--trace", "{f}"], "not both"),
        (["--from", "{f}", "--sweep-rate"], "cannot use --trace or --from"),
        (["--prefill-hardware", "h200"], "--prefill-hardware applies to the disaggregated"),
        (["--max-concurrency", "0"], "max-concurrency"),
    ],
)
def test_serve_refuses_options_its_workload_ignores(tmp_path, capsys, args, says):
    f = write(tmp_path, vllm_result())
    with pytest.raises(SystemExit) as e:
        main(["serve", "llama-3.1-8b", *[a.format(f=f) for a in args]])
    err = capsys.readouterr().err.strip()
    assert e.value.code in (1, 2) and says in err, err


def test_replicas_share_the_load_round_robin(tmp_path, capsys):
    """Four equal requests sent at once to four replicas (round-robin): each replica serves one
    request alone, so every TTFT is the TTFT of one request on one replica."""
    d = vllm_result(request_rate="inf", num_prompts=4, completed=4)
    d |= {"input_lens": [2048] * 4, "output_lens": [32] * 4}
    (four,) = read_benchmarks(write(tmp_path, d, "four.json"))
    d |= {"num_prompts": 1, "completed": 1, "input_lens": [2048], "output_lens": [32]}
    (alone,) = read_benchmarks(write(tmp_path, d, "one.json"))
    m, stack = _stack()
    spread = {r.metric: r.predicted for r in compare(four, m, stack, replicas=4).rows}
    single = {r.metric: r.predicted for r in compare(alone, m, stack).rows}
    packed = {r.metric: r.predicted for r in compare(four, m, stack).rows}
    assert spread["ttft_p99"] == pytest.approx(single["ttft_p50"], rel=1e-9)
    assert packed["ttft_p99"] > spread["ttft_p99"]  # on one replica the prefills queue
    main(["validate", "--serving", str(tmp_path / "four.json"), "-H", "h100", "--replicas", "4"])
    assert "4 replicas share the load" in capsys.readouterr().out
