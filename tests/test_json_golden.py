"""`estimate`, `kv` and `speculate --json` reproduce the output recorded before the structural
work of issue 15 (mixer families as a tagged union, orchestration moved out of the CLI): one
model of every family and layout, both phases, the datasheet roofline and the default engine.

The fixture is the program's own output, recorded once from the code before the restructuring
(`python tests/test_json_golden.py` rewrites it); re-recorded once since, when a case that does
not fit stopped carrying a cost and energy (null). It certifies nothing about correctness (the
hand-derived tests do that); it catches a restructuring that changes a number. A deliberate
change to the cost model regenerates it in the same commit, and says so.
"""

from __future__ import annotations

import json
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

import pytest
from conftest import run_cli, same_json

FIXTURE = Path(__file__).parent / "fixtures" / "json_golden.json"

#: one model per family / layout the operator decomposition distinguishes
FAMILIES = {
    "dense-mha": "llama-2-7b",
    "gqa": "llama-3.1-8b",
    "mqa-parallel": "falcon-40b",
    "learned-pos-bias": "gpt-j-6b",
    "sliding-window": "gemma-2-9b",
    "qk-norm-local": "gemma-3-12b",
    "cross-layer-kv": "characterai-style-illustrative",
    "mla-moe": "deepseek-v3",
    "mla-lite": "deepseek-v2-lite",
    "moe": "mixtral-8x7b",
    "moe-sinks": "gpt-oss-20b",
    "chunked-moe": "llama-4-scout",
    "mamba1": "mamba-2.8b",
    "mamba2": "mamba2-2.7b",
    "hybrid-ssm-moe": "jamba-v0.1",
    "linear-attention": "minimax-text-01",
    "diffusion": "llada-8b",
}

RUNS: dict[str, tuple[str, ...]] = {}
for tag, model in FAMILIES.items():
    RUNS[f"estimate-{tag}"] = (
        "estimate", model, "--batch", "1,16", "--prompt", "512", "--gen", "128",
        "--ceiling", "datasheet", "--breakdown",
    )  # fmt: skip
    RUNS[f"kv-{tag}"] = ("kv", model, "--context", "32768")
RUNS["estimate-engine-vllm"] = ("estimate", "llama-3.1-8b", "--batch", "1,64", "--engine", "vllm")
RUNS["estimate-engine-hf"] = (
    "estimate", "llama-2-7b", "--hardware", "a100-sxm-80gb", "--engine", "hf-transformers",
    "--breakdown",
)  # fmt: skip
RUNS["estimate-tp4-int4"] = (
    "estimate", "llama-3.1-70b", "--tp", "4", "--weights", "int4", "--batch", "1,32",
    "--engine", "tensorrt-llm",
)  # fmt: skip
RUNS["estimate-moe-ep"] = ("estimate", "qwen3-30b-a3b", "--batch", "8", "--dtype", "fp8")
RUNS["kv-fp8"] = ("kv", "llama-3.1-70b", "--kv-format", "fp8", "--context", "8192")
RUNS["speculate-draft"] = (
    "speculate", "llama-3.1-70b", "--draft", "llama-3.2-1b", "--ceiling", "datasheet",
)  # fmt: skip
RUNS["speculate-heads"] = ("speculate", "llama-3.1-8b", "--heads", "0.5", "--batch", "1,8")
RUNS["speculate-mla"] = ("speculate", "deepseek-v3", "--heads", "0.3", "--engine", "sglang")


def _json(capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> object:
    """The JSON of a run; estimates without their intervals (`--interval 0`), the keys the
    fixture recorded (test_intervals.py checks what the intervals add)."""
    hide = ("--interval", "0") if args[0] in ("estimate", "speculate") else ()
    code, out, err = run_cli(capsys, *args, *hide, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("name", RUNS)
def test_json_unchanged(capsys: pytest.CaptureFixture[str], name: str) -> None:
    assert same_json(_json(capsys, RUNS[name]), json.loads(FIXTURE.read_text())[name])


def test_same_json_tells_a_changed_number_from_a_reordered_sum() -> None:
    assert same_json({"a": [0.1 + 0.2, 1]}, {"a": [0.3, 1]})
    assert not same_json({"a": [0.3, 1]}, {"a": [0.3001, 1]})
    assert not same_json({"a": 1.0}, {"a": 1.0, "b": 2})
    assert not same_json([1.0, "x"], [1.0, "y"])


if __name__ == "__main__":  # rewrite the fixture from the code as it is now
    from roofline.cli import main

    recorded = {}
    for name, args in RUNS.items():
        buf = StringIO()
        with redirect_stdout(buf):
            try:
                main(
                    [
                        *args,
                        *(("--interval", "0") if args[0] in ("estimate", "speculate") else ()),
                        "--json",
                    ]
                )
            except SystemExit as e:
                assert not e.code, name
        recorded[name] = json.loads(buf.getvalue())
    FIXTURE.write_text(json.dumps(recorded, indent=1) + "\n")
