"""The task benchmark's tables, declared (tasks/scores.py writes its records under benchmarks/results/tasks/): per
checkpoint and size, every task row of the catalog with its verdicts (benchmarks/statistics.py's rule) and the
records it leaves out (replaced by a rerun, or of an earlier task, budget or split than the catalog's); each docs
page's rows; and the same-seed reruns of task units beside the committed records they repeat.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from benchmarks.common import CHECKPOINT_NAME
from benchmarks.common import machine_class, machine_kind, same_kind_of_machine
from benchmarks.statistics import (CLEAR_HEADER, MIN_SEEDS, clear_text, evaluation_noise, row_clear_of_floor,
                                   seed_spread)  # fmt: skip
from benchmarks.statistics import short_of_aim as short_of
from benchmarks.tables.render import Column, Context, Table, fmt_date, fmt_number, none_yet
from benchmarks.tasks.catalog import SIZES, TASKS, Row
from benchmarks.tasks.preparation import Budget
from benchmarks.tasks.rows import (BENCHMARK, COVERAGE_BENCHMARK, FLOORS_BENCHMARK, aim_of, earlier_budget_units,
                                   other_class_units, row_coverage, row_summaries, row_units,
                                   superseded_units)  # fmt: skip
from spanroberta.records import record_commit

COMMAND = "python -m benchmarks.tasks.scores --size cpu"
SIZE_ORDER = ("gpu", "cpu", "toy")  # the fullest size first


def short_of_aim(label: str, size: str, summary: dict[str, Any]) -> bool | None:
    """The verdict on the row's aim (statistics.short_of_aim); None without an aim or a verdict."""
    return short_of(aim_of(label, size), summary)


def fmt_floor(summary: dict[str, Any]) -> str:
    """The floor and the answer that gives it, where known."""
    answer = summary["floor_answer"]
    return f"{summary['floor']:.1f}" + (f" ({answer})" if answer else "")


def fmt_margin(summary: dict[str, Any]) -> str:
    """The seed term and the evaluation-sample noise, as `seeds + sample`; the sample term names how many seeds'
    outcomes are recorded where some lack them."""
    spread_text, noise = seed_spread(summary), evaluation_noise(summary)
    sampled, seeds = len(summary["sample_noise"]), summary["score"]["n"]
    noise_text = (f"{noise:.1f}" if noise is not None else "not recorded" if not sampled
                  else f"{sampled} of {seeds} seeds recorded")  # fmt: skip
    return f"{'-' if spread_text is None else f'{spread_text:.1f}'} + {noise_text}"


def fmt_score(summary: dict[str, Any]) -> str:
    """The mean, its spread and seeds."""
    score = summary["score"]
    spread_text = f" ± {score['sd']:.1f}" if score["sd"] is not None else ""
    seeds = "1 seed" if score["n"] == 1 else f"{score['n']} seeds"
    return f"**{score['mean']:.1f}**{spread_text} ({seeds})"


def fmt_aim(row: Row, size: str, summary: dict[str, Any] | None) -> str:
    """The score the size aims at, the verdict on it where the row has one, and the aim's split, date and what had
    been seen when it was fixed (`catalog.Aim.provenance`)."""
    aim = aim_of(row.label, size)
    if aim is None:
        return "-"
    provenance = SIZES[size].aims[row.label].provenance
    if summary is None:
        return f"{aim:g} ({provenance})"
    short = short_of_aim(row.label, size, summary)
    return f"{aim:g} ({'no verdict' if short is None else 'short' if short else 'met'}; {provenance})"


class Curve(NamedTuple):
    """A seed's logged training loss: its first and last values, and its relative change over the last quarter of
    training (negative: it fell)."""

    seed: int
    first: float
    last: float
    change: float


def curves(records: Sequence[dict]) -> list[Curve]:
    """The curve of every seed whose record holds a logged training loss (older records hold none), in seed order."""
    found = []
    for record in sorted(records, key=lambda record: record["settings"]["seed"]):
        losses = record["results"].get("loss_curve")
        if losses:
            start = next(loss for epoch, loss in losses if epoch >= 0.75 * losses[-1][0])
            change = (losses[-1][1] - start) / start if start else 0.0
            found.append(Curve(record["settings"]["seed"], losses[0][1], losses[-1][1], change))
    return found


def _fmt_change(change: float) -> str:
    return f"{round(100 * change) or 0:+d}%"  # a flat curve reads "+0%", never "-0%"


def fmt_curve(records: Sequence[dict]) -> str:
    """The loss column: the curve of the lowest seed that has one, naming that seed."""
    found = curves(records)
    if not found:
        return "not recorded"
    seed, first, last, change = found[0]
    return f"seed {seed}: {first:.2f} → {last:.2f}, last quarter {_fmt_change(change)}"


def fmt_coverage(label: str, summary: dict[str, Any], context: Context) -> str:
    """The share of each evaluated input the model reads (rows.row_coverage): its mean and least over the inputs."""
    found = row_coverage(label, summary, context.records(COVERAGE_BENCHMARK))
    if found is None:
        return "not measured"
    return f"{100 * found['mean']:.0f}% of the {found['passage']} (least {100 * found['least']:.0f}%)"


# The facts a row not clear of its floor is told by, each from fields of its records, with the thresholds they are
# read at:
# - the model reads less than this share of the passage on average (tasks/coverage.py): a tenth or more of what the
#   floor's answer may read is never seen;
PARTLY_READ = 0.9
# - the loss fell by at least this much over the last quarter of training (`curves`): the curves of the records
#   that levelled off moved between -3% and +4% over their last quarter, so a smaller move is not read as a fall;
STILL_FALLING = -0.05
# - the last logged loss is within this share of the first: the model's loss barely left where it began;
BARELY_MOVED = 0.05
# - the model's outcome equals the floor's answer's on at least this share of the examples, mean over seeds (the
#   outcomes' per-example predictions, or per-example scores where a row keeps those): it mostly answers as the
#   floor's answer does.
AS_THE_FLOOR = 0.9


def same_as_floor(label: str, summary: dict[str, Any]) -> float | None:
    """The share of the evaluated examples whose outcome equals the floor's answer's, mean over the seeds; None
    where the floor's or a seed's per-example predictions or scores are not recorded (coreference's counts)."""
    floor = summary["floor_outcomes"]
    key = next((key for key in ("predictions", "values") if key in (floor or {})), None)
    seeds = [record["results"]["rows"][label].get("outcomes", {}) for record in summary["records"]]
    if key is None or any(key not in outcomes for outcomes in seeds):
        return None
    theirs = np.asarray(floor[key])
    return statistics.fmean(float(np.mean(np.all((np.asarray(outcomes[key]) == theirs).reshape(len(theirs), -1),
                                                 axis=1))) for outcomes in seeds)  # fmt: skip


def shortfall_facts(label: str, summary: dict[str, Any], context: Context) -> list[str]:
    """What the records of a row say beside its verdict, by the rules above; empty where none applies."""
    facts = []
    read = row_coverage(label, summary, context.records(COVERAGE_BENCHMARK))
    if read is not None and read["mean"] < PARTLY_READ:
        facts.append(f"reads {100 * read['mean']:.0f}% of the {read['passage']} on average "
                     f"(least {100 * read['least']:.0f}%)")  # fmt: skip
    found = curves(summary["records"])
    falling = [curve.seed for curve in found if curve.change <= STILL_FALLING]
    if falling:
        facts.append(f"training loss still falling over the last quarter in {len(falling)} of {len(found)} seeds "
                     f"({', '.join(f'seed {c.seed} {_fmt_change(c.change)}' for c in found if c.seed in falling)})")
    if found and all(curve.last >= (1 - BARELY_MOVED) * curve.first for curve in found):
        facts.append(f"training loss within {100 * BARELY_MOVED:.0f}% of its first value in every seed "
                     f"(seed {found[0].seed}: {found[0].first:.2f} → {found[0].last:.2f})")
    same = same_as_floor(label, summary)
    if same is not None and same >= AS_THE_FLOOR:
        facts.append(f"the same outcome as the floor's answer ({summary['floor_answer']}) on {100 * same:.0f}% of "
                     "the examples, mean over seeds")
    return facts


def shortfalls_table(records: Sequence[dict], checkpoint: str, size: str) -> Table:
    """Per row not clear of its floor, what its records show (`shortfall_facts`), in one line."""

    def rows(context: Context) -> list[tuple[str, str]]:
        summaries = row_summaries(records, checkpoint, size, context.records(FLOORS_BENCHMARK))
        return [(row.label, "; ".join(shortfall_facts(row.label, summaries[row.label], context))
                 or "none of the rules fits its records") for task in TASKS.values() for row in task.rows
                if row.label in summaries and row_clear_of_floor(summaries[row.label]) is False]  # fmt: skip

    return Table(rows, [Column.of("task", lambda row: row[0]),
                        Column.of("what its records show", lambda row: row[1])], "")  # fmt: skip


def budget_change(old: dict, new: dict) -> str:
    """What a rerun changed in a unit's task and budget, e.g. `task: race_high -> race` or
    `options.entity_markers: - -> typed_entity_markers`, or, with the same budget, in its packages, e.g.
    `tokenizers 0.23.2 -> 0.23.3`; and the class of machine where it changed (common.machine_class)."""
    changed = _task_and_budget_differences(old, new)
    machines = _differences({"machine": machine_class(old)}, {"machine": machine_class(new)}, ": ")
    if changed:
        return "; ".join(changed + machines)
    packages = _differences(old.get("packages", {}), new.get("packages", {}), " ")
    return "; ".join(["the same budget" + (f" and other packages ({'; '.join(packages)})" if packages else ""),
                      *machines])  # fmt: skip


def _task_and_budget_differences(old: dict, new: dict) -> list[str]:
    """How two units' tasks and budgets differ; a field a record predates counts at its default, as when matching
    budgets."""
    tasks = _differences({"task": old["settings"]["task"]}, {"task": new["settings"]["task"]}, ": ")
    return tasks + _differences(*(_flat(Budget.completed(r["settings"].get("budget", {}))) for r in (old, new)), ": ")


def _differences(old: dict[str, Any], new: dict[str, Any], separator: str) -> list[str]:
    """`key{separator}old -> new` for each key whose value differs, in key order."""
    return [f"{key}{separator}{_shown(old.get(key))} -> {_shown(new.get(key))}"
            for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]  # fmt: skip


def _shown(value: Any) -> str:
    return "-" if value is None else str(value)


def _flat(budget: dict, prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in budget.items():
        flat.update(_flat(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
    return flat


def catalog_change(record: dict) -> str:
    """What the catalog changed since a unit's record: its task, or its budget's fields, e.g. `epochs: 2 -> 1`."""
    task, budgets = record["settings"]["task"], SIZES[record["settings"]["size"]].budgets
    if task not in budgets:
        return f"task {task} is gone (its rows are another task's)"
    recorded = Budget.completed(record["settings"].get("budget", {}))
    return "; ".join(_differences(_flat(recorded), _flat(budgets[task].as_record()), ": "))


def fmt_published(row: Row) -> str:
    published = row.published
    return "-" if published is None else f"{published.score:.1f}, {published.model}; {published.source}"


def _same_scores(old: dict, new: dict, labels: Sequence[str]) -> bool:
    """Whether the rerun ran the same task and budget and scored what the older record did on every row of `labels`
    (`new` stands for the first of them: a row it does not score counts as scored otherwise)."""
    return not _task_and_budget_differences(old, new) and all(
        old["results"]["rows"][label]["score"] == new["results"]["rows"].get(label, {}).get("score")
        for label in labels)  # fmt: skip


def fmt_machines(records: Sequence[dict]) -> str:
    """The classes of machine a row's seeds ran on (common.machine_class), each with its seeds where more than
    one: their spread may then hold the machines' rounding as well as the seeds'."""
    seeds: dict[str, list[int]] = {}
    for record in sorted(records, key=lambda record: record["settings"]["seed"]):
        seeds.setdefault(machine_class(record), []).append(record["settings"]["seed"])
    if len(seeds) == 1:
        return next(iter(seeds))
    classes = "; ".join(f"{name}: seed{'s' if len(found) > 1 else ''} {', '.join(map(str, found))}"
                        for name, found in seeds.items())  # fmt: skip
    return f"seeds from {len(seeds)} machine classes: {classes}"


def _judged(cell: Callable[[dict[str, Any]], str]) -> Callable[[tuple], str]:
    """A cell of a row that has run: the row is (task row, summary or None, size); "-" where it has not run."""
    return lambda row: "-" if row[1] is None else cell(row[1])


def _floor_from(row: tuple, context: Context) -> str:
    if row[1] is None:
        return "-"
    record = row[1]["floor_record"]
    return "its unit record's" if record is None else context.link(record)


SIZE_COLUMNS = [
    Column.of("task", lambda row: row[0].label), Column.of("metric", lambda row: row[0].metric_name),
    Column.of("score (0-100), mean ± sd", lambda row: "not yet run" if row[1] is None else fmt_score(row[1])),
    Column("input read", lambda row, context: "-" if row[1] is None else fmt_coverage(row[0].label, row[1], context)),
    Column.of("margin: seeds + sample", _judged(fmt_margin)),
    Column.of("floor", _judged(fmt_floor)),
    Column.of(CLEAR_HEADER, _judged(clear_text)),
    Column.of("aim", lambda row: fmt_aim(row[0], row[2], row[1])),
    Column.of("wall s per seed", _judged(lambda summary: fmt_number(summary["wall_seconds"]))),
    Column.of("training loss, first → last", _judged(lambda summary: fmt_curve(summary["records"]))),
    Column.of("published, for context", lambda row: fmt_published(row[0])),
    Column.of("machine", _judged(lambda summary: fmt_machines(summary["records"]))),
    Column("floor from", _floor_from),
    Column("records", lambda row, context: "-" if row[1] is None else context.links(row[1]["records"])),
]  # fmt: skip


def size_table(records: Sequence[dict], checkpoint: str, size: str) -> Table:
    """A checkpoint's rows at a size: every row of the catalog, with its summary (tasks/rows.row_summaries)."""

    def rows(context: Context) -> list[tuple[Row, dict[str, Any] | None, str]]:
        summaries = row_summaries(records, checkpoint, size, context.records(FLOORS_BENCHMARK))
        return [(row, summaries.get(row.label), size) for task in TASKS.values() for row in task.rows]

    return Table(rows, SIZE_COLUMNS)


def _scores(record: dict, labels: Sequence[str]) -> str:
    return ", ".join(f"{label} {record['results']['rows'][label]['score']:.1f}" for label in labels)


LEFT_OUT_COLUMNS = [
    Column.of("task", lambda row: row[0]["settings"]["task"]),
    Column.of("seed", lambda row: str(row[0]["settings"]["seed"])),
    Column.of("scores", lambda row: _scores(row[0], row[1])),
    Column("record", lambda row, context: context.link(row[0])),
    Column("replaced by", lambda row, context: "-" if row[2] is None else context.link(row[2])),
    Column.of("what changed", lambda row: row[3]),
    Column.of("same scores", lambda row: "-" if row[2] is None
              else "yes" if _same_scores(row[0], row[2], row[1]) else "no"),
]  # fmt: skip


def left_out_table(records: Sequence[dict], checkpoint: str, size: str) -> Table:
    """The records the size table does not show, each with why: those a rerun replaced (with the rerun standing
    for the first of their rows, and what it changed), those of an earlier task, budget or split than the catalog's
    (replaced by none yet), and those of another class of machine than the row's seeds (rows.table_units)."""
    rows = [*((record, labels, rerun, budget_change(record, rerun))
              for record, labels, rerun in superseded_units(records, checkpoint, size)),
            *((record, labels, None, f"the catalog's since: {catalog_change(record)}")
              for record, labels in earlier_budget_units(records, checkpoint, size)),
            *((record, labels, None, f"another class of machine ({machine_class(record)}) than the row's seeds "
                                     f"({name})")
              for record, labels, name in other_class_units(records, checkpoint, size))]  # fmt: skip
    return Table(lambda context: rows, LEFT_OUT_COLUMNS, "")


def details_table(records: Sequence[dict], checkpoint: str, size: str) -> Table:
    """What each seed's record of a row says beyond its score, for the rows whose catalog entry reads it
    (`Row.note`: SQuAD v2.0's answerable and unanswerable questions apart, GAP's precision, recall and answers)."""

    def rows(context: Context) -> list[tuple[str, int, str]]:
        summaries = row_summaries(records, checkpoint, size, context.records(FLOORS_BENCHMARK))
        found = [(row.label, record["settings"]["seed"], row.note(record["results"]))
                 for task in TASKS.values() for row in task.rows if row.note and row.label in summaries
                 for record in summaries[row.label]["records"]]  # fmt: skip
        return [entry for entry in found if entry[2]]

    return Table(rows, [Column.of("task", lambda row: row[0]), Column.of("seed", lambda row: str(row[1])),
                        Column.of("what the record says", lambda row: row[2])], "")  # fmt: skip


def groups(records: Sequence[dict]) -> list[tuple[str, str]]:
    """The (checkpoint, size) pairs recorded, the real checkpoint first, then the fullest size first."""
    found = {(checkpoint, size) for checkpoint, size, _, _ in row_units(records)}
    return sorted(found, key=lambda pair: (pair[0] != CHECKPOINT_NAME, pair[0], SIZE_ORDER.index(pair[1])))


def render_task_benchmark(context: Context) -> str:
    """benchmarks/TASKS.md: per checkpoint and size recorded, its table and the records it leaves out."""
    records = context.records(BENCHMARK)
    if not row_units(records):
        return none_yet(COMMAND)
    parts = []
    for checkpoint, size in groups(records):
        details = details_table(records, checkpoint, size).render(context)
        left_out = left_out_table(records, checkpoint, size).render(context)
        short = shortfalls_table(records, checkpoint, size).render(context)
        parts.append(f"**{checkpoint}**, size `{size}`:\n\n" + size_table(records, checkpoint, size).render(context)
                     + (f"\n\nRows not clear of their floor, size `{size}`, from their records:\n\n{short}"
                        if short else "")
                     + (f"\n\nPer seed, size `{size}`:\n\n{details}" if details else "")
                     + (f"\n\nRecords not in the table, size `{size}`:\n\n{left_out}" if left_out else ""))
    return "\n\n".join(parts)


def _score_rows(context: Context) -> list[tuple[Row, dict[str, Any] | None, str | None]]:
    """A docs page's rows, each at the fullest size whose records have the seeds a verdict needs, else at the
    fullest size recorded: a figure of fewer seeds never stands where a row with enough of them exists."""
    records, floors = context.records(BENCHMARK), context.records(FLOORS_BENCHMARK)
    found = []
    for row in (row for task in TASKS.values() for row in task.rows if row.docs == context.markdown.name):
        sized = [(size, summary) for size in SIZE_ORDER[:2]
                 if (summary := row_summaries(records, CHECKPOINT_NAME, size, floors).get(row.label)) is not None]
        # min keeps the first of equals: the fullest size with enough seeds, else the fullest size.
        size, summary = min(sized, key=lambda pair: pair[1]["score"]["n"] < MIN_SEEDS) if sized else (None, None)
        found.append((row, summary, size))
    return found


TASK_SCORES = Table(_score_rows, [
    Column.of("task", lambda row: row[0].label), Column.of("metric", lambda row: row[0].metric_name),
    Column.of("score (0-100), mean ± sd", lambda row: "not yet run" if row[1] is None else fmt_score(row[1])),
    Column.of("floor", _judged(lambda summary: f"{summary['floor']:.1f}")),
    Column.of(CLEAR_HEADER, _judged(clear_text)),
    Column.of("size", lambda row: "-" if row[2] is None else f"`{row[2]}`"),
], "No task of this page is benchmarked.")  # fmt: skip


# Same seed, same score? Task-benchmark units run again (records under benchmarks/results/same-seed/, written by
# the task benchmark of the commit each reran, with `--records_dir`), each set beside the committed record of the same
# unit (size, task, seed, budget) measured from the same commit, with the kind of machine each ran on.
#
# What the reruns can tell apart (benchmarks/RESULTS.md reads them by hand beside the table):
# - a rerun on the same kind of machine as its commit's record that scores exactly what the record did shows the unit
#   deterministic there; one that scores otherwise shows it is not;
# - a record from another kind of machine (another vector instruction set: the BLAS and oneDNN kernels, and so the
#   rounding, differ) can score otherwise for that reason alone;
# - two reruns of one commit on one kind of machine that score otherwise show the unit not deterministic there;
# - reruns of two commits on one kind of machine that score exactly the same show that the code between those
#   commits did not move the score; when each reproduces its own commit's record and they differ, the code did.
SAME_SEED = "same-seed"
RERUN_COMMAND = ("git worktree add <folder> <commit>, then in it the task benchmark's command of the committed "
                 "record (`--tasks <task> --seeds <seed>`) with `--records_dir` outside the repository")  # fmt: skip


def _unit(record: dict[str, Any]) -> tuple:
    settings = record["settings"]
    return settings["size"], settings["task"], settings["seed"]


def _twin(rerun: dict[str, Any], committed: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The committed record of the rerun's unit and budget, measured from the rerun's commit (the newest such)."""
    twins = [record for record in committed
             if _unit(record) == _unit(rerun) and record["settings"]["budget"] == rerun["settings"]["budget"]
             and record_commit(record) == record_commit(rerun)]  # fmt: skip
    return twins[-1] if twins else None


def _row_scores(record: dict[str, Any]) -> dict[str, float]:
    return {row: entry["score"] for row, entry in record["results"]["rows"].items()}


def _rerun_rows(context: Context) -> list[tuple[dict[str, Any], dict[str, Any] | None, str, float]]:
    """Per rerun and row: the rerun, its commit's committed record (None without one), the row and its score."""
    committed = [record for record in context.records(BENCHMARK) if record["settings"].get("kind") == "unit"]
    return [(rerun, twin, row, score) for rerun in context.records(SAME_SEED)
            for twin in (_twin(rerun, committed),) for row, score in _row_scores(rerun).items()]  # fmt: skip


def _before(row: tuple, context: Context) -> str:
    rerun, twin, label, _ = row
    return "no record of this commit" if twin is None else f"{_row_scores(twin).get(label):.2f} ({context.link(twin)})"


SAME_SEED_TABLE = Table(_rerun_rows, [
    Column.of("row", lambda row: row[2]), Column.of("seed", lambda row: str(_unit(row[0])[2])),
    Column.of("size", lambda row: _unit(row[0])[0]),
    Column.of("rerun: date (UTC), commit", lambda row: fmt_date(row[0])),
    Column.of("its machine", lambda row: machine_kind(row[0])), Column.of("rerun's score", lambda row: f"{row[3]:.2f}"),
    Column("its commit's record", _before),
    Column.of("that record's machine", lambda row: "-" if row[1] is None else machine_kind(row[1])),
    Column.of("same kind of machine", lambda row: "-" if row[1] is None
              else "yes" if same_kind_of_machine(row[0], row[1]) else "no"),
    Column.of("the same score", lambda row: "**yes**" if row[1] and _row_scores(row[1]).get(row[2]) == row[3]
              else "**no**"),
    Column("rerun record", lambda row, context: context.link(row[0])),
], f"No rerun of a task unit is committed yet ({RERUN_COMMAND}).")  # fmt: skip


REGIONS: dict[str, Callable[[Context], str]] = {
    "task-benchmark": render_task_benchmark,
    "task-scores": TASK_SCORES.render,
    "same-seed": SAME_SEED_TABLE.render,
}
