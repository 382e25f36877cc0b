"""Saturating bursts of ShareGPT requests: the bundled length profile, the served prediction of a
burst's output throughput, and SGLang's prefill-first scheduler (read from its source)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from roofline.errors import InvalidInputError
from roofline.serve.policy import POLICIES, engine_default
from roofline.serve.published import Row, load_rows, predict
from roofline.serve.workload import burst_of_profile, profile_lengths
from roofline.spec.catalog import load_engine


def test_the_profile_is_the_benchmark_file_in_its_order() -> None:
    inp, out = profile_lengths("sharegpt")
    # the first requests of surajssd's qps_inf file (input_lens / output_lens, by hand)
    assert inp[:4].tolist() == [13, 25, 27, 10]
    assert out[:4].tolist() == [120, 770, 233, 194]
    assert inp.size == out.size == 200
    # the header's means: 213.29 input and 211.99 output tokens per request
    assert inp.mean() == pytest.approx(213.29, abs=0.005)
    assert out.mean() == pytest.approx(211.99, abs=0.005)


def test_a_burst_repeats_the_profile_at_the_runs_means() -> None:
    inp, out = profile_lengths("sharegpt")
    w = burst_of_profile("sharegpt", 201, 2 * inp.mean(), out.mean() / 2)
    assert w.requests == 201 and np.all(w.arrival_s == 0)
    # request 201 is the profile's first again: input 13 x 2 = 26, output 120 / 2 = 60
    assert (w.input_tokens[200], w.output_tokens[200]) == (26, 60)
    # request 2: 25 x 2 = 50 and 770 / 2 = 385
    assert (w.input_tokens[1], w.output_tokens[1]) == (50, 385)
    # a short run never rounds a request to 0 tokens: 13 x 0.01 = 0.13 -> 1
    tiny = burst_of_profile("sharegpt", 1, 0.01 * inp.mean() + 1, 1)
    assert tiny.input_tokens.min() >= 1 and tiny.output_tokens.min() >= 1


def test_unknown_profile_and_lengths_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="unknown length profile 'lmsys'"):
        profile_lengths("lmsys")
    with pytest.raises(InvalidInputError, match="at least 1"):
        burst_of_profile("sharegpt", 0, 200, 200)


def test_unknown_lengths_column_names_the_row(tmp_path) -> None:
    src = load_rows_header_row(tmp_path, lengths="lmsys")
    with pytest.raises(InvalidInputError, match="row 9: lengths 'lmsys' is not known"):
        load_rows(src)


def load_rows_header_row(tmp_path, lengths: str):
    p = tmp_path / "rows.csv"
    p.write_text(
        "id,model,hardware,weights,kv,batch,prompt,gen,tp,metric,value,engine,burst,lengths\n"
        f"9,llama-3.1-8b,h100-sxm,bf16,bf16,1000,215,198,1,throughput_tokens_per_s,5000,vllm,1,"
        f"{lengths}\n"
    )
    return p


def test_a_burst_with_spread_lengths_lasts_longer_than_one_of_equal_requests() -> None:
    """The same 1,000 requests at the same means: with ShareGPT's spread the run waits for its
    longest outputs on a thinning batch, so its output throughput is lower than that of equal
    requests (which the static estimate gives)."""
    row = Row(
        id="t1", model="llama-3.1-8b", hardware="h100-sxm", weights="bf16", kv="bf16",
        batch=1000, prompt=215, gen=198, tp=1, metric="throughput_tokens_per_s", value=5000.0,
        engine="vllm 0.11.0", burst=True, lengths="sharegpt",
    )  # fmt: skip
    served = predict(row).predicted
    fixed = predict(dataclasses.replace(row, lengths="fixed")).predicted
    assert served is not None and fixed is not None
    assert served < 0.9 * fixed


def test_sglang_schedules_prefill_first() -> None:
    """sglang 0.4.3.post2 and 0.5.3: get_next_batch_to_run runs a prefill batch whenever one is
    ready, and enable_mixed_chunk is False: prompts never share a step with decodes."""
    name = engine_default(load_engine("sglang"))
    assert name == "continuous+prefix"
    assert POLICIES[name].prefill == "prefill-first" and POLICIES[name].prefix_caching
