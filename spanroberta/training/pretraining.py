"""The pretraining run behind run_pretraining.py: resolve the recipe, build tokenizer, blocks, collator and
model, then train with `PretrainingTrainer`.

The corpus is read in one of three modes:
- in memory (default): documents and blocks are `datasets` datasets, cached by fingerprint;
- prepared (`--prepared_data_dir`): blocks made once into sharded Arrow files, memory-mapped, reused later
  (`spanroberta.data.prepared`);
- streaming (`--streaming`): blocks made on the fly, split between processes and workers
  (`spanroberta.data.streaming`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

import datasets
import transformers
from torch.utils.data import Dataset
from transformers import (
    AutoModelForPreTraining,
    AutoTokenizer,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    set_seed,
)

from ..models.configuration_span_albert import SpanAlbertConfig
from ..models.configuration_spanroberta import SpanRobertaConfig
from ..data import prepared
from ..data.collator import DataCollatorForSpanMasking
from ..data.corpus import iter_documents, load_documents
from ..data.demo_corpus import demo_corpus_path
from ..data.formats import PAIR_FORMATS, block_builder, prepare_blocks
from ..data.masking_schedule import DynamicMaskingDataset, StaticMaskingDataset
from ..data.streaming import StreamingBlocks
from ..data.tokenizer import train_byte_level_bpe, train_sentencepiece_unigram
from ..errors import UserInputError
from ..models.modeling_electra_pretraining import GENERATOR_FOLDER
from .arguments import PretrainingArguments, PretrainingDataArguments, PretrainingModelArguments
from .checkpoints import resume_checkpoint
from .cli import apply_defaults
from .electra import apply_electra_defaults, build_electra_config, build_electra_model
from .optimizers import trainer_optimizer
from .recipes import get_model_size, get_recipe
from .run_length import fit_to_run_length
from .trainer import PretrainingTrainer

logger = logging.getLogger(__name__)

# The config of each encoder (recipes.ENCODERS); AutoModelForPreTraining maps it to its pretraining model.
ENCODER_CONFIGS = {"roberta": SpanRobertaConfig, "albert": SpanAlbertConfig}
# The model types whose checkpoints continue pretraining on the ALBERT encoder; any other is read as RoBERTa's.
ALBERT_MODEL_TYPES = ("albert", "spanalbert")
# The tokenizer trained on the corpus when none is given (recipes.TOKENIZERS).
TOKENIZER_TRAINERS = {"byte-level-bpe": train_byte_level_bpe, "unigram": train_sentencepiece_unigram}

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
    encoder: str = "roberta"
    tokenizer: str = "byte-level-bpe"
    # What the encoder learns from the masked input ("mlm", or "rtd": ELECTRA) and how masked tokens are replaced.
    objective: str = "mlm"
    mask_replace_prob: float = 0.8
    random_replace_prob: float = 0.1


def apply_demo_settings(
    model_args: PretrainingModelArguments,
    data_args: PretrainingDataArguments,
    training_args: PretrainingArguments,
    given: set[str],
) -> tuple[PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments]:
    """Fills in the recipe's flag defaults, and in demo mode DEMO_SETTINGS (which win over the recipe's), for
    every setting the user did not give. Then the ELECTRA recipe's defaults that depend on the model size
    (learning rate, batch, mask rate; ELECTRA Table 6) fill in what neither the user nor the demo set."""
    recipe_defaults = dict(get_recipe(data_args.recipe).flag_defaults)
    model_args, data_args, training_args = apply_defaults((model_args, data_args, training_args), recipe_defaults, given)
    if not data_args.is_demo:
        # TrainingArguments turns a missing output_dir into "trainer_output": look at what the user gave.
        if "output_dir" not in given and not data_args.prepare_only:
            raise UserInputError("--output_dir is required when training on your own data.")
    else:
        demo = {**DEMO_SETTINGS, "train_file": str(demo_corpus_path())}
        model_args, data_args, training_args = apply_defaults((model_args, data_args, training_args), demo, given)
        given = given | set(demo)
    if get_recipe(data_args.recipe).objective == "rtd":
        model_args, data_args, training_args = apply_electra_defaults((model_args, data_args, training_args), given)
    return model_args, data_args, training_args


def resolve_objective(model_args: PretrainingModelArguments, data_args: PretrainingDataArguments) -> ResolvedObjective:
    recipe = get_recipe(data_args.recipe)
    objective = ResolvedObjective(
        masking=data_args.masking or recipe.masking,
        sbo=recipe.sbo if model_args.sbo is None else model_args.sbo,
        sentence_objective=model_args.sentence_objective or recipe.sentence_objective,
        input_format=data_args.input_format or recipe.input_format,
        static_masking=recipe.static_masking if data_args.static_masking is None else data_args.static_masking,
        # --embedding_size or --cross_layer_sharing ask for an ALBERT encoder under any recipe.
        encoder=(
            "albert"
            if model_args.embedding_size is not None or model_args.cross_layer_sharing is not None
            else recipe.encoder
        ),
        tokenizer=recipe.tokenizer,
        objective=recipe.objective,
        mask_replace_prob=recipe.mask_replace_prob,
        random_replace_prob=recipe.random_replace_prob,
    )
    if objective.objective == "rtd" and (
        objective.sbo or objective.sentence_objective != "none" or model_args.cross_layer_sharing is not None
    ):
        raise UserInputError(
            "--recipe electra trains an ELECTRA generator and discriminator, without SBO, sentence-level heads or "
            "ALBERT's cross-layer sharing; drop --sbo, --sentence_objective and --cross_layer_sharing."
        )
    if objective.sentence_objective != "none" and objective.input_format not in PAIR_FORMATS:
        raise UserInputError(
            f"--sentence_objective {objective.sentence_objective} needs a pair input format "
            f"({', '.join(PAIR_FORMATS)}), not {objective.input_format}."
        )
    if objective.sentence_objective == "none" and objective.input_format in PAIR_FORMATS:
        # Half of NSP's pairs join unrelated documents: without a head that learns from the label, that is noise.
        raise UserInputError(
            f"--input_format {objective.input_format} builds pairs for a sentence-level objective (RoBERTa "
            "section 4.2); add --sentence_objective nsp or sop, or use full-sentences or doc-sentences."
        )
    return objective


def load_tokenizer(model_args: PretrainingModelArguments) -> PreTrainedTokenizerBase | None:
    """The tokenizer named by --tokenizer_name or --model_name_or_path, or None when neither is given."""
    name = model_args.tokenizer_name or model_args.model_name_or_path
    if not name:
        return None
    tokenizer = AutoTokenizer.from_pretrained(
        name, cache_dir=model_args.cache_dir, trust_remote_code=model_args.trust_remote_code,
        revision=model_args.model_revision, token=model_args.token,
    )
    if tokenizer.mask_token is None:
        raise UserInputError(
            f"The tokenizer {name} has no mask token, so it cannot be used for masked-LM pretraining. Give a "
            "tokenizer with one (RoBERTa's is <mask>), or none to train a byte-level BPE on the corpus."
        )
    return tokenizer


def load_or_train_tokenizer(
    model_args: PretrainingModelArguments, documents: datasets.Dataset, kind: str = "byte-level-bpe"
) -> PreTrainedTokenizerBase:
    """The given tokenizer, or one of `kind` (recipes.TOKENIZERS) trained on `documents`."""
    tokenizer = load_tokenizer(model_args)
    if tokenizer is None:
        logger.info("Training a %s tokenizer of %d ids on the training text.", kind, model_args.tokenizer_vocab_size)
        tokenizer = TOKENIZER_TRAINERS[kind](_texts(documents), vocab_size=model_args.tokenizer_vocab_size)
    return tokenizer


def _texts(documents: datasets.Dataset) -> Iterator[str]:
    # Batch by batch from the memory-mapped table, so that the whole corpus is never held as Python strings.
    for batch in documents.iter(batch_size=1000):
        yield from batch["text"]


def build_config(
    model_args: PretrainingModelArguments,
    objective: ResolvedObjective,
    tokenizer: PreTrainedTokenizerBase,
    max_seq_length: int,
) -> SpanRobertaConfig | SpanAlbertConfig:
    """The model's config (the encoder's: the checkpoint's, else the objective's); checks that blocks of
    `max_seq_length` tokens fit its position embeddings."""
    if objective.objective == "rtd":
        config = build_electra_config(model_args, tokenizer)
        _override_config(config, model_args.config_overrides, model_args.attn_implementation)
        _check_positions(config, max_seq_length, model_args)
        return config
    head_settings = {
        "use_sbo": objective.sbo,
        "sbo_loss_weight": model_args.sbo_loss_weight,
        "sentence_objective": objective.sentence_objective,
    }
    # ALBERT's encoder settings, where given (SpanAlbertConfig's defaults are ALBERT-base's: E = 128, all shared).
    encoder_settings = {
        name: getattr(model_args, name)
        for name in ("embedding_size", "cross_layer_sharing")
        if getattr(model_args, name) is not None
    }
    source = model_args.config_name or model_args.model_name_or_path
    if source:
        # A RoBERTa (ALBERT) checkpoint's config becomes a spanroberta (SpanALBERT) one; its encoder and MLM head
        # (ALBERT: and SOP head) load, the SBO head (and a sentence head it lacks) start fresh.
        config_class = ENCODER_CONFIGS[_checkpoint_encoder(source, model_args, encoder_settings)]
        config = config_class.from_pretrained(
            source,
            cache_dir=model_args.cache_dir,
            revision=model_args.model_revision,
            token=model_args.token,
            **head_settings,
        )
        _check_checkpoint_encoder_settings(config, encoder_settings)
    else:
        config = ENCODER_CONFIGS[objective.encoder](
            **get_model_size(model_args.model_size),
            vocab_size=len(tokenizer),
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.cls_token_id,
            eos_token_id=tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id,
            # BERT-style tokenizers mark a pair's second segment with token type 1; RoBERTa's have one type.
            type_vocab_size=2 if "token_type_ids" in tokenizer.model_input_names else 1,
            **head_settings,
            **encoder_settings,  # given only for an ALBERT encoder (resolve_objective)
        )
    _override_config(config, model_args.config_overrides, model_args.attn_implementation)
    _check_positions(config, max_seq_length, model_args)
    return config


def first_position_id(config) -> int:
    """Where position ids start: spanroberta's and SpanALBERT's configs name it (RoBERTa's after the padding id,
    ALBERT's at 0); ELECTRA's (BERT's) start at 0."""
    return getattr(config, "first_position_id", 0)


def _check_positions(config, max_seq_length: int, model_args: PretrainingModelArguments) -> None:
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


def _checkpoint_encoder(source: str, model_args: PretrainingModelArguments, encoder_settings: dict) -> str:
    """The encoder of the config or checkpoint `source` ("roberta" or "albert"), read from its model type."""
    config_dict, _ = PretrainedConfig.get_config_dict(
        source, cache_dir=model_args.cache_dir, revision=model_args.model_revision, token=model_args.token
    )
    model_type = config_dict.get("model_type")
    encoder = "albert" if model_type in ALBERT_MODEL_TYPES else "roberta"
    if encoder_settings and encoder != "albert":
        raise UserInputError(
            f"--{' and --'.join(encoder_settings)} set an ALBERT encoder, but {source} is a {model_type} "
            "checkpoint."
        )
    return encoder


def _check_checkpoint_encoder_settings(config: SpanAlbertConfig | SpanRobertaConfig, encoder_settings: dict) -> None:
    """A checkpoint's encoder keeps its shape: --embedding_size and --cross_layer_sharing may only repeat it."""
    for name, value in encoder_settings.items():
        if getattr(config, name) != value:
            raise UserInputError(
                f"--{name} {value} differs from the checkpoint's ({getattr(config, name)}): continued pretraining "
                "keeps the checkpoint's encoder. Leave the flag out."
            )


def build_model(
    model_args: PretrainingModelArguments, config: SpanRobertaConfig | SpanAlbertConfig, tokenizer: PreTrainedTokenizerBase
) -> PreTrainedModel:
    """The pretraining model of `config`'s encoder (SpanRobertaForPreTraining or SpanAlbertForPreTraining)."""
    if config.model_type == "electra":
        return build_electra_model(model_args, config)
    if model_args.model_name_or_path:
        model = AutoModelForPreTraining.from_pretrained(
            model_args.model_name_or_path, config=config, cache_dir=model_args.cache_dir,
            revision=model_args.model_revision, token=model_args.token,
        )
    else:
        model = AutoModelForPreTraining.from_config(config)
    if len(tokenizer) > model.config.vocab_size:
        model.resize_token_embeddings(len(tokenizer))
    return model


def _override_config(config: SpanRobertaConfig, overrides: str | None, attn_implementation: str | None) -> None:
    if attn_implementation:
        config._attn_implementation = attn_implementation  # what from_pretrained and from_config read
    if overrides:
        try:
            config.update_from_string(overrides)
        except ValueError as error:
            raise UserInputError(f"--config_overrides {overrides!r}: {error}") from None


@dataclass
class PretrainingData:
    """What the data stage hands to training."""

    tokenizer: PreTrainedTokenizerBase
    config: SpanRobertaConfig
    train: Dataset | StreamingBlocks
    eval: Dataset | None


def run_pretraining(
    model_args: PretrainingModelArguments,
    data_args: PretrainingDataArguments,
    training_args: PretrainingArguments,
    given: Collection[str] | None = None,
) -> PretrainingTrainer | None:
    """Pretrains and saves the model, tokenizer and model card to `training_args.output_dir`.

    With --prepare_only, prepares --prepared_data_dir and returns None without training. `given`, the flags the
    user set, says which of the warm-up, Adam's bias correction and logging interval may be fitted to the run's
    length (None: none).
    """
    _setup_logging(training_args)
    # Seed before anything random is built: the Trainer seeds only once it is constructed, after the model.
    set_seed(training_args.seed)
    objective = resolve_objective(model_args, data_args)
    logger.info("Objective: %s", objective)
    # The main process reads (or prepares) the data first; the others then find it in the cache or on disk.
    with training_args.main_process_first(desc="reading and preparing the data"):
        data = load_pretraining_data(model_args, data_args, training_args, objective)
    if data_args.prepare_only:
        logger.info("Prepared the data in %s.", data_args.prepared_data_dir)
        return None
    model = build_model(model_args, data.config, data.tokenizer)

    collator = DataCollatorForSpanMasking(
        data.tokenizer,
        mlm_probability=data_args.mlm_probability,
        masking=objective.masking,
        geometric_p=data_args.geometric_p,
        max_span_length=data_args.max_span_length,
        max_span_targets=getattr(model.config, "max_span_targets", 15),
        mask_replace_prob=objective.mask_replace_prob,
        random_replace_prob=objective.random_replace_prob,
        return_sbo_targets=objective.sbo,
        seed=training_args.seed,
        # Rows of fixed-length formats keep one shape from batch to batch, so a compiled step never recompiles.
        pad_to_multiple_of=data_args.max_seq_length if _fixed_length(objective, data_args) else None,
        first_position_id=first_position_id(model.config),
        # The pretraining models read their targets at fixed prediction slots, which compile without host syncs.
        label_layout="slots",
    )
    # Before the Trainer: its optimiser settings (Adam's bias correction) are read when it is built.
    fit_to_run_length(training_args, given, data.train)
    trainer = PretrainingTrainer(
        model=model,
        args=training_args,
        train_dataset=data.train,
        eval_dataset=data.eval,
        data_collator=collator,
        processing_class=data.tokenizer,
        optimizer_cls_and_kwargs=trainer_optimizer(training_args),
    )
    train_result = trainer.train(resume_from_checkpoint=resume_checkpoint(trainer))
    train_result.metrics.update(trainer.real_token_metrics(train_result.metrics["train_runtime"]))
    trainer.save_model()
    _save_tokenizer_with_generator(trainer, data.tokenizer)
    trainer.log_metrics("train", train_result.metrics)
    trainer.save_metrics("train", train_result.metrics)
    trainer.save_state()
    if data.eval is not None:
        metrics = trainer.evaluate()
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)
    _write_model_card(trainer, objective, data_args)
    if training_args.push_to_hub:
        trainer.push_to_hub()
    return trainer


def _save_tokenizer_with_generator(trainer: PretrainingTrainer, tokenizer: PreTrainedTokenizerBase) -> None:
    """ELECTRA runs: the generator folder gets the tokenizer too, so that pipeline("fill-mask") loads it alone."""
    generator_dir = Path(trainer.args.output_dir) / GENERATOR_FOLDER
    if trainer.is_world_process_zero() and generator_dir.is_dir():
        tokenizer.save_pretrained(generator_dir)


def _fixed_length(objective: ResolvedObjective, data_args: PretrainingDataArguments) -> bool:
    """Whether (nearly) every row is max_seq_length long: full-sentences blocks and packed doc-sentences rows."""
    packed = objective.input_format == "doc-sentences" and data_args.pack_documents
    return packed or objective.input_format == "full-sentences"


def load_pretraining_data(
    model_args: PretrainingModelArguments,
    data_args: PretrainingDataArguments,
    training_args: PretrainingArguments,
    objective: ResolvedObjective,
) -> PretrainingData:
    """Tokenizer, model config and masking datasets, in the mode the arguments ask for.

    The config is built (and --max_seq_length checked against it) before any block is made.
    """
    if data_args.streaming:
        tokenizer, config, train, eval_blocks = _streaming_data(model_args, data_args, training_args, objective)
    elif data_args.prepared_data_dir and prepared.is_prepared(data_args.prepared_data_dir):
        tokenizer, config, train, eval_blocks = _reused_prepared_data(model_args, data_args, training_args, objective)
    else:
        tokenizer, config, train, eval_blocks = _built_data(model_args, data_args, training_args, objective)

    if not isinstance(train, StreamingBlocks):
        if data_args.max_train_samples is not None:
            train = train.select(range(min(data_args.max_train_samples, len(train))))
        logger.info("%d training blocks of up to %d tokens", len(train), data_args.max_seq_length)
        train = (
            StaticMaskingDataset(train, dupe_factor=data_args.dupe_factor)
            if objective.static_masking
            else DynamicMaskingDataset(train)
        )
    if eval_blocks is not None and data_args.max_eval_samples is not None:
        eval_blocks = eval_blocks.select(range(min(data_args.max_eval_samples, len(eval_blocks))))
    # Evaluation masks are fixed (epoch 0), so that evaluations along a run are comparable.
    eval_dataset = DynamicMaskingDataset(eval_blocks) if eval_blocks is not None else None
    return PretrainingData(tokenizer=tokenizer, config=config, train=train, eval=eval_dataset)


def _built_data(
    model_args: PretrainingModelArguments,
    data_args: PretrainingDataArguments,
    training_args: PretrainingArguments,
    objective: ResolvedObjective,
) -> tuple[PreTrainedTokenizerBase, SpanRobertaConfig, datasets.Dataset, datasets.Dataset | None]:
    """In-memory mode (blocks cached by `datasets`), or the first run of the prepared mode (blocks saved)."""
    prepared_dir = data_args.prepared_data_dir
    if prepared_dir and not (data_args.train_file or data_args.dataset_name):
        raise UserInputError(
            f"--prepared_data_dir {prepared_dir} holds no prepared data yet: give --train_file or --dataset_name "
            "to prepare it from."
        )
    with prepared.preparing(prepared_dir) if prepared_dir else contextlib.nullcontext() as staging:
        cache_dir = str(staging / prepared.INTERMEDIATE_CACHE) if staging else model_args.cache_dir
        documents, eval_documents = _document_splits(data_args, training_args.seed, cache_dir)
        tokenizer = load_or_train_tokenizer(model_args, documents, objective.tokenizer)
        config = build_config(model_args, objective, tokenizer, data_args.max_seq_length)

        def blocks_of(docs: datasets.Dataset) -> datasets.Dataset:
            return prepare_blocks(
                docs,
                tokenizer,
                input_format=objective.input_format,
                max_seq_length=data_args.max_seq_length,
                pair_objective=_pair_objective(objective),
                seed=training_args.seed,
                num_proc=data_args.preprocessing_num_workers,
                documents_per_group=data_args.documents_per_group,
                pack_documents=data_args.pack_documents,
            )

        splits = {"train": blocks_of(documents)}
        if eval_documents is not None:
            splits["validation"] = blocks_of(eval_documents)
        if not staging:
            return tokenizer, config, splits["train"], splits.get("validation")
        settings = _prepared_settings(data_args, training_args, objective, tokenizer)
        prepared.save_prepared(staging, splits, tokenizer, settings)
    # Train from the memory-mapped shards, exactly as a later run reusing the folder will.
    blocks = datasets.load_from_disk(str(Path(prepared_dir) / "blocks"))
    return tokenizer, config, blocks["train"], blocks.get("validation")


def _reused_prepared_data(
    model_args: PretrainingModelArguments,
    data_args: PretrainingDataArguments,
    training_args: PretrainingArguments,
    objective: ResolvedObjective,
) -> tuple[PreTrainedTokenizerBase, SpanRobertaConfig, datasets.Dataset, datasets.Dataset | None]:
    requested = _prepared_settings(data_args, training_args, objective, load_tokenizer(model_args))
    blocks, tokenizer = prepared.load_prepared(data_args.prepared_data_dir, requested)
    config = build_config(model_args, objective, tokenizer, data_args.max_seq_length)
    return tokenizer, config, blocks["train"], blocks.get("validation")


def _pair_objective(objective: ResolvedObjective) -> str:
    """The pair label of pair formats (resolve_objective makes sure they have a sentence objective)."""
    return objective.sentence_objective if objective.sentence_objective != "none" else "nsp"


def _document_splits(
    data_args: PretrainingDataArguments, seed: int, cache_dir: str | None
) -> tuple[datasets.Dataset, datasets.Dataset | None]:
    """Training documents and evaluation documents (--validation_file, or a held-out share, or none)."""
    documents = load_documents(
        train_files=data_args.train_file.split(",") if data_args.train_file else None,
        dataset_name=data_args.dataset_name,
        dataset_config_name=data_args.dataset_config_name,
        text_column_name=data_args.text_column_name,
        cache_dir=cache_dir,
    )
    if data_args.validation_file:
        eval_documents = load_documents(
            train_files=data_args.validation_file.split(","),
            text_column_name=data_args.text_column_name,
            cache_dir=cache_dir,
        )
        return documents, eval_documents
    if data_args.validation_split_percentage > 0 and len(documents) > 1:
        split = documents.train_test_split(
            test_size=data_args.validation_split_percentage / 100, seed=seed, shuffle=True
        )
        return split["train"], split["test"]
    return documents, None


def _prepared_settings(
    data_args: PretrainingDataArguments,
    training_args: PretrainingArguments,
    objective: ResolvedObjective,
    tokenizer: PreTrainedTokenizerBase | None,
) -> dict:
    return prepared.prepared_settings(
        train_files=data_args.train_file.split(",") if data_args.train_file else None,
        dataset=(
            f"{data_args.dataset_name}/{data_args.dataset_config_name}:{data_args.text_column_name}"
            if data_args.dataset_name
            else None
        ),
        validation=(
            data_args.validation_file.split(",")
            if data_args.validation_file
            else data_args.validation_split_percentage
        ),
        tokenizer=tokenizer,
        input_format=objective.input_format,
        max_seq_length=data_args.max_seq_length,
        pair_objective=_pair_objective(objective) if objective.input_format in PAIR_FORMATS else None,
        documents_per_group=data_args.documents_per_group,
        pack_documents=data_args.pack_documents if objective.input_format == "doc-sentences" else None,
        seed=training_args.seed,
    )


def _streaming_data(
    model_args: PretrainingModelArguments,
    data_args: PretrainingDataArguments,
    training_args: PretrainingArguments,
    objective: ResolvedObjective,
) -> tuple[PreTrainedTokenizerBase, SpanRobertaConfig, StreamingBlocks, datasets.Dataset | None]:
    if training_args.max_steps <= 0:
        raise UserInputError("--streaming needs --max_steps: a stream has no length to count epochs in.")
    if data_args.max_train_samples is not None:
        raise UserInputError("--max_train_samples does not apply to --streaming; use --max_steps.")
    tokenizer = load_tokenizer(model_args)
    if tokenizer is None:
        raise UserInputError(
            "--streaming needs --tokenizer_name (or --model_name_or_path): training a tokenizer takes a pass over "
            "the corpus. Train one on a sample (spanroberta.data.tokenizer.train_byte_level_bpe) or use "
            "--prepared_data_dir, which trains one."
        )
    config = build_config(model_args, objective, tokenizer, data_args.max_seq_length)
    pair_objective = _pair_objective(objective)
    read_documents = functools.partial(
        iter_documents,
        train_files=data_args.train_file.split(",") if data_args.train_file else None,
        dataset_name=data_args.dataset_name,
        dataset_config_name=data_args.dataset_config_name,
        text_column_name=data_args.text_column_name,
    )
    train = StreamingBlocks(
        read_documents,
        tokenizer,
        block_builder(
            tokenizer,
            objective.input_format,
            data_args.max_seq_length,
            pair_objective,
            training_args.seed,
            data_args.pack_documents,
        ),
        documents_per_group=data_args.documents_per_group,
        shuffle_buffer_size=data_args.shuffle_buffer_size,
        seed=training_args.seed,
        static_masking_copies=data_args.dupe_factor if objective.static_masking else None,
        process_index=training_args.process_index,
        num_processes=training_args.world_size,
    )
    eval_blocks = None
    if data_args.validation_file:
        eval_documents = load_documents(
            train_files=data_args.validation_file.split(","),
            text_column_name=data_args.text_column_name,
            cache_dir=model_args.cache_dir,
        )
        eval_blocks = prepare_blocks(
            eval_documents,
            tokenizer,
            objective.input_format,
            data_args.max_seq_length,
            pair_objective,
            training_args.seed,
            data_args.preprocessing_num_workers,
            data_args.documents_per_group,
            data_args.pack_documents,
        )
    else:
        logger.info("Streaming mode evaluates only on --validation_file; none was given.")
    return tokenizer, config, train, eval_blocks


_ENCODER_NOTES = {
    "spanroberta": "The encoder is RoBERTa's: `RobertaModel.from_pretrained` loads it.",
    "spanalbert": "The encoder is ALBERT's: with every layer shared (ALBERT's scheme) `AlbertModel.from_pretrained` "
    "loads it.",
}


def _albert_shape(config) -> str:
    """ALBERT's embedding size and sharing scheme, for the model card."""
    if not hasattr(config, "cross_layer_sharing"):
        return ""
    return f" (embeddings {config.embedding_size}, layers share: {config.cross_layer_sharing})"


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
| encoder | {type(config).model_type}{_albert_shape(config)} |
| layers / hidden / heads | {config.num_hidden_layers} / {config.hidden_size} / {config.num_attention_heads} |
| vocabulary | {config.vocab_size} |
| block length | {data_args.max_seq_length} |
| training data | {data} |
| steps | {trainer.state.global_step} |

{"| metric | value |" + chr(10) + "|---|---|" + chr(10) + eval_lines if eval_lines else ""}

{_ELECTRA_USAGE if config.model_type == "electra" else _SPANROBERTA_USAGE.format(notes=_ENCODER_NOTES[type(config).model_type])}
"""
    Path(trainer.args.output_dir, "README.md").write_text(card, encoding="utf-8")


_SPANROBERTA_USAGE = (
    "{notes} With spanroberta installed, `import spanroberta` and use the Auto classes;\n"
    "without it, pass `trust_remote_code=True`."
)

_ELECTRA_USAGE = (
    "ELECTRA (replaced token detection): this folder is the discriminator (`ElectraForPreTraining`; fine-tune it\n"
    "with `ElectraForSequenceClassification`, `ElectraForQuestionAnswering`, ...), `generator/` the generator\n"
    "(`ElectraForMaskedLM`, for `pipeline(\"fill-mask\")`)."
)


def _setup_logging(training_args: PretrainingArguments) -> None:
    logging.basicConfig(
        format="%(asctime)s - %(levelname)s - %(name)s - %(message)s", datefmt="%H:%M:%S", level=logging.INFO
    )
    level = training_args.get_process_log_level()
    logger.setLevel(level)
    datasets.utils.logging.set_verbosity(level)
    transformers.utils.logging.set_verbosity(level)
