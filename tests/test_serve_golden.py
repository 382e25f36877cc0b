"""`roofline serve --json` reproduces the output recorded before the serving loop was split into
an allocator, schedulers and a step loop: every policy, prefix caching with and without memory
pressure, both preemption modes (a hybrid model's state swapped too), static batching,
disaggregation and replicas behind a router. Step times are the datasheet roofline's, the
layer least likely to move under the scheduler's feet.

The fixture is the program's own output, recorded once from the code before the restructuring
(`python tests/test_serve_golden.py` rewrites it); a deliberate change to the cost model or the
scheduler regenerates it in the same commit.
"""

from __future__ import annotations

import json
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

import pytest
from conftest import run_cli, same_json

FIXTURE = Path(__file__).parent / "fixtures" / "serve_golden.json"
BASE = (
    "serve", "--requests", "200", "--rate", "40", "--ceiling", "datasheet", "--interval", "0",
    "--json",
)  # fmt: skip
RUNS = {
    "continuous": ("--policy", "continuous"),
    "continuous-contiguous": ("--policy", "continuous", "--kv", "contiguous"),
    "continuous-pressure": ("--policy", "continuous", "--memory-fraction", "0.25"),
    "decode-first-swap": (
        "--policy",
        "decode-first",
        "--memory-fraction",
        "0.25",
        "--preemption",
        "swap",
    ),
    "decode-first": ("--policy", "decode-first"),
    "chunked-pressure": ("--policy", "chunked", "--memory-fraction", "0.25"),
    "chunked-prefix": ("--policy", "chunked+prefix", "--prefix-tokens", "600"),
    "prefix-pressure": (
        "--policy",
        "continuous",
        "--prefix-caching",
        "--prefix-tokens",
        "600",
        "--memory-fraction",
        "0.25",
    ),
    "decode-first-prefix-swap": (
        "--policy",
        "decode-first",
        "--prefix-caching",
        "--prefix-tokens",
        "300",
        "--memory-fraction",
        "0.25",
        "--preemption",
        "swap",
        "--block-size",
        "32",
    ),
    "static": ("--policy", "static", "--max-seqs", "32"),
    "static-pressure": ("--policy", "static", "--memory-fraction", "0.25"),
    "disaggregated": ("--policy", "disaggregated", "--prefill-replicas", "2"),
    "replicas": ("--policy", "continuous", "--replicas", "3", "--router", "least-loaded"),
    "replicas-chunked-swap": (
        "--policy",
        "chunked",
        "--replicas",
        "2",
        "--memory-fraction",
        "0.25",
        "--preemption",
        "swap",
    ),
    "hybrid-state-swap": (
        "jamba-v0.1",
        "--weights",
        "fp8",
        "--preemption",
        "swap",
        "--memory-fraction",
        "0.7",
    ),
    "compare": ("--compare", "continuous,chunked", "--lengths", "uniform", "--arrivals", "fixed"),
}


def _serve(capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> object:
    code, out, err = run_cli(capsys, *BASE, *args)
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("name", RUNS)
def test_serve_json_unchanged(capsys: pytest.CaptureFixture[str], name: str) -> None:
    assert same_json(_serve(capsys, RUNS[name]), json.loads(FIXTURE.read_text())[name])


if __name__ == "__main__":  # rewrite the fixture from the code as it is now
    from roofline.cli import main

    recorded = {}
    for name, args in RUNS.items():
        buf = StringIO()
        with redirect_stdout(buf):
            try:
                main([*BASE, *args])
            except SystemExit as e:
                assert not e.code, name
        recorded[name] = json.loads(buf.getvalue())
    FIXTURE.write_text(json.dumps(recorded, indent=1) + "\n")
