"""Engine profiles refuse what no engine has (issue "No traceback, no silent nonsense": no upper
bounds, a `formats` map not validated on load): one line, exit 1."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli

ROOT = Path(__file__).parent.parent


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        ("host_step_us: ", "host_step_us: 1e300 #", "host_step_us"),  # TTFT was 1e294 s
        ("host_launch_us: ", "host_launch_us: 5e9 #", "host_launch_us"),
        ("extra_launches_per_layer: ", "extra_launches_per_layer: 100000 #", "extra_launches"),
        ("prefill_token_budget: 8192", "prefill_token_budget: 100000000000", "budget"),
    ],
)
def test_an_absurd_engine_term_is_refused(tmp_path: Path, capsys, old, new, says) -> None:
    text = (ROOT / "engine_specs" / "vllm.yaml").read_text()
    assert old in text
    mine = tmp_path / "mine.yaml"
    mine.write_text(text.replace(old, new, 1).replace("name: vllm", "name: mine", 1))
    code, _, err = run_cli(capsys, "estimate", "--engine", str(mine))
    assert code == 1 and says in err and err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.parametrize(
    "formats", ["{q4_0: q9_9}", "{nonsense: bf16}", "{q4_0: 'q4_0,heads=q6_k'}"]
)
def test_an_engine_formats_map_is_checked_on_load(tmp_path: Path, capsys, formats) -> None:
    text = (ROOT / "engine_specs" / "llama.cpp.yaml").read_text()
    block = "\n".join(text.splitlines()[47:52])  # the formats map (lines 48-52)
    assert block.startswith("formats:\n  q4_0:") and block in text
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        text.replace(block, f"formats: {formats}").replace("name: llama.cpp", "name: mine", 1)
    )
    code, _, err = run_cli(capsys, "estimate", "--engine", str(mine))
    assert code == 1 and "formats" in err and err.count("\n") == 1, err
    # the bundled map itself loads
    assert run_cli(capsys, "estimate", "--engine", "llama.cpp", "--batch", "1")[0] == 0


def test_two_user_files_of_one_name_are_refused(tmp_path, capsys) -> None:
    """Which of two same-named files a command read depended on the folder's listing order;
    now neither is used and the error names both."""
    from conftest import run_cli

    folder = tmp_path / "engine_specs"
    folder.mkdir()
    spec = (ROOT / "engine_specs" / "vllm.yaml").read_text().replace("name: vllm", "name: mine", 1)
    (folder / "a.yaml").write_text(spec)
    (folder / "b.yaml").write_text(spec.replace("host_step_us: 300", "host_step_us: 900"))
    code, _, err = run_cli(
        capsys, "estimate", "llama-3.2-1b", "--engine", "mine", "--specs-dir", str(tmp_path)
    )
    assert code == 1 and "defined twice" in err and "a.yaml and b.yaml" in err
    assert "\n" not in err.strip()
