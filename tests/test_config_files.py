"""Every command reads its config file through one reader (spanroberta.config_files), which refuses a key written
twice in one mapping with the file and the line: JSON and YAML parsers keep the last value, which would silently
change the run."""

import json

import pytest

from spanroberta.ablation.config import AblationConfigError, load_config
from spanroberta.config_files import read_config_file
from spanroberta.errors import UserInputError
from spanroberta.runs.cli import parse_arguments
from spanroberta.pretraining.command import ARGUMENT_CLASSES

DUPLICATED = {
    ".yaml": "output_dir: out\nlearning_rate: 1e-4\nmax_steps: 3\nlearning_rate: 2e-4\n",
    ".yml": "output_dir: out\nrecipe: roberta\nmax_steps: 3\nrecipe: spanbert\n",
    ".json": '{"output_dir": "out",\n "max_steps": 3,\n "max_steps": 4}',
}
LINE = {".yaml": 4, ".yml": 4, ".json": 3}


@pytest.mark.parametrize("suffix", sorted(DUPLICATED))
def test_run_pretraining_refuses_a_duplicated_key_with_file_and_line(tmp_path, suffix):
    config = tmp_path / f"run{suffix}"
    config.write_text(DUPLICATED[suffix])
    with pytest.raises(UserInputError, match="twice in one mapping") as refused:
        parse_arguments(ARGUMENT_CLASSES, [str(config)])
    assert str(refused.value).startswith(f"Config file {config}, line {LINE[suffix]}: gives ")


@pytest.mark.parametrize(
    ("suffix", "text", "line"),
    [
        (".yaml", "pretraining: {}\narms:\n  span: {masking: span}\n  span: {masking: token}\ntasks: {}\nseeds: [1]\n", 4),
        (".json", '{"pretraining": {}, "arms": {"span": {},\n"span": {}}, "tasks": {}, "seeds": [1]}', 2),
    ],
)
def test_the_ablation_configs_refuse_a_duplicated_key_with_file_and_line(tmp_path, suffix, text, line):
    config = tmp_path / f"ablation{suffix}"
    config.write_text(text)
    with pytest.raises(AblationConfigError) as refused:
        load_config(config)
    assert str(refused.value).startswith(f"Ablation config {config}, line {line}: gives 'span' twice in one mapping")


def test_nested_and_equal_keys_in_different_mappings_are_read(tmp_path):
    values = {"a": {"x": 1, "y": [{"x": 2}, {"x": 3}]}, "x": "text with } and \" inside", "empty": {}}
    (tmp_path / "ok.json").write_text(json.dumps(values, indent=2))
    (tmp_path / "ok.yaml").write_text("a: {x: 1, y: [{x: 2}, {x: 3}]}\nx: 'text with } and \" inside'\nempty: {}\n")
    assert read_config_file(tmp_path / "ok.json") == values == read_config_file(tmp_path / "ok.yaml")


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("missing.yaml", None, "does not exist"),
        ("run.toml", "a = 1", "expected a .yaml, .yml or .json file"),
        ("bad.json", '{"a": 1,}', "is not valid JSON"),
        ("list.yaml", "- a\n- b\n", "must hold a mapping"),
    ],
)
def test_other_bad_files_are_refused_naming_the_file(tmp_path, name, text, message):
    if text is not None:
        (tmp_path / name).write_text(text)
    with pytest.raises(UserInputError, match=message) as refused:
        read_config_file(tmp_path / name)
    assert str(tmp_path / name) in str(refused.value)
