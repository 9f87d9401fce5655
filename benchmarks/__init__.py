"""The benchmarks, one folder a family, each script run as a module from the repository root:

- speed/: throughput of pretraining (a step, the Trainer path, the heads, the collators) and of data preparation
  (`python -m benchmarks.speed.trainer --config small`); speed/common.py holds what they share;
- parity/: fine-tuning parity with plain transformers on a real checkpoint, the QA pipeline with and without
  spanroberta, and the fetching of that checkpoint (`python -m benchmarks.parity.finetuning --size cpu-small`);
- tasks/: the task benchmark, one checkpoint fine-tuned on every task (`python -m benchmarks.tasks.scores`);
- tables/: the generated regions of the markdown files, from the records (`python -m benchmarks.tables.generate`):
  one renderer (tables/render.py), each table a declaration of records, columns and rule;
- gpu/: the prepared check of a GPU machine (`python -m benchmarks.gpu.check`) and its offline bundle (gpu/offline/).

statistics.py holds the verdict rules, the bootstrap and the speed targets every family judges by; common.py holds
what the families share: the shared data's and the checkpoint's paths, the environment and the flags a script is run
with, the tiny random checkpoint of the rehearsals, the seeded samples and the files written from them, and SQuAD
v1.1's official metric written out.

Every benchmark writes raw records under results/ (spanroberta.records), which the tables are generated from.
"""

from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent  # the checkout: run_*.py and spanroberta/
CACHE = BENCHMARKS / ".cache"  # gitignored: the benchmarks' tokenizer and blocks, the fetched checkpoint
