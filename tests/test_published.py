"""`roofline validate --published`: reading a published-measurements CSV, reading each metric
the way its source defines it, and gating per row."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from conftest import run_cli

from roofline.calc.phases import estimate
from roofline.calc.placement import Parallel
from roofline.calc.stack import Stack
from roofline.errors import InvalidInputError
from roofline.serve.published import (
    REQUIRED,
    Row,
    bundled_csv,
    load_rows,
    precision_of,
    predict,
    summarise,
)
from roofline.spec.catalog import load_engine, load_hardware, load_model
from roofline.spec.precision import Precision

HEADER = [*REQUIRED, "source", "note", "confidence"]


def _row(**kw) -> Row:
    base = dict(
        id="1",
        model="llama-2-7b",
        hardware="a100-sxm-80gb",
        weights="bf16",
        kv="bf16",
        batch=8,
        prompt=128,
        gen=64,
        tp=2,
        metric="throughput_tokens_per_s",
        value=1000.0,
        engine="vllm 0.8",
        confidence="high",
    )
    return Row(**(base | kw))  # type: ignore[arg-type]


def _csv(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "pub.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=HEADER + ["band", "band_note"])
        w.writeheader()
        for r in rows:
            w.writerow({k: "" for k in HEADER} | r)
    return path


def test_bundled_set_has_every_row_with_a_source() -> None:
    rows = load_rows(bundled_csv())
    assert len(rows) >= 300
    assert all(r.source and r.engine for r in rows)
    # every row has its first sight: an error, or why it could not be predicted then
    assert all(r.first_sight is not None or "not predicted" in r.first_sight_at for r in rows)
    assert all(r.first_sight_at for r in rows)
    # the conventions the data set states: gpt-fast/torchao time the whole generate() call,
    # and so does llmfit (completion tokens / request time); TensorRT-LLM 0.7-0.9 and the
    # GLM-5.1 rows (tok/s/gpu) report throughput per GPU
    assert all(
        r.rate_includes_prefill
        == (r.engine.split()[0] in ("gpt-fast", "torchao") or "llmfit" in r.source)
        for r in rows
        if r.metric == "decode_tokens_per_s"
    )
    assert {r.id for r in rows if r.per_gpu and r.tp > 1} == {
        "135", "136", "145", "146", "1211", "1213", "1215"
    }  # fmt: skip
    assert all(r.band_note for r in rows if r.band is not None)


def test_the_dev_set_covers_the_systems_users_run() -> None:
    """The coverage the issue asks of the dev set, counted from the rows."""
    from roofline.calc.intervals import source_of

    rows = load_rows(bundled_csv())
    amd = {"mi300x", "mi325x", "mi355x", "mi350x", "mi250x", "mi250x-gcd"}
    apple_or_consumer = ("m1", "m2", "m3", "m4", "m5", "apple", "rtx-")

    def new_engine(r) -> bool:  # a 2025-26 source, or an engine release of 2025-26 named
        return r.released[:4] in ("2025", "2026")

    assert len({source_of(r.source) for r in rows}) >= 25
    assert sum(r.tp >= 2 for r in rows) >= 80 and sum(r.tp >= 4 for r in rows) >= 40
    big = [r for r in rows if r.batch >= 64]
    assert len(big) >= 60
    assert any(r.weights.startswith("fp8") for r in big)
    assert any(r.model in ("deepseek-v3", "qwen3-235b-a22b", "gpt-oss-120b") for r in big)
    assert sum(new_engine(r) for r in rows) >= 60
    assert sum(r.engine_profile in ("vllm", "sglang") for r in rows) >= 40
    assert sum(r.hardware in amd for r in rows) >= 20
    assert sum(r.hardware.startswith(apple_or_consumer) for r in rows) >= 15


def test_each_metric_is_read_from_the_estimate() -> None:
    """The same estimate read five ways: throughput per copy B·G/E2E and per GPU (÷ TP),
    TTFT, B·P/TTFT, and the per-sequence decode rate as 1/TPOT or G/E2E."""
    from roofline.serve.published import release_of

    m, hw = load_model("llama-2-7b"), load_hardware("a100-sxm-80gb")
    eng = release_of(_row(), load_engine("vllm"))  # the release the row ran
    c = estimate(
        m, Stack.resolve(m, hw, Precision(), "achievable", eng, Parallel(tp=2)), [8], 128, 64
    ).cases[0]
    e2e = c.ttft_s + 63 * c.tpot_s
    assert predict(_row()).predicted == pytest.approx(8 * 64 / e2e)
    assert predict(_row(per_gpu=True)).predicted == pytest.approx(8 * 64 / e2e / 2)
    assert predict(_row(metric="ttft_s")).predicted == pytest.approx(c.ttft_s)
    assert predict(_row(metric="prefill_tokens_per_s")).predicted == pytest.approx(
        8 * 128 / c.ttft_s
    )
    assert predict(_row(metric="decode_tokens_per_s")).predicted == pytest.approx(1 / c.tpot_s)
    assert predict(
        _row(metric="decode_tokens_per_s", rate_includes_prefill=True)
    ).predicted == pytest.approx(64 / e2e)


def test_signed_error_and_band() -> None:
    p = predict(_row(metric="ttft_s", value=1.0))
    assert p.error == pytest.approx(p.predicted - 1.0)
    assert p.band == 0.30 and predict(_row(confidence="low")).band == 0.50  # MAX_BAND
    # a known gap's own band, but never wider than MAX_BAND (±50%)
    assert predict(_row(band=0.45, band_note="known")).band == 0.45
    assert predict(_row(band=0.9, band_note="known")).band == 0.50


def test_an_open_row_is_held_to_its_first_sight() -> None:
    """A row outside its band now and at first sight is open: the gate passes it while it is
    no further off than at first sight plus 5 points, and fails it beyond."""
    far = dict(value=500.0)  # published at half the rate this row predicts
    e = predict(_row(**far)).error
    assert e is not None and abs(e) > 0.30  # far off: its band is ±30%
    at = predict(_row(**far, first_sight=e, first_sight_at="x"))
    assert at.open and at.gated_ok
    worse = predict(_row(**far, first_sight=e * 0.5, first_sight_at="x"))  # now 2x further off
    assert abs(e * 0.5) > 0.30 and worse.open and not worse.gated_ok
    inside = predict(_row(**far, first_sight=0.1, first_sight_at="x"))  # first seen inside
    assert not inside.open and not inside.gated_ok


def test_a_rows_release_is_its_engines_own_or_unknown() -> None:
    """Kernel tables stand only for the release they were measured on or later, so a row's
    release must be its engine's own: NIM 1.8.0 runs some TensorRT-LLM, not 1.8.0; a row with
    neither a version nor a date names no release at all."""
    from roofline.serve.published import release_of
    from roofline.spec.surfaces import measured_for
    from roofline.units import UNKNOWN_RELEASE

    trt, sgl = load_engine("tensorrt-llm"), load_engine("sglang")
    nim = release_of(_row(engine="nim 1.8.0"), trt)
    assert nim.known_release == UNKNOWN_RELEASE and nim.flag == "tensorrt-llm"
    assert not measured_for(nim.known_release, "1.3.0")
    assert release_of(_row(engine="sglang 0.4.3.post2"), sgl).known_release == "0.4.3"
    assert release_of(_row(engine="sglang"), sgl).known_release == UNKNOWN_RELEASE
    # an engine without release ranges, dated: which release ran then is not known either
    assert release_of(_row(engine="sglang", released="2024-08"), sgl).known_release == (
        UNKNOWN_RELEASE
    )


def test_a_correction_from_evidence_rebases_an_open_rows_hold() -> None:
    """A spec correction from kernel- or datasheet-level evidence that moves an open row
    further off re-bases its hold (`held_at`, with the commit and evidence in `held_why`):
    the gate then holds it to that error, and still fails it beyond."""
    far = dict(value=500.0)
    e = predict(_row(**far)).error
    assert e is not None and abs(e) > 0.30
    # first seen at half today's error: held to its first sight, it fails
    base = dict(**far, first_sight=e * 0.5, first_sight_at="x")
    assert not predict(_row(**base)).gated_ok
    held = predict(_row(**base, held_at=e, held_why="c0ffee: a datasheet correction"))
    assert held.open and held.gated_ok and held.hold == pytest.approx(abs(e))
    tighter = predict(_row(**base, held_at=e * 0.6, held_why="c0ffee"))
    assert not tighter.gated_ok


def test_a_hold_without_its_reason_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "rows.csv"
    p.write_text(
        "id,model,hardware,weights,kv,batch,prompt,gen,tp,metric,value,engine,held_at\n"
        "7,llama-3.1-8b,h100-sxm,bf16,bf16,1,128,128,1,tpot_s,0.01,vllm,+0.5\n"
    )
    with pytest.raises(InvalidInputError, match="row 7: held_at without held_why"):
        load_rows(p)


def test_a_row_runs_on_the_release_it_names_or_its_date() -> None:
    from roofline.serve.published import release_of

    eng = load_engine("vllm")
    assert release_of(_row(engine="vllm 0.6.4.post1"), eng).max_num_seqs == 256  # V0
    assert release_of(_row(engine="vllm 0.8"), eng).release == "0.8.0"
    # no version in the column: the release current at the source's date
    undated = _row(engine="vllm (version not stated)", released="2024-08")
    assert release_of(undated, eng).release == "0.0.0"
    # the newest range, its exact release unknown: its first stands (no newer tables assumed)
    dated = release_of(_row(engine="vllm", released="2026-01"), eng)
    assert dated.release == "" and dated.known_release == eng.newest_since


@pytest.mark.parametrize(
    "weights, kv, engine, expected",
    [
        # weight-only int8, stored the gpt-fast way: the output layer quantised too
        ("int8", "bf16", "gpt-fast", ("int8,lm_head=int8", "bf16", "bf16")),
        (
            "fp8",
            "unknown",
            "tensorrt-llm",
            ("fp8", "fp8", "fp8"),
        ),  # TRT-LLM FP8 recipe: W8A8, fp8 KV
        ("fp8", "bf16", "gpt-fast", ("fp8", "bf16", "bf16")),  # torchao fp8 weight-only
        ("unknown", "unknown", "tensorrt-llm", ("fp16", "fp16", "fp16")),
        ("q4_0", "fp16", "llama.cpp", ("q4_0,lm_head=q6_k", "fp16", "fp16")),  # Q6_K output
    ],
)
def test_row_formats(weights, kv, engine, expected) -> None:
    """The row's formats, stored as its engine stores them (`EngineSpec.formats`, applied once
    by `Stack.resolve` for every command, not only here)."""
    eng = load_engine(engine)
    m = load_model("llama-2-7b")
    stack = Stack.resolve(
        m,
        load_hardware("a100-sxm-80gb"),
        precision_of(_row(weights=weights, kv=kv), eng),
        engine=eng,
    )
    p = stack.precision
    assert (p.weights, p.activations, p.kv) == expected


def test_rows_the_tool_cannot_predict_say_why() -> None:
    p = predict(_row(model="no-such-model"))
    assert p.predicted is None and p.passed is None and "unknown model" in p.why
    s = summarise([p, predict(_row())], "x")
    assert (s.rows, s.predicted) == (2, 1)


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"value": "fast"}, "is not a number"),
        ({"value": "nan"}, "positive number"),
        ({"batch": "-3"}, "whole number"),
        ({"band": "0"}, "positive fraction"),
    ],
)
def test_bad_rows_are_refused(tmp_path: Path, change: dict, needle: str) -> None:
    good = dict(
        id="7",
        model="llama-2-7b",
        hardware="h100-sxm",
        weights="bf16",
        kv="bf16",
        batch="1",
        prompt="5",
        gen="200",
        tp="1",
        metric="decode_tokens_per_s",
        value="120",
        engine="gpt-fast",
    )
    with pytest.raises(InvalidInputError, match=needle):
        load_rows(_csv(tmp_path, [good | change]))


def test_missing_columns_are_named(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("id,model\n1,llama-2-7b\n")
    with pytest.raises(InvalidInputError, match="missing column"):
        load_rows(path)


def test_cli_gates_per_row(tmp_path: Path, capsys) -> None:
    """One row far from its published value fails the gate in one line; --no-gate reports it
    and exits 0; JSON carries every row."""
    far = dict(
        id="9",
        model="llama-2-7b",
        hardware="h100-sxm",
        weights="bf16",
        kv="bf16",
        batch="1",
        prompt="5",
        gen="200",
        tp="1",
        metric="decode_tokens_per_s",
        value="5",
        engine="gpt-fast",
        confidence="high",
    )
    path = _csv(tmp_path, [far])
    code, _, err = run_cli(capsys, "validate", "--published", str(path))
    assert code == 1 and err.count("\n") == 1 and "rows 9" in err
    code, out, _ = run_cli(capsys, "validate", "--published", str(path), "--no-gate", "--json")
    d = json.loads(out)
    assert code == 0 and d["rows"][0]["passed"] is False and d["rows"][0]["error"] > 1


def test_validate_without_results_or_published_is_one_line(refused) -> None:
    refused(["validate"], "--published")
