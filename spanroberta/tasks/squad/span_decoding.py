"""Extractive QA's windows and span decoding, shared by the `question-answering` pipeline and run_squad.py.

Standard library, numpy and transformers only, and no absolute import of spanroberta: run_squad.py copies this file
beside the pipeline's into every checkpoint it writes, where the pipeline imports it relatively.

Decoding follows BERT's SQuAD recipe (Devlin et al. 2019, section 4.2-4.3), which SpanBERT and RoBERTa
reuse: a context too long for one window is split into overlapping windows; a span scores
start_score[s] + end_score[e] over context tokens with e >= s and at most `max_answer_length` tokens; the best
span over all windows wins; the no-answer ("null") score is the score of the span that starts and ends on
the first token (`<s>` for RoBERTa, `[CLS]` for BERT), taken from the window where it is lowest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from transformers import BatchEncoding, PreTrainedTokenizerBase

Offsets = Sequence[tuple[int, int] | None]


# --- windows ---


def truncate_question(tokenizer: PreTrainedTokenizerBase, question: str, max_query_length: int) -> tuple[str, int]:
    """The question cut after its first `max_query_length` tokens (BERT's max_query_length), without its
    leading whitespace (some SQuAD questions start with many spaces, which would only waste the window), and
    its length in tokens."""
    question = question.lstrip()
    offsets = tokenizer(question, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    if len(offsets) <= max_query_length:
        return question, len(offsets)
    return question[: offsets[max_query_length - 1][1]], max_query_length


def context_room(tokenizer: PreTrainedTokenizerBase, question: str, max_seq_length: int, max_query_length: int) -> int:
    """How many context tokens a window of `max_seq_length` tokens holds beside this question (as cut by
    `truncate_question`) and the special tokens: what each window's context stride must stay below."""
    _, question_length = truncate_question(tokenizer, question, max_query_length)
    return max_seq_length - question_length - tokenizer.num_special_tokens_to_add(pair=True)


def encode_windows(
    tokenizer: PreTrainedTokenizerBase,
    questions: Sequence[str],
    contexts: Sequence[str],
    max_seq_length: int,
    doc_stride: int,
    max_query_length: int,
    padding: bool | str = False,
) -> BatchEncoding:
    """Tokenizes (question, context) pairs, question first. A context that does not fit splits into windows
    of at most `max_seq_length` tokens, consecutive windows sharing `doc_stride` context tokens (the meaning
    of `stride` in transformers' tokenizers and run_qa.py; BERT's doc_stride was the step between window
    starts instead). Each window holds its own question in full (cut at `max_query_length` tokens), so the
    room left for the context depends on the question's real length. `overflow_to_sample_mapping` gives each
    window's pair and `offset_mapping` its character offsets."""
    if tokenizer.padding_side != "right":
        raise ValueError("Extractive QA needs a tokenizer that pads on the right (the question comes first).")
    cut = [truncate_question(tokenizer, question, max_query_length) for question in questions]
    longest = max((length for _, length in cut), default=0)
    room = max_seq_length - longest - tokenizer.num_special_tokens_to_add(pair=True)
    if room < 1 or doc_stride >= room:
        # The tokenizer itself would stop the process with a Rust panic, which `except Exception` cannot catch.
        raise ValueError(
            f"doc_stride ({doc_stride}) must be smaller than the room a window leaves for the context: "
            f"max_seq_length ({max_seq_length}) less the longest question ({longest} tokens, cut at "
            f"{max_query_length}) and {tokenizer.num_special_tokens_to_add(pair=True)} special tokens = {room}. "
            "Lower doc_stride, or raise max_seq_length."
        )
    return tokenizer(
        [question for question, _ in cut],
        list(contexts),
        truncation="only_second",
        max_length=max_seq_length,
        stride=doc_stride,
        padding=padding,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
    )


def context_offsets(encoding: BatchEncoding, window: int) -> list[tuple[int, int] | None]:
    """Character offsets of a window's context tokens into the context; None for the question, special
    tokens and padding, which can never be part of an answer."""
    return [
        (int(offset[0]), int(offset[1])) if sequence_id == 1 else None
        for offset, sequence_id in zip(encoding["offset_mapping"][window], encoding.sequence_ids(window))
    ]


def cls_index(input_ids: Sequence[int], cls_token_id: int | None) -> int:
    """Position of the first token (<s> / [CLS]), whose start/end scores make the no-answer score."""
    input_ids = list(input_ids)
    return input_ids.index(cls_token_id) if cls_token_id in input_ids else 0


# --- decoding ---


@dataclass
class WindowScores:
    """What the model said about one window: a start and an end score per token, and which context
    characters each token covers (None where a token cannot be part of an answer)."""

    start_scores: np.ndarray
    end_scores: np.ndarray
    offsets: Offsets
    cls_index: int = 0


@dataclass
class SpanPrediction:
    """A candidate answer: context[start:end] == text, score = start_score + end_score."""

    text: str
    start: int
    end: int
    score: float
    start_score: float
    end_score: float


def window_spans(window: WindowScores, max_answer_length: int, n_best_size: int) -> list[tuple[float, int, int]]:
    """The `n_best_size` best (score, start token, end token) of one window that cover different characters,
    best first; fewer only where the window holds fewer such spans.

    Exact search over every valid pair: start and end on context tokens that cover at least one character,
    end >= start, at most `max_answer_length` tokens. Token pairs that cover the same characters (tokens
    widened to their words, pieces of one character) count once, with the best of their scores.
    """
    length = len(window.offsets)
    start_scores = np.asarray(window.start_scores, dtype=np.float64)[:length]
    end_scores = np.asarray(window.end_scores, dtype=np.float64)[:length]
    # A token with empty offsets (a lone space piece of a byte-level BPE) would make an answer that begins
    # or ends with nothing; it can still sit inside a span.
    usable = np.array([offset is not None and offset[1] > offset[0] for offset in window.offsets], dtype=bool)
    # scores[s, d] is the score of the span from token s to token s + d.
    ends = np.arange(length)[:, None] + np.arange(max_answer_length)[None, :]
    in_window = ends < length
    ends = np.minimum(ends, length - 1)
    valid = usable[:, None] & usable[ends] & in_window
    scores = np.where(valid, start_scores[:, None] + end_scores[ends], -np.inf).ravel()
    total = int(valid.sum())
    # Most of the best pairs usually cover different characters: the n_best_size best pairs first, four times
    # as many each time duplicates among them left fewer than n_best_size spans.
    count = min(n_best_size, total)
    while count > 0:
        best = np.argpartition(-scores, count - 1)[:count]
        best = best[np.argsort(-scores[best], kind="stable")]
        spans, seen = [], set()
        for index, start, span_length in zip(best, *np.unravel_index(best, valid.shape)):
            characters = (window.offsets[start][0], window.offsets[start + span_length][1])
            if characters not in seen:
                seen.add(characters)
                spans.append((float(scores[index]), int(start), int(start + span_length)))
        if len(spans) >= n_best_size or count == total:
            return spans[:n_best_size]
        count = min(total, 4 * count)
    return []


def decode_spans(
    windows: Sequence[WindowScores], context: str, n_best_size: int = 20, max_answer_length: int = 30
) -> tuple[list[SpanPrediction], SpanPrediction]:
    """The `n_best_size` best answers over all windows of one question, best first, and its null answer.

    Each text span is kept once, with its best score over the windows, and the next best takes the place of
    a duplicate: fewer than `n_best_size` answers only where the windows hold fewer spans. (A span among the
    best `n_best_size` overall is among the best `n_best_size` of the window that scores it best, so the
    windows' own best lists are enough.) The null answer has text "" and the lowest first-token score over the
    windows (BERT's choice).
    """
    best_by_span: dict[tuple[int, int], SpanPrediction] = {}
    null = None
    for window in windows:
        null_start = float(window.start_scores[window.cls_index])
        null_end = float(window.end_scores[window.cls_index])
        if null is None or null_start + null_end < null.score:
            null = SpanPrediction("", 0, 0, null_start + null_end, null_start, null_end)
        for score, start, end in window_spans(window, max_answer_length, n_best_size):
            char_start, char_end = window.offsets[start][0], window.offsets[end][1]
            kept = best_by_span.get((char_start, char_end))
            if kept is None or score > kept.score:
                best_by_span[(char_start, char_end)] = SpanPrediction(
                    context[char_start:char_end], char_start, char_end, score,
                    float(window.start_scores[start]), float(window.end_scores[end]),
                )  # fmt: skip
    if null is None:
        raise ValueError("decode_spans needs at least one window.")
    nbest = sorted(best_by_span.values(), key=lambda span: span.score, reverse=True)[:n_best_size]
    return nbest, null


def log_softmax_scores(logits: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """log p over the allowed positions (-inf elsewhere): transformers 4's pipeline scored spans with
    p_start * p_end, the softmax taken over a window's context tokens and its first token."""
    logits = np.where(allowed, logits.astype(np.float64), -np.inf)
    shifted = logits - logits.max()
    return shifted - np.log(np.exp(shifted).sum())
