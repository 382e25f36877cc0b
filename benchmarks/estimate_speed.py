"""Speed of the calculator: cold start of `roofline estimate` and a 100x100 grid via the API.

Targets (issue 2): cold start <= 0.3 s without importing torch; 100x100 batch x context
decode grid <= 50 ms. Run: python benchmarks/estimate_speed.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import numpy as np


def cold_start_s(runs: int = 7) -> list[float]:
    cmd = [
        sys.executable,
        "-m",
        "roofline",
        "estimate",
        "llama-3.1-8b",
        "--hardware",
        "h100-sxm",
        "--json",
    ]
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return times


def torch_imported() -> bool:
    code = (
        "import sys; from roofline.cli import main\n"
        "try:\n    main(['estimate', 'llama-3.1-8b', '--json'])\nexcept SystemExit:\n    pass\n"
        "print('torch' in sys.modules, file=sys.stderr)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return r.stderr.strip().endswith("True")


def grid_s(runs: int = 20) -> list[float]:
    from roofline import decode_step_s, load_hardware, load_model

    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    B = np.arange(1, 101)[:, None]
    S = np.linspace(128, 128_000, 100).astype(int)[None, :]
    decode_step_s(m, hw, B, S)  # first call outside timing
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        grid = decode_step_s(m, hw, B, S)
        times.append(time.perf_counter() - t0)
    assert grid.shape == (100, 100)
    return times


def main() -> None:
    cold = cold_start_s()
    print(
        f"cold start `roofline estimate` (python -m, 7 runs): median "
        f"{statistics.median(cold):.3f} s, min {min(cold):.3f} s (target <= 0.3 s)"
    )
    print(f"torch imported by estimate: {torch_imported()}")
    g = grid_s()
    print(
        f"100x100 batch x context decode grid: median {statistics.median(g) * 1e3:.2f} ms, "
        f"min {min(g) * 1e3:.2f} ms (target <= 50 ms)"
    )


if __name__ == "__main__":
    main()
