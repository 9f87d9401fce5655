"""The task benchmark (benchmarks/tasks/scores.py): its toy size runs tasks end to end through the scripts' command
lines and records each unit once (a rerun skips it); the floors are what a constant answer scores; the splits keep
the training and evaluation data apart; the table shows each row's mean and spread over seeds and whether it is
clear of its floor."""

import collections
import csv
import dataclasses
import json
import math
import re
import shutil
import stat
import statistics
import time
from pathlib import Path

import numpy as np
import pytest

from benchmarks.common import CHECKPOINT, CHECKPOINT_NAME
from benchmarks import statistics as rule
from benchmarks.tables import task_benchmark as task_tables
from benchmarks.tables.render import Context
from benchmarks.tasks import catalog, coverage, outcomes as outcomes_module, preparation, scores as task_benchmark
from benchmarks.tasks import rows as task_rows
from conftest import shared_data
from spanroberta.tasks.coreference import scoring as coreference
from spanroberta.tasks.coreference.gap_scoring import GapDecision, gap_outcomes, gap_scores
from spanroberta.records import RunStart, provenance, read_records, write_record


@pytest.mark.slow
def test_the_toy_size_fine_tunes_two_tasks_end_to_end_and_a_rerun_skips_them(tmp_path, capsys):
    shared_data("glue", "RTE")
    shared_data("relation", "semeval2010_task8")
    arguments = ["--size", "toy", "--tasks", "rte", "semeval", "--records_dir", str(tmp_path)]
    kept = ["--keep_outputs", str(tmp_path / "kept")]
    task_benchmark.main(arguments + kept)
    records = read_records("tasks", tmp_path)
    assert [r["settings"]["task"] for r in records] == ["rte", "semeval"]
    for record in records:
        task = catalog.TASKS[record["settings"]["task"]]
        (row,) = task.rows
        results = record["results"]
        scores = results["scores"]["eval_results.json"]
        assert results["rows"][row.label]["score"] == pytest.approx(100 * scores[row.metric])
        assert 0 <= results["rows"][row.label]["floor"] <= 100
        assert results["wall_seconds"] > 0 and record["settings"]["budget"]["train"] == 16
        assert record["settings"]["checkpoint"] == task_benchmark.TOY_CHECKPOINT
        epochs = [epoch for epoch, _ in results["loss_curve"]]
        assert epochs and epochs == sorted(epochs) and all(loss > 0 for _, loss in results["loss_curve"])
        # Each evaluated example's outcome, which scores the row as the script did, and the bootstrap runs on them.
        outcomes = results["rows"][row.label]["outcomes"]
        assert outcomes_module.outcome_count(outcomes) == 16
        assert outcomes_module.outcome_score(outcomes) == pytest.approx(results["rows"][row.label]["score"])
        low, high = task_rows.outcomes_interval(outcomes, resamples=50)
        assert 0 <= low <= high <= 100 and task_rows.sample_noise(outcomes) >= 0
    # The RTE floor is the majority class of the 16 evaluation examples the toy size drew.
    rte = records[0]["results"]
    assert rte["scores"]["eval_results.json"]["eval_samples"] == 16
    assert rte["rows"]["RTE"]["floor"] in {100 * k / 16 for k in range(8, 17)}

    task_benchmark.main(arguments + kept)  # every unit is recorded: nothing runs again, nothing is kept anew
    assert len(read_records("tasks", tmp_path)) == 2
    assert "rte: seed 0 recorded already, not run again; nothing is kept" in capsys.readouterr().out
    # --keep_outputs kept each unit's model, and refuses to write into a kept folder again, before any unit runs.
    for name in ("rte", "semeval"):
        assert (tmp_path / "kept" / "toy" / f"{name}-seed0" / "config.json").is_file()
    with pytest.raises(SystemExit, match=r"write into .*rte-seed0, .*semeval-seed0, which already exist"):
        task_benchmark.main([*arguments[:-1], str(tmp_path / "fresh"), *kept])
    assert not (tmp_path / "fresh").exists()


@pytest.mark.slow
def test_the_toy_size_runs_race_once_for_both_levels_rows(tmp_path):
    shared_data("race")
    task_benchmark.main(["--size", "toy", "--tasks", "race", "--records_dir", str(tmp_path)])
    (record,) = read_records("tasks", tmp_path)
    scores = record["results"]["scores"]["eval_results.json"]
    assert scores["eval_samples"] == 32  # 16 questions of each level
    for row in catalog.TASKS["race"].rows:
        assert record["results"]["rows"][row.label]["score"] == pytest.approx(100 * scores[row.metric])
        outcomes = record["results"]["rows"][row.label]["outcomes"]  # the level's questions alone
        assert outcomes["scorer"] == "mean" and len(outcomes["values"]) == 16


@pytest.mark.slow
def test_the_toy_size_records_coreference_outcomes_per_document_and_per_gap_example(tmp_path):
    shared_data("coref", "litbank")
    shared_data("coref", "gap")
    task_benchmark.main(["--size", "toy", "--tasks", "coref", "--records_dir", str(tmp_path)])
    (record,) = read_records("tasks", tmp_path)
    rows = record["results"]["rows"]
    # The benchmark checked that each row's outcomes give its script's score; the counts are the budget's.
    budget = catalog.SIZES["toy"].budgets["coref"]
    assert rows["LitBank"]["outcomes"]["scorer"] == "conll"
    assert outcomes_module.outcome_count(rows["LitBank"]["outcomes"]) == budget.eval  # documents
    assert rows["GAP"]["outcomes"]["scorer"] == "gap"
    assert outcomes_module.outcome_count(rows["GAP"]["outcomes"]) == budget.gap_examples
    for label in ("LitBank", "GAP"):
        assert outcomes_module.outcome_score(rows[label]["outcomes"]) == pytest.approx(rows[label]["score"])


@pytest.mark.slow
def test_exported_inputs_hold_every_file_the_scripts_read_and_run_units_as_prepared_data_does(tmp_path):
    """What a machine without ../shared/data runs from (the GPU check carries it): every path a task's flags name
    lies in its exported folder, and units run from it, two at a time, record the data and floors the task prepares
    here."""
    shared_data("glue", "RTE")
    shared_data("coref", "litbank")
    inputs, tasks = tmp_path / "inputs", ["rte", "coref"]
    task_benchmark.main(["--size", "toy", "--tasks", *tasks, "--export_inputs", str(inputs)])
    for name in tasks:
        manifest = json.loads((inputs / name / task_benchmark.INPUTS_MANIFEST).read_text())
        paths = [flag["path"] for flag in manifest["flags"] if isinstance(flag, dict)]
        assert paths and all((inputs / name / path).exists() for path in paths)
        assert not any(str(preparation.DATA) in flag for flag in manifest["flags"] if isinstance(flag, str))
    task_benchmark.main(["--size", "toy", "--tasks", *tasks, "--inputs", str(inputs), "--jobs", "2",
                         "--records_dir", str(tmp_path / "from-inputs")])  # fmt: skip
    exported = read_records("tasks", tmp_path / "from-inputs")
    assert sorted(r["settings"]["task"] for r in exported) == sorted(tasks)
    for record in exported:  # what the same task prepared from ../shared/data here gives
        name = record["settings"]["task"]
        (tmp_path / "here" / name).mkdir(parents=True)
        here = catalog.TASKS[name].prepare(tmp_path / "here" / name, catalog.SIZES["toy"].budgets[name])
        assert record["settings"]["data"] == here.data
        assert record["settings"]["budget"] == catalog.SIZES["toy"].budgets[name].as_record()
        for label, row in record["results"]["rows"].items():
            assert (row["floor"], row["floor_answers"]) == (here.floors[label], here.answers[label])
            assert outcomes_module.outcome_score(row["outcomes"]) == pytest.approx(row["score"])

    # Exporting over a folder, or running inputs of another budget, stops before anything runs.
    with pytest.raises(SystemExit, match="which exists"):
        task_benchmark.main(["--size", "toy", "--tasks", "rte", "--export_inputs", str(inputs)])
    manifest_path = inputs / "rte" / task_benchmark.INPUTS_MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**manifest, "budget": {**manifest["budget"], "learning_rate": 0.5}}))
    with pytest.raises(SystemExit, match="Export them again"):
        task_benchmark.main(["--size", "toy", "--tasks", "rte", "--inputs", str(inputs),
                             "--records_dir", str(tmp_path / "refused")])  # fmt: skip
    with pytest.raises(SystemExit, match="holds no inputs of semeval"):
        task_benchmark.main(["--size", "toy", "--tasks", "semeval", "--inputs", str(inputs),
                             "--records_dir", str(tmp_path / "refused")])  # fmt: skip


def test_a_failing_unit_stops_the_concurrent_run_and_drops_the_units_not_started():
    started, finished = [], []

    def run(name: str, seed: int) -> None:
        started.append((name, seed))
        if (name, seed) == ("rte", 0):
            raise SystemExit("rte seed 0 failed")
        time.sleep(0.3)
        finished.append((name, seed))

    units = [(name, seed) for seed in range(4) for name in ("rte", "cola")]
    with pytest.raises(SystemExit, match="rte seed 0 failed"):
        task_benchmark.run_concurrently(units, run, jobs=2)
    time.sleep(0.5)  # the unit that was running finishes; the others never start
    assert ("cola", 0) in finished and len(started) < len(units)


def test_exported_shared_data_is_writable_however_read_only_the_source(tmp_path):
    source = tmp_path / "shared" / "folder"
    source.mkdir(parents=True)
    (source / "file.txt").write_text("data")
    for path in (source / "file.txt", source):
        path.chmod(0o555 if path.is_dir() else 0o444)
    copy = tmp_path / "copy" / "folder"
    task_benchmark.copy_writable(source, copy)
    assert (copy / "file.txt").read_text() == "data"
    assert all(path.stat().st_mode & stat.S_IWUSR for path in (copy, copy / "file.txt"))
    shutil.rmtree(tmp_path / "copy")  # a warm machine's earlier copy can be replaced
    source.chmod(0o755)


def test_a_unit_is_run_again_only_when_its_budget_changed(tmp_path):
    budget = catalog.SIZES["cpu"].budgets["semeval"]
    settings = {"kind": "unit", "size": "cpu", "task": "semeval", "seed": 0, "checkpoint": CHECKPOINT_NAME}
    write_record("tasks", {**settings, "budget": budget.as_record()}, {}, started=RunStart(provenance(), [1.0] * 3),
                 results_dir=tmp_path)  # fmt: skip
    records = read_records("tasks", tmp_path)  # through JSON, as the benchmark reads them
    assert task_benchmark.finished(records, settings, budget) is not None
    assert task_benchmark.finished(records, {**settings, "seed": 1}, budget) is None
    assert task_benchmark.finished(records, settings, dataclasses.replace(budget, epochs=budget.epochs + 1)) is None
    # A record that predates a field with a default counts at the default.
    del records[0]["settings"]["budget"]["gap_examples"]
    assert task_benchmark.finished(records, settings, budget) is not None


@pytest.mark.parametrize(("curve", "shown"), [
    ([[0.5, 3.0], [1.0, 2.0], [1.5, 1.0], [2.0, 0.8]], "seed 0: 3.00 → 0.80, last quarter -20%"),
    ([[1.0, 2.0], [2.0, 2.0]], "seed 0: 2.00 → 2.00, last quarter +0%"),  # flat: no "-0%"
    ([[1.0, 0.5]], "seed 0: 0.50 → 0.50, last quarter +0%"),
    ([], "not recorded"),
])  # fmt: skip
def test_the_loss_column_reads_the_curve(curve, shown):
    record = {"settings": {"seed": 0}, "results": {"loss_curve": curve}}
    assert task_tables.fmt_curve([record]) == shown


def test_the_loss_column_names_the_seed_whose_curve_it_shows():
    """A seed whose record predates loss curves is passed over, and the column says which seed it shows."""
    older = {"settings": {"seed": 0}, "results": {}}
    newer = {"settings": {"seed": 1}, "results": {"loss_curve": [[0.5, 2.0], [1.0, 1.5], [1.5, 1.2], [2.0, 0.6]]}}
    assert task_tables.fmt_curve([newer, older]) == "seed 1: 2.00 → 0.60, last quarter -50%"


def test_the_semeval_floor_is_the_best_single_relation_answered_everywhere():
    relations = ["Cause-Effect(e1,e2)"] * 3 + ["Other"] * 5 + ["Component-Whole(e2,e1)"] * 2
    # Cause-Effect(e1,e2) everywhere: its precision 3/10, recall 1; Component-Whole scores 0; macro over the 2.
    precision = 3 / 10
    assert preparation.best_constant_semeval(relations) == pytest.approx(100 * (2 * precision / (precision + 1)) / 2)


def _gap_file(path: Path, golds: list[tuple[bool, bool]]) -> Path:
    text = "Alice met Bella and she smiled."
    header = ["ID", "Text", "Pronoun", "Pronoun-offset", "A", "A-offset", "A-coref", "B", "B-offset", "B-coref", "URL"]
    with open(path, "w", encoding="utf-8", newline="") as file:
        writer = csv.writer(file, delimiter="\t")
        writer.writerow(header)
        for i, (a, b) in enumerate(golds):
            writer.writerow([f"t-{i}", text, "she", text.index("she"), "Alice", 0, str(a).upper(), "Bella",
                             text.index("Bella"), str(b).upper(), "-"])  # fmt: skip
    return path


def test_the_gap_floor_is_the_best_of_a_b_both_and_neither(tmp_path):
    # Answering A everywhere: 2 true positives, 1 false positive, no false negative: F1 0.8 (both: 0.5, B or
    # neither: 0).
    path = _gap_file(tmp_path / "gap.tsv", [(True, False), (True, False), (False, False)])
    answers = preparation.gap_answers(path)
    assert max(score for name, score in answers.items() if name != "nearer name") == pytest.approx(80.0)


@pytest.mark.slow
def test_squad_v2_reports_on_drawn_articles_apart_from_its_training_and_tuning_articles(tmp_path):
    source = shared_data("squad", "dev-v2.0.part-a.json")
    budget = preparation.Budget(None, None, 128, 8, 1e-4, 1)
    prepared = preparation.prepare_squad_v2(tmp_path, budget)
    _, splits = preparation.squad_v2_splits()
    articles = json.loads(source.read_text())["data"]
    titles = {part: [a["title"] for a in splits[part]] for part in splits}
    # The tuning split is the last articles, where the mix was chosen; the other two are drawn from the rest.
    assert titles["tuning"] == [a["title"] for a in articles[preparation.SQUAD_V2_POOL:]]
    assert len(titles["reporting"]) == preparation.SQUAD_V2_REPORTING
    pool = articles[: preparation.SQUAD_V2_POOL]
    assert sorted(titles["train"] + titles["reporting"]) == sorted(a["title"] for a in pool)
    assert titles["reporting"] != [a["title"] for a in articles[preparation.SQUAD_V2_POOL - preparation.SQUAD_V2_REPORTING:
                                                                   preparation.SQUAD_V2_POOL]]  # fmt: skip
    held_out = [qa for a in splits["reporting"] for p in a["paragraphs"] for qa in p["qas"]]
    expected = 100 * sum(qa["is_impossible"] for qa in held_out) / len(held_out)
    assert prepared.floors == {"SQuAD v2.0": pytest.approx(expected)}
    assert "--version_2_with_negative" in prepared.flags
    contexts = {}
    for split in ("train", "validation"):
        data = json.loads((tmp_path / f"dev-v2.0.part-a-{split}.json").read_text())["data"]
        contexts[split] = {p["context"] for a in data for p in a["paragraphs"]}
    assert {a["title"] for a in json.loads((tmp_path / "dev-v2.0.part-a-validation.json").read_text())["data"]} == set(
        titles["reporting"])
    tuning = {p["context"] for a in splits["tuning"] for p in a["paragraphs"]}
    assert contexts["train"] and contexts["validation"] and not contexts["train"] & contexts["validation"]
    assert not (contexts["train"] | contexts["validation"]) & tuning


@pytest.mark.slow
def test_the_cpu_squad_v2_mix_makes_one_third_of_the_training_questions_unanswerable(tmp_path):
    shared_data("squad", "dev-v2.0.part-a.json")
    preparation.prepare_squad_v2(tmp_path, catalog.SIZES["cpu"].budgets["squad_v2"])
    data = json.loads((tmp_path / "dev-v2.0.part-a-train.json").read_text())["data"]
    questions = [qa for a in data for p in a["paragraphs"] for qa in p["qas"]]
    assert sum(qa["is_impossible"] for qa in questions) * 3 == len(questions)


@pytest.mark.slow
def test_squad_v1_questions_join_squad_v2_training_from_articles_outside_the_v2_part(tmp_path):
    shared_data("squad", "dev-v2.0.part-a.json")
    alone = preparation.Budget(None, None, 128, 8, 1e-4, 1)
    for folder in ("alone", "joined"):
        (tmp_path / folder).mkdir()
    preparation.prepare_squad_v2(tmp_path / "alone", alone)
    prepared = preparation.prepare_squad_v2(tmp_path / "joined", dataclasses.replace(alone, squad_v1_train=40))

    def questions(folder, split):
        data = json.loads((folder / f"dev-v2.0.part-a-{split}.json").read_text())["data"]
        return {qa["id"]: (p["context"], qa) for a in data for p in a["paragraphs"] for qa in p["qas"]}

    before, after = questions(tmp_path / "alone", "train"), questions(tmp_path / "joined", "train")
    added = {qid: pair for qid, pair in after.items() if qid not in before}
    assert before.items() <= after.items() and len(added) == 40
    assert all(qa["answers"] and not qa["is_impossible"] for _, qa in added.values())
    evaluated = {context for context, _ in questions(tmp_path / "joined", "validation").values()}
    assert not evaluated & {context for context, _ in added.values()}
    assert "40 dev-v1.1.json questions" in prepared.data["split"]


def test_a_glue_floor_is_the_majority_class_and_cola_has_none_above_zero(tmp_path):
    dev = shared_data("glue", "RTE", "dev.tsv")
    budget = preparation.Budget(None, None, 128, 8, 1e-4, 1)
    with open(dev, encoding="utf-8", newline="") as file:
        labels = [row["label"] for row in csv.DictReader(file, delimiter="\t", quoting=csv.QUOTE_NONE)]
    majority = collections.Counter(labels).most_common(1)[0][1] / len(labels)
    assert preparation.prepare_glue("rte", "RTE")(tmp_path, budget).floors == {"RTE": pytest.approx(100 * majority)}
    assert preparation.prepare_glue("cola", "CoLA")(tmp_path, budget).floors == {"CoLA": 0.0}


FALLING = [[0.5, 3.0], [1.0, 2.0], [1.5, 1.0], [2.0, 0.8]]


def _unit(records_dir: Path, task: str, seed: int, score: float | dict[str, float], floor: float,
          size: str = "cpu", budget: dict | None = None, labels: tuple[str, ...] | None = None,
          curve: list = FALLING, outcomes: dict | None = None) -> Path:  # fmt: skip
    """A unit's record, and its path: `score` for every row, or per row label, with `outcomes` where given; `labels`
    names the rows of a task the catalog no longer has."""
    labels = labels or tuple(row.label for row in catalog.TASKS[task].rows)
    scores = score if isinstance(score, dict) else dict.fromkeys(labels, score)
    settings = {"kind": "unit", "size": size, "task": task, "seed": seed, "checkpoint": CHECKPOINT_NAME,
                "budget": budget or catalog.SIZES[size].budgets[task].as_record()}  # fmt: skip
    rows = {label: {"score": scores[label], "floor": floor, **({"outcomes": outcomes} if outcomes else {})}
            for label in labels}  # fmt: skip
    results = {"rows": rows, "wall_seconds": 100.0, "loss_curve": curve}
    return write_record("tasks", settings, results, started=RunStart(provenance(), [1.0, 1.0, 1.0]),
                        results_dir=records_dir)  # fmt: skip


def _left_out(table):
    """The rows of the tables of records left out: [task, seed, scores, record, replaced by, what changed, same]."""
    part = table.split("Records not in the table", 1)[1] if "Records not in the table" in table else ""
    return [line.strip("| ").split(" | ") for line in part.splitlines()
            if line.startswith("| ") and not line.startswith("| task |")]  # fmt: skip


def _scores_page(tmp_path, root):
    page = task_tables.TASK_SCORES.render(Context(tmp_path, root / "docs" / "finetuning.md", root))
    return {line.split(" | ")[0].lstrip("| "): line for line in page.splitlines()}


def test_the_table_shows_the_spread_over_seeds_the_floor_and_the_newest_record_of_a_seed(tmp_path):
    root = tmp_path / "checkout"
    (root / "benchmarks").mkdir(parents=True)
    (root / "docs").mkdir()
    squad = catalog.SIZES["cpu"].budgets["squad"]
    _unit(tmp_path, "squad", 0, 10.0, 0.0, budget=dataclasses.replace(squad, learning_rate=1e-5).as_record())
    _unit(tmp_path, "squad", 0, 50.0, 0.0)
    _unit(tmp_path, "squad", 1, 52.0, 0.0)
    rte = catalog.SIZES["cpu"].budgets["rte"]
    _unit(tmp_path, "rte", 0, 53.0, 52.7, budget=dataclasses.replace(rte, epochs=1).as_record())  # at the floor
    table = task_tables.render_task_benchmark(Context(tmp_path, root / "benchmarks" / "TASKS.md", root))
    lines = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines()}
    # 2 seeds (50, 52): the seed term is t(1) = 12.71 standard errors of 1.0
    squad_line = ("**51.0** ± 1.4 (2 seeds) | not measured | 12.7 + not recorded | 0.0 | 2 seeds: no verdict | - | 100 "
                  "| seed 0: 3.00 → 0.80, last quarter -20%")  # fmt: skip
    assert squad_line in lines["SQuAD v1.1"]
    # RTE's only record ran an earlier budget: the row leaves it out, and the table under it says why.
    assert "not yet run" in lines["RTE"]
    rows = {row[0]: row for row in _left_out(table)}
    assert rows["rte"][1:3] == ["0", "RTE 53.0"] and rows["rte"][4:] == ["-", "the catalog's since: epochs: 1 -> 3", "-"]
    assert rows["squad"][2] == "SQuAD v1.1 10.0" and rows["squad"][5:] == ["learning_rate: 1e-05 -> 0.0001", "no"]
    assert "not yet run" in lines["SemEval-2010 Task 8"] and "88.5, BERT-base" in lines["SQuAD v1.1"]
    page = _scores_page(tmp_path, root)
    assert page["SQuAD v1.1"] == "| SQuAD v1.1 | F1 | **51.0** ± 1.4 (2 seeds) | 0.0 | 2 seeds: no verdict | `cpu` |"
    assert page["RTE"] == "| RTE | accuracy | not yet run | - | - | - |" and "CoLA" in page
    assert "LitBank" not in page  # coreference.md's

def test_the_table_names_its_machines_and_the_rows_whose_seeds_ran_on_more_than_one(tmp_path):
    root = tmp_path / "checkout"
    (root / "benchmarks").mkdir(parents=True)
    zen3 = {"cpu": "AMD EPYC", "bf16_instructions": [], "gpu": None}
    zen4 = {**zen3, "bf16_instructions": ["avx512_bf16"]}
    newer_zen3 = {**zen3, "cpu_family_model": "25/1", "vector_instructions": "avx2"}  # names more: the same class
    units = [("rte", 2, zen3), ("rte", 0, zen4), ("rte", 1, zen3), ("sst2", 0, zen3), ("sst2", 1, zen3),
             ("sst2", 2, newer_zen3), ("coref", 0, zen3)]  # fmt: skip
    for task, seed, machine in units:
        path = _unit(tmp_path, task, seed, 60.0, 50.0)
        path.write_text(json.dumps({**json.loads(path.read_text()), "machine": machine}))
    table = task_tables.render_task_benchmark(Context(tmp_path, root / "benchmarks" / "TASKS.md", root))
    lines = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines()}
    # No class holds all three of RTE's seeds with their outcomes: the row shows each seed's newest, and says so.
    mixed = "| seeds from 2 machine classes: AMD EPYC, AVX-512 BF16: seed 0; AMD EPYC, no AVX-512 BF16: seeds 1, 2 |"
    assert mixed in lines["RTE"]
    assert "| AMD EPYC, no AVX-512 BF16 |" in lines["SST-2"] and "| AMD EPYC, no AVX-512 BF16 |" in lines["LitBank"]

ZEN3 = {"cpu": "AMD EPYC", "bf16_instructions": [], "gpu": None}
XEON = {"cpu": "Intel Xeon", "bf16_instructions": ["avx512_bf16"], "gpu": None}
ZEN3_CLASS, XEON_CLASS = "AMD EPYC, no AVX-512 BF16", "Intel Xeon, AVX-512 BF16"


def _unit_on(records_dir: Path, machine: dict, task: str, seed: int, score: float, outcomes: dict | None = None):
    """A unit's record (floor 50, RTE-sized outcomes unless given) as if run on `machine`."""
    path = _unit(records_dir, task, seed, score, 50.0, outcomes=outcomes or _correct(150, 277))
    path.write_text(json.dumps({**json.loads(path.read_text()), "machine": machine}))


def _rendered(tmp_path: Path) -> tuple[dict[str, str], list[list[str]]]:
    """The size table's lines by row label (one size's records), and the rows of the records it leaves out."""
    root = tmp_path / "checkout"
    (root / "benchmarks").mkdir(parents=True, exist_ok=True)
    table = task_tables.render_task_benchmark(Context(tmp_path, root / "benchmarks" / "TASKS.md", root))
    sizes = re.split(r"\n\n(?:Rows not clear|Per seed|Records not in)", table)[0]
    return {line.split(" | ")[0].lstrip("| "): line for line in sizes.splitlines()}, _left_out(table)


def test_a_rows_seeds_come_from_the_newest_class_of_machine_that_holds_them_all(tmp_path):
    for seed in (0, 1, 2):
        _unit_on(tmp_path, ZEN3, "rte", seed, 60.0 + seed)
    _unit_on(tmp_path, XEON, "rte", 0, 70.0)  # newer, from another class: left out, not mixed in
    lines, left_out = _rendered(tmp_path)
    assert "**61.0** ± 1.0 (3 seeds)" in lines["RTE"] and f"| {ZEN3_CLASS} |" in lines["RTE"]
    assert left_out == [["rte", "0", "RTE 70.0", left_out[0][3], "-",
                         f"another class of machine ({XEON_CLASS}) than the row's seeds ({ZEN3_CLASS})", "-"]]
    for seed in (1, 2):  # the other class now holds all three, newer: the row takes them, and lists the older
        _unit_on(tmp_path, XEON, "rte", seed, 72.0)
    lines, left_out = _rendered(tmp_path)
    assert "**71.3** ± 1.2 (3 seeds)" in lines["RTE"] and f"| {XEON_CLASS} |" in lines["RTE"]
    assert [row[2] for row in left_out] == ["RTE 60.0", "RTE 61.0", "RTE 62.0"]
    assert {row[5] for row in left_out} == {f"the same budget; machine: {ZEN3_CLASS} -> {XEON_CLASS}"}


def test_a_class_of_machine_counts_a_seed_only_with_its_outcomes(tmp_path):
    _unit(tmp_path, "rte", 0, 60.0, 50.0)  # no outcomes: this machine's class, three seeds, no complete set
    for seed in (1, 2):
        _unit(tmp_path, "rte", seed, 61.0, 50.0, outcomes=_correct(150, 277))
    _unit_on(tmp_path, ZEN3, "rte", 0, 70.0)
    lines, left_out = _rendered(tmp_path)
    assert "**64.0**" in lines["RTE"] and "seeds from 2 machine classes" in lines["RTE"]
    assert [row[2] for row in left_out] == ["RTE 60.0"]  # seed 0's newest record stands for it
    _unit(tmp_path, "rte", 0, 62.0, 50.0, outcomes=_correct(150, 277))  # now complete, and the newest
    lines, left_out = _rendered(tmp_path)
    assert "**61.3**" in lines["RTE"] and "seeds from" not in lines["RTE"]
    assert [row[2] for row in left_out] == ["RTE 60.0", "RTE 70.0"]


def test_colas_cpu_row_takes_five_seeds_from_one_class_of_machine(tmp_path):
    assert catalog.SIZES["cpu"].seeds_of("cola") == (0, 1, 2, 3, 4)
    assert catalog.SIZES["cpu"].seeds_of("rte") == (0, 1, 2)
    for task in ("cola", "rte"):
        for seed in range(5):
            _unit_on(tmp_path, ZEN3, task, seed, 30.0)
        for seed in range(3):  # newer: complete for RTE's three seeds, not for CoLA's five
            _unit_on(tmp_path, XEON, task, seed, 40.0)
    lines, _ = _rendered(tmp_path)
    assert "**30.0** ± 0.0 (5 seeds)" in lines["CoLA"] and f"| {ZEN3_CLASS} |" in lines["CoLA"]
    assert "**40.0** ± 0.0 (5 seeds)" not in lines["RTE"] and f"| {XEON_CLASS} |" in lines["RTE"]


def _coverage(records_dir: Path, task: str, budget: preparation.Budget, mean: float, least: float) -> None:
    """A coverage record (tasks/coverage.py) of one task's one row at the cpu size."""
    row = {"passage": "sentences", "mean": mean, "least": least, "inputs": 277}
    entry = {"size": "cpu", "task": task, "budget": budget.as_record(), "evaluated": {}, "rows": {"RTE": row}}
    write_record("task-coverage", {"sizes": ["cpu"]}, {"coverage": [entry]},
                 started=RunStart(provenance(), [1.0, 1.0, 1.0]), results_dir=records_dir)  # fmt: skip


FLAT = [[0.5, 1.39], [1.0, 1.38], [1.5, 1.37], [2.0, 1.37]]


@pytest.mark.parametrize(("coverage", "curve", "facts"), [
    (None, FALLING, "training loss still falling over the last quarter in 3 of 3 seeds (seed 0 -20%, seed 1 -20%, "
                    "seed 2 -20%)"),
    ((0.95, 0.5), FLAT, "training loss within 5% of its first value in every seed (seed 0: 1.39 → 1.37)"),
    ((0.5, 0.2), FLAT, "reads 50% of the sentences on average (least 20%); training loss within 5% of its first "
                       "value in every seed (seed 0: 1.39 → 1.37)"),
])  # fmt: skip
def test_a_row_not_clear_of_its_floor_is_told_by_the_facts_of_its_records(tmp_path, coverage, curve, facts):
    rte = catalog.SIZES["cpu"].budgets["rte"]
    _coverage(tmp_path, "rte", dataclasses.replace(rte, epochs=1), 0.1, 0.1)  # another budget's: not this row's
    if coverage:
        _coverage(tmp_path, "rte", rte, *coverage)
    for seed, score in enumerate([53.6, 53.7, 53.8]):  # within the noise of the floor: not clear
        _unit(tmp_path, "rte", seed, score, 52.7, curve=curve, outcomes=_correct(149, 277))
    for seed in range(3):  # far above its floor: clear, and not told
        _unit(tmp_path, "sst2", seed, 90.0, 50.0, curve=curve, outcomes=_correct(1810, 2000))
    root = tmp_path / "checkout"
    (root / "benchmarks").mkdir(parents=True)
    table = task_tables.render_task_benchmark(Context(tmp_path, root / "benchmarks" / "TASKS.md", root))
    sizes, told = table.split("Rows not clear of their floor, size `cpu`, from their records:")
    rte = next(line for line in sizes.splitlines() if line.startswith("| RTE |"))
    shares = None if coverage is None else tuple(round(100 * share) for share in coverage)
    assert rte.split(" | ")[3] == ("not measured" if shares is None else "%d%% of the sentences (least %d%%)" % shares)
    assert [line for line in told.splitlines() if line.startswith("| ") and "| task |" not in line] == [
        f"| RTE | {facts} |"]  # SST-2, clear of its floor, is not told


@pytest.mark.slow
def test_the_coverage_record_holds_the_share_of_each_input_each_row_reads(tmp_path):
    """tasks/coverage.py on the shared data: RTE's pairs truncated at 128 tokens are mostly whole; RACE's 128 tokens
    a question and option hold part of each article only."""
    shared_data("race")
    if not (CHECKPOINT / "config.json").is_file():
        pytest.skip(f"no checkpoint at {CHECKPOINT}")
    path = coverage.main(["--tasks", "rte", "race", "--records_dir", str(tmp_path)])
    rows = {label: row for entry in json.loads(path.read_text())["results"]["coverage"]
            for label, row in entry["rows"].items()}  # fmt: skip
    assert set(rows) == {"RTE", "RACE middle", "RACE high"}
    assert rows["RTE"]["passage"] == "sentences" and rows["RTE"]["inputs"] == 277 and rows["RTE"]["mean"] > 0.9
    for label in ("RACE middle", "RACE high"):
        assert rows[label]["passage"] == "article" and 0 < rows[label]["least"] <= rows[label]["mean"] < 0.9


def test_a_row_that_mostly_answers_as_its_floor_is_told_so():
    floor = {"scorer": "accuracy", "predictions": [1] * 10, "references": [1] * 5 + [0] * 5}
    seeds = [{**floor, "predictions": [1] * 9 + [0]}, {**floor, "predictions": [1] * 10}]
    summary = {"floor_outcomes": floor, "records": [{"results": {"rows": {"RTE": {"outcomes": outcomes}}}}
                                                     for outcomes in seeds]}  # fmt: skip
    assert task_tables.same_as_floor("RTE", summary) == pytest.approx(0.95)
    summary["records"][0]["results"]["rows"]["RTE"] = {}  # a seed without outcomes: no share
    assert task_tables.same_as_floor("RTE", summary) is None


def test_a_table_of_records_left_out_names_no_machines(tmp_path):
    root = tmp_path / "checkout"
    (root / "benchmarks").mkdir(parents=True)
    rte = catalog.SIZES["cpu"].budgets["rte"]
    _unit(tmp_path, "rte", 0, 53.0, 52.7, budget=dataclasses.replace(rte, epochs=1).as_record())
    table = task_tables.render_task_benchmark(Context(tmp_path, root / "benchmarks" / "TASKS.md", root))
    assert _left_out(table)[0][:3] == ["rte", "0", "RTE 53.0"] and "AMD EPYC" not in table


def test_a_rerun_that_reproduced_its_unit_says_so(tmp_path):
    root = tmp_path / "checkout"
    (root / "benchmarks").mkdir(parents=True)
    for score in (61.0, 60.0, 60.0):  # seed 0 three times: each older record set beside the one the table shows
        _unit(tmp_path, "rte", 0, score, 52.7)
    rte = catalog.SIZES["cpu"].budgets["rte"]
    _unit(tmp_path, "rte", 1, 60.0, 52.7, budget=dataclasses.replace(rte, learning_rate=1e-5).as_record())
    _unit(tmp_path, "rte", 1, 60.0, 52.7)  # the same score from another budget is no reproduction
    _unit(tmp_path, "coref", 0, {"LitBank": 40.0, "GAP": 50.0}, 10.0)
    _unit(tmp_path, "coref", 0, {"LitBank": 40.0, "GAP": 51.0}, 10.0)  # the same on one row of two is not
    table = task_tables.render_task_benchmark(Context(tmp_path, root / "benchmarks" / "TASKS.md", root))
    rows = _left_out(table)
    first, second = [row for row in rows if row[:2] == ["rte", "0"]]
    assert first[2] == "RTE 61.0" and first[5:] == ["the same budget", "no"]
    assert second[2] == "RTE 60.0" and second[5:] == ["the same budget", "yes"]
    (other_budget,) = [row for row in rows if row[:2] == ["rte", "1"]]
    assert other_budget[5:] == ["learning_rate: 1e-05 -> 5e-05", "no"]
    (coref,) = [row for row in rows if row[0] == "coref"]
    assert coref[5:] == ["the same budget", "no"]

def test_a_task_that_gives_other_tasks_rows_replaces_their_records_row_by_row(tmp_path):
    root = tmp_path / "checkout"
    (root / "benchmarks").mkdir(parents=True)
    race = catalog.SIZES["cpu"].budgets["race"].as_record()
    _unit(tmp_path, "race_middle", 0, 36.0, 27.8, budget=race, labels=("RACE middle",))
    _unit(tmp_path, "race_high", 0, 27.0, 27.3, budget=race, labels=("RACE high",))
    _unit(tmp_path, "race_middle", 1, 35.0, 27.8, budget=race, labels=("RACE middle",))
    _unit(tmp_path, "race", 0, 40.0, 27.0)  # both rows, seed 0
    table = task_tables.render_task_benchmark(Context(tmp_path, root / "benchmarks" / "TASKS.md", root))
    lines = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines()}
    # Seed 0 of each row is the joint task's; seed 1 of middle is still the old task's, left out of the row.
    assert "**40.0** (1 seed) | not measured | - + not recorded | 27.0 |" in lines["RACE middle"]
    assert "**40.0** (1 seed) | not measured | - + not recorded | 27.0 |" in lines["RACE high"]
    rows = _left_out(table)
    replaced = [row for row in rows if row[0].startswith("race_") and row[4] != "-"]
    assert [row[0] for row in replaced] == ["race_middle", "race_high"]
    assert all(row[5].startswith("task: race_") and "-> race" in row[5] for row in replaced)
    (left_out,) = [row for row in rows if row[:2] == ["race_middle", "1"]]
    assert left_out[2] == "RACE middle 35.0" and "task race_middle is gone" in left_out[5]
    page = _scores_page(tmp_path, root)
    assert "| RACE middle | accuracy | **40.0** (1 seed) | 27.0 | 1 seed: no verdict |" in page["RACE middle"]

def test_a_record_replaced_on_one_of_its_rows_is_listed_with_that_row_only(tmp_path):
    root = tmp_path / "checkout"
    (root / "benchmarks").mkdir(parents=True)
    race = catalog.SIZES["cpu"].budgets["race"]
    _unit(tmp_path, "race", 0, 30.0, 27.0, budget=dataclasses.replace(race, epochs=2).as_record())
    _unit(tmp_path, "race_high", 0, 33.0, 27.0, budget=race.as_record(), labels=("RACE high",))
    table = task_tables.render_task_benchmark(Context(tmp_path, root / "benchmarks" / "TASKS.md", root))
    rows = _left_out(table)
    (replaced,) = [row for row in rows if row[0] == "race" and row[4] != "-"]
    assert replaced[2] == "RACE high 30.0" and replaced[5] == "task: race -> race_high; epochs: 2 -> 1"
    lines = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines()}
    assert "not yet run" in lines["RACE middle"] and "not yet run" in lines["RACE high"]
    left_out = [row for row in rows if row[4] == "-"]
    assert [row[:2] for row in left_out] == [["race", "0"], ["race_high", "0"]]
    assert "RACE middle 30.0" in left_out[0][2] and "epochs: 2 -> 1" in left_out[0][5]

def test_a_record_of_an_earlier_budget_newer_than_the_shown_one_is_left_out_and_replaces_nothing(tmp_path):
    root = tmp_path / "checkout"
    (root / "benchmarks").mkdir(parents=True)
    rte = catalog.SIZES["cpu"].budgets["rte"]
    _unit(tmp_path, "rte", 0, 60.0, 52.7)  # the catalog's budget
    _unit(tmp_path, "rte", 0, 53.0, 52.7, budget=dataclasses.replace(rte, epochs=1).as_record())  # an older checkout
    _unit(tmp_path, "sst2", 0, 70.0, 50.0, budget=dataclasses.replace(catalog.SIZES["cpu"].budgets["sst2"],
                                                                      epochs=2).as_record())  # fmt: skip
    _unit(tmp_path, "sst2", 0, 71.0, 50.0, budget=dataclasses.replace(catalog.SIZES["cpu"].budgets["sst2"],
                                                                      epochs=3).as_record())  # fmt: skip
    table = task_tables.render_task_benchmark(Context(tmp_path, root / "benchmarks" / "TASKS.md", root))
    lines = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines()}
    assert "**60.0** (1 seed)" in lines["RTE"] and "not yet run" in lines["SST-2"]
    listed = _left_out(table)
    # The shown RTE record replaced nothing and is not listed; the newer one of an earlier budget is left out.
    (rte,) = [row for row in listed if row[0] == "rte"]
    assert rte[2] == "RTE 53.0" and rte[5] == "the catalog's since: epochs: 1 -> 3"
    # Of two SST-2 records of earlier budgets, the newer stands (left out); the older was replaced by it.
    assert next(row for row in listed if row[2] == "SST-2 70.0")[5] == "epochs: 2 -> 3"
    assert next(row for row in listed if row[2] == "SST-2 71.0")[5] == "the catalog's since: epochs: 3 -> 1"

@pytest.mark.slow
def test_race_trains_one_model_on_both_levels_and_scores_each_apart(tmp_path):
    shared_data("race")
    prepared = preparation.prepare_race(tmp_path, catalog.SIZES["toy"].budgets["race"])
    flags = prepared.flags
    train = flags[flags.index("--train_file") + 1: flags.index("--validation_file")]
    validation = flags[flags.index("--validation_file") + 1: flags.index("--max_seq_length")]
    assert [Path(path).name for path in train] == ["race-middle-train.jsonl", "race-high-train.jsonl"]
    assert [Path(path).name for path in validation] == ["race-middle-reporting.jsonl", "race-high-reporting.jsonl"]
    for level, path in zip(("middle", "high"), validation):
        rows = [json.loads(line) for line in Path(path).read_text().splitlines()]
        assert len(rows) == 16 and all(row["example_id"].startswith(level) for row in rows)
        # The reporting split is train articles no training question shares, and not the tuning split (dev).
        trained = [json.loads(line) for line in Path(train[("middle", "high").index(level)]).read_text().splitlines()]
        assert not {row["example_id"] for row in rows} & {row["example_id"] for row in trained}
        dev = shared_data("race", f"dev.{level}.jsonl").read_text()
        assert not any(json.dumps(row["question"]) in dev and json.dumps(row["article"]) in dev for row in rows)
        most_frequent = collections.Counter(row["answer"] for row in rows).most_common(1)[0][1]
        answers = prepared.answers[f"RACE {level}"]
        assert answers["most frequent answer letter"] == pytest.approx(100 * most_frequent / 16)
        assert prepared.floors[f"RACE {level}"] == max(answers.values()) >= answers["chance"] == 25.0
    metrics = {row.label: row.metric for row in catalog.TASKS["race"].rows}
    assert metrics == {"RACE middle": "eval_accuracy_middle", "RACE high": "eval_accuracy_high"}


def test_the_gap_note_says_which_way_the_answers_went():
    scores = {"gap_overall_precision": 0.5, "gap_overall_recall": 0.25}
    answered = {"gap_answered_neither": 0.4, "gap_answered_a": 0.2, "gap_answered_b": 0.1, "gap_answered_both": 0.3}
    assert catalog.gap_note({"scores": {"gap_results.json": scores}}) == "precision 50.0, recall 25.0"
    assert catalog.gap_note({"scores": {"gap_results.json": {**scores, **answered}}}) == (
        "precision 50.0, recall 25.0; answered neither 40%, A only 20%, B only 10%, both (never right) 30%")
    assert catalog.gap_note({"scores": {}}) is None

def test_the_squad_v2_note_splits_answerable_from_unanswerable():
    scores = {"eval_HasAns_f1": 0.0, "eval_HasAns_total": 216, "eval_NoAns_f1": 100.0, "eval_NoAns_total": 419}
    assert catalog.squad_v2_note({"scores": {"eval_results.json": scores}}) == (
        "F1 0.0 on the 216 answerable questions, 100.0 on the 419 unanswerable ones")
    with_best = {**scores, "eval_best_f1": 66.0}
    assert catalog.squad_v2_note({"scores": {"eval_results.json": with_best}}).endswith(
        "; the best null threshold, chosen on these questions, would score 66.0")
    assert catalog.squad_v2_note({"scores": {"eval_results.json": {}}}) is None


def test_a_rerun_with_the_same_budget_names_the_packages_that_changed():
    settings = {"task": "squad", "budget": {"batch": 32}}
    old = {"settings": settings, "packages": {"tokenizers": "0.23.2", "torch": "2.11.0"}}
    new = {"settings": settings, "packages": {"tokenizers": "0.23.3", "torch": "2.11.0"}}
    assert task_tables.budget_change(old, new) == "the same budget and other packages (tokenizers 0.23.2 -> 0.23.3)"
    assert task_tables.budget_change(old, old) == "the same budget"
    smaller = {**new, "settings": {**settings, "budget": {"batch": 16}}}
    assert task_tables.budget_change(old, smaller) == "batch: 32 -> 16"
    # A field added to budgets since the older record counts at its default there, as when budgets are matched.
    later = {**old, "settings": {**settings, "budget": {"batch": 32, "squad_v1_train": 0}}}
    assert task_tables.budget_change(old, later) == "the same budget"


# --- the evaluation-sample noise and the verdicts ---


def _correct(right: int, total: int) -> dict:
    """Accuracy outcomes: `right` of `total` questions answered right."""
    return {"scorer": "mean", "values": [1] * right + [0] * (total - right)}


def test_the_bootstrap_of_constant_outcomes_has_no_width():
    assert task_rows.outcomes_interval(_correct(40, 40)) == (100.0, 100.0) and task_rows.sample_noise(_correct(0, 40)) == 0
    labels = {"scorer": "accuracy", "predictions": [1, 0, 1], "references": [1, 0, 1]}
    assert task_rows.outcomes_interval(labels, resamples=20) == (100.0, 100.0)


def test_the_bootstrap_interval_holds_the_score_and_is_seeded():
    outcomes = _correct(15, 20)
    low, high = task_rows.outcomes_interval(outcomes)
    assert low < outcomes_module.outcome_score(outcomes) == 75.0 < high
    # The binomial standard error of 15 of 20, sqrt(0.75 * 0.25 / 20): the 95% half-width is about 1.96 of them.
    assert (high - low) / 2 == pytest.approx(1.96 * 100 * (0.75 * 0.25 / 20) ** 0.5, rel=0.25)
    assert task_rows.outcomes_interval(outcomes) == (low, high)  # seeded
    assert task_rows.sample_noise(outcomes) == (high - low) / 2
    assert task_rows.outcomes_interval(outcomes, seed=1) != (low, high)


def test_outcomes_are_scored_by_the_projects_scorers():
    stsb = {"scorer": "spearmanr", "predictions": [0.1, 0.4, 0.2, 0.9], "references": [1.0, 3.0, 2.0, 4.0]}
    assert outcomes_module.outcome_score(stsb) == pytest.approx(100.0)
    semeval = {"scorer": "semeval", "predictions": ["Other", "Cause-Effect(e1,e2)"],
               "references": ["Other", "Cause-Effect(e1,e2)"]}  # fmt: skip
    assert outcomes_module.outcome_score(semeval) == 100.0
    assert outcomes_module.outcome_score(outcomes_module.resampled(_correct(1, 2), [0, 0, 1, 0])) == 75.0
    with pytest.raises(SystemExit, match="score 50.0, its script 60.0"):
        outcomes_module.check_outcomes("RTE", _correct(1, 2), 60.0)


def test_coreference_outcomes_resample_documents_and_gap_examples_as_their_scorers_count_them():
    # Two documents of (start, end) mentions: the CoNLL F1 adds each metric's sums over documents before dividing.
    documents = [([[(0, 0), (2, 2)], [(4, 5)]], [[(0, 0), (2, 2), (4, 5)]]),
                 ([[(1, 1), (3, 3), (6, 6)]], [[(1, 1), (3, 3)], [(7, 7)]])]  # fmt: skip
    counts = [coreference.document_counts(gold, predicted, keep_singletons=True) for gold, predicted in documents]
    litbank = coreference.document_outcomes(documents, keep_singletons=True)  # what run_coref.py writes
    assert litbank == {"scorer": "conll",
                       "counts": [[list(document[name].as_tuple()) for name in coreference.METRICS]
                                  for document in counts]}  # fmt: skip
    assert outcomes_module.outcome_score(litbank) == pytest.approx(
        100 * coreference.coref_scores(documents, keep_singletons=True)["conll_f1"])
    twice_the_first = outcomes_module.resampled(litbank, [0, 0])
    assert outcomes_module.outcome_count(twice_the_first) == 2
    assert outcomes_module.outcome_score(twice_the_first) == pytest.approx(
        100 * coreference.coref_scores([documents[0]] * 2, keep_singletons=True)["conll_f1"])
    # GAP: two decisions an example, scored together by its overall F1.
    gold, predicted = [[True, False], [False, True], [False, False]], [[True, True], [False, False], [False, False]]
    decisions = [GapDecision("she", *g, *p) for g, p in zip(gold, predicted)]
    gap = gap_outcomes(decisions)  # what run_coref.py writes
    assert gap == {"scorer": "gap", "predictions": predicted, "references": gold}
    assert outcomes_module.outcome_score(gap) == pytest.approx(100 * gap_scores(decisions)["overall_f1"]) == 50.0
    assert outcomes_module.outcome_score(outcomes_module.resampled(gap, [0, 0])) == pytest.approx(200 / 3)


def test_a_unit_reads_each_rows_outcomes_from_the_file_its_script_wrote_beside_the_scores(tmp_path):
    coref = catalog.TASKS["coref"]
    litbank = {"scorer": "conll", "counts": [[[1.0, 2.0, 1.0, 1.0]] * 3]}
    gap = {"scorer": "gap", "predictions": [[True, False]], "references": [[True, True]]}
    (tmp_path / "eval_outcomes.json").write_text(json.dumps({"eval_conll_f1": litbank, "eval_muc_f1": {}}))
    with pytest.raises(SystemExit, match=r"run_coref.py wrote no outcomes of gap_overall_f1 to .*gap_outcomes.json"):
        outcomes_module.unit_outcomes(coref, tmp_path)
    (tmp_path / "gap_outcomes.json").write_text(json.dumps({"gap_overall_f1": gap}))
    assert outcomes_module.unit_outcomes(coref, tmp_path) == {"LitBank": litbank, "GAP": gap}


def _summary(tmp_path: Path, scores: list[float], floor: float, outcomes: dict | None, size: str = "cpu") -> dict:
    for seed, score in enumerate(scores):
        _unit(tmp_path, "rte", seed, score, floor, size=size, outcomes=outcomes)
    return task_rows.row_summaries(read_records("tasks", tmp_path), CHECKPOINT_NAME, size)["RTE"]


def test_a_verdict_needs_three_seeds(tmp_path):
    summary = _summary(tmp_path, [90.0, 90.5], 50.0, _correct(180, 200), size="gpu")
    assert rule.row_clear_of_floor(summary) is None and task_tables.short_of_aim("RTE", "gpu", summary) is None
    assert rule.clear_text(summary) == "2 seeds: no verdict"
    assert task_tables.fmt_aim(catalog.TASKS["rte"].rows[0], "gpu", summary).startswith("53.1 (no verdict; 0.8 × ")


def test_every_aim_comes_from_a_named_outside_source():
    """An aim is a stated fraction of a published score, with its paper and table; the cpu size has none (its aims,
    set after its first scores were seen, measured nothing)."""
    assert not catalog.SIZES["cpu"].aims
    labels = {row.label for task in catalog.TASKS.values() for row in task.rows}
    for size in catalog.SIZES.values():
        for label, aim in size.aims.items():
            assert label in labels and 0 < aim.fraction <= 1
            assert aim.score == pytest.approx(aim.fraction * aim.published.score, abs=0.05)
            assert re.search(r"et al\. \d{4}, Table \d+", aim.published.source) and aim.published.model
            assert aim.published.source in aim.source and f"{aim.fraction:g}" in aim.source
            # Each names the split of its published score, the date it was fixed and what had been seen by then.
            assert aim.split in ("dev", "test set") and aim.split in aim.published.source
            assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", aim.fixed) and "seen" in aim.seen


def test_a_verdict_needs_the_evaluation_sample_noise(tmp_path):
    summary = _summary(tmp_path, [90.0, 90.5, 91.0], 50.0, None)
    assert rule.row_clear_of_floor(summary) is None
    assert rule.clear_text(summary) == "sample noise not recorded: no verdict"
    assert task_tables.fmt_margin(summary).endswith(" + not recorded")


@pytest.mark.parametrize("scores, quantile", [([90.0, 91.0], 12.706), ([90.0, 90.5, 91.0], 4.303),
                                              ([89.0, 90.0, 90.5, 91.0, 92.0], 2.776)])  # fmt: skip
def test_the_seed_term_is_the_95_percent_t_interval_for_the_seeds_there_are(tmp_path, scores, quantile):
    """Student's t for n-1 degrees of freedom (tabled values), not 2 standard errors: 2 seeds' interval is wide."""
    summary = _summary(tmp_path, scores, 50.0, _correct(1810, 2000))
    standard_error = statistics.stdev(scores) / math.sqrt(len(scores))
    assert rule.seed_spread(summary) == pytest.approx(quantile * standard_error, rel=1e-3)
    assert rule.seed_spread(summary) > 2 * standard_error


def test_the_sample_term_needs_every_seeds_outcomes(tmp_path):
    for seed, score in enumerate([90.0, 90.5, 91.0]):
        _unit(tmp_path, "rte", seed, score, 50.0, outcomes=_correct(1810, 2000) if seed else None)
    summary = task_rows.row_summaries(read_records("tasks", tmp_path), CHECKPOINT_NAME, "cpu")["RTE"]
    assert rule.evaluation_noise(summary) is None and rule.row_clear_of_floor(summary) is None
    assert rule.clear_text(summary) == "sample noise of 2 of 3 seeds: no verdict"
    assert task_tables.fmt_margin(summary).endswith(" + 2 of 3 seeds recorded")


def test_three_seeds_far_above_the_floor_with_little_noise_are_clear(tmp_path):
    summary = _summary(tmp_path, [90.0, 90.5, 91.0], 50.0, _correct(1810, 2000))
    margin = rule.verdict_margin(summary)
    assert margin == pytest.approx(rule.seed_spread(summary) + task_rows.sample_noise(_correct(1810, 2000)))
    assert rule.row_clear_of_floor(summary) is True
    assert rule.clear_text(summary) == "yes (margin rule: no per-example floor outcomes)"
    assert task_tables.short_of_aim("RTE", "cpu", summary) is None  # the cpu size has no aims
    gpu = _summary(tmp_path / "gpu", [90.0, 90.5, 91.0], 50.0, _correct(1810, 2000), size="gpu")
    assert task_tables.short_of_aim("RTE", "gpu", gpu) is (90.5 - margin < catalog.SIZES["gpu"].aims["RTE"].score)


def test_a_mean_clear_of_the_floor_by_less_than_the_noise_is_not_clear(tmp_path):
    # RTE-sized noise: 277 pairs. The mean is above the floor by a point, within the bootstrap's width.
    floor = 52.7
    mean = floor + 1.0
    outcomes = _correct(round(mean / 100 * 277), 277)
    summary = _summary(tmp_path, [mean - 0.1, mean, mean + 0.1], floor, outcomes)
    assert rule.clear_of_floor(summary, 0.0)  # the mean alone would pass
    assert rule.evaluation_noise(summary) > 1.0
    assert rule.row_clear_of_floor(summary) is False
    assert rule.clear_text(summary) == "**no** (margin rule: no per-example floor outcomes)"
    table = task_tables.size_table(read_records("tasks", tmp_path), CHECKPOINT_NAME, "cpu").render(
        Context(tmp_path, tmp_path / "TASKS.md", tmp_path))
    assert "| **no** (margin rule" in next(line for line in table.splitlines() if line.startswith("| RTE |"))


def test_every_row_reads_its_score_as_its_fine_tuning_task_declares_it():
    """A row names only which declared score it shows: the results file, the key's prefix and the scale are the
    fine-tuning task's own `reports` (the object itself, not a copy), and a score the task does not report is
    refused."""
    for task in catalog.TASKS.values():
        assert task.script == task.finetuning.script
        for row in task.rows:
            assert any(row.report is declared for declared in task.finetuning.reports.values())
            assert row.metric == f"{row.report.split}_{row.key}"
            assert row.scale == (100.0 if row.report.scale == "fraction" else 1.0)
    glue = catalog.FINETUNING_TASKS["glue"]
    with pytest.raises(ValueError, match="'f1' is not a score its task reports"):
        catalog.Row("RTE", glue.reports["rte"], "f1", "F1", "finetuning.md")


def test_the_cpu_and_gpu_sizes_run_the_seeds_a_verdict_needs():
    """`python -m benchmarks.tasks.scores --size cpu` (or gpu), with no --seeds, runs enough seeds for a verdict."""
    for size in ("cpu", "gpu"):
        assert len(catalog.SIZES[size].seeds) >= rule.MIN_SEEDS
    assert catalog.SIZES["cpu"].seeds == (0, 1, 2)


def test_a_docs_line_shows_the_row_with_the_seeds_a_verdict_needs_over_a_fuller_size_with_fewer(tmp_path):
    root = tmp_path / "checkout"
    (root / "docs").mkdir(parents=True)
    _unit(tmp_path, "rte", 0, 60.0, 52.7, size="gpu")
    for seed, score in enumerate([55.0, 56.0, 57.0]):
        _unit(tmp_path, "rte", seed, score, 52.7, outcomes=_correct(155, 277))
    line = _scores_page(tmp_path, root)["RTE"]
    assert "**56.0** ± 1.0 (3 seeds)" in line and "`cpu`" in line and "60.0" not in line
    for seed in (1, 2):  # with 3 seeds of its own, the fuller size's row is the one shown
        _unit(tmp_path, "rte", seed, 60.0, 52.7, size="gpu")
    line = _scores_page(tmp_path, root)["RTE"]
    assert "**60.0** ± 0.0 (3 seeds)" in line and "`gpu`" in line


def _mean_of(values):
    """A scorer of per-example values on drawn indices: their mean, in points."""
    values = np.asarray(values, dtype=float)
    return lambda drawn: 100 * float(values[drawn].mean())


def _paired_lower(seeds, floor, groups):
    return rule.paired_difference([_mean_of(values) for values in seeds], _mean_of(floor), groups)[1]


def test_the_paired_difference_is_the_row_score_less_the_floors_on_the_same_examples():
    """The observed difference is the mean over seeds less the floor's score, inside its interval, seeded; a model
    equal to its floor everywhere differs by exactly 0, and a constant shift is exact: what both share cancels."""
    model, floor = [1.0] * 30 + [0.0] * 10, [1.0] * 20 + [0.0] * 20
    each = list(range(40))
    difference, low, high = rule.paired_difference([_mean_of(model)], _mean_of(floor), each)
    assert difference == pytest.approx(25.0) and low <= difference <= high
    assert rule.paired_difference([_mean_of(model)], _mean_of(floor), each) == (difference, low, high)  # seeded
    assert rule.paired_difference([_mean_of(model)], _mean_of(model), each) == (0.0, 0.0, 0.0)
    shifted = [value + 0.02 for value in floor]
    assert rule.paired_difference([_mean_of(shifted)], _mean_of(floor), each) == pytest.approx((2.0, 2.0, 2.0))
    with pytest.raises(ValueError):
        rule.paired_difference([], _mean_of(floor), each)


def test_the_paired_rule_resamples_whole_groups():
    """10 articles of 50 questions: the model is right where the floor is wrong on 6 whole articles and wrong where it
    is right on 4. Resampled question by question the 500 questions would clear the floor; resampled by article,
    as the examples are not independent, the 10 articles do not."""
    model = [1.0] * 300 + [0.0] * 200
    floor = [0.0] * 300 + [1.0] * 200
    assert _paired_lower([model] * 3, floor, list(range(500))) > 0
    assert _paired_lower([model] * 3, floor, [i // 50 for i in range(500)]) < 0


def test_the_paired_rule_resamples_seeds():
    """The same mean difference, +6 points on 2,000 examples: three seeds alike clear the floor, three seeds of
    +10, +10 and -2 do not, as a draw of the low seed three times is as likely as 1 in 27."""
    floor = [1.0] * 1000 + [0.0] * 1000
    def above(points):  # the floor's outcomes with `points` of the 2,000 examples' outcomes moved to right or wrong
        moved = round(abs(points) / 100 * 2000)
        values = list(floor)
        for i in range(moved):
            values[1000 + i if points > 0 else i] = 1.0 if points > 0 else 0.0
        return values
    each = list(range(2000))
    assert _paired_lower([above(6)] * 3, floor, each) > 0
    assert _paired_lower([above(10), above(10), above(-2)], floor, each) < 0


def test_the_paired_rule_has_a_sign():
    """Mirror rows: the model above its floor by as much as the other is below it; only the first is clear."""
    high, low = [1.0] * 700 + [0.0] * 300, [1.0] * 300 + [0.0] * 700
    each = list(range(1000))
    assert _paired_lower([high] * 3, low, each) > 0
    assert _paired_lower([low] * 3, high, each) < 0


def test_a_score_that_is_no_mean_is_computed_whole_on_each_draw():
    """CoLA's Matthews correlation: the difference is the model's correlation less the constant answer's (0) on
    the same draw, not a mean of per-example values."""
    references = [1, 0] * 100
    predictions = [1, 0] * 80 + [0, 1] * 20
    outcomes = {"scorer": "matthews_correlation", "predictions": predictions, "references": references}
    floor = {"scorer": "matthews_correlation", "predictions": [1] * 200, "references": references}
    row = {"floor": 0.0, "answer": "constant answer", "outcomes": floor, "groups": list(range(200))}
    difference, low, high = task_rows.paired_with_floor([outcomes] * 3, row)
    assert difference == pytest.approx(outcomes_module.outcome_score(outcomes)) and 0 < low < difference < high
