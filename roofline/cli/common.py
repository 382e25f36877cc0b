"""Options and parsing shared by several commands."""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar, cast

import typer

from ..errors import InvalidInputError
from ..render.shapes import header as header  # every command's JSON head
from ..spec.precision import Precision

if TYPE_CHECKING:
    from ..calc.cost import Ceiling as CeilingName
    from ..calc.stack import Stack
    from ..studies.economics import Tier

N = TypeVar("N", int, float)

#: Sizes beyond these are not real workloads; they are refused before any work starts
#: (a typo such as `--requests 1000000000` would otherwise run for hours).
MAX_TOKENS = 10**8  # prompt, generated or cached tokens per sequence
MAX_BATCH = 10**7  # sequences at once
MAX_GPUS = 10**5  # per parallel dimension or replicas
MAX_REQUESTS = 10**6  # requests in one simulated workload (~2 min at 10^6)
MAX_SEED = 2**32 - 1


def __getattr__(name: str) -> Any:
    """`console` is created on first use: `--json` runs never import rich's console."""
    if name == "console":
        from ..render.fit import FittingConsole

        # Tables are wide: when output is not a terminal (and $COLUMNS does not say), do not
        # squeeze them into 80 columns.
        wide = sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit()
        globals()["console"] = FittingConsole(width=None if wide else 160)
        return globals()["console"]
    raise AttributeError(name)


SpecsDir = Annotated[
    list[Path] | None,
    typer.Option(
        "--specs-dir",
        help="extra folder with hardware_specs/ and/or model_specs/ "
        "subfolders (repeatable; also $ROOFLINE_SPECS_PATH)",
    ),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="print one JSON object instead of tables")]
MemoryFraction = Annotated[
    float | None,
    typer.Option(
        "--memory-fraction",
        help="share of device memory the engine may fill (vLLM's "
        "gpu_memory_utilization); default the engine's (vLLM 0.9), 1 on the datasheet ceiling",
    ),
]
PrefillTokenBudget = Annotated[
    int | None,
    typer.Option(
        "--prefill-token-budget",
        help="tokens one prefill step holds activations for (chunked "
        "prefill); default the engine's (vLLM: max_num_batched_tokens 8192); 0 = the whole batch "
        "at once",
    ),
]
Price = Annotated[
    list[str] | None,
    typer.Option(
        help="NAME=USD per GPU-hour, or a YAML price table (repeatable; default: the bundled "
        "on-demand prices)"
    ),
]
RequireFit = Annotated[
    bool,
    typer.Option("--require-fit", help="exit 1 when a configuration does not fit in device memory"),
]


def token_budget(value: int | None) -> int | None | Literal["engine"]:
    """`--prefill-token-budget`: not given, the engine's; 0, no budget (the whole batch's
    prompts in one step)."""
    if value is None:
        return "engine"
    if value < 0:
        raise InvalidInputError(f"--prefill-token-budget must be 0 or more, got {value}")
    return value or None


def warn(lines: Sequence[str]) -> None:
    """Warnings of the core (an input run past what it was trained for) on stderr."""
    for line in lines:
        print(f"warning: {line}", file=sys.stderr)


EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        help="inference engine profile (name, alias or YAML path; `roofline engines "
        "list`), or `none` for the hardware layer alone; ignored by --ceiling datasheet",
    ),
]

#: The engine a prediction uses when none is named: the most deployed open serving engine.
DEFAULT_ENGINE = "vllm"


def engine(name: str, specs_dir: list[Path] | None) -> Any:
    """The EngineSpec for `--engine` (None for `none`)."""
    from ..spec.catalog import load_engine_or_none

    return load_engine_or_none(name, specs_dir or ())


def ceiling(name: str) -> CeilingName:
    """`--ceiling`: datasheet or achievable."""
    from ..calc.cost import CEILINGS

    if name not in CEILINGS:
        raise InvalidInputError(f"unknown ceiling '{name}'; use one of: {', '.join(CEILINGS)}")
    return cast("CeilingName", name)


def _num(v: float) -> str:
    """1000000 -> '1,000,000'; 0.5 -> '0.5'; nan -> 'nan'."""
    if isinstance(v, float) and (not math.isfinite(v) or v != int(v) or abs(v) >= 1e15):
        return f"{v:g}"
    return f"{int(v):,}"


def in_range(
    low: float | None = None, high: float | None = None, *, open_low: bool = False
) -> Callable[..., Any]:
    """A typer option callback refusing values outside [low, high] (or (low, high] with
    `open_low`), NaN and infinities, as a domain error naming the option:
    `Opt(callback=in_range(0, 1, open_low=True))`."""

    def check(param: typer.CallbackParam, value: Any) -> Any:
        if value is None:
            return value
        below = low is not None and (value <= low if open_low else value < low)
        above = high is not None and value > high
        if not math.isfinite(value) or below or above:
            lo = (
                ""
                if low is None
                else (
                    "positive"
                    if open_low and low == 0
                    else f"{'more than' if open_low else 'at least'} {_num(low)}"
                )
            )
            hi = "" if high is None else f"at most {_num(high)}"
            name = param.opts[0] if param.opts else param.name
            raise InvalidInputError(
                f"{name} must be {' and '.join(x for x in (lo, hi) if x)}, got {_num(value)}"
            )
        return value

    return check


def comma_items(text: str, flag: str, item: str = "item") -> list[str]:
    """' 1, 8,max' -> ['1', '8', 'max']: the items of a comma-separated option, stripped. An
    empty one ('1,,8', '1,', ',2') is refused naming the option (`item`: what each one is):
    dropping it would run something other than what was typed."""
    items = [v.strip() for v in text.split(",")]
    if "" in items:
        raise InvalidInputError(
            f"{flag} has an empty {item} in '{text[:40]}'; give at least one, separated by "
            "single commas"
        )
    return items


def batch_list(
    text: str, what: str = "batch size", flag: str = "--batch"
) -> list[int | Literal["max"]]:
    """'1,8,max' -> [1, 8, 'max']: batch sizes, `max` for the most the engine runs at once."""
    words = [v.lower() for v in comma_items(text, flag, what)]
    if "max" not in words:
        return list(int_list(text, what, flag=flag))  # type: ignore[arg-type]  # list is invariant
    rest = [w for w in words if w != "max"]
    sizes = iter(int_list(",".join(rest), what, flag=flag) if rest else [])
    out: list[int | Literal["max"]] = ["max" if w == "max" else next(sizes) for w in words]
    return out


def int_list(
    text: str, what: str, limit: int = MAX_BATCH, long: int = 1000, flag: str | None = None
) -> list[int]:
    """'1,16,64' -> [1, 16, 64]; each value an integer in [1, limit], at most `long` values;
    an empty item refused naming `flag` (`what` when the caller names no flag)."""
    if len(text) > 20 * long:
        raise InvalidInputError(f"{what}: at most {long} values; give fewer")
    items = comma_items(text, flag, what) if flag else comma_items(text, what)
    try:
        values = [int(v) for v in items]
    except ValueError:
        raise InvalidInputError(
            f"{what} must be comma-separated integers, got '{text[:40]}'"
        ) from None
    if not values:
        raise InvalidInputError(f"give at least one {what}")
    if len(values) > long:
        raise InvalidInputError(f"{what}: at most {long} values, got {len(values)}; give fewer")
    bad = [v for v in values if v < 1]
    if bad:
        raise InvalidInputError(f"{what} must be at least 1, got {bad[0]}")
    big = [v for v in values if v > limit]
    if big:
        raise InvalidInputError(f"{what} must be at most {limit:,}, got {big[0]:,}")
    return values


def positive(value: int, what: str, limit: int = MAX_TOKENS) -> int:
    if value < 1:
        raise InvalidInputError(f"{what} must be at least 1, got {value}")
    if value > limit:
        raise InvalidInputError(f"{what} must be at most {limit:,}, got {value:,}")
    return value


#: How the core names a parameter in a message: `name` or `name=value` (`tp=3`).
_PARAM = re.compile(r"`([a-z][a-z0-9_]*)(?:=([^`]*))?`")
#: Core parameters whose option has another name.
_OPTION_OF = {
    "rate_per_s": "rate",
    "attainment": "slo_attainment",
    "input_tokens": "prompt",
    "output_tokens": "gen",
    "prompt_tokens": "prompt",
    "gen_tokens": "gen",
    "slo_ttft_s": "slo_ttft",
    "slo_tpot_s": "slo_tpot",
}


def with_flags(text: str, flags: dict[str, str] | None = None) -> str:
    """A core message with its parameters said as flags: `tp=3` -> --tp 3, `memory_fraction`
    -> --memory-fraction; `flags` maps a command's parameter names to its own flags (`kv` ->
    --kv-layout in `serve`), the rest take the name's dashed form."""

    def flag(m: re.Match) -> str:
        name, value = m.group(1), m.group(2)
        option = _OPTION_OF.get(name, name)
        f = (flags or {}).get(name) or (flags or {}).get(option) or "--" + option.replace("_", "-")
        return f if value is None else f"{f} {value}"

    return _PARAM.sub(flag, text)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2))


def check_output(path: Path | None, what: str = "output") -> Path | None:
    """An output path checked before any work starts (see `roofline.files.check_output`)."""
    from ..files import check_output as check

    return None if path is None else check(path, what)


def precision(
    dtype: str | None,
    weights: str | None,
    activations: str | None,
    kv: str | None,
    model: Any = None,
) -> Precision:
    """`--dtype` as the shorthand, each of `--weights/--activations/--kv` overriding its part;
    with neither `--dtype` nor `--weights`, the formats `model` is released in
    (`precision.released`: gpt-oss's MXFP4 experts, DeepSeek-V3's FP8), else bf16."""
    from ..spec.precision import released

    if dtype is None and weights is None and model is not None:
        base = released(model)
    else:
        base = Precision.uniform(dtype or "bf16")
    return Precision(weights or base.weights, activations or base.activations, kv or base.kv)


# ---- one vocabulary: the same option means the same thing in every command ----------------
HARDWARE_FLAGS = ("--hardware", "-H")
Hardware = Annotated[str, typer.Option(*HARDWARE_FLAGS, help="device name, alias, or YAML path")]
Prompt = Annotated[
    int, typer.Option(help="prompt tokens P per sequence", callback=in_range(1, MAX_TOKENS))
]
Gen = Annotated[
    int, typer.Option(help="generated tokens G per sequence", callback=in_range(1, MAX_TOKENS))
]
Context = Annotated[
    int, typer.Option(help="cached tokens S per sequence", callback=in_range(1, MAX_TOKENS))
]
Dtype = Annotated[
    str | None,
    typer.Option(
        help="shorthand for weights, activations and KV format (default: as the model is "
        "released, its checkpoint_weights; bf16 when the spec names none)"
    ),
]
Weights = Annotated[
    str | None,
    typer.Option(
        help="weight format (overrides --dtype): bf16, fp16, "
        "fp8, int8, int4, int4-g128, nf4, nf4-dq, mxfp4, "
        "nvfp4"
    ),
]
Activations = Annotated[
    str | None, typer.Option(help="activation format; sets the compute peak (overrides --dtype)")
]
KvFormat = Annotated[
    str | None, typer.Option("--kv-format", help="KV-cache number format (overrides --dtype)")
]
#: `--kv` meant the KV format before `--kv-format`; it stays, hidden, for old scripts.
KvAlias = Annotated[
    str | None, typer.Option("--kv", hidden=True, help="deprecated: use --kv-format")
]
Tp = Annotated[
    int, typer.Option(help="tensor-parallel GPUs per model copy", callback=in_range(1, MAX_GPUS))
]
Pp = Annotated[
    int,
    typer.Option(help="pipeline-parallel stages per model copy", callback=in_range(1, MAX_GPUS)),
]
Ep = Annotated[
    int, typer.Option(help="expert-parallel GPUs (MoE models)", callback=in_range(1, MAX_GPUS))
]
Ceiling = Annotated[str, typer.Option(help="datasheet (speed of light) or achievable")]
Seed = Annotated[
    int, typer.Option(help="random seed of the synthetic workload", callback=in_range(0, MAX_SEED))
]
#: Mean lengths of a served workload (`serve`, `plot serve`); the old names stay as aliases.
MeanPrompt = Annotated[
    int,
    typer.Option(
        "--prompt", "--input-tokens", help="mean prompt tokens P", callback=in_range(1, MAX_TOKENS)
    ),
]
MeanGen = Annotated[
    int,
    typer.Option(
        "--gen", "--output-tokens", help="mean generated tokens G", callback=in_range(1, MAX_TOKENS)
    ),
]
SloTtft = Annotated[
    float, typer.Option(help="TTFT SLO, seconds", callback=in_range(0, 1e6, open_low=True))
]
SloTpot = Annotated[
    float, typer.Option(help="TPOT SLO, seconds", callback=in_range(0, 1e6, open_low=True))
]
SloAttainment = Annotated[
    float,
    typer.Option(
        help="share of requests that must meet the SLO", callback=in_range(0, 1, open_low=True)
    ),
]
#: Coverage of the interval printed beside each predicted figure (`roofline.calc.intervals`).
Interval = Annotated[
    float,
    typer.Option(
        help="coverage of the interval shown beside each time, rate and cost (0.8: 80%, from "
        "the published-measurement residuals; 0 hides it)",
        callback=in_range(0, 0.99),
    ),
]


#: `serve` and `plot serve`: one declaration and one default each.
ServeRate = Annotated[
    float,
    typer.Option(
        help="mean arrivals per second (--sweep-rate: the first rate tried)",
        callback=in_range(0, 1e6, open_low=True),
    ),
]
SERVE_RATE = 5.0
Requests = Annotated[
    int, typer.Option(help="requests per simulation", callback=in_range(1, MAX_REQUESTS))
]
REQUESTS = 2000

#: `plan` and `plot plan`: one declaration and one default each.
PlanRate = Annotated[
    float | None,
    typer.Option(
        help="mean arrivals per second (Poisson)", callback=in_range(0, 1e6, open_low=True)
    ),
]
PlanPrompt = Annotated[
    int, typer.Option(help="prompt tokens P per request", callback=in_range(1, MAX_TOKENS))
]
PlanGen = Annotated[
    int, typer.Option(help="generated tokens G per request", callback=in_range(1, MAX_TOKENS))
]
P95Ttft = Annotated[
    float, typer.Option(help="p95 TTFT SLO, seconds", callback=in_range(0, 1e6, open_low=True))
]
P95Tpot = Annotated[
    float, typer.Option(help="p95 TPOT SLO, seconds", callback=in_range(0, 1e6, open_low=True))
]
PLAN_SLO_TTFT, PLAN_SLO_TPOT = 1.0, 0.05
PlanDevices = Annotated[
    str | None,
    typer.Option(*HARDWARE_FLAGS, help="devices, comma-separated (default: every priced device)"),
]
MaxGpus = Annotated[
    int,
    typer.Option(help="most GPUs of a deployment, all replicas", callback=in_range(1, MAX_GPUS)),
]
MAX_GPUS_SEARCHED = 64
Formats = Annotated[
    str,
    typer.Option(
        help="formats, comma-separated: W (as --dtype) or W/KV, a group=format item joining the "
        "format before it (bf16,experts=mxfp4); the model as released is always searched too"
    ),
]
FORMATS = "bf16,fp8,int4-g128"
Serving = Annotated[
    str,
    typer.Option(help="both, aggregated (one pool) or disaggregated (prefill and decode pools)"),
]
MaxBatches = Annotated[
    str,
    typer.Option(
        help="scheduler max sequences B tried, comma-separated; `max` adds each replica's "
        "batch max (what its KV pool holds at prompt+gen, capped by the engine's max_num_seqs)"
    ),
]
MAX_BATCHES = "8,16,32,64,128,256,512"


#: Notes for stderr, printed by `main` after a command succeeds (a refusal stays one line).
NOTES: list[str] = []


def kv_format(kv_format: str | None, kv: str | None) -> str | None:
    """`--kv-format`, or the deprecated `--kv` spelling of it (said on stderr at the end)."""
    if kv is not None:
        if kv_format is not None and kv_format != kv:
            raise InvalidInputError("--kv is the old name of --kv-format; give one of them")
        NOTES.append("note: --kv is deprecated; use --kv-format")
    return kv_format or kv


def stack(
    model: Any,
    hw: Any,
    precision: Precision,
    ceiling_name: str,
    engine_name: str,
    specs_dir: list[Path] | None,
    parallel: Any = None,
    *,
    memory_fraction: float | None = None,
    prefill_token_budget: int | None = None,
) -> Stack:
    """The stack a command's flags name, resolved once (`Stack.resolve`): `--engine` is
    loaded only where the ceiling runs one; `--prefill-token-budget` as `token_budget` reads
    it."""
    from ..calc.placement import Parallel
    from ..calc.stack import Stack

    roof = ceiling(ceiling_name)
    return Stack.resolve(
        model,
        hw,
        precision,
        roof,
        engine(engine_name, specs_dir) if roof == "achievable" else None,
        parallel if parallel is not None else Parallel(),
        memory_fraction=memory_fraction,
        prefill_token_budget=token_budget(prefill_token_budget),
    )


def price_tier(tier: str) -> Tier:
    """`--price-tier`: on-demand or discounted."""
    from ..studies.economics import TIERS

    if tier not in TIERS:
        raise InvalidInputError(f"unknown --price-tier '{tier}'; use one of: {', '.join(TIERS)}")
    return cast("Tier", tier)


def check_price_names(prices: Any, devices: Iterable[str]) -> None:
    """Refuse a `--price NAME=USD` whose NAME is neither a catalog device (or alias) nor one
    of the run's `devices`: it would be ignored, the bundled price used."""
    prices.check_names(devices)
