"""Which formats a step stores and computes in, and which tensor-core peak its matmuls get.

`weights`, `activations` and `kv` are storage formats (effective bytes per element, group-wise
metadata included); `compute` is the dtype whose peak the matmuls run at. It follows the kernel
that really runs: the activation format sets it, and narrower weights are dequantised inside the
kernel — w4a16 (AWQ/GPTQ/Marlin) and w8a16 run at the bf16/fp16 peak, w8a8 at the int8 peak,
fp8 weights with fp8 activations at the fp8 peak. A compute dtype the device lacks is refused
by the hardware spec (`HardwareSpec.peak_flops_per_s`), never given some other peak.

Weights are stored per tensor group (WEIGHT_GROUPS). `weights` is a base format, optionally
followed by per-group overrides: `bf16,experts=mxfp4` (gpt-oss), `int4-g128,lm_head=int4-g128`.
Defaults, from how real checkpoints are written:
- a quantised format (weight-only GPTQ/AWQ int4-gN, nf4, int8 or fp8, and W8A8/W4A4 fp8,
  int8, nvfp4) keeps the embedding, LM head, norms and MoE router at 16 bits (AutoGPTQ/AutoAWQ
  and bitsandbytes quantise only the Linear layers inside the blocks; NVIDIA ModelOpt and
  llm-compressor fp8/int8/fp4 checkpoints leave the same ends in 16 bits);
- a llama.cpp block type (q4_0, q4_k, ...) is applied to every matrix, norms and router stay
  F32; a llama.cpp file type (q4_k_m, ...) is its per-tensor mix (`llamacpp`);
- MLC formats (q4f16_1, ...) quantise the embedding and the final FC too, norms stay 16-bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

from ..errors import InvalidInputError
from . import llamacpp
from .dtypes import Format, parse_format
from .hardware import HardwareSpec
from .model import ModelSpec

#: Tensor groups a format can be given for (`Op.group` names the one an operator reads).
WEIGHT_GROUPS: tuple[str, ...] = (
    "embedding",
    "attention",
    "mlp",
    "experts",
    "shared_experts",
    "router",
    "ssm",
    "norms",
    "lm_head",
)
_ENDS = ("embedding", "lm_head", "norms", "router")  # kept wide by weight-only checkpoints


def group_params(m: ModelSpec) -> dict[str, int]:
    """Parameters per tensor group; they add up to `m.total_params`."""
    p = m.params
    E = m.moe.experts if m.moe else 0
    routed = m.routed_expert_params + m.layers_moe * E * m.expert_bias_params
    router = m.layers_moe * (m.d_model * E + (E if m.linear_bias == "all" else 0))
    return {
        "embedding": p.embedding + p.positional,
        "attention": p.attention,
        "mlp": p.mlp,
        "experts": routed,
        "shared_experts": p.moe - routed - router,
        "router": router,
        "ssm": p.ssm,
        "norms": p.norms,
        "lm_head": p.lm_head,
    }


#: Bytes of a 16-bit residual stream (`Precision.residual_bytes`).
RESIDUAL_BYTES = 2


@dataclass(frozen=True)
class Precision:
    weights: str = "bf16"
    activations: str = "bf16"
    kv: str = "bf16"
    #: exact bits per group for one model (set by `for_model`; not part of equality)
    model_bits: tuple[tuple[str, float], ...] | None = field(
        default=None, compare=False, repr=False, kw_only=True
    )

    def __post_init__(self) -> None:
        self._split_weights()  # raises on an unknown format or group
        w, a = self.weight_format, self.activation_format
        parse_format(self.kv)  # raises on an unknown format
        if a.compute is None:
            raise InvalidInputError(
                f"'{a.name}' is a weight/KV storage format with no matmul of its own; "
                "use it with `weights` or `kv_format` and pick `activations` bf16, fp16, fp8, "
                "int8, or nvfp4/mxfp4 on a device with an fp4 peak"
            )
        if w.element_bits == a.element_bits and w.family != a.family:
            raise InvalidInputError(
                f"weights {w.name} and activations {a.name} are the same width in different "
                f"number families: no tensor core multiplies them; use {a.name} weights or "
                "wider activations"
            )
        if w.element_bits > a.element_bits:
            raise InvalidInputError(
                f"weights {w.name} are wider than activations {a.name}: no kernel multiplies "
                f"them; quantise the weights to {a.name} or narrower, or widen `activations`"
            )

    @classmethod
    def uniform(cls, dtype: str) -> Precision:
        """One format for all three; a storage-only weight format (int4-g128, nf4, mxfp4,
        q4_k_m...) keeps bf16 activations and KV, the way weight-only kernels run it."""
        base = dtype.split(",")[0].strip().lower()  # 'bf16,experts=mxfp4': bf16 for the rest
        if base in llamacpp.MIXES or parse_format(base).weight_only:
            return cls(weights=dtype)
        return cls(weights=dtype, activations=base, kv=base)

    @classmethod
    def everywhere(cls, weights: str, activations: str = "bf16", kv: str = "bf16") -> Precision:
        """`weights` on every tensor group, embedding, LM head and norms included (the
        arithmetic of "params x bits"; real weight-only checkpoints keep the ends wide)."""
        groups = ",".join(f"{g}={weights}" for g in WEIGHT_GROUPS)
        return cls(f"{weights},{groups}", activations, kv)

    # ---- the weights string: base format (or llama.cpp file type) + group overrides ------
    def _split_weights(self) -> tuple[str, dict[str, Format]]:
        items = [s.strip() for s in self.weights.split(",") if s.strip()]
        if not items or "=" in items[0]:
            raise InvalidInputError(
                f"weights '{self.weights}' must start with a base format, e.g. 'bf16,experts=mxfp4'"
            )
        base, overrides = items[0].lower(), {}
        if base not in llamacpp.MIXES:
            parse_format(base)
        for item in items[1:]:
            group, _, fmt = item.partition("=")
            group = group.strip().lower()
            if group in overrides:
                raise InvalidInputError(
                    f"weights '{self.weights}' give group '{group}' twice; give each group once"
                )
            if group not in WEIGHT_GROUPS or not fmt.strip():
                raise InvalidInputError(
                    f"'{item}' in weights: use group=format with a group among "
                    f"{', '.join(WEIGHT_GROUPS)}"
                )
            overrides[group] = parse_format(fmt)
        return base, overrides

    @property
    def weight_format(self) -> Format:
        """The base weight format (a file type's base block type: q4_k_m -> q4_k)."""
        base, _ = self._split_weights()
        return parse_format(llamacpp.MIXES.get(base, base))

    @property
    def activation_format(self) -> Format:
        return parse_format(self.activations)

    @property
    def kv_format(self) -> Format:
        return parse_format(self.kv)

    @property
    def weight_only(self) -> bool:
        """Weights narrower than the activations: dequantised inside the matmul kernel."""
        return self.weight_format.element_bits < self.activation_format.element_bits

    def group_formats(self) -> dict[str, Format]:
        """The format of each tensor group, without a model (a llama.cpp file type's
        per-layer promotions need one: see `group_bits`)."""
        base, overrides = self._split_weights()
        w = self.weight_format
        groups = dict.fromkeys(WEIGHT_GROUPS, w)
        if base in llamacpp.MIXES:
            groups.update({g: parse_format(f) for g, f in llamacpp.NOMINAL_GROUPS.items()})
        elif w.ecosystem == "gguf":
            groups.update(norms=parse_format("fp32"), router=parse_format("fp32"))
        elif w.ecosystem == "mlc":
            groups.update(norms=self._sixteen, router=self._sixteen)
        elif w.element_bits < 16:
            # a quantised checkpoint keeps the ends 16-bit: weight-only ones (AutoGPTQ, AutoAWQ,
            # bitsandbytes quantise the Linear layers of the blocks) and W8A8/W4A4 ones alike
            # (NVIDIA ModelOpt and llm-compressor leave the embedding, the LM head, the norms
            # and an MoE router in 16 bits)
            groups.update(dict.fromkeys(_ENDS, self._sixteen))
        groups.update(overrides)
        return groups

    @property
    def _sixteen(self) -> Format:
        """The 16-bit format ends are kept in: the activations' if 16-bit, else bf16."""
        a = self.activation_format
        return a if a.element_bits == 16 else parse_format("bf16")

    def group_bits(self, m: ModelSpec | None = None) -> dict[str, float]:
        """Effective bits per weight of each group. With a model, a llama.cpp file type is
        resolved tensor by tensor (`llamacpp.group_bits`); explicit overrides still win."""
        bits = {g: f.bits for g, f in self.group_formats().items()}
        base, overrides = self._split_weights()
        if m is not None and base in llamacpp.MIXES:
            bits.update(llamacpp.group_bits(base, m))
            bits.update({g: f.bits for g, f in overrides.items()})
        return bits

    def for_model(self, m: ModelSpec) -> Precision:
        """This precision with each group's bits fixed for model `m` (exact for file types)."""
        return replace(self, model_bits=tuple(self.group_bits(m).items()))

    @cached_property
    def _bytes_by_group(self) -> dict[str, float]:
        bits = dict(self.model_bits) if self.model_bits is not None else self.group_bits()
        return {g: b / 8 for g, b in bits.items()}

    def group_bytes(self, group: str) -> float:
        return self._bytes_by_group[group]

    def weight_bytes_for(self, group: str | None) -> float:
        """Bytes per weight element of an operator reading tensor group `group` (`Op.group`;
        None: the base format)."""
        return self.weight_bytes if group is None else self.group_bytes(group)

    @property
    def compute(self) -> str:
        """The dtype matmuls run at: the activation format's (weights are converted to it)."""
        return self.activation_format.compute  # type: ignore[return-value]  # checked in init

    @cached_property
    def weight_bytes(self) -> float:
        """Bytes per element of the base weight format."""
        return self.weight_format.bytes

    @cached_property
    def activation_bytes(self) -> float:
        return self.activation_format.bytes

    @cached_property
    def residual_bytes(self) -> float:
        """Bytes per element of the hidden state between GEMMs: the activation format, at
        least 16 bits. Engines that quantise GEMM inputs (W8A8, fp8) quantise each GEMM's
        input and keep its output, the residual, the norms and the TP reduction in 16 bits
        (TensorRT-LLM and vLLM fp8 checkpoints); fp32 stays fp32."""
        return max(self.activation_bytes, RESIDUAL_BYTES)

    @cached_property
    def kv_bytes(self) -> float:
        return self.kv_format.bytes

    def as_dict(self) -> dict:
        """The one JSON shape of a precision, in every command (docs/json.md)."""
        return {
            "weights": self.weights,
            "activations": self.activations,
            "kv": self.kv,
            "compute": self.compute,
        }

    def check(self, hw: HardwareSpec) -> None:
        """Refuse a compute dtype `hw` has no tensor-core peak for, saying what would run."""
        if not hw.supports(self.compute):
            have = ", ".join(hw.dense_peak_tflops)
            raise InvalidInputError(
                f"{hw.name} has no {self.compute} compute (it has: {have}); keep the "
                f"{self.weights} weights but set `activations` to one it has (weight-only "
                "kernels dequantise to bf16/fp16)"
            )


def released(m: ModelSpec) -> Precision:
    """The formats `m` is released in: its checkpoint's weights and activations
    (`ModelSpec.checkpoint_weights`, `checkpoint_activations`), 16-bit where the spec names
    none, and a 16-bit KV cache (what engines allocate unless told otherwise)."""
    weights = m.checkpoint_weights or "bf16"
    activations = m.checkpoint_activations or Precision.uniform(weights).activations
    kv = activations if parse_format(activations).element_bits == 16 else "bf16"
    return Precision(weights, activations, kv)
