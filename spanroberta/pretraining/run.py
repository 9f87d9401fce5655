"""The pretraining run behind run_pretraining.py, one stage after the other, as run_mlm's main reads:
defaults -> objective -> data -> model -> collator -> trainer -> train, save, evaluate.

What differs between objectives (MLM + SBO, ELECTRA's replaced token detection) is the objective's
(`spanroberta.objectives`); where the text comes from is `data.sources`'.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Collection, Mapping

import datasets
import transformers
from torch.utils.data import Dataset
from transformers import PretrainedConfig, PreTrainedTokenizerBase, set_seed

from ..data.collator import DataCollatorForSpanMasking
from ..data.demo_corpus import demo_corpus_path
from ..data.sources import PretrainingData, load_pretraining_data
from ..errors import UserInputError
from ..models.configuration_spanroberta import first_position_id
from ..objectives import PretrainingObjective, ResolvedRecipe, get_objective, resolve_recipe
from .attention import AttentionPlan, plan_run_attention
from .float8 import check_run_float8, convert_to_float8
from .arguments import PretrainingArguments, PretrainingDataArguments, PretrainingModelArguments
from ..runs.checkpoints import resume_checkpoint
from ..runs.cli import apply_defaults
from ..runs.distributed import drop_unused_weight_conversions, training_processes
from .model_card import write_model_card
from ..runs.optimizers import trainer_optimizer
from ..runs.output_folder import mark_output_folder
from ..objectives.recipes import get_recipe
from ..runs.run_length import fit_to_run_length, run_settings
from .trainer import PretrainingTrainer
from ..runs.validation import require_output_dir

logger = logging.getLogger(__name__)

SCRIPT = "run_pretraining.py"

# Settings of the demo (run_pretraining.py with no data argument): a tiny model, a small vocabulary and short
# blocks, so that it finishes in about a minute on 2 CPU cores. Flags given explicitly still win.
DEMO_SETTINGS = {
    "model_size": "tiny",
    "tokenizer_vocab_size": 2000,
    "max_seq_length": 128,
    "per_device_train_batch_size": 16,
    "max_steps": 300,
    "learning_rate": 1e-3,
    "warmup_steps": 30,
    "save_steps": 300,
    "eval_strategy": "no",
    "output_dir": "spanroberta-demo",
}


def apply_demo_settings(
    model_args: PretrainingModelArguments,
    data_args: PretrainingDataArguments,
    training_args: PretrainingArguments,
    given: set[str],
    chosen: dict[str, str] | None = None,
) -> tuple[PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments]:
    """Fills in, for every setting the user did not give, the recipe's flag defaults, in demo mode DEMO_SETTINGS
    (which win over the recipe's), then the objective's own (ELECTRA's depend on the model size and the number of
    processes). `chosen`, when given, receives who set each value filled in: flag name -> "recipe <name>" or
    "demo" (`run_length.run_settings` reports them)."""
    chosen = {} if chosen is None else chosen
    recipe = get_recipe(data_args.recipe)

    def fill(arguments: tuple, values: dict, who: str) -> tuple:
        chosen.update({name: who for name in values if name not in given})
        return apply_defaults(arguments, values, given)

    arguments = fill((model_args, data_args, training_args), dict(recipe.flag_defaults), f"recipe {data_args.recipe}")
    if not data_args.is_demo:
        if not data_args.prepare_only:
            require_output_dir(given)
    else:
        demo = {**DEMO_SETTINGS, "train_file": str(demo_corpus_path())}
        arguments = fill(arguments, demo, "demo")
        given = given | set(demo)  # the demo's settings win over the objective's too
    # The objective's defaults read the flags as the recipe and the demo left them.
    filled_model, _, filled_training = arguments
    batch_per_step = filled_training.per_device_train_batch_size * training_processes(filled_training)
    objective_defaults = get_objective(recipe.objective).flag_defaults(filled_model, batch_per_step)
    return fill(arguments, objective_defaults, f"recipe {data_args.recipe}")


def run_pretraining(
    model_args: PretrainingModelArguments,
    data_args: PretrainingDataArguments,
    training_args: PretrainingArguments,
    given: Collection[str] | None = None,
    chosen: Mapping[str, str] | None = None,
) -> PretrainingTrainer | None:
    """Pretrains and saves the model, tokenizer and model card to `training_args.output_dir`.

    With --prepare_only, prepares --prepared_data_dir and returns None without training. `given`, the flags the
    user set, says which of the warm-up, Adam's bias correction and logging interval may be fitted to the run's
    length (None: none). `chosen`: who set the values the user did not give (`apply_demo_settings`), for the
    line of run settings logged before training.
    """
    _setup_logging(training_args)
    # Seed before anything random is built: the Trainer seeds only once it is constructed, after the model.
    set_seed(training_args.seed)

    # The recipe with the user's overrides, and the objective that trains it.
    recipe = resolve_recipe(model_args, data_args)
    objective = get_objective(recipe.objective)
    logger.info("Recipe: %s", recipe)
    # The attention plan: the implementation, whether rows are packed and take offsets; the attention asked for
    # refused here if it could not train the run. Everything after reads it.
    attention = plan_run_attention(model_args, data_args, training_args, recipe)
    # --fp8 refused here, with the reason, where it could not train the run; the model is converted once built.
    check_run_float8(training_args)
    if data_args.pack_documents and not attention.packs_rows and recipe.input_format == "doc-sentences":
        data_args = dataclasses.replace(data_args, pack_documents=False)
    chosen = _load_data_beside_the_gpu(training_args, data_args, given, chosen)
    _copy_batches_without_waiting(training_args, given)

    # Tokenizer, model config and blocks. The main process reads (or prepares) the data first; the others then
    # find it in the cache or on disk. The config is built, and checked, before any block is made.
    build_config = functools.partial(_build_config, objective, recipe, model_args, data_args, attention)
    with training_args.main_process_first(desc="reading and preparing the data"):
        data = load_pretraining_data(model_args, data_args, training_args, recipe, build_config)
    if data_args.prepare_only:
        logger.info("Prepared the data in %s.", data_args.prepared_data_dir)
        return None
    if training_args.should_save:
        mark_output_folder(training_args.output_dir, SCRIPT)

    trainer = _build_trainer(objective, recipe, model_args, data_args, training_args, data, attention,
                             _RunSettingsSources(given, chosen))  # fmt: skip
    # A resume under another block length or masking trains on other steps: refused (runs.resume_settings).
    trainer.resume_settings.update(max_seq_length=data_args.max_seq_length, masking=recipe.masking)

    # Train (resuming where a killed run stopped), save, evaluate, describe.
    train_result = trainer.train(resume_from_checkpoint=resume_checkpoint(trainer))
    _save_and_evaluate(trainer, train_result.metrics, objective, data.tokenizer)
    write_model_card(trainer, recipe, objective, data_args)
    if training_args.push_to_hub:
        trainer.push_to_hub()
    return trainer


# DataLoader workers a run on a GPU gets unless --dataloader_num_workers is given: enough to collate ahead of a step
# (the span collator takes a few milliseconds a batch), few enough not to crowd a node's cores under DDP.
GPU_DATALOADER_WORKERS = 2


def _load_data_beside_the_gpu(
    training_args: PretrainingArguments,
    data_args: PretrainingDataArguments,
    given: Collection[str] | None,
    chosen: Mapping[str, str] | None,
) -> Mapping[str, str] | None:
    """On CUDA, batches are loaded and collated in persistent DataLoader workers, so that collating overlaps the
    GPU's step instead of adding to it; the masks do not change (a pure function of seed, epoch and example
    index). Not in streaming mode, where the workers share out the stream: more of them would change which blocks
    each reader gets, and so the data of a run resumed under the old count. Returns `chosen` with who set it."""
    if training_args.device.type != "cuda" or data_args.streaming or "dataloader_num_workers" in (given or ()):
        return chosen
    training_args.dataloader_num_workers = GPU_DATALOADER_WORKERS
    training_args.dataloader_persistent_workers = True
    return {**(chosen or {}), "dataloader_num_workers": "training on CUDA"}


def _copy_batches_without_waiting(training_args: PretrainingArguments, given: Collection[str] | None) -> None:
    """On CUDA, batches are collated into pinned host memory and accelerate copies them to the GPU with
    `non_blocking=True` (the Trainer's `accelerator_config`), so that a step's copies queue behind the previous
    step's kernels instead of waiting for them. The GPU reads a batch in stream order, after its copy, and each
    batch is a pinned buffer of its own that nothing writes again. Not where the user set either flag."""
    if training_args.device.type != "cuda" or {"accelerator_config", "dataloader_pin_memory"} & set(given or ()):
        return
    training_args.dataloader_pin_memory = True
    training_args.accelerator_config.non_blocking = True


def _build_trainer(
    objective: PretrainingObjective,
    recipe: ResolvedRecipe,
    model_args: PretrainingModelArguments,
    data_args: PretrainingDataArguments,
    training_args: PretrainingArguments,
    data: PretrainingData,
    attention: AttentionPlan,
    settings: _RunSettingsSources,
) -> PretrainingTrainer:
    """The model, its collators and the Trainer, once the run's length is fitted and its settings reported."""
    # The model: from the checkpoint, or freshly initialised, under the plan's attention (set on its config).
    if attention.chosen_by is not None:
        settings = dataclasses.replace(settings, chosen={**(settings.chosen or {}), "attn_implementation":
                                                         attention.chosen_by})  # fmt: skip
    model = objective.build_model(model_args, data.config, data.tokenizer)
    drop_unused_weight_conversions(model)
    float8 = convert_to_float8(model).describe() if training_args.fp8 else None

    # Masking, laid out in the objective's prediction slots; the evaluation's may follow another scheme.
    masking = functools.partial(_span_masking_collator, data.tokenizer, model.config, recipe, objective, data_args,
                                training_args, attention)  # fmt: skip
    collator = masking()
    # --eval_masking: runs trained with different schemes predict the same held-out tokens.
    eval_collator = masking(data_args.eval_masking) if data_args.eval_masking not in (None, recipe.masking) else None

    description = attention.describe(model.config._attn_implementation)
    _fit_and_report_run_settings(training_args, data.train, settings, description, float8)
    _check_evaluation_data(data.eval, training_args)
    return PretrainingTrainer(
        model=model,
        args=training_args,
        train_dataset=data.train,
        eval_dataset=data.eval,
        data_collator=collator,
        eval_data_collator=eval_collator,
        processing_class=data.tokenizer,
        optimizer_cls_and_kwargs=trainer_optimizer(training_args),
        objective=objective,
    )


@dataclasses.dataclass(frozen=True)
class _RunSettingsSources:
    """Who set the run's settings: the flags given, and what the recipe or demo chose."""

    given: Collection[str] | None
    chosen: Mapping[str, str] | None


def _fit_and_report_run_settings(
    training_args: PretrainingArguments,
    train_dataset: Dataset,
    sources: _RunSettingsSources,
    attention: str,
    float8: str | None,
) -> None:
    """Warm-up, bias correction and logging fitted to the run (before the Trainer builds its optimiser from them),
    then the line of run settings, each with who set it (`attention` and `float8`: the attention plan's and
    --fp8's accounts)."""
    given = sources.given
    fitted = fit_to_run_length(training_args, given, train_dataset)
    set_by = {**(sources.chosen or {}), **dict.fromkeys(fitted, "fitted to the run")}
    set_by.update(dict.fromkeys(given or (), "you"))
    if training_args.should_log:
        # Printed, not logged: transformers' default verbosity hides info logs, and this line says what a step costs.
        print(run_settings(training_args, train_dataset, set_by, attention, float8))


def _check_evaluation_data(eval_dataset: Dataset | None, training_args: PretrainingArguments) -> None:
    """Evaluation during training needs evaluation data; said before training rather than by the Trainer's error."""
    if eval_dataset is None and training_args.eval_strategy != "no":
        raise UserInputError(
            f"--eval_strategy {training_args.eval_strategy.value} evaluates during training, and this run has no "
            "evaluation data. Give --validation_file (streaming mode evaluates only on it) or "
            "--validation_split_percentage above 0, or use --eval_strategy no."
        )


def _build_config(
    objective: PretrainingObjective,
    recipe: ResolvedRecipe,
    model_args: PretrainingModelArguments,
    data_args: PretrainingDataArguments,
    attention: AttentionPlan,
    tokenizer: PreTrainedTokenizerBase,
) -> PretrainedConfig:
    """The objective's config with the plan's attention and the user's overrides, checked against the block
    length."""
    config = objective.build_config(model_args, recipe, tokenizer)
    _override_config(config, model_args.config_overrides, attention.implementation)
    _check_positions(config, data_args.max_seq_length, model_args)
    return config


def _span_masking_collator(
    tokenizer: PreTrainedTokenizerBase,
    config: PretrainedConfig,
    recipe: ResolvedRecipe,
    objective: PretrainingObjective,
    data_args: PretrainingDataArguments,
    training_args: PretrainingArguments,
    attention: AttentionPlan,
    masking: str | None = None,
) -> DataCollatorForSpanMasking:
    """The run's masking (the recipe's, or `masking`), laid out as the objective reads it."""
    return DataCollatorForSpanMasking(
        tokenizer,
        mlm_probability=data_args.mlm_probability,
        masking=masking or recipe.masking,
        geometric_p=data_args.geometric_p,
        max_span_length=data_args.max_span_length,
        mask_replace_prob=recipe.mask_replace_prob,
        random_replace_prob=recipe.random_replace_prob,
        seed=training_args.seed,
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


def _setup_logging(training_args: PretrainingArguments) -> None:
    logging.basicConfig(
        format="%(asctime)s - %(levelname)s - %(name)s - %(message)s", datefmt="%H:%M:%S", level=logging.INFO
    )
    level = training_args.get_process_log_level()
    logger.setLevel(level)
    datasets.utils.logging.set_verbosity(level)
    transformers.utils.logging.set_verbosity(level)
