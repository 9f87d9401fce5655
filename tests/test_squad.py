"""run_squad.py and spanroberta.tasks.squad: readers and their errors, windows and labels, and tiny models
fine-tuned end to end on real SQuAD data.

There is no SQuAD train split in ../shared/data: the end-to-end runs split the dev sets by article (v1.1:
the first 36 articles to train, the rest to evaluate; v2.0 part a: 6 and 2)."""

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from datasets import Dataset
from transformers import RobertaConfig, RobertaForQuestionAnswering

import run_squad
from spanroberta.tasks.squad.task import SQUAD
from conftest import PROJECT_ROOT, checked_results, shared_data
from test_squad_metrics import OFFICIAL_V2_0, run_official
from spanroberta import SpanRobertaConfig, SpanRobertaForPreTraining
from spanroberta.tasks.squad.scoring import (
    V1_KEYS,
    V2_KEYS,
    squad_v1_evaluate,
    squad_v1_question_scores,
    squad_v2_evaluate,
)
from spanroberta.tasks.squad.span_decoding import context_offsets, encode_windows
from spanroberta.records import read_records
from spanroberta.tasks.squad.features import prepare_train_features
from spanroberta.tasks.squad.postprocessing import THRESHOLD_FILE
from spanroberta.tasks.squad.reading import SquadFormatError, check_squad_dataset, read_squad_file

WINDOW_ARGS = ["--max_seq_length", "128", "--doc_stride", "32", "--max_query_length", "32"]
FAST_ARGS = [
    *WINDOW_ARGS, "--use_cpu", "--save_strategy", "no", "--disable_tqdm", "true", "--report_to", "none",
    "--max_steps", "3", "--per_device_train_batch_size", "8", "--per_device_eval_batch_size", "64",
]  # fmt: skip


def tiny_settings(tokenizer) -> dict:
    return dict(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=514, pad_token_id=1, bos_token_id=0, eos_token_id=2,
    )  # fmt: skip


@pytest.fixture(scope="module")
def pretrained(tiny_tokenizer, tmp_path_factory):
    """A spanroberta pretraining checkpoint, as run_pretraining.py leaves one."""
    path = tmp_path_factory.mktemp("pretrained")
    SpanRobertaForPreTraining(SpanRobertaConfig(**tiny_settings(tiny_tokenizer))).save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


def squad_json(articles: list, version: str) -> dict:
    return {"version": version, "data": articles}


def write_json(path, content) -> str:
    path.write_text(json.dumps(content))
    return str(path)


def article(*qas, context="Denver Broncos won Super Bowl 50 in Santa Clara.", title="Super_Bowl_50") -> dict:
    return {"title": title, "paragraphs": [{"context": context, "qas": list(qas)}]}


def qa(qid: str, text: str | None = "Santa Clara", start: int | None = 36, **extra) -> dict:
    answers = [] if text is None else [{"text": text, "answer_start": start}]
    return {"id": qid, "question": "Where?", "answers": answers, **extra}


# --- readers and bad input ---


def test_the_three_file_formats_read_the_same(tmp_path):
    nested = squad_json([article(qa("q1"), qa("q2", "Denver Broncos", 0))], "1.1")
    rows = list(read_squad_file(write_json(tmp_path / "nested.json", nested), version_2_with_negative=False))
    assert rows[0] == {
        "id": "q1", "title": "Super_Bowl_50", "context": nested["data"][0]["paragraphs"][0]["context"],
        "question": "Where?", "answers": {"text": ["Santa Clara"], "answer_start": [36]},
    }  # fmt: skip
    (tmp_path / "flat.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    write_json(tmp_path / "flat.json", {"data": rows})
    for name in ("flat.jsonl", "flat.json"):
        assert list(read_squad_file(tmp_path / name, version_2_with_negative=False)) == rows


BAD_INPUTS = {
    "answer_start": (
        [article(qa("q7", "Santa Clara", 30))], False,
        "question id 'q7': answer 'Santa Clara' does not match the context at answer_start 30",
    ),
    "empty_context": ([article(qa("q7"), context="  ")], False, "question id 'q7' has an empty context"),
    "no_answers": ([article({"id": "q7", "question": "Where?"})], False, "question id 'q7' is missing 'answers'"),
    "no_question": ([article({"id": "q7", "answers": []})], True, "question id 'q7' is missing 'question'"),
    "v2_without_flag": (
        [article(qa("q1"), qa("q7", None, is_impossible=True))], False,
        "question id 'q7' has no answer: this is SQuAD v2.0 data",
    ),
    "v1_with_flag": (
        [article(qa("q1"), qa("q7"))], True, "no question is unanswerable; this looks like SQuAD v1.1 data"
    ),
    "duplicate": ([article(qa("q7"), qa("q7"))], False, "question id 'q7' already used"),
}  # fmt: skip


@pytest.mark.parametrize("articles, version_2, message", BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_input_names_the_file_and_the_question(tmp_path, articles, version_2, message):
    path = write_json(tmp_path / "bad-squad.json", squad_json(articles, "1.1"))
    with pytest.raises(SquadFormatError) as error:
        read_squad_file(path, version_2_with_negative=version_2)
    assert message in str(error.value) and str(error.value).startswith(path)


def test_json_lines_errors_name_the_line(tmp_path):
    answers = {"text": ["Santa"], "answer_start": [0]}
    good = {"id": "q1", "context": "Santa Clara", "question": "Where?", "answers": answers}
    bad = {**good, "id": "q2", "context": ""}
    (tmp_path / "train.jsonl").write_text(f"{json.dumps(good)}\n\n{json.dumps(bad)}\n")
    with pytest.raises(SquadFormatError, match=r"train.jsonl, line 3: question id 'q2' has an empty context"):
        read_squad_file(tmp_path / "train.jsonl", version_2_with_negative=False)


def test_hub_splits_are_checked_too():
    answers = {"text": ["Rome"], "answer_start": [0]}
    rows = [{"id": "a1", "title": "", "context": "Paris", "question": "Where?", "answers": answers}]
    with pytest.raises(SquadFormatError, match=r"rajpurkar/squad \[train\], row 0: question id 'a1': answer 'Rome'"):
        check_squad_dataset(Dataset.from_list(rows), "rajpurkar/squad [train]", version_2_with_negative=False)


def test_test_files_may_leave_out_answers(tmp_path):
    path = write_json(tmp_path / "test.json", squad_json([article({"id": "q1", "question": "Where?"})], "1.1"))
    assert read_squad_file(path, version_2_with_negative=False, require_answers=False)[0]["answers"]["text"] == []


def test_run_squad_rejects_bad_data_before_loading_any_model(tmp_path, spanroberta_checkpoint):
    path = write_json(tmp_path / "train.json", squad_json([article(qa("q9", "Broncos", 3))], "1.1"))
    argv = ["--model_name_or_path", str(spanroberta_checkpoint), "--output_dir", str(tmp_path / "out"),
            "--train_file", path, "--do_train", *FAST_ARGS]  # fmt: skip
    with pytest.raises(SystemExit, match=r"run_squad.py: error: .*train.json.*'q9'.*does not match the context"):
        run_squad.main(argv)
    assert not (tmp_path / "out" / "model.safetensors").exists()


def test_answerability_flag_needs_a_spanroberta_checkpoint(tmp_path, tiny_tokenizer):
    RobertaForQuestionAnswering(RobertaConfig(**tiny_settings(tiny_tokenizer))).save_pretrained(tmp_path / "roberta")
    tiny_tokenizer.save_pretrained(tmp_path / "roberta")
    path = write_json(tmp_path / "train.json", squad_json([article(qa("q1"), qa("q2", None))], "v2.0"))
    argv = ["--model_name_or_path", str(tmp_path / "roberta"), "--output_dir", str(tmp_path / "out"),
            "--train_file", path, "--do_train", "--version_2_with_negative", "--answerability_head",
            *FAST_ARGS]  # fmt: skip
    with pytest.raises(SystemExit, match="needs a spanroberta checkpoint.*'roberta'"):
        run_squad.main(argv)


# --- windows and labels ---


def test_training_labels_cover_exactly_the_answer_in_every_window(tiny_tokenizer):
    examples = read_squad_file(shared_data("squad", "dev-v1.1.json"), version_2_with_negative=False).select(range(40))
    batch = examples.to_dict()
    features = prepare_train_features(batch, tiny_tokenizer, max_seq_length=96, doc_stride=24, max_query_length=24)
    encoding = encode_windows(tiny_tokenizer, batch["question"], batch["context"], 96, 24, 24)
    # long contexts made several windows (how many depends on how the tiny tokenizer splits words)
    assert len(features["input_ids"]) > len(examples)
    assert max(Counter(encoding["overflow_to_sample_mapping"]).values()) >= 3
    labelled = set()
    for window, example in enumerate(encoding["overflow_to_sample_mapping"]):
        start, end = features["start_positions"][window], features["end_positions"][window]
        answer_start = batch["answers"][example]["answer_start"][0]
        answer_end = answer_start + len(batch["answers"][example]["text"][0])
        offsets = context_offsets(encoding, window)
        context_chars = [offset for offset in offsets if offset is not None]
        holds_answer = context_chars[0][0] <= answer_start and context_chars[-1][1] >= answer_end
        if not holds_answer:
            assert start == end == 0  # <s>
            continue
        labelled.add(example)
        # The labelled tokens are the tightest that cover the answer's characters.
        assert offsets[start][0] <= answer_start < offsets[start][1]
        assert offsets[end][0] < answer_end <= offsets[end][1]
    assert labelled == set(range(len(examples)))


# --- end to end ---


def split_by_article(path, train_articles: slice, eval_articles: slice, tmp_path) -> tuple[str, str]:
    dataset = json.loads(path.read_text())
    return (
        write_json(tmp_path / "train.json", squad_json(dataset["data"][train_articles], dataset["version"])),
        write_json(tmp_path / "dev.json", squad_json(dataset["data"][eval_articles], dataset["version"])),
    )


def read_output(directory, name):
    return json.loads((directory / name).read_text())


def contexts_and_gold(dev_file: str, count: int) -> tuple[dict, dict]:
    """The first `count` questions of an official JSON file: {id: context} and {id: gold answer texts}."""
    data = json.loads(Path(dev_file).read_text())["data"]
    questions = [
        (q["id"], p["context"], [a["text"] for a in q["answers"]])
        for article in data
        for p in article["paragraphs"]
        for q in p["qas"]
    ]
    return {qid: context for qid, context, _ in questions[:count]}, {qid: texts for qid, _, texts in questions[:count]}


@pytest.mark.slow
def test_squad_v1_end_to_end(tmp_path, pretrained):
    dev_set = shared_data("squad", "dev-v1.1.json")
    train_file, dev_file = split_by_article(dev_set, slice(0, 36), slice(36, None), tmp_path)
    out = tmp_path / "out"
    metrics = run_squad.main([
        "--model_name_or_path", str(pretrained), "--output_dir", str(out), "--do_train", "--do_eval",
        "--train_file", train_file, "--validation_file", dev_file,
        "--max_train_samples", "48", "--max_eval_samples", "24", *FAST_ARGS,
    ])  # fmt: skip

    contexts, gold = contexts_and_gold(dev_file, 24)
    predictions = read_output(out, "predictions.json")
    nbest = read_output(out, "nbest_predictions.json")
    assert list(predictions) == list(gold)
    for qid, answer in predictions.items():
        assert answer and answer in contexts[qid]
        assert nbest[qid][0]["text"] == answer
        assert contexts[qid][nbest[qid][0]["answer_start"]:].startswith(answer)
        assert sum(entry["probability"] for entry in nbest[qid]) == pytest.approx(1.0)
    # The scores are the official ones of the files written.
    # eval_results.json: the official scores (percentages) after eval_, and the questions scored.
    official = {f"eval_{key}": value for key, value in squad_v1_evaluate(gold, predictions).items()}
    assert set(official) == {f"eval_{key}" for key in V1_KEYS}
    assert metrics == checked_results(out, SQUAD.reports["squad"]) == {**official, "eval_samples": 24}
    # eval_outcomes.json: each question's exact match and F1, in the gold's order, whose means are the scores.
    outcomes = read_output(out, SQUAD.reports["squad"].outcomes_file)
    question_scores = squad_v1_question_scores(gold, predictions)
    assert outcomes == {
        "eval_exact_match": {"scorer": "mean", "values": [int(exact) for exact, _ in question_scores.values()]},
        "eval_f1": {"scorer": "mean", "values": [f1 for _, f1 in question_scores.values()]},
    }
    for key, outcome in outcomes.items():
        assert 100 * sum(outcome["values"]) / 24 == pytest.approx(metrics[key])
    assert not (out / "null_odds.json").exists()
    # The checkpoint carries the pipeline's code and the model's.
    config = read_output(out, "config.json")
    assert config["custom_pipelines"]["question-answering"]["impl"] == "question_answering.QuestionAnsweringPipeline"
    assert {"question_answering.py", "modeling_spanroberta.py", "model.safetensors"} <= {p.name for p in out.iterdir()}
    # The QA pipeline check, run as its users run it (in a process that imports spanroberta only where the module
    # does), answers from it with and without spanroberta, alike.
    subprocess.run([sys.executable, "-m", "benchmarks.parity.qa_pipeline", "--model", str(out), "--questions", "2",
                    "--records_dir", str(tmp_path / "records")], cwd=PROJECT_ROOT, check=True)  # fmt: skip
    (record,) = read_records("qa-pipeline", tmp_path / "records")
    assert [entry["question"] for entry in record["results"]["answers"]] == [
        qa["question"] for qa in json.loads(dev_set.read_text())["data"][36]["paragraphs"][0]["qas"][:2]]
    assert all(entry["answer"] in record["results"]["context"] for entry in record["results"]["answers"])
    assert record["results"]["without_spanroberta"]["same_answers"] is True
    assert record["settings"]["model_scores"]["f1"] == metrics["eval_f1"]


def questions_only(squad_file, question_ids, path):
    """The official SQuAD JSON of `squad_file` cut down to the given questions, as the official script scores."""
    data = json.loads(Path(squad_file).read_text())
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            paragraph["qas"] = [qa for qa in paragraph["qas"] if qa["id"] in question_ids]
    path.write_text(json.dumps(data))
    return path


@pytest.mark.slow
def test_squad_v2_end_to_end_with_the_answerability_head_and_a_kept_threshold(tmp_path, pretrained):
    dev_set = shared_data("squad", "dev-v2.0.part-a.json")
    train_file, dev_file = split_by_article(dev_set, slice(0, 6), slice(6, None), tmp_path)
    out = tmp_path / "out"
    common = ["--validation_file", dev_file, "--version_2_with_negative", "--max_eval_samples", "30", *FAST_ARGS]
    metrics = run_squad.main([
        "--model_name_or_path", str(pretrained), "--output_dir", str(out), "--do_train", "--do_eval",
        "--train_file", train_file, "--max_train_samples", "48", "--answerability_head", *common,
    ])  # fmt: skip

    contexts, gold = contexts_and_gold(dev_file, 30)
    predictions, null_odds = read_output(out, "predictions.json"), read_output(out, "null_odds.json")
    assert list(predictions) == list(null_odds) == list(gold)
    assert any(not has for has in gold.values()) and any(gold.values())
    for qid, answer in predictions.items():
        if null_odds[qid] > 0.0:  # the default threshold
            assert answer == ""
        else:
            assert answer and answer in contexts[qid]
    assert {f"eval_{key}" for key in V2_KEYS} <= set(checked_results(out, SQUAD.reports["squad_v2"]))
    metrics = {key.removeprefix("eval_"): value for key, value in metrics.items()}
    assert set(V2_KEYS) <= set(metrics) and metrics["null_score_diff_threshold"] == 0.0
    # exact and f1 are the official scores of predictions.json itself.
    official = squad_v2_evaluate(gold, predictions)
    assert {key: metrics[key] for key in official} == pytest.approx(official)
    # and the official script reproduces every key from the best non-null answers and the null odds.
    official = run_official(
        OFFICIAL_V2_0, tmp_path, questions_only(dev_file, gold, tmp_path / "scored.json"),
        out / "best_non_null_predictions.json", "--na-prob-file", out / "null_odds.json", "--na-prob-thresh", "0",
        "--out-file", tmp_path / "official_out.json",
    )  # fmt: skip
    assert set(official) == set(V2_KEYS)
    assert official == pytest.approx({key: metrics[key] for key in official})
    # The answerability classifier took part in the null odds: they differ from the span scores alone.
    span_odds = {qid: _span_only_odds(entries) for qid, entries in read_output(out, "nbest_predictions.json").items()}
    assert read_output(out, "config.json")["answerability_head"] is True
    assert all(abs(null_odds[q] - span_odds[q]) > 1e-6 for q in gold)

    # The best-F1 threshold is kept with the checkpoint, and eval-only runs of it use the kept threshold.
    assert read_output(out, THRESHOLD_FILE)["null_score_diff_threshold"] == metrics["best_f1_thresh"]
    kept = sorted(null_odds.values())[len(null_odds) // 2]  # a threshold that splits the questions in two
    (out / THRESHOLD_FILE).write_text(json.dumps({"null_score_diff_threshold": kept}))
    again = run_squad.main(
        ["--model_name_or_path", str(out), "--output_dir", str(tmp_path / "again"), "--do_eval", *common]
    )
    assert again["eval_null_score_diff_threshold"] == kept
    answered = read_output(tmp_path / "again", "predictions.json")
    assert {qid for qid, answer in answered.items() if not answer} == {qid for qid in gold if null_odds[qid] > kept}
    assert read_output(tmp_path / "again", THRESHOLD_FILE)["null_score_diff_threshold"] == again["eval_best_f1_thresh"]
    # An explicit threshold wins over the kept one.
    never = run_squad.main([
        "--model_name_or_path", str(out), "--output_dir", str(tmp_path / "never"), "--do_eval",
        "--null_score_diff_threshold", "1e9", *common,
    ])  # fmt: skip
    assert never["eval_null_score_diff_threshold"] == 1e9
    assert all(read_output(tmp_path / "never", "predictions.json").values())


def _span_only_odds(nbest: list[dict]) -> float:
    """null score - best span score, from the logits in nbest_predictions.json (which always lists the null)."""
    null = next(entry for entry in nbest if entry["text"] == "")
    best = next(entry for entry in nbest if entry["text"])
    return null["start_logit"] + null["end_logit"] - best["start_logit"] - best["end_logit"]


def test_flat_json_as_datasets_writes_it(tmp_path):
    answers = {"text": ["Santa Clara"], "answer_start": [0]}
    rows = [{"id": f"q{i}", "title": "t", "context": "Santa Clara hosted it.", "question": "Where?",
             "answers": answers} for i in range(3)]  # fmt: skip
    Dataset.from_list(rows).to_json(tmp_path / "flat.json")  # JSON lines, in a .json file
    dataset = read_squad_file(tmp_path / "flat.json", version_2_with_negative=False)
    assert dataset["id"] == ["q0", "q1", "q2"]
