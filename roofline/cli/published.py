"""`roofline validate --published [CSV]`: predicted vs published measurements of real engines."""

from __future__ import annotations

from pathlib import Path

from ..calc.intervals import LOSO_GATE, Evidence, median_half_width
from ..errors import InvalidInputError
from ..serve.published import (
    GROUPINGS,
    Prediction,
    Summary,
    bundled_csv,
    load_rows,
    predict_all,
    residuals,
    summaries,
)
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
        "first sight: rows",
        "median |error|",
        "p90 |error|",
        "median signed",
        "outside band",
        "of them open",
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
            str(s.first_sight_rows),
            pct(s.first_sight_median_abs),
            pct(s.first_sight_p90_abs),
            pct(s.first_sight_median_signed, True),
            str(s.failed),
            str(s.open),
        )
    t.caption = (
        "first sight: each row's error when it entered the set, before any change it motivated "
        "(rows of the set the model was built on are left out of it); open: outside the band "
        "now and at first sight, held by the gate to no worse than its first sight"
    )
    return t


def _coverage_table(covs: list, evidence: Evidence) -> object:
    from rich.table import Table

    t = Table(
        title="intervals: leave-one-source-out coverage (each source's rows against the "
        "intervals built without them; split-conformal, roofline/calc/intervals.py)"
    )
    t.add_column("group")
    for c in covs:
        t.add_column(f"{c.coverage:.0%} interval", justify="right")
    first = covs[0]

    def cell(c, covered: int, n: int) -> str:
        return f"{covered}/{n} = {100 * covered / n:.0f}%" if n else "—"

    t.add_row("all rows", *(cell(c, round(c.overall * c.rows), c.rows) for c in covs))
    for g in first.by_gpus:
        t.add_row(g, *(cell(c, *c.by_gpus[g]) for c in covs))
    for k in first.by_class:
        if k not in first.by_gpus:
            t.add_row(k, *(cell(c, *c.by_class.get(k, (0, 0))) for c in covs))
    for q in first.by_quantity:
        t.add_row(q, *(cell(c, *c.by_quantity[q]) for c in covs))
    for src in first.by_source:
        t.add_row(f"source: {src[:60]}", *(cell(c, *c.by_source[src]) for c in covs))
    lo, hi = (f"{100 * x:.0f}%" for x in LOSO_GATE)
    widths = ", ".join(
        f"{k} {100 * v:.1f}%" for k, v in median_half_width(evidence, first.coverage).items()
    )
    t.caption = (
        f"gate: the {first.coverage:.0%} interval's overall coverage in {lo}–{hi}. Median "
        f"half-width of the {first.coverage:.0%} interval of the rows' own classes: {widths} "
        "of the central value"
    )
    return t


def run_published(
    csv: Path | None,
    ceiling: str,
    engine: str | None,
    json_out: bool,
    gate: bool,
    specs_dir: list[Path] | None,
    write_residuals: Path | None = None,
) -> None:
    """Predict every row, print the tables (or JSON) and the leave-one-source-out coverage
    of the intervals; exit 1 if a row leaves its band or the coverage leaves its gate."""
    from ..calc.intervals import DEFAULT_COVERAGE, loso_coverage
    from ..calc.intervals import write_residuals as write

    if write_residuals is not None:  # refused before any work, as every `-o` is
        common.check_output(write_residuals, "residuals file")
    path = csv or bundled_csv()
    preds = predict_all(load_rows(path), common.ceiling(ceiling), engine, specs_dir or ())
    groups = summaries(preds, specs_dir or ())
    res = residuals(preds, specs_dir or ())
    cov = {c: loso_coverage(res, c) for c in (DEFAULT_COVERAGE, 0.9)} if res else {}
    if write_residuals is not None:
        from ..files import replace_from

        if not res:  # an existing residuals file is never replaced by an empty one
            raise InvalidInputError(
                f"no row was predicted, so there are no residuals to write to "
                f"'{write_residuals}'; check the engine and the rows"
            )
        replace_from(write_residuals, lambda tmp: write(res, tmp), "residuals file")
    if json_out:
        print_json(
            {
                "csv": str(path),
                "ceiling": ceiling,
                "engine": engine or "per row",
                "rows": [p.as_dict() for p in preds],
                "summary": {k: [s.as_dict() for s in v] for k, v in groups.items()},
                "intervals": [c.as_dict() for c in cov.values()],
            }
        )
    else:
        console.print(_rows_table(preds))
        for key in ("all", *GROUPINGS):
            console.print(_summary_table(f"accuracy by {key} ({ceiling} ceiling)", groups[key]))
        a = groups["all"][0]
        console.print(
            f"summary ({ceiling}, engine {engine or 'per row'}): {a.predicted}/{a.rows} rows "
            f"predicted; median |error| {100 * (a.median_abs_error or 0):.1f}%, p90 |error| "
            f"{100 * (a.p90_abs_error or 0):.1f}%, median signed "
            f"{100 * (a.median_signed_error or 0):+.1f}%; {a.failed} outside their band "
            f"({a.open} of them open gaps, no worse than at first sight)",
            highlight=False,
        )
        missing = [p for p in preds if p.predicted is None]
        for p in missing:
            console.print(
                f"not predicted: row {p.row.id} ({p.row.model}, {p.row.hardware}): {p.why}"
            )
        if cov:
            console.print(_coverage_table(list(cov.values()), Evidence(res)))
    c80 = cov.get(DEFAULT_COVERAGE)
    if gate and c80 is not None and not c80.within_gate and csv is None and engine is None:
        lo, hi = (f"{100 * x:.0f}%" for x in LOSO_GATE)
        raise InvalidInputError(
            f"leave-one-source-out coverage of the {DEFAULT_COVERAGE:.0%} interval is "
            f"{100 * c80.overall:.1f}%, outside {lo}–{hi}: the intervals are "
            f"{'too narrow' if c80.overall < LOSO_GATE[0] else 'too wide'}; see the coverage "
            "table, or pass --no-gate"
        )
    failed = [p for p in preds if not p.gated_ok]
    if gate and failed:
        ids = ", ".join(p.row.id for p in failed[:12]) + (" ..." if len(failed) > 12 else "")
        raise InvalidInputError(
            f"{len(failed)} published row(s) outside their band (an open one: further off "
            f"than at first sight) or no longer predicted (rows {ids}); see the table, or "
            "pass --no-gate"
        )
