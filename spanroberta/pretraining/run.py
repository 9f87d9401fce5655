"""The pretraining run behind run_pretraining.py, one stage after the other, as run_mlm's main reads, from the
run's resolved settings (`specification.RunSpecification`): objective -> data -> model -> collator -> run length ->
trainer -> train, save, evaluate.

What differs between objectives (MLM + SBO, ELECTRA's replaced token detection) is the objective's
(`spanroberta.objectives`); where the text comes from is `data.sources`'.
"""

from __future__ import annotations

import functools
import logging

from torch.utils.data import Dataset
from transformers import PretrainedConfig, PreTrainedTokenizerBase, set_seed

from ..data.collator import DataCollatorForSpanMasking
from ..data.sources import PretrainingData, load_pretraining_data
from ..errors import UserInputError
from ..models.configuration_spanroberta import first_position_id
from ..objectives import PretrainingObjective, get_objective
from ..runs.checkpoints import resume_checkpoint
from ..runs.distributed import drop_unused_weight_conversions
from ..runs.optimizers import trainer_optimizer
from ..runs.output_folder import claim_output_folder
from ..runs.preemption import stop_if_signalled
from ..runs.run_length import run_settings
from .arguments import PretrainingArguments, PretrainingModelArguments
from .float8 import check_run_float8, convert_to_float8
from .model_card import write_model_card
from .specification import RunSpecification, fit_run_length
from .trainer import PretrainingTrainer

logger = logging.getLogger(__name__)

SCRIPT = "run_pretraining.py"


def run_pretraining(spec: RunSpecification) -> PretrainingTrainer | None:
    """Pretrains and saves the model, tokenizer and model card to the specification's --output_dir.

    With --prepare_only, prepares --prepared_data_dir and returns None without training.
    """
    training_args, data_args = spec.training, spec.data
    # Seed before anything random is built: the Trainer seeds only once it is constructed, after the model.
    set_seed(training_args.seed)
    objective = get_objective(spec.recipe.objective)
    logger.info("Recipe: %s", spec.recipe)
    # --fp8 refused here, with the reason, where it could not train the run; the model is converted once built.
    check_run_float8(training_args)

    # Tokenizer, model config and blocks. The main process reads (or prepares) the data first; the others then
    # find it in the cache or on disk. The config is built, and checked, before any block is made.
    build_config = functools.partial(_build_config, spec, objective)
    with training_args.main_process_first(desc="reading and preparing the data"):
        data = load_pretraining_data(spec.model, data_args, training_args, spec.recipe, build_config)
    if data_args.prepare_only:
        logger.info("Prepared the data in %s.", data_args.prepared_data_dir)
        return None
    # Every process learns whether the folder is this run's, and whether a preemption signal came meanwhile,
    # before any builds its model.
    claim_output_folder(training_args.output_dir, SCRIPT, takes_lock=training_args.should_save)
    stop_if_signalled(training_args.output_dir, is_main_process=training_args.process_index == 0)

    trainer = _build_trainer(spec, objective, data)
    # A resume under another block length or masking trains on other steps: refused (runs.resume_settings).
    trainer.resume_settings.update(max_seq_length=data_args.max_seq_length, masking=spec.recipe.masking,
                                   mask_replace_prob=data_args.mask_replace_prob,
                                   random_replace_prob=data_args.random_replace_prob)

    # Train (resuming where a killed run stopped), save, evaluate, describe.
    train_result = trainer.train(resume_from_checkpoint=resume_checkpoint(trainer))
    _save_and_evaluate(trainer, train_result.metrics, objective, data.tokenizer)
    write_model_card(trainer, spec.recipe, objective, data_args)
    if training_args.push_to_hub:
        trainer.push_to_hub()
    return trainer


def _build_trainer(
    spec: RunSpecification, objective: PretrainingObjective, data: PretrainingData
) -> PretrainingTrainer:
    """The model, its collators and the Trainer, once the run's length is fitted and its settings reported."""
    # The model: from the checkpoint, or freshly initialised, under the plan's attention (set on its config).
    model = objective.build_model(spec.model, data.config, data.tokenizer)
    drop_unused_weight_conversions(model)
    float8 = convert_to_float8(model).describe() if spec.training.fp8 else None

    # Masking, laid out in the objective's prediction slots; the evaluation's may follow another scheme.
    masking = functools.partial(_span_masking_collator, spec, objective, data.tokenizer, model.config)
    collator = masking()
    # --eval_masking: runs trained with different schemes predict the same held-out tokens.
    eval_masking = spec.data.eval_masking
    eval_collator = masking(eval_masking) if eval_masking not in (None, spec.recipe.masking) else None

    # Warm-up, bias correction and logging fitted to the run (before the Trainer builds its optimiser from them),
    # then the line of run settings, each with where it came from.
    spec = fit_run_length(spec, data.train)
    if spec.training.should_log:
        # Printed, not logged: transformers' default verbosity hides info logs, and this line says what a step costs.
        attention = spec.attention.describe(model.config._attn_implementation)
        vocabulary = {"pad_vocab_to_multiple_of": spec.model.pad_vocab_to_multiple_of}
        print(run_settings(spec.training, data.train, spec.sources, attention, float8, vocabulary))
    _check_evaluation_data(data.eval, spec.training)
    return PretrainingTrainer(
        model=model,
        args=spec.training,
        train_dataset=data.train,
        eval_dataset=data.eval,
        data_collator=collator,
        eval_data_collator=eval_collator,
        processing_class=data.tokenizer,
        optimizer_cls_and_kwargs=trainer_optimizer(spec.training),
        objective=objective,
    )


def _check_evaluation_data(eval_dataset: Dataset | None, training_args: PretrainingArguments) -> None:
    """Evaluation during training needs evaluation data; said before training rather than by the Trainer's error."""
    if eval_dataset is None and training_args.eval_strategy != "no":
        raise UserInputError(
            f"--eval_strategy {training_args.eval_strategy.value} evaluates during training, and this run has no "
            "evaluation data. Give --validation_file (streaming mode evaluates only on it) or "
            "--validation_split_percentage above 0, or use --eval_strategy no."
        )


def _build_config(
    spec: RunSpecification, objective: PretrainingObjective, tokenizer: PreTrainedTokenizerBase
) -> PretrainedConfig:
    """The objective's config with the plan's attention and the user's overrides, checked against the block
    length."""
    config = objective.build_config(spec.model, spec.recipe, tokenizer)
    _override_config(config, spec.model.config_overrides, spec.attention.implementation)
    _check_positions(config, spec.data.max_seq_length, spec.model)
    return config


def _span_masking_collator(
    spec: RunSpecification,
    objective: PretrainingObjective,
    tokenizer: PreTrainedTokenizerBase,
    config: PretrainedConfig,
    masking: str | None = None,
) -> DataCollatorForSpanMasking:
    """The run's masking (the recipe's, or `masking`), laid out as the objective reads it."""
    recipe, data_args, attention = spec.recipe, spec.data, spec.attention
    return DataCollatorForSpanMasking(
        tokenizer,
        mlm_probability=data_args.mlm_probability,
        masking=masking or recipe.masking,
        geometric_p=data_args.geometric_p,
        max_span_length=data_args.max_span_length,
        mask_replace_prob=data_args.mask_replace_prob,
        random_replace_prob=data_args.random_replace_prob,
        seed=spec.training.seed,
        # Rows of fixed-length formats keep one shape from batch to batch, so a compiled step never recompiles.
        pad_to_multiple_of=(data_args.max_seq_length if attention.packs_rows or recipe.input_format == "full-sentences"
                            else None),  # fmt: skip
        first_position_id=first_position_id(config),
        # The pretraining models read their targets at fixed prediction slots, which compile without host syncs.
        label_layout="slots",
        # varlen_fa2 reads the packed sequences' offsets; made here, the forward never reads them from the device.
        return_sequence_offsets=attention.takes_offsets,
        **objective.collator_settings(recipe, config),
    )


def _save_and_evaluate(
    trainer: PretrainingTrainer,
    train_metrics: dict[str, float],
    objective: PretrainingObjective,
    tokenizer: PreTrainedTokenizerBase,
) -> None:
    """Saves the model (and what the objective keeps beside it), the train metrics and the trainer state, then
    evaluates when there is evaluation data."""
    train_metrics.update(trainer.real_token_metrics(train_metrics["train_runtime"]))
    trainer.save_model()
    if trainer.is_world_process_zero():
        objective.save_beside_model(trainer, tokenizer)
    trainer.log_metrics("train", train_metrics)
    trainer.save_metrics("train", train_metrics)
    trainer.save_state()
    if trainer.eval_dataset is not None:
        metrics = trainer.evaluate()
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)


def _override_config(config: PretrainedConfig, overrides: str | None, attn_implementation: str | None) -> None:
    if attn_implementation:
        config._attn_implementation = attn_implementation  # what from_pretrained and from_config read
    if overrides:
        try:
            config.update_from_string(overrides)
        except ValueError as error:
            raise UserInputError(f"--config_overrides {overrides!r}: {error}") from None


def _check_positions(config: PretrainedConfig, max_seq_length: int, model_args: PretrainingModelArguments) -> None:
    offset = first_position_id(config)
    positions = config.max_position_embeddings - offset
    if max_seq_length > positions:
        raise UserInputError(
            f"--max_seq_length {max_seq_length} is above the model's {positions} positions "
            f"(max_position_embeddings={config.max_position_embeddings}). Use --max_seq_length {positions} or less"
            + (
                f", or --config_overrides max_position_embeddings={max_seq_length + offset} to train from scratch "
                "with longer blocks."
                if not model_args.model_name_or_path
                else "."
            )
        )
