"""GLUE: the readers and their file quirks, the checks on bad input, the RoBERTa preset, the encoding, the
leaderboard files, and run_glue.py end to end with a tiny spanroberta checkpoint."""

import json
import re

import pytest
from datasets import Dataset, DatasetDict

import run_glue
from conftest import checked_results, parsed, shared_data
from spanroberta.tasks.glue.task import GLUE
from spanroberta.tasks.glue.scoring import METRICS
from spanroberta.tasks.glue.data import (
    get_glue_task,
    load_glue,
    read_glue_file,
    read_glue_tsv,
    requested_splits,
    tokenize_glue,
    write_glue_submission,
)




def write_task(root, folder, files):
    """A GLUE-layout folder root/folder/ with the given {file name: lines}."""
    task_dir = root / folder
    task_dir.mkdir(parents=True, exist_ok=True)
    for name, lines in files.items():
        (task_dir / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return root


def split(task, name):
    return next(s for s in (task.train_split, *task.eval_splits, *task.test_splits) if s.name == name)


# --- the real GLUE files -----------------------------------------------------------------------------------

# The official split sizes (they are the Hub's nyu-mll/glue sizes too).
SIZES = {
    "cola": {"validation": 1043, "test": 1063},
    "sst2": {"validation": 872, "test": 1821},
    "mrpc": {"validation": 408, "test": 1725},
    "stsb": {"validation": 1500, "test": 1379},
    "rte": {"validation": 277, "test": 3000},
}


@pytest.mark.parametrize("task_name", sorted(SIZES))
def test_real_glue_dev_and_test_files(task_name):
    task = get_glue_task(task_name)
    data = load_glue(task, requested_splits(task, False, True, True), data_dir=shared_data("glue"))
    assert {name: len(dataset) for name, dataset in data.items()} == SIZES[task_name]
    assert data["validation"].column_names == [*task.text_columns, "label", "idx"]
    assert data["test"].column_names == [*task.text_columns, "idx"]
    assert data["test"]["idx"][:3] == [0, 1, 2]


def test_real_glue_quirks():
    glue = shared_data("glue")
    cola = get_glue_task("cola")
    # CoLA's train.tsv has no header: its first line is an example.
    first = read_glue_tsv(glue / "CoLA" / "train.tsv", cola, cola.train_split)[0]
    assert first == {"sentence": "Our friends won't buy this analysis, let alone the next one we propose.", "label": 1,
                     "idx": 0}
    # MRPC starts with a byte-order mark and its sentences hold unbalanced quotes, read verbatim.
    mrpc = get_glue_task("mrpc")
    row = read_glue_tsv(glue / "MRPC" / "dev.tsv", mrpc, split(mrpc, "validation"))[0]
    assert row["label"] == 1 and row["sentence2"].startswith('" The foodservice pie business')
    stsb = get_glue_task("stsb")
    assert read_glue_tsv(glue / "STS-B" / "dev.tsv", stsb, split(stsb, "validation"))[1]["label"] == 4.75
    rte = get_glue_task("rte")
    # RTE's label strings become the Hub's class ids: entailment 0, not_entailment 1.
    assert read_glue_tsv(glue / "RTE" / "dev.tsv", rte, split(rte, "validation"))[0]["label"] == 1


# --- layouts and quirks not in the shared data ----------------------------------------------------------------

MNLI_HEADER = "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t" \
              "sentence2_parse\tsentence1\tsentence2"


def test_mnli_reads_both_dev_sets_and_both_test_sets(tmp_path):
    row = "0\t1\t2\tfiction\tp\tp\tp\tp\tHe said \"no.\tHe refused."
    root = write_task(tmp_path, "MNLI", {
        "train.tsv": [MNLI_HEADER + "\tlabel1\tgold_label", row + "\tneutral\tneutral"],
        "dev_matched.tsv": [MNLI_HEADER + "\tlabel1\tlabel2\tgold_label", row + "\tentailment\tx\tentailment"],
        "dev_mismatched.tsv": [MNLI_HEADER + "\tlabel1\tlabel2\tgold_label", row + "\tcontradiction\tx\tcontradiction"],
        "test_matched.tsv": [MNLI_HEADER, row],
        "test_mismatched.tsv": [MNLI_HEADER, row],
    })
    task = get_glue_task("MNLI")
    data = load_glue(task, requested_splits(task, True, True, True), data_dir=root)
    assert sorted(data) == ["test_matched", "test_mismatched", "train", "validation_matched", "validation_mismatched"]
    assert data["train"][0] == {"premise": 'He said "no.', "hypothesis": "He refused.", "label": 1, "idx": 0}
    assert data["validation_matched"]["label"] == [0] and data["validation_mismatched"]["label"] == [2]


def test_qqp_skips_its_short_rows_but_other_tasks_reject_them(tmp_path):
    header = "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate"
    root = write_task(tmp_path, "QQP", {"train.tsv": [header, "7\t1\t2\tWhy?\tHow?\t1", "8\t3\t4\tbroken"]})
    task = get_glue_task("qqp")
    assert read_glue_tsv(root / "QQP" / "train.tsv", task, task.train_split) == [
        {"question1": "Why?", "question2": "How?", "idx": 7, "label": 1}]
    root = write_task(tmp_path, "RTE", {"train.tsv": ["index\tsentence1\tsentence2\tlabel", "0\tonly one"]})
    rte = get_glue_task("rte")
    with pytest.raises(ValueError, match=r"RTE/train.tsv, line 2: 2 tab-separated fields"):
        read_glue_tsv(root / "RTE" / "train.tsv", rte, rte.train_split)


def test_hub_splits_are_checked_and_test_labels_dropped(monkeypatch):
    hub = DatasetDict({
        "train": Dataset.from_dict({"sentence1": ["a"], "sentence2": ["b"], "label": [1], "idx": [0]}),
        "validation": Dataset.from_dict({"sentence1": ["a", "c"], "sentence2": ["b", "d"], "label": [0, 2],
                                         "idx": [0, 1]}),
        "test": Dataset.from_dict({"sentence1": ["a"], "sentence2": ["b"], "label": [-1], "idx": [0]}),
    })
    calls = []
    monkeypatch.setattr("spanroberta.tasks.glue.data.load_dataset", lambda *args, **kwargs: calls.append(args) or hub)
    task = get_glue_task("rte")
    data = load_glue(task, [task.train_split, *task.test_splits])
    assert calls == [("nyu-mll/glue", "rte")]
    assert data["train"]["label"] == [1] and data["test"].column_names == ["sentence1", "sentence2", "idx"]
    with pytest.raises(ValueError, match=r"nyu-mll/glue \(rte\) validation, example idx 1: label 2"):
        load_glue(task, task.eval_splits)


# --- bad input ------------------------------------------------------------------------------------------------


def test_a_label_outside_the_label_set_names_file_and_line(tmp_path):
    root = write_task(tmp_path, "RTE", {"dev.tsv": ["index\tsentence1\tsentence2\tlabel", "0\ta\tb\tentailment",
                                                   "1\ta\tb\tcontradiction"]})
    task = get_glue_task("rte")
    with pytest.raises(ValueError, match=r"RTE/dev.tsv, line 3: label 'contradiction' is not one of rte's labels"):
        load_glue(task, task.eval_splits, data_dir=root)


def test_a_stsb_score_must_be_a_number_from_0_to_5(tmp_path):
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
    root = write_task(tmp_path, "STS-B", {"train.tsv": [header, "0\tg\tf\ty\t0\ts\ts\ta\tb\t5.5"]})
    task = get_glue_task("stsb")
    with pytest.raises(ValueError, match=r"STS-B/train.tsv, line 2: label '5.5' is not a similarity score"):
        load_glue(task, [task.train_split], data_dir=root)


def test_a_missing_column_or_file_is_named(tmp_path):
    root = write_task(tmp_path, "SST-2", {"train.tsv": ["text\tlabel", "good\t1"]})
    task = get_glue_task("sst2")
    with pytest.raises(ValueError, match=r"SST-2/train.tsv, line 1: no column 'sentence' in the header"):
        load_glue(task, [task.train_split], data_dir=root)
    with pytest.raises(FileNotFoundError, match=r"SST-2/dev.tsv: no such file"):
        load_glue(task, task.eval_splits, data_dir=root)


def test_csv_and_json_lines_files(tmp_path):
    task = get_glue_task("mnli")
    csv_file = tmp_path / "train.csv"
    csv_file.write_text('premise,hypothesis,label\n"A, then B",B,contradiction\nA,"multi\nline",1\nA,B,2\n',
                        encoding="utf-8")
    rows = read_glue_file(csv_file, task, task.train_split)
    # Labels may be names or class ids; quoted fields may hold commas and newlines.
    assert [row["label"] for row in rows] == [2, 1, 2]
    assert rows[0]["premise"] == "A, then B"
    bad = tmp_path / "bad.csv"
    bad.write_text('premise,hypothesis,label\nA,"multi\nline",1\nA,B,maybe\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.csv, line 4: label 'maybe'"):
        read_glue_file(bad, task, task.train_split)
    jsonl = tmp_path / "dev.jsonl"
    jsonl.write_text(json.dumps({"premise": "A", "hypothesis": "B", "label": 0}) + "\n"
                     + json.dumps({"premise": "A", "label": 0}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"dev.jsonl, line 2: missing 'hypothesis'"):
        read_glue_file(jsonl, task, task.eval_splits[0])


# --- preset, encoding, submission -------------------------------------------------------------------------------


def test_roberta_preset_fills_in_what_the_user_did_not_give(tmp_path):
    base = ["--model_name_or_path", "x", "--output_dir", str(tmp_path),
            "--task_name", "rte", "--task_preset", "roberta"]
    (_, data_args, training_args), _ = parsed(GLUE, base)
    assert (training_args.learning_rate, training_args.per_device_train_batch_size) == (2e-5, 16)
    assert training_args.num_train_epochs == 10 and training_args.weight_decay == 0.1
    assert (training_args.adam_beta2, training_args.adam_epsilon) == (0.98, 1e-6)
    # 6% warmup: transformers 5 reads a warmup_steps below 1 as a fraction of the total steps.
    assert training_args.get_warmup_steps(1000) == 60
    assert data_args.max_seq_length == 512
    (_, data_args, training_args), _ = parsed(GLUE, 
        base + ["--learning_rate", "3e-5", "--per_device_train_batch_size=8", "--max_seq_length", "128"])
    assert (training_args.learning_rate, training_args.per_device_train_batch_size) == (3e-5, 8)
    assert data_args.max_seq_length == 128 and training_args.num_train_epochs == 10
    (_, _, training_args), _ = parsed(GLUE, base[:-4] + ["--task_name", "mnli", "--task_preset", "roberta"])
    assert (training_args.learning_rate, training_args.per_device_train_batch_size) == (1e-5, 32)


def test_pairs_are_encoded_the_tokenizers_way(tiny_tokenizer, tmp_path):
    task = get_glue_task("rte")
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps({"sentence1": "The quick fox.", "sentence2": "A lazy dog.", "label": "entailment"}))
    data = load_glue(task, [task.train_split], data_files={"train": train})
    ids = tokenize_glue(data, tiny_tokenizer, task, max_seq_length=64)["train"][0]["input_ids"]
    first = tiny_tokenizer("The quick fox.", add_special_tokens=False)["input_ids"]
    second = tiny_tokenizer("A lazy dog.", add_special_tokens=False)["input_ids"]
    bos, eos = tiny_tokenizer.bos_token_id, tiny_tokenizer.eos_token_id
    assert ids == [bos, *first, eos, eos, *second, eos]


def test_submission_files_use_glues_label_strings(tmp_path):
    write_glue_submission(tmp_path / "MNLI-m.tsv", get_glue_task("mnli"), [0, 1, 2], [2, 0, 1])
    assert (tmp_path / "MNLI-m.tsv").read_text().splitlines() == [
        "index\tprediction", "0\tcontradiction", "1\tentailment", "2\tneutral"]
    write_glue_submission(tmp_path / "CoLA.tsv", get_glue_task("cola"), [5, 6], [1, 0])
    assert (tmp_path / "CoLA.tsv").read_text().splitlines() == ["index\tprediction", "5\t1", "6\t0"]
    write_glue_submission(tmp_path / "STS-B.tsv", get_glue_task("stsb"), [0], [3.14159])
    assert (tmp_path / "STS-B.tsv").read_text().splitlines() == ["index\tprediction", "0\t3.142"]


# --- run_glue.py end to end -------------------------------------------------------------------------------------

E2E = {
    # task: (metric keys in eval_results.json, submission file, allowed predictions)
    "rte": ({"eval_accuracy"}, "RTE.tsv", {"entailment", "not_entailment"}),
    "stsb": ({"eval_pearson", "eval_spearmanr"}, "STS-B.tsv", None),
    "cola": ({"eval_matthews_correlation"}, "CoLA.tsv", {"0", "1"}),
}


@pytest.mark.parametrize("task_name", sorted(E2E))
@pytest.mark.slow
def test_run_glue_trains_evaluates_and_predicts(task_name, spanroberta_checkpoint, tmp_path):
    metrics, submission, allowed = E2E[task_name]
    run_glue.main([
        "--model_name_or_path", str(spanroberta_checkpoint), "--task_name", task_name, "--data_dir", str(shared_data("glue")),
        "--output_dir", str(tmp_path), "--do_train", "--do_eval", "--do_predict", "--max_steps", "2",
        "--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "8", "--max_seq_length", "32",
        "--max_train_samples", "8", "--max_eval_samples", "8", "--max_predict_samples", "5", "--report_to", "none",
        "--save_strategy", "no", "--dataloader_pin_memory", "false",
    ])
    results = checked_results(tmp_path, GLUE.reports[task_name])
    assert metrics <= set(results) and results["eval_samples"] == 8
    # Each dev example's gold label and prediction, which score the dev set as eval_results.json does.
    evaluated = [json.loads(line) for line in (tmp_path / "eval_predictions.jsonl").read_text().splitlines()]
    assert len({row["idx"] for row in evaluated}) == len(evaluated) == 8
    for name in metrics:
        rescored = METRICS[name.removeprefix("eval_")]([row["prediction"] for row in evaluated],
                                                        [row["label"] for row in evaluated])  # fmt: skip
        assert rescored == pytest.approx(results[name], nan_ok=True)
    lines = (tmp_path / submission).read_text().splitlines()
    assert lines[0] == "index\tprediction" and [line.split("\t")[0] for line in lines[1:]] == ["0", "1", "2", "3", "4"]
    predictions = [line.split("\t")[1] for line in lines[1:]]
    if allowed is None:
        assert all(re.fullmatch(r"-?\d+\.\d{3}", p) for p in predictions)
    else:
        assert set(predictions) <= allowed
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "spanroberta"
    assert config["architectures"] == ["SpanRobertaForSequenceClassification"]
    # The card carries what every task's card has (the checkpoint fine-tuned from, the language) and GLUE's own fields.
    card = (tmp_path / "README.md").read_text()
    assert f"fine-tuned version of [{spanroberta_checkpoint}]" in card and "- en\n" in card and "- glue\n" in card


def test_run_glue_rejects_bad_input_before_loading_a_model(tmp_path, spanroberta_checkpoint):
    root = write_task(tmp_path / "glue", "RTE", {"train.tsv": ["index\tsentence1\tsentence2\tlabel", "0\ta\tb\tyes"]})
    with pytest.raises(SystemExit, match=r"RTE/train.tsv, line 2: label 'yes'"):
        run_glue.main(["--model_name_or_path", str(spanroberta_checkpoint), "--task_name", "rte",
                       "--data_dir", str(root), "--output_dir", str(tmp_path / "out"), "--do_train"])
