"""Imports flow one way: each module of spanroberta/ imports only its own layer or the layers below it, and no two
modules import each other (directly or round a longer loop). Every import counts, a deferred one inside a function
too (deferring an import hides a cycle from Python, not from the reader), except those under `if TYPE_CHECKING:`."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "spanroberta"

# Top to bottom. A module belongs to the entry that is its name or the nearest package above it. The run_*.py scripts
# sit above all of these; the package's own __init__ (the Auto-class registrations) and the ablation driver, which
# runs the fine-tuning tasks and pretraining, sit at the top inside it; the tasks' declarations (each a
# FineTuningTask, run by training's life cycle) sit above training, while the tasks' data code sits below it.
LAYERS = [
    ["spanroberta", "spanroberta.ablation"],
    ["spanroberta.tasks.finetuning"],
    ["spanroberta.training"],
    ["spanroberta.data", "spanroberta.tasks", "spanroberta.objectives"],
    ["spanroberta.models", "spanroberta.metrics", "spanroberta.pipelines"],
    ["spanroberta.errors", "spanroberta.hub", "spanroberta.records"],
]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    """The index of the layer `module` belongs to (the longest matching prefix wins: spanroberta.data is not the
    package root's layer)."""
    matches = [
        (len(prefix), index)
        for index, layer in enumerate(LAYERS)
        for prefix in layer
        if module == prefix or module.startswith(prefix + ".")
    ]
    assert matches, f"{module} is in no layer: add it to LAYERS"
    return max(matches)[1]


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(module: str) -> set[str]:
    """The spanroberta modules `module` imports, anywhere in its file: `from .x import y` counts as the module
    `x.y` when that is a module, else as `x`."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    # Imports under `if TYPE_CHECKING:` name types for annotations only: the module runs without them.
    annotations_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for statement in node.body
        for inner in ast.walk(statement)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in annotations_only:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        for name in names:
            # `import spanroberta.data.masking` names the module; strip attributes down to the nearest module
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


IMPORTS = {module: imported_modules(module) for module in MODULES}


def test_every_module_is_in_a_layer():
    assert MODULES and all(layer_of(module) >= 0 for module in MODULES)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_its_layer_and_the_layers_below(module):
    upward = sorted(name for name in IMPORTS[module] if layer_of(name) < layer_of(module))
    assert not upward, f"{module} (layer {LAYERS[layer_of(module)]}) imports a higher layer: {upward}"


def test_no_modules_import_each_other():
    """No cycle of imports, of any length (Tarjan's strongly connected components of the import graph)."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for name in IMPORTS[module]:
            if name not in index:
                visit(name)
                low[module] = min(low[module], low[name])
            elif name in on_stack:
                low[module] = min(low[module], index[name])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in MODULES:
        if module not in index:
            visit(module)
    assert not cycles, f"modules that import each other: {cycles}"
