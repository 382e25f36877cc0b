"""Every prediction command's JSON starts with the header of docs/json.md, in one shape."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

COMMANDS = {
    "estimate": ["estimate", "llama-3.1-8b", "--batch", "1"],
    "kv": ["kv", "llama-3.1-8b", "mistral-7b-v0.1"],
    "speculate": ["speculate", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--k", "2"],
    "diffusion": ["diffusion", "llada-8b"],
    "serve": ["serve", "tiny-llama-30m", "--requests", "10"],
    "serve --compare": [
        "serve",
        "tiny-llama-30m",
        "--requests",
        "10",
        "--compare",
        "static,continuous",
    ],
    "estimate datasheet": ["estimate", "llama-3.1-8b", "--batch", "1", "--ceiling", "datasheet"],
}


def _documents(out: str) -> list[dict]:
    d = json.loads(out)
    return d if isinstance(d, list) else [d]


@pytest.mark.parametrize("name", COMMANDS)
def test_header_keys_and_shapes(name: str, capsys) -> None:
    code, out, err = run_cli(capsys, *COMMANDS[name], "--json")
    assert code == 0, err
    for d in _documents(out):
        assert isinstance(d["model"], str) and isinstance(d["hardware"], str)
        assert d["ceiling"] in ("datasheet", "achievable")
        assert d["engine"] is None or isinstance(d["engine"], str)
        assert (d["engine"] is None) == (d["ceiling"] == "datasheet")
        assert set(d["precision"]) == {"weights", "activations", "kv", "compute"}
        assert {"tp", "pp", "ep", "replicas", "gpus"} <= set(d["parallel"])


def test_serve_has_one_shape_with_or_without_compare(capsys) -> None:
    _, one, _ = run_cli(capsys, *COMMANDS["serve"], "--json")
    _, two, _ = run_cli(capsys, *COMMANDS["serve --compare"], "--json")
    a, b = json.loads(one), json.loads(two)
    assert len(a["runs"]) == 1 and [r["policy"] for r in b["runs"]] == ["static", "continuous"]
    assert a["workload"] == b["workload"] and a["runs"][0]["policy"] == a["policy"]
