"""The fine-tuning parity benchmark's summary and tables (benchmarks/PARITY.md, the README's figures), from its run
records: each side's score over seeds, the difference and its noise, the floor, and the verdict.

A task's parity is **met** when the two sides' scores agree within the seeds' noise, the spanroberta side is no
slower beyond the same noise, and both sides are clear of the task's floor (what a model that learned nothing
scores). Clear means each side's mean less two standard errors is above the floor by at least a tenth of the way from
the floor to a perfect score, so that a model that still answers the majority class (MRPC: always "paraphrase")
for all but a handful of examples does not count. Sides that
agree at the floor show only that both learned nothing alike: the verdict reads "agrees, at the floor", and the
headline counts the task as unproven.
"""

from __future__ import annotations

import collections
import math
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.parity.common import PRIMARY, SIDES, TASKS
from spanroberta.records import record_load_average


# How far above its floor a score must be to count as learned: a tenth of the way from the floor to a perfect score.
FLOOR_MARGIN = 0.1


def clear_of_floor(score: dict[str, Any], floor: float, perfect: float) -> bool:
    """Whether a score over seeds (`spread`'s n, mean and sd) less two standard errors is at least `FLOOR_MARGIN` of
    the way from `floor` to `perfect`. One seed has no standard error: its score alone is judged."""
    error = score["sd"] / math.sqrt(score["n"]) if score["sd"] is not None else 0.0
    return score["mean"] - 2 * error >= floor + FLOOR_MARGIN * (perfect - floor)


def newest_runs(records: Sequence[dict]) -> dict[tuple[str, str, str, int], dict]:
    """The newest run record of each (size, task, side, seed): a rerun replaces an older one."""
    runs = {}
    for record in sorted(records, key=lambda record: record.get("date", "")):
        settings = record.get("settings", {})
        if settings.get("kind") == "run":
            runs[(settings["size"], settings["task"], settings["side"], settings["seed"])] = record
    return runs


def spread(values: Sequence[float]) -> dict[str, float | int | None]:
    return {"n": len(values), "mean": statistics.fmean(values),
            "sd": statistics.stdev(values) if len(values) > 1 else None, "min": min(values), "max": max(values)}


def summarize(records: Sequence[dict]) -> dict[str, dict[str, dict]]:
    """Per size and task: each side's primary score, wall, CPU and training seconds and steps over seeds (n, mean,
    sample sd, min, max), the floor, and the comparison of the sides (`compare`)."""
    grouped: dict[tuple[str, str], dict[str, list[dict]]] = collections.defaultdict(
        lambda: collections.defaultdict(list))
    for (size, task, side, _), record in newest_runs(records).items():
        grouped[(size, task)][side].append(record["results"])
    summary: dict[str, dict[str, dict]] = collections.defaultdict(dict)
    for (size, task), sides in grouped.items():
        entry: dict[str, Any] = {"task": task, "primary_metric": PRIMARY[task]}
        for side, results in sides.items():
            entry[side] = {key: spread([r[key] for r in results])
                           for key in ("primary", "wall_seconds", "cpu_seconds", "train_seconds", "train_steps")}
            entry["floor"] = _floor(task, results[0])
        if all(side in sides for side in SIDES):
            compare(entry)
        summary[size][task] = entry
    return dict(summary)


def _floor(task: str, results: dict) -> float | None:
    """The run's floor. SQuAD records written before the benchmark computed its floor hold None: an empty answer
    scores 0 F1 against every gold answer (evaluate-v1.1.py), and every SQuAD v1.1 question has one, so it is 0."""
    if results["floor"] is None and task == "squad":
        return 0.0
    return results["floor"]


def compare(entry: dict[str, Any]) -> None:
    """Adds to a task's entry: the difference of the means (spanroberta - transformers) and its noise, two standard
    errors of that difference (absent with fewer than two seeds a side), `within_noise`; `wall_ratio`, spanroberta's
    mean wall time over transformers', and `wall_same_or_lower` (slower by no more than the same noise of the wall
    times); `clear_of_floor`, whether each side's mean less two standard errors is above the floor by at least
    `FLOOR_MARGIN` of the way from the floor to a perfect score."""
    ours, theirs = entry["spanroberta"]["primary"], entry["transformers"]["primary"]
    entry["difference"] = ours["mean"] - theirs["mean"]
    if ours["sd"] is not None and theirs["sd"] is not None:
        entry["noise"] = _noise(ours, theirs)
        entry["within_noise"] = abs(entry["difference"]) <= entry["noise"]
        if entry["floor"] is not None:
            perfect = 100 / _scale(entry["task"])
            entry["clear_of_floor"] = all(clear_of_floor(side, entry["floor"], perfect) for side in (ours, theirs))
    ours, theirs = entry["spanroberta"]["wall_seconds"], entry["transformers"]["wall_seconds"]
    entry["wall_ratio"] = ours["mean"] / theirs["mean"]
    if ours["sd"] is not None and theirs["sd"] is not None:
        # "The same or lower wall time": slower by no more than the seeds' own spread says is noise.
        entry["wall_same_or_lower"] = ours["mean"] - theirs["mean"] <= _noise(ours, theirs)


def verdict(entry: dict[str, Any]) -> str:
    """"met" (the sides agree within noise, no slower, both clear of the floor), "agrees, at the floor" (they agree,
    but a model that learned nothing would score as much: parity unproven), "not met", or "not measured"."""
    if not all(key in entry for key in ("within_noise", "wall_same_or_lower", "clear_of_floor")):
        return "not measured"
    if not (entry["within_noise"] and entry["wall_same_or_lower"]):
        return "not met"
    return "met" if entry["clear_of_floor"] else "agrees, at the floor"


def _noise(ours: dict, theirs: dict) -> float:
    """Two standard errors of the difference of two means (each side's sample sd over its n seeds)."""
    return 2 * math.sqrt(ours["sd"] ** 2 / ours["n"] + theirs["sd"] ** 2 / theirs["n"])


def _scale(task: str) -> int:
    """What turns a task's primary metric into percent: SQuAD's scores are percent already, the others fractions."""
    return 1 if task == "squad" else 100


def _score(side: dict | None, scale: int) -> str:
    if side is None:
        return "not run"
    text = f"{side['mean'] * scale:.1f}"
    if side["sd"] is not None:
        text += f" ± {side['sd'] * scale:.1f}"
    return f"{text} (n={side['n']})"


def _seconds(side: dict | None) -> str:
    return "" if side is None else f"{side['mean']:.0f}"


def _record_name(record: dict) -> str:
    return Path(record["path"]).name if "path" in record else "?"


def _difference(entry: dict[str, Any], scale: int) -> str:
    if "difference" not in entry:
        return ""
    noise = f" ± {entry['noise'] * scale:.1f}" if "noise" in entry else " (1 seed: no noise estimate)"
    return f"{entry['difference'] * scale:+.1f}{noise}"


def render_parity(records: Sequence[dict], link: Callable[[dict], str] = _record_name) -> str:
    """The markdown table of the run records of `finetuning-parity` (other records are ignored): per size and
    task, each side's headline score as mean ± sample sd over seeds (scores in percent), the floor, the difference
    with two standard errors, the verdict, the mean wall and CPU seconds of a whole run (on a shared machine, CPU
    seconds are the steadier: waiting for a core does not count), the steps, and the run records the row comes
    from (`link(record)` names one; its file name by default)."""
    summary = summarize(records)
    if not summary:
        return "No fine-tuning parity run has been recorded yet.\n"
    sources = collections.defaultdict(list)
    for (size, task, _, _), record in sorted(newest_runs(records).items()):
        sources[(size, task)].append(link(record))
    lines = ["| size | task | metric | spanroberta | transformers | floor | difference (± 2 SE) | verdict "
             "| wall s spanroberta | wall s transformers | CPU s spanroberta | CPU s transformers | steps | records |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for size, tasks in sorted(summary.items()):
        for task in (t for t in TASKS if t in tasks):
            entry, scale = tasks[task], _scale(task)
            ours, theirs = entry.get("spanroberta"), entry.get("transformers")
            floor_text = "" if entry["floor"] is None else f"{entry['floor'] * scale:.1f}"
            steps = (ours or theirs)["train_steps"]["mean"]
            lines.append(f"| {size} | {task} | {entry['primary_metric']} | {_score(ours and ours['primary'], scale)} "
                         f"| {_score(theirs and theirs['primary'], scale)} | {floor_text} "
                         f"| {_difference(entry, scale)} | {verdict(entry)} "
                         f"| {_seconds(ours and ours['wall_seconds'])} | {_seconds(theirs and theirs['wall_seconds'])} "
                         f"| {_seconds(ours and ours['cpu_seconds'])} | {_seconds(theirs and theirs['cpu_seconds'])} "
                         f"| {steps:.0f} | {', '.join(sources[(size, task)])} |")  # fmt: skip
    return "\n".join(lines) + "\n"


HEADLINE_SIZES = ("gpu", "cpu", "cpu-small")  # the headline shows the largest size measured
TASK_NAMES = {"sst2": "SST-2", "mrpc": "MRPC", "rte": "RTE", "squad": "SQuAD v1.1", "race": "RACE middle"}


def headline_size(summary: dict[str, dict[str, dict]]) -> str | None:
    return next((name for name in HEADLINE_SIZES if name in summary), None)


def _headline_verdict(entry: dict[str, Any], scale: int) -> str:
    found = verdict(entry)
    if found == "not measured":
        return "not measured (fewer than 2 seeds a side, or no floor)"
    wall = "within noise or lower" if entry["wall_same_or_lower"] else "slower beyond noise"
    floor = "clear of the floor" if entry["clear_of_floor"] else "not clear of the floor: unproven"
    return (f"**{found}** (difference {entry['difference'] * scale:+.1f}, noise ± {entry['noise'] * scale:.1f}; "
            f"wall {wall}; {floor})")  # fmt: skip


def headline_rows(records: Sequence[dict], page: str) -> list[list[str]]:
    """The README's rows: per task, at the largest size with records, both sides' mean score, the floor and the
    verdict (`verdict`). `page` links PARITY.md."""
    summary = summarize(records)
    size = headline_size(summary)
    if size is None:
        return []
    rows = []
    for task in (t for t in TASKS if t in summary[size]):
        entry, scale = summary[size][task], _scale(task)
        ours, theirs = entry.get("spanroberta"), entry.get("transformers")
        latest = (f"spanroberta {_score(ours and ours['primary'], scale)}, transformers "
                  f"{_score(theirs and theirs['primary'], scale)}")  # fmt: skip
        if entry["floor"] is not None:
            latest += f"; floor {entry['floor'] * scale:.1f}"
        if "wall_ratio" in entry:
            latest += f"; wall {entry['wall_ratio']:.2f}x"
        runs = sum(side["primary"]["n"] for side in (ours, theirs) if side)
        rows.append([f"fine-tuning parity, {TASK_NAMES[task]} {entry['primary_metric']}, {size}", latest,
                     _headline_verdict(entry, scale), f"[{runs} run records]({page})"])  # fmt: skip
    return rows


def _by_verdict(summary: dict[str, dict[str, dict]], size: str) -> dict[str, list[str]]:
    found = collections.defaultdict(list)
    for task in (t for t in TASKS if t in summary[size]):
        found[verdict(summary[size][task])].append(TASK_NAMES[task])
    return found


def headline_sentence(records: Sequence[dict]) -> str:
    """The README's count of the parity verdicts at the headline size; tasks that agree at the floor count as
    unproven."""
    summary = summarize(records)
    size = headline_size(summary)
    if size is None:
        return "Fine-tuning parity: not measured yet."
    found = _by_verdict(summary, size)
    parts = [f"met on {len(found['met'])} of {len(summary[size])} tasks ({', '.join(found['met']) or 'none'})"]
    if found["agrees, at the floor"]:
        parts.append(f"unproven on {', '.join(found['agrees, at the floor'])}, where both sides agree but stay at "
                     "the floor (what a model that learned nothing scores)")  # fmt: skip
    for other in ("not met", "not measured"):
        if found[other]:
            parts.append(f"{other} on {', '.join(found[other])}")
    return f"Fine-tuning parity at the `{size}` size: " + "; ".join(parts) + "."


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


def render_findings(records: Sequence[dict]) -> str:
    """PARITY.md's "what the runs show", at the headline size, from the run records."""
    summary = summarize(records)
    size = headline_size(summary)
    if size is None:
        return "No fine-tuning parity run has been recorded yet."
    tasks = [task for task in TASKS if task in summary[size]]
    same = [TASK_NAMES[task] for task in tasks if _same_every_seed(records, size, task)]
    differ = [TASK_NAMES[task] for task in tasks if TASK_NAMES[task] not in same]
    found = _by_verdict(summary, size)
    wall = [TASK_NAMES[task] for task in tasks if summary[size][task].get("wall_same_or_lower")]
    runs = [record for (s, _, _, _), record in newest_runs(records).items() if s == size]
    loaded = sum(record_load_average(record)[0] is not None for record in runs)
    lines = [
        f"At the `{size}` size:",
        "",
        f"- **Scores.** The same score and mean training loss on both sides, seed by seed: {', '.join(same) or 'none'}."
        + (f" Different run by run: {', '.join(differ)} (the difference of the means is in the table)." if differ else ""),
        f"- **Floors.** Clear of the floor on both sides: {', '.join(found['met']) or 'none'}. At the floor: "
        f"{', '.join(found['agrees, at the floor']) or 'none'}; there the runs show that the sides agree, not what "
        "either reaches, and parity stays unproven.",
        f"- **Wall time.** spanroberta's mean wall time is within the seeds' noise of transformers' or lower on "
        f"{len(wall)} of {len(tasks)} tasks ({', '.join(wall) or 'none'}). {loaded} of the {len(runs)} runs "
        "recorded the load average; on a machine shared with other jobs wall times are upper bounds.",
    ]  # fmt: skip
    return "\n".join(lines)
