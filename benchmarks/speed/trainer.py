#!/usr/bin/env python
"""The path users run, `run_pretraining.py` under the Trainer, against a run_mlm-style baseline.

Both sides are whole Trainer runs: DataLoader, collator, forward, backward, clipping, optimizer, logging. Data
preparation is done before training and not timed. Throughput is counted in real (non-padding) tokens per second
over the logging windows after the first `--skip-windows` (warm-up, compilation), as the median of the rest.

- spanroberta: `python run_pretraining.py --recipe R ...` on the Reuters bodies (one document per blank-line
  separated body), read from the `real_tokens_per_second` it logs. Each recipe keeps its own input format:
  spanbert packs doc-sentences, roberta cuts full-sentences. The record keeps the attention implementation the
  run's `Run settings:` line names (the default has changed between commits).
- baseline: what transformers' examples/pytorch/language-modeling/run_mlm.py does, in-process: blocks of exactly
  `length` tokens of the concatenated corpus (its `group_texts`), `DataCollatorForLanguageModeling` (15%
  token masking), `RobertaForMaskedLM`, `Trainer` with default `TrainingArguments`. Every token is real.

Same tokenizer (a 50,265-id byte-level BPE trained on the corpus), encoder size, length, batch and precision.

On a GPU each run's model FLOPs utilisation is recorded: model FLOPs per real token x real tokens/s over the card's
dense bf16 peak (common.GPU_PEAK_BF16_FLOPS). The FLOPs per real token are counted (common.model_flops_per_step)
on one batch of full blocks collated as each side masks them: the baseline's MLM head at every token, the spanbert
recipe's heads at its span-masked targets and SBO targets. Other recipes and CPU runs record no MFU.

`--fp8` passes --fp8 to the run_pretraining.py runs (the baseline stays in bf16). Their MFU is still taken over the
bf16 peak, as the record's `mfu_peak` says: only the encoder's linear layers run on the float8 tensor cores (which
peak at about twice it), the attention and the heads on the bf16 ones, so such a run has no single peak of its
own; over the bf16 peak its MFU compares with every bf16 record's.

    python -m benchmarks.speed.trainer --config small --steps 60     # CPU: small, 128 x 32
    python -m benchmarks.speed.trainer --config base --recipes spanbert --torch-compile
    python -m benchmarks.speed.trainer --config base-gpu large-gpu   # on a GPU: 32 x 512, 16 x 512
    python -m benchmarks.speed.trainer --config base-gpu --recipes spanbert --fp8   # on Ada, Hopper or newer

Each config writes a raw record to benchmarks/results/trainer/ (every run's tokens/s per logging window, the
steady medians, the ratios to the baseline, the load average before and after).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import datasets
import torch
from transformers import (
    DataCollatorForLanguageModeling,
    RobertaConfig,
    RobertaForMaskedLM,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from benchmarks import ROOT
from benchmarks.speed import common
from spanroberta.data.collator import DataCollatorForSpanMasking
from spanroberta.models.configuration_spanroberta import SpanRobertaConfig
from spanroberta.records import start_run, write_record

BASELINE = "transformers run_mlm-style"
# The peak every run's MFU is taken over, --fp8 runs included (see the module's docstring), as the record states it.
MFU_PEAK = "the GPU's dense bf16 tensor-core peak (gpu_peak_flops), for every run, --fp8 runs included"

# (model size, sequence length, batch size per device)
CONFIGS = {
    "small": ("small", 128, 32),
    "tiny": ("tiny", 64, 4),  # the GPU check's CPU rehearsal
    "base": ("base", 512, 4),
    "base-gpu": ("base", 512, 32),
    "large-gpu": ("large", 512, 16),
}


def run_spanroberta(recipe: str, size: str, length: int, batch: int, args,
                    output_dir: str) -> tuple[list[float], str | None]:  # fmt: skip
    """The real tokens/s of each logging window of one run_pretraining.py run, and the attention implementation
    its `Run settings:` line names."""
    command = [
        sys.executable,
        str(ROOT / "run_pretraining.py"),
        "--train_file", str(common.BENCH_CORPUS),
        "--tokenizer_name", str(common.CACHE / "bpe50k"),
        "--recipe", recipe,
        "--model_size", size,
        "--max_seq_length", str(length),
        "--per_device_train_batch_size", str(batch),
        "--max_steps", str(args.steps),
        "--logging_steps", str(args.logging_steps),
        "--save_strategy", "no",
        "--eval_strategy", "no",
        "--validation_split_percentage", "0",
        "--report_to", "none",
        "--disable_tqdm", "true",
        "--output_dir", output_dir,
    ]
    if args.workers is not None:  # else run_pretraining.py's own default (workers on CUDA, none on CPU)
        command += ["--dataloader_num_workers", str(args.workers)]
    command += _precision_flags(args)
    if args.torch_compile:
        command += ["--torch_compile", "true"]
    if args.attn_implementation:
        command += ["--attn_implementation", args.attn_implementation]
    if args.fp8:
        command += ["--fp8", "true"]
    printed = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout
    if args.verbose:
        print(printed, end="")
    # The implementation and, for packed rows under varlen_fa2, the path they took; not who set it, nor the reason
    # the attention plan gives after a colon.
    attention = re.search(r"^Run settings: .*attn_implementation ([^:]+?)(?::[^()]*)? \([^()]*\)$", printed, re.M)
    state = json.loads(Path(output_dir, "trainer_state.json").read_text())
    rates = [log["real_tokens_per_second"] for log in state["log_history"] if "real_tokens_per_second" in log]
    return rates, attention and attention.group(1)


class _TokensPerSecond(TrainerCallback):
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


def run_baseline(size: str, length: int, batch: int, args, output_dir: str) -> tuple[list[float], str]:
    """The baseline's real tokens/s per logging window and its attention implementation, trained in a child
    process like spanroberta's runs: a parent that has trained keeps its threads spinning for a while and would
    slow the runs after it."""
    rates_file = Path(output_dir, "baseline_rates.json")
    command = [sys.executable, "-m", "benchmarks.speed.trainer", "--baseline-child", str(rates_file)]
    command += ["--config", args.config_name]
    command += ["--precision", args.precision, "--steps", str(args.steps), "--logging-steps", str(args.logging_steps)]
    command += ["--workers", str(args.workers or 0)] + (["--torch-compile"] if args.torch_compile else [])
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL if not args.verbose else None)
    child = json.loads(rates_file.read_text())
    return child["rates"], child["attn_implementation"]


def train_baseline(size: str, length: int, batch: int, args, output_dir: str) -> tuple[list[float], str]:
    tokenizer = common.load_tokenizer()
    blocks = common.load_blocks(tokenizer, length)
    dataset = datasets.Dataset.from_dict({"input_ids": blocks.tolist()})
    config = RobertaConfig(**common.encoder_settings(tokenizer, size))
    torch.manual_seed(0)
    model = RobertaForMaskedLM(config)
    training_args = TrainingArguments(
        output_dir=output_dir,
        per_device_train_batch_size=batch,
        max_steps=args.steps,
        logging_steps=args.logging_steps,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        dataloader_num_workers=args.workers or 0,
        bf16=args.precision == "bf16",
        use_cpu=not torch.cuda.is_available(),
        torch_compile=args.torch_compile,
    )
    meter = _TokensPerSecond(batch * length * training_args.world_size)
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=dataset,
        data_collator=DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15),
        callbacks=[meter],
    )
    trainer.train()
    return meter.rates, model.config._attn_implementation


def _precision_flags(args) -> list[str]:
    if args.precision != "bf16":
        return []
    # transformers trains in bf16 on a CPU only when told to use it (`use_cpu`).
    return ["--bf16", "true"] + ([] if torch.cuda.is_available() else ["--use_cpu", "true"])


def model_flops_per_real_token(run: str, size: str, length: int) -> float | None:
    """The model FLOPs of one real token of `run` (see the module's docstring); None for a recipe not counted."""
    tokenizer = common.load_tokenizer()
    rows = common.batches_of_rows(common.load_blocks(tokenizer, length), batch_size=8, count=1)[0]
    encoder = common.encoder_settings(tokenizer, size)
    if run == BASELINE:
        config, collator = RobertaConfig(**encoder), DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
    elif run == "run_pretraining.py --recipe spanbert":
        config, collator = SpanRobertaConfig(**encoder), DataCollatorForSpanMasking(tokenizer, label_layout="slots")
    else:
        return None
    torch.manual_seed(0)
    batch = collator([{"input_ids": row} for row in rows])
    return common.model_flops_per_step(config, batch, dense_head=run == BASELINE) / float(batch["attention_mask"].sum())


def steady(rates: list[float], skip: int) -> float:
    kept = rates[skip:] or rates
    return statistics.median(kept)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", nargs="+", choices=list(CONFIGS), default=["small"])
    parser.add_argument("--recipes", nargs="+", default=["spanbert", "roberta"])
    default_precision = "bf16" if torch.cuda.is_available() else "fp32"
    parser.add_argument("--precision", choices=["fp32", "bf16"], default=default_precision)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--logging-steps", type=int, default=10)
    parser.add_argument("--skip-windows", type=int, default=2, help="Logging windows dropped as warm-up.")
    parser.add_argument("--workers", type=int, default=None, help="DataLoader workers (default: each side's own "
                        "default: run_pretraining.py's, the Trainer's 0 for the baseline).")
    parser.add_argument("--torch-compile", action="store_true")
    parser.add_argument("--attn-implementation", help="run_pretraining.py's --attn_implementation (default: its "
                        "own); the baseline keeps transformers' default.")  # fmt: skip
    parser.add_argument("--fp8", action="store_true", help="run_pretraining.py's --fp8 (needs --precision bf16; "
                        "the baseline stays in bf16). MFU stays over the bf16 peak.")  # fmt: skip
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--baseline-child", help=argparse.SUPPRESS)  # internal: train the baseline, write rates
    args = parser.parse_args()
    if args.fp8 and args.precision != "bf16":
        parser.error("--fp8 trains float8 layers inside a bf16 run: give --precision bf16.")
    if args.baseline_child:
        size, length, batch = CONFIGS[args.config[0]]
        with tempfile.TemporaryDirectory() as tmp:
            rates, attention = train_baseline(size, length, batch, args, tmp)
        Path(args.baseline_child).write_text(json.dumps({"rates": rates, "attn_implementation": attention}))
        return

    common.require_corpus()
    common.load_tokenizer()  # trains and caches the BPE once, before any timing
    print(f"| config | run | median real tokens/s over logging windows {args.skip_windows + 1}.. | vs baseline | MFU |")
    print("|---|---|---|---|---|")
    for name in args.config:
        args.config_name = name
        measure_config(name, args)


def measure_config(name: str, args: argparse.Namespace) -> None:
    """Both sides' runs of one config, and their record."""
    size, length, batch = CONFIGS[name]
    started = start_run()
    windows, attention = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_baseline:
            windows[BASELINE], attention[BASELINE] = run_baseline(size, length, batch, args, tmp)
        for recipe in args.recipes:
            run = f"run_pretraining.py --recipe {recipe}"
            windows[run], attention[run] = run_spanroberta(recipe, size, length, batch, args, str(Path(tmp, recipe)))
    settings = {"config": name, "model_size": size, "seq_length": length, "batch_size": batch,
                "precision": args.precision, "torch_compile": args.torch_compile, "steps": args.steps,
                "logging_steps": args.logging_steps, "skip_windows": args.skip_windows,
                "workers": args.workers, "recipes": args.recipes, "corpus": common.BENCH_CORPUS.name,
                "attn_implementation": args.attn_implementation, "fp8": args.fp8}  # fmt: skip
    peak = common.gpu_peak_flops()
    results = {"gpu_peak_flops": peak, "mfu_peak": MFU_PEAK, "runs": {}}
    precision = f"{args.precision}, --fp8" if args.fp8 else args.precision
    for run, rates in windows.items():
        rate = steady(rates, args.skip_windows)
        ratio = rate / steady(windows[BASELINE], args.skip_windows) if BASELINE in windows else None
        flops = model_flops_per_real_token(run, size, length)
        utilisation = common.mfu(flops * rate, peak) if flops is not None else None
        results["runs"][run] = {"real_tokens_per_second_windows": rates, "real_tokens_per_second": rate,
                                "ratio_to_baseline": ratio, "model_flops_per_real_token": flops,
                                "mfu": utilisation, "attn_implementation": attention[run]}  # fmt: skip
        print(f"| {name}, {precision} | {run} | {rate:,.0f} | {f'{ratio:.2f}x' if ratio else '-'} "
              f"| {f'{100 * utilisation:.1f}%' if utilisation is not None else '-'} |")  # fmt: skip
    label = f"{name}-{args.precision}" + ("-fp8" if args.fp8 else "") + ("-compile" if args.torch_compile else "")
    common.announce(write_record("trainer", settings, results, started=started, name=label))


if __name__ == "__main__":
    main()
