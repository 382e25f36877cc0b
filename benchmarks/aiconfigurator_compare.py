"""roofline beside NVIDIA's aiconfigurator 0.12 on the published rows both tools can express.

Run from the repository root:

    python benchmarks/aiconfigurator_compare.py            # tables from the committed CSV
    python benchmarks/aiconfigurator_compare.py --run      # re-run aiconfigurator, rewrite the CSV

Without `--run` nothing of aiconfigurator is needed: its predictions are read from
docs/measurements/aiconfigurator-compare.csv (one line per row of roofline/data/published.csv:
its value in the row's metric, the raw figures it printed, the exact command, or why the row
could not be expressed), and roofline's are computed now (`roofline.serve.published.predict`), so
the table follows the model. `--run` re-invokes the CLI of a separate virtual environment
(`python -m venv /tmp/aicvenv && /tmp/aicvenv/bin/pip install aiconfigurator==0.12.0`;
`--aic PATH` names another executable) once per row, caches its answers by command in
/tmp/aiconfigurator-compare-cache.json, and rewrites the CSV.

What is compared, and how each row is put to aiconfigurator (`aiconfigurator cli estimate
--estimate-mode static`, its default SILICON database, i.e. its measured kernel tables):
- a row is expressible when its device has aiconfigurator tables (h100-sxm -> h100_sxm, h200 ->
  h200_sxm, b200 -> b200_sxm, a100-sxm-80gb -> a100_sxm, l40s, gb200, gb300, b300, and Intel's
  arc-pro-b60 -> b60, vLLM only), its engine
  is TensorRT-LLM (NIM and NeMo serve through it), vLLM or SGLang, its model has an
  architecture aiconfigurator models, and its metric is a time or rate (TTFT, TPOT, E2E,
  prefill, decode or output throughput). Its backend tables are of one release per device
  (query_versions.yaml "current": TensorRT-LLM 1.3.0rc20, vLLM 0.24.0, SGLang 0.5.14; A100:
  1.0.0, 0.14.0, 0.5.10), whatever release the row ran; roofline picks the row's release range.
- model: aiconfigurator's bundled config where it ships one (meta-llama/Meta-Llama-3.1-8B,
  -70B, -405B, Qwen/Qwen3-*, deepseek-ai/DeepSeek-V3, openai/gpt-oss-*, ...); Llama 3.3 70B is
  Meta-Llama-3.1-70B (same architecture). Llama 2 and Llama 3 8B, which it does not ship,
  get their Hugging Face config.json written to a local folder (`HF_CONFIGS`: what
  `--model-path meta-llama/Llama-2-7b-hf` downloads where the Hub can be reached). Mistral 7B
  (MistralForCausalLM) and GPT-J (GPTJForCausalLM) are put to it the same way and refused.
- formats, passed explicitly: fp8 weights are W8A8 fp8 (`--gemm-quant-mode fp8`; block-scaled
  `fp8_block` for the Qwen3 and DeepSeek checkpoints, which are block-scaled); fp16 and unknown
  weights are bfloat16 (same kernels' speed); int4 weight-only `int4_wo`; nvfp4 `nvfp4`;
  gpt-oss's MXFP4 experts `w4a16_mxfp4` (all-bf16 checkpoint: bfloat16). KV: the row's; unknown
  KV is fp8 on TensorRT-LLM fp8 rows (its FP8 build recipe, as roofline reads it), else bf16.
- parallelism: `--tp` = the row's GPUs, MoE experts tensor-parallel too (`--etp tp --ep 1`, the
  engines' default), except where the row's note states another layout (`LAYOUTS`: SGLang
  `--enable-dp-attention`, vLLM `--enable-expert-parallel`); with attention data parallelism
  aiconfigurator's `--bs` is per rank, so it gets the row's batch / dp.
- batch: the row's batch (static batch or client concurrency). A burst row (N requests sent at
  once) runs what the engine takes: min(N, the engine's default max_num_seqs (`engine_cap`),
  the KV-bound batch aiconfigurator itself reports for the pool at ISL + OSL ("max batch
  (KV-bound) ... under free_gpu_memory_fraction", from a batch-1 run with `--detail memory`)).
  Mean lengths of a ShareGPT burst are run as fixed lengths (static mode has no spread).
- metric, read as roofline reads it (roofline/serve/published.py): ttft_s = TTFT (all B prompts
  prefilled together, as static mode does), tpot_s = TPOT (first token excluded), e2e_s =
  request latency, prefill_tokens_per_s = B * ISL / TTFT, decode_tokens_per_s = 1 / TPOT (OSL /
  latency where the row's rate includes the prefill), throughput_tokens_per_s = its
  "tokens/s" = B * OSL / latency of the instance ("tokens/s/gpu" where the row is per GPU).
Nothing is fitted to aiconfigurator's outputs: they are only compared.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import shlex
import subprocess
import sys
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from roofline.errors import RooflineError
from roofline.serve.published import Row, bundled_csv, load_rows, predict
from roofline.spec.catalog import load_hardware, load_model

ROOT = Path(__file__).resolve().parent.parent
OUT_CSV = ROOT / "docs" / "measurements" / "aiconfigurator-compare.csv"
CACHE = Path("/tmp/aiconfigurator-compare-cache.json")
AIC = "/tmp/aicvenv/bin/aiconfigurator"
MODELS_DIR = Path("/tmp/aic_models")

#: roofline device -> aiconfigurator system with measured tables (systems/data/<system>/).
#: h100_pcie, a100_pcie, l4 and a30 are systems of its CLI with no tables in 0.12.0.
SYSTEMS = {
    "h100-sxm": "h100_sxm",
    "h200": "h200_sxm",
    "b200": "b200_sxm",
    "b300": "b300_sxm",
    "gb200": "gb200",
    "gb300": "gb300",
    "a100-sxm-80gb": "a100_sxm",
    "l40s": "l40s",
    "arc-pro-b60": "b60",  # Intel Arc Pro B60: vLLM (XPU) tables 0.26.0
}
NO_TABLES = {
    "h100-pcie": "h100_pcie",
    "a100-pcie-80gb": "a100_pcie",
    "l4": "l4",
}
#: engine column's first word -> aiconfigurator backend.
BACKENDS = {
    "tensorrt-llm": "trtllm",
    "nim": "trtllm",
    "nemo": "trtllm",
    "vllm": "vllm",
    "sglang": "sglang",
}
METRICS = (
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "throughput_tokens_per_s",
    "decode_tokens_per_s",
    "prefill_tokens_per_s",
)

#: Hugging Face config.json of checkpoints aiconfigurator does not ship (values as on the Hub).
_LLAMA = {
    "hidden_act": "silu",
    "model_type": "llama",
    "rms_norm_eps": 1e-05,
    "tie_word_embeddings": False,
    "attention_bias": False,
}
HF_CONFIGS = {
    "meta-llama/Llama-2-7b-hf": {
        "architectures": ["LlamaForCausalLM"],
        **_LLAMA,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 32,
        "max_position_embeddings": 4096,
        "vocab_size": 32000,
        "rope_theta": 10000.0,
        "torch_dtype": "float16",
    },
    "meta-llama/Llama-2-13b-hf": {
        "architectures": ["LlamaForCausalLM"],
        **_LLAMA,
        "hidden_size": 5120,
        "intermediate_size": 13824,
        "num_attention_heads": 40,
        "num_hidden_layers": 40,
        "num_key_value_heads": 40,
        "max_position_embeddings": 4096,
        "vocab_size": 32000,
        "rope_theta": 10000.0,
        "torch_dtype": "float16",
    },
    "meta-llama/Llama-2-70b-hf": {
        "architectures": ["LlamaForCausalLM"],
        **_LLAMA,
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_attention_heads": 64,
        "num_hidden_layers": 80,
        "num_key_value_heads": 8,
        "max_position_embeddings": 4096,
        "vocab_size": 32000,
        "rope_theta": 10000.0,
        "torch_dtype": "float16",
    },
    "meta-llama/Meta-Llama-3-8B": {
        "architectures": ["LlamaForCausalLM"],
        **_LLAMA,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 8192,
        "vocab_size": 128256,
        "rope_theta": 500000.0,
        "torch_dtype": "bfloat16",
    },
    "mistralai/Mistral-7B-v0.1": {
        "architectures": ["MistralForCausalLM"],
        "hidden_act": "silu",
        "model_type": "mistral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-05,
        "rope_theta": 10000.0,
        "sliding_window": 4096,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "vocab_size": 32000,
    },
    "EleutherAI/gpt-j-6b": {
        "architectures": ["GPTJForCausalLM"],
        "model_type": "gptj",
        "n_embd": 4096,
        "n_head": 16,
        "n_layer": 28,
        "n_positions": 2048,
        "rotary_dim": 64,
        "activation_function": "gelu_new",
        "vocab_size": 50400,
        "tie_word_embeddings": False,
    },
}

#: roofline model -> (aiconfigurator model path, family): "dense", "moe" (experts get
#: --etp/--ep and a MoE format) or "mla" (DeepSeek: MoE with block-fp8 checkpoints).
MODELS = {
    "llama-2-7b": ("meta-llama/Llama-2-7b-hf", "dense"),
    "llama-2-13b": ("meta-llama/Llama-2-13b-hf", "dense"),
    "llama-2-70b": ("meta-llama/Llama-2-70b-hf", "dense"),
    "llama-3-8b": ("meta-llama/Meta-Llama-3-8B", "dense"),
    "llama-3.1-8b": ("meta-llama/Meta-Llama-3.1-8B", "dense"),
    "llama-3.1-70b": ("meta-llama/Meta-Llama-3.1-70B", "dense"),
    "llama-3.3-70b": ("meta-llama/Meta-Llama-3.1-70B", "dense"),
    "llama-3.1-405b": ("meta-llama/Meta-Llama-3.1-405B", "dense"),
    "qwen3-8b": ("Qwen/Qwen3-8B", "dense"),
    "qwen3-32b": ("Qwen/Qwen3-32B", "dense"),
    "qwen3-30b-a3b": ("Qwen/Qwen3-30B-A3B", "moe"),
    "qwen3-235b-a22b": ("Qwen/Qwen3-235B-A22B", "moe"),
    "mixtral-8x7b": ("mistralai/Mixtral-8x7B-v0.1", "moe"),
    "gpt-oss-20b": ("openai/gpt-oss-20b", "moe"),
    "gpt-oss-120b": ("openai/gpt-oss-120b", "moe"),
    "deepseek-v3": ("deepseek-ai/DeepSeek-V3", "mla"),
    "deepseek-v3.2": ("deepseek-ai/DeepSeek-V3.2", "mla"),
    "glm-5.1": ("zai-org/GLM-5.1", "mla"),
    "mistral-7b-v0.1": ("mistralai/Mistral-7B-v0.1", "dense"),
    "gpt-j-6b": ("EleutherAI/gpt-j-6b", "dense"),
}
#: NVFP4 checkpoints aiconfigurator ships, for rows run in nvfp4.
NVFP4 = {
    "deepseek-v3": "nvidia/DeepSeek-V3.1-NVFP4",
    "deepseek-v3.2": "nvidia/DeepSeek-V3.2-NVFP4",
    "glm-5.1": "nvidia/GLM-5.1-NVFP4",
}
#: Checkpoints whose fp8 weights are block-scaled (fp8_block), else per-tensor/channel fp8.
FP8_BLOCK = ("qwen3-", "deepseek-", "glm-")

#: Parallel layouts stated in the row's note (tp, attention dp, moe tp, moe ep).
_DP8 = (1, 8, 8, 1)  # sglang --tp 8 --enable-dp-attention: attention DP 8, experts TP 8
LAYOUTS = {
    "1011": _DP8,
    "1012": _DP8,
    "1013": _DP8,
    "1014": _DP8,
    "1015": _DP8,
    "1081": _DP8,
    "1085": _DP8,
    "1074": (8, 1, 1, 8),  # vllm -tp 8 --enable-expert-parallel
    "1188": (1, 2, 1, 2),  # vllm -dp=2 --enable-expert-parallel
}


def canonical(row: Row) -> str:
    try:
        return load_model(row.model).name
    except RooflineError:
        return row.model


def _version(text: str) -> tuple[int, int] | None:
    m = re.match(r"v?(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def engine_cap(row: Row, backend: str) -> int | None:
    """The engine's default cap on running sequences: vLLM V0 (< 0.8) max_num_seqs 256
    (vllm==0.6.3 engine/arg_utils.py); V1 (>= 0.8) 1024 on devices of >= 70 GiB other than
    A100, else 256 (arg_utils `_set_default_args_v1`); TensorRT-LLM 1.x max_batch_size 2048
    (trtllm-serve); SGLang none (its KV pool sets max_running_requests)."""
    if backend == "trtllm":
        return 2048
    if backend == "sglang":
        return None
    words = row.engine.split()
    v = _version(words[1]) if len(words) > 1 else None
    if v is None:
        v = (0, 6) if (row.released or "0000") < "2025-03" else (0, 9)
    if v < (0, 8):
        return 256
    hw = load_hardware(row.hardware)
    big = hw.memory_bytes >= 70 * 2**30 and "a100" not in row.hardware
    return 1024 if big else 256


def cannot(row: Row) -> str:
    """Why aiconfigurator cannot express the row ('' when it can be put to it)."""
    try:
        vendor = load_hardware(row.hardware).vendor
    except RooflineError:
        vendor = "?"
    if vendor != "nvidia" and row.hardware not in SYSTEMS:
        return f"{vendor} device"
    if row.hardware in NO_TABLES:
        return f"NVIDIA device with no tables ({NO_TABLES[row.hardware]} has none in 0.12.0)"
    if row.hardware not in SYSTEMS:
        return "NVIDIA device with no aiconfigurator system"
    eng = row.engine.split()[0].lower() if row.engine.strip() else ""
    if eng not in BACKENDS:
        return f"engine {eng}"
    if row.metric not in METRICS:
        return f"metric {row.metric}"
    if canonical(row) not in MODELS:
        return f"model {canonical(row)} not modelled"
    return ""


def formats(row: Row, family: str, backend: str) -> list[str]:
    w = "bf16" if row.weights in ("unknown", "", "fp16") else row.weights
    name = canonical(row)
    args: list[str] = []
    if w.startswith("fp8"):
        gemm = "fp8_block" if name.startswith(FP8_BLOCK) else "fp8"
        moe = gemm
    elif w.startswith("nvfp4"):
        gemm = moe = "nvfp4"
    elif w.startswith("int4"):
        gemm = moe = "int4_wo"
    elif w.startswith("int8"):
        gemm, moe = "int8_wo", "int8_wo"
    elif "experts=mxfp4" in w:
        gemm, moe = "bfloat16", "w4a16_mxfp4"
    else:
        gemm = moe = "bfloat16"
    args += ["--gemm-quant-mode", gemm]
    if family in ("moe", "mla"):
        args += ["--moe-quant-mode", moe]
    kv = row.kv
    if kv in ("unknown", ""):
        kv = "fp8" if backend == "trtllm" and w.startswith("fp8") else "bf16"
    args += ["--kvcache-quant-mode", {"fp8": "fp8", "int8": "int8"}.get(kv, "bfloat16")]
    return args


def model_path(row: Row) -> str:
    name = canonical(row)
    path, _ = MODELS[name]
    if row.weights.startswith("nvfp4") and name in NVFP4:
        path = NVFP4[name]
    if path in HF_CONFIGS:
        d = MODELS_DIR / path.replace("/", "--")
        d.mkdir(parents=True, exist_ok=True)
        (d / "config.json").write_text(json.dumps(HF_CONFIGS[path], indent=1))
        return str(d)
    return path


def base_args(row: Row) -> tuple[list[str], int]:
    """The command without --bs, and the attention-DP degree that divides the batch."""
    name = canonical(row)
    _, family = MODELS[name]
    backend = BACKENDS[row.engine.split()[0].lower()]
    tp, dp, etp, ep = LAYOUTS.get(row.id, (row.tp, 1, row.tp, 1))
    args = [
        "cli",
        "estimate",
        "--estimate-mode",
        "static",
        "--model-path",
        model_path(row),
        "--system",
        SYSTEMS[row.hardware],
        "--backend",
        backend,
        "--isl",
        str(max(row.prompt, 1)),
        "--osl",
        str(max(row.gen, 1)),
        "--tp",
        str(tp),
    ]
    if dp > 1:
        args += ["--dp", str(dp)]
    if family in ("moe", "mla"):
        args += ["--etp", str(etp), "--ep", str(ep)]
    args += formats(row, family, backend)
    return args, dp


_NUM = r"([-\d.,]+)"
_FIELDS = {
    "ttft_ms": rf"TTFT:\s+{_NUM} ms",
    "tpot_ms": rf"TPOT:\s+{_NUM} ms",
    "latency_ms": rf"Request Latency:\s+{_NUM} ms",
    "tokens_s": rf"tokens/s:\s+{_NUM}",
    "tokens_s_gpu": rf"tokens/s/gpu:\s+{_NUM}",
    "concurrency": rf"Concurrency:\s+{_NUM}",
}


def parse(out: str) -> dict:
    d: dict = {}
    for k, pat in _FIELDS.items():
        m = re.search(pat, out)
        if m:
            d[k] = float(m.group(1).replace(",", ""))
    m = re.search(r"Backend:\s+(\w+) \(([^)]+)\)", out)
    if m:
        d["backend"] = f"{m.group(1)} {m.group(2)}"
    m = re.search(r"max batch \(KV-bound[^)]*\) ≈ (\d+)(?:\s+/\s+(\d+))?", out)
    if m:
        d["kv_bound"] = int(m.group(2) or m.group(1))
    d["oom"] = "OOM:" in out
    m = re.search(r"^Error: (.*)$", out, re.M) or re.search(r"error: (.*)$", out, re.M)
    if m and "ttft_ms" not in d:
        d["error"] = m.group(1).strip()[:300]
    return d


class Runner:
    def __init__(self, exe: str, cache: Path):
        self.exe, self.cache_path = exe, cache
        self.cache = json.loads(cache.read_text()) if cache.exists() else {}

    def __call__(self, args: list[str]) -> dict:
        key = shlex.join(args)
        if key not in self.cache:
            env = dict(os.environ, PYTHONWARNINGS="ignore")
            p = subprocess.run(
                [self.exe, *args], capture_output=True, text=True, env=env, timeout=900
            )
            d = parse(p.stdout + "\n" + p.stderr)
            if "ttft_ms" not in d and "kv_bound" not in d and "error" not in d:
                d["error"] = f"exit {p.returncode}: " + (p.stderr.strip().splitlines() or ["?"])[-1]
            self.cache[key] = d
            self.save()  # a long --run keeps what it has if stopped
        return self.cache[key]

    def save(self) -> None:
        tmp = self.cache_path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(dict(self.cache), indent=1, sort_keys=True))
        tmp.replace(self.cache_path)


def command(args: list[str]) -> str:
    return "aiconfigurator " + shlex.join(args)


def metric_value(row: Row, d: dict, batch: int, mode: str = "static") -> float | None:
    m = row.metric
    if m == "ttft_s":
        return d["ttft_ms"] / 1e3
    if m == "tpot_s":
        return d["tpot_ms"] / 1e3
    if m == "e2e_s":
        return d["latency_ms"] / 1e3
    if m == "prefill_tokens_per_s":  # agg's TTFT is one request's under in-flight batching
        return batch * max(row.prompt, 1) / (d["ttft_ms"] / 1e3) if mode == "static" else None
    if m == "decode_tokens_per_s":
        if row.rate_includes_prefill:
            return max(row.gen, 1) / (d["latency_ms"] / 1e3)
        return 1e3 / d["tpot_ms"]
    if m == "throughput_tokens_per_s":
        return d["tokens_s_gpu"] if row.per_gpu else d["tokens_s"]
    raise ValueError(m)


_NOTES: dict[str, str] = {}


def notes() -> dict[str, str]:
    """Each row's note and source (the Row dataclass does not keep the note)."""
    if not _NOTES:
        with open(bundled_csv(), newline="") as f:
            for r in csv.DictReader(f):
                _NOTES[r["id"].strip()] = (r.get("note") or "") + " " + (r.get("source") or "")
    return _NOTES


def serving(row: Row) -> bool:
    """Measured by a serving benchmark (a burst, or a client holding N requests in flight:
    vllm bench serve, SGLang bench_serving, AIPerf), not a static batch; decided from the
    row's own description, before any prediction."""
    text = notes().get(row.id, "")
    return row.burst or bool(re.search(r"bench[ _]serv|AIPerf|max-concurrency", text))


def run_row(row: Row, run: Runner) -> dict:
    out = {"id": row.id, "aiconfigurator": "", "batch_run": "", "why": "", "command": ""}
    why = cannot(row)
    if why:
        out["why"] = why
        return out
    args, dp = base_args(row)
    batch, cmds = row.batch, []
    if row.burst:
        probe = [*args, "--bs", "1", "--detail", "memory"]
        cmds.append("kv-bound: " + command(probe))
        p = run(probe)
        if "error" in p:
            out.update(why="aiconfigurator: " + p["error"], command="; ".join(cmds))
            return out
        cap = engine_cap(row, args[args.index("--backend") + 1])
        kvb = p.get("kv_bound", batch) * dp
        batch = max(1, min(x for x in (row.batch, cap, kvb) if x is not None))
        out["kv_bound"] = kvb
        out["engine_cap"] = cap if cap is not None else ""
    full = [*args, "--bs", str(math.ceil(batch / dp))]
    cmds.append(command(full))
    d = run(full)
    out["command"] = "; ".join(cmds)
    if "error" in d:
        out["why"] = "aiconfigurator: " + d["error"]
        return out
    out["batch_run"] = int(round(d.get("concurrency", batch)))
    out["aiconfigurator"] = f"{metric_value(row, d, out['batch_run']):.6g}"
    for k in ("ttft_ms", "tpot_ms", "latency_ms", "tokens_s", "tokens_s_gpu"):
        out[k] = d.get(k, "")
    out["backend"] = d.get("backend", "")
    out["oom_warned"] = int(bool(d.get("oom")))
    # the same point in its in-flight-batching (agg) mode, its model of a serving engine
    agg = [a if a != "static" else "agg" for a in full]
    out["command_agg"] = command(agg)
    g = run(agg)
    if "error" in g:
        out["agg_why"] = g["error"]
    else:
        v = metric_value(row, g, out["batch_run"], "agg")
        out["aiconfigurator_agg"] = "" if v is None else f"{v:.6g}"
        for k in ("ttft_ms", "tpot_ms", "tokens_s"):
            out["agg_" + k] = g.get(k, "")
    return out


COLUMNS = (
    "id",
    "aiconfigurator",
    "batch_run",
    "engine_cap",
    "kv_bound",
    "ttft_ms",
    "tpot_ms",
    "latency_ms",
    "tokens_s",
    "tokens_s_gpu",
    "backend",
    "oom_warned",
    "why",
    "command",
    "aiconfigurator_agg",
    "agg_ttft_ms",
    "agg_tpot_ms",
    "agg_tokens_s",
    "agg_why",
    "command_agg",
)


def run_all(rows: list[Row], exe: str, jobs: int) -> list[dict]:
    run = Runner(exe, CACHE)
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            res = list(pool.map(lambda r: run_row(r, run), rows))
    finally:
        run.save()
    with open(OUT_CSV, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, lineterminator="\n", extrasaction="ignore")
        w.writeheader()
        for r in res:
            w.writerow({k: r.get(k, "") for k in COLUMNS})
    return res


# --------------------------------------------------------------------------- the report


def pct(v: float | None, sign: bool = True) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{100 * v:+.0f}%" if sign else f"{100 * v:.0f}%"


def stats(errs: list[float]) -> tuple[float | None, float | None]:
    if not errs:
        return None, None
    a = np.abs(np.array(errs, dtype=float))
    return float(np.median(a)), float(np.quantile(a, 0.9))


def engine_class(row: Row) -> str:
    e = row.engine.split()[0].lower()
    return {
        "nim": "TensorRT-LLM",
        "nemo": "TensorRT-LLM",
        "tensorrt-llm": "TensorRT-LLM",
        "vllm": "vLLM",
        "sglang": "SGLang",
    }.get(e, e)


def tp_class(row: Row) -> str:
    return "1" if row.tp == 1 else "2" if row.tp == 2 else ">=4"


def in_sample(row: Row) -> bool:
    return "in-sample" in row.first_sight_at


def uncovered_class(row: Row, why: str) -> str:
    hw = row.hardware
    if why.startswith("amd"):
        return "AMD (MI250X, MI300X, MI350X, MI355X)"
    if why.startswith("apple"):
        return "Apple M-series"
    if why.startswith("intel"):
        return "Intel (Arc Pro B60)"
    if hw.startswith("rtx-"):
        return "NVIDIA consumer cards (RTX 3090/3090 Ti/4090)"
    if why.startswith("NVIDIA device"):
        return "NVIDIA devices without tables (L4, L40, A10G, H100 PCIe/NVL, A100 PCIe)"
    if why.startswith("engine"):
        e = why.split()[1]
        if e == "llama.cpp":
            return "llama.cpp on NVIDIA data-center GPUs"
        return "other engines on NVIDIA data-center GPUs (gpt-fast, torchao, LMDeploy, ...)"
    if why.startswith("model"):
        return "models it does not model (Mistral 7B, GPT-J)"
    if why.startswith("metric"):
        return "metrics it does not predict (memory, power)"
    if why.startswith("aiconfigurator:"):
        return "put to it, refused (no table for the format, architecture unsupported)"
    return why


def _f(x) -> float | None:
    try:
        return float(x) if x not in ("", None) else None
    except ValueError:
        return None


def report(rows: list[Row], aic: dict[str, dict]) -> str:
    """The per-row table, the summaries and the coverage, as markdown."""
    table, common = [], []
    uncovered: Counter = Counter()
    uncovered_rows: dict[str, list[str]] = defaultdict(list)
    uncovered_err: dict[str, list[float]] = defaultdict(list)
    uncovered_fs: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        a = aic.get(row.id, {})
        p = predict(row)
        v, g = _f(a.get("aiconfigurator")), _f(a.get("aiconfigurator_agg"))
        if v is None:
            why = a.get("why") or cannot(row) or "not run"
            if p.predicted is not None:
                c = uncovered_class(row, why)
                uncovered[c] += 1
                uncovered_rows[c].append(row.id)
                uncovered_err[c].append(p.error)
                if row.first_sight is not None and not in_sample(row):
                    uncovered_fs[c].append(row.first_sight)
            if a.get("command"):  # put to aiconfigurator, refused
                table.append((row, None, None, p, why))
            continue
        table.append((row, v, g, p, ""))
        if p.predicted is not None:
            eg = None if g is None else g / row.value - 1
            common.append((row, v / row.value - 1, p.error, a, eg))

    lines = [
        "| id | model | hw | engine | B | P+G | TP | metric | published | aiconfigurator static "
        "| its error | (agg mode: error) | roofline now | roofline error | roofline first sight |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row, v, g, p, why in table:
        a = aic.get(row.id, {})
        b = f"{row.batch}"
        if row.burst:
            b += f" burst (ran {a.get('batch_run') or '—'})"
        elif serving(row):
            b += " conc."
        fs = pct(row.first_sight) + (" (in-sample)" if in_sample(row) else "")
        eng = row.engine if len(row.engine) < 28 else row.engine[:26] + "…"
        lay = LAYOUTS.get(row.id)
        tp = f"{row.tp}" + (f" (tp{lay[0]} dp{lay[1]} ep{lay[3]})" if lay else "")
        refused = why.removeprefix("aiconfigurator: ")[:70]
        cell = f"{v:.4g}" if v is not None else f"— ({refused}…)"
        lines.append(
            f"| {row.id} | {canonical(row)} | {row.hardware} | {eng} | {b} | "
            f"{row.prompt}+{row.gen} | {tp} | {row.metric} | {row.value:.4g} | {cell} | "
            f"{pct(v / row.value - 1) if v is not None else '—'} | "
            f"{pct(g / row.value - 1) if g is not None else '—'} | "
            f"{f'{p.predicted:.4g}' if p.predicted is not None else '—'} | {pct(p.error)} | {fs} |"
        )

    def harness(x) -> float:
        return x[4] if serving(x[0]) and x[4] is not None else x[1]

    def summary_row(label: str, sel: list) -> str:
        ea, er = [x[1] for x in sel], [x[2] for x in sel]
        eg = [x[4] for x in sel if x[4] is not None]
        eh = [harness(x) for x in sel]
        fs = [x[0].first_sight for x in sel if x[0].first_sight is not None and not in_sample(x[0])]
        (ma, pa), (mr, pr), (mg, pg), (mh, ph), (mf, pf) = map(stats, (ea, er, eg, eh, fs))
        closer = sum(abs(r) <= abs(a_) for a_, r in zip(ea, er, strict=True))
        return (
            f"| {label} | {len(sel)} | **{pct(ma, False)} / {pct(pa, False)}** "
            f"({pct(float(np.median(ea)))}) | {pct(mg, False)} / {pct(pg, False)} ({len(eg)}) | "
            f"{pct(mh, False)} / {pct(ph, False)} | **{pct(mr, False)} / {pct(pr, False)}** "
            f"({pct(float(np.median(er)))}) | "
            f"{f'{pct(mf, False)} / {pct(pf, False)} ({len(fs)})' if fs else '—'} | "
            f"{closer}/{len(sel)} |"
        )

    s = [
        "",
        "| rows | n | aiconfigurator static: median / p90 \\|error\\| (signed median) "
        "| its agg mode (rows) | its mode by harness | roofline now (signed median) "
        "| roofline first sight (rows) | roofline at least as close as static |",
        "|---|---|---|---|---|---|---|---|",
        summary_row("all common rows", common),
    ]
    groups = [
        ("in-sample (the set roofline was built on)", in_sample),
        ("first-sight rows (added later)", lambda r: not in_sample(r)),
    ]
    for e in ("TensorRT-LLM", "vLLM", "SGLang"):
        groups.append((f"engine {e}", lambda r, e=e: engine_class(r) == e))
    for t in ("1", "2", ">=4"):
        groups.append((f"TP {t}", lambda r, t=t: tp_class(r) == t))
    groups += [
        ("static-batch rows (offline tables, one batch)", lambda r: not serving(r)),
        ("serving rows (client concurrency or burst)", serving),
        ("  of which bursts", lambda r: r.burst),
        ("  of which fixed concurrency", lambda r: serving(r) and not r.burst),
        ("first-sight rows, not bursts", lambda r: not in_sample(r) and not r.burst),
    ]
    for m in METRICS:
        groups.append((f"metric {m}", lambda r, m=m: r.metric == m))
    for label, f in groups:
        sel = [x for x in common if f(x[0])]
        if sel:
            s.append(summary_row(label, sel))
    oom = [x[0].id for x in common if str(x[3].get("oom_warned")) == "1"]
    s += [
        "",
        f"Common rows where aiconfigurator warned OOM at the batch it ran: {len(oom)} "
        f"({', '.join(oom) or 'none'}).",
        "",
        "| rows roofline predicts that aiconfigurator cannot express or refused | rows "
        "| roofline now median / p90 | roofline first sight (rows) | ids |",
        "|---|---|---|---|---|",
    ]
    for c, n in uncovered.most_common():
        ids = uncovered_rows[c]
        shown = ", ".join(ids[:10]) + (f", … ({len(ids) - 10} more)" if len(ids) > 10 else "")
        (mr, pr), (mf, pf) = stats(uncovered_err[c]), stats(uncovered_fs[c])
        fs = "—"
        if mf is not None:
            fs = f"{pct(mf, False)} / {pct(pf, False)} ({len(uncovered_fs[c])})"
        s.append(f"| {c} | {n} | {pct(mr, False)} / {pct(pr, False)} | {fs} | {shown} |")
    allr = [e for v in uncovered_err.values() for e in v]
    allf = [e for v in uncovered_fs.values() for e in v]
    (mr, pr), (mf, pf) = stats(allr), stats(allf)
    s.append(
        f"| all of them | {len(allr)} | {pct(mr, False)} / {pct(pr, False)} | "
        f"{pct(mf, False)} / {pct(pf, False)} ({len(allf)}) | |"
    )
    by_engine = Counter(
        (r.engine.split()[0].lower() if r.engine.strip() else "?")
        for r in rows
        if any(r.id in v for v in uncovered_rows.values())
    )
    s.append(
        "| the same rows by engine | | | | "
        + ", ".join(f"{e} {n}" for e, n in by_engine.most_common())
        + " |"
    )
    s.append(
        f"| **total** | **{sum(uncovered.values())}** | | | of {len(rows)} rows "
        f"({sum(predict(r).predicted is not None for r in rows)} predicted by roofline); "
        f"{len(common)} compared |"
    )
    return "\n".join(lines + s)


def read_csv(path: Path) -> dict[str, dict]:
    with open(path, newline="") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", action="store_true", help="re-invoke aiconfigurator, rewrite the CSV")
    ap.add_argument("--aic", default=AIC, help=f"aiconfigurator executable (default {AIC})")
    ap.add_argument("--jobs", type=int, default=1, help="aiconfigurator runs at once (--run)")
    ap.add_argument("--ids", default="", help="comma-separated row ids (--run: only these)")
    args = ap.parse_args(argv)
    rows = load_rows(bundled_csv())
    if args.run:
        sel = [r for r in rows if not args.ids or r.id in args.ids.split(",")]
        if args.ids and OUT_CSV.exists():  # refresh some rows, keep the others
            old = read_csv(OUT_CSV)
            new = {r["id"]: r for r in run_all(sel, args.aic, args.jobs)}
            old.update({k: {c: v.get(c, "") for c in COLUMNS} for k, v in new.items()})
            with open(OUT_CSV, "w", newline="") as f:
                w = csv.DictWriter(f, COLUMNS, lineterminator="\n", extrasaction="ignore")
                w.writeheader()
                for r in rows:
                    if r.id in old:
                        w.writerow(old[r.id])
        else:
            run_all(sel, args.aic, args.jobs)
    if not OUT_CSV.exists():
        print(f"{OUT_CSV} is missing: run with --run first", file=sys.stderr)
        return 1
    print(report(rows, read_csv(OUT_CSV)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
