#!/usr/bin/env python
"""One pretraining head's decoder + cross-entropy, forward and backward: spanroberta's fused
`_DecoderCrossEntropy` against F.linear then F.cross_entropy(logits.float()), as the heads computed it before.

A step of the whole model moves by a few percent from run to run on a shared machine; this isolates the part
the fusion changes. Shapes are those of the step benchmark's heads: about 580 targets per head at hidden size
256 (small), about 300 at 768 (base), a 50,265-id vocabulary; a Linear(hidden, hidden) in front stands for the
head's transform. Timed alternately, in CPU seconds of this process.

    python -m benchmarks.speed.heads --threads 1

Writes a raw record to benchmarks/results/heads/ (every repetition's CPU seconds per shape and precision, medians,
speed-ups, the load average before and after).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import torch
import torch.nn.functional as F

from benchmarks.speed.common import VOCAB_SIZE, announce, parse_with_threads, time_alternately
from spanroberta.models.modeling_span_heads import fused_decoder_cross_entropy
from spanroberta.records import start_run, write_record

SHAPES = {"small": (583, 256), "base": (307, 768)}


def plain(x: torch.Tensor, decoder: torch.nn.Linear, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(decoder(x).float(), targets, reduction="sum")


def fused(x: torch.Tensor, decoder: torch.nn.Linear, targets: torch.Tensor) -> torch.Tensor:
    return fused_decoder_cross_entropy(x, decoder, targets)[1]


def time_heads(rows: int, hidden: int, precision: str, repeats: int) -> dict[str, list[float]]:
    """CPU seconds of each repetition of both heads, alternated (the first round warms up)."""
    torch.manual_seed(0)
    transform = torch.nn.Linear(hidden, hidden)
    decoder = torch.nn.Linear(hidden, VOCAB_SIZE)
    x = torch.randn(rows, hidden)
    targets = torch.randint(0, VOCAB_SIZE, (rows,))

    def step(head: Callable) -> Callable[[int], None]:
        def run(_: int) -> None:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
                loss = head(transform(x), decoder, targets)
            (loss / rows).backward()

        return run

    timings = time_alternately({"plain": step(plain), "fused": step(fused)}, repeats=repeats, warmup=1)
    return {name: timing.cpu_seconds for name, timing in timings.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=10)
    args = parse_with_threads(parser)
    started = start_run()
    results: dict = {"shapes": []}
    print("| shape | precision | plain s (median) | fused s (median) | fused speed-up |")
    print("|---|---|---|---|---|")
    for name, (rows, hidden) in SHAPES.items():
        for precision in ("bf16", "fp32"):
            seconds = time_heads(rows, hidden, precision, args.repeats)
            plain_s, fused_s = statistics.median(seconds["plain"]), statistics.median(seconds["fused"])
            results["shapes"].append({
                "shape": name, "rows": rows, "hidden": hidden, "precision": precision,
                "plain_cpu_seconds": seconds["plain"], "fused_cpu_seconds": seconds["fused"],
                "plain_median_cpu_seconds": plain_s, "fused_median_cpu_seconds": fused_s, "speed_up": plain_s / fused_s,
            })  # fmt: skip
            speed_up = results["shapes"][-1]["speed_up"]
            print(f"| {name} ({rows} x {hidden}) | {precision} | {plain_s:.3f} | {fused_s:.3f} | {speed_up:.2f}x |")
    settings = {"repeats": args.repeats, "threads": torch.get_num_threads(), "vocab_size": VOCAB_SIZE}
    announce(write_record("heads", settings, results, started=started))


if __name__ == "__main__":
    main()
