"""What the benchmark scripts share: the real corpus, a ~50K byte-level BPE, packed blocks, timing helpers, the
model FLOPs of a pretraining step and the GPUs' peaks (for the model FLOPs utilisation), a process's peak GPU memory,
and where their raw records go (spanroberta.records, which also reads the load average).

Everything expensive is cached under benchmarks/.cache (gitignored): the tokenizer trained on the Reuters
bodies, and the packed blocks of each length as .npy files. Delete the folder to rebuild them.

$SPANROBERTA_BENCH_CORPUS names another text file for the step and Trainer benchmarks to read instead of the
Reuters bodies (the GPU check's CPU rehearsal reads the bundled demo corpus); it gets its own cache folder.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import PreTrainedTokenizerBase, RobertaTokenizerFast  # noqa: E402

from benchmarks import CACHE, ROOT  # noqa: E402

CORPUS = ROOT.parent / "shared" / "data" / "corpus"
REUTERS = CORPUS / "reuters_bodies.txt"
BENCH_CORPUS = Path(os.environ.get("SPANROBERTA_BENCH_CORPUS") or REUTERS)
if BENCH_CORPUS != REUTERS:
    CACHE = CACHE / f"corpus-{BENCH_CORPUS.stem}"
VOCAB_SIZE = 50265  # RoBERTa's (RoBERTa section 4.4)

# Dense bf16 tensor-core peaks in FLOP/s, from NVIDIA's data sheets, by a fragment of the device name: H100 SXM and
# H200 989 TFLOP/s, A100 312. An H100 PCIe (756) is not an SXM card: it gets no peak rather than a wrong one.
GPU_PEAK_BF16_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12}


def require_corpus() -> None:
    if not BENCH_CORPUS.is_file():
        raise SystemExit(f"The benchmarks read real text from {BENCH_CORPUS}, which is absent on this machine.")


def load_tokenizer() -> PreTrainedTokenizerBase:
    """A RoBERTa-style byte-level BPE of 50,265 ids trained on the Reuters bodies (about 10 s), cached."""
    path = CACHE / "bpe50k"
    if not (path / "tokenizer.json").is_file():
        from spanroberta.data.tokenizer import train_byte_level_bpe

        require_corpus()
        lines = BENCH_CORPUS.read_text(encoding="utf-8").split("\n")
        train_byte_level_bpe(lines, vocab_size=VOCAB_SIZE, show_progress=False).save_pretrained(path)
    return RobertaTokenizerFast.from_pretrained(path)


def load_blocks(tokenizer: PreTrainedTokenizerBase, length: int) -> np.ndarray:
    """int64 [N, length]: the corpus (the Reuters bodies) as spanroberta's full-sentences blocks (RoBERTa section 4.2), each
    exactly `length` tokens (the few shorter group tails are dropped). Cached per length."""
    path = CACHE / f"reuters_blocks_{length}.npy"
    if not path.is_file():
        from spanroberta.data.corpus import CorpusSource, load_documents
        from spanroberta.data.formats import prepare_blocks

        require_corpus()
        documents = load_documents(CorpusSource(train_files=[str(BENCH_CORPUS)]))
        blocks = prepare_blocks(documents, tokenizer, "full-sentences", max_seq_length=length)
        full = [row for row in blocks["input_ids"] if len(row) == length]
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, np.asarray(full, dtype=np.int64))
    return np.load(path)


# run_pretraining.py packs doc-sentences blocks group by group of this many documents (--documents_per_group's
# default): the spanbert recipe's rows in a FLOPs count come from one such group, packed as the run packs each.
PACKING_GROUP_DOCUMENTS = 1000


def packed_rows(tokenizer: PreTrainedTokenizerBase, length: int, count: int, seed: int = 0) -> list[dict]:
    """`count` rows of the spanbert recipe's input at random: the first PACKING_GROUP_DOCUMENTS documents of the
    corpus as packed doc-sentences rows of at most `length` tokens, each `{"input_ids", "sequence_lengths"}`."""
    from spanroberta.data.corpus import CorpusSource, load_documents
    from spanroberta.data.formats import prepare_blocks

    require_corpus()
    documents = load_documents(CorpusSource(train_files=[str(BENCH_CORPUS)]))
    documents = documents.select(range(min(PACKING_GROUP_DOCUMENTS, len(documents))))
    rows = prepare_blocks(documents, tokenizer, "doc-sentences", max_seq_length=length)
    picked = np.random.default_rng(seed).choice(len(rows), min(count, len(rows)), replace=False)
    return [{key: rows[int(i)][key] for key in ("input_ids", "sequence_lengths")} for i in sorted(picked)]


def encoder_settings(tokenizer: PreTrainedTokenizerBase, size: str) -> dict:
    """The encoder config of both sides of a comparison: a model size of spanroberta's recipes, with
    roberta-base's own settings (SpanRobertaConfig's defaults) given to the transformers baseline too."""
    from spanroberta.models.configuration_spanroberta import get_model_size

    return dict(
        **get_model_size(size),
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
        max_position_embeddings=514,
    )


def gpu_peak_flops() -> float | None:
    """The dense bf16 peak of this process's GPU; None on CPU or for a card not in GPU_PEAK_BF16_FLOPS."""
    import torch

    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name()
    if "PCIe" in name:
        return None
    return next((peak for fragment, peak in GPU_PEAK_BF16_FLOPS.items() if fragment in name), None)


def model_flops_per_step(config: Any, batch: dict[str, Any], dense_head: bool) -> float:
    """Training FLOPs (forward + backward = 3 x forward) of one step, counting matmuls only: "6N + the
    attention term + the heads at the predicted positions".

    Encoder: 6 x its matmul weights per token (embedding lookups are free), plus attention's two L x L matmuls
    (2 x 2 x L x H per token per layer forward), every layer counted in full, over the spans `attention_spans`
    gives: a packed row's documents each attend to themselves alone, an unpacked row attends to itself whole, as
    its padded row is computed. Heads: the MLM head at every position (`dense_head`, the baseline) or at the
    predicted positions only, plus the SBO head at its targets.
    """
    from spanroberta.models.configuration_spanroberta import IGNORE_INDEX

    spans = attention_spans(batch)
    tokens, squares = sum(spans), sum(span * span for span in spans)
    hidden, vocab, layers = config.hidden_size, config.vocab_size, config.num_hidden_layers
    per_layer = 4 * hidden * hidden + 2 * hidden * config.intermediate_size
    encoder = 6 * layers * per_layer * tokens + 3 * layers * 4 * hidden * squares
    mlm_rows = batch["input_ids"].numel() if dense_head else int((batch["labels"] != IGNORE_INDEX).sum())
    mlm_head = 6 * (hidden * hidden + hidden * vocab) * mlm_rows
    sbo_head = 0
    if "sbo_relative_positions" in batch:
        sbo_rows = int((batch["sbo_relative_positions"] != IGNORE_INDEX).sum())
        sbo_input = 2 * hidden + config.sbo_position_embedding_size
        sbo_head = 6 * (sbo_input * hidden + hidden * hidden + hidden * vocab) * sbo_rows
    return float(encoder + mlm_head + sbo_head)


def attention_spans(batch: dict[str, Any]) -> list[int]:
    """The lengths of the spans that attend to themselves in a batch: each document of a packed row (its
    `position_ids` restart at every document; the row's padding tail attends to nothing a model needs, so it is
    not counted), or each whole row of an unpacked batch, padding included, since its attention computes it."""
    from spanroberta.models.packed_attention import packed_sequence_offsets

    rows, length = batch["input_ids"].shape
    if "position_ids" not in batch:
        return [length] * rows
    mask = batch.get("attention_mask")
    offsets = packed_sequence_offsets(batch["position_ids"], mask).tolist()
    real = (mask if mask is not None else torch.ones_like(batch["input_ids"])).flatten().tolist()
    return [end - start for start, end in zip(offsets, offsets[1:]) if real[start]]


def peak_memory() -> dict[str, int] | None:
    """This process's peak CUDA memory so far: allocated by tensors and reserved by torch's caching allocator, in
    bytes (None without CUDA)."""
    if not torch.cuda.is_available():
        return None
    return {"allocated_bytes": torch.cuda.max_memory_allocated(), "reserved_bytes": torch.cuda.max_memory_reserved()}


def mfu(model_flops_per_second: float, peak: float | None) -> float | None:
    """Model FLOPs utilisation: the model FLOPs done per second over the card's peak (None without a peak)."""
    return model_flops_per_second / peak if peak else None


def batches_of_rows(blocks: np.ndarray, batch_size: int, count: int, seed: int = 0) -> list[list[list[int]]]:
    """`count` batches of `batch_size` random blocks, as lists of lists of ids (what a datasets row holds)."""
    rng = np.random.default_rng(seed)
    return [blocks[rng.choice(len(blocks), batch_size, replace=False)].tolist() for _ in range(count)]


@dataclass
class Timings:
    """Wall-clock seconds per repetition of one side of a comparison, and the CPU seconds this process used.

    On a machine shared with other jobs, CPU time is the steadier of the two: time spent waiting for a core
    does not count (time spent spinning in a parallel region while waiting for a descheduled thread does).
    """

    seconds: list[float]
    cpu_seconds: list[float] = field(default_factory=list)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu_seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def best(self) -> float:
        return min(self.seconds)

    def as_record(self) -> dict:
        """Every repetition and its summaries, for a raw record."""
        record = {"seconds": self.seconds, "median_seconds": self.median, "best_seconds": self.best}
        if self.cpu_seconds:
            record.update(cpu_seconds=self.cpu_seconds, median_cpu_seconds=self.cpu_median)
        return record


def time_alternately(
    sides: dict[str, Callable[[int], object]], repeats: int, warmup: int
) -> dict[str, Timings]:
    """Runs each side's `fn(i)` `warmup + repeats` times, interleaving the sides (their order reversed every
    round, so neither always runs right after the other), and returns the timed repeats.

    Interleaving matters on a shared machine: a burst of load from elsewhere hits both sides alike.
    """
    names = list(sides)
    timings = {name: Timings([]) for name in names}
    for i in range(warmup + repeats):
        for name in names if i % 2 == 0 else reversed(names):
            start, cpu_start = time.perf_counter(), time.process_time()
            sides[name](i)
            if i >= warmup:
                timings[name].seconds.append(time.perf_counter() - start)
                timings[name].cpu_seconds.append(time.process_time() - cpu_start)
    return timings


def announce(path: Path) -> None:
    """Prints where a benchmark wrote its raw record (the tables of RESULTS.md are generated from it)."""
    print(f"\nRecord: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


def parse_with_threads(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The benchmark's flags plus --threads, parsed, with torch's intra-op threads set as asked (CPU timings
    depend on them)."""
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's).")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    return args
