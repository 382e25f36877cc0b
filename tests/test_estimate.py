"""`estimate`: phase metrics by their definitions, the grid API, JSON, and the CLI's refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import run_cli

from roofline.catalog import load_hardware, load_model
from roofline.cost import decode_step_s, prefill_s
from roofline.phases import estimate
from roofline.precision import Precision


def test_metrics_follow_their_definitions():
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    P, G = 512, 64
    e = estimate(m, hw, [1, 8], prompt=P, gen=G, ceiling="datasheet")
    for c in e.cases:
        assert c.ttft_s == pytest.approx(float(prefill_s(m, hw, c.batch, P, ceiling="datasheet")))
        # TPOT averages the G-1 decode steps, step j seeing S = P + j - 1 cached tokens
        steps = [float(decode_step_s(m, hw, c.batch, P + j - 1, ceiling="datasheet"))
                 for j in range(1, G)]
        assert c.tpot_s == pytest.approx(sum(steps) / (G - 1), rel=1e-12)
        assert c.e2e_s == pytest.approx(c.ttft_s + (G - 1) * c.tpot_s)
        assert c.throughput_tokens_per_s == pytest.approx(c.batch * G / c.e2e_s)
        assert c.decode_tokens_per_s == pytest.approx(c.batch / c.tpot_s)
        # KV for P + G tokens per sequence: 2 · 32 layers · 8 kv heads · 128 · 2 B
        assert c.kv_cache_bytes == c.batch * (P + G) * 2 * 32 * 8 * 128 * 2


def test_grid_in_one_call_matches_pointwise():
    m, hw = load_model("llama-2-7b"), load_hardware("a100-sxm-80gb")
    B = np.array([1, 7, 64])
    S = np.array([0, 100, 4000])
    grid = decode_step_s(m, hw, B[:, None], S[None, :])
    assert grid.shape == (3, 3)
    for i, b in enumerate(B):
        for j, s in enumerate(S):
            assert grid[i, j] == pytest.approx(float(decode_step_s(m, hw, int(b), int(s))))




def test_json_output_has_the_documented_keys(capsys):
    code, out, _ = run_cli(capsys, "estimate", "llama-2-7b", "--hardware", "H100",
                           "--batch", "1,4", "--json")
    assert code == 0
    data = json.loads(out)
    assert {"model", "hardware", "ceiling", "cases"} <= set(data)
    assert data["model"] == "llama-2-7b" and data["hardware"] == "h100-sxm"
    assert [c["batch"] for c in data["cases"]] == [1, 4]
    keys = {"batch", "prompt_tokens", "gen_tokens", "weights_bytes", "kv_cache_bytes",
            "memory_bytes", "fits", "ttft_s", "tpot_s", "e2e_s", "decode_tokens_per_s",
            "throughput_tokens_per_s"}
    assert all(keys <= set(c) for c in data["cases"])


def test_datasheet_ceiling_is_said(capsys):
    code, out, _ = run_cli(capsys, "estimate", "llama-2-7b", "--ceiling", "datasheet", "--json")
    assert code == 0 and json.loads(out)["ceiling"] == "datasheet"


@pytest.mark.parametrize("args, message", [
    (["estimate", "llama-9"], "unknown model 'llama-9'"),
    (["estimate", "llama-2-7b", "--hardware", "h1000"], "did you mean"),
    (["estimate", "llama-2-7b", "--batch", "0"], "batch size must be at least 1"),
    (["estimate", "llama-2-7b", "--batch", "-4"], "at least 1"),
    (["estimate", "llama-2-7b", "--batch", "one"], "comma-separated integers"),
    (["estimate", "llama-2-7b", "--prompt", "-5"], "--prompt must be at least 1"),
    (["estimate", "llama-2-7b", "--gen", "0"], "--gen must be at least 1"),
    (["estimate", "llama-2-7b", "--prompt", "5000"], "exceeds llama-2-7b's max context"),
    (["estimate", "llama-2-7b", "--dtype", "fp5"], "unknown dtype 'fp5'"),
    (["estimate", "llama-2-7b", "--ceiling", "magic"], "unknown ceiling"),
    (["estimate", "llama-2-13b", "--batch", "256"], "batch 256 needs"),
    # 70,553,706,496 params · 2 B = 141.1 GB > 80 GB; over TP 2 each GPU holds ~70.6 GB
    (["estimate", "llama-3.1-70b", "--batch", "1"], "smallest that fits batch 1: --tp 2)"),
    (["estimate", "llama-2-7b", "--hardware", "a100-sxm-80gb", "--dtype", "fp8"], "no fp8 compute"),
    (["hardware", "show", "nope"], "unknown hardware 'nope'"),
])
def test_bad_input_is_one_clear_line(args, message, refused):
    refused(args, message)


def test_broken_and_invalid_yaml_name_the_file_and_field(capsys, tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\n  layers: [1, 2\n")
    code, _, err = run_cli(capsys, "estimate", str(broken))
    assert code == 1 and str(broken) in err and "broken YAML" in err
    invalid = tmp_path / "neg.yaml"
    invalid.write_text((load_model("llama-2-7b").model_dump_json()).replace(
        '"layers":32', '"layers":-32'))
    code, _, err = run_cli(capsys, "estimate", str(invalid))
    assert code == 1 and "field 'layers'" in err and len(err.strip().splitlines()) == 1


def test_user_spec_folder_by_option_and_environment(capsys, tmp_path, monkeypatch):
    folder = tmp_path / "mine" / "model_specs"
    folder.mkdir(parents=True)
    spec = load_model("llama-2-7b").model_dump(mode="json") | {
        "name": "my-7b", "aliases": ["My 7B"], "layers": 16}
    import yaml
    (folder / "my-7b.yaml").write_text(yaml.safe_dump(spec))
    code, out, _ = run_cli(capsys, "models", "list", "--json", "--specs-dir",
                           str(tmp_path / "mine"))
    assert code == 0 and "my-7b" in [m["name"] for m in json.loads(out)]
    monkeypatch.setenv("ROOFLINE_SPECS_PATH", str(tmp_path / "mine"))
    code, out, _ = run_cli(capsys, "estimate", "My 7B", "--json")
    assert code == 0 and json.loads(out)["model"] == "my-7b"


def test_precision_changes_bytes_not_flops():
    m, hw = load_model("llama-2-7b"), load_hardware("h100-sxm")
    a = estimate(m, hw, [1], 128, 2, Precision.uniform("bf16"), "datasheet").cases[0]
    b = estimate(m, hw, [1], 128, 2, Precision.uniform("fp8"), "datasheet").cases[0]
    assert b.weights_bytes == a.weights_bytes / 2
    assert b.tpot_s < a.tpot_s


@pytest.mark.parametrize("model, hw", [("llama-2-13b", "h100-sxm"), ("llama-3.1-70b", "h200"),
                                       ("qwen2.5-7b", "l4")])
def test_max_batch_is_the_fitting_edge(model, hw):
    m, dev = load_model(model), load_hardware(hw)
    e = estimate(m, dev, [1], prompt=1024, gen=256)
    if e.max_batch == 0:
        assert not e.cases[0].fits
        return
    edge = estimate(m, dev, [e.max_batch, e.max_batch + 1], prompt=1024, gen=256)
    assert [c.fits for c in edge.cases] == [True, False]


@pytest.mark.parametrize("args, message", [
    (["hardware", "show"], "Missing argument"),
    (["estimate", "--batchh", "3"], "No such option: --batchh"),
    (["no-such-command"], "No such command"),
])
def test_usage_errors_are_one_line_too(capsys, args, message):
    code, _, err = run_cli(capsys, *args)
    assert code == 2  # click's usage-error status
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err
    assert "Traceback" not in err
