"""The house's size limits, checked over the whole tree outside tests (the package, the benchmarks and the
scripts): no module over 450 lines, no function over 60 (decorators included), so that a newcomer reads any module
in one sitting and any function on one screen.

A model's file (`modeling_*.py`) has a higher cap, 1,500 lines: as in transformers, whose modeling_roberta.py runs
1,252, a model is read whole from one file (its components, its forward, its heads and losses) rather than split
across modules to fit the cap; its functions keep the same limit."""

import ast
from pathlib import Path

from conftest import PROJECT_ROOT

MAX_MODULE_LINES = 450
MAX_MODELING_MODULE_LINES = 1500
MAX_FUNCTION_LINES = 60


def house_modules(root: Path = PROJECT_ROOT) -> list[Path]:
    return [*sorted(root.glob("run_*.py")), *sorted((root / "spanroberta").rglob("*.py")),
            *sorted((root / "benchmarks").rglob("*.py"))]  # fmt: skip


def oversized(paths: list[Path], root: Path = PROJECT_ROOT) -> list[str]:
    """`path: N lines` for each module, and `path:line name: N lines` for each function, over its limit."""
    found = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(root).as_posix()
        lines = len(text.splitlines())
        if lines > (MAX_MODELING_MODULE_LINES if path.name.startswith("modeling_") else MAX_MODULE_LINES):
            found.append(f"{where}: {lines} lines")
        for node in ast.walk(ast.parse(text, filename=where)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
                length = node.end_lineno - start + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{where}:{node.lineno} {node.name}: {length} lines")
    return found


def test_no_module_or_function_outside_tests_is_over_its_limit():
    assert oversized(house_modules()) == []


def test_the_limits_see_a_long_module_and_a_long_function(tmp_path):
    long_function = "def long():\n" + "    x = 1\n" * MAX_FUNCTION_LINES
    (tmp_path / "module.py").write_text(long_function + "\n" * MAX_MODULE_LINES)
    assert oversized([tmp_path / "module.py"], tmp_path) == [
        f"module.py: {MAX_FUNCTION_LINES + 1 + MAX_MODULE_LINES} lines",
        f"module.py:1 long: {MAX_FUNCTION_LINES + 1} lines",
    ]


def test_a_modeling_file_runs_to_its_own_higher_cap(tmp_path):
    for name in ("modeling_long.py", "long.py"):
        (tmp_path / name).write_text("\n" * (MAX_MODULE_LINES + 1))
    (tmp_path / "modeling_longer.py").write_text("\n" * (MAX_MODELING_MODULE_LINES + 1))
    paths = [tmp_path / name for name in ("modeling_long.py", "long.py", "modeling_longer.py")]
    assert oversized(paths, tmp_path) == [
        f"long.py: {MAX_MODULE_LINES + 1} lines",
        f"modeling_longer.py: {MAX_MODELING_MODULE_LINES + 1} lines",
    ]
