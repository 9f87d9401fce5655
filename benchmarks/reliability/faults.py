#!/usr/bin/env python
"""Faults survived, counted: kills a tiny pretraining run (benchmarks/reliability/tiny_runs.py: plain, DDP on 2 CPU
processes, ZeRO-2, ZeRO-3) at random moments, resumes it with `--resume_from_checkpoint true`, and compares its
final weights and loss curve with those of an uninterrupted run.

The moments (`MOMENTS`, taken in turn, each trial's checkpoint and delay drawn from `--seed`):
- random: SIGKILL to every process of the run at a random time after one of its checkpoints is complete;
- during-save: SIGKILL as soon as a checkpoint is being saved (its temporary folder, tmp-checkpoint-N, exists);
- during-evaluation: SIGKILL as the Trainer prints that an evaluation starts;
- disk-full: the file size limit of every process of the run (RLIMIT_FSIZE, what `ulimit -f` sets) lowered to
  1 KiB once a checkpoint is complete, so that its next save fails as on a full disk;
- corrupt-newest: SIGKILL once a checkpoint is complete, then one weight or state file of the newest complete
  checkpoint truncated, emptied or garbled;
and, chosen with `--moments` (benchmarks/reliability/cluster_moments.py), sigterm (a SIGTERM during training, to
be saved and resumed), second-run (a second run into the folder of a run in progress, to be refused) and
changed-batch (a resume with another batch size per device, to be refused; then resumed as it was) and
full-filesystem (a real full disk: the output folder on a small tmpfs of its own, filled up; needs root to mount).
The record (benchmarks/results/reliability/, settings.kind "faults") counts the faults that hit a run, the runs
that then resumed to their end, those that resumed identically (bit-identical weights, the same loss at every
step), and the runs and checkpoints lost, with each trial's details; each moment's own checks (the preempted run's
exit status 75 and checkpoint, a refusal's line, the half-written checkpoints and tracebacks a full disk left) are
summed under `checks`, by engine and moment.

    python -m benchmarks.reliability.faults --engines plain ddp zero2 zero3 --trials 10
    python -m benchmarks.reliability.faults --engines plain ddp zero2 zero3 --moments sigterm --trials 10
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.reliability import tiny_runs
from benchmarks.reliability.cluster_moments import CLUSTER_MOMENTS, inject_cluster, unmount_filesystem
from benchmarks.reliability.injection import MARKED_RUN, MOMENTS, complete_checkpoints, inject
from benchmarks.reliability.outcomes import completed_outcome, output_tail
from spanroberta.records import start_run, write_record

FAULT_RUN = tiny_runs.TinyRun(max_steps=12, save_steps=3, eval_steps=3)


def trial(engine: str, moment: str, flags: list[str], reference: Path, folder: Path, rng: random.Random) -> dict:
    """One run of `engine` hit by `moment`'s fault in `folder`, then resumed and compared with `reference`."""
    strike = inject_cluster if moment in CLUSTER_MOMENTS else inject
    fault = strike(moment, engine, [*flags, "--output_dir", str(folder)], folder, FAULT_RUN, rng)
    kept = set(fault["complete_after_fault"]) - {fault.get("corrupted_checkpoint")}
    if fault.get("needs_resume", True):
        resume_flags = [*flags, "--output_dir", str(folder), "--resume_from_checkpoint", "true"]
        result = tiny_runs.launch(engine, resume_flags, MARKED_RUN)
        resumed = completed_outcome(result)
        if not resumed["clean"]:
            resumed["output_tail"] = output_tail(result.stdout)
    else:  # the run went on by itself: its own ending stands for the resume's
        resumed = fault.get("first_run_ending", {"clean": False})
    comparison = tiny_runs.compare_with(folder, reference)
    # A checkpoint is lost when it was complete after the fault (and not the one corrupted on purpose), the
    # uninterrupted run keeps it too (save_total_limit), and it is not complete after the resume.
    lost = sorted((kept & set(complete_checkpoints(reference))) - set(complete_checkpoints(folder)))
    unmount_filesystem(folder)
    return {"engine": engine, "moment": moment, "fault": fault, "resume": resumed, **comparison,
            "checkpoints_lost": lost}  # fmt: skip


def tally(trials: list[dict[str, Any]]) -> dict[str, int]:
    """The counts of a record: `faults` (trials the fault hit: a kill, or a save failed on the full disk),
    `survived` (of those, resumed to the end with a clean exit), `identical` (survived with bit-identical weights
    and the same losses), `runs_lost` (hit, and no final model after the resume), `checkpoints_lost`, `not_hit`
    (the run ended before the fault could hit it: not counted as a fault), and `checks`: each count of the hit
    trials' moment-specific checks summed (present when some trial has them)."""
    hit = [entry for entry in trials if entry["fault"]["hit"]]
    survived = [entry for entry in hit if entry["resume"]["clean"] and entry["finished"]]
    return {
        "trials": len(trials),
        "faults": len(hit),
        "survived": len(survived),
        "identical": sum(entry["same_weights"] and entry["same_losses"] for entry in survived),
        "runs_lost": sum(not entry["finished"] for entry in hit),
        "checkpoints_lost": sum(len(entry["checkpoints_lost"]) for entry in hit),
        "not_hit": len(trials) - len(hit),
        **({"checks": checks} if (checks := summed_checks(hit)) else {}),
    }


def summed_checks(trials: list[dict[str, Any]]) -> dict[str, int]:
    """The counts of `trials`' faults (`fault["counts"]`), each summed over the trials that have it."""
    sums: dict[str, int] = {}
    for entry in trials:
        for name, value in entry["fault"].get("counts", {}).items():
            sums[name] = sums.get(name, 0) + int(value)
    return sums


def tallies(trials: list[dict[str, Any]]) -> dict[str, Any]:
    """`tally` over all trials, by engine, by moment, and by both ("engine moment")."""
    by = {"engine": {}, "moment": {}, "engine_moment": {}}
    for key, groups in by.items():
        for entry in trials:
            name = f"{entry['engine']} {entry['moment']}" if key == "engine_moment" else entry[key]
            groups.setdefault(name, []).append(entry)
    return {"all": tally(trials), **{f"by_{key}": {name: tally(group) for name, group in groups.items()}
                                     for key, groups in by.items()}}  # fmt: skip


def engine_trials(engine: str, moments: list[str], count: int, work: Path, setup: dict[str, str],
                  rng: random.Random) -> dict[str, Any]:  # fmt: skip
    """`count` trials of `engine`, `moments` taken in turn, after its uninterrupted run."""
    flags = FAULT_RUN.flags(setup, engine)
    reference = work / engine / "uninterrupted"
    result = tiny_runs.launch(engine, [*flags, "--output_dir", str(reference)], MARKED_RUN)
    outcome = completed_outcome(result)
    if not outcome["clean"]:
        return {"reference": {**outcome, "output_tail": output_tail(result.stdout)}, "trials": []}
    done = []
    for index in range(count):
        moment = moments[index % len(moments)]
        folder = work / engine / f"trial-{index}"
        done.append(trial(engine, moment, flags, reference, folder, rng))
        entry = done[-1]
        print(f"{engine} {moment}: hit={entry['fault']['hit']} resumed={entry['resume']['clean']} "
              f"identical={entry['same_weights'] and entry['same_losses']}", flush=True)  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)
    return {"reference": outcome, "trials": done}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", nargs="+", default=list(tiny_runs.ENGINES), choices=tiny_runs.ENGINES)
    parser.add_argument("--moments", nargs="+", default=list(MOMENTS), choices=[*MOMENTS, *CLUSTER_MOMENTS],
                        help="the moments struck, in turn (default: the kills, the full disk and the corruption)")
    parser.add_argument("--trials", type=int, default=None, help="faults per engine, the moments in turn (default: "
                        "one per moment)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="draws each trial's checkpoint and delay")
    parser.add_argument("--results-dir", default=None, help="where the record goes (default benchmarks/results)")
    options = parser.parse_args(argv)
    started = start_run()
    rng = random.Random(options.seed)
    count = len(options.moments) if options.trials is None else options.trials
    with tempfile.TemporaryDirectory(prefix="faults-") as work:
        setup = tiny_runs.prepare(Path(work) / "setup")
        engines = {engine: engine_trials(engine, options.moments, count, Path(work), setup, rng)
                   for engine in options.engines}  # fmt: skip
    trials = [entry for engine in engines.values() for entry in engine["trials"]]
    references = {engine: run["reference"] for engine, run in engines.items()}
    settings = {"kind": "faults", "engines": options.engines, "trials_per_engine": count,
                "moments": options.moments, "seed": options.seed,
                "tiny_run": dataclasses.asdict(FAULT_RUN)}  # fmt: skip
    results = {"counts": tallies(trials), "references": references, "trials": trials}
    path = write_record("reliability", settings, results, started=started, name="faults",
                        results_dir=options.results_dir)  # fmt: skip
    counts = results["counts"]["all"]
    print(f"{counts['faults']} faults: {counts['survived']} survived, {counts['identical']} resumed identically, "
          f"{counts['runs_lost']} runs and {counts['checkpoints_lost']} checkpoints lost. Record: {path}")  # fmt: skip
    return results


if __name__ == "__main__":
    main()
