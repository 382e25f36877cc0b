"""`roofline hardware|models|engines list|show`."""

from __future__ import annotations

from typing import Annotated

import typer

from ..spec.catalog import (
    engine_catalog,
    hardware_catalog,
    load_engine,
    load_hardware,
    load_model,
    model_catalog,
)
from . import common, engines_app, hardware_app, models_app
from .common import JsonFlag, SpecsDir, print_json


@hardware_app.command("list")
def hardware_list(json_out: JsonFlag = False, specs_dir: SpecsDir = None) -> None:
    """List the known devices (bundled and from your spec folders)."""
    specs = hardware_catalog(specs_dir or ()).load_all()
    if json_out:
        print_json(
            [
                {"name": h.name, "display_name": h.display_name, "aliases": list(h.aliases)}
                for h in specs
            ]
        )
    else:
        from ..render.report import hardware_table

        common.console.print(hardware_table(specs))


@hardware_app.command("show")
def hardware_show(
    name: Annotated[str, typer.Argument(help="device name, alias or YAML path")],
    specs_dir: SpecsDir = None,
) -> None:
    """Print one device's full spec as JSON, with derived values and the rental price
    (bundled table) that `estimate`, `serve` and `plan` use, with its provenance."""
    from ..studies.economics import load_prices

    h = load_hardware(name, specs_dir or ())
    out = h.model_dump(mode="json")
    out["derived"] = {
        "memory_bytes": h.memory_bytes,
        "memory_bandwidth_bytes_per_s": h.memory_bandwidth_bytes_per_s,
        "ridge_point_flops_per_byte": {
            d: h.ridge_point_flops_per_byte(d) for d in h.dense_peak_tflops
        },
    }
    prices = load_prices()
    entry = prices.devices.get(h.name)
    out["price_usd_per_gpu_hour"] = {
        "table": prices.source,
        "rule": prices.rule,
        "on-demand": entry.provenance("on-demand") if entry else None,
        "discounted": entry.provenance("discounted") if entry else None,
        "note": (entry.note if entry else "not in the price table") or None,
    }
    print_json(out)


@models_app.command("list")
def models_list(json_out: JsonFlag = False, specs_dir: SpecsDir = None) -> None:
    """List the known models (bundled and from your spec folders)."""
    specs = model_catalog(specs_dir or ()).load_all()
    if json_out:
        print_json(
            [
                {
                    "name": m.name,
                    "display_name": m.display_name,
                    "aliases": list(m.aliases),
                    "params": m.total_params,
                }
                for m in specs
            ]
        )
    else:
        from ..render.report import models_table

        common.console.print(models_table(specs))


@models_app.command("show")
def models_show(
    name: Annotated[str, typer.Argument(help="model name, alias or YAML path")],
    weights: Annotated[
        str | None,
        typer.Option(
            help=(
                "weight format whose bits per weight to show per tensor group (default: the "
                "checkpoint's formats, else bf16)"
            )
        ),
    ] = None,
    specs_dir: SpecsDir = None,
) -> None:
    """Print one model's full spec as JSON, with derived parameter counts and the effective
    bits per weight of each tensor group."""
    from ..calc.memory import weights_bytes
    from ..spec.precision import Precision, group_params

    m = load_model(name, specs_dir or ())
    p = Precision(weights or m.checkpoint_weights or "bf16")
    counts = group_params(m)
    bits = {g: b for g, b in p.group_bits(m).items() if counts.get(g)}
    out = m.model_dump(mode="json")
    out["derived"] = {
        "params": vars(m.params) | {"total": m.total_params},
        "active_params": m.active_params,
        "kv_elems_per_token": m.kv_elems_per_token,
        "state_elems_per_sequence": m.state_elems_per_sequence,
        "layer_groups": [
            {"mixer": g.kind.mixer, "ffn": g.kind.ffn, "owns_kv": g.kind.owns_kv, "count": g.count}
            for g in m.layer_groups
        ],
        "weights": {
            "format": p.weights,
            "bits_per_weight_by_group": bits,
            "params_by_group": {g: counts[g] for g in bits},
            "weights_bytes": weights_bytes(m, p),
        },
    }
    print_json(out)


@engines_app.command("list")
def engines_list(json_out: JsonFlag = False, specs_dir: SpecsDir = None) -> None:
    """List the known inference-engine profiles (bundled and from your spec folders)."""
    specs = engine_catalog(specs_dir or ()).load_all()
    if json_out:
        print_json(
            [
                {
                    "name": e.name,
                    "display_name": e.display_name,
                    "aliases": list(e.aliases),
                    "version": e.version,
                    "releases": [
                        {"since": r.since, "since_date": r.since_date, "label": r.label}
                        for r in e.releases
                    ]
                    + (
                        [
                            {
                                "since": e.newest_since,
                                "since_date": e.newest_since_date,
                                "label": "newest (this profile)",
                            }
                        ]
                        if e.releases
                        else []
                    ),
                }
                for e in specs
            ]
        )
    else:
        from ..render.report import engines_table

        common.console.print(engines_table(specs, common.DEFAULT_ENGINE))


@engines_app.command("show")
def engines_show(
    name: Annotated[str, typer.Argument(help="engine name, alias or YAML path")],
    specs_dir: SpecsDir = None,
) -> None:
    """Print one engine profile as JSON, every value with its source."""
    print_json(load_engine(name, specs_dir or ()).model_dump(mode="json"))
