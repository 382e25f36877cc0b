"""Finding and loading spec files: the bundled catalog plus the user's own folders.

Search order: folders given explicitly (CLI `--specs-dir`), then `$ROOFLINE_SPECS_PATH`
(os.pathsep-separated), then the bundled `hardware_specs/` and `model_specs/`. Each user
folder holds `hardware_specs/` and/or `model_specs/` subfolders of YAML files. Anything that
looks like a path to a `.yaml` file is loaded directly.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Generic, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from .errors import SpecError, UnknownNameError, field_error
from .engine import EngineSpec
from .hardware import HardwareSpec
from .model import ModelSpec

SPECS_PATH_ENV = "ROOFLINE_SPECS_PATH"
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

Spec = TypeVar("Spec", bound=BaseModel)


def normalise(name: str) -> str:
    """Case- and punctuation-insensitive key: 'NVIDIA H100_SXM' -> 'nvidia-h100-sxm'."""
    return "-".join(name.strip().lower().replace("_", " ").replace("/", " ").split())


def _read_yaml(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError(f"{path}: cannot read spec file ({e.strerror})") from None
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise SpecError(f"{path}{where}: broken YAML ({problem}); fix the file") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping of fields at the top level")
    return data


def _validate(cls: type[Spec], data: dict, path: Path | str) -> Spec:
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise SpecError(f"{path}: {field_error(e)}") from None


def load_spec_file(cls: type[Spec], path: str | Path) -> Spec:
    """Load and validate one YAML spec file."""
    path = Path(path)
    return _validate(cls, _read_yaml(path), path)


def _user_dirs(extra: Sequence[str | Path]) -> list[Path]:
    env = os.environ.get(SPECS_PATH_ENV, "")
    dirs = [Path(d) for d in extra] + [Path(d) for d in env.split(os.pathsep) if d]
    for d in dirs:
        if not d.is_dir():
            raise SpecError(
                f"spec folder '{d}' does not exist (from --specs-dir or ${SPECS_PATH_ENV})")
    return dirs


@dataclass(frozen=True)
class _Entry:
    name: str
    aliases: tuple[str, ...]
    path: Path


@dataclass(frozen=True)
class Catalog(Generic[Spec]):
    """All spec files of one kind on the search path, indexed by name and alias."""

    kind: str  # "hardware" or "model"
    cls: type[Spec]
    entries: tuple[_Entry, ...]

    def _index(self) -> dict[str, _Entry]:
        index: dict[str, _Entry] = {}
        for e in reversed(self.entries):  # earlier folders win
            for key in (e.name, *e.aliases):
                index[normalise(key)] = e
        return index

    def names(self) -> list[str]:
        seen: dict[str, None] = {}
        for e in self.entries:
            seen.setdefault(e.name, None)
        return sorted(seen)

    def load(self, name_or_path: str) -> Spec:
        """Resolve a name, alias, or path to a validated spec."""
        if _looks_like_path(name_or_path):
            return load_spec_file(self.cls, name_or_path)
        entry = self._index().get(normalise(name_or_path))
        if entry is None:
            raise UnknownNameError(self._unknown(name_or_path))
        return _load_cached(self.cls, entry.path)

    def load_all(self) -> list[Spec]:
        return [self.load(n) for n in self.names()]

    def _unknown(self, name: str) -> str:
        keys = {normalise(k): e.name for e in self.entries for k in (e.name, *e.aliases)}
        close = difflib.get_close_matches(normalise(name), list(keys), n=4, cutoff=0.5)
        suggestions = sorted({keys[c] for c in close})
        hint = f"did you mean: {', '.join(suggestions)}? " if suggestions else ""
        return (f"unknown {self.kind} '{name}'; {hint}"
                f"run `roofline {_LIST_COMMAND[self.kind]} list` "
                "for the known names, or pass a path to a YAML spec")


_LIST_COMMAND = {"model": "models", "hardware": "hardware", "engine": "engines"}


def _looks_like_path(s: str) -> bool:
    """A YAML file name, or an existing file ('meta-llama/Llama-2-7b-hf' is an alias)."""
    return s.endswith((".yaml", ".yml")) or Path(s).is_file()


@lru_cache(maxsize=256)
def _load_cached(cls: type[Spec], path: Path) -> Spec:
    return load_spec_file(cls, path)


def _scan(folders: Iterable[Path]) -> tuple[_Entry, ...]:
    entries = []
    for folder in folders:
        for path in sorted(folder.glob("*.yaml")):
            data = _read_yaml(path)
            name = data.get("name")
            if not isinstance(name, str):
                raise SpecError(f"{path}: field 'name': missing; every spec needs a name")
            aliases = tuple(str(a) for a in data.get("aliases", ()) or ())
            entries.append(_Entry(name, aliases, path))
    return tuple(entries)


def _bundled(folder: str) -> Path:
    """A spec folder shipped with roofline (the subpackage `roofline.<folder>`)."""
    return Path(str(resources.files(f"roofline.{folder}")))


def hardware_catalog(specs_dirs: Sequence[str | Path] = ()) -> Catalog[HardwareSpec]:
    folders = [d / "hardware_specs" for d in _user_dirs(specs_dirs)]
    folders = [f for f in folders if f.is_dir()] + [_bundled("hardware_specs")]
    return Catalog("hardware", HardwareSpec, _scan_cached(tuple(folders)))


def model_catalog(specs_dirs: Sequence[str | Path] = ()) -> Catalog[ModelSpec]:
    folders = [d / "model_specs" for d in _user_dirs(specs_dirs)]
    folders = [f for f in folders if f.is_dir()] + [_bundled("model_specs")]
    return Catalog("model", ModelSpec, _scan_cached(tuple(folders)))


def engine_catalog(specs_dirs: Sequence[str | Path] = ()) -> Catalog[EngineSpec]:
    folders = [d / "engine_specs" for d in _user_dirs(specs_dirs)]
    folders = [f for f in folders if f.is_dir()] + [_bundled("engine_specs")]
    return Catalog("engine", EngineSpec, _scan_cached(tuple(folders)))


@lru_cache(maxsize=16)
def _scan_cached(folders: tuple[Path, ...]) -> tuple[_Entry, ...]:
    return _scan(folders)


def load_hardware(name_or_path: str, specs_dirs: Sequence[str | Path] = ()) -> HardwareSpec:
    """A hardware spec by catalog name, alias (`H100`), or path to a YAML file."""
    if isinstance(name_or_path, HardwareSpec):
        return name_or_path
    return hardware_catalog(specs_dirs).load(name_or_path)


def load_model(name_or_path: str, specs_dirs: Sequence[str | Path] = ()) -> ModelSpec:
    """A model spec by catalog name, alias, or path to a YAML file."""
    if isinstance(name_or_path, ModelSpec):
        return name_or_path
    return model_catalog(specs_dirs).load(name_or_path)


def load_engine(name_or_path: str, specs_dirs: Sequence[str | Path] = ()) -> EngineSpec:
    """An engine profile by catalog name, alias (`trt-llm`), or path to a YAML file."""
    if isinstance(name_or_path, EngineSpec):
        return name_or_path
    return engine_catalog(specs_dirs).load(name_or_path)
