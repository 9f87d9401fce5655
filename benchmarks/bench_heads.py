#!/usr/bin/env python
"""One pretraining head's decoder + cross-entropy, forward and backward: spanroberta's fused
`_DecoderCrossEntropy` against F.linear then F.cross_entropy(logits.float()), as the heads computed it before.

A step of the whole model moves by a few percent from run to run on a shared machine; this isolates the part
the fusion changes. Shapes are those of the step benchmark's heads: about 580 targets per head at hidden size
256 (small), about 300 at 768 (base), a 50,265-id vocabulary; a Linear(hidden, hidden) in front stands for the
head's transform. Timed alternately, in CPU seconds of this process.

    python benchmarks/bench_heads.py --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from common import VOCAB_SIZE, machine_summary

from spanroberta.models.modeling_efficient import fused_decoder_cross_entropy

SHAPES = {"small": (583, 256), "base": (307, 768)}


def plain(x: torch.Tensor, decoder: torch.nn.Linear, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(decoder(x).float(), targets, reduction="sum")


def fused(x: torch.Tensor, decoder: torch.nn.Linear, targets: torch.Tensor) -> torch.Tensor:
    return fused_decoder_cross_entropy(x, decoder, targets)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's).")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(machine_summary())
    print("\n| shape | precision | plain s (median) | fused s (median) | fused speed-up |")
    print("|---|---|---|---|---|")
    for name, (rows, hidden) in SHAPES.items():
        torch.manual_seed(0)
        transform = torch.nn.Linear(hidden, hidden)
        decoder = torch.nn.Linear(hidden, VOCAB_SIZE)
        x = torch.randn(rows, hidden)
        targets = torch.randint(0, VOCAB_SIZE, (rows,))
        for precision in ("bf16", "fp32"):
            seconds = {plain: [], fused: []}
            for i in range(args.repeats + 1):  # the first round warms up
                for head in (plain, fused) if i % 2 else (fused, plain):
                    start = time.process_time()
                    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
                        loss = head(transform(x), decoder, targets)
                    (loss / rows).backward()
                    if i:
                        seconds[head].append(time.process_time() - start)
            plain_s, fused_s = statistics.median(seconds[plain]), statistics.median(seconds[fused])
            speed_up = plain_s / fused_s
            print(f"| {name} ({rows} x {hidden}) | {precision} | {plain_s:.3f} | {fused_s:.3f} | {speed_up:.2f}x |")


if __name__ == "__main__":
    main()
