"""MRQA 2019 in run_squad.py: its JSON lines read (plain or gzipped, told apart by content), the answer to train on
(the first detected occurrence), MRQA's metric per dataset with the macro average, a tiny model trained on the union
of two files and scored on each, bad files refused in one paragraph before any model loads, and the real SQuAD dev
file in MRQA's layout (../shared/data/mrqa), whose gold answers score 100 against themselves."""

import gzip
import json
from pathlib import Path

import pytest

import run_squad
from spanroberta.tasks.squad.task import SQUAD
from conftest import TINY_TEXT, checked_results, shared_data
from test_squad import FAST_ARGS, pretrained, read_output  # noqa: F401  (pretrained is a fixture)
from spanroberta.tasks.squad.scoring import mrqa_evaluate, squad_v1_evaluate
from spanroberta.finetuning import task as finetuning_task
from spanroberta.tasks.squad.reading import SquadFormatError, is_mrqa_file, load_squad_splits, read_mrqa_file


def mrqa_context(context: str, prefix: str) -> dict:
    """A context line whose one question asks for the third word; `answers` also lists a variant that is not in the
    context (MRQA's gold answers need not be)."""
    word = context.split()[2]
    start = context.index(f" {word} ") + 1
    qa = {"qid": f"{prefix}-{start}-{len(context)}", "question": f"Third word of '{context[:24]}'?",
          "answers": [word, f"the {word}!"],
          "detected_answers": [{"text": word, "char_spans": [[start, start + len(word) - 1]], "token_spans": [[2, 2]]}]}
    return {"context": context, "context_tokens": [], "qas": [qa]}  # fmt: skip


def write_mrqa(path: Path, dataset: str, contexts: list[dict], gzipped: bool = False) -> str:
    lines = [json.dumps({"header": {"dataset": dataset, "split": "dev"}})] + [json.dumps(line) for line in contexts]
    text = "\n".join(lines) + "\n"
    path.write_bytes(gzip.compress(text.encode()) if gzipped else text.encode())
    return str(path)


def tiny_mrqa(path: Path, dataset: str, sentences: list[str], gzipped: bool = False) -> str:
    return write_mrqa(path, dataset, [mrqa_context(s, dataset) for s in sentences], gzipped)


# --- reading ---


def test_plain_and_gzipped_files_read_the_same_whatever_their_names(tmp_path):
    # the gzipped copy is named .jsonl and the plain one .jsonl.gz: the content decides, not the name
    plain = tiny_mrqa(tmp_path / "plain.jsonl.gz", "Tiny", TINY_TEXT[:5])
    zipped = tiny_mrqa(tmp_path / "zipped.jsonl", "Tiny", TINY_TEXT[:5], gzipped=True)
    assert Path(zipped).read_bytes()[:2] == b"\x1f\x8b"
    assert is_mrqa_file(Path(plain)) and is_mrqa_file(Path(zipped))
    plain_rows, dataset, gold = read_mrqa_file(plain)
    zipped_rows, _, zipped_gold = read_mrqa_file(zipped)
    assert list(plain_rows) == list(zipped_rows) and gold == zipped_gold and dataset == "Tiny"
    assert len(plain_rows) == 5
    first = plain_rows[0]
    assert first["title"] == "Tiny" and first["answers"]["text"] == ["brown"]
    assert first["context"][first["answers"]["answer_start"][0] :].startswith("brown")
    assert gold[first["id"]] == ["brown", "the brown!"]


def test_the_answer_to_train_on_is_the_first_detected_occurrence(tmp_path):
    context = "one two three two one"
    qa = {"qid": "q", "question": "Which?", "answers": ["two", "one"], "detected_answers": [
        {"text": "two", "char_spans": [[4, 6], [14, 16]]}, {"text": "one", "char_spans": [[18, 20]]},
        {"text": "three", "char_spans": [[8, 12]]}]}  # fmt: skip
    rows, _, _ = read_mrqa_file(write_mrqa(tmp_path / "f.jsonl", "X", [{"context": context, "qas": [qa]}]))
    # the earliest span of all is [4, 6] (ends inclusive): "two" at 4
    assert rows[0]["answers"] == {"text": ["two"], "answer_start": [4]}


def test_squad_json_is_not_taken_for_mrqa(tmp_path):
    squad = tmp_path / "squad.jsonl"
    record = {"id": "a", "context": "c", "question": "q", "answers": {"text": [], "answer_start": []}}
    squad.write_text(json.dumps(record))
    assert not is_mrqa_file(squad)
    nested = tmp_path / "nested.json"
    nested.write_text(json.dumps({"version": "1.1", "data": []}, indent=2))
    assert not is_mrqa_file(nested)


@pytest.mark.slow
def test_the_shared_squad_dev_file_reads_and_its_gold_scores_100_against_itself():
    path = shared_data("mrqa", "SQuAD-dev.jsonl.gz")
    split = load_squad_splits(files={"validation": str(path)}, splits=["validation"],
                              version_2_with_negative=False)["validation"]  # fmt: skip
    assert list(split.mrqa_gold) == ["SQuAD"]
    assert len(set(split.examples["context"])) == 2067
    gold = split.mrqa_gold["SQuAD"]
    assert list(gold) == split.examples["id"]
    # every question's first gold answer as its prediction: both metrics are 100 for the file and the average
    scores = mrqa_evaluate(split.mrqa_gold, {qid: answers[0] for qid, answers in gold.items()})
    assert scores == {"SQuAD_em": 100.0, "SQuAD_f1": 100.0, "macro_em": 100.0, "macro_f1": 100.0}
    # the passages are SQuAD v1.1 dev's, character for character
    squad = json.loads(shared_data("squad", "dev-v1.1.json").read_text())
    assert set(split.examples["context"]) == {p["context"] for article in squad["data"] for p in article["paragraphs"]}


# --- the metric ---


def test_the_metric_on_a_hand_computed_case():
    gold = {"A": {"a1": ["The Cat", "a dog"], "a2": ["New York City"]}, "B": {"b1": ["42"]}}
    predictions = {"a1": "cat.", "a2": "York"}  # b1 unanswered: it scores 0, as mrqa_official_eval.py does
    # a1: "cat." and "The Cat" both normalise to "cat": EM 1, F1 1.
    # a2: "york" against "new york city": EM 0; 1 shared token, precision 1/1, recall 1/3, F1 = 2(1)(1/3)/(4/3) = 0.5.
    # A: EM 100 (1 + 0) / 2 = 50, F1 100 (1 + 0.5) / 2 = 75.  B: EM 0, F1 0.
    # Macro averages: EM (50 + 0) / 2 = 25, F1 (75 + 0) / 2 = 37.5 (the micro EM over 3 questions would be 33.3).
    assert mrqa_evaluate(gold, predictions) == pytest.approx(
        {"A_em": 50.0, "A_f1": 75.0, "B_em": 0.0, "B_f1": 0.0, "macro_em": 25.0, "macro_f1": 37.5}
    )
    with pytest.raises(ValueError, match="at least one dataset"):
        mrqa_evaluate({}, predictions)


# --- run_squad.py ---


@pytest.mark.slow
def test_run_squad_trains_on_the_union_and_scores_each_dataset(tmp_path, pretrained):  # noqa: F811
    train_a = tiny_mrqa(tmp_path / "a-train.jsonl.gz", "Alpha", TINY_TEXT[:4], gzipped=True)
    train_b = tiny_mrqa(tmp_path / "b-train.jsonl", "Beta", TINY_TEXT[4:8])
    dev_a = tiny_mrqa(tmp_path / "a-dev.jsonl.gz", "Alpha", TINY_TEXT[8:11], gzipped=True)
    dev_b = tiny_mrqa(tmp_path / "b-dev.jsonl", "Beta", TINY_TEXT[12:14])
    out = tmp_path / "out"
    metrics = run_squad.main([
        "--model_name_or_path", str(pretrained), "--output_dir", str(out), "--do_train", "--do_eval",
        "--train_file", f"{train_a},{train_b}", "--validation_file", f"{dev_a},{dev_b}", *FAST_ARGS,
    ])  # fmt: skip
    # the union of both training files trained: 4 + 4 one-sentence questions, one window each
    assert read_output(out, "train_results.json")["train_samples"] == 8
    results = {key.removeprefix("eval_"): value for key, value in checked_results(out, SQUAD.reports["mrqa"]).items()}
    assert set(results) == {"Alpha_em", "Alpha_f1", "Beta_em", "Beta_f1", "macro_em", "macro_f1", "samples"}
    # each dataset is scored on its own questions against their gold answers, from the one predictions.json
    predictions = read_output(out, "predictions.json")
    gold = {name: read_mrqa_file(path)[2] for name, path in (("Alpha", dev_a), ("Beta", dev_b))}
    assert set(predictions) == set(gold["Alpha"]) | set(gold["Beta"])
    for name in gold:
        expected = squad_v1_evaluate(gold[name], predictions)
        assert results[f"{name}_em"] == pytest.approx(expected["exact_match"])
        assert results[f"{name}_f1"] == pytest.approx(expected["f1"])
    assert results["macro_f1"] == pytest.approx((results["Alpha_f1"] + results["Beta_f1"]) / 2)
    # eval_outcomes.json: each dataset's questions apart, their mean F1 the dataset's (the macro average is no mean).
    outcomes = read_output(out, SQUAD.reports["mrqa"].outcomes_file)
    assert set(outcomes) == {"eval_Alpha_em", "eval_Alpha_f1", "eval_Beta_em", "eval_Beta_f1"}
    for name in gold:
        values = outcomes[f"eval_{name}_f1"]["values"]
        assert len(values) == len(gold[name]) and 100 * sum(values) / len(values) == pytest.approx(results[f"{name}_f1"])
    assert metrics == pytest.approx({f"eval_{key}": value for key, value in results.items()})


def header(dataset="X"):
    return {"header": {"dataset": dataset, "split": "dev"}}


BAD_FILES = {
    "no header": ([mrqa_context(TINY_TEXT[0], "q")], "line 1: an MRQA file starts with its header line"),
    "span outside": ([header(), {"context": "abc def", "qas": [{"qid": "q", "question": "?", "answers": ["x"],
                      "detected_answers": [{"text": "x", "char_spans": [[4, 9]]}]}]}],
                     "line 2: question 'q': char_span [4, 9] is not [start, end] inside the context of 7 characters"),
    "no detected": ([header(), {"context": "abc", "qas": [{"qid": "q", "question": "?", "answers": ["abc"]}]}],
                    "line 2: question 'q': `detected_answers` must list answers with their `char_spans`"),
    "no answers": ([header(), {"context": "abc", "qas": [{"qid": "q", "question": "?", "answers": [],
                    "detected_answers": [{"text": "a", "char_spans": [[0, 0]]}]}]}],
                   "line 2: question 'q': `answers` must be a non-empty list of strings"),
    "no qas": ([header(), {"context": "abc"}], "line 2: expected a context line"),
}  # fmt: skip


@pytest.mark.parametrize("lines, message", BAD_FILES.values(), ids=BAD_FILES.keys())
def test_a_malformed_file_is_one_paragraph_before_any_model_loads(
    tmp_path, monkeypatch, pretrained, lines, message  # noqa: F811
):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    with pytest.raises(SquadFormatError) as error:
        read_mrqa_file(path)
    assert message in str(error.value)
    monkeypatch.setattr(finetuning_task, "load_config_and_tokenizer", lambda *args: pytest.fail("a model was loaded"))
    argv = ["--model_name_or_path", str(pretrained), "--output_dir", str(tmp_path / "out"),
            "--train_file", str(path), "--do_train", *FAST_ARGS]  # fmt: skip
    with pytest.raises(SystemExit) as stop:
        run_squad.main(argv)
    error = str(stop.value.code)
    assert error.startswith("run_squad.py: error: ") and "\n" not in error and str(path) in error and message in error


def test_several_evaluation_files_must_be_mrqa_files_of_different_datasets(tmp_path):
    dev = tiny_mrqa(tmp_path / "dev.jsonl", "Alpha", TINY_TEXT[:2])
    again = tiny_mrqa(tmp_path / "again.jsonl", "Alpha", TINY_TEXT[2:4])
    squad = tmp_path / "squad.json"
    qas = [{"id": "s1", "question": "Where?", "answers": [{"text": "Santa", "answer_start": 0}]}]
    squad.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "Santa Clara",
                                                                                          "qas": qas}]}]}))
    with pytest.raises(ValueError, match="both MRQA's 'Alpha'"):
        load_squad_splits(files={"validation": f"{dev},{again}"}, splits=["validation"], version_2_with_negative=False)
    with pytest.raises(ValueError, match="not all of them MRQA files"):
        load_squad_splits(files={"validation": f"{dev},{squad}"}, splits=["validation"], version_2_with_negative=False)
    with pytest.raises(ValueError, match="Drop --version_2_with_negative"):
        load_squad_splits(files={"validation": dev}, splits=["validation"], version_2_with_negative=True)
    # a per-file limit keeps each dataset's first questions, and its gold answers follow
    split = load_squad_splits(files={"train": f"{dev},{squad}"}, splits=["train"], version_2_with_negative=False,
                              max_samples={"train": 1})["train"]  # fmt: skip
    assert len(split.examples) == 2 and [len(gold) for gold in split.mrqa_gold.values()] == [1]
