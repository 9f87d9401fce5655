"""The full tables of benchmarks/RESULTS.md: every record of a speed or data benchmark, newest first, each row
naming its record (benchmarks/tables/generate.py writes them)."""

from __future__ import annotations

from typing import Any

from benchmarks.gpu.check import NOT_ASKED
from benchmarks.speed.pretraining_step import category_seconds
from benchmarks.speed.trainer import DEFAULTS, TUNED, settings_of
from benchmarks.tables.format import Context, fmt_number, fmt_ratio, markdown_table, none_yet, records_table
from spanroberta.records import record_commit


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
        settings = settings_of(record)
        label = f"{settings['config']} ({settings['batch_size']} x {settings['seq_length']}), {settings['precision']}"
        label += ", --fp8" if settings["fp8"] else ""
        label += ", torch_compile" if settings["torch_compile"] else ""
        label += ", a rehearsal" if settings["rehearsal"] else ""
        return [[label, str(settings["steps"]), run, figures.get("attn_implementation") or "not recorded",
                 fmt_number(figures["real_tokens_per_second"]), _spread(figures.get("window_spread", _NOT)),
                 fmt_ratio(figures["ratio_to_baseline"]), fmt_ratio(figures.get("ratio_to_tuned")),
                 _percent(figures.get("mfu")), _memory(figures.get("peak_memory", _NOT))]
                for run, figures in record["results"]["runs"].items()]  # fmt: skip

    header = ["config", "steps", "run", "attention", "real tokens/s (median window)", "windows: min-max (sd)",
              f"vs {DEFAULTS}", f"vs {TUNED}", "MFU", "peak GPU memory"]  # fmt: skip
    return records_table(context, "trainer", "python -m benchmarks.speed.trainer --config small --precision fp32",
                         header, rows_of)  # fmt: skip


_NOT = "not recorded"  # a figure the record's script did not write yet


def _spread(spread: dict[str, float] | str) -> str:
    if isinstance(spread, str):
        return spread
    return f"{fmt_number(spread['min'])}-{fmt_number(spread['max'])} ({fmt_number(spread['sd'])}), {spread['windows']}"


def _memory(peak: dict[str, int] | str | None) -> str:
    """The peak memory tensors took (what torch's allocator reserved beside it); "-" without CUDA."""
    if peak is None or isinstance(peak, str):
        return peak or "-"
    return f"{peak['allocated_bytes'] / 2**30:.1f} GiB ({peak['reserved_bytes'] / 2**30:.1f})"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def render_batch_sweep(context: Context) -> str:
    """Every side's MFU, real tokens/s and peak memory at each per-device batch its records ran, by commit, size and
    compilation; the batch each side peaks at (highest MFU, else real tokens/s) is marked."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for record in context.records("trainer"):
        settings = settings_of(record)
        if "window_spread" in next(iter(record["results"]["runs"].values()), {}) and not settings["rehearsal"]:
            key = (record_commit(record), settings["config"], settings["precision"], settings["torch_compile"],
                   settings["fp8"])  # fmt: skip
            groups.setdefault(key, []).append(record)
    rows = []
    for (commit, config, precision, compiled, fp8), found in groups.items():
        found = sorted(found, key=lambda record: record["settings"]["batch_size"])
        for run in dict.fromkeys(run for record in found for run in record["results"]["runs"]):
            sides = [(record, record["results"]["runs"][run]) for record in found if run in record["results"]["runs"]]
            best = max(sides, key=lambda side: (side[1]["mfu"] or 0, side[1]["real_tokens_per_second"]))[0]
            label = f"{config}, {precision}" + (", --fp8" if fp8 else "") + (", torch_compile" if compiled else "")
            rows += [[f"`{commit}`", label, run, str(record["settings"]["batch_size"]) + (" **peak**" if
                      record is best and len(sides) > 1 else ""), _percent(side["mfu"]),
                      fmt_number(side["real_tokens_per_second"]), _memory(side["peak_memory"]), context.link(record)]
                     for record, side in sides]  # fmt: skip
    if not rows:
        return none_yet("python -m benchmarks.speed.trainer --config base-gpu --recipes spanbert --batch-sizes 64 128")
    header = ["commit", "config", "run", "per-device batch", "MFU", "real tokens/s", "peak GPU memory", "record"]
    return markdown_table(header, rows)


# The sides of a profiled step the table shows: the unpacked pair and the recipe's packed rows through varlen_fa2.
PROFILED_SIDES = ("spanroberta", "spanroberta-packed-varlen_fa2", "baseline")
PROFILED_CONFIGS = ("base-gpu", "large-gpu")


def render_step_profile(context: Context) -> str:
    """Where a GPU step's time goes, per size and side, before (the oldest profile record of the size) and after
    (the newest, when it is another): wall and host time, attention, the GEMMs and the optimizer."""
    records = [record for record in context.records("pretraining_step_profile")
               if record["settings"].get("device") == "cuda"]  # fmt: skip
    rows = []
    for config in PROFILED_CONFIGS:
        found = [record for record in records if record["settings"]["config"] == config]
        for when, record in (("before", found[:1]), ("after", found[1:])):
            if not record:
                rows.append([config, "-", when, *["not measured"] * 5, "run `python -m benchmarks.speed."
                             f"pretraining_step --config {config} --ablations --profile`"])  # fmt: skip
                continue
            sides = record[-1]["results"]["sides"]
            rows += [[config, side, f"{when}, `{record_commit(record[-1])}`", *_profile_cells(sides[side]),
                      context.link(record[-1])] for side in PROFILED_SIDES if side in sides]  # fmt: skip
    header = ["config", "side", "record of", "step wall ms", "host issue ms", "attention ms", "GEMMs ms",
              "optimizer ms", "record"]  # fmt: skip
    return markdown_table(header, rows)


def _profile_cells(side: dict[str, Any]) -> list[str]:
    """A profiled side's wall and host milliseconds and its categories' device milliseconds: from the record's own
    totals over every op ("none": no op of the category ran), or, in a record that kept only its top ops, their sum
    there as a lower bound ("not recorded" where none of them falls in the category)."""
    cells = [fmt_number(1000 * side["wall_seconds"], 1), fmt_number(1000 * side["host_seconds"], 1)]
    if "category_seconds" in side:
        return cells + [_ms(value, "none") for value in side["category_seconds"].values()]
    top = category_seconds(side["top_ops"])
    return cells + [_ms(value, _NOT, f" (top {len(side['top_ops'])} ops)") for value in top.values()]


def _ms(seconds: float | None, absent: str, bound: str = "") -> str:
    return absent if seconds is None else ("≥ " if bound else "") + fmt_number(1000 * seconds, 1) + bound


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
