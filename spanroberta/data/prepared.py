"""Prepared mode: a corpus tokenized and packed once into sharded Arrow files on disk, memory-mapped at training
time and reused by later runs.

A prepared folder holds:

    blocks/                   a `datasets.DatasetDict` (train, and validation when held out), `save_to_disk` shards
    tokenizer/                the tokenizer that made the blocks
    pmi_vocabulary.tsv        --masking pmi: the n-gram vocabulary the blocks' units come from (for the record)
    spanroberta_prepared.json the settings that decide the blocks (see `prepared_settings`), written last

It is written under a temporary name next to its final path and renamed when complete, so a run killed during
preparation leaves no folder that a later run would take for a prepared one (only a `.NAME.partial-PID` folder,
which can be deleted). A later run with the same folder reuses it when the settings it asks for match the
recorded ones, and stops with the list of differences otherwise; the blocks are never silently rebuilt.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from ..errors import UserInputError
from .corpus import MAX_DOCUMENT_CHARACTERS
from .groups import MAX_GROUP_CHARACTERS

logger = logging.getLogger(__name__)

MANIFEST_NAME = "spanroberta_prepared.json"
INTERMEDIATE_CACHE = "cache"
FORMAT_VERSION = 1
# Settings a later run must agree with; the others in the manifest are there for the record.
CHECKED_SETTINGS = ("train_files", "dataset", "validation", "tokenizer", "input_format", "max_seq_length",
                    "pair_objective", "documents_per_group", "pack_documents", "masking_units")


def prepared_settings(
    train_files: list[str] | None,
    dataset: str | None,
    validation: list[str] | int,
    tokenizer: PreTrainedTokenizerBase | None,
    input_format: str,
    max_seq_length: int,
    pair_objective: str | None,
    documents_per_group: int,
    seed: int,
    pack_documents: bool | None = None,
    masking_units: str | None = None,
) -> dict[str, Any]:
    """The settings that decide the prepared blocks, as recorded in (and checked against) the manifest.

    Files are recorded by name and size, so a corpus copied elsewhere still matches; `validation` is a list of
    files or the held-out percentage; a tokenizer by a hash of its vocabulary, merges and special tokens;
    `pack_documents` only for doc-sentences, the one format it changes; `masking_units` what decides the units
    of named-entity, noun-phrase and PMI masking stored with the blocks (`masking_units.units_name`). None
    means "not given by this run" and is not checked (a run may name only the prepared folder).
    """
    return {
        "format_version": FORMAT_VERSION,
        "train_files": _files_and_sizes(train_files) if train_files else None,
        "dataset": dataset,
        "validation": _files_and_sizes(validation) if isinstance(validation, list) else validation,
        "tokenizer": tokenizer_fingerprint(tokenizer) if tokenizer is not None else None,
        "input_format": input_format,
        "max_seq_length": max_seq_length,
        "pair_objective": pair_objective,
        "documents_per_group": documents_per_group,
        # How documents were cut and grouped (`corpus`, `groups`): for the record, not checked, so that a folder
        # prepared before these limits existed is still reused.
        "max_document_characters": MAX_DOCUMENT_CHARACTERS,
        "max_group_characters": MAX_GROUP_CHARACTERS,
        "pack_documents": pack_documents,
        "masking_units": masking_units,
        "seed": seed,
    }


def _files_and_sizes(files: list[str]) -> list[list[str | int]]:
    return [[Path(file).name, Path(file).stat().st_size] for file in files]


def is_prepared(path: str | os.PathLike) -> bool:
    return Path(path, MANIFEST_NAME).is_file()


def load_prepared(
    path: str | os.PathLike, requested: dict[str, Any]
) -> tuple[datasets.DatasetDict, PreTrainedTokenizerBase]:
    """The blocks (memory-mapped, not read into memory) and tokenizer of a prepared folder.

    Raises a `UserInputError` listing every checked setting of `requested` that differs from the recorded one.
    """
    path = Path(path)
    recorded = json.loads((path / MANIFEST_NAME).read_text(encoding="utf-8"))
    differences = [
        f"{key}: prepared with {recorded.get(key)!r}, this run asks for {requested[key]!r}"
        if key != "tokenizer"
        else f"this run's tokenizer is not the one in {path / 'tokenizer'}"
        for key in ("format_version",) + CHECKED_SETTINGS
        if requested.get(key) is not None and recorded.get(key) != requested[key]
    ]
    if differences:
        raise UserInputError(
            f"The prepared data in {path} was made with other settings ({'; '.join(differences)}). Give the "
            "settings it was prepared with, another --prepared_data_dir to prepare anew, or delete the folder."
        )
    logger.info("Reusing the prepared blocks in %s (seed %s).", path, recorded.get("seed"))
    blocks = datasets.load_from_disk(str(path / "blocks"))
    return blocks, AutoTokenizer.from_pretrained(path / "tokenizer")


@contextlib.contextmanager
def preparing(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary folder next to `path` to prepare in; it becomes `path` when the block ends without error
    (and is deleted when it raises). `path` must not exist or be an empty folder.

    Intermediate files (the `datasets` caches of documents and tokens) belong in its `INTERMEDIATE_CACHE`
    subfolder, which is deleted before the rename: the prepared folder holds only what training reads.
    """
    path = Path(path)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise UserInputError(
            f"--prepared_data_dir {path} exists but holds no prepared data ({MANIFEST_NAME} is missing): give a "
            "new or empty folder."
        )
    staging = path.parent / f".{path.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(staging / INTERMEDIATE_CACHE, ignore_errors=True)
    # Renaming is atomic: a reader sees either no prepared folder or a complete one.
    os.replace(staging, path)


def save_prepared(
    staging: Path,
    splits: dict[str, datasets.Dataset],
    tokenizer: PreTrainedTokenizerBase,
    settings: dict[str, Any],
) -> None:
    """Writes blocks, tokenizer and manifest (last) into the folder given by `preparing`.

    Shards hold at most 500 MB each (`save_to_disk`'s default). Saving copies Arrow record batches, which one
    process does at disk speed: worker processes would only add their start-up time.
    """
    datasets.DatasetDict(splits).save_to_disk(str(staging / "blocks"))
    tokenizer.save_pretrained(staging / "tokenizer")
    manifest = {
        **settings,
        "tokenizer": tokenizer_fingerprint(tokenizer),
        "blocks": {name: len(split) for name, split in splits.items()},
    }
    (staging / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def tokenizer_fingerprint(tokenizer: PreTrainedTokenizerBase) -> str:
    """A hash of the tokenizer's vocabulary, merges, normalisation and special tokens."""
    return hashlib.sha256(tokenizer.backend_tokenizer.to_str().encode("utf-8")).hexdigest()
