"""Command-line parsing shared by the scripts: flags or one JSON/YAML config file, and which settings the user
gave explicitly (so that recipes and presets fill in only the rest)."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from transformers import HfArgumentParser

CONFIG_SUFFIXES = (".json", ".yaml", ".yml")


def parse_arguments(
    dataclass_types: Sequence[type], args: Sequence[str] | None = None
) -> tuple[tuple[Any, ...], set[str]]:
    """Parses `args` (default: sys.argv[1:]) into the dataclasses.

    A single argument ending in .json, .yaml or .yml is read as a config file whose keys are the flag names;
    an unknown key is an error naming the file and the key. Returns the dataclass instances and the names of
    the fields set explicitly.
    """
    # No abbreviated flags: `--learn 3e-5` would set learning_rate without being seen as given.
    parser = HfArgumentParser(dataclass_types, allow_abbrev=False)
    argv = list(sys.argv[1:] if args is None else args)
    if len(argv) == 1 and argv[0].endswith(CONFIG_SUFFIXES):
        values = read_config_file(argv[0], _field_names(dataclass_types))
        return parser.parse_dict(values), set(values)
    parsed = parser.parse_args_into_dataclasses(args=argv)
    return parsed, _flags_given(argv, _field_names(dataclass_types))


def read_config_file(path: str, known_fields: set[str]) -> dict[str, Any]:
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"Config file {path} does not exist.")
    text = file.read_text(encoding="utf-8")
    try:
        values = json.loads(text) if file.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise ValueError(f"Config file {path} is not valid {file.suffix[1:].upper()}: {error}") from None
    if not isinstance(values, dict):
        raise ValueError(f"Config file {path} must hold a mapping of flag names to values.")
    unknown = sorted(set(values) - known_fields)
    if unknown:
        raise ValueError(
            f"Config file {path} has unknown keys: {', '.join(unknown)}. Keys are the command-line flag names "
            "without the leading dashes (see --help)."
        )
    return values


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

    `given` is what `spanroberta.training.cli.parse_arguments` returns. A name no dataclass has is an error,
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
