"""Print the source lines behind `roofline/data/engine_releases.yaml`, release by release.

    python benchmarks/derive/engine_releases.py /tmp/wheels [--engine vllm] [--version 0.8.5]
        [--fact custom_all_reduce]

The folder holds what `pip download --no-deps` fetched, one sub-folder per release:

    pip download --no-deps vllm==0.8.5 -d /tmp/wheels/vllm-0.8.5
    pip download --no-deps sglang==0.5.5 -d /tmp/wheels/sglang-0.5.5

Wheels (`*.whl`) and sdists (`*.tar.gz`) are read as archives, never installed. vLLM wheels carry
no CUDA source, so the custom all-reduce kernel (csrc/custom_all_reduce.cu, .cuh) comes from the
sdist. pip cannot save a vLLM sdist without building its metadata (which needs torch and CUDA),
so an unpacked sdist is accepted too: a folder named `vllm-VERSION-sdist` holding the sdist's
tree (what `pip download --no-clean --no-deps --no-binary :all: --no-build-isolation vllm==V`
leaves under $TMPDIR/pip-download-*/vllm_*/ when the metadata step fails). Where a wheel and an
sdist hold the same path, the wheel's copy is read.

For every fact of the YAML the script prints `engine==version fact path:line: text` for the
assignments that state it (regexes below), so that each value and citation of the YAML can be
checked against the release's own text. Standard library only.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ENGINES = ("vllm", "sglang")


@dataclass(frozen=True)
class Fact:
    """Lines of the files matching `paths` (fnmatch, on the archive path) that match `line`.

    With `until`, a matching line opens a block that is printed up to and including the first
    later line matching `until` (at most `max_lines` lines).
    """

    engine: str
    name: str
    paths: tuple[str, ...]
    line: str
    until: str | None = None
    max_lines: int = 40


def _f(
    engine: str, name: str, paths: str, line: str, until: str | None = None, max_lines: int = 40
) -> Fact:
    """A Fact whose `paths` are given as one space-separated string of fnmatch patterns."""
    return Fact(engine, name, tuple(paths.split()), line, until, max_lines)


ARG_UTILS = "vllm/engine/arg_utils.py"
VCONFIG = "vllm/config.py vllm/config/*.py"
VAR = (
    "vllm/distributed/device_communicators/custom_all_reduce.py "
    "vllm/model_executor/parallel_utils/custom_all_reduce.py"
)
SARGS = "sglang/srt/server_args.py sglang/srt/arg_groups/*.py sglang/srt/arg_groups/fields/*.py"
SRUNNER = (
    "sglang/srt/model_executor/model_runner.py "
    "sglang/srt/model_executor/model_runner_kv_cache_mixin.py "
    "sglang/srt/mem_cache/kv_cache_configurator.py"
)
SAR = "sglang/srt/distributed/device_communicators/custom_all_reduce*.py sglang/srt/_custom_ops.py"

FACTS: tuple[Fact, ...] = (
    # ---------------------------------------------------------------- vLLM
    _f(
        "vllm",
        "max_num_seqs",
        f"{ARG_UTILS} {VCONFIG}",
        r"^\s*(self\.)?max_num_seqs\s*(:[^=]*)?=\s*(\d|None|Scheduler|default|min\(|Field)"
        r"|default_max_num_seqs\s*=\s*\d|DEFAULT_MAX_NUM_SEQS\b.*=\s*\d"
        r"|max_num_seqs = 256 if",
    ),
    _f(
        "vllm",
        "max_num_batched_tokens",
        f"{ARG_UTILS} {VCONFIG}",
        r"max_num_batched_tokens\s*=\s*(\d|max\(|model_config\.max_model_len|min\(|\($)"
        r"|DEFAULT_MAX_NUM_BATCHED_TOKENS\b.*=\s*\d|_MAX_NUM_BATCHED_TOKENS\s*=\s*\d"
        r"|^\s*_DEFAULT_MAX_NUM_BATCHED_TOKENS\)$|max_paddings: int = \d+",
    ),
    _f(
        "vllm",
        "batch_default_device_rule",
        ARG_UTILS,
        r"UsageContext\.(LLM_CLASS|OPENAI_API_SERVER):\s*\d+,"
        r"|device_memory\s*>=\s*\d+\s*\*\s*GiB_bytes|\"(h100|h200|a100)\"\s+(not\s+)?in\s+"
        r"|device_memory = current_platform\.get_device_total_memory|is_gb10 = "
        r"|device_name = current_platform\.get_device_name\(\)\.lower\(\)"
        r"|default_max_num_batched_tokens\.get\(|default_max_num_seqs\.get\(",
    ),
    _f(
        "vllm",
        "gpu_memory_utilization",
        f"{ARG_UTILS} {VCONFIG}",
        r"^\s*gpu_memory_utilization\s*:[^=]*=\s*\S|DEFAULT_GPU_MEMORY_UTILIZATION\s*:"
        r"|^\s*if self\.enable_extensible_kv_cache:\s*$|^\s*return 1\.0\s*$",
    ),
    _f(
        "vllm",
        "v1_default",
        "vllm/envs.py",
        r"VLLM_USE_V1\"?,\s*\"\d\"|^\s*VLLM_USE_V1: bool = ",
    ),
    _f(
        "vllm",
        "chunked_prefill_default",
        ARG_UTILS,
        r"^\s*enable_chunked_prefill\s*:[^=]*=|use_long_context = max_model_len > \d+"
        r"|self\.enable_chunked_prefill = (True|False|bool\(|default_chunked_prefill"
        r"|incremental_prefill_supported)",
    ),
    _f(
        "vllm",
        "prefix_caching_default",
        f"{ARG_UTILS} {VCONFIG}",
        r"^\s*enable_prefix_caching\s*:[^=]*=|self\.enable_prefix_caching = (True|False|bool\("
        r"|default_prefix_caching|incremental_prefill_supported)",
    ),
    _f(
        "vllm",
        "block_size",
        f"{ARG_UTILS} {VCONFIG} vllm/platforms/cuda.py",
        r"^\s*block_size\s*:[^=]*=|DEFAULT_BLOCK_SIZE\s*:.*=\s*\d"
        r"|cache_config\.block_size = \d+|self\.block_size = self\.DEFAULT_BLOCK_SIZE",
    ),
    _f(
        "vllm",
        "cuda_graph_sizes",
        f"{VCONFIG} vllm/worker/model_runner.py vllm/v1/worker/gpu_model_runner.py",
        r"_BATCH_SIZES_TO_CAPTURE = |_BATCH_SIZE_ALIGNMENT = \d|possible_sizes = \["
        r"|range\(8, 513, 8\)|cudagraph_batch_sizes = \[|self\.cuda_graph_sizes = \[min"
        r"|max_graph_size = min\(|max_num_seqs \* (decode_query_len \* )?2, (512|default_max)"
        r"|default_max_graph_size = |list\(range\(8, 256, 8\)\)|range\(256, max_\w+ \+ 1, 16\)"
        r"|range\(8, cuda_graph_sizes\[0\] \+ 1, 8\)|self\.max_batchsize_to_capture = "
        r"|_BATCH_SIZE_ALIGNMENT \* i for i in range|return \(batch_size \+ 7\) // 8 \* 8"
        r"|graph_batch_size = _get_graph_batch_size\(",
    ),
    _f(
        "vllm",
        "custom_all_reduce",
        f"{VAR} vllm/config.py",
        r"_SUPPORTED_WORLD_SIZES = |max_size\s*=\s*8192 \* 1024|world_size > 2 and not"
        r"|return (self\.batch_invariant or )?inp_size <|if self\.world_size == 2 or self\.f"
        r"|self\.world_size > 8|Custom all-reduce kernels are temporarily disabled"
        r"|# FIXME\(woosuk\): Fix the stability issues"
        r"|CUSTOM_ALL_REDUCE_MAX_SIZES\[device_capability",
    ),
    _f(
        "vllm",
        "custom_all_reduce_max_sizes_table",
        "vllm/distributed/device_communicators/all_reduce_utils.py",
        r"^CUSTOM_ALL_REDUCE_MAX_SIZES = \{",
        until=r"^\}",
    ),
    _f(
        "vllm",
        "custom_all_reduce_symm_mem_default",
        "vllm/envs.py",
        r"\"VLLM_ALLREDUCE_USE_SYMM_MEM\", \"\d\"|^\s*VLLM_ALLREDUCE_USE_SYMM_MEM: bool = ",
    ),
    _f(
        "vllm",
        "custom_all_reduce_kernel",
        "csrc/custom_all_reduce.cu csrc/custom_all_reduce.cuh",
        r"bytes < \d+ \* 1024|world_size_ == 2\)|} else if \((full_nvlink_|fully_connected_)\)"
        r"|REDUCE_CASE\(\d+\)|return world_size <= 4 && inp_size <= \d+|return inp_size <= max"
        r"|if \(world_size == 2 \|\| full_nvlink\)|VLLM_CUSTOM_ALLREDUCE_ALGO\"\)",
    ),
    _f(
        "vllm",
        "quick_all_reduce_rocm",
        "vllm/distributed/device_communicators/quick_all_reduce.py vllm/envs.py",
        r"^\s*_SUPPORTED_WORLD_SIZES = |\"VLLM_ROCM_QUICK_REDUCE_QUANTIZATION\", \"NONE\"",
    ),
    _f(
        "vllm",
        "kv_profile_run",
        "vllm/worker/model_runner.py vllm/v1/worker/gpu_model_runner.py "
        "vllm/model_executor/layers/sampler.py vllm/v1/sample/ops/topk_topp_sampler.py "
        "vllm/v1/sample/sampler.py vllm/model_executor/models/llama.py",
        r"sampling_params = SamplingParams\(top_p=0\.99, top_k=self\.vocab_size - 1\)"
        r"|seq_len = \(max_num_batched_tokens // max_num_seqs"
        r"|^\s*top_k=dummy_tensors\(logits\.size\(1\) - 1\)|logit_indices = np\.cumsum"
        r"|return hidden_states\[logit_indices\]|hidden_states = self\._dummy_run\(self\.max_num"
        r"|logits_sort, logits_idx = logits\.sort\(|logits = logits\.to\(torch\.float"
        r"|^\s*gate_up, _ = self\.gate_up_proj\(x\)|^\s*x = self\.act_fn\(gate_up\)",
    ),
    _f(
        "vllm",
        "kv_profiler",
        "vllm/worker/worker.py vllm/v1/worker/gpu_worker.py vllm/utils.py vllm/utils/*.py "
        "vllm/v1/worker/utils.py vllm/v1/worker/extensible_kv_cache.py",
        r"num_gpu_blocks = int\(|\(total_gpu_memory \* (self\.cache_config\.)?gpu_memory_util"
        r"|total_gpu_memory \* self\.cache_config\.gpu_memory_utilization -"
        r"|peak_memory = (self\.init_gpu_memory|torch\.cuda\.memory_stats)"
        r"|peak_memory \+= non_torch_allocations|available_kv_cache_memory(_bytes)? = "
        r"|memory_for_current_instance = |self\.requested_memory = \(|requested_memory = math"
        r"|result\.non_kv_cache_memory = |cudagraph_memory_estimate = self\.model_runner"
        r"|- cudagraph_memory_estimate|available = min\(requested_memory - non_kv_used"
        r"|KV_CACHE_MARGIN_(FLOOR_BYTES|FRACTION) = ",
    ),
    _f(
        "vllm",
        "kv_blocks_and_log",
        "vllm/v1/core/kv_cache_utils.py vllm/v1/core/kv_cache_planning.py vllm/executor/*.py "
        "vllm/engine/llm_engine.py vllm/v1/executor/gpu_executor.py vllm/worker/worker.py "
        "vllm/v1/worker/gpu_worker.py",
        r"num_blocks = int\(available_memory|num_tokens = num_blocks|# GPU blocks|# %s blocks"
        r"|GPU KV cache size|KV cache size: %s tokens|Maximum concurrency for"
        r"|\"Available KV cache memory|Memory profiling (results|takes)"
        r"|num_gpu_blocks = min\(b\[0\] for b in num_blocks\)"
        r"|num_blocks = available_memory // bytes_per_block",
    ),
    _f(
        "vllm",
        "cudagraph_memory_estimate_default",
        "vllm/envs.py",
        r"\"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS\", \"\d\"",
    ),
    _f(
        "vllm",
        "executor_and_tp_inputs",
        f"{VCONFIG} vllm/config/parallel.py vllm/distributed/parallel_state.py "
        "vllm/worker/worker_base.py vllm/worker/model_runner.py "
        "vllm/v1/executor/multiproc_executor.py",
        r"backend(: DistributedExecutorBackend)? = \"(mp|ray|uni)\"$|self\.worker_use_ray = True"
        r"|use_message_queue_broadcaster=True|broadcast_tensor_dict\((broadcast_data|metadata_d)"
        r"|self\.rpc_broadcast_mq = MessageQueue\($|self\.rpc_broadcast_mq = MessageQueue\(s",
    ),
    # ---------------------------------------------------------------- SGLang
    _f(
        "sglang",
        "mem_fraction_static",
        SARGS,
        r"mem_fraction_static = (0\.\d+|round|\()|reserved_mem \+?= |if self\.tp_size >= \d+"
        r"|^\s*mem_fraction_static\s*:|else 0\.(88|95)$|if post_capture_kv_sizing:",
    ),
    _f(
        "sglang",
        "chunked_prefill_cuda_graph_max_bs",
        SARGS,
        r"chunked_prefill_size\s*(=|:)\s*(\d|None|Optional)|chunked_prefill_size=\d+"
        r"|cuda_graph_max_bs\s*(=|:)\s*(\d|None|Optional)|max_bs = \d+|gpu_mem [<>] \d"
        r"|if self\.tp_size < 4|if cfg\.tp_size < 4",
    ),
    _f(
        "sglang",
        "gpu_mem_units",
        "sglang/srt/utils.py sglang/srt/utils/*.py",
        r"--query-gpu=memory\.total",
    ),
    _f(
        "sglang",
        "max_running_requests",
        f"{SARGS} {SRUNNER} sglang/srt/managers/tp_worker.py",
        r"^\s*max_running_requests\s*:\s*(A\[|Optional)|self\.max_total_num_tokens // 2"
        r"|max_num_reqs = min\((estimated|requested_per_worker), token_capacity // 2\)"
        r"|context_len \* 512|^\s*4096,$|estimated = max\(min\(",
    ),
    _f(
        "sglang",
        "radix_chunked_page_defaults",
        SARGS,
        r"^\s*disable_radix_cache\s*:\s*bool = |^\s*page_size\s*:[^=]*=|self\.page_size = 1$"
        r"|\{\"page_size\": 1\}|^\s*max_prefill_tokens\s*:\s*int = ",
    ),
    _f(
        "sglang",
        "field_defaults",
        "sglang/srt/arg_groups/fields/*.py",
        r"^\s*(disable_radix_cache|mem_fraction_static|chunked_prefill_size|max_running_requests"
        r"|max_prefill_tokens|page_size|disable_custom_all_reduce): A\[",
        until=r"^\s*\] = ",
        max_lines=16,
    ),
    _f(
        "sglang",
        "cuda_graph_sizes",
        f"{SARGS} sglang/srt/model_executor/cuda_graph_runner.py",
        r"capture_bs = \[1, 2, 4|capture_bs \+= list|\+ list\(range\((16|272|512), "
        r"|capture_bs = \[bs for bs in capture_bs if bs <= "
        r"|and bs <= (model_runner\.)?server_args\.cuda_graph_max_bs"
        r"|capture_bs = list\(range\(1, 33\)\)|gpu_mem > (90|160) \* 10"
        r"|^\s*disable_piecewise_cuda_graph\s*:\s*bool = ",
    ),
    _f(
        "sglang",
        "kv_profiler",
        SRUNNER,
        r"rest_memory = (available_gpu_memory|post_model_load_memory)|1 - self\.mem_fraction_st"
        r"|max_num_token = int\(rest_memory|slack_gb = pre_model_load|min_per_gpu_memory,$"
        r"|return int\(rest_memory \* \(1 << 30\)\)",
    ),
    _f(
        "sglang",
        "kv_tokens_rounding",
        f"{SRUNNER} sglang/srt/model_executor/pool_configurator.py",
        r"available_bytes // self\._cell_size|// page_size \* page_size$"
        r"|^\s*// self\.server_args\.page_size$",
    ),
    _f(
        "sglang",
        "kv_log",
        "sglang/srt/managers/scheduler.py sglang/srt/mem_cache/memory_pool.py",
        r"f\"max_total_num_tokens=|KV Cache is allocated|'is allocated'\}\. dtype",
    ),
    _f(
        "sglang",
        "custom_all_reduce",
        SAR,
        r"_SUPPORTED_WORLD_SIZES = |_MAX_CAR_SIZE = |max_size=8192 \* 1024|max_size=_MAX"
        r"|world_size > 2 and not full_nvlink|return inp_size <|max_required_workspace_size = "
        r"|use_vllm_custom_allreduce = |\"USE_VLLM_CUSTOM_ALLREDUCE\"|max_pull_size = 16"
        r"|^\s*\d: ModeConfig\(|if _is_cuda and envs\.SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2",
    ),
    _f(
        "sglang",
        "env_defaults",
        "sglang/srt/environ.py",
        r"SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2 = |SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB = "
        r"|SGLANG_ENABLE_POST_CAPTURE_KV_SIZING = ",
    ),
    _f(
        "sglang",
        "custom_all_reduce_v2_sm90_table",
        "sglang/srt/distributed/device_communicators/configs/custom_all_reduce_v2.py",
        r"^def _sm90_configs",
        until=r"^    \}$",
        max_lines=60,
    ),
    _f(
        "sglang",
        "tp_inputs",
        "sglang/srt/managers/scheduler.py sglang/srt/managers/scheduler_components/*.py",
        r"recv_reqs = broadcast_pyobj\(|work_reqs = (attn_cp_tp_)?broadcast_pyobj\(",
    ),
)


# ------------------------------------------------------------------------ reading archives
def _version_key(version: str) -> tuple:
    parts = []
    for piece in re.split(r"[.+]", version):
        m = re.fullmatch(r"(\d+)|post(\d+)|(\D+)(\d*)", piece)
        if m and m.group(1) is not None:
            parts.append((0, int(m.group(1)), ""))
        elif m and m.group(2) is not None:
            parts.append((1, int(m.group(2)), ""))
        else:
            parts.append((-1, 0, piece))
    return tuple(parts)


def _identify(path: Path) -> tuple[str, str, str] | None:
    """(engine, version, kind) of a wheel, an sdist or an unpacked sdist folder, else None."""
    name = path.name
    for engine in ENGINES:
        if path.is_dir():
            m = re.fullmatch(rf"{engine}-(.+)-sdist", name)
            if m:
                return engine, m.group(1), "sdist"
        elif name.endswith(".whl"):
            m = re.match(rf"{engine}-([^-]+)-", name)
            if m:
                return engine, m.group(1), "wheel"
        elif name.endswith((".tar.gz", ".tgz", ".zip")):
            m = re.fullmatch(rf"{engine}-(.+)\.(tar\.gz|tgz|zip)", name)
            if m:
                return engine, m.group(1), "sdist"
    return None


class Source:
    """One archive or unpacked sdist: its member paths (without an sdist's top folder)."""

    def __init__(self, path: Path, kind: str) -> None:
        self.path = path
        self.kind = kind
        self._members: dict[str, str] = {}
        if path.is_dir():
            for p in path.rglob("*"):
                if p.is_file():
                    self._members[p.relative_to(path).as_posix()] = str(p)
        elif path.name.endswith(".whl") or path.name.endswith(".zip"):
            with zipfile.ZipFile(path) as z:
                for n in z.namelist():
                    self._members[self._strip(n)] = n
        else:
            with tarfile.open(path) as t:
                for m in t.getmembers():
                    if m.isfile():
                        self._members[self._strip(m.name)] = m.name

    def _strip(self, name: str) -> str:
        if self.kind == "sdist" and "/" in name:
            return name.split("/", 1)[1]  # an sdist's members sit under NAME-VERSION/
        return name

    def members(self) -> list[str]:
        return list(self._members)

    def read(self, member: str) -> str:
        raw = self._members[member]
        if self.path.is_dir():
            data = Path(raw).read_bytes()
        elif self.path.name.endswith((".whl", ".zip")):
            with zipfile.ZipFile(self.path) as z:
                data = z.read(raw)
        else:
            with tarfile.open(self.path) as t:
                f = t.extractfile(raw)
                data = f.read() if f else b""
        return data.decode("utf-8", errors="replace")


def discover(root: Path) -> dict[tuple[str, str], list[Source]]:
    """Releases under `root`, each with its sources, wheels first."""
    found: dict[tuple[str, str], list[Source]] = {}
    candidates = [root, *root.rglob("*")]
    for p in candidates:
        ident = _identify(p)
        if ident is None:
            continue
        engine, version, kind = ident
        if any(parent.name.endswith("-sdist") for parent in p.parents):
            continue  # inside an unpacked sdist
        found.setdefault((engine, version), []).append(Source(p, kind))
    for sources in found.values():
        sources.sort(key=lambda s: s.kind != "wheel")
    return found


def _lines(fact: Fact, text: str) -> Iterator[tuple[int, str]]:
    pattern = re.compile(fact.line)
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if pattern.search(lines[i]):
            if fact.until is None:
                yield i + 1, lines[i]
            else:
                end = re.compile(fact.until)
                j = i
                while j < len(lines) and j - i < fact.max_lines:
                    yield j + 1, lines[j]
                    if j > i and end.search(lines[j]):
                        break
                    j += 1
                i = j
        i += 1


def scan(engine: str, version: str, sources: list[Source], wanted: set[str] | None) -> int:
    """Print every fact's lines for one release; return how many lines were printed."""
    owner: dict[str, Source] = {}
    for source in sources:  # wheels first: they win on a path both hold
        for member in source.members():
            owner.setdefault(member, source)
    printed = 0
    cache: dict[str, str] = {}
    for fact in FACTS:
        if fact.engine != engine or (wanted and fact.name not in wanted):
            continue
        members = sorted(m for m in owner if any(fnmatch.fnmatchcase(m, pat) for pat in fact.paths))
        for member in members:
            if member not in cache:
                cache[member] = owner[member].read(member)
            tag = " (sdist)" if owner[member].kind == "sdist" else ""
            for lineno, text in _lines(fact, cache[member]):
                print(f"{engine}=={version} {fact.name} {member}{tag}:{lineno}: {text.strip()}")
                printed += 1
    return printed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="folder of downloaded wheels / sdists")
    parser.add_argument("--engine", choices=ENGINES, help="only this engine")
    parser.add_argument("--version", action="append", help="only this version (repeatable)")
    parser.add_argument("--fact", action="append", help="only this fact (repeatable)")
    args = parser.parse_args(argv)

    if not args.folder.is_dir():
        print(f"no such folder: {args.folder}", file=sys.stderr)
        return 2
    releases = discover(args.folder)
    if not releases:
        print(f"no vllm/sglang wheel or sdist under {args.folder}", file=sys.stderr)
        return 1
    wanted = set(args.fact) if args.fact else None
    if wanted:
        unknown = wanted - {f.name for f in FACTS}
        if unknown:
            print(f"unknown fact(s): {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
    for engine, version in sorted(releases, key=lambda k: (k[0], _version_key(k[1]))):
        if args.engine and engine != args.engine:
            continue
        if args.version and version not in args.version:
            continue
        kinds = ", ".join(f"{s.kind} {s.path.name}" for s in releases[(engine, version)])
        print(f"## {engine}=={version} ({kinds})")
        scan(engine, version, releases[(engine, version)], wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
