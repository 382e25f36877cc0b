"""`estimate`: phase metrics by their definitions, the grid API, JSON, and the CLI's refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import run_cli

from roofline.calc.cost import decode_step_s, prefill_s
from roofline.calc.phases import estimate
from roofline.calc.stack import Stack
from roofline.spec.catalog import load_hardware, load_model
from roofline.spec.precision import Precision


def test_metrics_follow_their_definitions():
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    P, G = 512, 64
    e = estimate(m, Stack.resolve(m, hw, ceiling="datasheet"), [1, 8], prompt=P, gen=G)
    for c in e.cases:
        assert c.ttft_s == pytest.approx(float(prefill_s(m, hw, c.batch, P, ceiling="datasheet")))
        # TPOT averages the G-1 decode steps, step j seeing S = P + j - 1 cached tokens
        steps = [
            float(decode_step_s(m, hw, c.batch, P + j - 1, ceiling="datasheet"))
            for j in range(1, G)
        ]
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
    code, out, _ = run_cli(
        capsys, "estimate", "llama-2-7b", "--hardware", "H100", "--batch", "1,4", "--json"
    )
    assert code == 0
    data = json.loads(out)
    assert {"model", "hardware", "ceiling", "cases"} <= set(data)
    assert data["model"] == "llama-2-7b" and data["hardware"] == "h100-sxm"
    assert [c["batch"] for c in data["cases"]] == [1, 4]
    keys = {
        "batch",
        "prompt_tokens",
        "gen_tokens",
        "weights_bytes",
        "kv_cache_bytes",
        "memory_bytes",
        "fits",
        "ttft_s",
        "tpot_s",
        "e2e_s",
        "decode_tokens_per_s",
        "throughput_tokens_per_s",
    }
    assert all(keys <= set(c) for c in data["cases"])


def test_datasheet_ceiling_is_said(capsys):
    code, out, _ = run_cli(capsys, "estimate", "llama-2-7b", "--ceiling", "datasheet", "--json")
    assert code == 0 and json.loads(out)["ceiling"] == "datasheet"


@pytest.mark.parametrize(
    "args, message",
    [
        (["estimate", "llama-9"], "unknown model 'llama-9'"),
        (["estimate", "llama-2-7b", "--hardware", "h1000"], "did you mean"),
        (["estimate", "llama-2-7b", "--batch", "0"], "batch size must be at least 1"),
        (["estimate", "llama-2-7b", "--batch", "-4"], "at least 1"),
        (["estimate", "llama-2-7b", "--batch", "one"], "comma-separated integers"),
        (["estimate", "llama-2-7b", "--prompt", "-5"], "--prompt must be at least 1"),
        (["estimate", "llama-2-7b", "--gen", "0"], "--gen must be at least 1"),
        (["estimate", "llama-2-7b", "--dtype", "fp5"], "unknown dtype 'fp5'"),
        (["estimate", "llama-2-7b", "--ceiling", "magic"], "unknown ceiling"),
        (["estimate", "llama-2-13b", "--batch", "256", "--require-fit"], "batch 256 needs"),
        # 70,553,706,496 params · 2 B = 141.1 GB > 0.9 · 85.52 GB; over TP 2 each GPU holds ~70.6 GB
        (
            ["estimate", "llama-3.1-70b", "--batch", "1", "--require-fit"],
            "smallest that fits batch 1: --tp 2",
        ),
        (["estimate", "llama-2-7b", "--memory-fraction", "1.5"], "--memory-fraction must be in"),
        (["estimate", "llama-2-7b", "--prefill-token-budget", "-1"], "--prefill-token-budget"),
        (
            ["estimate", "llama-2-7b", "--hardware", "a100-sxm-80gb", "--dtype", "fp8"],
            "no fp8 compute",
        ),
        (["hardware", "show", "nope"], "unknown hardware 'nope'"),
    ],
)
def test_bad_input_is_one_clear_line(args, message, refused):
    refused(args, message)


def test_broken_and_invalid_yaml_name_the_file_and_field(capsys, tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\n  layers: [1, 2\n")
    code, _, err = run_cli(capsys, "estimate", str(broken))
    assert code == 1 and str(broken) in err and "broken YAML" in err
    invalid = tmp_path / "neg.yaml"
    invalid.write_text(
        (load_model("llama-2-7b").model_dump_json()).replace('"layers":32', '"layers":-32')
    )
    code, _, err = run_cli(capsys, "estimate", str(invalid))
    assert code == 1 and "field 'layers'" in err and len(err.strip().splitlines()) == 1


def test_user_spec_folder_by_option_and_environment(capsys, tmp_path, monkeypatch):
    folder = tmp_path / "mine" / "model_specs"
    folder.mkdir(parents=True)
    spec = load_model("llama-2-7b").model_dump(mode="json") | {
        "name": "my-7b",
        "aliases": ["My 7B"],
        "layers": 16,
    }
    import yaml

    (folder / "my-7b.yaml").write_text(yaml.safe_dump(spec))
    code, out, _ = run_cli(
        capsys, "models", "list", "--json", "--specs-dir", str(tmp_path / "mine")
    )
    assert code == 0 and "my-7b" in [m["name"] for m in json.loads(out)]
    monkeypatch.setenv("ROOFLINE_SPECS_PATH", str(tmp_path / "mine"))
    code, out, _ = run_cli(capsys, "estimate", "My 7B", "--json")
    assert code == 0 and json.loads(out)["model"] == "my-7b"


def test_precision_changes_bytes_not_flops():
    m, hw = load_model("llama-2-7b"), load_hardware("h100-sxm")
    a = estimate(
        m, Stack.resolve(m, hw, Precision.uniform("bf16"), "datasheet"), [1], 128, 2
    ).cases[0]
    b = estimate(m, Stack.resolve(m, hw, Precision.uniform("fp8"), "datasheet"), [1], 128, 2).cases[
        0
    ]
    # an fp8 checkpoint keeps its ends 16-bit (ModelOpt, llm-compressor): half the bytes of
    # bf16 plus the embedding and LM head (2 · 32,000 · 4,096) and the norms
    # (32 · 2 · 4,096 + 4,096) at their second byte: 6,738,415,616 + 262,410,240
    ends = 2 * 32_000 * 4_096 + 32 * 2 * 4_096 + 4_096
    assert b.weights_bytes == a.weights_bytes / 2 + ends == 7_000_825_856
    assert b.tpot_s < a.tpot_s
    # every group at fp8 (the "params x bits" arithmetic): exactly half
    c = estimate(
        m, Stack.resolve(m, hw, Precision.everywhere("fp8", "fp8", "fp8"), "datasheet"), [1], 128, 2
    ).cases[0]
    assert c.weights_bytes == a.weights_bytes / 2


@pytest.mark.parametrize(
    "model, hw", [("llama-2-13b", "h100-sxm"), ("llama-3.1-70b", "h200"), ("qwen2.5-7b", "l4")]
)
def test_max_batch_is_the_fitting_edge(model, hw):
    m, dev = load_model(model), load_hardware(hw)
    e = estimate(m, Stack.resolve(m, dev), [1], prompt=1024, gen=256)
    if e.max_batch == 0:
        assert not e.cases[0].fits
        return
    edge = estimate(m, e.stack, [e.max_batch, e.max_batch + 1], prompt=1024, gen=256)
    assert [c.fits for c in edge.cases] == [True, False]


@pytest.mark.parametrize(
    "args, message",
    [
        (["hardware", "show"], "Missing argument"),
        (["estimate", "--batchh", "3"], "No such option: --batchh"),
        (["no-such-command"], "No such command"),
    ],
)
def test_usage_errors_are_one_line_too(capsys, args, message):
    code, _, err = run_cli(capsys, *args)
    assert code == 2  # click's usage-error status
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err
    assert "Traceback" not in err


# ---- what fits: an answer, not an error -----------------------------------------------------
L13, D13, F13, V13 = 40, 5120, 13824, 32000  # Llama-2-13B: layers, model dim, MLP width, vocab
W13 = 13_015_864_320 * 2  # bf16 weights, B
KV13_PER_TOKEN = 2 * L13 * 40 * 128 * 2  # K and V · 40 layers · 40 heads · 128 · 2 B = 819,200 B
H100_BYTES = 81_559 * 2**20  # nvidia-smi memory.total of an H100 80GB HBM3 = 85,520,809,984 B


def act13(tokens: int, seqs: int) -> int:
    """Largest step's activations: tokens · (2D + 3F) · 2 B (the gated FFN's gate-and-up 2F
    beside the activation's F) + seqs · V · 12 B (fp32 logits, softmax and log-softmax)."""
    return tokens * (2 * D13 + 3 * F13) * 2 + seqs * V13 * 12


def test_seed_claim_5_comes_out_of_estimate(capsys):
    """Seed claim 5: Llama-2-13B at batch 256 and 1024 cached tokens needs ≈240.8 GB, beyond one
    H100. By hand: 26.03 GB weights + 256 · 1024 · 819,200 B = 214.75 GB of KV = 240.78 GB,
    + activations of an 8,192-token prefill chunk (8192 · 51,712 · 2 B = 847.2 MB) and 256
    rows of fp32 sampling (256 · 32,000 · 12 B = 98.3 MB) = 241.73 GB when decoding starts; at
    the end of 256 generated tokens the KV is 256 · 1280 · 819,200 B = 268.4 GB, 295.4 GB in
    all."""
    code, out, _ = run_cli(
        capsys,
        "estimate",
        "llama-2-13b",
        "--hardware",
        "h100-sxm",
        "--batch",
        "1,64,256",
        "--prompt",
        "1024",
        "--ceiling",
        "datasheet",
        "--json",
    )
    assert code == 0
    data = json.loads(out)
    row = data["cases"][2]
    assert row["batch"] == 256 and row["fits"] is False
    at_prompt = W13 + 256 * 1024 * KV13_PER_TOKEN + act13(8192, 256)
    assert at_prompt == 241_725_646_848
    assert row["memory_bytes_per_gpu_at_prompt"] == at_prompt
    seed_bytes = W13 + 256 * 1024 * KV13_PER_TOKEN  # weights + KV, the seed's sum
    assert seed_bytes / 1e9 == pytest.approx(240.78, abs=0.01)
    # the tool's figure is the seed's sum plus the step's activations (0.95 GB, 0.4%)
    assert row["memory_bytes_per_gpu_at_prompt"] - seed_bytes == act13(8192, 256)
    assert row["memory_bytes_per_gpu_at_prompt"] / 1e9 == pytest.approx(240.8, rel=5e-3)
    assert row["memory_bytes_per_gpu"] == W13 + 256 * 1280 * KV13_PER_TOKEN + act13(8192, 256)
    # the datasheet ceiling keeps the full capacity: no reserve
    assert data["memory"]["usable_bytes"] == data["memory"]["capacity_bytes"] == H100_BYTES
    # largest batch at 1280 tokens: (85,520,809,984 − 26,031,728,640 − 847.2 MB chunk)
    # / (1280 · 819,200 B + 384,000 B of sampling) = 55.9 → 55
    per_seq = 1280 * KV13_PER_TOKEN + V13 * 12
    assert data["max_batch"] == (H100_BYTES - W13 - act13(8192, 0)) // per_seq == 55
    assert data["memory"]["binding"] == "KV"
    short = data["does_not_fit"]
    assert short["batch"] == 256 and short["needs_bytes"] == row["memory_bytes_per_gpu"]
    # 295.1 GB over TP 4: a quarter of the 40 kv heads and of the matrices per GPU, ~80 GB
    assert short["smallest_fit"] == {"tp": 4, "pp": 1, "ep": 1}


def test_a_sweep_shows_every_row_and_exits_zero(capsys):
    batches = [2**i for i in range(11)]  # 1, 2, 4, …, 1024
    code, out, err = run_cli(
        capsys, "estimate", "llama-2-13b", "--batch", ",".join(map(str, batches))
    )
    assert code == 0 and err == ""
    for b in batches:
        assert f"\n│ {b:>5} │" in out
    # achievable ceiling under vLLM: usable = 0.9 · 85,520,809,984 B = 76,968,728,985.6 B,
    # less its profile run (8,192 tokens over 1,024 sequences: 847.2 MB + 393.2 MB), whatever
    # the batch: (76.97e9 − 26.03e9 − 1,240.4 MB) / (1280 · 819,200) = 47.39 → 47
    usable = 0.9 * H100_BYTES
    expected = int((usable - W13 - act13(8192, 1024)) // (1280 * KV13_PER_TOKEN))
    assert expected == 47
    assert f"largest batch that fits at 1,280 tokens: {expected} (binding: KV)" in out
    assert "does not fit: batch 1024 needs" in out and "--tp" in out
    code, _, err = run_cli(capsys, "estimate", "llama-2-13b", "--batch", "1,1024", "--require-fit")
    assert code == 1 and "batch 1024 needs" in err and err.count("\n") == 1


def test_weights_that_do_not_fit_are_said_and_name_the_tp(capsys):
    """Llama-3.1-70B: 70,553,706,496 params · 2 B = 141.1 GB of weights > one H100."""
    code, out, _ = run_cli(capsys, "estimate", "llama-3.1-70b", "--batch", "1", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["max_batch"] == 0 and data["memory"]["binding"] == "weights"
    assert data["does_not_fit"]["weights_do_not_fit"] is True
    assert data["does_not_fit"]["smallest_fit"]["tp"] == 2
    assert data["cases"][0]["fits"] is False
    assert data["cases"][0]["weights_bytes"] == 70_553_706_496 * 2
    code, out, _ = run_cli(capsys, "estimate", "llama-3.1-70b", "--batch", "1")
    out = " ".join(out.split())  # the console wraps long lines
    assert code == 0 and "so no batch fits" in out and "--tp 2" in out


def test_memory_fraction_and_budget_move_the_edge_as_derived():
    m, hw = load_model("llama-2-13b"), load_hardware("h100-sxm")
    # --memory-fraction 0.92 (the seeds' author on H100), no engine: (0.92 · 85.52e9 − 26.03e9
    # − 847.2 MB) / 1,048,960,000 B = 49.4 → 49
    e = estimate(m, Stack.resolve(m, hw, memory_fraction=0.92), [1], 1024, 256)
    assert (
        e.max_batch
        == int((0.92 * H100_BYTES - W13 - act13(8192, 0)) // (1280 * KV13_PER_TOKEN + V13 * 12))
        == 49
    )
    assert e.fit.budget.reserve_bytes == pytest.approx(0.08 * H100_BYTES)
    # No budget: the whole batch's B · 1024 prompt tokens at once, 1024 · 103,424 B more per
    # sequence: (76.97e9 − 26.03e9) / (1,048,960,000 + 1024 · 103,424) = 44.1 → 44
    whole = estimate(m, Stack.resolve(m, hw, prefill_token_budget=None), [1], 1024, 256)
    per_seq = 1280 * KV13_PER_TOKEN + V13 * 12 + 1024 * (2 * D13 + 3 * F13) * 2
    assert whole.max_batch == int((0.9 * H100_BYTES - W13) // per_seq) == 44


def test_past_the_trained_context_is_a_warning(capsys):
    code, out, err = run_cli(capsys, "estimate", "llama-2-7b", "--prompt", "5000", "--json")
    assert code == 0 and json.loads(out)["cases"][0]["prompt_tokens"] == 5000
    assert err.startswith("warning: 5,256 tokens exceed llama-2-7b's trained context of 4,096")


@pytest.mark.parametrize(
    "a, b, expected",
    [
        (80.2e9, 80.0e9, ("80.2 GB", "80 GB")),
        (80.04e9, 79.98e9, ("80.04 GB", "79.98 GB")),  # 3 digits would print 80 GB twice
        (77.0e9, 77.0e9, ("77 GB", "77 GB")),
    ],
)
def test_compared_values_never_round_alike(a: float, b: float, expected) -> None:
    from roofline.units import si_pair

    assert si_pair(a, b, "B") == expected
