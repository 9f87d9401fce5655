#!/usr/bin/env python
"""Writes every generated region of the project's markdown files from the committed raw records.

A region is the text between the lines `<!-- generated:NAME -->` and `<!-- /generated:NAME -->` in README.md,
benchmarks/RESULTS.md, benchmarks/ABLATIONS.md or docs/*.md. Its content comes from the records under
benchmarks/results/ (written by the benchmark scripts and run_ablation.py through `spanroberta.records`), so a table
never holds a number that no record holds: every row names the record it comes from. Headlines read the latest
record of each setting. A region whose name this script does not know is an error, as is one left open.

    python -m benchmarks.tables.generate           # rewrite the regions
    python -m benchmarks.tables.generate --check   # exit 1 and name each stale region, without writing

Known regions: the names in RENDERERS (headline, gpu, gpu-check, pretraining-step, step-profile, heads, collator,
trainer, batch-sweep, speed-targets, data-prep, corpus-scaling, task-benchmark, task-scores, finetuning-parity,
parity-findings, qa-pipeline, front-page, reliability-stress, reliability-faults, reliability-checks, same-seed,
long-line, bad-inputs), and ablation-<config> for each configs/ablations/<config>.yaml.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import ROOT
from benchmarks.tables.ablations import ablation_rows, render_ablation
from benchmarks.tables.render import (
    Column,
    Context,
    Table,
    fmt_cell,
    fmt_ratio,
    latest_record,
    markdown_table,
    none_yet,
    not_on_gpu_yet,
    target_verdict,
)
from benchmarks.speed.trainer import CONFIGS as TRAINER_CONFIGS, settings_of
from benchmarks.tables import parity
from benchmarks.tables.reliability import BAD_INPUTS, FAULT_CHECKS, FAULTS, LONG_LINE, STRESS
from benchmarks.tables.same_seed import SAME_SEED_TABLE
from benchmarks.tables.speed import (
    COLLATOR,
    MASKING_BY_LANGUAGE,
    CORPUS_SCALING,
    DATA_PREP,
    GPU_CHECK,
    HEADS,
    PRETRAINING_STEP,
    TRAINER,
    render_batch_sweep,
    render_step_profile,
)
from benchmarks.tables.speed_targets import render_speed_targets
from benchmarks.tables.task_benchmark import TASK_SCORES, render_task_benchmark
from spanroberta.tasks.squad.scoring import exact_match_score
from spanroberta.records import record_commit

# Markers stand on lines of their own (a marker quoted inside a sentence is text).
REGION = re.compile(r"^<!-- generated:(?P<name>[\w.-]+) -->\n(?P<body>.*?)^<!-- /generated:(?P=name) -->$", re.S | re.M)
OPENING = re.compile(r"^<!-- generated:([\w.-]+) -->$", re.M)

# The CPU speed targets the project states: the collators', spanroberta's sequences/s over the transformers
# baseline's. The collator runs on the CPU in every run, GPU runs included, so its speed there is what users get. The
# model step and the Trainer path have targets on the GPU only (GPU_FIGURES), where users train; their CPU records
# stay measurements (the pretraining-step and trainer tables of RESULTS.md).
COLLATOR_TARGETS = {"transformers token": 1.0, "transformers whole-word": 3.0}
TRAINER_DEFAULT_RUN = "run_pretraining.py --recipe spanbert"

# The GPU figures the project names: (figure, benchmark, settings of its records, the command that measures it).
GPU_FIGURES = (
    ("pretraining step, base 4 x 512, bf16, GPU", "pretraining_step", {"config": "base", "device": "cuda"},
     "python -m benchmarks.speed.pretraining_step --config base --steps 20 --warmup 5"),
    ("pretraining step, base 32 x 512, bf16, GPU", "pretraining_step", {"config": "base-gpu", "device": "cuda"},
     "python -m benchmarks.speed.pretraining_step --config base-gpu large-gpu --steps 20 --warmup 5 --ablations"),
    ("pretraining step, large 16 x 512, bf16, GPU", "pretraining_step", {"config": "large-gpu", "device": "cuda"},
     "python -m benchmarks.speed.pretraining_step --config base-gpu large-gpu --steps 20 --warmup 5 --ablations"),
    ("Trainer path, base 32 x 512, bf16, GPU", "trainer", {"config": "base-gpu", "torch_compile": False},
     "python -m benchmarks.speed.trainer --config base-gpu large-gpu --precision bf16"),
    ("Trainer path, large 16 x 512, bf16, GPU", "trainer", {"config": "large-gpu", "torch_compile": False},
     "python -m benchmarks.speed.trainer --config base-gpu large-gpu --precision bf16"),
    ("Trainer path, base, bf16, `--torch_compile`, GPU", "trainer", {"config": "base-gpu", "torch_compile": True},
     "python -m benchmarks.speed.trainer --config base-gpu large-gpu --precision bf16 --torch-compile"),
    ("Trainer path, large, bf16, `--torch_compile`, GPU", "trainer", {"config": "large-gpu", "torch_compile": True},
     "python -m benchmarks.speed.trainer --config base-gpu large-gpu --precision bf16 --torch-compile"),
)  # fmt: skip


# Headline: the latest record of each setting against its target, then the GPU figures.
def _collator_row(context: Context, other: str, target: float) -> list[str]:
    figure = f"collator, span+SBO against {other}"
    record = latest_record(context.records("collator"))
    ratio = record and record["results"]["span_sbo_ratios"].get(other, {}).get("median")
    if ratio is None:
        command = "python -m benchmarks.speed.collator"
        return [figure, "no record", f"not measured (target >= {target:.1f}x)", f"run `{command}`"]
    return [figure, f"**{fmt_ratio(ratio)}** (sequences/s)", target_verdict(ratio, target), context.link(record)]


def _gpu_row(context: Context, figure: str, benchmark: str, settings: dict[str, Any], command: str) -> list[str]:
    found = [record for record in context.records(benchmark) if record["machine"].get("gpu")]
    if benchmark == "trainer":  # the pair's own batch in bf16: neither the batch sweep nor --fp8, nor a rehearsal
        pair = {"batch_size": TRAINER_CONFIGS[settings["config"]][2], "fp8": False, "rehearsal": False}
        found = [record for record in found if pair.items() <= settings_of(record).items()]
    record = latest_record(found, **settings)
    if record is None:
        return [figure, "no record", "not measured", not_on_gpu_yet(command)]
    results = record["results"]
    if benchmark == "pretraining_step":
        mfu = results["sides"]["spanroberta"].get("mfu")
        latest = f"**{fmt_ratio(results['ratio_median'])}**" + (f", spanroberta MFU {100 * mfu:.1f}%" if mfu else "")
    else:
        run = results["runs"].get(TRAINER_DEFAULT_RUN, {})
        mfu = run.get("mfu")
        latest = f"**{fmt_ratio(run.get('ratio_to_baseline'))}** (real tokens/s)" + (
            f", spanroberta MFU {100 * mfu:.1f}%" if mfu else ""
        )
    where = f"measured on {record['machine']['gpu']} from commit `{record_commit(record)}`"
    return [figure, latest, where, context.link(record)]


def render_headline(context: Context) -> str:
    rows = [_collator_row(context, other, target) for other, target in COLLATOR_TARGETS.items()]
    gpu = [_gpu_row(context, *figure) for figure in GPU_FIGURES]
    return markdown_table(["figure", "latest", "target", "record"],
                          rows + gpu + _parity_rows(context) + ablation_rows(context))  # fmt: skip


def render_front_page(context: Context) -> str:
    """The README's figures: the measured speed figures (the Trainer path on a GPU, the collators on the CPU), each
    from its records; every figure, measured or not yet, is in RESULTS.md's headline."""
    trainer = [row for row in (_gpu_row(context, *figure) for figure in GPU_FIGURES)
               if row[0].startswith("Trainer path") and row[1] != "no record"]  # fmt: skip
    collators = [row for row in (_collator_row(context, other, target) for other, target in COLLATOR_TARGETS.items())
                 if row[1] != "no record"]  # fmt: skip
    return markdown_table(["figure", "latest", "target or where", "record"], trainer + collators) if trainer + collators \
        else "No record yet."


def render_gpu(context: Context) -> str:
    return markdown_table(["figure", "latest", "GPU", "record"], [_gpu_row(context, *figure) for figure in GPU_FIGURES])


def _parity_rows(context: Context) -> list[list[str]]:
    page = Path(os.path.relpath(context.root / "benchmarks" / "PARITY.md", context.markdown.parent)).as_posix()
    records, floor_records = _parity_records(context)
    return parity.headline_rows(records, page, floor_records)


def _parity_records(context: Context) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The parity benchmark's run records and the task benchmark's floors records, which its floors come from."""
    return context.records("finetuning-parity"), context.records("task-floors")


def render_finetuning_parity(context: Context) -> str:
    records, floor_records = _parity_records(context)
    return parity.parity_table(records, floor_records).render(context)


def render_parity_findings(context: Context) -> str:
    return parity.findings(*_parity_records(context)).render(context)


def _qa_rows(context: Context) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    record = (context.records("qa-pipeline") or [None])[-1]
    return [] if record is None else [(record, entry) for entry in record["results"]["answers"]]


def _matches(entry: dict[str, Any]) -> str:
    """Whether the answer matches a gold answer by SQuAD's exact match."""
    return "yes" if any(exact_match_score(entry["answer"], gold) for gold in entry["gold"]) else "no"


# The latest qa-pipeline record: the model, its scores on its held-out questions and whether plain transformers (in a
# process where spanroberta cannot be imported) gave the same answers; then each question of the article.
QA_MODEL = Table(lambda context: _qa_rows(context)[:1], [
    Column.of("article", lambda row: f"*{row[0]['settings']['article'].replace('_', ' ')}*"),
    Column.of("model", lambda row: f"`{row[0]['settings']['model_class']}`"),
    Column.of("fine-tuned from", lambda row: row[0]["settings"].get("base_model") or "not named by its card"),
    Column.of("exact match, F1 (one seed: no verdict)", lambda row: "{exact_match:.1f}, {f1:.1f}".format(
        **row[0]["settings"]["model_scores"])),
    Column.of("plain transformers", lambda row: "the same answers and scores"
              if row[0]["results"]["without_spanroberta"]["same_answers"] else "different answers"),
    Column("record", lambda row, context: context.link(row[0])),
], none_yet("python -m benchmarks.parity.qa_pipeline --model <a run_squad.py output folder>"))  # fmt: skip
QA_ANSWERS = Table(_qa_rows, [
    Column.of("question", lambda row: fmt_cell(row[1]["question"])),
    Column.of("answer", lambda row: f"**{fmt_cell(row[1]['answer'])}**"),
    Column.of("score", lambda row: f"{row[1]['score']:.3f}"),
    Column.of("gold answers", lambda row: " / ".join(fmt_cell(gold) for gold in row[1]["gold"])),
    Column.of("matches a gold answer", lambda row: _matches(row[1])),
], "")  # fmt: skip


def render_qa_pipeline(context: Context) -> str:
    found = _qa_rows(context)
    quote = f"> {found[0][0]['results']['context']}\n\n" if found else ""
    return quote + QA_MODEL.render(context) + ("\n\n" + QA_ANSWERS.render(context) if found else "")


RENDERERS: dict[str, Callable[[Context], str]] = {
    "task-benchmark": render_task_benchmark,
    "task-scores": TASK_SCORES.render,
    "qa-pipeline": render_qa_pipeline,
    "finetuning-parity": render_finetuning_parity,
    "parity-findings": render_parity_findings,
    "headline": render_headline,
    "front-page": render_front_page,
    "gpu": render_gpu,
    "gpu-check": GPU_CHECK.render,
    "pretraining-step": PRETRAINING_STEP.render,
    "step-profile": render_step_profile,
    "batch-sweep": render_batch_sweep,
    "speed-targets": render_speed_targets,
    "heads": HEADS.render,
    "collator": COLLATOR.render,
    "masking-languages": MASKING_BY_LANGUAGE.render,
    "trainer": TRAINER.render,
    "data-prep": DATA_PREP.render,
    "corpus-scaling": CORPUS_SCALING.render,
    "reliability-stress": STRESS.render,
    "reliability-faults": FAULTS.render,
    "reliability-checks": FAULT_CHECKS.render,
    "same-seed": SAME_SEED_TABLE.render,
    "long-line": LONG_LINE.render,
    "bad-inputs": BAD_INPUTS.render,
}


def renderer(name: str, root: Path) -> Callable[[Context], str] | None:
    if name in RENDERERS:
        return RENDERERS[name]
    config = name.removeprefix("ablation-")
    if name.startswith("ablation-") and (root / "configs" / "ablations" / f"{config}.yaml").is_file():
        return lambda context: render_ablation(context, config)
    return None


class RegionError(Exception):
    """A region that cannot be generated: unknown name, or opened and never closed."""


def regenerate(text: str, context: Context) -> tuple[str, list[str]]:
    """The text with every region rewritten, and the names of the regions whose content changed."""
    closed = {match.group("name") for match in REGION.finditer(text)}
    for name in OPENING.findall(text):
        if name not in closed:
            raise RegionError(f"{context.markdown}: `<!-- generated:{name} -->` has no `<!-- /generated:{name} -->`.")
    stale = []

    def write(match: re.Match) -> str:
        name = match.group("name")
        render = renderer(name, context.root)
        if render is None:
            raise RegionError(
                f"{context.markdown}: region `{name}` is unknown to benchmarks/tables/generate.py (known: "
                f"{', '.join(RENDERERS)}, ablation-<config> for configs/ablations/<config>.yaml)."
            )
        body = render(context).strip("\n") + "\n"
        if match.group("body") != body:
            stale.append(name)
        return f"<!-- generated:{name} -->\n{body}<!-- /generated:{name} -->"

    return REGION.sub(write, text), stale


def markdown_files(root: Path) -> list[Path]:
    pages = ("RESULTS.md", "ABLATIONS.md", "PARITY.md", "TASKS.md")
    candidates = [root / "README.md", *(root / "benchmarks" / name for name in pages)]
    return [path for path in candidates + sorted((root / "docs").glob("*.md")) if path.is_file()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="Write nothing; exit 1 naming each stale region.")
    parser.add_argument("--root", type=Path, default=ROOT, help="The checkout whose markdown files are written.")
    parser.add_argument("--records_dir", type=Path, default=None, help="Default: <root>/benchmarks/results.")
    args = parser.parse_args(argv)
    records_dir = args.records_dir or args.root / "benchmarks" / "results"
    stale_files = []
    for path in markdown_files(args.root):
        text = path.read_text(encoding="utf-8")
        try:
            new_text, stale = regenerate(text, Context(records_dir, path, args.root))
        except RegionError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        if new_text == text:
            continue
        stale_files.append(path)
        if args.check:
            for name in stale:
                print(f"stale: {path.relative_to(args.root)}, region `{name}`", file=sys.stderr)
        else:
            path.write_text(new_text, encoding="utf-8")
            print(f"wrote {path.relative_to(args.root)}: {', '.join(stale)}")
    if args.check and stale_files:
        print("Regenerate with: python -m benchmarks.tables.generate", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
