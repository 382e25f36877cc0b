"""One serving instance: a scheduler stepping through iterations on its own clock.

Request state lives in shared arrays (`Requests`), indexed by request id; an engine holds ids.
A request's KV holds `computed` tokens; it is decoding once `computed` reaches `target`
(its prompt, or prompt + generated tokens when re-prefilled after a recompute preemption).
A decode step feeds the last generated token (T=1 over S=computed) and yields the next one;
finishing a prefill yields a token too. KV is allocated in blocks of `block_tokens`; the
contiguous layout is the same with one block of the maximum sequence length per sequence.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .policy import Policy
from .workload import NO_PREFIX, Workload


class StepTimer(Protocol):
    """Step times from the sequences' shapes (see `roofline.serve.stepcost`)."""

    def step_s(self, T: np.ndarray, S: np.ndarray) -> float:
        """One step over sequences with T_i new tokens on S_i cached."""

    def decode_s(self, S: np.ndarray, steps: int) -> np.ndarray:
        """`steps` consecutive decode steps of sequences starting at contexts S_i."""


@dataclass
class Requests:
    """Mutable per-request state of one simulation, as parallel arrays."""

    w: Workload
    ready_s: np.ndarray = field(init=False)  # when the holding engine may start it
    computed: np.ndarray = field(init=False)  # tokens in KV
    target: np.ndarray = field(init=False)  # tokens in KV when the prefill is done
    generated: np.ndarray = field(init=False)
    held_blocks: np.ndarray = field(init=False)  # own blocks (shared prefix blocks excluded)
    shared_tokens: np.ndarray = field(init=False)  # prefix tokens read from the prefix cache
    swapped: np.ndarray = field(init=False)  # KV sits in host memory, to be swapped back in
    first_token_s: np.ndarray = field(init=False)
    finish_s: np.ndarray = field(init=False)
    completions: np.ndarray = field(init=False)  # times each request finished (must be 1)

    def __post_init__(self) -> None:
        n = self.w.requests
        self.ready_s = self.w.arrival_s.astype(float).copy()
        self.computed = np.zeros(n, np.int64)
        self.target = self.w.input_tokens.astype(np.int64).copy()
        self.generated = np.zeros(n, np.int64)
        self.held_blocks = np.zeros(n, np.int64)
        self.shared_tokens = np.zeros(n, np.int64)
        self.swapped = np.zeros(n, bool)
        self.first_token_s = np.full(n, np.nan)
        self.finish_s = np.full(n, np.nan)
        self.completions = np.zeros(n, np.int64)


@dataclass
class Counters:
    """Totals over a run, for the report and the conservation checks."""

    prefill_tokens: int = 0  # prompt tokens computed (re-prefills included)
    decode_tokens: int = 0  # tokens fed by decode steps for live sequences
    padding_tokens: int = 0  # static batching: steps of sequences already finished
    recomputed_tokens: int = 0  # KV dropped by recompute preemptions (re-prefilled later)
    prefix_hit_tokens: int = 0  # prompt tokens served from the prefix cache
    preemptions: int = 0
    swap_s: float = 0.0


@dataclass
class Timeline:
    """One row per step: when it ended, its batch, and the KV held after it."""

    start_s: list[float] = field(default_factory=list)
    end_s: list[float] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    kv_allocated_tokens: list[int] = field(default_factory=list)
    kv_stored_tokens: list[int] = field(default_factory=list)
    kv_shared_saving_tokens: list[int] = field(default_factory=list)


class Engine:
    """One replica. `handoff`, when given, takes each request after its first token (the
    prefill instance of a disaggregated pair) together with the time it left."""

    def __init__(self, policy: Policy, timer: StepTimer, kv_capacity_tokens: int,
                 max_seq_len: int, reqs: Requests, swap_bytes_per_s: float,
                 kv_bytes_per_token: float, counters: Counters, timeline: Timeline,
                 handoff: Callable[[int, float], None] | None = None,
                 state_bytes_per_sequence: float = 0.0) -> None:
        self.p, self.timer, self.r = policy, timer, reqs
        self.block_tokens = policy.block_size if policy.kv == "paged" else max_seq_len
        self.total_blocks = kv_capacity_tokens // self.block_tokens
        self.free_blocks = self.total_blocks
        self.swap_s_per_token = kv_bytes_per_token / swap_bytes_per_s
        self.swap_s_per_sequence = state_bytes_per_sequence / swap_bytes_per_s  # SSM state
        self.c, self.tl, self.handoff = counters, timeline, handoff
        self.clock = 0.0
        self.busy_s = 0.0
        self.pending: deque[int] = deque()  # routed here, not yet ready
        self.waiting: deque[int] = deque()  # ready, not admitted (preempted ones in front)
        self.run = np.zeros(0, np.int64)  # decoding, in admission order
        self.prefilling: list[int] = []  # admitted, prompt partly computed (chunked)
        self.draining = False  # decode-first: decoding its batch out, admitting nothing new
        self.static_batch = np.zeros(0, np.int64)
        self._static_ctx = np.zeros(0)  # KV tokens of each static-batch slot, padding included
        # prefix id -> [blocks, tokens, references]; order = least recently used first
        self.prefixes: OrderedDict[int, list[int]] = OrderedDict()

    # ---- routing interface ----------------------------------------------------------------
    def add(self, rid: int) -> None:
        self.pending.append(rid)

    @property
    def load(self) -> int:
        """Requests routed here and not finished (the least-loaded router's measure)."""
        return (len(self.pending) + len(self.waiting) + self.run.size + len(self.prefilling)
                + self.static_batch.size)

    def run_until(self, t: float) -> None:
        """Step while there is work and the clock is before `t` (a step may end after t)."""
        while True:
            while self.pending and self.r.ready_s[self.pending[0]] <= self.clock:
                self.waiting.append(self.pending.popleft())
            busy = self.waiting or self.run.size or self.prefilling or self.static_batch.size
            if busy:
                if self.clock >= t:
                    return
                if not self._step(t):
                    raise RuntimeError("scheduler made no progress with work queued")
            elif self.pending and self.r.ready_s[self.pending[0]] <= t:
                self.clock = max(self.clock, float(self.r.ready_s[self.pending[0]]))
            else:
                return

    # ---- KV blocks ------------------------------------------------------------------------
    def _blocks_needed(self, rid: int, tokens: int) -> int:
        own = -(-(tokens - int(self.r.shared_tokens[rid])) // self.block_tokens)
        return own - int(self.r.held_blocks[rid])

    def _take(self, n: int) -> bool:
        """Take n free blocks, evicting unreferenced cached prefixes if needed."""
        while n > self.free_blocks:
            idle = next((k for k, v in self.prefixes.items() if v[2] == 0), None)
            if idle is None:
                return False
            self.free_blocks += self.prefixes.pop(idle)[0]
        self.free_blocks -= n
        return True

    def _release(self, rid: int) -> None:
        self.free_blocks += int(self.r.held_blocks[rid])
        self.r.held_blocks[rid] = 0
        if self.r.shared_tokens[rid]:
            self.prefixes[int(self.r.w.prefix_id[rid])][2] -= 1
            self.r.shared_tokens[rid] = 0

    def _shareable_tokens(self, rid: int) -> int:
        """Whole blocks of the request's prefix, leaving at least one prompt token to run."""
        if not self.p.prefix_caching or self.r.w.prefix_id[rid] == NO_PREFIX:
            return 0
        n = min(int(self.r.w.prefix_tokens[rid]), int(self.r.w.input_tokens[rid]) - 1)
        return n // self.block_tokens * self.block_tokens

    def _cache_prefix(self, rid: int) -> None:
        """After its prefill covers the prefix, hand the request's prefix blocks to the cache."""
        k = self._shareable_tokens(rid)
        pid = int(self.r.w.prefix_id[rid])
        if k == 0 or pid in self.prefixes or self.r.shared_tokens[rid] or self.r.computed[rid] < k:
            return
        self.prefixes[pid] = [k // self.block_tokens, k, 1]
        self.r.held_blocks[rid] -= k // self.block_tokens
        self.r.shared_tokens[rid] = k

    def _start(self, rid: int, budget: int, alone: bool) -> int | None:
        """Admit a waiting request if its KV and first chunk fit: the chunk's token count
        (0 for a sequence that resumes decoding), or None. `alone`: no chunk yet this step."""
        r = self.r
        fresh = r.computed[rid] == 0
        pid = int(r.w.prefix_id[rid])
        hit = self.prefixes.get(pid) if fresh and self._shareable_tokens(rid) else None
        start = hit[1] if hit is not None else int(r.computed[rid])
        c = max(int(r.target[rid]) - start, 0)  # 0: a decoding sequence resumes
        if self.p.prefill == "chunked":
            c = min(c, budget)
        elif c > budget and not alone:
            return None  # whole prompts only; an oversized one runs alone
        if hit is not None:
            hit[2] += 1  # pin it so that making room cannot evict it
        own = start + c - (hit[1] if hit is not None else int(r.shared_tokens[rid]))
        need = -(-own // self.block_tokens) - int(r.held_blocks[rid])
        if not self._take(need):
            if hit is not None:
                hit[2] -= 1
            return None
        r.held_blocks[rid] += need
        if hit is not None:
            self.prefixes.move_to_end(pid)
            r.shared_tokens[rid] = r.computed[rid] = hit[1]
            self.c.prefix_hit_tokens += hit[1]
        if r.swapped[rid]:
            self._stall(int(r.computed[rid]))
            r.swapped[rid] = False
        return c

    def _stall(self, tokens: int) -> None:
        """Move `tokens` of KV (and the sequence's state) between device and host; the engine
        waits for it."""
        dt = tokens * self.swap_s_per_token + self.swap_s_per_sequence
        self.c.swap_s += dt
        self.clock += dt
        self.busy_s += dt

    def _preempt_newest(self) -> None:
        """Evict the most recently admitted sequence, decoding ones first: swap its KV to the
        host (shared prefix included) or drop it to be recomputed."""
        r = self.r
        if self.run.size:
            rid = int(self.run[-1])
            self.run = self.run[:-1]
        else:
            rid = self.prefilling.pop()
        self.c.preemptions += 1
        if self.p.preemption == "swap":
            self._stall(int(r.computed[rid]))
            r.swapped[rid] = True
        else:
            self.c.recomputed_tokens += int(r.computed[rid])
            r.computed[rid] = 0
            r.target[rid] = r.w.input_tokens[rid] + r.generated[rid]
        self._release(rid)
        self.waiting.appendleft(rid)

    # ---- one iteration --------------------------------------------------------------------
    def _step(self, horizon: float) -> bool:
        """Run one iteration, or a stretch of decode-only iterations that cannot differ from
        step-by-step ones (same sequences, no arrival, no finish, blocks already free)."""
        if self.p.batching == "static":
            return self._static_step()
        mode = self.p.prefill
        chunks: list[tuple[int, int]] = []
        decode = self.run[:0]
        if mode == "decode-first" and not self.run.size:
            self.draining = False
        quiet = not self.waiting and not self.prefilling
        if mode == "decode-first" and quiet and self.run.size:
            self.draining = True  # nothing left to prefill: decode this batch out
        if self.run.size and (quiet or (mode == "decode-first" and self.draining
                                        and not self._resumable())):
            if self.pending:
                horizon = min(horizon, float(self.r.ready_s[self.pending[0]]))
            if self._decode_stretch(horizon):
                return True
        if mode == "chunked":
            decode = self._grow_decodes(self.run)
            chunks = self._schedule_prefill(self.p.token_budget - decode.size)
        elif mode == "prefill-first" or not self.draining:
            chunks = self._schedule_prefill(self.p.token_budget)
            if not chunks:
                self.draining = True  # decode-first: the batch is full, decode it out
                decode = self._grow_decodes(self.run)
        else:  # decode-first, draining its batch
            self._schedule_prefill(0)  # resumes swapped/handed-off sequences only
            decode = self._grow_decodes(self.run)
        if not chunks and not decode.size:
            if self.run.size:
                return True  # swapped-out or handed-off sequences resumed: they decode next
            if not self.prefilling:
                return False
            self._preempt_newest()  # partial prompts hold all the blocks: make room
            return True
        r = self.r
        T_c = np.array([c for _, c in chunks], dtype=float)
        T = np.concatenate((np.ones(decode.size), T_c))
        S = np.concatenate((r.computed[decode], [r.computed[i] for i, _ in chunks])).astype(float)
        tokens = T.sum()
        dt = self.timer.step_s(T, S)
        self.clock += dt
        self.busy_s += dt
        self.c.decode_tokens += decode.size
        self.c.prefill_tokens += int(T_c.sum())
        self._finish_decodes(decode)
        self._finish_chunks(chunks)
        self._record(self.clock - dt, int(decode.size + len(chunks)), int(tokens))
        return True

    def _resumable(self) -> bool:
        """A swapped-out or handed-off sequence waits to decode again (no prefill needed)."""
        r = self.r
        return bool(self.waiting) and bool(r.computed[self.waiting[0]] > 0) and bool(
            r.computed[self.waiting[0]] >= r.target[self.waiting[0]])

    def _decode_stretch(self, horizon: float) -> bool:
        """Decode every running sequence for the steps that start before `horizon` and end
        no later than the first finish, if their KV blocks are free now."""
        r, run = self.r, self.run
        n = run.size
        S = r.computed[run]
        k = int((r.w.output_tokens[run] - r.generated[run]).min())
        own = S + k - r.shared_tokens[run]
        if int((-(-own // self.block_tokens) - r.held_blocks[run]).sum()) > self.free_blocks:
            return False
        if horizon < np.inf:  # steps only lengthen as contexts grow: bound k by the first
            first = float(self.timer.decode_s(S, 1)[0])
            k = min(k, int((horizon - self.clock) / first) + 1)
        dt = self.timer.decode_s(S, k)
        ends = self.clock + np.cumsum(dt)
        steps = max(1, int(np.count_nonzero(ends - dt < horizon)))
        start = self.clock
        self.clock = float(ends[steps - 1])
        self.busy_s += self.clock - start
        own = S + steps - r.shared_tokens[run]
        need = -(-own // self.block_tokens) - r.held_blocks[run]
        self._take(int(need.sum()))
        r.held_blocks[run] += need
        r.computed[run] += steps - 1  # the last step is counted by _finish_decodes
        r.generated[run] += steps - 1
        self.c.decode_tokens += n * steps
        self._finish_decodes(run)
        self._record(start, n, n * steps)
        return True

    def _schedule_prefill(self, budget: int) -> list[tuple[int, int]]:
        """Prompt chunks (request, tokens) for this step within `budget` tokens: partly
        prefilled prompts first, then waiting requests in arrival order (no skipping)."""
        r = self.r
        chunks: list[tuple[int, int]] = []
        for rid in self.prefilling:
            c = min(int(r.target[rid] - r.computed[rid]), budget)
            need = self._blocks_needed(rid, int(r.computed[rid]) + c) if c > 0 else 0
            if c < 1 or not self._take(need):
                return chunks
            r.held_blocks[rid] += need
            chunks.append((rid, c))
            budget -= c
        while self.waiting and self.run.size + len(self.prefilling) < self.p.max_seqs:
            rid = self.waiting[0]
            resumes = r.computed[rid] > 0 and r.computed[rid] >= r.target[rid]
            if not resumes and budget < 1:
                break
            c = self._start(rid, budget, alone=not chunks)
            if c is None:
                break
            self.waiting.popleft()
            if c == 0:
                self.run = np.append(self.run, rid)
                continue
            self.prefilling.append(rid)
            chunks.append((rid, c))
            budget -= c
        return chunks

    def _grow_decodes(self, decode: np.ndarray) -> np.ndarray:
        """Blocks for each decoding sequence's next token; preempt the newest until they fit."""
        r = self.r
        while decode.size:
            own = r.computed[decode] + 1 - r.shared_tokens[decode]
            need = -(-own // self.block_tokens) - r.held_blocks[decode]
            if self._take(int(need.sum())):
                r.held_blocks[decode] += need
                return decode
            self._preempt_newest()
            decode = self.run
        return decode

    def _finish_decodes(self, decode: np.ndarray) -> None:
        """`decode` is a prefix of the running set: sequences resumed during scheduling were
        appended after it and decode from the next step."""
        if not decode.size:
            return
        r = self.r
        r.computed[decode] += 1
        r.generated[decode] += 1
        done = r.generated[decode] >= r.w.output_tokens[decode]
        if done.any():
            for rid in decode[done]:
                self._complete(int(rid))
            self.run = np.concatenate((decode[~done], self.run[decode.size:]))

    def _finish_chunks(self, chunks: list[tuple[int, int]]) -> None:
        r = self.r
        for rid, c in chunks:
            r.computed[rid] += c
            self._cache_prefix(rid)
            if r.computed[rid] < r.target[rid]:
                continue
            self.prefilling.remove(rid)
            r.generated[rid] += 1
            if np.isnan(r.first_token_s[rid]):
                r.first_token_s[rid] = self.clock
            if r.generated[rid] >= r.w.output_tokens[rid]:
                self._complete(rid)
            elif self.handoff is not None:
                self._release(rid)
                self.handoff(rid, self.clock)
            else:
                self.run = np.append(self.run, rid)

    def _complete(self, rid: int) -> None:
        self.r.finish_s[rid] = self.clock
        self.r.completions[rid] += 1
        self._release(rid)

    def _record(self, start_s: float, seqs: int, tokens: int) -> None:
        r = self.r
        if self.static_batch.size:  # padded sequences still hold their growing context
            stored, saving = int(self._static_ctx.sum()), 0
        else:
            stored = int(r.computed[self.run].sum() - r.shared_tokens[self.run].sum()) + sum(
                int(r.computed[i] - r.shared_tokens[i]) for i in self.prefilling)
            stored += sum(v[1] for v in self.prefixes.values())
            saving = sum(v[1] * (v[2] - 1) for v in self.prefixes.values())
        self.tl.start_s.append(start_s)
        self.tl.end_s.append(self.clock)
        self.tl.seqs.append(seqs)
        self.tl.tokens.append(tokens)
        self.tl.kv_allocated_tokens.append((self.total_blocks - self.free_blocks)
                                           * self.block_tokens)
        self.tl.kv_stored_tokens.append(stored)
        self.tl.kv_shared_saving_tokens.append(saving)

    # ---- static batching ------------------------------------------------------------------
    def _static_step(self) -> bool:
        r = self.r
        if not self.static_batch.size:
            take = min(self.p.max_seqs, self.free_blocks, len(self.waiting))
            if take == 0:
                return False
            batch = np.array([self.waiting.popleft() for _ in range(take)], np.int64)
            self.free_blocks -= take
            r.held_blocks[batch] = 1
            T = r.w.input_tokens[batch].astype(float)
            dt = self.timer.step_s(T, np.zeros(take))
            self.clock += dt
            self.busy_s += dt
            self.c.prefill_tokens += int(T.sum())
            r.computed[batch] = r.w.input_tokens[batch]
            r.generated[batch] = 1
            r.first_token_s[batch] = self.clock
            self.static_batch = batch
            self._static_ctx = r.computed[batch].astype(float)
            for rid in batch[r.w.output_tokens[batch] <= 1]:
                self.r.finish_s[rid] = self.clock
                self.r.completions[rid] += 1
            self._record(self.clock - dt, take, int(T.sum()))
        else:  # the whole decode phase: B sequences (finished ones padded) until the longest
            batch = self.static_batch
            out = r.w.output_tokens[batch]
            n, k = batch.size, int(out.max()) - 1  # steps after the prefill's token
            if k > 0:
                dt = self.timer.decode_s(self._static_ctx, k)
                ends = self.clock + np.cumsum(dt)
                live = out > 1
                r.finish_s[batch[live]] = ends[out[live] - 2]  # token j+1 comes from step j
                r.completions[batch[live]] += 1
                r.computed[batch] += out - 1
                r.generated[batch] = out
                self.c.decode_tokens += int((out - 1).sum())
                self.c.padding_tokens += n * k - int((out - 1).sum())
                start, self.clock = self.clock, float(ends[-1])
                self.busy_s += self.clock - start
                self._static_ctx = self._static_ctx + k
                self._record(start, n, n * k)
            self.free_blocks += n  # the whole batch frees together
            r.held_blocks[batch] = 0
            self.static_batch = np.zeros(0, np.int64)
        return True
