"""Same seed, same score? Task-benchmark units run again (records under benchmarks/results/same-seed/, written by
the task benchmark of the commit each reran, with `--records_dir`), each set beside the committed record of the same
unit (size, task, seed, budget) measured from the same commit. A rerun that scores what its commit's record scored
shows that the unit is deterministic there; when every rerun does and the committed records of two commits differ,
the code between those commits moved the score, not the machine."""

from __future__ import annotations

from typing import Any

from benchmarks.tables.format import Context, fmt_date, markdown_table
from spanroberta.records import record_commit

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


def _scores(record: dict[str, Any]) -> dict[str, float]:
    return {row: entry["score"] for row, entry in record["results"]["rows"].items()}


def render_same_seed(context: Context) -> str:
    reruns = context.records(SAME_SEED)
    if not reruns:
        return f"No rerun of a task unit is committed yet ({RERUN_COMMAND})."
    committed = [record for record in context.records("tasks") if record["settings"].get("kind") == "unit"]
    rows, outcomes = [], {}
    for rerun in reruns:
        twin = _twin(rerun, committed)
        size, task, seed = _unit(rerun)
        scores = _scores(rerun)
        # A unit scores the same only when every row of it does (LitBank and GAP come from one model).
        outcomes.setdefault((size, task, seed), {})[record_commit(rerun)] = (bool(twin) and _scores(twin) == scores,
                                                                             twin)  # fmt: skip
        for row, score in scores.items():
            before = _scores(twin).get(row) if twin else None
            same = before is not None and before == score
            rows.append([row, str(seed), size, fmt_date(rerun), f"{score:.2f}",
                         f"{before:.2f} ({context.link(twin)})" if twin else "no record of this commit",
                         "**yes**" if same else "**no**", context.link(rerun)])  # fmt: skip
    header = ["row", "seed", "size", "rerun: date (UTC), commit", "rerun's score", "its commit's record",
              "the same", "rerun record"]  # fmt: skip
    return markdown_table(header, rows) + "\n\n" + " ".join(_verdict(unit, by_commit)
                                                           for unit, by_commit in outcomes.items())  # fmt: skip


def _verdict(unit: tuple, by_commit: dict[str, tuple[bool, dict | None]]) -> str:
    """What the reruns of one unit say about its scores across commits."""
    size, task, seed = unit
    name = f"{task}, seed {seed}, size `{size}`"
    unmatched = [commit for commit, (same, twin) in by_commit.items() if twin is None]
    moved = [commit for commit, (same, twin) in by_commit.items() if twin is not None and not same]
    if moved:
        return (f"{name}: a rerun at {', '.join(f'`{c}`' for c in moved)} scored otherwise than that commit's record, "
                "so the unit is not deterministic on this machine.")
    if unmatched:
        return f"{name}: no committed record of {', '.join(f'`{c}`' for c in unmatched)} to compare with."
    twins = [twin for _, twin in by_commit.values()]
    differ = len({tuple(sorted(_scores(twin).items())) for twin in twins}) > 1
    commits = " and ".join(f"`{commit}`" for commit in by_commit)
    if differ:
        return (f"{name}: every rerun scored exactly what its commit's record scored, and the records of {commits} "
                "differ: the code between those commits moved the score, not nondeterminism.")
    return f"{name}: every rerun scored exactly what its commit's record scored ({commits})."
