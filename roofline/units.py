"""Human formatting of SI quantities for tables (JSON always carries raw SI numbers)."""

from __future__ import annotations

import re


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


def _time_factor(value: float) -> tuple[float, str]:
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
        if abs(value) >= factor:
            return factor, unit
    return 1e-12, "ps"


def seconds_range(value: float, low: float, high: float, sep: str = " ") -> str:
    """A time and its interval in the value's unit: '7.67 ms (6.9–9.4)' (`sep` "\n" puts
    the interval on a line of its own, as a table cell)."""
    if not all(x == x and abs(x) != float("inf") for x in (value, low, high)):
        return seconds(value)
    factor, _ = _time_factor(float(f"{value:.3g}"))
    return _with_range(seconds(value), _short(low / factor), _short(high / factor), sep)


def _with_range(value: str, low: str, high: str, sep: str) -> str:
    """'7.67 ms (6.9–9.4)' on one line; on two (a table cell) the bare range '6.9–9.4'."""
    return f"{value}{sep}{low}–{high}" if sep == "\n" else f"{value}{sep}({low}–{high})"


def _short(x: float) -> str:
    """Two significant figures, never in exponent form: 6.9, 12, 190, 3.6k, 12k, 1.2M."""
    for factor, prefix in ((1e6, "M"), (1e3, "k")):
        if abs(x) >= factor:
            return f"{_short(x / factor)}{prefix}"
    return f"{float(f'{x:.2g}'):g}" if abs(x) >= 1e-4 else f"{x:.2g}"


def number_range(value: float, low: float, high: float, fmt: str = ",.0f", sep: str = " ") -> str:
    """A figure as `fmt` and its interval to two figures: '3,441 (2.4k–3.8k)'."""
    if not all(x == x and abs(x) != float("inf") for x in (value, low, high)):
        return format(value, fmt)
    return _with_range(format(value, fmt), _short(low), _short(high), sep)


def version_key(version: str) -> tuple[int, ...]:
    """'0.7.3.dev138+g21f' → (0, 7, 3); 'v0.6.4.post1' → (0, 6, 4); '0.8' → (0, 8, 0)."""
    m = re.match(r"v?(\d+(?:\.\d+)*)", version.strip())
    if not m:
        raise ValueError(f"'{version[:40]}' is not a version number")
    parts = [int(x) for x in m.group(1).split(".") if x != ""][:3]
    return tuple(parts + [0] * (3 - len(parts)))  # '0.8' is 0.8.0


#: An engine release nobody stated (a published row without a version or a dated range): no
#: kernel table measured on a named release stands for it.
UNKNOWN_RELEASE = "unknown"
