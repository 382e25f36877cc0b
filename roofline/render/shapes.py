"""The JSON shapes every command shares (docs/json.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..calc.stack import Stack


def header(model: str, stack: Stack) -> dict:
    """The keys every prediction's JSON starts with, one shape everywhere (docs/json.md)."""
    return {
        "model": model,
        "hardware": stack.hardware.name,
        "ceiling": stack.ceiling,
        "engine": stack.engine.flag if stack.engine is not None else None,
        "precision": stack.precision.as_dict(),
        "parallel": stack.parallel.as_dict(),
    }
