"""EngineSpec: how one inference software stack runs a step (the third layer of a prediction).

The datasheet roofline says what the silicon could do; the hardware `achievable` terms what the
best kernels reach on it; an engine profile says which kernels a real stack runs and what it
adds around them. One YAML per engine under `engine_specs/`, every value with its source:

- launches: `eager` (every kernel of an unfused PyTorch implementation, `Op.launches`) or
  `fused` (one kernel per operator, plus the engine's `extra_launches_per_layer`);
- CUDA graphs: a decode step replayed from a graph pays no host launch cost, only the GPU-side
  per-kernel floor; without graphs each kernel also costs `host_launch_us` on the host, and the
  GPU waits whenever the host is slower than the kernel (`cost.op_cost`);
- the attention kernel and the fraction of the memory (decode) and compute (prefill) roofs it
  reaches;
- the GEMM kernels by weight × activation width (dequantise-in-kernel w4a16 such as Marlin
  or tinygemm, an engine's own 16-bit kernels): the fractions of the memory and compute
  ceilings they reach;
- the all-reduce: latency per call and the fraction of the link's bus bandwidth it reaches;
- per-step host overhead (scheduling, sampling, detokenisation) for prefill and decode;
- the prefill token budget (chunked prefill) and the memory fraction the engine claims.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from ..frozen import Frozen
from ..units import UNKNOWN_RELEASE, version_key

if TYPE_CHECKING:
    from .hardware import HardwareSpec

#: Upper bounds of an engine's fixed costs, far above any engine's (launches take 5–50 µs,
#: a step's host work well under 100 ms): a value beyond them is a typo in units.
MAX_FIXED_US = 100_000.0
MAX_STEP_US = 10_000_000.0


class Sourced(Frozen):
    source: str = Field(min_length=1)


class AttentionKernel(Sourced):
    """The attention kernel and the fractions of the roofs it reaches."""

    kernel: str
    decode_memory_fraction: float = Field(
        gt=0,
        le=1,
        description=(
            "fraction of the achievable memory bandwidth a decode attention kernel reaches"
        ),
    )
    prefill_compute_fraction: float = Field(
        gt=0,
        le=1,
        description=(
            "fraction of the achievable matmul peak a causal prefill attention kernel reaches"
        ),
    )
    decode_fixed_us: float = Field(
        default=0.0,
        ge=0,
        le=MAX_FIXED_US,
        description=(
            "fixed time of one decode attention call beyond the per-kernel floor (split-KV "
            "partials and their combine), microseconds"
        ),
    )
    fp8_compute: bool = Field(
        default=False,
        description=(
            "the kernel computes attention in fp8 when the KV cache is fp8 (an fp8 attention "
            "kernel); otherwise attention runs at 16 bits whatever the linear layers run at"
        ),
    )


class MatmulKernel(Sourced):
    """The GEMM kernel an engine runs for one weight × activation width (`w4a16`: 4-bit
    weights dequantised in the kernel against 16-bit activations, as Marlin or tinygemm do;
    `w16a16` when the engine runs its own 16-bit kernels instead of cuBLAS)."""

    kernel: str
    memory_fraction: float = Field(
        gt=0,
        le=1,
        description=(
            "fraction of the achievable memory bandwidth it streams weights at (memory-bound M)"
        ),
    )
    compute_fraction: float = Field(
        gt=0,
        le=1,
        description=("fraction of the achievable matmul ceiling it reaches (compute-bound M)"),
    )


class AllReduce(Sourced):
    """The tensor-parallel all-reduce implementation: its algorithm (hops and bytes per GPU,
    `roofline.calc.parallel.all_reduce_s`) and the fixed cost of one call (launch, handshake)."""

    kind: Literal["ring", "one-shot", "two-shot"]
    latency_us: float = Field(
        ge=0, le=MAX_FIXED_US, description="fixed cost of one all-reduce call"
    )


class BatchLimits(Frozen):
    """What the scheduler runs at most in one step: sequences and new tokens."""

    max_num_seqs: int = Field(gt=0, le=1_000_000)
    max_num_batched_tokens: int = Field(gt=0, le=10_000_000)


class BatchDefaults(Sourced):
    """The scheduler's limits as the engine picks them by device, e.g. vLLM's V1 defaults:
    `large` on a device with at least `large_min_memory_gib` GiB whose name holds none of
    `small_names` (vLLM: >= 70 GiB and not an A100), `small` elsewhere."""

    large_min_memory_gib: float = Field(ge=0, le=100_000)
    small_names: tuple[str, ...] = ()
    large_names: tuple[str, ...] = Field(
        default=(),
        description="when given, only a device whose name holds one of them is large "
        "(vLLM 0.7-0.8.4: 'h100' or 'h200')",
    )
    large: BatchLimits
    small: BatchLimits

    def limits_on(self, hw: HardwareSpec) -> BatchLimits:
        """The limits the engine sets on device `hw` (its memory and its name)."""
        names = f"{hw.name} {hw.display_name}".lower()
        small_name = any(n.lower() in names for n in self.small_names)
        large_name = not self.large_names or any(n.lower() in names for n in self.large_names)
        large = (
            hw.memory_bytes >= self.large_min_memory_gib * 2**30 and large_name and not small_name
        )
        return self.large if large else self.small


class Release(Sourced):
    """A range of an engine's releases whose behaviour differs from the newest: from `since`
    (released on `since_date`) up to the next range. `changes` are fields of the profile as
    that range sets them."""

    since: str = Field(pattern=r"^\d+(\.\d+){0,2}$")
    since_date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    label: str = Field(min_length=1)
    changes: dict[str, Any] = Field(default_factory=dict)


class EngineSpec(Frozen):
    """One inference engine. Values are for its documented default configuration."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    display_name: str
    aliases: tuple[str, ...] = ()
    version: str
    launches: Literal["eager", "fused"]
    extra_launches_per_layer: int = Field(
        default=0,
        ge=0,
        le=100,
        description=(
            "kernels per layer beyond one per operator (fused only): rope, KV-cache write, ..."
        ),
    )
    cuda_graphs: bool = Field(description="decode steps replayed from CUDA graphs")
    host_launch_us: float = Field(
        ge=0,
        le=MAX_FIXED_US,
        description=(
            "host time to launch one kernel without graphs (Python + dispatcher + driver)"
        ),
    )
    host_step_us: float = Field(
        ge=0,
        le=MAX_STEP_US,
        description=("host time per step outside kernels: scheduling, sampling, detokenisation"),
    )
    attention: AttentionKernel
    matmul: dict[str, MatmulKernel] = Field(
        default_factory=dict,
        description=(
            "GEMM kernels by width, `w<weight bits>a<activation bits>`; a width not listed runs "
            "at the device's achievable ceilings (vendor BLAS)"
        ),
    )
    all_reduce: AllReduce
    formats: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "how the engine stores a named weight format, as a `weights` string (llama.cpp's "
            "Q4_0 file keeps the output layer in Q6_K; gpt-fast's int8 quantises it too)"
        ),
    )
    formats_source: str = ""
    prefill_token_budget: int | None = Field(
        default=None,
        gt=0,
        le=10_000_000,
        description=("tokens one prefill step takes (chunked prefill); None: whole prompts"),
    )
    max_num_seqs: int | None = Field(
        default=None,
        gt=0,
        le=1_000_000,
        description=(
            "sequences the scheduler runs in one step at most (vLLM `max_num_seqs`, "
            "TensorRT-LLM `max_batch_size`); None: only memory limits the batch"
        ),
    )
    max_num_seqs_source: str = ""
    batch_defaults: BatchDefaults | None = Field(
        default=None,
        description=(
            "the scheduler's limits by device, when the engine sets them so; they replace "
            "`max_num_seqs` and `prefill_token_budget` on every device"
        ),
    )
    releases: tuple[Release, ...] = Field(
        default=(),
        description=(
            "older release ranges and what they set differently, oldest first; the profile's "
            "own fields describe the newest (`at`)"
        ),
    )
    newest_since: str = Field(
        default="",
        description="the first release the profile's own fields describe (with releases)",
    )
    newest_since_date: str = Field(default="", pattern=r"^(\d{4}-\d{2}-\d{2})?$")
    release: str = Field(
        default="", description="set on an older range's profile: the range's first release"
    )
    exact_release: str = Field(
        default="",
        description=(
            "the release asked for inside the newest range (`--engine vllm@0.11.0`, a row's "
            "version); empty: the newest"
        ),
    )
    memory_fraction: float = Field(
        default=0.9,
        gt=0,
        le=1,
        description=("fraction of device memory the engine claims for weights, KV and workspace"),
    )
    first_token: Literal["prefill", "decode"] = Field(
        default="prefill",
        description=(
            "the step that yields a request's first token: the prefill of all P prompt tokens, "
            "or `decode`: a prefill of P - 1 tokens, then a decode step over the last one"
        ),
    )
    first_token_source: str = ""
    scheduler: (
        Literal["continuous", "continuous+prefix", "chunked", "chunked+prefix", "decode-first"]
        | None
    ) = Field(
        default=None,
        description=(
            "the serving policy (`roofline.serve.policy.POLICIES`) the engine schedules by "
            "default: `chunked` splits prompts into the step token budget beside the decodes, "
            "`+prefix` shares cached prefix blocks; None: not characterised (prefill-first)"
        ),
    )
    scheduler_source: str = ""
    source: str = Field(min_length=1)
    notes: str = ""

    @field_validator("matmul")
    @classmethod
    def _widths(cls, v: dict[str, MatmulKernel]) -> dict[str, MatmulKernel]:
        for key in v:
            if not re.fullmatch(r"w(4|8|16)a(8|16)", key):
                raise ValueError(f"matmul width '{key}' is not w<4|8|16>a<8|16>")
        return v

    @field_validator("formats")
    @classmethod
    def _formats_known(cls, v: dict[str, str]) -> dict[str, str]:
        """Every key a format name, every value a weights string `Precision` accepts."""
        from ..errors import RooflineError
        from .precision import Precision

        for name, stored in v.items():
            for what, text in (("format", name), ("storage", stored)):
                try:
                    Precision(weights=text, activations="fp32", kv="bf16")
                except RooflineError as e:
                    raise ValueError(
                        f"formats: {what} '{text[:40]}' of '{name[:40]}': {e}"
                    ) from None
        return {k.strip().lower(): s for k, s in v.items()}

    @model_validator(mode="after")
    def _first_token_sourced(self) -> EngineSpec:
        if self.first_token != "prefill" and not self.first_token_source:
            raise ValueError("first_token 'decode' needs a first_token_source")
        if self.max_num_seqs is not None and not self.max_num_seqs_source:
            raise ValueError("max_num_seqs needs a max_num_seqs_source")
        if self.scheduler is not None and not self.scheduler_source:
            raise ValueError("scheduler needs a scheduler_source")
        return self

    @model_validator(mode="after")
    def _releases_valid(self) -> EngineSpec:
        if self.releases and not (self.newest_since and self.newest_since_date):
            raise ValueError(
                "releases need `newest_since` and `newest_since_date`, the first release the "
                "profile's own fields describe"
            )
        keys = [version_key(r.since) for r in self.releases]
        if keys != sorted(keys) or (keys and keys[-1] >= version_key(self.newest_since)):
            raise ValueError("releases must be in version order, all before `newest_since`")
        for r in self.releases:
            bad = set(r.changes) - set(type(self).model_fields) | {"releases", "name"} & set(
                r.changes
            )
            if bad:
                raise ValueError(f"release {r.since}: unknown or fixed field(s) {sorted(bad)}")
            try:
                self._with(r)  # each range must itself be a valid profile
            except ValidationError as e:
                err = e.errors()[0]
                where = ".".join(str(x) for x in err["loc"])
                raise ValueError(f"release {r.since}: changes.{where}: {err['msg']}") from None
        return self

    def _with(self, r: Release) -> EngineSpec:
        data = self.model_dump(exclude={"releases", "newest_since", "newest_since_date"})
        data |= r.changes
        data["version"] = f"{r.label} (from {r.since}, {r.since_date})"
        data["release"] = r.since
        return type(self).model_validate(data)

    @property
    def flag(self) -> str:
        """The `--engine` value that gives this profile back: 'vllm', 'vllm@0.6.3' for a
        release asked for, or 'vllm@0.8.0' for an older range by its first release."""
        if self.exact_release and self.exact_release != UNKNOWN_RELEASE:
            return f"{self.name}@{self.exact_release}"
        return f"{self.name}@{self.release}" if self.release else self.name

    @property
    def known_release(self) -> str:
        """The release this profile stands for, as far as it is known: the one asked for, an
        older range's first release, or '' for the newest (a bare name)."""
        return self.exact_release or self.release

    @property
    def label(self) -> str:
        """'vllm' for the newest range; 'vllm@0.0.0+ (V0 engine (0.1-0.7))' for an older one."""
        if not self.release:
            return self.name
        return f"{self.name}@{self.release}+ ({self.version.split(' (from')[0]})"

    def at(self, version: str | None) -> EngineSpec:
        """The profile of release `version` (None: the newest): the range at or below it."""
        if version is None:
            return self
        v = version_key(version)
        if not self.releases:
            return self.model_copy(update={"exact_release": ".".join(map(str, v))})
        if v >= version_key(self.newest_since):
            return self.model_copy(update={"exact_release": ".".join(map(str, v))})
        below = [r for r in self.releases if version_key(r.since) <= v]
        ranged = self._with(below[-1] if below else self.releases[0])
        # the range's behaviour, the release itself: kernel tables are keyed by release
        return ranged.model_copy(update={"exact_release": ".".join(map(str, v))})

    def at_date(self, date: str) -> EngineSpec:
        """The profile of the release current on `date` (YYYY-MM or YYYY-MM-DD): the newest
        range released by then (the oldest range for an earlier date)."""
        if not self.releases:  # no ranges: which release ran on that date is not known
            return self.model_copy(update={"exact_release": UNKNOWN_RELEASE})
        if self.newest_since_date[: len(date)] <= date:  # which release of the range: unknown,
            return self.model_copy(update={"exact_release": self.newest_since})  # its first
        current = [r for r in self.releases if r.since_date[: len(date)] <= date]
        return self._with(current[-1] if current else self.releases[0])

    def max_num_seqs_on(self, hw: HardwareSpec) -> int | None:
        """The sequences the scheduler runs at once on device `hw`."""
        if self.batch_defaults is not None:
            return self.batch_defaults.limits_on(hw).max_num_seqs
        return self.max_num_seqs

    def prefill_token_budget_on(self, hw: HardwareSpec) -> int | None:
        """The new tokens one step takes on device `hw`."""
        if self.batch_defaults is not None:
            return self.batch_defaults.limits_on(hw).max_num_batched_tokens
        return self.prefill_token_budget

    def weights_as_run(self, name: str) -> str:
        """The --weights string of format `name` as this engine stores it."""
        return self.formats.get(name.strip().lower(), name)

    def matmul_kernel(self, weight_bits: int, activation_bits: int) -> MatmulKernel | None:
        """The kernel for this width, None when the engine runs the vendor BLAS."""
        return self.matmul.get(f"w{weight_bits}a{activation_bits}")
