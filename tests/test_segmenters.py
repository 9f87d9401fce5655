"""A word segmenter's words through prepared, packed and streamed blocks into the collator (`data/segmenters.py`)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import datasets
import numpy as np
import pytest
import torch
from conftest import refusal_before_data_is_read

from spanroberta.data.collator import DataCollatorForSpanMasking
from spanroberta.data.formats import block_builder, prepare_blocks, token_arrays
from spanroberta.data.segmenters import WordSegmenter, check_segmenter_settings, load_segmenter
from spanroberta.data.streaming import StreamingBlocks
from spanroberta.data.tokenizer import train_byte_level_bpe
from spanroberta.data.word_starts import WORD_STARTS_COLUMN
from spanroberta.errors import MissingPackageError, UserInputError

LANGUAGES = Path(__file__).parent / "fixtures" / "languages"


def in_pairs(text: str) -> list[str]:
    """A stand-in segmenter: words of two characters (spaces are words of their own)."""
    words = []
    for part in text.split(" "):
        words += [part[i : i + 2] for i in range(0, len(part), 2)] + [" "]
    return words[:-1]


@pytest.fixture(scope="module")
def chinese():
    text = (LANGUAGES / "zh.txt").read_text(encoding="utf-8")
    tokenizer = train_byte_level_bpe([text], vocab_size=600, show_progress=False)
    # Documents of three lines, a blank line between them.
    lines = text.splitlines()
    documents = ["\n".join(lines[i : i + 3]) for i in range(0, len(lines), 3)]
    return tokenizer, documents


def expected_starts(tokenizer, line: str, word_starts: set[int]) -> list[int]:
    """1 where a token of the line (tokenized after a space, as blocks are) is the first to begin at a word start
    (a character of " " + line)."""
    encoding = tokenizer(" " + line, add_special_tokens=False, return_offsets_mapping=True)
    seen, starts = set(), []
    for start, end in encoding["offset_mapping"]:
        starts.append(int(end > start and start in word_starts and start not in seen))  # the lone "Ġ" spans nothing
        if end > start:
            seen.add(start)
    return starts


def pair_starts(line: str) -> set[int]:
    return set(range(1, len(line) + 1, 2))


def test_marked_ids_carry_the_first_token_of_each_word(chinese):
    tokenizer, documents = chinese
    segmenter = WordSegmenter(tokenizer, "pairs", in_pairs)
    line = documents[0].splitlines()[0]
    (sentence,) = token_arrays([line], tokenizer, segmenter)[0]
    assert (sentence // segmenter.stride).tolist() == expected_starts(tokenizer, line, pair_starts(line))
    (plain,) = token_arrays([line], tokenizer)[0]
    assert np.array_equal(sentence % segmenter.stride, plain)


@pytest.mark.parametrize("input_format", ["full-sentences", "doc-sentences"])
def test_word_starts_travel_with_prepared_and_packed_blocks_into_the_collator(chinese, input_format):
    tokenizer, documents = chinese
    segmenter = WordSegmenter(tokenizer, "pairs", in_pairs)
    dataset = datasets.Dataset.from_dict({"text": documents})
    blocks = prepare_blocks(dataset, tokenizer, input_format, 64, units=segmenter)
    plain = prepare_blocks(dataset, tokenizer, input_format, 64)
    assert blocks["input_ids"] == plain["input_ids"]
    if input_format == "doc-sentences":
        assert "sequence_lengths" in blocks.column_names  # packed rows
    # The word starts of the whole corpus, in order, are those of its lines (the builder's tokens carry none).
    special = set(tokenizer.all_special_ids)
    flags = [f for row_ids, row in zip(blocks["input_ids"], blocks[WORD_STARTS_COLUMN])
             for i, f in zip(row_ids, row) if i not in special]  # fmt: skip
    lines = [line for document in documents for line in document.splitlines()]
    expected = [flag for line in lines for flag in expected_starts(tokenizer, line, pair_starts(line))]
    if input_format == "doc-sentences":  # packing reorders blocks: compare as multisets of rows' flags
        assert sorted(flags) == sorted(expected)
    else:
        assert flags == expected[: len(flags)]

    examples = [{**blocks[i], "example_index": i} for i in range(len(blocks))]
    batch = DataCollatorForSpanMasking(tokenizer, seed=0, mlm_probability=0.3)(examples)
    masked = batch["labels"] != -100
    length = masked.shape[1]
    starts = torch.tensor([row + [1] * (length - len(row)) for row in blocks[WORD_STARTS_COLUMN]], dtype=torch.bool)
    ids = torch.tensor([row + [0] * (length - len(row)) for row in blocks["input_ids"]])
    maskable = ~torch.isin(ids, torch.tensor(sorted(special)))
    # A token after a special one starts a word whatever its flag (a block may begin mid-word).
    continuation = ~starts & maskable & torch.nn.functional.pad(maskable[:, :-1], (1, 0), value=False)
    previous = torch.nn.functional.pad(masked[:, :-1], (1, 0), value=False)
    assert bool(masked.any()) and torch.equal(masked & continuation, previous & continuation)


def test_streamed_blocks_carry_the_same_word_starts(chinese):
    tokenizer, documents = chinese
    segmenter = WordSegmenter(tokenizer, "pairs", in_pairs)
    builder = block_builder(tokenizer, "full-sentences", 64, units=segmenter)
    streamed = StreamingBlocks(lambda: iter(documents), tokenizer, builder, documents_per_group=1000,
                               shuffle_buffer_size=1)  # fmt: skip
    rows = list(itertools.islice(iter(streamed), 5))
    prepared = prepare_blocks(datasets.Dataset.from_dict({"text": documents}), tokenizer, "full-sentences", 64,
                              units=segmenter)  # fmt: skip
    for row, block in zip(rows, prepared):
        assert row["input_ids"].tolist() == block["input_ids"]
        assert row[WORD_STARTS_COLUMN].tolist() == block[WORD_STARTS_COLUMN]


@pytest.mark.parametrize("name", ["jieba", "fugashi"])
def test_segmenter_names_are_checked(monkeypatch, name):
    with pytest.raises(UserInputError, match="is not one of jieba, fugashi"):
        load_segmenter("mecab")
    monkeypatch.setattr("importlib.util.find_spec", lambda package: None)
    with pytest.raises(MissingPackageError, match=rf"--word_segmenter {name} needs .*\.\[segmenters\]"):
        load_segmenter(name)


def test_fugashi_is_refused_without_its_dictionary(monkeypatch):
    import importlib.util

    pytest.importorskip("fugashi")  # else the refusal names fugashi first

    installed = importlib.util.find_spec
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None if name == "unidic_lite" else installed(name))
    with pytest.raises(MissingPackageError, match=r"the unidic_lite package.*\.\[segmenters\]"):
        load_segmenter("fugashi")


@pytest.mark.parametrize("masking", ["token", "pmi"])
def test_a_segmenter_with_a_scheme_that_does_not_read_it_is_refused(masking):
    with pytest.raises(UserInputError, match=f"--masking {masking}"):
        check_segmenter_settings("jieba", masking)


def test_jieba_words_start_where_jieba_cuts(chinese):
    jieba = pytest.importorskip("jieba")
    tokenizer, _ = chinese
    line = "我们喜欢到河边散步。"
    words = jieba.lcut(" " + line)
    segmenter = WordSegmenter(tokenizer, "jieba")
    (sentence,) = token_arrays([line], tokenizer, segmenter)[0]
    word_starts = set(itertools.accumulate((len(w) for w in words[:-1]), initial=0)) - {0}
    assert (sentence // segmenter.stride).tolist() == expected_starts(tokenizer, line, word_starts)
    assert 0 < sum((sentence // segmenter.stride).tolist()) <= len(words) - 1


def test_fugashi_words_start_where_mecab_cuts(chinese):
    pytest.importorskip("fugashi")
    pytest.importorskip("unidic_lite")
    tokenizer, _ = chinese  # a vocabulary of Chinese characters: Japanese kana fall into bytes, kanji mostly not
    line = "私の町は海に近い小さな町である。"
    words = load_segmenter("fugashi")(" " + line)
    assert "".join(words) == line and words[:4] == ["私", "の", "町", "は"]  # MeCab drops the space
    segmenter = WordSegmenter(tokenizer, "fugashi")
    (sentence,) = token_arrays([line], tokenizer, segmenter)[0]
    word_starts = set(itertools.accumulate((len(w) for w in words[:-1]), initial=1))
    assert (sentence // segmenter.stride).tolist() == expected_starts(tokenizer, line, word_starts)
    assert 0 < sum((sentence // segmenter.stride).tolist()) <= len(words)


def test_run_pretraining_refuses_a_segmenter_with_token_masking(monkeypatch, tmp_path, tiny_tokenizer_dir):
    message = refusal_before_data_is_read(
        monkeypatch, tmp_path, tiny_tokenizer_dir, ["--word_segmenter", "jieba", "--masking", "token"]
    )
    assert "--word_segmenter gives words to span, word and n-gram masking; --masking token" in message


@pytest.mark.slow
@pytest.mark.parametrize(("segmenter", "packages", "sample"), [
    ("jieba", ("jieba",), "zh.txt"), ("fugashi", ("fugashi", "unidic_lite"), "ja.txt"),
])  # fmt: skip
def test_a_prepared_corpus_segmented_by_a_segmenter_trains(tmp_path, segmenter, packages, sample):
    for package in packages:
        pytest.importorskip(package)
    import run_pretraining

    corpus = tmp_path / sample
    corpus.write_text((LANGUAGES / sample).read_text(encoding="utf-8").replace("\n", "\n\n"), encoding="utf-8")
    prepared_dir = tmp_path / "prepared"
    run_pretraining.main([
        "--train_file", str(corpus), "--word_segmenter", segmenter, "--prepared_data_dir", str(prepared_dir),
        "--output_dir", str(tmp_path / "out"), "--model_size", "tiny", "--tokenizer_vocab_size", "600",
        "--max_seq_length", "64", "--per_device_train_batch_size", "4", "--max_steps", "2", "--report_to", "none",
        "--use_cpu", "true", "--config_overrides", "num_hidden_layers=1,hidden_size=32,num_attention_heads=2,"
        "intermediate_size=64",
    ])  # fmt: skip
    manifest = json.loads((prepared_dir / "spanroberta_prepared.json").read_text())
    assert manifest["masking_units"] == f"segmenter:{segmenter}"
    blocks = datasets.load_from_disk(str(prepared_dir / "blocks"))["train"]
    assert WORD_STARTS_COLUMN in blocks.column_names and sum(map(sum, blocks[WORD_STARTS_COLUMN])) > 0
