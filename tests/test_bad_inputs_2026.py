"""Bad and edge inputs on the surfaces added in the 2026 session (issue 26): serving benchmark
files (`validate --serving`, `serve --from`), closed-loop clients, `plan --max-batches ...,max`,
the MTP drafter, FP4 activations, and the catalog's new entries. Each is one `error:` line, a
non-zero exit, no traceback and no file changed (`test_bad_inputs.refuse`)."""

from __future__ import annotations

import json

import pytest
from test_bad_inputs import bad, refuse  # noqa: F401  # the shared folder of bad files

from roofline.spec.catalog import hardware_catalog, model_catalog

#: benchmark result files that are not one
RESULT_FILES = {
    "BAD/missing.json": "cannot read",
    "BAD/folder.json": "folder",
    "BAD/fifo.json": "not a regular file",
    "BAD/binary.json": "not UTF-8",
    "BAD/latin1.json": "not UTF-8",
    "BAD/results-empty.json": "neither JSON",
    "BAD/results-list.json": "not of InferenceX result rows",
    "BAD/results-broken.json": "not valid JSON",
    "BAD/results-nan.json": "timing.median_s' is NaN, not a measurement",
    "BAD/results-schema.json": "not a result this version reads",
    "BAD/trace.txt": "neither JSON",
}


@pytest.mark.parametrize(("path", "needle"), RESULT_FILES.items())
@pytest.mark.parametrize(
    "argv",
    [
        ["validate", "--serving", "{}", "-H", "h100-sxm"],
        ["serve", "llama-3.2-1b", "--from", "{}"],
    ],
    ids=["validate-serving", "serve-from"],
)
def test_benchmark_files_that_are_not_results(capsys, bad, path, needle, argv):  # noqa: F811
    refuse(capsys, bad, [a.format(path) for a in argv], needle)


VLLM = {
    "backend": "vllm",
    "model_id": "meta-llama/Llama-3.1-8B-Instruct",
    "num_prompts": 4,
    "completed": 4,
    "request_rate": 2.0,
    "total_input_tokens": 2000,
    "total_output_tokens": 400,
    "mean_ttft_ms": 30.0,
    "median_ttft_ms": 28.0,
    "output_throughput": 95.0,
}
BAD_RESULTS = {
    "rate-neg": ({"request_rate": -1}, "finite number >= 0"),
    "rate-zero": ({"request_rate": 0}, "rate must be positive"),
    "rate-text": ({"request_rate": "fast"}, "must be a number"),
    "ttft-neg": ({"mean_ttft_ms": -5}, "finite number >= 0"),
    "ttft-bool": ({"mean_ttft_ms": True}, "must be a number"),
    "ttft-huge": ({"median_ttft_ms": "1e400"}, "'median_ttft_ms' must be a number"),
    "completed-frac": ({"completed": 2.5}, "whole number"),
    "none-completed": ({"completed": 0, "num_prompts": 0}, "no request completed"),
    "prompts-huge": ({"num_prompts": 10**9, "completed": 10**9}, "at most 100,000,000"),
    "conc-zero": ({"max_concurrency": 0}, "concurrency"),
    "conc-text": ({"max_concurrency": "many"}, "must be a number"),
    "lens-zero": ({"input_lens": [0, 1, 1, 1], "output_lens": [1, 1, 1, 1]}, "no tokens"),
    "lens-text": ({"input_lens": "many", "output_lens": [1]}, "list of token counts"),
    "burst-neg": ({"burstiness": -1}, "finite number >= 0"),
    "burst-zero": ({"burstiness": 0}, "'burstiness': burstiness 0; 0.001 to 1000"),
    "tokens-missing": ({"total_input_tokens": None}, "must be a number"),
    "model-unknown": ({"model_id": "no/such-model"}, "unknown model"),
    "too-long": ({"total_input_tokens": 4 * 200_000}, "exceeds"),
}


@pytest.mark.parametrize(("change", "needle"), BAD_RESULTS.values(), ids=list(BAD_RESULTS))
@pytest.mark.parametrize("command", ["validate", "serve"])
def test_benchmark_values_that_cannot_be(capsys, bad, tmp_path, change, needle, command):  # noqa: F811
    doc = {k: v for k, v in (VLLM | change).items() if v is not None}
    f = tmp_path / "r.json"
    f.write_text(json.dumps(doc))
    argv = (
        ["validate", "--serving", str(f), "-H", "h100-sxm"]
        if command == "validate"
        else ["serve", "llama-3.1-8b", "--from", str(f)]
    )
    if command == "serve" and needle == "unknown model":
        return  # serve takes its model from the command line, not the file
    refuse(capsys, bad, argv, needle)


@pytest.mark.parametrize("value", ["0", "-1", "x", "1e9", "", "2.5"])
def test_max_concurrency_values(capsys, bad, value):  # noqa: F811
    refuse(capsys, bad, ["serve", "llama-3.2-1b", "--max-concurrency", value], "concurrency")


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("max,0", "at least 1"),
        ("mx", "integers"),
        ("-1,max", "at least 1"),
        (",", "give at least one"),
        ("max,1e3", "integers"),
        ("1.5", "integers"),
    ],
)
def test_plan_max_batches_values(capsys, bad, value, needle):  # noqa: F811
    refuse(
        capsys,
        bad,
        ["plan", "llama-3.2-1b", "-H", "h100-sxm", "--rate", "1", "--max-batches", value],
        needle,
    )


NO_MTP = sorted(
    s.name for s in model_catalog().load_all() if not s.mtp_layers and s.diffusion is None
)


@pytest.mark.parametrize("model", NO_MTP)
def test_mtp_on_a_model_without_a_module(capsys, bad, model):  # noqa: F811
    refuse(capsys, bad, ["speculate", model, "--mtp"], "no multi-token-prediction module")


NO_FP4 = sorted(s.name for s in hardware_catalog().load_all() if "fp4" not in s.dense_peak_tflops)


@pytest.mark.parametrize("device", NO_FP4)
def test_fp4_activations_on_a_device_without_fp4(capsys, bad, device):  # noqa: F811
    refuse(
        capsys,
        bad,
        ["estimate", "llama-3.2-1b", "-H", device, "--weights", "nvfp4", "--activations", "nvfp4"],
        "no fp4 compute",
    )


@pytest.mark.parametrize(
    ("weights", "activations", "needle"),
    [
        ("int8", "fp8", "different number families"),
        ("int4", "nvfp4", "different number families"),
        ("mxfp6", "nvfp4", "wider than activations"),
        ("bf16", "mxfp4", "wider than activations"),
        ("nvfp4", "nf4", "storage format"),
    ],
)
def test_impossible_fp4_pairs(capsys, bad, weights, activations, needle):  # noqa: F811
    refuse(
        capsys,
        bad,
        ["estimate", "llama-3.2-1b", "-H", "b200", "--weights", weights, "--activations",
         activations],
        needle,
    )  # fmt: skip


def test_an_error_quoting_a_newline_stays_one_line(capsys, bad, tmp_path):  # noqa: F811
    """Found by tests/test_fuzz.py: an engine file whose `name` maps a key holding a newline
    to a huge number made a two-line error (the key was quoted raw). Every RooflineError now
    shows quoted control characters escaped."""
    from roofline.errors import SpecError

    e = SpecError("field 'a\nb\tc\x01': bad")
    assert str(e) == "field 'a\\nb\\tc\\x01': bad"
    f = tmp_path / "engine.yaml"
    f.write_text('name: {"\\n": 100000000000000000000}\n')
    refuse(capsys, bad, ["estimate", "llama-3.2-1b", "--engine", str(f)], "\\n")
