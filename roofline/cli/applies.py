"""Options that apply only in one mode of a command, declared once, refused in one place.

`validate` has three modes (a results file of `roofline measure`, --published, --serving) and
`serve` three independent ones (the workload, speculation, the policy); an option of one mode
given in another used to be dropped without a word (issue 42). Each `Modes` below names the
states of one such axis, how the parsed options select a state, and which options apply in
which states. `refuse_inapplicable` reads the command line once, before the command runs, and
refuses a typed option outside its states: one `error:` line naming the option and the mode it
belongs to. An option a user leaves at its default is never refused."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInputError

Params = Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class Modes:
    """One axis of a command's modes: `state` picks the mode the parsed options select (None:
    the options contradict each other, which the command itself refuses); `only` maps a
    parameter name to the modes it applies in; `says` words the refusal from the typed flags,
    the modes they apply in and the mode selected."""

    command: str
    select: Mapping[str, tuple[str, ...]]  # mode -> the argv that selects it (for tests)
    state: Callable[[Params], str | None]
    only: Mapping[str, tuple[str, ...]]
    says: str  # fields: {flags} {verb} {verb_shape} {it}, {modes} (`command mode` each), {mode}


def _policies(p: Params) -> set[str]:
    compare = p.get("compare") or ""
    return {p.get("policy_name") or "", *(c.strip() for c in compare.split(","))}


#: the modes of `validate`, as its help names them
SERVING, PUBLISHED, RESULTS = "--serving", "--published", "RESULTS.json"


def _validate_mode(p: Params) -> str | None:
    if p.get("serving") and p.get("published"):
        return None  # `validate` says "not both"
    return SERVING if p.get("serving") else PUBLISHED if p.get("published") else RESULTS


MODES: tuple[Modes, ...] = (
    Modes(
        command="validate",
        select={RESULTS: ("results.json",), PUBLISHED: ("--published",), SERVING: ("--serving",)},
        state=_validate_mode,
        only={
            # roofline/cli/serving_validate.py run_serving reads these ...
            "model": (SERVING,),
            "tp": (SERVING,),
            "policy_name": (SERVING,),
            "requests": (SERVING,),
            "replicas": (SERVING,),
            "max_error": (SERVING,),
            # ... roofline/cli/published.py run_published these ...
            "gate": (PUBLISHED,),
            "write_residuals": (PUBLISHED,),
            # ... and measure.py _validate these; some two of them
            "tolerance": (RESULTS,),
            "engine": (PUBLISHED, SERVING),
            "hardware": (RESULTS, SERVING),
            "ceiling": (RESULTS, PUBLISHED),
        },
        says="{flags} {verb} to {modes} only, not to `validate {mode}`; drop {it}",
    ),
    Modes(
        command="serve",
        select={"synthetic": (), "--trace": ("--trace", "t.csv"), "--from": ("--from", "b.json")},
        state=lambda p: (
            "--trace" if p.get("trace") else "--from" if p.get("from_file") else "synthetic"
        ),
        only={
            n: ("synthetic",)
            for n in (
                "rate",
                "requests",
                "arrivals",
                "lengths",
                "input_tokens",
                "output_tokens",
                "sigma",
            )
        },
        says="{flags} {verb_shape} the synthetic workload, which {mode} replaces; drop {it}",
    ),
    Modes(
        command="serve",
        select={"--speculate": ("--speculate", "2", "--mtp"), "no speculation": ()},
        state=lambda p: "no speculation" if p.get("speculate") is None else "--speculate",
        only={
            n: ("--speculate",)
            for n in ("draft", "mtp", "eagle", "heads", "acceptance", "acceptance_sd")
        },
        says="{flags} {verb} to speculative decoding; add --speculate K or drop {it}",
    ),
    Modes(
        command="serve",
        select={"disaggregated": ("--policy", "disaggregated"), "other": ("--policy", "engine")},
        state=lambda p: "disaggregated" if "disaggregated" in _policies(p) else "other",
        only={
            n: ("disaggregated",)
            for n in ("prefill_replicas", "decode_replicas", "prefill_hardware", "decode_hardware")
        },
        says="{flags} {verb} to the disaggregated policy only; add --policy disaggregated or "
        "drop {it}",
    ),
)


def refused(modes: Modes, params: Params, typed: list[str], flags: Mapping[str, str]) -> str | None:
    """The refusal of the typed options that do not apply in the mode `params` select."""
    mode = modes.state(params)
    if mode is None:
        return None
    out = [n for n in typed if n in modes.only and mode not in modes.only[n]]
    if not out:
        return None
    out = [n for n in out if modes.only[n] == modes.only[out[0]]]  # one line, one set of modes
    allowed = [m for m in modes.select if m in modes.only[out[0]]]
    one = len(out) == 1
    return modes.says.format(
        flags=", ".join(flags.get(n, n) for n in out),
        verb="applies" if one else "apply",
        verb_shape="shapes" if one else "shape",
        it="it" if one else "them",
        modes=" or ".join(f"`{modes.command} {m}`" for m in allowed),
        mode=mode,
    )


def refuse_inapplicable(
    command: Any, path: list[str], args: list[str], settings: dict[str, Any] | None = None
) -> None:
    """Parse `args` for `command` (named `path`, as typed after `roofline`) without running it
    and raise the first refusal of `MODES`. A command line that does not parse is left to the
    command, which reports it. `settings`: the root's context settings, which the run's
    context inherits (click caches a command's help option by the first context's names)."""
    name = " ".join(path)
    axes = [m for m in MODES if m.command == name]
    if not axes:
        return
    try:
        ctx = command.make_context(path[-1], list(args), resilient_parsing=True, **(settings or {}))
    except Exception:  # noqa: BLE001  # its own parse says what is wrong
        return
    # by name: typer may run its own copy of click, whose ParameterSource is another enum
    typed = [
        p.name
        for p in command.params
        if p.name and getattr(ctx.get_parameter_source(p.name), "name", "") == "COMMANDLINE"
    ]
    flags = {p.name: p.opts[0] for p in command.params if p.name and p.opts}
    for axis in axes:
        if (why := refused(axis, ctx.params, typed, flags)) is not None:
            raise InvalidInputError(why)
