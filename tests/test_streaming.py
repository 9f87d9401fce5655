"""Corpora larger than memory: streaming mode (every block once per epoch across processes and workers) and
prepared mode (made once on disk, memory-mapped, reused)."""

import functools
import logging
import shutil
from collections import Counter

import pytest
import run_pretraining
import torch
from conftest import TINY_TEXT
from safetensors.torch import load_file
from torch.utils.data import DataLoader

from spanroberta.data.corpus import CorpusSource, iter_documents, load_documents
from spanroberta.data.formats import block_builder, prepare_blocks
from spanroberta.data.prepared import preparing
from spanroberta.data.streaming import StreamingBlocks
from spanroberta.errors import UserInputError
from spanroberta.pretraining.arguments import (
    PretrainingArguments,
    PretrainingDataArguments,
    PretrainingModelArguments,
)
from spanroberta.runs.cli import parse_arguments
from spanroberta.pretraining.run import run_pretraining as pretraining_run
from spanroberta.pretraining.specification import specify_run

DOCUMENTS_PER_GROUP = 4
TINY_MODEL = ["--model_size", "tiny", "--config_overrides",
              "num_hidden_layers=1,hidden_size=32,num_attention_heads=2,intermediate_size=64"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """40 documents of 1 to 5 sentences: 10 groups of 4 documents."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    documents = ["\n".join(TINY_TEXT[i : i + 1 + i % 5]) for i in range(40)]
    path.write_text("\n\n".join(documents) + "\n")
    return path


def as_list(rows):
    return rows


def streamed(corpus, tokenizer, process_index, num_processes, num_workers, rows):
    """The first `rows` rows that one process (of `num_processes`) streams with `num_workers` workers."""
    dataset = StreamingBlocks(
        functools.partial(iter_documents, CorpusSource([str(corpus)])),
        tokenizer,
        block_builder(tokenizer, "full-sentences", 32),
        documents_per_group=DOCUMENTS_PER_GROUP,
        shuffle_buffer_size=8,
        process_index=process_index,
        num_processes=num_processes,
    )
    loader = DataLoader(dataset, batch_size=1, num_workers=num_workers, collate_fn=as_list)
    return [row for _, (row,) in zip(range(rows), loader)]


def parse(args):
    """The run's specification as run_pretraining.main() makes it (to call run_pretraining() and get the trainer)."""
    parsed, given = parse_arguments((PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments), args)
    return specify_run(parsed, given)


def test_every_streamed_block_is_seen_once_per_epoch_across_processes_and_workers(corpus, tiny_tokenizer, tmp_path):
    expected = prepare_blocks(
        load_documents(CorpusSource([str(corpus)]), cache_dir=str(tmp_path)), tiny_tokenizer, "full-sentences", 32,
        documents_per_group=DOCUMENTS_PER_GROUP,
    )["input_ids"]
    # 2 processes x 2 DataLoader workers = 4 readers sharing the 10 groups; enough rows for two passes each
    rows = [row for process in (0, 1) for row in streamed(corpus, tiny_tokenizer, process, 2, 2, 4 * len(expected))]
    for epoch in (0, 1):
        seen = [row for row in rows if row["mask_epoch"] == epoch]
        # the blocks of the in-memory mode, each exactly once, with distinct stable indices
        assert Counter(tuple(row["input_ids"].tolist()) for row in seen) == Counter(map(tuple, expected))
        assert len({row["example_index"] for row in seen}) == len(expected)
    first, second = ([row["example_index"] for row in rows if row["mask_epoch"] == e] for e in (0, 1))
    assert first != second  # reshuffled each epoch
    # the index of a block does not depend on how the stream is split
    single = streamed(corpus, tiny_tokenizer, 0, 1, 0, len(expected))
    by_index = {row["example_index"]: tuple(row["input_ids"].tolist()) for row in rows}
    assert all(by_index[row["example_index"]] == tuple(row["input_ids"].tolist()) for row in single)


def test_too_few_groups_for_the_readers_is_an_error(corpus, tiny_tokenizer):
    with pytest.raises(UserInputError, match="got no data"):
        streamed(corpus, tiny_tokenizer, 10, 11, 0, 1)


@pytest.mark.slow
def test_a_streamed_run_resumes_to_the_same_weights(corpus, tiny_tokenizer_dir, tmp_path):
    output_dir = tmp_path / "out"
    args = [
        "--train_file", str(corpus), "--streaming", "true", "--tokenizer_name", str(tiny_tokenizer_dir), *TINY_MODEL,
        "--documents_per_group", str(DOCUMENTS_PER_GROUP), "--max_seq_length", "32", "--shuffle_buffer_size", "5",
        "--dataloader_num_workers", "2", "--per_device_train_batch_size", "4", "--max_steps", "8",
        "--save_steps", "3", "--output_dir", str(output_dir), "--report_to", "none",
    ]
    run_pretraining.main(args)
    uninterrupted = load_file(output_dir / "model.safetensors")
    # back to the state of a run killed after checkpoint-3 (of 3, 6)
    shutil.rmtree(output_dir / "checkpoint-6")
    (output_dir / "model.safetensors").unlink()
    run_pretraining.main([*args, "--resume_from_checkpoint", "true"])
    resumed = load_file(output_dir / "model.safetensors")
    for name, expected in uninterrupted.items():
        torch.testing.assert_close(resumed[name], expected, rtol=0, atol=1e-6, msg=name)


def test_prepared_data_is_made_once_memory_mapped_and_reused(corpus, tiny_tokenizer_dir, tmp_path, caplog):
    prepared_dir = tmp_path / "prepared"
    args = ["--tokenizer_name", str(tiny_tokenizer_dir), *TINY_MODEL, "--max_seq_length", "32",
            "--prepared_data_dir", str(prepared_dir), "--per_device_train_batch_size", "4", "--max_steps", "2",
            "--report_to", "none", "--preprocessing_num_workers", "2"]
    run_pretraining.main([*args, "--train_file", str(corpus), "--prepare_only", "true"])
    assert sorted(path.name for path in prepared_dir.iterdir()) == ["blocks", "spanroberta_prepared.json", "tokenizer"]
    files = {path: path.stat().st_mtime_ns for path in prepared_dir.rglob("*") if path.is_file()}

    # a later run trains from the folder alone: the corpus is not needed, nothing is rebuilt
    corpus_copy = tmp_path / corpus.name
    corpus_copy.write_bytes(corpus.read_bytes())
    with caplog.at_level(logging.INFO, logger="spanroberta.data.prepared"):
        trainer = pretraining_run(parse([*args, "--output_dir", str(tmp_path / "out")]))
    assert "Reusing the prepared blocks" in caplog.text
    assert {path: path.stat().st_mtime_ns for path in prepared_dir.rglob("*") if path.is_file()} == files
    # memory-mapped from the folder's Arrow shards, not copied into memory or into a cache
    blocks = trainer.train_dataset.blocks
    shards = [entry["filename"] for entry in blocks.cache_files]
    assert shards and all(shard.startswith(str(prepared_dir / "blocks")) for shard in shards)
    assert trainer.state.global_step == 2

    # other settings are refused, with the differences listed
    with pytest.raises(SystemExit) as exit_info:
        run_pretraining.main([*args, "--train_file", str(corpus_copy), "--max_seq_length", "64", "--output_dir", "x"])
    assert "max_seq_length: prepared with 32, this run asks for 64" in exit_info.value.code


def test_an_interrupted_preparation_leaves_no_prepared_folder(tmp_path):
    target = tmp_path / "prepared"
    with pytest.raises(RuntimeError), preparing(target) as staging:
        (staging / "blocks").mkdir()
        raise RuntimeError("killed")
    assert not target.exists() and not list(tmp_path.iterdir())

