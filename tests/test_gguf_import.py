"""GGUF import: small files written here with the `gguf` package (header and tensor table
only matter; tensor data are zeros), read back into specs whose formats and sizes match."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from roofline.importers.gguf import check_gguf, read_gguf, spec_from_gguf
from roofline.spec.catalog import load_model
from roofline.spec.model import ModelSpec

gguf = pytest.importorskip("gguf")
T = gguf.GGMLQuantizationType

D, N, K, H, F, V, L = 256, 4, 2, 64, 512, 1024, 2


def _add(w, name: str, shape: tuple[int, ...], qtype) -> None:
    """One tensor in numpy order (the last axis is GGUF's ne[0], the row)."""
    if qtype == T.F32:
        w.add_tensor(name, np.zeros(shape, dtype=np.float32))
        return
    block, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    raw = np.zeros((*shape[:-1], shape[-1] // block * block_bytes), dtype=np.uint8)
    w.add_tensor(name, raw, raw_dtype=qtype)


def _write(
    path: Path,
    arch: str,
    file_type: int,
    tensors: list[tuple[str, tuple, object]],
    moe: tuple[int, int, int] | None = None,
) -> None:
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny-{arch}")
    w.add_block_count(L)
    w.add_context_length(4096)
    w.add_embedding_length(D)
    w.add_feed_forward_length(F)
    w.add_head_count(N)
    w.add_head_count_kv(K)
    w.add_file_type(file_type)
    if moe:
        w.add_expert_count(moe[0])
        w.add_expert_used_count(moe[1])
        w.add_expert_feed_forward_length(moe[2])
    for name, shape, qtype in tensors:
        _add(w, name, shape, qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _llama_q4_k_m() -> list[tuple[str, tuple, object]]:
    """The types llama-quantize Q4_K_M gives a 2-layer llama (llama_tensor_get_type), by hand:
    use_more_bits(i, 2) = i < 0 or i >= 14 // 8 = 1 or i % 3 == 2 -> only layer 1, so attn_v
    and ffn_down are Q6_K in layer 1 and Q4_K in layer 0; output Q6_K; token_embd Q4_K;
    norms F32."""
    ts = [
        ("token_embd.weight", (V, D), T.Q4_K),
        ("output_norm.weight", (D,), T.F32),
        ("output.weight", (V, D), T.Q6_K),
    ]
    for i in range(L):
        more = T.Q6_K if i == 1 else T.Q4_K
        ts += [
            (f"blk.{i}.attn_norm.weight", (D,), T.F32),
            (f"blk.{i}.attn_q.weight", (N * H, D), T.Q4_K),
            (f"blk.{i}.attn_k.weight", (K * H, D), T.Q4_K),
            (f"blk.{i}.attn_v.weight", (K * H, D), more),
            (f"blk.{i}.attn_output.weight", (D, N * H), T.Q4_K),
            (f"blk.{i}.ffn_norm.weight", (D,), T.F32),
            (f"blk.{i}.ffn_gate.weight", (F, D), T.Q4_K),
            (f"blk.{i}.ffn_up.weight", (F, D), T.Q4_K),
            (f"blk.{i}.ffn_down.weight", (D, F), more),
        ]
    return ts


def test_llama_q4_k_m_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "tiny-llama.Q4_K_M.gguf"
    _write(path, "llama", 15, _llama_q4_k_m())  # 15 = LLAMA_FTYPE_MOSTLY_Q4_K_M
    f = read_gguf(path)
    assert f.architecture == "llama" and f.file_type == "q4_k_m"
    spec = spec_from_gguf(f, "tiny-llama", str(path))
    assert (
        spec.layers,
        spec.d_model,
        spec.heads,
        spec.kv_heads,
        spec.head_dim,
        spec.d_ff,
        spec.vocab_size,
        spec.tied_embeddings,
    ) == (L, D, N, K, H, F, V, False)
    assert spec.checkpoint_weights == "q4_k_m"
    # elements: 2 V·D + L·(D·(N+2K)·H + N·H·D + 3·D·F + 2 D) + D
    elems = 2 * V * D + L * (D * (N + 2 * K) * H + N * H * D + 3 * D * F + 2 * D) + D
    assert spec.total_params == elems == sum(t.elems for t in f.tensors)
    # bytes in the file: Q4_K 144 B / 256, Q6_K 210 B / 256, F32 4 B
    q4k, q6k = 144 / 256, 210 / 256
    v, down = K * H * D, D * F  # Q4_K in layer 0, Q6_K in layer 1
    file_bytes = (
        V * D * q4k
        + V * D * q6k  # token_embd, output
        + L * (N * H * D + K * H * D + N * H * D + 2 * D * F) * q4k  # q, k, o, gate, up
        + (v + down) * q4k
        + (v + down) * q6k  # attn_v, ffn_down
        + (2 * L + 1) * D * 4
    )  # norms
    assert f.tensor_bytes == file_bytes
    # the replayed Q4_K_M rules give the same bytes as the file's tensor table
    check = check_gguf(spec, f)
    assert check.difference_bytes == 0


def _qwen3moe_q8_0() -> list[tuple[str, tuple, object]]:
    """A 2-layer qwen3moe with 4 experts (top-2, F_e = 256), every matrix Q8_0 but output
    Q6_K (what llama-quantize Q8_0 would not do; a hand-made mix), router and norms F32."""
    E, Fe = 4, 256
    ts = [
        ("token_embd.weight", (V, D), T.Q8_0),
        ("output_norm.weight", (D,), T.F32),
        ("output.weight", (V, D), T.Q6_K),
    ]
    for i in range(L):
        ts += [
            (f"blk.{i}.attn_norm.weight", (D,), T.F32),
            (f"blk.{i}.attn_q.weight", (N * H, D), T.Q8_0),
            (f"blk.{i}.attn_k.weight", (K * H, D), T.Q8_0),
            (f"blk.{i}.attn_v.weight", (K * H, D), T.Q8_0),
            (f"blk.{i}.attn_output.weight", (D, N * H), T.Q8_0),
            (f"blk.{i}.attn_q_norm.weight", (H,), T.F32),
            (f"blk.{i}.attn_k_norm.weight", (H,), T.F32),
            (f"blk.{i}.ffn_norm.weight", (D,), T.F32),
            (f"blk.{i}.ffn_gate_inp.weight", (E, D), T.F32),
            (f"blk.{i}.ffn_gate_exps.weight", (E, Fe, D), T.Q8_0),
            (f"blk.{i}.ffn_up_exps.weight", (E, Fe, D), T.Q8_0),
            (f"blk.{i}.ffn_down_exps.weight", (E, D, Fe), T.Q8_0),
        ]
    return ts


def test_moe_round_trip_with_per_group_formats(tmp_path: Path) -> None:
    path = tmp_path / "tiny-moe.gguf"
    _write(path, "qwen3moe", 7, _qwen3moe_q8_0(), moe=(4, 2, 256))  # 7 = MOSTLY_Q8_0
    f = read_gguf(path)
    spec = spec_from_gguf(f, "tiny-moe", str(path))
    assert spec.moe is not None
    assert (spec.moe.experts, spec.moe.top_k, spec.moe.expert_d_ff, spec.d_ff) == (4, 2, 256, 0)
    assert spec.attention.qk_norm
    # Q8_0 is no file type we replay: groups at their main type, the head's Q6_K kept
    assert spec.checkpoint_weights == "q8_0,lm_head=q6_k,router=fp32"
    assert spec.total_params == sum(t.elems for t in f.tensors)
    # the only difference: the F32 q/k norms (2·L·H) count at the attention group's Q8_0
    assert check_gguf(spec, f).difference_bytes == -2 * L * H * (4 - 34 / 32) == -752


def test_gguf_of_a_catalog_shape_matches_the_catalog(tmp_path: Path) -> None:
    """A Q4_0 file (every matrix Q4_0: 18 B per 32 weights; norms F32) with tiny-llama-30m's
    keys and tensors imports as tiny-llama-30m, and its tensor table equals the spec's bytes."""
    m = load_model("tiny-llama-30m")
    d, f_, v, kv = m.d_model, m.d_ff, m.vocab_size, m.kv_heads * m.head_dim
    w = gguf.GGUFWriter(str(tmp_path / "t.gguf"), "llama")
    for add, value in (
        (w.add_block_count, m.layers),
        (w.add_context_length, m.max_context),
        (w.add_embedding_length, d),
        (w.add_feed_forward_length, f_),
        (w.add_head_count, m.heads),
        (w.add_head_count_kv, m.kv_heads),
        (w.add_file_type, 2),
    ):  # 2 = MOSTLY_Q4_0
        add(value)
    q = T.Q4_0
    _add(w, "token_embd.weight", (v, d), q)
    _add(w, "output_norm.weight", (d,), T.F32)
    _add(w, "output.weight", (v, d), q)
    for i in range(m.layers):
        for name, shape in (
            ("attn_q", (m.q_dim, d)),
            ("attn_k", (kv, d)),
            ("attn_v", (kv, d)),
            ("attn_output", (d, m.q_dim)),
            ("ffn_gate", (f_, d)),
            ("ffn_up", (f_, d)),
            ("ffn_down", (d, f_)),
        ):
            _add(w, f"blk.{i}.{name}.weight", shape, q)
        _add(w, f"blk.{i}.attn_norm.weight", (d,), T.F32)
        _add(w, f"blk.{i}.ffn_norm.weight", (d,), T.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    f = read_gguf(tmp_path / "t.gguf")
    spec = spec_from_gguf(f, "t", "t.gguf")
    fields = (
        "layers",
        "d_model",
        "heads",
        "kv_heads",
        "head_dim",
        "d_ff",
        "vocab_size",
        "tied_embeddings",
        "max_context",
    )
    assert {k: getattr(spec, k) for k in fields} == {k: getattr(m, k) for k in fields}
    assert isinstance(spec, ModelSpec) and spec.total_params == m.total_params
    assert spec.checkpoint_weights == "q4_0"
    norms = m.params.norms
    assert f.tensor_bytes == (m.total_params - norms) * 18 / 32 + norms * 4
    assert check_gguf(spec, f).difference_bytes == 0


def test_unsupported_architecture_refused(tmp_path: Path) -> None:
    from roofline.errors import SpecError

    w = gguf.GGUFWriter(str(tmp_path / "x.gguf"), "rwkv6")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(SpecError, match="'rwkv6' is not modelled"):
        spec_from_gguf(read_gguf(tmp_path / "x.gguf"), "x", "x.gguf")


def test_models_import_cli_reads_a_gguf(tmp_path: Path, capsys) -> None:
    """`roofline models import model.gguf -o spec.yaml`: the spec carries the file's formats,
    loads, and estimates; the printed check compares its weights with the tensor table."""
    from conftest import run_cli

    path = tmp_path / "tiny-llama.Q4_K_M.gguf"
    _write(path, "llama", 15, _llama_q4_k_m())
    out = tmp_path / "tiny.yaml"
    code, stdout, err = run_cli(capsys, "models", "import", str(path), "-o", str(out))
    assert code == 0, err
    assert "GGUF tensor table" in stdout and out.is_file()
    spec = load_model(str(out))
    assert spec.checkpoint_weights == spec_from_gguf(read_gguf(path), "x", "x").checkpoint_weights
    code, _, err = run_cli(
        capsys,
        "estimate",
        str(out),
        "--weights",
        spec.checkpoint_weights,
        "--batch",
        "1",
        "--prompt",
        "64",
        "--gen",
        "8",
        "--json",
    )
    assert code == 0, err


def test_models_import_refuses_a_gguf_folder(tmp_path: Path, capsys) -> None:
    from conftest import run_cli

    folder = tmp_path / "x.gguf"
    folder.mkdir()
    code, _, err = run_cli(capsys, "models", "import", str(folder))
    assert code == 1 and "not a regular file" in err and err.count("\n") == 1


def test_an_imported_gguf_is_estimated_at_the_files_bytes(tmp_path: Path, capsys) -> None:
    """Defect: a GGUF imported with `models import` was then estimated at bf16. Without
    --weights, `estimate` now costs it as released: the file's per-tensor formats, whose bytes
    are the file's tensor table (`test_llama_q4_k_m_round_trip` derives them by hand)."""
    import json

    from conftest import run_cli

    path = tmp_path / "tiny-llama.Q4_K_M.gguf"
    _write(path, "llama", 15, _llama_q4_k_m())
    out = tmp_path / "tiny.yaml"
    assert run_cli(capsys, "models", "import", str(path), "-o", str(out))[0] == 0
    code, stdout, err = run_cli(
        capsys, "estimate", str(out), "--batch", "1", "--prompt", "64", "--gen", "8", "--json"
    )
    assert code == 0, err
    d = json.loads(stdout)
    assert d["weights_as_released"] and d["precision"]["weights"] == "q4_k_m"
    assert d["cases"][0]["weights_bytes"] == read_gguf(path).tensor_bytes


def test_a_truncated_gguf_is_refused_in_one_line(tmp_path: Path) -> None:
    from roofline.errors import SpecError
    from roofline.importers.gguf import read_gguf

    path = tmp_path / "m.gguf"
    _write(path, "llama", 15, _llama_q4_k_m())
    for cut in (10, 100, 400):
        short = tmp_path / f"cut{cut}.gguf"
        short.write_bytes(path.read_bytes()[:cut])
        with pytest.raises(SpecError) as e:
            read_gguf(short)
        assert "\n" not in str(e.value)


def test_a_tensor_table_that_contradicts_the_metadata_is_refused(tmp_path: Path) -> None:
    """block_count says 3 but the tensors are of 2 blocks (L = 2 in `_write`)."""
    from roofline.errors import SpecError
    from roofline.importers.gguf import read_gguf, spec_from_gguf

    path = tmp_path / "m.gguf"
    _write(path, "llama", 15, _llama_q4_k_m())
    f = read_gguf(path)
    meta = dict(f.metadata) | {"llama.block_count": 3}
    with pytest.raises(SpecError, match="says 3 blocks but the tensor table holds 2"):
        spec_from_gguf(type(f)(meta, f.tensors), "x", str(path))
    for bad in ("12", 0, 10**9, [1, 2]):
        meta = dict(f.metadata) | {"llama.attention.head_count": bad}
        with pytest.raises(SpecError, match="attention.head_count"):
            spec_from_gguf(type(f)(meta, f.tensors), "x", str(path))
