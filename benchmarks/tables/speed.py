"""The speed tables of benchmarks/RESULTS.md, declared: the headline's speed figures against their targets, every
record of a speed or data benchmark, newest first, each row naming its record, and the Trainer path's speed targets
on a GPU with each record's verdict against them.

The targets and the rule are benchmarks/statistics.py's (`speed_verdicts`). A Trainer record answers to them only
where it ran long enough for its windows to agree (speed/trainer.py's `long_enough`: MIN_STEPS steps at least,
windows of at most MAX_WINDOW_STEPS, and not marked a rehearsal); the earlier, shorter GPU records stay in the tables
as measurements, without a verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.common import code_of
from benchmarks.gpu.check import NOT_ASKED
from benchmarks.speed.pretraining_step import category_seconds
from benchmarks.speed.trainer import CONFIGS, DEFAULTS, SPANBERT, TUNED, long_enough, settings_of
from benchmarks.statistics import Verdict, speed_verdicts
from benchmarks.tables.render import (Column, Context, fmt_number, fmt_percent, fmt_ratio, latest_record,
                                      markdown_table, none_yet, not_on_gpu_yet, records_table,
                                      target_verdict)  # fmt: skip
from spanroberta.records import record_commit

C = Column.of  # a column whose cell reads the row, a (record, part) pair

# The CPU speed targets the project states: the collators', spanroberta's sequences/s over the transformers
# baseline's. The collator runs on the CPU in every run, GPU runs included, so its speed there is what users get. The
# model step and the Trainer path have targets on the GPU only (GPU_FIGURES), where users train; their CPU records
# stay measurements (the pretraining-step and trainer tables of RESULTS.md).
COLLATOR_TARGETS = {"transformers token": 1.0, "transformers whole-word": 3.0}
TRAINER_DEFAULT_RUN = "run_pretraining.py --recipe spanbert"

# The GPU figures the project names: (figure, benchmark, settings of its records, the command that measures it).
_STEPS = "python -m benchmarks.speed.pretraining_step --config base-gpu large-gpu --steps 20 --warmup 5 --ablations"
_TRAINER = "python -m benchmarks.speed.trainer --config base-gpu large-gpu --precision bf16"
GPU_FIGURES = (
    ("pretraining step, base 4 x 512, bf16, GPU", "pretraining_step", {"config": "base", "device": "cuda"},
     "python -m benchmarks.speed.pretraining_step --config base --steps 20 --warmup 5"),
    ("pretraining step, base 32 x 512, bf16, GPU", "pretraining_step", {"config": "base-gpu", "device": "cuda"},
     _STEPS),
    ("pretraining step, large 16 x 512, bf16, GPU", "pretraining_step", {"config": "large-gpu", "device": "cuda"},
     _STEPS),
    ("Trainer path, base 32 x 512, bf16, GPU", "trainer", {"config": "base-gpu", "torch_compile": False}, _TRAINER),
    ("Trainer path, large 16 x 512, bf16, GPU", "trainer", {"config": "large-gpu", "torch_compile": False}, _TRAINER),
    ("Trainer path, base, bf16, `--torch_compile`, GPU", "trainer", {"config": "base-gpu", "torch_compile": True},
     _TRAINER + " --torch-compile"),
    ("Trainer path, large, bf16, `--torch_compile`, GPU", "trainer", {"config": "large-gpu", "torch_compile": True},
     _TRAINER + " --torch-compile"),
)  # fmt: skip


def collator_rows(context: Context) -> list[list[str]]:
    """The headline's collator figures: the latest record against each target."""
    return [_collator_row(context, other, target) for other, target in COLLATOR_TARGETS.items()]


def _collator_row(context: Context, other: str, target: float) -> list[str]:
    figure = f"collator, span+SBO against {other}"
    record = latest_record(context.records("collator"))
    ratio = record and record["results"]["span_sbo_ratios"].get(other, {}).get("median")
    if ratio is None:
        command = "python -m benchmarks.speed.collator"
        return [figure, "no record", f"not measured (target >= {target:.1f}x)", f"run `{command}`"]
    return [figure, f"**{fmt_ratio(ratio)}** (sequences/s)", target_verdict(ratio, target), context.link(record)]


def gpu_rows(context: Context) -> list[list[str]]:
    """The headline's GPU figures: the latest GPU record of each, or the command that measures it."""
    return [_gpu_row(context, *figure) for figure in GPU_FIGURES]


def _gpu_row(context: Context, figure: str, benchmark: str, settings: dict[str, Any], command: str) -> list[str]:
    found = [record for record in context.records(benchmark) if record["machine"].get("gpu")]
    if benchmark == "trainer":  # the pair's own batch in bf16: neither the batch sweep nor --fp8, nor a rehearsal
        pair = {"batch_size": CONFIGS[settings["config"]][2], "fp8": False, "rehearsal": False}
        found = [record for record in found if pair.items() <= settings_of(record).items()]
    record = latest_record(found, **settings)
    if record is None:
        return [figure, "no record", "not measured", not_on_gpu_yet(command)]
    results = record["results"]
    if benchmark == "pretraining_step":
        ratio, unit, mfu = results["ratio_median"], "", results["sides"]["spanroberta"].get("mfu")
    else:
        run = results["runs"].get(TRAINER_DEFAULT_RUN, {})
        ratio, unit, mfu = run.get("ratio_to_baseline"), " (real tokens/s)", run.get("mfu")
    latest = f"**{fmt_ratio(ratio)}**{unit}" + (f", spanroberta MFU {100 * mfu:.1f}%" if mfu else "")
    where = f"measured on {record['machine']['gpu']} from commit `{record_commit(record)}`"
    return [figure, latest, where, context.link(record)]


def render_front_page(context: Context) -> str:
    """The README's figures: the measured speed figures (the Trainer path on a GPU, the collators on the CPU), each
    from its records; every figure, measured or not yet, is in RESULTS.md's headline."""
    trainer = [row for row in gpu_rows(context) if row[0].startswith("Trainer path") and row[1] != "no record"]
    collators = [row for row in collator_rows(context) if row[1] != "no record"]
    if not trainer + collators:
        return "No record yet."
    return markdown_table(["figure", "latest", "target or where", "record"], trainer + collators)


def render_gpu(context: Context) -> str:
    return markdown_table(["figure", "latest", "GPU", "record"], gpu_rows(context))


def _ablations(results: dict[str, Any]) -> str:
    return ", ".join(f"{name.removeprefix('spanroberta-')} {fmt_ratio(gain['median'])}"
                     for name, gain in sorted(results["ablation_ratios"].items())) or "-"  # fmt: skip


def _side(row: tuple, side: str) -> str:
    return fmt_number(row[0]["results"]["sides"][side]["tokens_per_second_median"])


PRETRAINING_STEP = records_table(
    "pretraining_step", "python -m benchmarks.speed.pretraining_step --config small --precision fp32 bf16", [
        *(C(name, lambda row, key=key: str(row[0]["settings"][key])) for name, key in (
            ("config", "config"), ("precision", "precision"), ("device", "device"), ("threads", "threads"),
            ("timed steps", "steps"))),
        C("spanroberta tokens/s (median)", lambda row: _side(row, "spanroberta")),
        C("baseline tokens/s (median)", lambda row: _side(row, "baseline")),
        C("ratio (medians)", lambda row: f"**{fmt_ratio(row[0]['results']['ratio_median'])}**"),
        C("ratio (fastest steps)", lambda row: fmt_ratio(row[0]["results"]["ratio_best"])),
        C("ratio (CPU time)", lambda row: fmt_ratio(row[0]["results"]["ratio_cpu_median"])),
        C("spanroberta / ablation", lambda row: _ablations(row[0]["results"])),
    ], lambda record: [None])  # fmt: skip

HEADS = records_table("heads", "python -m benchmarks.speed.heads --threads 1", [
    C("shape (targets x hidden)", lambda row: f"{row[1]['shape']} ({row[1]['rows']} x {row[1]['hidden']})"),
    C("precision", lambda row: row[1]["precision"]),
    C("threads", lambda row: str(row[0]["settings"]["threads"])),
    C("plain CPU s (median)", lambda row: fmt_number(row[1]["plain_median_cpu_seconds"], 3)),
    C("fused CPU s (median)", lambda row: fmt_number(row[1]["fused_median_cpu_seconds"], 3)),
    C("fused speed-up", lambda row: f"**{fmt_ratio(row[1]['speed_up'])}**"),
], lambda record: record["results"]["shapes"])  # fmt: skip

COLLATOR = records_table("collator", "python -m benchmarks.speed.collator", [
    C("collator", lambda row: row[1][0]),
    C("threads", lambda row: str(row[0]["settings"]["threads"])),
    C("sequences/s (median)", lambda row: fmt_number(row[1][1]["sequences_per_second_median"])),
    C("sequences/s (best)", lambda row: fmt_number(row[1][1]["sequences_per_second_best"])),
    C("ms/batch (median)", lambda row: fmt_number(1000 * row[1][1]["median_seconds"], 1)),
    C("span+SBO / this", lambda row: fmt_ratio(row[0]["results"]["span_sbo_ratios"].get(row[1][0], {}).get("median"))),
], lambda record: list(record["results"]["collators"].items()))  # fmt: skip


# Span masking per language (benchmarks/masking/statistics.py): a row per corpus and rule for where words start.
MASKING_BY_LANGUAGE = records_table("masking", "python -m benchmarks.masking.statistics", [
    C("corpus", lambda row: row[1][0]),
    C("words from", lambda row: row[1][1]),
    C("tokens", lambda row: fmt_number(row[1][2]["tokens"])),
    C("word starts / 128 tokens", lambda row: fmt_number(row[1][2]["word_starts_per_128_tokens"], 1)),
    C("masked share", lambda row: f"{100 * row[1][2]['masked_share']:.2f}%"),
    C("mean span (words)", lambda row: fmt_number(row[1][2]["mean_span_words"], 2)),
    C("mean masked run (tokens)", lambda row: fmt_number(row[1][2]["mean_masked_run_tokens"], 1)),
    C("within targets", lambda row: "yes" if row[1][2]["within_targets"] else "**no**"),
], lambda record: [(corpus, rule, stats) for corpus, rules in record["results"]["corpora"].items()
                   for rule, stats in rules.items() if rule != "preparation_tokens_per_second"])  # fmt: skip


def _trainer_label(record: dict[str, Any]) -> str:
    settings = settings_of(record)
    label = f"{settings['config']} ({settings['batch_size']} x {settings['seq_length']}), {settings['precision']}"
    label += ", --fp8" if settings["fp8"] else ""
    label += ", torch_compile" if settings["torch_compile"] else ""
    return label + (", a rehearsal" if settings["rehearsal"] else "")


TRAINER = records_table("trainer", "python -m benchmarks.speed.trainer --config small --precision fp32", [
    C("config", lambda row: _trainer_label(row[0])),
    C("steps", lambda row: str(row[0]["settings"]["steps"])),
    C("run", lambda row: row[1][0]),
    C("attention", lambda row: row[1][1].get("attn_implementation") or "not recorded"),
    C("real tokens/s (median window)", lambda row: fmt_number(row[1][1]["real_tokens_per_second"])),
    C("windows: min-max (sd)", lambda row: _spread(row[1][1].get("window_spread", _NOT))),
    C(f"vs {DEFAULTS}", lambda row: fmt_ratio(row[1][1]["ratio_to_baseline"])),
    C(f"vs {TUNED}", lambda row: fmt_ratio(row[1][1].get("ratio_to_tuned"))),
    C("MFU", lambda row: fmt_percent(row[1][1].get("mfu"))),
    C("peak GPU memory", lambda row: _memory(row[1][1].get("peak_memory", _NOT))),
], lambda record: list(record["results"]["runs"].items()))  # fmt: skip


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
                      record is best and len(sides) > 1 else ""), fmt_percent(side["mfu"]),
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


# Each `make gpu-check` record (its --toy rehearsals left out): the status, seconds and figures of every stage it
# ran or was asked to run (a part run with --stages leaves the others out).
GPU_CHECK = records_table("gpu-check", "make gpu-check", [
    C("stage", lambda row: row[1][0]), C("status", lambda row: row[1][1]["status"]),
    C("seconds", lambda row: fmt_number(row[1][1]["seconds"])),
    C("figures", lambda row: row[1][1].get("figures") or "-"),
], lambda record: [] if record["settings"].get("toy") else [
    (stage, outcome) for stage, outcome in record["results"]["stages"].items()
    if outcome["status"] != f"skipped: {NOT_ASKED}"])  # fmt: skip

DATA_PREP = records_table("data_prep", "python -m benchmarks.speed.data_prep --mode prepared", [
    C("mode", lambda row: row[0]["settings"]["mode"]), C("corpus", lambda row: f"{row[1]['scale']}x"),
    C("MB", lambda row: fmt_number(row[1]["megabytes"])), C("blocks", lambda row: fmt_number(row[1]["blocks"])),
    C("tokens", lambda row: fmt_number(row[1]["tokens"])),
    C("time s", lambda row: fmt_number(row[1]["total_seconds"], 1)),
    C("tokens/s", lambda row: fmt_number(row[1]["tokens_per_second"])),
    C("time / linear", lambda row: fmt_number(row[1]["time_over_linear"], 2)),
    C("peak RSS MiB", lambda row: fmt_number(row[1]["peak_rss_mib"])),
], lambda record: record["results"]["scales"])  # fmt: skip

CORPUS_SCALING = records_table("corpus_scaling", "python -m benchmarks.speed.corpus_scaling", [
    C("corpus", lambda row: f"{row[1]['size_mb']} MB"), C("processes", lambda row: str(row[0]["settings"]["num_proc"])),
    C("wall s", lambda row: fmt_number(row[1]["seconds"])), C("blocks", lambda row: fmt_number(row[1]["blocks"])),
    C("tokens", lambda row: fmt_number(row[1]["tokens"])),
    C("tokens/s", lambda row: fmt_number(row[1]["tokens_per_second"])),
    C("peak PSS MiB (tree)", lambda row: fmt_number(row[1]["peak_pss"] / 2**20)),
    C("peak anonymous PSS MiB (tree)", lambda row: fmt_number(row[1]["peak_anon"] / 2**20)),
], lambda record: record["results"]["sizes"])  # fmt: skip


# What each target compares, as the table names it.
LABELS = {"mfu": "MFU, compiled", "vs_defaults": f"real tokens/s over `{DEFAULTS}`",
          "mfu_vs_tuned": f"MFU over `{TUNED}`", "fp8": "real tokens/s with --fp8 over bf16"}  # fmt: skip
PAIR_CONFIGS = {"base": "base-gpu", "large": "large-gpu"}  # the configs of the pairs, by model size


def verdicts(record: dict[str, Any], bf16: dict[str, Any] | None = None) -> list[Verdict]:
    """The verdicts of one Trainer record against the targets of its size, compilation and precision; an fp8
    record's against `bf16`, the record of the same code, size and compilation without fp8. None where the record
    answers to no target (a rehearsal, too short a run, a size without targets)."""
    settings = settings_of(record)
    if not long_enough(record):
        return []
    span = record["results"]["runs"].get(SPANBERT, {})
    rate = (bf16 or {}).get("results", {}).get("runs", {}).get(SPANBERT, {}).get("real_tokens_per_second")
    return speed_verdicts(settings.get("model_size"), settings["torch_compile"], settings["fp8"], span, rate)


def pair_records(records: list[dict[str, Any]], size: str, compiled: bool, fp8: bool) -> list[dict[str, Any]]:
    """The GPU records long enough of one pair (a size at its own batch, eager or compiled, with or without fp8),
    oldest first."""
    config = PAIR_CONFIGS[size]
    return [record for record in records if record["machine"].get("gpu") and long_enough(record)
            and {key: settings_of(record).get(key) for key in ("config", "batch_size", "torch_compile", "fp8")}
            == {"config": config, "batch_size": CONFIGS[config][2], "torch_compile": compiled, "fp8": fp8}]  # fmt: skip


def render_speed_targets(context: Context) -> str:
    """Per pair (size, eager or compiled, and fp8 at large), the latest record long enough against each target it
    answers to, or what is not measured yet."""
    records = context.records("trainer")
    rows = []
    for size in PAIR_CONFIGS:
        for compiled in (False, True):
            rows += _pair_rows(context, records, size, compiled, fp8=False)
    rows += _pair_rows(context, records, "large", True, fp8=True)
    return markdown_table(["target", "size", "run", "latest", "verdict", "record"], rows)


def _pair_rows(context: Context, records: list[dict[str, Any]], size: str, compiled: bool,
               fp8: bool) -> list[list[str]]:  # fmt: skip
    """The rows of one pair's targets: from its latest record, or each target not measured."""
    found = pair_records(records, size, compiled, fp8)
    record = found[-1] if found else None
    bf16 = None
    if record and fp8:
        code = code_of(record)
        same_code = [r for r in pair_records(records, size, compiled, False) if code and code_of(r) == code]
        bf16 = same_code[-1] if same_code else None
    run = ("compiled" if compiled else "eager") + (", fp8" if fp8 else "")
    if record is None:  # the targets the pair answers to, none measured
        return [[LABELS[v.target], size, run, "no record", v.verdict(), "-"]
                for v in speed_verdicts(size, compiled, fp8, {})]  # fmt: skip
    return [[LABELS[v.target], size, run, v.shown(v.value), v.verdict(), context.link(record)]
            for v in verdicts(record, bf16)]  # fmt: skip


REGIONS: dict[str, Callable[[Context], str]] = {
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
}
