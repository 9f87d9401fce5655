"""Same seed, same score? Task-benchmark units run again (records under benchmarks/results/same-seed/, written by
the task benchmark of the commit each reran, with `--records_dir`), each set beside the committed record of the same
unit (size, task, seed, budget) measured from the same commit, with the kind of machine each ran on.

What the reruns can tell apart (benchmarks/RESULTS.md reads them by hand beside the table):
- a rerun on the same kind of machine as its commit's record that scores exactly what the record did shows the unit
  deterministic there; one that scores otherwise shows it is not;
- a record from another kind of machine (another vector instruction set: the BLAS and oneDNN kernels, and so the
  rounding, differ) can score otherwise for that reason alone;
- two reruns of one commit on one kind of machine that score otherwise show the unit not deterministic there;
- reruns of two commits on one kind of machine that score exactly the same show that the code between those
  commits did not move the score; when each reproduces its own commit's record and they differ, the code did.
"""

from __future__ import annotations

from typing import Any

from benchmarks.tables.render import Column, Context, Table, fmt_date
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


def same_kind_of_machine(one: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether two records ran on the same kind of machine, as far as both describe it (older records name fewer of
    the machine's traits: only those both name are compared)."""
    first, second = one.get("machine", {}), other.get("machine", {})
    named = [trait for trait in first.keys() & second.keys() if None not in (first[trait], second[trait])]
    return all(first[trait] == second[trait] for trait in named)


def machine_kind(record: dict[str, Any]) -> str:
    """The record's machine in a few words: its GPUs where it ran on one, else its CPU, and its vector instructions
    (older records name only whether it has AVX-512 BF16)."""
    machine = record.get("machine", {})
    if "vector_instructions" not in machine or machine.get("gpu"):
        return machine_class(record)
    cpu = machine.get("cpu", "?")
    if "cpu_family_model" in machine:
        cpu += f" (family/model {machine['cpu_family_model']})"
    return f"{cpu}, {machine['vector_instructions'] or 'no AVX2'}"


def machine_class(record: dict[str, Any]) -> str:
    """The record's machine as every record describes it, older ones included: its GPUs where it ran on one, else
    its CPU's name and whether it has AVX-512 BF16 (with which the oneDNN kernels, and so the rounding, differ).
    Records that name more (`machine_kind`) can tell apart machines this puts in one class."""
    machine = record.get("machine", {})
    if not machine:
        return "not recorded"
    if machine.get("gpu"):
        return machine["gpu"]
    avx512_bf16 = "avx512_bf16" in (machine.get("bf16_instructions") or [])
    return f"{machine.get('cpu', '?')}, {'AVX-512 BF16' if avx512_bf16 else 'no AVX-512 BF16'}"


def _rows(context: Context) -> list[tuple[dict[str, Any], dict[str, Any] | None, str, float]]:
    """Per rerun and row: the rerun, its commit's committed record (None without one), the row and its score."""
    committed = [record for record in context.records("tasks") if record["settings"].get("kind") == "unit"]
    return [(rerun, twin, row, score) for rerun in context.records(SAME_SEED)
            for twin in (_twin(rerun, committed),) for row, score in _scores(rerun).items()]  # fmt: skip


def _before(row: tuple, context: Context) -> str:
    rerun, twin, label, _ = row
    return "no record of this commit" if twin is None else f"{_scores(twin).get(label):.2f} ({context.link(twin)})"


SAME_SEED_TABLE = Table(_rows, [
    Column.of("row", lambda row: row[2]), Column.of("seed", lambda row: str(_unit(row[0])[2])),
    Column.of("size", lambda row: _unit(row[0])[0]),
    Column.of("rerun: date (UTC), commit", lambda row: fmt_date(row[0])),
    Column.of("its machine", lambda row: machine_kind(row[0])), Column.of("rerun's score", lambda row: f"{row[3]:.2f}"),
    Column("its commit's record", _before),
    Column.of("that record's machine", lambda row: "-" if row[1] is None else machine_kind(row[1])),
    Column.of("same kind of machine", lambda row: "-" if row[1] is None
              else "yes" if same_kind_of_machine(row[0], row[1]) else "no"),
    Column.of("the same score", lambda row: "**yes**" if row[1] and _scores(row[1]).get(row[2]) == row[3] else "**no**"),
    Column("rerun record", lambda row, context: context.link(row[0])),
], f"No rerun of a task unit is committed yet ({RERUN_COMMAND}).")  # fmt: skip
