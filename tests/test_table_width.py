"""Every table at 80 columns keeps every number and name whole: rendered at 80 and at 400
columns, the 80-column output holds each word of the wide one, no line is longer than 80
and nothing is cut to an ellipsis."""

from __future__ import annotations

import json
import re

import pytest

from roofline.cli import common, main

RESULTS = {
    "schema_version": 1,
    "suite": "ci",
    "complete": True,
    "environment": {
        "device": {"kind": "cpu", "name": "test CPU"},
        "torch_version": "2",
        "python_version": "CPython 3",
        "threads": 1,
        "started_at": "t0",
        "finished_at": "t1",
    },
    "points": [
        {
            "family": "gemm_peak",
            "kernel": "gemm",
            "name": "gemm_peak gemm fp32 M=64",
            "dtype": "fp32",
            "shape": {"M": 64, "N": 64, "K": 64},
            "flops": 524288,
            "bytes": 49152,
            "timing": {
                "median_s": 1e-3,
                "p20_s": 9e-4,
                "p80_s": 1.1e-3,
                "min_s": 8e-4,
                "repeats": 5,
                "method": "perf_counter",
            },
        }
    ],
}

COMMANDS = [
    ["estimate", "--batch", "1,16,64"],
    ["estimate", "deepseek-v3", "-H", "h200", "--tp", "8", "--weights", "fp8", "--batch", "1"],
    ["estimate", "--batch", "1", "--breakdown"],
    ["kv", "llama-3.1-8b", "deepseek-v2-lite", "mamba-2.8b", "jamba-v0.1"],
    ["speculate", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--k", "1..4"],
    ["diffusion"],
    ["serve", "--requests", "40"],
    ["serve", "--requests", "40", "--compare", "static,continuous,chunked"],
    ["hardware", "list"],
    ["models", "list"],
    ["engines", "list"],
    ["plot", "batch", "llama-3.1-8b", "mistral-7b-v0.1", "-H", "h100-sxm", "-H", "l4"],
    ["validate", "{results}", "-H", "h100-sxm", "--tolerance", "1e6"],
]


def _render(capsys: pytest.CaptureFixture[str], argv: list[str], width: int) -> str:
    console = common.console
    old = console.width
    console.width = width
    try:
        main(argv)
    except SystemExit as e:
        assert not e.code, capsys.readouterr().err
    finally:
        console.width = old
    return capsys.readouterr().out


def _words(text: str) -> set[str]:
    return set(re.findall(r"[\w.,%/×+±–-]+", text)) - {"-", "–"}


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: "-".join(a[:2]))
def test_tables_fit_80_columns(argv, tmp_path, capsys):
    results = tmp_path / "r.json"
    results.write_text(json.dumps(RESULTS), encoding="utf-8")
    argv = [a.replace("{results}", str(results)) for a in argv]
    wide = _render(capsys, argv, 400)
    narrow = _render(capsys, argv, 80)
    assert "…" not in narrow
    assert max(len(line.rstrip()) for line in narrow.splitlines()) <= 80
    lost = _words(wide) - _words(narrow)
    assert not lost, f"cut at 80 columns: {sorted(lost)[:10]}"


@pytest.mark.parametrize(
    "value,text",
    [
        (2.5, "2.5 s"),
        (1.2e-3, "1.2 ms"),
        (34e-6, "34 µs"),
        (6.95e-9, "6.95 ns"),
        (6.95e-12, "6.95 ps"),
        (0.0, "0 s"),
        (999.9e-9, "1 µs"),
        (999.96e-3, "1 s"),
    ],
)
def test_every_time_has_an_si_prefix(value, text):
    from roofline.units import seconds

    assert seconds(value) == text
