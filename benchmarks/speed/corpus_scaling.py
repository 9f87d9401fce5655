#!/usr/bin/env python
"""Preparing corpora of growing size (prepared mode), up to a generated 2 GB of text.

For each size, a corpus is generated from the Reuters bodies (../shared/data), documents drawn at random with
their sentences shuffled, separated by blank lines (the layout run_pretraining.py reads). Then exactly what a
user runs prepares it, in a subprocess:

    run_pretraining.py --train_file corpus.txt --prepared_data_dir DIR --prepare_only true
        --tokenizer_name <50,265-id byte-level BPE> --max_seq_length 512 --preprocessing_num_workers N

while the process tree's memory is sampled every 0.2 s. Reported per size: wall time, tokens in the blocks,
tokens/s, and the peak over time of the tree's summed proportional set size (PSS: pages shared by the forked
workers counted once): all of it, and its anonymous part (heap: what the corpus would fill if it were held in
memory; the rest is pages of memory-mapped Arrow files, which the kernel can drop at any time). Flat peaks as
the corpus grows are the point.

    python -m benchmarks.speed.corpus_scaling   # 128 MB, 512 MB, 2 GB
    python -m benchmarks.speed.corpus_scaling --sizes_mb 64 256 --num_proc 2

Generated corpora and prepared folders go to --work_dir (default benchmarks/.cache/corpus_scaling) and are
deleted after each size unless --keep. Writes a raw record to benchmarks/results/corpus-scaling/ (per size: bytes
written, seconds, blocks, tokens, tokens/s, peak PSS and anonymous PSS; the load average before and after).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks import ROOT
from benchmarks.common import as_flags, script_environment
from benchmarks.speed.common import CACHE, REUTERS, announce, load_tokenizer, require_corpus
from spanroberta.records import start_run, write_record


def generate_corpus(path: Path, size_bytes: int, seed: int = 0) -> int:
    """Writes about `size_bytes` of documents to `path`, streaming (memory holds only the Reuters bodies)."""
    documents = [doc.split("\n") for doc in REUTERS.read_text(encoding="utf-8").split("\n\n") if doc.strip()]
    rng = random.Random(seed)
    written = 0
    with path.open("w", encoding="utf-8") as out:
        while written < size_bytes:
            lines = list(rng.choice(documents))
            rng.shuffle(lines)
            text = "\n".join(lines) + "\n\n"
            out.write(text)
            written += len(text.encode("utf-8"))
    return written


class TreeMemorySampler:
    """Peak, over time, of the summed PSS and anonymous PSS of a process and its descendants (Linux /proc)."""

    def __init__(self, pid: int, interval: float = 0.2):
        self.pid, self.interval = pid, interval
        self.peak_pss = self.peak_anon = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self):
        while not self._stop.is_set():
            pss = anon = 0
            for pid in self._tree():
                fields = _proc_fields(pid, "smaps_rollup")
                pss += fields.get("Pss", 0)
                anon += fields.get("Pss_Anon", 0)
            self.peak_pss, self.peak_anon = max(self.peak_pss, pss), max(self.peak_anon, anon)
            time.sleep(self.interval)

    def _tree(self) -> list[int]:
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                parent = _proc_fields(int(entry), "status").get("PPid")
                if parent is not None:
                    children.setdefault(parent, []).append(int(entry))
        tree, stack = [], [self.pid]
        while stack:
            pid = stack.pop()
            tree.append(pid)
            stack.extend(children.get(pid, []))
        return tree


def _proc_fields(pid: int, file: str) -> dict[str, int]:
    """PPid (from status), Pss and Pss_Anon in bytes (from smaps_rollup); empty if the process is gone."""
    try:
        lines = Path(f"/proc/{pid}/{file}").read_text().splitlines()
    except OSError:
        return {}
    fields = {}
    for line in lines:
        name, _, value = line.partition(":")
        if name in ("Pss", "Pss_Anon"):
            fields[name] = int(value.split()[0]) * 1024
        elif name == "PPid":
            fields[name] = int(value)
    return fields


def count_tokens(prepared_dir: Path) -> tuple[int, int]:
    """(blocks, tokens) of the prepared training split, read from its memory-mapped Arrow files."""
    import datasets
    import pyarrow.compute as pc

    blocks = datasets.load_from_disk(str(prepared_dir / "blocks"))["train"]
    lengths = pc.list_value_length(blocks.data.column("input_ids"))
    return len(blocks), int(pc.sum(lengths).as_py())


def prepare(corpus: Path, prepared_dir: Path, tokenizer_dir: Path, args: argparse.Namespace) -> dict[str, float]:
    flags = {"train_file": corpus, "prepared_data_dir": prepared_dir, "prepare_only": "true",
             "tokenizer_name": tokenizer_dir, "max_seq_length": args.max_seq_length, "input_format": args.input_format,
             "validation_split_percentage": 0, "preprocessing_num_workers": args.num_proc,
             "cache_dir": args.work_dir / "hf-cache"}  # fmt: skip
    command = [sys.executable, str(ROOT / "run_pretraining.py"), *as_flags(flags)]
    env = script_environment(HF_DATASETS_DISABLE_PROGRESS_BARS="1")
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    with TreeMemorySampler(process.pid) as sampler:
        _, stderr = process.communicate()
    seconds = time.perf_counter() - start
    if process.returncode != 0:
        raise SystemExit(f"Preparation failed:\n{stderr[-3000:]}")
    blocks, tokens = count_tokens(prepared_dir)
    return {"seconds": seconds, "blocks": blocks, "tokens": tokens, "peak_pss": sampler.peak_pss,
            "peak_anon": sampler.peak_anon}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes_mb", type=int, nargs="+", default=[128, 512, 2048])
    parser.add_argument("--num_proc", type=int, default=os.cpu_count())
    parser.add_argument("--max_seq_length", type=int, default=512)
    parser.add_argument("--input_format", default="full-sentences")
    parser.add_argument("--work_dir", type=Path, default=CACHE / "corpus_scaling")
    parser.add_argument("--keep", action="store_true", help="Keep the generated corpora and prepared folders.")
    args = parser.parse_args()
    require_corpus()
    tokenizer_dir = CACHE / "bpe50k"
    load_tokenizer()  # trains and caches it on first use
    args.work_dir.mkdir(parents=True, exist_ok=True)

    started = start_run()
    print(f"Prepared mode, {args.input_format} blocks of {args.max_seq_length}, 50,265-id byte-level BPE, "
          f"{args.num_proc} processes\n")
    print("| corpus | text | wall time | blocks | tokens | tokens/s | peak PSS (tree) | peak anonymous PSS (tree) |")
    print("|---|---|---|---|---|---|---|---|")
    sizes = []
    for size_mb in args.sizes_mb:
        corpus = args.work_dir / f"corpus_{size_mb}mb.txt"
        prepared_dir = args.work_dir / f"prepared_{size_mb}mb"
        shutil.rmtree(prepared_dir, ignore_errors=True)
        written = generate_corpus(corpus, size_mb * 2**20) if not corpus.is_file() else corpus.stat().st_size
        result = prepare(corpus, prepared_dir, tokenizer_dir, args)
        result.update(size_mb=size_mb, bytes_written=written, tokens_per_second=result["tokens"] / result["seconds"])
        sizes.append(result)
        print(
            f"| {size_mb} MB | {written / 2**30:.2f} GiB | {result['seconds']:.0f} s | {result['blocks']:,} | "
            f"{result['tokens']:,} | {result['tokens_per_second']:,.0f} | "
            f"{result['peak_pss'] / 2**20:,.0f} MiB | {result['peak_anon'] / 2**20:,.0f} MiB |",
            flush=True,
        )
        if not args.keep:
            corpus.unlink()
            shutil.rmtree(prepared_dir, ignore_errors=True)
            shutil.rmtree(args.work_dir / "hf-cache", ignore_errors=True)
    settings = {"sizes_mb": args.sizes_mb, "num_proc": args.num_proc, "max_seq_length": args.max_seq_length,
                "input_format": args.input_format}  # fmt: skip
    results = {"sizes": sizes}
    announce(write_record("corpus_scaling", settings, results, started=started))


if __name__ == "__main__":
    main()
