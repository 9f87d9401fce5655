"""A user's ordinary mistakes with the run scripts: each ends the run before any model is loaded with a
one-paragraph error that names the flag or path (exit status 1, no traceback, nothing overwritten); an output
folder holding another run is refused unless the user says how to go on; every script resumes with
`--resume_from_checkpoint true`."""

import json
import logging

import pytest
import run_glue
import run_pretraining
import run_race
import run_coref
import run_relation
import run_squad
import torch
from conftest import TINY_TEXT, parsed

from spanroberta.errors import UserInputError
from spanroberta.runs import validation
from spanroberta.runs.checkpoints import _check_same_model
from spanroberta.tasks.glue.task import GLUE
from spanroberta.tasks.race.task import RACE

SCRIPTS = {"run_pretraining.py": run_pretraining, "run_glue.py": run_glue, "run_squad.py": run_squad,
           "run_race.py": run_race, "run_relation.py": run_relation, "run_coref.py": run_coref}  # fmt: skip
TINY_MODEL = ["--model_size", "tiny", "--config_overrides",
              "num_hidden_layers=1,hidden_size=32,num_attention_heads=2,intermediate_size=64"]  # fmt: skip
QUIET = ["--report_to", "none", "--disable_tqdm", "true", "--use_cpu", "true"]


def error_of(script: str, args: list[str]) -> str:
    """The message a script exits with; checks that it is one paragraph and names the script."""
    with pytest.raises(SystemExit) as exit_info:
        SCRIPTS[script].main(args)
    message = exit_info.value.code
    # sys.exit(message) prints it and exits with status 1, without a traceback
    assert isinstance(message, str) and message.startswith(f"{script}: error: "), message
    assert "\n" not in message and "Traceback" not in message
    return message


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n\n".join("\n".join(TINY_TEXT[i : i + 3]) for i in range(0, 60, 3)) + "\n")
    return path


@pytest.fixture
def pretraining_args(corpus, tiny_tokenizer_dir):
    return ["--train_file", str(corpus), "--tokenizer_name", str(tiny_tokenizer_dir), *TINY_MODEL,
            "--max_seq_length", "32", "--validation_split_percentage", "0", "--per_device_train_batch_size", "4",
            *QUIET]  # fmt: skip


@pytest.fixture
def glue_args(tmp_path, spanroberta_checkpoint):
    folder = tmp_path / "glue" / "RTE"
    folder.mkdir(parents=True)
    rows = [f"{i}\t{TINY_TEXT[i]}\t{TINY_TEXT[i + 1]}\t{('entailment', 'not_entailment')[i % 2]}" for i in range(8)]
    (folder / "train.tsv").write_text("\n".join(["index\tsentence1\tsentence2\tlabel", *rows]) + "\n")
    return ["--model_name_or_path", str(spanroberta_checkpoint), "--task_name", "rte", "--data_dir",
            str(tmp_path / "glue"), "--do_train", "--max_seq_length", "32", "--per_device_train_batch_size", "4",
            *QUIET]  # fmt: skip


@pytest.fixture
def squad_file(tmp_path):
    context = "Denver Broncos won Super Bowl 50 in Santa Clara."
    qas = [{"id": f"q{i}", "question": "Where?", "answers": [{"text": "Santa Clara", "answer_start": 36}]}
           for i in range(4)]  # fmt: skip
    path = tmp_path / "train.json"
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": qas}]}]}))  # fmt: skip
    return path


def test_every_help_works_and_shows_the_defaults_a_run_applies(capsys):
    for script, module in SCRIPTS.items():
        with pytest.raises(SystemExit) as exit_info:
            module.main(["--help"])
        assert exit_info.value.code == 0, script
    text = " ".join(capsys.readouterr().out.split())
    assert "Share of tokens to predict (RoBERTa: 15%). (default: 0.15)" in text
    # run_race.py's help shows RACE's defaults, which its runs apply
    race = text[text.index("--dataset_config_name") :]
    for default in ("The initial learning rate for the optimizer. (default: 1e-05)",
                    "Total number of training epochs to perform. (default: 5)", "(default: 16)"):  # fmt: skip
        assert default in race


# --- the output folder ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_an_output_folder_holding_another_run_is_refused_then_overwritten_or_resumed(pretraining_args, tmp_path,
                                                                                      caplog):  # fmt: skip
    out = tmp_path / "out"
    run_a = [*pretraining_args, "--output_dir", str(out), "--max_steps", "4", "--save_steps", "2", "--seed", "1"]
    run_pretraining.main(run_a)
    before = {path.name: path.stat().st_mtime_ns for path in out.rglob("*") if path.is_file()}

    run_b = [*pretraining_args, "--output_dir", str(out), "--max_steps", "2", "--save_steps", "2", "--seed", "2"]
    message = error_of("run_pretraining.py", run_b)
    assert f"--output_dir {out} already holds another run (checkpoint-4, checkpoint-2, model.safetensors" in message
    assert "--overwrite_output_dir" in message and "--resume_from_checkpoint true" in message
    assert {path.name: path.stat().st_mtime_ns for path in out.rglob("*") if path.is_file()} == before

    message = error_of("run_pretraining.py", [*run_b, "--overwrite_output_dir", "--resume_from_checkpoint", "true"])
    assert "give one of the two" in message

    run_pretraining.main([*run_b, "--overwrite_output_dir"])
    # run A's checkpoint-4 is gone: a later resume cannot continue from it with A's settings
    assert sorted(path.name for path in out.glob("checkpoint-*")) == ["checkpoint-2"]

    with caplog.at_level(logging.INFO):
        run_pretraining.main([*run_b[:-4], "--max_steps", "3", "--seed", "2", "--resume_from_checkpoint", "true"])
    assert f"Resuming from {out / 'checkpoint-2'} (step 2)" in caplog.text
    assert "missing keys" not in caplog.text


@pytest.mark.slow
def test_fine_tuning_refuses_a_used_folder_and_resumes_with_true(glue_args, tmp_path, caplog):
    out = tmp_path / "out"
    run_glue.main([*glue_args, "--output_dir", str(out), "--max_steps", "2", "--save_steps", "1"])
    message = error_of("run_glue.py", [*glue_args, "--output_dir", str(out), "--max_steps", "2"])
    assert f"--output_dir {out} already holds another run (checkpoint-2, checkpoint-1" in message
    with caplog.at_level(logging.INFO):
        run_glue.main([*glue_args, "--output_dir", str(out), "--max_steps", "3", "--save_steps", "1",
                       "--resume_from_checkpoint", "true"])  # fmt: skip
    assert f"Resuming from {out / 'checkpoint-2'} (step 2)" in caplog.text
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 3
    # --overwrite_output_dir deletes the stale checkpoints before training anew
    run_glue.main([*glue_args, "--output_dir", str(out), "--max_steps", "1", "--save_strategy", "no",
                   "--overwrite_output_dir"])  # fmt: skip
    assert not list(out.glob("checkpoint-*"))


def test_resume_true_with_nothing_to_resume_is_refused_before_loading(glue_args, tmp_path):
    message = error_of("run_glue.py", [*glue_args, "--output_dir", str(tmp_path / "new"), "--resume_from_checkpoint",
                                       "true"])  # fmt: skip
    assert "holds no complete checkpoint to resume from" in message


def test_a_checkpoint_of_another_model_is_not_resumed(tmp_path, spanroberta_checkpoint):
    from spanroberta import SpanRobertaConfig

    config = SpanRobertaConfig.from_pretrained(spanroberta_checkpoint)
    _check_same_model(spanroberta_checkpoint, config)
    config.vocab_size += 100
    with pytest.raises(UserInputError, match="another model \\(vocab_size"):
        _check_same_model(spanroberta_checkpoint, config)


def folder_state(folder) -> dict:
    """Every file under `folder` with its content and modification time: what a refused run must not change."""
    return {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in folder.rglob("*") if path.is_file()}


def users_folder(tmp_path):
    """A folder of the user's own files, written by no run."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "README.md").write_text("My notes.\n")
    (folder / "config.json").write_text(json.dumps({"mine": True}))
    return folder


@pytest.mark.parametrize("script", [*SCRIPTS, "run_ablation.py"])
def test_a_folder_of_the_users_files_is_refused_untouched(script, base_args, tmp_path, monkeypatch):
    import run_ablation

    mine = users_folder(tmp_path)
    before = folder_state(mine)
    # Were the folder written into, the model would be loaded first: its loading must not be reached.
    monkeypatch.setattr("transformers.PreTrainedModel.from_pretrained", classmethod(pytest.fail))
    if script == "run_ablation.py":
        config = tmp_path / "ablation.json"
        config.write_text(json.dumps({"pretraining": {"model_size": "tiny", "max_steps": 2},
                                      "arms": {"span": {"masking": "span"}},
                                      "tasks": {"rte": {"script": "run_glue.py", "task_name": "rte"}},
                                      "seeds": [1]}))  # fmt: skip
        with pytest.raises(SystemExit) as exit_info:
            run_ablation.main([str(config), "--output_dir", str(mine), "--record_dir", ""])
        message = exit_info.value.code
        assert isinstance(message, str) and message.startswith("run_ablation.py: error: ") and "\n" not in message
    else:
        args = [*base_args[script][:-2], "--output_dir", str(mine)]
        message = error_of(script, args)
    assert f"--output_dir {mine} is not empty (README.md, config.json) and holds no run of {script}" in message
    assert "--overwrite_output_dir" in message
    assert folder_state(mine) == before


def test_a_folder_of_another_scripts_run_is_refused_and_one_of_the_same_script_accepted(tmp_path):
    from spanroberta.runs.output_folder import RUN_MARKER, check_output_folder_owner, mark_output_folder

    folder = tmp_path / "run"
    mark_output_folder(folder, "run_pretraining.py")
    (folder / "README.md").write_text("model card")
    check_output_folder_owner(folder, "run_pretraining.py", overwrite_output_dir=False)
    with pytest.raises(UserInputError, match=f"holds a run of run_pretraining.py \\(README.md, {RUN_MARKER}\\)"):
        check_output_folder_owner(folder, "run_glue.py", overwrite_output_dir=False)
    check_output_folder_owner(folder, "run_glue.py", overwrite_output_dir=True)
    # a run let in by --overwrite_output_dir takes the folder over
    mark_output_folder(folder, "run_glue.py")
    check_output_folder_owner(folder, "run_glue.py", overwrite_output_dir=False)
    # a folder written before the marker existed is recognised by what its run left
    (folder / RUN_MARKER).unlink()
    check_output_folder_owner(folder, "run_glue.py", False, known_run=lambda path: (path / "README.md").is_file())


def test_overwrite_output_dir_lets_a_run_into_the_users_folder(glue_args, tmp_path):
    mine = users_folder(tmp_path)
    run_glue.main([*glue_args, "--output_dir", str(mine), "--max_steps", "1", "--save_strategy", "no",
                   "--overwrite_output_dir"])  # fmt: skip
    assert (mine / "model.safetensors").is_file()
    # the folder is the run's now: the same script evaluates in it without the flag
    rte = tmp_path / "glue" / "RTE"
    (rte / "dev.tsv").write_text((rte / "train.tsv").read_text())
    metrics = run_glue.main([*glue_args, "--output_dir", str(mine), "--do_train", "false", "--do_eval"])
    assert "eval_accuracy" in metrics


@pytest.mark.parametrize("script", ["run_pretraining.py", "run_glue.py"])
def test_bad_output_folders(script, tmp_path, pretraining_args, glue_args):
    args = pretraining_args if script == "run_pretraining.py" else glue_args
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    assert "is a file, not a folder" in error_of(script, [*args, "--output_dir", str(a_file)])
    message = error_of(script, [*args, "--output_dir", str(a_file / "out")])
    assert f"--output_dir {a_file / 'out'} cannot be created: {a_file} is a file" in message
    if script == "run_glue.py":
        assert "--output_dir is required" in error_of(script, args)


# --- paths ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["model_name_or_path", "tokenizer_name", "config_name"])
@pytest.mark.parametrize("script", ["run_pretraining.py", "run_glue.py", "run_squad.py", "run_race.py"])
def test_a_path_that_does_not_exist(script, flag, tmp_path, pretraining_args, glue_args, spanroberta_checkpoint):
    missing = tmp_path / "no-such-folder"
    base = {"run_pretraining.py": pretraining_args, "run_glue.py": glue_args,
            "run_squad.py": ["--model_name_or_path", str(spanroberta_checkpoint), "--do_train"],
            "run_race.py": ["--model_name_or_path", str(spanroberta_checkpoint), "--do_train"]}[script]  # fmt: skip
    message = error_of(script, [*base, "--output_dir", str(tmp_path / "out"), f"--{flag}", str(missing)])
    assert f"--{flag} {missing}: no such folder" in message


def test_a_hub_id_offline_and_a_folder_that_is_not_a_model(glue_args, tmp_path):
    args = [*glue_args, "--output_dir", str(tmp_path / "out")]
    message = error_of("run_glue.py", [*args, "--model_name_or_path", "someone/no-such-model"])
    assert "--model_name_or_path someone/no-such-model: there is no folder of that name" in message
    assert "HF_HUB_OFFLINE=1" in message
    (tmp_path / "empty").mkdir()
    message = error_of("run_glue.py", [*args, "--model_name_or_path", str(tmp_path / "empty")])
    assert f"--model_name_or_path {tmp_path / 'empty'} holds no config.json, so it is not a saved model" in message


# --- settings --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flags,expected",
    [(["--tokenizer_vocab_size", "262"], "--tokenizer_vocab_size must be at least 263, not 262"),
     (["--max_train_samples", "0"], "--max_train_samples must be at least 1, not 0"),
     (["--max_eval_samples", "0"], "--max_eval_samples must be at least 1, not 0"),
     (["--mlm_probability", "0"], "--mlm_probability must be above 0 and at most 1, not 0.0"),
     (["--mlm_probability", "1.5"], "--mlm_probability must be above 0 and at most 1, not 1.5"),
     (["--geometric_p", "0"], "--geometric_p must be above 0 and at most 1, not 0.0"),
     (["--max_seq_length", "3"], "--max_seq_length 3 leaves at most 1 token(s) a block to predict"),
     (["--max_seq_length", "0"], "--max_seq_length must be at least 1, not 0"),
     (["--no_such_flag", "1"], "Unknown argument(s): --no_such_flag 1")],
)  # fmt: skip
def test_pretraining_settings_out_of_range(flags, expected, pretraining_args, tmp_path):
    assert expected in error_of("run_pretraining.py", [*pretraining_args, "--output_dir", str(tmp_path / "o"), *flags])
    assert not (tmp_path / "o").exists()


def test_a_missing_reporting_integration_names_what_to_install(pretraining_args, tmp_path, monkeypatch):
    import transformers.integrations

    monkeypatch.setattr(transformers.integrations, "get_available_reporting_integrations", lambda: [])
    message = error_of("run_pretraining.py", [*pretraining_args, "--output_dir", str(tmp_path / "o"),
                                              "--report_to", "tensorboard"])  # fmt: skip
    assert "--report_to tensorboard: it is not installed" in message and "pip install tensorboard" in message


def test_tensorboard_is_installed():
    # `--report_to tensorboard` is what users expect to work: it is a dependency.
    from transformers.integrations import get_available_reporting_integrations

    assert "tensorboard" in get_available_reporting_integrations()


@pytest.mark.parametrize("length,expected", [
    ("0", "--max_seq_length must be at least 1, not 0"), ("-5", "--max_seq_length must be at least 1, not -5"),
    ("1024", "--max_seq_length 1024 is above the 512 tokens that"),
])  # fmt: skip
@pytest.mark.parametrize("script", ["run_glue.py", "run_squad.py", "run_race.py"])
def test_fine_tuning_lengths_beyond_the_model(script, length, expected, tmp_path, glue_args, squad_file,
                                              spanroberta_checkpoint):  # fmt: skip
    data = {"run_glue.py": glue_args, "run_squad.py": ["--train_file", str(squad_file)],
            "run_race.py": ["--data_dir", str(tmp_path / "race")]}[script]  # fmt: skip
    if script == "run_race.py":
        folder = tmp_path / "race" / "train" / "high"
        folder.mkdir(parents=True)
        (folder / "1.txt").write_text(json.dumps({"article": "The fox jumps.", "questions": ["What jumps?"],
                                                  "options": [["fox", "dog", "cat", "cow"]], "answers": ["A"]}))
    args = ["--model_name_or_path", str(spanroberta_checkpoint), "--do_train", *data, "--output_dir",
            str(tmp_path / "out"), "--max_seq_length", length]  # fmt: skip
    assert expected in error_of(script, args)
    assert not (tmp_path / "out").exists()


def test_squad_doc_stride_and_race_qa_length_are_fitted_or_refused(tiny_tokenizer, squad_file, tmp_path,
                                                                   spanroberta_checkpoint):  # fmt: skip
    # RoBERTa's pair adds 4 special tokens: windows of 128 with questions of up to 64 leave 60 context tokens.
    assert validation.fit_doc_stride(128, 128, 64, tiny_tokenizer, given=set()) == 30
    assert validation.fit_doc_stride(128, 384, 64, tiny_tokenizer, given=set()) == 128
    args = ["--model_name_or_path", str(spanroberta_checkpoint), "--do_train", "--train_file", str(squad_file),
            "--output_dir", str(tmp_path / "out"), "--max_seq_length", "128", "--doc_stride", "100"]  # fmt: skip
    message = error_of("run_squad.py", args)
    assert "--doc_stride 100 must be smaller than the context room of a window, 60 tokens" in message
    assert validation.fit_max_qa_length(128, 128, tiny_tokenizer, given=set()) == 62
    with pytest.raises(UserInputError, match="--max_qa_length 128 leaves no room for the passage"):
        validation.fit_max_qa_length(128, 128, tiny_tokenizer, given={"max_qa_length"})


def test_run_squad_with_an_unknown_flag_or_bf16_on_cpu(squad_file, tmp_path, spanroberta_checkpoint):
    args = ["--model_name_or_path", str(spanroberta_checkpoint), "--do_train", "--train_file", str(squad_file),
            "--output_dir", str(tmp_path / "out")]  # fmt: skip
    assert "Unknown argument(s): --max_seq_len 64" in error_of("run_squad.py", [*args, "--max_seq_len", "64"])
    if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        pytest.skip("bf16 is supported here")
    assert "bf16" in error_of("run_squad.py", [*args, "--bf16", "--use_cpu", "false"])


# --- data files that are not UTF-8 ----------------------------------------------------------------------------


def test_non_utf8_task_files_name_the_file_and_line(tmp_path, spanroberta_checkpoint):
    base = ["--model_name_or_path", str(spanroberta_checkpoint), "--do_train", "--output_dir", str(tmp_path / "out")]
    squad = tmp_path / "squad.json"
    squad.write_bytes(b'{"version": "1.1",\n "data": [\xff]}')
    assert f"{squad}, line 2: byte 0xff at column 11 is not valid UTF-8" in error_of(
        "run_squad.py", [*base, "--train_file", str(squad)])
    race = tmp_path / "race.jsonl"
    race.write_bytes(b"\xff\n")
    assert f"{race}, line 1: byte 0xff at column 1" in error_of("run_race.py", [*base, "--train_file", str(race)])
    glue = tmp_path / "glue" / "RTE"
    glue.mkdir(parents=True)
    (glue / "train.tsv").write_bytes(b"index\tsentence1\tsentence2\tlabel\n0\tCaf\xe9\tb\tentailment\n")
    message = error_of("run_glue.py", [*base, "--task_name", "rte", "--data_dir", str(tmp_path / "glue")])
    assert f"{glue / 'train.tsv'}, line 2: byte 0xe9 at column 6 is not valid UTF-8" in message


# --- config files, imports -------------------------------------------------------------------------------------


def test_a_config_file_with_extra_flags(tmp_path, glue_args):
    config = tmp_path / "run.yaml"
    config.write_text(f"model_name_or_path: x\ntask_name: rte\noutput_dir: {tmp_path / 'out'}\nseed: 1\n"
                      "learning_rate: 3.0e-5\n")  # fmt: skip
    (_, data_args, training_args), given = parsed(GLUE, [str(config), "--seed", "2"])
    assert (training_args.seed, training_args.learning_rate, data_args.task_name) == (2, 3e-5, "rte")
    assert {"seed", "learning_rate", "output_dir", "model_name_or_path"} <= given


def test_the_collator_is_importable_from_the_package():
    from spanroberta import DataCollatorForSpanMasking
    from spanroberta.data.collator import DataCollatorForSpanMasking as defined

    assert DataCollatorForSpanMasking is defined


def test_the_flags_of_transformers_example_scripts(tmp_path):
    from spanroberta.finetuning.arguments import padding

    base = ["--model_name_or_path", "x", "--output_dir", str(tmp_path)]
    (model_args, _, training_args), _ = parsed(RACE, 
        [*base, "--overwrite_cache", "--pad_to_max_length", "--ignore_mismatched_sizes", "--overwrite_output_dir"])
    assert model_args.ignore_mismatched_sizes and training_args.overwrite_cache and training_args.overwrite_output_dir
    assert padding(training_args, 64) == {"padding": "max_length", "max_length": 64}
    (_, _, training_args), _ = parsed(GLUE, [*base, "--task_name", "rte", "--pad_to_max_length"])
    assert training_args.pad_to_max_length
    from spanroberta.pretraining.arguments import (
        PretrainingArguments,
        PretrainingDataArguments,
        PretrainingModelArguments,
    )
    from spanroberta.runs.cli import parse_arguments

    (model_args, data_args, training_args), _ = parse_arguments(
        (PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments),
        ["--output_dir", str(tmp_path), "--config_name", "c", "--model_revision", "v1", "--token", "t",
         "--max_eval_samples", "5", "--overwrite_cache", "--overwrite_output_dir"])  # fmt: skip
    assert (model_args.config_name, model_args.model_revision, model_args.token) == ("c", "v1", "t")
    assert data_args.max_eval_samples == 5 and data_args.overwrite_cache and training_args.overwrite_output_dir


# --- optional packages and the Hub -----------------------------------------------------------------------------


def hide_package(monkeypatch, package: str) -> None:
    """Makes `package` look uninstalled to importlib (as on a machine without it), whatever this one has."""
    import importlib.util

    find_spec = importlib.util.find_spec

    def without(name, *args, **kwargs):
        return None if name.split(".")[0] == package else find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", without)


@pytest.fixture
def base_args(tmp_path, pretraining_args, glue_args, spanroberta_checkpoint):
    """The smallest valid command line of each script, with an output folder."""
    finetuning = ["--model_name_or_path", str(spanroberta_checkpoint), "--do_train"]
    return {name: [*args, "--output_dir", str(tmp_path / "out")] for name, args in {
        "run_pretraining.py": pretraining_args, "run_glue.py": glue_args, "run_squad.py": finetuning,
        "run_race.py": finetuning, "run_relation.py": finetuning, "run_coref.py": finetuning}.items()}  # fmt: skip


@pytest.mark.parametrize("flags,package,expected", [
    (["--deepspeed", "configs/deepspeed/zero2.json"], "deepspeed", "leave out --deepspeed"),
    (["--attn_implementation", "flash_attention_2"], "flash_attn", "pip install flash-attn"),
    (["--attn_implementation", "flash_attention_3"], "flash_attn_interface", "hopper/ folder"),
])  # fmt: skip
@pytest.mark.parametrize("script", SCRIPTS)
def test_a_missing_optional_package_is_one_paragraph(script, flags, package, expected, base_args, monkeypatch):
    hide_package(monkeypatch, package)
    message = error_of(script, [*base_args[script], *flags])
    assert f"{flags[0]}" in message and f"needs the {package} package, which is not installed" in message
    assert expected in message


def test_a_missing_package_in_a_config_file_is_one_paragraph(tmp_path, monkeypatch):
    hide_package(monkeypatch, "deepspeed")
    config = tmp_path / "run.yaml"
    config.write_text(f"output_dir: {tmp_path / 'out'}\ndeepspeed: configs/deepspeed/zero2.json\n")
    assert "--deepspeed needs the deepspeed package" in error_of("run_pretraining.py", [str(config)])


def test_require_package_names_the_purpose_and_how_to_install():
    from spanroberta.errors import MissingPackageError, require_package

    require_package("json", "reading JSON")  # installed: nothing happens
    with pytest.raises(MissingPackageError, match=r"^masking by spaCy words needs the no_such_package_x package, "
                       r"which is not installed in this Python \(.*\)\. Install it with `pip install "
                       r"no_such_package_x`, or use --masking span\.$"):  # fmt: skip
        require_package("no_such_package_x", "masking by spaCy words", otherwise="use --masking span")


@pytest.mark.parametrize("script", SCRIPTS)
def test_push_to_hub_offline_is_refused_before_training(script, base_args, tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    message = error_of(script, [*base_args[script], "--push_to_hub", "true"])
    assert "--push_to_hub uploads the model" in message and "HF_HUB_OFFLINE=1" in message
    assert not (tmp_path / "out").exists()


def test_push_to_hub_with_an_unreachable_hub_is_refused_before_training(base_args, tmp_path, monkeypatch):
    import socket

    from huggingface_hub import constants

    with socket.socket() as closed:  # a port nothing listens on: the connection is refused at once
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    message = error_of("run_glue.py", [*base_args["run_glue.py"], "--push_to_hub", "true"])
    assert f"http://127.0.0.1:{port} cannot be reached" in message and "hf upload" in message
    assert not (tmp_path / "out").exists()
