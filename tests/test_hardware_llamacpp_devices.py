"""Devices added for checking published llama.cpp / consumer / single-GCD measurements (issue 14).

Each peak is derived here from the unit counts and clocks its source states, so a typo in the
YAML cannot match a typo in the test. Capacities are checked against catalog devices sold in
the same units (ratios), so the checks hold whichever unit the memory field is stored in."""

from __future__ import annotations

import pytest

from roofline.spec.catalog import load_hardware

# Apple GPU cores have 128 FP32 ALUs, one FMA (2 FLOP) per clock; no matrix units, so
# bf16/fp16 run at the same rate (hmc-tech Apple GPU pages; notebookinfo: 4096 ALUs / 32 cores).
APPLE = [
    # (name, GPU cores, clock GHz, bandwidth GB/s, max memory in units of the M3 Max's 128 GB)
    ("apple-m1-max", 32, 1.296, 400, 64 / 128),  # 10.62 TFLOPS (Apple rounds to 10.4)
    ("m2-max", 38, 1.398, 400, 96 / 128),  # 13.60
    ("m3-ultra", 80, 1.398, 819.2, 512 / 128),  # 28.63 = 2 x the 40-core M3 Max's 14.32
]


@pytest.mark.parametrize(("name", "cores", "ghz", "gb_per_s", "of_m3_max"), APPLE)
def test_apple_peaks_from_cores_and_clock(
    name: str, cores: int, ghz: float, gb_per_s: float, of_m3_max: float
) -> None:
    hw = load_hardware(name)
    derived = cores * 128 * 2 * ghz * 1e9
    for dtype in ("fp32", "bf16", "fp16"):
        assert hw.peak_flops_per_s(dtype) == pytest.approx(derived, rel=0.005)
    assert hw.compute_units == cores
    assert hw.memory_bandwidth_bytes_per_s == pytest.approx(gb_per_s * 1e9)
    assert hw.memory_bytes == pytest.approx(of_m3_max * load_hardware("m3-max").memory_bytes)
    assert not hw.supports("fp8")


def test_m3_ultra_is_two_m3_max() -> None:
    ultra, m3max = load_hardware("m3-ultra"), load_hardware("m3-max")
    assert ultra.peak_flops_per_s("fp32") == pytest.approx(
        2 * m3max.peak_flops_per_s("fp32"), rel=0.005
    )
    assert ultra.compute_units == 2 * m3max.compute_units


def test_rtx_3090_ti_from_cuda_cores() -> None:
    """10,752 CUDA cores x 2 FLOP x 1.86 GHz = 40.0 TFLOPS; GeForce GA102 tensor cores:
    fp16/bf16 with FP32 accumulate 2x FP32, int8 8x, int4 16x (the RTX 3090 entry's ratios)."""
    hw = load_hardware("RTX 3090 Ti")
    assert hw.name == "rtx-3090-ti"
    fp32 = 10_752 * 2 * 1.86e9
    assert fp32 == pytest.approx(40.0e12, rel=1e-3)
    assert hw.peak_flops_per_s("fp32") == pytest.approx(fp32, rel=1e-3)
    assert hw.peak_flops_per_s("bf16") == pytest.approx(2 * fp32, rel=1e-3)
    assert hw.peak_flops_per_s("int8") == pytest.approx(8 * fp32, rel=1e-3)
    # 21 Gbps x 384 bit / 8 = 1008 GB/s
    assert hw.memory_bandwidth_bytes_per_s == 21e9 * 384 / 8 == 1008e9
    rtx3090 = load_hardware("rtx-3090")
    assert hw.peak_flops_per_s("bf16") / rtx3090.peak_flops_per_s("bf16") == pytest.approx(
        (84 * 1860) / (82 * 1695), rel=0.01
    )  # SMs x clock
    assert hw.memory_bytes == pytest.approx(rtx3090.memory_bytes, rel=0.001)  # both 24 GB


def test_mi250x_gcd_is_half_the_package() -> None:
    gcd, package = load_hardware("mi250x-gcd"), load_hardware("mi250x")
    assert gcd.memory_bytes == package.memory_bytes / 2  # 64 of the package's 128 GB
    assert gcd.memory_bandwidth_bytes_per_s == package.memory_bandwidth_bytes_per_s / 2 == 1638.4e9
    assert gcd.compute_units == package.compute_units / 2 == 110
    for dtype, peak in package.dense_peak_tflops.items():
        assert gcd.peak_flops_per_s(dtype) == pytest.approx(peak * 1e12 / 2)
    # 110 CUs x 1024 bf16 FLOP per clock x 1.7 GHz = 191.5 TFLOPS
    assert gcd.peak_flops_per_s("bf16") == pytest.approx(110 * 1024 * 1.7e9, rel=1e-3)
