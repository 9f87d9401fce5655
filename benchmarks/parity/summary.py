"""The fine-tuning parity benchmark's summary (tables/parity.py draws it in benchmarks/PARITY.md and the README), from
its run records and the task benchmark's floors records: each side's score over seeds, the difference and its noise,
the floor, and the verdict.

A task's parity is **met** when the two sides' scores agree within the seeds' noise, the spanroberta side is no
slower beyond the same noise, and both sides are clear of the task's floor. The floor and "clear" are the task
benchmark's (benchmarks/statistics.py), so that one rule judges every table that says "clear of the floor": the
floor is the newest floors record's (tasks/floors.py) for the same evaluated examples (`evaluated_examples_of`), and
a side is clear when its mean less the margin (the seed term of the 95% t-interval plus the evaluation-sample noise
of every seed's per-example outcomes) is above the floor (statistics.py's margin rule: the run records hold no
outcomes paired with the floor's). A side has no
verdict with fewer seeds than the task benchmark's rule takes or without every seed's outcomes (the run records
written so far hold none), worded as the task table words it; a task has none where no floors record holds its
evaluated examples, and its row shows the run records' trivial floor (`_trivial_floor`) and says so. Sides that
agree but are not clear read "agrees, at the floor", and sides that agree without a verdict on the floor "agrees, no
floor verdict": both are parity unproven.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.parity.common import SIDES, task_report
from benchmarks.statistics import no_verdict, row_clear_of_floor, spread, two_standard_errors
from benchmarks.tasks.preparation import evaluated_examples
from benchmarks.tasks.rows import examples_floor, floors_by_examples, sample_noise

# Each task's name: the task benchmark's row label (tasks/catalog.py), which keys its floors records.
TASK_NAMES = {"sst2": "SST-2", "mrpc": "MRPC", "rte": "RTE", "squad": "SQuAD v1.1", "race": "RACE middle"}
# What a task's row says where no floors record holds its evaluated examples: its trivial floor is shown, never judged.
NO_FLOORS_RECORD = "no floors record for these examples: trivial floor shown, no verdict"


def newest_runs(records: Sequence[dict]) -> dict[tuple[str, str, str, int], dict]:
    """The newest run record of each (size, task, side, seed): a rerun replaces an older one."""
    runs = {}
    for record in sorted(records, key=lambda record: record.get("date", "")):
        settings = record.get("settings", {})
        if settings.get("kind") == "run":
            runs[(settings["size"], settings["task"], settings["side"], settings["seed"])] = record
    return runs


def summarize(records: Sequence[dict], floor_records: Sequence[dict] = ()) -> dict[str, dict[str, dict]]:
    """Per size and task: each side's primary score, wall, CPU and training seconds and steps over seeds (n, mean,
    sample sd, min, max) and its runs in the verdicts' terms (`side_verdict_summary`), the floor (`task_floor`,
    from `floor_records`), the comparison of the sides (`compare`), and `runs`, the run records it reads (by side,
    then seed)."""
    grouped: dict[tuple[str, str], dict[str, list[dict]]] = collections.defaultdict(
        lambda: collections.defaultdict(list))
    runs = newest_runs(records)
    for (size, task, side, _), record in runs.items():
        grouped[(size, task)][side].append(record)
    floors = floors_by_examples(floor_records)
    summary: dict[str, dict[str, dict]] = collections.defaultdict(dict)
    for (size, task), sides in grouped.items():
        floor = task_floor(task, next(iter(sides.values()))[0], floors)
        entry: dict[str, Any] = {"task": task, "primary_metric": task_report(task).headline, "floor": floor,
                                 "runs": [record for key, record in sorted(runs.items()) if key[:2] == (size, task)]}
        for side, side_records in sides.items():
            results = [record["results"] for record in side_records]
            entry[side] = {key: spread([r[key] for r in results])
                           for key in ("primary", "wall_seconds", "cpu_seconds", "train_seconds", "train_steps")}
            entry[side]["verdict_summary"] = side_verdict_summary(task, results, floor["floor"])
        if all(side in sides for side in SIDES):
            compare(entry)
        summary[size][task] = entry
    return dict(summary)


def evaluated_examples_of(record: dict) -> dict[str, Any]:
    """The task benchmark's evaluated examples (preparation.evaluated_examples) that a run's evaluation set is: those
    of a budget without a split and with the same `eval` count, since both benchmarks draw them with
    benchmarks/common.py's seed-0 samplers from the same files (GLUE's dev sets, SQuAD v1.1's last 12 articles, and
    RACE's dev.middle, which the task benchmark evaluated before its reporting split)."""
    return evaluated_examples({"eval": record["settings"]["task_size"]["eval_samples"]})


def task_floor(task: str, record: dict, floors: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    """A task's floor (0-100) for the evaluation set of a run record, as tasks/rows.row_floor gives a task row's:
    the newest floors record's on the same evaluated examples, with the answer that gives it and that record; else
    the run record's trivial floor, with `record` None (shown, never judged)."""
    found = examples_floor(TASK_NAMES[task], evaluated_examples_of(record), floors)
    if found is not None:
        return found
    trivial = _trivial_floor(task, record["results"])
    scale = task_report(task).to_percent
    return {"floor": None if trivial is None else trivial * scale, "answer": "trivial", "answers": {},
            "record": None}  # fmt: skip


def _trivial_floor(task: str, results: dict) -> float | None:
    """The run's own floor, in its primary metric's units: the majority class, always "paraphrase" for MRPC, an
    empty answer for SQuAD. SQuAD records written before the benchmark computed its floor hold None: an empty answer
    scores 0 F1 against every gold answer (evaluate-v1.1.py), and every SQuAD v1.1 question has one, so it is 0."""
    if results["floor"] is None and task == "squad":
        return 0.0
    return results["floor"]


def side_verdict_summary(task: str, results: Sequence[dict], floor: float | None) -> dict[str, Any]:
    """One side's runs in benchmarks/statistics.py's terms (0-100): the primary score's spread over seeds, the
    evaluation-sample noise of each run whose record holds per-example outcomes (`outcomes`, in tasks/outcomes.py's
    form), and the floor."""
    return {"score": spread([result["primary"] * task_report(task).to_percent for result in results]),
            "sample_noise": [sample_noise(result["outcomes"]) for result in results if "outcomes" in result],
            "floor": floor}  # fmt: skip


def side_clear_of_floor(entry: dict[str, Any], side: str) -> bool | None:
    """A side's verdict on the floor, by benchmarks/statistics.py's rule and margin; None without one (as where no
    floors record holds the task's evaluated examples)."""
    return None if entry["floor"]["record"] is None else row_clear_of_floor(entry[side]["verdict_summary"])


def no_floor_verdict(entry: dict[str, Any]) -> str | None:
    """Why a task's sides have no verdict on the floor, as the task table words it; None where both have one."""
    if entry["floor"]["record"] is None:
        return NO_FLOORS_RECORD
    reasons = dict.fromkeys(no_verdict(entry[side]["verdict_summary"]) for side in SIDES if side in entry)
    return "; ".join(reason for reason in reasons if reason) or None


def compare(entry: dict[str, Any]) -> None:
    """Adds to a task's entry: the difference of the means (spanroberta - transformers) and its noise, two standard
    errors of that difference (absent with fewer than two seeds a side), `within_noise`; `wall_ratio`, spanroberta's
    mean wall time over transformers', and `wall_same_or_lower` (slower by no more than the same noise of the wall
    times); `clear_of_floor`, each side's verdict on the floor (`side_clear_of_floor`)."""
    ours, theirs = entry["spanroberta"]["primary"], entry["transformers"]["primary"]
    entry["difference"] = ours["mean"] - theirs["mean"]
    if ours["sd"] is not None and theirs["sd"] is not None:
        entry["noise"] = two_standard_errors(ours, theirs)
        entry["within_noise"] = abs(entry["difference"]) <= entry["noise"]
    entry["clear_of_floor"] = {side: side_clear_of_floor(entry, side) for side in SIDES}
    ours, theirs = entry["spanroberta"]["wall_seconds"], entry["transformers"]["wall_seconds"]
    entry["wall_ratio"] = ours["mean"] / theirs["mean"]
    if ours["sd"] is not None and theirs["sd"] is not None:
        # "The same or lower wall time": slower by no more than the seeds' own spread says is noise.
        entry["wall_same_or_lower"] = ours["mean"] - theirs["mean"] <= two_standard_errors(ours, theirs)


def recordable(summary: dict[str, dict]) -> dict[str, dict]:
    """A size's summary as its summary record holds it: each floor names its floors record's file, not the record,
    and the run records stay in their own files."""
    return {task: {**{key: value for key, value in entry.items() if key != "runs"},
                   "floor": {**entry["floor"], "record": entry["floor"]["record"]
                             and Path(entry["floor"]["record"]["path"]).name}}
            for task, entry in summary.items()}  # fmt: skip


def verdict(entry: dict[str, Any]) -> str:
    """"met" (the sides agree within noise, no slower, both clear of the floor), "agrees, at the floor" (they agree,
    but a side is not clear of the floor: parity unproven), "agrees, no floor verdict" (they agree, but the floor has
    no verdict: unproven), "not met", or "not measured" (fewer than two seeds a side)."""
    if not all(key in entry for key in ("within_noise", "wall_same_or_lower")):
        return "not measured"
    if not (entry["within_noise"] and entry["wall_same_or_lower"]):
        return "not met"
    clear = list(entry["clear_of_floor"].values())
    if None in clear:
        return "agrees, no floor verdict"
    return "met" if all(clear) else "agrees, at the floor"
