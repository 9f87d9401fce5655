#!/usr/bin/env python
"""Clean exits under load: launches the resume of a tiny pretraining run (2 CPU processes, ZeRO-3 and DDP) many
times while `--busy` processes spin the CPUs, and counts the launches that did not end cleanly (a non-zero exit, a
rank ended by a signal, "terminate called", a traceback, a process still running after the launcher ended, a
timeout; the record keeps where such processes stood) and those that ended with other weights or losses than the
uninterrupted run's.

Each engine first trains the tiny run (benchmarks/reliability/tiny_runs.py) to its end under the same load; every
launch then resumes a copy of that run's first checkpoint to the end, as a run killed after it would be resumed.
One record under benchmarks/results/reliability/ (settings.kind "stress") holds every launch's ending.

    python -m benchmarks.reliability.stress                          # 20 launches per engine under 6 busy processes
    python -m benchmarks.reliability.stress --launches 2 --busy 2    # a smaller trial: its record says so
    python -m benchmarks.reliability.stress --concurrent             # the engines side by side: more load still
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.reliability import tiny_runs
from benchmarks.reliability.load import busy_processes
from benchmarks.reliability.outcomes import completed_outcome, output_tail
from spanroberta.records import start_run, write_record

STRESS_RUN = tiny_runs.TinyRun(max_steps=4, save_steps=2, eval_steps=2)
TARGET = {"launches": 20, "busy": 6, "aborts": 0}


def resume_launch(engine: str, flags: list[str], reference: Path, folder: Path) -> dict[str, Any]:
    """Resumes a copy of `reference`'s first checkpoint in `folder` to the end: its ending and how its weights and
    losses compare with `reference`'s."""
    first = f"checkpoint-{STRESS_RUN.save_steps}"
    shutil.copytree(reference / first, folder / first)
    began = time.monotonic()
    result = tiny_runs.launch(engine, [*flags, "--output_dir", str(folder), "--resume_from_checkpoint", "true"])
    outcome = {"seconds": round(time.monotonic() - began, 1), **completed_outcome(result)}
    outcome.update(tiny_runs.compare_with(folder, reference))
    if not outcome["clean"]:
        outcome["output_tail"] = output_tail(result.stdout)
    return outcome


def engine_summary(reference: dict[str, Any], launches: list[dict[str, Any]]) -> dict[str, Any]:
    """The counts of one engine's launches: `aborts` (not clean), `weight_mismatches` (clean, yet other final
    weights or losses than the uninterrupted run's), and whether the uninterrupted run itself ended cleanly."""
    aborts = sum(not launch["clean"] for launch in launches)
    mismatches = sum(launch["clean"] and not (launch["same_weights"] and launch["same_losses"]) for launch in launches)
    return {"launches": len(launches), "aborts": aborts, "weight_mismatches": mismatches,
            "reference_clean": reference["clean"], "reference": reference, "each": launches}  # fmt: skip


def stress_engine(engine: str, launches: int, folder: Path, setup: dict[str, str]) -> dict[str, Any]:
    flags = STRESS_RUN.flags(setup, engine)
    reference_dir = folder / engine / "uninterrupted"
    result = tiny_runs.launch(engine, [*flags, "--output_dir", str(reference_dir)])
    reference = completed_outcome(result)
    if not reference["clean"]:
        reference["output_tail"] = output_tail(result.stdout)
        return engine_summary(reference, [])
    each = []
    for index in range(launches):
        each.append(resume_launch(engine, flags, reference_dir, folder / engine / f"resumed-{index}"))
        print(f"{engine} {index + 1}/{launches}: {'clean' if each[-1]['clean'] else 'ABORT'}", flush=True)
    return engine_summary(reference, each)


def meets_target(settings: dict[str, Any], engines: dict[str, Any]) -> bool:
    """Whether a stress record meets the stated target: at least 20 launches per engine under at least 6 busy
    processes, none aborted and none with other weights."""
    return (settings["launches_per_engine"] >= TARGET["launches"] and settings["busy_processes"] >= TARGET["busy"]
            and all(summary["launches"] >= TARGET["launches"] and summary["aborts"] == TARGET["aborts"]
                    and summary["weight_mismatches"] == 0 and summary["reference_clean"]
                    for summary in engines.values()))  # fmt: skip


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=TARGET["launches"], help="resume launches per engine")
    parser.add_argument("--busy", type=int, default=TARGET["busy"], help="background processes spinning a CPU each")
    parser.add_argument("--engines", nargs="+", default=["zero3", "ddp"], choices=tiny_runs.ENGINES[1:])
    parser.add_argument("--concurrent", action="store_true",
                        help="launch the engines side by side, each one's runs a further load on the other's")
    parser.add_argument("--hours", type=float, default=6.0, help="how long the busy processes may spin at most")
    parser.add_argument("--results-dir", default=None, help="where the record goes (default benchmarks/results)")
    options = parser.parse_args(argv)
    started = start_run()
    settings = {"kind": "stress", "engines": options.engines, "launches_per_engine": options.launches,
                "busy_processes": options.busy, "processes_per_run": tiny_runs.PROCESSES,
                "engines_concurrent": options.concurrent,
                "tiny_run": dataclasses.asdict(STRESS_RUN), "target": TARGET}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="stress-") as work:
        setup = tiny_runs.prepare(Path(work) / "setup")
        with busy_processes(options.busy, options.hours * 3600):
            with ThreadPoolExecutor(len(options.engines) if options.concurrent else 1) as pool:
                stressed = {engine: pool.submit(stress_engine, engine, options.launches, Path(work), setup)
                            for engine in options.engines}  # fmt: skip
                engines = {engine: future.result() for engine, future in stressed.items()}
    results = {"engines": engines, "target_met": meets_target(settings, engines)}
    path = write_record("reliability", settings, results, started=started, name="stress",
                        results_dir=options.results_dir)  # fmt: skip
    for engine, summary in engines.items():
        print(f"{engine}: {summary['aborts']} aborts, {summary['weight_mismatches']} weight mismatches in "
              f"{summary['launches']} launches under {options.busy} busy processes")  # fmt: skip
    print(f"Record: {path}")
    return results


if __name__ == "__main__":
    main()
