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
from typing import Literal

from pydantic import Field, field_validator, model_validator

from .frozen import Frozen

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
    `roofline.parallel.all_reduce_s`) and the fixed cost of one call (launch, handshake)."""

    kind: Literal["ring", "one-shot", "two-shot"]
    latency_us: float = Field(
        ge=0, le=MAX_FIXED_US, description="fixed cost of one all-reduce call"
    )


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
    scheduler: Literal["continuous", "chunked", "chunked+prefix", "decode-first"] | None = Field(
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
        from .errors import RooflineError
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

    def weights_as_run(self, name: str) -> str:
        """The --weights string of format `name` as this engine stores it."""
        return self.formats.get(name.strip().lower(), name)

    def matmul_kernel(self, weight_bits: int, activation_bits: int) -> MatmulKernel | None:
        """The kernel for this width, None when the engine runs the vendor BLAS."""
        return self.matmul.get(f"w{weight_bits}a{activation_bits}")
