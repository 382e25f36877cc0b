"""Derive bundled "achievable surfaces" from aiconfigurator-core's measured kernel database.

    pip download --no-deps aiconfigurator-core==0.12.0 -d /tmp/aic
    python benchmarks/derive/aic_surfaces.py \
        /tmp/aic/aiconfigurator_core-0.12.0-cp311-abi3-manylinux_2_28_x86_64.whl

NVIDIA's aiconfigurator-core (Apache-2.0) ships the kernel timings it collects, per system, op
family, framework and framework version, as parquet tables under
`aiconfigurator_core/systems/data/<system>/<family>/<framework>/<version>/`, each folder with a
`collection_meta.yaml`. The wheel is read here as a zip; it is never installed or imported, and
it is no dependency of roofline (this script needs pyarrow and pyyaml; the runtime needs neither).

What is written (one CSV per family, every system in it; a `#` header carries the provenance):
- roofline/data/surfaces/collectives.csv: NCCL all-reduce, all-gather and all-to-all (fp16)
  and each engine's own all-reduce (bf16, every implementation it measured, CUDA-graph and
  eager kept apart), latency by message bytes x GPUs, every measured size;
- gemm.csv: latency by M (every M measured) for the (N, K) shapes of Llama-3.1-8B at TP 1 and
  Llama-3.1-70B at TP 4 and 8 (qkv, o, gate_up, down: 12 shapes), each mapped to the nearest
  measured shape, for bf16, fp8 (per-tensor) and nvfp4 where measured;
- gemm_efficiency.csv: achieved TFLOP/s by M (1, 2, 4, ..., 32768) over every measured (N, K)
  with N*K >= 4096*4096: 25th percentile, median and 75th percentile, and the median of the
  bytes moved per second, for every GEMM dtype and implementation;
- decode_attention.csv: generation attention latency by batch x KV tokens (isl + step of the
  table) for (heads, kv_heads, head_dim) = (32, 8, 128) (Llama-3.1-8B, TP 1) and (8, 1, 128)
  (Llama-3.1-70B, TP 8: 64/8 heads over 8 GPUs), full attention, bf16 and fp8 KV cache;
- prefill_attention.csv: context attention latency by batch x sequence tokens, the same heads;
- moe.csv: fused MoE layer latency by tokens for Qwen3-235B-A22B (hidden 4096, expert
  intermediate 1536, top-8 of 128 experts), balanced routing (else power_law_1.01), on 8 GPUs
  as TP 8 or EP 8;
- tests/fixtures/surfaces_sample.csv: raw source points (before any aggregation), a fixed
  stride through each family and system, for tests/test_surfaces_data.py.

Versions: for each system and framework, the newest version folder that holds the table (and,
for MoE, the representative shape); NCCL from the newest `comm/nccl/<version>` folder. Every
version present is listed in the header. Units: the tables' `latency` is milliseconds; the
CSVs carry microseconds, 4 significant digits. NCCL's and the custom all-reduce collectors'
`message_size` is an element count (nccl-tests bytes // bytes per element; a tensor of that
many elements), written here as bytes. Re-running on the same wheel writes identical bytes.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import math
import re
import statistics
import sys
import zipfile
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
import yaml

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "roofline" / "data" / "surfaces"
SAMPLE = REPO / "tests" / "fixtures" / "surfaces_sample.csv"
ATTENTION_SAMPLE = REPO / "tests" / "fixtures" / "attention_surface_sample.csv"
PACKAGE = "aiconfigurator-core"
DATA = "aiconfigurator_core/systems/data"
SYSTEMS_DIR = "aiconfigurator_core/systems"

FRAMEWORKS = ("vllm", "sglang", "trtllm")
#: the systems every surface covers; EXTRA ones only where the surface is small
CORE = ("a100_sxm", "h100_sxm", "h200_sxm", "b200_sxm")
EXTRA = ("l40s", "b300_sxm", "gb200", "gb300")
ALL_SYSTEMS = CORE + EXTRA

#: the NCCL collectives kept (reduce_scatter is also measured)
NCCL_OPS = ("all_reduce", "all_gather", "alltoall")
#: short names of the tables' dtype strings
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32"}
#: bytes per element (weights, activations) by GEMM dtype, scales left out; output is bf16
GEMM_BYTES = {
    "bf16": (2.0, 2.0),
    "fp16": (2.0, 2.0),
    "fp8": (1.0, 1.0),
    "fp8_block": (1.0, 1.0),
    "nvfp4": (0.5, 0.5),
    "int8_wo": (1.0, 2.0),
    "int4_wo": (0.5, 2.0),
    "sq": (1.0, 1.0),
}
GRID_DTYPES = ("bf16", "fp16", "fp8", "nvfp4")
M_BUCKETS = tuple(2**i for i in range(16))  # 1 .. 32768
BIG_NK = 4096 * 4096

#: (label, heads, kv heads, head_dim, hidden, ffn, tp) of the Llama GEMM and attention shapes
LLAMA = (
    ("llama-3.1-8b tp1", 32, 8, 128, 4096, 14336, 1),
    ("llama-3.1-70b tp4", 64, 8, 128, 8192, 28672, 4),
    ("llama-3.1-70b tp8", 64, 8, 128, 8192, 28672, 8),
)
#: attention heads per GPU: Llama-3.1-8B at TP 1, Llama-3.1-70B at TP 8
HEADS = ((32, 8, 128), (8, 1, 128))
AXIS_NOTE = {
    "kv_tokens": "  kv_tokens = the table's isl + step: each sequence's KV length, the new token"
    " included (one query token per sequence)",
    "seq_tokens": "  seq_tokens = the table's isl (no cached prefix: step 0), causal, per sequence",
}
#: Qwen3-235B-A22B's MoE layer: hidden, expert intermediate, top-k, experts
MOE_SHAPE = (4096, 1536, 8, 128)
#: (moe_tp, moe_ep) on 8 GPUs: experts sliced 8 ways (TP, the vLLM and SGLang default) or
#: 16 whole experts per GPU (EP)
MOE_LAYOUTS = ((8, 1), (1, 8))
#: routing, in order of preference: the first one a table has is used
MOE_DISTRIBUTIONS = ("balanced", "power_law_1.01")

#: raw points per family and system in the test sample (at most)
SAMPLE_PER_GROUP = 16
#: raw attention points per family, system, framework and KV dtype in the attention sample
ATTENTION_SAMPLE_PER_GROUP = 24
SAMPLE_COLUMNS = (
    "family",
    "system",
    "framework",
    "framework_version",
    "implementation",
    "dtype",
    "collective",
    "gpus",
    "message_bytes",
    "n",
    "k",
    "m",
    "kv_dtype",
    "num_heads",
    "num_kv_heads",
    "head_dim",
    "batch",
    "kv_tokens",
    "seq_tokens",
    "hidden",
    "inter",
    "topk",
    "experts",
    "moe_tp",
    "moe_ep",
    "distribution",
    "tokens",
    "latency_us",
)


def sig4(x: float) -> str:
    """`x` to 4 significant digits, written without an exponent (123456 -> 123500)."""
    if x == 0:
        return "0"
    r = float(f"{x:.4g}")
    decimals = max(0, 3 - math.floor(math.log10(abs(r))))
    return f"{r:.{decimals}f}"


def sig6(x: float) -> str:
    """As `sig4`, 6 digits: the raw sample keeps more than the surface."""
    r = float(f"{x:.6g}")
    decimals = max(0, 5 - math.floor(math.log10(abs(r))))
    return f"{r:.{decimals}f}"


def version_key(version: str) -> tuple:
    """Sortable key of '1.3.0rc20', '0.5.6.post2', '0.1.dev19262', '2.27' (dev < rc < final)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)*)(?:\.?(rc|post|dev)(\d+))?", version)
    if not m:
        return ((), -1, 0, version)
    rank = {"dev": 0, "rc": 1, None: 2, "post": 3}[m[2]]
    return (tuple(int(x) for x in m[1].split(".")), rank, int(m[3] or 0), "")


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), q in [0, 100]."""
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass
class Source:
    """One parquet table used, for the provenance header."""

    system: str
    framework: str
    version: str
    path: str
    present: list[str]
    meta: dict
    rows: int = 0
    devices: set[str] = field(default_factory=set)
    row_versions: set[str] = field(default_factory=set)
    note: str = ""

    def lines(self) -> list[str]:
        out = [
            f"- {self.system} {self.framework} {self.version}: {self.path}",
            f"    rows used {self.rows}; version folders {' '.join(self.present)}"
            + (f"; {self.note}" if self.note else ""),
        ]
        if self.devices or self.row_versions:
            out.append(
                f"    table columns: device {'/'.join(sorted(self.devices)) or '-'}; "
                f"version {'/'.join(sorted(self.row_versions)) or '-'}"
            )
        if self.meta:
            out.append("    collection_meta.yaml: " + "; ".join(f"{k}={v}" for k, v in self.meta))
        return out


class Wheel:
    """The wheel as a zip: folders, parquet tables and yaml files by path."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.zip = zipfile.ZipFile(path)
        self.names = sorted(self.zip.namelist())
        self.sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
        self._cache: dict[str, dict[str, list]] = {}

    def versions(self, system: str, family: str, framework: str, table: str) -> list[str]:
        """Version folders holding `table`.parquet, oldest first."""
        prefix = f"{DATA}/{system}/{family}/{framework}/"
        found = {
            n[len(prefix) :].split("/")[0]
            for n in self.names
            if n.startswith(prefix)
            and n.endswith(f"/{table}.parquet")
            and n.count("/") == prefix.count("/") + 1
        }
        return sorted(found, key=version_key)

    def folders(self, system: str, family: str, framework: str) -> list[str]:
        """Every version folder (whatever it holds), oldest first."""
        prefix = f"{DATA}/{system}/{family}/{framework}/"
        found = {n[len(prefix) :].split("/")[0] for n in self.names if n.startswith(prefix)}
        return sorted(found, key=version_key)

    def table(self, path: str) -> dict[str, list]:
        if path not in self._cache:
            self._cache[path] = pq.read_table(io.BytesIO(self.zip.read(path))).to_pydict()
        return self._cache[path]

    def yaml(self, path: str) -> dict:
        return yaml.safe_load(self.zip.read(path)) if path in self.names else {}

    def meta(self, folder: str, table: str) -> list[tuple[str, str]]:
        """The collection_meta.yaml fields that say where and how the table was collected."""
        meta = self.yaml(f"{folder}/collection_meta.yaml")
        if not meta:
            return [("collection_meta.yaml", "absent")]
        runtime = meta.get("runtime") or {}
        abi = runtime.get("abi") or {}
        tab = (meta.get("tables") or {}).get(table) or {}
        fields = [
            ("schema_version", meta.get("schema_version")),
            ("provenance", meta.get("provenance")),
            ("runtime.framework", runtime.get("framework")),
            ("runtime.version", runtime.get("version")),
            ("runtime.image", runtime.get("image")),
            ("abi.gpu_name", abi.get("gpu_name")),
            ("abi.driver", abi.get("driver")),
            ("abi.cuda", abi.get("cuda")),
            ("abi.torch", abi.get("torch")),
            (f"tables.{table}.status", tab.get("status")),
            (f"tables.{table}.collected_at", tab.get("collected_at")),
            (f"tables.{table}.rows", tab.get("rows")),
        ]
        return [(k, str(v)) for k, v in fields if v is not None]


def rows_of(columns: dict[str, list], keep: Callable[[dict], bool]) -> list[dict]:
    """The table's rows (dicts) that `keep` accepts, in table order."""
    names = list(columns)
    rows = (dict(zip(names, vals, strict=True)) for vals in zip(*columns.values(), strict=True))
    return [r for r in rows if keep(r)]


def newest(
    wheel: Wheel,
    system: str,
    family: str,
    framework: str,
    table: str,
    keep: Callable[[dict], bool] | None = None,
) -> tuple[Source, list[dict]] | None:
    """The newest version folder whose `table` has rows `keep` accepts, with those rows."""
    present = wheel.versions(system, family, framework, table)
    for version in reversed(present):
        folder = f"{DATA}/{system}/{family}/{framework}/{version}"
        path = f"{folder}/{table}.parquet"
        rows = rows_of(wheel.table(path), keep or (lambda r: True))
        if rows:
            folders = wheel.folders(system, family, framework)
            source = Source(
                system,
                framework,
                version,
                path,
                [
                    v + ("*" if v == version else "" if v in present else f"(no {table})")
                    for v in folders
                ],
                wheel.meta(folder, table),
            )
            source.rows = len(rows)
            source.devices = {str(r["device"]) for r in rows if r.get("device")}
            source.row_versions = {str(r["version"]) for r in rows if r.get("version")}
            if version != present[-1]:
                newer = " ".join(present[present.index(version) + 1 :])
                source.note = f"newer {newer}: no rows of this selection"
            return source, rows
    return None


@dataclass
class Family:
    """One output CSV: its columns, rows (keys -> latencies before aggregation), provenance."""

    name: str
    title: str
    group: tuple[str, ...]
    axes: tuple[str, ...]
    value: str
    notes: list[str]
    points: dict[tuple, list[float]] = field(default_factory=lambda: defaultdict(list))
    raw: dict[str, list[dict]] = field(default_factory=lambda: defaultdict(list))
    sources: list[Source] = field(default_factory=list)
    #: rows written as they are (a summary family), instead of `points` aggregated
    summary: list[tuple] | None = None

    def add(self, key: dict, latency_us: float) -> None:
        row = tuple(key[c] for c in self.group + self.axes)
        self.points[row].append(latency_us)
        self.raw[key["system"]].append({**key, "latency_us": latency_us})

    def table(self) -> list[tuple]:
        """Rows sorted by every key column, duplicate keys as their median."""
        if self.summary is not None:
            return self.summary
        return [
            (*k, sig4(statistics.median(v)))
            for k, v in sorted(self.points.items(), key=lambda kv: sort_key(kv[0]))
        ]


def sort_key(row: Iterable) -> tuple:
    return tuple((0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v)) for v in row)


def header(wheel: Wheel, title: str, notes: list[str], sources: list[Source]) -> list[str]:
    lines = [
        f"roofline achievable surface: {title}",
        f"source: {PACKAGE} {version_of(wheel)} (Apache-2.0), wheel {wheel.path.name}",
        f"  sha256 {wheel.sha256}, read as a zip under {DATA}/",
        "derived by benchmarks/derive/aic_surfaces.py (re-run it; do not edit by hand);",
        "  latency_us: the tables' `latency` (milliseconds) x 1000, 4 significant digits;",
        "  rows sorted by every key column; a key measured twice is its median",
        *notes,
        "source tables (* = the version used):",
    ]
    for s in sorted(sources, key=lambda s: (s.system, s.framework, version_key(s.version))):
        lines += s.lines()
    return ["# " + line if line else "#" for line in lines]


def version_of(wheel: Wheel) -> str:
    m = re.match(r"aiconfigurator_core-([^-]+)-", wheel.path.name)
    return m[1] if m else "unknown"


def short(dtype: str) -> str:
    return DTYPES.get(str(dtype), str(dtype))


# --------------------------------------------------------------------------- families


def collectives(wheel: Wheel) -> Family:
    fam = Family(
        "collectives",
        "collective latency by message bytes x GPUs, per implementation",
        ("system", "framework", "framework_version", "implementation", "dtype", "collective"),
        ("gpus", "message_bytes"),
        "latency_us",
        [
            "message_bytes: the tables' message_size (an element count) x bytes per element",
            "  (fp16/bf16: 2); NCCL rows are nccl-tests (all_reduce_perf, ...; fp16 = 'half';",
            "  the int8 rows and reduce_scatter of the same tables are left out), framework nccl;",
            "  engine rows are each engine's own all-reduce as its collector calls it (vLLM and",
            "  SGLang: tensor_model_parallel_all_reduce in a CUDA graph (_graph) or eager",
            "  (_eager); TRT-LLM: AllReduce, strategy AUTO), bf16, kept apart per implementation",
        ],
    )
    for system in ALL_SYSTEMS:
        found = newest(
            wheel,
            system,
            "comm",
            "nccl",
            "nccl_perf",
            lambda r: r["nccl_dtype"] == "half" and r["op_name"] in NCCL_OPS,
        )
        if found:
            src, rows = found
            fam.sources.append(src)
            for r in rows:
                fam.add(
                    {
                        "system": system,
                        "framework": "nccl",
                        "framework_version": src.version,
                        "implementation": str(r["kernel_source"]).lower(),
                        "dtype": "fp16",
                        "collective": r["op_name"],
                        "gpus": int(r["num_gpus"]),
                        "message_bytes": int(r["message_size"]) * 2,
                    },
                    float(r["latency"]) * 1000,
                )
        for fw in FRAMEWORKS:
            found = newest(
                wheel,
                system,
                "comm",
                fw,
                "custom_allreduce_perf",
                lambda r: r["allreduce_dtype"] in ("bfloat16", "float16"),
            )
            if not found:
                continue
            src, rows = found
            fam.sources.append(src)
            for r in rows:
                dtype = short(r["allreduce_dtype"])
                fam.add(
                    {
                        "system": system,
                        "framework": fw,
                        "framework_version": src.version,
                        "implementation": r["kernel_source"],
                        "dtype": dtype,
                        "collective": r["op_name"],
                        "gpus": int(r["num_gpus"]),
                        "message_bytes": int(r["message_size"]) * 2,
                    },
                    float(r["latency"]) * 1000,
                )
    return fam


def nearest_shape(target: tuple[int, int], measured: set[tuple[int, int]]) -> tuple[int, int]:
    n, k = target
    return min(measured, key=lambda s: (abs(math.log(s[0] / n)) + abs(math.log(s[1] / k)), s))


def llama_targets() -> list[tuple[str, tuple[int, int]]]:
    out = []
    for label, heads, kv, hd, hidden, ffn, tp in LLAMA:
        out += [
            (f"{label} qkv", ((heads + 2 * kv) * hd // tp, hidden)),
            (f"{label} o", (hidden, heads * hd // tp)),
            (f"{label} gate_up", (2 * ffn // tp, hidden)),
            (f"{label} down", (hidden, ffn // tp)),
        ]
    return out


def gemm(wheel: Wheel) -> tuple[Family, Family]:
    grid = Family(
        "gemm",
        "GEMM latency by M for Llama-3.1 projection shapes",
        ("system", "framework", "framework_version", "implementation", "dtype", "n", "k"),
        ("m",),
        "latency_us",
        [
            "C[M,N] = A[M,K] @ W[K,N]; every M measured; dtype bf16, fp8 (per-tensor scaled),",
            "  nvfp4 where measured (fp8_block and weight-only dtypes: gemm_efficiency.csv)",
            "shapes (target N x K -> measured N x K, nearest in log N + log K):",
        ],
    )
    eff = Family(
        "gemm_efficiency",
        "GEMM achieved throughput by M over large shapes",
        ("system", "framework", "framework_version", "implementation", "dtype"),
        ("m",),
        "",
        [
            f"at each M = 1, 2, 4, ..., 32768 measured: over every measured (N, K) with N*K >= "
            f"{BIG_NK} (4096*4096),",
            "  tflops = 2*M*N*K / latency / 1e12: 25th percentile, median, 75th percentile;",
            "  gb_per_s_median = median of (M*K*a + N*K*w + M*N*2) / latency / 1e9 with bytes",
            "  per element (w, a): "
            + ", ".join(f"{k} {w:g}/{a:g}" for k, (w, a) in GEMM_BYTES.items())
            + " (scales left out)",
            "  shapes = how many (N, K) the median is over",
        ],
    )
    mapping: dict[tuple[str, tuple[int, int]], set[tuple[int, int]]] = defaultdict(set)
    eff_rows: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for system in ALL_SYSTEMS:
        for fw in FRAMEWORKS:
            found = newest(wheel, system, "gemm", fw, "gemm_perf")
            if not found:
                continue
            src, rows = found
            eff.sources.append(src)
            by_impl: dict[tuple[str, str], list[dict]] = defaultdict(list)
            for r in rows:
                by_impl[(str(r["kernel_source"]), short(r["gemm_dtype"]))].append(r)
            used = 0
            for (impl, dtype), impl_rows in sorted(by_impl.items()):
                w, a = GEMM_BYTES.get(dtype, (2.0, 2.0))
                for r in impl_rows:
                    m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
                    t_s = float(r["latency"]) / 1000
                    if n * k >= BIG_NK and m in M_BUCKETS:
                        eff_rows[(system, fw, src.version, impl, dtype, m)].append(
                            (
                                2 * m * n * k / t_s / 1e12,
                                (m * k * a + n * k * w + m * n * 2) / t_s / 1e9,
                            )
                        )
                if system not in CORE or dtype not in GRID_DTYPES:
                    continue
                measured = {(int(r["n"]), int(r["k"])) for r in impl_rows}
                chosen = set()
                for label, target in llama_targets():
                    shape = nearest_shape(target, measured)
                    mapping[(label, target)].add(shape)
                    chosen.add(shape)
                for r in impl_rows:
                    if (int(r["n"]), int(r["k"])) in chosen:
                        used += 1
                        fam_key = {
                            "system": system,
                            "framework": fw,
                            "framework_version": src.version,
                            "implementation": impl,
                            "dtype": dtype,
                            "n": int(r["n"]),
                            "k": int(r["k"]),
                            "m": int(r["m"]),
                        }
                        grid.add(fam_key, float(r["latency"]) * 1000)
            if used:
                grid.sources.append(Source(**{**src.__dict__, "rows": used}))
    for label, target in llama_targets():
        shapes = " or ".join(f"{n} x {k}" for n, k in sorted(mapping[(label, target)]))
        grid.notes.append(f"  {label}: {target[0]} x {target[1]} -> {shapes}")
    eff.summary = [
        (
            *key,
            len(vals),
            sig4(percentile([t for t, _ in vals], 25)),
            sig4(percentile([t for t, _ in vals], 50)),
            sig4(percentile([t for t, _ in vals], 75)),
            sig4(percentile([b for _, b in vals], 50)),
        )
        for key, vals in sorted(eff_rows.items(), key=lambda kv: sort_key(kv[0]))
    ]
    return grid, eff


def attention(wheel: Wheel, phase: str) -> Family:
    decode = phase == "generation"
    axis = "kv_tokens" if decode else "seq_tokens"
    fam = Family(
        "decode_attention" if decode else "prefill_attention",
        (
            "decode (generation) attention latency by batch x KV tokens"
            if decode
            else "prefill (context) attention latency by batch x sequence tokens"
        ),
        (
            "system",
            "framework",
            "framework_version",
            "implementation",
            "dtype",
            "kv_dtype",
            "num_heads",
            "num_kv_heads",
            "head_dim",
        ),
        ("batch", axis),
        "latency_us",
        [
            "heads per GPU (num_heads, num_kv_heads, head_dim): (32, 8, 128) = Llama-3.1-8B at",
            "  TP 1; (8, 1, 128) = Llama-3.1-70B (64/8/128) at TP 8; full attention (window 0),",
            "  beam 1; dtype = the attention (query/FMHA) dtype, kv_dtype = the KV cache dtype;",
            AXIS_NOTE[axis],
        ],
    )
    table = f"{phase}_attention_perf"

    def keep(r: dict) -> bool:
        return (
            (int(r["num_heads"]), int(r["num_key_value_heads"]), int(r["head_dim"])) in HEADS
            and int(r.get("window_size") or 0) == 0
            and int(r.get("beam_width") or 1) == 1
            and (decode or int(r["step"]) == 0)
        )

    for system in CORE:
        for fw in FRAMEWORKS:
            found = newest(wheel, system, "attention", fw, table, keep)
            if not found:
                continue
            src, rows = found
            fam.sources.append(src)
            for r in rows:
                tokens = int(r["isl"]) + int(r["step"]) if decode else int(r["isl"])
                fam.add(
                    {
                        "system": system,
                        "framework": fw,
                        "framework_version": src.version,
                        "implementation": r["kernel_source"],
                        "dtype": short(r["attn_dtype"]),
                        "kv_dtype": short(r["kv_cache_dtype"]),
                        "num_heads": int(r["num_heads"]),
                        "num_kv_heads": int(r["num_key_value_heads"]),
                        "head_dim": int(r["head_dim"]),
                        "batch": int(r["batch_size"]),
                        axis: tokens,
                    },
                    float(r["latency"]) * 1000,
                )
    return fam


def moe(wheel: Wheel) -> Family:
    hidden, inter, topk, experts = MOE_SHAPE
    fam = Family(
        "moe",
        "fused MoE layer latency by tokens (Qwen3-235B-A22B shape)",
        (
            "system",
            "framework",
            "framework_version",
            "implementation",
            "dtype",
            "hidden",
            "inter",
            "topk",
            "experts",
            "moe_tp",
            "moe_ep",
            "distribution",
        ),
        ("tokens",),
        "latency_us",
        [
            f"one MoE layer (grouped up/gate + down GEMMs with routing), hidden {hidden}, expert",
            f"  intermediate {inter}, top-{topk} of {experts} experts (Qwen3-235B-A22B), as each",
            "  engine's MoE kernel runs it on one GPU holding a 1/moe_tp slice of every expert",
            "  (TP) or 1/moe_ep of the experts (EP); tokens = the table's num_tokens, the tokens",
            "  entering the layer on the TP/EP group (each GPU computes its share: 1/8 of the",
            "  FLOPs on 8 GPUs);",
            "  balanced routing, else power_law_1.01 where a table has no balanced rows (the",
            "  distribution column says which; power_law_1.2 is also in the tables); every dtype",
            "  and kernel measured for the shape",
        ],
    )

    def keep(r: dict) -> bool:
        return (
            (int(r["hidden_size"]), int(r["inter_size"]), int(r["topk"]), int(r["num_experts"]))
            == MOE_SHAPE
            and (int(r["moe_tp_size"]), int(r["moe_ep_size"])) in MOE_LAYOUTS
            and r["distribution"] in MOE_DISTRIBUTIONS
        )

    for system in CORE:
        for fw in FRAMEWORKS:
            found = newest(wheel, system, "moe", fw, "moe_perf", keep)
            if not found:
                continue
            src, rows = found
            routing = next(
                d for d in MOE_DISTRIBUTIONS if any(r["distribution"] == d for r in rows)
            )
            rows = [r for r in rows if r["distribution"] == routing]
            src.rows = len(rows)
            fam.sources.append(src)
            for r in rows:
                fam.add(
                    {
                        "system": system,
                        "framework": fw,
                        "framework_version": src.version,
                        "implementation": r["kernel_source"],
                        "dtype": short(r["moe_dtype"]),
                        "hidden": hidden,
                        "inter": inter,
                        "topk": topk,
                        "experts": experts,
                        "moe_tp": int(r["moe_tp_size"]),
                        "moe_ep": int(r["moe_ep_size"]),
                        "distribution": r["distribution"],
                        "tokens": int(r["num_tokens"]),
                    },
                    float(r["latency"]) * 1000,
                )
    return fam


# --------------------------------------------------------------------------- output


def write_csv(
    path: Path, comments: list[str], columns: Iterable[str], rows: Iterable[Iterable]
) -> None:
    buf = io.StringIO()
    buf.write("\n".join(comments) + "\n")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(buf.getvalue(), encoding="utf-8")


def sample(families: list[Family]) -> list[list[str]]:
    """Every `stride`-th raw point of each family and system (before aggregation)."""
    out = []
    for fam in families:
        for system in sorted(fam.raw):
            points = sorted(
                fam.raw[system],
                key=lambda p: sort_key([p[c] for c in fam.group + fam.axes] + [p["latency_us"]]),
            )
            stride = max(1, math.ceil(len(points) / SAMPLE_PER_GROUP))
            for p in points[stride // 2 :: stride]:
                row = {"family": fam.name, **p, "latency_us": sig6(p["latency_us"])}
                out.append([str(row.get(c, "")) for c in SAMPLE_COLUMNS])
    return out


def attention_sample(families: list[Family]) -> tuple[list[str], list[list[str]]]:
    """Every `stride`-th raw point of each attention family, system, framework and KV dtype
    (before aggregation), for tests/test_attention_surface.py: (columns, rows)."""
    columns = ["family", *families[0].group, "batch", "length", "latency_us"]
    out = []
    for fam in families:
        groups: dict[tuple, list[dict]] = defaultdict(list)
        for system in sorted(fam.raw):
            for p in fam.raw[system]:
                groups[(p["system"], p["framework"], p["kv_dtype"])].append(p)
        for key in sorted(groups):
            points = sorted(
                groups[key],
                key=lambda p: sort_key([p[c] for c in fam.group + fam.axes] + [p["latency_us"]]),
            )
            stride = max(1, math.ceil(len(points) / ATTENTION_SAMPLE_PER_GROUP))
            for p in points[stride // 2 :: stride]:
                out.append(
                    [fam.name, *(str(p[c]) for c in fam.group)]
                    + [str(p["batch"]), str(p[fam.axes[1]]), sig6(p["latency_us"])]
                )
    return columns, out


def reserved_memory(wheel: Wheel) -> list[str]:
    """The systems/*.yaml reserve (NCCL buffers by GPU count, other memory), for the record."""
    lines = ["reserved memory in systems/<system>.yaml (misc.nccl_mem by GPUs; misc.other_mem):"]
    for system in ALL_SYSTEMS:
        spec = wheel.yaml(f"{SYSTEMS_DIR}/{system}.yaml")
        misc = spec.get("misc") or {}
        nccl = misc.get("nccl_mem") or {}
        lines.append(
            f"  {system}: nccl_mem "
            + ", ".join(f"{g} GPUs {b} B" for g, b in sorted(nccl.items()))
            + f"; other_mem {misc.get('other_mem')} B; nccl_version {misc.get('nccl_version')}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("wheel", type=Path, help="aiconfigurator_core-*.whl (pip download)")
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the surface CSVs")
    parser.add_argument("--sample", type=Path, default=SAMPLE, help="the test sample CSV")
    parser.add_argument(
        "--attention-sample",
        type=Path,
        default=ATTENTION_SAMPLE,
        help="the attention surface's test sample CSV",
    )
    args = parser.parse_args(argv)
    wheel = Wheel(args.wheel)

    coll = collectives(wheel)
    coll.notes += reserved_memory(wheel)
    grid, eff = gemm(wheel)
    dec, pre, mo = attention(wheel, "generation"), attention(wheel, "context"), moe(wheel)
    for fam in (coll, grid, dec, pre, mo):
        write_csv(
            args.out / f"{fam.name}.csv",
            header(wheel, fam.title, fam.notes, fam.sources),
            (*fam.group, *fam.axes, fam.value),
            fam.table(),
        )
    write_csv(
        args.out / f"{eff.name}.csv",
        header(wheel, eff.title, eff.notes, eff.sources),
        (*eff.group, "m", "shapes", "tflops_p25", "tflops_median", "tflops_p75", "gb_per_s_median"),
        eff.table(),
    )
    samples = sample([coll, grid, dec, pre, mo])
    write_csv(
        args.sample,
        [
            "# raw aiconfigurator-core points (before any aggregation or rounding to 4 digits),",
            "# a fixed stride through each family and system of roofline/data/surfaces/*.csv,",
            f"# written by benchmarks/derive/aic_surfaces.py from {args.wheel.name}",
            f"#   sha256 {wheel.sha256}; tests/test_surfaces_data.py interpolates the surfaces to",
            "# these points; columns a family does not key on are empty",
        ],
        SAMPLE_COLUMNS,
        samples,
    )
    att_columns, att_rows = attention_sample([dec, pre])
    write_csv(
        args.attention_sample,
        [
            "# raw aiconfigurator-core attention points (before any aggregation or rounding to 4",
            "# digits), a fixed stride through each phase, system, framework and KV dtype of",
            "# roofline/data/surfaces/{decode,prefill}_attention.csv (length: kv_tokens for",
            "# decode, seq_tokens for prefill), written by benchmarks/derive/aic_surfaces.py from",
            f"# {args.wheel.name} sha256 {wheel.sha256};",
            "# tests/test_attention_surface.py reads the attention surfaces at these points",
        ],
        att_columns,
        att_rows,
    )
    total = 0
    for path in sorted(args.out.glob("*.csv")):
        size = path.stat().st_size
        total += size
        print(f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}: {size} bytes")
    print(f"total {total} bytes; sample {len(samples)} rows -> {args.sample}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
