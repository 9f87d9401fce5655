"""Defaults that fit the run's length (spanroberta.runs.run_length): a default warm-up takes at most a tenth
of the run, a given one longer than the run is warned about, Adam skips bias correction only under a warm-up that
absorbs it, and a default logging interval gives any run of 20 steps or more a loss curve."""

import logging

from transformers import TrainingArguments

from spanroberta.pretraining.arguments import PretrainingArguments
from spanroberta.runs.run_length import fit_to_run_length, planned_steps


def arguments(tmp_path, arguments_class=TrainingArguments, **settings):
    return arguments_class(output_dir=str(tmp_path), report_to="none", use_cpu=True, **settings)


def test_a_default_warmup_and_logging_interval_fit_a_short_run(tmp_path):
    args = arguments(tmp_path, max_steps=200, warmup_steps=10_000)  # ELECTRA's warm-up, transformers' logging
    fit_to_run_length(args, {"max_steps"}, None)
    assert args.warmup_steps == 20 and args.logging_steps == 10
    # A long run keeps them: 10,000 of 1M steps is ELECTRA's 1%.
    args = arguments(tmp_path, max_steps=1_000_000, warmup_steps=10_000)
    fit_to_run_length(args, {"max_steps"}, None)
    assert args.warmup_steps == 10_000 and args.logging_steps == 500


def test_evaluation_follows_the_fitted_logging_interval_unless_set(tmp_path):
    """transformers sets an unset --eval_steps to the logging interval (500): a 200-step run would never evaluate."""
    args = arguments(tmp_path, max_steps=200, eval_strategy="steps")
    fit_to_run_length(args, {"max_steps", "eval_strategy"}, None)
    assert (args.logging_steps, args.eval_steps) == (10, 20)  # 20 loss points, 10 evaluations
    args = arguments(tmp_path, max_steps=200, eval_strategy="steps", eval_steps=50)
    fit_to_run_length(args, {"max_steps", "eval_strategy", "eval_steps"}, None)
    assert (args.logging_steps, args.eval_steps) == (10, 50)


def test_a_run_given_by_epochs_is_measured_from_its_training_set(tmp_path):
    args = arguments(tmp_path, num_train_epochs=2, per_device_train_batch_size=4, gradient_accumulation_steps=2,
                     warmup_steps=0.5)  # fmt: skip
    rows = list(range(100))
    assert planned_steps(args, rows) == 26  # ceil(25 batches / 2) per epoch, 2 epochs
    fit_to_run_length(args, set(), rows)
    assert args.warmup_steps == 2 and args.logging_steps == 1
    assert planned_steps(args, None) is None


def test_what_the_user_gave_is_kept_and_a_warmup_longer_than_the_run_is_warned_about(tmp_path, caplog):
    for given in ({"warmup_steps", "logging_steps"}, None):  # None: arguments built in code
        args = arguments(tmp_path, max_steps=100, warmup_steps=300, logging_steps=50)
        with caplog.at_level(logging.WARNING):
            fit_to_run_length(args, given, None)
        assert args.warmup_steps == 300 and args.logging_steps == 50
        assert "--warmup_steps 300 is longer than the run (100 steps)" in caplog.text
        assert "Use --warmup_steps 10" in caplog.text
        caplog.clear()
    args = arguments(tmp_path, max_steps=100, warmup_steps=30)  # long, but within the run: the user's choice
    with caplog.at_level(logging.WARNING):
        fit_to_run_length(args, {"warmup_steps"}, None)
    assert args.warmup_steps == 30 and not caplog.text


def test_adam_without_bias_correction_only_under_a_warmup_that_absorbs_it(tmp_path, caplog):
    """ELECTRA's uncorrected Adam (the recipe's default) needs 1 / (1 - beta2) = 1,000 warm-up steps."""
    electra = {"adam_bias_correction": False, "adam_beta2": 0.999, "warmup_steps": 10_000}
    long_run = arguments(tmp_path, PretrainingArguments, max_steps=1_000_000, **electra)
    fit_to_run_length(long_run, set(), None)
    assert long_run.adam_bias_correction is False  # ELECTRA's own setting, as in the paper
    short_run = arguments(tmp_path, PretrainingArguments, max_steps=200, **electra)
    fit_to_run_length(short_run, set(), None)
    assert short_run.warmup_steps == 20 and short_run.adam_bias_correction is True
    given = arguments(tmp_path, PretrainingArguments, max_steps=200, **electra)
    with caplog.at_level(logging.WARNING):
        fit_to_run_length(given, {"adam_bias_correction"}, None)
    assert given.adam_bias_correction is False and "up to 7.1 times the learning rate" in caplog.text
    # A warm-up of 1,000 steps or more absorbs it.
    enough = arguments(tmp_path, PretrainingArguments, max_steps=10_000, **electra)
    fit_to_run_length(enough, set(), None)
    assert enough.warmup_steps == 1000 and enough.adam_bias_correction is False
