"""`roofline estimate`: TTFT, TPOT, E2E, throughput and memory for a model on a device."""

from __future__ import annotations

from typing import Annotated

import typer

from ..catalog import load_hardware, load_model
from ..cost import CEILINGS
from ..errors import DoesNotFitError, InvalidInputError
from ..parallel import Parallel, min_gpus_to_fit
from ..phases import estimate as run_estimate
from ..units import seconds, si
from . import app, common
from .common import JsonFlag, SpecsDir, int_list, positive, print_json

Opt = typer.Option


@app.command()
def estimate(
    model: Annotated[str, typer.Argument(
        help="model name, alias, or path to a YAML spec")] = "llama-3.1-8b",
    hardware: Annotated[str, Opt("--hardware", "-h",
                                 help="device name, alias, or YAML path")] = "h100-sxm",
    batch: Annotated[str, Opt(help="batch sizes B per replica, comma-separated")] = "1,16,64",
    prompt: Annotated[int, Opt(help="prompt tokens P per sequence")] = 1024,
    gen: Annotated[int, Opt(help="generated tokens G per sequence")] = 256,
    dtype: Annotated[str, Opt(help="shorthand for weights, activations and KV format (a "
                              "weight-only format keeps bf16 activations and KV)")] = "bf16",
    weights: Annotated[str | None, Opt(help="weight format: bf16, fp16, fp8, int8, int4, "
                                       "int4-g128, nf4, nf4-dq, mxfp4, nvfp4")] = None,
    activations: Annotated[str | None, Opt(help="activation format; sets the compute peak "
                                           "(bf16, fp16, fp8, int8, fp32, tf32)")] = None,
    kv: Annotated[str | None, Opt(help="KV-cache format")] = None,
    tp: Annotated[int, Opt(help="tensor-parallel GPUs")] = 1,
    pp: Annotated[int, Opt(help="pipeline-parallel stages")] = 1,
    ep: Annotated[int, Opt(help="expert-parallel GPUs (MoE models)")] = 1,
    replicas: Annotated[int, Opt(help="independent copies (throughput ×m)")] = 1,
    ceiling: Annotated[str, Opt(help="datasheet (speed of light) or achievable")] = "achievable",
    engine: common.EngineOpt = common.DEFAULT_ENGINE,
    breakdown: Annotated[bool, Opt(help="per-operator FLOPs, bytes, intensity, bound")] = False,
    json_out: JsonFlag = False,
    specs_dir: SpecsDir = None,
) -> None:
    """Estimate prefill and decode latency, throughput and memory per batch size."""
    if ceiling not in CEILINGS:
        raise InvalidInputError(f"unknown ceiling '{ceiling}'; use one of: {', '.join(CEILINGS)}")
    m = load_model(model, specs_dir or ())
    hw = load_hardware(hardware, specs_dir or ())
    precision = common.precision(dtype, weights, activations, kv)
    e = run_estimate(m, hw, int_list(batch, "batch size"), positive(prompt, "--prompt"),
                     positive(gen, "--gen"), precision, ceiling,  # type: ignore[arg-type]
                     Parallel(tp, pp, ep, replicas), common.engine(engine, specs_dir))
    if json_out:
        out = e.as_dict()
        if breakdown:
            out["breakdown"] = {
                "prefill": e.prefill.as_dict() | {"collectives_s": e.prefill_comm_s},
                "decode": e.decode.as_dict() | {"collectives_s": e.decode_comm_s}}
        print_json(out)
    else:
        from ..report import breakdown_table, estimate_table

        common.console.print(estimate_table(e))
        if breakdown:
            b, P = e.cases[0].batch, e.cases[0].prompt_tokens
            par = e.parallel
            rank = "" if par.tp == 1 else f" (one of {par.tp} TP ranks)"
            if par.ep > 1:
                rank = (f" (one of {par.ep} EP ranks: attention of "
                        f"{int(e.prefill.step.batch)} sequence(s), 1/{par.ep} of the experts)")
            common.console.print(breakdown_table(
                f"prefill: B={b}, T={P}, S=0{rank}", e.prefill, e.prefill_comm_s))
            common.console.print(breakdown_table(
                f"decode (first step): B={b}, T=1, S={P}{rank}", e.decode, e.decode_comm_s))
    too_big = [c for c in e.cases if not c.fits]
    if too_big:
        c = too_big[0]
        if e.max_batch == 0:
            fit = min_gpus_to_fit(m, hw, precision, c.batch, c.prompt_tokens,
                                  c.prompt_tokens + c.gen_tokens)
            hint = (f"--tp {fit.tp}" + (f" --pp {fit.pp}" if fit.pp > 1 else "")
                    if fit else "a smaller --weights format")
            raise DoesNotFitError(
                f"{m.name} needs {si(c.weights_bytes, 'B')} of weights per GPU but {hw.name} "
                f"has {si(hw.memory_bytes, 'B')}, so no batch fits: spread it over GPUs "
                f"(smallest that fits batch {c.batch}: {hint}) or use a smaller --weights format")
        raise DoesNotFitError(
            f"batch {c.batch} needs {si(c.memory_bytes_per_gpu, 'B')} per GPU but {hw.name} "
            f"has {si(hw.memory_bytes, 'B')}; the largest batch that fits at "
            f"{c.prompt_tokens + c.gen_tokens} tokens is {e.max_batch}: lower --batch, "
            "shorten --prompt/--gen, use a smaller format, or add GPUs (--tp/--pp/--ep)")
