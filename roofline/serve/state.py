"""The state of one simulation that its replicas and schedulers share: the requests (`Requests`,
parallel arrays indexed by request id), their inter-token gaps (`Gaps`), the run's totals
(`Counters`) and each replica's step rows (`Timeline`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .speculation import Speculation, inverse_log
from .workload import Workload


class Gaps:
    """Every inter-token gap of a run, kept as (gap, count) chunks: one gap each time a request
    streams output after its first token (a token, or with speculation all that one
    verification yields), measured from its previous output: the samples `vllm bench serve`
    takes its ITL percentiles over. A request's gaps add up to its finish − first token."""

    def __init__(self) -> None:
        self._values: list[np.ndarray] = []  # 1-D arrays of gaps (s; NaN: none, a first output)
        self._counts: list[float] = []  # how many times each gap of the matching array occurred
        self._per_gap: list[tuple[np.ndarray, np.ndarray]] = []  # (gaps, a count for each)

    def add(self, values: np.ndarray, counts: float | np.ndarray = 1.0) -> None:
        """Gaps that occurred `counts` times each (a number, or one per gap); kept as given
        (the loop's hot path) and joined in `arrays`."""
        if np.ndim(counts):
            self._per_gap.append((values, np.asarray(counts, dtype=float)))
        else:
            self._values.append(values)
            self._counts.append(float(counts))

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(gaps s, how many times each occurred), the NaN and never-occurring ones dropped."""
        values = self._values + [v for v, _ in self._per_gap]
        if not values:
            return np.zeros(0), np.zeros(0)
        sizes = np.fromiter((v.size for v in self._values), int, len(self._values))
        c = np.concatenate(
            [np.repeat(np.asarray(self._counts), sizes), *(c for _, c in self._per_gap)]
        )
        v = np.concatenate(values).astype(float)
        keep = (c > 0) & ~np.isnan(v)
        return v[keep], c[keep]


class Requests:
    """Mutable per-request state of one simulation, as parallel arrays indexed by request id."""

    def __init__(
        self,
        w: Workload,
        first_token_from_decode: bool = False,
        speculation: Speculation | None = None,
        seed: int = 0,
    ) -> None:
        n = w.requests
        self.w = w
        self.decode_first = first_token_from_decode
        self.speculation = speculation
        # per-request acceptance and each step's draws, from the simulation's `seed`
        self.rng = np.random.default_rng([seed, 0x5BEC])
        self.acceptance = (
            speculation.per_request(n, self.rng) if speculation is not None else np.zeros(n)
        )
        self.inv_log_acceptance = inverse_log(self.acceptance)  # the form the draws take
        self.ready_s = w.arrival_s.astype(float).copy()  # when the holding replica may start it
        self.computed = np.zeros(n, np.int64)  # tokens in KV
        self.target = w.input_tokens.astype(np.int64) - self.skipped(w.input_tokens)
        self.generated = np.zeros(n, np.int64)
        self.held_blocks = np.zeros(n, np.int64)  # own blocks (shared prefix blocks excluded)
        self.shared_tokens = np.zeros(n, np.int64)  # prefix tokens read from the prefix cache
        self.swapped = np.zeros(n, bool)  # KV sits in host memory, to be swapped back in
        self.first_token_s = np.full(n, np.nan)
        self.last_output_s = np.full(n, np.nan)  # when each last streamed output (`streamed`)
        self.gaps = Gaps()
        self.finish_s = np.full(n, np.nan)
        self.completions = np.zeros(n, np.int64)  # times each request finished (must be 1)

    def streamed(self, rids: np.ndarray | int, at_s: float) -> None:
        """The requests output at `at_s`: a gap from each one's previous output (none for a
        first token, which TTFT times), which this output becomes."""
        rids = np.atleast_1d(rids)
        self.gaps.add(at_s - self.last_output_s[rids])  # NaN where there was none
        self.last_output_s[rids] = at_s

    def skipped(self, tokens: np.ndarray) -> np.ndarray:
        """1 where a (re-)prefill of `tokens` leaves its last token to a decode step (the
        engine's first token comes from one; a single token is a decode step already)."""
        return (self.decode_first & (np.asarray(tokens) > 1)).astype(np.int64)

    def yields_at_prefill(self, rid: int) -> bool:
        """Finishing this request's prefill produces a token (its target is all it holds)."""
        return bool(self.target[rid] == self.w.input_tokens[rid] + self.generated[rid])

    def resumes(self, rid: int) -> bool:
        """Its KV is complete: a swapped-out or handed-off sequence that decodes again."""
        return bool(self.computed[rid] > 0 and self.computed[rid] >= self.target[rid])


@dataclass
class Counters:
    """Totals over a run, for the report and the conservation checks."""

    prefill_tokens: int = 0  # prompt tokens computed (re-prefills included)
    decode_tokens: int = 0  # tokens fed by decode steps for live sequences
    padding_tokens: int = 0  # static batching: steps of sequences already finished
    recomputed_tokens: int = 0  # KV dropped by recompute preemptions (re-prefilled later)
    prefix_hit_tokens: int = 0  # prompt tokens served from the prefix cache
    drafted_tokens: int = 0  # speculation: tokens drafted for live sequences
    accepted_tokens: int = 0  # of them, accepted and kept (within the request's output)
    verifications: int = 0  # sequence-steps that verified drafts
    preemptions: int = 0
    swap_s: float = 0.0


@dataclass
class Timeline:
    """One row per step (or stretch of `steps` decode steps of the same sequences): when it
    ended, its batch, the tokens it fed, and the KV held after it."""

    start_s: list[float] = field(default_factory=list)
    end_s: list[float] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    kv_allocated_tokens: list[int] = field(default_factory=list)
    kv_stored_tokens: list[int] = field(default_factory=list)
    kv_shared_saving_tokens: list[int] = field(default_factory=list)
