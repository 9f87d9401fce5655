"""The pretraining run behind run_pretraining.py: resolve the recipe, build tokenizer, blocks, collator and
model, then train with `PretrainingTrainer`."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path

import datasets
import transformers
from transformers import AutoTokenizer, PreTrainedTokenizerBase, set_seed

from ..configuration_spanroberta import SpanRobertaConfig
from ..data.collator import DataCollatorForSpanMasking
from ..data.corpus import load_documents
from ..data.demo_corpus import demo_corpus_path
from ..data.formats import PAIR_FORMATS, prepare_blocks
from ..data.masking_schedule import DynamicMaskingDataset, StaticMaskingDataset
from ..data.tokenizer import train_byte_level_bpe
from ..modeling_spanroberta import SpanRobertaForPreTraining
from .arguments import PretrainingArguments, PretrainingDataArguments, PretrainingModelArguments
from .recipes import get_model_size, get_recipe
from .trainer import PretrainingTrainer

logger = logging.getLogger(__name__)

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
    "logging_steps": 25,
    "save_steps": 300,
    "eval_strategy": "no",
    "output_dir": "spanroberta-demo",
}


@dataclass(frozen=True)
class ResolvedObjective:
    """The recipe with the user's overrides applied."""

    masking: str
    sbo: bool
    sentence_objective: str
    input_format: str
    static_masking: bool


def apply_demo_settings(
    model_args: PretrainingModelArguments,
    data_args: PretrainingDataArguments,
    training_args: PretrainingArguments,
    given: set[str],
) -> tuple[PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments]:
    """In demo mode, fills in DEMO_SETTINGS for every setting the user did not give."""
    if not data_args.is_demo:
        if training_args.output_dir is None:
            raise ValueError("--output_dir is required when training on your own data.")
        return model_args, data_args, training_args
    updates = {name: value for name, value in DEMO_SETTINGS.items() if name not in given}
    model_args = replace(model_args, **{k: v for k, v in updates.items() if hasattr(model_args, k)})
    data_args = replace(data_args, train_file=str(demo_corpus_path()))
    data_args = replace(data_args, **{k: v for k, v in updates.items() if hasattr(data_args, k)})
    training_updates = {k: v for k, v in updates.items() if k in training_args.to_dict() or k == "output_dir"}
    training_args = replace(training_args, **training_updates)
    return model_args, data_args, training_args


def resolve_objective(model_args: PretrainingModelArguments, data_args: PretrainingDataArguments) -> ResolvedObjective:
    recipe = get_recipe(data_args.recipe)
    objective = ResolvedObjective(
        masking=data_args.masking or recipe.masking,
        sbo=recipe.sbo if model_args.sbo is None else model_args.sbo,
        sentence_objective=model_args.sentence_objective or recipe.sentence_objective,
        input_format=data_args.input_format or recipe.input_format,
        static_masking=recipe.static_masking if data_args.static_masking is None else data_args.static_masking,
    )
    if objective.sentence_objective != "none" and objective.input_format not in PAIR_FORMATS:
        raise ValueError(
            f"--sentence_objective {objective.sentence_objective} needs a pair input format "
            f"({', '.join(PAIR_FORMATS)}), not {objective.input_format}."
        )
    return objective


def load_or_train_tokenizer(
    model_args: PretrainingModelArguments, documents: datasets.Dataset
) -> PreTrainedTokenizerBase:
    name = model_args.tokenizer_name or model_args.model_name_or_path
    if name:
        tokenizer = AutoTokenizer.from_pretrained(
            name, cache_dir=model_args.cache_dir, trust_remote_code=model_args.trust_remote_code
        )
    else:
        logger.info("Training a byte-level BPE of %d tokens on the training text.", model_args.tokenizer_vocab_size)
        tokenizer = train_byte_level_bpe(documents["text"], vocab_size=model_args.tokenizer_vocab_size)
    if tokenizer.mask_token is None:
        raise ValueError(f"The tokenizer {name} has no mask token, so it cannot be used for masked-LM pretraining.")
    return tokenizer


def build_model(
    model_args: PretrainingModelArguments,
    objective: ResolvedObjective,
    tokenizer: PreTrainedTokenizerBase,
    max_seq_length: int,
) -> SpanRobertaForPreTraining:
    head_settings = {
        "use_sbo": objective.sbo,
        "sbo_loss_weight": model_args.sbo_loss_weight,
        "sentence_objective": objective.sentence_objective,
    }
    if model_args.model_name_or_path:
        # A RoBERTa checkpoint's config becomes a spanroberta one; its encoder and MLM head load, the SBO head
        # (and a sentence head it lacks) start fresh.
        config = SpanRobertaConfig.from_pretrained(
            model_args.model_name_or_path, cache_dir=model_args.cache_dir, **head_settings
        )
        _override_config(config, model_args.config_overrides)
        model = SpanRobertaForPreTraining.from_pretrained(
            model_args.model_name_or_path, config=config, cache_dir=model_args.cache_dir
        )
    else:
        config = SpanRobertaConfig(
            **get_model_size(model_args.model_size),
            vocab_size=len(tokenizer),
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.cls_token_id,
            eos_token_id=tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id,
            **head_settings,
        )
        _override_config(config, model_args.config_overrides)
        model = SpanRobertaForPreTraining(config)
    if len(tokenizer) > model.config.vocab_size:
        model.resize_token_embeddings(len(tokenizer))
    positions = model.config.max_position_embeddings - (model.config.pad_token_id or 0) - 1
    if max_seq_length > positions:
        raise ValueError(
            f"--max_seq_length {max_seq_length} is above the model's {positions} positions "
            f"(max_position_embeddings={model.config.max_position_embeddings})."
        )
    return model


def _override_config(config: SpanRobertaConfig, overrides: str | None) -> None:
    if overrides:
        config.update_from_string(overrides)


def run_pretraining(
    model_args: PretrainingModelArguments,
    data_args: PretrainingDataArguments,
    training_args: PretrainingArguments,
) -> PretrainingTrainer:
    """Pretrains and saves the model, tokenizer and model card to `training_args.output_dir`."""
    _setup_logging(training_args)
    # Seed before anything random is built: the Trainer seeds only once it is constructed, after the model.
    set_seed(training_args.seed)
    objective = resolve_objective(model_args, data_args)
    logger.info("Objective: %s", objective)

    train_files = data_args.train_file.split(",") if data_args.train_file else None
    documents = load_documents(
        train_files=train_files,
        dataset_name=data_args.dataset_name,
        dataset_config_name=data_args.dataset_config_name,
        text_column_name=data_args.text_column_name,
        cache_dir=model_args.cache_dir,
    )
    if data_args.validation_file:
        eval_documents = load_documents(
            train_files=data_args.validation_file.split(","),
            text_column_name=data_args.text_column_name,
            cache_dir=model_args.cache_dir,
        )
    elif data_args.validation_split_percentage > 0 and len(documents) > 1:
        split = documents.train_test_split(
            test_size=data_args.validation_split_percentage / 100, seed=training_args.seed, shuffle=True
        )
        documents, eval_documents = split["train"], split["test"]
    else:
        eval_documents = None

    tokenizer = load_or_train_tokenizer(model_args, documents)
    model = build_model(model_args, objective, tokenizer, data_args.max_seq_length)

    def blocks_of(docs: datasets.Dataset) -> datasets.Dataset:
        return prepare_blocks(
            docs,
            tokenizer,
            input_format=objective.input_format,
            max_seq_length=data_args.max_seq_length,
            pair_objective=objective.sentence_objective if objective.sentence_objective != "none" else "nsp",
            seed=training_args.seed,
            num_proc=data_args.preprocessing_num_workers,
        )

    with training_args.main_process_first(desc="tokenizing and packing"):
        train_blocks = blocks_of(documents)
        eval_blocks = blocks_of(eval_documents) if eval_documents is not None else None
    if data_args.max_train_samples is not None:
        train_blocks = train_blocks.select(range(min(data_args.max_train_samples, len(train_blocks))))
    train_dataset = (
        StaticMaskingDataset(train_blocks, dupe_factor=data_args.dupe_factor)
        if objective.static_masking
        else DynamicMaskingDataset(train_blocks)
    )
    # Evaluation masks are fixed (epoch 0), so that evaluations along a run are comparable.
    eval_dataset = DynamicMaskingDataset(eval_blocks) if eval_blocks is not None else None
    logger.info("%d training blocks of up to %d tokens", len(train_blocks), data_args.max_seq_length)

    collator = DataCollatorForSpanMasking(
        tokenizer,
        mlm_probability=data_args.mlm_probability,
        masking=objective.masking,
        geometric_p=data_args.geometric_p,
        max_span_length=data_args.max_span_length,
        max_span_targets=model.config.max_span_targets,
        return_sbo_targets=objective.sbo,
        seed=training_args.seed,
    )
    trainer = PretrainingTrainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        data_collator=collator,
        processing_class=tokenizer,
    )
    resume = training_args.resume_from_checkpoint
    if isinstance(resume, str) and resume.lower() in ("true", "false"):
        resume = resume.lower() == "true"
    train_result = trainer.train(resume_from_checkpoint=resume or None)
    trainer.save_model()
    trainer.log_metrics("train", train_result.metrics)
    trainer.save_metrics("train", train_result.metrics)
    trainer.save_state()
    if eval_dataset is not None:
        metrics = trainer.evaluate()
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)
    _write_model_card(trainer, objective, data_args)
    if training_args.push_to_hub:
        trainer.push_to_hub()
    return trainer


def _write_model_card(trainer: PretrainingTrainer, objective: ResolvedObjective, data_args) -> None:
    if not trainer.is_world_process_zero():
        return
    config = trainer.model.config
    data = data_args.dataset_name or data_args.train_file
    eval_lines = "\n".join(
        f"| {k} | {v:.4f} |" for k, v in trainer.state.log_history[-1].items() if k.startswith("eval_")
    )
    card = f"""---
library_name: transformers
tags:
- spanroberta
- fill-mask
- span-masking
---

# SpanRoBERTa checkpoint

Pretrained with spanroberta (`run_pretraining.py`, recipe `{data_args.recipe}`).

| setting | value |
|---|---|
| masking | {objective.masking} |
| span boundary objective | {objective.sbo} |
| sentence objective | {objective.sentence_objective} |
| input format | {objective.input_format} |
| static masking | {objective.static_masking} |
| layers / hidden / heads | {config.num_hidden_layers} / {config.hidden_size} / {config.num_attention_heads} |
| vocabulary | {config.vocab_size} |
| block length | {data_args.max_seq_length} |
| training data | {data} |
| steps | {trainer.state.global_step} |

{"| metric | value |" + chr(10) + "|---|---|" + chr(10) + eval_lines if eval_lines else ""}

The encoder is RoBERTa's: `RobertaModel.from_pretrained` loads it. With spanroberta installed, `import spanroberta`
and use the Auto classes; without it, pass `trust_remote_code=True`.
"""
    Path(trainer.args.output_dir, "README.md").write_text(card, encoding="utf-8")


def _setup_logging(training_args: PretrainingArguments) -> None:
    logging.basicConfig(
        format="%(asctime)s - %(levelname)s - %(name)s - %(message)s", datefmt="%H:%M:%S", level=logging.INFO
    )
    level = training_args.get_process_log_level()
    logger.setLevel(level)
    datasets.utils.logging.set_verbosity(level)
    transformers.utils.logging.set_verbosity(level)
