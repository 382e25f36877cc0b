"""Bad and edge inputs to every command: each is refused with one line on stderr that names
what is wrong, exit status non-zero, no traceback, nothing written where it should not be.

The cases run in-process (`roofline.cli.main`), against a folder of bad files made once per
module: binary and non-UTF-8 text, a folder and a named pipe where a file is expected, a
5,000-character name, a YAML alias bomb, NaN/inf spec values, results files with NaN or huge
timings or unknown models, traces with NaN/inf/1e30 tokens, configs with wrong types. The
signal tests (end of file) run `measure` and `check` in a subprocess and interrupt them.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import typing
from pathlib import Path

import pytest

from roofline.cli import main

ROOT = Path(__file__).resolve().parents[1]
LONG = "x" * 5000  # longer than any file name the system allows
HW = (ROOT / "hardware_specs" / "h100-sxm.yaml").read_text(encoding="utf-8")
MODEL = (ROOT / "model_specs" / "tiny-llama-30m.yaml").read_text(encoding="utf-8")
HF = ROOT / "tests" / "fixtures" / "hf" / "Mistral-7B-v0.1" / "config.json"

BOMB = """name: bomb
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
aliases: *i
"""


def _sub(text: str, old: str, new: str) -> str:
    """`text` with `old` replaced, which must be there (a bad file that is not bad proves
    nothing)."""
    assert old in text, old
    return text.replace(old, new)


def _results(**change: object) -> dict:
    """A small valid results document (one GEMM point), with `change` applied to it."""
    timing = dict(
        median_s=1e-3, p20_s=9e-4, p80_s=1.1e-3, min_s=8e-4, repeats=5, method="perf_counter"
    )
    point = dict(
        family="gemm_peak",
        kernel="gemm",
        name="gemm_peak gemm fp32 M=64 N=64 K=64",
        dtype="fp32",
        shape=dict(M=64, N=64, K=64),
        flops=2 * 64**3,
        bytes=3 * 4 * 64**2,
        timing=timing,
    )
    doc = dict(
        schema_version=1,
        suite="ci",
        complete=True,
        environment=dict(
            device=dict(kind="cpu", name="test CPU"),
            torch_version="2",
            python_version="CPython 3",
            threads=1,
            started_at="t0",
            finished_at="t1",
        ),
        points=[point],
    )
    for key, value in change.items():
        target, *path = key.split(".")
        holder: dict = doc if target == "doc" else point if target == "point" else timing
        for p in path[:-1]:
            holder = holder[p]
        holder[path[-1]] = value
    return doc


def _unknown_model_results() -> dict:
    doc = _results()
    step = dict(
        doc["points"][0],
        family="decode_step",
        kernel="model",
        model="no-such-model",
        name="decode_step no-such-model fp32 B=1 T=1 S=128",
        shape=dict(B=1, T=1, S=128),
    )
    doc["points"].append(step)
    return doc


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of bad (and a few good) files, shared by every case."""
    d = tmp_path_factory.mktemp("bad")
    text = {
        "empty.yaml": "",
        "list.yaml": "- a\n- b\n",
        "scalar.yaml": "just text\n",
        "broken.yaml": "name: [unclosed\n",
        "bomb.yaml": BOMB,
        "deep.yaml": "name: deep\na: " + "[" * 50_000 + "]" * 50_000 + "\n",
        "trace-deep.jsonl": "[" * 100_000 + "]" * 100_000 + "\n",
        "config-deep.json": "[" * 100_000 + "]" * 100_000,
        "results-deep.json": '{"a": ' * 100_000 + "1" + "}" * 100_000,
        "hw-nan.yaml": _sub(HW, "bf16: 989.4", "bf16: .nan"),
        "hw-inf.yaml": _sub(
            HW, "memory_bandwidth_gb_per_s: 3350", "memory_bandwidth_gb_per_s: .inf"
        ),
        "hw-negative.yaml": _sub(HW, "memory_bytes: 85520809984", "memory_bytes: -80"),
        "hw-string.yaml": _sub(HW, "memory_bytes: 85520809984", "memory_bytes: eighty"),
        "model-nan.yaml": _sub(MODEL, "d_model: 512", "d_model: .nan"),
        "model-inf.yaml": _sub(MODEL, "max_context: 4096", "max_context: .inf"),
        "model-string.yaml": _sub(MODEL, "layers: 6", "layers: six"),
        "model-zero.yaml": _sub(MODEL, "heads: 8", "heads: 0"),
        "model-extra.yaml": MODEL + "surprise: 1\n",
        "model-huge-int.yaml": _sub(MODEL, "vocab_size: 8192", f"vocab_size: {10**20}"),
        "model-layers.yaml": _sub(MODEL, "layers: 6", "layers: 10000000"),
        "config-list.json": "[1, 2]",
        "config-broken.json": '{"hidden_size": ',
        "config-empty.json": "",
        "trace-nan.csv": "arrival_s,input_tokens,output_tokens\n0,nan,10\n",
        "trace-inf.csv": "arrival_s,input_tokens,output_tokens\n0,inf,10\n",
        "trace-huge.csv": "arrival_s,input_tokens,output_tokens\n0,1e30,10\n",
        "trace-neg.csv": "arrival_s,input_tokens,output_tokens\n0,-5,10\n",
        "trace-frac.csv": "arrival_s,input_tokens,output_tokens\n0,10.5,10\n",
        "trace-text.csv": "arrival_s,input_tokens,output_tokens\n0,ten,10\n",
        "trace-arrival-nan.csv": "arrival_s,input_tokens,output_tokens\nnan,10,10\n",
        "trace-arrival-inf.csv": "arrival_s,input_tokens,output_tokens\ninf,10,10\n",
        "trace-header.csv": "when,input_tokens,output_tokens\n0,10,10\n",
        "trace-short.csv": "arrival_s,input_tokens,output_tokens\n0,10\n",
        "trace-empty.csv": "arrival_s,input_tokens,output_tokens\n",
        "trace-gen-nan.jsonl": '{"arrival_s": 0, "input_tokens": 10, "output_tokens": NaN}\n',
        "trace-gen-inf.jsonl": '{"arrival_s": 0, "input_tokens": 10, "output_tokens": Infinity}\n',
        "trace-gen-huge.jsonl": '{"arrival_s": 0, "input_tokens": 10, "output_tokens": 1e30}\n',
        "trace-list.jsonl": "[0, 10, 10]\n",
        "trace-broken.jsonl": '{"arrival_s": \n',
        "trace-bool.jsonl": '{"arrival_s": 0, "input_tokens": true, "output_tokens": 5}\n',
        "trace-prefix.jsonl": '{"arrival_s": 0, "input_tokens": 10, "output_tokens": 5, '
        '"prefix_id": 1, "prefix_tokens": 50}\n',
        "trace.txt": "arrival_s,input_tokens,output_tokens\n0,10,10\n",
        "results-broken.json": '{"schema_version": 1, ',
        "results-list.json": "[]",
        "results-empty.json": "",
    }
    for name, content in text.items():
        (d / name).write_text(content, encoding="utf-8")
    results = {
        "results-nan.json": _results(**{"timing.median_s": float("nan")}),
        "results-inf.json": _results(**{"timing.p80_s": float("inf")}),
        "results-huge.json": _results(**{"timing.median_s": 1e300}),
        "results-zero.json": _results(**{"timing.min_s": 0}),
        "results-flops-inf.json": _results(**{"point.flops": float("inf")}),
        "results-flops-huge.json": _results(**{"point.bytes": 1e200}),
        "results-family.json": _results(**{"point.family": "warp_drive"}),
        "results-schema.json": _results(**{"doc.schema_version": 99}),
        "results-unknown-model.json": _unknown_model_results(),
    }
    for name, doc in results.items():
        (d / name).write_text(json.dumps(doc), encoding="utf-8")
    cfg = json.loads(HF.read_text(encoding="utf-8"))
    configs = {
        "config-hidden-str": dict(cfg, hidden_size="4096"),
        "config-arch-str": dict(cfg, architectures="LlamaForCausalLM"),
        "config-layers-huge": dict(cfg, num_hidden_layers=10**7),
        "config-layers-neg": dict(cfg, num_hidden_layers=-1),
        "config-heads-null": dict(cfg, num_attention_heads=None),
        "config-vocab-float": dict(cfg, vocab_size=32000.5),
        "config-hidden-list": dict(cfg, hidden_size=[4096]),
        "config-no-hidden": {k: v for k, v in cfg.items() if k != "hidden_size"},
        "config-nan": dict(cfg, rms_norm_eps=float("nan"), hidden_size=float("nan")),
        "config-arch-unknown": dict(cfg, architectures=["WarpDriveForCausalLM"], model_type="warp"),
    }
    for name, c in configs.items():
        (d / name).mkdir()
        (d / name / "config.json").write_text(json.dumps(c), encoding="utf-8")
    for name in ("binary.yaml", "binary.json", "binary.csv", "binary.jsonl"):
        (d / name).write_bytes(bytes(range(256)) * 4)
    for name in ("latin1.yaml", "latin1.json", "latin1.csv"):
        (d / name).write_bytes("name: caf\xe9\n".encode("latin-1"))
    for name in ("folder.yaml", "folder.json", "folder.csv"):
        (d / name).mkdir()
    for name in ("fifo.yaml", "fifo.json", "fifo.csv", "fifo.png"):
        os.mkfifo(d / name)
    with open(d / "huge.yaml", "wb") as f:  # sparse: 80 MB on paper, nothing on disk
        f.truncate(80 * 2**20)
    (d / "ro").mkdir()
    (d / "ro").chmod(0o555)
    (d / "out").mkdir()
    return d


def _listing(folder: Path) -> dict[str, tuple[int, float]]:
    return {
        str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime)
        for p in sorted(folder.rglob("*"))
        if not (p.is_dir() and p.name == "ro")
    }


def refuse(capsys: pytest.CaptureFixture[str], bad: Path, argv: list[str], needle: str) -> str:
    """Run `argv` (BAD/ replaced by the bad folder); check the refusal and that nothing in
    the bad folder changed."""
    argv = [a.replace("BAD/", f"{bad}/") for a in argv]
    before = _listing(bad)
    try:
        main(argv)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    out, err = capsys.readouterr()
    assert code != 0, f"exit 0 for {argv}: {out[-300:]}"
    assert "Traceback" not in err + out, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert needle.lower() in err.lower(), err
    assert _listing(bad) == before, "a refused command wrote or changed a file"
    return err


# ---- files where a spec is expected ------------------------------------------------------
MODEL_READERS = [
    ["estimate", "{}"],
    ["kv", "{}"],
    ["speculate", "{}", "--draft", "llama-3.2-1b"],
    ["speculate", "llama-3.1-8b", "--draft", "{}"],
    ["diffusion", "{}"],
    ["serve", "{}"],
    ["models", "show", "{}"],
    ["plot", "batch", "{}"],
    ["plot", "kv", "{}", "-o", "BAD/out/kv.png"],
    ["plot", "roofline", "-m", "{}", "-o", "BAD/out/r.png"],
]
HARDWARE_READERS = [
    ["estimate", "llama-3.1-8b", "-H", "{}"],
    ["kv", "llama-3.1-8b", "-H", "{}"],
    ["serve", "llama-3.1-8b", "-H", "{}"],
    ["hardware", "show", "{}"],
    ["speculate", "llama-3.1-8b", "--heads", "0.1", "-H", "{}"],
    ["plot", "roofline", "-H", "{}", "-o", "BAD/out/r.png"],
    ["serve", "llama-3.1-8b", "--policy", "disaggregated", "--prefill-hardware", "{}"],
]
SPEC_FILES = [
    ("BAD/binary.yaml", "not UTF-8"),
    ("BAD/latin1.yaml", "not UTF-8"),
    ("BAD/folder.yaml", "folder"),
    ("BAD/fifo.yaml", "not a regular file"),
    ("BAD/huge.yaml", "bytes"),
    ("BAD/empty.yaml", "mapping"),
    ("BAD/list.yaml", "mapping"),
    ("BAD/scalar.yaml", "mapping"),
    ("BAD/broken.yaml", "broken YAML"),
    ("BAD/bomb.yaml", "expands"),
    ("BAD/deep.yaml", "nested"),
    ("BAD/missing.yaml", "no such file"),
    (f"BAD/{LONG}.yaml", "shorter"),
]


@pytest.mark.parametrize("path,needle", SPEC_FILES)
@pytest.mark.parametrize("argv", MODEL_READERS + HARDWARE_READERS, ids=lambda a: "-".join(a[:2]))
def test_unreadable_spec_file(argv, path, needle, bad, capsys):
    refuse(capsys, bad, [a.replace("{}", path) for a in argv], needle)


MODEL_VALUES = [
    ("model-nan", "d_model"),
    ("model-inf", "max_context"),
    ("model-string", "layers"),
    ("model-zero", "heads"),
    ("model-extra", "surprise"),
    ("model-huge-int", "vocab_size"),
    ("model-layers", "layers"),
    ("hw-nan", ""),
]
HARDWARE_VALUES = [
    ("hw-nan", "bf16"),
    ("hw-inf", "memory_bandwidth"),
    ("hw-negative", "memory_bytes"),
    ("hw-string", "memory_bytes"),
    ("model-nan", ""),
]


@pytest.mark.parametrize("name,field", MODEL_VALUES)
@pytest.mark.parametrize("argv", MODEL_READERS, ids=lambda a: "-".join(a[:2]))
def test_bad_model_values(argv, name, field, bad, capsys):
    refuse(capsys, bad, [a.replace("{}", f"BAD/{name}.yaml") for a in argv], field)


@pytest.mark.parametrize("name,field", HARDWARE_VALUES)
@pytest.mark.parametrize("argv", HARDWARE_READERS, ids=lambda a: "-".join(a[:2]))
def test_bad_hardware_values(argv, name, field, bad, capsys):
    refuse(capsys, bad, [a.replace("{}", f"BAD/{name}.yaml") for a in argv], field)


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["estimate", LONG], "unknown model"),
        (["estimate", "-H", LONG], "unknown hardware"),
        (["models", "show", LONG], "unknown model"),
        (["kv", "\x00"], "unknown model"),
        (["estimate", "no-such-model"], "models list"),
        (["estimate", "-H", "no-such-gpu"], "hardware list"),
        (["estimate", "BAD/fifo.csv"], "unknown model"),
    ],
)
def test_bad_names(argv, needle, bad, capsys):
    err = refuse(capsys, bad, argv, needle)
    assert len(err) < 600  # a 5,000-character name is not echoed whole


# ---- results files -------------------------------------------------------------------------
RESULTS_READERS = [
    ["validate", "{}"],
    ["calibrate", "{}"],
    ["plot", "validate", "{}", "-o", "BAD/out/v.png"],
    ["plot", "roofline", "--measured", "{}", "-o", "BAD/out/r.png"],
    ["validate", "{}", "-H", "h100-sxm"],
]
RESULTS_FILES = [
    ("results-nan.json", "median_s"),
    ("results-inf.json", "p80_s"),
    ("results-huge.json", "median_s"),
    ("results-zero.json", "min_s"),
    ("results-flops-inf.json", "flops"),
    ("results-flops-huge.json", "bytes"),
    ("results-family.json", "family"),
    ("results-schema.json", "schema_version"),
    ("results-unknown-model.json", "no-such-model"),
    ("results-broken.json", "results file"),
    ("results-list.json", "results file"),
    ("results-empty.json", "results file"),
    ("results-deep.json", "results file"),
    ("binary.json", "not UTF-8"),
    ("latin1.json", "not UTF-8"),
    ("folder.json", "folder"),
    ("fifo.json", "not a regular file"),
    ("missing.json", "no such file"),
    (f"{LONG}.json", "shorter"),
]


@pytest.mark.parametrize("name,needle", RESULTS_FILES)
@pytest.mark.parametrize("argv", RESULTS_READERS, ids=lambda a: "-".join(a[:2]))
def test_bad_results_file(argv, name, needle, bad, capsys):
    refuse(capsys, bad, [a.replace("{}", f"BAD/{name}") for a in argv], needle)


# ---- traces ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,needle",
    [
        ("trace-nan.csv", "input_tokens"),
        ("trace-inf.csv", "input_tokens"),
        ("trace-huge.csv", "input_tokens"),
        ("trace-neg.csv", "at least 1"),
        ("trace-frac.csv", "whole number"),
        ("trace-text.csv", "must be a number"),
        ("trace-arrival-nan.csv", "arrival_s"),
        ("trace-arrival-inf.csv", "arrival_s"),
        ("trace-header.csv", "header"),
        ("trace-short.csv", "fields"),
        ("trace-empty.csv", "no requests"),
        ("trace-gen-nan.jsonl", "output_tokens"),
        ("trace-gen-inf.jsonl", "output_tokens"),
        ("trace-gen-huge.jsonl", "output_tokens"),
        ("trace-list.jsonl", "JSON object"),
        ("trace-broken.jsonl", "not valid JSON"),
        ("trace-deep.jsonl", "too deep"),
        ("trace-bool.jsonl", "input_tokens"),
        ("trace-prefix.jsonl", "prefix_tokens"),
        ("trace.txt", ".csv or .jsonl"),
        ("binary.csv", "not UTF-8"),
        ("binary.jsonl", "not UTF-8"),
        ("latin1.csv", "not UTF-8"),
        ("folder.csv", "folder"),
        ("fifo.csv", "not a regular file"),
        ("missing.csv", "no such file"),
        (f"{LONG}.csv", "shorter"),
    ],
)
def test_bad_trace(name, needle, bad, capsys):
    refuse(capsys, bad, ["serve", "llama-3.1-8b", "--trace", f"BAD/{name}"], needle)


# ---- Hugging Face configs -----------------------------------------------------------------
@pytest.mark.parametrize(
    "path,needle",
    [
        ("BAD/config-hidden-str/config.json", "hidden_size"),
        ("BAD/config-arch-str/config.json", "architectures"),
        ("BAD/config-layers-huge/config.json", "layers"),
        ("BAD/config-layers-neg/config.json", "layers"),
        ("BAD/config-heads-null/config.json", "num_attention_heads"),
        ("BAD/config-vocab-float/config.json", "vocab"),
        ("BAD/config-hidden-list/config.json", "hidden_size"),
        ("BAD/config-no-hidden/config.json", "hidden_size"),
        ("BAD/config-nan/config.json", "hidden_size"),
        ("BAD/config-list.json", "JSON object"),
        ("BAD/config-broken.json", "broken JSON"),
        ("BAD/config-empty.json", "broken JSON"),
        ("BAD/config-deep.json", "too deep"),
        ("BAD/binary.json", "not UTF-8"),
        ("BAD/latin1.json", "not UTF-8"),
        ("BAD/folder.json", "folder"),
        ("BAD/fifo.json", "not a regular file"),
        ("BAD/missing.json", "no such file"),
        (f"BAD/{LONG}.json", "shorter"),
    ],
)
def test_bad_hf_config(path, needle, bad, capsys):
    refuse(capsys, bad, ["models", "import", path, "-o", "BAD/out/imported.yaml"], needle)


@pytest.mark.parametrize(
    "index,needle",
    [
        ('{"metadata": [1]}', "total_size"),
        ('{"metadata": {"total_size": "12"}}', "total_size"),
        ('{"metadata": {"total_size": -5}}', "total_size"),
        ("[]", "JSON object"),
        ('{"metadata": {"total_size": true}}', "total_size"),
        ("\xff", "not UTF-8"),
    ],
)
def test_bad_safetensors_index(index, needle, bad, capsys, tmp_path):
    (tmp_path / "config.json").write_bytes(HF.read_bytes())
    (tmp_path / "model.safetensors.index.json").write_bytes(index.encode("latin-1"))
    refuse(capsys, bad, ["models", "import", str(tmp_path / "config.json")], needle)


# ---- numeric flags: ranges, NaN, infinities, sizes that cannot be real -------------------
FLAGS = {
    "estimate": (["estimate"], ["--prompt", "--gen", "--tp", "--pp", "--ep", "--replicas"]),
    "kv": (["kv", "llama-3.1-8b"], ["--context"]),
    "diffusion": (["diffusion"], ["--prompt", "--gen", "--steps", "--batch"]),
    "speculate": (["speculate", "llama-3.1-8b", "--draft", "llama-3.2-1b"], ["--context"]),
    "serve": (
        ["serve"],
        [
            "--requests",
            "--prompt",
            "--gen",
            "--prefix-tokens",
            "--max-seqs",
            "--token-budget",
            "--block-size",
            "--replicas",
            "--prefill-replicas",
            "--decode-replicas",
            "--max-seq-len",
            "--tp",
            "--pp",
            "--ep",
            "--seed",
        ],
    ),
    "plot-serve": (
        ["plot", "serve", "llama-3.1-8b", "-o", "BAD/out/s.png"],
        ["--requests", "--prompt", "--gen", "--seed", "--tp"],
    ),
    "plot-kv": (["plot", "kv", "llama-3.1-8b", "-o", "BAD/out/k.png"], ["--batch"]),
    "collectives": (["collectives"], ["--world-size", "--reps"]),
    "check": (["check", "--device", "cpu"], ["--repeats", "--threads"]),
    "plan": (
        ["plan", "llama-3.1-8b", "--rate", "5"],
        ["--max-gpus", "--confirm", "--frontier-rows", "--requests", "--prompt", "--gen", "--seed"],
    ),
    "plot-plan": (
        ["plot", "plan", "llama-3.1-8b", "-o", "BAD/out/p.png"],
        ["--max-gpus", "--requests", "--prompt", "--gen"],
    ),
}
INT_FLAG_CASES = [
    (name, flag, value)
    for name, (_, flags) in FLAGS.items()
    for flag in flags
    for value in ("-1", "100000000000")
]


@pytest.mark.parametrize("name,flag,value", INT_FLAG_CASES)
def test_integer_flag_out_of_range(name, flag, value, bad, capsys):
    base = FLAGS[name][0]
    refuse(capsys, bad, [*base, flag, value], flag)


FLOAT_FLAGS = [
    (["serve"], "--rate"),
    (["serve"], "--sigma"),
    (["serve"], "--slo-ttft"),
    (["serve"], "--slo-tpot"),
    (["serve"], "--slo-attainment"),
    (["serve"], "--memory-fraction"),
    (["plot", "serve", "llama-3.1-8b", "-o", "BAD/out/s.png"], "--rate"),
    (["plot", "serve", "llama-3.1-8b", "-o", "BAD/out/s.png"], "--slo-ttft"),
    (["speculate", "llama-3.1-8b"], "--heads"),
    (["validate", "BAD/results-nan.json"], "--tolerance"),
    (["check", "--device", "cpu"], "--tolerance"),
]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "0", "1e300"])
@pytest.mark.parametrize("base,flag", FLOAT_FLAGS, ids=lambda x: x if isinstance(x, str) else x[0])
def test_float_flag_out_of_range(base, flag, value, bad, capsys):
    if value == "1e300" and flag in ("--tolerance",):
        value = "1e12"
    refuse(capsys, bad, [*base, flag, value], flag)


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["estimate", "--batch", "1e20"], "integers"),
        (["estimate", "--batch", "100000000000000000000"], "at most"),
        (["estimate", "--batch", "0"], "at least 1"),
        (["estimate", "--batch", ","], "at least one"),
        (["estimate", "--batch", ",".join(["1"] * 5000)], "at most"),
        (["estimate", "--prompt", "1e3"], "--prompt"),
        (["estimate", "--tp", "nan"], "--tp"),
        (["estimate", "--ceiling", "warp"], "ceiling"),
        (["estimate", "--dtype", "fp3"], "fp3"),
        (["estimate", "--weights", "int3"], "int3"),
        (["estimate", "--kv-format", "int3"], "int3"),
        (["speculate", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--k", "1..100000000"], "--k"),
        (["speculate", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--k", "8..1"], "empty"),
        (["speculate", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--k", "a..b"], "--k"),
        (["speculate", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--k", "0"], "at least 1"),
        (
            ["speculate", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--acceptance", "nan"],
            "acceptance",
        ),
        (
            ["speculate", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--acceptance", "1.5"],
            "acceptance",
        ),
        (["speculate", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--batch", "1e20"], "batch"),
        (["speculate", "llama-3.1-8b"], "--draft"),
        (["serve", "llama-2-7b", "--lengths", "fixed", "--prompt", "5000"], "context"),
        (["serve", "--arrivals", "bursty"], "arrivals"),
        (["serve", "--lengths", "zipf"], "zipf"),
        (["serve", "--policy", "magic"], "magic"),
        (["serve", "--compare", "static,,"], "policy"),
        (["serve", "--kv-layout", "sideways"], "sideways"),
        (["collectives", "--sizes", "1"], "--sizes"),
        (["collectives", "--sizes", "nan"], "--sizes"),
        (["collectives", "--sizes", "1e30"], "--sizes"),
        (["collectives", "--backend", "mpi"], "backend"),
        (["plot", "batch", "llama-3.1-8b", "--batch", "1e20"], "batch"),
        (["plot", "serve", "llama-3.1-8b", "-o", "BAD/out/s.png", "--latency", "p99"], "p99"),
        (["measure", "--device", "tpu", "-o", "BAD/out/m.json"], "device"),
        (["measure", "--device", "cpu", "--suite", "galactic", "-o", "BAD/out/m.json"], "suite"),
        (["measure", "--device", "cpu", "--threads", "0", "-o", "BAD/out/m.json"], "--threads"),
    ],
)
def test_bad_flag_values(argv, needle, bad, capsys):
    refuse(capsys, bad, argv, needle)


# ---- usage errors point at the subcommand's own help ------------------------------------
@pytest.mark.parametrize(
    "argv,help_of",
    [
        (["estimate", "--bogus"], "roofline estimate"),
        (["serve", "--bogus"], "roofline serve"),
        (["kv"], "roofline kv"),
        (["plot", "kv"], "roofline plot kv"),
        (["models", "show"], "roofline models show"),
        (["estimate", "--prompt"], "roofline estimate"),
        (["estimate", "-H"], "roofline estimate"),
        (["nonsense"], "roofline"),
        (["hardware", "nonsense"], "roofline hardware"),
        (["check", "--repeats", "x"], "roofline check"),
    ],
)
def test_usage_error_points_at_help(argv, help_of, bad, capsys):
    err = refuse(capsys, bad, argv, f"see `{help_of} --help`")
    assert err.count("error:") == 1


# ---- output paths: checked before any work, nothing left behind -------------------------
WRITERS = [
    ["measure", "--device", "cpu", "-o", "{}"],
    ["check", "--device", "cpu", "-o", "{}"],
    ["calibrate", "BAD/results-nan.json", "-o", "{}"],
    ["models", "import", str(HF), "-o", "{}"],
    ["plot", "roofline", "-o", "{}"],
    ["plot", "kv", "llama-3.1-8b", "-o", "{}"],
    ["plot", "batch", "llama-3.1-8b", "-o", "{}"],
    ["plot", "serve", "llama-3.1-8b", "--requests", "5", "-o", "{}"],
    ["plot", "validate", "BAD/results-nan.json", "-o", "{}"],
]
OUTPUTS = [
    ("BAD/folder.{ext}", "folder"),
    ("BAD/out", "folder"),
    ("BAD/nowhere/x.{ext}", "exist"),
    ("BAD/ro/x.{ext}", "not writable"),
    ("BAD/fifo.{ext}", "regular file"),
    (f"BAD/{LONG}.{{ext}}", "longer"),
    ("BAD/binary.json/x.{ext}", "not a folder"),
    ("/proc/1/x.{ext}", "not writable"),  # unwritable even by root
]


@pytest.mark.parametrize("target,needle", OUTPUTS)
@pytest.mark.parametrize("argv", WRITERS, ids=lambda a: "-".join(a[:2]))
def test_output_path_refused_before_work(argv, target, needle, bad, capsys):
    if "ro/" in target and os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    if target.startswith("/proc/") and os.access("/proc/1", os.W_OK):
        pytest.skip("no unwritable /proc/1 here")
    ext = "png" if argv[0] == "plot" else "yaml" if argv[0] in ("calibrate", "models") else "json"
    if target.startswith("BAD/folder") or target.startswith("BAD/fifo"):
        ext = {"yaml": "yaml", "json": "json", "png": "png"}[ext]
        if not (bad / f"{Path(target).stem}.{ext}").exists():
            ext = "json"
    path = target.replace("{ext}", ext)
    start = time.monotonic()
    refuse(capsys, bad, [a.replace("{}", path) for a in argv], needle)
    assert time.monotonic() - start < 5, "the output path was checked only after the work"


@pytest.mark.parametrize(
    "argv", [a for a in WRITERS if a[0] == "plot"], ids=lambda a: "-".join(a[:2])
)
def test_chart_suffix_refused_before_work(argv, bad, capsys):
    refuse(capsys, bad, [a.replace("{}", "BAD/out/chart.jpg") for a in argv], ".png or .svg")


# ---- environment and user spec folders ----------------------------------------------------
@pytest.mark.parametrize(
    "value,needle",
    [
        ("BAD/nowhere", "does not exist"),
        ("BAD/binary.json", "does not exist"),
        (f"BAD/{LONG}", "does not exist"),
    ],
)
@pytest.mark.parametrize(
    "argv",
    [["estimate"], ["hardware", "list"], ["models", "list"], ["kv", "llama-3.1-8b"]],
    ids="-".join,
)
def test_bad_specs_path_env(argv, value, needle, bad, capsys, monkeypatch):
    monkeypatch.setenv("ROOFLINE_SPECS_PATH", value.replace("BAD/", f"{bad}/"))
    refuse(capsys, bad, argv, needle)


@pytest.mark.parametrize(
    "value,needle",
    [
        ("BAD/nowhere", "does not exist"),
        ("BAD/binary.json", "does not exist"),
        (f"BAD/{LONG}", "does not exist"),
    ],
)
@pytest.mark.parametrize(
    "argv",
    [["estimate"], ["hardware", "list"], ["serve"], ["plot", "batch", "llama-3.1-8b"]],
    ids="-".join,
)
def test_bad_specs_dir_flag(argv, value, needle, bad, capsys):
    refuse(capsys, bad, [*argv, "--specs-dir", value], needle)


@pytest.fixture
def user_specs(tmp_path: Path) -> Path:
    """A user spec folder with one good model, one broken model, a bomb and a pipe."""
    m = tmp_path / "model_specs"
    m.mkdir()
    (m / "mine.yaml").write_text(
        _sub(MODEL, "name: tiny-llama-30m", "name: mine"), encoding="utf-8"
    )
    (m / "broken-one.yaml").write_text("name: [unclosed\n", encoding="utf-8")
    (m / "bomb.yaml").write_text(BOMB, encoding="utf-8")
    os.mkfifo(m / "pipe.yaml")
    return tmp_path


def test_broken_user_file_breaks_only_what_needs_it(user_specs, capsys):
    start = time.monotonic()
    main(["estimate", "mine", "--specs-dir", str(user_specs), "--batch", "1", "--json"])
    assert json.loads(capsys.readouterr().out)["model"]
    main(["hardware", "list", "--specs-dir", str(user_specs), "--json"])  # no model needed
    capsys.readouterr()
    assert time.monotonic() - start < 10, "the alias bomb or the pipe stalled the command"
    for argv, needle in (
        (["estimate", "broken-one"], "broken-one.yaml"),
        (["estimate", "bomb"], "expands"),
        (["estimate", "pipe"], "not a regular file"),
        (["models", "list"], "model_specs"),
        (["estimate", "nothing-like-it"], "unreadable"),
    ):
        with pytest.raises(SystemExit) as e:
            main([*argv, "--specs-dir", str(user_specs)])
        err = capsys.readouterr().err
        assert e.value.code == 1 and err.count("\n") == 1 and needle in err, err


def test_shadowing_a_bundled_name_is_said_once(tmp_path):
    """A user spec may take a bundled name: it wins, and stderr says so once per process."""
    m = tmp_path / "model_specs"
    m.mkdir()
    (m / "mine.yaml").write_text(_sub(MODEL, "layers: 6", "layers: 7"), encoding="utf-8")
    argv = ["models", "show", "tiny-llama-30m", "--specs-dir", str(tmp_path)]
    script = (
        "from roofline.cli import main\n"
        "for _ in range(2):\n"
        "    try:\n"
        f"        main({argv!r})\n"
        "    except SystemExit as e:\n"
        "        assert not e.code\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("\n") == 1 and "bundled" in p.stderr and "mine.yaml" in p.stderr
    shown = [json.loads(doc) for doc in p.stdout.replace("}\n{", "}\n\x00{").split("\x00")]
    assert [d["layers"] for d in shown] == [7, 7]


# ---- help, version, bare groups ------------------------------------------------------------
COMMANDS = [
    ["estimate"],
    ["kv"],
    ["speculate"],
    ["diffusion"],
    ["serve"],
    ["collectives"],
    ["measure"],
    ["calibrate"],
    ["validate"],
    ["check"],
    ["hardware"],
    ["hardware", "list"],
    ["hardware", "show"],
    ["models"],
    ["models", "list"],
    ["models", "show"],
    ["models", "import"],
    ["plot"],
    ["plot", "roofline"],
    ["plot", "batch"],
    ["plot", "kv"],
    ["plot", "serve"],
    ["plot", "validate"],
    ["plot", "plan"],
    ["plan"],
    ["engines"],
    ["engines", "list"],
    ["engines", "show"],
    [],
]


@pytest.mark.parametrize("flag", ["-h", "--help"])
@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: "-".join(a) or "roofline")
def test_help_everywhere(argv, flag, capsys):
    main([*argv, flag])
    out, err = capsys.readouterr()
    assert "Usage: roofline" in out and err == ""


@pytest.mark.parametrize(
    "argv",
    [[], ["models"], ["hardware"], ["plot"], ["engines"]],
    ids=lambda a: "-".join(a) or "roofline",
)
def test_bare_group_prints_help_and_exits_0(argv, capsys):
    try:
        main(argv)
    except SystemExit as e:
        assert e.code in (0, None)
    out, err = capsys.readouterr()
    assert "Usage: roofline" in out and "error" not in err


def test_version(capsys):
    main(["--version"])
    assert capsys.readouterr().out.startswith("roofline ")


def test_kv_alias_still_means_the_format(capsys):
    main(["estimate", "--kv", "fp8", "--batch", "1", "--json"])
    out, err = capsys.readouterr()
    assert json.loads(out)["precision"]["kv"] == "fp8"
    assert "--kv-format" in err


# ---- signals: measure and check stop, keep what they measured, exit non-zero -------------
#: Runs the real CLI with a six-point suite of small reads; `STOP_AT` names the progress call
#: (counted over every run of `check`) at which it writes `MARK` and waits to be signalled,
#: so a signal lands at a known moment (-1: never). Ctrl-C is given Python's usual handler:
#: a shell may start a child with SIGINT ignored.
HARNESS = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import roofline.kernels.suite as suite
from roofline.kernels.timing import Budget

STOP, MARK = int(os.environ["STOP_AT"]), os.environ["MARK"]
suite.plan = lambda *a: suite.Plan(
    tuple(suite.PointSpec("bandwidth", "read", "fp32", {"elems": 2**k}) for k in range(10, 16)),
    Budget(0.0, 0.002, min_repeats=2, max_repeats=20), ())
run, calls = suite.run, [0]

def patched(info, name, dtypes, on_point=lambda i, n, s: None):
    def hook(i, n, s):
        on_point(i, n, s)
        if calls[0] == STOP:
            open(MARK, "w").close()
            time.sleep(120)
        calls[0] += 1
    return run(info, name, dtypes, hook)

suite.run = patched
from roofline.cli import main
main(sys.argv[1:])
"""
#: The CLI unpatched, running the ci suite (a minute): interrupted while torch imports.
PLAIN = """
import runpy, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.argv[0] = "roofline"
runpy.run_module("roofline", run_name="__main__")
"""
POINTS = 6
SCENARIOS = {  # name: (command, signal, stop at, expected points, earlier complete file)
    "measure-int-first": ("measure", "SIGINT", 0, 0, False),
    "measure-int-middle": ("measure", "SIGINT", 3, 3, False),
    "measure-int-last": ("measure", "SIGINT", POINTS, POINTS, False),
    "measure-term-first": ("measure", "SIGTERM", 0, 0, False),
    "measure-term-middle": ("measure", "SIGTERM", 3, 3, False),
    "measure-hup-middle": ("measure", "SIGHUP", 2, 2, False),
    "measure-term-keeps-earlier": ("measure", "SIGTERM", 4, 4, True),
    "measure-int-while-importing": ("measure", "SIGINT", -2, None, True),
    "check-int-second-run": ("check", "SIGINT", POINTS + 1 + 3, POINTS, False),
    "check-term-first-run": ("check", "SIGTERM", 2, 2, True),
}


def _loading_torch(pid: int) -> bool:
    """torch's libraries are mapped into `pid`: the CLI is in `measure`, importing torch."""
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def _launch(folder: Path, stop: int, command: str, out: Path) -> subprocess.Popen:
    env = dict(os.environ, STOP_AT=str(stop), MARK=str(folder / "mark"))
    suite = ["--suite", "ci"] if command == "measure" else []
    argv = [
        sys.executable,
        "-c",
        PLAIN if stop == -2 else HARNESS,
        command,
        "--device",
        "cpu",
        *suite,
        "-o",
        str(out),
    ]
    return subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple]:
    """Every scenario at once (they mostly wait on torch's import): name -> (exit status,
    stderr, output folder, the earlier file's bytes or None)."""
    base = tmp_path_factory.mktemp("signals")
    complete = base / "complete.json"
    p = _launch(base, -1, "measure", complete)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    procs = {}
    for name, (command, _, stop, _, earlier) in SCENARIOS.items():
        folder = base / name
        folder.mkdir()
        if earlier:
            (folder / "results.json").write_bytes(complete.read_bytes())
        procs[name] = _launch(folder, stop, command, folder / "results.json")
    deadline = time.monotonic() + 150
    waiting = dict(procs)
    while waiting and time.monotonic() < deadline:
        for name, proc in list(waiting.items()):
            mark = base / name / "mark"
            early = SCENARIOS[name][2] == -2 and _loading_torch(proc.pid)
            if early or mark.exists() or proc.poll() is not None:
                proc.send_signal(getattr(signal, SCENARIOS[name][1]))
                del waiting[name]
        time.sleep(0.05)
    out = {}
    for name, proc in procs.items():
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        earlier = complete.read_bytes() if SCENARIOS[name][4] else None
        out[name] = (proc.returncode, err, base / name, earlier)
    return out


@pytest.mark.parametrize("name", SCENARIOS)
def test_interrupt_keeps_measured_points(name, interrupted):
    from roofline.measure.results import load_results

    code, err, folder, earlier = interrupted[name]
    command, sig, _, points, _ = SCENARIOS[name]
    assert code == 128 + getattr(signal, sig), err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("interrupted"), err
    target = folder / "results.json"
    if earlier is not None:  # a complete file is never replaced by a shorter run
        assert target.read_bytes() == earlier
        target = folder / "results.interrupted.json"
    if points is None and not target.exists():  # stopped while starting: nothing written
        return
    r = load_results(target)
    assert not r.complete and len(r.points) == (points if points is not None else len(r.points)), (
        err
    )
    assert str(target) in err
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~_umask()
    leftovers = [p.name for p in folder.iterdir() if p.name.startswith(".")]
    assert leftovers == [], "a temporary file was left behind"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ---- interrupts in-process, broken stdout, written files -----------------------------------
def _interrupting(monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """Make `estimate`'s core call stop the way `how` says, mid-command."""
    import roofline.cli.estimate as est

    def stop(*args: object, **kwargs: object) -> None:
        import typer

        if how == "raise":
            raise KeyboardInterrupt
        if how == "exit-130":  # what a typer that catches Ctrl-C itself hands back
            raise typer.Exit(130)
        if how == "abort":  # what click's own main makes of a Ctrl-C
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt:
                raise typer.Abort() from None
        os.kill(os.getpid(), getattr(signal, how))
        time.sleep(5)

    monkeypatch.setattr(est, "run_estimate", stop)


@pytest.mark.parametrize(
    "how,status",
    [
        ("raise", 130),
        ("exit-130", 130),
        ("abort", 130),
        ("SIGINT", 130),
        ("SIGTERM", 143),
        ("SIGHUP", 129),
    ],
)
def test_interrupt_never_exits_0(how, status, monkeypatch, capsys):
    """Whatever typer does with a KeyboardInterrupt (raise it, or return 130 under
    standalone_mode=False), the CLI exits 128 + the signal, saying so in one line."""
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    sigint = signal.signal(signal.SIGINT, signal.default_int_handler)
    _interrupting(monkeypatch, how)
    try:
        with pytest.raises(SystemExit) as e:
            main(["estimate", "--batch", "1"])
    finally:
        signal.signal(signal.SIGINT, sigint)
    assert e.value.code == status
    assert capsys.readouterr().err == "interrupted\n"
    assert {s: signal.getsignal(s) for s in before} == before  # handlers restored


def test_broken_stdout_is_quiet():
    """`roofline estimate ... | head -c 10`: the reader goes away after 10 of ~100 kB; the
    CLI stops quietly, non-zero, without a traceback."""
    batches = ",".join(str(b) for b in range(1, 201))
    p = subprocess.Popen(
        [sys.executable, "-m", "roofline", "estimate", "--batch", batches, "--json"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert p.stdout is not None and p.stderr is not None
    p.stdout.read(10)
    p.stdout.close()
    err = p.stderr.read().decode()
    p.stderr.close()
    assert p.wait(timeout=60) == 1
    assert err == "", err


@pytest.mark.parametrize(
    "argv",
    [
        ["models", "import", str(HF), "-o", "{}/spec.yaml"],
        ["plot", "kv", "llama-3.1-8b", "-o", "{}/kv.svg"],
    ],
)
def test_outputs_are_atomic_with_ordinary_permissions(argv, tmp_path, capsys):
    (tmp_path / argv[-1].rsplit("/", 1)[1]).write_text("earlier", encoding="utf-8")
    main([a.replace("{}", str(tmp_path)) for a in argv])
    capsys.readouterr()
    written = [p for p in tmp_path.iterdir()]
    assert len(written) == 1, "a temporary file was left behind"
    assert written[0].read_text(encoding="utf-8") != "earlier"
    assert stat.S_IMODE(written[0].stat().st_mode) == 0o666 & ~_umask()


def test_complete_measure_file_has_ordinary_permissions(interrupted, tmp_path_factory):
    complete = next(iter(interrupted.values()))[2].parent / "complete.json"
    assert stat.S_IMODE(complete.stat().st_mode) == 0o666 & ~_umask()


# ---- every numeric option of every command: NaN and overflowing values refused -----------
BASE_ARGS = {
    "kv": ["llama-3.1-8b"],
    "speculate": ["llama-3.1-8b", "--draft", "llama-3.2-1b"],
    "plot kv": ["llama-3.1-8b", "-o", "BAD/out/o.png"],
    "plot batch": ["llama-3.1-8b"],
    "plot serve": ["llama-3.1-8b", "-o", "BAD/out/o.png"],
    "plot roofline": ["-o", "BAD/out/o.png"],
    "plot validate": ["BAD/results-nan.json", "-o", "BAD/out/o.png"],
    "validate": ["BAD/results-nan.json"],
    "measure": ["-o", "BAD/out/m.json"],
    "check": ["-o", "BAD/out/m.json"],
}


def _numeric_options() -> list[tuple[str, str]]:
    import typer.main

    from roofline.cli import app, register

    register([])
    found = []
    stack = [([], typer.main.get_command(app))]
    while stack:
        path, cmd = stack.pop()
        for name, sub in getattr(cmd, "commands", {}).items():
            stack.append(([*path, name], sub))
        if getattr(cmd, "commands", None) or cmd.callback is None:
            continue
        hints = typing.get_type_hints(cmd.callback)  # Annotated stripped: int | None -> ...
        for p in cmd.params:
            kinds = set(typing.get_args(hints.get(p.name))) or {hints.get(p.name)}
            if p.opts and p.opts[0].startswith("--") and kinds & {int, float}:
                found.append((" ".join(path), p.opts[0]))
    return sorted(found)


@pytest.mark.parametrize("value", ["nan", "1e400"])
@pytest.mark.parametrize("command,option", _numeric_options())
def test_every_numeric_option_refuses_nonsense(command, option, value, bad, capsys):
    argv = [*command.split(), *BASE_ARGS.get(command, []), option, value]
    refuse(capsys, bad, argv, option)


# ---- dead ends: a generated workload fits the model's context -----------------------------
def test_generated_requests_are_cut_to_the_context():
    from roofline.serve.workload import Lengths, synthetic

    inputs, outputs = Lengths("lognormal", 1024, high=4096), Lengths("lognormal", 256, high=4096)
    free = synthetic(2000, 5.0, inputs, outputs, seed=0)
    cut = synthetic(2000, 5.0, inputs, outputs, seed=0, max_context=4096)
    over = free.input_tokens + free.output_tokens > 4096
    assert cut.truncated == int(over.sum()) > 0
    assert (cut.input_tokens + cut.output_tokens <= 4096).all()
    assert (cut.input_tokens[~over] == free.input_tokens[~over]).all()  # the rest untouched


def test_serve_on_a_4k_model_runs_and_says_what_it_cut(capsys):
    main(["serve", "llama-2-7b", "--requests", "200", "--json"])
    out, err = capsys.readouterr()
    assert json.loads(out)
    assert err.count("\n") == 1 and "cut to fit" in err and "4,096" in err
