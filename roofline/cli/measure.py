"""`roofline measure`, `calibrate`, `validate` and `check`: the measuring half.

torch is imported only inside `measure`/`check` (through `kernels`), never at CLI start-up.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..errors import InconclusiveError, InvalidInputError, RooflineError
from ..files import signals_deferred, write_text
from ..measure.load import COMPETING_CORES, LoadMeter
from ..measure.results import (
    NOISY_SPREAD,
    Results,
    check_results,
    load_results,
    median_of_runs,
    run_spread,
    write_results,
)
from ..measure.validate import PROTOCOL, Validation, calibration, validation_of
from ..spec.catalog import load_hardware
from ..units import seconds, si
from . import app, common, interrupt_status
from .common import JsonFlag, SpecsDir, console, print_json

Device = Annotated[str, typer.Option(help="auto, cpu, or cuda:N")]
Suite = Annotated[str, typer.Option(help="ci (≤60 s on a 2-core CPU), quick, or full")]


Threads = Annotated[
    int | None,
    typer.Option(
        help="CPU intra-op threads (default: 1 for the ci suite, whose small kernels lose whole "
        "scheduler quanta at OpenMP barriers when a core is shared; all cores otherwise)",
        callback=common.in_range(1, 4096),
    ),
]


def _threads(suite: str, threads: int | None) -> int | None:
    return 1 if threads is None and suite == "ci" else threads


def _measure(device: str, suite: str, dtype: str | None, threads: int | None = None) -> Results:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise InvalidInputError(
            "measuring needs torch: pip install 'roofline[measure]' "
            "(CPU wheel: pip install torch==2.13.0)"
        ) from None
    from ..kernels.suite import default_dtypes, run
    from ..measure.device import detect

    info = detect(device, _threads(suite, threads))
    dtypes = tuple(common.comma_items(dtype, "--dtype")) if dtype else default_dtypes(info)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(f"measuring {info.name}", total=None)
        results = run(
            info,
            suite,
            dtypes,
            lambda i, n, name: bar.update(task, completed=i, total=n, description=name),
        )
    return results


def _kept_in(r: Results, out: Path) -> Path:
    """Where to write `r`: `out`, unless `r` is an interrupted run and `out` holds a complete
    results file (or a file that is not ours), which a shorter run never replaces; then
    `NAME.interrupted.json` beside it."""
    if r.complete or not out.exists():
        return out
    try:
        if not load_results(out).complete:
            return out
    except RooflineError:
        pass
    return out.with_name(f"{out.stem}.interrupted{out.suffix or '.json'}")


def _save_measured(r: Results, out: Path) -> Path:
    """Write `r`; for an interrupted run, say on stderr (one line) what was kept where, and
    stop with the interrupt's status."""
    with signals_deferred():  # a second Ctrl-C while saving waits until the file is whole
        path = write_results(r, _kept_in(r, out))
    if not r.complete:
        kept = "" if path == out else f"; the earlier results in {out} are unchanged"
        print(
            f"interrupted: {len(r.points)} measured point(s) kept in {path}{kept}", file=sys.stderr
        )
        raise SystemExit(interrupt_status())
    return path


def _summary_table(r: Results) -> Table:
    dev = r.environment.device
    peaks = dict(dev.datasheet_peak_flops_per_s)
    bw = dev.theoretical_bandwidth_bytes_per_s or dev.datasheet_bandwidth_bytes_per_s
    if dev.catalog_name:
        hw = load_hardware(dev.catalog_name)
        peaks = {d: hw.peak_flops_per_s(d) for d in hw.dense_peak_tflops}
        bw = hw.memory_bandwidth_bytes_per_s
    t = Table(
        title=f"{dev.name}: {r.suite} suite, torch {r.environment.torch_version}, "
        f"{r.environment.threads} threads"
    )
    for col in ("point", "median", "p20–p80", "FLOP/s", "% peak", "B/s", "% bw", "note"):
        t.add_column(col, justify="left" if col in ("point", "note") else "right")
    for p in r.points:
        pk, note = peaks.get(p.dtype), p.backend
        if not p.native:
            note = f"{p.dtype} emulated (not native): not averaged in"
        t.add_row(
            p.name,
            seconds(p.timing.median_s),
            f"{seconds(p.timing.p20_s)}–{seconds(p.timing.p80_s)}",
            si(p.flops_per_s, "FLOP/s"),
            f"{100 * p.flops_per_s / pk:.0f}%" if pk and p.flops else "—",
            si(p.bytes_per_s, "B/s"),
            f"{100 * p.bytes_per_s / bw:.0f}%" if bw else "—",
            note,
        )
    return t


@app.command()
def measure(
    device: Device = "auto",
    suite: Suite = "quick",
    dtype: Annotated[
        str | None,
        typer.Option(help="comma-separated, first one used for sweeps; default: the device's own"),
    ] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="results JSON")] = Path(
        "results.json"
    ),
    threads: Threads = None,
) -> None:
    """Time GEMMs, bandwidth, attention and whole model steps on this machine."""
    common.check_output(output, "results file")
    r = _measure(device, suite, dtype, threads)
    if r.complete:
        console.print(_summary_table(r))
        for s in r.skipped:
            console.print(f"skipped {s.name}: {s.reason}")
    _save_measured(r, output)
    console.print(f"wrote {output}")


@app.command()
def calibrate(
    results: Annotated[Path, typer.Argument(help="results JSON from `roofline measure`")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="hardware YAML (default: print it)")
    ] = None,
) -> None:
    """Write a hardware spec of what this machine achieved (use it with --hardware)."""
    common.check_output(output, "hardware spec")
    spec = calibration(load_results(results), results)
    text = yaml.safe_dump(spec.model_dump(mode="json", exclude_none=True), sort_keys=False)
    if output is None:
        print(text, end="")
        return
    write_text(output, text)
    console.print(f"wrote {output}: use `roofline estimate --hardware {output}`")


def _validation_tables(v: Validation) -> list[Table]:
    pts = Table(
        title=f"predicted vs measured on {v.hardware.name} (ceiling: {v.ceiling})",
        caption=PROTOCOL,
        caption_justify="left",
    )
    for col in ("point", "predicted", "measured", "error", "band", "result"):
        pts.add_column(col, justify="left" if col == "point" else "right")
    for r in v.rows:
        verdict = "[green]pass[/green]" if r.passed else "[red]FAIL[/red]"
        result = (verdict + (f": {r.note}" if r.note else "")) if r.gated else f"info: {r.note}"
        pts.add_row(
            r.point.name,
            seconds(r.predicted_s) if r.predicted_s == r.predicted_s else "—",
            seconds(r.measured_s),
            f"{100 * r.error:+.0f}%" if r.error == r.error else "—",
            f"±{100 * r.band:.0f}%",
            result,
        )
    fam = Table(
        title="per family: |error| of the gated points",
        caption="median error: signed, of the family; a whole-step family whose median leaves "
        "its bias band fails (every step slower together: a regression, not noise)",
        caption_justify="left",
    )
    cols = ("family", "points", "median |error|", "worst |error|", "band", "failures")
    for col in cols + ("median error", "bias band"):
        fam.add_column(col, justify="left" if col == "family" else "right")
    for s in v.summaries():
        bias = "—" if s.bias_band is None else f"±{100 * s.bias_band:.0f}%"
        median = f"{100 * s.median_error:+.0f}%"
        fam.add_row(
            s.family,
            str(s.points),
            f"{100 * s.median_abs_error:.0f}%",
            f"{100 * s.worst_abs_error:.0f}%",
            f"±{100 * s.band:.0f}%",
            str(s.failures),
            f"[red]{median} FAIL[/red]" if s.biased else median,
            bias,
        )
    return [pts, fam]


def _validate(
    results_path: Path,
    r: Results,
    hardware: str | None,
    ceiling: str | None,
    tolerance: float | None,
    json_out: bool,
    specs_dir: list[Path] | None,
) -> None:
    roof = common.ceiling(ceiling) if ceiling else None
    v = validation_of(results_path, r, hardware, roof, tolerance, specs_dir or ())
    if json_out:
        print_json(v.as_dict())
    else:
        for t in _validation_tables(v):
            console.print(t)
        if (iv := v.interval_check()) is not None:
            console.print(
                f"calibrated {iv['coverage']:.0%} interval of this machine (held-out points, "
                f"split-conformal; `calibrate` writes it into the spec): time × "
                f"{iv['low']:.2f}–{iv['high']:.2f}; leave-one-out it covers "
                f"{iv['covered_leave_one_out']} of {iv['points']} held-out points",
                highlight=False,
            )
    if not v.passed:
        failed = sum(not row.passed for row in v.rows)
        biased = [s for s in v.summaries() if s.biased]
        what = [f"{failed} point(s) outside their band"] if failed else []
        what += [
            f"{s.family} off by {s.median_error:+.0%} at the median (bias band ±{s.bias_band:.0%})"
            for s in biased
        ]
        raise InvalidInputError("; ".join(what) + "; see the tables")


Hardware = Annotated[
    str | None,
    typer.Option(
        *common.HARDWARE_FLAGS,
        help="predict on this spec instead of the calibrated one (default ceiling then: datasheet)",
    ),
]
Ceiling = Annotated[str | None, typer.Option(help="datasheet or achievable")]
Tolerance = Annotated[
    float | None,
    typer.Option(
        help="one band for every family, e.g. 0.25 (default: the per-family bands)",
        callback=common.in_range(0, 1e9, open_low=True),
    ),
]


@app.command("validate")
def validate_cmd(
    results: Annotated[
        list[Path] | None,
        typer.Argument(
            help="results JSON from `roofline measure`; with --published, a CSV of published "
            "measurements (default: the bundled set); with --serving, serving benchmark "
            "result files (vllm bench serve / SGLang bench_serving JSON, AIPerf or genai-perf "
            "JSON or CSV, GuideLLM JSON or YAML, InferenceX results)"
        ),
    ] = None,
    published: Annotated[
        bool,
        typer.Option("--published", help="predict published measurements of real engines instead"),
    ] = False,
    serving: Annotated[
        bool,
        typer.Option(
            "--serving",
            help="rerun serving benchmark results (vllm bench serve, SGLang, AIPerf, genai-perf, "
            "GuideLLM, InferenceX) in the simulator and compare every metric they report",
        ),
    ] = False,
    model: Annotated[
        str | None,
        typer.Option(help="with --serving: the model (default: the one the file names)"),
    ] = None,
    tp: common.Tp = 1,
    policy_name: Annotated[
        str | None,
        typer.Option("--policy", help="with --serving: serving policy (default: the engine's)"),
    ] = None,
    requests: Annotated[
        int | None,
        typer.Option(
            help="with --serving: requests simulated where the file gives no count",
            callback=common.in_range(1, 10**6),
        ),
    ] = None,
    replicas: Annotated[
        int,
        typer.Option(
            help="with --serving: identical replicas of --hardware/--tp the benchmark's load was "
            "spread over (a load-balanced service)",
            callback=common.in_range(1, common.MAX_GPUS),
        ),
    ] = 1,
    max_error: Annotated[
        float | None,
        typer.Option(
            help="with --serving: exit 1 if a median or the output throughput is further off "
            "than this fraction (e.g. 0.25)",
            callback=common.in_range(0, 1e6, open_low=True),
        ),
    ] = None,
    engine: Annotated[
        str | None,
        typer.Option(
            help="with --published: one engine profile for every row (default: each row's)"
        ),
    ] = None,
    gate: Annotated[
        bool,
        typer.Option(
            "--gate/--no-gate", help=("with --published: exit 1 if any row leaves its band")
        ),
    ] = True,
    write_residuals: Annotated[
        Path | None,
        typer.Option(
            help="with --published: write the rows' residuals (the evidence of the intervals; "
            "roofline/data/residuals.csv for the bundled set) to this CSV"
        ),
    ] = None,
    hardware: Hardware = None,
    ceiling: Ceiling = None,
    tolerance: Tolerance = None,
    json_out: JsonFlag = False,
    specs_dir: SpecsDir = None,
) -> None:
    """Predicted vs measured per point; exit 1 if any point leaves its band. Without
    --hardware the ceilings are calibrated from the same results (held-out protocol).
    With --published: every row of a published-measurements CSV predicted with its engine.
    With --serving: serving benchmark results rerun on --hardware/--tp/--engine."""
    if serving:
        if published:
            raise InvalidInputError("give --serving or --published, not both")
        from .serving_validate import run_serving

        run_serving(
            results or [],
            model,
            hardware,
            tp,
            engine or common.DEFAULT_ENGINE,
            policy_name,
            requests,
            max_error,
            json_out,
            specs_dir,
            replicas,
        )
        return
    if len(results or []) > 1:
        raise InvalidInputError("give one results file (several only with --serving)")
    one = results[0] if results else None
    if published:
        from .published import run_published

        run_published(
            one, ceiling or "achievable", engine, json_out, gate, specs_dir, write_residuals
        )
        return
    if one is None:
        raise InvalidInputError("give the results JSON of `roofline measure`, or --published")
    _validate(one, load_results(one), hardware, ceiling, tolerance, json_out, specs_dir)


@app.command()
def check(
    device: Device = "auto",
    output: Annotated[Path, typer.Option("--output", "-o", help="results JSON")] = Path(
        "roofline-check.json"
    ),
    tolerance: Tolerance = None,
    json_out: JsonFlag = False,
    threads: Threads = None,
    repeats: Annotated[
        int,
        typer.Option(
            help="runs of the suite; each point is the median run's (odd numbers pick a real "
            "run): on a noisy machine, repeat rather than widen the bands",
            callback=common.in_range(1, 99),
        ),
    ] = 3,
) -> None:
    """Measure the ci suite and validate it in one command (for your CI). Exit 0: every point
    in its band and every whole-step family's median in its bias band; 1: a point or a median
    is out on a quiet machine; 2: out, but even after measuring twice more the runs disagree
    by more than NOISY_SPREAD, or points are out while other processes keep half a core or
    more busy and every median is in its bias band (too noisy to judge)."""
    common.check_output(output, "results file")
    runs: list[Results] = []
    meter = LoadMeter.start()
    for attempt in range(1 + EXTRA_ROUNDS):
        if not _measure_runs(runs, device, repeats, threads):
            break  # interrupted: keep what was measured
        r = median_of_runs(runs)
        if not r.complete:
            break
        v = validation_of(output, r, None, None, tolerance, ())
        noise = None if v.passed else _noise(runs, meter.other_cores(), v)
        if noise is None or attempt == EXTRA_ROUNDS:
            break
        common.NOTES.append(
            f"note: points left their bands while {noise}: measured {repeats} more run(s)"
        )
    r = median_of_runs(runs)
    spread = run_spread(runs)
    load = meter.other_cores()
    path = _save_measured(r, output)
    check_results(r, path)  # the checks `validate` makes of the file just written
    if len(runs) > 1:
        common.NOTES.append(
            f"note: {len(runs)} runs, which disagree by {spread:.0%} (median point)"
        )
    if load is not None:
        common.NOTES.append(
            f"note: other processes kept {load:.1f} of {os.cpu_count()} cores busy while measuring"
        )
    try:
        _validate(path, r, None, None, tolerance, json_out, None)
    except InvalidInputError as e:
        noise = _noise(runs, load, validation_of(path, r, None, None, tolerance, ()))
        if r.complete and noise is not None:
            raise InconclusiveError(
                f"{e}, but the machine is too noisy to judge: {noise}; rerun on a quiet "
                "machine or with more --repeats"
            ) from None
        if load is None:
            raise
        raise InvalidInputError(
            f"{e} (other processes kept {load:.1f} of {os.cpu_count()} cores busy while measuring)"
        ) from None


def _noise(runs: list[Results], load: float | None, v: Validation) -> str | None:
    """Why a miss may be the machine's rather than the code's, or None: the runs disagree by
    more than NOISY_SPREAD, or other processes kept COMPETING_CORES or more busy while no
    whole-step family left its bias band (a regression slows every step, and the median it
    moves is what a competing load does not: that stays a failure)."""
    spread = run_spread(runs)
    if spread > NOISY_SPREAD:
        return (
            f"its {len(runs)} runs disagree by {spread:.0%} (median point, above "
            f"{NOISY_SPREAD:.0%})"
        )
    if load is not None and load >= COMPETING_CORES and not any(s.biased for s in v.summaries()):
        return (
            f"other processes kept {load:.1f} cores busy (a competing load) and every "
            "whole-step median stayed in its bias band"
        )
    return None


#: Rounds of `repeats` more runs `check` measures when points miss on a noisy machine.
EXTRA_ROUNDS = 2


def _measure_runs(runs: list[Results], device: str, repeats: int, threads: int | None) -> bool:
    """Measure `repeats` more runs into `runs`; False when interrupted (the last run is then
    marked incomplete, or the interrupt propagates if nothing was measured)."""
    try:
        for _ in range(repeats):
            runs.append(_measure(device, "ci", None, threads))
            if not runs[-1].complete:
                return False
    except KeyboardInterrupt:
        if not runs:
            raise
        runs[-1] = runs[-1].model_copy(update={"complete": False})
        return False
    return True
