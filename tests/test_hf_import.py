"""`roofline models import`: config.json fixtures (tests/fixtures/hf, written from the
published configs) → specs whose parameter counts match the catalog and published totals."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from roofline.cli import main
from roofline.importers.hf import SUPPORTED
from roofline.spec.catalog import load_model

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "hf"


def _import(capsys, folder: str, *extra: str) -> str:
    main(["models", "import", str(FIXTURES / folder / "config.json"), *extra])
    return capsys.readouterr().out


@pytest.mark.parametrize(
    ("folder", "catalog_name"),
    [
        ("Llama-2-13b-hf", "llama-2-13b"),
        ("Mistral-7B-v0.1", "mistral-7b-v0.1"),
        ("Mixtral-8x7B-v0.1", "mixtral-8x7b"),
        ("Qwen2.5-7B", "qwen2.5-7b"),
        ("Qwen3-30B-A3B", "qwen3-30b-a3b"),
        ("gemma-2-9b", "gemma-2-9b"),
        ("gemma-3-27b-pt", "gemma-3-27b"),
        ("DeepSeek-V2-Lite", "deepseek-v2-lite"),
        ("DeepSeek-V3", "deepseek-v3"),
        ("falcon-40b", "falcon-40b"),
        ("mamba-2.8b-hf", "mamba-2.8b"),
        ("mamba2-2.7b", "mamba2-2.7b"),
        ("Jamba-v0.1", "jamba-v0.1"),
        # issue 14
        ("Meta-Llama-3-8B", "llama-3-8b"),
        ("gpt-j-6b", "gpt-j-6b"),
        ("dbrx-base", "dbrx"),
        ("gpt-oss-20b", "gpt-oss-20b"),
        ("Qwen3-8B", "qwen3-8b"),
        ("Qwen3-235B-A22B", "qwen3-235b-a22b"),
        ("phi-4", "phi-4"),
        ("gemma-3-4b-pt", "gemma-3-4b"),
        ("Mistral-Small-24B-Base-2501", "mistral-small-24b"),
        ("Llama-4-Scout-17B-16E", "llama-4-scout"),
        ("Llama-4-Maverick-17B-128E", "llama-4-maverick"),
    ],
)
def test_import_matches_catalog(tmp_path: Path, capsys, folder: str, catalog_name: str) -> None:
    out = tmp_path / "spec.yaml"
    main(["models", "import", str(FIXTURES / folder / "config.json"), "-o", str(out)])
    capsys.readouterr()
    imported, catalog = load_model(str(out)), load_model(catalog_name)
    assert imported.total_params == catalog.total_params
    assert imported.kv_elems_per_token == catalog.kv_elems_per_token
    assert imported.state_elems_per_sequence == catalog.state_elems_per_sequence
    assert [(g.kind, g.count) for g in imported.layer_groups] == [
        (g.kind, g.count) for g in catalog.layer_groups
    ]
    assert imported.checkpoint_weights == catalog.checkpoint_weights
    assert imported.checkpoint_activations == catalog.checkpoint_activations
    assert imported.active_params == catalog.active_params


@pytest.mark.parametrize(
    ("folder", "published", "source"),
    [
        ("gpt-neox-20b", 20_554_567_680, "EleutherAI/gpt-neox-20b safetensors metadata (20.6B)"),
        (
            "Phi-3-mini-4k-instruct",
            3_821_079_552,
            "microsoft/Phi-3-mini-4k-instruct safetensors metadata (model card: 3.8B)",
        ),
    ],
)
def test_import_without_catalog_spec_matches_published(
    capsys, folder: str, published: int, source: str
) -> None:
    text = _import(capsys, folder)
    assert f"{published:,} parameters" in text, source


def test_safetensors_index_difference_is_reported(capsys) -> None:
    # total_size 93,405,585,408 B = 46,702,792,704 params · 2 B (bf16): no difference
    text = _import(capsys, "Mixtral-8x7B-v0.1")
    assert "model.safetensors.index.json: total_size 93.4 GB" in text
    assert "difference +0 B (+0.00%)" in text


def test_name_option(capsys) -> None:
    text = _import(capsys, "Mistral-7B-v0.1", "--name", "my-mistral")
    assert "\nname: my-mistral\n" in text


def test_unsupported_architecture_lists_supported(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["models", "import", str(FIXTURES / "unsupported-bert" / "config.json")])
    assert exc.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unsupported architectures (BertForMaskedLM)" in err
    assert all(a in err for a in SUPPORTED)


def test_missing_file_is_one_line(capsys, tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["models", "import", str(tmp_path / "config.json")])
    assert exc.value.code == 1
    assert "cannot read" in capsys.readouterr().err


def test_awq_checkpoint_gets_its_formats(tmp_path: Path, capsys) -> None:
    """Qwen2.5-7B-Instruct-AWQ: quantization_config awq, 4 bits, groups of 128, zero points ->
    int4-g128 (4 + (16 + 4)/128 bits) on the block matrices; embedding, LM head and norms stay
    fp16: 2*152064*3584 + 57*3584 = 1,090,199,040 weights at 2 B."""
    from roofline.calc import memory
    from roofline.spec.precision import Precision

    out = tmp_path / "awq.yaml"
    main(
        [
            "models",
            "import",
            str(FIXTURES / "Qwen2.5-7B-Instruct-AWQ" / "config.json"),
            "-o",
            str(out),
        ]
    )
    capsys.readouterr()
    spec = load_model(str(out))
    assert spec.checkpoint_weights == "int4-g128"
    ends = 2 * 152_064 * 3_584 + 57 * 3_584
    assert ends == 1_090_199_040
    expected = ends * 2 + (7_615_616_512 - ends) * (4 + 20 / 128) / 8
    p = Precision(spec.checkpoint_weights, "fp16", "fp16")
    assert memory.weights_bytes(spec, p) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("q", "weights"),
    [
        ({"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True}, "int4-g128-sym"),
        ({"quant_method": "gptq", "bits": 4, "group_size": 32, "sym": False}, "int4-g32"),
        ({"quant_method": "gptq", "bits": 8, "group_size": -1, "sym": True}, "int8"),
        ({"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": False}, "int4-g64-sym"),
        (
            {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
            "fp8,embedding=bf16,lm_head=bf16,norms=bf16",
        ),
        (
            {
                "quant_method": "bitsandbytes",
                "load_in_4bit": True,
                "bnb_4bit_quant_type": "nf4",
                "bnb_4bit_use_double_quant": True,
            },
            "nf4-dq",
        ),
        # NVIDIA ModelOpt (e.g. nvidia/*-FP4 checkpoints): NVFP4 blocks of 16, head kept bf16
        (
            {
                "quant_method": "modelopt",
                "quant_algo": "NVFP4",
                "group_size": 16,
                "kv_cache_quant_algo": "FP8",
                "exclude_modules": ["lm_head"],
            },
            "nvfp4,embedding=bf16,lm_head=bf16,norms=bf16",
        ),
        (
            {"quant_method": "modelopt", "quant_algo": "FP8"},
            "fp8,embedding=bf16,lm_head=bf16,norms=bf16",
        ),
    ],
)
def test_quantization_config_formats(q: dict, weights: str) -> None:
    from roofline.importers.hf import checkpoint_weights
    from roofline.spec.precision import Precision

    got = checkpoint_weights({"quantization_config": q}, {})
    assert got == weights
    Precision(got)  # a valid --weights string


def test_unknown_quantization_is_refused() -> None:
    from roofline.errors import SpecError
    from roofline.importers.hf import spec_from_hf_config

    cfg = json.loads((FIXTURES / "Meta-Llama-3-8B" / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "hqq"}
    with pytest.raises(SpecError, match="quant_method 'hqq' is not modelled"):
        spec_from_hf_config(cfg, "x", "config.json")


def test_modelopt_hf_quant_config() -> None:
    """hf_quant_config.json's `quantization` block reads the same way (W4A16 AWQ, group 128)."""
    from roofline.importers.hf import modelopt_weights

    block = {"quant_algo": "W4A16_AWQ", "group_size": 128, "exclude_modules": ["lm_head"]}
    assert modelopt_weights(block, "fp16") == "int4-g128,embedding=fp16,lm_head=fp16,norms=fp16"


def test_deepseek_v3_mtp_module_is_read() -> None:
    """num_nextn_predict_layers (1 in DeepSeek-V3's config.json) becomes mtp_layers, the module
    `speculate --mtp` drafts with; the bundled spec says the same."""
    import json

    from roofline.importers.hf import spec_from_hf_config
    from roofline.spec.catalog import load_model

    config = json.loads((FIXTURES / "DeepSeek-V3" / "config.json").read_text())
    assert "num_nextn_predict_layers" not in config  # the fixture predates the field
    assert spec_from_hf_config(config, "ds", "test").mtp_layers == 0
    spec = spec_from_hf_config(config | {"num_nextn_predict_layers": 1}, "ds", "test")
    assert spec.mtp_layers == 1 == load_model("deepseek-v3").mtp_layers


def _llama_config() -> dict:
    import json

    return json.loads((FIXTURES / "Meta-Llama-3-8B" / "config.json").read_text())


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"tie_word_embeddings": "no"}, "'tie_word_embeddings' must be true or false"),
        ({"num_key_value_heads": 0}, "'num_key_value_heads' must be a whole number from 1"),
        ({"num_hidden_layers": 10**7}, "from 1 to 100,000"),
        ({"hidden_size": "4096"}, "'hidden_size' must be a whole number"),
        ({"hidden_size": 4096.0}, "'hidden_size' must be a whole number"),
        ({"vocab_size": 2**50}, "from 1 to 1,099,511,627,776"),
        ({"architectures": "LlamaForCausalLM"}, "'architectures' must be a list of names"),
        ({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 0}}, "group"),
        ({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": -2}}, "group"),
        ({"quantization_config": 7}, "'quantization_config' must be an object"),
        ({"text_config": {"hidden_size": []}}, "text_config: 'hidden_size'"),
        ({"rotary_pct": 2}, "fraction"),
        ({"mlp_only_layers": ["a"]}, "layer indices"),
    ],
)
def test_config_values_of_the_wrong_type_or_size_are_refused(change, says) -> None:
    """Every value the importer reads is checked for type and range before any arithmetic
    (hf_import.check_config), in the nested sections too."""
    from roofline.errors import SpecError
    from roofline.importers.hf import spec_from_hf_config

    with pytest.raises(SpecError, match=re.escape(says)):
        spec_from_hf_config(_llama_config() | change, "x", "config.json")


def test_a_null_is_an_absent_key() -> None:
    from roofline.importers.hf import spec_from_hf_config

    spec = spec_from_hf_config(_llama_config() | {"num_key_value_heads": None}, "x", "c")
    assert spec.kv_heads == spec.heads  # absent: as many kv heads as heads


def test_too_few_layer_types_are_refused() -> None:
    import json

    from roofline.errors import SpecError
    from roofline.importers.hf import spec_from_hf_config

    c = json.loads((FIXTURES / "gpt-oss-20b" / "config.json").read_text())
    c["layer_types"] = c["layer_types"][:5]  # 5 entries for 24 layers
    with pytest.raises(SpecError, match="5 entries for 24 layers"):
        spec_from_hf_config(c, "x", "config.json")
