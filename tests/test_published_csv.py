"""The published-measurements CSV reader (`validate --published FILE`): one checked reader,
every malformed file one clear line and exit 1, never a traceback, a hang or a silent result
(issue "No traceback, no silent nonsense", the published-CSV reader)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import run_cli

HEADER = "id,model,hardware,weights,kv,batch,prompt,gen,tp,metric,value,engine,source,confidence"
GOOD = "1,llama-2-7b,a100-sxm-80gb,int8,bf16,1,5,200,1,decode_tokens_per_s,100.0,gpt-fast,src,high"


def _csv(tmp_path: Path, *lines: str, name: str = "rows.csv") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


CASES = {
    "header only": ((HEADER,), "a header and no rows"),
    "empty file": (("",), "empty"),
    "short row": ((HEADER, "1,llama-2-7b,a100-sxm-80gb"), "line 2 has 3 fields"),
    "long row": ((HEADER, GOOD + ",extra"), "line 2 has 15 fields"),
    "unterminated quote": ((HEADER, GOOD.replace(",src,", ',"src,')), "not a well-formed CSV"),
    "duplicate id": ((HEADER, GOOD, GOOD), "appears twice"),
    "unknown confidence": ((HEADER, GOOD.replace(",high", ",certain")), "unknown confidence"),
    "batch 0": (
        (HEADER, GOOD.replace(",int8,bf16,1,", ",int8,bf16,0,")),
        "batch must be at least 1",
    ),
    "tp 0": ((HEADER, GOOD.replace(",200,1,", ",200,0,")), "tp must be at least 1"),
    "negative value": ((HEADER, GOOD.replace(",100.0,", ",-3,")), "positive number"),
    "nan value": ((HEADER, GOOD.replace(",100.0,", ",nan,")), "positive number"),
    "word value": ((HEADER, GOOD.replace(",100.0,", ",fast,")), "not a number"),
    "missing column": ((HEADER.replace(",metric", ""), GOOD), "missing column(s) metric"),
    "no id": ((HEADER, GOOD.replace("1,llama", ",llama", 1)), "without an id"),
    "fractional batch": ((HEADER, GOOD.replace(",int8,bf16,1,", ",int8,bf16,1.5,")), "whole"),
}


@pytest.mark.parametrize("name", CASES)
def test_a_malformed_csv_is_one_clear_line(tmp_path: Path, capsys, name: str) -> None:
    lines, says = CASES[name]
    code, out, err = run_cli(capsys, "validate", "--published", str(_csv(tmp_path, *lines)))
    assert code == 1, out
    assert says in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_a_byte_order_mark_is_read(tmp_path: Path, capsys) -> None:
    """A spreadsheet's UTF-8 byte-order mark is not part of the first column's name."""
    p = tmp_path / "bom.csv"
    p.write_bytes(("\ufeff" + HEADER + "\n" + GOOD + "\n").encode("utf-8"))
    code, out, err = run_cli(capsys, "validate", "--published", str(p), "--no-gate", "--json")
    assert code == 0, err
    assert '"id": "1"' in out


@pytest.mark.parametrize(
    "kind", ["folder", "binary", "pipe", "device"], ids=["folder", "binary", "pipe", "device"]
)
def test_what_is_not_a_csv_file_is_refused_without_reading_it(
    tmp_path: Path, capsys, kind: str
) -> None:
    if kind == "folder":
        path = tmp_path
    elif kind == "binary":
        path = tmp_path / "x.csv"
        path.write_bytes(b"\xff\xfe\x00bad")
    elif kind == "pipe":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no named pipes here")
        path = tmp_path / "fifo.csv"
        os.mkfifo(path)  # reading it would block forever: it must be refused before opening
    else:
        path = Path("/dev/zero")
        if not path.exists():
            pytest.skip("no /dev/zero")
    code, _, err = run_cli(capsys, "validate", "--published", str(path))
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err, err


def test_validating_the_committed_cpu_results_writes_no_nan(capsys) -> None:
    """Defect: `validate docs/measurements/cpu-ci.json` printed '+nan%' and wrote NaN (not
    JSON) for the points the model cannot predict (bf16 emulated on this CPU); they are '—'
    and null now."""
    import json

    path = Path(__file__).parent.parent / "docs" / "measurements" / "cpu-ci.json"
    code, out, _ = run_cli(capsys, "validate", str(path), "--json")
    assert "NaN" not in out
    points = json.loads(out)["points"]
    assert any(p["predicted_s"] is None and p["error"] is None for p in points)
    _, table, _ = run_cli(capsys, "validate", str(path))
    assert "nan%" not in table and "—" in table
