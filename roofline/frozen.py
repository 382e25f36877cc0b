"""The one base of every spec and record model: immutable, no unknown keys, finite numbers."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """A validated, immutable record: a misspelt key or an inf/NaN value is refused."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
