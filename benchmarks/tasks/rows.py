"""The records that stand for each row of the task benchmark (tasks/scores.py writes them under
benchmarks/results/tasks/), their floors, and each row's summary in benchmarks/statistics.py's terms.

A row counts only the records of the catalog's current task and budget for its size (`is_current`): per seed, the
newest of them, all from one class of machine where one class holds every seed the catalog runs for the row
(`table_units`). A row's floor comes from the newest floors record (tasks/floors.py) computed on the examples the row's
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
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from benchmarks.statistics import BOOTSTRAP_SEED, RESAMPLES, bootstrap_interval, paired_difference, spread
from benchmarks.common import machine_class
from benchmarks.tasks.catalog import SIZES, TASKS
from benchmarks.tasks.outcomes import outcome_count, outcome_score, resampled
from benchmarks.tasks.preparation import Budget, evaluated_examples

BENCHMARK = "tasks"
FLOORS_BENCHMARK = "task-floors"
COVERAGE_BENCHMARK = "task-coverage"  # tasks/coverage.py's records


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


def row_units(records: Sequence[dict], keep: Callable[[dict, str], bool] = lambda record, label: True,
              ) -> dict[tuple[str, str, str, int], dict]:  # fmt: skip
    """The newest record of each (checkpoint, size, row label, seed), of those `keep` keeps for the row: a rerun (a
    changed budget, or a task that now gives the row, as RACE's joint task gives both levels' rows) replaces an older
    one."""
    units = {}
    for record in sorted(records, key=lambda record: record.get("date", "")):
        settings = record["settings"]
        if settings.get("kind") == "unit":
            for label in record["results"]["rows"]:
                if keep(record, label):
                    units[settings["checkpoint"], settings["size"], label, settings["seed"]] = record
    return units


def row_seeds(label: str, size: str) -> tuple[int, ...]:
    """The seeds the catalog runs for a row at a size (`catalog.Size.seeds_of`; a size or row it does not hold: the
    size's, or none)."""
    if size not in SIZES:
        return ()
    task = next((name for name, task in TASKS.items() if any(row.label == label for row in task.rows)), None)
    return SIZES[size].seeds_of(task) if task else SIZES[size].seeds


def row_machine_classes(records: Sequence[dict]) -> dict[tuple[str, str, str], str]:
    """Per (checkpoint, size, row label), the class of machine (common.machine_class) whose newest records of the
    catalog's current budget hold every seed the catalog runs for the row (`row_seeds`), each with the row's
    per-example outcomes (a verdict needs them), the newest such set where several classes hold one; a row that no
    one class completes is absent (its seeds may come from several)."""
    by_class: dict[tuple[str, str, str, str], dict[int, int]] = {}
    units = sorted((r for r in records if is_current(r) and r["settings"].get("kind") == "unit"),
                   key=lambda record: record.get("date", ""))  # as `row_units` orders them
    for position, record in enumerate(units):
        settings = record["settings"]
        for label in record["results"]["rows"]:
            by_class.setdefault((settings["checkpoint"], settings["size"], label, machine_class(record)),
                                {})[settings["seed"]] = position  # fmt: skip
    chosen: dict[tuple[str, str, str], tuple[str, int]] = {}
    for (checkpoint, size, label, name), seeds in by_class.items():
        needed = row_seeds(label, size)
        if needed and all(seed in seeds and "outcomes" in units[seeds[seed]]["results"]["rows"][label]
                          for seed in needed):  # fmt: skip
            newest = max(seeds[seed] for seed in needed)
            if (checkpoint, size, label) not in chosen or newest > chosen[checkpoint, size, label][1]:
                chosen[checkpoint, size, label] = (name, newest)
    return {key: name for key, (name, _) in chosen.items()}


def table_units(records: Sequence[dict]) -> dict[tuple[str, str, str, int], dict]:
    """The records a row shows, per (checkpoint, size, row label, seed): the newest of the catalog's current task
    and budget (`is_current`), all from the row's class of machine where one class holds every seed the row needs
    (`row_machine_classes`): the seeds of a row then differ by their seed alone, not by the machine's rounding.
    A row that no one class completes shows the newest record of each seed, whichever class ran it."""
    classes = row_machine_classes(records)

    def of_the_rows_class(record: dict, label: str) -> bool:
        settings = record["settings"]
        name = classes.get((settings["checkpoint"], settings["size"], label))
        return name is None or machine_class(record) == name

    return row_units([record for record in records if is_current(record)], of_the_rows_class)


def is_current(record: dict) -> bool:
    """Whether a unit's record ran the catalog's task and budget for its size (a size the catalog does not hold
    counts as current: no budget of the catalog's can replace its records)."""
    settings = record["settings"]
    if settings["size"] not in SIZES:
        return True
    budgets = SIZES[settings["size"]].budgets
    return settings["task"] in budgets and budgets[settings["task"]].matches(settings.get("budget", {}))


def standing_units(records: Sequence[dict]) -> dict[tuple[str, str, str, int], dict]:
    """The record that stands for each (checkpoint, size, row label, seed): the one the table shows
    (`table_units`), else the newest of the catalog's current task and budget (of another class of machine than the
    row's), else the newest of any; the table lists those it does not show under it."""
    return {**row_units(records), **row_units([record for record in records if is_current(record)]),
            **table_units(records)}


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


def other_class_units(records: Sequence[dict], checkpoint: str, size: str) -> list[tuple[dict, list[str], str]]:
    """The records of the catalog's current budget that the table leaves out because the row's seeds come from
    another class of machine (`table_units`) and that no record of the row's class replaced (none older than the
    row's record of the same seed), oldest first, each with those rows and the row's class."""
    table, classes = table_units(records), row_machine_classes(records)
    left_out = []
    for record, stands in _units_against_standing(records, checkpoint, size):
        seed = record["settings"]["seed"]
        labels = [label for label, (_, older) in stands.items()
                  if not older and table.get((checkpoint, size, label, seed)) is not record]  # fmt: skip
        if labels and is_current(record):
            left_out.append((record, labels, classes[checkpoint, size, labels[0]]))
    return left_out


def row_coverage(label: str, summary: dict[str, Any], coverage_records: Sequence[dict]) -> dict[str, Any] | None:
    """The share of each evaluated input a row's model reads (tasks/coverage.py: the passage it counts, the mean
    and least share, the inputs), from the newest coverage record of the size and budget of the row's records; None
    where none was measured."""
    settings = summary["records"][0]["settings"]
    budget = Budget.completed(settings.get("budget", {}))
    found = None
    for record in sorted(coverage_records, key=lambda record: record.get("date", "")):
        for entry in record["results"]["coverage"]:
            if entry["size"] == settings["size"] and Budget.completed(entry["budget"]) == budget:
                found = entry["rows"].get(label, found)
    return found


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
    """Per row label, from the records the table shows (`table_units`): the score's spread over seeds, the
    evaluation-sample noise of each record that holds per-example outcomes (`sample_noise`), the floor (`row_floor`:
    its value, answer, record and per-example outcomes where recorded), the paired difference from the floor where
    every record and the floor hold outcomes (`paired_with_floor`), the wall seconds' mean, and the records."""
    found: dict[str, list[dict]] = {}
    for (name, size_name, label, _), record in table_units(records).items():
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
            "floor_outcomes": floor.get("outcomes"),
            "paired": paired_with_floor(outcomes, floor) if len(outcomes) == len(label_records) else None,
            "wall_seconds": statistics.fmean(r["results"]["wall_seconds"] for r in label_records),
            "records": label_records,
        }
    return summaries
