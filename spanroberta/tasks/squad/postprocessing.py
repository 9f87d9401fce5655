"""SQuAD's post-processing: the model's scores over all windows of a question become `predictions.json`,
`nbest_predictions.json` and, for v2.0, `null_odds.json`, as the official evaluation scripts read them, scored with
the official metrics; the v2.0 no-answer threshold that maximised F1 is kept next to the checkpoint for later runs;
and a checkpoint is saved with the question-answering pipeline's code."""

from __future__ import annotations

import json
import math
import shutil
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from datasets import Dataset
from transformers import Trainer

from spanroberta.finetuning.task import MEAN
from spanroberta.pipelines import question_answering
from spanroberta.tasks.squad import span_decoding
from spanroberta.tasks.squad.features import EVAL_ONLY_COLUMNS
from spanroberta.tasks.squad.scoring import (
    mrqa_evaluate,
    squad_v1_evaluate,
    squad_v1_question_scores,
    squad_v2_evaluate,
    squad_v2_question_scores,
)
from spanroberta.tasks.squad.span_decoding import SpanPrediction, WindowScores, cls_index, decode_spans

# The v2.0 no-answer threshold kept beside a checkpoint by its evaluation.
THRESHOLD_FILE = "null_score_threshold.json"


@dataclass
class SquadPredictions:
    """Answers for a set of questions, as the official files hold them.

    `predictions`: id -> answer ("" for no answer); `nbest`: id -> the best candidates with their
    probabilities (softmax over the candidates' scores, as BERT's nbest_predictions.json; for v2.0 the null
    answer "" is always listed); `null_odds`
    (v2.0): id -> no-answer score minus best answer score, the official script's --na-prob-file;
    `best_answers`: id -> the best non-empty answer, which the v2.0 scores use with the null odds.
    """

    predictions: dict[str, str] = field(default_factory=dict)
    nbest: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    null_odds: dict[str, float] = field(default_factory=dict)
    best_answers: dict[str, str] = field(default_factory=dict)


def postprocess_predictions(
    examples: Dataset,
    features: Dataset,
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    *,
    cls_token_id: int | None,
    version_2_with_negative: bool,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    null_score_diff_threshold: float = 0.0,
    answerability_logits: np.ndarray | None = None,
) -> SquadPredictions:
    """Turns the per-window logits of `features` into answers for `examples`.

    A span scores start_logit + end_logit; the best over all windows of a question wins. For v2.0 the
    question's null odds are null score - best span score (BERT's score_diff), plus, when the model has the
    answerability classifier, its lowest "impossible" logit over the question's windows (the window most
    confident that it holds the answer speaks for the question); the answer is "" when the odds exceed
    `null_score_diff_threshold`.
    """
    windows_of = defaultdict(list)
    for index, example_id in enumerate(features["example_id"]):
        windows_of[example_id].append(index)
    offsets, input_ids = features["offset_mapping"], features["input_ids"]
    result = SquadPredictions()
    for example in examples:
        qid, indices = example["id"], windows_of[example["id"]]
        windows = [
            WindowScores(start_logits[i], end_logits[i], offsets[i], cls_index(input_ids[i], cls_token_id))
            for i in indices
        ]
        spans, null = decode_spans(windows, example["context"], n_best_size, max_answer_length)
        best = spans[0].text if spans else ""
        result.best_answers[qid] = best
        candidates = spans
        if version_2_with_negative:
            odds = null.score - spans[0].score if spans else math.inf
            if answerability_logits is not None:
                odds += float(min(answerability_logits[i] for i in indices))
            result.null_odds[qid] = odds
            result.predictions[qid] = "" if odds > null_score_diff_threshold else best
            # The null answer is always listed, last if it is not among the best (as BERT's script does).
            candidates = sorted([*spans, null], key=lambda span: span.score, reverse=True)[:n_best_size]
            if null not in candidates:
                candidates.append(null)
        else:
            result.predictions[qid] = best
        result.nbest[qid] = _nbest_entries(candidates)
    return result


def _nbest_entries(candidates: Sequence[SpanPrediction]) -> list[dict[str, Any]]:
    if not candidates:
        return []
    scores = np.array([candidate.score for candidate in candidates], dtype=np.float64)
    probabilities = np.exp(scores - scores.max())
    probabilities /= probabilities.sum()
    return [
        {
            "text": candidate.text,
            "probability": float(probability),
            "start_logit": candidate.start_score,
            "end_logit": candidate.end_score,
            "answer_start": candidate.start,
        }
        for candidate, probability in zip(candidates, probabilities)
    ]


def score_predictions(
    examples: Dataset,
    predictions: SquadPredictions,
    version_2_with_negative: bool,
    null_score_diff_threshold: float,
    mrqa_gold: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
) -> dict[str, float]:
    """The official scores of the predictions: v1.1's {exact_match, f1}, every key of v2.0's script, or, given the
    gold answers of MRQA files (`QaSplit.mrqa_gold`), MRQA's per-dataset scores and their macro averages.

    v2.0 scores the best non-empty answers with the null odds and the threshold, which gives the same exact
    and f1 as scoring predictions.json, and best thresholds searched over every answer rather than only over
    those the current threshold kept (what SpanBERT's run_squad.py does).
    """
    if mrqa_gold:
        return mrqa_evaluate(mrqa_gold, predictions.predictions)
    gold = {example["id"]: example["answers"]["text"] for example in examples}
    if not version_2_with_negative:
        return squad_v1_evaluate(gold, predictions.predictions)
    return squad_v2_evaluate(gold, predictions.best_answers, predictions.null_odds, null_score_diff_threshold)


def question_outcomes(
    examples: Dataset,
    predictions: SquadPredictions,
    version_2_with_negative: bool,
    mrqa_gold: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Each evaluated question's exact match (0 or 1) and F1 (0-1) as the official script scores predictions.json,
    by the name of the score they are the mean of (exact_match and f1; v2.0's exact; MRQA's per-dataset em and f1)."""
    if mrqa_gold:
        scored = {f"{dataset}_": squad_v1_question_scores(gold, predictions.predictions)
                  for dataset, gold in mrqa_gold.items()}  # fmt: skip
        exact = "em"
    else:
        gold = {example["id"]: example["answers"]["text"] for example in examples}
        question_scores = squad_v2_question_scores if version_2_with_negative else squad_v1_question_scores
        scored = {"": question_scores(gold, predictions.predictions)}
        exact = "exact" if version_2_with_negative else "exact_match"
    outcomes = {}
    for prefix, scores in scored.items():
        outcomes[f"{prefix}{exact}"] = {"scorer": MEAN, "values": [int(right) for right, _ in scores.values()]}
        outcomes[f"{prefix}f1"] = {"scorer": MEAN, "values": [f1 for _, f1 in scores.values()]}
    return outcomes


def predict_and_score(
    trainer: Trainer,
    examples: Dataset,
    features: Dataset,
    *,
    version_2_with_negative: bool,
    n_best_size: int,
    max_answer_length: int,
    null_score_diff_threshold: float,
    output_dir: str | Path,
    prefix: str = "",
    score: bool = True,
    mrqa_gold: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
) -> tuple[SquadPredictions, dict[str, float]]:
    """Runs the model over `features`, writes the prediction files into `output_dir` (named
    `{prefix}predictions.json`, ...) and, with `score`, returns the official scores (MRQA's, given `mrqa_gold`)."""
    output = trainer.predict(features.remove_columns(list(EVAL_ONLY_COLUMNS)))
    logits = output.predictions
    answerability = logits[2] if getattr(trainer.model.config, "answerability_head", False) else None
    predictions = postprocess_predictions(
        examples,
        features,
        logits[0],
        logits[1],
        cls_token_id=trainer.processing_class.cls_token_id,
        version_2_with_negative=version_2_with_negative,
        n_best_size=n_best_size,
        max_answer_length=max_answer_length,
        null_score_diff_threshold=null_score_diff_threshold,
        answerability_logits=answerability,
    )
    if trainer.is_world_process_zero():
        write_predictions(predictions, output_dir, prefix, version_2_with_negative)
    if not score:
        return predictions, {}
    return predictions, score_predictions(
        examples, predictions, version_2_with_negative, null_score_diff_threshold, mrqa_gold
    )


def write_predictions(
    predictions: SquadPredictions, output_dir: str | Path, prefix: str, version_2_with_negative: bool
) -> None:
    """predictions.json, nbest_predictions.json and, for v2.0, null_odds.json and best_non_null_predictions.json
    (each name after `prefix`).

    The official evaluate-v2.0.py run on best_non_null_predictions.json with `--na-prob-file null_odds.json
    --na-prob-thresh <threshold>` reproduces every number of eval_results.json; run on predictions.json, it
    reproduces exact and f1 (its best_* search cannot revive answers the threshold already replaced by "").
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    files = {"predictions.json": predictions.predictions, "nbest_predictions.json": predictions.nbest}
    if version_2_with_negative:
        files["null_odds.json"] = predictions.null_odds
        files["best_non_null_predictions.json"] = predictions.best_answers
    for name, content in files.items():
        (output_dir / f"{prefix}{name}").write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n")


# --- the v2.0 threshold kept with a checkpoint ---


def save_null_score_threshold(output_dir: str | Path, metrics: Mapping[str, float]) -> Path:
    """Writes v2.0's best_f1_thresh (from `metrics`, the official keys) to THRESHOLD_FILE in `output_dir`.

    Predicting "" only above this null-odds threshold is what makes v2.0 F1 right: SpanBERT's scripts,
    run with the default threshold, gave F1 near 46.
    """
    path = Path(output_dir) / THRESHOLD_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    content = {
        "null_score_diff_threshold": metrics["best_f1_thresh"],
        "best_f1": metrics["best_f1"],
        "best_exact": metrics["best_exact"],
        "questions": metrics["total"],
    }
    path.write_text(json.dumps(content, indent=2) + "\n")
    return path


def load_null_score_threshold(model_name_or_path: str | Path) -> float | None:
    """The threshold saved with a local checkpoint by an earlier evaluation, or None."""
    path = Path(model_name_or_path) / THRESHOLD_FILE
    if not path.is_file():
        return None
    return float(json.loads(path.read_text())["null_score_diff_threshold"])


# --- checkpoints that carry the pipeline ---

# How the package's pipeline imports the span decoding, relative to spanroberta/pipelines/.
PACKAGE_DECODING_IMPORT = "from ..tasks.squad.span_decoding import"


def save_qa_checkpoint(trainer: Trainer, output_dir: str | Path) -> None:
    """Saves the model and tokenizer with the question-answering pipeline's code, so that
    `pipeline("question-answering", model=output_dir, trust_remote_code=True)` works without spanroberta.

    transformers 5 has no question-answering pipeline of its own (the task is in its REMOVED_TASKS), so the
    pipeline file named in `custom_pipelines` is the only way to that call without spanroberta, whatever the
    architecture. A stock architecture (BertForQuestionAnswering, RobertaForQuestionAnswering) stays
    transformers' own class, loaded without remote code; only spanroberta's model types carry their modeling code
    too (see modeling_spanroberta). Where spanroberta is imported, its registered pipeline serves the task and
    the checkpoint's copy is not run (`register_question_answering_pipeline`)."""
    pipeline_file = Path(question_answering.__file__)
    trainer.model.config.custom_pipelines = {
        question_answering.TASK: {
            "impl": f"{pipeline_file.stem}.{question_answering.QuestionAnsweringPipeline.__name__}",
            "pt": ["AutoModelForQuestionAnswering"],
            "type": "text",
        }
    }
    trainer.save_model(str(output_dir))
    if trainer.is_world_process_zero():
        decoding_file = Path(span_decoding.__file__)
        shutil.copyfile(decoding_file, Path(output_dir) / decoding_file.name)
        # In the checkpoint the two files lie side by side: the pipeline imports the span decoding from beside it.
        (Path(output_dir) / pipeline_file.name).write_text(checkpoint_pipeline_code(), encoding="utf-8")


def checkpoint_pipeline_code() -> str:
    """The pipeline's code as a checkpoint carries it, importing span_decoding.py from beside it."""
    code = Path(question_answering.__file__).read_text(encoding="utf-8")
    if PACKAGE_DECODING_IMPORT not in code:
        raise RuntimeError(f"{question_answering.__file__} no longer imports {PACKAGE_DECODING_IMPORT!r}.")
    return code.replace(PACKAGE_DECODING_IMPORT, "from .span_decoding import")
