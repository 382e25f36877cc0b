"""A full or closed standard output is one `error:` line and exit 1, never a traceback (issue
26: several commands died in print on /dev/full or with stdout closed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = [
    ["estimate", "llama-3.2-1b", "--json"],
    ["estimate", "llama-3.2-1b"],
    ["kv", "llama-3.2-1b"],
    ["hardware", "list"],
    ["serve", "llama-3.2-1b", "--requests", "10", "--json"],
]


def _run(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "roofline", *args],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        **kw,
    )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_full_stdout_is_one_error_line(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        r = _run(args, stdout=full)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert lines and lines[-1].startswith("error: cannot write the output (No space left")


@pytest.mark.skipif(os.name != "posix", reason="closing fd 1 needs POSIX")
@pytest.mark.parametrize("args", COMMANDS[:3], ids=" ".join)
def test_a_closed_stdout_is_one_error_line(args: list[str]) -> None:
    r = _run(args, preexec_fn=lambda: os.close(1))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("error: cannot write the output")


def test_a_replaced_output_keeps_its_permissions(tmp_path: Path) -> None:
    """`-o` over an existing 0600 file leaves it 0600 (it became 0644); a new file gets the
    ordinary permissions the umask leaves."""
    from roofline.files import write_text

    private = tmp_path / "private.json"
    private.write_text("old")
    private.chmod(0o600)
    write_text(private, "new")
    assert private.read_text() == "new" and (private.stat().st_mode & 0o777) == 0o600
    fresh = write_text(tmp_path / "fresh.json", "x")
    umask = os.umask(0)
    os.umask(umask)
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~umask
