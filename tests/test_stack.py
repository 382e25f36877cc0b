"""The resolved stack: each rule decided once, and the defects that came from re-deriving it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli

from roofline.calc.memory import weights_bytes
from roofline.calc.phases import estimate
from roofline.calc.placement import Parallel
from roofline.calc.stack import MemoryPolicy, Stack
from roofline.spec.catalog import load_engine, load_hardware, load_model
from roofline.spec.precision import Precision, released

ROOT = Path(__file__).resolve().parent.parent


def test_the_datasheet_ceiling_runs_no_engine_and_keeps_all_memory() -> None:
    m, hw, vllm = load_model("llama-3.1-8b"), load_hardware("h100-sxm"), load_engine("vllm")
    fast = Stack.resolve(m, hw, ceiling="datasheet", engine=vllm)
    assert fast.engine is None and fast.ceilings.engine is None
    assert fast.memory == MemoryPolicy(1.0, 8192, None)  # f = 1, the default 8,192 budget
    real = Stack.resolve(m, hw, engine=vllm)
    # vllm.yaml: gpu_memory_utilization 0.90, 8,192 batched tokens, 1,024 sequences
    assert real.engine is vllm and real.memory == MemoryPolicy(0.9, 8192, 1024)
    assert real.budget.usable_bytes == pytest.approx(0.9 * hw.memory_bytes)


def test_given_memory_terms_win_over_the_engine() -> None:
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    s = Stack.resolve(
        m, hw, engine=load_engine("vllm"), memory_fraction=0.5, prefill_token_budget=None
    )
    assert s.memory == MemoryPolicy(0.5, None, 1024)


@pytest.mark.parametrize("bad", [0.0, 1.5])
def test_a_memory_fraction_outside_0_1_is_refused(bad: float) -> None:
    with pytest.raises(Exception, match="`memory_fraction`"):
        MemoryPolicy(bad)


def test_the_engine_formats_apply_to_every_command() -> None:
    """Defect: `--engine llama.cpp --weights q4_0` gave 3.791 GB outside `validate --published`.
    llama.cpp writes a Q4_0 file's output tensor in Q6_K (llama-quant.cpp), so Llama-2-7B's
    LM head, V·D = 32,000 × 4,096 = 131,072,000 weights, is stored at 6.5625 bits (Q6_K: 210
    bytes per 256) instead of 4.5 (Q4_0: 18 bytes per 32): 131,072,000 × 2.0625 / 8 =
    33,792,000 bytes more."""
    m, hw = load_model("llama-2-7b"), load_hardware("a100-sxm-80gb")
    q4 = Precision(weights="q4_0", activations="fp16", kv="fp16")
    bare = Stack.resolve(m, hw, q4)
    cpp = Stack.resolve(m, hw, q4, engine=load_engine("llama.cpp"))
    assert cpp.precision.weights == "q4_0,lm_head=q6_k"
    extra = 32_000 * 4_096 * (6.5625 - 4.5) / 8
    assert extra == 33_792_000
    w_bare = estimate(m, bare, [1], 128, 16).cases[0].weights_bytes
    w_cpp = estimate(m, cpp, [1], 128, 16).cases[0].weights_bytes
    assert w_cpp - w_bare == pytest.approx(extra, rel=1e-12)
    assert w_cpp == pytest.approx(weights_bytes(m, cpp.precision), rel=1e-12)


def test_the_cli_applies_the_engine_formats_in_estimate_and_kv(capsys) -> None:
    args = ["--hardware", "a100-sxm-80gb", "--engine", "llama.cpp", "--json"]
    code, out, _ = run_cli(capsys, "estimate", "llama-2-7b", "--weights", "q4_0", *args)
    assert code == 0
    est = json.loads(out)
    assert est["precision"]["weights"] == "q4_0,lm_head=q6_k"
    code, out, _ = run_cli(
        capsys, "kv", "llama-2-7b", "--weights-dtype", "q4_0", "--context", "1152", *args
    )
    assert code == 0
    kv = json.loads(out)[0]
    assert kv["weights_bytes"] == pytest.approx(est["cases"][0]["weights_bytes"], rel=1e-12)


def test_plan_screens_with_the_engines_memory_fraction() -> None:
    """Defect: `plan` used f = 0.9 whatever the engine said, so the deployment its command line
    reproduces in `serve` held different KV. LMDeploy claims f = 0.8 (lmdeploy.yaml); the
    plan's KV capacity must be the one `serve` builds for the same policy, and the usable
    memory behind it 0.8 × 85,520,809,984 B (H100 SXM5, 79.6 GiB as nvidia-smi reports)."""
    from roofline.plan import Requirement, Space, build_groups, scheduler_policy
    from roofline.serve.simulate import kv_capacity_tokens
    from roofline.studies.economics import load_prices

    m, hw, eng = load_model("llama-3.1-8b"), load_hardware("h100-sxm"), load_engine("lmdeploy")
    space = Space(("h100-sxm",), max_gpus=1, max_batches=(64,), serving="aggregated")
    groups, _ = build_groups(m, [hw], Requirement(2, 512, 64, 1.0, 0.1), space, load_prices(), eng)
    (g,) = [g for g in groups if g.fmt == "bf16"]
    stack = Stack.resolve(m, hw, engine=eng)
    assert stack.budget.usable_bytes == pytest.approx(0.8 * hw.memory_bytes)
    assert g.kv_capacity_tokens == kv_capacity_tokens(m, stack, scheduler_policy(64, False))
    at_09 = kv_capacity_tokens(
        m, stack.with_memory(memory_fraction=0.9), scheduler_policy(64, False)
    )
    # 0.1 of the capacity more is 8.55e9 B more, 131,072 B per bf16 token of Llama-3.1-8B
    # (2 · 32 layers · 8 kv heads · 128 · 2 B): 65,247 more tokens, give or take the floor
    assert at_09 - g.kv_capacity_tokens == pytest.approx(0.1 * hw.memory_bytes / 131_072, abs=1)


@pytest.mark.parametrize(
    ("engine", "max_seqs", "budget"),
    [
        ("vllm", 256, 8192),  # vllm.yaml prefill_token_budget 8192
        ("vllm", 10_000, 10_000),  # raised to max_seqs: a decode step of all must fit
        ("llama.cpp", 256, 512),  # llama.cpp.yaml: n_batch 512
        ("lmdeploy", 256, 8192),  # whole prompts: DEFAULT_PREFILL_TOKEN_BUDGET per step
        (None, 64, 8192),  # the datasheet ceiling runs no engine: the default
    ],
)
def test_one_step_token_budget_for_serve_and_plan(engine, max_seqs, budget) -> None:
    """Defect: the step's token budget existed three times (the engine's 8192, `Policy`'s 2048,
    `plan.TOKEN_BUDGET` 2048), so `serve --engine vllm` scheduled 2048-token steps and held KV
    for them where the engine profile says 8192. Now a policy without a budget takes the
    stack's (`MemoryPolicy.step_token_budget`), in `serve` and in `plan` alike."""
    from roofline.plan import scheduler_policy
    from roofline.serve.config import ServeConfig, serve_runs
    from roofline.serve.policy import POLICIES

    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    eng = load_engine(engine) if engine else None
    ceiling = "achievable" if engine else "datasheet"
    stack = Stack.resolve(m, hw, ceiling=ceiling, engine=eng)
    assert (
        POLICIES["continuous"].with_overrides(max_seqs=max_seqs).on(stack.memory).token_budget
        == budget
    )
    assert scheduler_policy(max_seqs, False).on(stack.memory).token_budget == budget
    runs = serve_runs(
        ServeConfig(
            model="llama-3.1-8b",
            hardware="h100-sxm",
            engine=engine or "none",
            ceiling=ceiling,
            overrides={"max_seqs": max_seqs},
        )
    )
    assert runs.policies[0].token_budget == budget
    # a budget given on the command line still wins
    assert (
        POLICIES["chunked"].with_overrides(token_budget=4096).on(stack.memory).token_budget == 4096
    )


def test_plan_and_serve_hold_the_same_kv_for_one_candidate() -> None:
    """The KV capacity `plan` screens with is the one `serve` builds for the same stack and
    max batch (the same token budget, the engine's)."""
    from roofline.plan import Requirement, Space, build_groups
    from roofline.serve.config import ServeConfig, serve_runs
    from roofline.studies.economics import load_prices

    m, hw, eng = load_model("llama-3.1-8b"), load_hardware("h100-sxm"), load_engine("vllm")
    space = Space(("h100-sxm",), max_gpus=1, max_batches=(128,), serving="aggregated")
    groups, _ = build_groups(m, [hw], Requirement(2, 512, 64, 1.0, 0.1), space, load_prices(), eng)
    (g,) = [g for g in groups if g.fmt == "bf16"]
    runs = serve_runs(
        ServeConfig(model="llama-3.1-8b", hardware="h100-sxm", overrides={"max_seqs": 128})
    )
    assert g.kv_capacity_tokens == runs.deployments[0].pool.kv_capacity_tokens


def test_plan_confirms_on_a_device_given_as_a_yaml_file(tmp_path, capsys) -> None:
    """Defect: `plan --hardware my-gpu.yaml` screened, then failed in the simulator with
    "unknown hardware" because the confirmation looked the device up by name again."""
    spec = (ROOT / "hardware_specs" / "h100-sxm.yaml").read_text()
    mine = tmp_path / "my-gpu.yaml"
    mine.write_text(spec.replace("name: h100-sxm", "name: my-gpu", 1))
    code, out, err = run_cli(
        capsys,
        "plan",
        "llama-3.2-1b",
        "--rate",
        "2",
        "--hardware",
        str(mine),
        "--price",
        "my-gpu=2.0",
        "--max-gpus",
        "1",
        "--max-batches",
        "16",
        "--confirm",
        "1",
        "--requests",
        "60",
        "--json",
    )
    assert code == 0, err
    r = json.loads(out)
    assert r["chosen"]["hardware"] == "my-gpu" and not r["unconfirmed"]


def test_a_user_prefill_device_without_a_price_is_simulated(tmp_path, capsys) -> None:
    """Defect: disaggregated `serve` with a prefill device from a YAML file said "unknown
    hardware"; it is simulated, and only its cost is missing."""
    spec = (ROOT / "hardware_specs" / "h100-sxm.yaml").read_text()
    mine = tmp_path / "my-gpu.yaml"
    mine.write_text(spec.replace("name: h100-sxm", "name: my-gpu", 1))
    argv = [
        "serve",
        "llama-3.2-1b",
        "--hardware",
        "h100-sxm",
        "--policy",
        "disaggregated",
        "--prefill-hardware",
        str(mine),
        "--rate",
        "2",
        "--requests",
        "50",
        "--json",
    ]
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    r = json.loads(out)
    assert r["requests_completed"] == 50 and r["economics"] is None  # simulated, not priced
    code, out, err = run_cli(capsys, *argv[:-1])
    assert code == 0, err
    assert "no on-demand price for my-gpu" in out and "unknown hardware" not in out
    assert "pass --price my-gpu=" in out  # an option `serve` has
    # priced with --price: one prefill and one decode replica of one GPU each, $/h added
    code, out, err = run_cli(capsys, *argv, "--price", "my-gpu=2.0")
    assert code == 0, err
    from roofline.studies.economics import load_prices

    h100 = load_prices().usd_per_gpu_hour("h100-sxm", "on-demand")
    assert json.loads(out)["economics"]["usd_per_hour"] == pytest.approx(2.0 + h100)


def test_the_core_imports_no_cli_or_rendering_library() -> None:
    """The calculator core imports no rich, typer or matplotlib (docs/architecture.md)."""
    code = (
        "import sys, roofline, roofline.calc.phases, roofline.plan, roofline.serve.config, "
        "roofline.studies.speculative, roofline.studies.diffusion, roofline.serve.published, "
        "roofline.studies.economics, "
        "roofline.calc.memory, roofline.calc.parallel, roofline.calc.stack; "
        "print(sorted(m for m in ('rich', 'typer', 'matplotlib', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _core_modules() -> list[Path]:
    pkg = ROOT / "roofline"
    skip = {"cli", "kernels", "render"}
    return [p for p in pkg.rglob("*.py") if not (set(p.relative_to(pkg).parts) & skip)]


def test_no_core_message_names_a_flag() -> None:
    """Core messages name parameters in backticks (`tp=3`); the CLI turns them into its own
    flags (`cli.common.with_flags`). A `--flag` inside a string literal of the core is a
    message that is wrong for an API caller and for any command spelling it differently."""
    import ast

    offenders = []
    for path in _core_modules():
        tree = ast.parse(path.read_text())
        docstrings = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
            and n.body
            and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)
        }

        def names_a_flag(text: str) -> bool:
            return any(w.startswith("--") and w[2:3].isalpha() for w in text.split())

        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):  # an f-string: its parts read as one text,
                text = "".join(  # a formatted value as a name (f"--{name}" is a flag too)
                    v.value if isinstance(v, ast.Constant) else "x" for v in node.values
                )
                if names_a_flag(text):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and names_a_flag(node.value)
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert sorted(set(offenders)) == []


def _runtime_imports(tree):
    """The `from ... import` statements that run: those under `if TYPE_CHECKING:` do not."""
    import ast

    todo = [tree]
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and getattr(child.test, "id", "") == "TYPE_CHECKING":
                todo.extend(child.orelse)
                continue
            if isinstance(child, ast.ImportFrom):
                yield child
            todo.append(child)


def test_no_import_cycle_in_the_core() -> None:
    """Module-level imports of the core form a DAG (function-local imports included: a cycle
    crossed inside a function is still a cycle)."""
    import ast

    pkg = ROOT / "roofline"
    graph: dict[str, set[str]] = {}
    for path in _core_modules():
        rel = path.relative_to(pkg).with_suffix("")
        name = ".".join(("roofline", *rel.parts)).removesuffix(".__init__")
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        deps = set()
        for node in _runtime_imports(ast.parse(path.read_text())):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
                deps.add(target)
                deps.update(f"{target}.{a.name}" for a in node.names)
        graph[name] = deps
    modules = set(graph)
    graph = {k: {d for d in v if d in modules and d != k} for k, v in graph.items()}
    # `roofline/__init__` re-exports the API and every module is inside the package: skip it
    graph.pop("roofline", None)
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> None:
        state[n] = 1
        for d in graph.get(n, ()):
            if d == "roofline":
                continue
            if state.get(d) == 1:
                raise AssertionError(" -> ".join([*path, n, d]))
            if d not in state:
                visit(d, [*path, n])
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n, [])


def test_a_stack_on_another_device_has_that_devices_ceilings() -> None:
    m = load_model("llama-3.1-8b")
    h100, h200 = load_hardware("h100-sxm"), load_hardware("h200")
    s = Stack.resolve(m, h100, engine=load_engine("vllm"), parallel=Parallel(tp=2))
    t = s.on(h200)
    assert t.parallel == s.parallel and t.engine is s.engine and t.precision == s.precision
    assert t.ceilings.bytes_per_s == pytest.approx(
        h200.memory_bandwidth_bytes_per_s * h200.achievable.memory_bandwidth_fraction
    )
    assert not math.isclose(t.ceilings.bytes_per_s, s.ceilings.bytes_per_s)


# ---- one KV capacity: serve allocates what kv and estimate count (issue 24) ----------------
def test_kv_token_equivalents_of_gpt_oss_20b_by_hand() -> None:
    """gpt-oss-20b: 24 layers alternating full attention and a 128-token window, 8 kv heads of
    64, so every layer holds e = 2·8·64 = 1,024 values per token it keeps. A sequence of S
    tokens holds 12·e·S + 12·e·min(S, 128): S + min(S, 128) tokens of the full layers' KV."""
    from roofline.calc.footprint import kv_growth_elems_per_token, kv_token_equivalents

    m = load_model("gpt-oss-20b")
    assert kv_growth_elems_per_token(m) == 12 * 2 * 8 * 64
    S = np.array([1, 100, 128, 129, 32_768])
    assert kv_token_equivalents(m, S).tolist() == (S + np.minimum(S, 128)).tolist()
    llama = load_model("llama-3.1-8b")  # no local layers: one token is one token
    assert kv_token_equivalents(llama, S).tolist() == S.tolist()


def test_kv_token_equivalents_of_llama_4_scout_by_hand() -> None:
    """Llama 4 Scout: 48 layers, three chunked (C = 8,192) to one global, 8 kv heads of 128.
    36 chunked layers hold min(S, 8,192)·e and 12 global ones S·e, so a sequence is worth
    S + 36/12 · min(S, 8,192) = S + 3·min(S, 8,192) global tokens."""
    from roofline.calc.footprint import kv_token_equivalents

    m = load_model("llama-4-scout")
    S = np.array([1, 8_191, 8_192, 8_193, 131_072])
    assert kv_token_equivalents(m, S).tolist() == [4, 32_764, 32_768, 32_769, 155_648]


def test_token_equivalents_read_once_match_what_a_sequence_holds() -> None:
    """The serving loop's `TokenEquivalents`, whose terms are read from the model once, is the
    KV a sequence holds (`kv_elems_per_sequence`, layer by layer through each mixer) less the
    constant state, over the global per-token g, rounded up: for every bundled model, on both
    sides of every window and chunk size and at the longest context."""
    from roofline.calc.footprint import (
        TokenEquivalents,
        kv_elems_per_sequence,
        kv_growth_elems_per_token,
    )
    from roofline.spec.catalog import model_catalog

    bounded = 0
    for name in model_catalog().names():
        m = load_model(name)
        worth = TokenEquivalents.of(m)
        bounded += not worth.identity
        edges = [L + d for L in worth.limits.tolist() for d in (-1, 0, 1)]
        S = np.array([1, 2, 1000, *edges, m.max_context - 1, m.max_context])
        g = kv_growth_elems_per_token(m)
        held = kv_elems_per_sequence(m, S) - m.state_elems_per_sequence - g * S
        expected = S + (np.ceil(held / g) if g else 0)
        assert worth(S).tolist() == expected.astype(np.int64).tolist(), name
    assert bounded >= 5  # gpt-oss, Gemma 2 and 3, Llama 4, Mistral-style windows


@pytest.mark.parametrize(
    ("model", "context"), [("gpt-oss-20b", 32_768), ("gemma-3-12b", 32_768), ("llama-3.1-8b", 1280)]
)
def test_serve_holds_as_many_sequences_as_kv_and_estimate(model: str, context: int) -> None:
    """The serving pool's blocks divided by what one sequence of `context` tokens takes is the
    batch `estimate --batch max` fits (before: gpt-oss-20b at 32k held 39 sequences in serve
    against 77 in kv, the window layers charged at full context). serve reserves the
    activations of its token budget and estimate those of the prefill it costs, so they may
    differ by a sequence."""
    from roofline.calc.footprint import kv_token_equivalents
    from roofline.calc.phases import estimate
    from roofline.serve.policy import policy
    from roofline.serve.simulate import build_deployment

    m = load_model(model)
    stack = Stack.resolve(m, load_hardware("h100-sxm"), released(m), engine=load_engine("vllm"))
    p = policy("engine", stack.engine).on(stack.memory)
    d = build_deployment(m, stack, p)
    seqs = d.pools[0].kv_capacity_tokens // int(kv_token_equivalents(m, context))
    fits = estimate(m, stack, ["max"], context - 256, 256).batch_max["fits_in_memory"]
    assert abs(seqs - fits) <= 1, (seqs, fits)
