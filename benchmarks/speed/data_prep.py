#!/usr/bin/env python
"""Data preparation, tokenizing and packing the corpus, in tokens/s, and how time and peak memory
grow from 1x to 8x the corpus.

Two modes:
- prepared (what run_pretraining.py runs before training by default): `corpus.load_documents` (the text builder
  of `datasets`) then `formats.prepare_blocks` (`datasets.map`: tokenize each document's lines, then pack
  groups of documents into blocks), written to a fresh `datasets` cache folder;
- streaming: one pass of `streaming.StreamingBlocks` (documents read lazily, blocks made on the fly, shuffled
  through a buffer), iterated as a DataLoader would, without keeping the blocks.

The k-x corpus is the Reuters bodies repeated k times, written to /tmp. Each scale runs in a fresh process, so
nothing is read back from an earlier run; the peak resident set size (`ru_maxrss`, which counts the Arrow files
`datasets` memory-maps as they are touched) is that process's. Tokens are the block tokens, special tokens
included.

    python -m benchmarks.speed.data_prep   # prepared, 1x 2x 4x 8x, doc-sentences, 512
    python -m benchmarks.speed.data_prep --mode streaming
    python -m benchmarks.speed.data_prep --scales 1 2 --num-proc 2 --input-format full-sentences

Writes a raw record to benchmarks/results/data-prep/ (per scale: megabytes, blocks, tokens, seconds, tokens/s,
time over linear, peak RSS; the load average before and after).
"""

from __future__ import annotations

import argparse
import functools
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from transformers import PreTrainedTokenizerBase

from benchmarks import ROOT
from benchmarks.speed.common import REUTERS, announce, load_tokenizer, require_corpus
from spanroberta.data.corpus import CorpusSource, iter_documents, load_documents
from spanroberta.data.formats import block_builder, prepare_blocks
from spanroberta.records import start_run, write_record

SCALED_CORPORA = Path(tempfile.gettempdir()) / "spanroberta_bench_corpus"


def scaled_corpus(scale: int) -> Path:
    """The Reuters bodies repeated `scale` times (documents stay separated by blank lines)."""
    path = SCALED_CORPORA / f"reuters_x{scale}.txt"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        text = REUTERS.read_text(encoding="utf-8").rstrip("\n") + "\n\n"
        path.write_text(text * scale, encoding="utf-8")
    return path


def prepare_once(corpus: Path, tokenizer: PreTrainedTokenizerBase, input_format: str, max_seq_length: int,
                 num_proc: int | None) -> tuple[int, int]:  # fmt: skip
    """Runs the prepared path once in this process; returns (blocks, tokens)."""
    cache_dir = tempfile.mkdtemp(prefix="spanroberta_bench_cache_")
    try:
        documents = load_documents(CorpusSource(train_files=[str(corpus)]), cache_dir=cache_dir)
        blocks = prepare_blocks(documents, tokenizer, input_format, max_seq_length=max_seq_length, num_proc=num_proc)
        lengths = blocks.with_format("arrow")["input_ids"].combine_chunks().value_lengths()
        return len(blocks), int(sum(lengths.to_pylist()))
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)


def stream_once(corpus: Path, tokenizer: PreTrainedTokenizerBase, input_format: str,
                max_seq_length: int) -> tuple[int, int]:  # fmt: skip
    """Iterates one pass of the streaming dataset (it cycles forever: stops at the next pass's first block)."""
    from spanroberta.data.streaming import StreamingBlocks  # imported here: the prepared mode does not need it

    stream = StreamingBlocks(functools.partial(iter_documents, CorpusSource(train_files=[str(corpus)])), tokenizer,
                             block_builder(tokenizer, input_format, max_seq_length))  # fmt: skip
    blocks = tokens = 0
    for block in stream:
        if block["mask_epoch"] > 0:
            break
        blocks += 1
        tokens += len(block["input_ids"])
    return blocks, tokens


def run_child(args: argparse.Namespace) -> dict:
    """One mode at one scale; the clock starts once the libraries are imported and the tokenizer loaded."""
    corpus = Path(args.child)
    tokenizer = load_tokenizer()
    if args.mode == "streaming":
        import spanroberta.data.streaming  # noqa: F401  (so that importing it is not timed)
    start = time.perf_counter()
    if args.mode == "streaming":
        blocks, tokens = stream_once(corpus, tokenizer, args.input_format, args.max_seq_length)
    else:
        blocks, tokens = prepare_once(corpus, tokenizer, args.input_format, args.max_seq_length, args.num_proc)
    seconds = time.perf_counter() - start
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"megabytes": corpus.stat().st_size / 1e6, "blocks": blocks, "tokens": tokens, "total_seconds": seconds,
            "peak_rss_mib": kib / 1024}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["prepared", "streaming"], default="prepared")
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--input-format", default="doc-sentences")
    parser.add_argument("--max-seq-length", type=int, default=512)
    parser.add_argument("--num-proc", type=int, default=None, help="datasets.map processes (default: one).")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # one scale, run in its own process
    args = parser.parse_args()

    if args.child:
        print("RESULT " + json.dumps(run_child(args)))
        return

    require_corpus()
    load_tokenizer()  # trained and cached once, outside the timed runs
    started = start_run()
    print(f"\n## {args.mode}: {args.input_format}, max_seq_length {args.max_seq_length}, num_proc {args.num_proc}\n")
    # "time / linear": this scale's time over the first scale's scaled linearly (1.00 = exactly linear).
    print("| corpus | MB | blocks | tokens | time s | tokens/s | time / linear | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|")
    scales = []
    for scale in args.scales:
        command = [sys.executable, "-m", "benchmarks.speed.data_prep", "--child", str(scaled_corpus(scale))]
        command += ["--mode", args.mode]
        command += ["--input-format", args.input_format, "--max-seq-length", str(args.max_seq_length)]
        if args.num_proc:
            command += ["--num-proc", str(args.num_proc)]
        output = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout
        figures = json.loads(next(line for line in output.splitlines() if line.startswith("RESULT "))[7:])
        seconds = figures["total_seconds"]
        first = scales[0] if scales else {"scale": scale, **figures}
        figures.update(scale=scale, tokens_per_second=figures["tokens"] / seconds,
                       time_over_linear=seconds / (first["total_seconds"] * scale / first["scale"]))  # fmt: skip
        scales.append(figures)
        print(f"| {scale}x | {figures['megabytes']:.0f} | {figures['blocks']:,} | {figures['tokens']:,} "
              f"| {seconds:.1f} | {figures['tokens_per_second']:,.0f} | {figures['time_over_linear']:.2f} "
              f"| {figures['peak_rss_mib']:,.0f} |")  # fmt: skip
    settings = {"mode": args.mode, "scales": args.scales, "input_format": args.input_format,
                "max_seq_length": args.max_seq_length, "num_proc": args.num_proc}  # fmt: skip
    results = {"scales": scales}
    announce(write_record("data_prep", settings, results, started=started, name=args.mode))


if __name__ == "__main__":
    main()
