"""A/B speed of `roofline estimate` against an earlier commit: cold start and the 100x100 grid.

    python benchmarks/speed_ab.py 583b681 [--runs 12] [--grid-runs 6] [--engine vllm]

The grid is timed twice: on the device's own ceilings, and under an engine profile (`--engine`,
default vllm: its GEMM and attention surfaces on the H100; "" for none), whose measured
surfaces are read at each of the 10,000 points.

The earlier commit is checked out with `git worktree` into a temporary folder; each figure
alternates the two trees in fresh processes (PYTHONPATH points at the tree) so that the VM's
drift hits both alike, and reports the medians and their ratio.

Cold start is timed two ways, because Python's bytecode cache decides how much of it is our
code's size:
- `bytecode`: the modules' compiled bytecode is cached (what `pip install` leaves, and any
  run after the first where Python may write `__pycache__`); each tree gets its own
  PYTHONPYCACHEPREFIX, warmed by one untimed run;
- `source`: the tree's own modules compiled from source on every start, the installed
  packages' bytecode used (what an editable install on a machine with
  PYTHONDONTWRITEBYTECODE=1, such as this project's VM, does).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
ESTIMATE = ["-m", "roofline", "estimate", "llama-3.1-8b", "--hardware", "h100-sxm", "--json"]
GRID = """
import sys, time, numpy as np
from roofline import decode_step_s, load_hardware, load_model
from roofline.spec.catalog import load_engine
m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
e = load_engine(sys.argv[1]) if sys.argv[1] else None
B = np.arange(1, 101)[:, None]
S = np.linspace(128, 128_000, 100).astype(int)[None, :]
grid = lambda: decode_step_s(m, hw, B, S, engine=e)
grid()
t = []
for _ in range(300):
    t0 = time.perf_counter(); grid(); t.append(time.perf_counter() - t0)
t.sort(); print(t[len(t) // 2])
"""


def env_for(tree: Path, cache: Path | None) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if cache is None:  # the tree has no __pycache__ and none is written: ours from source
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    else:
        env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def timed(args: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], env=env, cwd=tempfile.gettempdir(), check=True,
                   capture_output=True)  # fmt: skip
    return time.perf_counter() - t0


def grid_s(env: dict[str, str], engine: str = "") -> float:
    """Median seconds of one 100x100 decode grid (`engine`: a profile name, "" for none)."""
    out = subprocess.run(
        [sys.executable, "-c", GRID, engine], env=env, check=True, capture_output=True
    )
    return float(out.stdout)


def report(label: str, now: list[float], base: list[float], unit: float, name: str) -> None:
    a, b = statistics.median(now), statistics.median(base)
    print(
        f"{label:<22} this tree {a * unit:8.1f} {name}   base {b * unit:8.1f} {name}   "
        f"change {100 * (a / b - 1):+5.1f}%   (medians of {len(now)})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ref", help="the earlier commit to compare against")
    ap.add_argument("--runs", type=int, default=12, help="cold starts per tree and mode")
    ap.add_argument("--grid-runs", type=int, default=6, help="grid processes per tree")
    ap.add_argument("--engine", default="vllm", help='the engine grid\'s profile ("": none)')
    ap.add_argument("--grid-only", action="store_true", help="skip the cold starts")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rl-ab-") as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(HERE), "worktree", "add", "--detach", str(base), a.ref],
                       check=True, capture_output=True)  # fmt: skip
        try:
            trees = {"now": HERE, "base": base}
            for t in trees.values():
                if any((t / "roofline").rglob("__pycache__")):
                    sys.exit(f"{t}/roofline has __pycache__ folders; remove them for the A/B")
            caches = {k: Path(tmp) / f"pyc-{k}" for k in trees}
            for k, t in trees.items():  # warm each tree's bytecode cache
                timed(ESTIMATE, env_for(t, caches[k]))
            for mode in () if a.grid_only else ("bytecode", "source"):
                times: dict[str, list[float]] = {k: [] for k in trees}
                for _ in range(a.runs):
                    for k, t in trees.items():
                        cache = caches[k] if mode == "bytecode" else None
                        times[k].append(timed(ESTIMATE, env_for(t, cache)))
                report(f"cold start ({mode})", times["now"], times["base"], 1e3, "ms")
            for engine in ("", a.engine) if a.engine else ("",):
                grid: dict[str, list[float]] = {k: [] for k in trees}
                for _ in range(a.grid_runs):
                    for k, t in trees.items():
                        grid[k].append(grid_s(env_for(t, caches[k]), engine))
                label = f"100x100 grid, {engine}" if engine else "100x100 grid"
                report(label, grid["now"], grid["base"], 1e6, "us")
        finally:
            subprocess.run(["git", "-C", str(HERE), "worktree", "remove", "--force", str(base)],
                           check=False, capture_output=True)  # fmt: skip


if __name__ == "__main__":
    main()
