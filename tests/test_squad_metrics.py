"""SQuAD metrics: the numbers of the official evaluation scripts, bit for bit, on the real dev sets.

The official scripts are the oracle: their scoring code is kept below verbatim and run as programs, on
../shared/data/squad with constructed predictions that hit every path (exact and partial answers,
normalisation, empty answers, missing predictions, tied no-answer scores)."""

import json
import random
import subprocess
import sys

import pytest

from conftest import shared_data
from spanroberta.tasks.squad.scoring import (
    V1_KEYS,
    V2_KEYS,
    compute_f1,
    f1_score,
    gold_answers_from_squad_json,
    load_squad_metric,
    normalize_answer,
    squad_v1_evaluate,
    squad_v1_question_scores,
    squad_v2_evaluate,
    squad_v2_question_scores,
)


def constructed_predictions(data: list, seed: int, allow_missing: bool) -> tuple[dict, dict]:
    """Predictions of every kind for each question of the official JSON, and no-answer scores with ties."""
    rng = random.Random(seed)
    predictions, na_probs = {}, {}
    for article in data:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            for qa in paragraph["qas"]:
                golds = [a["text"] for a in qa["answers"] + qa.get("plausible_answers", [])] or ["nothing"]
                gold = rng.choice(golds)
                words = context.split()
                start = rng.randrange(len(words))
                kind = rng.randrange(7 if allow_missing else 6)
                if kind == 6:
                    continue  # no prediction for this question
                predictions[qa["id"]] = [
                    gold,
                    f"The {gold.upper()}!",
                    " ".join(gold.split()[: max(1, len(gold.split()) // 2)]),
                    " ".join(words[start : start + rng.randint(1, 6)]),
                    "",
                    f"an {gold}, {gold}",
                ][kind]
                # Higher for unanswerable questions, as a model's would be; two decimals make some ties.
                low, high = (-3.0, 1.0) if qa["answers"] else (-1.0, 3.0)
                na_probs[qa["id"]] = round(rng.uniform(low, high), 2)
    return predictions, na_probs


def run_official(script: str, tmp_path, *args) -> dict:
    path = tmp_path / "official.py"
    path.write_text(script)
    out = tmp_path / "official_out.json"
    result = subprocess.run(
        [sys.executable, str(path), *map(str, args)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(out.read_text()) if out.exists() else json.loads(result.stdout)


def test_v1_matches_the_official_script_on_the_dev_set(tmp_path):
    dataset = json.loads(shared_data("squad", "dev-v1.1.json").read_text())
    predictions, _ = constructed_predictions(dataset["data"], seed=1, allow_missing=True)
    (tmp_path / "pred.json").write_text(json.dumps(predictions))

    official = run_official(OFFICIAL_V1_1, tmp_path, shared_data("squad", "dev-v1.1.json"), tmp_path / "pred.json")
    ours = squad_v1_evaluate(gold_answers_from_squad_json(dataset["data"]), predictions)

    assert ours == official
    assert tuple(ours) == V1_KEYS
    assert 0 < ours["exact_match"] < ours["f1"] < 100  # the predictions are neither all right nor all wrong


@pytest.mark.parametrize("threshold", [1.0, -0.5])
def test_v2_matches_the_official_script_on_the_dev_set(tmp_path, threshold):
    data_file = shared_data("squad", "dev-v2.0.part-a.json")
    dataset = json.loads(data_file.read_text())
    # The official v2.0 script fails on a missing prediction, so every question gets one.
    predictions, na_probs = constructed_predictions(dataset["data"], seed=2, allow_missing=False)
    (tmp_path / "pred.json").write_text(json.dumps(predictions))
    (tmp_path / "na.json").write_text(json.dumps(na_probs))

    official = run_official(
        OFFICIAL_V2_0, tmp_path, data_file, tmp_path / "pred.json",
        "--na-prob-file", tmp_path / "na.json", "--na-prob-thresh", threshold,
        "--out-file", tmp_path / "official_out.json",
    )  # fmt: skip
    ours = squad_v2_evaluate(gold_answers_from_squad_json(dataset["data"]), predictions, na_probs, threshold)

    assert ours == official
    assert tuple(ours) == V2_KEYS
    assert ours["best_f1"] > ours["f1"] and ours["NoAns_total"] == 1527


def test_v2_without_no_answer_scores_has_no_best_thresholds():
    scores = squad_v2_evaluate({"q1": ["Denver Broncos"], "q2": []}, {"q1": "the Denver Broncos", "q2": ""})
    assert scores == {
        "exact": 100.0, "f1": 100.0, "total": 2,
        "HasAns_exact": 100.0, "HasAns_f1": 100.0, "HasAns_total": 1,
        "NoAns_exact": 100.0, "NoAns_f1": 100.0, "NoAns_total": 1,
    }  # fmt: skip


def test_the_versions_differ_where_the_official_scripts_do():
    assert normalize_answer("  The Cat's, hat!  ") == "cats hat"
    # Two empty answers: v2.0's F1 is 1 (a right no-answer), v1.1's is 0.
    assert compute_f1("", "") == 1 and f1_score("", "") == 0
    # v1.1 scores a missing prediction 0; v2.0 leaves it out.
    gold = {"q1": ["Paris"], "q2": ["Rome"]}
    assert squad_v1_evaluate(gold, {"q1": "Paris"}) == {"exact_match": 50.0, "f1": 50.0}
    assert squad_v2_evaluate({"q1": ["Paris"]}, {"q1": "paris", "extra": "x"})["total"] == 1


def test_each_questions_scores_average_to_the_official_ones():
    gold = {"q1": ["Paris"], "q2": ["the Rome city"], "q3": []}
    predictions = {"q1": "Paris", "q2": "Rome", "q3": ""}
    v1 = squad_v1_question_scores({"q1": gold["q1"], "q2": gold["q2"]}, {"q2": "Rome"})
    assert v1 == {"q1": (False, 0), "q2": (False, 2 / 3)}  # the missing q1 scores 0, as in evaluate-v1.1.py
    v2 = squad_v2_question_scores(gold, predictions)
    assert v2["q3"] == (1, 1)  # a right no-answer
    official = squad_v2_evaluate(gold, predictions)
    assert 100 * sum(f1 for _, f1 in v2.values()) / len(v2) == pytest.approx(official["f1"])


def test_evaluate_interface_gives_the_same_numbers(tmp_path):
    references = [
        {"id": "q1", "answers": {"text": ["Denver Broncos", "Broncos"], "answer_start": [0, 7]}},
        {"id": "q2", "answers": {"text": ["Santa Clara"], "answer_start": [3]}},
        {"id": "q3", "answers": {"text": [], "answer_start": []}},
    ]
    texts = {"q1": "Broncos", "q2": "Clara, California", "q3": "Levi's Stadium"}
    odds = {"q1": -2.0, "q2": 0.5, "q3": 1.5}
    gold = {r["id"]: r["answers"]["text"] for r in references}

    squad = load_squad_metric(cache_dir=str(tmp_path))
    predictions = [{"id": i, "prediction_text": texts[i]} for i in ("q1", "q2")]
    squad.add_batch(predictions=predictions, references=references[:2])
    assert squad.compute() == squad_v1_evaluate({k: gold[k] for k in ("q1", "q2")}, texts)

    squad_v2 = load_squad_metric(version_2_with_negative=True, cache_dir=str(tmp_path))
    result = squad_v2.compute(
        predictions=[{"id": i, "prediction_text": texts[i], "no_answer_probability": odds[i]} for i in texts],
        references=references,
        no_answer_threshold=1.0,
    )
    assert result == squad_v2_evaluate(gold, texts, odds, 1.0)
    # Best: answer q1 (F1 1) and q2 (F1 0.5), leave q3 (odds 1.5) unanswered (right).
    assert result["best_f1_thresh"] == 0.5 and result["best_f1"] == pytest.approx(250 / 3)


# The official scripts of the SQuAD site (rajpurkar.github.io/SQuAD-explorer), run as the oracle. v1.1 is
# verbatim; v2.0 is verbatim except for its optional precision-recall plots (--out-image-dir), left out.
OFFICIAL_V1_1 = r'''
""" Official evaluation script for v1.1 of the SQuAD dataset. """
from __future__ import print_function
from collections import Counter
import string
import re
import argparse
import json
import sys


def normalize_answer(s):
    """Lower text and remove punctuation, articles and extra whitespace."""
    def remove_articles(text):
        return re.sub(r'\b(a|an|the)\b', ' ', text)

    def white_space_fix(text):
        return ' '.join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return ''.join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def f1_score(prediction, ground_truth):
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def exact_match_score(prediction, ground_truth):
    return (normalize_answer(prediction) == normalize_answer(ground_truth))


def metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    scores_for_ground_truths = []
    for ground_truth in ground_truths:
        score = metric_fn(prediction, ground_truth)
        scores_for_ground_truths.append(score)
    return max(scores_for_ground_truths)


def evaluate(dataset, predictions):
    f1 = exact_match = total = 0
    for article in dataset:
        for paragraph in article['paragraphs']:
            for qa in paragraph['qas']:
                total += 1
                if qa['id'] not in predictions:
                    message = 'Unanswered question ' + qa['id'] + \
                              ' will receive score 0.'
                    print(message, file=sys.stderr)
                    continue
                ground_truths = list(map(lambda x: x['text'], qa['answers']))
                prediction = predictions[qa['id']]
                exact_match += metric_max_over_ground_truths(
                    exact_match_score, prediction, ground_truths)
                f1 += metric_max_over_ground_truths(
                    f1_score, prediction, ground_truths)

    exact_match = 100.0 * exact_match / total
    f1 = 100.0 * f1 / total

    return {'exact_match': exact_match, 'f1': f1}


if __name__ == '__main__':
    expected_version = '1.1'
    parser = argparse.ArgumentParser(
        description='Evaluation for SQuAD ' + expected_version)
    parser.add_argument('dataset_file', help='Dataset file')
    parser.add_argument('prediction_file', help='Prediction File')
    args = parser.parse_args()
    with open(args.dataset_file) as dataset_file:
        dataset_json = json.load(dataset_file)
        if (dataset_json['version'] != expected_version):
            print('Evaluation expects v-' + expected_version +
                  ', but got dataset with v-' + dataset_json['version'],
                  file=sys.stderr)
        dataset = dataset_json['data']
    with open(args.prediction_file) as prediction_file:
        predictions = json.load(prediction_file)
    print(json.dumps(evaluate(dataset, predictions)))
'''

OFFICIAL_V2_0 = r'''
"""Official evaluation script for SQuAD version 2.0.

In addition to basic functionality, we also compute additional statistics and
plot precision-recall curves if an additional na_prob.json file is provided.
This file is expected to map question ID's to the model's predicted probability
that a question is unanswerable.
"""
import argparse
import collections
import json
import numpy as np
import os
import re
import string
import sys

OPTS = None

def parse_args():
  parser = argparse.ArgumentParser('Official evaluation script for SQuAD version 2.0.')
  parser.add_argument('data_file', metavar='data.json', help='Input data JSON file.')
  parser.add_argument('pred_file', metavar='pred.json', help='Model predictions.')
  parser.add_argument('--out-file', '-o', metavar='eval.json',
                      help='Write accuracy metrics to file (default is stdout).')
  parser.add_argument('--na-prob-file', '-n', metavar='na_prob.json',
                      help='Model estimates of probability of no answer.')
  parser.add_argument('--na-prob-thresh', '-t', type=float, default=1.0,
                      help='Predict "" if no-answer probability exceeds this (default = 1.0).')
  parser.add_argument('--out-image-dir', '-p', metavar='out_images', default=None,
                      help='Save precision-recall curves to directory.')
  parser.add_argument('--verbose', '-v', action='store_true')
  if len(sys.argv) == 1:
    parser.print_help()
    sys.exit(1)
  return parser.parse_args()

def make_qid_to_has_ans(dataset):
  qid_to_has_ans = {}
  for article in dataset:
    for p in article['paragraphs']:
      for qa in p['qas']:
        qid_to_has_ans[qa['id']] = bool(qa['answers'])
  return qid_to_has_ans

def normalize_answer(s):
  """Lower text and remove punctuation, articles and extra whitespace."""
  def remove_articles(text):
    regex = re.compile(r'\b(a|an|the)\b', re.UNICODE)
    return re.sub(regex, ' ', text)
  def white_space_fix(text):
    return ' '.join(text.split())
  def remove_punc(text):
    exclude = set(string.punctuation)
    return ''.join(ch for ch in text if ch not in exclude)
  def lower(text):
    return text.lower()
  return white_space_fix(remove_articles(remove_punc(lower(s))))

def get_tokens(s):
  if not s: return []
  return normalize_answer(s).split()

def compute_exact(a_gold, a_pred):
  return int(normalize_answer(a_gold) == normalize_answer(a_pred))

def compute_f1(a_gold, a_pred):
  gold_toks = get_tokens(a_gold)
  pred_toks = get_tokens(a_pred)
  common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
  num_same = sum(common.values())
  if len(gold_toks) == 0 or len(pred_toks) == 0:
    # If either is no-answer, then F1 is 1 if they agree, 0 otherwise
    return int(gold_toks == pred_toks)
  if num_same == 0:
    return 0
  precision = 1.0 * num_same / len(pred_toks)
  recall = 1.0 * num_same / len(gold_toks)
  f1 = (2 * precision * recall) / (precision + recall)
  return f1

def get_raw_scores(dataset, preds):
  exact_scores = {}
  f1_scores = {}
  for article in dataset:
    for p in article['paragraphs']:
      for qa in p['qas']:
        qid = qa['id']
        gold_answers = [a['text'] for a in qa['answers']
                        if normalize_answer(a['text'])]
        if not gold_answers:
          # For unanswerable questions, only correct answer is empty string
          gold_answers = ['']
        if qid not in preds:
          print('Missing prediction for %s' % qid)
          continue
        a_pred = preds[qid]
        # Take max over all gold answers
        exact_scores[qid] = max(compute_exact(a, a_pred) for a in gold_answers)
        f1_scores[qid] = max(compute_f1(a, a_pred) for a in gold_answers)
  return exact_scores, f1_scores

def apply_no_ans_threshold(scores, na_probs, qid_to_has_ans, na_prob_thresh):
  new_scores = {}
  for qid, s in scores.items():
    pred_na = na_probs[qid] > na_prob_thresh
    if pred_na:
      new_scores[qid] = float(not qid_to_has_ans[qid])
    else:
      new_scores[qid] = s
  return new_scores

def make_eval_dict(exact_scores, f1_scores, qid_list=None):
  if not qid_list:
    total = len(exact_scores)
    return collections.OrderedDict([
        ('exact', 100.0 * sum(exact_scores.values()) / total),
        ('f1', 100.0 * sum(f1_scores.values()) / total),
        ('total', total),
    ])
  else:
    total = len(qid_list)
    return collections.OrderedDict([
        ('exact', 100.0 * sum(exact_scores[k] for k in qid_list) / total),
        ('f1', 100.0 * sum(f1_scores[k] for k in qid_list) / total),
        ('total', total),
    ])

def merge_eval(main_eval, new_eval, prefix):
  for k in new_eval:
    main_eval['%s_%s' % (prefix, k)] = new_eval[k]

def find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
  num_no_ans = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
  cur_score = num_no_ans
  best_score = cur_score
  best_thresh = 0.0
  qid_list = sorted(na_probs, key=lambda k: na_probs[k])
  for i, qid in enumerate(qid_list):
    if qid not in scores: continue
    if qid_to_has_ans[qid]:
      diff = scores[qid]
    else:
      if preds[qid]:
        diff = -1
      else:
        diff = 0
    cur_score += diff
    if cur_score > best_score:
      best_score = cur_score
      best_thresh = na_probs[qid]
  return 100.0 * best_score / len(scores), best_thresh

def find_all_best_thresh(main_eval, preds, exact_raw, f1_raw, na_probs, qid_to_has_ans):
  best_exact, exact_thresh = find_best_thresh(preds, exact_raw, na_probs, qid_to_has_ans)
  best_f1, f1_thresh = find_best_thresh(preds, f1_raw, na_probs, qid_to_has_ans)
  main_eval['best_exact'] = best_exact
  main_eval['best_exact_thresh'] = exact_thresh
  main_eval['best_f1'] = best_f1
  main_eval['best_f1_thresh'] = f1_thresh

def main():
  with open(OPTS.data_file) as f:
    dataset_json = json.load(f)
    dataset = dataset_json['data']
  with open(OPTS.pred_file) as f:
    preds = json.load(f)
  if OPTS.na_prob_file:
    with open(OPTS.na_prob_file) as f:
      na_probs = json.load(f)
  else:
    na_probs = {k: 0.0 for k in preds}
  qid_to_has_ans = make_qid_to_has_ans(dataset)  # maps qid to True/False
  has_ans_qids = [k for k, v in qid_to_has_ans.items() if v]
  no_ans_qids = [k for k, v in qid_to_has_ans.items() if not v]
  exact_raw, f1_raw = get_raw_scores(dataset, preds)
  exact_thresh = apply_no_ans_threshold(exact_raw, na_probs, qid_to_has_ans,
                                        OPTS.na_prob_thresh)
  f1_thresh = apply_no_ans_threshold(f1_raw, na_probs, qid_to_has_ans,
                                     OPTS.na_prob_thresh)
  out_eval = make_eval_dict(exact_thresh, f1_thresh)
  if has_ans_qids:
    has_ans_eval = make_eval_dict(exact_thresh, f1_thresh, qid_list=has_ans_qids)
    merge_eval(out_eval, has_ans_eval, 'HasAns')
  if no_ans_qids:
    no_ans_eval = make_eval_dict(exact_thresh, f1_thresh, qid_list=no_ans_qids)
    merge_eval(out_eval, no_ans_eval, 'NoAns')
  if OPTS.na_prob_file:
    find_all_best_thresh(out_eval, preds, exact_raw, f1_raw, na_probs, qid_to_has_ans)
  if OPTS.out_file:
    with open(OPTS.out_file, 'w') as f:
      json.dump(out_eval, f)
  else:
    print(json.dumps(out_eval, indent=2))

if __name__ == '__main__':
  OPTS = parse_args()
  main()
'''
