"""Charts: each renders to a file of the expected pixel size, and the plotted data are the
result objects' numbers, read back from the figure's artists (found by their gid)."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("matplotlib")

from conftest import run_cli  # noqa: E402

from roofline.calc import memory
from roofline.calc.phases import estimate  # noqa: E402
from roofline.calc.stack import Stack  # noqa: E402
from roofline.cli import main  # noqa: E402
from roofline.render import plots  # noqa: E402
from roofline.spec.catalog import load_hardware, load_model  # noqa: E402
from roofline.spec.precision import Precision  # noqa: E402
from roofline.studies.sweeps import context_grid, kv_curve  # noqa: E402

H100 = load_hardware("h100-sxm", ())
LLAMA2_13B = load_model("llama-2-13b", ())
CHART_PX = (900, 560)  # FIGSIZE_IN (9.0, 5.6) at 100 dpi
WIDE_PX = (1200, 480)  # WIDE_FIGSIZE_IN (12.0, 4.8) at 100 dpi


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the PNG header's IHDR chunk (bytes 16-24, big-endian)."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def by_gid(fig, gid: str):
    found = [a for a in fig.axes[0].get_children() if a.get_gid() == gid]
    assert len(found) == 1, f"expected one artist with gid {gid}, found {len(found)}"
    return found[0]


def rendered(fig, tmp_path: Path, name: str = "chart.png") -> Path:
    path = plots.save(fig, tmp_path / name)
    assert path.exists() and path.stat().st_size > 0
    return path


# ---- roofline ----------------------------------------------------------------------------
def test_roofline_roofs_and_ridge_points(tmp_path):
    fig = plots.roofline_chart(H100)
    assert png_size(rendered(fig, tmp_path)) == CHART_PX
    roof = by_gid(fig, "roof:bf16/fp16").get_xydata()
    # ridge of the H100 SXM bf16 roof: 989.4 TFLOP/s / 3.35 TB/s = 295.34 FLOP/byte
    assert roof[1] == pytest.approx([989.4e12 / 3.35e12, 989.4e12])
    assert roof[2, 1] == 989.4e12  # flat compute ceiling
    # the slope is the bandwidth: y = 3.35e12 B/s * x
    assert roof[0, 1] == pytest.approx(3.35e12 * roof[0, 0])
    # fp8 and int8 share 1978.9 T and are one roof; every dtype appears once
    assert by_gid(fig, "roof:fp8/int8").get_xydata()[1, 1] == 1978.9e12
    gids = {a.get_gid() or "" for a in fig.axes[0].get_lines()}
    roofs = {g for g in gids if g.startswith("roof:")}
    assert roofs == {"roof:fp8/int8", "roof:bf16/fp16", "roof:tf32", "roof:fp32"}


def test_roofline_operator_points_are_the_estimates_numbers(tmp_path):
    estimates = [
        estimate(LLAMA2_13B, Stack.resolve(LLAMA2_13B, H100), [b], 1024, 1) for b in (1, 64)
    ]
    fig = plots.roofline_chart(H100, estimates)
    rendered(fig, tmp_path)
    for e in estimates:
        b = e.cases[0].batch
        for phase, step in (("prefill", e.prefill), ("decode", e.decode)):
            drawn = np.concatenate(
                [
                    by_gid(fig, f"ops:{phase}:B={b}:{kind}").get_offsets()
                    for kind in ("matmul", "attention", "elementwise")
                ]
            )
            expected = [
                (float(o.intensity_flops_per_byte), float(o.attained_flops_per_s))
                for o in step.ops
                if o.flops > 0
            ]
            np.testing.assert_allclose(sorted(map(tuple, drawn)), sorted(expected))
            # the embedding gather has no FLOPs and no place on a log axis
            assert len(drawn) == len(step.ops) - 1
    achievable = by_gid(fig, "roof:achievable").get_xydata()
    c = estimates[0].prefill.ceilings
    assert achievable[1] == pytest.approx([c.ridge_point_flops_per_byte, c.flops_per_s])


MEASURED = Path(__file__).parent.parent / "docs" / "measurements" / "cpu-ci.json"


def test_roofline_measured_overlay():
    from roofline.measure.results import load_results

    r = load_results(MEASURED)
    cpu = load_hardware(str(MEASURED.with_name("cpu-ci-calibrated.yaml")))
    fig = plots.roofline_chart(cpu, measured=r.points)
    for fam in ("gemm_sweep", "decode_step"):
        pts = [p for p in r.points if p.family == fam and p.native]
        # x = FLOPs / bytes (the calculator's counts), y = FLOPs / measured median time
        np.testing.assert_allclose(
            by_gid(fig, f"measured:{fam}").get_offsets(),
            [[p.flops / p.bytes, p.flops / p.timing.median_s] for p in pts],
        )
    # the emulated bf16 GEMM has no roof on this CPU and is left out
    peak = [p for p in r.points if p.family == "gemm_peak"]
    assert any(not p.native for p in peak)
    assert len(by_gid(fig, "measured:gemm_peak").get_offsets()) == sum(p.native for p in peak)


# ---- frontier ----------------------------------------------------------------------------
def test_frontier_marks_the_memory_limit(tmp_path):
    batches = [1, 2, 4, 8, 16, 32, 64, 128]
    e = estimate(LLAMA2_13B, Stack.resolve(LLAMA2_13B, H100), batches, 1024, 256)
    fig = plots.frontier_chart([e])
    assert png_size(rendered(fig, tmp_path)) == CHART_PX
    fit = by_gid(fig, "frontier:llama-2-13b:h100-sxm").get_xydata()
    over = by_gid(fig, "over-memory:llama-2-13b:h100-sxm").get_xydata()
    # KV per sequence: 2 (K,V) * 40 layers * 40 heads * 128 dims * 2 bytes * 1280 tokens
    kv_per_seq = 2 * 40 * 40 * 128 * 2 * 1280  # 1.049e9 bytes
    weights = 2 * LLAMA2_13B.total_params  # bf16
    usable = 0.9 * 81_559 * 2**20  # 76.97e9 B: vLLM's 0.9 of the H100's 81,559 MiB
    assert weights + 32 * kv_per_seq < usable < weights + 64 * kv_per_seq
    assert len(fit) == 6 and len(over) == 2  # B = 1..32 fit, 64 and 128 do not
    cases = e.cases
    assert fit.tolist() == [[c.tpot_s, c.decode_tokens_per_s] for c in cases[:6]]
    assert over.tolist() == [[c.tpot_s, c.decode_tokens_per_s] for c in cases[6:]]
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert f"memory limit: B=32 fits in 77 GB usable (largest {e.max_batch})" in texts


def test_frontier_overlays_models_and_devices(tmp_path):
    a100 = load_hardware("a100-sxm-80gb", ())
    m8 = load_model("llama-3.1-8b", ())
    es = [
        estimate(m, Stack.resolve(m, hw), [1, 8], 512, 64)
        for m in (LLAMA2_13B, m8)
        for hw in (H100, a100)
    ]
    fig = plots.frontier_chart(es)
    rendered(fig, tmp_path, "frontier.svg")
    assert (tmp_path / "frontier.svg").read_text().lstrip().startswith("<?xml")
    assert (
        len([a for a in fig.axes[0].get_lines() if (a.get_gid() or "").startswith("frontier:")])
        == 4
    )


# ---- KV memory ---------------------------------------------------------------------------
def test_kv_chart_curves_and_device_line(tmp_path):
    m8 = load_model("llama-3.1-8b", ())
    curves = [kv_curve(LLAMA2_13B, Precision()), kv_curve(m8, Precision(kv="fp8"), batch=4)]
    fig = plots.kv_chart(curves, [H100])
    assert png_size(rendered(fig, tmp_path)) == CHART_PX
    for c in curves:
        xy = by_gid(fig, f"kv:{c.model.name}").get_xydata()
        assert xy[:, 0].tolist() == c.context_tokens.tolist()
        assert xy[:, 1].tolist() == c.kv_bytes.tolist()
    # Llama 2 13B at its 4096-token max context: 2 * 40 * 40 * 128 values * 2 bytes * 4096
    assert by_gid(fig, "kv:llama-2-13b").get_xydata()[-1].tolist() == [4096, 3_355_443_200]
    # Llama 3.1 8B, B=4 at 128k in fp8: 4 * 131072 * 2 * 32 * 8 * 128 * 1 byte
    assert curves[1].kv_bytes[-1] == 4 * 131072 * 2 * 32 * 8 * 128
    assert by_gid(fig, "memory:h100-sxm").get_ydata()[0] == 81_559 * 2**20  # nvidia-smi MiB


def test_kv_chart_plots_the_per_architecture_cache(tmp_path):
    """Windowed and SSM models: the plotted points are `memory.kv_cache_bytes`, read back from
    the figure. Mistral 7B v0.1: 32 local layers of W = 4096, K·H = 8·128, so from S = 4096 on
    32 · 4096 · 2·8·128 values · 2 bytes; Mamba 2.8B: 64 layers of d_inner = 2·2560 = 5120
    channels, scan state 5120·16 + conv window 5120·4 values, bf16, at every S."""
    mistral, mamba = load_model("mistral-7b-v0.1", ()), load_model("mamba-2.8b", ())
    curves = [kv_curve(mistral, Precision(), batch=2), kv_curve(mamba, Precision(), batch=2)]
    fig = plots.kv_chart(curves, [H100])
    assert png_size(rendered(fig, tmp_path)) == CHART_PX
    assert fig.axes[0].get_ylabel() == "KV cache / state, all sequences (bytes)"
    for c in curves:
        S, kv = by_gid(fig, f"kv:{c.model.name}").get_xydata().T
        assert kv.tolist() == memory.kv_cache_bytes(c.model, Precision(), 2, S).tolist()
    S, kv = by_gid(fig, "kv:mistral-7b-v0.1").get_xydata().T
    assert 4096 in S and S[-1] == 32768  # the window's knee is a point of the curve
    assert kv[S >= 4096].tolist() == [2 * 32 * 4096 * 2 * 8 * 128 * 2] * int(sum(S >= 4096))
    assert kv[S == 2048].tolist() == [2 * 32 * 2048 * 2 * 8 * 128 * 2]
    S, kv = by_gid(fig, "kv:mamba-2.8b").get_xydata().T
    assert S[-1] == 1_048_576
    assert set(kv.tolist()) == {2 * 64 * (5120 * 16 + 5120 * 4) * 2}
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["Mistral 7B v0.1: GQA, window 4,096 (bf16)", "Mamba 2.8B: SSM state (bf16)"]


@given(st.integers(1, 2_000_000))
def test_context_grid_doubles_up_to_the_max(max_context):
    g = context_grid(max_context)
    assert g[-1] == max_context
    assert np.all(np.diff(g) > 0)
    assert np.all(g[1:-1] == 2 * g[:-2])  # doubling, except the last step to the max
    assert g[0] == min(256, max_context)


# ---- validation and serving (synthetic inputs until measure/validate and serve land) ------
def test_validation_chart(tmp_path):
    from roofline.measure.results import load_results
    from roofline.measure.validate import validate

    cpu = load_hardware(str(MEASURED.with_name("cpu-ci-calibrated.yaml")))
    v = validate(load_results(MEASURED), cpu, "achievable")
    fig = plots.validation_chart(v)
    assert png_size(rendered(fig, tmp_path)) == CHART_PX
    drawn = [
        xy
        for fam in dict.fromkeys(r.point.family for r in v.rows if r.gated)
        for xy in (
            by_gid(fig, f"pass:{fam}").get_offsets().tolist()
            if any(r.passed and r.gated and r.point.family == fam for r in v.rows)
            else []
        )
    ]
    expected = [
        [r.predicted_s, r.measured_s]
        for fam in dict.fromkeys(r.point.family for r in v.rows if r.gated)
        for r in v.rows
        if r.gated and r.passed and r.point.family == fam
    ]
    np.testing.assert_allclose(drawn, expected)
    # a band of ±50%: |pred − meas| / meas ≤ 0.5  ⇔  pred / 1.5 ≤ meas ≤ pred / 0.5
    band = by_gid(fig, "band:0.5").get_paths()[0].vertices
    lo, hi = fig.axes[0].get_xlim()
    assert band[:, 1].min() == pytest.approx(lo / 1.5)
    assert band[:, 1].max() == pytest.approx(hi / 0.5)


def test_validation_chart_marks_failures(tmp_path):
    from roofline.measure.results import load_results
    from roofline.measure.validate import validate

    cpu = load_hardware(str(MEASURED.with_name("cpu-ci-calibrated.yaml")))
    v = validate(load_results(MEASURED), cpu, "achievable", tolerance=0.01)
    failed = [[r.predicted_s, r.measured_s] for r in v.rows if r.gated and not r.passed]
    assert failed
    fig = plots.validation_chart(v)
    np.testing.assert_allclose(by_gid(fig, "fail").get_offsets(), failed)


def test_serve_chart(tmp_path):
    latencies = {"static batching": [0.3, 0.1, 0.2, 0.4], "continuous": [0.05, 0.08]}
    sweeps = [
        plots.RateSweep("static batching", [1, 2, 4], [900, 1700, 2000]),
        plots.RateSweep("continuous", [1, 2, 4], [950, 1900, 3600]),
    ]
    fig = plots.serve_chart(latencies, sweeps, "TTFT")
    assert png_size(rendered(fig, tmp_path)) == WIDE_PX
    cdf = by_gid(fig, "cdf:static batching").get_xydata()
    assert cdf.tolist() == [[0.1, 0.25], [0.2, 0.5], [0.3, 0.75], [0.4, 1.0]]
    rate = [a for a in fig.axes[1].get_lines() if a.get_gid() == "rate:continuous"][0]
    assert rate.get_xydata().tolist() == [[1, 950], [2, 1900], [4, 3600]]
    assert png_size(rendered(plots.serve_chart(latencies), tmp_path, "one.png")) == CHART_PX


def test_cli_serve_chart_plots_the_simulation_results(tmp_path, monkeypatch):
    """`plot serve`: each CDF is the Summary's sorted latency samples over i/n, and each rate
    curve the sweep's (rate, throughput) points in rate order, from the same result objects."""
    from roofline.serve.config import ServeConfig, serve_runs
    from roofline.serve.sweep import sweep_rate

    drawn = []
    monkeypatch.setattr(plots, "save", lambda fig, path: drawn.append(fig) or path)
    out = tmp_path / "serve.png"
    main(
        [
            "plot",
            "serve",
            "llama-3.1-8b",
            "-H",
            "h100-sxm",
            "--rate",
            "4",
            "--requests",
            "30",
            "--input-tokens",
            "200",
            "--output-tokens",
            "30",
            "--compare",
            "static,chunked",
            "--latency",
            "ttft",
            "--sweep-rate",
            "-o",
            str(out),
        ]
    )
    (fig,) = drawn
    runs = serve_runs(
        ServeConfig(
            model="llama-3.1-8b",
            hardware="h100-sxm",
            policies=("static", "chunked"),
            requests=30,
            input_tokens=200,
            output_tokens=30,
        )
    )
    run = runs.run
    for i, p in enumerate(runs.policies):
        ttft = np.sort(run(i, 4.0).ttft_s)
        cdf = by_gid(fig, f"cdf:{p.name}").get_xydata()
        np.testing.assert_array_equal(cdf[:, 0], ttft)
        np.testing.assert_array_equal(cdf[:, 1], np.arange(1, 31) / 30)
        points = sorted(sweep_rate(lambda r, i=i: run(i, r), 4.0, 0.9).points)
        line = [a for a in fig.axes[1].get_lines() if a.get_gid() == f"rate:{p.name}"][0]
        np.testing.assert_array_equal(
            line.get_xydata(), [[r, s.throughput_tokens_per_s] for r, s in points]
        )
    monkeypatch.undo()
    assert png_size(rendered(fig, tmp_path)) == WIDE_PX


# ---- through the CLI ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ["roofline", "-H", "h100-sxm", "-m", "llama-3.1-8b", "--batch", "1,64", "--prompt", "512"],
        ["batch", "llama-2-13b", "-H", "h100-sxm", "-H", "a100-sxm-80gb", "--batch", "1,32,64"],
        ["kv", "llama-2-13b", "llama-3.1-8b", "-H", "l4"],
        [
            "serve",
            "mixtral-8x7b",
            "-H",
            "h200",
            "--requests",
            "20",
            "--input-tokens",
            "100",
            "--output-tokens",
            "10",
        ],
    ],
)
def test_cli_writes_charts(tmp_path, capsys, args):
    out = tmp_path / "c.png"
    main(["plot", *args, "-o", str(out)])
    assert png_size(out) == CHART_PX
    assert f"wrote {out}" in capsys.readouterr().out


def test_cli_frontier_as_text_without_output(capsys):
    main(["plot", "batch", "llama-2-13b", "--batch", "1,64"])
    out = capsys.readouterr().out
    assert "Llama 2 13B" in out and "decode tok/s" in out and "no" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["roofline", "-o", "chart.pdf"], "give a file ending in .png or .svg"),
        (["roofline", "-o", "no/such/dir/c.png"], "does not exist; create it first"),
        (["batch", "no-such-model", "-o", "c.png"], "no-such-model"),
        (["roofline", "-m", "llama-2-7b", "--ceiling", "fast", "-o", "c.png"], "unknown ceiling"),
        (["kv", "llama-2-7b", "--batch", "0", "-o", "c.png"], "--batch must be at least 1"),
        (
            ["serve", "llama-2-7b", "--latency", "p99", "--requests", "5", "-o", "c.png"],
            "unknown latency 'p99'",
        ),
        (["serve", "llada-8b", "-o", "c.png"], "diffusion LM"),
    ],
)
def test_cli_bad_inputs_one_line(tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["plot", *args])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_cli_without_matplotlib_says_what_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    with pytest.raises(SystemExit) as exit_info:
        main(["plot", "roofline", "-o", str(tmp_path / "c.png")])
    assert exit_info.value.code == 1
    assert "pip install 'roofline[plot]'" in capsys.readouterr().err


def test_cli_import_does_not_load_matplotlib():
    code = "import sys, roofline.cli; sys.exit('matplotlib' in sys.modules)"
    root = Path(__file__).resolve().parent.parent
    assert subprocess.run([sys.executable, "-c", code], cwd=root).returncode == 0


def test_kv_chart_draws_what_is_left_after_each_models_weights() -> None:
    """Llama-3.1-8B bf16 on an H100 SXM: a dotted line at 85,520,809,984 B less its
    8,030,261,248 · 2 B of weights."""
    from roofline.calc.memory import weights_bytes
    from roofline.render.plots import kv_chart
    from roofline.spec.catalog import load_hardware, load_model
    from roofline.spec.precision import Precision
    from roofline.studies.sweeps import kv_curve

    m, hw, p = load_model("llama-3.1-8b"), load_hardware("h100-sxm"), Precision()
    fig = kv_chart([kv_curve(m, p)], [hw])
    lines = {ln.get_gid(): ln for ln in fig.axes[0].get_lines() if ln.get_gid()}
    left = lines["left:h100-sxm:llama-3.1-8b"].get_ydata()[0]
    assert left == pytest.approx(85_520_809_984 - weights_bytes(m, p))
    assert weights_bytes(m, p) == pytest.approx(8_030_261_248 * 2, rel=0.002)


def test_plot_commands_share_the_options_of_the_commands_they_draw() -> None:
    """Defect: `plot plan --rate` defaulted to 10 where `plan` has none, `plot serve
    --requests` to 1000 where `serve` has 2000, and `--kv` meant the KV format in `plot serve`
    but the KV layout in `serve`. Every option the two share now has one default; the rate,
    request and plan options one declaration (`cli.common`). `plot serve --compare` alone
    differs on purpose: a chart compares policies."""
    import inspect

    from roofline.cli import plan as plan_cli
    from roofline.cli import plot as plot_cli
    from roofline.cli import serve as serve_cli

    for cmd, plot, own in (
        (plan_cli.plan_cmd, plot_cli.plan_cmd, {"model"}),
        (serve_cli.serve, plot_cli.serve_cmd, {"model", "compare"}),
    ):
        a, b = inspect.signature(cmd).parameters, inspect.signature(plot).parameters
        shared = (a.keys() & b.keys()) - own
        assert {"rate", "requests"} <= shared
        assert {n: a[n].default for n in shared} == {n: b[n].default for n in shared}
        for n in ("rate", "requests"):
            assert a[n].annotation == b[n].annotation, n
        # `--kv` means one thing wherever it is accepted
        if "kv" in b:
            assert a["kv"].annotation == b["kv"].annotation


def test_plot_batch_and_serve_draw_the_interval_band(tmp_path, capsys) -> None:
    """The TPOT interval is a shaded band around the batch frontier, the latency interval
    around each policy's CDF; --interval 0 draws none."""
    out = tmp_path / "b.svg"
    code, _, err = run_cli(capsys, "plot", "batch", "llama-3.1-8b", "-o", str(out))
    assert code == 0, err
    assert out.read_text().count('id="band:llama-3.1-8b:h100-sxm"') == 1
    code, _, err = run_cli(
        capsys, "plot", "batch", "llama-3.1-8b", "-o", str(out), "--interval", "0"
    )
    assert code == 0 and 'id="band:' not in out.read_text()
    serve = tmp_path / "s.svg"
    code, _, err = run_cli(
        capsys,
        "plot",
        "serve",
        "llama-3.1-8b",
        "--requests",
        "100",
        "--compare",
        "continuous,chunked",
        "-o",
        str(serve),
    )
    assert code == 0, err
    text = serve.read_text()
    assert 'id="band:continuous"' in text and 'id="band:chunked"' in text
