#!/usr/bin/env python
"""Collator throughput on batches of 128 x 512-token blocks of real text, in sequences/s.

spanroberta's `DataCollatorForSpanMasking` (span masking + SBO targets in prediction slots, as run_pretraining.py
uses it) against transformers' `DataCollatorForLanguageModeling`, with token masking and with
`whole_word_mask=True`. spanroberta's own word and token masking (dense labels, the default) are timed too, for
reference. Collators are timed alternately in one process.

The blocks are the Reuters bodies tokenized as one stream and cut into 512-token windows with the fast
tokenizer's offsets and special-token masks, which is what transformers' collators read (whole-word masking
finds words from the offsets; without a special_tokens_mask, token masking calls the tokenizer per row).
Every collator gets the same rows as lists of ints, as a `datasets` dataset yields them.

    python -m benchmarks.speed.collator
    python -m benchmarks.speed.collator --batches 20 --threads 1

Writes a raw record to benchmarks/results/collator/ (every batch's seconds per collator, medians, the span+SBO
collator's ratios to transformers', the load average before and after).
"""

from __future__ import annotations

import argparse
import warnings

import torch
from transformers import DataCollatorForLanguageModeling

from benchmarks.speed.common import (REUTERS, announce, load_tokenizer, parse_with_threads, require_corpus,
                                     time_alternately)
from spanroberta.data.collator import DataCollatorForSpanMasking
from spanroberta.records import start_run, write_record

BATCH_SIZE, LENGTH = 128, 512
HEADLINE = ("spanroberta span+SBO", "transformers token", "transformers whole-word")


def load_windows(tokenizer, count: int) -> list[dict[str, list]]:
    """`count` 512-token windows of the corpus with input_ids, offset_mapping and special_tokens_mask."""
    require_corpus()
    text = REUTERS.read_text(encoding="utf-8")
    # About 2,000 characters make 512 tokens; a margin gives windows to sample from.
    encoding = tokenizer(text[: count * 2500], max_length=LENGTH, truncation=True, return_overflowing_tokens=True,
                         return_offsets_mapping=True, return_special_tokens_mask=True)  # fmt: skip
    fields = ("input_ids", "offset_mapping", "special_tokens_mask")
    windows = [{name: encoding[name][i] for name in fields} for i in range(len(encoding["input_ids"]))
               if len(encoding["input_ids"][i]) == LENGTH]  # fmt: skip
    if len(windows) < count:
        raise SystemExit(f"Only {len(windows)} full windows of {LENGTH} tokens in {REUTERS}; asked for {count}.")
    return windows[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=10, help="Timed batches per collator.")
    parser.add_argument("--warmup", type=int, default=2)
    args = parse_with_threads(parser)
    started = start_run()

    tokenizer = load_tokenizer()
    windows = load_windows(tokenizer, BATCH_SIZE * 4)
    batches = [windows[i : i + BATCH_SIZE] for i in range(0, len(windows), BATCH_SIZE)]
    ids_only = [[{"input_ids": w["input_ids"]} for w in batch] for batch in batches]
    with_special = [[{"input_ids": w["input_ids"], "special_tokens_mask": w["special_tokens_mask"]} for w in batch]
                    for batch in batches]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # whole-word masking announces that it sets mask_replace_prob to 1
        whole_word = DataCollatorForLanguageModeling(tokenizer, whole_word_mask=True)
    collators = {
        "spanroberta span+SBO": (DataCollatorForSpanMasking(tokenizer, label_layout="slots"), ids_only),
        "transformers token": (DataCollatorForLanguageModeling(tokenizer), with_special),
        "transformers whole-word": (whole_word, batches),
        "spanroberta word": (DataCollatorForSpanMasking(tokenizer, masking="word", return_sbo_targets=False), ids_only),
        "spanroberta token": (DataCollatorForSpanMasking(tokenizer, masking="token", return_sbo_targets=False),
                              ids_only),
    }  # fmt: skip
    timings = time_alternately({name: (lambda i, c=c, b=b: c(b[i % len(b)])) for name, (c, b) in collators.items()},
                               repeats=args.batches, warmup=args.warmup)  # fmt: skip

    results: dict = {"collators": {}}
    for name, t in timings.items():
        results["collators"][name] = {**t.as_record(), "sequences_per_second_median": BATCH_SIZE / t.median,
                                      "sequences_per_second_best": BATCH_SIZE / t.best}  # fmt: skip
    span = timings[HEADLINE[0]]
    results["span_sbo_ratios"] = {other: {"median": timings[other].median / span.median,
                                          "best": timings[other].best / span.best} for other in HEADLINE[1:]}
    print(f"\n## Collators, batches of {BATCH_SIZE} x {LENGTH}: {args.batches} timed batches each\n")
    print("| collator | sequences/s (median) | sequences/s (best) | ms/batch (median) |")
    print("|---|---|---|---|")
    for name, t in timings.items():
        print(f"| {name} | {BATCH_SIZE / t.median:,.0f} | {BATCH_SIZE / t.best:,.0f} | {1000 * t.median:.1f} |")
    for other, ratio in results["span_sbo_ratios"].items():
        print(f"span+SBO / {other}: {ratio['median']:.2f}x (medians), {ratio['best']:.2f}x (minimums)")
    settings = {"batch_size": BATCH_SIZE, "length": LENGTH, "batches": args.batches, "warmup": args.warmup,
                "threads": torch.get_num_threads()}  # fmt: skip
    announce(write_record("collator", settings, results, started=started))


if __name__ == "__main__":
    main()
