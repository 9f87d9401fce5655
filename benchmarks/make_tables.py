#!/usr/bin/env python
"""Writes every generated region of the project's markdown files from the committed raw records.

A region is the text between the lines `<!-- generated:NAME -->` and `<!-- /generated:NAME -->` in README.md,
benchmarks/RESULTS.md, benchmarks/ABLATIONS.md or docs/*.md. Its content comes from the records under
benchmarks/results/ (written by the benchmark scripts and run_ablation.py through `spanroberta.records`), so a table
never holds a number that no record holds: every row names the record it comes from. Headlines read the latest
record of each setting. A region whose name this script does not know is an error, as is one left open.

    python benchmarks/make_tables.py            # rewrite the regions
    python benchmarks/make_tables.py --check    # exit 1 and name each stale region, without writing

Known regions: the names in RENDERERS (headline, gpu, pretraining-step, heads, collator, trainer, data-prep,
corpus-scaling, tasks, finetuning-parity, parity-findings, qa-pipeline), and ablation-<config> for each
configs/ablations/<config>.yaml.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: spanroberta of this checkout

from spanroberta.records import read_records, record_load_average  # noqa: E402

# Markers stand on lines of their own (a marker quoted inside a sentence is text).
REGION = re.compile(r"^<!-- generated:(?P<name>[\w.-]+) -->\n(?P<body>.*?)^<!-- /generated:(?P=name) -->$", re.S | re.M)
OPENING = re.compile(r"^<!-- generated:([\w.-]+) -->$", re.M)

# The speed targets the project states: (figure, record reader, target ratio). Ratios are spanroberta's throughput
# over the transformers baseline's (tokens/s for the step and the Trainer, sequences/s for the collators).
STEP_TARGETS = {("small", "fp32"): 3.0, ("small", "bf16"): 3.0, ("base", "fp32"): 1.3, ("base", "bf16"): 1.3}
COLLATOR_TARGETS = {"transformers token": 1.0, "transformers whole-word": 3.0}
TRAINER_TARGETS = {("small", "fp32"): 3.0, ("small", "bf16"): 3.0}
TRAINER_DEFAULT_RUN = "run_pretraining.py --recipe spanbert"
# (link text, anchor) of the sections of benchmarks/RESULTS.md the headline points to.
SECTIONS = (("pretraining step", "pretraining-step"), ("collator", "collator"), ("Trainer path", "the-trainer-path"),
            ("GPU", "gpu"))  # fmt: skip

# The GPU figures the project names: (figure, benchmark, settings of its records, the command that measures it).
GPU_FIGURES = (
    ("pretraining step, base, bf16, GPU", "pretraining_step", {"config": "base", "device": "cuda"},
     "python benchmarks/bench_pretraining_step.py --config base --steps 20 --warmup 5"),
    ("Trainer path, base 32 x 512, bf16, GPU", "trainer", {"config": "base-gpu", "torch_compile": False},
     "python benchmarks/bench_trainer.py --config base-gpu large-gpu --precision bf16"),
    ("Trainer path, large 16 x 512, bf16, GPU", "trainer", {"config": "large-gpu", "torch_compile": False},
     "python benchmarks/bench_trainer.py --config base-gpu large-gpu --precision bf16"),
    ("Trainer path, base, bf16, `--torch_compile`, GPU", "trainer", {"config": "base-gpu", "torch_compile": True},
     "python benchmarks/bench_trainer.py --config base-gpu large-gpu --precision bf16 --torch-compile"),
)  # fmt: skip


@dataclass
class Context:
    """What a renderer needs: the records folder, the markdown file it writes into (for relative links) and the
    checkout's root (for the ablation configs)."""

    records_dir: Path
    markdown: Path
    root: Path

    def records(self, benchmark: str) -> list[dict[str, Any]]:
        return read_records(benchmark, self.records_dir)

    def link(self, record: dict[str, Any]) -> str:
        path = Path(record["path"])
        return f"[{path.name}]({Path(os.path.relpath(path, self.markdown.parent)).as_posix()})"

    def page(self, label: str, name: str, anchor: str) -> str:
        """A link to a section of benchmarks/RESULTS.md or benchmarks/ABLATIONS.md from the markdown file."""
        target = Path(os.path.relpath(self.root / "benchmarks" / name, self.markdown.parent)).as_posix()
        return f"[{label}]({target}#{anchor})"


# Formatting helpers: every number in a table goes through one of these.
def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def _n(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _load(record: dict[str, Any]) -> str:
    """The 1-minute load average at the run's start and end, or that the record's script did not read it."""
    start, end = record_load_average(record)
    if start is None and end is None:
        return "not recorded"
    return f"{(start or ['?'])[0]} → {(end or ['?'])[0]}"


def _date(record: dict[str, Any]) -> str:
    commit = (record.get("git_commit") or "?")[:7] + (" (dirty)" if record.get("git_dirty") else "")
    return f"{record['date'][:16].replace('T', ' ')}, `{commit}`"


def _cell(text: str) -> str:
    """Free text (a question, an answer) as a table cell: a pipe would end the cell."""
    return text.replace("|", "\\|")


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def _none_yet(command: str) -> str:
    return f"No committed record yet; run `{command}` to measure it."


def _latest(records: list[dict[str, Any]], **settings: Any) -> dict[str, Any] | None:
    found = [r for r in records if all(r["settings"].get(key) == value for key, value in settings.items())]
    return found[-1] if found else None


def _verdict(ratio: float, target: float) -> str:
    return f"**met** (target >= {target:.1f}x)" if ratio >= target else f"**not met** (target >= {target:.1f}x)"


# Headline: the latest record of each setting against its target, then the GPU figures.
def _step_row(context: Context, config: str, precision: str, target: float) -> list[str]:
    figure = f"pretraining step, {config}, {precision}, CPU"
    record = _latest(context.records("pretraining_step"), config=config, precision=precision, device="cpu")
    if record is None:
        command = f"python benchmarks/bench_pretraining_step.py --config {config} --precision {precision}"
        return [figure, "no record", f"not measured (target >= {target:.1f}x)", f"run `{command}`"]
    results = record["results"]
    sides = results["sides"]
    latest = (f"**{_x(results['ratio_median'])}** ({_n(sides['spanroberta']['tokens_per_second_median'])} against "
              f"{_n(sides['baseline']['tokens_per_second_median'])} tokens/s)")  # fmt: skip
    return [figure, latest, _verdict(results["ratio_median"], target), context.link(record)]


def _collator_row(context: Context, other: str, target: float) -> list[str]:
    figure = f"collator, span+SBO against {other}"
    record = _latest(context.records("collator"))
    ratio = record and record["results"]["span_sbo_ratios"].get(other, {}).get("median")
    if ratio is None:
        command = "python benchmarks/bench_collator.py"
        return [figure, "no record", f"not measured (target >= {target:.1f}x)", f"run `{command}`"]
    return [figure, f"**{_x(ratio)}** (sequences/s)", _verdict(ratio, target), context.link(record)]


def _trainer_row(context: Context, config: str, precision: str, target: float) -> list[str]:
    figure = f"Trainer path, {config}, {precision}, default recipe against run_mlm-style"
    record = _latest(context.records("trainer"), config=config, precision=precision, torch_compile=False)
    run = record and record["results"]["runs"].get(TRAINER_DEFAULT_RUN)
    if not run or run["ratio_to_baseline"] is None:
        command = f"python benchmarks/bench_trainer.py --config {config} --precision {precision}"
        return [figure, "no record", f"not measured (target >= {target:.1f}x)", f"run `{command}`"]
    ratio = run["ratio_to_baseline"]
    return [figure, f"**{_x(ratio)}** (real tokens/s)", _verdict(ratio, target), context.link(record)]


def _gpu_row(context: Context, figure: str, benchmark: str, settings: dict[str, Any], command: str) -> list[str]:
    found = [record for record in context.records(benchmark) if record["machine"].get("gpu")]
    record = _latest(found, **settings)
    if record is None:
        return [figure, "no record", "not measured", f"Not measured on a GPU yet; run `{command}` to measure it"]
    results = record["results"]
    if benchmark == "pretraining_step":
        mfu = results["sides"]["spanroberta"].get("mfu")
        latest = f"**{_x(results['ratio_median'])}**" + (f", spanroberta MFU {100 * mfu:.1f}%" if mfu else "")
    else:
        latest = f"**{_x(results['runs'].get(TRAINER_DEFAULT_RUN, {}).get('ratio_to_baseline'))}** (real tokens/s)"
    return [figure, latest, f"measured on {record['machine']['gpu']}", context.link(record)]


def _ablation_rows(context: Context) -> list[list[str]]:
    """The latest record of each ablation run so far (its headline metric's median per arm and task), and one row
    for the configs never run."""
    rows, missing = [], {False: [], True: []}
    for config in sorted((context.root / "configs" / "ablations").glob("*.yaml")):
        records = context.records(f"ablation-{config.stem}")
        if not records:
            missing[_runs_on_gpu(context, config.stem)].append(config.stem)
            continue
        content = records[-1]["results"]
        medians = [f"{arm} {task} {statistics.median(values):.1f}"
                   for (arm, task), values in _headline_scores(content).items() if values]  # fmt: skip
        link = context.page(f"ablation {config.stem}", "ABLATIONS.md", f"ablation-{config.stem}")
        rows.append([link, "; ".join(medians), "no target (a comparison)", context.link(records[-1])])
    command = "python run_ablation.py configs/ablations/CONFIG.yaml --output_dir ablations/CONFIG"
    for on_gpu, configs in missing.items():
        if configs:
            note = f"Not measured on a GPU yet; run `{command}`" if on_gpu else f"No record yet; run `{command}`"
            rows.append([f"ablations {', '.join(configs)}", "no record", "not measured", f"{note} to measure it"])
    return rows


def render_headline(context: Context) -> str:
    rows = [_step_row(context, config, precision, target) for (config, precision), target in STEP_TARGETS.items()]
    rows += [_collator_row(context, other, target) for other, target in COLLATOR_TARGETS.items()]
    rows += [_trainer_row(context, config, precision, target)
             for (config, precision), target in TRAINER_TARGETS.items()]  # fmt: skip
    gpu = [_gpu_row(context, *figure) for figure in GPU_FIGURES]
    met = [row[0] for row in rows if row[2].startswith("**met")]
    missed = [row[0] for row in rows if row[2].startswith("**not met")]
    unmeasured = [row[0] for row in rows if row[2].startswith("not measured")]
    summary = [
        f"By the latest records, {len(met)} of the {len(rows)} CPU targets are met"
        + (f" ({'; '.join(met)})" if met else "")
        + (f". Not met: {'; '.join(missed)}" if missed else "")
        + (f". Not measured: {'; '.join(unmeasured)}" if unmeasured else "") + ".",
        f"{sum(row[1] == 'no record' for row in gpu)} of the {len(gpu)} GPU figures are not measured yet.",
        _parity_summary().headline_sentence(context.records("finetuning-parity")),
        "Ratios are spanroberta's throughput over the transformers baseline's (medians); details: "
        + ", ".join(context.page(label, "RESULTS.md", anchor) for label, anchor in SECTIONS)
        + f", {context.page('ablations', 'ABLATIONS.md', 'ablations')}. Wall times on a machine shared with other "
        "jobs are upper bounds; each record holds its machine and load average.",
    ]
    table = _table(["figure", "latest", "target", "record"], rows + gpu + _parity_rows(context) + _ablation_rows(context))
    return table + "\n\n" + "\n".join(summary)


def render_gpu(context: Context) -> str:
    return _table(["figure", "latest", "GPU", "record"], [_gpu_row(context, *figure) for figure in GPU_FIGURES])


# Full tables: every record of a benchmark, newest first, each row naming its record.
def render_pretraining_step(context: Context) -> str:
    records = context.records("pretraining_step")
    if not records:
        return _none_yet("python benchmarks/bench_pretraining_step.py --config small --precision fp32 bf16")
    rows = []
    for record in reversed(records):
        settings, results = record["settings"], record["results"]
        span, base = results["sides"]["spanroberta"], results["sides"]["baseline"]
        ablations = ", ".join(f"{name.removeprefix('spanroberta-')} {_x(gain['median'])}"
                              for name, gain in sorted(results["ablation_ratios"].items())) or "-"  # fmt: skip
        rows.append([
            _date(record), settings["config"], settings["precision"], settings["device"], str(settings["threads"]),
            str(settings["steps"]), _n(span["tokens_per_second_median"]), _n(base["tokens_per_second_median"]),
            f"**{_x(results['ratio_median'])}**", _x(results["ratio_best"]), _x(results["ratio_cpu_median"]),
            ablations, _load(record), context.link(record),
        ])  # fmt: skip
    header = ["date (UTC), commit", "config", "precision", "device", "threads", "timed steps",
              "spanroberta tokens/s (median)", "baseline tokens/s (median)", "ratio (medians)",
              "ratio (fastest steps)", "ratio (CPU time)", "spanroberta / ablation", "load average",
              "record"]  # fmt: skip
    return _table(header, rows)


def render_heads(context: Context) -> str:
    records = context.records("heads")
    if not records:
        return _none_yet("python benchmarks/bench_heads.py --threads 1")
    rows = [
        [_date(record), f"{shape['shape']} ({shape['rows']} x {shape['hidden']})", shape["precision"],
         str(record["settings"]["threads"]), _n(shape["plain_median_cpu_seconds"], 3),
         _n(shape["fused_median_cpu_seconds"], 3), f"**{_x(shape['speed_up'])}**", _load(record), context.link(record)]
        for record in reversed(records) for shape in record["results"]["shapes"]
    ]  # fmt: skip
    header = ["date (UTC), commit", "shape (targets x hidden)", "precision", "threads", "plain CPU s (median)",
              "fused CPU s (median)", "fused speed-up", "load average", "record"]  # fmt: skip
    return _table(header, rows)


def render_collator(context: Context) -> str:
    records = context.records("collator")
    if not records:
        return _none_yet("python benchmarks/bench_collator.py")
    rows = []
    for record in reversed(records):
        for name, figures in record["results"]["collators"].items():
            ratio = record["results"]["span_sbo_ratios"].get(name, {}).get("median")
            rows.append([_date(record), name, str(record["settings"]["threads"]),
                         _n(figures["sequences_per_second_median"]), _n(figures["sequences_per_second_best"]),
                         _n(1000 * figures["median_seconds"], 1), _x(ratio), _load(record),
                         context.link(record)])  # fmt: skip
    header = ["date (UTC), commit", "collator", "threads", "sequences/s (median)", "sequences/s (best)",
              "ms/batch (median)", "span+SBO / this", "load average", "record"]  # fmt: skip
    return _table(header, rows)


def render_trainer(context: Context) -> str:
    records = context.records("trainer")
    if not records:
        return _none_yet("python benchmarks/bench_trainer.py --config small --precision fp32")
    rows = []
    for record in reversed(records):
        settings = record["settings"]
        label = f"{settings['config']} ({settings['batch_size']} x {settings['seq_length']}), {settings['precision']}"
        label += ", torch_compile" if settings["torch_compile"] else ""
        for run, figures in record["results"]["runs"].items():
            rows.append([_date(record), label, str(settings["steps"]), run, _n(figures["real_tokens_per_second"]),
                         _x(figures["ratio_to_baseline"]), _load(record), context.link(record)])  # fmt: skip
    header = ["date (UTC), commit", "config", "steps", "run", "real tokens/s (median window)", "vs baseline",
              "load average", "record"]  # fmt: skip
    return _table(header, rows)


def render_data_prep(context: Context) -> str:
    records = context.records("data_prep")
    if not records:
        return _none_yet("python benchmarks/bench_data_prep.py --mode prepared")
    rows = [
        [_date(record), record["settings"]["mode"], f"{scale['scale']}x", _n(scale["megabytes"]), _n(scale["blocks"]),
         _n(scale["tokens"]), _n(scale["total_seconds"], 1), _n(scale["tokens_per_second"]),
         _n(scale["time_over_linear"], 2), _n(scale["peak_rss_mib"]), _load(record), context.link(record)]
        for record in reversed(records) for scale in record["results"]["scales"]
    ]  # fmt: skip
    header = ["date (UTC), commit", "mode", "corpus", "MB", "blocks", "tokens", "time s", "tokens/s",
              "time / linear", "peak RSS MiB", "load average", "record"]  # fmt: skip
    return _table(header, rows)


def render_corpus_scaling(context: Context) -> str:
    records = context.records("corpus_scaling")
    if not records:
        return _none_yet("python benchmarks/bench_corpus_scaling.py")
    rows = [
        [_date(record), f"{size['size_mb']} MB", str(record["settings"]["num_proc"]), _n(size["seconds"]),
         _n(size["blocks"]), _n(size["tokens"]), _n(size["tokens_per_second"]), _n(size["peak_pss"] / 2**20),
         _n(size["peak_anon"] / 2**20), _load(record), context.link(record)]
        for record in reversed(records) for size in record["results"]["sizes"]
    ]  # fmt: skip
    header = ["date (UTC), commit", "corpus", "processes", "wall s", "blocks", "tokens", "tokens/s",
              "peak PSS MiB (tree)", "peak anonymous PSS MiB (tree)", "load average", "record"]  # fmt: skip
    return _table(header, rows)


# Ablations: the latest record of each config, written by run_ablation.py.
def _ablation_command(name: str) -> str:
    return f"python run_ablation.py configs/ablations/{name}.yaml --output_dir ablations/{name}"


def _runs_on_gpu(context: Context, name: str) -> bool:
    import yaml

    config = yaml.safe_load((context.root / "configs" / "ablations" / f"{name}.yaml").read_text(encoding="utf-8"))
    return not config.get("pretraining", {}).get("use_cpu", False)


def _arms(content: dict[str, Any]) -> list[str]:
    """The table's rows: a fine-tuned starting checkpoint first (it has no pretraining figures), then the arms."""
    fine_tuned_only = [row["arm"] for row in content["finetuning"] if row["arm"] not in content["pretraining"]]
    return list(dict.fromkeys(fine_tuned_only)) + list(content["pretraining"])


def _headline_scores(content: dict[str, Any]) -> dict[tuple[str, str], list[float]]:
    """(arm, task) -> the task's headline metric over the seeds, arms and tasks in the config's order."""
    scores: dict[tuple[str, str], list[float]] = {
        (arm, task): [] for arm in _arms(content) for task in content["headline_metrics"]
    }
    for row in content["finetuning"]:
        if row["metric"] == content["headline_metrics"][row["task"]]:
            scores[row["arm"], row["task"]].append(row["value"])
    return scores


def _score_tables(content: dict[str, Any]) -> list[str]:
    """Arms x tasks (the headline metric's median over seeds, min-max), then every score of every seed."""
    headline = _headline_scores(content)
    tasks = list(content["headline_metrics"])
    cells = [[arm] + [f"{statistics.median(found):.1f} ({min(found):.1f}-{max(found):.1f})" if found else "-"
                      for found in (headline[arm, task] for task in tasks)]
             for arm in _arms(content)]  # fmt: skip
    header = ["arm"] + [f"{task} ({metric}), median (min-max)" for task, metric in content["headline_metrics"].items()]
    scores: dict[tuple[str, str, str], dict[int, float]] = {}
    for row in content["finetuning"]:
        scores.setdefault((row["arm"], row["task"], row["metric"]), {})[row["seed"]] = row["value"]
    every = [[arm, task, metric, ", ".join(f"seed {seed}: {value:.2f}" for seed, value in sorted(by_seed.items()))]
             for (arm, task, metric), by_seed in scores.items()]  # fmt: skip
    return [_table(header, cells), _table(["arm", "task", "metric", "scores (0-100)"], every)]


def _pretraining_table(content: dict[str, Any]) -> str:
    rows = []
    for arm, figures in content["pretraining"].items():
        parts = figures["parameters"]["by_part"]
        heads = ", ".join(f"{part} {_n(count)}" for part, count in parts.items()
                          if part not in ("roberta", "albert", "electra", "bert")) or "-"  # fmt: skip
        losses = figures["final_train_losses"]
        rows.append([arm, _n(figures["parameters"]["total"]), heads, _n(figures["steps"]), _n(figures["token_slots"]),
                     _n(figures["real_tokens"]), _n(losses.get("loss"), 3), _n(losses.get("mlm_loss"), 3),
                     _n(figures["eval"].get("eval_mlm_loss"), 3), _n(figures["eval"].get("eval_mlm_accuracy"), 4)])
    header = ["arm", "parameters", "of which heads", "steps", "token slots", "real tokens", "final loss",
              "final MLM loss", "eval MLM loss", "eval MLM accuracy"]  # fmt: skip
    return _table(header, rows)


def render_ablation(context: Context, name: str) -> str:
    records = context.records(f"ablation-{name}")
    if not records:
        if _runs_on_gpu(context, name):
            return f"Not measured on a GPU yet; run `{_ablation_command(name)}` to measure it."
        return _none_yet(_ablation_command(name))
    record = records[-1]
    content = record["results"]
    config = record["settings"]["config"]
    time = f"wall time {_n(content['wall_seconds'])} s with the load average going {_load(record)}"
    about = (f"Latest record: {context.link(record)} ({_date(record)}; {record['machine']['cpu']}, "
             f"{record['machine']['gpu'] or 'no GPU'}); {time}, an upper bound on a shared machine. Fine-tuning "
             f"seeds {config['seeds']}; scores on a 0-100 scale.")  # fmt: skip
    return "\n\n".join([about, *_score_tables(content), _pretraining_table(content)])


# Regions: which renderer writes which name.
# Fine-tuning tasks from a real checkpoint: the latest records of each task's benchmark, every official score.
# (label, benchmark, metric keys, command, scale): scale turns a record's values into 0-100 (1 where the record
# already holds percentages, as run_squad.py's MRQA scores do).
TASK_BENCHMARKS = (
    ("relation extraction, SemEval-2010 Task 8", "relation-semeval", ("eval_f1", "eval_precision", "eval_recall",
     "eval_accuracy"), "python benchmarks/bench_relation_semeval.py", 100),
    ("coreference, LitBank", "coref-litbank", ("eval_conll_f1", "eval_muc_f1", "eval_b_cubed_f1",
     "eval_ceaf_phi4_f1"), "python benchmarks/bench_coref_litbank.py", 100),
    ("extractive QA, MRQA's SQuAD file (last 12 articles)", "mrqa-squad", ("SQuAD_f1", "SQuAD_em", "macro_f1"),
     "python benchmarks/bench_mrqa_squad.py", 1),
)  # fmt: skip


def _task_setting(record: dict[str, Any]) -> str:
    settings = record["settings"]
    shown = {key: settings[key] for key in ("entity_markers", "split", "train_documents", "eval_documents",
                                            "train_samples", "eval_samples", "max_steps", "epochs", "learning_rate")
             if key in settings}  # fmt: skip
    return ", ".join(f"{key} {value}" for key, value in shown.items())


def render_tasks(context: Context) -> str:
    rows = []
    for label, benchmark, metrics, command, scale in TASK_BENCHMARKS:
        records = context.records(benchmark)
        if not records:
            rows.append([label, "-", "-", "-", _none_yet(command)])
            continue
        for record in reversed(records):
            results = record["results"]
            scores = ", ".join(f"{name.removeprefix('eval_')} {scale * results[name]:.1f}" for name in metrics
                               if name in results)  # fmt: skip
            seconds = results.get("train_runtime")
            rows.append([label, _task_setting(record), scores, _n(seconds), context.link(record)])
    return _table(["task", "settings", "scores (0-100)", "train s", "record"], rows)


def _parity_summary() -> Any:
    """The parity benchmark's summary module: it owns its tables (its benchmark owns the records' structure).
    Benchmark modules are siblings, not a package."""
    if str(ROOT / "benchmarks") not in sys.path:
        sys.path.insert(0, str(ROOT / "benchmarks"))
    import parity_summary

    return parity_summary


def _parity_rows(context: Context) -> list[list[str]]:
    page = Path(os.path.relpath(context.root / "benchmarks" / "PARITY.md", context.markdown.parent)).as_posix()
    return _parity_summary().headline_rows(context.records("finetuning-parity"), page)


def render_finetuning_parity(context: Context) -> str:
    return _parity_summary().render_parity(context.records("finetuning-parity"), link=context.link)


def render_parity_findings(context: Context) -> str:
    return _parity_summary().render_findings(context.records("finetuning-parity"))


def render_qa_pipeline(context: Context) -> str:
    record = (context.records("qa-pipeline") or [None])[-1]
    if record is None:
        return _none_yet("python benchmarks/bench_qa_pipeline.py --model <a run_squad.py output folder>")
    settings, results = record["settings"], record["results"]
    scores = settings["model_scores"]
    rows = [[_cell(entry["question"]), f"**{_cell(entry['answer'])}**", f"{entry['score']:.3f}",
             " / ".join(_cell(gold) for gold in entry["gold"])] for entry in results["answers"]]  # fmt: skip
    plain = results["without_spanroberta"]
    return (
        f"The first paragraph of the SQuAD v1.1 dev article *{settings['article'].replace('_', ' ')}*, which the model "
        f"never trained on:\n\n> {results['context']}\n\n"
        + _table(["question", "answer", "score", "gold answers"], rows)
        + f"\n\nThe model: `{settings['model_class']}` fine-tuned by `run_squad.py` from {settings.get('base_model') or 'a checkpoint its card does not name'} "
        f"(exact match {scores['exact_match']:.1f}, F1 {scores['f1']:.1f} on its held-out evaluation "
        f"questions). Plain transformers, in a process where spanroberta cannot be imported "
        f"(`trust_remote_code=True`, the pipeline file the checkpoint carries), gave "
        f"{'the same answers and scores' if plain['same_answers'] else 'different answers'}. "
        f"Record: {context.link(record)}.\n"
    )


RENDERERS: dict[str, Callable[[Context], str]] = {
    "tasks": render_tasks,
    "qa-pipeline": render_qa_pipeline,
    "finetuning-parity": render_finetuning_parity,
    "parity-findings": render_parity_findings,
    "headline": render_headline,
    "gpu": render_gpu,
    "pretraining-step": render_pretraining_step,
    "heads": render_heads,
    "collator": render_collator,
    "trainer": render_trainer,
    "data-prep": render_data_prep,
    "corpus-scaling": render_corpus_scaling,
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
                f"{context.markdown}: region `{name}` is unknown to benchmarks/make_tables.py (known: "
                f"{', '.join(RENDERERS)}, ablation-<config> for configs/ablations/<config>.yaml)."
            )
        body = render(context).strip("\n") + "\n"
        if match.group("body") != body:
            stale.append(name)
        return f"<!-- generated:{name} -->\n{body}<!-- /generated:{name} -->"

    return REGION.sub(write, text), stale


def markdown_files(root: Path) -> list[Path]:
    candidates = [root / "README.md", *(root / "benchmarks" / name for name in ("RESULTS.md", "ABLATIONS.md", "PARITY.md"))]
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
        print("Regenerate with: python benchmarks/make_tables.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
