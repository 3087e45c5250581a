"""No import circles among Backplane's Python modules (the `backplane` package and the
npu device's `backplane_npu`): every import counts, function-local ones too, since a
module importing another inside a function is still tied to it. A package's __init__
importing its own submodules, which import the package back, is Python's normal shape and
not counted. Read from the sources (ast), so nothing is imported."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = [ROOT / "python" / "backplane", ROOT / "backends" / "npu" / "python" / "backplane_npu"]


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for f in package.rglob("*.py"):
            parts = list(f.relative_to(package.parent).with_suffix("").parts)
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _imported(module: str, path: Path, node, modules) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
    if not node.level:
        base = node.module or ""
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for module, path in modules.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _imported(module, path, node, modules):
                    while target and target not in modules:  # a name inside a module: the module
                        target = target.rpartition(".")[0]
                    if target and target != module and not module.startswith(target + "."):
                        edges.add(target)  # a submodule's import of its own package is not an edge
        graph[module] = edges
    return graph


def _cycles(graph) -> list[list[str]]:
    found, state = [], {}

    def visit(module, path):
        state[module] = "open"
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                found.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, path + [target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return found


def test_no_module_imports_one_that_imports_it_back():
    graph = _graph()
    assert len(graph) > 40, f"found only {len(graph)} modules: are the package paths right?"
    assert _cycles(graph) == [], "import circles: " + "; ".join(" -> ".join(c) for c in _cycles(graph))


def test_the_check_sees_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]
