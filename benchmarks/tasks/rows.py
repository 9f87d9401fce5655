"""The records that stand for each row of the task benchmark (tasks/scores.py writes them under
benchmarks/results/tasks/), their floors, and each row's summary in benchmarks/statistics.py's terms.

A row counts only the records of the catalog's current task and budget for its size (`is_current`): per seed, the
newest of them. A row's floor comes from the newest floors record (tasks/floors.py) computed on the examples the row's
records evaluated (preparation.evaluated_examples); where none was, from the unit's record itself, as it was
computed then. A row's evaluation-sample noise is the bootstrap of benchmarks/statistics.py over the per-example
outcomes its records hold (tasks/outcomes.py), scored with the project's own scorer, and its paired difference from
the floor (`paired_with_floor`) the paired bootstrap of those outcomes against the floors record's, example by
example, resampling the floors record's groups.
"""

from __future__ import annotations

import functools
import json
import statistics
from collections.abc import Iterator, Sequence
from typing import Any

from benchmarks.statistics import BOOTSTRAP_SEED, RESAMPLES, bootstrap_interval, paired_difference, spread
from benchmarks.tasks.catalog import SIZES
from benchmarks.tasks.outcomes import outcome_count, outcome_score, resampled
from benchmarks.tasks.preparation import evaluated_examples

BENCHMARK = "tasks"
FLOORS_BENCHMARK = "task-floors"


def sample_noise(outcomes: dict[str, Any]) -> float:
    """Half the width of the 95% percentile bootstrap interval of the score of `outcomes` (0-100)."""
    return _half_width(json.dumps(outcomes, sort_keys=True))


@functools.lru_cache(maxsize=None)
def _half_width(outcomes: str) -> float:
    # Keyed by the outcomes' JSON: the tables ask for the same record's noise once per table, headline and page.
    low, high = outcomes_interval(json.loads(outcomes))
    return (high - low) / 2


def outcomes_interval(outcomes: dict[str, Any], resamples: int = RESAMPLES,
                      seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:  # fmt: skip
    """The 95% percentile bootstrap interval (0-100) of the score of `outcomes`, each draw scored with the project's
    own scorer (`outcomes.outcome_score`)."""
    count = outcome_count(outcomes)
    return bootstrap_interval(count, lambda drawn: outcome_score(resampled(outcomes, drawn)), resamples, seed)


def paired_with_floor(seeds: Sequence[dict[str, Any]], floor: dict[str, Any]) -> tuple[float, float, float] | None:
    """The model's score less the floor's on the same examples and its paired 95% interval
    (statistics.paired_difference), from each seed's outcomes and the floor's (a floors record's row, with its
    `outcomes` and `groups`); None where the floor holds no outcomes or a side counts other examples."""
    if "outcomes" not in floor or any(outcome_count(outcomes) != len(floor["groups"]) for outcomes in seeds):
        return None
    key = json.dumps([list(seeds), floor["outcomes"], floor["groups"]], sort_keys=True)
    return _paired(key)


@functools.lru_cache(maxsize=None)
def _paired(key: str) -> tuple[float, float, float]:
    # Keyed by the outcomes' JSON, as `_half_width`.
    seeds, floor, groups = json.loads(key)
    scorers = [lambda drawn, outcomes=outcomes: outcome_score(resampled(outcomes, drawn)) for outcomes in seeds]
    return paired_difference(scorers, lambda drawn: outcome_score(resampled(floor, drawn)), groups)


def aim_of(label: str, size: str) -> float | None:
    """The score (0-100) the size aims at for a row, if it names one (`catalog.Aim`)."""
    aim = SIZES[size].aims.get(label) if size in SIZES else None
    return None if aim is None else aim.score


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
    seeds, the evaluation-sample noise of each record that holds per-example outcomes (`sample_noise`), the
    floor (`row_floor`: its value, answer and record), the paired difference from the floor where every record and
    the floor hold outcomes (`paired_with_floor`), the wall seconds' mean, and the records."""
    found: dict[str, list[dict]] = {}
    for (name, size_name, label, _), record in row_units([r for r in records if is_current(r)]).items():
        if (name, size_name) == (checkpoint, size):
            found.setdefault(label, []).append(record)
    floors = floors_by_examples(floor_records)
    summaries = {}
    for label, label_records in found.items():
        floor = row_floor(label, label_records[0], floors)
        outcomes = [r["results"]["rows"][label]["outcomes"] for r in label_records
                    if "outcomes" in r["results"]["rows"][label]]  # fmt: skip
        summaries[label] = {
            "score": spread([r["results"]["rows"][label]["score"] for r in label_records]),
            "sample_noise": [sample_noise(r["results"]["rows"][label]["outcomes"]) for r in label_records
                             if "outcomes" in r["results"]["rows"][label]],
            "floor": floor["floor"],
            "floor_answer": floor["answer"],
            "floor_record": floor["record"],
            "paired": paired_with_floor(outcomes, floor) if len(outcomes) == len(label_records) else None,
            "wall_seconds": statistics.fmean(r["results"]["wall_seconds"] for r in label_records),
            "records": label_records,
        }
    return summaries
