#!/usr/bin/env python
"""The two transformers baselines of the Trainer-path benchmark (speed/trainer.py). Both are what transformers'
examples/pytorch/language-modeling/run_mlm.py does: blocks of exactly `length` tokens of the concatenated corpus
(its `group_texts`), `DataCollatorForLanguageModeling` (15% token masking), `RobertaForMaskedLM` and the `Trainer`;
every token is real. They differ in how the Trainer is set up:

- `defaults`, run_mlm as users run it: the Trainer's defaults (no DataLoader workers, no non-blocking copies), the
  tokenizer's vocabulary unpadded, eager unless the pair is the compiled one;
- `tuned`, the best plain transformers offers: the DataLoader workers spanroberta's run gets (persistent), pinned
  host memory copied with `non_blocking` (accelerate's, through the Trainer's `accelerator_config`), the vocabulary
  padded to the multiple spanroberta pads to (transformers' own `resize_token_embeddings(pad_to_multiple_of=...)`;
  the padded ids stay in the softmax, which changes no step's cost), compiled when the pair is.

Each trains in a child process of its own, as spanroberta's runs do: a parent that has trained keeps its threads
spinning for a while and would slow the runs after it. The child writes its real tokens/s per logging window, its
attention implementation, its setup and its peak GPU memory to a JSON file:

    python -m benchmarks.speed.baselines --kind tuned --config base-gpu --batch-size 32 --precision bf16 \
        --steps 150 --logging-steps 10 --output rates.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import datasets
import torch
from transformers import (DataCollatorForLanguageModeling, RobertaConfig, RobertaForMaskedLM, Trainer, TrainerCallback,
                          TrainingArguments)

from benchmarks import ROOT
from benchmarks.common import as_flags
from benchmarks.speed import common
from spanroberta.pretraining.arguments import PretrainingModelArguments
from spanroberta.pretraining.specification import GPU_DATALOADER_WORKERS

# The runs' names in the records, by kind.
BASELINES = {"defaults": "transformers run_mlm defaults", "tuned": "transformers tuned"}
# The multiple spanroberta pads its vocabulary to by default (--pad_vocab_to_multiple_of).
VOCAB_MULTIPLE = next(f.default for f in dataclasses.fields(PretrainingModelArguments)
                      if f.name == "pad_vocab_to_multiple_of")  # fmt: skip


def spanroberta_workers(workers: int | None, cuda: bool) -> int:
    """The DataLoader workers of spanroberta's run: those asked for, else run_pretraining.py's own default (workers on
    CUDA, none on CPU)."""
    if workers is not None:
        return workers
    return GPU_DATALOADER_WORKERS if cuda else 0


def loading_settings(kind: str, workers: int | None, cuda: bool) -> dict[str, Any]:
    """How one baseline's Trainer loads and copies batches: the Trainer's defaults for run_mlm's (nothing set), and
    for the tuned peer spanroberta's workers (`workers` as asked of spanroberta's run), kept between epochs, with
    pinned host memory copied without waiting on CUDA."""
    if kind == "defaults":
        return {}
    count = spanroberta_workers(workers, cuda)
    return {"dataloader_num_workers": count, "dataloader_persistent_workers": count > 0,
            "dataloader_pin_memory": cuda, "accelerator_config": {"non_blocking": cuda}}  # fmt: skip


def training_arguments(kind: str, output_dir: str, batch: int, options: argparse.Namespace) -> TrainingArguments:
    """The Trainer's arguments of one baseline: what every run shares, and how it loads batches (`loading_settings`)."""
    cuda = torch.cuda.is_available()
    return TrainingArguments(output_dir=output_dir, per_device_train_batch_size=batch, max_steps=options.steps,
                             logging_steps=options.logging_steps, save_strategy="no", report_to=[], disable_tqdm=True,
                             bf16=options.precision == "bf16", use_cpu=not cuda, torch_compile=options.torch_compile,
                             **loading_settings(kind, options.workers, cuda))  # fmt: skip


class TokensPerSecond(TrainerCallback):
    """Real tokens/s of each logging window: tokens from the batches' attention masks (all ones here)."""

    def __init__(self, tokens_per_step: int):
        self.tokens_per_step = tokens_per_step
        self.window_start: float | None = None
        self.window_steps = 0
        self.rates: list[float] = []

    def on_step_begin(self, args, state, control, **kwargs):
        if self.window_start is None:
            self.window_start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.window_steps += 1

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.window_start is not None and logs and "loss" in logs:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            elapsed = time.perf_counter() - self.window_start
            self.rates.append(self.window_steps * self.tokens_per_step / elapsed)
            self.window_start, self.window_steps = None, 0


def train(kind: str, size: str, length: int, batch: int, options: argparse.Namespace, output_dir: str) -> dict:
    """One baseline's Trainer run: its rates per logging window, attention implementation, setup and peak memory."""
    tokenizer = common.load_tokenizer()
    dataset = datasets.Dataset.from_dict({"input_ids": common.load_blocks(tokenizer, length).tolist()})
    torch.manual_seed(0)
    model = RobertaForMaskedLM(RobertaConfig(**common.encoder_settings(tokenizer, size)))
    if kind == "tuned":
        model.resize_token_embeddings(len(tokenizer), pad_to_multiple_of=VOCAB_MULTIPLE, mean_resizing=False)
    training_args = training_arguments(kind, output_dir, batch, options)
    meter = TokensPerSecond(batch * length * training_args.world_size)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
    Trainer(model=model, args=training_args, train_dataset=dataset, data_collator=collator, callbacks=[meter]).train()
    setup = {"dataloader_num_workers": training_args.dataloader_num_workers,
             "dataloader_pin_memory": training_args.dataloader_pin_memory,
             "non_blocking": training_args.accelerator_config.non_blocking,
             "vocab_size": model.config.vocab_size, "torch_compile": training_args.torch_compile}  # fmt: skip
    return {"rates": meter.rates, "attn_implementation": model.config._attn_implementation, "setup": setup,
            "peak_memory": common.peak_memory()}  # fmt: skip


def run(kind: str, config: str, batch: int, options: argparse.Namespace) -> dict:
    """What `train` returns, from a child process (`python -m benchmarks.speed.baselines`)."""
    with tempfile.TemporaryDirectory() as folder:
        output = Path(folder, "baseline.json")
        flags = {"kind": kind, "config": config, "batch-size": batch, "precision": options.precision,
                 "steps": options.steps, "logging-steps": options.logging_steps, "output": output}  # fmt: skip
        flags |= {} if options.workers is None else {"workers": options.workers}
        command = [sys.executable, "-m", "benchmarks.speed.baselines", *as_flags(flags)]
        command += ["--torch-compile"] if options.torch_compile else []
        subprocess.run(command, cwd=ROOT, check=True, stdout=None if options.verbose else subprocess.DEVNULL)
        return json.loads(output.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", choices=list(BASELINES), required=True)
    parser.add_argument("--config", choices=list(common.CONFIGS), required=True)
    parser.add_argument("--batch-size", type=int, required=True, help="Per device.")
    parser.add_argument("--precision", choices=["fp32", "bf16"], required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--logging-steps", type=int, required=True)
    parser.add_argument("--workers", type=int, default=None, help="spanroberta's DataLoader workers, if asked for.")
    parser.add_argument("--torch-compile", action="store_true")
    parser.add_argument("--output", type=Path, required=True)
    options = parser.parse_args()
    size, length, _ = common.CONFIGS[options.config]
    with tempfile.TemporaryDirectory() as folder:
        found = train(options.kind, size, length, options.batch_size, options, folder)
    options.output.write_text(json.dumps(found))


if __name__ == "__main__":
    main()
