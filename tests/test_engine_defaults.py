"""The engine's scheduler limits as the engine sets them by device (vLLM V1: 1,024 sequences
and 8,192 tokens a step on a GPU of >= 70 GiB that is not an A100, else 256 and 2,048;
vllm/engine/arg_utils.py), one cap for `estimate --batch max` and for `serve`."""

from __future__ import annotations

import pytest
from conftest import run_cli

from roofline.calc.memory import batch_fit
from roofline.calc.stack import Stack
from roofline.serve.policy import policy
from roofline.spec.catalog import load_engine, load_hardware, load_model


@pytest.mark.parametrize(
    ("device", "seqs", "tokens"),
    [
        # 80 GiB = 85,899,345,920 B >= 70 GiB, but the name holds "a100": the small limits
        ("a100-sxm-80gb", 256, 2048),
        # 80 GiB and an H100: the large ones
        ("h100-sxm", 1024, 8192),
        # 48 GiB < 70 GiB
        ("l40s", 256, 2048),
        # 192 GB MI300X: 192 GiB >= 70, no A100 in the name
        ("mi300x", 1024, 8192),
    ],
)
def test_vllm_limits_follow_the_device(device: str, seqs: int, tokens: int) -> None:
    m, hw = load_model("llama-3.1-8b"), load_hardware(device)
    s = Stack.resolve(m, hw, engine=load_engine("vllm"))
    assert s.memory.max_num_seqs == seqs
    assert s.memory.prefill_token_budget == tokens
    # serve's replica takes the same cap: one cap, the engine's
    assert policy("engine", s.engine).on(s.memory).seqs == seqs


def test_batch_max_on_a100_is_bound_by_vllms_256(capsys) -> None:
    """Llama-3.1-8B in bf16 on an A100-SXM-80GB: KV per token = 2 (K, V) x 32 layers x 8 kv
    heads x 128 x 2 B = 131,072 B. At 512 + 128 = 640 tokens a sequence holds 83.9 MB, so 256
    sequences need 21.5 GB beside 16.06 GB of weights: 37.5 GB, well inside 0.9 x 85.9 GB =
    77.3 GB. Memory would hold more; vLLM runs 256. The CLI's default 1,024 + 256 tokens:
    256 x 1,280 x 131,072 B = 42.9 GB + 16.06 GB = 59.0 GB, inside too."""
    m, hw = load_model("llama-3.1-8b"), load_hardware("a100-sxm-80gb")
    s = Stack.resolve(m, hw, engine=load_engine("vllm"))
    fit = batch_fit(m, s, 640, 512)
    assert 256 * 640 * 131_072 + 16.06e9 < 0.9 * 80 * 2**30
    assert fit.max_batch > 256
    assert fit.runnable == 256 and fit.runnable_binding == "max_num_seqs"
    assert 256 * 1280 * 131_072 + 16.06e9 < 0.9 * 80 * 2**30
    code, out, _ = run_cli(
        capsys, "estimate", "llama-3.1-8b", "-H", "a100-sxm-80gb", "--batch", "max"
    )
    assert code == 0 and "batch max = 256" in out and "max_num_seqs (256" in out


def test_engine_at_a_version_on_the_command_line(capsys) -> None:
    """`--engine vllm@0.6.3` is vLLM's V0 range (vllm==0.6.3 arg_utils.py:115, max_num_seqs
    256, whole prompts): on an H100, where vLLM >= 0.10 runs 1,024 sequences, `--batch max`
    of a model that fits thousands (Llama-3.2-1B at 1,280 tokens) stops at 256; the JSON
    names the release asked for by the flag that gives it back (its range's behaviour, its own
    number for the kernel tables); `engines list` shows the ranges; a
    version that is not one is one line."""
    import json

    args = ("estimate", "llama-3.2-1b", "-H", "h100-sxm", "--batch", "max", "--json")
    code, out, _ = run_cli(capsys, *args, "--engine", "vllm@0.6.3")
    d = json.loads(out)
    assert code == 0 and d["cases"][0]["batch"] == 256 and d["engine"] == "vllm@0.6.3"
    code, out, _ = run_cli(capsys, *args)
    assert json.loads(out)["cases"][0]["batch"] == 1024  # the newest range
    code, out, _ = run_cli(capsys, "engines", "list", "--json")
    (vllm,) = [e for e in json.loads(out) if e["name"] == "vllm"]
    assert [r["since"] for r in vllm["releases"]] == ["0.0.0", "0.8.0", "0.8.5", "0.10.0"]
    code, _, err = run_cli(capsys, "estimate", "--engine", "vllm@x.y")
    assert code == 1 and "is not a version number" in err and "Traceback" not in err
