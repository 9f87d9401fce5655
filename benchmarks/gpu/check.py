#!/usr/bin/env python
"""One prepared check of a fresh single-GPU machine, every input local (no network), each stage time-boxed and the
whole cut at 9 minutes; `--stages` runs a part of it (all of it does not fit one budget: on one H200 the CUDA tests
and each compiled pair needed more than their first limits):

1. `prepare`: the benchmarks' tokenizer and packed blocks, built once (benchmarks/speed/common.py);
2. `cuda-tests`: `pytest -m cuda tests`, the tests that need a GPU;
3. `trainer-eager`: speed/trainer.py, the spanbert recipe (packed rows through varlen_fa2) against its
   run_mlm-style baseline, base 32 x 512, bf16, a short run;
4. `step` and `step-profile`: speed/pretraining_step.py at the GPU batch (base 32 x 512) with its ablations
   (packed rows under the mask and under varlen_fa2 among them) and MFU, then one profiled step a side (the host's
   time to issue it against its wall time, the top kernels);
5. `large-eager`: the trainer pair at large 16 x 512;
6. `trainer-compiled` and `large-compiled`: the two pairs with `--torch-compile` (both sides compiled);
7. `squad-smoke`: all-MiniLM-L6-v2 (`make checkpoint`) fine-tuned by run_squad.py for about a minute on the first
   36 articles of SQuAD v1.1 dev (../shared/data), evaluated on the 12 held-out articles;
8. `qa-demo`: SQuAD v1.1's unit of the task benchmark at the gpu size (seed 0), from the inputs in
   .gpu/task-inputs (the offline bundle's, `tasks/scores.py --export_inputs`), its model kept, then the
   question-answering pipeline check on it (parity/qa_pipeline.py), whose record the docs' demo shows;
9. `tasks`: the task benchmark at the gpu size, every seed of every task whose inputs are in .gpu/task-inputs and
   which has no record yet, 5 units at a time on the one GPU; a unit cut off by the limit leaves no record, and the
   next call runs it.

`prepare` runs with the stages that read its blocks (the speed stages), so that a call of the tasks stage alone
needs none of their data.

Each stage runs in its own process under its own time limit (cut further so the whole check stays within its
budget): a stage that fails or hangs is reported in the table, with the last lines of its log kept in the record
and printed before the table, and the others still run. The benchmark stages write their records to
benchmarks/results/ as usual; the check writes one more, `gpu-check`, with every stage's status, time and headline
figures, and prints the table last.

    make gpu-check                         # python -m benchmarks.gpu.check
    python -m benchmarks.gpu.check --stages cuda-tests trainer-compiled   # a part: prepare and these two
    python -m benchmarks.gpu.check --stages tasks   # the task benchmark from .gpu/task-inputs
    python -m benchmarks.gpu.check --toy   # CPU rehearsal: tiny model, bundled demo corpus, seconds

`--toy` rehearses every stage on a CPU (tests/test_gpu_check.py runs it): the tiny model size on the bundled demo
corpus, a few steps each, records to a temporary folder (or --records_dir). It skips the compiled stage (compiling
on a CPU takes minutes) and the SQuAD smoke when the checkpoint or the shared data is absent; its tasks stage runs
RTE at the toy size from the shared data (tests/test_bench_tasks.py runs the task benchmark from exported inputs).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import ROOT
from benchmarks.common import CHECKPOINT, DATA, squad_article_split
from benchmarks.tasks.scores import INPUTS_MANIFEST
from spanroberta.data.demo_corpus import DEMO_CORPUS_FILE
from spanroberta.records import read_records, start_run, write_record

BUDGET_SECONDS = 540  # the whole check, every stage included
NOT_ASKED = "not asked for (--stages)"  # why a stage a partial run (--stages) left out did not run
LOG_TAIL_LINES = 40  # of a stage that failed or timed out, kept in the record and printed


@dataclass
class Stage:
    """One step of the check: a command, its own time limit, and where its figures come from."""

    name: str
    command: list[str]
    timeout: int
    benchmark: str | None = None  # the benchmark whose new record holds the stage's figures
    scores: Path | None = None  # or the run_squad.py scores file that does
    skip: str | None = None  # why the stage does not run, if it does not
    import_path: str | None = None  # a folder added to the stage's import path, after the others
    outcome: dict[str, Any] = field(default_factory=dict)


STAGE_NAMES = ("prepare", "cuda-tests", "trainer-eager", "step", "step-profile", "large-eager", "trainer-compiled",
               "large-compiled", "squad-smoke", "qa-demo", "tasks")
READ_BLOCKS = ("trainer-eager", "step", "step-profile", "large-eager", "trainer-compiled", "large-compiled")
TASK_INPUTS = ROOT / ".gpu" / "task-inputs"  # where setup.sh unpacks the bundle's task inputs
TASK_JOBS = 5  # units at a time: most of a gpu-size unit is its process's start and tokenization


def _python(module: str, *flags: str) -> list[str]:
    """A benchmark run as a module, `python -m benchmarks.<module>`, from the checkout's root (run_stage's cwd)."""
    return [sys.executable, "-m", f"benchmarks.{module}", *flags]


def stages(toy: bool, work: Path, task_inputs: Path = TASK_INPUTS) -> list[Stage]:
    """The check's stages, at GPU size or, with `toy`, at the CPU rehearsal's size."""
    if toy:
        trainer = ["--config", "tiny", "--recipes", "spanbert", "--precision", "fp32", "--steps", "4",
                   "--logging-steps", "2", "--skip-windows", "0"]  # fmt: skip
        step = ["--config", "tiny", "--precision", "fp32", "--steps", "2", "--warmup", "1", "--threads", "1"]
        tests = ["tests/test_records.py"]  # the selection's mechanics; the CUDA tests skip on a CPU anyway
    else:
        # Packed rows through the flash kernel, named although it is the default on CUDA under bf16: the records say
        # which attention each side ran.
        trainer = ["--config", "base-gpu", "--recipes", "spanbert", "--precision", "bf16", "--steps", "40",
                   "--logging-steps", "5", "--skip-windows", "2", "--attn-implementation", "varlen_fa2"]  # fmt: skip
        step = ["--config", "base-gpu", "--steps", "10", "--warmup", "3"]
        tests = ["tests"]
    large = [*trainer[:1], "large-gpu", *trainer[2:]]
    prepare = ("from benchmarks.speed.common import load_blocks, load_tokenizer; "
               f"load_blocks(load_tokenizer(), {64 if toy else 512})")  # fmt: skip
    return [
        Stage("prepare", [sys.executable, "-c", prepare], 60),
        # On one H200 the CUDA tests ran past 150 s and each compiled pair past 120 s (both sides compile); the fp8
        # test adds two 300-step runs of a tiny model. Only this stage imports torchao, from where setup.sh put it
        # (transformers imports it with every model once it can: the benchmarks keep their environment).
        Stage("cuda-tests", [sys.executable, "-m", "pytest", "-q", "-m", "cuda", *tests], 300,
              import_path=os.environ.get("SPANROBERTA_FP8_SITE")),
        Stage("trainer-eager", _python("speed.trainer", *trainer), 150 if toy else 90, benchmark="trainer"),
        Stage("step", _python("speed.pretraining_step", *step, "--ablations"), 60 if toy else 70,
              benchmark="pretraining_step"),
        Stage("step-profile", _python("speed.pretraining_step", *step, "--ablations", "--profile"), 60,
              benchmark="pretraining_step_profile"),
        Stage("large-eager", _python("speed.trainer", *large), 90, benchmark="trainer",
              skip="the rehearsal runs one size" if toy else None),
        Stage("trainer-compiled", _python("speed.trainer", *trainer, "--torch-compile"), 240, benchmark="trainer",
              skip="compiling on a CPU takes minutes; the GPU check runs it" if toy else None),
        Stage("large-compiled", _python("speed.trainer", *large, "--torch-compile"), 240, benchmark="trainer",
              skip="the rehearsal runs one size" if toy else None),
        squad_smoke(toy, work),
        qa_demo(toy, work, task_inputs),  # before the task benchmark, which takes whatever time is left
        task_benchmark(toy, task_inputs),
    ]  # fmt: skip


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
                                  "--jobs", str(TASK_JOBS)), 520, benchmark="tasks")  # fmt: skip


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


def stage_environment(records_dir: Path | None, toy: bool) -> dict[str, str]:
    """The environment every stage runs in: offline, this checkout first on the import path (its spanroberta and
    its benchmarks), then whatever the caller's PYTHONPATH holds, and unbuffered output, so that a stage killed at
    its limit has written everything it printed to its log."""
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join(paths)}  # fmt: skip
    if records_dir:
        env["SPANROBERTA_RECORDS_DIR"] = str(records_dir)
    if toy:
        env |= {"SPANROBERTA_BENCH_CORPUS": str(DEMO_CORPUS_FILE), "CUDA_VISIBLE_DEVICES": ""}
    return env


def run_stage(stage: Stage, seconds_left: float, env: dict[str, str], logs: Path) -> None:
    """Runs one stage under min(its limit, what is left of the budget); its status, time and log go to
    `stage.outcome`."""
    if stage.skip:
        stage.outcome = {"status": f"skipped: {stage.skip}", "seconds": 0.0}
        return
    limit = max(1, int(min(stage.timeout, seconds_left)))
    if stage.import_path:
        env = {**env, "PYTHONPATH": os.pathsep.join([env["PYTHONPATH"], stage.import_path])}
    log = logs / f"{stage.name}.log"
    start = time.perf_counter()
    with log.open("w", encoding="utf-8") as output:
        # A session of its own, so that a stage cut off at its limit is killed with every process it started (the
        # task benchmark's scripts), none left to compete with the next stage or call.
        process = subprocess.Popen(stage.command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # fmt: skip
        try:
            returncode = process.wait(timeout=limit)
            # pytest's exit 5: nothing selected (no CUDA test in the selection).
            status = {0: "passed", 5: "passed (no test selected)"}.get(returncode, f"failed (exit {returncode})")
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            status = f"timed out after {limit} s"
    stage.outcome = {"status": status, "seconds": time.perf_counter() - start, "limit_seconds": limit,
                     "log": str(log)}  # fmt: skip
    if not status.startswith("passed"):
        # The logs are deleted with the check's temporary folder: what went wrong stays in the record.
        stage.outcome["log_tail"] = log.read_text(encoding="utf-8", errors="replace").splitlines()[-LOG_TAIL_LINES:]


def figures(stage: Stage, records_before: dict[str, int], records_dir: Path | None) -> str:
    """The stage's headline figures: from the record its benchmark wrote, or run_squad.py's scores."""
    if stage.skip:
        return ""
    if stage.benchmark:
        records = read_records(stage.benchmark, records_dir)[records_before.get(stage.benchmark, 0):]
        if not records:
            return "no record"
        if stage.benchmark == "qa-pipeline":
            stage.outcome["record"] = str(records[-1]["path"])
            f1 = records[-1]["settings"]["model_scores"].get("f1", float("nan"))
            same = records[-1]["results"]["without_spanroberta"]["same_answers"]
            return f"the model's F1 {f1:.1f}; the same answers without spanroberta: {'yes' if same else 'no'}"
        if stage.benchmark == "tasks":
            units = [f"{r['settings']['task']} seed {r['settings']['seed']}" for r in records]
            stage.outcome["records"] = [str(r["path"]) for r in records]
            return f"{len(units)} unit{'s' if len(units) > 1 else ''} recorded: {', '.join(units)}"
        results = records[-1]["results"]
        stage.outcome["record"] = str(records[-1]["path"])
        if stage.benchmark == "pretraining_step_profile":
            return "; ".join(f"{side.removeprefix('spanroberta-')} host {1000 * found['host_seconds']:.0f} ms, wall "
                             f"{1000 * found['wall_seconds']:.0f} ms a step" for side, found in results["sides"].items()
                             if side in ("spanroberta", "spanroberta-packed-mask", "spanroberta-packed-varlen_fa2"))  # fmt: skip
        if stage.benchmark == "pretraining_step":
            span = results["sides"]["spanroberta"]
            packed = "".join(f"; {side.removeprefix('spanroberta-')} step {ratio['median']:.2f}x unpacked's"
                             for side, ratio in results.get("ablation_ratios", {}).items() if "packed" in side)  # fmt: skip
            return f"{results['ratio_median']:.2f}x tokens/s vs baseline" + _percent(", MFU ", span.get("mfu")) + packed
        run = results["runs"].get("run_pretraining.py --recipe spanbert", {})
        ratio = run.get("ratio_to_baseline")
        return ((f"{ratio:.2f}x real tokens/s vs baseline" if ratio else "no ratio") + _percent(", MFU ", run.get("mfu"))
                + f" ({run.get('attn_implementation')})")  # fmt: skip
    if stage.scores is None or not stage.scores.is_file():
        return ""
    found = json.loads(stage.scores.read_text(encoding="utf-8"))
    stage.outcome["scores"] = {key: found[key] for key in ("eval_exact_match", "eval_f1", "train_runtime") if key in found}
    return (f"EM {found.get('eval_exact_match', float('nan')):.1f}, F1 {found.get('eval_f1', float('nan')):.1f} "
            "(held-out articles)")


def _percent(prefix: str, value: float | None) -> str:
    return "" if value is None else f"{prefix}{100 * value:.1f}%"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--toy", action="store_true", help="Rehearse every stage on a CPU at toy size.")
    parser.add_argument("--records_dir", type=Path, help="Where records go (default: benchmarks/results; with "
                        "--toy, a temporary folder).")  # fmt: skip
    parser.add_argument("--stages", nargs="+", choices=STAGE_NAMES, help="Run only these (and prepare, with a speed "
                        "stage): the whole check takes longer than one budget on a fresh machine, so it runs in parts.")
    options = parser.parse_args(argv)
    started, clock = start_run(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as folder:
        work = Path(folder)
        records_dir = options.records_dir or (work / "records" if options.toy else None)
        env = stage_environment(records_dir, options.toy)
        checked = stages(options.toy, work)
        asked = set(options.stages or STAGE_NAMES)
        if asked & set(READ_BLOCKS):
            asked.add("prepare")
        for stage in checked:
            if stage.name not in asked:
                stage.skip = NOT_ASKED
        before = {name: len(read_records(name, records_dir))
                  for name in ("trainer", "pretraining_step", "pretraining_step_profile", "tasks",
                               "qa-pipeline")}  # fmt: skip
        for stage in checked:
            run_stage(stage, BUDGET_SECONDS - (time.perf_counter() - clock), env, work)
            stage.outcome["figures"] = figures(stage, before, records_dir)
            before = {name: len(read_records(name, records_dir)) for name in before}
        results = {"stages": {stage.name: stage.outcome for stage in checked},
                   "total_seconds": time.perf_counter() - clock}  # fmt: skip
        settings = {"toy": options.toy, "budget_seconds": BUDGET_SECONDS,
                    "commands": {stage.name: stage.command for stage in checked}}  # fmt: skip
        path = write_record("gpu-check", settings, results, started=started, results_dir=records_dir)
    print_table(checked, results["total_seconds"], path)
    return 0 if all(stage.outcome["status"].startswith(("passed", "skipped")) for stage in checked) else 1


def print_table(checked: list[Stage], total: float, record: Path) -> None:
    """The end of each failed stage's log (also in the record), then the table of the stages, last."""
    for stage in checked:
        if "log_tail" in stage.outcome:
            print(f"\n--- {stage.name}: {stage.outcome['status']}; the end of its log:", *stage.outcome["log_tail"],
                  sep="\n")
    print(f"\nGPU check: {total:.0f} s of {BUDGET_SECONDS} s; record {record.name} (the stage logs and, with --toy, "
          "the records are in a temporary folder, deleted now; a failed stage's last lines stay in the record)\n")
    print("| stage | status | seconds | figures |")
    print("|---|---|---|---|")
    for stage in checked:
        outcome = stage.outcome
        print(f"| {stage.name} | {outcome['status']} | {outcome['seconds']:.0f} | {outcome.get('figures', '')} |")


if __name__ == "__main__":
    sys.exit(main())
