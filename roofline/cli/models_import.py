"""`roofline models import`: a local Hugging Face config.json → a model spec YAML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
import yaml

from ..errors import SpecError
from ..hf_import import check_checkpoint, spec_from_hf_config
from ..units import si
from . import models_app
from .common import console

INDEX = "model.safetensors.index.json"


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise SpecError(f"{path}: cannot read ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise SpecError(f"{path}:{e.lineno}: broken JSON ({e.msg})") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a JSON object")
    return data


@models_app.command("import")
def models_import(
    config: Annotated[Path, typer.Argument(help="path to a Hugging Face config.json")],
    name: Annotated[str | None, typer.Option(help="spec name (default: the folder name)")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="write the YAML here "
                                                "(default: print it)")] = None,
) -> None:
    """Turn a local config.json into a model spec (no network). With a
    model.safetensors.index.json beside it, compare its total size with the spec's weights."""
    cfg = _read_json(config)
    default = cfg.get("_name_or_path") or config.resolve().parent.name
    spec = spec_from_hf_config(cfg, name or default, str(config))
    lines = [f"{spec.name}: {spec.total_params:,} parameters "
             f"({spec.active_params:,} active per token)"]
    index = config.parent / INDEX
    if index.is_file():
        total = _read_json(index).get("metadata", {}).get("total_size")
        if not isinstance(total, int):
            raise SpecError(f"{index}: no integer metadata.total_size")
        c = check_checkpoint(spec, cfg, total)
        lines.append(f"{INDEX}: total_size {si(c.checkpoint_bytes, 'B')}; spec weights at "
                     f"{c.dtype} {si(c.spec_weights_bytes, 'B')}; difference "
                     f"{c.difference_bytes:+,.0f} B ({c.relative_difference:+.2%})")
    data = spec.model_dump(mode="json", exclude_defaults=True)
    text = "".join(f"# {line}\n" for line in lines) + yaml.safe_dump(data, sort_keys=False)
    if output is None:
        print(text, end="")
        return
    output.write_text(text, encoding="utf-8")
    for line in lines:
        console.print(line)
    console.print(f"wrote {output}")
