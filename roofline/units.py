"""Human formatting of SI quantities for tables (JSON always carries raw SI numbers)."""

from __future__ import annotations


def si(value: float, unit: str, digits: int = 3) -> str:
    """`si(26.03e9, 'B')` -> '26.0 GB' (decimal prefixes)."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}"


def seconds(value: float) -> str:
    """A time with an SI prefix, 3 significant figures: 6.95e-9 -> '6.95 ns'."""
    if value != value or value in (float("inf"), float("-inf")):
        return f"{value} s"
    value = float(f"{value:.3g}")  # round first: 999.9 ns is '1 µs', not '1e+03 ns'
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {unit}"
    return f"{value * 1e12:.3g} ps" if value else "0 s"


def si_pair(a: float, b: float, unit: str, digits: int = 3) -> tuple[str, str]:
    """Two compared quantities with enough digits to tell them apart: (80.2e9, 80.0e9, 'B')
    -> ('80.2 GB', '80 GB') but (80.04e9, 79.98e9) -> ('80.04 GB', '79.98 GB'), never
    "needs 80 GB, has 80 GB" for values that differ."""
    for d in range(digits, digits + 6):
        x, y = si(a, unit, d), si(b, unit, d)
        if x != y or a == b:
            return x, y
    return x, y
