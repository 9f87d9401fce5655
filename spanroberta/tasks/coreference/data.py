"""Coreference inputs and outputs for run_coref.py: segmenting documents for the encoder (Joshi et al. 2019, "BERT
for Coreference Resolution: Baselines and Analysis", section 2), batching them, and turning the model's
antecedents into clusters. Reading and writing documents is `documents`'s, GAP is `gap`'s; their public
names are importable from here too.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import Dataset
from transformers import PreTrainedTokenizerBase

from spanroberta.tasks.coreference.documents import (
    CorefDocument,
    Span,
    coref_files,
    read_conll_file,
    read_coref_documents,
    read_jsonlines_file,
    write_coref_documents,
)
from spanroberta.tasks.coreference.gap import GapExample, gap_decision, read_gap, write_gap_predictions

# Segmenting and encoding (Joshi et al. 2019 section 2).


def split_into_segments(sentence_ends: Sequence[bool], word_ends: Sequence[bool], budget: int) -> list[tuple[int, int]]:
    """Non-overlapping (start, end) subword ranges (ends inclusive) of at most `budget` subwords covering the
    document, each ending at a sentence end where one fits, else at a word end, else anywhere (a word longer than a
    segment); Joshi et al.'s `split_into_segments`."""
    segments, start, total = [], 0, len(sentence_ends)
    while start < total:
        last = min(start + budget, total) - 1
        end = next((i for i in range(last, start - 1, -1) if sentence_ends[i]), None)
        if end is None:
            end = next((i for i in range(last, start - 1, -1) if word_ends[i]), last)
        segments.append((start, end))
        start = end + 1
    return segments


def special_tokens_around(tokenizer: PreTrainedTokenizerBase) -> tuple[list[int], list[int]]:
    """The ids the tokenizer puts before and after a single sequence ([CLS] / [SEP] for BERT, <s> / </s> for
    RoBERTa), found by encoding a word with and without them (transformers 5's tokenizers have no
    `build_inputs_with_special_tokens`)."""
    bare = tokenizer("a", add_special_tokens=False)["input_ids"]
    full = tokenizer("a")["input_ids"]
    start = next(i for i in range(len(full) - len(bare) + 1) if full[i:i + len(bare)] == bare)
    return full[:start], full[start + len(bare):]


def encode_document(document: CorefDocument, tokenizer: PreTrainedTokenizerBase, max_segment_length: int) -> dict:
    """The model's inputs for one document: its segments (input_ids, attention_mask, content_mask: one list per
    segment, special tokens added), each subword's sentence, word and speaker (sentence_map, word_map,
    speaker_ids), and the gold mentions as subword spans (gold_starts, gold_ends, gold_cluster_ids from 1)."""
    words = [word for sentence in document.sentences for word in sentence]
    # A leading space makes every word tokenized as inside running text (byte-level BPE and SentencePiece mark it;
    # WordPiece ignores it).
    pieces = tokenizer([" " + word for word in words], add_special_tokens=False)["input_ids"]
    subwords, word_map, sentence_map, speaker_ids, word_first, word_last = [], [], [], [], [], []
    speaker_index: dict[str, int] = {}
    word = 0
    for sentence_index, (sentence, speakers) in enumerate(zip(document.sentences, document.speakers)):
        for speaker in speakers:
            ids = pieces[word] or [tokenizer.unk_token_id]
            word_first.append(len(subwords))
            subwords += ids
            word_last.append(len(subwords) - 1)
            word_map += [word] * len(ids)
            sentence_map += [sentence_index] * len(ids)
            speaker_ids += [speaker_index.setdefault(speaker, len(speaker_index))] * len(ids)
            word += 1
    sentence_ends = [i == len(sentence_map) - 1 or sentence_map[i + 1] != s for i, s in enumerate(sentence_map)]
    word_ends = [i == len(word_map) - 1 or word_map[i + 1] != w for i, w in enumerate(word_map)]
    prefix, suffix = special_tokens_around(tokenizer)
    budget = max_segment_length - len(prefix) - len(suffix)
    features: dict[str, Any] = {"input_ids": [], "attention_mask": [], "content_mask": []}
    for start, end in split_into_segments(sentence_ends, word_ends, budget):
        features["input_ids"].append(prefix + subwords[start:end + 1] + suffix)
        features["attention_mask"].append([1] * (len(prefix) + end + 1 - start + len(suffix)))
        features["content_mask"].append([0] * len(prefix) + [1] * (end + 1 - start) + [0] * len(suffix))
    mentions = [(word_first[s], word_last[e], cluster_id)
                for cluster_id, cluster in enumerate(document.clusters, start=1) for s, e in cluster]  # fmt: skip
    features.update(sentence_map=sentence_map, word_map=word_map, speaker_ids=speaker_ids,
                    gold_starts=[m[0] for m in mentions], gold_ends=[m[1] for m in mentions],
                    gold_cluster_ids=[m[2] for m in mentions])  # fmt: skip
    return features


class TrainingWindows(Dataset):
    """Encoded documents for training: a document of more than `max_segments` segments gives a random window of
    that many consecutive segments each time it is read, with the gold mentions inside it (Joshi et al.'s
    `truncate_example`, which bounds the memory a long document takes)."""

    def __init__(self, features: Sequence[dict], max_segments: int):
        self.features, self.max_segments = list(features), max_segments

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, index: int) -> dict:
        features = self.features[index]
        num_segments = len(features["input_ids"])
        if num_segments <= self.max_segments:
            return features
        first = random.randint(0, num_segments - self.max_segments)
        kept = slice(first, first + self.max_segments)
        offset = sum(sum(mask) for mask in features["content_mask"][:first])
        length = sum(sum(mask) for mask in features["content_mask"][kept])
        window = {name: features[name][kept] for name in ("input_ids", "attention_mask", "content_mask")}
        for name in ("sentence_map", "word_map", "speaker_ids"):
            window[name] = features[name][offset:offset + length]
        inside = [i for i, (s, e) in enumerate(zip(features["gold_starts"], features["gold_ends"]))
                  if s >= offset and e < offset + length]  # fmt: skip
        window["gold_starts"] = [features["gold_starts"][i] - offset for i in inside]
        window["gold_ends"] = [features["gold_ends"][i] - offset for i in inside]
        window["gold_cluster_ids"] = [features["gold_cluster_ids"][i] for i in inside]
        return window


@dataclass
class DocumentCollator:
    """One document a batch (as Joshi et al. train): its segments padded to the longest, everything as tensors."""

    pad_token_id: int

    def __call__(self, features: Sequence[dict]) -> dict[str, torch.Tensor]:
        if len(features) != 1:
            raise ValueError(f"Coreference batches hold one document, got {len(features)}.")
        (document,) = features
        width = max(len(ids) for ids in document["input_ids"])
        batch = {}
        for name, fill in (("input_ids", self.pad_token_id), ("attention_mask", 0), ("content_mask", 0)):
            batch[name] = torch.tensor([row + [fill] * (width - len(row)) for row in document[name]], dtype=torch.long)
        for name in ("sentence_map", "word_map", "speaker_ids", "gold_starts", "gold_ends", "gold_cluster_ids"):
            batch[name] = torch.tensor(document[name], dtype=torch.long)
        return batch


# From the model's antecedents to clusters of words.


def predicted_clusters(output: Any, word_map: Sequence[int], keep_singletons: bool = False) -> list[list[Span]]:
    """Clusters of (start, end) word spans from a CorefModel output: each kept span is linked to its best-scoring
    antecedent unless the dummy scores best, and linked spans form clusters (Lee et al.'s `get_predicted_clusters`).
    With `keep_singletons`, each kept span with a positive mention score that is linked to nothing is a cluster."""
    starts, ends = output.top_span_starts.tolist(), output.top_span_ends.tolist()
    best = output.antecedent_scores.argmax(1).tolist()
    antecedents = output.top_antecedents.tolist()
    cluster_of: dict[int, int] = {}
    clusters: list[list[int]] = []
    for span, choice in enumerate(best):
        if choice == 0:
            continue
        antecedent = antecedents[span][choice - 1]
        if antecedent not in cluster_of:
            cluster_of[antecedent] = len(clusters)
            clusters.append([antecedent])
        cluster_of[span] = cluster_of[antecedent]
        clusters[cluster_of[span]].append(span)
    if keep_singletons:
        scores = output.top_span_mention_scores.tolist()
        clusters += [[span] for span in range(len(starts)) if span not in cluster_of and scores[span] > 0]
    return [sorted({(word_map[starts[s]], word_map[ends[s]]) for s in cluster}) for cluster in clusters]


__all__ = [
    "CorefDocument", "DocumentCollator", "GapExample", "Span", "TrainingWindows", "coref_files", "encode_document",
    "gap_decision", "predicted_clusters", "read_conll_file", "read_coref_documents", "read_gap",
    "read_jsonlines_file", "special_tokens_around", "split_into_segments", "write_coref_documents",
    "write_gap_predictions",
]  # fmt: skip
