"""The one reader of the config files the project reads (run_pretraining.py's JSON or YAML config, the ablation
configs, which the ablation tables read too): a mapping, read strictly. A key written twice in one mapping is
refused with its file and line, since the JSON and YAML parsers would each keep the last value and silently change
the run."""

from __future__ import annotations

import json
from json.decoder import WHITESPACE, scanstring
from json.scanner import py_make_scanner
from pathlib import Path
from typing import Any

import yaml

from .errors import InputFileNotFoundError, UserInputError

CONFIG_SUFFIXES = (".json", ".yaml", ".yml")


def read_config_file(path: str | Path, kind: str = "Config file") -> dict[str, Any]:
    """The mapping held by the .json, .yaml or .yml file at `path`. Every problem (no such file, another suffix,
    bad syntax, a duplicated key, no mapping at the top) is a UserInputError that starts with `kind` and the path."""
    file = Path(path)
    where = f"{kind} {path}"
    if not file.is_file():
        raise InputFileNotFoundError(f"{where} does not exist.")
    if file.suffix not in CONFIG_SUFFIXES:
        raise UserInputError(f"{where}: expected a .yaml, .yml or .json file.")
    text = file.read_text(encoding="utf-8")
    try:
        values = _read_json(text) if file.suffix == ".json" else yaml.load(text, Loader=_UniqueKeyLoader)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise UserInputError(f"{where} is not valid {file.suffix[1:].upper()}: {error}") from None
    except _DuplicateKey as duplicate:
        raise UserInputError(f"{where}, {duplicate}") from None
    if not isinstance(values, dict):
        raise UserInputError(f"{where} must hold a mapping of names to values.")
    return values


class _DuplicateKey(Exception):
    """Raised by the parsers below at the second occurrence of a key in one mapping."""

    def __init__(self, key: Any, line: int):
        super().__init__(f"line {line}: gives {key!r} twice in one mapping, and the second would silently replace "
                         "the first. Rename or remove one.")  # fmt: skip


class _UniqueKeyLoader(yaml.SafeLoader):
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise _DuplicateKey(key, key_node.start_mark.line + 1)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _read_json(text: str) -> Any:
    """json.loads, refusing a duplicated key with its line: an object_pairs_hook sees no positions, so objects
    are parsed here (on text that json.loads has already accepted) with the pure-Python scanner."""
    values = json.loads(text)
    decoder = json.JSONDecoder()
    decoder.parse_object = _parse_unique_object
    decoder.scan_once = py_make_scanner(decoder)
    decoder.decode(text)
    return values


def _parse_unique_object(s_and_end: tuple[str, int], strict: bool, scan_once: Any, *_: Any) -> tuple[dict, int]:
    text, end = s_and_end
    skip = WHITESPACE.match
    seen: dict[str, Any] = {}
    end = skip(text, end).end()
    while text[end] != "}":
        key, after_key = scanstring(text, end + 1, strict)
        if key in seen:
            raise _DuplicateKey(key, text.count("\n", 0, end) + 1)
        value_start = skip(text, skip(text, after_key).end() + 1).end()  # past the colon
        seen[key], end = scan_once(text, value_start)
        end = skip(text, end).end()
        if text[end] == ",":
            end = skip(text, end + 1).end()
    return seen, end + 1
