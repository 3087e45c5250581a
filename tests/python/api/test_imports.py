"""The Python side's dependencies go one way: read from the sources' import statements.
The torch.backends entry point (backplane_autoload) imports backplane, never the other
way round; no module of the package imports, at its top, one that imports it back; and
.pt2 archives are read in one place, backplane.aoti.archive."""
import ast
from pathlib import Path

PYTHON = Path(__file__).resolve().parents[3] / "python"


def _modules() -> dict[str, Path]:
    """Module name -> file, for python/*.py and every module of the backplane package."""
    found = {p.stem: p for p in PYTHON.glob("*.py")}
    for path in (PYTHON / "backplane").rglob("*.py"):
        parts = path.relative_to(PYTHON).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(name: str, path: Path, modules, top_level_only: bool) -> set[str]:
    """The modules of `modules` that `name` imports (at its top only, or anywhere)."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            out.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
    return {m for m in out if m in modules and m != name}


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of `graph` as a path, or [] when it has none."""
    done, path = set(), []

    def visit(node):
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return []
        path.append(node)
        for target in sorted(graph[node]):
            if found := visit(target):
                return found
        path.pop()
        done.add(node)
        return []

    for node in sorted(graph):
        if found := visit(node):
            return found
    return []


def test_the_entry_point_and_the_package_depend_one_way():
    # Every import counts here, those inside functions too: the package as one unit.
    modules = _modules()

    def unit(module):
        return module.split(".")[0]

    graph = {unit(m): set() for m in modules}
    for name, path in modules.items():
        graph[unit(name)] |= {unit(m) for m in _imports(name, path, modules, top_level_only=False)} - {unit(name)}
    assert graph["backplane_autoload"] == {"backplane"}
    assert _cycle(graph) == []


def test_no_module_of_the_package_imports_one_that_imports_it_back():
    modules = _modules()
    graph = {name: _imports(name, path, modules, top_level_only=True) for name, path in modules.items()}
    assert "backplane.aoti.package" in graph["backplane"]
    assert _cycle(graph) == []


def test_archives_are_read_in_one_place():
    readers = sorted(str(p.relative_to(PYTHON)) for p in PYTHON.rglob("*.py") if "zipfile" in p.read_text())
    assert readers == ["backplane/aoti/archive.py"]

