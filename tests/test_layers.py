"""Imports flow one way: each module imports only its own layer or the layers below it, and no two modules import
each other (directly or round a longer loop). The run_*.py scripts form the top layer, above the package.

Every import counts: a deferred one inside a function (deferring an import hides a cycle from Python, not from the
reader), and one under `if TYPE_CHECKING:` too. An annotation that names a higher layer's type makes the lower
module's contract a higher module's business: its reader must go up to learn what a parameter is, and a change up
there changes the module below without a line of it changing. A lower layer names its own types: what it reads
of the scripts' flags it declares as a dataclass of its own (as `data/sources.py` does with `CorpusArguments`),
which the argument dataclasses of the layer above extend, so that each flag is declared once
(tests/test_argument_seams.py). Imports by name at run time (`importlib.import_module`, as the
ablation driver loads the scripts beside it) are not seen here."""

import ast
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Top to bottom. A module belongs to the longest entry that is its name or a package above it. The run_*.py scripts
# sit above the package; inside it, the package's own __init__ (the Auto-class registrations) and the ablation
# driver, which runs the fine-tuning tasks and pretraining, sit at the top. Each fine-tuning task's folder (tasks/:
# its reading, features, decoding, scoring and its declaration) sits above the life cycle every task shares
# (finetuning/), and the question-answering pipeline beside the tasks, as it decodes with SQuAD's span decoding
# (tasks/squad/span_decoding.py; both files import nothing of the package besides each other, as a checkpoint
# carries them). Pretraining and fine-tuning are siblings: neither imports the other, and both run on the machinery
# every run shares (runs: arguments, validation, checkpoints, distributed set-up, run length, optimizers, device).
# The data stage reads a resolved recipe, so objectives (and the recipes, with the names of the input formats they
# choose from) sit below data.
LAYERS = [
    ["run_*"],
    ["spanroberta", "spanroberta.ablation"],
    ["spanroberta.tasks", "spanroberta.pipelines"],
    ["spanroberta.finetuning", "spanroberta.pretraining"],
    ["spanroberta.runs"],
    ["spanroberta.data"],
    ["spanroberta.objectives"],
    ["spanroberta.models"],
    ["spanroberta.config_files", "spanroberta.errors", "spanroberta.hub", "spanroberta.records"],
]


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    """The index of the layer `module` belongs to (the longest matching prefix wins: spanroberta.data is not the
    package root's layer; a script's name matches the pattern run_*)."""
    matches = [
        (len(prefix), index)
        for index, layer in enumerate(LAYERS)
        for prefix in layer
        if module == prefix or module.startswith(prefix + ".") or fnmatch(module, prefix)
    ]
    assert matches, f"{module} is in no layer: add it to LAYERS"
    return max(matches)[1]


def imported_modules(module: str, modules: dict[str, Path]) -> set[str]:
    """The modules of `modules` (name -> file) that `module` imports, anywhere in its file: `from .x import y`
    counts as the module `x.y` when that is a module, else as `x`."""
    path = modules[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for name in names:
            # `import spanroberta.data.masking` names the module; strip attributes down to the nearest module
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module name -> the modules it imports, for the run_*.py scripts and the spanroberta package under `root`."""
    paths = [*sorted(root.glob("run_*.py")), *sorted((root / "spanroberta").rglob("*.py"))]
    modules = {module_name(path, root): path for path in paths}
    return {module: imported_modules(module, modules) for module in modules}


def upward_imports(imports: dict[str, set[str]]) -> dict[str, list[str]]:
    """Module -> the modules of higher layers it imports, for the modules that import any."""
    upward = {
        module: sorted(name for name in names if layer_of(name) < layer_of(module)) for module, names in imports.items()
    }
    return {module: names for module, names in upward.items() if names}


def import_cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The cycles of imports, of any length (Tarjan's strongly connected components of the import graph)."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for name in imports[module]:
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

    for module in imports:
        if module not in index:
            visit(module)
    return cycles


IMPORTS = import_graph(ROOT)


def test_every_module_is_in_a_layer():
    assert any(module.startswith("run_") for module in IMPORTS)
    assert all(layer_of(module) >= 0 for module in IMPORTS)


@pytest.mark.parametrize("module", sorted(IMPORTS))
def test_a_module_imports_only_its_layer_and_the_layers_below(module):
    upward = upward_imports({module: IMPORTS[module]})
    assert not upward, f"{module} (layer {LAYERS[layer_of(module)]}) imports a higher layer: {upward[module]}"


def test_no_modules_import_each_other():
    cycles = import_cycles(IMPORTS)
    assert not cycles, f"modules that import each other: {cycles}"


def test_the_checks_see_annotation_and_deferred_imports_and_loops(tmp_path):
    """A models module that imports runs under `if TYPE_CHECKING:` and data inside a function, and two
    modules that import each other: both checks refuse them, and no package module imports a script."""
    files = {
        "run_tool.py": "import spanroberta.models.lower\n",
        "spanroberta/__init__.py": "",
        "spanroberta/runs/arguments.py": "",
        "spanroberta/data/collator.py": "",
        "spanroberta/models/lower.py": (
            "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from ..runs.arguments import Flags\n\n\n"
            "def build():\n    from ..data import collator\n    from . import other\n"
        ),
        "spanroberta/models/other.py": "from .lower import build\n",
        "spanroberta/models/uses_script.py": "import run_tool\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    imports = import_graph(tmp_path)
    assert upward_imports(imports) == {
        "spanroberta.models.lower": ["spanroberta.data.collator", "spanroberta.runs.arguments"],
        "spanroberta.models.uses_script": ["run_tool"],
    }
    assert import_cycles(imports) == [["spanroberta.models.lower", "spanroberta.models.other"]]


@pytest.mark.parametrize("package, sibling", [("finetuning", "pretraining"), ("pretraining", "finetuning")])
def test_fine_tuning_and_pretraining_share_only_the_run_machinery(package, sibling):
    """A reader of one sibling never needs the other: what both use lives in spanroberta.runs or below."""
    crossing = {
        module: sorted(name for name in names if name.startswith(f"spanroberta.{sibling}"))
        for module, names in IMPORTS.items()
        if module.startswith(f"spanroberta.{package}")
    }
    assert not {module: names for module, names in crossing.items() if names}


# The two files a question-answering checkpoint carries (tasks/squad/postprocessing.py's save_qa_checkpoint).
CHECKPOINT_CODE = ("spanroberta.pipelines.question_answering", "spanroberta.tasks.squad.span_decoding")


def test_the_pipeline_and_its_span_decoding_import_nothing_of_the_package_but_each_other():
    """A checkpoint carries both files side by side, where nothing else of spanroberta is."""
    for module in CHECKPOINT_CODE:
        assert IMPORTS[module] <= set(CHECKPOINT_CODE), f"{module} imports {sorted(IMPORTS[module])}"


# The modules of the scripts' argument dataclasses, and the packages below them that read the flags through
# dataclasses of their own instead, which the argument dataclasses extend.
ARGUMENT_MODULES = (
    "spanroberta.runs.arguments",
    "spanroberta.pretraining.arguments",
    "spanroberta.finetuning.arguments",
)
FLAG_READERS = ("spanroberta.models", "spanroberta.data", "spanroberta.objectives")


@pytest.mark.parametrize("package", FLAG_READERS)
def test_models_data_and_objectives_never_import_the_argument_classes(package):
    """Not even for an annotation under `if TYPE_CHECKING:` (the import graph counts those: see
    test_the_checks_see_annotation_and_deferred_imports_and_loops): a lower layer's own dataclass declares what it reads."""
    assert set(ARGUMENT_MODULES) <= set(IMPORTS), "an argument module moved: name it in ARGUMENT_MODULES"
    importing = {
        module: sorted(name for name in names if name in ARGUMENT_MODULES)
        for module, names in IMPORTS.items()
        if module == package or module.startswith(package + ".")
    }
    assert not {module: names for module, names in importing.items() if names}

