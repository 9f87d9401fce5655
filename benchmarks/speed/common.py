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
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
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
# The step and Trainer benchmarks' configurations: (model size, sequence length, batch size per device). small and
# base fit a CPU; the -gpu ones are the Trainer pairs' GPU batches; tiny is the GPU check's CPU rehearsal.
CONFIGS = {"tiny": ("tiny", 64, 4), "small": ("small", 128, 32), "base": ("base", 512, 4),
           "base-gpu": ("base", 512, 32), "large-gpu": ("large", 512, 16)}  # fmt: skip

# Dense bf16 tensor-core peaks in FLOP/s by exact GPU model, from NVIDIA's data sheets ("NVIDIA H100 Tensor Core GPU"
# and "NVIDIA H200 Tensor Core GPU", whose bf16 figures are given with 2:4 sparsity: halved here; "NVIDIA A100 Tensor
# Core GPU", dense): H100 SXM 989 TFLOP/s, H100 PCIe 756, H100 NVL 835, H200 SXM 989, H200 NVL 835, A100 (SXM and
# PCIe) 312. The NVL figures are the data sheets' 1,671 with sparsity, halved.
GPU_PEAK_BF16_FLOPS = {"H100 SXM": 989e12, "H100 PCIe": 756e12, "H100 NVL": 835e12, "H200 SXM": 989e12,
                       "H200 NVL": 835e12, "A100": 312e12}  # fmt: skip


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
    """int64 [N, length]: the corpus (the Reuters bodies) as spanroberta's full-sentences blocks (RoBERTa section
    4.2), each exactly `length` tokens (the few shorter group tails are dropped). Cached per length."""
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

    return dict(**get_model_size(size), vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, type_vocab_size=1,
                layer_norm_eps=1e-5, max_position_embeddings=514)  # fmt: skip


@dataclass(frozen=True)
class GpuPeak:
    """A GPU as the MFU reads it: the name torch reports, the model it is (a key of GPU_PEAK_BF16_FLOPS, or a MIG
    slice's name), its dense bf16 peak, and why it has none where it has none."""

    device: str
    model: str | None
    flops: float | None
    reason: str | None = None

    def as_record(self) -> dict[str, Any]:
        return {"device": self.device, "model": self.model, "peak_flops": self.flops, "no_peak_reason": self.reason}


def gpu_model(device: str, visible_devices: str = "") -> GpuPeak:
    """The model of a GPU named `device` (torch.cuda.get_device_name: "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe",
    "NVIDIA H100 NVL", "NVIDIA H200", "NVIDIA H200 NVL", "NVIDIA A100-SXM4-80GB", ...) and its peak. A MIG slice
    (its name ends in the profile, "... MIG 1g.10gb", or CUDA_VISIBLE_DEVICES, `visible_devices`, names a MIG-
    device) is named and refused: it owns a share of the chip's SMs, so the chip's peak would understate its MFU."""
    name = device.lower()
    mig = re.search(r"\bmig\s+(\d+g\.\d+gb)", name)
    if mig or visible_devices.strip().startswith("MIG-"):
        slice_name = f"MIG {mig.group(1)}" if mig else "MIG slice"
        return GpuPeak(device, slice_name, None, "a MIG slice computes on a share of the chip; no MFU is taken")
    if re.search(r"\bh[12]00\b", name):
        chip = "H100" if re.search(r"\bh100\b", name) else "H200"
        if "nvl" in name:
            model = f"{chip} NVL"
        elif "pcie" in name:
            model = f"{chip} PCIe"
        elif chip == "H200" or "hbm3" in name or "sxm" in name:  # the H200's SXM board is named "NVIDIA H200"
            model = f"{chip} SXM"
        else:
            model = None
    else:
        model = "A100" if re.search(r"\ba100\b", name) else None
    if model not in GPU_PEAK_BF16_FLOPS:
        return GpuPeak(device, model, None, "no dense bf16 peak is known for this GPU")
    return GpuPeak(device, model, GPU_PEAK_BF16_FLOPS[model])


def gpu_peak() -> GpuPeak | None:
    """This process's GPU (`gpu_model`); None on CPU."""
    if not torch.cuda.is_available():
        return None
    return gpu_model(torch.cuda.get_device_name(), os.environ.get("CUDA_VISIBLE_DEVICES", ""))


# How model_flops_per_step counts, named in every record that stores an MFU (`model_flops_counting`); records without
# the field counted every layer at every position and the sparse heads at their targets.
MODEL_FLOPS_COUNTING = ("as the kernels run it: the efficient path's last layer with keys and values at every token, "
                        "queries, output projection and feed-forward at the positions the heads read; the sparse heads "
                        "at every prediction slot")  # fmt: skip


def model_flops_per_step(config: Any, batch: dict[str, Any], dense_head: bool) -> float:
    """Training FLOPs (forward + backward = 3 x forward) of one step, counting matmuls only, as the kernels run them
    (MODEL_FLOPS_COUNTING): "6N + the attention term + the heads where they run".

    Encoder: 6 x its matmul weights per token (embedding lookups are free), plus attention's two L x L matmuls
    (2 x 2 x L x H per token per layer forward), over the spans `attention_spans` gives: a packed row's documents
    each attend to themselves alone, an unpacked row attends to itself whole, as its padded row is computed.
    `dense_head` (the transformers baseline): every layer at every token, the MLM head at every position. Otherwise
    spanroberta's model, given its batch in prediction slots (`mlm_positions`): where the efficient path runs
    (`last_layer_at_positions`), the last layer computes keys and values at every token but its queries, attention
    output and feed-forward only at the positions the heads read (`read_positions`); the MLM head, and the SBO head
    where the batch has SBO targets, run at every slot, used or not, as their fixed shapes make them.
    """
    spans = attention_spans(batch)
    tokens, squares = sum(spans), sum(span * span for span in spans)
    hidden, vocab, layers = config.hidden_size, config.vocab_size, config.num_hidden_layers
    key_value, query_output = 2 * hidden * hidden, 2 * hidden * hidden
    feed_forward = 2 * hidden * config.intermediate_size
    full_layer = 6 * (key_value + query_output + feed_forward) * tokens + 3 * 4 * hidden * squares
    mlm_transform_decoder = hidden * hidden + hidden * vocab
    if dense_head:
        return float(layers * full_layer + 6 * mlm_transform_decoder * batch["input_ids"].numel())
    rows, slots = batch["mlm_positions"].shape
    reads = read_positions(config, batch)
    last_layer = full_layer
    if last_layer_at_positions(config):
        keys = document_lengths_at(batch).gather(1, reads)  # the keys each query attends to
        last_layer = (6 * key_value * tokens + 6 * (query_output + feed_forward) * reads.numel()
                      + 3 * 4 * hidden * int(keys.sum()))  # fmt: skip
    heads = 6 * mlm_transform_decoder * rows * slots
    if "sbo_relative_positions" in batch:
        sbo_input = 2 * hidden + config.sbo_position_embedding_size
        heads += 6 * (sbo_input * hidden + hidden * hidden + hidden * vocab) * rows * slots
    if _has_sentence_head(config):
        heads += 6 * (hidden * hidden + 2 * hidden) * rows  # the pooler and the two-way classifier
    return float((layers - 1) * full_layer + last_layer + heads)


def last_layer_at_positions(config: Any) -> bool:
    """Whether spanroberta's efficient path computes the last layer at the heads' positions only, as
    modeling_spanroberta.reads_last_layer_at_positions decides for a training step: turned on, and an attention that
    takes a dense mask (an unset one is transformers' default, sdpa)."""
    from spanroberta.models.packed_attention import takes_dense_mask

    implementation = getattr(config, "_attn_implementation", None) or "sdpa"
    return getattr(config, "efficient_pretraining", True) and takes_dense_mask(SimpleNamespace(
        _attn_implementation=implementation))  # fmt: skip


def _has_sentence_head(config: Any) -> bool:
    return getattr(config, "sentence_objective", "none") != "none"


def read_positions(config: Any, batch: dict[str, Any]) -> torch.Tensor:
    """Long [batch, n]: where spanroberta's heads read the encoder, as SpanPreTrainingMixin._read_positions lays
    them out: the MLM slots, the SBO boundaries of every slot (where the batch has SBO targets) and the first token
    (with a sentence head); unused slots read position 0."""
    reads = [batch["mlm_positions"]]
    if "sbo_relative_positions" in batch:
        reads += [batch["sbo_left_positions"], batch["sbo_right_positions"]]
    if _has_sentence_head(config):
        reads.append(torch.zeros_like(batch["mlm_positions"][:, :1]))
    return torch.cat(reads, dim=1).clamp(min=0)


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


def document_lengths_at(batch: dict[str, Any]) -> torch.Tensor:
    """Long [batch, length]: at each position, the length of the span it attends within (`attention_spans`): its
    document in a packed row, the whole row otherwise."""
    from spanroberta.models.packed_attention import packed_sequence_offsets

    rows, length = batch["input_ids"].shape
    if "position_ids" not in batch:
        return torch.full((rows, length), length, device=batch["input_ids"].device)
    offsets = packed_sequence_offsets(batch["position_ids"], batch.get("attention_mask")).long()
    document = torch.searchsorted(offsets, torch.arange(rows * length, device=offsets.device),
                                right=True) - 1
    return (offsets[document + 1] - offsets[document]).view(rows, length)


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


def time_alternately(sides: dict[str, Callable[[int], object]], repeats: int, warmup: int) -> dict[str, Timings]:
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
