"""SQuAD's official metrics, offline: v1.1 (exact match, token F1) and v2.0 (with the HasAns/NoAns splits
and the best no-answer thresholds); and MRQA 2019's, which are v1.1's per dataset with their macro average.

`evaluate.load("squad")` and `evaluate.load("squad_v2")` fetch their code from the Hub and fail offline, so
the official evaluation scripts (evaluate-v1.1.py and evaluate-v2.0.py from the SQuAD site) are ported
here. The numbers are the scripts' own, bit for bit: the same normalisation, the same per-question maxima,
the same summation order, percentages as the scripts print them. The two versions differ in small ways
that matter (v2.0 drops gold answers that normalise to nothing; v2.0's F1 of two empty answers is 1, v1.1's
is 0; v1.1 scores a missing prediction 0, v2.0 leaves it out), so each keeps its own definitions.

Gold answers are given as {question id: [answer texts]} ([] for an unanswerable question), in the order of
the dataset; `gold_answers_from_squad_json` builds that from the official nested JSON.

The same metrics are available through evaluate's interface (`load_squad_metric`), taking the Hub's
formats: predictions [{"id", "prediction_text"(, "no_answer_probability")}] and references
[{"id", "answers": {"text": [...], "answer_start": [...]}}].
"""

from __future__ import annotations

import logging
import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import datasets
import evaluate

logger = logging.getLogger(__name__)

GoldAnswers = Mapping[str, Sequence[str]]

V1_KEYS = ("exact_match", "f1")
V2_KEYS = (
    "exact", "f1", "total",
    "HasAns_exact", "HasAns_f1", "HasAns_total",
    "NoAns_exact", "NoAns_f1", "NoAns_total",
    "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh",
)  # fmt: skip

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
    """Lower-cases, drops punctuation and the articles a/an/the, and collapses whitespace (both scripts)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def gold_answers_from_squad_json(data: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """{question id: gold answer texts} from the official JSON's "data" list, in the file's order."""
    return {
        qa["id"]: [answer["text"] for answer in qa["answers"]]
        for article in data
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    }


# --- SQuAD v1.1 (evaluate-v1.1.py) ---


def exact_match_score(prediction: str, ground_truth: str) -> bool:
    """v1.1's exact match of one prediction against one gold answer."""
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def f1_score(prediction: str, ground_truth: str) -> float:
    """v1.1's token F1 of one prediction against one gold answer (0 when no token is shared)."""
    return _token_f1(normalize_answer(prediction).split(), normalize_answer(ground_truth).split())


def _token_f1(prediction_tokens: list[str], gold_tokens: list[str]) -> float:
    """The F1 of the tokens two answers share, as both official scripts compute it (0 when none is shared)."""
    num_same = sum((Counter(prediction_tokens) & Counter(gold_tokens)).values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(gold_tokens)
    return (2 * precision * recall) / (precision + recall)


def squad_v1_evaluate(gold: GoldAnswers, predictions: Mapping[str, str]) -> dict[str, float]:
    """{"exact_match", "f1"} in percent, as evaluate-v1.1.py prints them.

    Every gold question counts; one without a prediction scores 0 (the script warns, so do we).
    """
    scores = squad_v1_question_scores(gold, predictions)
    exact_match = f1 = 0
    for exact, f1_of_question in scores.values():
        exact_match += exact
        f1 += f1_of_question
    return {"exact_match": 100.0 * exact_match / len(scores), "f1": 100.0 * f1 / len(scores)}


def squad_v1_question_scores(gold: GoldAnswers, predictions: Mapping[str, str]) -> dict[str, tuple[bool, float]]:
    """Each gold question's exact match and F1 (the maxima over its gold answers), in the gold's order, as
    evaluate-v1.1.py sums them: a question without a prediction scores 0 (the script warns, so do we)."""
    scores = {}
    missing = []
    for qid, ground_truths in gold.items():
        if qid not in predictions:
            missing.append(qid)
            scores[qid] = (False, 0)
            continue
        prediction = predictions[qid]
        scores[qid] = (max(exact_match_score(prediction, truth) for truth in ground_truths),
                       max(f1_score(prediction, truth) for truth in ground_truths))  # fmt: skip
    if missing:
        logger.warning("%d unanswered question(s) receive score 0, e.g. %s", len(missing), missing[0])
    return scores


# --- MRQA 2019 (mrqa_official_eval.py) ---


def mrqa_evaluate(
    gold_by_dataset: Mapping[str, GoldAnswers], predictions: Mapping[str, str]
) -> dict[str, float]:
    """MRQA 2019's scores: each dataset's as its leaderboard names them ({dataset}_em, {dataset}_f1), and their
    macro averages over the datasets (macro_em, macro_f1), every dataset counting once whatever its size, as the
    MRQA 2019 overview (Fisch et al., 2019) averages its per-dataset F1.

    `gold_by_dataset` is {dataset: {qid: gold answers}}. The shared task's mrqa_official_eval.py is SQuAD
    evaluate-v1.1.py keyed by qid: the same normalisation, the maximum over the gold answers, percentages, and a
    question without a prediction scores 0; so each dataset is scored by `squad_v1_evaluate`.
    """
    if not gold_by_dataset:
        raise ValueError("MRQA scores need the gold answers of at least one dataset.")
    result = {}
    for dataset, gold in gold_by_dataset.items():
        scores = squad_v1_evaluate(gold, predictions)
        result[f"{dataset}_em"], result[f"{dataset}_f1"] = scores["exact_match"], scores["f1"]
    for metric in ("em", "f1"):
        result[f"macro_{metric}"] = sum(result[f"{dataset}_{metric}"] for dataset in gold_by_dataset) / len(
            gold_by_dataset
        )
    return result


# --- SQuAD v2.0 (evaluate-v2.0.py) ---


def compute_exact(a_gold: str, a_pred: str) -> int:
    """v2.0's exact match of one prediction against one gold answer ("" is the gold of a no-answer)."""
    return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def compute_f1(a_gold: str, a_pred: str) -> float:
    """v2.0's token F1; when either side is empty it is 1 if both are, else 0."""
    gold_toks = normalize_answer(a_gold).split() if a_gold else []
    pred_toks = normalize_answer(a_pred).split() if a_pred else []
    if not gold_toks or not pred_toks:
        return int(gold_toks == pred_toks)
    return _token_f1(pred_toks, gold_toks)


def squad_v2_evaluate(
    gold: GoldAnswers,
    predictions: Mapping[str, str],
    na_probs: Mapping[str, float] | None = None,
    na_prob_thresh: float = 1.0,
) -> dict[str, float | int]:
    """The keys evaluate-v2.0.py prints, in its order: exact, f1, total, HasAns_*, NoAns_* and, when
    `na_probs` ({id: no-answer score}, the script's --na-prob-file) is given, best_exact(_thresh) and
    best_f1(_thresh).

    A question whose no-answer score exceeds `na_prob_thresh` counts as answered with "" (the script's
    --na-prob-thresh). Predictions missing for some question are left out of the totals, as the script
    does; the HasAns/NoAns splits then fail as the script's would.
    """
    with_thresholds = na_probs is not None
    if na_probs is None:
        na_probs = {qid: 0.0 for qid in predictions}
    has_answer = {qid: bool(answers) for qid, answers in gold.items()}
    exact_raw, f1_raw = _raw_scores(gold, predictions)
    exact_thresh = _apply_no_answer_threshold(exact_raw, na_probs, has_answer, na_prob_thresh)
    f1_thresh = _apply_no_answer_threshold(f1_raw, na_probs, has_answer, na_prob_thresh)
    result = _eval_dict(exact_thresh, f1_thresh)
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [qid for qid, has in has_answer.items() if has is wanted]
        if qids:
            split = _eval_dict(exact_thresh, f1_thresh, qids)
            result.update({f"{prefix}_{key}": value for key, value in split.items()})
    if with_thresholds:
        for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
            result[f"best_{name}"], result[f"best_{name}_thresh"] = _best_threshold(
                predictions, raw, na_probs, has_answer
            )
    return result


def squad_v2_question_scores(gold: GoldAnswers, predictions: Mapping[str, str]) -> dict[str, tuple[int, float]]:
    """Each predicted question's exact match and F1 as evaluate-v2.0.py scores it without a no-answer file: an
    unanswerable question (or one whose gold answers normalise to nothing) is right only when answered "", and a
    question without a prediction is left out. Scoring predictions.json this way gives its exact and f1."""
    exact_scores, f1_scores = _raw_scores(gold, predictions)
    return {qid: (exact_scores[qid], f1_scores[qid]) for qid in exact_scores}


def _raw_scores(gold: GoldAnswers, predictions: Mapping[str, str]) -> tuple[dict[str, int], dict[str, float]]:
    exact_scores, f1_scores = {}, {}
    missing = []
    for qid, answers in gold.items():
        # For unanswerable questions (and golds that normalise to nothing) the only right answer is "".
        gold_answers = [answer for answer in answers if normalize_answer(answer)] or [""]
        if qid not in predictions:
            missing.append(qid)
            continue
        prediction = predictions[qid]
        exact_scores[qid] = max(compute_exact(answer, prediction) for answer in gold_answers)
        f1_scores[qid] = max(compute_f1(answer, prediction) for answer in gold_answers)
    if missing:
        logger.warning("Missing prediction for %d question(s), e.g. %s", len(missing), missing[0])
    return exact_scores, f1_scores


def _apply_no_answer_threshold(
    scores: Mapping[str, float], na_probs: Mapping[str, float], has_answer: Mapping[str, bool], threshold: float
) -> dict[str, float]:
    return {qid: float(not has_answer[qid]) if na_probs[qid] > threshold else s for qid, s in scores.items()}


def _eval_dict(
    exact_scores: Mapping[str, float], f1_scores: Mapping[str, float], qids: Sequence[str] | None = None
) -> dict[str, float | int]:
    if qids is None:
        total = len(exact_scores)
        return {
            "exact": 100.0 * sum(exact_scores.values()) / total,
            "f1": 100.0 * sum(f1_scores.values()) / total,
            "total": total,
        }
    total = len(qids)
    return {
        "exact": 100.0 * sum(exact_scores[qid] for qid in qids) / total,
        "f1": 100.0 * sum(f1_scores[qid] for qid in qids) / total,
        "total": total,
    }


def _best_threshold(
    predictions: Mapping[str, str],
    scores: Mapping[str, float],
    na_probs: Mapping[str, float],
    has_answer: Mapping[str, bool],
) -> tuple[float, float]:
    """The no-answer threshold with the best total score: questions are answered in increasing order of
    their no-answer score, starting from answering none (which scores every unanswerable question right)."""
    current = best = sum(1 for has in has_answer.values() if not has)
    best_threshold = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            current += scores[qid]
        elif predictions[qid]:
            current -= 1
        if current > best:
            best, best_threshold = current, na_probs[qid]
    return 100.0 * best / len(scores), best_threshold


# --- evaluate's interface ---

_CITATION = """@inproceedings{rajpurkar-etal-2016-squad, title={SQuAD: 100,000+ Questions for Machine Comprehension
of Text}, author={Rajpurkar, Pranav and Zhang, Jian and Lopyrev, Konstantin and Liang, Percy}, booktitle={EMNLP},
year={2016}}
@inproceedings{rajpurkar-etal-2018-know, title={Know What You Don't Know: Unanswerable Questions for SQuAD},
author={Rajpurkar, Pranav and Jia, Robin and Liang, Percy}, booktitle={ACL}, year={2018}}"""

_REFERENCE_FEATURES = {
    "id": datasets.Value("string"),
    "answers": datasets.Sequence({"text": datasets.Value("string"), "answer_start": datasets.Value("int32")}),
}


def _metric_info(description: str, inputs_description: str, prediction_features: dict) -> evaluate.MetricInfo:
    """What evaluate shows of either metric: the version's description and predictions, SQuAD's references."""
    return evaluate.MetricInfo(
        description=description,
        citation=_CITATION,
        inputs_description=inputs_description,
        features=datasets.Features({"predictions": prediction_features, "references": _REFERENCE_FEATURES}),
    )


class Squad(evaluate.Metric):
    """SQuAD v1.1 through evaluate's interface, offline: `compute(predictions=[{"id", "prediction_text"}],
    references=[{"id", "answers": {"text", "answer_start"}}])` -> {"exact_match", "f1"}."""

    def _info(self) -> evaluate.MetricInfo:
        return _metric_info(
            "SQuAD v1.1: exact match and token F1 of the official evaluation script.",
            self.__doc__,
            {"id": datasets.Value("string"), "prediction_text": datasets.Value("string")},
        )

    def _compute(self, predictions: Sequence[dict], references: Sequence[dict]) -> dict[str, float]:
        return squad_v1_evaluate(
            _gold_from_references(references), {p["id"]: p["prediction_text"] for p in predictions}
        )


class SquadV2(evaluate.Metric):
    """SQuAD v2.0 through evaluate's interface, offline: `compute(predictions=[{"id", "prediction_text",
    "no_answer_probability"}], references=[{"id", "answers": {"text", "answer_start"}}],
    no_answer_threshold=1.0)` -> the official v2.0 keys, best thresholds included."""

    def _info(self) -> evaluate.MetricInfo:
        return _metric_info(
            "SQuAD v2.0: the official evaluation script's scores, no-answer thresholds included.",
            self.__doc__,
            {
                "id": datasets.Value("string"),
                "prediction_text": datasets.Value("string"),
                "no_answer_probability": datasets.Value("float64"),
            },
        )

    def _compute(
        self, predictions: Sequence[dict], references: Sequence[dict], no_answer_threshold: float = 1.0
    ) -> dict[str, float | int]:
        return squad_v2_evaluate(
            _gold_from_references(references),
            {p["id"]: p["prediction_text"] for p in predictions},
            na_probs={p["id"]: p["no_answer_probability"] for p in predictions},
            na_prob_thresh=no_answer_threshold,
        )


def load_squad_metric(version_2_with_negative: bool = False, **kwargs: Any) -> evaluate.Metric:
    """The offline stand-in for `evaluate.load("squad")` / `evaluate.load("squad_v2")`; kwargs go to the
    metric's constructor (e.g. `experiment_id`, `cache_dir`)."""
    return (SquadV2 if version_2_with_negative else Squad)(**kwargs)


def _gold_from_references(references: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    return {reference["id"]: list(reference["answers"]["text"]) for reference in references}
