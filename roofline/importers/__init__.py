"""Model importers: Hugging Face config.json (hf) and GGUF headers (gguf). Import calc/ and
below.

Every importer is an `Importer`: what it read (a parsed config, a file's header and tensor
table), the spec's name and where it came from, into one validated `ModelSpec`; a value it
cannot read is a one-line `SpecError` naming `source` and the key. How the source is read
(JSON, a GGUF header) and any check of the checkpoint against the spec stay the importer's
own; `roofline models import` picks the importer by the file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from ..spec.model import ModelSpec

Source = TypeVar("Source", contravariant=True)


class Importer(Protocol[Source]):
    """`(read, name, source) -> ModelSpec`: `hf.spec_from_hf_config` (a parsed config.json)
    and `gguf.spec_from_gguf` (a `GgufFile`) are two."""

    def __call__(self, read: Source, name: str, source: str, /) -> ModelSpec: ...


if TYPE_CHECKING:  # both importers are checked against the protocol by mypy
    from .gguf import GgufFile, spec_from_gguf
    from .hf import spec_from_hf_config

    _hf: Importer[dict[str, Any]] = spec_from_hf_config
    _gguf: Importer[GgufFile] = spec_from_gguf
