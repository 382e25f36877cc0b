"""Domain errors. The core raises them; only the CLI catches them and prints one line."""

from __future__ import annotations

from typing import Any

#: Control characters a message may quote from a user's file or flag (a key holding a newline),
#: shown escaped so that every error stays one line.
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F)} | {
    0x0A: "\\n",
    0x0D: "\\r",
    0x09: "\\t",
}


class RooflineError(Exception):
    """Base class: the message says what is wrong and what to do about it, on one line (any
    control character it quotes from the input is shown escaped)."""

    def __init__(self, message: object = "", *args: object) -> None:
        super().__init__(str(message).translate(_CONTROL), *args)


class SpecError(RooflineError):
    """A spec file is missing, unreadable, or fails validation."""


class UnknownNameError(RooflineError):
    """A model or hardware name matches nothing in the catalog."""


class InvalidInputError(RooflineError):
    """A workload the calculator cannot represent (negative size, unsupported dtype...)."""


class DoesNotFitError(RooflineError):
    """A configuration whose memory exceeds the device and the caller asked for a hard check."""


class InconclusiveError(RooflineError):
    """A check that could not judge (its measurements disagree too much): exit status 2."""

    exit_code = 2


def field_error(e: Any) -> str:
    """A pydantic ValidationError as one phrase naming the first bad field:
    "field 'layers': Input should be greater than 0 (and 2 more)"."""
    first = e.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "(top level)"
    more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
    return f"field '{field}': {first['msg']}{more}"
