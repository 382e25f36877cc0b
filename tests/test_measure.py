"""Measure path: kernel counts against the calculator and against torch itself, the results
file round trip, calibrate → estimate, and validate's gate through the CLI."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from roofline.cli import main  # noqa: E402
from roofline.kernels.llama import LlamaStack  # noqa: E402
from roofline.kernels.micro import attention_case, gemm_case, stream_case  # noqa: E402
from roofline.kernels.suite import cpu_plan, cuda_plan, fp8_native, run  # noqa: E402
from roofline.kernels.timing import Budget, time_cpu  # noqa: E402
from roofline.measure.calibrate import calibrated_spec  # noqa: E402
from roofline.measure.device import cpu_flops_per_cycle, detect_cpu, match_catalog  # noqa: E402
from roofline.measure.kernel_ops import op_flops_bytes  # noqa: E402
from roofline.measure.results import DeviceInfo, load_results, write_results  # noqa: E402
from roofline.measure.validate import validate  # noqa: E402
from roofline.spec.catalog import load_model  # noqa: E402
from roofline.spec.forward import operators  # noqa: E402
from roofline.spec.operators import Step  # noqa: E402

CPU = torch.device("cpu")


def torch_flops(fn) -> int:
    """FLOPs torch counts; SDPA on the math backend, whose matmuls the counter sees (it has
    no formula for the CPU flash kernel)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


@pytest.mark.parametrize("M,N,K", [(1, 64, 32), (8, 48, 16), (33, 7, 5)])
def test_gemm_counts_match_torch(M, N, K):
    case = gemm_case(M, N, K, "fp32", CPU)
    flops, nbytes = op_flops_bytes(case.op, "fp32")
    assert flops == torch_flops(case.fn) == 2 * M * N * K
    assert nbytes == 4 * (M * K + K * N + M * N)  # A, W, C in fp32


def test_fp8_gemm_is_the_w8a8_product_and_counts_a_16_bit_output():
    """M=8, N=48, K=16 in e4m3, C in bf16: FLOPs 2·8·48·16 = 12,288; bytes A 8·16·1 +
    W 16·48·1 + C 8·48·2 = 128 + 768 + 768 = 1,664 (C is written in bf16, not fp8)."""
    case = gemm_case(8, 48, 16, "fp8", CPU)
    c = case.fn()
    assert c.dtype == torch.bfloat16 and c.shape == (8, 48)
    flops, nbytes = op_flops_bytes(case.op, "fp8")
    assert (flops, nbytes) == (12_288, 1_664)


def test_fp8_gemm_matches_a_float_matmul_of_its_operands():
    """The case draws A then W from randn and casts them to e4m3: redrawn under the same
    seed they give the reference, C = A·Wᵀ summed in fp32 and rounded once to bf16."""
    e4m3 = torch.float8_e4m3fn
    torch.manual_seed(0)
    c = gemm_case(4, 16, 32, "fp8", CPU).fn()
    torch.manual_seed(0)
    a, w = torch.randn(4, 32).to(e4m3), torch.randn(16, 32).to(e4m3)
    ref = (a.float() @ w.float().t()).to(torch.bfloat16)
    assert torch.allclose(c.float(), ref.float(), rtol=1e-2, atol=1e-2)
    assert not torch.equal(c, torch.zeros_like(c))


def test_fp8_points_flow_through_measure_calibrate_and_validate(tmp_path, monkeypatch):
    """An fp8 peak and sweep point (as a GPU suite adds them) run, are recorded with the
    W8A8 bytes (peak 64³: 64·64 + 64·64 + 2·64·64 = 16,384; sweep M=16: 16·64 + 64·64 +
    2·16·64 = 7,168), calibrate to an fp8 matmul fraction and are predicted by validate."""
    import roofline.kernels.suite as suite
    from roofline.kernels.suite import Plan, PointSpec

    info = detect_cpu()
    dram = suite.dram_elems(info.last_level_cache_bytes, 4)  # ≥ 4x the LLC: a DRAM read
    pts = (
        PointSpec("bandwidth", "read", "fp32", dict(elems=dram)),
        PointSpec("bandwidth", "read", "fp32", dict(elems=1024)),
        PointSpec("gemm_peak", "gemm", "fp32", dict(M=64, N=64, K=64)),
        PointSpec("gemm_peak", "gemm", "fp8", dict(M=64, N=64, K=64)),
        PointSpec("gemm_sweep", "gemm", "fp8", dict(M=16, N=64, K=64)),
    )
    monkeypatch.setattr(suite, "plan", lambda *a: Plan(pts, Budget(0.0, 0.01, min_repeats=2)))
    r = run(info, "ci", ("fp32",))
    fp8 = {p.family: p for p in r.points if p.dtype == "fp8"}
    assert fp8["gemm_peak"].bytes == 16_384 and fp8["gemm_sweep"].bytes == 7_168
    path = tmp_path / "r.json"
    write_results(r, path)
    hw = calibrated_spec(load_results(path), path)
    assert 0 < hw.achievable.matmul_fraction["fp8"] <= 1
    rows = {row.point.name: row for row in validate(load_results(path), hw, "achievable").rows}
    assert rows["gemm_sweep gemm fp8 M=16 N=64 K=64"].predicted_s > 0


@pytest.mark.parametrize(
    "kind,cc,native",
    [("cuda", "8.0", False), ("cuda", "8.6", False), ("cuda", "8.9", True),
     ("cuda", "9.0", True), ("cuda", "10.0", True), ("cpu", None, False)],
)  # fmt: skip
def test_fp8_points_only_where_tensor_cores_run_fp8(kind, cc, native):
    """FP8 tensor cores start at compute capability 8.9 (Ada; Hopper 9.0, Blackwell 10.0):
    an A100 (8.0) gets no fp8 points, an H200 (9.0) gets 2 peaks + 7 M × 3 shapes."""
    info = DeviceInfo(kind=kind, name="x", compute_capability=cc)
    assert fp8_native(info) is native
    if kind == "cuda":
        fp8 = [p for p in cuda_plan("quick", info, ("bf16",)).points if p.dtype == "fp8"]
        assert len(fp8) == (2 + 7 * 3 if native else 0)
        if native:
            assert {p.family for p in fp8} == {"gemm_peak", "gemm_sweep"}


@pytest.mark.parametrize(
    "kernel,moved,flops_per_elem", [("copy", 2, 0), ("read", 1, 0), ("triad", 3, 2)]
)
def test_stream_counts(kernel, moved, flops_per_elem):
    flops, nbytes = op_flops_bytes(stream_case(kernel, 1000, "fp32", CPU).op, "fp32")
    assert (flops, nbytes) == (flops_per_elem * 1000, moved * 1000 * 4)


@pytest.mark.parametrize("B,T,S,N,K", [(2, 1, 10, 4, 2), (1, 1, 7, 4, 4)])
def test_decode_attention_flops_match_torch(B, T, S, N, K):
    H = 8
    case = attention_case(B, T, S, N, K, H, "fp32", CPU)
    flops, nbytes = op_flops_bytes(case.op, "fp32")
    # Q·Kᵀ and P·V over S + 1 keys: 2 · 2 · B · N · (S + 1) · H
    assert flops == torch_flops(case.fn) == 4 * B * N * (S + 1) * H
    # read Q + write O (2·B·N·H), read the cache (2·B·K·(S+1)·H), append one token (2·B·K·H)
    assert nbytes == 4 * (2 * B * N * H + 2 * B * K * (S + 1) * H + 2 * B * K * H)


def test_cold_decode_attention_cycles_its_caches():
    """B=2 S=10 K=2 H=8 fp32: a cache of 2·2·2·11·8·4 = 2,816 B. Asked to stay cold past
    10,000 B, calls cycle through 1 + 10,000 // 2,816 = 4 caches, each with the new token
    appended (row S of cache c written by the c-th call) and the same attention output, since
    the caches are equal but for what each call writes."""
    B, S, N, K, H = 2, 10, 4, 2, 8
    torch.manual_seed(0)
    case = attention_case(B, 1, S, N, K, H, "fp32", CPU, cold_bytes=10_000)
    k_cells = [
        c.cell_contents for c in case.fn.__closure__ or () if isinstance(c.cell_contents, list)
    ]
    (caches,) = k_cells
    assert len(caches) == 4
    outs = [case.fn() for _ in range(5)]  # the fifth reuses the first cache
    assert all(o.shape == (B, N, 1, H) for o in outs)
    torch.testing.assert_close(outs[0], outs[4])
    hot = attention_case(B, 1, S, N, K, H, "fp32", CPU)
    assert hot.op == case.op  # the same counts: cycling changes where the bytes come from


def test_prefill_attention_counts_causal_pairs():
    T = 6
    op = attention_case(1, T, 0, 2, 1, 4, "fp32", CPU).op
    assert op.flops == 4 * (T * (T + 1) / 2) * 2 * 4  # 21 causal pairs x N·H x 4


def test_llama_stack_matches_calculator():
    m = load_model("tiny-llama-30m").model_copy(
        update=dict(
            layers=2, d_model=64, heads=4, kv_heads=2, head_dim=16, d_ff=128, vocab_size=100
        )
    )
    stack = LlamaStack(m, batch=2, max_tokens=12, dtype=torch.float32, device=CPU)
    assert sum(p.numel() for p in stack.parameters()) == m.total_params
    # K and V caches together hold 2 · L · K · H values per token per sequence
    assert stack.k_cache.numel() + stack.v_cache.numel() == 2 * 12 * m.kv_elems_per_token
    tokens = torch.randint(0, 100, (2, 1))
    matmul_like = [o for o in operators(m, Step(2, 1, 8)) if o.kind in ("matmul", "attention")]
    # FlopCounterMode counts matmuls and SDPA, not elementwise ops
    assert torch_flops(lambda: stack.forward(tokens, 8)) == sum(o.flops for o in matmul_like)


def test_dram_buffers_grow_with_a_large_last_level_cache():
    """fp32 (4 B): a 32 MiB LLC needs 4 · 32 MiB = 128 MiB = 2^25 elements, the floor; a
    VM reporting its host's 480 MiB L3 needs 4 · 480 MiB / 4 B = 480 Mi = 503,316,480
    elements; 100 MB (not a whole Mi of elements) rounds up: 4 · 10^8 B / 4 B = 10^8
    elements, ⌈10^8 / 2^20⌉ = 96 blocks of 2^20 = 100,663,296; 8 MiB: 4 · 8 MiB / 4 B = 2^23,
    below the floor, so 2^25; no cache known: the floor. bf16 (2 B) on a 480 MiB LLC:
    4 · 480 MiB / 2 B = 960 Mi elements."""
    from roofline.kernels.suite import dram_elems

    assert dram_elems(32 * 2**20, 4) == 2**25
    assert dram_elems(480 * 2**20, 4) == 503_316_480
    assert dram_elems(10**8, 4) == 100_663_296
    assert dram_elems(8 * 2**20, 4) == 2**25
    assert dram_elems(None, 4) == 2**25
    assert dram_elems(480 * 2**20, 2) == 960 * 2**20
    info = DeviceInfo(kind="cpu", name="x", caches_bytes={"L2": 2 * 2**20, "L3": 480 * 2**20})
    sizes = {p.shape["elems"] for p in cpu_plan("ci", info, ("fp32",)).points if p.kernel == "copy"}
    assert sizes == {503_316_480}


def test_reads_between_the_caches_and_dram_step_by_1_5x_and_2x():
    """From 2^23 elements (32 MiB fp32), alternately 1.5x and 2x the last power of two, below
    the DRAM buffer. 480 MiB LLC: DRAM 503,316,480 elements; 2^23·(1, 1.5, 2, 3, 4, 6, 8, 12,
    16, 24, 32, 48) = 8,388,608 … 402,653,184 (1536 MiB); 2^23·64 = 536,870,912 is past it.
    32 MiB LLC: DRAM 2^25, so 2^23, 1.5·2^23, 2^24, 1.5·2^24 = 25,165,824 (32-96 MiB)."""
    from roofline.kernels.suite import cache_sweep_elems, dram_elems

    m = 2**23
    xeon = (
        m,
        3 * m // 2,
        2 * m,
        3 * m,
        4 * m,
        6 * m,
        8 * m,
        12 * m,
        16 * m,
        24 * m,
        32 * m,
        48 * m,
    )
    assert cache_sweep_elems(dram_elems(480 * 2**20, 4)) == xeon
    assert cache_sweep_elems(dram_elems(32 * 2**20, 4)) == (m, 12_582_912, 2**24, 25_165_824)
    info = DeviceInfo(kind="cpu", name="x", caches_bytes={"L2": 2 * 2**20, "L3": 32 * 2**20})
    reads = {p.shape["elems"] for p in cpu_plan("ci", info, ("fp32",)).points if p.kernel == "read"}
    assert reads == {2**10, 2**16, 2**22, m, 12_582_912, 2**24, 25_165_824, 2**25}
    # the full suite also reads 2^18 and 2^24 (64 MiB, the sweep's third size): each point once
    names = [p.name for p in cpu_plan("full", info, ("fp32",)).points]
    assert len(names) == len(set(names))


def test_cpu_flags_to_flops_per_cycle():
    assert cpu_flops_per_cycle({"avx", "avx2", "fma"}) == {"fp32": 32}
    assert cpu_flops_per_cycle({"avx512f", "avx512_bf16", "avx2", "fma"}) == {
        "fp32": 64,
        "bf16": 128,
    }
    assert cpu_flops_per_cycle({"sse2"}) == {"fp32": 8}


def test_catalog_matching():
    assert match_catalog("NVIDIA H100 80GB HBM3")[0] == "h100-sxm"
    name, note = match_catalog("Imaginary GPU 9000")
    assert name is None and "no catalog spec" in note


def test_timing_reports_median_and_spread():
    t = time_cpu(lambda: sum(range(100)), Budget(0.0, 0.01))
    assert t.p20_s <= t.median_s <= t.p80_s and t.repeats >= 5


@pytest.fixture(scope="module")
def tiny_results(tmp_path_factory):
    """A real but tiny measurement: the ci plan's families with small shapes."""
    info = detect_cpu()
    import roofline.kernels.suite as suite

    plan = cpu_plan("ci", info, ("fp32",))
    small, seen = [], set()
    for p in plan.points:
        s = dict(p.shape)
        if p.kernel == "gemm":
            s = dict(M=min(s["M"], 64), N=256, K=256)
        elif "elems" in s:
            s["elems"] = min(s["elems"], 2**16) if s["elems"] < 2**22 else s["elems"]
        elif p.kernel == "sdpa":
            s.update(S=min(s["S"], 64), T=min(s["T"], 16))
        elif p.family == "decode_step" and (s["B"] > 1 or s["S"] > 128):
            continue
        if p.family == "gemm_sweep":  # shrunk to the calibration GEMMs' size: 100x off them
            continue
        key = (p.kernel, p.dtype, p.model, tuple(sorted(s.items())))
        if key not in seen:  # a results file holds each shape once (`results.contradiction`)
            seen.add(key)
            small.append(type(p)(p.family, p.kernel, p.dtype, s, p.model, p.native))
    original = suite.plan
    suite.plan = lambda *a: type(plan)(tuple(small), Budget(0.0, 0.01, min_repeats=2), plan.models)
    try:
        r = run(info, "ci", ("fp32",))
    finally:
        suite.plan = original
    path = tmp_path_factory.mktemp("m") / "r.json"
    write_results(r, path)
    return path


def test_results_round_trip_and_calibrate(tiny_results, tmp_path, capsys):
    r = load_results(tiny_results)
    assert r.complete and r.environment.threads >= 1 and r.points
    hw = calibrated_spec(r, tiny_results)
    assert hw.achievable.memory_bandwidth_fraction <= 1 and "fp32" in hw.dense_peak_tflops
    out = tmp_path / "me.yaml"
    main(["calibrate", str(tiny_results), "-o", str(out)])
    main(
        [
            "estimate",
            "tiny-llama-30m",
            "--hardware",
            str(out),
            "--dtype",
            "fp32",
            "--batch",
            "1",
            "--prompt",
            "16",
            "--gen",
            "4",
            "--json",
        ]
    )
    out_text = capsys.readouterr().out
    est = json.loads(out_text[out_text.index("\n{") + 1 :])
    assert est["hardware"] == hw.name and est["cases"][0]["tpot_s"] > 0


def test_validate_gate_exit_codes(tiny_results, capsys):
    main(["validate", str(tiny_results), "--tolerance", "1e6", "--json"])  # all within band
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] and "held-out" in report["protocol"]
    with pytest.raises(SystemExit) as e:
        main(["validate", str(tiny_results), "--tolerance", "0.0001"])
    assert e.value.code == 1
    assert capsys.readouterr().err.strip().startswith("error: ")


def test_validate_predictions_come_from_the_calculator(tiny_results):
    r = load_results(tiny_results)
    v = validate(r, calibrated_spec(r, tiny_results))
    for row in v.rows:
        if row.point.family == "decode_step":
            from roofline.calc.cost import decode_step_s
            from roofline.spec.precision import Precision

            s = row.point.shape
            assert row.predicted_s == pytest.approx(
                float(
                    decode_step_s(
                        r.models[row.point.model],
                        v.hardware,
                        s["B"],
                        s["S"],
                        Precision.uniform("fp32"),
                    )
                )
            )


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["measure", "--device", "cuda:0"], "--device cpu"),
        (["measure", "--device", "tpu"], "unknown device"),
        (["validate", "/nonexistent.json"], "cannot read results"),
        (["measure", "--device", "cpu", "--threads", "999"], "--threads must be between"),
    ],
)
def test_bad_inputs_one_line(argv, needle, capsys):
    if argv[-1] == "cuda:0" and torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert e.value.code == 1 and needle in err and "\n" not in err
