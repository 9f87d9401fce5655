"""Same seed, same score? Task-benchmark units run again (records under benchmarks/results/same-seed/, written by
the task benchmark of the commit each reran, with `--records_dir`), each set beside the committed record of the same
unit (size, task, seed, budget) measured from the same commit, with the kind of machine each ran on.

What the reruns can tell apart:
- a rerun on the same kind of machine as its commit's record that scores exactly what the record did shows the unit
  deterministic there; one that scores otherwise shows it is not;
- a record from another kind of machine (another vector instruction set: the BLAS and oneDNN kernels, and so the
  rounding, differ) can score otherwise for that reason alone;
- two reruns of one commit on one kind of machine that score otherwise show the unit not deterministic there;
- reruns of two commits on one kind of machine that score exactly the same show that the code between those
  commits did not move the score; when each reproduces its own commit's record and they differ, the code did.
"""

from __future__ import annotations

import itertools
from typing import Any

from benchmarks.tables.render import Context, fmt_date, markdown_table
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


def render_same_seed(context: Context) -> str:
    reruns = context.records(SAME_SEED)
    if not reruns:
        return f"No rerun of a task unit is committed yet ({RERUN_COMMAND})."
    committed = [record for record in context.records("tasks") if record["settings"].get("kind") == "unit"]
    rows, units = [], {}
    for rerun in reruns:
        twin = _twin(rerun, committed)
        units.setdefault(_unit(rerun), []).append((rerun, twin))
        size, task, seed = _unit(rerun)
        for row, score in _scores(rerun).items():
            before = _scores(twin).get(row) if twin else None
            rows.append([row, str(seed), size, fmt_date(rerun), machine_kind(rerun), f"{score:.2f}",
                         f"{before:.2f} ({context.link(twin)})" if twin else "no record of this commit",
                         machine_kind(twin) if twin else "-", "**yes**" if before == score else "**no**",
                         context.link(rerun)])  # fmt: skip
    header = ["row", "seed", "size", "rerun: date (UTC), commit", "its machine", "rerun's score",
              "its commit's record", "that record's machine", "the same score", "rerun record"]  # fmt: skip
    verdicts = " ".join(_verdict(unit, pairs) for unit, pairs in units.items())
    return markdown_table(header, rows) + "\n\n" + verdicts


def _verdict(unit: tuple, pairs: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> str:
    """What the reruns of one unit say: each against its commit's record, then the reruns against each other."""
    size, task, seed = unit
    sentences = [_against_its_record(rerun, twin) for rerun, twin in pairs]
    reproduced = {record_commit(rerun) for rerun, twin in pairs
                  if twin is not None and same_kind_of_machine(rerun, twin) and _scores(rerun) == _scores(twin)}
    for (first, _), (second, _) in itertools.combinations(pairs, 2):
        if not same_kind_of_machine(first, second):
            continue
        if record_commit(first) == record_commit(second):
            same = _scores(first) == _scores(second)
            sentences.append(f"Two reruns of `{record_commit(first)}` on one kind of machine scored "
                             + ("exactly the same." if same else "differently: the unit is not deterministic there."))
            continue
        commits = f"`{record_commit(first)}` and `{record_commit(second)}`"
        if _scores(first) == _scores(second):
            sentences.append(f"The reruns of {commits}, on one kind of machine, scored exactly the same: the code "
                             "between those commits did not move the score.")  # fmt: skip
        elif {record_commit(first), record_commit(second)} <= reproduced:
            sentences.append(f"The reruns of {commits} each scored exactly what their commit's record did, and "
                             "they differ: the code between those commits moved the score, not nondeterminism.")
        else:
            sentences.append(f"The reruns of {commits}, on one kind of machine, scored differently: the code "
                             "between those commits or the unit's nondeterminism moved it.")  # fmt: skip
    return f"{task}, seed {seed}, size `{size}`: " + " ".join(sentences)


def _against_its_record(rerun: dict[str, Any], twin: dict[str, Any] | None) -> str:
    at = f"At `{record_commit(rerun)}`"
    if twin is None:
        return f"{at}, no committed record to compare with."
    differences = ", ".join(f"{row} {score:.2f} against {_scores(twin)[row]:.2f}"
                            for row, score in _scores(rerun).items() if _scores(twin).get(row) != score)  # fmt: skip
    if not same_kind_of_machine(rerun, twin):
        outcome = f"it scored otherwise ({differences})" if differences else "it scored exactly the same"
        return (f"{at}, the record ran on another kind of machine ({machine_kind(twin)}) than the rerun "
                f"({machine_kind(rerun)}): {outcome}, and a difference there may come from the machine alone.")
    if not differences:
        return f"{at}, a rerun on the same kind of machine scored exactly what its record did."
    return (f"{at}, a rerun on the same kind of machine (as the records describe it) scored otherwise ({differences}): "
            "the unit is not deterministic there.")
