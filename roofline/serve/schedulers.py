"""What a replica runs in its next step: one scheduler class per batching and prefill policy.
A new policy is one subclass of `Scheduler` and one line in `SCHEDULERS`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, cast

import numpy as np

from .policy import Policy
from .speculation import accepted

if TYPE_CHECKING:
    from .blocks import BlockAllocator
    from .speculation import SpeculativeTimer
    from .state import Counters, Requests

Chunks = list[tuple[int, int]]  # (request, prompt tokens computed this step)
#: Speculative steps drawn at once at most (`Continuous._verify_stretch`): bounds its arrays.
MAX_STRETCH_STEPS = 512


#: Preemptions per request beyond which a run is a livelock, not memory pressure: a sequence
#: evicted a thousand times has cycled with another (issue 42: once in six runs the invariant
#: test spun for minutes); the simulator stops and says so instead of hanging.
PREEMPTIONS_PER_REQUEST = 1000
LIVELOCK_SLACK = 10_000  # and this many beyond, for the smallest workloads


class StepTimer(Protocol):
    """Step times from the sequences' shapes (see `roofline.serve.stepcost`)."""

    def step_s(self, T: np.ndarray, S: np.ndarray, verify: int = 0) -> float:
        """One step over sequences with T_i new tokens on S_i cached, the first `verify` of
        them speculative verifications."""

    def decode_s(self, S: np.ndarray, steps: int) -> np.ndarray:
        """`steps` consecutive decode steps of sequences starting at contexts S_i."""


class Replica(Protocol):
    """One replica (`loop.ServingLoop`) as its scheduler sees it: what a step reads and changes,
    and the calls that book it."""

    r: Requests  # the simulation's requests, shared by every replica
    kv: BlockAllocator  # this replica's KV cache
    timer: StepTimer
    c: Counters  # the run's totals
    clock: float  # s; moved only by `advance` and `advance_to`
    pending: deque[int]  # routed here, not yet ready
    waiting: deque[int]  # ready, not admitted (preempted ones in front)
    handoff: Callable[[int, float], None] | None  # takes each request after its first token

    def advance(self, dt: float) -> None: ...

    def advance_to(self, t: float) -> None: ...

    def stall(self, tokens: int) -> None: ...

    def finish(self, rids: np.ndarray | int, at_s: np.ndarray | float) -> None: ...

    def record(self, start_s: float, seqs: int, tokens: int, steps: int = 1) -> None: ...


class Scheduler(ABC):
    """Holds one replica's admitted sequences and runs each step on that replica, the `loop` it
    is attached to (`attach`: the replica it is given to calls it)."""

    def __init__(self, policy: Policy) -> None:
        self.p = policy

    def attach(self, loop: Replica) -> None:
        """Step `loop` from now on; a scheduler steps one replica only."""
        if getattr(self, "loop", None) is not None:
            raise RuntimeError("a scheduler steps one replica: build one per ServingLoop")
        self.loop, self.r, self.kv = loop, loop.r, loop.kv

    @property
    @abstractmethod
    def sequences(self) -> int:
        """Admitted and not finished."""

    @abstractmethod
    def stored_tokens(self) -> int:
        """KV tokens the admitted sequences store themselves (cached prefixes excluded)."""

    @abstractmethod
    def step(self, horizon: float) -> bool:
        """Run one iteration, or a stretch of iterations that cannot differ from step-by-step
        ones; False when nothing can run."""


class Continuous(Scheduler):
    """Membership changes every iteration: at most `max_seqs` sequences and `token_budget` new
    tokens (B·T) per step. A subclass picks each step's decodes and prompt chunks (`batch`)."""

    chunks_prompts = False  # a prompt may be split over steps; else whole, or alone if oversized

    def __init__(self, policy: Policy) -> None:
        super().__init__(policy)
        self.run = np.zeros(0, np.int64)  # decoding, in admission order
        self.prefilling: list[int] = []  # admitted, prompt partly computed (chunked)
        self.admitted: dict[int, int] = {}  # admission order of the admitted, for preemption
        self._admissions = 0
        self._last_step_s = 0.0  # the last stretch's first step (s), 0 before any

    def attach(self, loop: Replica) -> None:
        super().attach(loop)
        self.spec = self.r.speculation
        # positions a decoding sequence runs per step: its last token (and K drafts to verify)
        self.width = 1 if self.spec is None else self.spec.k + 1

    @property
    def sequences(self) -> int:
        return self.run.size + len(self.prefilling)

    def stored_tokens(self) -> int:
        r = self.r
        return int(r.computed[self.run].sum() - r.shared_tokens[self.run].sum()) + sum(
            int(r.computed[i] - r.shared_tokens[i]) for i in self.prefilling
        )

    def drains(self) -> bool:
        """Called once per step: the running sequences decode on with prompts waiting."""
        return False

    @abstractmethod
    def batch(self) -> tuple[np.ndarray, Chunks]:
        """This step's decoding sequences (a prefix of `run`) and prompt chunks."""

    def step(self, horizon: float) -> bool:
        loop = self.loop
        drains = self.drains()
        if self.run.size and ((not loop.waiting and not self.prefilling) or drains):
            if loop.pending:
                horizon = min(horizon, float(self.r.ready_s[loop.pending[0]]))
            stretch = self._decode_stretch if self.spec is None else self._verify_stretch
            if stretch(horizon):
                return True
        decode, chunks = self.batch()
        if not chunks and not decode.size:
            if self.run.size:
                return True  # swapped-out or handed-off sequences resumed: they decode next
            if not self.prefilling:
                return False
            self._preempt_newest()  # partial prompts hold all the blocks: make room
            return True
        r = self.r
        T_c = np.array([c for _, c in chunks], dtype=float)
        T = np.concatenate((np.full(decode.size, float(self.width)), T_c))
        S = np.concatenate((r.computed[decode], [r.computed[i] for i, _ in chunks])).astype(float)
        dt = loop.timer.step_s(T, S, decode.size) if self.spec else loop.timer.step_s(T, S)
        loop.advance(dt)
        loop.c.decode_tokens += decode.size * self.width
        loop.c.prefill_tokens += int(T_c.sum())
        self._finish_decodes(decode)
        self._finish_chunks(chunks)
        loop.record(loop.clock - dt, int(decode.size + len(chunks)), int(T.sum()))
        return True

    def _decode_stretch(self, horizon: float) -> bool:
        """Decode every running sequence for the steps that start before `horizon` and end
        no later than the first finish, if their KV blocks are free now."""
        loop, r, run = self.loop, self.r, self.run
        n = run.size
        S = r.computed[run]
        k = int((r.w.output_tokens[run] - r.generated[run]).min())
        if int(self.kv.needed(run, S + k).sum()) > self.kv.free_blocks:
            return False
        k = self._steps_before(horizon, k)
        dt = loop.timer.decode_s(S, k)
        ends = loop.clock + np.cumsum(dt)
        steps = max(1, int(np.count_nonzero(ends - dt < horizon)))
        self._last_step_s = float(dt[0])
        self.kv.grow(run, S + steps)
        self._close_stretch(ends, dt, steps, np.full(n, steps))
        return True

    def _close_stretch(
        self, ends: np.ndarray, dt: np.ndarray, steps: int, gained: np.ndarray
    ) -> None:
        """Book the first `steps` steps of a stretch over the whole running set (`ends`, `dt`:
        each step's end and time): first tokens at step 1's end, an output of every sequence
        at each step's end (its ITL gaps), `gained` tokens each, then the finishes."""
        loop, r, run = self.loop, self.r, self.run
        n, start = run.size, loop.clock
        loop.advance_to(float(ends[steps - 1]))
        fresh = run[np.isnan(r.first_token_s[run])]  # first token from this stretch's step 1
        r.first_token_s[fresh] = ends[0]
        r.streamed(run, float(ends[0]))
        r.gaps.add(dt[1:steps], n)
        r.last_output_s[run] = ends[steps - 1]
        r.computed[run] += gained
        r.generated[run] += gained
        loop.c.decode_tokens += n * self.width * steps
        done = r.generated[run] >= r.w.output_tokens[run]
        for rid in run[done]:
            self._complete(int(rid))
        self.run = run[~done]
        loop.record(start, n, n * self.width * steps, steps)

    def _steps_before(self, horizon: float, k: int) -> int:
        """At most k steps of a stretch, about as many as start before `horizon`, from the last
        stretch's first step (halved: steps shorten when sequences finish). Too few only ends
        the stretch early, and the next one goes on from there: no step changes."""
        if horizon == np.inf or not self._last_step_s:
            return k
        return max(1, min(k, int((horizon - self.loop.clock) / (0.5 * self._last_step_s)) + 1))

    def _verify_stretch(self, horizon: float) -> bool:
        """With speculation, `_decode_stretch`'s counterpart: verify every running sequence for
        the steps that start before `horizon` and end no later than the first finish, each step
        drawing every sequence's acceptances (`speculation.accepted`), if the KV blocks of the
        furthest step are free now."""
        loop, r, run, spec = self.loop, self.r, self.run, self.spec
        assert spec is not None
        n, width = run.size, self.width
        S0 = r.computed[run]
        left = r.w.output_tokens[run] - r.generated[run]
        k = self._steps_before(horizon, min(int(left.min()), MAX_STRETCH_STEPS))
        draws = accepted(np.repeat(r.inv_log_acceptance[run], k), spec.k, r.rng)
        cum = np.cumsum(draws.reshape(n, k) + 1, axis=1)
        done_at = np.where(
            (cum >= left[:, None]).any(axis=1), np.argmax(cum >= left[:, None], 1), k
        )
        k = min(k, int(done_at.min()) + 1)  # up to the first finish
        S = (S0[:, None] + np.concatenate((np.zeros((n, 1), np.int64), cum[:, : k - 1]), 1)).T
        timer = cast("SpeculativeTimer", loop.timer)  # a speculating replica's
        dt = timer.verify_steps_s(S.astype(float))
        ends = loop.clock + np.cumsum(dt)
        steps = max(1, int(np.count_nonzero(ends - dt < horizon)))
        self._last_step_s = float(dt[0])
        if int(self.kv.needed(run, S[steps - 1] + width).sum()) > self.kv.free_blocks:
            return False
        self.kv.grow(run, S[steps - 1] + width)
        gained = np.minimum(cum[:, steps - 1], left)
        c = loop.c
        c.verifications += n * steps
        c.drafted_tokens += n * spec.k * steps
        c.accepted_tokens += int(gained.sum()) - n * steps
        self._close_stretch(ends, dt, steps, gained)
        return True

    def _schedule_prefill(self, budget: int) -> Chunks:
        """Prompt chunks for this step within `budget` tokens: partly prefilled prompts first,
        then waiting requests in arrival order (no skipping)."""
        loop, r = self.loop, self.r
        chunks: Chunks = []
        for rid in self.prefilling:
            c = min(int(r.target[rid] - r.computed[rid]), budget)
            if c < 1 or not self.kv.grow(rid, int(r.computed[rid]) + c):
                return chunks
            chunks.append((rid, c))
            budget -= c
        while loop.waiting and self.sequences < self.p.seqs:
            rid = loop.waiting[0]
            if budget < 1 and not r.resumes(rid):
                break
            first = self._start(rid, budget, alone=not chunks)
            if first is None:
                break
            loop.waiting.popleft()
            self._admissions += 1
            self.admitted[rid] = self._admissions
            if first == 0:
                self.run = np.append(self.run, rid)
                continue
            self.prefilling.append(rid)
            chunks.append((rid, first))
            budget -= first
        return chunks

    def _start(self, rid: int, budget: int, alone: bool) -> int | None:
        """Admit a waiting request if its KV and first chunk fit: the chunk's token count
        (0 for a sequence that resumes decoding), or None. `alone`: no chunk yet this step."""
        loop, r = self.loop, self.r
        hit = self.kv.cached_prefix(rid) if r.computed[rid] == 0 else None
        start = hit.tokens if hit is not None else int(r.computed[rid])
        c = max(int(r.target[rid]) - start, 0)  # 0: a decoding sequence resumes
        if self.chunks_prompts:
            c = min(c, budget)
        elif c > budget and not alone:
            return None  # whole prompts only; an oversized one runs alone
        if hit is not None:  # read it from now on, so that making room cannot evict it
            hit.readers += 1
            r.shared_tokens[rid] = hit.tokens
        if not self.kv.grow(rid, start + c):
            if hit is not None:
                self.kv.release(rid)  # stop reading it (a waiting request holds no blocks)
            return None
        if hit is not None:
            self.kv.prefixes.move_to_end(int(r.w.prefix_id[rid]))
            r.computed[rid] = hit.tokens
            loop.c.prefix_hit_tokens += hit.tokens
        if r.swapped[rid]:
            loop.stall(int(r.computed[rid]))
            r.swapped[rid] = False
        return c

    def _preempt_newest(self) -> None:
        """Evict the most recently admitted sequence, decoding or partly prefilled (vLLM V1
        pops the last of its running list, which holds both in admission order): swap its KV
        to the host (shared prefix included) or drop it to be recomputed. Evicting the newest
        lets the oldest always progress; evicting decoders before a newer partial prompt let
        two long requests take each other's blocks forever."""
        loop, r = self.loop, self.r
        rid = max((*self.run.tolist(), *self.prefilling), key=self.admitted.__getitem__)
        if rid in self.prefilling:
            self.prefilling.remove(rid)
        else:
            self.run = self.run[self.run != rid]
        loop.c.preemptions += 1
        if loop.c.preemptions > PREEMPTIONS_PER_REQUEST * r.w.requests + LIVELOCK_SLACK:
            raise RuntimeError(
                f"preemption livelock: {loop.c.preemptions:,} preemptions for {r.w.requests:,} "
                f"requests by t = {loop.clock:.6g} s (request {rid} evicted again); the "
                "scheduler is cycling, not serving: report this workload and policy"
            )
        if self.p.preemption == "swap":
            loop.stall(int(r.computed[rid]))
            r.swapped[rid] = True
        else:
            loop.c.recomputed_tokens += int(r.computed[rid])
            r.computed[rid] = 0
            total = r.w.input_tokens[rid] + r.generated[rid]
            r.target[rid] = total - int(r.skipped(total))
        self.kv.release(rid)
        loop.waiting.appendleft(rid)

    def _grow_decodes(self) -> np.ndarray:
        """Blocks for each running sequence's next token (and the K drafts it verifies);
        preempt the newest until they fit."""
        r = self.r
        while self.run.size and not self.kv.grow(self.run, r.computed[self.run] + self.width):
            self._preempt_newest()
        return self.run

    def _finish_decodes(self, decode: np.ndarray) -> None:
        """`decode` is a prefix of the running set: sequences resumed during scheduling were
        appended after it and decode from the next step."""
        if not decode.size:
            return
        r = self.r
        y = self._yields(decode)
        r.computed[decode] += y
        r.generated[decode] += y
        fresh = decode[np.isnan(r.first_token_s[decode])]  # first_token: decode
        r.first_token_s[fresh] = self.loop.clock
        r.streamed(decode, self.loop.clock)
        done = r.generated[decode] >= r.w.output_tokens[decode]
        if done.any():
            for rid in decode[done]:
                self._complete(int(rid))
            self.run = np.concatenate((decode[~done], self.run[decode.size :]))

    def _yields(self, decode: np.ndarray) -> np.ndarray:
        """Tokens each decoding sequence gains this step: 1, or with speculation the accepted
        drafts and the target's own token, within what the request still generates."""
        if self.spec is None:
            return np.ones(decode.size, np.int64)
        r, c = self.r, self.loop.c
        left = r.w.output_tokens[decode] - r.generated[decode]
        y = np.minimum(accepted(r.inv_log_acceptance[decode], self.spec.k, r.rng) + 1, left)
        c.verifications += decode.size
        c.drafted_tokens += decode.size * self.spec.k
        c.accepted_tokens += int((y - 1).sum())
        return y

    def _finish_chunks(self, chunks: Chunks) -> None:
        loop, r = self.loop, self.r
        for rid, c in chunks:
            r.computed[rid] += c
            self.kv.cache_prefix(rid)
            if r.computed[rid] < r.target[rid]:
                continue
            self.prefilling.remove(rid)
            if r.yields_at_prefill(rid):
                r.generated[rid] += 1
                if np.isnan(r.first_token_s[rid]):
                    r.first_token_s[rid] = loop.clock
                r.streamed(rid, loop.clock)  # a re-prefill's token: a gap over the preemption
            if r.generated[rid] >= r.w.output_tokens[rid]:
                self._complete(rid)
            elif loop.handoff is not None:
                self.kv.release(rid)
                self.admitted.pop(rid, None)
                loop.handoff(rid, loop.clock)
            else:
                self.run = np.append(self.run, rid)

    def _complete(self, rid: int) -> None:
        self.loop.finish(rid, self.loop.clock)
        self.kv.release(rid)
        self.admitted.pop(rid, None)


class PrefillFirst(Continuous):
    """A waiting prompt runs whole in a prefill-only step, pausing decodes."""

    def batch(self) -> tuple[np.ndarray, Chunks]:
        chunks = self._schedule_prefill(self.p.step_tokens)
        return (self.run[:0] if chunks else self._grow_decodes()), chunks


class DecodeFirst(Continuous):
    """Prompts are prefilled only when nothing is decoding: once the batch is full (or no prompt
    waits) it decodes out before the next prompt is admitted."""

    draining = False

    def drains(self) -> bool:
        if not self.run.size:
            self.draining = False
        elif not self.loop.waiting and not self.prefilling:
            self.draining = True  # nothing left to prefill: decode this batch out
        return self.draining and not (self.loop.waiting and self.r.resumes(self.loop.waiting[0]))

    def batch(self) -> tuple[np.ndarray, Chunks]:
        # draining: a budget of 0 only resumes swapped-out or handed-off sequences
        chunks = self._schedule_prefill(0 if self.draining else self.p.step_tokens)
        if not chunks:
            self.draining = True  # the batch is full: decode it out
        return (self.run[:0] if chunks else self._grow_decodes()), chunks


class Chunked(Continuous):
    """Every step decodes all running sequences and fills the rest of the budget with prompt
    chunks."""

    chunks_prompts = True

    def batch(self) -> tuple[np.ndarray, Chunks]:
        decode = self._grow_decodes()
        budget = max(self.p.step_tokens - decode.size * self.width, 0)  # verifications count K + 1
        return decode, self._schedule_prefill(budget)


class Static(Scheduler):
    """A batch of up to `max_seqs` waiting requests is prefilled together and decodes until its
    longest output is done; finished sequences keep their slot (and keep being computed)."""

    def __init__(self, policy: Policy) -> None:
        super().__init__(policy)
        self.batch = np.zeros(0, np.int64)
        self.ctx = np.zeros(0)  # KV tokens of each slot, padding included

    @property
    def sequences(self) -> int:
        return self.batch.size

    def stored_tokens(self) -> int:
        return int(self.ctx.sum())

    def step(self, horizon: float) -> bool:
        loop, r, batch = self.loop, self.r, self.batch
        if not batch.size:  # prefill a new batch together
            n = min(self.p.seqs, self.kv.free_blocks, len(loop.waiting))
            if n == 0:
                return False
            batch = np.array([loop.waiting.popleft() for _ in range(n)], np.int64)
            self.kv.grow(batch, r.w.input_tokens[batch])  # one block of max_seq_len each
            skip = r.skipped(r.w.input_tokens[batch])  # prompts whose last token decodes
            T = (r.w.input_tokens[batch] - skip).astype(float)
            dt = loop.timer.step_s(T, np.zeros(n))
            loop.advance(dt)
            loop.c.prefill_tokens += int(T.sum())
            r.computed[batch] = T.astype(np.int64)
            r.generated[batch] = 1 - skip
            r.first_token_s[batch[skip == 0]] = loop.clock
            r.streamed(batch[skip == 0], loop.clock)
            self.batch, self.ctx = batch, r.computed[batch].astype(float)
            loop.finish(batch[(r.w.output_tokens[batch] <= 1) & (skip == 0)], loop.clock)
            loop.record(loop.clock - dt, n, int(T.sum()))
            return True
        # the whole decode phase: B sequences (finished ones padded) until the longest
        out = r.w.output_tokens[batch]
        steps = out - r.generated[batch]  # decode steps each sequence needs
        n, k = batch.size, int(steps.max())
        if k > 0:
            ends = loop.clock + np.cumsum(loop.timer.decode_s(self.ctx, k))
            live = steps > 0
            loop.finish(batch[live], ends[steps[live] - 1])  # its last token: step `steps`
            fresh = batch[np.isnan(r.first_token_s[batch])]  # first token from decode step 1
            r.first_token_s[fresh] = ends[0]
            r.streamed(batch[live], float(ends[0]))  # then one gap per step while live
            r.gaps.add(np.diff(ends), (steps[live, None] > np.arange(1, k)).sum(axis=0))
            r.computed[batch] += steps
            r.generated[batch] = out
            loop.c.decode_tokens += int(steps.sum())
            loop.c.padding_tokens += n * k - int(steps.sum())
            start = loop.clock
            loop.advance_to(float(ends[-1]))
            self.ctx = self.ctx + k
            loop.record(start, n, n * k, k)
        for rid in batch:  # the whole batch frees together
            self.kv.release(int(rid))
        self.batch = np.zeros(0, np.int64)
        return True


SCHEDULERS: dict[str, type[Scheduler]] = {
    "static": Static,
    "prefill-first": PrefillFirst,
    "decode-first": DecodeFirst,
    "chunked": Chunked,
}


def scheduler_for(policy: Policy) -> Scheduler:
    """Static batching has no prefill mode; continuous batching is scheduled by its mode. One
    per replica: `loop.ServingLoop` takes it and attaches itself."""
    return SCHEDULERS["static" if policy.batching == "static" else policy.prefill](policy)
