"""Options and parsing shared by several commands."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from ..errors import InvalidInputError
from ..precision import Precision


def __getattr__(name: str) -> Any:
    """`console` is created on first use: `--json` runs never import rich's console."""
    if name == "console":
        from rich.console import Console

        # Tables are wide: when output is not a terminal, do not squeeze them into 80 columns.
        globals()["console"] = Console(width=None if sys.stdout.isatty() else 160)
        return globals()["console"]
    raise AttributeError(name)

SpecsDir = Annotated[
    list[Path] | None,
    typer.Option("--specs-dir", help="extra folder with hardware_specs/ and/or model_specs/ "
                 "subfolders (repeatable; also $ROOFLINE_SPECS_PATH)"),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="print one JSON object instead of tables")]
MemoryFraction = Annotated[float | None, typer.Option(
    "--memory-fraction", help="share of device memory the engine may fill (vLLM's "
    "gpu_memory_utilization); default the engine's (vLLM 0.9), 1 on the datasheet ceiling")]
PrefillTokenBudget = Annotated[int | None, typer.Option(
    "--prefill-token-budget", help="tokens one prefill step holds activations for (chunked "
    "prefill); default the engine's (vLLM: max_num_batched_tokens 8192); 0 = the whole batch "
    "at once")]
RequireFit = Annotated[bool, typer.Option(
    "--require-fit", help="exit 1 when a configuration does not fit in device memory")]


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


EngineOpt = Annotated[str, typer.Option(
    "--engine", help="inference engine profile (name, alias or YAML path; `roofline engines "
    "list`), or `none` for the hardware layer alone; ignored by --ceiling datasheet")]

#: The engine a prediction uses when none is named: the most deployed open serving engine.
DEFAULT_ENGINE = "vllm"


def engine(name: str, specs_dir: list[Path] | None) -> Any:
    """The EngineSpec for `--engine` (None for `none`)."""
    from ..catalog import load_engine

    return None if name.strip().lower() == "none" else load_engine(name, specs_dir or ())


def int_list(text: str, what: str) -> list[int]:
    """'1,16,64' -> [1, 16, 64]; each value a positive integer."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InvalidInputError(f"{what} must be comma-separated integers, got '{text}'") from None
    if not values:
        raise InvalidInputError(f"give at least one {what}")
    bad = [v for v in values if v < 1]
    if bad:
        raise InvalidInputError(f"{what} must be at least 1, got {bad[0]}")
    return values


def positive(value: int, what: str) -> int:
    if value < 1:
        raise InvalidInputError(f"{what} must be at least 1, got {value}")
    return value


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2))


def precision(dtype: str, weights: str | None, activations: str | None, kv: str | None
              ) -> Precision:
    """`--dtype` as the shorthand, each of `--weights/--activations/--kv` overriding its part."""
    base = Precision.uniform(dtype)
    return Precision(weights or base.weights, activations or base.activations, kv or base.kv)


def cost_line(summary: Any, hw: Any, gpus_per_replica: int) -> str:
    """One line of cost and energy for a serve run (bundled on-demand prices), or why not."""
    from ..catalog import load_hardware
    from ..economics import IDLE_FRACTION_OF_TDP, load_prices, serve_economics
    from ..errors import RooflineError

    try:
        devices = {p.hardware: (hw if p.hardware == hw.name else load_hardware(p.hardware))
                   for p in summary.result.deployment.pools}
        e = serve_economics(summary, devices, load_prices(), gpus_per_replica)
    except RooflineError as err:
        return f"cost: not shown ({err})"
    return (f"cost: ${e.usd_per_hour:.2f}/h, ${e.cost_per_million_tokens_usd:.3f} per million "
            f"output tokens at the simulated throughput; energy ≤ "
            f"{e.joules_per_token_upper:.3f} J/token (busy at TDP, idle at "
            f"{IDLE_FRACTION_OF_TDP:.1%} of it)")
