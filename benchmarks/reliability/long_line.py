#!/usr/bin/env python
"""Memory against line length: a valid corpus of one very long line, prepared (and trained on for a few steps)
exactly as a user runs it.

For each size, a corpus of a single line of N MB of running text (the demo corpus's sentences, drawn at random with
seed 0 and joined by spaces) is prepared in a subprocess by

    run_pretraining.py --train_file line.txt --prepared_data_dir DIR --prepare_only true --tokenizer_vocab_size 2000
        --max_seq_length 128 --validation_split_percentage 0

which trains a byte-level BPE on the line, tokenizes it and packs it into blocks; with --train_steps, a tiny model
then trains that many steps from DIR. Recorded per run: the peak resident set of the run's largest process (its
maximum RSS, exact, from wait4), the peak over time of the process tree's summed PSS and of its anonymous part
(sampled, `corpus_scaling.TreeMemorySampler`), wall and CPU seconds; per size: the line's bytes, the block size,
the blocks, their tokens and their size on disk.

The bound stated: the anonymous memory a line adds to the run (the peak of the process tree's anonymous PSS above
the peak of the same run on a corpus of BASELINE_MB) is at most BOUND_MIB, however long the line: 8 bytes a
character of the largest batch of documents the data path holds at once (`corpus.DOCUMENTS_PER_BATCH` documents of
at most `corpus.MAX_DOCUMENT_CHARACTERS` characters, 16 M characters: its text, ids and their Arrow copies). A line
is read, cut into documents, tokenized and grouped without ever being held whole. Anonymous memory, because the
resident set also counts the pages of the Arrow files `datasets` memory-maps, which the page cache holds and gives
back under pressure; they grow with the corpus, as they would for any corpus of that size, and are recorded too.

    python -m benchmarks.reliability.long_line                                 # a 100 MB line
    python -m benchmarks.reliability.long_line --sizes_mb 10 50 100 --train_steps 3
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import ROOT
from benchmarks.common import script_environment
from benchmarks.speed.corpus_scaling import TreeMemorySampler, count_tokens
from spanroberta.data.corpus import DOCUMENTS_PER_BATCH, MAX_DOCUMENT_CHARACTERS
from spanroberta.data.demo_corpus import demo_corpus_path
from spanroberta.records import start_run, write_record

BASELINE_MB = 0.1
BOUND_MIB = 8 * DOCUMENTS_PER_BATCH * MAX_DOCUMENT_CHARACTERS // 2**20
BLOCK_SIZE = 128
VOCABULARY = 2000
MB = 10**6


def write_line(path: Path, size_mb: float, seed: int = 0) -> int:
    """Writes one line of about `size_mb` MB (a newline at its end): demo sentences drawn at random, joined by
    spaces. Returns the bytes written."""
    sentences = [line for line in demo_corpus_path().read_text(encoding="utf-8").splitlines() if line.strip()]
    rng = random.Random(seed)
    written = 0
    with path.open("w", encoding="utf-8") as line:
        while written < size_mb * MB:
            sentence = rng.choice(sentences) + " "
            line.write(sentence)
            written += len(sentence.encode("utf-8"))
        line.write("\n")
    return written + 1


def measured_run(flags: list[str], log: Path) -> dict[str, Any]:
    """Runs run_pretraining.py with `flags` (output to `log`); its seconds, CPU seconds and memory peaks in MiB
    (2^20 bytes; line sizes are in MB, 10^6 bytes)."""
    env = script_environment(HF_DATASETS_DISABLE_PROGRESS_BARS="1", CUDA_VISIBLE_DEVICES="")
    began = time.perf_counter()
    with log.open("w") as output:
        process = subprocess.Popen([sys.executable, str(ROOT / "run_pretraining.py"), *flags], cwd=ROOT, env=env,
                                   stdout=output, stderr=subprocess.STDOUT)  # fmt: skip
        with TreeMemorySampler(process.pid, interval=0.05) as sampler:
            # wait4, not wait: the child's own resource usage, its maximum RSS exact where sampling could miss it.
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"run_pretraining.py {' '.join(flags)} failed:\n{log.read_text()[-3000:]}")
    return {"seconds": round(time.perf_counter() - began, 1), "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1), "peak_pss_mib": round(sampler.peak_pss / 2**20, 1),
            "peak_anonymous_pss_mib": round(sampler.peak_anon / 2**20, 1)}  # fmt: skip


def prepare_and_train(size_mb: float, folder: Path, train_steps: int) -> dict[str, Any]:
    """One size: the line written, prepared (measured), its blocks counted, then trained on for `train_steps`."""
    folder.mkdir(parents=True)
    corpus, prepared = folder / "line.txt", folder / "prepared"
    line_bytes = write_line(corpus, size_mb)
    common = ["--max_seq_length", str(BLOCK_SIZE), "--validation_split_percentage", "0", "--report_to", "none",
              "--cache_dir", str(folder / "hf-cache")]  # fmt: skip
    prepare = measured_run(["--train_file", str(corpus), "--prepared_data_dir", str(prepared), "--prepare_only", "true",
                            "--tokenizer_vocab_size", str(VOCABULARY), *common], folder / "prepare.log")  # fmt: skip
    blocks, tokens = count_tokens(prepared)
    prepared_bytes = sum(path.stat().st_size for path in (prepared / "blocks").rglob("*") if path.is_file())
    result = {"line_mb": size_mb, "line_bytes": line_bytes, "blocks": blocks, "tokens": tokens,
              "prepared_bytes": prepared_bytes, "prepare": prepare, "train": None}  # fmt: skip
    if train_steps:
        result["train"] = measured_run(
            ["--prepared_data_dir", str(prepared), "--output_dir", str(folder / "out"), "--model_size", "tiny",
             "--max_steps", str(train_steps), "--per_device_train_batch_size", "8", "--use_cpu", "true",
             "--eval_strategy", "no", "--save_strategy", "no", *common], folder / "train.log")  # fmt: skip
    return result


def against_bound(size: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """The size's result with the memory its line adds over the baseline (MiB; anonymous, and resident with the
    memory-mapped files) and whether the anonymous part is within BOUND_MIB."""
    extra_anonymous = size["prepare"]["peak_anonymous_pss_mib"] - baseline["prepare"]["peak_anonymous_pss_mib"]
    extra_rss = size["prepare"]["peak_rss_mib"] - baseline["prepare"]["peak_rss_mib"]
    return {**size, "extra_anonymous_mib": round(extra_anonymous, 1), "extra_rss_mib": round(extra_rss, 1),
            "within_bound": extra_anonymous <= BOUND_MIB}  # fmt: skip


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes_mb", type=float, nargs="+", default=[100.0], help="line sizes, in MB (10^6 bytes)")
    parser.add_argument("--train_steps", type=int, default=0, help="steps of a tiny model on each prepared line")
    parser.add_argument("--work_dir", type=Path, default=None, help="where the corpora go (default: a temporary one)")
    parser.add_argument("--results-dir", default=None, help="where the record goes (default benchmarks/results)")
    options = parser.parse_args(argv)
    started = start_run()
    settings = {"kind": "long-line", "sizes_mb": options.sizes_mb, "baseline_mb": BASELINE_MB,
                "max_seq_length": BLOCK_SIZE, "tokenizer_vocab_size": VOCABULARY, "train_steps": options.train_steps,
                "anonymous_bound_mib": BOUND_MIB, "processes": 1}  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="long-line-", dir=options.work_dir))
    try:
        baseline = prepare_and_train(BASELINE_MB, work / "baseline", options.train_steps)
        print(f"[long line] baseline {BASELINE_MB} MB: peak anonymous {baseline['prepare']['peak_anonymous_pss_mib']} "
              f"MiB, peak RSS {baseline['prepare']['peak_rss_mib']} MiB", flush=True)  # fmt: skip
        sizes = []
        for size_mb in options.sizes_mb:
            sizes.append(against_bound(prepare_and_train(size_mb, work / f"{size_mb}mb", options.train_steps),
                                       baseline))  # fmt: skip
            shutil.rmtree(work / f"{size_mb}mb")
            print(f"[long line] {size_mb} MB: {sizes[-1]['extra_anonymous_mib']} MiB of anonymous memory above the "
                  f"baseline (bound {BOUND_MIB}), peak RSS {sizes[-1]['prepare']['peak_rss_mib']} MiB, "
                  f"{sizes[-1]['prepare']['seconds']} s", flush=True)  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results = {"baseline": baseline, "sizes": sizes, "bound_holds": all(size["within_bound"] for size in sizes)}
    path = write_record("reliability", settings, results, started=started, name="long-line",
                        results_dir=options.results_dir)  # fmt: skip
    print(f"[long line] bound {'holds' if results['bound_holds'] else 'BROKEN'}; record: {path}")
    return results


if __name__ == "__main__":
    main()
