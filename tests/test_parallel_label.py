"""`Parallel.label`: the one spelling of a replica's layout (issue 43), in plan's candidate
label, its diagnoses, estimate's title and serve's title."""

from __future__ import annotations

import pytest

from roofline.calc.placement import Parallel


@pytest.mark.parametrize(
    ("par", "label"),
    [
        (Parallel(), "TP1"),  # one GPU a replica: no degree above 1
        (Parallel(replicas=3), "TP1"),  # replicas are the caller's to say
        (Parallel(tp=4), "TP4"),
        (Parallel(tp=4, pp=2), "TP4 PP2"),
        (Parallel(pp=2, ep=8), "PP2 EP8"),
        (Parallel(tp=2, pp=3, ep=4, replicas=2), "TP2 PP3 EP4"),
    ],
)
def test_label_names_the_degrees_above_one(par: Parallel, label: str) -> None:
    assert par.label == label


def test_estimate_title_spells_the_layout_with_the_label() -> None:
    from roofline.calc.phases import estimate
    from roofline.calc.stack import Stack
    from roofline.render.report import estimate_table
    from roofline.spec.catalog import load_hardware, load_model

    m, hw = load_model("llama-3.1-70b"), load_hardware("h100-sxm")
    stack = Stack.resolve(m, hw, parallel=Parallel(tp=4, replicas=2))
    title = str(estimate_table(estimate(m, stack, [1], 128, 16)).title)
    # 4 GPUs a replica x 2 replicas = 8 GPUs
    assert "; 8 GPUs = TP4 × 2 replica(s) over " in title
