"""Prices and price tables (issue "No traceback, no silent nonsense": price tables bypassed the
safe file reader and the catalog): one checked reader, finite positive numbers only, an alias
names its device, an unknown name is refused, a priced device without tdp_w still estimates."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import run_cli

ROOT = Path(__file__).parent.parent


def _one_line_error(capsys, *args: str, says: str) -> None:
    code, out, err = run_cli(capsys, *args)
    assert code == 1, out
    assert says in err and err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.parametrize("value", ["inf", "1e309", "nan", "-2", "0", "two"])
def test_a_price_must_be_a_finite_positive_number(capsys, value: str) -> None:
    _one_line_error(capsys, "estimate", "--price", f"h100-sxm={value}", says="price")


def test_an_alias_names_its_device(capsys) -> None:
    """Defect: `--price H100=2` was ignored (the bundled price used): H100 is h100-sxm's alias."""
    code, out, err = run_cli(capsys, "estimate", "--price", "H100=2", "--interval", "0", "--json")
    assert code == 0, err
    assert json.loads(out)["economics"]["price_usd_per_gpu_hour"] == 2.0


def test_an_unknown_device_in_a_price_is_refused(capsys) -> None:
    _one_line_error(capsys, "estimate", "--price", "h1000=2", says="no device named 'h1000'")


@pytest.mark.parametrize(
    "body", ["devices: [", "devices:\n  h100-sxm: {on_demand_usd_per_gpu_hour: true}"]
)
def test_a_broken_price_table_is_one_line(tmp_path: Path, capsys, body: str) -> None:
    p = tmp_path / "prices.yaml"
    p.write_text(body + "\n")
    code, _, err = run_cli(capsys, "estimate", "--price", str(p))
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.parametrize("kind", ["pipe", "device", "binary", "folder"])
def test_what_is_not_a_price_table_is_refused_without_reading_it(
    tmp_path: Path, capsys, kind: str
) -> None:
    if kind == "pipe":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no named pipes")
        path = tmp_path / "p.yaml"
        os.mkfifo(path)  # reading it would block forever
    elif kind == "device":
        path = Path("/dev/zero")  # reading it would fill the memory
        if not path.exists():
            pytest.skip("no /dev/zero")
    elif kind == "binary":
        path = tmp_path / "b.yaml"
        path.write_bytes(b"\xff\xfe\x00\x01")
    else:
        path = tmp_path
    code, _, err = run_cli(capsys, "estimate", "--price", str(path))
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err, err


def test_a_priced_device_without_tdp_is_costed_without_energy(tmp_path: Path, capsys) -> None:
    """Defect: a device without tdp_w could not be estimated at all once it had a price."""
    spec = (ROOT / "hardware_specs" / "h100-sxm.yaml").read_text()
    lines = [ln for ln in spec.splitlines() if not ln.startswith("tdp_w:")]
    mine = tmp_path / "no-tdp.yaml"
    mine.write_text("\n".join(lines).replace("name: h100-sxm", "name: no-tdp", 1) + "\n")
    code, out, err = run_cli(
        capsys, "estimate", "--hardware", str(mine), "--price", "no-tdp=2", "--json"
    )
    assert code == 0, err
    case = json.loads(out)["economics"]["cases"][0]
    assert case["cost_per_million_output_tokens_usd"] > 0
    assert case["joules_per_output_token"] is None
    code, out, err = run_cli(capsys, "estimate", "--hardware", str(mine), "--price", "no-tdp=2")
    assert code == 0, err
