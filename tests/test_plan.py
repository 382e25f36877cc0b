"""`roofline plan`: the queueing arithmetic by hand, a toy optimum by hand, the frontier, the
refusals, and the commands that reproduce the choice."""

from __future__ import annotations

import json
import math
import shlex

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.calc.placement import Parallel
from roofline.cli import main
from roofline.plan import (
    OK,
    TPOT,
    TTFT,
    GroupTable,
    Requirement,
    Space,
    aggregated_latency,
    concurrency,
    decode_pool_latency,
    pareto_mask,
    screen,
    shortlist,
    wait_p95_s,
)

GRID = np.array([1.0, 2, 4, 8, 16, 32, 64])


def group(name: str, usd: float, t_pf: float, t_dec, gpus: int = 1) -> GroupTable:
    t = np.broadcast_to(np.asarray(t_dec, dtype=float), GRID.shape).copy()
    return GroupTable(
        hardware=name,
        fmt="bf16",
        parallel=Parallel(tp=gpus),
        usd_per_gpu_hour=usd,
        t_prefill_s=t_pf,
        batch_grid=GRID,
        tpot_grid_s=t,
    )


def test_concurrency_solves_littles_law_by_hand():
    # t(b) = 10 ms + 1 ms·b, a = 500 sequences·s⁻¹·(per step-second):
    # N = 500·(0.01 + 0.001 N) = 5 + 0.5 N  →  N = 10
    g = group("x", 1, 0.1, 0.01 + 0.001 * GRID)
    assert concurrency(np.array([500.0]), g)[0] == pytest.approx(10.0)
    # a·t(b) > b for every b ≤ 64: a = 2000 needs N = 20/(1-2) < 0 — no fixed point
    assert math.isinf(concurrency(np.array([2000.0]), g)[0])


def test_wait_p95_by_hand():
    # ρ = 0.5, s = 0.1 s: W = 0.5·0.1 / (2·0.5) = 0.05 s; p95 = (W/ρ)·ln(20ρ) = 0.1·ln 10
    assert wait_p95_s(np.array([0.5]), 0.1)[0] == pytest.approx(0.1 * math.log(10))
    assert wait_p95_s(np.array([0.04]), 0.1)[0] == 0.0  # P(wait > 0) = ρ < 5 %
    assert math.isinf(wait_p95_s(np.array([1.0]), 0.1)[0])


def test_aggregated_latency_by_hand():
    # λ = 10/3 req/s, t_pf = 0.1 s → ρ = 1/3; G = 11; t(b) = 20 ms at every b
    g = group("cheap", 0.9, 0.1, 0.02)
    lat = aggregated_latency(g, np.array([10 / 3]), 11)
    # a = λ(G-1)/(1-ρ) = (100/3)/(2/3) = 50 → N = 50 · 0.02 = 1
    assert lat.concurrency[0] == pytest.approx(1.0)
    # μ = λ(G-1)·t/(1-ρ) = 1; TPOT₉₅ = 0.02 + (1 + 1.645·1)·0.1/10
    assert lat.tpot_p95_s[0] == pytest.approx(0.02 + 2.645 * 0.01)
    # W = (1/3)(0.1)/(2·2/3) = 0.025; wait₉₅ = 0.075·ln(20/3); + t_pf + one step
    assert lat.ttft_p95_s[0] == pytest.approx(0.1 + 0.075 * math.log(20 / 3) + 0.02)


def test_decode_pool_has_no_prefill_interference():
    g = group("d", 1, 0.5, 0.02)  # a long prefill that a decode-only pool never runs
    lat = decode_pool_latency(g, np.array([5.0]), 11, 1024)
    assert lat.tpot_p95_s[0] == pytest.approx(0.02)  # no link in the toy: hand-off free
    assert lat.concurrency[0] == pytest.approx(5 * 10 * 0.02)


TOY = (group("cheap", 0.9, 0.1, 0.02), group("fast", 3.0, 0.02, 0.005))
TOY_REQ = dict(rate_per_s=10, prompt_tokens=100, gen_tokens=11, slo_ttft_s=1.0)


def toy_best(slo_tpot_s: float):
    req = Requirement(slo_tpot_s=slo_tpot_s, **TOY_REQ)
    space = Space(("cheap", "fast"), max_gpus=8, max_batches=(64,), serving="aggregated")
    points = screen(TOY, req, space)
    return points, shortlist(points, TOY, 1)[0]


def test_toy_optimum_by_hand():
    # cheap (t_pf 0.1 s, t 20 ms, $0.9/h) with m replicas, λ = 10/m, ρ = 1/m:
    #  m = 1: ρ = 1, saturated.
    #  m = 2: ρ = 1/2, N = (5·10/0.5)·0.02 = 2, μ = 5·10·0.04 = 2,
    #         TPOT₉₅ = 0.02 + (2 + 1.645·√2)·0.01 = 63.3 ms > 50 ms.
    #  m = 3: TPOT₉₅ = 46.45 ms ≤ 50 ms (test above), TTFT₉₅ = 0.262 s: $2.70/h.
    # fast (t_pf 20 ms, t 5 ms, $3/h), m = 1: ρ = 0.2, μ = 10·10·0.00625 = 0.625,
    #         TPOT₉₅ = 0.005 + (0.625 + 1.645·√0.625)·0.002 = 8.85 ms: $3.00/h.
    # cheapest: 3 × cheap, $2.70/h over 10·11 = 110 tok/s.
    _, best = toy_best(0.05)
    assert (best.hardware, best.replicas, best.gpus) == ("cheap", 3, 3)
    assert best.usd_per_hour == pytest.approx(2.7)
    assert best.cost_per_million_tokens_usd == pytest.approx(2.7 / 3600 / 110 * 1e6)  # 6.818
    assert best.tpot_p95_s == pytest.approx(0.04645)


def test_toy_optimum_moves_with_the_slo():
    # TPOT ≤ 40 ms: cheap m = 4 gives 0.02 + (2/3 + 1.645·√(2/3))·0.01 = 40.1 ms (fails),
    # m = 5 gives 36.6 ms at $4.50/h; fast m = 1 at $3.00/h is now the cheapest.
    points, best = toy_best(0.04)
    assert (best.hardware, best.replicas) == ("fast", 1)
    cheap4 = (points.group == 0) & (points.replicas == 4)
    assert points.status[cheap4][0] == TPOT
    assert points.tpot_p95_s[cheap4][0] == pytest.approx(
        0.02 + (2 / 3 + 1.645 * math.sqrt(2 / 3)) * 0.01
    )
    cheap5 = (points.group == 0) & (points.replicas == 5)
    assert points.status[cheap5][0] == OK


def brute_nondominated(x: np.ndarray) -> np.ndarray:
    le = (x[None, :, :] <= x[:, None, :]).all(-1)
    lt = (x[None, :, :] < x[:, None, :]).any(-1)
    return ~(le & lt).any(1)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(*(st.integers(0, 6),) * 3), min_size=1, max_size=120))
def test_pareto_mask_matches_brute_force(rows):
    x = np.array(rows, dtype=float)
    assert (pareto_mask(x[:, 0], x[:, 1], x[:, 2]) == brute_nondominated(x)).all()


def test_pareto_mask_large_random_against_brute_force():
    rng = np.random.default_rng(1)
    x = rng.random((3000, 3)).round(2)  # ties included
    assert (pareto_mask(*x.T) == brute_nondominated(x)).all()


PLAN = [
    "plan",
    "llama-3.1-8b",
    "--rate",
    "4",
    "--prompt",
    "512",
    "--gen",
    "128",
    "--slo-ttft",
    "0.5",
    "--slo-tpot",
    "0.03",
    "--hardware",
    "h100-sxm,a100-sxm-80gb",
    "--max-gpus",
    "4",
    "--max-batches",
    "16,64",
    "--confirm",
    "3",
    "--requests",
    "300",
]


@pytest.fixture(scope="module")
def planned():
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main([*PLAN, "--json"])
    return json.loads(out.getvalue())


def test_plan_json_frontier_is_non_dominated(planned):
    f = planned["frontier"]
    assert f
    x = np.array([[c["cost_per_million_tokens_usd"], c["tpot_p95_s"], c["ttft_p95_s"]] for c in f])
    assert brute_nondominated(x).all()
    chosen = planned["chosen"]
    assert chosen["simulated"]["meets_slo"]
    assert chosen["simulated"]["tpot_p95_s"] <= 0.03
    assert planned["configurations"] >= 100
    # the chosen one is the cheapest the simulator confirmed
    passed = [k for k in planned["confirmed"] if k["simulated"]["meets_slo"]]
    assert chosen["cost_per_million_tokens_usd"] == min(
        k["cost_per_million_tokens_usd"] for k in passed
    )


def test_plan_commands_reproduce_the_simulation(planned, capsys):
    serve = next(c for c in planned["commands"] if c.startswith("roofline serve"))
    capsys.readouterr()
    main([*shlex.split(serve)[1:], "--json"])
    s = json.loads(capsys.readouterr().out)
    sim = planned["chosen"]["simulated"]
    assert s["ttft_s"]["p95"] == pytest.approx(sim["ttft_p95_s"])
    assert s["tpot_s"]["p95"] == pytest.approx(sim["tpot_p95_s"])
    est = next(c for c in planned["commands"] if c.startswith("roofline estimate"))
    main([*shlex.split(est)[1:], "--json"])
    assert json.loads(capsys.readouterr().out)["cases"][0]["tpot_s"] > 0


def test_plan_table_output(capsys):
    main(PLAN)
    out = capsys.readouterr().out
    for needle in (
        "chosen",
        "Pareto frontier",
        "rejected regions",
        "roofline serve",
        "price h100-sxm",
    ):
        assert needle in out


@pytest.mark.parametrize(
    "argv, needle",
    [
        (
            ["plan", "llama-3.1-405b", "--rate", "1", "--hardware", "l4,a10g", "--max-gpus", "8"],
            "memory: llama-3.1-405b fits on none of l4, a10g",
        ),
        (
            [
                "plan",
                "llama-3.1-8b",
                "--rate",
                "1",
                "--hardware",
                "h100-sxm",
                "--slo-tpot",
                "0.0001",
            ],
            "TPOT SLO 0.1 ms is below the achievable roofline",
        ),
        (
            [
                "plan",
                "llama-3.1-8b",
                "--rate",
                "1",
                "--hardware",
                "h100-sxm",
                "--slo-ttft",
                "0.0001",
            ],
            "raise --slo-ttft to at least",
        ),
        (
            ["plan", "llama-3.1-70b", "--rate", "500", "--hardware", "h100-sxm", "--max-gpus", "8"],
            "throughput: no deployment within --max-gpus 8 sustains 500 req/s",
        ),
        (
            ["plan", "llama-3.1-8b", "--rate", "1", "--hardware", "gb200"],
            "--price gb200=USD_PER_GPU_HOUR",
        ),
        (["plan", "llama-3.1-8b", "--hardware", "h100-sxm"], "give --rate"),
    ],
)
def test_infeasible_requirements_give_one_line(refused, argv, needle):
    refused(argv, needle)


def test_plan_chart_draws_frontier_and_chosen(tmp_path):
    pytest.importorskip("matplotlib")
    from roofline.render import plots

    pts = [plots.PlanPoint("a", 1.0, 0.02, 0.5), plots.PlanPoint("b", 2.0, 0.01, 0.2)]
    fig = plots.plan_chart(pts, pts[0], 0.05, 1.0, "toy")
    gids = {a.get_gid() for ax in fig.axes for a in ax.collections}
    assert {
        "frontier:tpot_p95_s",
        "chosen:tpot_p95_s",
        "frontier:ttft_p95_s",
        "chosen:ttft_p95_s",
    } <= gids
    out = plots.save(fig, tmp_path / "plan.svg")
    assert out.read_text().count("<svg") == 1


def test_plan_from_a_trace(tmp_path, capsys, refused):
    # 101 arrivals 0.25 s apart: (101 - 1) / 25 s = 4 req/s; mean lengths 512 and 128
    rows = ["arrival_s,input_tokens,output_tokens"] + [
        f"{i * 0.25},{256 if i % 2 else 768},128" for i in range(101)
    ]
    f = tmp_path / "trace.csv"
    f.write_text("\n".join(rows) + "\n")
    argv = [
        "plan",
        "llama-3.1-8b",
        "--trace",
        str(f),
        "--hardware",
        "h100-sxm",
        "--max-gpus",
        "2",
        "--max-batches",
        "16,64",
        "--confirm",
        "2",
        "--slo-tpot",
        "0.03",
    ]
    main([*argv, "--json"])
    r = json.loads(capsys.readouterr().out)
    assert r["requirement"]["rate_per_s"] == pytest.approx(4.0)
    assert r["requirement"]["prompt_tokens"] == round((51 * 768 + 50 * 256) / 101)
    assert r["requirement"]["gen_tokens"] == 128
    assert r["confirmed"][0]["simulated"]["requests"] == 101  # the trace's own requests
    refused([*argv, "--rate", "3"], "--trace sets the arrivals; drop --rate")


def test_max_rate_per_replica_by_hand():
    from roofline.plan import max_rate_per_replica

    # t_pf = 0.1 s, t = 20 ms, G = 11: N = λ·10·0.02/(1 − 0.1λ) must keep N + 1.645√N ≤ 64,
    # i.e. √N = (−1.645 + √(1.645² + 256))/2 = 7.2197, N = 52.124, so
    # λ = 52.124 / (0.2 + 0.1·52.124) = 9.631 req/s (the grid steps 0.8 % below it)
    g = group("cheap", 0.9, 0.1, 0.02)
    r = max_rate_per_replica(g, 100, 11, 64)
    assert 9.631 * 0.99 <= r <= 9.631


def test_a_candidate_the_simulator_refuses_makes_room_for_the_next(monkeypatch):
    from roofline import plan as planmod
    from roofline.errors import InvalidInputError
    from roofline.spec.catalog import load_hardware, load_model
    from roofline.studies.economics import load_prices

    real, calls = planmod.confirm, []

    def first_refused(model, c, *args, **kw):
        calls.append(c.label)
        if len(calls) == 1:
            raise InvalidInputError("cannot cost this one")
        return real(model, c, *args, **kw)

    monkeypatch.setattr(planmod, "confirm", first_refused)
    req = Requirement(4, 512, 128, 0.5, 0.03)
    space = Space(("h100-sxm",), max_gpus=2, max_batches=(16, 64), serving="aggregated")
    r = planmod.plan(
        load_model("llama-3.1-8b"),
        [load_hardware("h100-sxm")],
        req,
        space,
        load_prices(),
        confirm_top=2,
        requests=100,
        engine=None,
    )
    assert r.unconfirmed == ((calls[0], "cannot cost this one"),)
    assert len(r.confirmed) == 2 and calls[0] not in {c.label for c in r.confirmed}


def test_confidence_checks_the_slo_against_the_upper_end():
    """With `--confidence`, a point meets the SLO only when its p95 times the upper end of the
    interval does. The toy of `test_aggregated_latency_by_hand`: TPOT₉₅ = 0.02 + 2.645 · 0.01
    = 46.45 ms against a 50 ms SLO: met centrally; with the TPOT band's upper end 1.1,
    51.1 ms is over."""
    import dataclasses

    from roofline.plan import robust_factors

    base = group("cheap", 0.9, 0.1, 0.02)
    space = Space(("cheap",), max_gpus=1, max_batches=(64,), serving="aggregated")
    req = Requirement(10 / 3, 512, 11, 1.0, 0.05)
    assert screen([base], req, space).status[0] == OK
    robust = dataclasses.replace(base, tpot_factor=1.1)
    assert screen([robust], req, space).status[0] == TPOT
    # the factors: 1 for the central value and on the datasheet ceiling (a bound); else the
    # widest upper end over the batch classes, never below 1
    from roofline.calc.intervals import bundled, key_of
    from roofline.calc.stack import Stack
    from roofline.spec.catalog import load_hardware, load_model

    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    stack = Stack.resolve(m, hw)
    assert robust_factors(stack, None) == (1.0, 1.0)
    assert robust_factors(Stack.resolve(m, hw, ceiling="datasheet"), 0.9) == (1.0, 1.0)
    highs = [
        bundled().band(key_of("decode", "vllm", 1, b, hw.vendor), 0.9).high for b in (1, 16, 64)
    ]
    assert robust_factors(stack, 0.9)[1] == pytest.approx(max(*highs, 1.0))


def test_the_central_plan_says_how_the_choice_changes_at_0_9(planned):
    """The default plan checks the SLO on the central p95 and says what `--confidence 0.9`
    would choose among the candidates it simulated; the chosen one carries its intervals."""
    note = planned["robust_choice"]
    assert note.startswith("at confidence 0.9 ")
    chosen = planned["chosen"]
    if "the same" in note:
        assert chosen["label"] in note
    iv = chosen["intervals"]
    sim = chosen["simulated"]
    for name in ("ttft_p95_s", "tpot_p95_s"):
        b = iv[name]["simulated"]
        assert b["low"] <= sim[name] <= b["high"], name
    assert iv["tpot_p95_s"]["coverage"] == 0.8


def test_plan_formats_keep_tensor_groups_with_their_format():
    """Defect: `plan --formats bf16,experts=mxfp4` was refused ("unknown dtype
    'experts=mxfp4'"): the comma separated both formats and tensor groups. A group=format item
    now joins the format before it; the model as released is searched whatever is asked."""
    from roofline.cli.plan import plan_formats, released_format
    from roofline.spec.catalog import load_model

    assert plan_formats("bf16,experts=mxfp4,fp8") == ("bf16,experts=mxfp4", "fp8")
    assert plan_formats("fp8/bf16,int4-g128") == ("fp8/bf16", "int4-g128")
    with pytest.raises(Exception, match="names a tensor group before any format"):
        plan_formats("experts=mxfp4")
    assert released_format(load_model("gpt-oss-20b")) == "bf16,experts=mxfp4"
    # DeepSeek-V3: fp8 weights and activations, a bf16 KV (the shorthand would say fp8)
    assert released_format(load_model("deepseek-v3")) == (
        "fp8,embedding=bf16,lm_head=bf16,norms=bf16/bf16"
    )


def test_a_cost_that_differs_in_the_last_bits_is_not_a_trade_off():
    """Defect: B (cost c, TPOT 30 ms) stayed on the frontier beside A (cost c·(1 + 1e-15),
    TPOT 20 ms), though A is as cheap and faster. Costs within 1e-9 of each other are one
    value on the frontier, so A dominates B."""
    from roofline.plan.screen import _settled

    c = 1.2345
    cost = np.array([c * (1 + 1e-15), c])
    tpot, ttft = np.array([0.020, 0.030]), np.array([0.5, 0.5])
    assert pareto_mask(cost, tpot, ttft).tolist() == [True, True]  # unsettled: both
    assert pareto_mask(_settled(cost), tpot, ttft).tolist() == [True, False]
    # a real difference stays a trade-off
    cost2 = np.array([c * 1.001, c])
    assert pareto_mask(_settled(cost2), tpot, ttft).tolist() == [True, True]


def test_a_point_failing_only_on_queued_ttft_is_shortlisted_for_the_simulator():
    """The toy at TTFT ≤ 0.2 s (TPOT ≤ 50 ms): 3 × cheap has TTFT₉₅ = t_pf + wait₉₅ + t
    with ρ = 1/3: 0.1 + 0.075·ln(20/3) + 0.02 = 0.262 s > 0.2 s, so the screen marks it TTFT
    over and picks 1 × fast ($3.00/h). Its lower bound, the prefill alone t_pf = 0.1 s, meets
    the SLO: the M/D/1 queue serves prompts one by one where chunked prefill batches them, so
    the point goes to the simulator too, at its cost. (Issue 39: the bound was t_pf + t and
    only points cheaper than the screen's choice were added; now every point whose bound meets
    the SLO is, so 4 × and 5 × cheap, dearer than 1 × fast, are as well.)"""
    req = Requirement(rate_per_s=10, prompt_tokens=100, gen_tokens=11, slo_ttft_s=0.2,
                      slo_tpot_s=0.05)  # fmt: skip
    space = Space(("cheap", "fast"), max_gpus=8, max_batches=(64,), serving="aggregated")
    points = screen(TOY, req, space)
    cheap3 = np.flatnonzero((points.group == 0) & (points.replicas == 3))[0]
    assert points.status[cheap3] == TTFT
    assert points.ttft_p95_s[cheap3] == pytest.approx(0.1 + 0.075 * math.log(20 / 3) + 0.02)
    assert points.ttft_floor_s[cheap3] == pytest.approx(0.1)
    strict = shortlist(points, TOY, 5)
    assert [(c.hardware, c.replicas) for c in strict][0] == ("fast", 1)
    wide = shortlist(points, TOY, 5, req)
    # by cost: 3 × cheap $2.70/h (TTFT 0.262 s), 1 × fast $3.00, 4 × cheap $3.60 (0.227 s),
    # 5 × cheap $4.50 (0.207 s), 6 × cheap $5.40 (0.192 s, feasible in the screen too)
    assert [(c.hardware, c.replicas) for c in wide] == [
        ("cheap", 3), ("fast", 1), ("cheap", 4), ("cheap", 5), ("cheap", 6)
    ]  # fmt: skip
