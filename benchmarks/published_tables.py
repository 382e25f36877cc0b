"""Markdown tables of `roofline validate --published` for the README and docs/accuracy.md.

Run from the repository root: python benchmarks/published_tables.py
(`--first-sight`: the first-sight tables of every grouping instead.)
Three settings over the bundled data set: each row's own engine profile (the default), the
hardware layer alone (`--engine none`) and the datasheet roofline (`--ceiling datasheet`).
"""

from __future__ import annotations

import sys

from roofline.serve.published import (
    GROUPINGS,
    Prediction,
    bundled_csv,
    load_rows,
    predict_all,
    summaries,
)

SETTINGS = (
    ("engine per row", "achievable", None),
    ("hardware layer only (--engine none)", "achievable", "none"),
    ("datasheet roofline (--ceiling datasheet)", "datasheet", None),
)


def pct(v: float | None, sign: bool = False) -> str:
    return "—" if v is None else (f"{100 * v:+.0f}%" if sign else f"{100 * v:.0f}%")


def table(key: str, runs: dict[str, list[Prediction]]) -> str:
    names = list(runs)
    groups = {name: {s.group: s for s in summaries(p)[key]} for name, p in runs.items()}
    head = f"| {key} | rows | " + " | ".join(f"{n}: median / p90 \\|error\\|" for n in names)
    lines = [head + " |", "|---|---|" + "---|" * len(names)]
    for g, s0 in groups[names[0]].items():
        cells = [
            f"{pct(groups[n][g].median_abs_error)} / {pct(groups[n][g].p90_abs_error)}"
            for n in names
        ]
        lines.append(f"| {g} | {s0.predicted}/{s0.rows} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def first_sight(preds: list[Prediction]) -> None:
    """Per grouping: in-sample error (rows the model was built on), and for the rows first
    seen after it, their error at first sight beside their error now."""
    groups = summaries(preds)
    for key in ("all", *GROUPINGS):
        print(
            f"| {key} | rows | now: median / p90 \\|error\\|, signed | first sight: rows, "
            "median / p90 \\|error\\|, signed | outside band (open) |"
        )
        print("|---|---|---|---|---|")
        for s in groups[key]:
            fs = (
                f"{s.first_sight_rows}: {pct(s.first_sight_median_abs)} / "
                f"{pct(s.first_sight_p90_abs)}, {pct(s.first_sight_median_signed, True)}"
                if s.first_sight_rows
                else "—"
            )
            print(
                f"| {s.group} | {s.predicted}/{s.rows} | {pct(s.median_abs_error)} / "
                f"{pct(s.p90_abs_error)}, {pct(s.median_signed_error, True)} | {fs} | "
                f"{s.failed} ({s.open}) |"
            )
        print()


def main() -> None:
    rows = load_rows(bundled_csv())
    if "--first-sight" in sys.argv:
        first_sight(predict_all(rows))
        return
    runs = {name: predict_all(rows, ceiling, engine) for name, ceiling, engine in SETTINGS}
    for key in ("all", "metric", "engine"):
        print(table(key, runs), end="\n\n")
    main_run = runs[SETTINGS[0][0]]
    print("| id | model | hardware | engine | metric | error | band | known gap |")
    print("|---|---|---|---|---|---|---|---|")
    for p in main_run:
        if p.row.band_note or p.passed is not True:
            print(
                f"| {p.row.id} | {p.row.model.split('/')[-1]} | {p.row.hardware} | "
                f"{p.row.engine} | {p.row.metric} | {pct(p.error, True)} | "
                f"±{100 * p.band:.0f}% | {p.row.band_note or p.why} |"
            )


if __name__ == "__main__":
    main()
