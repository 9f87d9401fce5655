"""Where pretraining text comes from, and the tokenizer it is read with. Three modes:
- in memory (default): documents and blocks are `datasets` datasets, cached by fingerprint;
- prepared (`--prepared_data_dir`): blocks made once into sharded Arrow files, memory-mapped, reused later
  (`data.prepared`);
- streaming (`--streaming`): blocks made on the fly, split between processes and workers (`data.streaming`).

`load_pretraining_data` returns the tokenizer, the model config (built by the caller's `build_config` as soon as
the tokenizer exists, so that a bad setting stops the run before any block is made) and the masking datasets.

The data stage sits below the runs: what it reads of the run's flags it names here (`TokenizerArguments`,
`CorpusArguments`, `TrainingArguments`), which run_pretraining.py's argument dataclasses have, and the config
builder is handed down by the caller, so that nothing here imports the runs or pretraining.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import datasets
from torch.utils.data import Dataset
from transformers import AutoTokenizer, PretrainedConfig, PreTrainedTokenizerBase, TrainingArguments

from ..errors import UserInputError
from ..hub import ModelSource, hub_kwargs
from ..objectives.base import ResolvedRecipe
from . import prepared
from .arguments import CorpusArguments, TokenizerArguments
from .corpus import DOCUMENTS_PER_BATCH, CorpusSource, iter_documents, load_documents
from .formats import PAIR_FORMATS, block_builder, prepare_blocks, tokenize_documents
from .masking_schedule import DynamicMaskingDataset, StaticMaskingDataset
from .masking_units import (
    PMI_MIN_COUNT,
    PMI_VOCABULARY_SIZE,
    SPACY_SCHEMES,
    MaskingUnits,
    PmiUnits,
    SpacyUnits,
    check_unit_settings,
    save_units,
    units_name,
)
from .segmenters import TokenMarker, WordSegmenter, check_segmenter_settings
from .streaming import StreamingBlocks
from .tokenizer import train_byte_level_bpe, train_sentencepiece_unigram

logger = logging.getLogger(__name__)

# The tokenizer trained on the corpus when none is given (recipes.TOKENIZERS).
TOKENIZER_TRAINERS = {"byte-level-bpe": train_byte_level_bpe, "unigram": train_sentencepiece_unigram}

BuildConfig = Callable[[PreTrainedTokenizerBase], PretrainedConfig]


@dataclass
class PretrainingData:
    """What the data stage hands to training."""

    tokenizer: PreTrainedTokenizerBase
    config: PretrainedConfig
    train: Dataset | StreamingBlocks
    eval: Dataset | None


@dataclass
class _Run:
    """The arguments every mode reads."""

    model_args: TokenizerArguments
    data_args: CorpusArguments
    training_args: TrainingArguments
    recipe: ResolvedRecipe
    build_config: BuildConfig

    @property
    def pair_objective(self) -> str:
        """The pair label of pair formats (check_recipe makes sure they have a sentence objective)."""
        return self.recipe.sentence_objective if self.recipe.sentence_objective != "none" else "nsp"

    def masking_units(
        self, tokenizer: PreTrainedTokenizerBase, training_documents: datasets.Dataset | None
    ) -> TokenMarker | None:
        """The units of named-entity, noun-phrase and PMI masking (None for other schemes), found once for the
        training and evaluation blocks; PMI ranks the n-grams of `training_documents` (None when streaming). With
        --word_segmenter, the segmenter that marks word starts instead."""
        data_args = self.data_args
        if data_args.word_segmenter:
            check_segmenter_settings(data_args.word_segmenter, self.recipe.masking)
            return WordSegmenter(tokenizer, data_args.word_segmenter)
        return build_masking_units(
            self.recipe.masking,
            tokenizer,
            training_documents,
            data_args.spacy_model,
            data_args.pmi_vocabulary_size,
            data_args.pmi_min_count,
            data_args.preprocessing_num_workers,
        )

    def blocks_of(
        self, documents: datasets.Dataset, tokenizer: PreTrainedTokenizerBase, units: TokenMarker | None
    ) -> datasets.Dataset:
        return prepare_blocks(
            documents,
            tokenizer,
            input_format=self.recipe.input_format,
            max_seq_length=self.data_args.max_seq_length,
            pair_objective=self.pair_objective,
            seed=self.training_args.seed,
            num_proc=self.data_args.preprocessing_num_workers,
            documents_per_group=self.data_args.documents_per_group,
            pack_documents=self.data_args.pack_documents,
            units=units,
        )


def load_pretraining_data(
    model_args: TokenizerArguments,
    data_args: CorpusArguments,
    training_args: TrainingArguments,
    recipe: ResolvedRecipe,
    build_config: BuildConfig,
) -> PretrainingData:
    """Tokenizer, model config and masking datasets, in the mode the arguments ask for."""
    run = _Run(model_args, data_args, training_args, recipe, build_config)
    if data_args.streaming:
        tokenizer, config, train, eval_blocks = _streaming_data(run)
    elif data_args.prepared_data_dir and prepared.is_prepared(data_args.prepared_data_dir):
        tokenizer, config, train, eval_blocks = _reused_prepared_data(run)
    else:
        tokenizer, config, train, eval_blocks = _built_data(run)

    if not isinstance(train, StreamingBlocks):
        if data_args.max_train_samples is not None:
            train = train.select(range(min(data_args.max_train_samples, len(train))))
        logger.info("%d training blocks of up to %d tokens", len(train), data_args.max_seq_length)
        train = (
            StaticMaskingDataset(train, dupe_factor=data_args.dupe_factor)
            if recipe.static_masking
            else DynamicMaskingDataset(train)
        )
    if eval_blocks is not None and data_args.max_eval_samples is not None:
        eval_blocks = eval_blocks.select(range(min(data_args.max_eval_samples, len(eval_blocks))))
    # Evaluation masks are fixed (epoch 0), so that evaluations along a run are comparable.
    eval_dataset = DynamicMaskingDataset(eval_blocks) if eval_blocks is not None else None
    return PretrainingData(tokenizer=tokenizer, config=config, train=train, eval=eval_dataset)


def load_tokenizer(model_args: ModelSource) -> PreTrainedTokenizerBase | None:
    """The tokenizer named by --tokenizer_name or --model_name_or_path, or None when neither is given."""
    name = model_args.tokenizer_name or model_args.model_name_or_path
    if not name:
        return None
    tokenizer = AutoTokenizer.from_pretrained(
        name, trust_remote_code=model_args.trust_remote_code, **hub_kwargs(model_args)
    )
    if tokenizer.mask_token is None:
        raise UserInputError(
            f"The tokenizer {name} has no mask token, so it cannot be used for masked-LM pretraining. Give a "
            "tokenizer with one (RoBERTa's is <mask>), or none to train a byte-level BPE on the corpus."
        )
    return tokenizer


def load_or_train_tokenizer(
    model_args: TokenizerArguments, documents: datasets.Dataset, kind: str = "byte-level-bpe"
) -> PreTrainedTokenizerBase:
    """The given tokenizer, or one of `kind` (recipes.TOKENIZERS) trained on `documents`."""
    tokenizer = load_tokenizer(model_args)
    if tokenizer is None:
        logger.info("Training a %s tokenizer of %d ids on the training text.", kind, model_args.tokenizer_vocab_size)
        tokenizer = TOKENIZER_TRAINERS[kind](_texts(documents), vocab_size=model_args.tokenizer_vocab_size)
    return tokenizer


def _texts(documents: datasets.Dataset) -> Iterator[str]:
    # Batch by batch from the memory-mapped table, so that the whole corpus is never held as Python strings.
    for batch in documents.iter(batch_size=DOCUMENTS_PER_BATCH):
        yield from batch["text"]


def _built_data(run: _Run) -> tuple:
    """In-memory mode (blocks cached by `datasets`), or the first run of the prepared mode (blocks saved)."""
    data_args = run.data_args
    prepared_dir = data_args.prepared_data_dir
    if prepared_dir and not (data_args.train_file or data_args.dataset_name):
        raise UserInputError(
            f"--prepared_data_dir {prepared_dir} holds no prepared data yet: give --train_file or --dataset_name "
            "to prepare it from."
        )
    with prepared.preparing(prepared_dir) if prepared_dir else contextlib.nullcontext() as staging:
        cache_dir = str(staging / prepared.INTERMEDIATE_CACHE) if staging else run.model_args.cache_dir
        documents, eval_documents = _document_splits(data_args, run.training_args.seed, cache_dir)
        tokenizer = load_or_train_tokenizer(run.model_args, documents, run.recipe.tokenizer)
        config = run.build_config(tokenizer)
        units = run.masking_units(tokenizer, documents)
        splits = {"train": run.blocks_of(documents, tokenizer, units)}
        if eval_documents is not None:
            splits["validation"] = run.blocks_of(eval_documents, tokenizer, units)
        if not staging:
            return tokenizer, config, splits["train"], splits.get("validation")
        prepared.save_prepared(staging, splits, tokenizer, _prepared_settings(run, tokenizer))
        save_units(units, staging)
    # Train from the memory-mapped shards, exactly as a later run reusing the folder will.
    blocks = datasets.load_from_disk(str(Path(prepared_dir) / "blocks"))
    return tokenizer, config, blocks["train"], blocks.get("validation")


def _reused_prepared_data(run: _Run) -> tuple:
    requested = _prepared_settings(run, load_tokenizer(run.model_args))
    blocks, tokenizer = prepared.load_prepared(run.data_args.prepared_data_dir, requested)
    return tokenizer, run.build_config(tokenizer), blocks["train"], blocks.get("validation")


def _document_splits(
    data_args: CorpusArguments, seed: int, cache_dir: str | None
) -> tuple[datasets.Dataset, datasets.Dataset | None]:
    """Training documents and evaluation documents (--validation_file, or a held-out share, or none)."""
    documents = load_documents(_training_source(data_args), cache_dir=cache_dir)
    if data_args.validation_file:
        return documents, _validation_documents(data_args, cache_dir)
    if data_args.validation_split_percentage > 0 and len(documents) > 1:
        split = documents.train_test_split(
            test_size=data_args.validation_split_percentage / 100, seed=seed, shuffle=True
        )
        return split["train"], split["test"]
    return documents, None


def _training_source(data_args: CorpusArguments) -> CorpusSource:
    """The training corpus the flags name: --train_file (comma-separated files) or --dataset_name."""
    return CorpusSource(
        train_files=data_args.train_file.split(",") if data_args.train_file else None,
        dataset_name=data_args.dataset_name,
        dataset_config_name=data_args.dataset_config_name,
        text_column_name=data_args.text_column_name,
    )


def _validation_documents(data_args: CorpusArguments, cache_dir: str | None) -> datasets.Dataset:
    source = CorpusSource(train_files=data_args.validation_file.split(","), text_column_name=data_args.text_column_name)
    return load_documents(source, cache_dir=cache_dir)


def _prepared_settings(run: _Run, tokenizer: PreTrainedTokenizerBase | None) -> dict:
    """What the prepared blocks depend on, recorded in the folder's manifest and compared on reuse."""
    data_args, recipe = run.data_args, run.recipe
    return prepared.prepared_settings(
        train_files=data_args.train_file.split(",") if data_args.train_file else None,
        dataset=(
            f"{data_args.dataset_name}/{data_args.dataset_config_name}:{data_args.text_column_name}"
            if data_args.dataset_name
            else None
        ),
        validation=(
            data_args.validation_file.split(",") if data_args.validation_file else data_args.validation_split_percentage
        ),
        tokenizer=tokenizer,
        input_format=recipe.input_format,
        max_seq_length=data_args.max_seq_length,
        pair_objective=run.pair_objective if recipe.input_format in PAIR_FORMATS else None,
        documents_per_group=data_args.documents_per_group,
        pack_documents=data_args.pack_documents if recipe.input_format == "doc-sentences" else None,
        seed=run.training_args.seed,
        masking_units=(
            f"segmenter:{data_args.word_segmenter}"
            if data_args.word_segmenter
            else units_name(
                recipe.masking, data_args.spacy_model, data_args.pmi_vocabulary_size, data_args.pmi_min_count
            )
        ),
    )


def _streaming_data(run: _Run) -> tuple:
    data_args, training_args = run.data_args, run.training_args
    if training_args.max_steps <= 0:
        raise UserInputError("--streaming needs --max_steps: a stream has no length to count epochs in.")
    if data_args.max_train_samples is not None:
        raise UserInputError("--max_train_samples does not apply to --streaming; use --max_steps.")
    tokenizer = load_tokenizer(run.model_args)
    if tokenizer is None:
        raise UserInputError(
            "--streaming needs --tokenizer_name (or --model_name_or_path): training a tokenizer takes a pass over "
            "the corpus. Train one on a sample (spanroberta.data.tokenizer.train_byte_level_bpe) or use "
            "--prepared_data_dir, which trains one."
        )
    config = run.build_config(tokenizer)
    units = run.masking_units(tokenizer, None)
    eval_blocks = None
    if data_args.validation_file:
        eval_blocks = run.blocks_of(_validation_documents(data_args, run.model_args.cache_dir), tokenizer, units)
    else:
        logger.info("Streaming mode evaluates only on --validation_file; none was given.")
    return tokenizer, config, _streaming_blocks(run, tokenizer, units), eval_blocks


def _streaming_blocks(run: _Run, tokenizer: PreTrainedTokenizerBase, units: TokenMarker | None) -> StreamingBlocks:
    data_args, training_args = run.data_args, run.training_args
    read_documents = functools.partial(iter_documents, _training_source(data_args))
    builder = block_builder(
        tokenizer,
        run.recipe.input_format,
        data_args.max_seq_length,
        run.pair_objective,
        training_args.seed,
        data_args.pack_documents,
        units,
    )
    return StreamingBlocks(
        read_documents,
        tokenizer,
        builder,
        documents_per_group=data_args.documents_per_group,
        shuffle_buffer_size=data_args.shuffle_buffer_size,
        seed=training_args.seed,
        static_masking_copies=data_args.dupe_factor if run.recipe.static_masking else None,
        process_index=training_args.process_index,
        num_processes=training_args.world_size,
    )


def build_masking_units(
    masking: str,
    tokenizer: PreTrainedTokenizerBase,
    training_documents: datasets.Dataset | None,
    spacy_model: str | None = None,
    pmi_vocabulary_size: int = PMI_VOCABULARY_SIZE,
    pmi_min_count: int = PMI_MIN_COUNT,
    num_proc: int | None = None,
) -> MaskingUnits | None:
    """The units of `masking` (None for schemes without units): a spaCy pipeline's, or the PMI vocabulary of the
    training documents (a `text` column; None when streaming), which it tokenizes (the `datasets` cache keeps
    the result)."""
    check_unit_settings(masking, spacy_model, streaming=training_documents is None)
    if masking in SPACY_SCHEMES:
        return SpacyUnits(tokenizer, masking, spacy_model)
    if masking != "pmi":
        return None
    tokenized = tokenize_documents(training_documents, tokenizer, num_proc=num_proc)
    batches = tokenized.iter(batch_size=DOCUMENTS_PER_BATCH)
    documents = (document for batch in batches for document in batch["sentence_ids"])
    sentences = (sentence for document in documents for sentence in document)
    return PmiUnits.from_corpus(sentences, tokenizer, pmi_vocabulary_size, pmi_min_count)
