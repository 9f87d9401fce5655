#!/usr/bin/env python
"""Span masking's statistics per language: the share of tokens masked and the span length in words, against
SpanBERT's (section 3.1: 15% of the tokens, spans of Geo(0.2) words truncated to 10, mean 3.8).

Corpora: English (the first documents of the bundled demo corpus), Chinese, Japanese, and mixed-script text
(Japanese and Chinese with English terms, then lines of the other three in turn), the samples of
tests/fixtures/languages (see its README). Blocks are 512 tokens, as SpanBERT's: a row's last span is shortened
word by word to fit its budget and a word is never split, so short blocks mask a little under 15%. One byte-level
BPE is trained on all four, as a new user would train one, and each corpus is cut into full-sentences blocks.
Each block is masked `--epochs` times (dynamic masking: a fresh mask per epoch, keyed by (seed, epoch, index) as
the collator keys it), with the word starts the collator uses (`word_starts.vocabulary_word_starts`: the
vocabulary's markers, each CJK character a word of its own) and, for comparison, with the "Ġ" marker alone.

    python -m benchmarks.masking.statistics
    python -m benchmarks.masking.statistics --epochs 200 --max_seq_length 128

Writes a raw record to benchmarks/results/masking/ (per corpus and word rule: tokens, blocks, word starts per 128
tokens, masked share, mean span length in words and the histogram of span lengths, mean masked run in tokens).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import datasets
import torch

from spanroberta.data.demo_corpus import DEMO_CORPUS_FILE
from spanroberta.data.formats import prepare_blocks
from spanroberta.data.masking import (
    row_keys,
    span_length_probabilities,
    span_mask,
    special_token_table,
    word_start_table,
    word_starts,
)
from spanroberta.data.tokenizer import train_byte_level_bpe
from spanroberta.data.word_starts import BPE_MARKER
from spanroberta.models.modeling_span_heads import run_starts
from spanroberta.records import ROOT, start_run, write_record

LANGUAGES = ROOT / "tests" / "fixtures" / "languages"
ENGLISH_CHARACTERS = 12_000  # about as many tokens as the Chinese sample has
TARGETS = {"masked_share": (0.15, 0.005), "mean_span_words": (3.8, 0.2)}


def corpora() -> dict[str, str]:
    """Each corpus's text: one sentence (or paragraph) a line, documents separated by blank lines."""
    english = DEMO_CORPUS_FILE.read_text(encoding="utf-8")[:ENGLISH_CHARACTERS].rsplit("\n\n", 1)[0]
    chinese, japanese, mixed = (
        (LANGUAGES / f"{code}.txt").read_text(encoding="utf-8") for code in ("zh", "ja", "mixed")
    )
    # The mixed sample is short: the Chinese, Japanese and English lines follow it in turn, so that the corpus mixes
    # scripts within blocks as well as within sentences.
    in_turn = zip(chinese.splitlines(), japanese.splitlines(), english.splitlines())
    mixed = mixed + "\n".join(line for lines in in_turn for line in lines if line.strip())
    return {"English": english, "Chinese": chinese, "Japanese": japanese, "mixed": mixed}


def blocks_of(text: str, tokenizer, max_seq_length: int) -> torch.Tensor:
    """Long [blocks, max_seq_length]: the text's full-sentences blocks, the last one padded."""
    documents = datasets.Dataset.from_dict({"text": [d for d in text.split("\n\n") if d.strip()]})
    blocks = prepare_blocks(documents, tokenizer, "full-sentences", max_seq_length, seed=0)["input_ids"]
    padding = tokenizer.pad_token_id
    return torch.tensor([row + [padding] * (max_seq_length - len(row)) for row in blocks], dtype=torch.long)


def statistics(input_ids: torch.Tensor, table: torch.Tensor, special: torch.Tensor, epochs: int) -> dict:
    """The masking statistics of `epochs` masks of each block, words read with `table`."""
    blocks, length = input_ids.shape
    rows = input_ids.repeat(epochs, 1)
    maskable = ~special[rows]
    starts = word_starts(rows, maskable, table)
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
    results: dict = {"paper_span_words_histogram": span_length_probabilities(0.2, 10).tolist(), "corpora": {}}
    print("| corpus | word rule | tokens | word starts / 128 tokens | masked | mean span (words) | mean run (tokens) |")
    print("|---|---|---|---|---|---|---|")
    for name, text in texts.items():
        input_ids = blocks_of(text, tokenizer, args.max_seq_length)
        results["corpora"][name] = {}
        for rule, table in tables.items():
            found = statistics(input_ids, table, special, args.epochs)
            found["within_targets"] = within_targets(found)
            results["corpora"][name][rule] = found
            print(f"| {name} | {rule} | {found['tokens']} | {found['word_starts_per_128_tokens']:.1f} | "
                  f"{100 * found['masked_share']:.2f}% | {found['mean_span_words']:.2f} | "
                  f"{found['mean_masked_run_tokens']:.2f} |")  # fmt: skip
    settings = {**vars(args), "input_format": "full-sentences", "seed": 0, "geometric_p": 0.2,
                "max_span_length": 10, "mlm_probability": 0.15, "english_characters": ENGLISH_CHARACTERS,
                "targets": TARGETS}  # fmt: skip
    path = write_record("masking", settings, results, started=started)
    print(f"\nRecord: {path.relative_to(ROOT) if Path(path).is_relative_to(ROOT) else path}")


if __name__ == "__main__":
    main()
