"""One serving replica: its clock, its queues and the step loop; its scheduler picks each step.

Request state lives in shared arrays (`Requests`), indexed by request id; a replica holds ids.
A request's KV holds `computed` tokens; it is decoding once `computed` reaches `target`
(its prompt, or prompt + generated tokens when re-prefilled after a recompute preemption).
A decode step feeds the last generated token (T=1 over S=computed) and yields the next one;
finishing a prefill yields a token too, except on an engine whose first token comes from a
decode step (`EngineSpec.first_token`): its prefill stops one token short and the decode step
over that last token yields it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .blocks import BlockAllocator
from .policy import Policy
from .schedulers import scheduler_for
from .speculation import Speculation, inverse_log
from .workload import Workload


class StepTimer(Protocol):
    """Step times from the sequences' shapes (see `roofline.serve.stepcost`)."""

    def step_s(self, T: np.ndarray, S: np.ndarray, verify: int = 0) -> float:
        """One step over sequences with T_i new tokens on S_i cached, the first `verify` of
        them speculative verifications."""

    def decode_s(self, S: np.ndarray, steps: int) -> np.ndarray:
        """`steps` consecutive decode steps of sequences starting at contexts S_i."""


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


class ServingLoop:
    """One replica. `handoff`, when given, takes each request after its first token (the
    prefill instance of a disaggregated pair) together with the time it left."""

    def __init__(
        self,
        policy: Policy,
        timer: StepTimer,
        kv_capacity_tokens: int,
        max_seq_len: int,
        reqs: Requests,
        swap_bytes_per_s: float,
        kv_bytes_per_token: float,
        counters: Counters,
        timeline: Timeline,
        handoff: Callable[[int, float], None] | None = None,
        state_bytes_per_sequence: float = 0.0,
        kv_equivalents: Callable[[Any], Any] | None = None,
    ) -> None:
        self.timer, self.r, self.c, self.tl, self.handoff = timer, reqs, counters, timeline, handoff
        # contiguous: one block of the longest sequence's allocation per sequence
        longest = max_seq_len if kv_equivalents is None else int(kv_equivalents(max_seq_len))
        block_tokens = policy.block_size if policy.kv == "paged" else longest
        self.kv = BlockAllocator(
            block_tokens, kv_capacity_tokens, reqs, policy.prefix_caching, kv_equivalents
        )
        self.swap_s_per_token = kv_bytes_per_token / swap_bytes_per_s
        self.swap_s_per_sequence = state_bytes_per_sequence / swap_bytes_per_s  # SSM state
        self.clock = 0.0
        self.busy_s = 0.0
        self.pending: deque[int] = deque()  # routed here, not yet ready
        self.waiting: deque[int] = deque()  # ready, not admitted (preempted ones in front)
        self.scheduler = scheduler_for(policy, self)

    def add(self, rid: int) -> None:
        self.pending.append(rid)

    @property
    def load(self) -> int:
        """Requests routed here and not finished (the least-loaded router's measure)."""
        return len(self.pending) + len(self.waiting) + self.scheduler.sequences

    def run_until(self, t: float) -> None:
        """Step while there is work and the clock is before `t` (a step may end after t)."""
        while True:
            while self.pending and self.r.ready_s[self.pending[0]] <= self.clock:
                self.waiting.append(self.pending.popleft())
            if self.waiting or self.scheduler.sequences:
                if self.clock >= t:
                    return
                if not self.scheduler.step(t):
                    raise RuntimeError("scheduler made no progress with work queued")
            elif self.pending and self.r.ready_s[self.pending[0]] <= t:
                self.clock = max(self.clock, float(self.r.ready_s[self.pending[0]]))
            else:
                return

    @property
    def next_event_s(self) -> float:
        """When this replica next does something: now if it has work, the first routed
        request's ready time if idle, inf with nothing routed."""
        if self.waiting or self.scheduler.sequences:
            return self.clock
        if self.pending:
            return max(self.clock, float(self.r.ready_s[self.pending[0]]))
        return math.inf

    def step_once(self) -> None:
        """One scheduler step from the next event (a decode stretch runs at most to its first
        finish or the next routed request): the unit a closed-loop client waits in."""
        self.clock = self.next_event_s
        while self.pending and self.r.ready_s[self.pending[0]] <= self.clock:
            self.waiting.append(self.pending.popleft())
        if not self.scheduler.step(math.inf):
            raise RuntimeError("scheduler made no progress with work queued")

    def advance(self, dt: float) -> None:
        self.clock += dt
        self.busy_s += dt

    def advance_to(self, t: float) -> None:
        self.busy_s += t - self.clock
        self.clock = t

    def stall(self, tokens: int) -> None:
        """Move `tokens` of KV (and the sequence's state) between device and host; the replica
        waits for it."""
        dt = int(self.kv.worth(tokens)) * self.swap_s_per_token + self.swap_s_per_sequence
        self.c.swap_s += dt
        self.advance(dt)

    def finish(self, rids: np.ndarray | int, at_s: np.ndarray | float) -> None:
        """The requests produced their last token at `at_s`."""
        self.r.finish_s[rids] = at_s
        self.r.completions[rids] += 1

    def record(self, start_s: float, seqs: int, tokens: int, steps: int = 1) -> None:
        """A step (or stretch of `steps` steps) from `start_s` to now, and the KV held after it."""
        self.tl.start_s.append(start_s)
        self.tl.end_s.append(self.clock)
        self.tl.seqs.append(seqs)
        self.tl.tokens.append(tokens)
        self.tl.steps.append(steps)
        kv, cached = self.kv, self.kv.prefixes.values()
        self.tl.kv_allocated_tokens.append((kv.total_blocks - kv.free_blocks) * kv.block_tokens)
        self.tl.kv_stored_tokens.append(
            self.scheduler.stored_tokens() + sum(p.tokens for p in cached)
        )
        self.tl.kv_shared_saving_tokens.append(sum(p.tokens * (p.readers - 1) for p in cached))
