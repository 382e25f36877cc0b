"""One checked writer for every output path (issue: `validate --published --write-residuals`
replaced a device node, a FIFO or a symlink's target with a world-writable regular file, and an
unknown engine overwrote a residuals file with a header-only one)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from conftest import run_cli

from roofline.errors import InvalidInputError
from roofline.files import replace_from


def _kind(path: Path) -> tuple[int, int]:
    st = os.lstat(path)
    return stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode)


def test_write_residuals_refuses_a_fifo_and_a_link_to_a_device(capsys, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to("/dev/null")
    for path in (fifo, link):
        before = _kind(path), _kind(Path(os.path.realpath(path)))
        code, _, err = run_cli(
            capsys, "validate", "--published", "--no-gate", "--write-residuals", str(path)
        )
        assert code == 1 and "not a regular file" in err and "Traceback" not in err
        assert (_kind(path), _kind(Path(os.path.realpath(path)))) == before  # nothing replaced


def test_no_residuals_never_replace_a_file(capsys, tmp_path: Path) -> None:
    out = tmp_path / "residuals.csv"
    out.write_text("kept\n")
    code, _, err = run_cli(
        capsys, "validate", "--published", "--engine", "nonesuch", "--no-gate",
        "--write-residuals", str(out),
    )  # fmt: skip
    assert code == 1 and "no row was predicted" in err
    assert out.read_text() == "kept\n"


def test_the_one_writer_checks_its_path(tmp_path: Path) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInputError, match="not a regular file"):
        replace_from(fifo, lambda tmp: tmp.write_text("x"))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    with pytest.raises(InvalidInputError, match="is a folder"):
        replace_from(tmp_path, lambda tmp: tmp.write_text("x"))


def test_an_ascii_terminal_gets_replaced_characters_not_a_traceback() -> None:
    """PYTHONIOENCODING=ascii: the output's em dashes and Greek letters cannot be encoded; the
    CLI replaces them ('?') instead of ending in a UnicodeEncodeError."""
    import subprocess
    import sys

    env = dict(os.environ, PYTHONIOENCODING="ascii")
    r = subprocess.run(
        [sys.executable, "-m", "roofline", "estimate", "llama-3.1-8b", "--batch", "1"],
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-400:]
    assert b"Traceback" not in r.stderr and b"TTFT" in r.stdout


def test_nccl_collectives_without_gpus_is_one_line(capsys) -> None:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    import torch

    if torch.cuda.device_count() >= 2:
        pytest.skip("this machine has the GPUs")
    code, _, err = run_cli(capsys, "collectives", "--backend", "nccl")
    assert code == 1 and "ranks need" in err and "gloo" in err and "Traceback" not in err
