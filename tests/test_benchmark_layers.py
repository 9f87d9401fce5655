"""The benchmarks import one way too: no two benchmark modules import each other (directly or round a longer loop,
deferred imports counted), no two benchmark folders (speed/, parity/, tasks/, tables/, ...) import each other, and
no benchmark edits the import path: a script run from outside the root gets the checkout from its environment."""

import ast
from pathlib import Path

from test_layers import import_cycles, imported_modules, module_name

ROOT = Path(__file__).resolve().parents[1]


def benchmark_imports(root: Path = ROOT) -> dict[str, set[str]]:
    """Module name -> the benchmark modules it imports, for every module under benchmarks/."""
    modules = {module_name(path, root): path for path in sorted((root / "benchmarks").rglob("*.py"))}
    return {module: imported_modules(module, modules) for module in modules}


def folder_of(module: str) -> str:
    """The benchmark family a module belongs to: benchmarks.speed for benchmarks.speed.trainer; a module at the top
    of benchmarks/ (common.py, statistics.py) is a family of its own."""
    return ".".join(module.split(".")[:2])


def test_no_benchmark_modules_import_each_other():
    cycles = import_cycles(benchmark_imports())
    assert not cycles, f"benchmark modules that import each other: {cycles}"


def test_no_benchmark_folders_import_each_other():
    folders: dict[str, set[str]] = {}
    for module, names in benchmark_imports().items():
        folders.setdefault(folder_of(module), set()).update(folder_of(name) for name in names)
    graph = {folder: names - {folder} for folder, names in folders.items()}
    cycles = import_cycles({folder: {name for name in names if name in graph} for folder, names in graph.items()})
    assert not cycles, f"benchmark folders that import each other: {cycles}"


def test_no_benchmark_edits_the_import_path():
    edits = []
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", None) == "sys":
                edits.append(str(path.relative_to(ROOT)))
    assert not edits, f"benchmarks that touch sys.path: {edits}"
