"""The seams between the scripts' flags and the layers below them. A lower layer declares the flags it reads as a
dataclass of its own (`hub.ModelSource`, `objectives.base.ObjectiveSettings`, `data.sources.TokenizerArguments`
and `CorpusArguments`), and run_pretraining.py's argument dataclasses extend them, so that each flag is declared
once and a lower layer's reader receives the very field the flag sets. The pretraining run's settings are resolved
once (`pretraining.specification.specify_run`), each with where its value came from."""

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest
import typing_extensions

import spanroberta
from spanroberta.data.arguments import CorpusArguments, TokenizerArguments
from spanroberta.hub import ModelSource, hub_kwargs
from spanroberta.objectives.base import ObjectiveSettings
from spanroberta.pretraining.command import ARGUMENT_CLASSES
from spanroberta.errors import UserInputError
from spanroberta.pretraining.specification import DEFAULT, DEMO, GIVEN, fit_run_length, specify_run
from spanroberta.runs.cli import parse_arguments

# The packages below the scripts' argument classes: they declare no Protocol of the flags.
LOWER_PACKAGES = ("hub", "models", "pipelines", "data", "objectives", "runs")


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


def test_no_layer_below_the_scripts_copies_the_flags_into_a_protocol():
    assert lower_layer_protocols() == set()


def test_the_lower_layers_read_the_flags_the_command_line_sets(tmp_path):
    flags = ["--output_dir", str(tmp_path), "--cache_dir", "hub-cache", "--model_revision", "v1", "--token", "secret",
             "--train_file", "corpus.txt", "--documents_per_group", "7", "--tokenizer_vocab_size", "3000",
             "--generator_size", "0.5"]  # fmt: skip
    (model_args, data_args, _), _ = parse_arguments(ARGUMENT_CLASSES, flags)
    for part in (ModelSource, ObjectiveSettings, TokenizerArguments):
        assert isinstance(model_args, part)
    assert isinstance(data_args, CorpusArguments)
    assert hub_kwargs(model_args) == {"cache_dir": "hub-cache", "revision": "v1", "token": "secret"}
    assert (data_args.train_file, data_args.documents_per_group) == ("corpus.txt", 7)
    assert (model_args.tokenizer_vocab_size, model_args.generator_size) == (3000, 0.5)


def specification(*flags: str):
    parsed, given = parse_arguments(ARGUMENT_CLASSES, ["--use_cpu", "true", "--report_to", "none", *flags])
    return specify_run(parsed, given)


def test_each_setting_says_where_its_value_came_from(tmp_path):
    spec = specification("--output_dir", str(tmp_path / "out"), "--train_file", "c.txt", "--recipe", "electra",
                         "--model_size", "small", "--masking", "span", "--learning_rate", "1e-4")  # fmt: skip
    assert spec.source("learning_rate") == GIVEN and spec.training.learning_rate == 1e-4
    assert spec.source("masking") == GIVEN and spec.recipe.masking == "span"
    # The recipe's flag defaults, its objective's (ELECTRA-Small's mask rate) and its fields the flags left unset.
    assert spec.source("adam_beta2") == "recipe electra" and spec.training.adam_beta2 == 0.999
    assert spec.source("mlm_probability") == "recipe electra" and spec.data.mlm_probability == 0.15
    assert spec.source("input_format") == "recipe electra" and spec.recipe.input_format == "full-sentences"
    assert spec.source("geometric_p") == DEFAULT
    # Run-length fitting: ELECTRA's 10,000 warm-up steps are cut to a tenth of a 200-step run.
    assert spec.source("warmup_steps") == "recipe electra"
    fitted = fit_run_length(specification("--output_dir", str(tmp_path / "fit"), "--train_file", "c.txt", "--recipe",
                                          "electra", "--max_steps", "200"), None)  # fmt: skip
    assert fitted.source("warmup_steps") == "fitted to the run" and fitted.training.warmup_steps == 20


def test_the_replacement_of_masked_tokens_is_a_flag_a_recipe_sets_like_any_other(tmp_path):
    flags = ("--output_dir", str(tmp_path), "--train_file", "c.txt")
    spec = specification(*flags)
    assert spec.source("mask_replace_prob") == DEFAULT
    assert (spec.data.mask_replace_prob, spec.data.random_replace_prob) == (0.8, 0.1)
    electra = specification(*flags, "--recipe", "electra")
    assert electra.source("random_replace_prob") == "recipe electra"
    assert (electra.data.mask_replace_prob, electra.data.random_replace_prob) == (0.85, 0.0)
    given = specification(*flags, "--recipe", "electra", "--mask_replace_prob", "0.7")
    assert given.source("mask_replace_prob") == GIVEN and given.data.mask_replace_prob == 0.7
    with pytest.raises(UserInputError, match="--random_replace_prob must be"):
        specification(*flags, "--mask_replace_prob", "0.95", "--random_replace_prob", "0.1")


def test_the_demo_fills_what_was_not_given_and_the_flags_win():
    spec = specification("--max_steps", "7")
    assert spec.source("max_steps") == GIVEN and spec.training.max_steps == 7
    assert spec.source("model_size") == DEMO and spec.model.model_size == "tiny"
    assert spec.source("train_file") == DEMO and spec.data.train_file.endswith(".txt")


def test_a_specification_is_frozen(tmp_path):
    spec = specification("--output_dir", str(tmp_path), "--train_file", "c.txt")
    with pytest.raises(AttributeError):
        spec.recipe = None


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
