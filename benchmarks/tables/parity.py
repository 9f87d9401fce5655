"""The fine-tuning parity benchmark's tables (benchmarks/PARITY.md, the README's figures), from parity/summary.py's
summary of its run records: per size and task, each side's score, the floor and the sides' verdicts on it, the
difference and its noise, the verdict, the seconds and the records."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.parity.common import SIDES, TASKS, task_report
from benchmarks.parity.summary import NO_FLOORS_RECORD, TASK_NAMES, newest_runs, no_floor_verdict, summarize, verdict
from benchmarks.statistics import clear_of_floor, clear_text
from benchmarks.tables.render import Column, Context, Table
from spanroberta.records import record_load_average


def _scale(task: str) -> float:
    return task_report(task).to_percent


def _score(side: dict | None, scale: int) -> str:
    if side is None:
        return "not run"
    text = f"{side['mean'] * scale:.1f}"
    if side["sd"] is not None:
        text += f" ± {side['sd'] * scale:.1f}"
    return f"{text} (n={side['n']})"


def _seconds(side: dict | None) -> str:
    return "" if side is None else f"{side['mean']:.0f}"


def _difference(entry: dict[str, Any], scale: int) -> str:
    if "difference" not in entry:
        return ""
    noise = f" ± {entry['noise'] * scale:.1f}" if "noise" in entry else " (1 seed: no noise estimate)"
    return f"{entry['difference'] * scale:+.1f}{noise}"


def _floor_text(entry: dict[str, Any]) -> str:
    floor = entry["floor"]
    return "" if floor["floor"] is None else f"{floor['floor']:.1f} ({floor['answer']})"


def _sides_clear_text(entry: dict[str, Any]) -> str:
    """Both sides' verdicts on the floor (verdicts.clear_text), once where they read alike."""
    if entry["floor"]["record"] is None:
        return NO_FLOORS_RECORD
    texts = {side: clear_text(entry[side]["verdict_summary"]) for side in SIDES if side in entry}
    if len(set(texts.values())) == 1:
        return next(iter(texts.values()))
    return ", ".join(f"{side} {text}" for side, text in texts.items())


def _side(row: tuple, side: str, key: str) -> dict | None:
    found = row[2].get(side)
    return found and found[key]


def _sources(records: Sequence[dict], context: Context, size: str, task: str) -> str:
    return ", ".join(context.link(record) for (s, t, _, _), record in sorted(newest_runs(records).items())
                     if (s, t) == (size, task))  # fmt: skip


def _floor_record(entry: dict[str, Any], context: Context) -> str:
    return "-" if entry["floor"]["record"] is None else context.link(entry["floor"]["record"])


def parity_table(records: Sequence[dict], floor_records: Sequence[dict] = ()) -> Table:
    """The run records of `finetuning-parity` (other records are ignored): per size and task, each side's headline
    score as mean ± sample sd over seeds (scores in percent), the floor (`task_floor`), the floors record it comes
    from and the sides' verdict on it, the difference with two standard errors, the verdict, the mean wall and CPU
    seconds of a whole run (on a shared machine, CPU seconds are the steadier: waiting for a core does not count),
    the steps, and the run records the row comes from."""
    summary = summarize(records, floor_records)
    rows = [(size, task, tasks[task]) for size, tasks in sorted(summary.items()) for task in TASKS if task in tasks]
    sides = [(f"{name} {side}", side, key) for name, key in (("wall s", "wall_seconds"), ("CPU s", "cpu_seconds"))
             for side in SIDES]  # fmt: skip
    return Table(lambda context: rows, [
        Column.of("size", lambda row: row[0]), Column.of("task", lambda row: row[1]),
        Column.of("metric", lambda row: row[2]["primary_metric"]),
        *(Column.of(side, lambda row, side=side: _score(_side(row, side, "primary"), _scale(row[1]))) for side in SIDES),
        Column.of("floor", lambda row: _floor_text(row[2])),
        Column("floor record", lambda row, context: _floor_record(row[2], context)),
        Column.of("clear of floor", lambda row: _sides_clear_text(row[2])),
        Column.of("difference (± 2 SE)", lambda row: _difference(row[2], _scale(row[1]))),
        Column.of("verdict", lambda row: verdict(row[2])),
        *(Column.of(name, lambda row, side=side, key=key: _seconds(_side(row, side, key))) for name, side, key in sides),
        Column.of("steps", lambda row: f"{(row[2].get('spanroberta') or row[2]['transformers'])['train_steps']['mean']:.0f}"),
        Column("records", lambda row, context: _sources(records, context, row[0], row[1])),
    ], "No fine-tuning parity run has been recorded yet.")  # fmt: skip


HEADLINE_SIZES = ("gpu", "cpu", "cpu-small")  # the headline shows the largest size measured


def headline_size(summary: dict[str, dict[str, dict]]) -> str | None:
    return next((name for name in HEADLINE_SIZES if name in summary), None)


def _headline_verdict(entry: dict[str, Any], scale: int) -> str:
    found = verdict(entry)
    if found == "not measured":
        return "not measured (fewer than 2 seeds a side)"
    wall = "within noise or lower" if entry["wall_same_or_lower"] else "slower beyond noise"
    reason = no_floor_verdict(entry)
    floor = (f"floor: {reason}; unproven" if reason else "clear of the floor" if all(entry["clear_of_floor"].values())
             else "not clear of the floor: unproven")  # fmt: skip
    return (f"**{found}** (difference {entry['difference'] * scale:+.1f}, noise ± {entry['noise'] * scale:.1f}; "
            f"wall {wall}; {floor})")  # fmt: skip


def headline_rows(records: Sequence[dict], page: str, floor_records: Sequence[dict] = ()) -> list[list[str]]:
    """The README's rows: per task, at the largest size with records, both sides' mean score, the floor and the
    verdict (`verdict`). `page` links PARITY.md."""
    summary = summarize(records, floor_records)
    size = headline_size(summary)
    if size is None:
        return []
    rows = []
    for task in (t for t in TASKS if t in summary[size]):
        entry, scale = summary[size][task], _scale(task)
        ours, theirs = entry.get("spanroberta"), entry.get("transformers")
        latest = (f"spanroberta {_score(ours and ours['primary'], scale)}, transformers "
                  f"{_score(theirs and theirs['primary'], scale)}")  # fmt: skip
        if entry["floor"]["floor"] is not None:
            latest += f"; floor {_floor_text(entry)}"
        if "wall_ratio" in entry:
            latest += f"; wall {entry['wall_ratio']:.2f}x"
        runs = sum(side["primary"]["n"] for side in (ours, theirs) if side)
        rows.append([f"fine-tuning parity, {TASK_NAMES[task]} {entry['primary_metric']}, {size}", latest,
                     _headline_verdict(entry, scale), f"[{runs} run records]({page})"])  # fmt: skip
    return rows


def _same_every_seed(records: Sequence[dict], size: str, task: str) -> bool:
    """Whether both sides give the same score and mean training loss on every seed run on both."""
    runs = newest_runs(records)
    seeds = {seed for (s, t, _, seed) in runs if (s, t) == (size, task)}
    pairs = [(runs.get((size, task, "spanroberta", seed)), runs.get((size, task, "transformers", seed)))
             for seed in seeds]  # fmt: skip
    return bool(pairs) and all(
        ours and theirs and all(ours["results"][key] == theirs["results"][key] for key in ("primary", "train_loss"))
        for ours, theirs in pairs
    )


def _floor_finding(entry: dict[str, Any]) -> str:
    """Both sides' verdicts on the floor, or why there is none and what the means alone say (never a verdict)."""
    reason = no_floor_verdict(entry)
    if reason is None:
        return "clear on both sides" if all(entry["clear_of_floor"].values()) else "**not clear**"
    if entry["floor"]["record"] is None:
        return reason
    above = all(clear_of_floor(entry[side]["verdict_summary"], 0.0) for side in SIDES)
    return f"{reason}; the means alone {'are' if above else 'are not'} above it"


def _loads(records: Sequence[dict], size: str, task: str) -> str:
    runs = [record for (s, t, _, _), record in newest_runs(records).items() if (s, t) == (size, task)]
    return f"{sum(record_load_average(record)[0] is not None for record in runs)} of {len(runs)}"


def findings(records: Sequence[dict], floor_records: Sequence[dict] = ()) -> Table:
    """PARITY.md's "what the runs show", at the headline size: per task, whether both sides scored the same seed by
    seed, the floor, the wall time and how many runs recorded their load average."""
    summary = summarize(records, floor_records)
    size = headline_size(summary)
    tasks = [] if size is None else [(size, task, summary[size][task]) for task in TASKS if task in summary[size]]
    return Table(lambda context: tasks, [
        Column.of("size", lambda row: f"`{row[0]}`"), Column.of("task", lambda row: TASK_NAMES[row[1]]),
        Column.of("same score and loss seed by seed", lambda row: "yes" if _same_every_seed(records, *row[:2]) else "no"),
        Column.of("floor", lambda row: _floor_finding(row[2]) if "clear_of_floor" in row[2] else "-"),
        Column.of("wall within noise or lower", lambda row: {True: "yes", False: "no", None: "-"}[
            row[2].get("wall_same_or_lower")]),
        Column.of("runs with a load average", lambda row: _loads(records, *row[:2])),
    ], "No fine-tuning parity run has been recorded yet.")  # fmt: skip
