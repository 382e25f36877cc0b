"""The DRAM edge (issue 26): the working set from which a machine reads at its DRAM bandwidth,
measured by the read sweep, and the whole-step band it sets (±25% at or above it, ±40% under
it, where a repeated working set is partly cache-resident). Synthetic results, values by hand.
No torch."""

from __future__ import annotations

import pytest

from roofline.catalog import load_model
from roofline.measure.calibrate import dram_edge_bytes
from roofline.measure.kernel_ops import stream_op
from roofline.measure.validate import BANDS, CACHED_STEP_BAND, validate
from roofline.operators import Op
from tests.test_validate_model import _calibration_points, _hw, _point, _results

MIB = 2**20


def _read(mib: float, gb_per_s: float):
    """A read of one `mib` MiB fp32 buffer at `gb_per_s` GB/s."""
    elems = int(mib * MIB) // 4
    return _point(
        "bandwidth",
        stream_op("read", elems),
        "read",
        dict(elems=elems),
        elems * 4 / (gb_per_s * 1e9),
    )


def _results_with(reads, llc: int = 480 * MIB, extra=()):
    """A 480 MiB L3 by default, as the Xeon VM reports: only reads of 4 x 480 = 1920 MiB or
    more are DRAM buffers, and the fastest of them is the DRAM bandwidth."""
    r = _results([*_calibration_points()[:1], *reads])
    dev = r.environment.device.model_copy(update={"caches_bytes": {"L3": llc}})
    env = r.environment.model_copy(update={"device": dev})
    models = {"tiny-llama-30m": load_model("tiny-llama-30m")} if extra else {}
    return r.model_copy(
        update={"environment": env, "points": r.points + tuple(extra), "models": models}
    )


# The Xeon VM's read curve of this session (GB/s by MiB; DRAM 15.0 over 1.9 GiB), rounded.
XEON = [(16, 28.8), (64, 27.6), (128, 18.6), (192, 17.1), (256, 16.4), (384, 16.0), (1920, 15.0)]


def test_edge_is_the_smallest_read_at_dram_speed_with_every_larger_one():
    # DRAM read 15.0 GB/s (1920 MiB, the one DRAM buffer); fast means more
    # than 15.0 · 1.10 = 16.5 GB/s. From the top: 1920 (15.0), 384 (16.0), 256 (16.4) are not
    # fast; 192 MiB (17.1) is: the edge is 256 MiB
    r = _results_with([_read(mib, bw) for mib, bw in XEON])
    assert dram_edge_bytes(r) == pytest.approx(256 * MIB)
    # 256 MiB at 16.6 GB/s (> 16.5): the edge moves up to 384 MiB
    slower = [(mib, 16.6 if mib == 256 else bw) for mib, bw in XEON]
    assert dram_edge_bytes(_results_with([_read(m, b) for m, b in slower])) == pytest.approx(
        384 * MIB
    )


def test_edge_never_exceeds_four_times_the_reported_cache():
    # a 32 MiB L3: reads of 128 MiB (4 x 32 MiB) and more are DRAM by definition; the sweep
    # above says 256 MiB, the cache says 128 MiB: the smaller stands
    r = _results_with([_read(mib, bw) for mib, bw in XEON], llc=32 * MIB)
    assert dram_edge_bytes(r) == pytest.approx(128 * MIB)


def test_edge_with_no_fast_read_is_the_smallest_read():
    # a 16 MiB L3: 64 MiB (15.5 GB/s) and 1 GiB (15.0) are both DRAM buffers, the DRAM read
    # is the faster, 15.5, and nothing is above 15.5 · 1.1 = 17.05
    r = _results_with([_read(64, 15.5), _read(1024, 15.0)], llc=16 * MIB)
    assert dram_edge_bytes(r) == pytest.approx(64 * MIB)


def _step(mib: float, seconds: float):
    """A decode step moving `mib` MiB (fp32 weights) in `seconds`."""
    op = Op("step", "matmul", flops=0, weight_elems=int(mib * MIB) // 4)
    p = _point("decode_step", op, "model", dict(B=1, T=1, S=128), seconds)
    return p.model_copy(update={"model": "tiny-llama-30m", "name": f"step {mib}"})


def test_step_band_follows_the_edge():
    """Edge 256 MiB (the XEON curve). Bands are read off the rows, whatever the prediction."""
    r = _results_with([_read(m, b) for m, b in XEON], extra=[_step(100, 0.01), _step(300, 0.03)])
    rows = {
        row.point.bytes / MIB: row
        for row in validate(r, _hw()).rows
        if row.point.family == "decode_step"
    }
    assert BANDS["decode_step"] == 0.25
    assert rows[300].band == 0.25 and rows[300].note == ""
    assert rows[100].band == CACHED_STEP_BAND == 0.40
    assert "100 MiB under the DRAM edge (256 MiB)" in rows[100].note
    # reads under the edge are not gated; at or above it they are
    gated = {
        round(row.point.bytes / MIB): row.gated
        for row in validate(r, _hw()).rows
        if row.point.family == "bandwidth"
    }
    assert gated == {16: False, 64: False, 128: False, 192: False, 256: True, 384: True, 1920: True}


def test_a_given_tolerance_replaces_both_step_bands():
    r = _results_with([_read(m, b) for m, b in XEON], extra=[_step(100, 0.01), _step(300, 0.03)])
    bands = {row.band for row in validate(r, _hw(), tolerance=0.1).rows}
    assert bands == {0.1}
