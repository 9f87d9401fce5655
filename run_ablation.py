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
The units run the package's own pretraining and fine-tuning tasks, so an installed package runs the same with
`python -m spanroberta.ablation CONFIG --output_dir DIR`.

--record_dir: where the raw record of the ablation goes (spanroberta.records: the command, commit, machine, the
config's values, the content of results.json, the wall time and the load average), as
`<record_dir>/ablation-<config name>/<UTC time>-<config name>.json`. By default `benchmarks/results` of this
checkout (benchmarks/tables/generate.py makes benchmarks/ABLATIONS.md's tables from it); with `--record_dir ""`, no
record is written.
"""

from spanroberta.ablation.command import argument_parser, main

__all__ = ["argument_parser", "main"]

if __name__ == "__main__":
    main()
