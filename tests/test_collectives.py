"""The collective benchmark harness end to end: 2 gloo ranks on loopback (values sane, not
timed), and the CLI's one-line answer when torch is missing."""

from __future__ import annotations

import importlib.util

import pytest

from roofline.calc.parallel import Link, all_reduce_s, all_to_all_s
from roofline.cli import main
from roofline.spec.catalog import load_hardware


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_two_gloo_ranks_on_loopback() -> None:
    from roofline.kernels.collectives import run_collectives

    ic = load_hardware("h100-sxm").interconnect
    results = run_collectives(2, [1024, 65536], ic, backend="gloo", reps=2, warmup=1)
    assert [(r.op, r.message_bytes) for r in results] == [
        ("all-reduce", 1024),
        ("all-reduce", 65536),
        ("all-to-all", 1024),
        ("all-to-all", 65536),
    ]
    for r in results:
        assert r.backend == "gloo" and r.world_size == 2 and r.reps == 2
        assert 0 < r.min_s <= r.median_s <= r.max_s < 10
        # NCCL bus bandwidth convention: M/t · 2(n−1)/n = M/t for an all-reduce over 2 ranks
        factor = 1.0 if r.op == "all-reduce" else 0.5
        assert r.bus_bandwidth_bytes_per_s == pytest.approx(r.message_bytes / r.median_s * factor)
        model = all_reduce_s if r.op == "all-reduce" else all_to_all_s
        assert r.predicted_s == pytest.approx(
            model(r.message_bytes, 2, Link.of(ic, 2, "achievable"))
        )


def test_cli_without_torch_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    with pytest.raises(SystemExit) as e:
        main(["collectives", "-n", "2"])
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert "pip install 'roofline[measure]'" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["collectives", "-n", "1"], "at least 2"),
        (["collectives", "--backend", "mpi"], "unknown backend"),
        (["collectives", "--sizes", "abc"], "byte counts"),
    ],
)
def test_cli_refuses(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 1
    assert needle in capsys.readouterr().err
