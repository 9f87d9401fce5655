#!/usr/bin/env python
"""Reproduce a paper's ablation with one command: pretrain every arm on the same data with the same budget,
fine-tune each on every task for every seed, and write the paper-style table.

    python run_ablation.py configs/ablations/tiny.yaml --output_dir ablation-tiny          # CPU, a few minutes
    python run_ablation.py configs/ablations/spanbert-objectives.yaml --output_dir abl-obj  # one GPU
    accelerate launch run_ablation.py CONFIG --output_dir DIR      # every GPU trains each unit in turn

CONFIG (YAML or JSON; see spanroberta/ablation/config.py and configs/ablations/) holds `pretraining` (the
run_pretraining.py flags every arm shares), `arms` (each arm's differing flags), `tasks` (each with `script`:
run_squad.py (SQuAD or MRQA files), run_glue.py, run_race.py, run_relation.py or run_coref.py, and that script's
flags) and `seeds`. DIR gets results.json (every score,
0-100, and each arm's pretraining figures), results.md (arms x tasks, median over seeds with min-max, best in bold),
pretraining_loss.png and scores.png. Each pretraining and each fine-tuning is a unit, done once its result is on
disk: the same command again redoes nothing, and an interrupted ablation continues where it stopped.
Run it from a checkout of spanroberta: it runs the run_*.py scripts beside it.

--record_dir: where the raw record of the ablation goes (spanroberta.records: the command, commit, machine, the
config's values, the content of results.json, the wall time and the load average), as
`<record_dir>/ablation-<config name>/<UTC time>-<config name>.json`. By default `benchmarks/results` of the checkout
this script is in, when that folder exists (benchmarks/make_tables.py makes benchmarks/ABLATIONS.md's tables from
it); otherwise, or with `--record_dir ""`, no record is written.
"""

import argparse
import dataclasses
import time
from pathlib import Path

from spanroberta.ablation import load_config, run_ablation
from spanroberta.ablation.config import check_values
from spanroberta.records import start_run, write_record
from spanroberta.training.validation import user_errors

CHECKOUT_RESULTS = Path(__file__).resolve().parent / "benchmarks" / "results"


def argument_parser() -> argparse.ArgumentParser:
    """The command line: the config file and --output_dir (the docs' commands are checked against it)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("config", help="The ablation config, .yaml, .yml or .json.")
    parser.add_argument("--output_dir", required=True, help="Where the units and the results go.")
    parser.add_argument(
        "--record_dir",
        default=str(CHECKOUT_RESULTS) if CHECKOUT_RESULTS.is_dir() else "",
        help="Where the raw record goes (default: benchmarks/results of this checkout if it exists; '': none).",
    )
    return parser


def main(args: list[str] | None = None) -> dict:
    options = argument_parser().parse_args(args)
    # Provenance, load average and clock before anything runs: on a shared machine the wall time is an upper bound.
    started, start = start_run(), time.perf_counter()
    with user_errors("run_ablation.py"):
        config = load_config(options.config)
        check_values(config)
        content = run_ablation(config, options.output_dir)
    # Only the main process gets the results (the others get {}): it alone writes the record.
    if options.record_dir and content:
        name = Path(options.config).stem
        results = {**content, "wall_seconds": time.perf_counter() - start}
        path = write_record(f"ablation-{name}", {"config": dataclasses.asdict(config)}, results, started=started,
                            name=name, results_dir=options.record_dir)  # fmt: skip
        print(f"[ablation] record: {path}")
    return content


if __name__ == "__main__":
    main()
