"""The full tables of benchmarks/RESULTS.md: every record of a speed or data benchmark, newest first, each row
naming its record (benchmarks/make_tables.py writes them)."""

from __future__ import annotations

from tables_format import Context, fmt_date, fmt_load, fmt_number, fmt_ratio, markdown_table, none_yet


def render_pretraining_step(context: Context) -> str:
    records = context.records("pretraining_step")
    if not records:
        return none_yet("python benchmarks/bench_pretraining_step.py --config small --precision fp32 bf16")
    rows = []
    for record in reversed(records):
        settings, results = record["settings"], record["results"]
        span, base = results["sides"]["spanroberta"], results["sides"]["baseline"]
        ablations = ", ".join(f"{name.removeprefix('spanroberta-')} {fmt_ratio(gain['median'])}"
                              for name, gain in sorted(results["ablation_ratios"].items())) or "-"  # fmt: skip
        rows.append([
            fmt_date(record), settings["config"], settings["precision"], settings["device"], str(settings["threads"]),
            str(settings["steps"]), fmt_number(span["tokens_per_second_median"]), fmt_number(base["tokens_per_second_median"]),
            f"**{fmt_ratio(results['ratio_median'])}**", fmt_ratio(results["ratio_best"]), fmt_ratio(results["ratio_cpu_median"]),
            ablations, fmt_load(record), context.link(record),
        ])  # fmt: skip
    header = ["date (UTC), commit", "config", "precision", "device", "threads", "timed steps",
              "spanroberta tokens/s (median)", "baseline tokens/s (median)", "ratio (medians)",
              "ratio (fastest steps)", "ratio (CPU time)", "spanroberta / ablation", "load average",
              "record"]  # fmt: skip
    return markdown_table(header, rows)


def render_heads(context: Context) -> str:
    records = context.records("heads")
    if not records:
        return none_yet("python benchmarks/bench_heads.py --threads 1")
    rows = [
        [fmt_date(record), f"{shape['shape']} ({shape['rows']} x {shape['hidden']})", shape["precision"],
         str(record["settings"]["threads"]), fmt_number(shape["plain_median_cpu_seconds"], 3),
         fmt_number(shape["fused_median_cpu_seconds"], 3), f"**{fmt_ratio(shape['speed_up'])}**", fmt_load(record), context.link(record)]
        for record in reversed(records) for shape in record["results"]["shapes"]
    ]  # fmt: skip
    header = ["date (UTC), commit", "shape (targets x hidden)", "precision", "threads", "plain CPU s (median)",
              "fused CPU s (median)", "fused speed-up", "load average", "record"]  # fmt: skip
    return markdown_table(header, rows)


def render_collator(context: Context) -> str:
    records = context.records("collator")
    if not records:
        return none_yet("python benchmarks/bench_collator.py")
    rows = []
    for record in reversed(records):
        for name, figures in record["results"]["collators"].items():
            ratio = record["results"]["span_sbo_ratios"].get(name, {}).get("median")
            rows.append([fmt_date(record), name, str(record["settings"]["threads"]),
                         fmt_number(figures["sequences_per_second_median"]), fmt_number(figures["sequences_per_second_best"]),
                         fmt_number(1000 * figures["median_seconds"], 1), fmt_ratio(ratio), fmt_load(record),
                         context.link(record)])  # fmt: skip
    header = ["date (UTC), commit", "collator", "threads", "sequences/s (median)", "sequences/s (best)",
              "ms/batch (median)", "span+SBO / this", "load average", "record"]  # fmt: skip
    return markdown_table(header, rows)


def render_trainer(context: Context) -> str:
    records = context.records("trainer")
    if not records:
        return none_yet("python benchmarks/bench_trainer.py --config small --precision fp32")
    rows = []
    for record in reversed(records):
        settings = record["settings"]
        label = f"{settings['config']} ({settings['batch_size']} x {settings['seq_length']}), {settings['precision']}"
        label += ", torch_compile" if settings["torch_compile"] else ""
        for run, figures in record["results"]["runs"].items():
            mfu = figures.get("mfu")
            rows.append([fmt_date(record), label, str(settings["steps"]), run,
                         fmt_number(figures["real_tokens_per_second"]), fmt_ratio(figures["ratio_to_baseline"]),
                         "-" if mfu is None else f"{100 * mfu:.1f}%", fmt_load(record), context.link(record)])  # fmt: skip
    header = ["date (UTC), commit", "config", "steps", "run", "real tokens/s (median window)", "vs baseline",
              "MFU", "load average", "record"]  # fmt: skip
    return markdown_table(header, rows)


def render_data_prep(context: Context) -> str:
    records = context.records("data_prep")
    if not records:
        return none_yet("python benchmarks/bench_data_prep.py --mode prepared")
    rows = [
        [fmt_date(record), record["settings"]["mode"], f"{scale['scale']}x", fmt_number(scale["megabytes"]), fmt_number(scale["blocks"]),
         fmt_number(scale["tokens"]), fmt_number(scale["total_seconds"], 1), fmt_number(scale["tokens_per_second"]),
         fmt_number(scale["time_over_linear"], 2), fmt_number(scale["peak_rss_mib"]), fmt_load(record), context.link(record)]
        for record in reversed(records) for scale in record["results"]["scales"]
    ]  # fmt: skip
    header = ["date (UTC), commit", "mode", "corpus", "MB", "blocks", "tokens", "time s", "tokens/s",
              "time / linear", "peak RSS MiB", "load average", "record"]  # fmt: skip
    return markdown_table(header, rows)


def render_corpus_scaling(context: Context) -> str:
    records = context.records("corpus_scaling")
    if not records:
        return none_yet("python benchmarks/bench_corpus_scaling.py")
    rows = [
        [fmt_date(record), f"{size['size_mb']} MB", str(record["settings"]["num_proc"]), fmt_number(size["seconds"]),
         fmt_number(size["blocks"]), fmt_number(size["tokens"]), fmt_number(size["tokens_per_second"]), fmt_number(size["peak_pss"] / 2**20),
         fmt_number(size["peak_anon"] / 2**20), fmt_load(record), context.link(record)]
        for record in reversed(records) for size in record["results"]["sizes"]
    ]  # fmt: skip
    header = ["date (UTC), commit", "corpus", "processes", "wall s", "blocks", "tokens", "tokens/s",
              "peak PSS MiB (tree)", "peak anonymous PSS MiB (tree)", "load average", "record"]  # fmt: skip
    return markdown_table(header, rows)
