"""The ablation tables of benchmarks/ABLATIONS.md and their rows in the README's figures: the latest record of
each config under configs/ablations/, written by run_ablation.py (benchmarks/tables/generate.py writes them)."""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks.tables.render import (Column, Context, Table, fmt_date, fmt_load, fmt_number, markdown_table, none_yet,
                                      not_on_gpu_yet)  # fmt: skip
from spanroberta.config_files import read_config_file


def ablation_rows(context: Context) -> list[list[str]]:
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
    command = _ablation_command("CONFIG")
    for on_gpu, configs in missing.items():
        if configs:
            note = not_on_gpu_yet(command) if on_gpu else f"No record yet; run `{command}` to measure it"
            rows.append([f"ablations {', '.join(configs)}", "no record", "not measured", note])
    return rows


def _ablation_command(name: str) -> str:
    return f"python run_ablation.py configs/ablations/{name}.yaml --output_dir ablations/{name}"


def _runs_on_gpu(context: Context, name: str) -> bool:
    config = read_config_file(context.root / "configs" / "ablations" / f"{name}.yaml", kind="Ablation config")
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
    header = ["arm"] + [f"{task} ({metric}, 0-100), median (min-max)"
                        for task, metric in content["headline_metrics"].items()]  # fmt: skip
    scores: dict[tuple[str, str, str], dict[int, float]] = {}
    for row in content["finetuning"]:
        scores.setdefault((row["arm"], row["task"], row["metric"]), {})[row["seed"]] = row["value"]
    every = [[arm, task, metric, ", ".join(f"seed {seed}: {value:.2f}" for seed, value in sorted(by_seed.items()))]
             for (arm, task, metric), by_seed in scores.items()]  # fmt: skip
    return [markdown_table(header, cells), markdown_table(["arm", "task", "metric", "scores (0-100)"], every)]


def _pretraining_table(content: dict[str, Any]) -> str:
    rows = []
    for arm, figures in content["pretraining"].items():
        parts = figures["parameters"]["by_part"]
        heads = ", ".join(f"{part} {fmt_number(count)}" for part, count in parts.items()
                          if part not in ("roberta", "albert", "electra", "bert")) or "-"  # fmt: skip
        losses = figures["final_train_losses"]
        rows.append([arm, fmt_number(figures["parameters"]["total"]), heads, fmt_number(figures["steps"]), fmt_number(figures["token_slots"]),
                     fmt_number(figures["real_tokens"]), fmt_number(losses.get("loss"), 3), fmt_number(losses.get("mlm_loss"), 3),
                     fmt_number(figures["eval"].get("eval_mlm_loss"), 3), fmt_number(figures["eval"].get("eval_mlm_accuracy"), 4)])
    header = ["arm", "parameters", "of which heads", "steps", "token slots", "real tokens", "final loss",
              "final MLM loss", "eval MLM loss", "eval MLM accuracy"]  # fmt: skip
    return markdown_table(header, rows)


def render_ablation(context: Context, name: str) -> str:
    records = context.records(f"ablation-{name}")
    if not records:
        if _runs_on_gpu(context, name):
            return not_on_gpu_yet(_ablation_command(name)) + "."
        return none_yet(_ablation_command(name))
    about = Table(lambda context: records[-1:], [
        Column("latest record", lambda record, context: context.link(record)),
        Column.of("date (UTC), commit", fmt_date),
        Column.of("machine", lambda record: f"{record['machine']['cpu']}, {record['machine']['gpu'] or 'no GPU'}"),
        Column.of("wall s (an upper bound on a shared machine)", lambda record: fmt_number(
            record["results"]["wall_seconds"])),
        Column.of("load average", fmt_load),
        Column.of("fine-tuning seeds", lambda record: str(record["settings"]["config"]["seeds"])),
    ])  # fmt: skip
    return "\n\n".join([about.render(context), *_score_tables(records[-1]["results"]),
                        _pretraining_table(records[-1]["results"])])
