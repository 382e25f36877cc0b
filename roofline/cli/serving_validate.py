"""`roofline validate --serving FILE...`: real serving benchmark results against the simulator.
Reading the files is `roofline.serve.benchmarks`; the comparison is `roofline.serve.validation`;
this module turns flags into a stack and renders the rows."""

from __future__ import annotations

import math
from pathlib import Path

from rich.table import Table

from ..calc.placement import Parallel
from ..errors import InvalidInputError
from ..serve.benchmarks import read_benchmarks
from ..serve.validation import GATED, ServingComparison, compare
from ..spec.catalog import load_hardware, load_model
from ..spec.precision import released
from ..units import seconds
from . import common
from .common import console, print_json


def run_serving(
    files: list[Path],
    model: str | None,
    hardware: str | None,
    tp: int,
    engine: str,
    policy_name: str | None,
    requests: int | None,
    max_error: float | None,
    json_out: bool,
    specs_dir: list[Path] | None,
    replicas: int = 1,
) -> None:
    """Each file's runs rerun on one stack; exit 1 when `max_error` is given and a gated
    metric (medians, output throughput) is further off."""
    if not files:
        raise InvalidInputError("give the result files of the serving benchmarks to compare")
    if hardware is None:
        raise InvalidInputError(
            "a benchmark file does not say what it ran on: give --hardware (and --tp, --engine)"
        )
    dirs = specs_dir or []
    hw = load_hardware(hardware, dirs)
    out: list[ServingComparison] = []
    for f in files:
        for run in read_benchmarks(f, requests):
            name = model or run.model
            if name is None:
                raise InvalidInputError(f"{f}: the file names no model; give --model")
            m = load_model(name, dirs)
            stack = common.stack(m, hw, released(m), "achievable", engine, dirs, Parallel(tp=tp))
            out.append(compare(run, m, stack, policy_name, replicas=replicas))
            if model is None:
                common.NOTES.append(f"{f}: model '{name}' read from the file")
    copies = f" × {replicas} replicas" if replicas > 1 else ""
    common.NOTES.append(
        f"not in the files: hardware {hw.name}, TP {tp}{copies}, engine {engine} (from the "
        "flags); weights as released"
    )
    worst = max((c.worst() for c in out), default=0.0)
    if json_out:
        print_json({"runs": [c.as_dict() for c in out], "worst_gated_error": worst})
    else:
        for c in out:
            console.print(_table(c))
            for note in c.notes:
                console.print(f"note: {common.with_flags(note)}")
    if max_error is not None and worst > max_error:
        raise InvalidInputError(
            f"a gated metric ({', '.join(GATED)}) is {worst:.0%} off, above --max-error "
            f"{max_error:.0%}"
        )


def _value(v: float, unit: str) -> str:
    if not math.isfinite(v):
        return "—"
    return seconds(v) if unit == "s" else f"{v:,.4g}"


def _table(c: ServingComparison) -> Table:
    r = c.run
    t = Table(
        title=(
            f"{r.source} ({r.format}): {r.load_label}, {r.lengths_label}; simulated with the "
            f"{c.policy} policy"
        )
    )
    for col in ("metric", "measured", "predicted", "error", "unit"):
        t.add_column(col, justify="left" if col in ("metric", "unit") else "right")
    for row in c.rows:
        err = f"{row.error:+.1%}" if math.isfinite(row.error) else "—"
        marker = " *" if row.note else ""
        t.add_row(
            row.metric + marker,
            _value(row.measured, row.unit),
            _value(row.predicted, row.unit),
            err,
            row.unit,
        )
    if any(row.note for row in c.rows):
        t.caption = "* " + "; ".join(sorted({row.note for row in c.rows if row.note}))
    return t
