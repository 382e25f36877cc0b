"""One serving study by name: the specs, workload, policies and deployment a `serve` run or a
`plot serve` chart simulates (`ServeConfig`), loaded once into `ServeRuns`, whose `run(i, rate)`
simulates policy i at an arrival rate and summarises it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..calc.cost import Ceiling
from ..calc.placement import Parallel
from ..calc.stack import Stack
from ..errors import InvalidInputError
from ..spec.catalog import load_engine_or_none, load_hardware, load_model
from ..spec.engine import EngineSpec
from ..spec.hardware import HardwareSpec
from ..spec.model import ModelSpec
from ..spec.precision import Precision
from ..studies.speculative import Drafter, check_pair
from .benchmarks import BenchmarkRun, read_benchmarks
from .metrics import Summary
from .policy import Policy, policy
from .simulate import Deployment, build_deployment, simulate
from .speculation import Speculation
from .workload import Arrivals, LengthKind, Lengths, Workload, from_trace, synthetic


@dataclass(frozen=True, kw_only=True)
class ServeConfig:
    """Names and sizes of one study. Lengths are means (`lengths`: fixed, uniform on
    1..2·mean-1, or lognormal of shape `sigma`); a `trace` replaces the synthetic workload.
    `overrides` are policy fields (`max_seqs`, `kv`, ...) applied to every policy; `engine`
    `none` runs the hardware layer alone."""

    model: str
    hardware: str
    policies: tuple[str, ...] = ("engine",)  # the engine's own scheduler (policy.ENGINE_POLICY)
    requests: int = 2000
    arrivals: Arrivals = "poisson"
    lengths: LengthKind = "lognormal"
    input_tokens: int = 1024
    output_tokens: int = 256
    sigma: float = 0.8
    trace: Path | None = None
    benchmark: Path | None = None  # a serving benchmark's result: its requests and clients
    max_concurrency: int | None = None  # clients in flight at most (a closed loop)
    prefix_tokens: int = 0
    seed: int = 0
    slo_ttft: float = 1.0
    slo_tpot: float = 0.1
    precision: Precision = Precision()
    ceiling: Ceiling = "achievable"
    specs_dir: tuple[Path, ...] = ()
    max_seq_len: int | None = None
    memory_fraction: float | None = None
    replicas: int = 1
    prefill_replicas: int = 1
    decode_replicas: int = 1
    prefill_hardware: str | None = None
    decode_hardware: str | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    parallel: Parallel = Parallel()
    engine: str = "vllm"
    speculate: int | None = None  # K drafted tokens per decode step (None: no speculation)
    acceptance: float = 0.7  # mean per-token acceptance α across requests
    acceptance_sd: float = 0.0  # its standard deviation across requests
    draft: str | None = None  # the draft model, or
    mtp: bool = False  # the target's multi-token-prediction module, or
    eagle: bool = False  # an EAGLE head on the target, or
    heads: float | None = None  # heads costing this fraction of a target layer each

    def workload_dict(self, rate_per_s: float) -> dict:
        """The workload this config simulates at `rate_per_s`, as the JSON reports it."""
        return {
            "trace": str(self.trace) if self.trace else None,
            "benchmark": str(self.benchmark) if self.benchmark else None,
            "max_concurrency": self.max_concurrency,
            "requests": self.requests,
            "arrivals": self.arrivals,
            "rate_per_s": rate_per_s,
            "lengths": self.lengths,
            "prompt_tokens": self.input_tokens,
            "gen_tokens": self.output_tokens,
            "prefix_tokens": self.prefix_tokens,
            "seed": self.seed,
        }

    def speculation(self, model: ModelSpec) -> Speculation | None:
        """The speculation of `speculate` with its drafter (exactly one of `draft`, `mtp`,
        `eagle`, `heads`), or None; a drafter named without `speculate` is refused."""
        named = [
            n
            for n, v in (
                ("`draft`", self.draft),
                ("`mtp`", self.mtp or None),
                ("`eagle`", self.eagle or None),
                ("`heads`", self.heads),
            )
            if v is not None
        ]
        if self.speculate is None:
            if named:
                raise InvalidInputError(
                    f"{', '.join(named)} names a drafter; add `speculate` (K draft tokens per "
                    "step) to speculate, or drop it"
                )
            return None
        if len(named) != 1:
            raise InvalidInputError(
                "`speculate` needs one drafter: `draft` (a model), `mtp`, `eagle` or `heads` (a "
                "layer fraction)" + (f" (got {', '.join(named)})" if named else "")
            )
        if self.mtp:
            drafter = Drafter.mtp_of(model)
        elif self.eagle:
            drafter = Drafter.eagle_of(model)
        elif self.draft is not None:
            draft = load_model(self.draft, self.specs_dir)
            check_pair(model, draft)
            drafter = Drafter(model=draft)
        else:
            drafter = Drafter(head_layer_fraction=self.heads)
        return Speculation(self.speculate, self.acceptance, drafter, self.acceptance_sd)

    def workload_label(self, rate_per_s: float) -> str:
        """One line naming the workload (a table title's)."""
        if self.trace:
            return f"trace {self.trace}"
        if self.benchmark:
            return f"the requests of {self.benchmark}"
        cap = f", ≤{self.max_concurrency} in flight" if self.max_concurrency else ""
        prefix = f", shared prefix {self.prefix_tokens}" if self.prefix_tokens else ""
        return (
            f"{self.requests} requests, {self.arrivals} {rate_per_s:g}/s, {self.lengths} "
            f"P≈{self.input_tokens} G≈{self.output_tokens}{prefix}{cap}, seed {self.seed}"
        )


@dataclass(kw_only=True)
class ServeRuns:
    """A config's specs and deployments, loaded once; `notes` collects what the workloads
    said (requests cut to fit the context)."""

    config: ServeConfig
    model: ModelSpec
    stack: Stack
    policies: list[Policy]
    deployments: list[Deployment]
    notes: list[str] = field(default_factory=list)
    pool_hardware: tuple[HardwareSpec, ...] = ()  # the prefill and decode pools' own devices
    _benchmark: BenchmarkRun | None = None

    @property
    def hardware(self) -> HardwareSpec:
        return self.stack.hardware

    @property
    def engine(self) -> EngineSpec | None:
        return self.stack.engine

    @property
    def devices(self) -> dict[str, HardwareSpec]:
        """The loaded spec of every pool's device, by name (user YAML files included)."""
        return {d.name: d for d in (self.hardware, *self.pool_hardware)}

    def benchmark_run(self) -> BenchmarkRun | None:
        """The benchmark result the workload comes from (its first run), read once."""
        c = self.config
        if c.benchmark is None:
            return None
        if self._benchmark is None:
            runs = read_benchmarks(c.benchmark, c.requests)
            self._benchmark = runs[0]
            self.notes.extend(f"note: {c.benchmark}: {n}" for n in self._benchmark.notes)
            if len(runs) > 1:
                self.notes.append(
                    f"note: {c.benchmark} holds {len(runs)} runs; the first "
                    f"({runs[0].load_label}) is simulated"
                )
        return self._benchmark

    @property
    def max_concurrency(self) -> int | None:
        run = self.benchmark_run()
        if self.config.max_concurrency is not None or run is None:
            return self.config.max_concurrency
        return run.max_concurrency

    def workload(self, rate_per_s: float) -> Workload:
        c, m = self.config, self.model
        run = self.benchmark_run()
        if run is not None:
            w = run.workload(c.seed)
        elif c.trace is not None:
            w = from_trace(c.trace, c.prefix_tokens)
        else:

            def lengths(mean: int) -> Lengths:
                return Lengths(
                    c.lengths, mean, high=m.max_context, sigma=c.sigma, uniform_high=2 * mean - 1
                )

            inputs, outputs = lengths(c.input_tokens), lengths(c.output_tokens)
            w = synthetic(
                c.requests,
                rate_per_s,
                inputs,
                outputs,
                c.arrivals,
                c.seed,
                c.prefix_tokens,
                m.max_context,
            )
        note = (
            f"note: {w.truncated} of {w.requests} generated requests cut to fit "
            f"{m.name}'s {m.max_context:,}-token context"
        )
        if w.truncated and note not in self.notes:
            self.notes.append(note)
        w.check(m.max_context, m.name)
        return w

    def run(self, i: int, rate_per_s: float) -> Summary:
        """Policy i simulated on the workload at `rate_per_s`, summarised against the SLO."""
        c = self.config
        result = simulate(
            self.workload(rate_per_s),
            self.policies[i],
            self.deployments[i],
            c.max_seq_len,
            self.max_concurrency,
            c.seed,
        )
        return Summary(result, c.slo_ttft, c.slo_tpot)


def serve_runs(c: ServeConfig, notes: list[str] | None = None) -> ServeRuns:
    """Load the specs, policies and deployments of `c` once; the workloads' notes go to
    `notes` (a new list if None)."""
    dirs = c.specs_dir
    m, hw = load_model(c.model, dirs), load_hardware(c.hardware, dirs)
    pre_hw = load_hardware(c.prefill_hardware, dirs) if c.prefill_hardware else None
    dec_hw = load_hardware(c.decode_hardware, dirs) if c.decode_hardware else None
    stack = Stack.resolve(
        m,
        hw,
        c.precision,
        c.ceiling,
        load_engine_or_none(c.engine, dirs),
        c.parallel,
        memory_fraction=c.memory_fraction,
    )
    policies = [
        policy(n.strip(), stack.engine).with_overrides(**c.overrides).on(stack.memory)
        for n in c.policies
    ]
    spec = c.speculation(m)
    deployments = [
        build_deployment(
            m, stack, p, c.replicas, pre_hw, dec_hw, c.prefill_replicas, c.decode_replicas, spec
        )
        for p in policies
    ]
    return ServeRuns(
        config=c,
        model=m,
        stack=stack,
        policies=policies,
        deployments=deployments,
        notes=[] if notes is None else notes,
        pool_hardware=tuple(d for d in (pre_hw, dec_hw) if d is not None),
    )
