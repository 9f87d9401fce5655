#!/usr/bin/env python
"""Pretraining step throughput (CPU or GPU), spanroberta against the transformers baseline.

spanroberta: `SpanRobertaForPreTraining` (sparse MLM + SBO heads) fed by `DataCollatorForSpanMasking` (span
masking + SBO targets). Baseline: what a user would pick instead, `RobertaForMaskedLM` (dense MLM head) fed by
`DataCollatorForLanguageModeling` (token masking). Same encoder config, batch, sequence length, precision,
thread count and data (full-sentences blocks of the Reuters bodies, a 50,265-id byte-level BPE).

A step is what the Trainer does per batch: forward, backward, gradient clipping at 1.0, optimizer step, zero
grad, with the optimizer each side's Trainer builds from its default arguments (`PretrainingArguments` for
spanroberta, `TrainingArguments` for the baseline). Batches are collated beforehand and the collator's time
per batch is reported next to the step time: with the Trainer's default of no DataLoader workers, it adds to
every step.

    python -m benchmarks.speed.pretraining_step --config small --precision fp32 bf16 --threads 2
    python -m benchmarks.speed.pretraining_step --config base --steps 4 --warmup 1 --ablations
    python -m benchmarks.speed.pretraining_step --config small --profile   # top ops of one step per side

--ablations also times packed rows (documents of the Reuters corpus's mean length cut from the blocks) under
sdpa's block-diagonal mask and under varlen_fa2, each against the unpacked spanroberta side; `--ablations NAME ...`
times the ablations named only.

--profile records, per side, the host's time to issue a step, its wall time, its top ops and the device time (CPU
time on a CPU) of each of PROFILE_CATEGORIES over every op of the step.

On CUDA (picked automatically when present) the default precision is bf16 autocast, and each side's model
FLOPs utilisation is reported (see `model_flops_per_step`).

Each configuration and precision writes a raw record to benchmarks/results/pretraining-step/ (every step's wall and
CPU seconds, medians, ratios, the load average before and after), from which benchmarks/tables/generate.py generates
the tables of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from unittest import mock

import torch
from transformers import DataCollatorForLanguageModeling, RobertaConfig, RobertaForMaskedLM, Trainer, TrainingArguments

from benchmarks.speed import common
from spanroberta.models import modeling_span_heads
from spanroberta.models.configuration_spanroberta import SpanRobertaConfig
from spanroberta.data.collator import DataCollatorForSpanMasking
from spanroberta.models.modeling_spanroberta import SpanRobertaForPreTraining
from spanroberta.records import start_run, write_record
from spanroberta.pretraining.arguments import PretrainingArguments

SIDES = ("spanroberta", "baseline")


@dataclass(frozen=True)
class Ablation:
    """spanroberta with one part changed: config and collator arguments, forward arguments, a patch around the step."""

    config: dict = field(default_factory=dict)
    collator: dict = field(default_factory=dict)
    model_kwargs: dict = field(default_factory=dict)
    patch: Callable[[], AbstractContextManager] = nullcontext
    packed: bool = False  # rows cut into documents (`document_lengths`), each attending to itself


# Ablations, timed alongside with --ablations: where the span + SBO step's time goes (on a GPU as on a CPU).
ABLATIONS = {
    # Asking for the hidden states makes the encoder's last layer run at every position (modeling_spanroberta's
    # encode_at_positions does not apply); it costs no compute, they are kept for backward anyway.
    "spanroberta-full-last-layer": Ablation(model_kwargs={"output_hidden_states": True}),
    # The heads' decoders followed by a plain cross-entropy, instead of the fused one (fused on CPU only).
    "spanroberta-unfused-heads": Ablation(patch=lambda: mock.patch.object(
        modeling_span_heads, "fuses_decoder_cross_entropy", lambda *args: False)),  # fmt: skip
    # No SBO head and no SBO targets: what the span boundary objective costs a step.
    "spanroberta-no-sbo": Ablation(config={"use_sbo": False}, collator={"return_sbo_targets": False}),
    # Packed rows (documents of the Reuters corpus's mean length a row, `document_lengths`) under sdpa's
    # block-diagonal mask, and under varlen_fa2 with the collator's offsets (the flash kernel where it runs).
    "spanroberta-packed-mask": Ablation(config={"attn_implementation": "sdpa"}, packed=True),
    "spanroberta-packed-varlen_fa2": Ablation(config={"attn_implementation": "varlen_fa2"},
                                              collator={"return_sequence_offsets": True}, packed=True),  # fmt: skip
}
# Where a profiled step's time goes, by op name: aten ops only, since the kernels they launch are listed beside them
# and would count twice (an op's self time is its own kernels'). Attention (the flash, efficient, cuDNN and CPU
# kernels' ops), the GEMMs, and the optimizer with the gradient clipping (fused AdamW, the foreach ops).
PROFILE_CATEGORIES = {
    "attention": re.compile(r"^aten::\w*attention"),
    "gemm": re.compile(r"^aten::(mm|addmm|bmm|baddbmm|_scaled_mm)$"),
    "optimizer": re.compile(r"^aten::(_fused_adamw?_|_foreach_)"),
}
# Tokens of a Reuters document on average (3.3 documents a 512-token row of doc-sentences blocks).
MEAN_DOCUMENT_TOKENS = 154


def document_lengths(length: int, generator: random.Random) -> list[int]:
    """A row of `length` tokens cut into documents of MEAN_DOCUMENT_TOKENS on average (16 at least)."""
    lengths = []
    while sum(lengths) < length:
        lengths.append(max(16, round(generator.expovariate(1 / MEAN_DOCUMENT_TOKENS))))
    lengths[-1] -= sum(lengths) - length  # the overshoot is less than the last length
    return lengths


@dataclass
class Side:
    """One side of the comparison: its model, its Trainer-built optimizer and its batches, collated once."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    batches: list[dict[str, torch.Tensor]]
    collate_seconds: common.Timings
    ablation: Ablation


def build_side(name: str, encoder: dict, tokenizer, rows: list, device: str, output_dir: str) -> Side:
    """`name` is "baseline" or starts with "spanroberta"; `rows` are batches of blocks (lists of ids)."""
    torch.manual_seed(0)
    ablation = ABLATIONS.get(name, Ablation())
    if name.startswith("spanroberta"):
        model = SpanRobertaForPreTraining(SpanRobertaConfig(**encoder, **ablation.config))
        collator = DataCollatorForSpanMasking(tokenizer, label_layout="slots", first_position_id=2,
                                              **ablation.collator)  # fmt: skip
        args = PretrainingArguments(output_dir=output_dir, report_to=[])
    else:
        model = RobertaForMaskedLM(RobertaConfig(**encoder))
        collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
        args = TrainingArguments(output_dir=output_dir, report_to=[])
    model.to(device).train()
    optimizer = Trainer(model=model, args=args).create_optimizer()
    batches, seconds, generator = [], [], random.Random(0)
    for batch_rows in rows:
        examples = [{"input_ids": row} for row in batch_rows]
        if ablation.packed:
            examples = [{**example, "sequence_lengths": document_lengths(len(example["input_ids"]), generator)}
                        for example in examples]  # fmt: skip
        start = time.perf_counter()
        batch = collator(examples)
        seconds.append(time.perf_counter() - start)
        batches.append({key: value.to(device) for key, value in batch.items()})
    return Side(model, optimizer, batches, common.Timings(seconds), ablation)


def train_step(side: Side, batch: dict[str, torch.Tensor], device: str, bf16: bool, synchronize: bool = True) -> None:
    with side.ablation.patch():
        with torch.autocast(device, dtype=torch.bfloat16) if bf16 else nullcontext():
            loss = side.model(**batch, **side.ablation.model_kwargs).loss
        loss.backward()
    torch.nn.utils.clip_grad_norm_(side.model.parameters(), 1.0)
    side.optimizer.step()
    side.optimizer.zero_grad(set_to_none=True)
    if device == "cuda" and synchronize:
        torch.cuda.synchronize()


def profile_step(sides: dict[str, Side], device: str, bf16: bool, rows: int) -> dict:
    """Per side: the host's seconds to issue one step (until the step's Python returns, before waiting for the
    device), the step's wall seconds (after waiting), and the top ops of a profiled step by self device time (CPU
    time on CPU), printed as a table too."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    device_time = "self_device_time_total" if device == "cuda" else "self_cpu_time_total"
    found = {}
    for name, side in sides.items():
        train_step(side, side.batches[0], device, bf16)  # warm-up outside the trace and the clock
        start = time.perf_counter()
        train_step(side, side.batches[1 % len(side.batches)], device, bf16, synchronize=False)
        host = time.perf_counter() - start
        if device == "cuda":
            torch.cuda.synchronize()
        wall = time.perf_counter() - start
        with profile(activities=activities) as trace:
            train_step(side, side.batches[2 % len(side.batches)], device, bf16)
        ops = [{"name": event.key, "calls": event.count, "self_device_us": getattr(event, device_time),
                "self_cpu_us": event.self_cpu_time_total} for event in trace.key_averages()]  # fmt: skip
        top = sorted(ops, key=lambda op: op["self_device_us"], reverse=True)[:rows]
        found[name] = {"host_seconds": host, "wall_seconds": wall, "top_ops": top,
                       "category_seconds": category_seconds(ops)}  # fmt: skip
        print(f"\n### {name}: host {1000 * host:.1f} ms to issue a step, {1000 * wall:.1f} ms wall; top ops by self "
              "time\n")  # fmt: skip
        print(trace.key_averages().table(sort_by=device_time.replace("device", "cuda") if device == "cuda"
                                         else device_time, row_limit=rows))  # fmt: skip
    return found


def category_seconds(ops: list[dict]) -> dict[str, float | None]:
    """The seconds of self device time (CPU time on a CPU) of each of PROFILE_CATEGORIES over profiled ops (each a
    `top_ops` entry); None for a category no op falls in, which a list of the top ops alone cannot tell from 0."""
    return {category: sum(op["self_device_us"] for op in ops if pattern.match(op["name"])) / 1e6
            if any(pattern.match(op["name"]) for op in ops) else None for category, pattern in PROFILE_CATEGORIES.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", nargs="+", choices=list(common.CONFIGS), default=["small"])
    parser.add_argument("--precision", nargs="+", choices=["fp32", "bf16"], default=None)
    parser.add_argument("--steps", type=int, default=10, help="Timed steps per side.")
    parser.add_argument("--warmup", type=int, default=3, help="Untimed steps per side first.")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--ablations", nargs="*", choices=list(ABLATIONS), help=f"Also time these (no name: all of "
                        f"{', '.join(ABLATIONS)}).")  # fmt: skip
    parser.add_argument("--profile", action="store_true", help="Profile one step per side instead of timing: the "
                        "host time to issue it and the top ops, printed and written as a pretraining_step_profile "
                        "record.")  # fmt: skip
    parser.add_argument("--profile-rows", type=int, default=20)
    args = common.parse_with_threads(parser)
    precisions = args.precision or (["bf16"] if args.device == "cuda" else ["fp32", "bf16"])

    tokenizer = common.load_tokenizer()
    for config_name in args.config:
        size, length, batch_size = common.CONFIGS[config_name]
        encoder = common.encoder_settings(tokenizer, size)
        # A handful of distinct batches (masks differ too), cycled through, keeps memory bounded.
        rows = common.batches_of_rows(common.load_blocks(tokenizer, length), batch_size, count=4)
        for precision in precisions:
            bf16 = precision == "bf16"
            started = start_run()
            with tempfile.TemporaryDirectory() as output_dir:
                names = SIDES + (() if args.ablations is None else tuple(args.ablations or ABLATIONS))
                sides = {name: build_side(name, encoder, tokenizer, rows, args.device, output_dir) for name in names}
                if args.profile:
                    print(f"\n## {config_name} (seq {length}, batch {batch_size}), {precision}, {args.device}")
                    profiled = {"sides": profile_step(sides, args.device, bf16, args.profile_rows)}
                    settings = {"config": config_name, "precision": precision, "device": args.device,
                                "sides": list(names), "rows": args.profile_rows}  # fmt: skip
                    name = f"{config_name}-{precision}-{args.device}"
                    path = write_record("pretraining_step_profile", settings, profiled, started=started, name=name)
                    common.announce(path)
                    continue
                steps = {name: lambda i, side=side: train_step(side, side.batches[i % len(side.batches)], args.device,
                                                                bf16) for name, side in sides.items()}  # fmt: skip
                timings = common.time_alternately(steps, repeats=args.steps, warmup=args.warmup)
            settings = {"config": config_name, "model_size": size, "seq_length": length, "batch_size": batch_size,
                        "precision": precision, "device": args.device, "steps": args.steps, "warmup": args.warmup,
                        "threads": torch.get_num_threads(), "sides": list(names),
                        "corpus": common.BENCH_CORPUS.name}  # fmt: skip
            results = measure(batch_size * length, sides, timings, args.device)
            report(settings, results)
            name = f"{config_name}-{precision}-{args.device}"
            common.announce(write_record("pretraining_step", settings, results, started=started, name=name))
            del sides


def measure(tokens: int, sides: dict[str, Side], timings: dict[str, common.Timings], device: str) -> dict:
    """Every side's timings, tokens/s and collation time, spanroberta's ratios to the baseline and the ablations,
    and on CUDA each side's model FLOPs and MFU."""
    results: dict = {"tokens_per_step": tokens, "sides": {}}
    for name, t in timings.items():
        results["sides"][name] = {**t.as_record(), "tokens_per_second_median": tokens / t.median,
                                  "tokens_per_second_best": tokens / t.best,
                                  "collate_seconds": sides[name].collate_seconds.seconds}  # fmt: skip
    span, base = timings["spanroberta"], timings["baseline"]
    results["ratio_median"] = base.median / span.median
    results["ratio_best"] = base.best / span.best
    results["ratio_cpu_median"] = base.cpu_median / span.cpu_median
    results["ablation_ratios"] = {name: {"median": timings[name].median / span.median,
                                         "cpu_median": timings[name].cpu_median / span.cpu_median}
                                  for name in timings.keys() - set(SIDES)}  # fmt: skip
    if device == "cuda":
        gpu = common.gpu_peak()
        results.update(gpu_peak_flops=gpu.flops, gpu=gpu.as_record(),
                       model_flops_counting=common.MODEL_FLOPS_COUNTING)  # fmt: skip
        for name in SIDES:
            side = sides[name]
            flops = sum(common.model_flops_per_step(side.model.config, b, name == "baseline") for b in side.batches)
            flops /= len(side.batches)
            achieved = flops / timings[name].median
            results["sides"][name].update(model_flops_per_step=flops, flops_per_second=achieved,
                                          mfu=common.mfu(achieved, gpu.flops))  # fmt: skip
    return results


def report(settings: dict, results: dict) -> None:
    print(f"\n## {settings['config']} (seq {settings['seq_length']}, batch {settings['batch_size']}), "
          f"{settings['precision']}, {settings['device']}: {settings['steps']} timed steps per side\n")  # fmt: skip
    print("| side | tokens/s (median) | tokens/s (best) | step s (median) | CPU s/step (median) | collate s/batch |")
    print("|---|---|---|---|---|---|")
    for name, side in results["sides"].items():
        print(f"| {name} | {side['tokens_per_second_median']:,.0f} | {side['tokens_per_second_best']:,.0f} "
              f"| {side['median_seconds']:.3f} | {side['median_cpu_seconds']:.2f} "
              f"| {statistics.median(side['collate_seconds']):.4f} |")  # fmt: skip
    print(f"\nspanroberta / baseline tokens/s: {results['ratio_median']:.2f}x (medians), "
          f"{results['ratio_best']:.2f}x (minimums); CPU time per step: {results['ratio_cpu_median']:.2f}x")
    for name, gain in results["ablation_ratios"].items():
        print(f"spanroberta / {name}: {gain['median']:.2f}x (median wall), {gain['cpu_median']:.2f}x (median CPU)")
    for name in SIDES:
        if results["sides"][name].get("mfu") is not None:
            print(f"{name}: MFU {100 * results['sides'][name]['mfu']:.1f}%")


if __name__ == "__main__":
    main()
