"""`roofline models import`: a local Hugging Face config.json → a model spec YAML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
import yaml

from ..errors import SpecError
from ..files import is_regular_file, read_text, write_text
from ..importers.hf import check_checkpoint, check_config, spec_from_hf_config
from ..units import si
from . import common, models_app
from .common import console

INDEX = "model.safetensors.index.json"


#: A config.json or safetensors index is a few kB; larger is not one.
MAX_JSON_BYTES = 16 * 2**20


def _read_json(path: Path) -> dict:
    text = read_text(path, "JSON file", MAX_JSON_BYTES)
    try:
        data = json.loads(text)
    except RecursionError:
        raise SpecError(f"{path}: JSON nested too deep; give a Hugging Face config.json") from None
    except json.JSONDecodeError as e:
        raise SpecError(f"{path}:{e.lineno}: broken JSON ({e.msg})") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a JSON object")
    return data


@models_app.command("import")
def models_import(
    config: Annotated[
        Path,
        typer.Argument(
            help="path to a Hugging Face config.json, or a llama.cpp .gguf file (header and tensor "
            "table only; needs the optional gguf package)"
        ),
    ],
    name: Annotated[str | None, typer.Option(help="spec name (default: the folder name)")] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="write the YAML here (default: print it)")
    ] = None,
) -> None:
    """Turn a local config.json or GGUF file into a model spec (no network). With a
    model.safetensors.index.json beside a config, or the tensor table of a GGUF, compare the
    checkpoint's size with the spec's weights at its formats."""
    common.check_output(output, "model spec")
    if config.suffix.lower() == ".gguf":
        spec, lines = _from_gguf(config, name)
        _emit(spec, lines, output)
        return
    cfg = _read_json(config)
    check_config(cfg, str(config))
    default = cfg.get("_name_or_path") or config.resolve().parent.name
    spec = spec_from_hf_config(cfg, name or default, str(config))
    lines = [
        f"{spec.name}: {spec.total_params:,} parameters ({spec.active_params:,} active per token)"
    ]
    index = config.parent / INDEX
    if is_regular_file(index):
        meta = _read_json(index).get("metadata")
        total = meta.get("total_size") if isinstance(meta, dict) else None
        if isinstance(total, bool) or not isinstance(total, int) or total <= 0:
            raise SpecError(
                f"{index}: no positive integer metadata.total_size; fix or remove the index"
            )
        c = check_checkpoint(spec, cfg, total)
        lines.append(
            f"{INDEX}: total_size {si(c.checkpoint_bytes, 'B')}; spec weights at "
            f"{c.dtype} {si(c.spec_weights_bytes, 'B')}; difference "
            f"{c.difference_bytes:+,.0f} B ({c.relative_difference:+.2%})"
        )
    _emit(spec, lines, output)


def _from_gguf(path: Path, name: str | None) -> tuple:
    """A GGUF file's spec (its per-tensor formats in `checkpoint_weights`) and the check of
    the spec's weight bytes against the file's tensor table."""
    from ..importers.gguf import check_gguf, read_gguf, spec_from_gguf

    if not is_regular_file(path):
        raise SpecError(f"{path}: not a regular file; give the path of a .gguf file")
    f = read_gguf(path)
    spec = spec_from_gguf(f, name or path.stem.lower().replace("_", "-"), str(path))
    c = check_gguf(spec, f)
    return spec, [
        f"{spec.name}: {spec.total_params:,} parameters ({spec.active_params:,} active per "
        f"token), weights {spec.checkpoint_weights}",
        f"GGUF tensor table {si(c.file_tensor_bytes, 'B')}; spec weights at those formats "
        f"{si(c.spec_weights_bytes, 'B')}; difference {c.difference_bytes:+,.0f} B",
    ]


def _emit(spec, lines: list[str], output: Path | None) -> None:
    data = spec.model_dump(mode="json", exclude_defaults=True)
    text = "".join(f"# {line}\n" for line in lines) + yaml.safe_dump(data, sort_keys=False)
    if output is None:
        print(text, end="")
        return
    write_text(output, text)
    for line in lines:
        console.print(line)
    console.print(f"wrote {output}")
