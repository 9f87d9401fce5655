#!/usr/bin/env python
"""One prepared check of a fresh single-GPU machine, every input local (no network), each stage time-boxed and the
whole cut at BUDGET_SECONDS; its stages, in order of value, and their commands are plan.py's: the CUDA tests, the
Trainer pairs compiled and eager at base and large, the profiled step, the bare step, the batch sweep, fp8, a
SQuAD smoke, the QA demo and the task benchmark. `--stages` runs a part of it (all of it does not fit one budget),
`--call N` the N-th of the calls the plan divides it into (plan.CALLS), each within 8 minutes with the setup.

A stage starts only where its planned seconds (plan.PLANNED_SECONDS) fit what is left of the budget; one that does
not, or that its limit cuts off, is left for the next call, and the check ends by saying so (and the plan's next
call), in its record too (`left_for_next_call`).

Each stage runs in its own process under its own time limit (cut further so the whole check stays within its
budget): a stage that fails or hangs is reported in the table, with the last lines of its log kept in the record
and printed before the table, and the others still run. The benchmark stages write their records to
benchmarks/results/ as usual, each as it finishes; the check writes one more, `gpu-check`, with every stage's
status, time and headline figures, and prints the table last.

A stage whose records (plan.Stage.records) all exist already for the code about to run is skipped, naming them: with
the records of earlier calls back under benchmarks/results/, a call runs only what is missing. The code is named as
the records name it (benchmarks.common.code_of): an exported copy's digest of its code files, else a clean
checkout's commit; a checkout with uncommitted changes names none, and then nothing is skipped. With `--archive`,
every record the check writes and every stage's log go into one archive (archive.py), rewritten after each stage, so
that a call cut off still hands back what finished.

    make gpu-check                         # python -m benchmarks.gpu.check
    python -m benchmarks.gpu.check --call 1          # the plan's first call: the CUDA tests, the compiled base pair
    python -m benchmarks.gpu.check --stages cuda-tests trainer-compiled   # a part: prepare and these two
    python -m benchmarks.gpu.check --stages tasks   # the task benchmark from .gpu/task-inputs
    python -m benchmarks.gpu.check --toy   # CPU rehearsal: tiny model, bundled demo corpus

`--toy` rehearses the stages on a CPU (tests/test_gpu_check.py runs it; plan.py says what it skips), records to a
temporary folder (or --records_dir).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import ROOT
from benchmarks.common import code_of, script_environment
from benchmarks.gpu.archive import write_archive
from benchmarks.gpu.plan import CALL_SECONDS, CALLS, READ_BLOCKS, SETUP_SECONDS, STAGE_NAMES, Stage, stages
from benchmarks.speed.trainer import SPANBERT, TUNED, settings_of
from spanroberta.data.demo_corpus import DEMO_CORPUS_FILE
from spanroberta.records import RESULTS_DIR, provenance, read_records, start_run, write_record

# The whole check, every stage included: with the machine's setup (offline/setup.sh) a call stays within
# plan.CALL_SECONDS, 8 minutes.
BUDGET_SECONDS = CALL_SECONDS - SETUP_SECONDS
NOT_ASKED = "not asked for (--stages)"  # why a stage a partial run (--stages) left out did not run
LEFT_FOR_NEXT_CALL = "left for the next call"  # why a stage whose plan no longer fits the call did not start
RECORDED_HERE = "recorded at this code"  # why a stage whose records exist for the code about to run did not run
LOG_TAIL_LINES = 40  # of a stage that failed or timed out, kept in the record and printed


def records_done(stage: Stage, records_dir: Path | None, code: str | None) -> list[str] | None:
    """The names of the records that show `stage` done at `code`, one for each of its records (the newest that
    matches); None when one is missing, or when the stage names none."""
    if code is None or not stage.records:
        return None
    found = []
    for benchmark, settings in stage.records:
        matching = [record for record in read_records(benchmark, records_dir) if code_of(record) == code
                    and all(settings_of(record).get(key) == value for key, value in settings.items())]  # fmt: skip
        if not matching:
            return None
        found.append(Path(matching[-1]["path"]).name)
    return found


def stage_environment(records_dir: Path | None, toy: bool) -> dict[str, str]:
    """The environment every stage runs in: `benchmarks.common.script_environment` (offline, this checkout first on
    the import path, then whatever the caller's PYTHONPATH holds, and unbuffered output, so that a stage killed at
    its limit has written everything it printed to its log), with the records' folder and, in the rehearsal, the
    demo corpus on a CPU."""
    env = script_environment()
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
        stage.outcome["record"] = str(records[-1]["path"])
        if stage.benchmark == "trainer":
            stage.outcome["records"] = [str(r["path"]) for r in records]
            return "; ".join(_trainer_figures(record) for record in records)
        return _step_figures(stage.benchmark, records[-1]["results"])
    if stage.scores is None or not stage.scores.is_file():
        return ""
    found = json.loads(stage.scores.read_text(encoding="utf-8"))
    stage.outcome["scores"] = {key: found[key] for key in ("eval_exact_match", "eval_f1", "train_runtime") if key in found}
    return (f"EM {found.get('eval_exact_match', float('nan')):.1f}, F1 {found.get('eval_f1', float('nan')):.1f} "
            "(held-out articles)")


def _trainer_figures(record: dict[str, Any]) -> str:
    """A Trainer record's headline: the batch, the recipe's real tokens/s over each baseline's, its MFU and the
    tuned peer's, its attention."""
    runs = record["results"]["runs"]
    span, tuned = runs.get(SPANBERT, {}), runs.get(TUNED, {})
    ratios = ", ".join(f"{span[key]:.2f}x vs {label}" for key, label in
                       (("ratio_to_baseline", "run_mlm defaults"), ("ratio_to_tuned", "tuned")) if span.get(key))  # fmt: skip
    return (f"batch {record['settings']['batch_size']}: {ratios or 'no baseline'} (real tokens/s)"
            + _percent(", MFU ", span.get("mfu")) + _percent(", tuned ", tuned.get("mfu"))
            + f" ({span.get('attn_implementation')})")  # fmt: skip


def _step_figures(benchmark: str, results: dict[str, Any]) -> str:
    """The step benchmark's headline (timed or profiled): packed rows against unpacked ones, the pair's ratio."""
    if benchmark == "pretraining_step_profile":
        return "; ".join(f"{side.removeprefix('spanroberta-')} host {1000 * found['host_seconds']:.0f} ms, wall "
                         f"{1000 * found['wall_seconds']:.0f} ms a step" for side, found in results["sides"].items()
                         if side in ("spanroberta", "spanroberta-packed-mask", "spanroberta-packed-varlen_fa2"))  # fmt: skip
    span = results["sides"]["spanroberta"]
    packed = "".join(f"; {side.removeprefix('spanroberta-')} step {ratio['median']:.2f}x unpacked's"
                     for side, ratio in results.get("ablation_ratios", {}).items() if "packed" in side)  # fmt: skip
    return f"{results['ratio_median']:.2f}x tokens/s vs baseline" + _percent(", MFU ", span.get("mfu")) + packed


def _percent(prefix: str, value: float | None) -> str:
    return "" if value is None else f"{prefix}{100 * value:.1f}%"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--toy", action="store_true", help="Rehearse every stage on a CPU at toy size.")
    parser.add_argument("--records_dir", type=Path, help="Where records go (default: benchmarks/results; with "
                        "--toy, a temporary folder).")  # fmt: skip
    parser.add_argument("--stages", nargs="+", choices=STAGE_NAMES, help="Run only these (and prepare, with a speed "
                        "stage): the whole check takes longer than one budget on a fresh machine, so it runs in parts.")
    parser.add_argument("--call", type=int, choices=range(1, len(CALLS) + 1), help="Run the stages of this call "
                        "of the plan (plan.CALLS, from 1), as --stages would.")  # fmt: skip
    parser.add_argument("--archive", type=Path, help="One archive (.tar.gz) of the records written and the logs, "
                        "rewritten after each stage.")  # fmt: skip
    parser.add_argument("--logs_dir", type=Path, help="Where the stage logs go, each <stage>.log, with any other "
                        "log the archive should hold (default: a temporary folder).")  # fmt: skip
    options = parser.parse_args(argv)
    started, clock, since = start_run(), time.perf_counter(), time.time()
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as folder:
        work = Path(folder)
        records_dir = options.records_dir or (work / "records" if options.toy else None)
        logs = options.logs_dir or work
        logs.mkdir(parents=True, exist_ok=True)
        env = stage_environment(records_dir, options.toy)
        checked = stages(options.toy, work)
        asked = options.stages or (CALLS[options.call - 1] if options.call else STAGE_NAMES)
        mark_skipped(checked, set(asked), records_dir)
        before = {name: len(read_records(name, records_dir))
                  for name in ("trainer", "pretraining_step", "pretraining_step_profile", "tasks",
                               "qa-pipeline")}  # fmt: skip
        def pack() -> None:  # everything so far into the one archive, after each stage and at the end
            if options.archive:
                write_archive(options.archive, records_dir or RESULTS_DIR, since, sorted(logs.glob("*.log")))

        for stage in checked:
            seconds_left = BUDGET_SECONDS - (time.perf_counter() - clock)
            stage.skip = stage.skip or (stage.guard and stage.guard()) or not_in_time(stage, seconds_left)
            run_stage(stage, seconds_left, env, logs)
            stage.outcome["figures"] = figures(stage, before, records_dir)
            before = {name: len(read_records(name, records_dir)) for name in before}
            pack()
        results = {"stages": {stage.name: stage.outcome for stage in checked},
                   "total_seconds": time.perf_counter() - clock, "left_for_next_call": left_over(checked),
                   "next_planned_call": options.call + 1 if options.call and options.call < len(CALLS) else None}

        settings = {"toy": options.toy, "budget_seconds": BUDGET_SECONDS,
                    "commands": {stage.name: stage.command for stage in checked}}  # fmt: skip
        path = write_record("gpu-check", settings, results, started=started, results_dir=records_dir)
        pack()
    print_next_call(results["left_for_next_call"], results["next_planned_call"])
    print_table(checked, results["total_seconds"], path)
    return 0 if all(stage.outcome["status"].startswith(("passed", "skipped")) for stage in checked) else 1


def not_in_time(stage: Stage, seconds_left: float) -> str | None:
    """Why `stage` is not started (None: it is): its planned seconds (plan.PLANNED_SECONDS) exceed what is left of
    the call. A Trainer stage cut off at its limit leaves no record, so starting one that cannot end wastes the rest
    of the call; the next call runs it."""
    if stage.skip or stage.planned <= seconds_left:
        return None
    return f"{LEFT_FOR_NEXT_CALL}: planned {stage.planned} s, {max(seconds_left, 0):.0f} s of the call left"


def left_over(checked: list[Stage]) -> list[str]:
    """The stages this call was asked to run and did not finish for lack of time: not started (`not_in_time`) or cut
    off at their limit. A stage that failed is not among them: it needs a fix, not another call."""
    return [stage.name for stage in checked
            if stage.outcome["status"].startswith((f"skipped: {LEFT_FOR_NEXT_CALL}", "timed out"))]  # fmt: skip


def print_next_call(left: list[str], next_call: int | None) -> None:
    """What this call left for the next one, and the plan's next call (printed before the table, which comes last)."""
    if left:
        print(f"\nLeft for the next call: {', '.join(left)} (`--stages {' '.join(left)}`).")
    if next_call:
        stages_next = ", ".join(CALLS[next_call - 1])
        print(f"{'Then the' if left else 'The'} plan's next call: `--call {next_call}` ({stages_next}).")
    elif not left:
        print("\nNothing was left for the next call.")


def mark_skipped(checked: list[Stage], asked: set[str], records_dir: Path | None) -> None:
    """Marks the stages not asked for and those whose records all exist for the code about to run (`records_done`);
    prepare runs where asked for or where a stage that reads its blocks is to run."""
    code = code_of(provenance())
    for stage in checked:
        if stage.name not in asked:
            stage.skip = NOT_ASKED
        elif not stage.skip and (done := records_done(stage, records_dir, code)):
            stage.skip = f"{RECORDED_HERE}: {', '.join(done)}"
    if any(stage.name in READ_BLOCKS and not stage.skip for stage in checked):
        next(stage for stage in checked if stage.name == "prepare").skip = None


def print_table(checked: list[Stage], total: float, record: Path) -> None:
    """The end of each failed stage's log (also in the record), then the table of the stages, last."""
    for stage in checked:
        if "log_tail" in stage.outcome:
            print(f"\n--- {stage.name}: {stage.outcome['status']}; the end of its log:", *stage.outcome["log_tail"],
                  sep="\n")
    print(f"\nGPU check: {total:.0f} s of {BUDGET_SECONDS} s; record {record.name} (the stage logs, unless --logs_dir, "
          "and, with --toy, the records are in a temporary folder, deleted now; a failed stage's last lines stay in "
          "the record)\n")
    print("| stage | status | seconds | figures |")
    print("|---|---|---|---|")
    for stage in checked:
        outcome = stage.outcome
        print(f"| {stage.name} | {outcome['status']} | {outcome['seconds']:.0f} | {outcome.get('figures', '')} |")


if __name__ == "__main__":
    sys.exit(main())
