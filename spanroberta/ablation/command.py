"""The ablation's command line, `python -m spanroberta.ablation CONFIG --output_dir DIR` (run_ablation.py in a
checkout): the config read and checked, every unit not yet done run, the results written, and the raw record kept.

--record_dir: where the raw record of the ablation goes (spanroberta.records: the command, commit, machine, the
config's values, the content of results.json, the wall time and the load average), as
`<record_dir>/ablation-<config name>/<UTC time>-<config name>.json`. By default `benchmarks/results` of the checkout
the package is in, when that folder exists (benchmarks/tables/generate.py makes benchmarks/ABLATIONS.md's tables from
it); otherwise (an installed package), or with `--record_dir ""`, no record is written.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

from ..records import start_run, write_record
from ..runs.output_folder import check_output_folder_owner
from ..runs.preemption import signals_noted
from ..runs.validation import user_errors
from .config import check_values, load_config
from .runner import SCRIPT, holds_an_ablation, run_ablation

CHECKOUT_RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def argument_parser() -> argparse.ArgumentParser:
    """The command line: the config file and --output_dir (the docs' commands are checked against it)."""
    parser = argparse.ArgumentParser(
        description="Pretrain every arm of an ablation, fine-tune each on every task for every seed, and tabulate "
        "the scores as the papers do.",
        allow_abbrev=False,
    )
    parser.add_argument("config", help="The ablation config, .yaml, .yml or .json.")
    parser.add_argument("--output_dir", required=True, help="Where the units and the results go.")
    parser.add_argument(
        "--overwrite_output_dir",
        action="store_true",
        help="Write into an --output_dir that is not empty and holds no ablation (else it is refused).",
    )
    parser.add_argument(
        "--record_dir",
        default=str(CHECKOUT_RESULTS) if CHECKOUT_RESULTS.is_dir() else "",
        help="Where the raw record goes (default: benchmarks/results of this checkout if it exists; '': none).",
    )
    return parser


def main(args: list[str] | None = None) -> dict:
    """Runs the ablation the command line asks for; returns the content of results.json (on the main process)."""
    options = argument_parser().parse_args(args)
    # Provenance, load average and clock before anything runs: on a shared machine the wall time is an upper bound,
    # and a run can span later commits.
    started, start = start_run(), time.perf_counter()
    # A preemption signal outside a unit's training is noted, and stops the driver before the next unit.
    with signals_noted(SCRIPT), user_errors(SCRIPT):
        config = load_config(options.config)
        check_values(config)
        check_output_folder_owner(options.output_dir, SCRIPT, options.overwrite_output_dir, holds_an_ablation)
        content = run_ablation(config, options.output_dir)
    # Only the main process gets the results (the others get {}): it alone writes the record.
    if options.record_dir and content:
        name = Path(options.config).stem
        results = {**content, "wall_seconds": time.perf_counter() - start}
        path = write_record(f"ablation-{name}", {"config": dataclasses.asdict(config)}, results, started=started,
                            name=name, results_dir=options.record_dir)  # fmt: skip
        print(f"[ablation] record: {path}")
    return content
