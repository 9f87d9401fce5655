"""Extractive question answering: the `question-answering` pipeline that transformers 5 removed, and the span
decoding that run_squad.py shares with it.

This file is self-contained on purpose (standard library, numpy, torch and transformers only): run_squad.py
copies it into every checkpoint it writes and names it in the config's `custom_pipelines`, so that
`pipeline("question-answering", model=<checkpoint>, trust_remote_code=True)` works where spanroberta is not
installed. Where spanroberta is imported, `register_question_answering_pipeline()` makes
`pipeline("question-answering", model=...)` work for any extractive QA checkpoint.

Decoding follows BERT's SQuAD recipe (Devlin et al. 2019, section 4.2-4.3), which SpanBERT and RoBERTa
reuse: a context too long for one window is split into overlapping windows; a span scores
start_score[s] + end_score[e] over context tokens with e >= s and at most `max_answer_length` tokens; the best
span over all windows wins; the no-answer ("null") score is the score of the span that starts and ends on
the first token (`<s>` for RoBERTa, `[CLS]` for BERT), taken from the window where it is lowest.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForQuestionAnswering, BatchEncoding, PreTrainedTokenizerBase
from transformers.pipelines.base import ChunkPipeline

TASK = "question-answering"

Offsets = Sequence[tuple[int, int] | None]


# --- windows ---


def truncate_question(tokenizer: PreTrainedTokenizerBase, question: str, max_query_length: int) -> str:
    """The question cut after its first `max_query_length` tokens (BERT's max_query_length), without its
    leading whitespace (some SQuAD questions start with many spaces, which would only waste the window)."""
    question = question.lstrip()
    offsets = tokenizer(question, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    if len(offsets) <= max_query_length:
        return question
    return question[: offsets[max_query_length - 1][1]]


def encode_windows(
    tokenizer: PreTrainedTokenizerBase,
    questions: Sequence[str],
    contexts: Sequence[str],
    max_seq_length: int,
    doc_stride: int,
    max_query_length: int,
) -> BatchEncoding:
    """Tokenizes (question, context) pairs, question first. A context that does not fit splits into windows
    of at most `max_seq_length` tokens, consecutive windows sharing `doc_stride` context tokens (the meaning
    of `stride` in transformers' tokenizers and run_qa.py; BERT's doc_stride was the step between window
    starts instead). `overflow_to_sample_mapping` gives each window's pair and `offset_mapping` its
    character offsets."""
    if tokenizer.padding_side != "right":
        raise ValueError("Extractive QA needs a tokenizer that pads on the right (the question comes first).")
    room = max_seq_length - max_query_length - tokenizer.num_special_tokens_to_add(pair=True)
    if doc_stride >= room:
        raise ValueError(
            f"doc_stride ({doc_stride}) must be smaller than the context room of a window: max_seq_length "
            f"({max_seq_length}) - max_query_length ({max_query_length}) - special tokens = {room}."
        )
    return tokenizer(
        [truncate_question(tokenizer, question, max_query_length) for question in questions],
        list(contexts),
        truncation="only_second",
        max_length=max_seq_length,
        stride=doc_stride,
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
    """The `n_best_size` best (score, start token, end token) of one window, best first.

    Exact search over every valid pair: start and end on context tokens that cover at least one character,
    end >= start, at most `max_answer_length` tokens.
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
    count = min(n_best_size, int(valid.sum()))
    if count == 0:
        return []
    best = np.argpartition(-scores, count - 1)[:count]
    best = best[np.argsort(-scores[best], kind="stable")]
    starts, lengths = np.unravel_index(best, valid.shape)
    return [(float(scores[i]), int(s), int(s + d)) for i, s, d in zip(best, starts, lengths)]


def decode_spans(
    windows: Sequence[WindowScores], context: str, n_best_size: int = 20, max_answer_length: int = 30
) -> tuple[list[SpanPrediction], SpanPrediction]:
    """The `n_best_size` best answers over all windows of one question, best first, and its null answer.

    Overlapping windows can propose the same characters; each text span is kept once, with its best score.
    The null answer has text "" and the lowest first-token score over the windows (BERT's choice).
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


# --- the pipeline ---


class QuestionAnsweringPipeline(ChunkPipeline):
    """Extractive question answering with any `AutoModelForQuestionAnswering` checkpoint (spanroberta,
    RoBERTa, BERT, ...), with transformers 4's inputs and outputs.

    ```python
    >>> qa = pipeline("question-answering", model="path/to/checkpoint")
    >>> qa(question="Where do I live?", context="My name is Wolfgang and I live in Berlin.")
    {'score': 0.97, 'start': 34, 'end': 40, 'answer': 'Berlin'}
    ```

    Inputs: `question=`/`context=` (strings, or lists: a list of questions may share one context), a dict
    {"question", "context"} or a list of them, or two positional strings. Parameters, at construction or per
    call: `top_k` (1), `doc_stride` (min(max_seq_len // 2, 128), less where a window has no room for it),
    `max_answer_len` (15; `max_answer_length` is accepted too), `max_seq_len` (min(model_max_length, 384)),
    `max_question_len` (64), `handle_impossible_answer` (False), `align_to_words` (True).

    Output per question: {"score", "start", "end", "answer"} with `context[start:end] == answer`, or a list of
    them, best first, when `top_k` > 1. The score is p_start * p_end within the answer's window; with
    `handle_impossible_answer` the no-answer {"answer": "", "start": 0, "end": 0} competes with its own score,
    the lowest first-token p_start * p_end over the windows. Unlike transformers 4, answers that overlapping
    windows (or word alignment) find twice are kept once with their best score, not summed.
    """

    _load_tokenizer = True
    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_video_processor = False
    default_input_names = "question,context"

    def __call__(self, *args: Any, **kwargs: Any) -> dict | list:
        examples, single = _examples_from_arguments(args, kwargs)
        results = super().__call__(examples, **kwargs)
        return results[0] if single else results

    def _sanitize_parameters(
        self,
        top_k: int | None = None,
        doc_stride: int | None = None,
        max_answer_len: int | None = None,
        max_answer_length: int | None = None,
        max_seq_len: int | None = None,
        max_question_len: int | None = None,
        handle_impossible_answer: bool | None = None,
        align_to_words: bool | None = None,
    ) -> tuple[dict, dict, dict]:
        preprocess_params = {
            name: value
            for name, value in (
                ("doc_stride", doc_stride),
                ("max_seq_len", max_seq_len),
                ("max_question_len", max_question_len),
                ("align_to_words", align_to_words),
            )
            if value is not None
        }
        postprocess_params = {}
        if top_k is not None:
            if top_k < 1:
                raise ValueError(f"top_k must be at least 1, got {top_k}.")
            postprocess_params["top_k"] = top_k
        if max_answer_len is not None and max_answer_length is not None:
            raise ValueError("Give max_answer_len or max_answer_length (the same setting), not both.")
        max_answer_len = max_answer_len if max_answer_len is not None else max_answer_length
        if max_answer_len is not None:
            if max_answer_len < 1:
                raise ValueError(f"max_answer_len must be at least 1, got {max_answer_len}.")
            postprocess_params["max_answer_len"] = max_answer_len
        if handle_impossible_answer is not None:
            postprocess_params["handle_impossible_answer"] = handle_impossible_answer
        return preprocess_params, {}, postprocess_params

    def preprocess(
        self,
        example: dict[str, str],
        doc_stride: int | None = None,
        max_seq_len: int | None = None,
        max_question_len: int = 64,
        align_to_words: bool = True,
    ) -> Iterator[dict[str, Any]]:
        if max_seq_len is None:
            max_seq_len = min(self.tokenizer.model_max_length, 384)
        if doc_stride is None:
            # transformers 4's default, made smaller where a short window leaves less room for the context.
            room = max_seq_len - max_question_len - self.tokenizer.num_special_tokens_to_add(pair=True)
            doc_stride = min(max_seq_len // 2, 128, room - 1)
        encoding = encode_windows(
            self.tokenizer, [example["question"]], [example["context"]], max_seq_len, doc_stride, max_question_len
        )
        windows = len(encoding["input_ids"])
        for window in range(windows):
            offsets = context_offsets(encoding, window)
            if align_to_words:
                offsets = _word_offsets(encoding, window, offsets)
            model_inputs = {
                name: torch.tensor([encoding[name][window]])
                for name in self.tokenizer.model_input_names
                if name in encoding
            }
            yield {
                **model_inputs,
                "offsets": offsets,
                "cls_index": cls_index(encoding["input_ids"][window], self.tokenizer.cls_token_id),
                "context": example["context"],
                "is_last": window == windows - 1,
            }

    def _forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        model_inputs = {name: inputs[name] for name in self.tokenizer.model_input_names if name in inputs}
        output = self.model(**model_inputs)
        if getattr(output, "start_logits", None) is None:
            raise TypeError(f"{type(self.model).__name__} does not predict answer spans (no start_logits).")
        # start_logits first: the pipeline's batching reads the batch size from the first entry.
        return {
            "start_logits": output.start_logits,
            "end_logits": output.end_logits,
            "offsets": inputs["offsets"],
            "cls_index": inputs["cls_index"],
            "context": inputs["context"],
            "is_last": inputs["is_last"],
        }

    def postprocess(
        self,
        model_outputs: list[dict[str, Any]],
        top_k: int = 1,
        handle_impossible_answer: bool = False,
        max_answer_len: int = 15,
    ) -> dict | list[dict]:
        windows = []
        for output in model_outputs:
            offsets = output["offsets"]
            index = output["cls_index"]
            allowed = np.array([offset is not None for offset in offsets], dtype=bool)
            allowed[index] = True
            windows.append(
                WindowScores(
                    log_softmax_scores(output["start_logits"][0, : len(offsets)].float().numpy(), allowed),
                    log_softmax_scores(output["end_logits"][0, : len(offsets)].float().numpy(), allowed),
                    offsets,
                    index,
                )
            )
        spans, null = decode_spans(windows, model_outputs[0]["context"], top_k, max_answer_len)
        answers = [
            {"score": float(np.exp(span.score)), "start": span.start, "end": span.end, "answer": span.text}
            for span in spans
        ]
        if handle_impossible_answer:
            answers.append({"score": float(np.exp(null.score)), "start": 0, "end": 0, "answer": ""})
            answers = sorted(answers, key=lambda answer: answer["score"], reverse=True)[:top_k]
        if top_k == 1:
            return answers[0] if answers else {"score": 0.0, "start": 0, "end": 0, "answer": ""}
        return answers


def _word_offsets(encoding: BatchEncoding, window: int, offsets: Offsets) -> list[tuple[int, int] | None]:
    """Each context token's offsets widened to its whole word, so that answers never cut a word."""
    word_ids = encoding.word_ids(window)
    tokens = encoding.encodings[window]
    return [
        None if offset is None else tokens.word_to_chars(word_ids[position], sequence_index=1)
        for position, offset in enumerate(offsets)
    ]


def _examples_from_arguments(args: tuple, kwargs: dict[str, Any]) -> tuple[list[dict[str, str]], bool]:
    """transformers 4's input forms -> (list of {"question", "context"}, whether one answer is expected).
    Pops `question` and `context` from kwargs."""
    question, context = kwargs.pop("question", None), kwargs.pop("context", None)
    if args and (question is not None or context is not None):
        raise ValueError("Give the inputs either positionally or as question=/context=, not both.")
    if len(args) == 2 and all(isinstance(arg, str) for arg in args):
        question, context = args
    elif len(args) == 1:
        single = isinstance(args[0], dict)
        return [_checked_example(item) for item in ([args[0]] if single else args[0])], single
    elif args:
        raise ValueError(f"Cannot read the pipeline's positional inputs: {args!r}.")
    if question is None or context is None:
        raise ValueError("The question-answering pipeline needs both question= and context=.")
    if isinstance(question, str) and isinstance(context, str):
        return [_checked_example({"question": question, "context": context})], True
    if isinstance(question, list) and isinstance(context, str):
        context = [context] * len(question)
    if not (isinstance(question, list) and isinstance(context, list)):
        raise ValueError("question= and context= must be strings or lists of strings.")
    if len(question) != len(context):
        raise ValueError(f"{len(question)} questions but {len(context)} contexts.")
    return [_checked_example({"question": q, "context": c}) for q, c in zip(question, context)], False


def _checked_example(item: Any) -> dict[str, str]:
    if not isinstance(item, dict):
        raise ValueError(f"Each input must be a dict with question and context, got {item!r}.")
    for key in ("question", "context"):
        if key not in item:
            raise KeyError(f"An input has no {key!r}: give dicts with 'question' and 'context'.")
        if not isinstance(item[key], str) or not item[key].strip():
            raise ValueError(f"`{key}` cannot be empty (got {item[key]!r}).")
    return {"question": item["question"], "context": item["context"]}


# --- registration ---


def register_question_answering_pipeline() -> None:
    """Makes `pipeline("question-answering", ...)` work in this process, as it did in transformers 4.

    transformers 5 lists the task as removed (REMOVED_TASKS) and raises before looking at its registry, so
    the task is taken off that list and registered with this pipeline. Checkpoints written by run_squad.py
    also name this pipeline in `custom_pipelines`, which transformers would only load with
    `trust_remote_code=True`; `transformers.pipeline` is therefore wrapped so that, unless remote code is
    asked for, this installed class serves them (no code from the checkpoint runs). Idempotent.
    """
    import transformers
    import transformers.pipelines as pipelines

    pipelines.REMOVED_TASKS.pop(TASK, None)
    pipelines.PIPELINE_REGISTRY.register_pipeline(
        TASK, pipeline_class=QuestionAnsweringPipeline, pt_model=AutoModelForQuestionAnswering, type="text"
    )
    if not getattr(pipelines.pipeline, "_serves_question_answering_locally", False):
        wrapped = _serving_question_answering_locally(pipelines.pipeline)
        pipelines.pipeline = wrapped
        # `from transformers import pipeline` reads the package attribute, which may already be cached.
        transformers.pipeline = wrapped


def _serving_question_answering_locally(pipeline_factory: Any) -> Any:
    @functools.wraps(pipeline_factory)
    def pipeline(*args: Any, **kwargs: Any) -> Any:
        task = args[0] if args else kwargs.get("task")
        if task == TASK and kwargs.get("pipeline_class") is None and not kwargs.get("trust_remote_code"):
            kwargs["pipeline_class"] = QuestionAnsweringPipeline
        return pipeline_factory(*args, **kwargs)

    pipeline._serves_question_answering_locally = True
    return pipeline
