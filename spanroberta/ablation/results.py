"""Scores and figures of the units, results.json and the paper-style results.md.

Scores are on a 0-100 scale, as the papers report them (tasks.py reads each script's eval_results.json). Each table
cell is the median over the fine-tuning seeds (and pretraining seeds, if several) with the min-max range: RoBERTa
(section 5.1, "median of five runs") and ELECTRA report medians over fine-tuning seeds, which is robust to the odd
failed run. A cell with fewer runs than the config asks for says how many it has; a cell without any is "-".
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from .config import STARTING_CHECKPOINT, AblationConfig
from .reports import headline_metric


def records(config: AblationConfig, finished: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per (arm, task, seed, metric) of the fine-tuning results."""
    rows = []
    for result in finished:
        for metric, value in result["scores"].items():
            row = {"arm": result["arm"], "task": result["task"], "seed": result["seed"], "metric": metric,
                   "value": round(value, 4)}  # fmt: skip
            if config.pretraining_seeds is not None:
                row["pretraining_seed"] = result["pretraining_seed"]
            rows.append(row)
    return rows


def summarize(config: AblationConfig, rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, float]]:
    """(arm, task) -> median, min, max and count of the task's headline metric over the seeds."""
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    headline = {name: headline_metric(task) for name, task in config.tasks.items()}
    for row in rows:
        if row["metric"] == headline[row["task"]]:
            values[row["arm"], row["task"]].append(row["value"])
    return {key: {"median": statistics.median(found), "min": min(found), "max": max(found), "n": len(found)}
            for key, found in values.items()}  # fmt: skip


def results_json(config: AblationConfig, rows: list[dict[str, Any]], pretraining: dict[str, Any]) -> dict[str, Any]:
    return {
        "config": config.path,
        "headline_metrics": {name: headline_metric(task) for name, task in config.tasks.items()},
        "finetuning": rows,
        "pretraining": pretraining,
        "compute_differences": compute_differences(pretraining),
    }


def results_markdown(config: AblationConfig, rows: list[dict[str, Any]], pretraining: dict[str, Any]) -> str:
    """The table (arms as rows, tasks as columns, the best median per column in bold), then each arm's
    pretraining figures and how the arms differ in compute."""
    summary = summarize(config, rows)
    runs = len(config.seeds) * len(config.pretraining_seeds or (None,))
    columns = [f"{name} ({headline_metric(task)})" for name, task in config.tasks.items()]
    lines = [
        f"# Ablation: {config.path}", "",
        f"Fine-tuning scores (0-100): median over {runs} run(s) per cell (seeds {list(config.seeds)}"
        + (f", pretraining seeds {list(config.pretraining_seeds)}" if config.pretraining_seeds else "")
        + ") with the min-max range; the best median of each column is in bold.", "",
        "| arm | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|",
    ]  # fmt: skip
    best = {task: max((cell["median"] for (_, t), cell in summary.items() if t == task), default=None)
            for task in config.tasks}  # fmt: skip
    for arm in config.table_arms:
        # The starting checkpoint is fine-tuned once per fine-tuning seed, whatever the pretraining seeds.
        expected = len(config.seeds) if arm == STARTING_CHECKPOINT else runs
        cells = [_cell(summary.get((arm, task)), best[task], expected) for task in config.tasks]
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    if config.finetune_starting_checkpoint:
        lines += ["", f"{STARTING_CHECKPOINT}: {config.pretraining['model_name_or_path']}, the model every arm "
                  "continues, fine-tuned as it is (no continued pretraining)."]
    return "\n".join(lines + ["", *_pretraining_table(config, pretraining), ""])


def _cell(cell: dict[str, float] | None, best: float | None, runs: int) -> str:
    """`median (min-max)`, the median in bold when it is the column's best; `[n of N runs]` when some runs of the
    cell are missing, so that a median over fewer runs does not pass for a full one."""
    if cell is None:
        return "-"
    median = f"{cell['median']:.1f}"
    if best is not None and math.isclose(cell["median"], best):
        median = f"**{median}**"
    text = f"{median} ({cell['min']:.1f}-{cell['max']:.1f})" if cell["n"] > 1 else median
    return text + (f" [{cell['n']} of {runs} runs]" if cell["n"] < runs else "")


def _pretraining_table(config: AblationConfig, pretraining: dict[str, Any]) -> list[str]:
    lines = [
        "## Pretraining: what each arm saw and cost", "",
        "Token slots are steps x global batch x block length (the budget, equal for every arm); real tokens exclude "
        "padding. Wall time and real tokens/s are the Trainer's, on this run's machine. The eval MLM loss and "
        f"accuracy are over the held-out blocks, {_evaluation_masking(config)}.", "",
        "| arm | parameters | of which heads | steps | token slots | real tokens | wall time (s) | real tokens/s "
        "| final loss | final MLM loss | eval MLM loss | eval MLM accuracy |", "|---" * 12 + "|",
    ]  # fmt: skip
    for arm, figures in pretraining.items():
        parts = figures["parameters"]["by_part"]
        heads = {name: count for name, count in parts.items() if name not in ENCODER_PARTS}
        losses = figures["final_train_losses"]
        lines.append(
            f"| {arm} | {figures['parameters']['total']:,} | {_parts(heads)} | {figures['steps']:,} "
            f"| {figures['token_slots']:,} | {figures['real_tokens']:,} | {figures['wall_time_s']:.0f} "
            f"| {figures['real_tokens_per_second']:,.0f} | {_number(losses.get('loss'))} "
            f"| {_number(losses.get('mlm_loss'))} | {_number(figures['eval'].get('eval_mlm_loss'))} "
            f"| {_number(figures['eval'].get('eval_mlm_accuracy'))} |"
        )
    differences = compute_differences(pretraining)
    return lines + ([""] + [f"- {line}" for line in differences] if differences else [])


def _evaluation_masking(config: AblationConfig) -> str:
    """Which masks the arms' evaluations predict: one scheme for all (the same tokens), or each arm's own."""
    common = config.pretraining.get("eval_masking")
    if common is not None:
        return (f"masked with {common} masking for every arm (eval_masking): every arm predicts the same held-out "
                "tokens, whatever masking it trained with")
    return "each masked with its arm's own training masking (arms with different maskings predict different tokens)"


# The encoder's parameters (embeddings included); the rest are the pretraining heads.
ENCODER_PARTS = ("roberta", "albert", "electra", "bert")


def compute_differences(pretraining: dict[str, Any]) -> list[str]:
    """Sentences on how the arms differ in compute: heads only some arms train, encoders of other sizes (ALBERT's
    sharing), and real tokens that differ (pair formats and unpacked documents pad more)."""
    lines = []
    parts = {arm: figures["parameters"]["by_part"] for arm, figures in pretraining.items()}
    for part in sorted({name for found in parts.values() for name in found}):
        having = {arm: found[part] for arm, found in parts.items() if part in found}
        if len(set(having.values())) > 1 or len(having) < len(parts):
            counts = ", ".join(f"{arm} {count:,}" for arm, count in having.items())
            missing = [arm for arm in parts if arm not in having]
            lines.append(f"{part} parameters: {counts}" + (f"; none in {', '.join(missing)}" if missing else "")
                         + (" (a head trained only by some arms: extra compute per step)" if missing else ""))
    real = {arm: figures["real_tokens"] for arm, figures in pretraining.items()}
    if real and max(real.values()) > 1.01 * min(real.values()):
        lines.append("real tokens differ by more than 1% (padding of pair formats or unpacked documents): "
                     + ", ".join(f"{arm} {count:,}" for arm, count in real.items()))
    return lines


def _parts(parts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count:,}" for name, count in parts.items()) or "-"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def parameter_counts(model_dir: Path) -> dict[str, Any]:
    """Parameters stored in the checkpoint's safetensors files (a shared ALBERT layer once, tied embeddings once),
    in total and by top-level module: the encoder and each pretraining head; an ELECTRA generator as `generator`,
    and the SBO head that a stock encoder's checkpoint keeps beside it (SBO_HEAD_FILE) as `sbo_head`."""
    from safetensors import safe_open

    from ..models.modeling_any_encoder import SBO_HEAD_FILE

    by_part: dict[str, int] = defaultdict(int)
    for file in sorted(model_dir.glob("*.safetensors")) + sorted(model_dir.glob("generator/*.safetensors")):
        with safe_open(str(file), "np") as weights:
            for name in weights.keys():
                part = ("generator" if file.parent.name == "generator"
                        else "sbo_head" if file.name == SBO_HEAD_FILE else name.split(".")[0])  # fmt: skip
                by_part[part] += math.prod(weights.get_slice(name).get_shape())
    return {"total": sum(by_part.values()), "by_part": dict(by_part)}


def pretraining_figures(model_dir: Path, token_slots_per_step: int) -> dict[str, Any]:
    """A finished pretraining's figures from the files the Trainer wrote: the last logged training losses (each
    head's), the evaluation losses, token slots and real tokens, wall time, real tokens/s and parameters. After a
    resume, the Trainer's real tokens and wall time cover the last attempt only (`resumed` says so)."""
    state = _read_json(model_dir / "trainer_state.json")
    train = _read_json(model_dir / "train_results.json")
    evaluation = _read_json(model_dir / "eval_results.json") if (model_dir / "eval_results.json").is_file() else {}
    last_log = next((entry for entry in reversed(state["log_history"]) if "loss" in entry), {})
    return {
        "steps": state["global_step"],
        "token_slots": state["global_step"] * token_slots_per_step,
        "real_tokens": int(train.get("train_real_tokens", 0)),
        "wall_time_s": float(train["train_runtime"]),
        "real_tokens_per_second": float(train.get("train_real_tokens_per_second", 0.0)),
        "final_train_losses": {name: value for name, value in last_log.items() if name.endswith("loss")},
        "eval": {name: value for name, value in evaluation.items() if name.endswith(("loss", "accuracy"))},
        "parameters": parameter_counts(model_dir),
    }


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))
