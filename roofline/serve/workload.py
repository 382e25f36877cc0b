"""Workloads: when requests arrive and how long their prompts and outputs are.

Synthetic workloads are drawn from a seeded numpy Generator (same seed, same requests);
traces are CSV or JSONL files with one request per row: `arrival_s`, `input_tokens`,
`output_tokens`, and optionally `prefix_id` and `prefix_tokens` (a shared prompt prefix,
e.g. a system prompt, counted inside `input_tokens`). A bad row is refused with its row
number and the reason.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import numpy as np

from ..errors import InvalidInputError
from ..files import read_text

Arrivals = Literal["poisson", "fixed"]
LengthKind = Literal["fixed", "uniform", "lognormal"]
ARRIVALS: tuple[str, ...] = get_args(Arrivals)
LENGTH_KINDS: tuple[str, ...] = get_args(LengthKind)
NO_PREFIX = -1
_COLUMNS = ("arrival_s", "input_tokens", "output_tokens")
_OPTIONAL = ("prefix_id", "prefix_tokens")
#: Limits of a workload that can be simulated; beyond them the input is refused up front.
MAX_REQUESTS = 10**6  # a simulation of 10^6 requests takes minutes
MAX_TOKENS = 10**8  # per request, prompt or output
MAX_TRACE_BYTES = 1 << 30


@dataclass(frozen=True)
class Workload:
    """Requests as parallel arrays, sorted by arrival. Prefix id -1: no shared prefix."""

    arrival_s: np.ndarray  # (R,) float
    input_tokens: np.ndarray  # (R,) int, prompt length P including any shared prefix
    output_tokens: np.ndarray  # (R,) int, generated tokens G (the first comes from prefill)
    prefix_id: np.ndarray  # (R,) int
    prefix_tokens: np.ndarray  # (R,) int, leading tokens of the prompt shared under prefix_id
    truncated: int = 0  # generated requests cut to fit the model's context

    @property
    def requests(self) -> int:
        return int(self.arrival_s.size)

    def check(self, max_context: int, model_name: str) -> None:
        """Refuse requests the model cannot serve, naming the (1-based) request."""
        total = self.input_tokens + self.output_tokens
        bad = np.flatnonzero(total > max_context)
        if bad.size:
            i = int(bad[0])
            raise InvalidInputError(
                f"request {i + 1}: input + output = {int(total[i])} tokens exceeds "
                f"{model_name}'s max context of {max_context}; shorten it or drop it"
            )


@dataclass(frozen=True)
class Lengths:
    """A length distribution: fixed `mean`; uniform on [low, uniform_high]; lognormal with
    median `mean`·exp(-σ²/2) so its mean is `mean`. All clipped to [low, high]."""

    kind: LengthKind
    mean: float
    low: int = 1
    high: int = 1 << 30
    sigma: float = 1.0
    uniform_high: int = 1

    def __post_init__(self) -> None:
        if self.kind not in LENGTH_KINDS:
            raise InvalidInputError(
                f"unknown length distribution '{self.kind}'; use one of: {', '.join(LENGTH_KINDS)}"
            )
        if self.mean < 1:
            raise InvalidInputError(f"mean length must be at least 1 token, got {self.mean:g}")
        if not self.sigma > 0:
            raise InvalidInputError(f"`sigma` must be positive, got {self.sigma:g}")

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            out = np.full(n, round(self.mean))
        elif self.kind == "uniform":
            out = rng.integers(self.low, max(self.uniform_high, self.low) + 1, size=n)
        else:
            mu = np.log(self.mean) - self.sigma**2 / 2
            out = np.rint(rng.lognormal(mu, self.sigma, size=n))
        return np.clip(out, max(self.low, 1), self.high).astype(np.int64)


def synthetic(
    requests: int,
    rate_per_s: float,
    inputs: Lengths,
    outputs: Lengths,
    arrivals: Arrivals = "poisson",
    seed: int = 0,
    prefix_tokens: int = 0,
    max_context: int | None = None,
) -> Workload:
    """`requests` arrivals at `rate_per_s` (Poisson: exponential gaps; fixed: equal gaps).
    With `prefix_tokens` > 0 every prompt starts with the same system prompt (prefix id 0)
    of that many tokens, added to its drawn length. With `max_context`, the tail of the
    length distributions is cut so every request fits (prompt first, then output), and
    `truncated` counts the requests cut; mean lengths that do not fit are refused."""
    if not 1 <= requests <= MAX_REQUESTS:
        raise InvalidInputError(
            f"`requests` must be at least 1 and at most {MAX_REQUESTS:,}, got {requests:,}"
        )
    if not 0 < rate_per_s < float("inf"):
        raise InvalidInputError(f"`rate_per_s` must be positive and finite, got {rate_per_s}")
    if arrivals not in ARRIVALS:
        raise InvalidInputError(f"unknown arrivals '{arrivals}'; use one of: {', '.join(ARRIVALS)}")
    if prefix_tokens < 0:
        raise InvalidInputError(f"`prefix_tokens` cannot be negative, got {prefix_tokens}")
    if max_context is not None and inputs.mean + outputs.mean + prefix_tokens > max_context:
        raise InvalidInputError(
            f"mean prompt {inputs.mean + prefix_tokens:g} + generated {outputs.mean:g} tokens is "
            f"more than the model's {max_context:,}-token context; lower `input_tokens` or "
            "`output_tokens`"
        )
    rng = np.random.default_rng(seed)
    # unit-rate gaps scaled by the rate: the same seed gives the same requests at every rate
    gaps = rng.exponential(1.0, requests) if arrivals == "poisson" else np.ones(requests)
    arrival = np.cumsum(gaps) / rate_per_s
    arrival -= arrival[0]
    inp = inputs.draw(rng, requests) + prefix_tokens
    out = outputs.draw(rng, requests)
    truncated = 0
    if max_context is not None:
        truncated = int(np.count_nonzero(inp + out > max_context))
        inp = np.minimum(inp, max_context - 1)
        out = np.minimum(out, max_context - inp)
    pid = np.full(requests, 0 if prefix_tokens else NO_PREFIX)
    return Workload(arrival, inp, out, pid, np.full(requests, prefix_tokens), truncated)


def _int_field(row: dict, key: str, where: str, minimum: int) -> int:
    raw = row.get(key)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        raise InvalidInputError(f"{where}: missing '{key}'")
    if isinstance(raw, bool):
        raise InvalidInputError(f"{where}: '{key}' must be a number, got {raw!r}")
    try:
        value = float(raw)
    except (TypeError, ValueError, OverflowError):
        raise InvalidInputError(
            f"{where}: '{key}' must be a number, got {str(raw)[:40]!r}"
        ) from None
    if not np.isfinite(value) or abs(value) > MAX_TOKENS:
        raise InvalidInputError(
            f"{where}: '{key}' must be a whole number of at most "
            f"{MAX_TOKENS:,}, got {str(raw)[:40]!r}"
        )
    if value != int(value):
        raise InvalidInputError(f"{where}: '{key}' must be a whole number, got {raw!r}")
    if value < minimum:
        raise InvalidInputError(f"{where}: '{key}' must be at least {minimum}, got {raw!r}")
    return int(value)


def _rows(path: Path) -> list[tuple[int, dict]]:
    """(line number, row) pairs of a CSV (header on line 1) or JSONL file."""
    text = read_text(path, "trace", MAX_TRACE_BYTES, InvalidInputError)
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        rows = []
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise InvalidInputError(f"{path}: row {n}: not valid JSON ({e.msg})") from None
            except RecursionError:
                raise InvalidInputError(
                    f"{path}: row {n}: JSON nested too deep; a row is one object of numbers"
                ) from None
            if not isinstance(row, dict):
                raise InvalidInputError(f"{path}: row {n}: expected a JSON object")
            rows.append((n, row))
        return rows
    if path.suffix.lower() != ".csv":
        raise InvalidInputError(f"{path}: trace must be .csv or .jsonl")
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in _COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise InvalidInputError(f"{path}: row 1: header lacks column(s) {', '.join(missing)}")
    out = []
    for n, row in enumerate(reader, start=2):
        if None in row or None in row.values():
            raise InvalidInputError(
                f"{path}: row {n}: expected {len(reader.fieldnames or ())} fields"
            )
        out.append((n, row))
    return out


def from_trace(path: Path, default_prefix_tokens: int = 0) -> Workload:
    """Load a CSV/JSONL trace (see module docstring), sorted by arrival.
    Rows with a `prefix_id` but no `prefix_tokens` take `default_prefix_tokens`."""
    rows = _rows(path)
    if not rows:
        raise InvalidInputError(f"{path}: trace has no requests")
    if len(rows) > MAX_REQUESTS:
        raise InvalidInputError(
            f"{path}: {len(rows):,} requests is more than the "
            f"{MAX_REQUESTS:,} a simulation takes; split the trace"
        )
    cols: dict[str, list] = {k: [] for k in (*_COLUMNS, *_OPTIONAL)}
    for n, row in rows:
        where = f"{path}: row {n}"
        raw_arrival = row.get("arrival_s", "")
        try:
            if isinstance(raw_arrival, bool):
                raise TypeError
            arrival = float(raw_arrival)
        except (TypeError, ValueError, OverflowError):
            raise InvalidInputError(
                f"{where}: 'arrival_s' must be a number, got {row.get('arrival_s')!r}"
            ) from None
        if not np.isfinite(arrival) or arrival < 0:
            raise InvalidInputError(f"{where}: 'arrival_s' must be a finite time >= 0")
        inp = _int_field(row, "input_tokens", where, 1)
        out = _int_field(row, "output_tokens", where, 1)
        has_prefix = row.get("prefix_id") not in (None, "")
        pid = _int_field(row, "prefix_id", where, 0) if has_prefix else NO_PREFIX
        if has_prefix and row.get("prefix_tokens") not in (None, ""):
            ptok = _int_field(row, "prefix_tokens", where, 0)
        else:
            ptok = default_prefix_tokens if has_prefix else 0
        if ptok > inp:
            raise InvalidInputError(f"{where}: prefix_tokens {ptok} exceeds input_tokens {inp}")
        for k, v in zip((*_COLUMNS, *_OPTIONAL), (arrival, inp, out, pid, ptok), strict=True):
            cols[k].append(v)
    order = np.argsort(np.asarray(cols["arrival_s"]), kind="stable")
    arr = {k: np.asarray(v)[order] for k, v in cols.items()}
    return Workload(
        arr["arrival_s"].astype(float),
        arr["input_tokens"].astype(np.int64),
        arr["output_tokens"].astype(np.int64),
        arr["prefix_id"].astype(np.int64),
        arr["prefix_tokens"].astype(np.int64),
    )


#: Request-length profiles of real benchmarks, bundled under roofline/data/workloads/ with their
#: provenance in each file's `#` header (derived by benchmarks/derive/sharegpt_profile.py).
PROFILES = {"sharegpt": "sharegpt_vllm_bench.csv"}


def profile_lengths(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(input, output) tokens of every request of a bundled profile, in the order sent."""
    if name not in PROFILES:
        raise InvalidInputError(
            f"unknown length profile '{name}'; use one of: {', '.join(PROFILES)}"
        )
    return _profile(name)


def _profile(name: str) -> tuple[np.ndarray, np.ndarray]:
    from importlib import resources

    text = resources.files("roofline").joinpath("data/workloads", PROFILES[name]).read_text()
    rows = [ln for ln in text.splitlines() if ln and not ln.startswith("#")][1:]
    pairs = np.asarray([[int(v) for v in ln.split(",")] for ln in rows], dtype=np.int64)
    return pairs[:, 0], pairs[:, 1]


def burst_of_profile(name: str, requests: int, mean_input: float, mean_output: float) -> Workload:
    """`requests` requests sent at once with the spread of a benchmark's lengths: the profile's
    requests in order, repeated to the count, each length scaled by the run's mean over the
    profile's (rounded, at least 1 token), so the means are the run's and the spread the
    profile's. A burst of equal-length requests ends with its mean request; a real one ends
    with its longest outputs, on a thinning batch."""
    if not 1 <= requests <= MAX_REQUESTS:
        raise InvalidInputError(
            f"`requests` must be at least 1 and at most {MAX_REQUESTS:,}, got {requests:,}"
        )
    if mean_input < 1 or mean_output < 1:
        raise InvalidInputError("mean input and output lengths must be at least 1 token")
    inp, out = profile_lengths(name)
    idx = np.arange(requests) % inp.size
    scale_in, scale_out = mean_input / inp.mean(), mean_output / out.mean()
    i = np.maximum(np.rint(inp[idx] * scale_in), 1).astype(np.int64)
    o = np.maximum(np.rint(out[idx] * scale_out), 1).astype(np.int64)
    return Workload(
        np.zeros(requests), i, o, np.full(requests, NO_PREFIX), np.zeros(requests, np.int64)
    )
