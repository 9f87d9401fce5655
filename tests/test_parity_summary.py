"""The fine-tuning parity benchmark's summary and tables (benchmarks/parity/summary.py), from hand-made run records:
the newest record of a run replaces older ones, each side gets its mean and spread over seeds, the difference its
noise, and sides that agree at the floor are told apart from parity met. The floor and the verdict on it are the task
benchmark's (benchmarks/statistics.py): the floors record's on the same evaluated examples, the same margin, the same
wording; a task no floors record covers says so."""

import math
import statistics
from pathlib import Path

import pytest

from benchmarks.common import CHECKPOINT_NAME
from benchmarks.parity import summary as parity
from benchmarks import statistics as rule
from benchmarks.tables import parity as parity_tables
from benchmarks.tables.render import Context
from benchmarks.tasks import catalog
from benchmarks.tasks.preparation import evaluated_examples
from benchmarks.tasks.rows import row_summaries


def record(side, seed, primary, date, task="mrpc", kind="run", wall=None, size="cpu-small", floor=0.5,
           eval_samples=None, outcomes=None):  # fmt: skip
    results = {"primary": primary, "floor": floor, "wall_seconds": 10.0 + seed if wall is None else wall,
               "train_loss": 0.5, "cpu_seconds": 9.0, "train_seconds": 8.0, "train_steps": 24}  # fmt: skip
    if outcomes is not None:
        results["outcomes"] = outcomes
    return {"date": date, "path": Path(f"{date}-{size}-{task}-{side}-seed{seed}.json"),
            "settings": {"kind": kind, "size": size, "task": task, "side": side, "seed": seed,
                         "task_size": {"eval_samples": eval_samples}}, "results": results}  # fmt: skip


def floors_record(floors, eval_samples=None, date="2026-01-01T00:00:00+00:00"):
    """A task-floors record holding `floors` (row label -> floor, 0-100) on the examples of `eval_samples`."""
    rows = {label: {"floor": floor, "answer": "a heuristic", "answers": {"a heuristic": floor}}
            for label, floor in floors.items()}  # fmt: skip
    entry = {"size": "cpu", "task": "any", "evaluated": evaluated_examples({"eval": eval_samples}), "rows": rows}
    return {"date": date, "path": Path(f"{date}-floors.json"), "settings": {}, "results": {"floors": [entry]}}


def correct(right, total=2000):
    """Per-example outcomes: `right` of `total` examples answered right."""
    return {"scorer": "mean", "values": [1] * right + [0] * (total - right)}


def render_parity(records, floor_records=()):
    """The parity table as PARITY.md holds it, its links relative to the records' own folder."""
    return parity_tables.parity_table(records, floor_records).render(Context(Path("."), Path("PARITY.md"), Path(".")))


def findings(records, floor_records=()):
    return parity_tables.findings(records, floor_records).render(Context(Path("."), Path("PARITY.md"), Path(".")))


def test_summary_and_table_from_the_newest_run_records():
    ours, theirs = [0.81, 0.85, 0.83], [0.80, 0.86, 0.79]
    records = [record("spanroberta", 0, 0.1, "2026-01-01T00:00:00+00:00")]  # replaced by the rerun below
    records += [record("spanroberta", seed, value, f"2026-01-02T00:00:0{seed}+00:00")
                for seed, value in enumerate(ours)]
    records += [record("transformers", seed, value, "2026-01-02T00:01:00+00:00") for seed, value in enumerate(theirs)]
    records.append({"date": "2026-01-03", "settings": {"kind": "summary", "size": "cpu-small"}, "results": {}})

    entry = parity.summarize(records)["cpu-small"]["mrpc"]
    assert entry["spanroberta"]["primary"]["n"] == 3
    assert entry["spanroberta"]["primary"]["mean"] == pytest.approx(statistics.fmean(ours))
    assert entry["transformers"]["primary"]["sd"] == pytest.approx(statistics.stdev(theirs))
    assert entry["difference"] == pytest.approx(statistics.fmean(ours) - statistics.fmean(theirs))
    noise = 2 * math.sqrt(statistics.variance(ours) / 3 + statistics.variance(theirs) / 3)
    assert entry["noise"] == pytest.approx(noise) and entry["within_noise"] == (abs(entry["difference"]) <= noise)

    table = render_parity(records)
    row = next(line for line in table.splitlines() if "| mrpc |" in line)
    assert f"{statistics.fmean(ours) * 100:.1f} ± {statistics.stdev(ours) * 100:.1f} (n=3)" in row
    assert row.count("-spanroberta-seed") == row.count("-transformers-seed") == 6  # 3 links, each name and target


def test_one_seed_gives_no_noise_estimate_and_a_missing_side_says_so():
    records = [record("spanroberta", 0, 0.9, "2026-01-01"), record("transformers", 0, 0.8, "2026-01-01"),
               record("spanroberta", 0, 0.5, "2026-01-01", task="rte")]  # fmt: skip
    summary = parity.summarize(records)["cpu-small"]
    assert "noise" not in summary["mrpc"] and summary["mrpc"]["difference"] == pytest.approx(0.1)
    assert "difference" not in summary["rte"]
    table = render_parity(records)
    assert "1 seed: no noise estimate" in table and "not run" in table
    assert render_parity([]).startswith("No fine-tuning parity run")


def runs(task, scores, walls, size="cpu", floor=0.5, eval_samples=None, with_outcomes=False):
    """Run records of both sides over seeds 0..n-1: `scores` and `walls` map a side to its values; with outcomes,
    each run's are as many of 2,000 examples right as its score (a fraction) says."""
    return [record(side, seed, score, "2026-01-02", task=task, wall=wall, size=size, floor=floor,
                   eval_samples=eval_samples, outcomes=correct(round(score * 2000)) if with_outcomes else None)
            for side in ("spanroberta", "transformers")
            for seed, (score, wall) in enumerate(zip(scores[side], walls[side]))]  # fmt: skip


def test_the_headline_judges_scores_and_wall_time_by_the_seeds_noise_at_the_largest_size():
    """A row per task of the largest size measured: the sides agree when the score is within noise and
    spanroberta's wall time is at most the wall times' own noise above transformers'; a slower one beyond that noise
    is not met."""
    same = {"spanroberta": [0.80, 0.82, 0.81], "transformers": [0.81, 0.80, 0.82]}
    records = runs("mrpc", same, {"spanroberta": [100, 104, 98], "transformers": [101, 99, 103]})
    records += runs("rte", same, {"spanroberta": [150, 152, 151], "transformers": [101, 102, 100]})
    records += runs("sst2", same, {"spanroberta": [1, 1, 1], "transformers": [1, 1, 1]}, size="cpu-small")
    rows = {row[0]: row for row in parity_tables.headline_rows(records, "PARITY.md")}
    assert set(rows) == {"fine-tuning parity, MRPC f1, cpu", "fine-tuning parity, RTE accuracy, cpu"}
    assert rows["fine-tuning parity, MRPC f1, cpu"][2].startswith("**agrees, no floor verdict**")
    assert rows["fine-tuning parity, RTE accuracy, cpu"][2].startswith("**not met**")
    assert "slower beyond noise" in rows["fine-tuning parity, RTE accuracy, cpu"][2]
    assert "wall 1.50x" in rows["fine-tuning parity, RTE accuracy, cpu"][1]
    assert rows["fine-tuning parity, MRPC f1, cpu"][3] == "[6 run records](PARITY.md)"


WALLS = {"spanroberta": [100, 101, 99], "transformers": [100, 101, 99]}


def test_sides_that_agree_at_the_floor_are_unproven_not_met():
    """RTE agrees within noise and time, but its scores are within the margin of the floors record's floor: 'agrees,
    at the floor', counted as unproven; MRPC, well clear of its floor, is met."""
    records = runs("mrpc", {"spanroberta": [0.90, 0.91, 0.905], "transformers": [0.90, 0.91, 0.905]}, WALLS,
                   with_outcomes=True)
    records += runs("rte", {"spanroberta": [0.52, 0.55, 0.53], "transformers": [0.52, 0.55, 0.53]}, WALLS,
                    floor=0.527, with_outcomes=True)  # fmt: skip
    floors = [floors_record({"MRPC": 81.2, "RTE": 52.7})]
    summary = parity.summarize(records, floors)["cpu"]
    assert summary["mrpc"]["clear_of_floor"] == {"spanroberta": True, "transformers": True}
    assert summary["rte"]["clear_of_floor"] == {"spanroberta": False, "transformers": False}
    assert parity.verdict(summary["mrpc"]) == "met" and parity.verdict(summary["rte"]) == "agrees, at the floor"
    rows = {row[0]: row for row in parity_tables.headline_rows(records, "PARITY.md", floors)}
    assert rows["fine-tuning parity, RTE accuracy, cpu"][2].startswith("**agrees, at the floor**")
    assert "floor 52.7 (a heuristic)" in rows["fine-tuning parity, RTE accuracy, cpu"][1]
    lines = {line.split(" | ")[1]: line for line in findings(records, floors).splitlines()[2:]}
    assert lines["MRPC"].endswith("| yes | clear on both sides | yes | 0 of 6 |")
    assert lines["RTE"].endswith("| yes | **not clear** | yes | 0 of 6 |")


def test_a_score_a_hair_above_the_floor_is_not_clear_of_it():
    """Both sides beat always-"paraphrase" by a point, steadily, but by less than the evaluation-sample noise of
    408 pairs: still at the floor."""
    floors = [floors_record({"MRPC": 81.2})]
    scores = [0.821, 0.822, 0.820]
    records = runs("mrpc", {"spanroberta": scores, "transformers": scores}, WALLS, with_outcomes=True)
    assert parity.verdict(parity.summarize(records, floors)["cpu"]["mrpc"]) == "agrees, at the floor"
    clear = [0.905, 0.906, 0.904]
    records = runs("mrpc", {"spanroberta": clear, "transformers": clear}, WALLS, with_outcomes=True)
    assert parity.verdict(parity.summarize(records, floors)["cpu"]["mrpc"]) == "met"


def test_without_outcomes_the_floor_has_no_verdict_worded_as_the_task_table_words_it():
    floors = [floors_record({"SST-2": 50.9})]
    records = runs("sst2", {"spanroberta": [0.80, 0.82, 0.81], "transformers": [0.80, 0.82, 0.81]}, WALLS)
    entry = parity.summarize(records, floors)["cpu"]["sst2"]
    assert entry["clear_of_floor"] == {"spanroberta": None, "transformers": None}
    assert parity.verdict(entry) == "agrees, no floor verdict"
    row = next(line for line in render_parity(records, floors).splitlines() if "| sst2 |" in line)
    assert "| 50.9 (a heuristic) | [" in row and "-floors.json) | sample noise not recorded: no verdict |" in row
    assert ("| sample noise not recorded: no verdict; the means alone are above it |"
            in findings(records, floors))  # fmt: skip


@pytest.mark.parametrize("scores, clear", [([0.70, 0.705, 0.71], True), ([0.56, 0.57, 0.58], False)])
def test_the_parity_verdict_uses_the_task_tables_floor_and_margin(scores, clear):
    """A task unit's records and one parity side's with the same scores and outcomes on the same evaluated examples
    (RTE's whole dev set: the cpu budget's, and every parity size's): the same floor (the floors record's, not the
    records' own), the same margin, the same verdict and the same words for it."""
    floors = [floors_record({"RTE": 55.0})]
    budget = catalog.SIZES["cpu"].budgets["rte"].as_record()
    units = [{"date": f"2026-01-0{seed + 1}", "path": Path(f"unit-{seed}.json"),
              "settings": {"kind": "unit", "size": "cpu", "task": "rte", "seed": seed, "checkpoint": CHECKPOINT_NAME,
                           "budget": budget},
              "results": {"rows": {"RTE": {"score": 100 * score, "floor": 52.7,
                                           "outcomes": correct(round(score * 2000))}}, "wall_seconds": 1.0}}
             for seed, score in enumerate(scores)]  # fmt: skip
    task_row = row_summaries(units, CHECKPOINT_NAME, "cpu", floors)["RTE"]
    records = runs("rte", {"spanroberta": scores, "transformers": scores}, WALLS, floor=0.527, with_outcomes=True)
    entry = parity.summarize(records, floors)["cpu"]["rte"]
    side = entry["spanroberta"]["verdict_summary"]
    assert side["floor"] == task_row["floor"] == 55.0 and entry["floor"]["record"] is floors[0]
    assert rule.verdict_margin(side) == pytest.approx(rule.verdict_margin(task_row))
    assert parity.side_clear_of_floor(entry, "spanroberta") is rule.row_clear_of_floor(task_row) is clear
    row = next(line for line in render_parity(records, floors).splitlines() if "| rte |" in line)
    assert "| 55.0 (a heuristic) | [" in row and f"-floors.json) | {rule.clear_text(task_row)} |" in row


def test_a_task_no_floors_record_covers_says_so_and_has_no_verdict():
    """SQuAD's 400 evaluation questions at the cpu size: the floors record holds the task benchmark's 1,000, other
    examples, so the row shows the run records' trivial floor and no verdict, even with outcomes and 3 seeds."""
    floors = [floors_record({"SQuAD v1.1": 22.0}, eval_samples=1000)]
    scores = {"spanroberta": [0.60, 0.62, 0.61], "transformers": [0.60, 0.62, 0.61]}
    records = runs("squad", scores, WALLS, floor=None, eval_samples=400, with_outcomes=True)
    for found in records:  # SQuAD's primary is percent already
        found["results"]["primary"] *= 100
    entry = parity.summarize(records, floors)["cpu"]["squad"]
    assert entry["floor"] == {"floor": 0.0, "answer": "trivial", "answers": {}, "record": None}
    assert entry["clear_of_floor"] == {"spanroberta": None, "transformers": None}
    assert parity.verdict(entry) == "agrees, no floor verdict"
    table = render_parity(records, floors)
    row = next(line for line in table.splitlines() if "| squad |" in line)
    assert f"| 0.0 (trivial) | - | {parity.NO_FLOORS_RECORD} |" in row
    assert parity.recordable({"squad": entry})["squad"]["floor"]["record"] is None


def test_the_task_names_are_the_task_benchmarks_row_labels():
    labels = {row.label for task in catalog.TASKS.values() for row in task.rows}
    assert set(parity.TASK_NAMES.values()) <= labels


def test_a_task_whose_sides_differ_is_named_in_the_findings():
    walls = {"spanroberta": [10, 10, 10], "transformers": [10, 10, 10]}
    records = runs("race", {"spanroberta": [0.30, 0.34, 0.32], "transformers": [0.31, 0.33, 0.32]}, walls, floor=0.25)
    assert "| RACE middle | no |" in findings(records)
