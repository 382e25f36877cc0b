"""The folders are the floors (issue 43): a module imports its own folder and the folders beneath
it. Every import statement of every module under roofline/ (and kernels/, installed as
`roofline.kernels`) counts wherever it sits: at the top, inside a function, or under
`if TYPE_CHECKING:` (a type-only import is still a dependency: the module cannot be read or
moved without the other). There are no exceptions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: (folder, the dotted package its modules import as)
PACKAGES = ((ROOT / "roofline", "roofline"), (ROOT / "kernels", "roofline.kernels"))

#: the modules at the top of roofline/: the ground every floor stands on
GROUND = {"errors", "frozen", "units", "files"}
_CALC = {"ground", "spec", "calc"}
#: folder -> the folders its modules may import
ALLOWED: dict[str, set[str]] = {
    "ground": {"ground"},
    "spec": {"ground", "spec"},
    "calc": _CALC,
    "studies": _CALC | {"studies"},
    "importers": _CALC | {"importers"},
    "measure": _CALC | {"measure"},
    "kernels": _CALC | {"measure", "kernels"},  # the kernel runs behind `roofline measure`
    "serve": _CALC | {"studies", "serve"},
    "plan": _CALC | {"studies", "serve", "plan"},
    "render": _CALC | {"studies", "importers", "measure", "serve", "plan", "render"},
    "cli": _CALC | {"studies", "importers", "measure", "kernels", "serve", "plan", "render", "cli"},
}


def folder(module: str) -> str:
    """The folder (floor) of a dotted module name under `roofline`. The package's __init__ is
    the public API: it re-exports spec and calc, so it stands on calc's floor; `__main__` runs
    the CLI."""
    parts = module.split(".")
    if parts[0] != "roofline":
        raise ValueError(module)
    if len(parts) == 1:
        return "calc"
    top = parts[1]
    if top == "__main__":
        return "cli"
    if top in GROUND and len(parts) == 2:
        return "ground"
    if top in ALLOWED and top != "ground":
        return top
    raise AssertionError(
        f"{module}: not in any folder of the table (put it in a folder, or add it to GROUND)"
    )


def _modules(pkg_folder: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package's __init__) for every .py under `pkg_folder`."""
    out = {}
    for path in sorted(pkg_folder.rglob("*.py")):
        parts = list(path.relative_to(pkg_folder).with_suffix("").parts)
        is_init = parts[-1] == "__init__"
        out[".".join([package, *(parts[:-1] if is_init else parts)])] = (path, is_init)
    return out


def imports(packages) -> list[tuple[str, str, int, str]]:
    """(module, imported module, line, file) for every import of a module of `packages`.
    `from P import n` points at P.n where that is a module, else at P; `import a.b.c` at the
    longest prefix that is a module."""
    mods: dict[str, tuple[Path, bool]] = {}
    for pkg_folder, package in packages:
        if pkg_folder.is_dir():
            mods |= _modules(pkg_folder, package)
    out = []
    for name, (path, is_init) in mods.items():
        here = name if is_init else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    prefixes = (".".join(parts[:k]) for k in range(len(parts), 0, -1))
                    targets += next(([p] for p in prefixes if p in mods), [])
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                for alias in node.names:
                    if f"{base}.{alias.name}" in mods:
                        targets.append(f"{base}.{alias.name}")
                    elif base in mods:
                        targets.append(base)
            out += [(name, t, node.lineno, str(path)) for t in targets if t != name]
    return out


def violations(packages) -> list[str]:
    out = []
    for name, target, line, path in imports(packages):
        mine, theirs = folder(name), folder(target)
        if theirs not in ALLOWED[mine]:
            out.append(f"{path}:{line}: {name} ({mine}) imports {target} ({theirs})")
    return sorted(out)


def test_every_import_stays_on_its_floor_or_below() -> None:
    assert violations(PACKAGES) == []


def test_every_module_is_in_a_folder_of_the_table() -> None:
    pkg = ROOT / "roofline"
    loose = sorted(p.name for p in pkg.glob("*.py") if p.stem not in GROUND | {"__init__"})
    assert loose == ["__main__.py"]
    folders = {p.name for p in pkg.iterdir() if (p / "__init__.py").is_file()}
    assert folders <= set(ALLOWED), folders - set(ALLOWED)


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_a_module_placed_wrongly_fails(tmp_path: Path) -> None:
    """A spec module that imports calc (relative, inside a function), a serve module that
    imports plan (absolute), a calc module that imports render under TYPE_CHECKING: each is
    named; the allowed imports beside them are not."""
    _write(
        tmp_path,
        {
            "roofline/__init__.py": "from .calc.cost import step_cost\n",
            "roofline/errors.py": "",
            "roofline/spec/__init__.py": "",
            "roofline/spec/model.py": (
                "from ..errors import X\n\n\ndef f():\n    from ..calc import cost\n"
            ),
            "roofline/calc/__init__.py": "",
            "roofline/calc/cost.py": (
                "from typing import TYPE_CHECKING\n\nfrom ..spec.model import f\n"
                "if TYPE_CHECKING:\n    from ..render.plots import P\n"
            ),
            "roofline/serve/__init__.py": "",
            "roofline/serve/loop.py": (
                "import roofline.plan.space\nfrom roofline.calc import cost\n"
            ),
            "roofline/plan/__init__.py": "",
            "roofline/plan/space.py": "from ..serve import loop\n",
            "roofline/render/__init__.py": "",
            "roofline/render/plots.py": "from ..plan import space\n",
        },
    )
    found = violations(((tmp_path / "roofline", "roofline"),))
    assert [v.split(": ", 1)[1] for v in found] == [
        "roofline.calc.cost (calc) imports roofline.render.plots (render)",
        "roofline.serve.loop (serve) imports roofline.plan.space (plan)",
        "roofline.spec.model (spec) imports roofline.calc.cost (calc)",
    ]
    assert found[2].startswith(f"{tmp_path / 'roofline/spec/model.py'}:5: ")


def test_a_module_outside_the_table_fails(tmp_path: Path) -> None:
    _write(tmp_path, {"roofline/__init__.py": "", "roofline/stray.py": "from . import errors\n"})
    with pytest.raises(AssertionError, match="roofline.stray: not in any folder"):
        violations(((tmp_path / "roofline", "roofline"),))
