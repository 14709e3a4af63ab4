"""The package's folders name their constraints (kablab/__init__.py): the
scripts in kablab/remote/ run on hypervisors as they are, with the standard
library only; no module imports its way back to itself."""
from __future__ import annotations

import ast
import sys

from kablabtest import REPO

PKG = REPO / "kablab"


def imports(path) -> set[str]:
    """The modules a file imports at run time (not under `if TYPE_CHECKING:`),
    relative imports resolved."""
    tree = ast.parse(path.read_text(), str(path))
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
            and getattr(node.test, "id", None) == "TYPE_CHECKING" for n in ast.walk(node)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{path}: relative import (the package uses absolute ones)"
            mod = node.module or ""
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}
    return out


def module_name(path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_remote_scripts_import_the_standard_library_only():
    for path in sorted((PKG / "remote").glob("*.py")):
        if path.name == "__init__.py":
            continue
        top = {name.split(".")[0] for name in imports(path)}
        foreign = sorted(t for t in top if t not in sys.stdlib_module_names and t != "__future__")
        assert foreign == [], f"{path.name} imports {foreign}: a hypervisor runs it with the standard library"


def test_no_import_circle():
    mods = {module_name(p): p for p in PKG.rglob("*.py")}
    graph = {m: {i for i in imports(p) if i in mods and i != m} for m, p in mods.items()}
    seen, stack = set(), []

    def visit(m):
        if m in stack:
            raise AssertionError("import circle: " + " -> ".join(stack[stack.index(m):] + [m]))
        if m in seen:
            return
        stack.append(m)
        for n in sorted(graph[m]):
            visit(n)
        stack.pop()
        seen.add(m)
    for m in sorted(graph):
        visit(m)


def test_every_module_is_in_a_folder_that_names_its_constraint():
    top = sorted(p.name for p in PKG.glob("*.py"))
    assert top == ["__init__.py", "util.py"], top
    assert {p.name for p in PKG.iterdir() if p.is_dir() and p.name != "__pycache__"} == \
        {"lab", "remote", "results", "report"}
