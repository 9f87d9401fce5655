"""Command-line parsing shared by the scripts: flags or one JSON/YAML config file, and which settings the user
gave explicitly (so that recipes and presets fill in only the rest)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from transformers import HfArgumentParser
from transformers.hf_argparser import string_to_bool

from ..config_files import CONFIG_SUFFIXES, read_config_file
from ..errors import UserInputError
from .validation import check_optional_packages


def parse_arguments(
    dataclass_types: Sequence[type], args: Sequence[str] | None = None
) -> tuple[tuple[Any, ...], set[str]]:
    """Parses `args` (default: sys.argv[1:]) into the dataclasses.

    A first argument ending in .json, .yaml or .yml is read as a config file whose keys are the flag names (an
    unknown key is an error naming the file and the key); flags after it override its values. Returns the
    dataclass instances and the names of the fields set explicitly (in the file or as flags).
    """
    # No abbreviated flags: `--learn 3e-5` would set learning_rate without being seen as given.
    parser = HfArgumentParser(dataclass_types, allow_abbrev=False)
    argv = list(sys.argv[1:] if args is None else args)
    known_fields = _field_names(dataclass_types)
    values: dict[str, Any] = {}
    if argv and argv[0].endswith(CONFIG_SUFFIXES) and not argv[0].startswith("-"):
        values = typed_flag_values(parser, read_flag_values(argv[0], known_fields), f"Config file {argv[0]}")
        argv = argv[1:]
        if not argv:
            check_optional_packages(values)
            return parser.parse_dict(values), set(values)
        _use_as_defaults(parser, values)
    # Building TrainingArguments already imports what some flags need (DeepSpeed): check those first.
    check_optional_packages(vars(parser.parse_known_args(argv)[0]))
    parsed = parser.parse_args_into_dataclasses(args=argv, return_remaining_strings=True, look_for_args_file=False)
    *dataclasses_parsed, unknown = parsed
    if unknown:
        raise UserInputError(
            f"Unknown argument(s): {' '.join(unknown)}. `--help` lists every flag; "
            "a config file (.json, .yaml, .yml) must come first."
        )
    return tuple(dataclasses_parsed), set(values) | _flags_given(argv, known_fields)


def _use_as_defaults(parser: HfArgumentParser, values: Mapping[str, Any]) -> None:
    """Makes a config file's values the parser's defaults, so that flags given after the file override them."""
    for action in parser._actions:
        if action.dest in values:
            # A required flag (e.g. --model_name_or_path) that the file gives is no longer required.
            action.required = False
            value = values[action.dest]
            # argparse converts only string defaults with the flag's type; the file's value is already typed.
            action.default = value


def read_flag_values(path: str, known_fields: set[str]) -> dict[str, Any]:
    """The flag values of the config file at `path`, whose keys must be among `known_fields` (the flag names)."""
    values = read_config_file(path)
    unknown = sorted(set(values) - known_fields)
    if unknown:
        raise UserInputError(
            f"Config file {path} has unknown keys: {', '.join(unknown)}. Keys are the command-line flag names "
            "without the leading dashes (see --help)."
        )
    return values


def typed_flag_values(parser: HfArgumentParser, values: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """`values` (flag name -> value, from a config file) converted as the command line converts its strings: a
    string for a number or a true/false flag is parsed as it would be there (YAML reads 3e-5 as a string), and a
    value of another type (a list for a number, 2.5 steps) is refused, naming the flag (after `where`). Flags of other
    types (paths, mappings, choices, which the argument classes check) are kept as they are."""
    actions = {action.dest: action for action in parser._actions}
    typed = dict(values)
    for name, value in values.items():
        action = actions.get(name)
        if action is None or value is None:
            continue
        items = value if isinstance(value, list) and action.nargs in ("+", "*") else [value]
        try:
            converted = [_typed_value(action, item) for item in items]
        except (TypeError, ValueError, argparse.ArgumentTypeError):
            raise UserInputError(
                f"{where + ': ' if where else ''}{name} is {value!r}, which is not {_TYPE_NAMES[action.type]}. Give a value of that type (as --{name} "
                "takes on the command line)."
            ) from None
        typed[name] = converted if items is value else converted[0]
    return typed


# The flag types whose config-file values are checked, and what a value of each must be.
_TYPE_NAMES = {int: "a whole number", float: "a number", string_to_bool: "true or false"}


def _typed_value(action: argparse.Action, value: Any) -> Any:
    """`value` as `action` (an argparse action of HfArgumentParser) takes it; raises on a value of the wrong type."""
    if action.type not in _TYPE_NAMES:
        return value
    if isinstance(value, str):
        return action.type(value)
    if isinstance(value, bool) != (action.type is string_to_bool):
        raise TypeError(value)
    if action.type is int and not isinstance(value, int):
        raise TypeError(value)
    if not isinstance(value, (bool, int, float)):
        raise TypeError(value)
    return float(value) if action.type is float else value


def _field_names(dataclass_types: Sequence[type]) -> set[str]:
    return {field.name for cls in dataclass_types for field in dataclasses.fields(cls) if field.init}


def _flags_given(argv: Sequence[str], known_fields: set[str]) -> set[str]:
    given = set()
    for token in argv:
        if not token.startswith("--"):
            continue
        name = token[2:].split("=", 1)[0].replace("-", "_")
        if name not in known_fields and name.startswith("no_") and name[3:] in known_fields:
            name = name[3:]
        given.add(name)
    return given


def apply_defaults(arguments: tuple[Any, ...], values: dict[str, Any], given: set[str]) -> tuple[Any, ...]:
    """Sets `values` (flag name -> value: a task's recipe, a script's defaults) on the argument dataclasses that
    have those fields, except for the flags in `given`: what the user typed wins.

    `given` is what `spanroberta.runs.cli.parse_arguments` returns. A name no dataclass has is an error,
    so that a typo in a recipe table cannot be ignored silently.
    """
    fields = [{spec.name for spec in dataclasses.fields(obj) if spec.init} for obj in arguments]
    unknown = set(values).difference(*fields)
    if unknown:
        raise ValueError(f"No argument named {', '.join(sorted(unknown))}.")
    updated = []
    for obj, names in zip(arguments, fields):
        changes = {name: value for name, value in values.items() if name in names and name not in given}
        # replace() runs __post_init__ again, so TrainingArguments re-derives what depends on the new values.
        updated.append(dataclasses.replace(obj, **changes) if changes else obj)
    return tuple(updated)


def with_defaults(arguments_class: type, defaults: Mapping[str, Any], name: str, module: str) -> type:
    """A subclass of the dataclass `arguments_class` whose fields in `defaults` default to those values, so that
    `--help` shows the defaults a script applies (e.g. a task recipe's learning rate instead of transformers').

    Assign it to `name` in `module` (the caller's `__name__`): the Trainer pickles its arguments by that name."""
    hints = typing.get_type_hints(arguments_class)
    fields = {spec.name: spec for spec in dataclasses.fields(arguments_class)}
    unknown = set(defaults) - set(fields)
    if unknown:
        raise ValueError(f"No argument named {', '.join(sorted(unknown))}.")
    overrides = [
        (key, hints[key], dataclasses.field(default=value, metadata=fields[key].metadata))
        for key, value in defaults.items()
    ]
    subclass = dataclasses.make_dataclass(name, overrides, bases=(arguments_class,))
    # Set after make_dataclass, which from Python 3.12 names its caller's module (this one) whatever the namespace says.
    subclass.__module__ = module
    return subclass
