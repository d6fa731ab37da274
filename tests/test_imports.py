"""The package has no import cycles: the graph of its modules' imports (every import statement,
also inside functions; those under ``if TYPE_CHECKING:`` excepted, they never run) is acyclic."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "python" / "reclaimlab"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def imports(path: Path, modules: set[str]) -> set[str]:
    """The package modules ``path`` imports: ``from a import b`` is a.b when that is a module,
    else a."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for a in node.names:
                out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in out if m in modules and m != me}


def graph() -> dict[str, set[str]]:
    files = sorted(PACKAGE.rglob("*.py"))
    # The native module (an extension; its stub names it) is a module too, without imports.
    modules = {module_name(f) for f in [*files, *PACKAGE.rglob("*.pyi")]}
    return {module_name(f): imports(f, modules) for f in files}


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    """A cycle as a list of modules (first == last), or None. Depth-first, colours."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(g.get(n, ())):
            if state.get(m) == 1:
                return [*stack[stack.index(m) :], m]
            if m not in state and (c := dfs(m)) is not None:
                return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(g):
        if n not in state and (c := dfs(n)) is not None:
            return c
    return None


def test_the_checker_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_graph_sees_the_package() -> None:
    g = graph()
    assert "reclaimlab.lower" in g["reclaimlab.backends.sim"]
    assert "reclaimlab.scenario.models" in g["reclaimlab.scenario.loading"]
    assert "reclaimlab.native" in g["reclaimlab.profile"]  # `from reclaimlab import native`


def test_no_import_cycles() -> None:
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])
