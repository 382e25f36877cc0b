"""The KV pool the tool leaves against the one vLLM logged at start-up, row by row.

    python benchmarks/kv_capacity_vs_logs.py

`roofline/data/kv_capacity_logs.csv` holds public vLLM start-up logs (docs/evidence/
kv-capacity-logs.md): model, GPU, TP, gpu_memory_utilization, max_model_len, version, and the
KV tokens vLLM allocated (`# GPU blocks` x 16, or "GPU KV cache size: N tokens"). vLLM sizes
the pool as f x C - weights - the activation peak of a profile run - non-torch memory
(helper read of vllm==0.6.3 .. 0.14.1, roofline/data/engine_releases.yaml). The tool's side:

    KV = f x C - W - A,  tokens = floor(KV / (16 x bytes per token per GPU)) x 16

with C the device spec's memory (the printed total where the log gives one, as vLLM reads
it from the driver), W the weights per GPU (`placement.memory_per_gpu`), A the activations of
the profile run (`footprint.step_activation_bytes` of the release's profile tokens over its
max_num_seqs: V0 max(max_model_len, 2048) tokens, or 512 (2048 from 0.7) with chunked
prefill above 32k tokens on CUDA; V1 its token budget), and no non-torch term (no source at
TP > 1 yet). Rows whose model or device the catalog lacks are listed and skipped.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from roofline.catalog import load_engine, load_hardware, load_model
from roofline.footprint import kv_bytes_per_token, step_activation_bytes
from roofline.placement import Parallel, memory_per_gpu
from roofline.precision import Precision

LOGS = Path(__file__).resolve().parents[1] / "roofline" / "data" / "kv_capacity_logs.csv"
GPUS = (
    ("A100 80GB", "a100-sxm-80gb"),
    ("A100 40GB", "a100-sxm-40gb"),
    ("H100 NVL", "h100-nvl"),
    ("H200", "h200"),  # before H100: kv008's text names both
    ("H100", "h100-sxm"),
    ("RTX 3090", "rtx-3090"),
    ("RTX 4090", "rtx-4090"),
    ("A10G", "a10g"),
    ("L40S", "l40s"),
    ("MI300X", "mi300x"),
    ("T4", "t4"),
)
GiB = 2**30
BLOCK = 16


def weights_of(r: dict) -> str | None:
    hf = r["model_hf"].lower()
    if "awq" in hf or "int4" in hf:
        return "int4-g128"
    if "fp8" in hf:
        return "fp8"
    return "bf16"


def main() -> None:
    vllm = load_engine("vllm")
    print("| id | model | GPU | TP | release | logged tokens | tool tokens | error |")
    print("|---|---|---|---|---|---|---|---|")
    errs = []
    for r in csv.DictReader(LOGS.open(newline="")):
        device = next((d for key, d in GPUS if key in r["gpu"]), None)
        logged = int(r["kv_cache_tokens"] or 0) or int(r["gpu_blocks"] or 0) * BLOCK
        if not (r["model_catalog"] and device and logged):
            why = "skipped: not in the catalog"
            print(f"| {r['id']} | {r['model_hf']} | {r['gpu'][:20]} | {why} |")
            continue
        m, hw = load_model(r["model_catalog"]), load_hardware(device)
        tp = int(r["tp"])
        text = r["vllm_version"]
        version = text.split()[0] if text[:1].isdigit() else None
        if "V0" in text:  # a V1-era release run with VLLM_USE_V1=0: the V0 profile
            eng = vllm.at("0.7.0")
        elif version is None:  # no release printed: V1 if the log says so, else V0
            eng = vllm if "V1" in text else vllm.at("0.7.0")
        else:
            eng = vllm.at(version)
        p = Precision(weights=weights_of(r) or "bf16", activations="bf16", kv="bf16")
        f = float(r["gpu_memory_utilization"] or 0.9)
        cap = float(r["gpu_memory_gib"]) * GiB if r["gpu_memory_gib"] else hw.memory_bytes
        mml = int(r["max_model_len"] or m.max_context)
        seqs = eng.max_num_seqs_on(hw) or 256
        budget = eng.prefill_token_budget_on(hw)
        rocm = hw.vendor == "amd"
        if budget is None:  # V0: whole prompts, unless chunked prefill switched itself on
            # above 32k tokens on CUDA, with a budget of 512 up to 0.6 and 2048 in 0.7
            # (roofline/data/engine_releases.yaml: vllm==0.6.3, 0.7.3 arg_utils.py)
            chunk = 2048 if version and version.startswith("0.7") else 512
            budget = chunk if mml > 32768 and not rocm else max(mml, 2048)
        w = float(memory_per_gpu(m, p, Parallel(tp=tp), 1, 1, 1).weights_bytes)
        act = float(step_activation_bytes(m, p, budget, seqs)) / tp
        kv = f * cap - w - act
        per_token = kv_bytes_per_token(m, p) / tp
        tokens = int(kv // (BLOCK * per_token)) * BLOCK
        e = tokens / logged - 1
        errs.append(e)
        print(
            f"| {r['id']} | {r['model_catalog']} | {device} | {tp} | {eng.label} | "
            f"{logged:,} | {tokens:,} | {e:+.1%} |"
        )
    a = np.abs(errs)
    print(
        f"\n{len(errs)} rows: median |error| {np.median(a):.1%}, within 3%: "
        f"{int((a <= 0.03).sum())}, within 10%: {int((a <= 0.10).sum())}"
    )


if __name__ == "__main__":
    main()
