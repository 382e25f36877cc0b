"""`roofline speculate`: speed-up of speculative decoding with a draft model or draft heads."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from ..calc.placement import Parallel
from ..errors import InvalidInputError
from ..spec.catalog import load_hardware, load_model
from ..studies.speculative import (
    MAX_DRAFT_TOKENS,
    Drafter,
    SpeculationStudy,
    check_acceptance,
    study,
)
from ..units import seconds, si
from . import app, common
from .common import (
    JsonFlag,
    MemoryFraction,
    PrefillTokenBudget,
    RequireFit,
    SpecsDir,
    console,
    int_list,
    print_json,
)

Opt = typer.Option


#: Draft tokens per cycle at most (`speculative.MAX_DRAFT_TOKENS`), refused up front as --k.
MAX_K = MAX_DRAFT_TOKENS


def k_values(text: str) -> list[int]:
    """'1..8' -> [1, ..., 8]; '1,2,4' -> [1, 2, 4]."""
    if ".." in text:
        lo, _, hi = text.partition("..")
        try:
            low, high = int(lo), int(hi)
        except ValueError:
            raise InvalidInputError(
                f"--k must look like 1..8 or 1,2,4, got '{text[:40]}'"
            ) from None
        if high < low:
            raise InvalidInputError(f"--k range '{text}' is empty")
        if high > MAX_K:
            raise InvalidInputError(f"--k must be at most {MAX_K}, got {high:,}")
        return int_list(",".join(map(str, range(low, high + 1))), "--k", MAX_K)
    return int_list(text, "--k", MAX_K)


def probabilities(text: str) -> list[float]:
    if len(text) > 20_000:
        raise InvalidInputError("--acceptance: at most 1000 values; give fewer")
    try:
        values = [float(v) for v in common.comma_items(text, "--acceptance")]
    except ValueError:
        raise InvalidInputError(
            f"--acceptance must be comma-separated numbers, got '{text}'"
        ) from None
    for v in values:
        check_acceptance(v)
    if not values:
        raise InvalidInputError("give at least one acceptance rate")
    return values


@app.command()
def speculate(
    target: Annotated[str, typer.Argument(help="target model name, alias or YAML path")],
    draft: Annotated[str | None, Opt(help="draft model (same vocabulary as the target)")] = None,
    heads: Annotated[
        float | None,
        Opt(
            help="draft-free heads (Medusa-style) instead of a draft: cost of one head as a "
            "fraction of one target layer",
            callback=common.in_range(0, 100, open_low=True),
        ),
    ] = None,
    mtp: Annotated[
        bool,
        Opt(
            "--mtp",
            help="draft with the target's multi-token-prediction module (DeepSeek-V3: one MoE "
            "layer sharing the target's embedding and LM head)",
        ),
    ] = False,
    eagle: Annotated[
        bool,
        Opt(
            "--eagle",
            help="draft with an EAGLE head: one decoder layer of the target's and a 2D→D fc, "
            "sharing the target's embedding and LM head",
        ),
    ] = False,
    hardware: common.Hardware = "h100-sxm",
    k: Annotated[str, Opt("--k", help="draft tokens per step K: a range 1..8 or a list")] = "1..8",
    acceptance: Annotated[
        str, Opt(help="per-token acceptance rates α, comma-separated")
    ] = "0.6,0.85",
    batch: Annotated[str, Opt(help="batch sizes B, comma-separated")] = "1",
    context: Annotated[
        int,
        Opt(
            help="cached tokens S when the cycle runs",
            callback=common.in_range(0, common.MAX_TOKENS),
        ),
    ] = 1024,
    dtype: Annotated[
        str | None,
        Opt(
            help="shorthand for weights, activations and KV format of both models (a "
            "weight-only format keeps bf16 activations and KV; default: the target as released)"
        ),
    ] = None,
    weights: Annotated[str | None, Opt(help="weight format of both models")] = None,
    activations: Annotated[str | None, Opt(help="activation format; sets the compute peak")] = None,
    kv_format: common.KvFormat = None,
    kv: common.KvAlias = None,
    tp: common.Tp = 1,
    pp: common.Pp = 1,
    ep: common.Ep = 1,
    ceiling: common.Ceiling = "achievable",
    engine: common.EngineOpt = common.DEFAULT_ENGINE,
    memory_fraction: MemoryFraction = None,
    prefill_token_budget: PrefillTokenBudget = None,
    require_fit: RequireFit = False,
    interval: common.Interval = 0.8,
    json_out: JsonFlag = False,
    specs_dir: SpecsDir = None,
) -> None:
    """Expected tokens per target step, speed-up, best K and break-even acceptance."""
    if (draft is not None) + (heads is not None) + mtp + eagle != 1:
        raise InvalidInputError(
            "give --draft MODEL, --heads FRACTION, --mtp or --eagle (one of them)"
        )
    t = load_model(target, specs_dir or ())
    if mtp or eagle:
        drafter = Drafter.mtp_of(t) if mtp else Drafter.eagle_of(t)
    else:
        drafter = Drafter(
            model=load_model(draft, specs_dir or ()) if draft else None, head_layer_fraction=heads
        )
    hw = load_hardware(hardware, specs_dir or ())
    ks, alphas, batches = (
        k_values(k),
        probabilities(acceptance),
        int_list(batch, "batch size", flag="--batch"),
    )
    precision = common.precision(dtype, weights, activations, common.kv_format(kv_format, kv), t)
    stack = common.stack(
        t,
        hw,
        precision,
        ceiling,
        engine,
        specs_dir,
        Parallel(tp, pp, ep),
        memory_fraction=memory_fraction,
        prefill_token_budget=prefill_token_budget,
    )
    st = study(t, drafter, stack, ks, alphas, batches, context)
    if json_out:
        print_json({**common.header(t.name, stack), **st.as_dict(interval or None)})
    else:
        render(st, precision.weights)
    if require_fit:
        for b, f in st.fits.items():
            f.require(t.name, hw.name, b)


def render(st: SpeculationStudy, dtype: str) -> None:
    """One table per batch: K against draft and verify times, tokens per step and speed-up
    per α, the break-even α; the best K per α and whether the pair fits."""
    t, hw, alphas = st.target, st.stack.hardware, st.alphas
    for b in st.batches:
        first = st.cycles[(b, alphas[0])][0]
        table = Table(
            title=f"speculative decoding: {t.display_name} drafted by {st.drafted_by} "
            f"on {hw.display_name}, B={b}, S={st.context}, {dtype}; plain target "
            f"step {seconds(first.target_step_s)}"
        )
        table.add_column("K", justify="right")
        table.add_column("draft", justify="right")
        table.add_column("verify", justify="right")
        for a in alphas:
            table.add_column(f"tokens/step α={a}", justify="right")
            table.add_column(f"speed-up α={a}", justify="right")
        table.add_column("break-even α", justify="right")
        for i, kk in enumerate(st.ks):
            row = [
                str(kk),
                seconds(st.cycles[(b, alphas[0])][i].draft_s),
                seconds(st.cycles[(b, alphas[0])][i].verify_s),
            ]
            for a in alphas:
                c = st.cycles[(b, a)][i]
                row += [f"{c.expected_tokens_per_step:.2f}", f"{c.speedup:.2f}×"]
            v = st.break_even[(b, kk)]
            row.append("never pays" if v is None else f"{v:.2f}")
            table.add_row(*row)
        console.print(table)
        console.print(
            "best K: "
            + ", ".join(
                f"α={a}: K={st.best(b, a).k} ({st.best(b, a).speedup:.2f}×)" for a in alphas
            )
        )
        f = st.fits[b]
        verdict = "fit" if f.fits else "[red]do not fit[/red]"
        console.print(
            f"memory per GPU at S + K + 1 = {st.context + max(st.ks) + 1:,} tokens: target "
            f"{si(f.target_bytes, 'B')} + draft {si(f.draft_bytes, 'B')} = "
            f"{si(f.needs_bytes, 'B')} of {si(f.budget.usable_bytes, 'B')} usable: "
            f"they {verdict} together."
        )
