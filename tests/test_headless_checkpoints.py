"""Continued pretraining of a published encoder saved without its masked-LM head: a stock `BertModel` with an
uncased WordPiece vocabulary, the layout of sentence-transformers' checkpoints (all-MiniLM-L6-v2). The heads start
fresh with one line each, every weight the checkpoint has is still checked, span masking follows WordPiece's word
starts, and the result is a stock BertForMaskedLM that answers pipeline("fill-mask"). The run's output is read as
a user sees it (a subprocess), with no warning the user cannot act on. A tiny checkpoint built here always runs;
the real one runs where it is present (benchmarks/.cache/all-MiniLM-L6-v2/ or $SPANROBERTA_MINILM)."""

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import run_pretraining
import torch
from tokenizers import BertWordPieceTokenizer
from transformers import (
    AutoTokenizer,
    BertConfig,
    BertForMaskedLM,
    BertModel,
    BertTokenizer,
    RobertaConfig,
    RobertaModel,
    TrainingArguments,
)

from conftest import PROJECT_ROOT, TINY_TEXT, assert_weights_kept, drop_weight
from spanroberta.data.demo_corpus import demo_corpus_path
from spanroberta.data.masking import word_start_table
from spanroberta.models.modeling_any_encoder import SBO_HEAD_FILE
from spanroberta.objectives import get_objective
from spanroberta.pretraining.specification import resolve_recipe
from spanroberta.pretraining.arguments import PretrainingDataArguments, PretrainingModelArguments
from spanroberta.runs.cli import parse_arguments
from spanroberta.runs.device import fit_to_device

MINILM_FOLDERS = [Path(os.environ["SPANROBERTA_MINILM"])] if os.environ.get("SPANROBERTA_MINILM") else []
MINILM_FOLDERS.append(PROJECT_ROOT / "benchmarks" / ".cache" / "all-MiniLM-L6-v2")
MINILM = next((folder for folder in MINILM_FOLDERS if (folder / "config.json").is_file()), None)
needs_minilm = pytest.mark.skipif(
    MINILM is None,
    reason="all-MiniLM-L6-v2 is not here (python -m benchmarks.parity.fetch_checkpoint, or SPANROBERTA_MINILM)",
)

FRESH_LINES = (
    "sbo_head (span boundary head): not in the checkpoint, starts fresh, decoder tied to the word embeddings.",
    "cls.predictions (masked-LM head): not in the checkpoint, starts fresh, decoder tied to the word embeddings.",
)
# What the run must not print: transformers' load report and its "corrupted" line about the absent MLM bias,
# DeepSpeed's accelerator fallback (Accelerate imports DeepSpeed when installed), torch's pin_memory warning.
UNACTIONABLE = ("seem corrupted", "LOAD REPORT", "Setting accelerator to CPU", "pin_memory")
# A learning rate so small that no weight moves by more than this in a few steps (AdamW steps are about lr).
NEGLIGIBLE_LR, WEIGHT_TOLERANCE = 1e-12, 1e-9


@pytest.fixture(scope="module")
def headless(tmp_path_factory) -> Path:
    """A tiny BertModel (no MLM head, with its pooler) and an uncased WordPiece tokenizer, as all-MiniLM-L6-v2."""
    folder = tmp_path_factory.mktemp("headless-bert")
    lines = [line for line in demo_corpus_path().read_text().splitlines() if line.strip()][:3000]
    trainer = BertWordPieceTokenizer(lowercase=True)
    trainer.train_from_iterator(lines, vocab_size=1200, show_progress=False)
    tokenizer = BertTokenizer(vocab=trainer.get_vocab(), do_lower_case=True)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, hidden_size=32,
                        num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)  # fmt: skip
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def continue_as_a_user(checkpoint: Path, output_dir: Path, train_file: Path, *flags: str) -> str:
    """run_pretraining.py on `checkpoint` in a fresh process, on CPU, with no device setting in the environment;
    returns everything it printed."""
    env = {name: value for name, value in os.environ.items() if name not in ("DS_ACCELERATOR", "PYTHONPATH")}
    command = [
        sys.executable, str(PROJECT_ROOT / "run_pretraining.py"), "--model_name_or_path", str(checkpoint),
        "--recipe", "spanbert", "--train_file", str(train_file), "--output_dir", str(output_dir),
        "--max_steps", "2", "--logging_steps", "1", "--max_seq_length", "64", "--per_device_train_batch_size", "4",
        "--learning_rate", str(NEGLIGIBLE_LR), "--warmup_steps", "0", "--save_strategy", "no", "--report_to",
        "none", "--disable_tqdm", "true", "--use_cpu", "true", *flags,
    ]  # fmt: skip
    result = subprocess.run(command, cwd=PROJECT_ROOT, env={**env, "PYTHONPATH": str(PROJECT_ROOT)},
                            capture_output=True, text=True, timeout=600)  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    return output


def check_continued(checkpoint: Path, output_dir: Path, output: str) -> None:
    """The checks both the tiny and the real checkpoint pass after a short continuation."""
    for line in FRESH_LINES:
        assert line in output
    for text in UNACTIONABLE:
        assert text not in output, text
    model, report = BertForMaskedLM.from_pretrained(output_dir, output_loading_info=True)
    assert not report["missing_keys"] and not report["unexpected_keys"] and not report["mismatched_keys"]
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert (output_dir / SBO_HEAD_FILE).is_file()
    # Every encoder weight came from the checkpoint (a negligible learning rate moves none beyond the tolerance).
    original = BertModel.from_pretrained(checkpoint).state_dict()
    encoder = {name: tensor for name, tensor in original.items() if not name.startswith("pooler.")}
    assert_weights_kept(model.bert.state_dict(), encoder, WEIGHT_TOLERANCE)
    fill = fill_mask(output_dir)
    mask = fill.tokenizer.mask_token
    answers = fill(f"the answer is in the {mask} of the text.", top_k=3)
    assert len(answers) == 3 and all(mask not in answer["sequence"] for answer in answers)


def fill_mask(folder: Path):
    from transformers import pipeline

    return pipeline("fill-mask", model=str(folder), device="cpu")


@pytest.mark.slow
def test_a_headless_bert_continues_with_fresh_heads_and_answers_fill_mask(headless, tmp_path):
    output = continue_as_a_user(headless, tmp_path / "out", demo_corpus_path(), "--max_train_samples", "16")
    # The pooler has no place in BertForMaskedLM (no sentence head is trained): said once, not warned about.
    assert "pooler (pooler): in the checkpoint, not used by a model that trains no sentence head" in output
    # A continued BERT stays transformers' BertForMaskedLM: the usage hint asks for no spanroberta import.
    assert "Use it with:" in output and "import spanroberta" not in output
    check_continued(headless, tmp_path / "out", output)


def test_word_starts_follow_uncased_wordpiece(headless):
    tokenizer = AutoTokenizer.from_pretrained(headless)
    starts = word_start_table(tokenizer)
    ids = tokenizer(" Researchers pretrain encoders", add_special_tokens=False)["input_ids"]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert len(ids) > 3  # the rare words are split into pieces
    assert [bool(starts[i]) for i in ids] == [not token.startswith("##") for token in tokens]


def test_a_headless_roberta_continues_on_spanroberta_with_a_fresh_tied_lm_head(tiny_tokenizer, tmp_path, caplog):
    config = RobertaConfig(vocab_size=len(tiny_tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=64, max_position_embeddings=130, pad_token_id=1)  # fmt: skip
    RobertaModel(config).save_pretrained(tmp_path)
    tiny_tokenizer.save_pretrained(tmp_path)
    types = (PretrainingModelArguments, PretrainingDataArguments)
    (model_args, data_args), _ = parse_arguments(types, ["--model_name_or_path", str(tmp_path)])
    recipe = resolve_recipe(model_args, data_args)
    objective = get_objective(recipe.objective)
    with caplog.at_level(logging.INFO, logger="spanroberta"):
        model = objective.build_model(model_args, objective.build_config(model_args, recipe, tiny_tokenizer),
                                      tiny_tokenizer)  # fmt: skip
    assert "lm_head (masked-LM head): not in the checkpoint, starts fresh, decoder tied to the word embeddings." \
        in caplog.text  # fmt: skip
    assert model.lm_head.decoder.weight is model.roberta.embeddings.word_embeddings.weight
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING]


def run_refused(*flags: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        run_pretraining.main([*flags, "--train_file", str(demo_corpus_path()), "--max_steps", "1", "--use_cpu",
                              "true", "--report_to", "none", "--max_seq_length", "64"])  # fmt: skip
    return str(exit_info.value.code)


def test_a_headless_checkpoint_missing_an_encoder_weight_is_refused(headless, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(headless, broken)
    drop_weight(broken, "encoder.layer.1.output.dense.weight")
    message = run_refused("--model_name_or_path", str(broken), "--output_dir", str(tmp_path / "out"))
    assert "does not hold every weight" in message and "bert.encoder.layer.1.output.dense.weight" in message
    assert "cls.predictions" not in message  # the absent head is expected; the missing encoder weight is not


def test_a_checkpoint_with_part_of_its_masked_lm_head_is_refused(headless, tmp_path):
    """The masked-LM head starts fresh only as a whole: a checkpoint holding part of it is broken."""
    partial = tmp_path / "partial"
    BertForMaskedLM(BertConfig.from_pretrained(headless)).save_pretrained(partial)
    for tokenizer_file in headless.glob("tokenizer*"):
        shutil.copy(tokenizer_file, partial / tokenizer_file.name)
    drop_weight(partial, "cls.predictions.transform.dense.weight")
    message = run_refused("--model_name_or_path", str(partial), "--output_dir", str(tmp_path / "out"))
    assert "1 weights missing, among them cls.predictions.transform.dense.weight." in message


def test_cpu_runs_pin_no_memory_and_name_deepspeeds_accelerator_unless_deepspeed_is_asked(tmp_path, monkeypatch):
    monkeypatch.delenv("DS_ACCELERATOR", raising=False)
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    fit_to_device(args)
    assert not args.dataloader_pin_memory
    assert "DS_ACCELERATOR" not in os.environ  # a DeepSpeed run is left to DeepSpeed
    monkeypatch.delenv("ACCELERATE_USE_DEEPSPEED")
    fit_to_device(args)
    assert os.environ["DS_ACCELERATOR"] == "cpu"


@needs_minilm
def test_all_minilm_l6_v2_continues_with_fresh_heads_and_answers_fill_mask(tmp_path):
    train_file = tmp_path / "train.txt"
    train_file.write_text("\n\n".join(dict.fromkeys(TINY_TEXT)) + "\n")
    output = continue_as_a_user(MINILM, tmp_path / "out", train_file)
    check_continued(MINILM, tmp_path / "out", output)
    # The real uncased vocabulary: "##" continues a word, everything else starts one.
    tokenizer = AutoTokenizer.from_pretrained(MINILM)
    starts = word_start_table(tokenizer)
    ids = tokenizer(" Researchers pretrain encoders with SpanBERT", add_special_tokens=False)["input_ids"]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert any(token.startswith("##") for token in tokens)
    assert [bool(starts[i]) for i in ids] == [not token.startswith("##") for token in tokens]


def continue_in_process(checkpoint: Path, output_dir: Path, *flags: str):
    """run_pretraining() on `checkpoint` in this process, on CPU: the trainer, to look at its optimiser."""
    from spanroberta.pretraining.arguments import PretrainingArguments
    from spanroberta.pretraining.run import run_pretraining as run
    from spanroberta.pretraining.specification import specify_run

    args = ["--model_name_or_path", str(checkpoint), "--recipe", "spanbert", "--train_file", str(demo_corpus_path()),
            "--output_dir", str(output_dir), "--max_steps", "1", "--max_train_samples", "16", "--max_seq_length", "64",
            "--per_device_train_batch_size", "4", "--learning_rate", "1e-5", "--save_strategy", "no", "--report_to",
            "none", "--disable_tqdm", "true", "--use_cpu", "true", *flags]  # fmt: skip
    parsed, given = parse_arguments((PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments), args)
    return run(specify_run(parsed, given))


def peak_rates(trainer) -> dict[str, set[float]]:
    """Each parameter's peak learning rate(s) in the trainer's optimiser, by name."""
    names = {id(parameter): name for name, parameter in trainer.model.named_parameters()}
    rates: dict[str, set[float]] = {}
    for group in trainer.optimizer.param_groups:
        for parameter in group["params"]:
            rates.setdefault(names[id(parameter)], set()).add(group["initial_lr"])
    return rates


@pytest.mark.slow
def test_fresh_heads_train_at_their_own_learning_rate(headless, tmp_path, capsys):
    """--fresh_heads_learning_rate: exactly the heads the checkpoint lacked (the MLM head's transform and bias, the
    SBO head) get it; the encoder, and the decoder tied to its word embeddings, keep --learning_rate; the weight-decay
    split stays (a fresh LayerNorm weight still has no decay)."""
    trainer = continue_in_process(headless, tmp_path, "--fresh_heads_learning_rate", "1e-3")
    rates = peak_rates(trainer)
    fresh = {name for name in rates if name.startswith(("cls.predictions.", "sbo_head."))}
    assert fresh and "bert.embeddings.word_embeddings.weight" in rates  # the tied decoder is the embedding
    assert all(len(found) == 1 for found in rates.values())
    assert {name for name, found in rates.items() if found == {1e-3}} == fresh
    assert all(found == {1e-5} for name, found in rates.items() if name not in fresh)
    decay = {id(p): group["weight_decay"] for group in trainer.optimizer.param_groups for p in group["params"]}
    parameters = dict(trainer.model.named_parameters())
    assert decay[id(parameters["cls.predictions.transform.LayerNorm.weight"])] == 0.0
    assert decay[id(parameters["cls.predictions.transform.dense.weight"])] == trainer.args.weight_decay
    assert "fresh_heads_learning_rate 0.001 (you)" in capsys.readouterr().out


@pytest.mark.slow
def test_without_the_flag_every_weight_has_one_learning_rate(headless, tmp_path):
    rates = peak_rates(continue_in_process(headless, tmp_path))
    assert set().union(*rates.values()) == {1e-5}


@pytest.mark.slow
def test_the_flag_with_no_fresh_head_says_it_applies_to_nothing(headless, tmp_path, caplog):
    """A checkpoint that already has both heads (a continuation's output) leaves the flag nothing to apply to: one
    warning, and every weight at --learning_rate."""
    continue_in_process(headless, tmp_path / "first")
    with caplog.at_level(logging.WARNING, logger="spanroberta"):
        trainer = continue_in_process(tmp_path / "first", tmp_path / "second", "--fresh_heads_learning_rate", "1e-3")
    assert "--fresh_heads_learning_rate 0.001 applies to nothing" in caplog.text
    assert set().union(*peak_rates(trainer).values()) == {1e-5}


def test_the_flag_is_refused_where_a_deepspeed_config_builds_its_own_optimizer(tmp_path):
    """DeepSpeed builds the optimiser its config names, which would train the fresh heads at --learning_rate."""
    import json
    from types import SimpleNamespace

    from spanroberta.errors import UserInputError
    from spanroberta.pretraining.arguments import PretrainingArguments
    from spanroberta.pretraining.trainer import _check_fresh_heads_learning_rate

    args = PretrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True,
                                fresh_heads_learning_rate=1e-3)  # fmt: skip
    trainer = SimpleNamespace(args=args, fresh_head_prefixes=("cls.predictions.",), fresh_heads_learning_rate=1e-3)
    _check_fresh_heads_learning_rate(trainer)  # no DeepSpeed: the Trainer's optimiser takes the groups
    config = json.loads((PROJECT_ROOT / "configs" / "deepspeed" / "zero2.json").read_text())
    assert "optimizer" in config
    args.hf_deepspeed_config = SimpleNamespace(config=config)  # what --deepspeed sets
    with pytest.raises(UserInputError, match="needs the Trainer's optimiser"):
        _check_fresh_heads_learning_rate(trainer)
