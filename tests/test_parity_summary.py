"""The fine-tuning parity benchmark's summary and tables (benchmarks/parity/summary.py), from hand-made run records:
the newest record of a run replaces older ones, each side gets its mean and spread over seeds, the difference its
noise, and sides that agree at the floor are told apart from parity met. And the committed PARITY.md's findings are
what the committed records give."""

import math
import statistics

import pytest

from benchmarks.parity import summary as parity


def record(side, seed, primary, date, task="mrpc", kind="run", wall=None, size="cpu-small", floor=0.5):
    return {"date": date, "settings": {"kind": kind, "size": size, "task": task, "side": side, "seed": seed},
            "results": {"primary": primary, "floor": floor, "wall_seconds": 10.0 + seed if wall is None else wall,
                        "train_loss": 0.5,
                        "cpu_seconds": 9.0,
                        "train_seconds": 8.0,
                        "train_steps": 24}}  # fmt: skip


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

    table = parity.render_parity(records)
    row = next(line for line in table.splitlines() if "| mrpc |" in line)
    assert f"{statistics.fmean(ours) * 100:.1f} ± {statistics.stdev(ours) * 100:.1f} (n=3)" in row
    linked = parity.render_parity(records, link=lambda r: f"<{r['settings']['side']}-{r['settings']['seed']}>")
    row = next(line for line in linked.splitlines() if "| mrpc |" in line)
    assert row.count("<spanroberta-") == row.count("<transformers-") == 3


def test_one_seed_gives_no_noise_estimate_and_a_missing_side_says_so():
    records = [record("spanroberta", 0, 0.9, "2026-01-01"), record("transformers", 0, 0.8, "2026-01-01"),
               record("spanroberta", 0, 0.5, "2026-01-01", task="rte")]  # fmt: skip
    summary = parity.summarize(records)["cpu-small"]
    assert "noise" not in summary["mrpc"] and summary["mrpc"]["difference"] == pytest.approx(0.1)
    assert "difference" not in summary["rte"]
    table = parity.render_parity(records)
    assert "1 seed: no noise estimate" in table and "not run" in table
    assert parity.render_parity([]).startswith("No fine-tuning parity run")


def runs(task, scores, walls, size="cpu", floor=0.5):
    """Run records of both sides over seeds 0..n-1: `scores` and `walls` map a side to its values."""
    return [record(side, seed, score, "2026-01-02", task=task, wall=wall, size=size, floor=floor)
            for side in ("spanroberta", "transformers") for seed, (score, wall) in enumerate(zip(scores[side], walls[side]))]  # fmt: skip


def test_the_headline_judges_scores_and_wall_time_by_the_seeds_noise_at_the_largest_size():
    """A row per task of the largest size measured: met when the score is within noise and spanroberta's wall
    time is at most the wall times' own noise above transformers'; a slower one beyond that noise is not met."""
    same = {"spanroberta": [0.80, 0.82, 0.81], "transformers": [0.81, 0.80, 0.82]}
    records = runs("mrpc", same, {"spanroberta": [100, 104, 98], "transformers": [101, 99, 103]})
    records += runs("rte", same, {"spanroberta": [150, 152, 151], "transformers": [101, 102, 100]})
    records += runs("sst2", same, {"spanroberta": [1, 1, 1], "transformers": [1, 1, 1]}, size="cpu-small")
    rows = {row[0]: row for row in parity.headline_rows(records, "PARITY.md")}
    assert set(rows) == {"fine-tuning parity, MRPC f1, cpu", "fine-tuning parity, RTE accuracy, cpu"}
    assert rows["fine-tuning parity, MRPC f1, cpu"][2].startswith("**met**")
    assert rows["fine-tuning parity, RTE accuracy, cpu"][2].startswith("**not met**")
    assert "slower beyond noise" in rows["fine-tuning parity, RTE accuracy, cpu"][2]
    assert "wall 1.50x" in rows["fine-tuning parity, RTE accuracy, cpu"][1]
    assert rows["fine-tuning parity, MRPC f1, cpu"][3] == "[6 run records](PARITY.md)"


def test_sides_that_agree_at_the_floor_are_unproven_not_met():
    """RTE agrees within noise and time, but its scores are within two standard errors of the majority class:
    'agrees, at the floor', counted as unproven; MRPC, well clear of its floor, is met."""
    walls = {"spanroberta": [100, 101, 99], "transformers": [100, 101, 99]}
    records = runs("mrpc", {"spanroberta": [0.80, 0.82, 0.81], "transformers": [0.80, 0.82, 0.81]}, walls)
    records += runs("rte", {"spanroberta": [0.52, 0.55, 0.53], "transformers": [0.52, 0.55, 0.53]}, walls, floor=0.527)
    summary = parity.summarize(records)["cpu"]
    assert summary["mrpc"]["clear_of_floor"] and not summary["rte"]["clear_of_floor"]
    assert parity.verdict(summary["mrpc"]) == "met" and parity.verdict(summary["rte"]) == "agrees, at the floor"
    rows = {row[0]: row for row in parity.headline_rows(records, "PARITY.md")}
    assert rows["fine-tuning parity, RTE accuracy, cpu"][2].startswith("**agrees, at the floor**")
    assert "floor 52.7" in rows["fine-tuning parity, RTE accuracy, cpu"][1]
    sentence = parity.headline_sentence(records)
    assert "met on 1 of 2 tasks (MRPC)" in sentence and "unproven on RTE" in sentence
    findings = parity.render_findings(records)
    assert "Clear of the floor on both sides: MRPC. At the floor: RTE" in findings
    assert "seed by seed: MRPC, RTE." in findings and "0 of the 12 runs recorded the load average" in findings


def test_a_score_a_hair_above_the_floor_is_not_clear_of_it():
    """Both sides beat always-"paraphrase" by a point, steadily: above the floor beyond noise, but less than a tenth
    of the way to a perfect score, so still at the floor."""
    walls = {"spanroberta": [100, 101, 99], "transformers": [100, 101, 99]}
    scores = [0.821, 0.822, 0.820]
    entry = parity.summarize(runs("mrpc", {"spanroberta": scores, "transformers": scores}, walls, floor=0.812))
    assert parity.verdict(entry["cpu"]["mrpc"]) == "agrees, at the floor"
    clear = [0.835, 0.836, 0.834]
    entry = parity.summarize(runs("mrpc", {"spanroberta": clear, "transformers": clear}, walls, floor=0.812))
    assert parity.verdict(entry["cpu"]["mrpc"]) == "met"


def test_squad_records_without_a_floor_take_the_empty_answer_floor():
    scores = {"spanroberta": [30.0, 35.0, 32.0], "transformers": [30.0, 35.0, 32.0]}
    walls = {"spanroberta": [10, 10, 10], "transformers": [10, 10, 10]}
    entry = parity.summarize(runs("squad", scores, walls, floor=None))["cpu"]["squad"]
    assert entry["floor"] == 0.0 and parity.verdict(entry) == "met"


def test_a_task_whose_sides_differ_is_named_in_the_findings():
    walls = {"spanroberta": [10, 10, 10], "transformers": [10, 10, 10]}
    records = runs("race", {"spanroberta": [0.30, 0.34, 0.32], "transformers": [0.31, 0.33, 0.32]}, walls, floor=0.25)
    assert "Different run by run: RACE middle" in parity.render_findings(records)
