"""The wheel installs everything under `roofline` (no top-level `kernels` to clash with PyPI's)
and works from any folder: specs ship as package data, kernels as `roofline.kernels`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
SHIPPED = ("roofline", "kernels", "hardware_specs", "model_specs", "engine_specs")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the sources (the checkout gets no build/ or egg-info)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    for folder in SHIPPED:
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp / "dist"),
            str(src),
        ],
        check=True,
        capture_output=True,
    )
    (built,) = (tmp / "dist").glob("roofline-*.whl")
    return built


def test_wheel_keeps_everything_under_roofline(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"roofline", "roofline-0.1.0.dist-info"}
    for folder in ("hardware_specs", "model_specs", "engine_specs"):
        shipped = {n for n in names if n.startswith(f"roofline/{folder}/") and n.endswith(".yaml")}
        assert shipped == {f"roofline/{folder}/{p.name}" for p in (ROOT / folder).glob("*.yaml")}
    assert {f"roofline/kernels/{p.name}" for p in (ROOT / "kernels").glob("*.py")} <= set(names)
    data = ROOT / "roofline" / "data"
    assert {f"roofline/data/{p.name}" for p in data.glob("*") if p.is_file()} <= set(names)
    # the kernel surfaces (benchmarks/derive/aic_surfaces.py) ship too
    assert {f"roofline/data/surfaces/{p.name}" for p in (data / "surfaces").glob("*.csv")} <= set(
        names
    )
    # every module of every subpackage (a package missing from pyproject's list would not ship:
    # `roofline plan` failed on an installed wheel when plan.py became a package)
    modules = {
        f"roofline/{p.relative_to(ROOT / 'roofline').as_posix()}"
        for p in (ROOT / "roofline").rglob("*.py")
    }
    assert modules <= set(names), sorted(modules - set(names))


def test_installed_wheel_runs_from_another_folder(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--target",
            str(site),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("ROOFLINE_SPECS_PATH", None)
    for command, folder in (
        ("hardware", "hardware_specs"),
        ("models", "model_specs"),
        ("engines", "engine_specs"),
    ):
        out = subprocess.run(
            [sys.executable, "-m", "roofline", command, "list", "--json"],
            cwd=tmp_path,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        assert len(json.loads(out.stdout)) == len(list((ROOT / folder).glob("*.yaml")))
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import roofline.kernels as k, roofline.engine_specs as e; "
            "print(k.__file__); print(e.__file__)",
        ],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert all(Path(p).is_relative_to(site / "roofline") for p in where)
