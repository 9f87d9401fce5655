"""Defaults that fit the run's length (spanroberta.training.run_length): a default warm-up takes at most a tenth
of the run, a given one longer than the run is warned about, and a default logging interval gives any run of 20
steps or more a loss curve; and a short `--recipe electra` run on real text learns (issue 18)."""

import json
import logging
from types import SimpleNamespace

import pytest
import run_pretraining
from conftest import shared_data
from transformers import TrainingArguments

from spanroberta.training.run_length import fit_to_run_length, planned_steps


def run(tmp_path, train_rows=None, **settings):
    """A stand-in for a Trainer: what fit_to_run_length reads is its arguments and its training set."""
    args = TrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True, **settings)
    return SimpleNamespace(args=args, train_dataset=None if train_rows is None else list(range(train_rows)))


def test_a_default_warmup_and_logging_interval_fit_a_short_run(tmp_path):
    trainer = run(tmp_path, max_steps=200, warmup_steps=10_000)  # ELECTRA's warm-up, transformers' logging
    fit_to_run_length(trainer, given={"max_steps"})
    assert trainer.args.warmup_steps == 20 and trainer.args.logging_steps == 10
    # A long run keeps them: 10,000 of 1M steps is ELECTRA's 1%.
    trainer = run(tmp_path, max_steps=1_000_000, warmup_steps=10_000)
    fit_to_run_length(trainer, given={"max_steps"})
    assert trainer.args.warmup_steps == 10_000 and trainer.args.logging_steps == 500


def test_a_run_given_by_epochs_is_measured_from_its_training_set(tmp_path):
    trainer = run(tmp_path, train_rows=100, num_train_epochs=2, per_device_train_batch_size=4,
                  gradient_accumulation_steps=2, warmup_steps=0.5)  # fmt: skip
    assert planned_steps(trainer.args, trainer.train_dataset) == 26  # ceil(25 batches / 2) per epoch, 2 epochs
    fit_to_run_length(trainer, given=set())
    assert trainer.args.warmup_steps == 2 and trainer.args.logging_steps == 1
    assert planned_steps(trainer.args, None) is None


def test_what_the_user_gave_is_kept_and_a_warmup_longer_than_the_run_is_warned_about(tmp_path, caplog):
    for given in ({"warmup_steps", "logging_steps"}, None):  # None: arguments built in code
        trainer = run(tmp_path, max_steps=100, warmup_steps=300, logging_steps=50)
        with caplog.at_level(logging.WARNING):
            fit_to_run_length(trainer, given)
        assert trainer.args.warmup_steps == 300 and trainer.args.logging_steps == 50
        assert "--warmup_steps 300 is longer than the run (100 steps)" in caplog.text
        assert "Use --warmup_steps 10" in caplog.text
        caplog.clear()
    trainer = run(tmp_path, max_steps=100, warmup_steps=30)  # long, but within the run: the user's choice
    with caplog.at_level(logging.WARNING):
        fit_to_run_length(trainer, {"warmup_steps"})
    assert trainer.args.warmup_steps == 30 and not caplog.text


def test_a_200_step_electra_run_reaches_its_peak_learning_rate_and_detects_replacements(tmp_path):
    """The run issue 18 found learning nothing: ELECTRA's 10,000 warm-up steps in a 200-step run. Settings are
    the recipe's and the tiny size's, on a vocabulary and block length that fit a CPU minute; nothing is tuned."""
    corpus = shared_data("corpus", "wiki.valid.raw")
    output = tmp_path / "electra"
    run_pretraining.main([
        "--recipe", "electra", "--train_file", str(corpus), "--output_dir", str(output), "--model_size", "tiny",
        "--tokenizer_vocab_size", "2000", "--max_seq_length", "128", "--per_device_train_batch_size", "16",
        "--max_steps", "200", "--max_eval_samples", "64", "--save_strategy", "no", "--seed", "0",
        "--report_to", "none", "--use_cpu", "true", "--disable_tqdm", "true",
    ])  # fmt: skip
    history = json.loads((output / "trainer_state.json").read_text())["log_history"]
    rates = [entry["learning_rate"] for entry in history if "learning_rate" in entry]
    assert len(rates) >= 20  # a loss curve, not one number
    peak = 6e-4  # PretrainingArguments' default learning rate: ELECTRA's table has none for the tiny size
    assert max(rates) == pytest.approx(peak, rel=1e-3)
    metrics = json.loads((output / "eval_results.json").read_text())
    assert metrics["eval_discriminator_recall"] > 0
