"""SQuAD's features: question-context pairs split into overlapping windows (the span decoding's own
`encode_windows`), with the answer's token positions for training, or the character offsets that map predictions
back to the context for evaluation. The span decoding itself lives in spanroberta.tasks.squad.span_decoding,
shared with the pipeline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from transformers import PreTrainedTokenizerBase

from spanroberta.tasks.squad.span_decoding import cls_index, context_offsets, encode_windows


def answer_token_span(
    offsets: Sequence[tuple[int, int] | None], start_char: int, end_char: int
) -> tuple[int, int] | None:
    """The first and last tokens of the answer context[start_char:end_char] in a window, or None when the
    window does not hold the whole answer."""
    context = [(position, offset) for position, offset in enumerate(offsets) if offset is not None]
    if not context or context[0][1][0] > start_char or context[-1][1][1] < end_char:
        return None
    start = next(position for position, (_, end) in context if end > start_char)
    end = max(position for position, (begin, _) in context if begin < end_char)
    return (start, end) if start <= end else None


def prepare_train_features(
    examples: Mapping[str, list],
    tokenizer: PreTrainedTokenizerBase,
    max_seq_length: int,
    doc_stride: int,
    max_query_length: int,
    with_is_impossible: bool = False,
) -> dict[str, list]:
    """Windows with their labels, for `Dataset.map(batched=True)`: start/end_positions of the first gold
    answer, or of the first token (<s>) when the window does not hold it or the question has no answer
    (BERT section 4.3). With `with_is_impossible`, also the answerability classifier's label, per window:
    1 where the span label is that first token."""
    encoding = encode_windows(
        tokenizer, examples["question"], examples["context"], max_seq_length, doc_stride, max_query_length
    )
    features = {name: encoding[name] for name in tokenizer.model_input_names if name in encoding}
    features.update(start_positions=[], end_positions=[])
    if with_is_impossible:
        features["is_impossible"] = []
    for window, example in enumerate(encoding["overflow_to_sample_mapping"]):
        null = cls_index(encoding["input_ids"][window], tokenizer.cls_token_id)
        answers = examples["answers"][example]
        span = None
        if answers["answer_start"]:
            start_char = answers["answer_start"][0]
            span = answer_token_span(
                context_offsets(encoding, window), start_char, start_char + len(answers["text"][0])
            )
        start, end = span if span is not None else (null, null)
        features["start_positions"].append(start)
        features["end_positions"].append(end)
        if with_is_impossible:
            features["is_impossible"].append(int(span is None))
    return features


def prepare_eval_features(
    examples: Mapping[str, list],
    tokenizer: PreTrainedTokenizerBase,
    max_seq_length: int,
    doc_stride: int,
    max_query_length: int,
) -> dict[str, list]:
    """Windows for prediction, for `Dataset.map(batched=True)`: the model inputs plus `example_id` and
    `offset_mapping` (character offsets of context tokens, None elsewhere), which post-processing needs and
    the model must not see (`EVAL_ONLY_COLUMNS`)."""
    encoding = encode_windows(
        tokenizer, examples["question"], examples["context"], max_seq_length, doc_stride, max_query_length
    )
    features = {name: encoding[name] for name in tokenizer.model_input_names if name in encoding}
    windows = range(len(encoding["input_ids"]))
    features["example_id"] = [examples["id"][encoding["overflow_to_sample_mapping"][w]] for w in windows]
    features["offset_mapping"] = [context_offsets(encoding, w) for w in windows]
    return features


EVAL_ONLY_COLUMNS = ("example_id", "offset_mapping")
