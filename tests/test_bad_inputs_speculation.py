"""Speculative serving on every surface it meets: each run either answers, with every number
in its JSON finite and the drafts' counts consistent, or refuses in one `error:` line with exit
1. No traceback, no hang, no silent nonsense."""

from __future__ import annotations

import json
import math

import pytest
from conftest import run_cli

SPEC = ("--speculate", "3", "--draft", "llama-3.2-1b")
HEADS = ("--speculate", "2", "--heads", "0.2")
SMALL = ("--requests", "30")

ANSWERS = {
    "k-64": ("llama-3.1-8b", "--speculate", "64", "--heads", "0.1", *SMALL),
    "disaggregated": ("llama-3.1-8b", *SPEC, "--policy", "disaggregated", *SMALL),
    "replicas": ("llama-3.1-8b", *SPEC, "--replicas", "2", "--router", "least-loaded", *SMALL),
    "no-engine": ("llama-3.1-8b", *SPEC, "--engine", "none", *SMALL),
    "datasheet": ("llama-3.1-8b", *SPEC, "--ceiling", "datasheet", *SMALL),
    "compare": ("llama-3.1-8b", *SPEC, "--compare", "continuous,chunked,decode-first", *SMALL),
    "closed-loop": ("llama-3.1-8b", *SPEC, "--max-concurrency", "4", *SMALL),
    "pressure-recompute": (
        "llama-3.1-8b", *SPEC, "--memory-fraction", "0.3", "--requests", "150", "--rate", "50",
    ),
    "pressure-swap": (
        "llama-3.1-8b", *SPEC, "--memory-fraction", "0.3", "--preemption", "swap",
        "--requests", "150", "--rate", "50",
    ),
    "contiguous": ("llama-3.1-8b", *HEADS, "--kv-layout", "contiguous", "--policy", "chunked",
                   *SMALL),
    "tp-pp": ("llama-3.1-70b", *SPEC, "--tp", "4", "--pp", "2", *SMALL),
    "window": ("gemma-2-9b", *HEADS, "--hardware", "h200", *SMALL),
    "ssm": ("mamba-2.8b", *HEADS, "--hardware", "h200", *SMALL),
    "hybrid": ("jamba-v0.1", *HEADS, "--hardware", "h200", "--weights", "fp8", *SMALL),
    "mla-mtp": ("deepseek-v3", "--speculate", "1", "--mtp", "--hardware", "h200", "--tp", "8",
                *SMALL),
    "eagle": ("llama-3.1-8b", "--speculate", "4", "--eagle", *SMALL),
    "self-draft": ("llama-3.1-8b", "--speculate", "3", "--draft", "llama-3.1-8b", *SMALL),
    "one-token-outputs": ("llama-3.1-8b", *HEADS, "--output-tokens", "1", "--lengths", "fixed",
                          *SMALL),
    "at-max-context": ("llama-3.1-8b", *HEADS, "--lengths", "fixed", "--input-tokens", "131000",
                       "--output-tokens", "72", "--requests", "3"),
    "always-accept": ("llama-3.1-8b", *HEADS, "--acceptance", "1", *SMALL),
    "never-accept": ("llama-3.1-8b", *HEADS, "--acceptance", "0", *SMALL),
    "spread": ("llama-3.1-8b", *HEADS, "--acceptance", "0.5", "--acceptance-sd", "0.49", *SMALL),
}  # fmt: skip

REFUSALS = {
    "unknown-draft": (("llama-3.1-8b", "--speculate", "3", "--draft", "nosuch"), "unknown model"),
    "chunked-attention": (("llama-4-scout", *HEADS, "--hardware", "h200"), "chunked attention"),
    "diffusion": (("llada-8b", *HEADS), "diffusion LM"),
    "ep-with-tp": (
        ("mixtral-8x7b", *HEADS, "--hardware", "h200", "--ep", "2", "--tp", "2"),
        "not modelled",
    ),
    "nan-spread": (("llama-3.1-8b", *HEADS, "--acceptance-sd", "nan"), "--acceptance-sd"),
    "spread-at-zero": (
        ("llama-3.1-8b", *HEADS, "--acceptance", "0", "--acceptance-sd", "0.1"),
        "no distribution",
    ),
    "eagle-of-moe": (("mixtral-8x7b", "--speculate", "2", "--eagle"), "EAGLE head"),
    "mtp-without-module": (("llama-3.1-8b", "--speculate", "2", "--mtp"), "multi-token"),
    "k-65": (("llama-3.1-8b", "--speculate", "65", "--heads", "0.1"), "--speculate"),
    "negative-heads": (("llama-3.1-8b", "--speculate", "2", "--heads", "-1"), "--heads"),
    "sd-without-speculate": (("llama-3.1-8b", "--acceptance-sd", "0.1"), "add --speculate"),
    "eagle-without-speculate": (("llama-3.1-8b", "--eagle"), "add --speculate"),
}


def _numbers(obj: object):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _numbers(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _numbers(v)
    elif isinstance(obj, int | float) and not isinstance(obj, bool):
        yield obj


@pytest.mark.parametrize("name", ANSWERS)
def test_speculative_serving_answers_with_finite_consistent_numbers(capsys, name):
    code, out, err = run_cli(capsys, "serve", *ANSWERS[name], "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert all(math.isfinite(x) for x in _numbers(doc))
    for run in doc["runs"]:
        s = run["speculation"]
        assert s["accepted_tokens"] <= s["drafted_tokens"] == s["k"] * s["verifications"]
        if s["verifications"]:
            assert 1 <= s["tokens_per_verification"] <= s["k"] + 1
        assert run["requests_completed"] == run["requests"]


@pytest.mark.parametrize("name", REFUSALS)
def test_speculative_serving_refuses_in_one_line(refused, name):
    args, says = REFUSALS[name]
    refused(["serve", *args], says)
