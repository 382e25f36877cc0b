"""plan and serve on the inputs of issue "No traceback, no silent nonsense": what they were
not asked, what a one-token output means, a group given twice."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

PLAN = ("plan", "llama-3.1-8b", "--rate", "2", "--max-gpus", "1", "--requests", "50")


def test_plan_with_an_empty_hardware_list_is_refused(capsys) -> None:
    code, _, err = run_cli(capsys, *PLAN, "--hardware", "")
    assert code == 1 and "--hardware is empty" in err and err.count("\n") == 1


def test_plan_searches_a_device_once_however_it_is_named(capsys) -> None:
    """`-H h100-sxm,H100,h100-sxm` is one device, not three searches of the same one."""
    one = run_cli(capsys, *PLAN, "--hardware", "h100-sxm", "--confirm", "0", "--json")
    three = run_cli(
        capsys, *PLAN, "--hardware", "h100-sxm,H100,h100-sxm", "--confirm", "0", "--json"
    )
    assert one[0] == three[0] == 0
    assert json.loads(one[1])["configurations"] == json.loads(three[1])["configurations"]


def test_plan_with_nothing_simulated_does_not_say_the_simulator_refused(capsys) -> None:
    code, out, _ = run_cli(capsys, *PLAN, "--hardware", "h100-sxm", "--confirm", "0")
    assert code == 0
    text = " ".join(out.split())
    assert "no candidate was simulated" in text and "met the SLO in the simulator" not in text


def test_plan_beyond_the_trained_context_says_so(capsys) -> None:
    code, _, err = run_cli(
        capsys, "plan", "llama-3.1-8b", "--rate", "0.05", "--max-gpus", "8", "--hardware",
        "h200", "--confirm", "0", "--prompt", "131000", "--slo-ttft", "1000", "--slo-tpot", "1",
    )  # fmt: skip
    # 131,000 + 256 > 131,072
    assert code == 0 and "exceed llama-3.1-8b's trained context of 131,072" in err


def test_serve_of_one_token_outputs_has_no_tpot_rather_than_nan(capsys) -> None:
    """Every request generates one token: there is no second token to time, so TPOT is null
    (was NaN, which is not JSON) and '—' in the table."""
    args = ("serve", "--requests", "20", "--output-tokens", "1", "--lengths", "fixed")
    code, out, err = run_cli(capsys, *args, "--json")
    assert code == 0, err
    assert "NaN" not in out and json.loads(out)["tpot_s"]["p50"] is None
    code, out, err = run_cli(capsys, *args)
    assert code == 0 and "nan" not in out, err


@pytest.mark.parametrize("weights", ["bf16,experts=mxfp4,experts=int4", "bf16,mlp=int8,MLP=fp8"])
def test_a_tensor_group_given_twice_is_refused(capsys, weights: str) -> None:
    code, _, err = run_cli(capsys, "estimate", "--weights", weights)
    assert code == 1 and "twice" in err and err.count("\n") == 1, err
