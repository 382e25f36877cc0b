"""Every number of a bundled spec, broken (issue 26): each numeric field of every bundled
engine profile and of representative hardware and model specs is replaced, one at a time, by
a negative number, by text and by NaN, and the spec is handed to the command that reads it.
Each is one `error:` line, a non-zero exit, no traceback and no file changed
(`test_bad_inputs.refuse`): no engine, device or model has a negative, textual or undefined
size, rate, time or count. No torch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from test_bad_inputs import bad, refuse  # noqa: F401  # the shared folder of bad files

ROOT = Path(__file__).resolve().parent.parent
#: what replaces a number: each is refused wherever a number is expected
BROKEN = {"negative": -1, "text": "lots", "nan": float("nan")}


def numeric_leaves(doc: object, path: tuple = ()) -> Iterator[tuple]:
    """Paths to every int or float (not bool) in a YAML document."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from numeric_leaves(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from numeric_leaves(v, (*path, i))
    elif isinstance(doc, int | float) and not isinstance(doc, bool):
        yield path


def _set(doc: object, path: tuple, value: object) -> None:
    for key in path[:-1]:
        doc = doc[key]  # type: ignore[index]
    doc[path[-1]] = value  # type: ignore[index]


def _cases(folder: str, names: list[str]) -> list[tuple[str, tuple, str]]:
    out = []
    for name in names:
        doc = yaml.safe_load((ROOT / folder / f"{name}.yaml").read_text())
        out += [(name, path, how) for path in numeric_leaves(doc) for how in BROKEN]
    return out


def _id(case: tuple[str, tuple, str]) -> str:
    name, path, how = case
    return f"{name}:{'.'.join(map(str, path))}={how}"


def _broken_file(tmp_path: Path, folder: str, name: str, path: tuple, how: str) -> Path:
    doc = yaml.safe_load((ROOT / folder / f"{name}.yaml").read_text())
    _set(doc, path, BROKEN[how])
    doc["name"] = f"broken-{name}".replace(".", "-")
    f = tmp_path / f"broken-{name}.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    return f


ENGINES = sorted(p.stem for p in (ROOT / "engine_specs").glob("*.yaml"))
ENGINE_CASES = _cases("engine_specs", ENGINES)


@pytest.mark.parametrize("case", ENGINE_CASES, ids=[_id(c) for c in ENGINE_CASES])
def test_a_broken_number_in_an_engine_profile(capsys, bad, tmp_path, case):  # noqa: F811
    name, path, how = case
    f = _broken_file(tmp_path, "engine_specs", name, path, how)
    refuse(capsys, bad, ["estimate", "llama-3.1-8b", "--engine", str(f)], str(path[-1]))


DEVICES = ["h100-sxm", "mi300x", "rtx-4090"]
DEVICE_CASES = _cases("hardware_specs", DEVICES)


@pytest.mark.parametrize("case", DEVICE_CASES, ids=[_id(c) for c in DEVICE_CASES])
def test_a_broken_number_in_a_hardware_spec(capsys, bad, tmp_path, case):  # noqa: F811
    name, path, how = case
    f = _broken_file(tmp_path, "hardware_specs", name, path, how)
    refuse(capsys, bad, ["estimate", "llama-3.2-1b", "-H", str(f)], str(path[-1]))


MODELS = ["llama-3.1-8b", "mixtral-8x7b", "deepseek-v3"]
MODEL_CASES = _cases("model_specs", MODELS)


@pytest.mark.parametrize("case", MODEL_CASES, ids=[_id(c) for c in MODEL_CASES])
def test_a_broken_number_in_a_model_spec(capsys, bad, tmp_path, case):  # noqa: F811
    name, path, how = case
    f = _broken_file(tmp_path, "model_specs", name, path, how)
    refuse(capsys, bad, ["estimate", str(f), "-H", "h200"], str(path[-1]))
