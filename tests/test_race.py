"""RACE: the readers for both layouts, the checks on bad input, the blank-filling rule, the 128/512 budgets,
accuracy per level, and run_race.py end to end with a tiny spanroberta checkpoint."""

import gzip
import json

import numpy as np
import pytest
from datasets import Dataset
from transformers import AutoTokenizer

import run_race
from conftest import TINY_TEXT, checked_results, parsed, shared_data
from spanroberta.tasks.race.task import RACE
from spanroberta.tasks.race.data import (
    RaceEncoder,
    fill_in_option,
    load_race,
    race_metrics,
    read_race_folder,
    read_race_jsonl,
    write_race_predictions,
)


QUESTION = {"example_id": "high1", "article": "The fox jumps.", "question": "What jumps?",
            "options": ["a fox", "a dog", "a cat", "a bird"], "answer": "A"}


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


# --- readers ------------------------------------------------------------------------------------------------


def test_original_layout_and_json_lines_agree():
    race = shared_data("race")
    folder_rows = read_race_folder(race / "raw_sample", "dev", ("middle", "high"))
    assert len(folder_rows) == 150 and {row["level"] for row in folder_rows} == {"middle", "high"}
    first_high = next(row for row in folder_rows if row["level"] == "high")
    assert (first_high["example_id"], first_high["question_index"], first_high["label"]) == ("high10024", 0, 1)
    jsonl_rows = read_race_jsonl(race / "dev.high.jsonl") + read_race_jsonl(race / "dev.middle.jsonl")
    assert len(jsonl_rows) == 3451 + 1436
    by_id = {(row["example_id"], row["question_index"]): row for row in jsonl_rows}
    assert all(by_id[(row["example_id"], row["question_index"])] == row for row in folder_rows)


def test_config_picks_levels_and_missing_splits_are_named():
    raw_sample = shared_data("race", "raw_sample")
    high = load_race("validation", "high", data_dir=raw_sample)
    assert set(high["level"]) == {"high"} and len(high) < 150
    with pytest.raises(FileNotFoundError, match=r"No RACE test data: neither .*test/middle or .*test/high"):
        load_race("test", "all", data_dir=raw_sample)


def test_gzipped_json_lines(tmp_path):
    path = tmp_path / "train.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as file:
        file.write(json.dumps(QUESTION) + "\n" + json.dumps({**QUESTION, "example_id": "middle7", "answer": "D"}))
    rows = read_race_jsonl(path)
    assert [(r["example_id"], r["level"], r["label"], r["question_index"]) for r in rows] == [
        ("high1", "high", 0, 0), ("middle7", "middle", 3, 0)]


def test_hub_rows_are_checked(monkeypatch):
    rows = [{**QUESTION, "example_id": "middle5.txt"}, {**QUESTION, "example_id": "middle5.txt"},
            {**QUESTION, "example_id": "high9.txt", "answer": "X"}]
    calls = []
    monkeypatch.setattr("spanroberta.tasks.race.data.load_dataset",
                        lambda *args, **kwargs: calls.append((args, kwargs["split"])) or Dataset.from_list(rows[:2]))
    data = load_race("validation", "middle")
    assert calls == [(("ehovy/race", "middle"), "validation")]
    assert data["example_id"] == ["middle5", "middle5"] and data["question_index"] == [0, 1]
    assert data["level"] == ["middle", "middle"]
    monkeypatch.setattr("spanroberta.tasks.race.data.load_dataset", lambda *args, **kwargs: Dataset.from_list(rows))
    with pytest.raises(ValueError, match=r"ehovy/race \(all\) train, row 2 \(example_id 'high9.txt'\): answer 'X'"):
        load_race("train", "all")


# --- bad input --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, message",
    [
        ({"answer": "E"}, r"line 2 \(example_id 'high1'\): answer 'E' is not one of A, B, C, D"),
        ({"options": ["a", "b", "c"]}, r"line 2 \(example_id 'high1'\): options must be a list of exactly 4 .*found 3"),
        ({"options": ["a", "b", "c", "d", "e"]}, r"line 2 .*exactly 4 .*found 5"),
        ({"article": None}, r"line 2 \(example_id 'high1'\): missing article"),
    ],
    ids=["answer-not-A-to-D", "three-options", "five-options", "missing-column"],
)
def test_bad_questions_name_the_file_line_and_example(tmp_path, change, message):
    path = write_jsonl(tmp_path / "dev.jsonl", [QUESTION, {**QUESTION, **change}])
    with pytest.raises(ValueError, match=r"dev.jsonl, " + message):
        read_race_jsonl(path)


def test_bad_original_files_are_named(tmp_path):
    folder = tmp_path / "dev" / "middle"
    folder.mkdir(parents=True)
    (folder / "12.txt").write_text(json.dumps(
        {"article": "x", "questions": ["q1", "q2"], "options": [["a", "b", "c", "d"]] * 2, "answers": ["B", "Z"]}))
    with pytest.raises(ValueError, match=r"12.txt, question 2 \(example_id 'middle12'\): answer 'Z'"):
        read_race_folder(tmp_path, "dev", ("middle", "high"))
    (folder / "12.txt").write_text(json.dumps({"article": "x", "questions": ["q"], "options": [], "answers": ["A"]}))
    with pytest.raises(ValueError, match=r"12.txt: the lists questions, options and answers differ in length"):
        read_race_folder(tmp_path, "dev", ("middle",))
    with pytest.raises(FileNotFoundError, match=r"nothing.jsonl: no such file"):
        read_race_jsonl(tmp_path / "nothing.jsonl")


def test_run_race_rejects_bad_input_before_loading_a_model(tmp_path, spanroberta_checkpoint):
    path = write_jsonl(tmp_path / "train.jsonl", [{**QUESTION, "answer": "F"}])
    with pytest.raises(SystemExit, match=r"train.jsonl, line 1 \(example_id 'high1'\): answer 'F'"):
        run_race.main(["--model_name_or_path", str(spanroberta_checkpoint), "--train_file", str(path),
                       "--output_dir", str(tmp_path / "out"), "--do_train"])


# --- encoding ---------------------------------------------------------------------------------------------------


def test_blank_filling_rule():
    assert fill_in_option("The author thinks  _  .", "it is fun") == "The author thinks  it is fun  ."
    assert fill_in_option("_ is older than _ .", "Tom") == "Tom is older than Tom ."
    assert fill_in_option("Why did Tom leave?", "He was tired.") == "Why did Tom leave? He was tired."


def test_truncation_budgets(tiny_tokenizer_dir):
    tiny_tokenizer = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    # Leave the tokenizer set to truncate at 16: the encoder must not inherit that.
    tiny_tokenizer("a b c", truncation=True, max_length=16)
    encoder = RaceEncoder(tiny_tokenizer)
    article = " ".join(TINY_TEXT[:40])
    long_question = " ".join(TINY_TEXT[:8]) + " _ ."
    encoded = encoder.encode(article, long_question, ["short", "a fox", "the lazy dog", "tax"])
    article_ids = tiny_tokenizer(article, add_special_tokens=False)["input_ids"]
    bos, eos = tiny_tokenizer.bos_token_id, tiny_tokenizer.eos_token_id
    assert len(article_ids) > 512
    for option, ids in zip(["short", "a fox", "the lazy dog", "tax"], encoded["input_ids"]):
        qa_ids = tiny_tokenizer(fill_in_option(long_question, option), add_special_tokens=False)["input_ids"]
        assert len(qa_ids) > 128
        # <s> question+option (first 128 tokens) </s></s> passage (what fits) </s>, 512 in all.
        assert len(ids) == 512
        assert ids[:130] == [bos, *qa_ids[:128], eos] and ids[130] == eos and ids[-1] == eos
        assert ids[131:-1] == article_ids[:512 - 128 - 4]
    short = encoder.encode("The fox jumps.", "Who jumps?", ["a fox", "a dog", "a cat", "a bird"])
    fox = tiny_tokenizer("Who jumps? a fox", "The fox jumps.")["input_ids"]
    assert short["input_ids"][0] == fox and short["attention_mask"][0] == [1] * len(fox)


def test_budgets_must_leave_room_for_the_passage(tiny_tokenizer):
    with pytest.raises(ValueError, match="no room for the passage"):
        RaceEncoder(tiny_tokenizer, max_seq_length=130, max_qa_length=128)


# --- metrics and the script ---------------------------------------------------------------------------------------


def test_accuracy_overall_and_per_level():
    predictions, labels = [0, 1, 2, 3, 0], [0, 1, 0, 0, 0]
    levels = ["middle", "middle", "high", "high", "high"]
    assert race_metrics(predictions, labels, levels) == pytest.approx(
        {"accuracy": 3 / 5, "accuracy_middle": 1.0, "accuracy_high": 1 / 3})
    assert race_metrics(predictions, labels, ["high"] * 5) == pytest.approx({"accuracy": 3 / 5})


def test_predictions_file_agrees_with_the_metrics_on_near_ties(tmp_path):
    # In float32 these logits give four equal probabilities; the prediction must still be the logits' argmax.
    logits = np.array([[0.0, 1e-8, 0.0, 0.0]], dtype=np.float32)
    dataset = Dataset.from_list([{"example_id": "high1", "question_index": 0, "level": "high", "label": 1}])
    write_race_predictions(tmp_path / "p.jsonl", dataset, logits)
    line = json.loads((tmp_path / "p.jsonl").read_text())
    assert line["prediction"] == "B" == line["answer"] and line["probabilities"] == [0.25] * 4
    assert race_metrics(np.argmax(logits, axis=-1), [1])["accuracy"] == 1.0


def test_race_defaults_follow_the_paper_and_flags_win(tmp_path):
    base = ["--model_name_or_path", "x", "--output_dir", str(tmp_path)]
    (_, data_args, training_args), _ = parsed(RACE, base)
    assert (training_args.learning_rate, training_args.num_train_epochs) == (1e-5, 5)
    assert training_args.per_device_train_batch_size == 16 and training_args.adam_beta2 == 0.98
    assert (data_args.max_seq_length, data_args.max_qa_length) == (512, 128)
    (_, _, training_args), _ = parsed(RACE, base + ["--learning_rate", "2e-5", "--num_train_epochs", "3"])
    assert (training_args.learning_rate, training_args.num_train_epochs) == (2e-5, 3)


COMMON = ["--per_device_eval_batch_size", "4", "--max_seq_length", "64", "--max_qa_length", "24",
          "--report_to", "none", "--save_strategy", "no", "--dataloader_pin_memory", "false"]


def test_run_race_trains_evaluates_and_predicts(spanroberta_checkpoint, tmp_path):
    race = shared_data("race")
    lines = [line for name in ("dev.middle.jsonl", "dev.high.jsonl")
             for line in (race / name).read_text(encoding="utf-8").splitlines()[:4]]
    data = tmp_path / "sample.jsonl"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    run_race.main(["--model_name_or_path", str(spanroberta_checkpoint), "--train_file", str(data), "--validation_file", str(data),
                   "--test_file", str(data), "--output_dir", str(out), "--do_train", "--do_eval", "--do_predict",
                   "--max_steps", "2", "--per_device_train_batch_size", "2", *COMMON])
    results = checked_results(out, RACE.reports["race"])
    predictions = [json.loads(line) for line in (out / "eval_predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == results["eval_samples"] == 8
    for level in ("middle", "high"):
        chosen = [p for p in predictions if p["level"] == level]
        assert results[f"eval_accuracy_{level}"] == pytest.approx(
            sum(p["prediction"] == p["answer"] for p in chosen) / len(chosen))
    assert results["eval_accuracy"] == pytest.approx(sum(p["prediction"] == p["answer"] for p in predictions) / 8)
    assert all(sum(p["probabilities"]) == pytest.approx(1.0, abs=1e-3) for p in predictions)
    assert (out / "predict_predictions.jsonl").exists() and "predict_accuracy" in json.loads(
        (out / "predict_results.json").read_text())
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["SpanRobertaForMultipleChoice"]
    # the model card names no Hub dataset for a run on local files
    assert "ehovy/race" not in (out / "README.md").read_text()


@pytest.mark.slow
def test_run_race_evaluates_the_original_layout(spanroberta_checkpoint, tmp_path):
    run_race.main(["--model_name_or_path", str(spanroberta_checkpoint), "--data_dir", str(shared_data("race", "raw_sample")),
                   "--dataset_config_name", "middle", "--output_dir", str(tmp_path), "--do_eval",
                   "--max_eval_samples", "6", *COMMON])
    predictions = [json.loads(line) for line in (tmp_path / "eval_predictions.jsonl").read_text().splitlines()]
    assert [(p["example_id"], p["question_index"]) for p in predictions][:2] == [("middle13", 0), ("middle13", 1)]
    assert json.loads((tmp_path / "eval_results.json").read_text())["eval_samples"] == 6
