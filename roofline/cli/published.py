"""`roofline validate --published [CSV]`: predicted vs published measurements of real engines."""

from __future__ import annotations

from pathlib import Path

from ..errors import InvalidInputError
from ..published import Prediction, Summary, bundled_csv, load_rows, predict_all, summaries
from ..units import si
from . import common
from .common import console, print_json


def _value(v: float | None, metric: str) -> str:
    if v is None:
        return "—"
    if metric.endswith("_s"):
        return si(v, "s")
    if metric == "memory_bytes":
        return si(v, "B")
    return f"{v:,.4g}"


def _rows_table(preds: list[Prediction]):
    from rich.table import Table

    t = Table(
        title="published measurements vs prediction (error = predicted / published − 1; "
        "for times a negative error is optimistic, for rates a positive one)"
    )
    for col in (
        "id",
        "model",
        "hardware",
        "engine",
        "B",
        "P+G",
        "TP",
        "metric",
        "published",
        "predicted",
        "error",
        "band",
    ):
        t.add_column(
            col, justify="left" if col in ("model", "hardware", "engine", "metric") else "right"
        )
    for p in preds:
        r = p.row
        err = "—" if p.error is None else f"{100 * p.error:+.0f}%"
        if p.passed is False:
            err = f"[red]{err}[/red]"
        t.add_row(
            r.id,
            r.model.split("/")[-1],
            r.hardware,
            p.engine or "none",
            str(r.batch),
            f"{r.prompt}+{r.gen}",
            str(r.tp),
            r.metric,
            _value(r.value, r.metric),
            _value(p.predicted, r.metric),
            err,
            f"±{100 * p.band:.0f}%",
        )
    return t


def _summary_table(title: str, rows: list[Summary]):
    from rich.table import Table

    t = Table(title=title)
    for col in (
        "group",
        "rows",
        "predicted",
        "median |error|",
        "p90 |error|",
        "median signed",
        "outside band",
    ):
        t.add_column(col, justify="left" if col == "group" else "right")

    def pct(v: float | None, sign: bool = False) -> str:
        return "—" if v is None else (f"{100 * v:+.0f}%" if sign else f"{100 * v:.0f}%")

    for s in rows:
        t.add_row(
            s.group,
            str(s.rows),
            str(s.predicted),
            pct(s.median_abs_error),
            pct(s.p90_abs_error),
            pct(s.median_signed_error, True),
            str(s.failed),
        )
    return t


def run_published(
    csv: Path | None,
    ceiling: str,
    engine: str | None,
    json_out: bool,
    gate: bool,
    specs_dir: list[Path] | None,
) -> None:
    """Predict every row, print the tables (or JSON), exit 1 if a row leaves its band."""
    path = csv or bundled_csv()
    preds = predict_all(load_rows(path), common.ceiling(ceiling), engine, specs_dir or ())
    groups = summaries(preds)
    if json_out:
        print_json(
            {
                "csv": str(path),
                "ceiling": ceiling,
                "engine": engine or "per row",
                "rows": [p.as_dict() for p in preds],
                "summary": {k: [s.as_dict() for s in v] for k, v in groups.items()},
            }
        )
    else:
        console.print(_rows_table(preds))
        for key in ("all", "metric", "engine", "source"):
            console.print(_summary_table(f"accuracy by {key} ({ceiling} ceiling)", groups[key]))
        a = groups["all"][0]
        console.print(
            f"summary ({ceiling}, engine {engine or 'per row'}): {a.predicted}/{a.rows} rows "
            f"predicted; median |error| {100 * (a.median_abs_error or 0):.1f}%, p90 |error| "
            f"{100 * (a.p90_abs_error or 0):.1f}%, median signed "
            f"{100 * (a.median_signed_error or 0):+.1f}%; {a.failed} outside their band",
            highlight=False,
        )
        missing = [p for p in preds if p.predicted is None]
        for p in missing:
            console.print(
                f"not predicted: row {p.row.id} ({p.row.model}, {p.row.hardware}): {p.why}"
            )
    failed = [p for p in preds if p.passed is not True]  # outside the band, or not predicted
    if gate and failed:
        ids = ", ".join(p.row.id for p in failed[:12]) + (" ..." if len(failed) > 12 else "")
        raise InvalidInputError(
            f"{len(failed)} published row(s) outside their band or not "
            f"predicted (rows {ids}); see the table, or pass --no-gate"
        )
