#!/usr/bin/env python
"""The path users run, `run_pretraining.py` under the Trainer, against two transformers baselines.

Every side is a whole Trainer run: DataLoader, collator, forward, backward, clipping, optimizer, logging. Data
preparation is done before training and not timed. Throughput is counted in real (non-padding) tokens per second
over the logging windows after the first `--skip-windows` (warm-up, compilation): the median of the rest, with
their spread (count, min, median, max, standard deviation).

- spanroberta: `python run_pretraining.py --recipe R ...` on the Reuters bodies (one document per blank-line
  separated body), read from the `real_tokens_per_second` it logs. Each recipe keeps its own input format:
  spanbert packs doc-sentences, roberta cuts full-sentences. The record keeps the attention implementation the
  run's `Run settings:` line names (the default has changed between commits).
- the baselines (speed/baselines.py): run_mlm.py as users run it (`transformers run_mlm defaults`) and the best
  plain transformers offers (`transformers tuned`: spanroberta's DataLoader workers, pinned non-blocking copies,
  a padded vocabulary), both compiled when the pair is.

Same tokenizer (a 50,265-id byte-level BPE trained on the corpus), encoder size, length, per-device batch and
precision. `--batch-sizes` runs other per-device batches than the config's, every side at each (the batch sweep);
on a GPU each side's peak memory is recorded (common.peak_memory).

On a GPU each run's model FLOPs utilisation is recorded: model FLOPs per real token x real tokens/s over the card's
dense bf16 peak (common.gpu_peak: by exact model, a MIG slice named and given none). The FLOPs per real token are
counted as the kernels run them (common.model_flops_per_step, named in the record's `model_flops_counting`) on
FLOPS_ROWS rows of each side's input as it collates them: the baselines' full blocks with the MLM head at every
token, the spanbert recipe's packed rows (common.packed_rows) with attention within each document, the last layer's
queries, output and feed-forward at the positions the heads read (under the attention its run named) and its heads
at every prediction slot; the tokenizer's vocabulary on every side (the padded ids do no useful work). Every side's
logging window starts once its first batch is fetched (spanroberta's trainer and the baselines' TokensPerSecond
alike). Other recipes and CPU runs record no MFU.

`--fp8` passes --fp8 to the run_pretraining.py runs (the baselines stay in bf16). Their MFU is still taken over the
bf16 peak, as the record's `mfu_peak` says: only the encoder's linear layers run on the float8 tensor cores (which
peak at about twice it), the attention and the heads on the bf16 ones, so such a run has no single peak of its
own; over the bf16 peak its MFU compares with every bf16 record's.

Windows agree only over a run long enough: a record of fewer than MIN_STEPS steps or of windows longer than
MAX_WINDOW_STEPS steps says it is a rehearsal (`settings.rehearsal`), and no target reads it.

    python -m benchmarks.speed.trainer --config small --steps 60     # CPU: small, 128 x 32, a rehearsal
    python -m benchmarks.speed.trainer --config base --recipes spanbert --torch-compile
    python -m benchmarks.speed.trainer --config base-gpu large-gpu   # on a GPU: 32 x 512, 16 x 512
    python -m benchmarks.speed.trainer --config base-gpu --recipes spanbert --batch-sizes 64 128
    python -m benchmarks.speed.trainer --config base-gpu --recipes spanbert --fp8   # on Ada, Hopper or newer

Each config and batch writes a raw record to benchmarks/results/trainer/ (every run's tokens/s per logging window,
their spread, MFU and peak memory, the ratios to each baseline, the load average before and after).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from transformers import DataCollatorForLanguageModeling, RobertaConfig

from benchmarks import ROOT
from benchmarks.common import as_flags
from benchmarks.speed import baselines, common
from benchmarks.speed.common import CONFIGS
from spanroberta.data.collator import DataCollatorForSpanMasking
from spanroberta.models.configuration_spanroberta import SpanRobertaConfig, first_position_id
from spanroberta.records import start_run, write_record

DEFAULTS, TUNED = baselines.BASELINES["defaults"], baselines.BASELINES["tuned"]
SPANBERT = "run_pretraining.py --recipe spanbert"
MIN_STEPS, MAX_WINDOW_STEPS = 150, 10  # shorter runs or longer windows: a rehearsal
FLOPS_ROWS = 32  # rows of each side's input its FLOPs per real token are counted on
# The peak every run's MFU is taken over, --fp8 runs included (see the module's docstring), as the record states it.
MFU_PEAK = "the GPU's dense bf16 tensor-core peak (gpu_peak_flops), for every run, --fp8 runs included"



def run_spanroberta(recipe: str, size: str, length: int, batch: int, args, output_dir: str) -> dict:
    """One run_pretraining.py run, through speed/peak_memory.py: the real tokens/s of each logging window, the
    attention implementation its `Run settings:` line names, its DataLoader workers and its peak GPU memory."""
    peak = Path(output_dir).with_name(f"{Path(output_dir).name}-peak.json")
    flags = {"train_file": common.BENCH_CORPUS, "tokenizer_name": common.CACHE / "bpe50k", "recipe": recipe,
             "model_size": size, "max_seq_length": length, "per_device_train_batch_size": batch,
             "max_steps": args.steps, "logging_steps": args.logging_steps, "save_strategy": "no",
             "eval_strategy": "no", "validation_split_percentage": 0, "report_to": "none", "disable_tqdm": "true",
             "output_dir": output_dir}  # fmt: skip
    if args.workers is not None:  # else run_pretraining.py's own default (workers on CUDA, none on CPU)
        flags["dataloader_num_workers"] = args.workers
    if args.precision == "bf16":
        flags["bf16"] = "true"
        if not torch.cuda.is_available():  # transformers trains in bf16 on a CPU only when told to use it
            flags["use_cpu"] = "true"
    if args.torch_compile:
        flags["torch_compile"] = "true"
    if args.attn_implementation:
        flags["attn_implementation"] = args.attn_implementation
    if args.fp8:
        flags["fp8"] = "true"
    command = [sys.executable, "-m", "benchmarks.speed.peak_memory", str(peak), str(ROOT / "run_pretraining.py"),
               *as_flags(flags)]  # fmt: skip
    printed = subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True).stdout
    if args.verbose:
        print(printed, end="")
    state = json.loads(Path(output_dir, "trainer_state.json").read_text())
    rates = [log["real_tokens_per_second"] for log in state["log_history"] if "real_tokens_per_second" in log]
    return {"rates": rates, "attn_implementation": printed_attention(printed),
            "setup": {"dataloader_num_workers": baselines.spanroberta_workers(args.workers, torch.cuda.is_available())},
            "peak_memory": json.loads(peak.read_text())}  # fmt: skip


def printed_attention(printed: str) -> str | None:
    """The attention implementation the `Run settings:` line in `printed` names and, for packed rows under
    varlen_fa2, the path they took; not who set it, nor the reason the attention plan gives after a colon. It is
    the line's last setting, or followed by others (--fp8's layers)."""
    attention = re.search(r"^Run settings: .*attn_implementation ([^:;]+?)(?::[^()]*)? \([^()]*\)(?:; |$)", printed,
                          re.M)  # fmt: skip
    return attention and attention.group(1)


def model_flops_per_real_token(size: str, length: int, recipes: list[str],
                               attention: str | None = None) -> dict[str, float]:  # fmt: skip
    """The model FLOPs of one real token of each run that counts them (see the module's docstring): both baselines
    and the spanbert recipe, under `attention` (the implementation its run named; it decides whether the efficient
    path's last layer runs at the heads' positions only, `common.last_layer_at_positions`)."""
    tokenizer = common.load_tokenizer()
    encoder = common.encoder_settings(tokenizer, size)
    torch.manual_seed(0)
    blocks = common.batches_of_rows(common.load_blocks(tokenizer, length), batch_size=FLOPS_ROWS, count=1)[0]
    batch = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)([{"input_ids": row} for row in blocks])
    per_step = common.model_flops_per_step(RobertaConfig(**encoder), batch, dense_head=True)
    found = dict.fromkeys((DEFAULTS, TUNED), per_step / float(batch["attention_mask"].sum()))
    if "spanbert" in recipes:
        config = SpanRobertaConfig(**encoder, attn_implementation=attention)
        collator = DataCollatorForSpanMasking(tokenizer, label_layout="slots", pad_to_multiple_of=length,
                                              first_position_id=first_position_id(config))  # fmt: skip
        batch = collator(common.packed_rows(tokenizer, length, FLOPS_ROWS))
        per_step = common.model_flops_per_step(config, batch, dense_head=False)
        found[SPANBERT] = per_step / float(batch["attention_mask"].sum())
    return found


def window_spread(rates: list[float], skip: int) -> dict[str, float]:
    """The logging windows after the first `skip` (all of them when there are no more): their count, min, median,
    max and sample standard deviation (0 for one window)."""
    kept = rates[skip:] or rates
    return {"windows": len(kept), "min": min(kept), "median": statistics.median(kept), "max": max(kept),
            "sd": statistics.stdev(kept) if len(kept) > 1 else 0.0}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", nargs="+", choices=list(CONFIGS), default=["small"])
    parser.add_argument("--recipes", nargs="+", default=["spanbert", "roberta"])
    default_precision = "bf16" if torch.cuda.is_available() else "fp32"
    parser.add_argument("--precision", choices=["fp32", "bf16"], default=default_precision)
    parser.add_argument("--steps", type=int, default=MIN_STEPS)
    parser.add_argument("--logging-steps", type=int, default=10)
    parser.add_argument("--skip-windows", type=int, default=2, help="Logging windows dropped as warm-up.")
    parser.add_argument("--workers", type=int, default=None, help="DataLoader workers of spanroberta's runs and of "
                        "the tuned baseline (default: run_pretraining.py's); run_mlm's defaults keep the Trainer's 0.")
    parser.add_argument("--torch-compile", action="store_true")
    parser.add_argument("--attn-implementation", help="run_pretraining.py's --attn_implementation (default: its "
                        "own); the baselines keep transformers' default.")  # fmt: skip
    parser.add_argument("--fp8", action="store_true", help="run_pretraining.py's --fp8 (needs --precision bf16 and "
                        "--torch-compile; the baselines stay in bf16). MFU stays over the bf16 peak.")  # fmt: skip
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--batch-sizes", nargs="+", type=int, help="Per-device batches to run, every side at each, "
                        "instead of each config's own (the batch sweep).")  # fmt: skip
    args = parser.parse_args()
    if args.fp8 and args.precision != "bf16":
        parser.error("--fp8 trains float8 layers inside a bf16 run: give --precision bf16.")
    if args.fp8 and not args.torch_compile:
        # run_pretraining.py turns compile on under --fp8: a record saying it ran eagerly would be wrong.
        parser.error("--fp8 runs compiled (float8 layers pay only under torch.compile): give --torch-compile.")

    common.require_corpus()
    common.load_tokenizer()  # trains and caches the BPE once, before any timing
    print(f"| config | batch | run | median real tokens/s over logging windows {args.skip_windows + 1}.. (min-max) "
          f"| vs {DEFAULTS} | vs {TUNED} | MFU | peak GPU memory |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.config:
        for batch in args.batch_sizes or [CONFIGS[name][2]]:
            measure(name, batch, args)


def measure(name: str, batch: int, args: argparse.Namespace) -> None:
    """Every side's run of one config at one per-device batch, and their record."""
    size, length, _ = CONFIGS[name]
    started = start_run()
    sides = {}
    if not args.no_baseline:
        sides = {run: baselines.run(kind, name, batch, args) for kind, run in baselines.BASELINES.items()}
    with tempfile.TemporaryDirectory() as tmp:
        for recipe in args.recipes:
            sides[f"run_pretraining.py --recipe {recipe}"] = run_spanroberta(recipe, size, length, batch, args,
                                                                             str(Path(tmp, recipe)))  # fmt: skip
    rehearsal = args.steps < MIN_STEPS or args.logging_steps > MAX_WINDOW_STEPS
    settings = {"config": name, "model_size": size, "seq_length": length, "batch_size": batch,
                "precision": args.precision, "torch_compile": args.torch_compile, "steps": args.steps,
                "logging_steps": args.logging_steps, "skip_windows": args.skip_windows,
                "workers": args.workers, "recipes": args.recipes, "corpus": common.BENCH_CORPUS.name,
                "attn_implementation": args.attn_implementation, "fp8": args.fp8,
                "rehearsal": rehearsal}  # fmt: skip
    printed = sides.get(SPANBERT, {}).get("attn_implementation")
    flops = model_flops_per_real_token(size, length, args.recipes, printed and printed.split()[0])
    results = summarise(sides, flops, args.skip_windows)
    precision = f"{args.precision}, --fp8" if args.fp8 else args.precision
    for run, found in results["runs"].items():
        print(_row(f"{name}, {precision}", batch, run, found))
    if rehearsal:
        print(f"A rehearsal: fewer than {MIN_STEPS} steps or windows of more than {MAX_WINDOW_STEPS} steps; no "
              "target reads it.")
    label = f"{name}-{args.precision}" + (f"-batch{batch}" if batch != CONFIGS[name][2] else "")
    label += ("-fp8" if args.fp8 else "") + ("-compile" if args.torch_compile else "")
    common.announce(write_record("trainer", settings, results, started=started, name=label))


def summarise(sides: dict[str, dict], flops: dict[str, float], skip: int) -> dict:
    """Each run's windows and their spread, MFU (where its FLOPs are counted and the card's peak known), attention,
    setup and peak memory, with its ratios to each baseline: of real tokens/s, and of MFU to the tuned peer's."""
    gpu = common.gpu_peak()
    peak = gpu and gpu.flops
    runs = {}
    for run, side in sides.items():
        spread = window_spread(side["rates"], skip)
        utilisation = common.mfu(flops[run] * spread["median"], peak) if run in flops else None
        runs[run] = {"real_tokens_per_second_windows": side["rates"], "real_tokens_per_second": spread["median"],
                     "window_spread": spread, "model_flops_per_real_token": flops.get(run), "mfu": utilisation,
                     "attn_implementation": side["attn_implementation"], "setup": side["setup"],
                     "peak_memory": side["peak_memory"]}  # fmt: skip
    for found in runs.values():
        found["ratio_to_baseline"] = _ratio(found, runs.get(DEFAULTS), "real_tokens_per_second")
        found["ratio_to_tuned"] = _ratio(found, runs.get(TUNED), "real_tokens_per_second")
        found["mfu_over_tuned"] = _ratio(found, runs.get(TUNED), "mfu")
    return {"gpu_peak_flops": peak, "gpu": gpu and gpu.as_record(), "mfu_peak": MFU_PEAK,
            "model_flops_counting": common.MODEL_FLOPS_COUNTING, "runs": runs}  # fmt: skip


def _ratio(found: dict, other: dict | None, key: str) -> float | None:
    return found[key] / other[key] if other and found[key] is not None and other[key] else None


def _times(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def _row(config: str, batch: int, run: str, found: dict) -> str:
    """A run's line of the table the benchmark prints."""
    spread, memory, mfu = found["window_spread"], found["peak_memory"], found["mfu"]
    gib = None if memory is None else memory["allocated_bytes"] / 2**30
    return (f"| {config} | {batch} | {run} | {spread['median']:,.0f} ({spread['min']:,.0f}-{spread['max']:,.0f}) "
            f"| {_times(found['ratio_to_baseline'])} | {_times(found['ratio_to_tuned'])} "
            f"| {'-' if mfu is None else f'{100 * mfu:.1f}%'} "
            f"| {'-' if gib is None else f'{gib:.1f} GiB'} |")  # fmt: skip


def settings_of(record: dict[str, Any]) -> dict[str, Any]:
    """A Trainer record's settings, with `fp8` (whether it ran with `--fp8`, read from its command line where its
    settings do not say) and `rehearsal` (False where its settings do not say) always there."""
    settings = record["settings"]
    fp8 = settings.get("fp8", "--fp8" in record.get("command", "").split())
    return {**settings, "fp8": bool(fp8), "rehearsal": bool(settings.get("rehearsal"))}


def long_enough(record: dict[str, Any]) -> bool:
    """Whether a Trainer record ran long enough for its windows to agree, and is no rehearsal."""
    settings = settings_of(record)
    return (not settings["rehearsal"] and settings["steps"] >= MIN_STEPS
            and settings["logging_steps"] <= MAX_WINDOW_STEPS)  # fmt: skip


if __name__ == "__main__":
    main()
