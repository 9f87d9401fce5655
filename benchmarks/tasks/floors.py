#!/usr/bin/env python
"""The task benchmark's floors, computed from the shared data for each size's current budgets and written as one
record (`task-floors`, under benchmarks/results/), which the task tables read: a unit's record keeps the floor of
its time, and the tables show every row against the floor of this record wherever it was computed on the same
evaluated examples (preparation.evaluated_examples), so that a better floor reaches the rows recorded before it,
and the tables need no data to render.

    python -m benchmarks.tasks.floors                # the cpu and gpu sizes
    python -m benchmarks.tables.generate             # the tables, against the newest floors record

Each task's data is prepared as the task benchmark prepares it (tasks/preparation.py), no model is run: the floor of a
row is the best of its answers that learn nothing (tasks/heuristics.py), each kept in the record with its score, and
the best one's per-example outcomes (tasks/outcomes.py's compact form, in the order of the unit records' outcomes)
with each example's group (its article, document, or the example itself), which the paired verdict compares a
model's outcomes with (benchmarks/statistics.py).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import DATA
from benchmarks.tasks.catalog import SIZES, TASKS
from benchmarks.tasks.outcomes import check_outcomes, outcome_count
from benchmarks.tasks.preparation import evaluated_examples
from benchmarks.tasks.heuristics import best
from spanroberta.records import start_run, write_record

BENCHMARK = "task-floors"
DEFAULT_SIZES = ("cpu", "gpu")  # the sizes whose records are committed; the toy size's floors mean nothing


def size_floors(size_name: str, tasks: list[str], work: Path) -> list[dict[str, Any]]:
    """Per task of the size: its budget, the evaluated examples it decides, and per row the floor, the answer that
    gives it, every answer's score (0-100), the floor's per-example outcomes and each example's group."""
    entries = []
    for name in tasks:
        budget = SIZES[size_name].budgets[name]
        folder = work / size_name / name
        folder.mkdir(parents=True)
        start = time.perf_counter()
        prepared = TASKS[name].prepare(folder, budget)
        rows = {}
        for row in TASKS[name].rows:
            answer, floor = best(prepared.answers[row.label])
            outcomes, groups = prepared.outcomes[row.label][answer], prepared.groups[row.label]
            check_outcomes(f"{size_name} {row.label}'s floor", outcomes, floor)
            if outcome_count(outcomes) != len(groups):
                raise SystemExit(f"{row.label}: {outcome_count(outcomes)} floor outcomes, {len(groups)} groups")
            rows[row.label] = {"floor": floor, "answer": answer, "answers": prepared.answers[row.label],
                               "outcomes": outcomes, "groups": groups}  # fmt: skip
        entries.append({"size": size_name, "task": name, "budget": budget.as_record(),
                        "evaluated": evaluated_examples(budget.as_record()), "data": prepared.data, "rows": rows,
                        "seconds": time.perf_counter() - start})  # fmt: skip
        shown = ", ".join(f"{label} {row['floor']:.1f} ({row['answer']})" for label, row in rows.items())
        print(f"{size_name} {name}: {shown}", flush=True)
    return entries


def main(args: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", choices=sorted(SIZES), default=list(DEFAULT_SIZES))
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), help="Default: every task.")
    parser.add_argument("--records_dir", type=Path, help="Default: benchmarks/results (or $SPANROBERTA_RECORDS_DIR).")
    options = parser.parse_args(args)
    started = start_run()
    if not (DATA / "squad" / "dev-v1.1.json").is_file():
        raise SystemExit(f"The floors are computed from the shared data in {DATA}, which is absent on this machine.")
    tasks = options.tasks or list(TASKS)
    with tempfile.TemporaryDirectory(prefix="task-floors-") as folder:
        entries = [entry for size in options.sizes for entry in size_floors(size, tasks, Path(folder))]
    path = write_record(BENCHMARK, {"sizes": options.sizes, "tasks": tasks}, {"floors": entries}, started=started,
                        results_dir=options.records_dir, name="floors")  # fmt: skip
    print(f"-> {path}")
    return path


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
