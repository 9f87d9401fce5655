"""Extractive question answering: the `question-answering` pipeline that transformers 5 removed, with
transformers 4's interface (`QuestionAnsweringPipeline`, `QuestionAnsweringArgumentHandler`, `SquadExample`).

This file and SQuAD's span_decoding.py (spanroberta/tasks/squad/) are self-contained on purpose (standard library,
numpy, torch and transformers only): run_squad.py copies both side by side into every checkpoint it writes, this
one importing the other from beside it there, and names this one in the config's `custom_pipelines`, so that
`pipeline("question-answering", model=<checkpoint>, trust_remote_code=True)` works where spanroberta is not
installed. Where spanroberta is imported, `register_question_answering_pipeline()`
makes `pipeline("question-answering", model=...)` work for any extractive QA checkpoint, and these classes
importable from where transformers 4 had them.

The windows and the span decoding are span_decoding.py's, shared with run_squad.py's evaluation.
"""

from __future__ import annotations

import functools
import sys
import types
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForQuestionAnswering, BatchEncoding
from transformers.pipelines.base import ArgumentHandler, ChunkPipeline
from transformers.utils import logging

from ..tasks.squad.span_decoding import (
    Offsets,
    WindowScores,
    cls_index,
    context_offsets,
    context_room,
    decode_spans,
    encode_windows,
    log_softmax_scores,
)

TASK = "question-answering"

logger = logging.get_logger(__name__)

# Inputs the pipeline streams, one example at a time, instead of reading them whole (as transformers 4 did).
STREAMED_INPUTS = (types.GeneratorType, torch.utils.data.Dataset)


# --- inputs ---


@dataclass
class SquadExample:
    """One question about one context, with the constructor of transformers 4's `SquadExample` (which
    transformers 5 removed): `SquadExample(None, question, context, None, None, None)`. The pipeline reads only
    `question_text` and `context_text`; the answer fields are kept for code written against transformers 4."""

    qas_id: str | None
    question_text: str
    context_text: str
    answer_text: str | None = None
    start_position_character: int | None = None
    title: str | None = None
    answers: list = field(default_factory=list)
    is_impossible: bool = False


class QuestionAnsweringArgumentHandler(ArgumentHandler):
    """transformers 4's input forms -> a list of `SquadExample`: two positional strings (question, context);
    `question=`/`context=` as strings or lists (a list of questions may share one context); a dict with
    "question" and "context", a SquadExample, or a list of them, positionally or as `X=`/`data=`. A generator
    or a torch Dataset is handed back as it is, for the pipeline to stream; its items are checked as they come.
    Raises transformers 4's exceptions: KeyError for a dict without "question" or "context", ValueError for
    anything else it cannot read."""

    def normalize(self, item: Any) -> SquadExample:
        """One input as a SquadExample, with a non-empty question and context."""
        if isinstance(item, dict):
            for key in ("question", "context"):
                if key not in item:
                    raise KeyError(f"An input has no {key!r}: give dicts with 'question' and 'context'.")
            question, context = item["question"], item["context"]
        elif hasattr(item, "question_text") and hasattr(item, "context_text"):
            question, context = item.question_text, item.context_text
        else:
            raise ValueError(
                f"Each input must be a dict with 'question' and 'context', or a SquadExample; got {item!r}."
            )
        for key, text in (("question", question), ("context", context)):
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"`{key}` cannot be empty: give a string with some text (got {text!r}).")
        return item if isinstance(item, SquadExample) else SquadExample(None, question, context)

    def __call__(self, *args: Any, **kwargs: Any) -> list[SquadExample] | Iterable:
        inputs = _raw_inputs(args, kwargs)
        if isinstance(inputs, STREAMED_INPUTS):
            return inputs
        if isinstance(inputs, dict) or hasattr(inputs, "question_text"):
            inputs = [inputs]
        elif isinstance(inputs, Iterable) and not isinstance(inputs, (str, bytes)):
            inputs = list(inputs)
        else:
            raise ValueError(
                f"Cannot read the question-answering inputs {inputs!r}: give question= and context=, or dicts "
                "with 'question' and 'context'."
            )
        return [self.normalize(item) for item in inputs]


def _raw_inputs(args: tuple, kwargs: dict[str, Any]) -> Any:
    """Where the inputs are among the arguments, in transformers 4's order: positional, X=, data=,
    question= with context=."""
    if args:
        if len(args) == 2 and all(isinstance(arg, str) for arg in args):
            return [{"question": args[0], "context": args[1]}]
        return args[0] if len(args) == 1 else list(args)
    if "X" in kwargs or "data" in kwargs:
        return kwargs["X"] if "X" in kwargs else kwargs["data"]
    if "question" not in kwargs or "context" not in kwargs:
        raise ValueError(
            "The question-answering pipeline needs question= and context=, or dicts with 'question' and "
            f"'context' (got only the keywords {sorted(kwargs)})."
        )
    question, context = kwargs["question"], kwargs["context"]
    if isinstance(question, str) and isinstance(context, str):
        return [{"question": question, "context": context}]
    if isinstance(question, list) and isinstance(context, str):
        return [{"question": one, "context": context} for one in question]
    if isinstance(question, list) and isinstance(context, list):
        if len(question) != len(context):
            raise ValueError(
                f"{len(question)} questions but {len(context)} contexts: give one context per question, or one "
                "context for all of them."
            )
        return [{"question": one, "context": its} for one, its in zip(question, context)]
    raise ValueError(
        f"question= and context= must be strings or lists of strings, got {type(question).__name__} and "
        f"{type(context).__name__}."
    )


# --- the pipeline ---


class QuestionAnsweringPipeline(ChunkPipeline):
    """Extractive question answering with any `AutoModelForQuestionAnswering` checkpoint (spanroberta,
    RoBERTa, BERT, ...), with transformers 4's inputs, parameters, outputs and exceptions.

    ```python
    >>> qa = pipeline("question-answering", model="path/to/checkpoint")
    >>> qa(question="Where do I live?", context="My name is Wolfgang and I live in Berlin.")
    {'score': 0.97, 'start': 34, 'end': 40, 'answer': 'Berlin'}
    ```

    Inputs: those of `QuestionAnsweringArgumentHandler`; a generator or a torch Dataset is streamed, the
    results coming back as an iterator. Parameters, at construction or per call: `top_k` (1; `topk` is its
    deprecated alias), `doc_stride` (min(max_seq_len // 2, 128), less where a window has no room for it),
    `max_answer_len` (15; `max_answer_length` is accepted too), `max_seq_len` (min(model_max_length, 384)),
    `max_question_len` (64), `handle_impossible_answer` (False), `align_to_words` (True), `padding` (False, the
    tokenizer's). Other keywords are ignored with a warning, where transformers 4 ignored them silently.

    Output per question: {"score", "start", "end", "answer"} with `context[start:end] == answer`; with top_k
    above 1, a list of up to top_k different answers, best first (a single dict where only one answer exists,
    as in transformers 4). One question gives one output, a list of questions a list, except a list of one
    question, which gives one output as in transformers 4. The score is p_start * p_end within the answer's
    window; with `handle_impossible_answer` the no-answer {"answer": "", "start": 0, "end": 0} competes with its
    own score, the lowest first-token p_start * p_end over the windows.
    """

    _load_tokenizer = True
    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_video_processor = False
    default_input_names = "question,context"
    _args_parser = QuestionAnsweringArgumentHandler()

    @staticmethod
    def create_sample(question: str | list[str], context: str | list[str]) -> SquadExample | list[SquadExample]:
        """transformers 4's helper: one SquadExample, or one per (question, context) pair of two lists."""
        if isinstance(question, list):
            return [SquadExample(None, one, its) for one, its in zip(question, context)]
        return SquadExample(None, question, context)

    def __call__(self, *args: Any, **kwargs: Any) -> dict | list | Iterator:
        examples = self._args_parser(*args, **kwargs)
        for name in ("X", "data", "question", "context"):
            kwargs.pop(name, None)
        if isinstance(examples, list) and len(examples) <= 1:
            return super().__call__(examples[0], **kwargs) if examples else []
        return super().__call__(examples, **kwargs)

    def _sanitize_parameters(
        self,
        padding: bool | str | None = None,
        topk: int | None = None,
        top_k: int | None = None,
        doc_stride: int | None = None,
        max_answer_len: int | None = None,
        max_answer_length: int | None = None,
        max_seq_len: int | None = None,
        max_question_len: int | None = None,
        handle_impossible_answer: bool | None = None,
        align_to_words: bool | None = None,
        **ignored: Any,
    ) -> tuple[dict, dict, dict]:
        if ignored:
            logger.warning(
                f"The question-answering pipeline ignores {', '.join(sorted(ignored))}. Its parameters are top_k, "
                "doc_stride, max_answer_len, max_seq_len, max_question_len, handle_impossible_answer, "
                "align_to_words and padding."
            )
        preprocess_params = {
            name: value
            for name, value in (
                ("padding", padding),
                ("doc_stride", doc_stride),
                ("max_seq_len", max_seq_len),
                ("max_question_len", max_question_len),
                ("align_to_words", align_to_words),
            )
            if value is not None
        }
        if topk is not None and top_k is None:
            warnings.warn("topk parameter is deprecated, use top_k instead", UserWarning)
            top_k = topk
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
        example: SquadExample | dict[str, str],
        padding: bool | str = False,
        doc_stride: int | None = None,
        max_seq_len: int | None = None,
        max_question_len: int = 64,
        align_to_words: bool = True,
    ) -> Iterator[dict[str, Any]]:
        # A streamed input's items reach the pipeline unchecked.
        example = self._args_parser.normalize(example)
        question, context = example.question_text, example.context_text
        if max_seq_len is None:
            max_seq_len = min(self.tokenizer.model_max_length, 384)
        if doc_stride is None:
            # transformers 4's default, made smaller where a short window leaves less room for the context
            # (where transformers 4's tokenizer stopped the process with a panic).
            room = context_room(self.tokenizer, question, max_seq_len, max_question_len)
            doc_stride = min(max_seq_len // 2, 128, max(room - 1, 0))
        encoding = encode_windows(
            self.tokenizer, [question], [context], max_seq_len, doc_stride, max_question_len, padding
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
                "context": context,
                "is_last": window == windows - 1,
            }

    def _forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
        model_inputs = {name: inputs[name] for name in self.tokenizer.model_input_names if name in inputs}
        output = self.model(**model_inputs)
        if getattr(output, "start_logits", None) is None:
            raise TypeError(f"{type(self.model).__name__} does not predict answer spans (no start_logits).")
        # transformers 4's names. "start" first: the pipeline's batching reads the batch size from the first entry.
        return {
            "start": output.start_logits,
            "end": output.end_logits,
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
                    log_softmax_scores(output["start"][0, : len(offsets)].float().numpy(), allowed),
                    log_softmax_scores(output["end"][0, : len(offsets)].float().numpy(), allowed),
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
        return answers[0] if len(answers) == 1 else answers


def _word_offsets(encoding: BatchEncoding, window: int, offsets: Offsets) -> list[tuple[int, int] | None]:
    """Each context token's offsets widened to its whole word, so that answers never cut a word."""
    word_ids = encoding.word_ids(window)
    tokens = encoding.encodings[window]
    return [
        None if offset is None else tokens.word_to_chars(word_ids[position], sequence_index=1)
        for position, offset in enumerate(offsets)
    ]


# --- registration ---


def register_question_answering_pipeline() -> None:
    """Makes `pipeline("question-answering", ...)` work in this process, as it did in transformers 4.

    transformers 5 lists the task as removed (REMOVED_TASKS) and raises before looking at its registry, so
    the task is taken off that list and registered with this pipeline. Checkpoints written by run_squad.py
    also name this pipeline in `custom_pipelines`, which transformers would only load with
    `trust_remote_code=True`; `transformers.pipeline` is therefore wrapped so that, unless remote code is
    asked for, this installed class serves them (no code from the checkpoint runs). The classes become
    importable from where transformers 4 had them: `transformers`, `transformers.pipelines` and
    `transformers.pipelines.question_answering`. Idempotent.
    """
    import transformers
    import transformers.pipelines as pipelines

    pipelines.REMOVED_TASKS.pop(TASK, None)
    this_module = sys.modules[__name__]
    sys.modules.setdefault(f"{pipelines.__name__}.question_answering", this_module)
    for namespace, names in (
        (transformers, ("QuestionAnsweringPipeline",)),
        (pipelines, ("QuestionAnsweringPipeline", "QuestionAnsweringArgumentHandler", "question_answering")),
    ):
        for name in names:
            if not hasattr(namespace, name):
                setattr(namespace, name, this_module if name == "question_answering" else getattr(this_module, name))
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
