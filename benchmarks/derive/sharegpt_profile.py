"""Derive the ShareGPT request-length profile of `vllm bench serve --dataset-name sharegpt`.

A burst of ShareGPT requests (all sent at once) does not end when the mean-length request ends:
the run lasts until the longest outputs finish, with the batch thinning meanwhile. So a run's
output throughput depends on the spread of the lengths, not only their means. This script writes
the per-request (input, output) token counts that vLLM's own benchmark sampled from
ShareGPT_V3_unfiltered_cleaned_split, as recorded in a real `--save-result` file:

    surajssd/llm-k8s@58b61c5 results_serving_meta-llama-Llama-3.3-70B-Instruct/01_tp8_pp1/
    serving_meta-llama-Llama-3.3-70B-Instruct_tp8_pp1_sharegpt_qps_inf.json
    (vLLM v0.8.3 benchmarks/benchmark_serving.py, 200 prompts, Llama-3 tokenizer; copied with
    its provenance under ../shared/evidence/serving/files/vllm/, MANIFEST.md there)

Its `input_lens` and `output_lens` are kept in the file's order (the order the benchmark sent
them). Usage:

    python benchmarks/derive/sharegpt_profile.py \
        ../shared/evidence/serving/files/vllm/surajssd_llama3.3-70b_a100-40gb_tp8_sharegpt_qps_inf.json

Writes roofline/data/workloads/sharegpt_vllm_bench.csv; byte-identical on re-run.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "roofline/data/workloads/sharegpt_vllm_bench.csv"


def main(path: str) -> None:
    raw = Path(path).read_bytes()
    d = json.loads(raw)
    inp, out = d["input_lens"], d["output_lens"]
    if len(inp) != len(out) or not inp:
        raise SystemExit(f"{path}: input_lens and output_lens must be equal, non-empty lists")
    n = len(inp)
    lines = [
        "# ShareGPT request lengths as `vllm bench serve --dataset-name sharegpt` samples them",
        "# source: surajssd/llm-k8s@58b61c5 results_serving_meta-llama-Llama-3.3-70B-Instruct/"
        "01_tp8_pp1/serving_meta-llama-Llama-3.3-70B-Instruct_tp8_pp1_sharegpt_qps_inf.json",
        "#   producer: vLLM v0.8.3 benchmarks/benchmark_serving.py, dataset "
        "ShareGPT_V3_unfiltered_cleaned_split, 200 prompts, Llama-3 tokenizer",
        f"#   file sha256 {hashlib.sha256(raw).hexdigest()}",
        f"#   {n} requests in the order sent; mean input {sum(inp) / n:.2f}, "
        f"mean output {sum(out) / n:.2f} tokens; max input {max(inp)}, max output {max(out)}",
        "# derived by benchmarks/derive/sharegpt_profile.py",
        "input_tokens,output_tokens",
    ]
    lines += [f"{i},{o}" for i, o in zip(inp, out, strict=True)]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({n} requests)")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
