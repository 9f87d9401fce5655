"""The full tables of benchmarks/RESULTS.md: every record of a speed or data benchmark, newest first, each row
naming its record (benchmarks/tables/generate.py writes them)."""

from __future__ import annotations

from typing import Any

from benchmarks.gpu.check import NOT_ASKED
from benchmarks.tables.format import Context, fmt_number, fmt_ratio, records_table


def render_pretraining_step(context: Context) -> str:
    def rows_of(record: dict[str, Any]) -> list[list[str]]:
        settings, results = record["settings"], record["results"]
        span, base = results["sides"]["spanroberta"], results["sides"]["baseline"]
        ablations = ", ".join(f"{name.removeprefix('spanroberta-')} {fmt_ratio(gain['median'])}"
                              for name, gain in sorted(results["ablation_ratios"].items())) or "-"  # fmt: skip
        return [[
            settings["config"], settings["precision"], settings["device"], str(settings["threads"]),
            str(settings["steps"]), fmt_number(span["tokens_per_second_median"]), fmt_number(base["tokens_per_second_median"]),
            f"**{fmt_ratio(results['ratio_median'])}**", fmt_ratio(results["ratio_best"]), fmt_ratio(results["ratio_cpu_median"]),
            ablations,
        ]]  # fmt: skip

    header = ["config", "precision", "device", "threads", "timed steps", "spanroberta tokens/s (median)",
              "baseline tokens/s (median)", "ratio (medians)", "ratio (fastest steps)", "ratio (CPU time)",
              "spanroberta / ablation"]  # fmt: skip
    return records_table(context, "pretraining_step",
                         "python -m benchmarks.speed.pretraining_step --config small --precision fp32 bf16",
                         header, rows_of)  # fmt: skip


def render_heads(context: Context) -> str:
    def rows_of(record: dict[str, Any]) -> list[list[str]]:
        return [[f"{shape['shape']} ({shape['rows']} x {shape['hidden']})", shape["precision"],
                 str(record["settings"]["threads"]), fmt_number(shape["plain_median_cpu_seconds"], 3),
                 fmt_number(shape["fused_median_cpu_seconds"], 3), f"**{fmt_ratio(shape['speed_up'])}**"]
                for shape in record["results"]["shapes"]]  # fmt: skip

    header = ["shape (targets x hidden)", "precision", "threads", "plain CPU s (median)", "fused CPU s (median)",
              "fused speed-up"]  # fmt: skip
    return records_table(context, "heads", "python -m benchmarks.speed.heads --threads 1", header, rows_of)


def render_collator(context: Context) -> str:
    def rows_of(record: dict[str, Any]) -> list[list[str]]:
        ratios = record["results"]["span_sbo_ratios"]
        return [[name, str(record["settings"]["threads"]), fmt_number(figures["sequences_per_second_median"]),
                 fmt_number(figures["sequences_per_second_best"]), fmt_number(1000 * figures["median_seconds"], 1),
                 fmt_ratio(ratios.get(name, {}).get("median"))]
                for name, figures in record["results"]["collators"].items()]  # fmt: skip

    header = ["collator", "threads", "sequences/s (median)", "sequences/s (best)", "ms/batch (median)",
              "span+SBO / this"]  # fmt: skip
    return records_table(context, "collator", "python -m benchmarks.speed.collator", header, rows_of)


def render_trainer(context: Context) -> str:
    def rows_of(record: dict[str, Any]) -> list[list[str]]:
        settings = record["settings"]
        label = f"{settings['config']} ({settings['batch_size']} x {settings['seq_length']}), {settings['precision']}"
        label += ", --fp8" if settings.get("fp8") else ""
        label += ", torch_compile" if settings["torch_compile"] else ""
        return [[label, str(settings["steps"]), run, figures.get("attn_implementation") or "not recorded",
                 fmt_number(figures["real_tokens_per_second"]),
                 fmt_ratio(figures["ratio_to_baseline"]),
                 "-" if figures.get("mfu") is None else f"{100 * figures['mfu']:.1f}%"]
                for run, figures in record["results"]["runs"].items()]  # fmt: skip

    header = ["config", "steps", "run", "attention", "real tokens/s (median window)", "vs baseline", "MFU"]
    return records_table(context, "trainer", "python -m benchmarks.speed.trainer --config small --precision fp32",
                         header, rows_of)  # fmt: skip


def render_gpu_check(context: Context) -> str:
    """Each `make gpu-check` record (its --toy rehearsals left out): the status, seconds and figures of every stage
    it ran or was asked to run (a part run with --stages leaves the others out)."""

    def rows_of(record: dict[str, Any]) -> list[list[str]]:
        if record["settings"].get("toy"):
            return []
        return [[stage, outcome["status"], fmt_number(outcome["seconds"]), outcome.get("figures") or "-"]
                for stage, outcome in record["results"]["stages"].items()
                if outcome["status"] != f"skipped: {NOT_ASKED}"]  # fmt: skip

    return records_table(context, "gpu-check", "make gpu-check", ["stage", "status", "seconds", "figures"], rows_of)


def render_data_prep(context: Context) -> str:
    def rows_of(record: dict[str, Any]) -> list[list[str]]:
        return [[record["settings"]["mode"], f"{scale['scale']}x", fmt_number(scale["megabytes"]), fmt_number(scale["blocks"]),
                 fmt_number(scale["tokens"]), fmt_number(scale["total_seconds"], 1), fmt_number(scale["tokens_per_second"]),
                 fmt_number(scale["time_over_linear"], 2), fmt_number(scale["peak_rss_mib"])]
                for scale in record["results"]["scales"]]  # fmt: skip

    header = ["mode", "corpus", "MB", "blocks", "tokens", "time s", "tokens/s", "time / linear", "peak RSS MiB"]
    return records_table(context, "data_prep", "python -m benchmarks.speed.data_prep --mode prepared", header, rows_of)


def render_corpus_scaling(context: Context) -> str:
    def rows_of(record: dict[str, Any]) -> list[list[str]]:
        return [[f"{size['size_mb']} MB", str(record["settings"]["num_proc"]), fmt_number(size["seconds"]),
                 fmt_number(size["blocks"]), fmt_number(size["tokens"]), fmt_number(size["tokens_per_second"]),
                 fmt_number(size["peak_pss"] / 2**20), fmt_number(size["peak_anon"] / 2**20)]
                for size in record["results"]["sizes"]]  # fmt: skip

    header = ["corpus", "processes", "wall s", "blocks", "tokens", "tokens/s", "peak PSS MiB (tree)",
              "peak anonymous PSS MiB (tree)"]  # fmt: skip
    return records_table(context, "corpus_scaling", "python -m benchmarks.speed.corpus_scaling", header, rows_of)
