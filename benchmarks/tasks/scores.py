#!/usr/bin/env python
"""The task benchmark: fine-tunes one checkpoint on every task the project has, from ../shared/data, each task
through its script's command line (run_squad.py, run_glue.py, run_race.py, run_relation.py, run_coref.py), and
records its score beside the task's floor and, for context, a published score. See benchmarks/TASKS.md.

    python -m benchmarks.parity.fetch_checkpoint   # once: all-MiniLM-L6-v2 into benchmarks/.cache
    python -m benchmarks.tasks.scores --size cpu   # each task aimed at ~20 minutes on 2 CPU cores
    python -m benchmarks.tasks.scores --size gpu   # the whole shared data, ~10 minutes a seed on one H100
    python -m benchmarks.tasks.scores --size toy --tasks rte semeval   # a tiny random model: a rehearsal
    python -m benchmarks.tasks.scores --size gpu --export_inputs .gpu/task-inputs   # each task's data, to carry
    python -m benchmarks.tasks.scores --size gpu --inputs .gpu/task-inputs --jobs 5  # there: 5 units at a time

The tasks and their budgets are in tasks/catalog.py, their splits and floors in tasks/preparation.py. Each (task, seed) unit writes one record,
`tasks` with `settings.kind == "unit"`, under benchmarks/results/tasks/ when it finishes, and a unit whose record
exists (same size, task, seed, checkpoint and budget) is skipped: an interrupted run goes on where it stopped. The
tables are generated from the records (tables/task_benchmark.py, `python -m benchmarks.tables.generate`).

`--export_inputs` writes what each task's script reads at a size (its data, sampled and split, and the floors) into
a folder of its own per task, every file inside it, so that a machine without ../shared/data runs the units from it
(`--inputs`): the GPU check carries them (benchmarks/gpu/offline/build.sh). Inputs exported for another budget than
the catalog's are refused.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from benchmarks import ROOT  # noqa: E402
from benchmarks.common import (CHECKPOINT, CHECKPOINT_NAME, DATA, as_flags, script_environment,  # noqa: E402
                               tiny_checkpoint)  # fmt: skip
from benchmarks.tasks.catalog import SIZES, TASKS, Task  # noqa: E402
from benchmarks.tasks.preparation import Budget, Prepared  # noqa: E402
from benchmarks.tasks.outcomes import check_outcomes, unit_outcomes  # noqa: E402
from spanroberta.records import RunStart, read_records, start_run, write_record  # noqa: E402

BENCHMARK = "tasks"
TOY_CHECKPOINT = "toy: a randomly initialised 2-layer SpanRoberta (hidden 32, 2 heads) with a 1,000-id byte-level BPE"
# Given to every script: a 10% warm-up, AdamW's weight decay, nothing saved or reported. The schedule is the
# script's: linear decay after the warm-up, except RACE's, RoBERTa's constant rate, under which the warm-up flag
# has no effect.
COMMON_FLAGS = {"warmup_steps": "0.1", "weight_decay": "0.01", "save_strategy": "no", "report_to": "none",
                "logging_steps": "0.05", "per_device_eval_batch_size": "64"}  # fmt: skip


def toy_checkpoint(folder: Path) -> Path:
    """A tiny random SpanRoberta of 2 layers with a byte-level BPE trained on WikiText's validation text: what the
    toy size fine-tunes, built in seconds."""
    from spanroberta.data.tokenizer import train_byte_level_bpe

    lines = (DATA / "corpus" / "wiki.valid.raw").read_text(encoding="utf-8").splitlines()[:400]
    tokenizer = train_byte_level_bpe(lines, vocab_size=1000, show_progress=False)
    return tiny_checkpoint(tokenizer, folder, num_hidden_layers=2, max_span_targets=4, sbo_position_embedding_size=8)


def script_flags(task: Task, budget: Budget, prepared: Prepared, model: Path, seed: int, size_flags: dict,
                 output: Path) -> list[str]:  # fmt: skip
    """The script's command line: the data, the budget, the seed; the task's options win over the common ones."""
    flags = {**COMMON_FLAGS, **size_flags, "learning_rate": budget.learning_rate,
             "per_device_train_batch_size": budget.batch, "num_train_epochs": budget.epochs, "seed": seed,
             **budget.options}  # fmt: skip
    return [str(ROOT / task.script), "--model_name_or_path", str(model), "--output_dir", str(output),
            "--do_train", "--do_eval", *prepared.flags, *as_flags(flags)]  # fmt: skip


def run_script(arguments: list[str], log: Path) -> float:
    """Runs a task's script in a process of its own (the way a user runs it); returns its wall seconds. A failed
    run stops the benchmark with the end of its log."""
    start = time.perf_counter()
    with open(log, "w", encoding="utf-8") as output:
        done = subprocess.run([sys.executable, *arguments], cwd=ROOT, env=script_environment(), stdout=output,
                              stderr=subprocess.STDOUT)  # fmt: skip
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        tail = log.read_text(encoding="utf-8")[-3000:]
        raise SystemExit(f"{Path(arguments[0]).name} failed (exit {done.returncode}); the end of its log {log}:\n"
                         f"{tail}")
    return seconds


def unit_results(task: Task, prepared: Prepared, output: Path, wall_seconds: float) -> dict[str, Any]:
    """The record's results: each row's score and floor (0-100) with the score of each answer the floor is the best
    of and, where the script writes them, its per-example outcomes (tasks/outcomes.py), which the tables resample
    for the evaluation-sample noise; every value of the script's results files, the training loss (its mean and its
    logged curve) and seconds, and the unit's wall seconds (the script's process, data loading included)."""
    files = {row.report.results_file for row in task.rows}
    scores = {name: json.loads((output / name).read_text()) for name in sorted(files)}
    for row in task.rows:
        if row.metric not in scores[row.report.results_file]:
            raise SystemExit(f"{task.script} wrote no {row.metric} to {output / row.report.results_file} (it holds "
                             f"{', '.join(scores[row.report.results_file])}); the task's row in tasks/catalog.py names "
                             "the key its score is read from.")  # fmt: skip
    rows = {row.label: {"metric": row.metric, "score": row.scale * scores[row.report.results_file][row.metric],
                        "floor": prepared.floors[row.label], "floor_answers": prepared.answers.get(row.label, {})}
            for row in task.rows}  # fmt: skip
    for label, outcomes in unit_outcomes(task, output).items():
        check_outcomes(label, outcomes, rows[label]["score"])
        rows[label]["outcomes"] = outcomes
    trained = json.loads((output / "train_results.json").read_text())
    return {"rows": rows, "scores": scores, "train_loss": trained.get("train_loss"), "loss_curve": loss_curve(output),
            "train_runtime": trained.get("train_runtime"), "wall_seconds": wall_seconds}  # fmt: skip


def loss_curve(output: Path) -> list[list[float]]:
    """The training loss the Trainer logged, as [epoch, loss] pairs (trainer_state.json): how far from done a
    unit stopped learning."""
    state = output / "trainer_state.json"
    history = json.loads(state.read_text())["log_history"] if state.is_file() else []
    return [[entry["epoch"], entry["loss"]] for entry in history if "loss" in entry]


def finished(records: list[dict], settings: dict[str, Any], budget: Budget) -> dict | None:
    """The record of a unit already run with these settings (size, task, seed, checkpoint) and this budget, if
    any: a changed budget runs the unit again."""
    keys = ("kind", "size", "task", "seed", "checkpoint")
    return next((r for r in records if all(r["settings"].get(key) == settings[key] for key in keys)
                 and budget.matches(r["settings"].get("budget", {}))), None)  # fmt: skip


def kept_output(keep_outputs: Path, size_name: str, task: Task, seed: int) -> Path:
    """Where --keep_outputs keeps a unit's output folder (the fine-tuned model, its tokenizer and scores)."""
    return keep_outputs / size_name / f"{task.name}-seed{seed}"


def unrecorded_seeds(task: Task, size_name: str, seeds: list[int], checkpoint: str,
                     records: list[dict]) -> list[int]:  # fmt: skip
    """The seeds of a task with none of `records` of this size, checkpoint and the size's budget (`finished`)."""
    base = {"kind": "unit", "size": size_name, "task": task.name, "checkpoint": checkpoint}
    budget = SIZES[size_name].budgets[task.name]
    return [seed for seed in seeds if not finished(records, {**base, "seed": seed}, budget)]


INPUTS_MANIFEST = "inputs.json"  # an exported task's flags, floors and data description (--export_inputs)


def export_inputs(task: Task, size_name: str, inputs: Path) -> Path:
    """Writes what `task`'s script reads at this size into `inputs`/<task>: the prepared data, a copy of each file
    or folder of ../shared/data its flags name, and the manifest (`INPUTS_MANIFEST`) with those flags relative to
    the folder, the budget they were prepared for, the floors and the data description."""
    folder = inputs / task.name
    if folder.exists():
        raise SystemExit(f"--export_inputs would write into {folder}, which exists: remove it or give another folder.")
    folder.mkdir(parents=True)
    budget = SIZES[size_name].budgets[task.name]
    prepared = task.prepare(folder, budget)
    flags: list[str | dict[str, str]] = []
    for value in prepared.flags:
        path = Path(value)
        if not (path.is_absolute() and path.exists()):
            flags.append(value)
            continue
        if not path.is_relative_to(folder):  # shared data read in place: copied, once however often it is named
            if not path.is_relative_to(DATA):
                raise SystemExit(f"{task.name}'s flags name {path}, outside {DATA} and the task's folder {folder}: "
                                 "--export_inputs copies only the shared data, so the task's prepare "
                                 "(tasks/preparation.py) must write whatever else its script reads into its folder.")
            copy = folder / "data" / path.relative_to(DATA)
            if not copy.exists():
                copy_writable(path, copy)
            path = copy
        flags.append({"path": str(path.relative_to(folder))})
    manifest = {"size": size_name, "task": task.name, "budget": budget.as_record(), "flags": flags,
                "floors": prepared.floors, "data": prepared.data, "answers": prepared.answers}  # fmt: skip
    (folder / INPUTS_MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return folder


def copy_writable(source: Path, target: Path) -> None:
    """A copy of a file or folder that its owner can write and delete, whatever the modes of the source (the shared
    data is read-only)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, copy_function=shutil.copyfile)
    else:
        shutil.copyfile(source, target)
    for path in (target, *target.rglob("*")):
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


def exported_inputs(task: Task, size_name: str, inputs: Path) -> Prepared:
    """The Prepared that `export_inputs` wrote for `task` under `inputs`, its paths resolved there; refused where
    it was exported for another size or budget than the catalog's."""
    folder = inputs / task.name
    if not (folder / INPUTS_MANIFEST).is_file():
        raise SystemExit(f"--inputs {inputs} holds no inputs of {task.name} ({folder / INPUTS_MANIFEST} is absent): "
                         f"export them with `python -m benchmarks.tasks.scores --size {size_name} --tasks {task.name} "
                         f"--export_inputs {inputs}`, or leave {task.name} out of --tasks.")  # fmt: skip
    manifest = json.loads((folder / INPUTS_MANIFEST).read_text(encoding="utf-8"))
    budget = SIZES[size_name].budgets[task.name]
    if manifest["size"] != size_name or not budget.matches(manifest["budget"]):
        raise SystemExit(f"The inputs of {task.name} in {folder} were exported for the {manifest['size']} size's "
                         f"budget {manifest['budget']}, not the catalog's {size_name} budget {budget.as_record()}: "
                         "their units would record another budget than they ran. Export them again.")  # fmt: skip
    flags = [str(folder / value["path"]) if isinstance(value, dict) else value for value in manifest["flags"]]
    return Prepared(flags, manifest["floors"], manifest["data"], manifest["answers"])


def run_unit(task: Task, seed: int, prepared: Prepared, size_name: str, model: Path, checkpoint: str, folder: Path,
             records_dir: Path | None, process: RunStart, keep_outputs: Path | None = None) -> None:  # fmt: skip
    """One seed of one task: its script run on the prepared data, then its record (its output folder under
    `keep_outputs` where given, claimed before the run so that no other process writes it, else in `folder`,
    deleted with the run)."""
    size = SIZES[size_name]
    budget = size.budgets[task.name]
    started = start_run(process)
    output = folder / f"seed{seed}"
    if keep_outputs:
        output = kept_output(keep_outputs, size_name, task, seed)
        output.mkdir(parents=True, exist_ok=False)  # claimed: a second process stops here, not overwriting it
    arguments = script_flags(task, budget, prepared, model, seed, size.flags, output)
    wall = run_script(arguments, folder / f"seed{seed}.log")
    results = unit_results(task, prepared, output, wall)
    settings = {"kind": "unit", "size": size_name, "task": task.name, "checkpoint": checkpoint, "seed": seed,
                "script": task.script, "budget": budget.as_record(), "size_flags": size.flags, "data": prepared.data,
                "model_path": str(model)}  # fmt: skip
    path = write_record(BENCHMARK, settings, results, started=started, results_dir=records_dir,
                        name=f"{size_name}-{task.name}-seed{seed}")  # fmt: skip
    shown = ", ".join(f"{label} {row['score']:.1f} (floor {row['floor']:.1f})"
                      for label, row in results["rows"].items())  # fmt: skip
    print(f"{task.name} seed {seed}: {shown}, {wall:.0f} s -> {path}", flush=True)


def run_concurrently(units: list[tuple[str, int]], run: Callable[[str, int], None], jobs: int) -> None:
    """Runs `run(task, seed)` for every unit, `jobs` at a time (each a process of its own, sharing the machine). A
    unit that fails, or an interrupt, stops the run: the units not started are dropped, the ones running finish and
    are recorded."""
    if jobs == 1:  # in this thread, as a plain loop: a failure or Ctrl-C stops it at once
        for name, seed in units:
            run(name, seed)
        return
    pool = ThreadPoolExecutor(max_workers=jobs)
    futures = [pool.submit(run, name, seed) for name, seed in units]
    try:
        for future in as_completed(futures):
            future.result()  # a unit's failure, raised here as soon as it happens
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        print("The task benchmark stops: the units not started are dropped, the ones running finish and are "
              "recorded.", file=sys.stderr, flush=True)  # fmt: skip
        raise
    pool.shutdown()


def parse_args(args: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="cpu")
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), help="Default: every task.")
    parser.add_argument("--seeds", nargs="+", type=int, help="Default: each task's seeds at the size.")
    parser.add_argument("--model", type=Path, default=CHECKPOINT,
                        help="The checkpoint to fine-tune (default: all-MiniLM-L6-v2 of `make checkpoint`, or "
                             "$SPANROBERTA_MINILM); the toy size builds its own.")  # fmt: skip
    parser.add_argument("--records_dir", type=Path, help="Default: benchmarks/results (or $SPANROBERTA_RECORDS_DIR).")
    parser.add_argument("--keep_outputs", type=Path,
                        help="Keep each unit's output folder (the fine-tuned model, its tokenizer and scores) "
                             "under this folder, as <size>/<task>-seed<seed>; by default it is deleted with the "
                             "run.")  # fmt: skip
    parser.add_argument("--jobs", type=int, default=1,
                        help="Units run at a time, each a process of its own (on one GPU they share it).")
    inputs = parser.add_mutually_exclusive_group()
    inputs.add_argument("--export_inputs", type=Path,
                        help="Write each task's inputs at this size into this folder (a folder a task) and stop, "
                             "running nothing: for a machine without ../shared/data (--inputs).")  # fmt: skip
    inputs.add_argument("--inputs", type=Path,
                        help="Read each task's inputs from this folder, as --export_inputs wrote them, instead of "
                             "preparing them from ../shared/data.")  # fmt: skip
    options = parser.parse_args(args)
    if options.jobs < 1:
        parser.error(f"--jobs must be 1 or more, not {options.jobs}.")
    options.tasks = options.tasks or list(TASKS)
    for name in ("keep_outputs", "export_inputs", "inputs"):
        if getattr(options, name):  # the scripts run from the repository root
            setattr(options, name, getattr(options, name).resolve())
    return options


def main(args: list[str] | None = None) -> None:
    options = parse_args(args)
    process = start_run()
    if not options.inputs and not (DATA / "squad" / "dev-v1.1.json").is_file():
        raise SystemExit(f"The task benchmark reads every task's data from {DATA}, which is absent on this machine "
                         "(--inputs reads inputs exported elsewhere).")  # fmt: skip
    if options.export_inputs:
        for name in options.tasks:
            print(f"{name}: inputs at the {options.size} size -> "
                  f"{export_inputs(TASKS[name], options.size, options.export_inputs)}", flush=True)  # fmt: skip
        return
    toy = options.size == "toy"
    if not toy and not (options.model / "config.json").is_file():
        raise SystemExit(f"No checkpoint at {options.model}: run `make checkpoint` (all-MiniLM-L6-v2 into "
                         "benchmarks/.cache), point $SPANROBERTA_MINILM at one, or pass --model.")  # fmt: skip
    checkpoint = TOY_CHECKPOINT if toy else CHECKPOINT_NAME if options.model == CHECKPOINT else str(options.model)
    records = read_records(BENCHMARK, options.records_dir)
    seeds = {name: options.seeds or list(SIZES[options.size].seeds_of(name)) for name in options.tasks}
    todo = {name: unrecorded_seeds(TASKS[name], options.size, seeds[name], checkpoint, records)
            for name in options.tasks}  # fmt: skip
    if options.keep_outputs:
        check_kept_outputs(options.keep_outputs, options.size, todo)
    with tempfile.TemporaryDirectory(prefix="bench-tasks-") as folder:
        work = Path(folder)
        model = toy_checkpoint(work / "toy-model") if toy else options.model
        # Each task's data, prepared (or read from --inputs) once for all its seeds.
        prepared = {}
        for name in todo:
            skipped = [seed for seed in seeds[name] if seed not in todo[name]]
            if skipped:
                kept = "; nothing is kept for them (--records_dir a fresh folder runs them again)"
                print(f"{name}: seed{'s' if len(skipped) > 1 else ''} {', '.join(map(str, skipped))} recorded "
                      f"already, not run again{kept if options.keep_outputs else ''}", flush=True)  # fmt: skip
            if todo[name]:
                (work / name).mkdir()
                prepared[name] = (exported_inputs(TASKS[name], options.size, options.inputs) if options.inputs
                                  else TASKS[name].prepare(work / name, SIZES[options.size].budgets[name]))  # fmt: skip
        # The units seed by seed, so that a run cut short has every task's first seeds.
        every_seed = list(dict.fromkeys(seed for found in seeds.values() for seed in found))
        units = [(name, seed) for seed in every_seed for name, found in todo.items() if seed in found]
        run_concurrently(units, lambda name, seed: run_unit(
            TASKS[name], seed, prepared[name], options.size, model, checkpoint, work / name, options.records_dir,
            process, options.keep_outputs), options.jobs)  # fmt: skip


def check_kept_outputs(keep_outputs: Path, size_name: str, todo: dict[str, list[int]]) -> None:
    """Stops before any unit runs where --keep_outputs would write a unit's model into a folder that exists."""
    taken = [path for name, seeds in todo.items() for seed in seeds
             if (path := kept_output(keep_outputs, size_name, TASKS[name], seed)).exists()]  # fmt: skip
    if taken:
        raise SystemExit(f"--keep_outputs would write into {', '.join(map(str, taken))}, which already exist: a unit "
                         "writes its model there, over what is in it. Move them away or give another folder.")


if __name__ == "__main__":
    main()
