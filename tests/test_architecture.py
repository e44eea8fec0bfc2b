"""The layering of DESIGN.md §1, read from the source: imports (those inside functions too) point down the list of
layers, and no module imports, directly or through others, a module that imports it."""
import ast
from pathlib import Path

import networkx as nx

import ops
from attngraph.core.primitive import REGISTRY

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["ops", "attngraph.errors", "attngraph.version", "attngraph.core", "attngraph.nn", "attngraph.attention",
          "attngraph.models", "attngraph.train", "attngraph.inspect", "attngraph.render", "attngraph.export",
          "attngraph", "attngraph.demos", "attngraph.cli", "attngraph.__main__"]


def modules() -> dict[str, Path]:
    found = {}
    for path in [*ROOT.glob("attngraph/**/*.py"), *ROOT.glob("ops/**/*.py")]:
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known: dict) -> set[str]:
    """The project's modules that ``name`` imports: a submodule where ``from package import submodule``, the
    package otherwise; never its own ancestors (Python imports those first anyway)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            subs = [f"{module}.{alias.name}" for alias in node.names if f"{module}.{alias.name}" in known]
            targets = subs if len(subs) == len(node.names) else [module, *subs]
        else:
            continue
        found |= {t for t in targets if t in known and t != name and not name.startswith(t + ".")}
    return found


def layer(name: str) -> int:
    return max((i for i, prefix in enumerate(LAYERS) if name == prefix or name.startswith(prefix + ".")),
               key=lambda i: len(LAYERS[i]))


KNOWN = modules()
GRAPH = nx.DiGraph([(name, target) for name, path in KNOWN.items() for target in imports(name, path, KNOWN)])


def test_imports_point_down_the_layers():
    upward = sorted(f"{a} -> {b}" for a, b in GRAPH.edges if layer(b) > layer(a))
    assert upward == []


def test_no_module_imports_itself_through_others():
    circles = [sorted(c) for c in nx.strongly_connected_components(GRAPH) if len(c) > 1]
    assert circles == []


def test_the_ir_imports_nothing_above_it():
    assert {b for a, b in GRAPH.edges if a == "attngraph.core.graph"} <= {"attngraph.core.dims", "attngraph.errors"}


def test_every_primitive_has_a_cpu_kernel_and_every_kernel_a_primitive_or_an_optimizer_update():
    kernels = set(ops.get_backend("cpu").kernels)
    assert set(REGISTRY) <= kernels, sorted(set(REGISTRY) - kernels)
    assert kernels - set(REGISTRY) == {"sgd", "adam", "adamw", "accumulate", "scale", "sum_of_squares"}
