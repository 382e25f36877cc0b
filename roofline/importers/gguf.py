"""A GGUF file's header → ModelSpec, with the file's real per-tensor formats.

Reads only the key/value metadata and the tensor table (name, type, shape, bytes) through the
optional `gguf` package (`pip install roofline[gguf]`); tensor data are memory-mapped and never
read. The architecture comes from `{arch}.*` keys; the formats from the tensor types: a file
whose `general.file_type` is a llama.cpp file type we replay (Q4_K_M ...) carries that name,
any other gets each tensor group at the type most of its weights use (so F32 q/k norms inside
a quantised attention group count at the group's type). `check_gguf` then compares the spec's
weight bytes with the tensor table's.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from ..calc.memory import weights_bytes
from ..errors import SpecError, field_error
from ..spec import llamacpp
from ..spec.model import MAX_IMPORTED_SIZE, MAX_LAYERS, ModelSpec
from ..spec.precision import Precision

#: GGML tensor types with a format of the same meaning in `dtypes` (others are refused).
_TYPE_FORMAT = {
    "F32": "fp32",
    "F16": "fp16",
    "BF16": "bf16",
    "MXFP4": "mxfp4",
    **{
        t: t.lower()
        for t in (
            "Q4_0",
            "Q4_1",
            "Q5_0",
            "Q5_1",
            "Q8_0",
            "Q2_K",
            "Q3_K",
            "Q4_K",
            "Q5_K",
            "Q6_K",
            "IQ4_NL",
            "IQ4_XS",
        )
    },
}
_ARCHS = ("llama", "qwen2", "qwen3", "qwen3moe")


@dataclass(frozen=True)
class GgufTensor:
    name: str
    type: str  # GGML type name, e.g. Q4_K
    elems: int
    bytes: int

    @property
    def group(self) -> str:
        """The tensor group (precision.WEIGHT_GROUPS) a llama.cpp tensor name belongs to."""
        n = self.name
        if n.startswith("token_embd"):
            return "embedding"
        if n.startswith("output.") and "norm" not in n:
            return "lm_head"
        if "norm" in n:
            return "norms"
        if "ffn_gate_inp" in n:
            return "router"
        if "_exps" in n:
            return "experts"
        if "_shexp" in n:
            return "shared_experts"
        if ".ffn_" in n:
            return "mlp"
        return "attention"


@dataclass(frozen=True)
class GgufFile:
    metadata: dict[str, Any]
    tensors: tuple[GgufTensor, ...]

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    @property
    def file_type(self) -> str | None:
        """The llama.cpp file type, lower-case without MOSTLY_ ('q4_k_m'), if the file says."""
        import gguf

        value = self.metadata.get("general.file_type")
        if value is None:
            return None
        try:
            return gguf.LlamaFileType(int(value)).name.lower().removeprefix("mostly_")
        except (TypeError, ValueError, OverflowError):
            return None

    @property
    def tensor_bytes(self) -> int:
        return sum(t.bytes for t in self.tensors)


def read_gguf(path: Path) -> GgufFile:
    """Metadata and tensor table of a GGUF file (the `gguf` package is needed)."""
    try:
        import gguf
    except ImportError:
        raise SpecError(
            "reading GGUF files needs the optional 'gguf' package: pip install 'roofline[gguf]'"
        ) from None
    try:
        reader = gguf.GGUFReader(str(path), "r")
        meta: dict[str, Any] = {}
        for key, field in reader.fields.items():
            if key.startswith("GGUF."):
                continue
            meta[key] = field.contents()
        tensors = tuple(
            GgufTensor(t.name, t.tensor_type.name, int(t.n_elements), int(t.n_bytes))
            for t in reader.tensors
        )
    except OSError as e:
        raise SpecError(f"{path}: cannot read as GGUF ({e})") from None
    except Exception as e:  # noqa: BLE001  # the gguf parser's own failures on a bad file:
        # truncated or duplicated headers end in IndexError, KeyError, struct or numpy errors
        raise SpecError(
            f"{path}: not a readable GGUF file (truncated or corrupt: {type(e).__name__}); "
            "give the whole .gguf file"
        ) from None
    return GgufFile(meta, tensors)


def _key(f: GgufFile, name: str, default: Any = None, low: int = 1) -> int:
    """`{arch}.{name}` as a whole number of at least `low` (a block count at most 100,000,
    any other size at most 2⁴⁰), or one line saying what the header holds instead."""
    key = f"{f.architecture}.{name}"
    v = f.metadata.get(key, default)
    if v is None:
        raise SpecError(f"GGUF metadata has no '{key}'")
    high = MAX_LAYERS if name == "block_count" else MAX_IMPORTED_SIZE
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or not low <= int(v) <= high:
        raise SpecError(
            f"GGUF metadata '{key}' must be a whole number from {low} to {high:,}, got "
            f"{str(v)[:40]!r}; the file is corrupt or not a model"
        )
    return int(v)


def _has(f: GgufFile, fragment: str) -> bool:
    return any(fragment in t.name for t in f.tensors)


def spec_fields(f: GgufFile) -> dict:
    """ModelSpec fields from the `{arch}.*` keys and the tensor names."""
    arch = f.architecture
    if arch not in _ARCHS:
        raise SpecError(
            f"GGUF architecture '{arch or 'none'}' is not modelled; supported: {', '.join(_ARCHS)}"
        )
    D, N = _key(f, "embedding_length"), _key(f, "attention.head_count")
    if N > D:
        raise SpecError(
            f"GGUF metadata '{arch}.attention.head_count' ({N:,}) exceeds embedding_length "
            f"({D:,}): no head is narrower than one value; the file is corrupt"
        )
    embd = next((t for t in f.tensors if t.name == "token_embd.weight"), None)
    if embd is None:
        raise SpecError("GGUF file has no token_embd.weight")
    if embd.elems % D:
        raise SpecError(
            f"GGUF token_embd.weight has {embd.elems:,} values, not a whole number of rows of "
            f"embedding_length {D:,}: the tensor table contradicts the metadata"
        )
    layers = _key(f, "block_count")
    blocks = {t.name.split(".")[1] for t in f.tensors if t.name.startswith("blk.")}
    if blocks and len(blocks) != layers:
        raise SpecError(
            f"GGUF metadata says {layers} blocks but the tensor table holds {len(blocks)}: the "
            "file is inconsistent"
        )
    s: dict[str, Any] = dict(
        layers=layers,
        d_model=D,
        heads=N,
        kv_heads=_key(f, "attention.head_count_kv", N),
        head_dim=_key(f, "attention.key_length", D // N),
        d_ff=_key(f, "feed_forward_length", 0, low=0),
        vocab_size=embd.elems // D,
        tied_embeddings=not _has(f, "output.weight"),
        max_context=_key(f, "context_length"),
    )
    if _has(f, "attn_q.bias"):
        s["linear_bias"] = "qkv"
    if _has(f, "attn_q_norm"):
        s["attention"] = {"qk_norm": True}
    experts = _key(f, "expert_count", 0, low=0)
    if experts > 1:
        expert_f = _key(f, "expert_feed_forward_length", 0, low=0) or s["d_ff"]
        s["moe"] = {
            "experts": experts,
            "top_k": _key(f, "expert_used_count"),
            "expert_d_ff": expert_f,
            "shared_experts": _key(f, "expert_shared_count", 0, low=0),
        }
        if not _has(f, ".ffn_down.weight"):
            s["d_ff"] = 0
    return s


def file_weights(f: GgufFile) -> str:
    """--weights for the file: its llama.cpp file type when we replay it, else per group the
    type most of the group's weights use (a pure block type file: that type)."""
    if f.file_type in llamacpp.MIXES:
        return f.file_type
    by_group: dict[str, Counter[str]] = defaultdict(Counter)
    for t in f.tensors:
        if t.type not in _TYPE_FORMAT:
            raise SpecError(f"GGUF tensor {t.name} has type {t.type}, which is not modelled")
        if t.group != "norms":
            by_group[t.group][_TYPE_FORMAT[t.type]] += t.elems
    main = {g: c.most_common(1)[0][0] for g, c in by_group.items()}
    held: Counter[str] = Counter()  # weights in the groups each format is the main type of
    for g, fmt in main.items():
        held[fmt] += sum(by_group[g].values())
    base_fmt = held.most_common(1)[0][0]
    rest = [f"{g}={fmt}" for g, fmt in main.items() if fmt != base_fmt]
    return ",".join([base_fmt, *rest])


def spec_from_gguf(f: GgufFile, name: str, source: str) -> ModelSpec:
    fields = spec_fields(f)
    data = {
        "name": name,
        "display_name": str(f.metadata.get("general.name", name)),
        "family": f.architecture,
        "source": f"{source} (GGUF, imported by `roofline models import`)",
        "checkpoint_weights": file_weights(f),
        **fields,
    }
    try:
        return ModelSpec.model_validate(data)
    except ValidationError as e:
        raise SpecError(f"{source}: the imported spec is invalid: {field_error(e)}") from None


@dataclass(frozen=True)
class GgufCheck:
    """The spec's weight bytes at its formats against the file's tensor table."""

    file_tensor_bytes: int
    spec_weights_bytes: float

    @property
    def difference_bytes(self) -> float:
        return self.spec_weights_bytes - self.file_tensor_bytes


def check_gguf(spec: ModelSpec, f: GgufFile) -> GgufCheck:
    p = Precision(spec.checkpoint_weights or "bf16")
    return GgufCheck(f.tensor_bytes, weights_bytes(spec, p))
