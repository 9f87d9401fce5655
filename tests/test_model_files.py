"""Each pretraining model reads from one place: its modeling file and at most two shared modules, the span heads
(`modeling_span_heads.py`) and the packed attention (`packed_attention.py`), configurations aside. The imports are
read from the files (relative imports, followed transitively), as save_pretrained follows them to copy a
checkpoint's code."""

import ast
from pathlib import Path

import pytest
from conftest import PROJECT_ROOT

MODELS = PROJECT_ROOT / "spanroberta" / "models"
SHARED = {"modeling_span_heads", "packed_attention"}
MAX_MODULES = 13  # besides __init__


def relative_imports(path: Path) -> set[str]:
    """The sibling modules `path` imports relatively (`from .name import ...`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 1}


def modules_read(name: str, folder: Path = MODELS) -> set[str]:
    """`name` and every sibling it imports, transitively, configurations aside."""
    seen, pending = set(), [name]
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        pending.extend(relative_imports(folder / f"{module}.py"))
    return {module for module in seen if not module.startswith("configuration_")}


@pytest.mark.parametrize("model_file", ["modeling_spanroberta", "modeling_span_albert", "modeling_electra_pretraining"])
def test_a_pretraining_model_reads_from_its_file_and_the_two_shared_modules(model_file):
    assert modules_read(model_file) <= {model_file, *SHARED}


def test_models_holds_few_modules():
    modules = [path for path in MODELS.glob("*.py") if path.name != "__init__.py"]
    assert len(modules) <= MAX_MODULES, sorted(path.name for path in modules)


def test_the_count_follows_imports_transitively_and_leaves_configurations_out(tmp_path):
    (tmp_path / "modeling_a.py").write_text("from .b import x\nfrom .configuration_a import C\n")
    (tmp_path / "b.py").write_text("from .c import y\n")
    (tmp_path / "c.py").write_text("import torch\n")
    (tmp_path / "configuration_a.py").write_text("from .d import z\n")
    (tmp_path / "d.py").write_text("")
    assert modules_read("modeling_a", tmp_path) == {"modeling_a", "b", "c", "d"}
