"""The task benchmark's tables (tasks/scores.py, its records under benchmarks/results/tasks/): the table of every task
in benchmarks/TASKS.md, the README's sentence on it, and each docs page's line of the scores of its tasks, with the
verdicts of benchmarks/statistics.py.

Under a table are listed the records that ran an earlier task, budget or split and stand for a seed the table has no
record of (or are newer than the one it shows), and the records a rerun replaced.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from benchmarks.common import CHECKPOINT_NAME
from benchmarks.tables.render import Context, fmt_number, markdown_table, none_yet
from benchmarks.tables.same_seed import machine_class
from benchmarks.statistics import (
    MIN_SEEDS,
    clear_of_floor,
    clear_text,
    evaluation_noise,
    no_verdict,
    row_clear_of_floor,
    seed_spread,
    short_of_aim as short_of,
)
from benchmarks.tasks.rows import (
    BENCHMARK,
    FLOORS_BENCHMARK,
    aim_of,
    earlier_budget_units,
    row_summaries,
    row_units,
    superseded_units,
)
from benchmarks.tasks.catalog import SIZES, TASKS, Row
from benchmarks.tasks.preparation import Budget

COMMAND = "python -m benchmarks.tasks.scores --size cpu"
SIZE_ORDER = ("gpu", "cpu", "toy")  # the fullest size first


def short_of_aim(label: str, size: str, summary: dict[str, Any]) -> bool | None:
    """The verdict on the row's aim (statistics.short_of_aim); None without an aim or a verdict."""
    return short_of(aim_of(label, size), summary)


def mean_clear_of_floor(summary: dict[str, Any]) -> bool:
    """The verdict where there is one, else the mean alone read against the floor (no noise allowed for): what
    the notes under the table explain, never shown as a verdict."""
    clear = row_clear_of_floor(summary)
    return clear_of_floor(summary, 0.0) if clear is None else clear


def mean_short_of_aim(label: str, size: str, summary: dict[str, Any]) -> bool:
    """The verdict where there is one, else the mean alone read against the aim (for the notes)."""
    aim, short = aim_of(label, size), short_of_aim(label, size, summary)
    return short if short is not None else aim is not None and summary["score"]["mean"] < aim


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
    """The score the size aims at, and the verdict on it where the row has one."""
    aim = aim_of(row.label, size)
    if aim is None:
        return "-"
    if summary is None:
        return f"{aim:g}"
    short = short_of_aim(row.label, size, summary)
    return f"{aim:g} ({'no verdict' if short is None else 'short' if short else 'met'})"


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


# How the shortfall notes read a loss curve: a loss that moved less than this share from its first value did not
# start learning; one that fell more than this share over the last quarter was still learning when it stopped, and
# one that rose more than it had turned back up.
FLAT_CURVE, STILL_FALLING = 0.02, 0.03


def _curve_reading(curve: Curve) -> str:
    if abs(curve.last - curve.first) < FLAT_CURVE * curve.first:
        return "flat"
    if curve.change < -STILL_FALLING:
        return "falling"
    return "rising" if curve.change > STILL_FALLING else "levelled"


_READINGS = {"flat": "never moved", "falling": "was still falling", "levelled": "had levelled off", "rising": "rose"}
_MIXED_READINGS = {"flat": "flat", "falling": "still falling", "levelled": "levelled off", "rising": "rising"}


def _fmt_values(reading: str, found: Sequence[Curve], named: bool) -> str:
    """The curves' values behind a reading, in seed order, each with its seed where `named`."""
    values = [f"{c.first:.2f} to {c.last:.2f}" if reading == "flat" else _fmt_change(c.change) for c in found]
    return "; ".join(f"seed {c.seed}: {value}" for c, value in zip(found, values)) if named else ", ".join(values)


def read_shortfall(summary: dict[str, Any], learned: Sequence[str] = ()) -> str:
    """What the loss curves of a row short of its aim or its floor say, every seed's that has one; `learned` names
    the other rows of the same units that are clear of their floor, which share the curves."""
    found = curves(summary["records"])
    if not found:
        return "its records hold no loss curve"
    named = len(found) > 1
    readings: dict[str, list[Curve]] = {}
    for curve in found:
        readings.setdefault(_curve_reading(curve), []).append(curve)
    if len(readings) > 1:  # the seeds disagree: each reading with its seeds, and no next step drawn from them
        parts = [f"{_MIXED_READINGS[reading]} in {_fmt_seeds([c.seed for c in ran])} "
                 f"({_fmt_values(reading, ran, named=False)})" for reading, ran in readings.items()]  # fmt: skip
        return f"the seeds' training losses disagree over the last quarter: {', '.join(parts)}"
    ((reading, _),) = readings.items()
    values = _fmt_values(reading, found, named)
    if reading == "flat":
        curve_read, learning = (
            (f"the unit's training loss, shared with {' and '.join(learned)} (above its floor), moved little",
             "learned too little") if learned else ("the training loss never moved", "did not start learning"))
        return (f"{curve_read} ({values}): the model {learning} within the budget's steps, so a longer budget is the "
                "next thing to measure")  # fmt: skip
    if reading == "falling":
        return (f"the training loss was still falling over the last quarter ({values}): more epochs are the next "
                "thing to measure")  # fmt: skip
    return f"the training loss {_READINGS[reading]} over the last quarter ({values})"


def budget_change(old: dict, new: dict) -> str:
    """What a rerun changed in a unit's task and budget, e.g. `task: race_high -> race` or
    `options.entity_markers: - -> typed_entity_markers`, or, with the same budget, in its packages, e.g.
    `tokenizers 0.23.2 -> 0.23.3`."""
    changed = _task_and_budget_differences(old, new)
    if changed:
        return "; ".join(changed)
    packages = _differences(old.get("packages", {}), new.get("packages", {}), " ")
    return "the same budget" + (f" and other packages ({'; '.join(packages)})" if packages else "")


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


def _unit_line(context: Context, record: dict, labels: Sequence[str], reason: str) -> str:
    """A unit's record listed under the table: its task, seed, the scores of `labels`, its link and why it is
    listed."""
    scores = ", ".join(f"{label} {record['results']['rows'][label]['score']:.1f}" for label in labels)
    return (f"- {record['settings']['task']}, seed {record['settings']['seed']}: {scores} ({context.link(record)}); "
            f"{reason}.")


def _superseded_lines(context: Context, records: Sequence[dict], checkpoint: str, size: str) -> str:
    lines = [_unit_line(context, old, labels, f"rerun with {budget_change(old, new)}{_same_scores(old, new, labels)}")
             for old, labels, new in superseded_units(records, checkpoint, size)]  # fmt: skip
    return ("\n\nReplaced by a rerun (the table shows the rerun, or lists it below where it ran an earlier budget):"
            "\n\n" + "\n".join(lines)) if lines else ""


def _same_scores(old: dict, new: dict, labels: Sequence[str]) -> str:
    """The clause ", which scored the same to every digit" where the rerun ran the same task and budget and scored
    what the older record did on every row of `labels` (`new` stands for the first of them: a row it does not score
    counts as scored otherwise)."""
    same = not _task_and_budget_differences(old, new) and all(
        old["results"]["rows"][label]["score"] == new["results"]["rows"].get(label, {}).get("score")
        for label in labels)  # fmt: skip
    return ", which scored the same to every digit" if same else ""


def _earlier_budget_lines(context: Context, records: Sequence[dict], checkpoint: str, size: str) -> str:
    lines = [_unit_line(context, record, labels, f"the catalog's since: {catalog_change(record)}")
             for record, labels in earlier_budget_units(records, checkpoint, size)]  # fmt: skip
    return ("\n\nLeft out of the table, records that ran an earlier task, budget or split, until a rerun with the "
            "catalog's replaces them:\n\n" + "\n".join(lines)) if lines else ""


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


def _size_table(context: Context, records: Sequence[dict], checkpoint: str, size: str) -> str:
    summaries = row_summaries(records, checkpoint, size, context.records(FLOORS_BENCHMARK))
    lines = []
    for task in TASKS.values():
        for row in task.rows:
            summary = summaries.get(row.label)
            aim = fmt_aim(row, size, summary)
            if summary is None:
                lines.append([row.label, row.metric_name, "not yet run", "-", "-", "-", aim, "-", "-",
                              fmt_published(row), "-"])  # fmt: skip
                continue
            links = ", ".join(context.link(record) for record in summary["records"])
            lines.append([row.label, row.metric_name, fmt_score(summary), fmt_margin(summary),
                          fmt_floor(summary), clear_text(summary), aim, fmt_number(summary["wall_seconds"]),
                          fmt_curve(summary["records"]), fmt_published(row), links])  # fmt: skip
    header = ["task", "metric", "score (0-100), mean ± sd", "margin: seeds + sample", "floor", "clear of floor",
              "aim", "wall s per seed", "training loss, first → last", "published, for context",
              "records"]  # fmt: skip
    return (f"**{checkpoint}**, size `{size}`:\n\n" + markdown_table(header, lines) + _floors_line(context, summaries)
            + _machines_line(summaries) + _notes(summaries, size)
            + _superseded_lines(context, records, checkpoint, size)
            + _earlier_budget_lines(context, records, checkpoint, size))


def _floors_line(context: Context, summaries: dict[str, dict[str, Any]]) -> str:
    """Which floors records the floors come from, and the rows whose floor is their unit records' own."""
    used = {id(s["floor_record"]): s["floor_record"] for s in summaries.values() if s["floor_record"] is not None}
    own = [label for label, summary in summaries.items() if summary["floor_record"] is None]
    parts = [f"floors from {', '.join(context.link(record) for record in used.values())}"] if used else []
    if own:
        parts.append(f"the floor of {', '.join(own)} is its unit record's own (no floors record holds its evaluated "
                     "examples)")  # fmt: skip
    text = "; ".join(parts)
    return f"\n\n{text[:1].upper()}{text[1:]}." if parts else ""


def _fmt_seeds(seeds: Sequence[int]) -> str:
    """"seed 1", or "seeds 0, 2"."""
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {', '.join(map(str, seeds))}"


def _machines_line(summaries: dict[str, dict[str, Any]]) -> str:
    """The classes of machine the table's records ran on (`machine_class`), and the rows whose seeds ran on more
    than one: their seeds' spread may hold the machines' rounding as well as the seeds'."""
    records = {id(record): record for s in summaries.values() for record in s["records"]}.values()  # a unit, once
    if not records:
        return ""
    classes = Counter(machine_class(record) for record in records)
    text = "Machines: " + "; ".join(f"{name} ({count} record{'s' if count > 1 else ''})"
                                    for name, count in classes.items())  # fmt: skip
    mixed = []
    for row in (row for task in TASKS.values() for row in task.rows if row.label in summaries):
        seeds_by_class: dict[str, list[int]] = {}
        for record in summaries[row.label]["records"]:
            seeds_by_class.setdefault(machine_class(record), []).append(record["settings"]["seed"])
        if len(seeds_by_class) > 1:
            ran = sorted((sorted(seeds), name) for name, seeds in seeds_by_class.items())
            mixed.append(f"{row.label} ({'; '.join(f'{_fmt_seeds(seeds)}: {name}' for seeds, name in ran)})")
    if mixed:
        text += (". The seeds of these rows ran on more than one class of machine, so their spread may hold the "
                 "machines' rounding as well as the seeds' (the same-seed table in "
                 "[RESULTS.md](RESULTS.md#reliability) sets reruns of a unit on two classes side by side): "
                 + ", ".join(mixed))
    return f"\n\n{text}."


def _notes(summaries: dict[str, dict[str, Any]], size: str) -> str:
    """What the records say beyond the scores, for each row short of its aim or not clear of its floor (by its
    verdict, or by its mean alone where it has none, which the note says): what the row's catalog entry reads
    there (`Row.note`, per seed), else what its loss curve says."""
    lines = []
    for task in TASKS.values():
        for row in task.rows:
            summary = summaries.get(row.label)
            if summary is None:
                continue
            clear = mean_clear_of_floor(summary)
            if clear and not mean_short_of_aim(row.label, size, summary):
                continue
            reading = "short of its aim" if clear else "not clear of its floor"
            verdict = f"- {row.label}, {reading if row_clear_of_floor(summary) is not None else 'its mean ' + reading}"
            notes = [(r["settings"]["seed"], row.note(r["results"])) for r in summary["records"]] if row.note else []
            notes = [(seed, note) for seed, note in notes if note]
            learned = [label for label in summary["records"][0]["results"]["rows"] if label != row.label
                       and label in summaries and mean_clear_of_floor(summaries[label])]  # fmt: skip
            lines += [f"{verdict}, seed {seed}: {note}." for seed, note in notes] or [
                f"{verdict}: {read_shortfall(summary, learned)}."]
    return "\n\nWhere a row is short, from its records:\n\n" + "\n".join(lines) if lines else ""


def groups(records: Sequence[dict]) -> list[tuple[str, str]]:
    """The (checkpoint, size) pairs recorded, the real checkpoint first, then the fullest size first."""
    found = {(checkpoint, size) for checkpoint, size, _, _ in row_units(records)}
    return sorted(found, key=lambda pair: (pair[0] != CHECKPOINT_NAME, pair[0], SIZE_ORDER.index(pair[1])))


def render_task_benchmark(context: Context) -> str:
    """benchmarks/TASKS.md: a table per checkpoint and size recorded."""
    records = context.records(BENCHMARK)
    if not row_units(records):
        return none_yet(COMMAND)
    return "\n\n".join(_size_table(context, records, checkpoint, size) for checkpoint, size in groups(records))


def headline_sentence(records: Sequence[dict], floor_records: Sequence[dict] = ()) -> str:
    """The README's line on the task benchmark: at each size recorded from the real checkpoint (gpu, then cpu),
    how many tasks and rows it scored, the verdicts of the rows that have one (clear of the floor, aims met), and
    why the others have none."""
    sizes = [size for size in SIZE_ORDER[:2] if row_summaries(records, CHECKPOINT_NAME, size, floor_records)]
    if not sizes:
        return f"Task benchmark: not run yet (`{COMMAND}`)."
    leads = [f"Task benchmark (all-MiniLM-L6-v2, size `{sizes[0]}`): "] + [f"At size `{size}`: " for size in sizes[1:]]
    return " ".join(lead + _size_summary(records, size, floor_records) + "." for lead, size in zip(leads, sizes))


def task_of_row() -> dict[str, str]:
    """Per row label, the task it counts as: rows of one unit share a model (RACE's levels, LitBank and GAP), and a
    task trained on another's questions and articles counts as that one (`Task.same_task_as`: MRQA's SQuAD)."""
    return {row.label: task.same_task_as or task.name for task in TASKS.values() for row in task.rows}


def _size_summary(records: Sequence[dict], size: str, floor_records: Sequence[dict]) -> str:
    summaries = row_summaries(records, CHECKPOINT_NAME, size, floor_records)
    rows, tasks = [row.label for task in TASKS.values() for row in task.rows], task_of_row()
    run = [label for label in rows if label in summaries]
    judged = [label for label in run if no_verdict(summaries[label]) is None]
    count = len({tasks[label] for label in run})
    parts = [f"{count} task{'s' if count > 1 else ''} scored in {len(run)} row{'s' if len(run) > 1 else ''} (rows of "
             "one model, or of one task's questions, count as one task); verdicts on "
             f"{len({tasks[label] for label in judged})} of the tasks"]  # fmt: skip
    if judged:
        not_clear = [label for label in judged if not row_clear_of_floor(summaries[label])]
        parts.append(f"clear of the floor beyond the noise: {len(judged) - len(not_clear)} of {len(judged)}"
                     + (f" (not clear: {', '.join(not_clear)})" if not_clear else ""))  # fmt: skip
        aims = [label for label in judged if aim_of(label, size) is not None]
        short = [label for label in aims if short_of_aim(label, size, summaries[label])]
        if aims:
            parts.append(f"aims met on {len(aims) - len(short)} of the {len(aims)} with an aim"
                         + (f" (short: {', '.join(short)})" if short else ""))  # fmt: skip
    few = [label for label in run if summaries[label]["score"]["n"] < MIN_SEEDS]
    unsampled = [label for label in run if evaluation_noise(summaries[label]) is None]
    reasons = []
    if few:
        seeds = sorted({summaries[label]["score"]["n"] for label in few})
        counted = f"{seeds[0]} to {seeds[-1]}" if len(seeds) > 1 else f"{seeds[0]}"
        reasons.append(f"{len(few)} with fewer than the {MIN_SEEDS} seeds a verdict needs ({counted} "
                       f"seed{'s' if seeds[-1] > 1 else ''} each)")  # fmt: skip
    if unsampled:
        reasons.append(f"{len(unsampled)} whose seeds' records do not all hold per-example outcomes (no "
                       "evaluation-sample noise of every seed)")  # fmt: skip
    if reasons:
        parts.append(f"no verdict on {len(run) - len(judged)} rows: " + "; ".join(reasons))
    if len(run) < len(rows):
        missing = ", ".join(label for label in rows if label not in summaries)
        parts.append(f"not run yet with the catalog's budget: {missing}")
    return "; ".join(parts)


def _score_line(context: Context, row: Row, records: Sequence[dict]) -> str:
    """The row's score at the fullest size with the seeds a verdict needs, else at the fullest size recorded: a
    figure of fewer seeds never stands where a row with enough of them exists."""
    page = Path(os.path.relpath(context.root / "benchmarks" / "TASKS.md", context.markdown.parent)).as_posix()
    floors = context.records(FLOORS_BENCHMARK)
    found = [(size, summary) for size in SIZE_ORDER[:2]
             if (summary := row_summaries(records, CHECKPOINT_NAME, size, floors).get(row.label)) is not None]
    if found:
        # min keeps the first of equals: the fullest size with enough seeds, else the fullest size.
        size, summary = min(found, key=lambda pair: pair[1]["score"]["n"] < MIN_SEEDS)
        clear = row_clear_of_floor(summary)
        verdict = (f"its floor {summary['floor']:.1f} ({no_verdict(summary)})" if clear is None
                   else f"{'clear of' if clear else 'not clear of'} its floor {summary['floor']:.1f}")
        return (f"- {row.label}, {row.metric_name}: {fmt_score(summary)}, {verdict}; all-MiniLM-L6-v2, "
                f"size `{size}` ([task benchmark]({page})).")
    task = next(name for name, task in TASKS.items() if row in task.rows)
    return f"- {row.label}, {row.metric_name}: not yet run (`{COMMAND} --tasks {task}`)."


def render_task_scores(context: Context) -> str:
    """A docs page's tasks: the score the task benchmark got from the real checkpoint, the gpu size's where
    recorded, else the cpu size's, or that it has not run."""
    records = context.records(BENCHMARK)
    rows = [row for task in TASKS.values() for row in task.rows if row.docs == context.markdown.name]
    return "\n".join(_score_line(context, row, records) for row in rows) or "No task of this page is benchmarked."
