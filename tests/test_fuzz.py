"""Property-based fuzzing of every reader of user files (issue 26): config.json documents,
GGUF headers (written with the `gguf` package, then byte-mutated), published-measurement CSV
rows, price tables and engine YAML. The property, for every input: one `error:` line (a
`RooflineError`), or a valid result whose numbers are finite and consistent.

The bounded profile here runs in CI (`FUZZ_EXAMPLES`, 60 examples per reader); the longer one
is `ROOFLINE_FUZZ_EXAMPLES=5000 python -m pytest tests/test_fuzz.py -q`."""

from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roofline.errors import RooflineError

FUZZ_EXAMPLES = int(os.environ.get("ROOFLINE_FUZZ_EXAMPLES", "60"))
FIXTURES = Path(__file__).parent / "fixtures" / "hf"
ROOT = Path(__file__).resolve().parent.parent
CONFIGS = [
    json.loads((p / "config.json").read_text())
    for p in sorted(FIXTURES.iterdir())
    if (p / "config.json").exists()
]
FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

#: values a hand-edited or corrupted file holds where a number or a name belongs
ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["no", "yes", "12", "bf16", "auto", "inf", "-1"]),
    st.lists(st.integers(-2, 5), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


def _paths(d: dict, prefix: tuple = ()) -> list[tuple]:
    out = []
    for k, v in d.items():
        out.append((*prefix, k))
        if isinstance(v, dict):
            out += _paths(v, (*prefix, k))
    return out


def _one_line(e: RooflineError) -> None:
    assert str(e) and "\n" not in str(e).strip(), str(e)


# ---- config.json -------------------------------------------------------------------------------
@FUZZ
@given(data=st.data())
def test_config_json_mutations_are_refused_or_imported(data) -> None:
    from roofline.importers.hf import spec_from_hf_config

    c = copy.deepcopy(data.draw(st.sampled_from(CONFIGS)))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(c)))
        node = c
        for k in path[:-1]:
            node = node[k]
        if data.draw(st.booleans()):
            node[path[-1]] = data.draw(ODD)
        else:
            node.pop(path[-1], None)
        if not c:
            break
    try:
        spec = spec_from_hf_config(c, "fuzz", "config.json")
    except RooflineError as e:
        _one_line(e)
        return
    assert spec.total_params > 0 and spec.active_params <= spec.total_params
    assert spec.layers >= 1 and math.isfinite(spec.kv_elems_per_token)


# ---- GGUF --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gguf_bytes(tmp_path_factory) -> bytes:
    pytest.importorskip("gguf")
    from test_gguf_import import _llama_q4_k_m, _write

    path = tmp_path_factory.mktemp("gguf") / "base.gguf"
    _write(path, "llama", 15, _llama_q4_k_m())  # 15 = MOSTLY_Q4_K_M
    return path.read_bytes()


@FUZZ
@given(data=st.data())
def test_gguf_byte_mutations_are_refused_or_imported(data, gguf_bytes, tmp_path) -> None:
    from roofline.importers.gguf import check_gguf, read_gguf, spec_from_gguf

    raw = bytearray(gguf_bytes)
    head = min(len(raw), 2048)  # the header, metadata and tensor table
    kind = data.draw(st.sampled_from(["truncate", "flip", "repeat"]))
    if kind == "truncate":
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    elif kind == "flip":
        for _ in range(data.draw(st.integers(1, 6))):
            raw[data.draw(st.integers(0, head - 1))] = data.draw(st.integers(0, 255))
    else:
        i, j = data.draw(st.integers(0, head - 1)), data.draw(st.integers(0, head - 1))
        raw[i:i] = raw[j : j + data.draw(st.integers(1, 64))]
    path = tmp_path / "m.gguf"
    path.write_bytes(bytes(raw))
    try:
        f = read_gguf(path)
        spec = spec_from_gguf(f, "fuzz", str(path))
        check = check_gguf(spec, f)
    except RooflineError as e:
        _one_line(e)
        return
    assert spec.total_params > 0 and math.isfinite(check.spec_weights_bytes)


# ---- published measurements CSV ------------------------------------------------------------------
HEADER = (
    "id,model,hardware,weights,kv,batch,prompt,gen,tp,metric,value,engine,source,note,"
    "confidence,rate_includes_prefill,per_gpu,band,band_note"
)
GOOD = (
    "r1,llama-3.1-8b,h100-sxm,bf16,bf16,1,128,128,1,decode_tok_s,150,vllm,src,,high,false,false,,"
)
CELL = st.one_of(
    st.sampled_from(["", "0", "-1", "1", "1e309", "nan", "inf", "true", "h100-sxm", "vllm"]),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=6),
)


@FUZZ
@given(data=st.data())
def test_published_csv_rows_are_refused_or_read(data, tmp_path) -> None:
    from roofline.serve.published import load_rows

    cells = GOOD.split(",")
    for _ in range(data.draw(st.integers(1, 3))):
        cells[data.draw(st.integers(0, len(cells) - 1))] = data.draw(CELL)
    if data.draw(st.booleans()):
        cells = cells[: data.draw(st.integers(0, len(cells)))]
    body = ",".join(cells).replace("\n", " ").replace("\r", " ")
    path = tmp_path / "rows.csv"
    path.write_text(f"{HEADER}\n{body}\n", encoding="utf-8")
    try:
        rows = load_rows(path)
    except RooflineError as e:
        _one_line(e)
        return
    for r in rows:
        assert r.batch >= 1 and r.tp >= 1 and math.isfinite(r.value) and r.value > 0


# ---- price tables ------------------------------------------------------------------------------
@FUZZ
@given(
    name=st.sampled_from(["h100-sxm", "H100", "no-such-gpu", "", "b200"]),
    price=ODD,
    key=st.sampled_from(["on_demand_usd_per_gpu_hour", "discounted_usd_per_gpu_hour", "x"]),
    wrap=st.booleans(),
)
def test_price_tables_are_refused_or_finite(name, price, key, wrap, tmp_path) -> None:
    from roofline.studies.economics import load_prices

    doc = {"prices": {name: {key: price}}} if wrap else {name: price}
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    try:
        table = load_prices(path)
    except RooflineError as e:
        _one_line(e)
        return
    for device in table.devices:
        for tier in ("on-demand", "discounted"):
            if table.has(device, tier):
                value = table.usd_per_gpu_hour(device, tier)
                assert math.isfinite(value) and value > 0


# ---- engine profiles ---------------------------------------------------------------------------
ENGINE = yaml.safe_load((ROOT / "engine_specs" / "vllm.yaml").read_text())


@FUZZ
@given(data=st.data())
def test_engine_yaml_mutations_are_refused_or_loaded(data, tmp_path) -> None:
    from roofline.spec.catalog import load_engine

    doc = copy.deepcopy(ENGINE)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(doc)))
        node = doc
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = data.draw(ODD)
    path = tmp_path / "engine.yaml"
    try:
        path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    except (yaml.YAMLError, ValueError):
        return  # not writable as YAML (a surrogate): nothing to read
    try:
        e = load_engine(str(path))
    except RooflineError as err:
        _one_line(err)
        return
    assert math.isfinite(e.host_step_us) and e.host_step_us >= 0
    assert 0 < e.memory_fraction <= 1
