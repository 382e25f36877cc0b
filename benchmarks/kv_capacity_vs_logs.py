"""The KV pool the tool leaves against the one vLLM logged at start-up, row by row.

    python -m benchmarks.kv_capacity_vs_logs   (from the repository root)

`roofline/data/kv_capacity_logs.csv` holds public vLLM start-up logs (docs/evidence/
kv-capacity-logs.md): model, GPU, TP, gpu_memory_utilization, max_model_len, version, and the
KV tokens vLLM allocated (`# GPU blocks` x 16, or "GPU KV cache size: N tokens"). The tool's
side is its own `roofline.serve.simulate.kv_capacity_tokens` on the row's stack: vLLM at the
release the log names (`EngineSpec.at`, with that release kept as `exact_release` so the
profiler's accounting follows it), the row's gpu_memory_utilization, TP, max_num_seqs and
profile tokens, and the capacity vLLM printed (`total_gpu_memory`) where the log gives one
(else the device spec's). The profile tokens are the release's max_num_batched_tokens: V0
max(max_model_len, 2048), or 512 (2048 from 0.7) with chunked prefill, which turns itself on
above 32k tokens on CUDA (vllm==0.5.4 / 0.6.3 vllm/engine/arg_utils.py `use_long_context`,
vllm/config.py); V1 its token budget. Rows whose inputs are unknown (no gpu_memory_utilization
printed, a KV connector, a multimodal encoder the model spec lacks) are computed but marked
and left out of the summary, with the reason.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np

from roofline.calc.placement import Parallel
from roofline.calc.stack import Stack
from roofline.serve.policy import Policy
from roofline.serve.simulate import kv_capacity_tokens
from roofline.spec.catalog import load_engine, load_hardware, load_model
from roofline.spec.precision import Precision
from roofline.units import version_key

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
#: Rows computed but left out of the summary: an input the log does not give.
UNKNOWN = {
    "kv003": "gmu not printed (TGIS-style wrapper)",
    "kv004": "gmu not printed (TGIS-style wrapper)",
    "kv005": "gmu not printed (TGIS-style wrapper)",
    "kv017": "gmu not given; LMCache connector",
    "kv018": "release and gmu not given; LMCache connector",
    "kv020": "multimodal: the vision encoder is profiled, the spec is text-only",
    "kv021": "multimodal: the vision encoder is profiled, the spec is text-only",
}


def weights_of(r: dict) -> str:
    hf = r["model_hf"].lower()
    if "awq" in hf or "int4" in hf:
        return "int4-g128"
    if "fp8" in hf:
        return "fp8"
    return "bf16"


def setting(note: str, *names: str) -> int | None:
    """A scheduler setting the row's note quotes (`max_num_seqs=42`, `--max-num-seqs 64`)."""
    for name in names:
        m = re.search(rf"{name}[= ](\d+)", note)
        if m:
            return int(m.group(1))
    return None


def release_of(text: str) -> tuple[str | None, bool]:
    """(the release the log names, or None; whether it ran the V0 engine)."""
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?(\.dev)?", text)
    if m is None:  # the PR #2031 branch is a V0 main of late 2023; else V1 if the log says so
        return ("0.2.4", True) if "main 2023" in text else (None, "V1" not in text)
    major, minor, patch = (int(x or 0) for x in m.groups()[:3])
    if m.group(4) and patch:  # X.Y.Z.devN is built from before release X.Y.Z
        patch -= 1
    version = f"{major}.{minor}.{patch}"
    return version, "V0" in text or ((major, minor) < (0, 8) and "V1" not in text)


def row_tokens(r: dict, vllm) -> tuple[int, str, str]:
    """(the tool's KV tokens for the row, the release label, the row's GPU spec name)."""
    device = next(d for key, d in GPUS if key in r["gpu"])
    m, hw = load_model(r["model_catalog"]), load_hardware(device)
    if r["gpu_memory_gib"]:  # the total vLLM read from the driver
        hw = hw.model_copy(update={"memory_bytes": int(float(r["gpu_memory_gib"]) * GiB)})
    version, v0 = release_of(r["vllm_version"])
    if v0 and version is not None and version_key(version) >= (0, 8, 0):
        eng = vllm.at("0.7.0").model_copy(update={"exact_release": "0.7.3"})  # V0 of 0.8.x
        label = f"{version} V0"
    else:
        eng = vllm.at(version)
        if version is not None:
            eng = eng.model_copy(update={"exact_release": version})
        label = f"{version or '?'} {'V0' if v0 else 'V1'}"
    note = r["note"]
    mml = int(r["max_model_len"] or m.max_context)
    seqs = setting(note, "max_num_seqs", "--max_num_seqs", "--max-num-seqs") or (
        eng.max_num_seqs_on(hw) or 256
    )
    budget = setting(note, "--max-num-batched-tokens") or eng.prefill_token_budget_on(hw)
    if budget is None:  # V0: whole prompts, unless chunked prefill switched itself on above
        # 32k tokens on CUDA, with a budget of 512 up to 0.6 and 2048 from 0.7
        chunk = 2048 if version_key(version or "0") >= (0, 7, 0) else 512
        budget = chunk if mml > 32768 and hw.vendor != "amd" else max(mml, 2048)
    budget = max(budget, seqs)
    p = Precision(weights=weights_of(r), activations="bf16", kv="bf16")
    f = float(r["gpu_memory_utilization"] or 0.9)
    stack = Stack.resolve(
        m,
        hw,
        p,
        engine=eng,
        parallel=Parallel(tp=int(r["tp"])),
        memory_fraction=f,
        prefill_token_budget=budget,
        max_num_seqs=seqs,
    )
    policy = Policy("continuous", max_seqs=seqs, token_budget=budget, block_size=BLOCK)
    return kv_capacity_tokens(m, stack, policy), label, device


def main() -> None:
    vllm = load_engine("vllm")
    print("| id | model | GPU | TP | release | logged tokens | tool tokens | error | note |")
    print("|---|---|---|---|---|---|---|---|---|")
    errs = []
    for r in csv.DictReader(LOGS.open(newline="")):
        device = next((d for key, d in GPUS if key in r["gpu"]), None)
        logged = int(r["kv_cache_tokens"] or 0) or int(r["gpu_blocks"] or 0) * BLOCK
        if not (r["model_catalog"] and device and logged):
            print(
                f"| {r['id']} | {r['model_hf']} | {r['gpu'][:20]} | skipped: not in the catalog |"
            )
            continue
        tokens, label, device = row_tokens(r, vllm)
        e = tokens / logged - 1
        why = UNKNOWN.get(r["id"], "")
        if not why:
            errs.append(e)
        print(
            f"| {r['id']} | {r['model_catalog']} | {device} | {r['tp']} | {label} | "
            f"{logged:,} | {tokens:,} | {e:+.1%} | {why or 'counted'} |"
        )
    a = np.abs(errs)
    print(
        f"\n{len(errs)} counted rows: median |error| {np.median(a):.1%}, within 3%: "
        f"{int((a <= 0.03).sum())}, within 10%: {int((a <= 0.10).sum())}"
    )


if __name__ == "__main__":
    main()
