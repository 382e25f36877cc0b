"""Finding and loading spec files: the bundled catalog plus the user's own folders.

Search order: folders given explicitly (CLI `--specs-dir`), then `$ROOFLINE_SPECS_PATH`
(os.pathsep-separated), then the bundled `hardware_specs/` and `model_specs/`. Each user
folder holds `hardware_specs/` and/or `model_specs/` subfolders of YAML files. Anything that
looks like a path to a `.yaml` file is loaded directly.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Generic, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import InvalidInputError, SpecError, UnknownNameError, field_error
from ..files import is_regular_file, read_text
from .engine import EngineSpec
from .hardware import HardwareSpec
from .model import MAX_LAYERS, ModelSpec

SPECS_PATH_ENV = "ROOFLINE_SPECS_PATH"
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: A spec is a page of YAML; a larger file is not a spec (and is refused before it is read).
MAX_SPEC_BYTES = 1 * 2**20
#: Values (mappings, lists, scalars) a spec may expand to once YAML aliases are followed; a
#: "billion laughs" document of a few hundred bytes expands past it at once.
MAX_SPEC_NODES = 100_000

Spec = TypeVar("Spec", bound=BaseModel)


def normalise(name: str) -> str:
    """Case- and punctuation-insensitive key: 'NVIDIA H100_SXM' -> 'nvidia-h100-sxm'."""
    return "-".join(name.strip().lower().replace("_", " ").replace("/", " ").split())


def _check_expansion(data: object, path: Path) -> None:
    """Refuse a document whose aliases expand it beyond MAX_SPEC_NODES values (counted with
    every alias followed, as validation would; stops as soon as the limit is passed)."""
    stack, seen = [data], 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > MAX_SPEC_NODES:
            raise SpecError(
                f"{path}: expands to more than {MAX_SPEC_NODES:,} values (YAML "
                "aliases nested too deep?); a spec is a page of fields, fix it"
            )
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


#: Nesting a spec may have (it needs about five levels); libyaml's composer recurses on the C
#: stack, so a document nested thousands deep would crash the process, not raise.
MAX_SPEC_DEPTH = 64


def _check_depth(text: str, path: Path) -> None:
    """Refuse a document nested deeper than MAX_SPEC_DEPTH, from the parser's event stream
    (iterative: safe at any depth) before anything composes it."""
    if (
        text.count("[") + text.count("{") <= MAX_SPEC_DEPTH
        and max((len(line) - len(line.lstrip(" ")) for line in text.splitlines()), default=0)
        <= MAX_SPEC_DEPTH
    ):
        return  # fewer brackets and indentation than levels: cannot be nested that deep
    depth = 0
    too_deep = SpecError(
        f"{path}: nested more than {MAX_SPEC_DEPTH} levels deep; a spec is a "
        "page of fields, fix the file"
    )
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
                depth += 1
                if depth > MAX_SPEC_DEPTH:
                    raise too_deep
            elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
                depth -= 1
    except yaml.YAMLError as e:
        # libyaml 0.2.6+ (PyYAML 6.0.4 wheels) stops at its own nesting limit in the parser
        if "nesting depth" in str(getattr(e, "problem", "") or e):
            raise too_deep from None
        # anything else: the load that follows reports it, with its line


def _read_yaml(path: Path) -> dict:
    text = read_text(path, "spec file", MAX_SPEC_BYTES)
    _check_depth(text, path)
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise SpecError(f"{path}{where}: broken YAML ({problem}); fix the file") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping of fields at the top level")
    _check_expansion(data, path)
    return data


#: Top-level sizes beyond which a spec cannot be real and would stall the calculator (it
#: walks layers one by one, `model.MAX_LAYERS`): refused before validation.
_SIZE_LIMITS: dict[type, dict[str, int]] = {ModelSpec: {"layers": MAX_LAYERS}}


#: No count in a spec (parameters included) comes near this; larger integers would overflow
#: the calculator's 64-bit arithmetic.
MAX_SPEC_INT = 10**15


def _huge_int(data: object, where: str = "") -> str | None:
    """The dotted path of the first integer beyond MAX_SPEC_INT in `data`, if any."""
    if isinstance(data, bool):
        return None
    if isinstance(data, int):
        return where if abs(data) > MAX_SPEC_INT else None
    items = (
        data.items()
        if isinstance(data, dict)
        else enumerate(data)
        if isinstance(data, list)
        else ()
    )
    for key, value in items:
        found = _huge_int(value, f"{where}.{key}" if where else str(key))
        if found is not None:
            return found
    return None


def _validate(cls: type[Spec], data: dict, path: Path | str) -> Spec:
    huge = _huge_int(data)
    if huge is not None:
        raise SpecError(
            f"{path}: field '{huge}': more than {MAX_SPEC_INT:,}; no real spec "
            "has a count that large, fix the file"
        )
    for field, limit in _SIZE_LIMITS.get(cls, {}).items():
        value = data.get(field)
        if isinstance(value, int | float) and value > limit:
            raise SpecError(
                f"{path}: field '{field}': {value:,} is more than {limit:,}; "
                "no real model has that many, fix the file"
            )
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise SpecError(f"{path}: {field_error(e)}; fix the spec file") from None


def load_spec_file(cls: type[Spec], path: str | Path) -> Spec:
    """Load and validate one YAML spec file."""
    path = Path(path)
    return _validate(cls, _read_yaml(path), path)


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):  # a name too long for the system, a NUL byte
        return False


def _user_dirs(extra: Sequence[str | Path]) -> list[Path]:
    env = os.environ.get(SPECS_PATH_ENV, "")
    dirs = [Path(d) for d in extra] + [Path(d) for d in env.split(os.pathsep) if d]
    for d in dirs:
        if not _is_dir(d):
            shown = str(d) if len(str(d)) <= 120 else f"{str(d)[:60]}…{str(d)[-60:]}"
            raise SpecError(
                f"spec folder '{shown}' does not exist (from `specs_dir` or "
                f"${SPECS_PATH_ENV}); give an existing folder"
            )
    return dirs


@dataclass(frozen=True)
class _Entry:
    name: str
    aliases: tuple[str, ...]
    path: Path
    bundled: bool = False


@dataclass(frozen=True)
class _Broken(_Entry):
    """A file in a spec folder that could not be indexed (no name), and why: it breaks only
    the commands that need it (its own name, or every spec of its kind)."""

    error: str = ""


#: (kind, name) of user specs that shadow a bundled one, already said on stderr.
_shadow_noted: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class Catalog(Generic[Spec]):
    """All spec files of one kind on the search path, indexed by name and alias."""

    kind: str  # "hardware" or "model"
    cls: type[Spec]
    entries: tuple[_Entry, ...]
    broken: tuple[_Broken, ...] = ()

    def __post_init__(self) -> None:
        # `_scan` hands over readable and unreadable files in one tuple: keep them apart, so
        # `entries` holds only files that were indexed
        mixed = self.entries
        object.__setattr__(self, "entries", tuple(e for e in mixed if not isinstance(e, _Broken)))
        object.__setattr__(
            self, "broken", self.broken + tuple(e for e in mixed if isinstance(e, _Broken))
        )

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
        key = normalise(name_or_path)
        entry = self._index().get(key)
        if entry is None:
            mine = [b for b in self.broken if normalise(b.path.stem) == key]
            if mine:
                raise SpecError(mine[0].error)
            raise UnknownNameError(self._unknown(name_or_path))
        self._refuse_twins(entry, key)
        self._note_shadow(entry)
        return _load_cached(self.cls, entry.path)

    def load_all(self) -> list[Spec]:
        if self.broken:
            more = f" (and {len(self.broken) - 1} more)" if len(self.broken) > 1 else ""
            raise SpecError(f"{self.broken[0].error}{more}")
        return [self.load(n) for n in self.names()]

    def _refuse_twins(self, entry: _Entry, key: str) -> None:
        """Two files of one folder answering to the same name: which one a command reads would
        depend on the order files are listed in, so neither is used."""
        twins = [
            e
            for e in self.entries
            if e.path.parent == entry.path.parent
            and e.path != entry.path
            and key in {normalise(k) for k in (e.name, *e.aliases)}
        ]
        if twins:
            raise SpecError(
                f"{self.kind} '{entry.name}' is defined twice in {entry.path.parent}: "
                f"{entry.path.name} and {twins[0].path.name}; rename or remove one"
            )

    def _note_shadow(self, entry: _Entry) -> None:
        """Say once on stderr that a user spec hides a bundled one of the same name."""
        if entry.bundled or (self.kind, entry.name) in _shadow_noted:
            return
        bundled = [
            e for e in self.entries if e.bundled and normalise(e.name) == normalise(entry.name)
        ]
        if bundled:
            _shadow_noted.add((self.kind, entry.name))
            print(
                f"note: {self.kind} '{entry.name}' comes from {entry.path}, not the "
                "bundled spec of that name",
                file=sys.stderr,
            )

    def _unknown(self, name: str) -> str:
        keys = {normalise(k): e.name for e in self.entries for k in (e.name, *e.aliases)}
        close = difflib.get_close_matches(normalise(name), list(keys), n=4, cutoff=0.5)
        suggestions = sorted({keys[c] for c in close})
        hint = f"did you mean: {', '.join(suggestions)}? " if suggestions else ""
        shown = name if len(name) <= 80 else f"{name[:40]}…{name[-20:]}"
        broken = (
            f" ({len(self.broken)} unreadable spec file(s) skipped, e.g. {self.broken[0].path})"
            if self.broken
            else ""
        )
        return (
            f"unknown {self.kind} '{shown}'; {hint}"
            f"run `roofline {_LIST_COMMAND[self.kind]} list` "
            f"for the known names, or pass a path to a YAML spec{broken}"
        )


_LIST_COMMAND = {"model": "models", "hardware": "hardware", "engine": "engines"}


def _looks_like_path(s: str) -> bool:
    """A YAML file name, or an existing file ('meta-llama/Llama-2-7b-hf' is an alias)."""
    return s.endswith((".yaml", ".yml")) or is_regular_file(s)


@lru_cache(maxsize=256)
def _load_cached(cls: type[Spec], path: Path) -> Spec:
    return load_spec_file(cls, path)


def _is_bundled(folder: Path) -> bool:
    try:
        return folder.resolve() == _bundled(folder.name).resolve()
    except (ImportError, OSError, TypeError, ValueError):
        return False


_HEADER_KEYS = ("name:", "display_name:", "aliases:")


def header_text(text: str) -> str | None:
    """The top lines of a spec that hold its name and aliases (bundled specs start with them),
    or None when the aliases come later: indexing then reads only these lines."""
    lines: list[str] = []
    aliases_seen = not text.startswith("aliases:") and "\naliases:" not in text
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            if not line.startswith(_HEADER_KEYS):
                return "\n".join(lines) if aliases_seen else None
            aliases_seen = aliases_seen or line.startswith("aliases:")
        lines.append(line)
    return "\n".join(lines)


_HEADER_LINE = re.compile(r"(name|display_name|aliases):[ \t]*(.*)")
#: plain words YAML reads as something else than the text (numbers, booleans, null, anchors)
_NOT_PLAIN = re.compile(
    r"[-+.\d_:eE]*|true|false|yes|no|on|off|null|~|.*[\"'{}\[\]&*!|>%@`#,].*", re.I
)


def plain_header(head: str) -> dict | None:
    """`name` and `aliases` of a header in the plain forms the bundled specs use (`name: x`;
    `aliases: [a, b]` over one or more lines, or a block list of `- a` lines, of plain words;
    a one-line `display_name`), read without YAML; None for anything else, which YAML reads."""
    entries: list[list[str]] = []  # key, value, continuation lines
    for line in head.splitlines():
        if not line or line.startswith("#"):
            continue
        if line[0].isspace():
            if not entries:
                return None
            entries[-1].append(line.strip())
            continue
        m = _HEADER_LINE.fullmatch(line.rstrip())
        if m is None:
            return None
        entries.append(list(m.groups()))
    data: dict = {}
    for key, value, *more in entries:
        if key == "aliases":
            if not value and more and all(v.startswith("- ") for v in more):
                items = [v[2:].strip() for v in more]
            elif value.startswith("["):
                flow = " ".join([value, *more])
                if not flow.endswith("]"):
                    return None
                items = [v.strip() for v in flow[1:-1].split(",")]
                items = [] if items == [""] else items
            else:
                return None
            if any(not v or _NOT_PLAIN.fullmatch(v) for v in items):
                return None
            data["aliases"] = items
        elif key == "name":
            if not value or more or _NOT_PLAIN.fullmatch(value):
                return None
            data["name"] = value
        elif not value or more or value[0] in "|>&*!'\"":
            return None  # a block, multi-line or quoted display name: let YAML read it
    return data


def _index_data(path: Path, bundled: bool) -> dict:
    """Name and aliases of a spec file: a bundled file's header only (the catalog's own files
    put them first; `tests/test_catalog_index.py` checks every one against the full parse),
    a user's file read whole with every check."""
    if bundled:
        head = header_text(path.read_text(encoding="utf-8"))
        if head is not None and (plain := plain_header(head)) is not None:
            return plain
        if head is not None:
            data = yaml.load(head, Loader=_Loader)
            if isinstance(data, dict):
                return data
    return _read_yaml(path)


def _index_entry(path: Path, bundled: bool) -> _Entry:
    """A spec file's name and aliases (the file is validated only when it is loaded)."""
    data = _index_data(path, bundled)
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SpecError(f"{path}: field 'name': missing or not text; every spec needs a name")
    aliases = data.get("aliases") or ()
    if not isinstance(aliases, list | tuple) or not all(
        isinstance(a, str | int | float) for a in aliases
    ):
        raise SpecError(f"{path}: field 'aliases': expected a list of names")
    return _Entry(name, tuple(str(a) for a in aliases), path, bundled)


def _scan(folders: Iterable[Path]) -> tuple[_Entry, ...]:
    entries: list[_Entry] = []
    for folder in folders:
        bundled = _is_bundled(folder)
        for path in sorted(folder.glob("*.yaml")):
            try:
                entries.append(_index_entry(path, bundled))
            except SpecError as e:
                entries.append(_Broken("", (), path, bundled, str(e)))
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


def hardware_name(name: str, specs_dirs: Sequence[str | Path] = ()) -> str | None:
    """The catalog name of a device given by name or alias (`H100` -> `h100-sxm`), or None
    when the catalog has no such device; reads no spec file."""
    entry = hardware_catalog(specs_dirs)._index().get(normalise(name))
    return None if entry is None else entry.name


def load_model(name_or_path: str, specs_dirs: Sequence[str | Path] = ()) -> ModelSpec:
    """A model spec by catalog name, alias, or path to a YAML file."""
    if isinstance(name_or_path, ModelSpec):
        return name_or_path
    return model_catalog(specs_dirs).load(name_or_path)


def load_engine(name_or_path: str, specs_dirs: Sequence[str | Path] = ()) -> EngineSpec:
    """An engine profile by catalog name, alias (`trt-llm`), or path to a YAML file;
    `NAME@VERSION` (`vllm@0.6.3`) is the release range that covers VERSION (`EngineSpec.at`),
    a bare name the newest."""
    if isinstance(name_or_path, EngineSpec):
        return name_or_path
    name, at, version = name_or_path.partition("@")
    spec = engine_catalog(specs_dirs).load(name if at else name_or_path)
    if not at:
        return spec
    try:
        return spec.at(version)
    except ValueError:
        raise InvalidInputError(
            f"engine '{name_or_path[:60]}': '{version[:40]}' is not a version number; "
            f"write it as {name}@0.6.3"
        ) from None


def load_engine_or_none(
    name_or_path: str, specs_dirs: Sequence[str | Path] = ()
) -> EngineSpec | None:
    """`load_engine`, or None for `none` (the hardware layer alone)."""
    return None if name_or_path.strip().lower() == "none" else load_engine(name_or_path, specs_dirs)
