"""Runs an ablation's units in turn and writes its results.

Each unit runs in this process, by calling what its script runs (`config.script_command`: the package's pretraining
command or fine-tuning task) with the unit's flags.json, rather than as a subprocess. Under `accelerate launch
run_ablation.py ...` every process of the launch runs this same loop, so every unit is trained by all processes
together, exactly as `accelerate launch run_squad.py ...` would train it: the process group is made once and the Trainer
of each unit reuses it, the launcher's settings (processes, machines, mixed precision, DeepSpeed) apply to every unit,
and nothing has to rebuild a launcher command from the environment (the other way: process 0 spawning `accelerate
launch` per unit while the others wait, would have to reconstruct every launcher setting, and would pay the interpreter
and import start-up once per unit, a large part of a small unit). The cost: a crash of one unit (an out-of-memory error)
ends the ablation; the units done stay done, and the same command continues. The main process decides which units are
done (and broadcasts it), writes every file of the runner, and all processes wait for each other after every unit.

Preemption: a SIGTERM (or SIGUSR1) to the driver reaches the unit running in it, in the same process, which saves
and stops as any run does (`runs.preemption`), with exit status 75: the driver reports the unit as preempted, not
failed, and exits with 75 itself; the next run of the same command resumes that unit from its checkpoint
(`units.start_flags`). A signal between units, or after a unit's last step, stops the driver before the next unit,
with 75 too; one after the last unit lets the results be written, and the ablation is complete. As a launcher hides
75, the main process leaves `runs.preemption.PREEMPTED_FILE` in the ablation's folder, removed by the next run.
"""

from __future__ import annotations

import gc
import json
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import torch
from accelerate import PartialState
from accelerate.utils import broadcast_object_list

from ..errors import UserInputError
from ..runs.distributed import finish_processes, process_group_kept
from ..runs.output_folder import claim_output_folder
from ..runs.preemption import (PREEMPTED_EXIT_CODE, PREEMPTED_FILE, signal_noted_by_any_process,
                               write_preempted_mark)  # fmt: skip
from .config import AblationConfig, script_command
from .plots import plot_pretraining_losses, plot_scores
from .results import pretraining_figures, records, results_json, results_markdown
from .reports import scores
from .units import (FLAGS_FILE, MODEL_FOLDER, RESULT_FILE, Unit, identity, plan, read_result, script_of,
                    split_files, start_flags, token_slots_per_step, unit_flags, write_json_atomically)  # fmt: skip


SCRIPT = "run_ablation.py"


def holds_an_ablation(folder: Path) -> bool:
    """Whether `folder` holds what an ablation writes (units, results), for a folder written before the marker."""
    return (folder / "pretraining").is_dir() or (folder / "results.json").is_file()


class UnitFailed(UserInputError):
    """A unit's script stopped with a user error (its message follows); the finished units are kept."""


class Preempted(Exception):
    """A preemption signal stopped the ablation: in `unit` (which saved its checkpoint), or between units (None)."""

    def __init__(self, signal_name: str | None, unit: Unit | None):
        super().__init__(signal_name, unit)
        self.signal_name, self.unit = signal_name, unit


def run_ablation(config: AblationConfig, output_dir: str | Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Runs every unit of `config` not yet done in `output_dir`, then writes results.json, results.md and the plots
    there; returns the content of results.json."""
    state = PartialState()
    root = Path(output_dir)
    say = log if state.is_main_process else (lambda message: None)
    units = plan(config)
    done = _done_units(config, units, root, state)
    pretrainings = sum(unit.is_pretraining for unit in units)
    say(f"[ablation] {len(units)} units ({pretrainings} pretraining, {len(units) - pretrainings} fine-tuning): "
        f"{sum(done)} already done in {root}, {len(units) - sum(done)} to run.")
    task_files = _task_data(config, root)
    # The first thing written in the folder is the mark of whose it is; a refusal stops every process.
    claim_output_folder(root, SCRIPT, takes_lock=state.is_main_process)
    if state.is_main_process:
        (root / PREEMPTED_FILE).unlink(missing_ok=True)
        for path, content in task_files.items():
            write_json_atomically(path, content)
    state.wait_for_everyone()
    to_run = [unit for unit, finished in zip(units, done) if not finished]
    position = 1
    try:
        # Each script's main() would close the process group at its end; the next unit needs it.
        with process_group_kept():
            for position, unit in enumerate(to_run, start=1):
                signalled = signal_noted_by_any_process()
                if signalled is not None:
                    raise Preempted(signalled, None)
                say(f"[ablation] unit {position}/{len(to_run)}: {unit.describe()} ({len(to_run) - position} left "
                    "after it)")  # fmt: skip
                seconds = _run_unit(config, unit, root, state)
                say(f"[ablation] finished {unit.describe()} in {seconds:.0f} s")
    except Preempted as stopped:
        # Left: the unit stopped in, or the one it would have begun, and those after it.
        _exit_preempted(stopped, root, len(to_run) - position + 1, state, say)
    content = _write_results(config, units, root, say) if state.is_main_process else {}
    finish_processes()
    return content


def _done_units(config: AblationConfig, units: list[Unit], root: Path, state: PartialState) -> list[bool]:
    """Which units have their result on disk, as the main process sees it (every process gets its answer)."""
    answer: list[Any] = [None]
    if state.is_main_process:
        try:
            answer = [[read_result(config, unit, root) is not None for unit in units]]
        except UserInputError as error:  # a unit run with other settings: every process stops
            answer = [str(error)]
    if state.num_processes > 1:
        broadcast_object_list(answer)
    if isinstance(answer[0], str):
        raise UserInputError(answer[0])
    return answer[0]


def _exit_preempted(stopped: Preempted, root: Path, left: int, state: PartialState, say: Callable[[str], None]) -> None:
    """Ends a preempted ablation: the mark in its folder, one line, the process group closed, exit status 75."""
    if state.is_main_process:
        unit = stopped.unit.describe() if stopped.unit else None
        write_preempted_mark(root, {"signal": stopped.signal_name, "unit": unit, "units_left": left})
    where = (f"the {stopped.unit.describe()} was preempted and saved a checkpoint (its line above names it)"
             if stopped.unit else f"stopped by {stopped.signal_name} between two units")  # fmt: skip
    say(f"[ablation] {where}; {left} unit(s) left. Run the same command again to resume and go on (exit status "
        f"{PREEMPTED_EXIT_CODE}).")  # fmt: skip
    finish_processes()
    raise SystemExit(PREEMPTED_EXIT_CODE)


def _run_unit(config: AblationConfig, unit: Unit, root: Path, state: PartialState) -> float:
    folder = unit.folder(root)
    flags = unit_flags(config, unit, root, state.num_processes)
    start = start_flags(folder)
    state.wait_for_everyone()  # every process has looked at the folder before the main one writes in it
    if state.is_main_process:
        write_json_atomically(folder / FLAGS_FILE, flags)
    state.wait_for_everyone()
    began = time.perf_counter()
    _call_script(script_of(config, unit), folder / FLAGS_FILE, start, unit)
    seconds = time.perf_counter() - began
    state.wait_for_everyone()
    if state.is_main_process:
        result = {"arm": unit.arm, "pretraining_seed": unit.pretraining_seed, "task": unit.task, "seed": unit.seed,
                  "identity": identity(config, unit), "unit_seconds": round(seconds, 1), "start": _how_started(start),
                  **_outcome(config, unit, folder / MODEL_FOLDER, flags, state.num_processes)}  # fmt: skip
        write_json_atomically(folder / RESULT_FILE, result)
        if not unit.is_pretraining and not config.keep_finetuned_models:
            _delete_weights(folder / MODEL_FOLDER)
    state.wait_for_everyone()
    return seconds


def _how_started(start: dict[str, str]) -> str:
    if "resume_from_checkpoint" in start:
        return "resumed from the last checkpoint of an interrupted attempt"
    return "over the files of an interrupted attempt" if start else "afresh"


def _call_script(script: str, flags_file: Path, start: dict[str, str], unit: Unit) -> None:
    """What `script` runs (run_pretraining.py's command or a fine-tuning task's life cycle), on the flags file (then
    `start`'s flags); its user error becomes a UnitFailed, its preemption (exit status 75) a Preempted."""
    argv = [str(flags_file)] + [part for name, value in start.items() for part in (f"--{name}", value)]
    try:
        script_command(script)(argv)
    except SystemExit as stop:
        if stop.code == PREEMPTED_EXIT_CODE:
            raise Preempted(None, unit) from None
        if stop.code not in (None, 0):
            raise UnitFailed(
                f"the {unit.describe()} failed: {stop.code} The finished units are kept: fix the config and run the "
                f"same command again to continue (its flags: {flags_file})."
            ) from None
    finally:
        # The unit's model, optimizer and data go now, not when the next unit's are already allocated.
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _outcome(
    config: AblationConfig, unit: Unit, model_dir: Path, flags: dict[str, Any], world_size: int
) -> dict[str, Any]:
    """What result.json keeps: a pretraining's figures, or a fine-tuning's scores (0-100)."""
    if unit.is_pretraining:
        return {"figures": pretraining_figures(model_dir, token_slots_per_step(flags, world_size))}
    eval_results = json.loads((model_dir / "eval_results.json").read_text(encoding="utf-8"))
    return {"scores": scores(config.tasks[unit.task], eval_results)}


def _delete_weights(model_dir: Path) -> None:
    """A scored fine-tuning's weights and checkpoints: the bulk of an ablation's disk, not needed for the table."""
    # tmp-checkpoint-*: a save a kill cut short (runs.checkpoints).
    for path in [*model_dir.glob("*.safetensors"), *model_dir.glob("checkpoint-*"), *model_dir.glob("tmp-checkpoint-*")]:
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def _task_data(config: AblationConfig, root: Path) -> dict[Path, Any]:
    """The train and evaluation files of `split_by_article` tasks still to be written, by path: the first N articles
    of a SQuAD file train, the rest evaluate (../shared/data has SQuAD's dev set only). Written once; later runs
    reuse them. Every process checks the source, so that a bad one stops them all."""
    to_write: dict[Path, Any] = {}
    for task in config.tasks.values():
        if task.split_by_article is None:
            continue
        files = split_files(root, task.name)
        if all(Path(path).is_file() for path in files.values()):
            continue
        source = Path(task.split_by_article["file"])
        if not source.is_file():
            raise UserInputError(f"{config.path}: task {task.name!r}: split_by_article's file {source} does not exist.")
        try:
            squad = json.loads(source.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise UserInputError(f"{config.path}: task {task.name!r}: split_by_article's file {source}, line "
                                 f"{error.lineno}: not valid JSON ({error.msg}). Give a whole SQuAD JSON file.") from None
        first = task.split_by_article["train_articles"]
        articles = squad.get("data") if isinstance(squad, dict) else None
        if not isinstance(articles, list) or not 0 < first < len(articles):
            raise UserInputError(
                f"{config.path}: task {task.name!r}: split_by_article needs an official SQuAD file (a `data` list of "
                f"articles) with more than train_articles ({first}) articles, so that some are left to evaluate; "
                f"{source} is not one."
            )
        for split, articles in (("train_file", squad["data"][:first]), ("validation_file", squad["data"][first:])):
            to_write[Path(files[split])] = {"version": squad.get("version", "1.1"), "data": articles}
    return to_write


def _write_results(config: AblationConfig, units: list[Unit], root: Path, say: Callable[[str], None]) -> dict:
    finished = [read_result(config, unit, root) for unit in units]
    pretraining = {unit.arm_folder().as_posix(): result["figures"]
                   for unit, result in zip(units, finished) if unit.is_pretraining}  # fmt: skip
    rows = records(config, [result for unit, result in zip(units, finished) if not unit.is_pretraining])
    content = results_json(config, rows, pretraining)
    write_json_atomically(root / "results.json", content)
    markdown = results_markdown(config, rows, pretraining)
    (root / "results.md.tmp").write_text(markdown, encoding="utf-8")
    (root / "results.md.tmp").replace(root / "results.md")
    curves = {key: root / "pretraining" / key / MODEL_FOLDER / "trainer_state.json" for key in pretraining}
    plot_pretraining_losses(curves, root / "pretraining_loss.png")
    plot_scores(config, rows, root / "scores.png")
    say(f"[ablation] results in {root}/: results.json, results.md, pretraining_loss.png, scores.png\n\n{markdown}")
    return content
