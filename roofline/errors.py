"""Domain errors. The core raises them; only the CLI catches them and prints one line."""

from __future__ import annotations


class RooflineError(Exception):
    """Base class: the message says what is wrong and what to do about it."""


class SpecError(RooflineError):
    """A spec file is missing, unreadable, or fails validation."""


class UnknownNameError(RooflineError):
    """A model or hardware name matches nothing in the catalog."""


class InvalidInputError(RooflineError):
    """A workload the calculator cannot represent (negative size, unsupported dtype...)."""


class DoesNotFitError(RooflineError):
    """A configuration whose memory exceeds the device and the caller asked for a hard check."""
