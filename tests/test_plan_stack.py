"""`plan` resolves each candidate's stack once, when its group is built (issue 43): confirming
it in the simulator, its intervals and the choice at another confidence reuse
`Candidate.stack` instead of rebuilding it from the device, format and layout names."""

from __future__ import annotations

from roofline import plan as planmod
from roofline.calc.stack import Stack
from roofline.plan import Requirement, Space
from roofline.spec.catalog import load_engine, load_hardware, load_model
from roofline.studies.economics import load_prices


def test_plan_resolves_each_stack_once_when_its_group_is_built(monkeypatch) -> None:
    real, calls = Stack.resolve.__func__, []  # type: ignore[attr-defined]

    def counted(cls, *args, **kw):
        calls.append(args[:2])
        return real(cls, *args, **kw)

    monkeypatch.setattr(Stack, "resolve", classmethod(counted))
    model, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    # rate 4/s, P = 512, G = 128, SLO TTFT 0.5 s, TPOT 30 ms
    req = Requirement(4, 512, 128, 0.5, 0.03)
    space = Space(("h100-sxm",), max_gpus=2, max_batches=(16, 64), serving="aggregated")
    args = (model, [hw], req, space, load_prices())
    planmod.build_groups(*args, engine=load_engine("vllm"))
    # one a (format, layout): bf16, fp8, int4-g128 over the layouts of at most 2 GPUs (TP1,
    # TP2, PP2): 3 x 3 = 9
    built = len(calls)
    assert built == 9
    calls.clear()
    r = planmod.plan(*args, confirm_top=2, requests=100, engine=load_engine("vllm"))
    assert (
        len(r.confirmed) >= 1 and r.robust_choice
    )  # confirmed, with intervals and the robust choice
    assert len(calls) == built  # the groups' resolves, and none after them
    assert all(c.stack is not None and c.stack.parallel == c.parallel for c in r.confirmed)
