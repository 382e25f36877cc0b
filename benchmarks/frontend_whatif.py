"""What-if: host and front-end terms from component evidence, applied to the burst rows.

    python benchmarks/frontend_whatif.py [SERVING_DEV_CSV] [--ids sd067-sd091]

Reruns the serving simulator exactly as `benchmarks/serving_dev_check.py` does (its `predict`)
on the rows sent all at once (rate `inf`, no client concurrency cap: GPUStack's
1,000-prompt bursts, `roofline/data/serving.csv` sd067-sd091), first as it stands, then with a
per-engine term from docs/evidence/frontend-throughput.md injected into every step:

    step_s = max(device_s + a + b·B,  B·c)

B: the sequences in the step; a: exposed host time per step (s); b: exposed host time per
sequence (s); c: front-end time per streamed token (s) of the engine's single API /
tokenizer-manager / detokenizer process. That process runs beside the engine, so it is not
added to the step: it bounds it (a client sees a token no sooner than the front end has
streamed everyone else's). Nothing is fitted to the rows; the terms are the figures below.

The simulator has an injection point for `a` only (the engine's `host_step_us`); the per-sequence
and front-end parts are injected by wrapping `MixedStepCost._times`, the one place every step
time (mixed, decode-only and their vectorised forms) is assembled. MLA models split into two
step costs (DeepSeek-R1) also pass through `_times`, except the mixed-step sum of
`MlaPathsStepCost.step_s`, which adds `host_s` directly: there only `a` applies. This script edits
nothing under roofline/; the patch lives for the run only.
"""

from __future__ import annotations

import argparse
import csv as csvlib
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serving_dev_check as sdc  # noqa: E402

from roofline.serve import stepcost  # noqa: E402

DEFAULT_CSV = Path("/work/shared/evidence/serving/serving-dev.csv")


@dataclass(frozen=True, kw_only=True)
class HostTerm:
    """Per-step host and front-end time of one engine release (docstring of the module)."""

    a_s: float  # exposed host time per step, s
    b_s: float  # exposed host time per running sequence, s
    c_s: float  # front-end time per streamed token (bounds the step at B·c), s; 0: none
    source: str


#: engine (spec name) -> term. Figures and sources: docs/evidence/frontend-throughput.md.
TERMS = {
    # V1 without --async-scheduling (the 0.11 default): ~0.4 ms + 1.1 us/sequence exposed
    # (host-cost-per-step.md: PR #42131, PR #46112); front end: the V1 one-API-server ceiling
    # 12,850 tok/s with a 1B model on A100 at 400 streams (PR #12287 "before") -> 78 us/token
    "vllm": HostTerm(a_s=0.4e-3, b_s=1.1e-6, c_s=1 / 12850, source="PR #42131/#46112; PR #12287"),
    # overlap scheduler hides the scheduler (a ~ 0); front end: client ITL 180 ms at batch
    # 1024 with the tokenizer/detokenizer path, 39 ms without (issue #23393, 0.5.10, H200)
    # -> 180 ms / 1024 = 176 us per streamed token
    "sglang": HostTerm(a_s=0.1e-3, b_s=0.0, c_s=0.180 / 1024, source="issue #23393"),
    # PyExecutor ~580 us per iteration exposed at concurrency 64 (issue #13957); no
    # per-token front-end figure found for trtllm-serve
    "tensorrt-llm": HostTerm(a_s=0.58e-3, b_s=0.0, c_s=0.0, source="issue #13957"),
}


def _patched_times(orig, term: HostTerm):
    def _times(self, x, decode=False, logit_rows=None):
        t = orig(self, x, decode, logit_rows)
        B = np.asarray(x, dtype=float)[..., self._sequences_col]
        return np.maximum(t - self.host_step_s + term.a_s + term.b_s * B, B * term.c_s)

    return _times


def run(csv: Path, ids: set[str], with_terms: bool, parts: str = "abc") -> list[sdc.Row]:
    """Predict the runs holding `ids`, each under its engine's term when `with_terms` (only
    the `parts` of it named: a, b, c; a part left out takes the engine spec's value, or 0)."""
    if not with_terms:
        return [r for r in sdc.predict(csv, ids).done if r.id in ids]
    orig = stepcost.MixedStepCost._times
    load = sdc.load_engine
    rows: list[sdc.Row] = []
    try:
        for name, full in TERMS.items():
            term = HostTerm(
                a_s=full.a_s if "a" in parts else _spec_host_s(name),
                b_s=full.b_s if "b" in parts else 0.0,
                c_s=full.c_s if "c" in parts else 0.0,
                source=full.source,
            )

            def load_with(n, name=name, term=term):
                e = load(n)
                return e.model_copy(update={"host_step_us": term.a_s * 1e6}) if n == name else e

            sdc.load_engine = load_with
            stepcost.MixedStepCost._times = _patched_times(orig, term)
            mine = {r["id"] for r in _rows(csv) if sdc.ENGINES.get(r["engine"].split()[0]) == name}
            rows += [r for r in sdc.predict(csv, ids & mine).done if r.id in ids & mine]
    finally:
        stepcost.MixedStepCost._times = orig
        sdc.load_engine = load
    return rows


def _spec_host_s(name: str) -> float:
    return sdc.load_engine(name).host_step_us * 1e-6


def _rows(csv: Path) -> list[dict]:
    with open(csv, newline="") as f:
        return list(csvlib.DictReader(f))


def parse_ids(spec: str) -> set[str]:
    out: set[str] = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        if not lo.startswith("sd") or (hi and not hi.startswith("sd")):
            raise ValueError(f"bad id range {part!r} (expected sdNNN or sdNNN-sdNNN)")
        a, b = int(lo[2:]), int((hi or lo)[2:])
        out |= {f"sd{i:03d}" for i in range(a, b + 1)}
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("csv", type=Path, nargs="?", default=DEFAULT_CSV, help="serving-dev.csv")
    p.add_argument("--ids", default="sd067-sd091", help="rows to compare (sdNNN-sdNNN,...)")
    p.add_argument("--parts", default="abc", help="parts of the term to apply: a, b, c")
    args = p.parse_args(argv)
    if not args.csv.is_file():
        sys.exit(f"error: {args.csv}: no such file")
    try:
        ids = parse_ids(args.ids)
    except ValueError as e:
        sys.exit(f"error: --ids: {e}")
    if not args.parts or set(args.parts) - set("abc"):
        sys.exit(f"error: --parts {args.parts!r}: use letters of 'abc'")
    before = {r.id: r for r in run(args.csv, ids, with_terms=False)}
    after = {r.id: r for r in run(args.csv, ids, with_terms=True, parts=args.parts)}
    print("| id | stack | metric | measured | predicted | error | with term | error |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for i in sorted(before):
        r, w = before[i], after[i]
        print(
            f"| {i} | {r.stack} | {r.metric} | {r.measured:.4g} | {r.predicted:.4g} | "
            f"{r.error:+.3f} | {w.predicted:.4g} | {w.error:+.3f} |"
        )
    print()
    for metric in sorted({r.metric for r in before.values()}):
        b = [abs(r.error) for r in before.values() if r.metric == metric]
        a = [abs(after[r.id].error) for r in before.values() if r.metric == metric]
        print(
            f"{metric}: median |error| {statistics.median(b):.3f} -> {statistics.median(a):.3f}"
            f" ({len(b)} rows)"
        )
    b = [abs(r.error) for r in before.values()]
    a = [abs(after[i].error) for i in before]
    print(f"all: median |error| {statistics.median(b):.3f} -> {statistics.median(a):.3f}")
    for name, t in TERMS.items():
        print(
            f"term {name}: a {t.a_s * 1e3:.2f} ms, b {t.b_s * 1e6:.1f} us/seq, "
            f"c {t.c_s * 1e6:.0f} us/token ({t.source})"
        )


if __name__ == "__main__":
    main()
