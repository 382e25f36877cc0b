"""No import circle inside the package. Every import statement of every module under roofline/
(and kernels/, installed as `roofline.kernels`) counts wherever it sits: at the top, under
`if TYPE_CHECKING:`, or inside a function. A type-only circle is still a circle: each module
needs the other's definitions, so neither can be read, tested or moved alone (issue 43)."""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: (folder, the dotted package its modules import as)
PACKAGES = ((ROOT / "roofline", "roofline"), (ROOT / "kernels", "roofline.kernels"))

#: Circles known and not yet broken, each with what closes it and what will break it. Any other
#: circle fails `test_no_import_cycle`; one of these that is gone fails it too, so that the
#: entry goes with it.
KNOWN: dict[frozenset[str], str] = {
    frozenset({"roofline.spec.mixers", "roofline.spec.model"}): (
        "the mixer blocks annotate their methods with ModelSpec and LayerKind (under "
        "TYPE_CHECKING) while ModelSpec holds the blocks as fields; it goes when a mixer sees "
        "the model through a Protocol of the 13 members it reads"
    ),
}


def _modules(folder: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package's __init__) for every .py under `folder`."""
    out = {}
    for path in sorted(folder.rglob("*.py")):
        parts = list(path.relative_to(folder).with_suffix("").parts)
        is_init = parts[-1] == "__init__"
        name = ".".join([package, *(parts[:-1] if is_init else parts)])
        out[name] = (path, is_init)
    return out


def _imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement in the module, however deeply nested."""
    return [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]


def import_graph(packages: tuple[tuple[Path, str], ...]) -> dict[str, set[str]]:
    """Module -> the modules of `packages` it imports. `from P import n` points at P.n where
    that is a module, else at P; `import a.b.c` at the longest prefix that is a module. The
    implicit import of each parent package is not an edge (every module would share a circle
    with its package's __init__)."""
    mods: dict[str, tuple[Path, bool]] = {}
    for folder, package in packages:
        if folder.is_dir():
            mods |= _modules(folder, package)
    graph: dict[str, set[str]] = {}
    for name, (path, is_init) in mods.items():
        here = name if is_init else name.rpartition(".")[0]  # what `from .` means in it
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    prefixes = (".".join(parts[:k]) for k in range(len(parts), 0, -1))
                    edges.update(next(([p] for p in prefixes if p in mods), []))
                continue
            base = node.module or ""
            if node.level:
                up = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                base = ".".join([*up, *([node.module] if node.module else [])])
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in mods:
                    edges.add(target)
                elif base in mods:
                    edges.add(base)
        edges.discard(name)
        graph[name] = edges
    return graph


def _components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def _circle(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    """One concrete circle through a component's first module: the shortest path back to it."""
    start, inside = comp[0], set(comp)
    came: dict[str, str] = {}
    todo = deque([start])
    while todo:
        v = todo.popleft()
        for w in sorted(graph[v] & inside):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(came[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if w not in came:
                came[w] = v
                todo.append(w)
    raise AssertionError(f"{comp} is not a circle")  # a component always holds one


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle, one per component: [a, b, ..., a]."""
    return [_circle(graph, c) for c in _components(graph)]


def test_no_import_cycle() -> None:
    graph = import_graph(PACKAGES)
    found = _components(graph)  # compared whole: a known circle that grows is a new one
    new = [
        " -> ".join(_circle(graph, c)) + f"  (the circles join {', '.join(c)})"
        for c in found
        if frozenset(c) not in KNOWN
    ]
    assert not new, "import circles (break each: move the shared part down, or a Protocol):\n" + (
        "\n".join(new)
    )
    gone = set(KNOWN) - {frozenset(c) for c in found}
    assert not gone, f"circles broken, remove them from KNOWN: {[sorted(g) for g in gone]}"


def test_graph_counts_every_kind_of_import() -> None:
    """The three places an import sits are all read here, on edges the package has today."""
    graph = import_graph(PACKAGES)
    assert "roofline.spec.operators" in graph["roofline.spec.forward"]  # top level, relative
    assert "roofline.spec.model" in graph["roofline.spec.forward"]  # under `if TYPE_CHECKING:`
    assert "roofline.serve.state" in graph["roofline.serve.blocks"]  # TYPE_CHECKING, `from .`
    assert "roofline.kernels.suite" in graph["roofline.cli.measure"]  # inside a function
    assert "roofline.spec.operators" in graph["roofline.kernels.micro"]  # absolute, from kernels/
    assert "roofline.calc.memory" in graph["roofline.plan.groups"]  # `from .. import memory`
    # the refactor of issue 43: the scheduler no longer imports the loop
    assert "roofline.serve.loop" not in graph["roofline.serve.schedulers"]


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_a_fake_circle_is_found(tmp_path: Path) -> None:
    """pkg.a imports pkg.b at the top, pkg.b imports pkg.sub.c only for types, and pkg.sub.c
    imports pkg.a inside a function: a -> b -> sub.c -> a, reported as that path."""
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from .b import X\n",
            "pkg/b.py": (
                "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                "    from .sub.c import Y\nX = 1\n"
            ),
            "pkg/sub/__init__.py": "",
            "pkg/sub/c.py": "def f():\n    from .. import a\n\n    return a\n",
            "pkg/d.py": "import pkg.a\n",  # into the circle, not on it
        },
    )
    packages = ((tmp_path / "pkg", "pkg"),)
    graph = import_graph(packages)
    assert graph["pkg.sub.c"] == {"pkg.a"} and graph["pkg.d"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]]
    # the type-only import alone closes it: without it there is none
    _write(tmp_path, {"pkg/b.py": "X = 1\n"})
    assert cycles(import_graph(packages)) == []
