"""The seams between the scripts' flags and the layers below them: a lower layer names what it reads of the
arguments as a Protocol of its own, and the scripts pass their argument dataclasses, which have those fields
structurally. Nothing at run time checks that they do, so this test does: for every such Protocol, the argument
classes passed to its reader have every field it names, of the same type. Renaming or retyping a flag fails here,
not in a run that reaches the lower layer."""

import ast
import dataclasses
import importlib
import inspect
import pkgutil
import typing
from pathlib import Path

import pytest
import typing_extensions

import spanroberta
from spanroberta.data.sources import CorpusArguments, TokenizerArguments, TokenizerSource, TrainingProcessArguments
from spanroberta.tasks.registry import FINETUNING_TASKS
from spanroberta.finetuning.task import ArgumentDataclass
from spanroberta.hub import HubArguments
from spanroberta.objectives import ObjectiveArguments, RecipeDataArguments, RecipeModelArguments
from spanroberta.objectives.checkpoint_loading import CheckpointArguments
from spanroberta.pretraining.command import ARGUMENT_CLASSES
from spanroberta.runs.validation import ModelSources

PRETRAINING_MODEL, PRETRAINING_DATA, PRETRAINING_TRAINING = ARGUMENT_CLASSES
TASKS = FINETUNING_TASKS.values()
FINETUNING_MODEL = {task.argument_classes[0] for task in TASKS}

# Each Protocol, and the argument classes the scripts pass where it is read (run_pretraining.py's, and every
# fine-tuning task's: its model arguments first, its data arguments next, as `FineTuningRun` reads them).
SEAMS = {
    HubArguments: {PRETRAINING_MODEL, *FINETUNING_MODEL},
    ModelSources: {PRETRAINING_MODEL, *FINETUNING_MODEL},
    CheckpointArguments: {PRETRAINING_MODEL},
    ObjectiveArguments: {PRETRAINING_MODEL},
    RecipeModelArguments: {PRETRAINING_MODEL},
    RecipeDataArguments: {PRETRAINING_DATA},
    TokenizerSource: {PRETRAINING_MODEL},
    TokenizerArguments: {PRETRAINING_MODEL},
    CorpusArguments: {PRETRAINING_DATA},
    TrainingProcessArguments: {PRETRAINING_TRAINING},
    ArgumentDataclass: {task.argument_classes[1] for task in TASKS},
}
# The packages below the scripts' argument classes: every Protocol declared in them is a seam, listed above.
LOWER_PACKAGES = ("hub", "models", "data", "objectives", "runs")


def missing_members(protocol: type, cls: type) -> list[str]:
    """The members of `protocol` that `cls` lacks, or has with another type: a field of another type (both read
    from their annotations), or a member that is no field, property or attribute of the class."""
    hints = typing.get_type_hints(protocol)
    fields = {field.name: field for field in dataclasses.fields(cls)}
    class_hints = typing.get_type_hints(cls)
    missing = []
    for name in sorted(typing_extensions.get_protocol_members(protocol)):
        if name in fields:
            if name in hints and class_hints[name] != hints[name]:
                missing.append(f"{name}: {class_hints[name]} (the Protocol reads {hints[name]})")
        elif not hasattr(cls, name):
            missing.append(name)
    return missing


def lower_layer_protocols() -> set[type]:
    """The Protocol classes declared in the modules of LOWER_PACKAGES."""
    protocols = set()
    for info in pkgutil.walk_packages(spanroberta.__path__, "spanroberta."):
        if info.name.split(".")[1] not in LOWER_PACKAGES:
            continue
        module = importlib.import_module(info.name)
        protocols |= {
            value for value in vars(module).values()
            if inspect.isclass(value) and value.__module__ == module.__name__ and typing_extensions.is_protocol(value)
        }  # fmt: skip
    return protocols


@pytest.mark.parametrize("protocol", SEAMS, ids=lambda protocol: protocol.__name__)
def test_the_argument_classes_have_every_field_a_lower_layer_reads(protocol):
    lacking = {cls.__name__: missing_members(protocol, cls) for cls in SEAMS[protocol]}
    assert not {name: members for name, members in lacking.items() if members}, (
        f"argument classes lack flags that {protocol.__module__}.{protocol.__name__} reads: {lacking}"
    )


def test_every_protocol_of_a_lower_layer_is_checked_against_the_arguments():
    assert lower_layer_protocols() <= set(SEAMS)


def test_a_renamed_or_retyped_flag_is_reported():
    @dataclasses.dataclass
    class Renamed:
        cache_dir: str | None = None
        revision: str = "main"
        token: int | None = None

    assert missing_members(HubArguments, Renamed) == [
        "model_revision",
        "token: int | None (the Protocol reads str | None)",
    ]


def untyped_argument_bags(root) -> list[str]:
    """`file:line name` of every parameter named `*_args` and annotated `Any` under `root`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
                    annotation = ast.unparse(arg.annotation) if arg.annotation else ""
                    if arg.arg.endswith("_args") and annotation in ("Any", "typing.Any"):
                        found.append(f"{path.relative_to(root.parent)}:{node.lineno} {arg.arg}")
    return found


def test_no_layer_below_the_scripts_takes_an_untyped_argument_bag():
    assert untyped_argument_bags(Path(spanroberta.__file__).parent) == []


def test_an_untyped_argument_bag_is_found(tmp_path):
    package = tmp_path / "package"
    package.mkdir()
    (package / "lower.py").write_text("from typing import Any\n\n\ndef read(data_args: Any, args: Any) -> None: ...\n")
    assert untyped_argument_bags(package) == ["package/lower.py:4 data_args"]
