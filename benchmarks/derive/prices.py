"""Derive the bundled price table (`roofline/data/gpu_prices.yaml`) from the price evidence.

    python benchmarks/derive/prices.py [../shared/evidence/catalog/prices-2026.csv] [--out PATH]

Reads the collected price rows (one provider's published $ per GPU-hour for one device, with the
tier, the date it was read and where), checks each row against `ROW_CHECKS` below (a tier that
the source mislabels is corrected, a figure that is not a GPU rental is set aside, each with its
reason), and writes the table, byte-identical on re-run. Printed: every device's figures by
tier and provider, what was set aside and why, and the price chosen.

The rule, for each device and each of two tiers (on-demand; discounted = spot, community or
reserved):
1. Rows used: mapped to a catalog device, not set aside, and with a read date (a price moves
   weekly, so an undated figure is listed in the evidence but not used; "2026-03 (as stated)"
   counts as the month 2026-03).
2. One figure per provider: its most recently read row; among rows read the same day, the
   cheapest (a buyer takes the cheapest offer a provider lists that day).
3. The price is the lower median of those per-provider figures (sorted by price, then provider
   name; element (n - 1) // 2): with an odd count the median, with an even count the lower of
   the two middle figures. It is always one provider's transcribed figure, so it carries that
   row's provider, tier, date and URL; every provider considered is listed beside it.

Devices absent from the evidence CSV keep the rows of the previous table (`SUPPLEMENT`, with
their original citations), and devices searched without result keep a note (`NO_PRICE`), so
`plan` refuses them by name.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CSV = ROOT.parent / "shared" / "evidence" / "catalog" / "prices-2026.csv"
OUT = ROOT / "roofline" / "data" / "gpu_prices.yaml"
DISCOUNTED_TIERS = ("spot", "community", "reserved")
TIERS = ("on-demand", *DISCOUNTED_TIERS)

#: Evidence device label -> catalog device (hardware_specs/ name); None: not used, with why.
DEVICES: dict[str, str | None] = {
    "H100 SXM 80GB": "h100-sxm",
    "H100 PCIe 80GB": "h100-pcie",
    "H200 141GB": "h200",
    "B200 180GB": "b200",
    "B300 288GB": "b300",
    "GH200 96GB": "gh200",
    "MI300X 192GB": "mi300x",
    "MI325X 256GB": "mi325x",
    "L40S 48GB": "l40s",
    "L4 24GB": "l4",
    "A100 SXM 80GB": "a100-sxm-80gb",
    "A100 PCIe 80GB": "a100-pcie-80gb",
    "A100 80GB (form factor not stated)": None,  # SXM or PCIe: cannot tell which device
    "RTX 4090 24GB": "rtx-4090",
    "RTX 5090 32GB": "rtx-5090",
    "RTX PRO 6000 Blackwell 96GB": "rtx-pro-6000",
    "RTX PRO 6000 Blackwell Server Edition 96GB": "rtx-pro-6000-server",
}


@dataclass(frozen=True)
class Row:
    device: str  # evidence label
    provider: str
    tier: str
    usd: str  # as transcribed
    date_seen: str
    source: str
    note: str

    @property
    def price(self) -> float:
        return float(self.usd)

    @property
    def date(self) -> str | None:
        """ISO date (or month) the price was read; None where the evidence shows none."""
        m = re.match(r"(\d{4}-\d{2}(?:-\d{2})?)", self.date_seen)
        return m.group(1) if m else None

    @property
    def url(self) -> str:
        """The source as a URL: a `owner/repo@commit path` citation becomes its GitHub address."""
        s = self.source.strip()
        m = re.match(r"([\w.-]+/[\w.-]+)@([0-9a-f]{7,40}) (\S+)", s)
        if m:
            return f"https://github.com/{m.group(1)}/blob/{m.group(2)}/{m.group(3)}"
        m = re.search(r"https?://\S+", s)
        if m:
            url = m.group(0).rstrip(",;)")
            last = s.split()[-1]
            if url.endswith("/") and "." in last and "/" not in last:
                url += last  # "…/109-gpu-pricing/ (search excerpt…) vendors.json": the file
            return url
        raise ValueError(f"no URL in the source of {self.device} / {self.provider}: {s}")

    @property
    def offer(self) -> str:
        return f"{self.provider} {self.device}: {self.note.strip()}"


#: Row checks, in order; the first whose test matches a row applies. Each is
#: (test, action, reason): action "set-aside" drops the row, any other value is the row's tier.
ROW_CHECKS: list[tuple[str, str, str]] = [
    (
        "RunPod|Community Cloud",
        "community",
        "RunPod Community Cloud runs on third-party hosts without a datacentre SLA; the "
        "evidence labels it on-demand, the table calls that tier community",
    ),
    (
        "deploybase-spot",
        "community",
        "deploybase.ai's 'Spot' column equals RunPod Community Cloud on-demand wherever it can "
        "be checked (H100 SXM 2.69, RTX 4090 0.34 at tgarg01/silybench-data@045df3b), so it is "
        "the community tier, not spot (catalog/corrections.md)",
    ),
    (
        "serverless",
        "set-aside",
        "a RunPod serverless per-second worker rate, not a GPU rental",
    ),
    (
        "GCP|on-demand-equivalent",
        "set-aside",
        "the a3-highgpu-1g shape is Spot/Flex-only: the figure is a list price nobody can rent "
        "on demand",
    ),
    (
        "form factor not stated",
        "set-aside",
        "the form factor (SXM or PCIe) is not stated, so the device is not known",
    ),
]


def check(row: Row) -> tuple[Row | None, str]:
    """The row as used (its tier corrected) or None (set aside), and the check's reason."""
    for test, action, reason in ROW_CHECKS:
        if test == "deploybase-spot":
            hit = "deploybase.ai" in row.source and row.tier == "spot"
        elif "|" in test:
            provider, _, text = test.partition("|")
            hit = row.provider == provider and text in row.note
        else:
            hit = test in row.source or test in row.note
        if hit:
            return (None if action == "set-aside" else replace(row, tier=action)), reason
    return row, ""


#: Devices priced by the previous table but absent from the evidence CSV: its rows, as cited.
SUPPLEMENT: list[dict[str, str]] = [
    {
        "device": "a100-sxm-40gb",
        "provider": "Lambda",
        "tier": "on-demand",
        "usd_per_gpu_hour": "1.99",
        "date_seen": "2026-09-25",
        "source": "tgarg01/silybench-data@045df3b derived/csv/gpu_prices.csv",
        "note": "1x A100 SXM 40GB; source lambda.ai/pricing",
    },
    {
        "device": "h100-nvl",
        "provider": "RunPod",
        "tier": "on-demand",
        "usd_per_gpu_hour": "3.19",
        "date_seen": "2026-09-25",
        "source": "tgarg01/silybench-data@045df3b derived/csv/gpu_prices.csv",
        "note": "H100 NVL 94GB, Secure Cloud",
    },
    {
        "device": "h100-nvl",
        "provider": "RunPod",
        "tier": "community",
        "usd_per_gpu_hour": "2.59",
        "date_seen": "2026-09-25",
        "source": "tgarg01/silybench-data@045df3b derived/csv/gpu_prices.csv",
        "note": "H100 NVL 94GB, Community Cloud",
    },
    {
        "device": "a10",
        "provider": "Lambda",
        "tier": "on-demand",
        "usd_per_gpu_hour": "1.29",
        "date_seen": "2026-09-25",
        "source": "tgarg01/silybench-data@045df3b derived/csv/gpu_prices.csv",
        "note": "1x A10 24GB; source lambda.ai/pricing",
    },
    {
        "device": "a10g",
        "provider": "AWS",
        "tier": "on-demand",
        "usd_per_gpu_hour": "1.006",
        "date_seen": "2026-06-17",
        "source": "https://main.d1m6t5n8e4tvia.amplifyapp.com/blog/"
        "amazon-ec2-on-demand-pricing-instance-families-2026/",
        "note": "g5.xlarge (1x A10G, 4 vCPU, 16 GiB), Linux, us-east-1; host CPU and RAM included",
    },
]

#: Devices searched without a per-device rental price.
NO_PRICE: dict[str, str] = {
    "gb200": "no per-GPU rental price found in the searched public pages (rack-scale offers only)",
    "gaudi2": "no public per-device rental price found in the searched pages",
    "gaudi3": "no public per-device rental price found in the searched pages",
    "mi250x": "no public per-device rental price found in the searched pages",
    "h20": "not rented publicly outside China; no price found in the searched pages",
    "t4": "not searched yet",
    "v100-sxm2-32gb": "not searched yet",
}


@dataclass(frozen=True)
class Choice:
    """The price of one device in one tier group, and the per-provider figures behind it."""

    row: Row
    per_provider: tuple[Row, ...]  # sorted by (price, provider)


def per_provider(rows: list[Row]) -> list[Row]:
    """One row per provider: its latest read date; the cheapest among that day's rows."""
    best: dict[str, Row] = {}
    for r in rows:
        assert r.date is not None
        b = best.get(r.provider)
        if b is None or (r.date, -r.price) > (b.date or "", -b.price):
            best[r.provider] = r
    return sorted(best.values(), key=lambda r: (r.price, r.provider))


def choose(rows: list[Row]) -> Choice | None:
    """The lower median, across providers, of the dated rows given (one tier group)."""
    dated = [r for r in rows if r.date is not None]
    if not dated:
        return None
    figures = per_provider(dated)
    return Choice(figures[(len(figures) - 1) // 2], tuple(figures))


def read_rows(path: Path) -> list[Row]:
    with path.open(newline="", encoding="utf-8") as f:
        rows = [
            Row(
                d["device"],
                d["provider"],
                d["tier"],
                d["usd_per_gpu_hour"],
                d["date_seen"],
                d["source"],
                d["note"],
            )
            for d in csv.DictReader(f)
        ]
    for r in rows:
        if r.tier not in TIERS:
            raise ValueError(f"{r.device} / {r.provider}: unknown tier '{r.tier}'")
        if not r.price > 0:
            raise ValueError(f"{r.device} / {r.provider}: price {r.usd} is not positive")
    return rows


def derive(rows: list[Row]) -> tuple[dict[str, dict[str, Choice | None]], list[str]]:
    """Chosen prices by catalog device and tier group, and a log of every row's fate."""
    log: list[str] = []
    by_device: dict[str, list[Row]] = {}
    for r in rows:
        name = DEVICES.get(r.device, r.device if r.device in _SUPPLEMENTED else None)
        if name is None:
            log.append(f"  set aside  {r.device} / {r.provider} {r.usd}: not a catalog device")
            continue
        used, reason = check(r)
        if used is None:
            log.append(f"  set aside  {r.device} / {r.provider} {r.usd}: {reason}")
            continue
        if used.tier != r.tier:
            log.append(f"  re-tiered  {r.device} / {r.provider} {r.usd}: {r.tier} -> {used.tier}")
        if used.date is None:
            log.append(f"  undated    {r.device} / {r.provider} {r.usd}: listed, not used")
        by_device.setdefault(name, []).append(used)
    out: dict[str, dict[str, Choice | None]] = {}
    for name, rs in by_device.items():
        out[name] = {
            "on-demand": choose([r for r in rs if r.tier == "on-demand"]),
            "discounted": choose([r for r in rs if r.tier in DISCOUNTED_TIERS]),
        }
    return out, log


_SUPPLEMENTED = {s["device"] for s in SUPPLEMENT}


def _q(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def _usd(r: Row) -> str:
    return f"{r.price:g}"


def _considered(c: Choice) -> str:
    return (
        "["
        + ", ".join(_q(f"{r.provider} {_usd(r)} ({r.tier}, {r.date})") for r in c.per_provider)
        + "]"
    )


RULE = (
    "lower median across providers, one figure per provider (its latest dated read, the "
    "cheapest that day), of dated rows; on-demand and discounted (spot/community/reserved) "
    "separately; benchmarks/derive/prices.py"
)


def render(chosen: dict[str, dict[str, Choice | None]], source: str) -> str:
    lines = [
        "# Rental prices, US dollars per GPU-hour, one entry per catalog device (hardware_specs/).",
        "# Written by benchmarks/derive/prices.py from " + source + "; do not edit by hand.",
        "#",
        "# on-demand: pay-as-you-go, no commitment. discounted: spot (interruptible), community",
        "# (third-party hosts without a datacentre SLA) or reserved (a term commitment);",
        "# `discounted_kind` names which. Each price is one provider's transcribed figure, chosen",
        "# by the rule below, with its provider, date and URL; `considered_*` lists every",
        "# provider's figure behind it. A device without a price has null figures and a note, so",
        "# `plan` refuses it by name (pass `--price NAME=USD` to supply one). Prices move weekly;",
        "# the date is part of the number.",
        f"rule: {_q(RULE)}",
        "devices:",
    ]
    for name in sorted(chosen):
        od, dc = chosen[name]["on-demand"], chosen[name]["discounted"]
        lines.append(f"  {name}:")
        if od is None:
            lines.append("    on_demand_usd_per_gpu_hour: null")
        else:
            r = od.row
            lines += [
                f"    on_demand_usd_per_gpu_hour: {_usd(r)}",
                f"    provider: {_q(r.provider)}",
                f"    offer: {_q(r.offer)}",
                f"    source: {_q(r.url)}",
                f"    date: {_q(r.date or '')}",
                f"    considered_on_demand: {_considered(od)}",
            ]
        if dc is None:
            lines.append("    discounted_usd_per_gpu_hour: null")
        else:
            r = dc.row
            lines += [
                f"    discounted_usd_per_gpu_hour: {_usd(r)}",
                f"    discounted_kind: {r.tier}",
                f"    discounted_provider: {_q(r.provider)}",
                f"    discounted_offer: {_q(r.offer)}",
                f"    discounted_source: {_q(r.url)}",
                f"    discounted_date: {_q(r.date or '')}",
                f"    considered_discounted: {_considered(dc)}",
            ]
        if od is None:
            lines.append(f"    note: {_q('no dated on-demand price in the evidence')}")
    for name in sorted(NO_PRICE):
        lines += [
            f"  {name}:",
            "    on_demand_usd_per_gpu_hour: null",
            "    discounted_usd_per_gpu_hour: null",
            f"    note: {_q(NO_PRICE[name])}",
        ]
    return "\n".join(lines) + "\n"


def supplement_rows() -> list[Row]:
    return [
        Row(
            s["device"],
            s["provider"],
            s["tier"],
            s["usd_per_gpu_hour"],
            s["date_seen"],
            s["source"],
            s["note"],
        )
        for s in SUPPLEMENT
    ]


def build(csv_path: Path) -> tuple[str, list[str], dict[str, dict[str, Choice | None]]]:
    rows = read_rows(csv_path) + supplement_rows()
    chosen, log = derive(rows)
    return render(chosen, "shared/evidence/catalog/prices-2026.csv"), log, chosen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="?", type=Path, default=DEFAULT_CSV)
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    text, log, chosen = build(a.csv)
    print("row checks:")
    print("\n".join(log))
    for name in sorted(chosen):
        for tier, c in chosen[name].items():
            if c is None:
                print(f"{name:22s} {tier:10s} none")
                continue
            figs = ", ".join(f"{r.provider} {_usd(r)}" for r in c.per_provider)
            print(f"{name:22s} {tier:10s} {_usd(c.row):>7s} {c.row.provider} [{figs}]")
    a.out.write_text(text, encoding="utf-8")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
