"""The GPU check's plan (check.py runs it): its stages in order of value, each with its command, its own time limit
and the records that show it done, at GPU size or at the CPU rehearsal's (`toy`).

1. `prepare`: the benchmarks' tokenizer and packed blocks, built once (benchmarks/speed/common.py); it runs with the
   stages that read its blocks (the speed stages), so that a call of the tasks stage alone needs none of their data;
2. `cuda-tests`: `pytest -m cuda tests`, the tests that need a GPU;
3. `trainer-compiled`, `large-compiled`: speed/trainer.py with `--torch-compile`, the spanbert recipe (packed rows
   through varlen_fa2) against run_mlm's defaults and the tuned transformers peer, every side compiled, base
   32 x 512 and large 16 x 512, bf16, 150 steps in windows of 10;
4. `trainer-eager`, `large-eager`: the same pairs eager;
5. `step-profile`: speed/pretraining_step.py `--profile` at base and large: one profiled step a side (unpacked,
   packed under the mask and under varlen_fa2, the baseline): the host's time to issue it, its wall time, the top
   kernels and the time of attention, the GEMMs and the optimizer;
6. `step`: the same benchmark timed at base, with the packed ablations, and each side's MFU;
7. `sweep-base`, `sweep-large`, `sweep-large-64`: the eager pairs at other per-device batches (SWEEP), every side
   at each: MFU and peak memory, to find the batch each side peaks at;
8. `fp8`: the large compiled spanbert recipe with `--fp8` (torchao's float8 training), against the bf16 record of
   the same code; skipped, saying why, where speed/trainer.py has no `--fp8` yet or torchao is absent;
9. `squad-smoke`: all-MiniLM-L6-v2 (`make checkpoint`) fine-tuned by run_squad.py for about a minute on the first
   36 articles of SQuAD v1.1 dev (../shared/data), evaluated on the 12 held-out articles;
10. `qa-demo`: SQuAD v1.1's unit of the task benchmark at the gpu size (seed 0), from the inputs in
    .gpu/task-inputs (the offline bundle's, `tasks/scores.py --export_inputs`), its model kept, then the
    question-answering pipeline check on it (parity/qa_pipeline.py), whose record the docs' demo shows;
11. `tasks`: the task benchmark at the gpu size, every seed of every task whose inputs are in .gpu/task-inputs and
    which has no record yet, 5 units at a time on the one GPU; a unit cut off by the limit leaves no record, and the
    next call runs it.

Each stage has its planned seconds (PLANNED_SECONDS) and the whole check is planned as calls of the GPU machine
(CALLS), each within CALL_SECONDS with its setup; check.py starts a stage only where its plan fits what is left of
the call, and says what it left for the next call.

A stage names the records it writes (`Stage.records`: a benchmark and the settings its record has); check.py skips
it where every one of them exists already for the code about to run, so that a later call runs only what is missing.

The rehearsal (`toy`) runs every stage it can on a CPU at the tiny size on the bundled demo corpus, a few steps each
(its Trainer records say they are rehearsals); it skips the compiled stages (compiling on a CPU takes minutes), the
large size, the SQuAD smoke when the checkpoint or the shared data is absent, and fp8 unless torchao and the flag are
there; its tasks stage runs RTE at the toy size from the shared data.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import ROOT
from benchmarks.common import CHECKPOINT, DATA, squad_article_split
from benchmarks.speed.common import CONFIGS
from benchmarks.tasks.scores import INPUTS_MANIFEST

STAGE_NAMES = ("prepare", "cuda-tests", "trainer-compiled", "large-compiled", "trainer-eager", "large-eager",
               "step-profile", "step", "sweep-base", "sweep-large", "sweep-large-64", "fp8", "squad-smoke", "qa-demo",
               "tasks")  # fmt: skip
READ_BLOCKS = ("trainer-compiled", "large-compiled", "trainer-eager", "large-eager", "step-profile", "step",
               "sweep-base", "sweep-large", "sweep-large-64", "fp8")  # fmt: skip
# One call of the GPU machine, its setup included (offline/setup.sh, SETUP_SECONDS): 8 minutes on an H100.
CALL_SECONDS, SETUP_SECONDS = 480, 30
# The seconds each stage is planned to take on one H100 or H200 at GPU size: what the check's records of 26-28
# November 2026 (benchmarks/results/gpu-check/) measured, scaled to today's stages. The Trainer pairs were measured
# with two sides of 40 steps, each side about 30 s of start and data, the compilation (about 30 s at base, 47 s at
# large, from their first windows) and its steps; today's pairs run three sides of 150 steps. The sweeps' steps
# grow with the batch (the pairs' tokens/s). A stage is started only where its plan fits what is left of the call
# (check.py); its `timeout` is the hard limit, with headroom over the plan.
PLANNED_SECONDS = {"prepare": 25, "cuda-tests": 155, "trainer-compiled": 215, "large-compiled": 265,
                   "trainer-eager": 120, "large-eager": 150, "step-profile": 70, "step": 40, "sweep-base": 335,
                   "sweep-large": 205, "sweep-large-64": 290, "fp8": 120, "squad-smoke": 50, "qa-demo": 150,
                   "tasks": 120}  # fmt: skip
# (The task benchmark's plan is one round of its units; it takes whatever time its call has left.)
# The calls the whole check takes, in order (check.py --call N runs the N-th, 1-based), each within CALL_SECONDS
# with its setup and `prepare` where a stage of it reads the blocks (tests/test_gpu_check.py holds them to it). The
# CUDA tests and the compiled base pair come first (with the compiled large pair they would plan about 700 s); the
# large pairs, compiled and eager, share the second; the eager base pair, the profile, the bare step and the SQuAD
# smoke the third; the sweeps and fp8 follow; the task benchmark takes what time its calls have (unit by unit, each
# unit's record as it ends).
CALLS = (("cuda-tests", "trainer-compiled"), ("large-compiled", "large-eager"),
         ("trainer-eager", "step-profile", "step", "squad-smoke"), ("sweep-base",), ("fp8", "sweep-large"),
         ("sweep-large-64",), ("qa-demo", "tasks"), ("tasks",))  # fmt: skip
TASK_INPUTS = ROOT / ".gpu" / "task-inputs"  # where setup.sh unpacks the bundle's task inputs
TASK_JOBS = 5  # units at a time: most of a gpu-size unit is its process's start and tokenization
# The per-device batches the sweep runs besides each size's own in the pairs (speed/common.py's CONFIGS), at GPU
# size, and the rehearsal's at the tiny size.
SWEEP = {"base-gpu": (64, 128), "large-gpu": (32, 64), "tiny": (2,)}  # at large, a stage a batch: each fills a call
# The step benchmark's sides beyond the unpacked pair: packed rows, under the mask and under varlen_fa2.
PACKED_ABLATIONS = ("spanroberta-packed-mask", "spanroberta-packed-varlen_fa2")


@dataclass
class Stage:
    """One step of the check: a command, its own time limit, where its figures come from and which records show it
    done."""

    name: str
    command: list[str]
    timeout: int
    planned: int = 0  # seconds it is planned to take (PLANNED_SECONDS; 0 in the rehearsal, which has no plan)
    benchmark: str | None = None  # the benchmark whose new records hold the stage's figures
    scores: Path | None = None  # or the run_squad.py scores file that does
    skip: str | None = None  # why the stage does not run, if it does not
    records: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (benchmark, settings) it writes
    guard: Callable[[], str | None] | None = None  # why it cannot run here (None: it can), asked just before it runs
    import_path: str | None = None  # a folder added to the stage's import path, after the others
    outcome: dict[str, Any] = field(default_factory=dict)


def _python(module: str, *flags: str) -> list[str]:
    """A benchmark run as a module, `python -m benchmarks.<module>`, from the checkout's root (the stages' cwd)."""
    return [sys.executable, "-m", f"benchmarks.{module}", *flags]


def stages(toy: bool, work: Path, task_inputs: Path = TASK_INPUTS) -> list[Stage]:
    """The check's stages in STAGE_NAMES' order, at GPU size or, with `toy`, at the CPU rehearsal's size."""
    base, large = ("tiny", None) if toy else ("base-gpu", "large-gpu")
    step = ["--precision", "fp32", "--steps", "2", "--warmup", "1", "--threads", "1"] if toy else ["--steps", "10",
                                                                                                   "--warmup", "3"]
    profiled = [base] if toy else [base, large]
    tests = ["tests/test_records.py"] if toy else ["tests"]  # the rehearsal: the selection's mechanics
    prepare = ("from benchmarks.speed.common import load_blocks, load_tokenizer; "
               f"load_blocks(load_tokenizer(), {64 if toy else 512})")  # fmt: skip
    planned = [
        Stage("prepare", [sys.executable, "-c", prepare], 60),
        # On one H200 the CUDA tests ran past 150 s; the fp8 test adds two 300-step runs of a tiny model. Only the
        # stages that train in fp8 import torchao, from where setup.sh put it (transformers imports it with every
        # model once it can: the other stages keep the environment their records were measured in).
        Stage("cuda-tests", [sys.executable, "-m", "pytest", "-q", "-m", "cuda", *tests], 300,
              import_path=os.environ.get("SPANROBERTA_FP8_SITE")),
        # Limits: each side of a pair starts a process, reads its data and builds its model (about half a minute
        # eager, a minute compiled, at base in the earlier checks' records; more at large), then runs 150 steps;
        # three sides a pair, and half again for headroom.
        trainer_stage("trainer-compiled", toy, base, compiled=True, timeout=330),
        trainer_stage("large-compiled", toy, large, compiled=True, timeout=420),
        trainer_stage("trainer-eager", toy, base, compiled=False, timeout=300 if toy else 180),
        trainer_stage("large-eager", toy, large, compiled=False, timeout=270),
        Stage("step-profile", _python("speed.pretraining_step", "--config", *profiled, *step, "--ablations",
                                      *PACKED_ABLATIONS, "--profile"), 150,
              benchmark="pretraining_step_profile",
              records=[("pretraining_step_profile", {"config": config}) for config in profiled]),  # fmt: skip
        Stage("step", _python("speed.pretraining_step", "--config", base, *step, "--ablations", *PACKED_ABLATIONS),
              70, benchmark="pretraining_step", records=[("pretraining_step", {"config": base})]),  # fmt: skip
        trainer_stage("sweep-base", toy, base, compiled=False, timeout=300 if toy else 440, batches=SWEEP[base]),
        trainer_stage("sweep-large", toy, large, compiled=False, timeout=300, batches=large and SWEEP[large][:1]),
        trainer_stage("sweep-large-64", toy, large, compiled=False, timeout=420, batches=large and SWEEP[large][1:]),
        trainer_stage("fp8", toy, large, compiled=True, timeout=300, fp8=True),
        squad_smoke(toy, work),
        qa_demo(toy, work, task_inputs),  # before the task benchmark, which takes whatever time is left
        task_benchmark(toy, task_inputs),
    ]  # fmt: skip
    for stage in planned:
        stage.planned = 0 if toy else PLANNED_SECONDS[stage.name]
    return planned


def trainer_stage(name: str, toy: bool, config: str | None, compiled: bool, timeout: int,
                  batches: tuple[int, ...] | None = None, fp8: bool = False) -> Stage:  # fmt: skip
    """speed/trainer.py's spanbert recipe against both baselines at one size (None: the rehearsal runs one size):
    at the pair's batch, or at `batches` (the sweep); with `fp8`, the recipe alone, at the pair's batch."""
    if config is None:
        return Stage(name, [], 0, skip="the rehearsal runs one size")
    if compiled and toy:
        return Stage(name, [], 0, skip="compiling on a CPU takes minutes; the GPU check runs it")
    flags = ["--config", config, "--recipes", "spanbert"]
    if toy:
        flags += ["--precision", "fp32", "--steps", "4", "--logging-steps", "2", "--skip-windows", "0"]
    else:
        # Packed rows through the flash kernel, named although it is the default on CUDA under bf16: the records say
        # which attention each side ran.
        flags += ["--precision", "bf16", "--steps", "150", "--logging-steps", "10", "--skip-windows", "2",
                  "--attn-implementation", "varlen_fa2"]  # fmt: skip
    flags += ["--torch-compile"] if compiled else []
    flags += ["--batch-sizes", *map(str, batches)] if batches else []
    flags += ["--fp8", "--no-baseline"] if fp8 else []
    records = [("trainer", {"config": config, "batch_size": batch, "torch_compile": compiled, "rehearsal": toy,
                            "fp8": fp8}) for batch in batches or [CONFIGS[config][2]]]  # fmt: skip
    return Stage(name, _python("speed.trainer", *flags), timeout, benchmark="trainer", records=records,
                 guard=fp8_unavailable if fp8 else None,
                 import_path=os.environ.get("SPANROBERTA_FP8_SITE") if fp8 else None)  # fmt: skip


def fp8_unavailable() -> str | None:
    """Why the fp8 stage cannot run here (None: it can): torchao neither importable nor where setup.sh puts it
    ($SPANROBERTA_FP8_SITE), or speed/trainer.py without `--fp8`."""
    site = os.environ.get("SPANROBERTA_FP8_SITE")
    if importlib.util.find_spec("torchao") is None and not (site and (Path(site) / "torchao").is_dir()):
        return "torchao is not installed"
    shown = subprocess.run(_python("speed.trainer", "--help"), cwd=ROOT, capture_output=True, text=True).stdout
    return None if "--fp8" in shown else "speed/trainer.py has no --fp8 flag yet"


def task_benchmark(toy: bool, task_inputs: Path) -> Stage:
    """The task benchmark at the gpu size from the carried inputs (every task there, the size's seeds), or RTE at
    the toy size from the shared data in the rehearsal."""
    if toy:
        if not (DATA / "glue" / "RTE").is_dir():
            return Stage("tasks", [], 0, skip=f"absent: {DATA / 'glue' / 'RTE'} (../shared/data)")
        return Stage("tasks", _python("tasks.scores", "--size", "toy", "--tasks", "rte", "--jobs", "2"), 120,
                     benchmark="tasks")  # fmt: skip
    carried = sorted(path.parent.name for path in task_inputs.glob(f"*/{INPUTS_MANIFEST}"))
    if not carried:
        return Stage("tasks", [], 0, skip=f"no task inputs in {task_inputs} (carry .gpu/tasks or .gpu/race)")
    return Stage("tasks", _python("tasks.scores", "--size", "gpu", "--inputs", str(task_inputs), "--tasks", *carried,
                                  "--jobs", str(TASK_JOBS)), 440, benchmark="tasks")  # fmt: skip


def qa_demo(toy: bool, work: Path, task_inputs: Path) -> Stage:
    """A SQuAD v1.1 model of the gpu size, kept (its unit's record goes to the check's folder: the committed seed 0
    stands for it), and the question-answering pipeline check on it, which reads SQuAD v1.1 dev (.gpu/speed)."""
    if toy:
        return Stage("qa-demo", [], 0, skip="the rehearsal has no SQuAD model worth a demo (tests/test_squad.py runs "
                                          "the pipeline check on a toy one)")  # fmt: skip
    absent = [str(path) for path in (task_inputs / "squad" / INPUTS_MANIFEST, DATA / "squad" / "dev-v1.1.json")
              if not path.is_file()]  # fmt: skip
    if absent:
        return Stage("qa-demo", [], 0, skip=f"absent: {', '.join(absent)} (carry .gpu/tasks and .gpu/speed)")
    kept = work / "qa-model"
    unit = _python("tasks.scores", "--size", "gpu", "--inputs", str(task_inputs), "--tasks", "squad", "--seeds", "0",
                   "--records_dir", str(work / "qa-unit-records"), "--keep_outputs", str(kept))  # fmt: skip
    demo = _python("parity.qa_pipeline", "--model", str(kept / "gpu" / "squad-seed0"))
    return Stage("qa-demo", ["bash", "-c", f"{shlex.join(unit)} && {shlex.join(demo)}"], 180,
                 benchmark="qa-pipeline")  # fmt: skip


def squad_smoke(toy: bool, work: Path) -> Stage:
    """run_squad.py on the parity benchmark's article split: the first 36 SQuAD v1.1 dev articles train (a sample
    of them in the rehearsal), the last 12 evaluate."""
    absent = [str(path) for path in (CHECKPOINT / "config.json", DATA / "squad" / "dev-v1.1.json") if not path.is_file()]
    if absent:
        return Stage("squad-smoke", [], 0, skip=f"absent: {', '.join(absent)} (`make checkpoint`, ../shared/data)")
    files = squad_article_split(work, 32, 16) if toy else squad_article_split(work, None, None)
    flags = ["--model_name_or_path", str(CHECKPOINT), "--output_dir", str(work / "squad"), "--overwrite_output_dir",
             "--do_train", "--do_eval", "--train_file", str(files["train"]), "--validation_file",
             str(files["validation"]), "--max_seq_length", "128" if toy else "384",
             "--doc_stride", "32" if toy else "128", "--per_device_train_batch_size", "8" if toy else "32",
             "--per_device_eval_batch_size", "64",
             "--learning_rate", "0.0001", "--num_train_epochs", "1", "--warmup_steps", "0.1",
             "--save_strategy", "no", "--report_to", "none", "--seed", "0"]  # fmt: skip
    flags += ["--use_cpu", "true"] if toy else ["--bf16", "true"]
    return Stage("squad-smoke", [sys.executable, str(ROOT / "run_squad.py"), *flags], 90,
                 scores=work / "squad" / "all_results.json")
