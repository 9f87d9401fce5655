"""benchmarks/bench_finetuning_parity.py's summary and table, from hand-made run records: the newest record of a
run replaces older ones, each side gets its mean and spread over seeds, and the difference its noise."""

import math
import statistics
import sys

import pytest

from conftest import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))

import bench_finetuning_parity as parity  # noqa: E402


def record(side, seed, primary, date, task="mrpc", kind="run", wall=None, size="cpu-small"):
    return {"date": date, "settings": {"kind": kind, "size": size, "task": task, "side": side, "seed": seed},
            "results": {"primary": primary, "floor": 0.8, "wall_seconds": 10.0 + seed if wall is None else wall,
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


def runs(task, scores, walls, size="cpu"):
    """Run records of both sides over seeds 0..n-1: `scores` and `walls` map a side to its values."""
    return [record(side, seed, score, "2026-01-02", task=task, wall=wall, size=size)
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
