"""The verdicts of the task benchmark's rows (tasks/scores.py, its records under benchmarks/results/tasks/): per row,
the records that stand for it, its score over seeds, its floor, its margin, and whether it is clear of the floor and
meets its aim. The tables that show them are tables/task_benchmark.py's; the fine-tuning parity benchmark's
(parity/summary.py) judge its sides' floors by the same rule, floors and wording, from here.

A row's score is the mean over the seeds recorded, with the sample standard deviation. Its verdicts count every
source of noise: a row has one only with at least `MIN_SEEDS` seeds and the evaluation-sample noise of its records
(tables/noise.py, the percentile bootstrap over the evaluated examples of every seed's per-example outcomes). The
margin is the seed term, the half-width of the 95% t-interval of the mean over seeds (Student's t-quantile for n-1
degrees of freedom, which fits 3 seeds as 2 standard errors would not: 4.30, not 2), plus that noise, the mean of
the seeds' 95% bootstrap half-widths: every seed evaluates the same examples, so their sampling noise does not
average out over seeds. A row is clear of its floor when its mean less the margin is above the floor by a tenth of
the way from the floor to a perfect score (`FLOOR_MARGIN`), so that a
model that still gives the constant answer for all but a handful of examples does not count as having learned the
task; it meets its aim when its mean less the margin reaches the aim, and is short otherwise. A row with fewer
seeds, or some of whose seeds' records hold no outcomes, says so in place of a verdict.

A row counts only the records of the catalog's current task and budget for its size (`is_current`): per seed, the
newest of them.

A row's floor comes from the newest floors record (tasks/floors.py) computed on the examples the row's records
evaluated (tasks/preparation.evaluated_examples); where none was, from the unit's record itself, as it was computed
then.
"""

from __future__ import annotations

import json
import math
import statistics

from collections.abc import Iterator, Sequence
from typing import Any

from scipy import stats

from benchmarks.tables.noise import sample_noise
from benchmarks.tasks.catalog import SIZES
from benchmarks.tasks.preparation import evaluated_examples

BENCHMARK = "tasks"
FLOORS_BENCHMARK = "task-floors"
# Seeds a verdict needs: with fewer, the standard error over seeds rests on one or two differences and says little.
MIN_SEEDS = 3
# The confidence of both terms of the margin: the seed term's t-interval and the bootstrap's percentile interval.
CONFIDENCE = 0.95
# How far above its floor a score must be to count as learned: a tenth of the way from the floor to a perfect score.
FLOOR_MARGIN = 0.1


def spread(values: Sequence[float]) -> dict[str, float | int | None]:
    """Values over seeds: their count, mean, sample standard deviation (None for one value), least and greatest."""
    return {"n": len(values), "mean": statistics.fmean(values),
            "sd": statistics.stdev(values) if len(values) > 1 else None, "min": min(values), "max": max(values)}


def row_units(records: Sequence[dict]) -> dict[tuple[str, str, str, int], dict]:
    """The newest record of each (checkpoint, size, row label, seed): a rerun (a changed budget, or a task that now
    gives the row, as RACE's joint task gives both levels' rows) replaces an older one."""
    units = {}
    for record in sorted(records, key=lambda record: record.get("date", "")):
        settings = record["settings"]
        if settings.get("kind") == "unit":
            for label in record["results"]["rows"]:
                units[settings["checkpoint"], settings["size"], label, settings["seed"]] = record
    return units


def is_current(record: dict) -> bool:
    """Whether a unit's record ran the catalog's task and budget for its size (a size the catalog does not hold
    counts as current: no budget of the catalog's can replace its records)."""
    settings = record["settings"]
    if settings["size"] not in SIZES:
        return True
    budgets = SIZES[settings["size"]].budgets
    return settings["task"] in budgets and budgets[settings["task"]].matches(settings.get("budget", {}))


def standing_units(records: Sequence[dict]) -> dict[tuple[str, str, str, int], dict]:
    """The record that stands for each (checkpoint, size, row label, seed): the newest of the catalog's current
    task and budget, which the table shows, else the newest of any, which the table leaves out and lists under it."""
    return {**row_units(records), **row_units([record for record in records if is_current(record)])}


def _units_against_standing(records: Sequence[dict], checkpoint: str,
                            size: str) -> Iterator[tuple[dict, dict[str, tuple[dict, bool]]]]:  # fmt: skip
    """Each unit record of one checkpoint and size, oldest first, with per row the record standing for its seed
    (`standing_units`) and whether this record is older than that one. Records are ordered as `row_units` orders
    them (by date, then as read: records of one second keep their order)."""
    standing = standing_units(records)
    units = sorted((r for r in records if r["settings"].get("kind") == "unit"
                    and (r["settings"]["checkpoint"], r["settings"]["size"]) == (checkpoint, size)),
                   key=lambda record: record.get("date", ""))  # fmt: skip
    order = {id(record): index for index, record in enumerate(units)}
    for record in units:
        stands = {label: standing[checkpoint, size, label, record["settings"]["seed"]]
                  for label in record["results"]["rows"]}  # fmt: skip
        yield record, {label: (other, order[id(record)] < order[id(other)]) for label, other in stands.items()}


def superseded_units(records: Sequence[dict], checkpoint: str, size: str) -> list[tuple[dict, list[str], dict]]:
    """The records older than the record standing for some row and seed, oldest first, each with those rows and the
    record standing for the first of them."""
    replaced = []
    for record, stands in _units_against_standing(records, checkpoint, size):
        labels = [label for label, (_, older) in stands.items() if older]
        if labels:
            replaced.append((record, labels, stands[labels[0]][0]))
    return replaced


def earlier_budget_units(records: Sequence[dict], checkpoint: str, size: str) -> list[tuple[dict, list[str]]]:
    """The records of another task or budget than the catalog's that the table leaves out, oldest first, each with
    those rows: the record standing for a row and seed where none of the catalog's budget is, or one newer than it
    (run from an older checkout, say)."""
    left_out = []
    for record, stands in _units_against_standing(records, checkpoint, size):
        labels = [label for label, (_, older) in stands.items() if not older]
        if labels and not is_current(record):
            left_out.append((record, labels))
    return left_out


def floors_by_examples(floor_records: Sequence[dict]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (row label, evaluated examples as JSON): the floor, the answer that gives it, every answer's score and
    the floors record, from the newest floors record that holds them."""
    floors = {}
    for record in sorted(floor_records, key=lambda record: record.get("date", "")):
        for entry in record["results"]["floors"]:
            examples = json.dumps(entry["evaluated"], sort_keys=True)
            for label, row in entry["rows"].items():
                floors[label, examples] = {**row, "record": record}
    return floors


def examples_floor(label: str, examples: dict[str, Any],
                   floors: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any] | None:  # fmt: skip
    """A row's floor on `examples` (preparation.evaluated_examples) from `floors_by_examples`, or None where no
    floors record holds those examples."""
    return floors.get((label, json.dumps(examples, sort_keys=True)))


def row_floor(label: str, record: dict, floors: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    """A row's floor for a unit's record: the floors record's on the same evaluated examples, else the unit
    record's own (`answer` None where the record names no answer, as records before the floor answers)."""
    found = examples_floor(label, evaluated_examples(record["settings"].get("budget", {})), floors)
    if found is not None:
        return found
    row = record["results"]["rows"][label]
    answers = row.get("floor_answers") or {}
    answer = max(answers, key=lambda name: answers[name]) if answers else None
    return {"floor": row["floor"], "answer": answer, "answers": answers, "record": None}


def row_summaries(records: Sequence[dict], checkpoint: str, size: str,
                  floor_records: Sequence[dict] = ()) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Per row label, from the records of the catalog's current budget (`is_current`): the score's spread over
    seeds, the evaluation-sample noise of each record that holds per-example outcomes (`noise.sample_noise`), the
    floor (`row_floor`: its value, answer and record), the wall seconds' mean, and the records."""
    found: dict[str, list[dict]] = {}
    for (name, size_name, label, _), record in row_units([r for r in records if is_current(r)]).items():
        if (name, size_name) == (checkpoint, size):
            found.setdefault(label, []).append(record)
    floors = floors_by_examples(floor_records)
    summaries = {}
    for label, label_records in found.items():
        floor = row_floor(label, label_records[0], floors)
        summaries[label] = {
            "score": spread([r["results"]["rows"][label]["score"] for r in label_records]),
            "sample_noise": [sample_noise(r["results"]["rows"][label]["outcomes"]) for r in label_records
                             if "outcomes" in r["results"]["rows"][label]],
            "floor": floor["floor"],
            "floor_answer": floor["answer"],
            "floor_record": floor["record"],
            "wall_seconds": statistics.fmean(r["results"]["wall_seconds"] for r in label_records),
            "records": label_records,
        }
    return summaries


def seed_quantile(seeds: int) -> float:
    """Student's t-quantile of a two-sided 95% interval of a mean over `seeds` (n-1 degrees of freedom): 12.71 for
    2 seeds, 4.30 for 3, 2.78 for 5."""
    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, seeds - 1))


def seed_spread(summary: dict[str, Any]) -> float | None:
    """The seed term: the half-width of the 95% t-interval of the mean over seeds, t(n-1) sd / sqrt(n) (None with
    one seed)."""
    score = summary["score"]
    return None if score["sd"] is None else seed_quantile(score["n"]) * score["sd"] / math.sqrt(score["n"])


def evaluation_noise(summary: dict[str, Any]) -> float | None:
    """The sample term: the mean 95% bootstrap half-width over every seed's record; None unless each holds its
    outcomes, so that the term never rests on some of the seeds."""
    noise = summary["sample_noise"]
    return statistics.fmean(noise) if noise and len(noise) == summary["score"]["n"] else None


def no_verdict(summary: dict[str, Any]) -> str | None:
    """Why a row has no verdict (too few seeds, or not every seed's evaluation-sample noise recorded), or None
    where it has one."""
    seeds, sampled = summary["score"]["n"], len(summary["sample_noise"])
    if seeds < MIN_SEEDS:
        return f"{seeds} seed{'s' if seeds > 1 else ''}: no verdict"
    if not sampled:
        return "sample noise not recorded: no verdict"
    if sampled < seeds:
        return f"sample noise of {sampled} of {seeds} seeds: no verdict"
    return None


def verdict_margin(summary: dict[str, Any]) -> float | None:
    """The margin a verdict allows for: the seed spread plus the evaluation-sample noise; None without a verdict."""
    return None if no_verdict(summary) else seed_spread(summary) + evaluation_noise(summary)


def clear_of_floor(summary: dict[str, Any], margin: float) -> bool:
    """Whether the mean less `margin` is at least `FLOOR_MARGIN` of the way from the floor to a perfect score (100)."""
    floor = summary["floor"]
    return summary["score"]["mean"] - margin >= floor + FLOOR_MARGIN * (100 - floor)


def row_clear_of_floor(summary: dict[str, Any]) -> bool | None:
    """The verdict on the floor: whether the row is clear of it beyond the margin; None without a verdict."""
    margin = verdict_margin(summary)
    return None if margin is None else clear_of_floor(summary, margin)


def mean_clear_of_floor(summary: dict[str, Any]) -> bool:
    """The verdict where there is one, else the mean alone read against the floor (no noise allowed for): what
    the notes under the table explain, never shown as a verdict."""
    clear = row_clear_of_floor(summary)
    return clear_of_floor(summary, 0.0) if clear is None else clear


def clear_text(summary: dict[str, Any]) -> str:
    """The verdict on the floor as the tables word it: "yes", "**no**", or why there is none (`no_verdict`)."""
    clear = row_clear_of_floor(summary)
    return no_verdict(summary) if clear is None else "yes" if clear else "**no**"


def aim_of(label: str, size: str) -> float | None:
    """The score (0-100) the size aims at for a row, if it names one (`catalog.Aim`)."""
    aim = SIZES[size].aims.get(label) if size in SIZES else None
    return None if aim is None else aim.score


def short_of_aim(label: str, size: str, summary: dict[str, Any]) -> bool | None:
    """The verdict on the aim: whether the mean less the margin falls below it; None without an aim or a
    verdict."""
    aim, margin = aim_of(label, size), verdict_margin(summary)
    return None if aim is None or margin is None else summary["score"]["mean"] - margin < aim


def mean_short_of_aim(label: str, size: str, summary: dict[str, Any]) -> bool:
    """The verdict where there is one, else the mean alone read against the aim (for the notes)."""
    aim, short = aim_of(label, size), short_of_aim(label, size, summary)
    return short if short is not None else aim is not None and summary["score"]["mean"] < aim
