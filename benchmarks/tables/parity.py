"""The fine-tuning parity benchmark's tables (benchmarks/PARITY.md, the README's figures), from parity/summary.py's
summary of its run records: per size and task, each side's score, the floor and the sides' verdicts on it, the
difference and its noise, the verdict, the seconds and the records; and the QA pipeline check's answers
(parity/qa_pipeline.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.parity.common import SIDES, TASKS, task_report
from benchmarks.parity.summary import NO_FLOORS_RECORD, TASK_NAMES, no_floor_verdict, summarize, verdict
from benchmarks.statistics import clear_of_floor, clear_text
from benchmarks.tables.render import Column, Context, Table, fmt_cell, none_yet
from spanroberta.records import record_load_average
from spanroberta.tasks.squad.scoring import exact_match_score


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
        Column("records", lambda row, context: context.links(row[2]["runs"])),
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


def _same_every_seed(entry: dict[str, Any]) -> bool:
    """Whether both sides give the same score and mean training loss on every seed run on both."""
    by_seed: dict[int, dict[str, dict]] = {}
    for record in entry["runs"]:
        by_seed.setdefault(record["settings"]["seed"], {})[record["settings"]["side"]] = record
    return bool(by_seed) and all(
        len(runs) == len(SIDES) and all(runs[SIDES[0]]["results"][key] == runs[SIDES[1]]["results"][key]
                                        for key in ("primary", "train_loss"))
        for runs in by_seed.values()
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


def _loads(entry: dict[str, Any]) -> str:
    runs = entry["runs"]
    return f"{sum(record_load_average(record)[0] is not None for record in runs)} of {len(runs)}"


def findings(records: Sequence[dict], floor_records: Sequence[dict] = ()) -> Table:
    """PARITY.md's "what the runs show", at the headline size: per task, whether both sides scored the same seed by
    seed, the floor, the wall time and how many runs recorded their load average."""
    summary = summarize(records, floor_records)
    size = headline_size(summary)
    tasks = [] if size is None else [(size, task, summary[size][task]) for task in TASKS if task in summary[size]]
    return Table(lambda context: tasks, [
        Column.of("size", lambda row: f"`{row[0]}`"), Column.of("task", lambda row: TASK_NAMES[row[1]]),
        Column.of("same score and loss seed by seed", lambda row: "yes" if _same_every_seed(row[2]) else "no"),
        Column.of("floor", lambda row: _floor_finding(row[2]) if "clear_of_floor" in row[2] else "-"),
        Column.of("wall within noise or lower", lambda row: {True: "yes", False: "no", None: "-"}[
            row[2].get("wall_same_or_lower")]),
        Column.of("runs with a load average", lambda row: _loads(row[2])),
    ], "No fine-tuning parity run has been recorded yet.")  # fmt: skip


def headline(context: Context) -> list[list[str]]:
    """The headline's parity rows, each linking PARITY.md."""
    records, floor_records = _records(context)
    return headline_rows(records, context.page_path("PARITY.md"), floor_records)


def _records(context: Context) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The parity benchmark's run records and the task benchmark's floors records, which its floors come from."""
    return context.records("finetuning-parity"), context.records("task-floors")


def _qa_rows(context: Context) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    record = (context.records("qa-pipeline") or [None])[-1]
    return [] if record is None else [(record, entry) for entry in record["results"]["answers"]]


def _matches(entry: dict[str, Any]) -> str:
    """Whether the answer matches a gold answer by SQuAD's exact match."""
    return "yes" if any(exact_match_score(entry["answer"], gold) for gold in entry["gold"]) else "no"


# The latest qa-pipeline record: the model, its scores on its held-out questions and whether plain transformers (in a
# process where spanroberta cannot be imported) gave the same answers; then each question of the article.
QA_MODEL = Table(lambda context: _qa_rows(context)[:1], [
    Column.of("article", lambda row: f"*{row[0]['settings']['article'].replace('_', ' ')}*"),
    Column.of("model", lambda row: f"`{row[0]['settings']['model_class']}`"),
    Column.of("fine-tuned from", lambda row: row[0]["settings"].get("base_model") or "not named by its card"),
    Column.of("exact match, F1 (one seed: no verdict)", lambda row: "{exact_match:.1f}, {f1:.1f}".format(
        **row[0]["settings"]["model_scores"])),
    Column.of("plain transformers", lambda row: "the same answers and scores"
              if row[0]["results"]["without_spanroberta"]["same_answers"] else "different answers"),
    Column("record", lambda row, context: context.link(row[0])),
], none_yet("python -m benchmarks.parity.qa_pipeline --model <a run_squad.py output folder>"))  # fmt: skip
QA_ANSWERS = Table(_qa_rows, [
    Column.of("question", lambda row: fmt_cell(row[1]["question"])),
    Column.of("answer", lambda row: f"**{fmt_cell(row[1]['answer'])}**"),
    Column.of("score", lambda row: f"{row[1]['score']:.3f}"),
    Column.of("gold answers", lambda row: " / ".join(fmt_cell(gold) for gold in row[1]["gold"])),
    Column.of("matches a gold answer", lambda row: _matches(row[1])),
], "")  # fmt: skip


def render_qa_pipeline(context: Context) -> str:
    found = _qa_rows(context)
    quote = f"> {found[0][0]['results']['context']}\n\n" if found else ""
    return quote + QA_MODEL.render(context) + ("\n\n" + QA_ANSWERS.render(context) if found else "")


REGIONS: dict[str, Callable[[Context], str]] = {
    "finetuning-parity": lambda context: parity_table(*_records(context)).render(context),
    "parity-findings": lambda context: findings(*_records(context)).render(context),
    "qa-pipeline": render_qa_pipeline,
}
