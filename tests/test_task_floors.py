"""The task benchmark's floors (benchmarks/tasks/heuristics.py, tasks/floors.py): each answer that learns nothing
does what it says on hand-made examples; SemEval's reporting split is a stratified hold-out; the tables show a
row against the floors record computed on the examples its records evaluated, else against the record's own."""

import collections
import dataclasses
from pathlib import Path

import pytest

from benchmarks.common import CHECKPOINT_NAME
from benchmarks.statistics import MIN_SEEDS
from benchmarks.tables import task_benchmark
from benchmarks.tables.render import Context
from benchmarks.tasks import catalog as task_catalog, preparation
from benchmarks.tasks import heuristics, outcomes, rows as task_rows
from spanroberta.records import RunStart, provenance, read_records, write_record

# --- RACE ---


def test_the_longest_option_is_picked_and_the_first_of_equal_ones():
    assert heuristics.longest_option(["a cat", "the big brown dog", "no", "a dog"]) == 1
    assert heuristics.longest_option(["abc", "xyz", "ab", "a"]) == 0


def test_the_option_sharing_most_words_with_the_article_is_picked():
    article = "Tom planted apple trees in the garden behind his house."
    options = ["He bought a car.", "Apple trees in the garden.", "Nothing at all.", "Trees."]
    assert heuristics.most_overlapping_option(article, options) == 1


def test_the_sliding_window_prefers_the_option_whose_words_sit_next_to_the_question_words():
    # "red" and "blue" occur once each; "red" sits beside the question's words, "blue" far from them.
    article = "blue sky over the sea . many words here and there . the ball that Ann kicked was red"
    assert heuristics.sliding_window_option(article, "What colour was the ball Ann kicked?", ["blue", "red"]) == 1


def test_the_sliding_window_score_weighs_rare_words_more():
    passage = ["a", "a", "a", "b"]
    weights = heuristics.inverse_counts(passage)
    assert weights["b"] > weights["a"]
    # Windows of 2 words: the best holds "a" and "b".
    assert heuristics.sliding_window_score(passage, {"a", "b"}) == pytest.approx(weights["a"] + weights["b"])


def test_race_heuristics_score_each_answer_on_the_questions():
    questions = [
        {"article": "x", "question": "q", "options": ["long option", "b", "c", "d"], "answer": "A"},
        {"article": "x", "question": "q", "options": ["a", "b", "c", "longest option"], "answer": "A"},
    ]
    scores = heuristics.race_heuristics(questions)
    assert scores["chance"] == 25.0 and scores["most frequent answer letter"] == 100.0
    assert scores["longest option"] == 50.0


# --- SQuAD ---


def test_the_span_baseline_answers_from_the_sentence_that_shares_the_question_words():
    context = "The cat sat on the mat. Paris is the capital of France. Dogs bark."
    answer = heuristics.sliding_window_answer(context, "What is the capital of France?")
    assert answer == "Paris"  # the only words of the best sentence that are not the question's
    assert heuristics.sliding_window_answer("", "Why?") == ""


def test_the_span_baseline_never_answers_with_question_words_alone_nor_beyond_its_length():
    context = "In 1066 the Normans crossed the English Channel and won the battle near Hastings town center."
    answer = heuristics.sliding_window_answer(context, "Where did the Normans win the battle in 1066?", max_words=2)
    assert 1 <= len(answer.split()) <= 2
    assert set(heuristics.words(answer)) - {"the", "normans", "battle", "in", "1066", "win", "where", "did"}


# --- STS-B, classification, GAP, LitBank ---


def test_word_overlap_similarities_and_their_rank_correlation():
    assert heuristics.jaccard("a b c", "b c d") == pytest.approx(2 / 4)
    assert heuristics.binary_cosine("a b c", "b c d") == pytest.approx(2 / 3)
    pairs = [("a b c d", "a b c d"), ("a b c d", "a b c x"), ("a b c d", "x y z w")]
    scores = heuristics.stsb_heuristics(pairs, [5.0, 3.0, 0.0])
    assert scores["word-overlap Jaccard"] == pytest.approx(100.0) and scores["constant answer"] == 0.0


def test_classification_answers_chance_and_the_majority():
    assert heuristics.classification_heuristics([0, 1, 1, 1]) == {"chance": 50.0, "majority class": 75.0}
    # F1 of the positive class: "positive" everywhere 2p / (p + 1), a fair coin p / (p + 1/2), with p = 3/4.
    scores = heuristics.classification_heuristics([0, 1, 1, 1], positive_f1=True)
    assert scores["chance"] == pytest.approx(100 * 0.75 / 1.25)
    assert scores["positive everywhere"] == pytest.approx(100 * 1.5 / 1.75)
    assert heuristics.best(scores) == ("positive everywhere", pytest.approx(100 * 1.5 / 1.75))


def test_the_nearer_name_is_the_antecedent():
    assert heuristics.nearer_name(10, 8, 2) == (True, False)
    assert heuristics.nearer_name(10, 2, 9) == (False, True)
    assert heuristics.nearer_name(10, 8, 12) == (True, False)  # a tie goes to A


def test_exact_string_match_clusters_names_and_leaves_pronouns_alone():
    sentences = [["Emma", "Woodhouse", "met", "Mr.", "Knightley", "."], ["She", "saw", "Emma", "Woodhouse", "."],
                 ["The", "end", "."]]  # fmt: skip
    clusters = heuristics.exact_match_clusters(sentences)
    assert [(0, 1), (8, 9)] in clusters  # "Emma Woodhouse" twice
    assert [(3, 4)] in clusters and [(6, 6)] in clusters  # Mr. Knightley; "She" alone
    assert not any((11, 11) in cluster for cluster in clusters)  # "The" opens a sentence alone: no name


# --- SemEval's reporting split ---


def test_the_stratified_holdout_keeps_sizes_disjointness_and_label_shares():
    labels = ["a"] * 50 + ["b"] * 30 + ["c"] * 17 + ["d"] * 3
    rows = [{"id": i, "label": label} for i, label in enumerate(labels)]
    rest, held = preparation.stratified_holdout(rows, "label", 10)
    assert len(held) == 10 and len(rest) == 90
    assert {r["id"] for r in rest}.isdisjoint({r["id"] for r in held})
    assert [r["id"] for r in held] == sorted(r["id"] for r in held)  # the source's order
    counts = collections.Counter(r["label"] for r in held)
    for label, count in collections.Counter(labels).items():
        assert abs(counts[label] - count * 10 / len(rows)) < 1
    assert preparation.stratified_holdout(rows, "label", 10) == (rest, held)  # seeded
    assert preparation.stratified_holdout(rows, "label", 10, seed=1)[1] != held


def test_holding_out_articles_keeps_each_article_on_one_side():
    questions = [{"article": f"a{i // 3}", "n": i} for i in range(30)]
    questions += [{"article": "big", "n": 30 + i} for i in range(8)]
    rest, held = preparation.hold_out_articles(questions, "article", 7)
    assert len(held) >= 7 and len(held) + len(rest) == len(questions)
    assert {q["article"] for q in held}.isdisjoint({q["article"] for q in rest})
    assert len(held) < 7 + 8  # articles join only until the count is reached (the largest holds 8)
    assert [q["n"] for q in held] == sorted(q["n"] for q in held)  # the source's order
    assert preparation.hold_out_articles(questions, "article", 7) == (rest, held)  # seeded
    assert preparation.hold_out_articles(questions, "article", 7, seed=1)[1] != held


@pytest.mark.parametrize("task", ["semeval", "squad_v2", "race"])
def test_records_of_a_task_s_earlier_split_are_another_budget(task):
    for size in ("cpu", "gpu"):
        budget = task_catalog.SIZES[size].budgets[task]
        earlier = budget.as_record()
        del earlier["split"]  # the records before the reporting split
        assert not budget.matches(earlier) and budget.matches(budget.as_record())
        assert preparation.evaluated_examples(earlier) != preparation.evaluated_examples(budget.as_record())


# --- the tables read the floors record ---


def _record(records_dir: Path, benchmark: str, settings: dict, results: dict) -> None:
    write_record(benchmark, settings, results, started=RunStart(provenance(), [1.0] * 3), results_dir=records_dir)


def test_the_table_shows_each_row_against_the_floors_record_of_its_evaluated_examples(tmp_path):
    root = tmp_path / "checkout"
    (root / "benchmarks").mkdir(parents=True)
    rte = task_catalog.SIZES["cpu"].budgets["rte"]
    semeval = task_catalog.SIZES["cpu"].budgets["semeval"]
    for task, budget, label, score, floor in (("rte", rte.as_record(), "RTE", 60.0, 52.7),
                                              ("semeval", semeval.as_record(), "SemEval-2010 Task 8", 50.0, 2.4)):
        settings = {"kind": "unit", "size": "cpu", "task": task, "seed": 0, "checkpoint": CHECKPOINT_NAME,
                    "budget": budget}  # fmt: skip
        _record(tmp_path, "tasks", settings, {"rows": {label: {"score": score, "floor": floor}}, "wall_seconds": 1.0})
    floors = [{"size": "cpu", "task": task, "evaluated": preparation.evaluated_examples(budget.as_record()),
               "rows": {label: {"floor": floor, "answer": answer, "answers": {answer: floor}}}}
              for task, budget, label, floor, answer in (("rte", rte, "RTE", 58.0, "a heuristic"),
                                                         ("semeval", dataclasses.replace(semeval, split=None),
                                                          "SemEval-2010 Task 8", 3.0, "x"))]  # fmt: skip
    _record(tmp_path, "task-floors", {}, {"floors": floors})
    table = task_benchmark.render_task_benchmark(Context(tmp_path, root / "benchmarks" / "TASKS.md", root))
    lines = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines()}
    # RTE's record evaluated the examples of the floors record: its floor, and the verdict against it.
    assert "| 58.0 (a heuristic) | 1 seed: no verdict |" in lines["RTE"]
    # The floors record holds SemEval's earlier split, not the one its record evaluated: the record's own floor.
    assert "| 2.4 | 1 seed: no verdict |" in lines["SemEval-2010 Task 8"]
    assert "| its unit record's |" in lines["SemEval-2010 Task 8"]


def test_the_committed_floors_outcomes_give_each_floor_and_align_with_the_rows_records():
    """The newest floors record's per-example outcomes score each cpu row's floor, hold one group per example, and
    count as many examples as every unit record the row shows (the paired verdict compares them in order)."""
    results = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
    floors = read_records("task-floors", results)
    newest = max(floors, key=lambda record: record["date"])
    units = task_rows.table_units(read_records("tasks", results))
    standing = collections.defaultdict(list)
    for (checkpoint, size, label, _), record in units.items():
        if (checkpoint, size) == (CHECKPOINT_NAME, "cpu"):
            standing[label].append(record)
    checked = aligned = 0
    for entry in newest["results"]["floors"]:
        if entry["size"] != "cpu":
            continue
        for label, row in entry["rows"].items():
            assert outcomes.outcome_score(row["outcomes"]) == pytest.approx(row["floor"], abs=1e-6)
            assert outcomes.outcome_count(row["outcomes"]) == len(row["groups"])
            # A row has no records where its budget changed since its seeds ran (they are to run again).
            assert not standing[label] or len(standing[label]) >= MIN_SEEDS
            for record in standing[label]:
                assert outcomes.outcome_count(record["results"]["rows"][label]["outcomes"]) == len(row["groups"])
                aligned += 1
            checked += 1
    assert checked == 13 and aligned >= 3
