"""One serving replica: its clock, its queues and the step loop; its scheduler picks each step.

Request state lives in shared arrays (`state.Requests`), indexed by request id; a replica
holds ids. A request's KV holds `computed` tokens; it is decoding once `computed` reaches `target`
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
from typing import Any

import numpy as np

from .blocks import BlockAllocator
from .policy import Policy
from .schedulers import Scheduler, StepTimer
from .state import Counters, Requests, Timeline


class ServingLoop:
    """One replica, stepped by the `scheduler` it is given (`schedulers.scheduler_for`), which
    sees it as a `schedulers.Replica`. `handoff`, when given, takes each request after its first
    token (the prefill instance of a disaggregated pair) together with the time it left."""

    def __init__(
        self,
        policy: Policy,
        scheduler: Scheduler,
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
        self.scheduler = scheduler
        scheduler.attach(self)

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
