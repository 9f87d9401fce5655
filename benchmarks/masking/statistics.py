#!/usr/bin/env python
"""Span masking's statistics per language: the share of tokens masked and the span length in words, against
SpanBERT's (section 3.1: 15% of the tokens, spans of Geo(0.2) words truncated to 10, mean 3.8).

Corpora: English (the first documents of the bundled demo corpus), Chinese, Japanese, and mixed-script text
(Japanese and Chinese with English terms, then lines of the other three in turn), the samples of
tests/fixtures/languages (see its README). One byte-level BPE is trained on all four, as a new user would train
one, and each corpus is cut into full-sentences blocks of 512 tokens, as SpanBERT's (a row's last span is
shortened word by word to fit its budget and a word is never split, so short blocks mask a little under 15%).
Each block is masked `--epochs` times (dynamic masking: a fresh mask per epoch, keyed by (seed, epoch, index) as
the collator keys it) with the word starts the collator uses (`word_starts.vocabulary_word_starts`: the
vocabulary's markers, each CJK character a word of its own); for comparison, with the "Ġ" marker alone; and,
where the segmenters are installed (`pip install -e ".[segmenters]"`), with jieba's words on the Chinese and mixed
corpora (`--word_segmenter jieba`) and MeCab's (fugashi, unidic-lite's dictionary) on the Japanese and mixed ones
(`--word_segmenter fugashi`), whose preparation cost (tokens per second, with and without each) is timed too.

    python -m benchmarks.masking.statistics
    python -m benchmarks.masking.statistics --epochs 200 --max_seq_length 128

Writes a raw record to benchmarks/results/masking/ (per corpus and word rule: tokens, blocks, word starts per 128
tokens, masked share, mean span length in words and the histogram of span lengths, mean masked run in tokens; per
corpus, the preparation's tokens per second).
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from importlib import metadata
from pathlib import Path

import datasets
import torch

from spanroberta.data.demo_corpus import DEMO_CORPUS_FILE
from spanroberta.data.formats import prepare_blocks
from spanroberta.data.masking import (row_keys, span_length_probabilities, span_mask, special_token_table,
                                      word_start_table, word_starts_at)
from spanroberta.data.segmenters import SEGMENTER_PACKAGES, WordSegmenter
from spanroberta.data.tokenizer import train_byte_level_bpe
from spanroberta.data.word_starts import BPE_MARKER, WORD_STARTS_COLUMN
from spanroberta.models.modeling_span_heads import run_starts
from spanroberta.records import ROOT, start_run, write_record

LANGUAGES = ROOT / "tests" / "fixtures" / "languages"
ENGLISH_CHARACTERS = 12_000  # about as many tokens as the Chinese sample has
# The corpora each segmenter cuts: jieba the Chinese, fugashi the Japanese, and both the mixed one, which holds both
# languages (mostly Japanese), each segmenter cutting the other's language as it can: jieba gives each kana a word of
# its own, MeCab cuts simplified Chinese with a Japanese dictionary.
SEGMENTED = {"jieba": ("Chinese", "mixed"), "fugashi": ("Japanese", "mixed")}
TIMING_COPIES = 40
TARGETS = {"masked_share": (0.15, 0.005), "mean_span_words": (3.8, 0.2)}


def corpora() -> dict[str, str]:
    """Each corpus's text: one sentence (or paragraph) a line, documents separated by blank lines."""
    english = DEMO_CORPUS_FILE.read_text(encoding="utf-8")[:ENGLISH_CHARACTERS].rsplit("\n\n", 1)[0]
    chinese, japanese, mixed = (LANGUAGES.joinpath(f"{code}.txt").read_text(encoding="utf-8")
                                for code in ("zh", "ja", "mixed"))  # fmt: skip
    # The mixed sample is short: the Chinese, Japanese and English lines follow it in turn, so that the corpus mixes
    # scripts within blocks as well as within sentences.
    in_turn = zip(chinese.splitlines(), japanese.splitlines(), english.splitlines())
    mixed = mixed + "\n".join(line for lines in in_turn for line in lines if line.strip())
    return {"English": english, "Chinese": chinese, "Japanese": japanese, "mixed": mixed}


def blocks_of(text: str, tokenizer, max_seq_length: int, segmenter: WordSegmenter | None = None) -> dict:
    """The text's full-sentences blocks, the last one padded: `input_ids` (long [blocks, max_seq_length]) and the
    segmenter's `word_starts` (bool, the same shape) when one is given."""
    blocks = prepare_blocks(_documents(text), tokenizer, "full-sentences", max_seq_length, seed=0, units=segmenter)
    padding = tokenizer.pad_token_id

    def padded(column: str, value: int) -> torch.Tensor:
        return torch.tensor([row + [value] * (max_seq_length - len(row)) for row in blocks[column]], dtype=torch.long)

    found = {"input_ids": padded("input_ids", padding)}
    if segmenter is not None:
        found["word_starts"] = padded(WORD_STARTS_COLUMN, 0).bool()
    return found


def preparation_speed(text: str, tokenizer, max_seq_length: int, segmenter: WordSegmenter | None) -> float:
    """Tokens per second of the preparation (tokenizing, segmenting, cutting into blocks) of the text copied
    `TIMING_COPIES` times (the samples alone take milliseconds, which fixed costs would decide): the best of two."""
    documents = _documents("\n\n".join([text] * TIMING_COPIES))
    times, tokens = [], 0
    for _ in range(2):
        begun = time.perf_counter()
        blocks = prepare_blocks(documents, tokenizer, "full-sentences", max_seq_length, seed=0, units=segmenter)
        times.append(time.perf_counter() - begun)
        tokens = sum(map(len, blocks["input_ids"]))
    return tokens / min(times)


def _documents(text: str) -> datasets.Dataset:
    return datasets.Dataset.from_dict({"text": [d for d in text.split("\n\n") if d.strip()]})


def statistics(input_ids: torch.Tensor, starts_word: torch.Tensor, special: torch.Tensor, epochs: int) -> dict:
    """The masking statistics of `epochs` masks of each block, words starting where `starts_word` [blocks, L]
    says (and after special tokens)."""
    blocks, length = input_ids.shape
    rows = input_ids.repeat(epochs, 1)
    maskable = ~special[rows]
    starts = word_starts_at(starts_word.repeat(epochs, 1), maskable)
    keys = row_keys(0, torch.arange(epochs).repeat_interleave(blocks), torch.arange(blocks).repeat(epochs))
    result = span_mask(starts, maskable, keys)
    masked = result.masked
    runs = masked & (run_starts(masked) == torch.arange(length))
    histogram = torch.bincount(result.span_lengths, minlength=11)[1:11].double()
    return {
        "tokens": int(maskable[:blocks].sum()),
        "blocks": blocks,
        "word_starts_per_128_tokens": 128 * float(starts[:blocks].sum()) / float(maskable[:blocks].sum()),
        "masked_share": float(masked.sum()) / float(maskable.sum()),
        "mean_span_words": float(result.span_lengths.double().mean()),
        "span_words_histogram": (histogram / histogram.sum()).tolist(),
        "mean_masked_run_tokens": float(masked.sum()) / max(float(runs.sum()), 1.0),
    }


def installed_version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def within_targets(found: dict) -> bool:
    return all(abs(found[name] - target) <= tolerance for name, (target, tolerance) in TARGETS.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=1000)
    parser.add_argument("--max_seq_length", type=int, default=512)
    parser.add_argument("--vocab_size", type=int, default=2000)
    args = parser.parse_args()
    started = start_run()
    texts = corpora()
    tokenizer = train_byte_level_bpe(texts.values(), vocab_size=args.vocab_size, show_progress=False)
    special = special_token_table(tokenizer)
    tables = {
        "markers and CJK characters": word_start_table(tokenizer),
        "Ġ marker alone": torch.tensor([token.startswith(BPE_MARKER) for token in
                                        tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))]) & ~special,
    }  # fmt: skip
    segmenters = {}
    for name, packages in SEGMENTER_PACKAGES.items():
        if all(importlib.util.find_spec(package) for package in packages):
            segmenters[name] = WordSegmenter(tokenizer, name)  # MeCab's dictionary is loaded here
    if "jieba" in segmenters:
        import jieba

        jieba.initialize()  # its dictionary, loaded before any preparation is timed
    results: dict = {"paper_span_words_histogram": span_length_probabilities(0.2, 10).tolist(), "corpora": {}}
    print("| corpus | words | tokens | word starts / 128 tokens | masked | mean span (words) | mean run (tokens) |")
    print("|---|---|---|---|---|---|---|")
    for name, text in texts.items():
        blocks = blocks_of(text, tokenizer, args.max_seq_length)
        input_ids = blocks["input_ids"]
        rules = {rule: table[input_ids] for rule, table in tables.items()}
        preparation = {"without segmenter": preparation_speed(text, tokenizer, args.max_seq_length, None)}
        for segmenter_name, segmenter in segmenters.items():
            if name in SEGMENTED[segmenter_name]:
                rule = f"{segmenter_name} words (--word_segmenter {segmenter_name})"
                rules[rule] = blocks_of(text, tokenizer, args.max_seq_length, segmenter)["word_starts"]
                preparation[f"with {segmenter_name}"] = preparation_speed(text, tokenizer, args.max_seq_length,
                                                                          segmenter)  # fmt: skip
        results["corpora"][name] = {"preparation_tokens_per_second": preparation}
        for rule, starts_word in rules.items():
            found = statistics(input_ids, starts_word, special, args.epochs)
            found["within_targets"] = within_targets(found)
            results["corpora"][name][rule] = found
            print(f"| {name} | {rule} | {found['tokens']} | {found['word_starts_per_128_tokens']:.1f} | "
                  f"{100 * found['masked_share']:.2f}% | {found['mean_span_words']:.2f} | "
                  f"{found['mean_masked_run_tokens']:.2f} |")  # fmt: skip
        print(f"| {name} | preparation, tokens/s: " + ", ".join(f"{k} {v:,.0f}" for k, v in preparation.items()))
    settings = {**vars(args), "input_format": "full-sentences", "seed": 0, "geometric_p": 0.2,
                "max_span_length": 10, "mlm_probability": 0.15, "english_characters": ENGLISH_CHARACTERS,
                "targets": TARGETS, "jieba": installed_version("jieba"),
                "fugashi": installed_version("fugashi"), "unidic_lite": installed_version("unidic-lite"),
                "timing_copies": TIMING_COPIES}  # fmt: skip
    path = write_record("masking", settings, results, started=started)
    print(f"\nRecord: {path.relative_to(ROOT) if Path(path).is_relative_to(ROOT) else path}")


if __name__ == "__main__":
    main()
