"""The reliability section of benchmarks/RESULTS.md, from the records under benchmarks/results/reliability/: the
load held (benchmarks/reliability/stress.py), the faults survived (benchmarks/reliability/faults.py), the memory a
very long line takes (benchmarks/reliability/long_line.py), the bad inputs tried (any other kind of record there,
read by the counts it holds) and what was lost; and whether a task unit run again with its seed scores the same
(tables/same_seed.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.tables.render import Context, fmt_date, fmt_load, fmt_number, markdown_table, none_yet
from benchmarks.tables.same_seed import render_same_seed

BENCHMARK = "reliability"
STRESS_COMMAND = "python -m benchmarks.reliability.stress --launches 20 --busy 6"
FAULTS_COMMAND = "python -m benchmarks.reliability.faults --engines plain ddp zero2 zero3 --trials 10"
LONG_LINE_COMMAND = "python -m benchmarks.reliability.long_line --sizes_mb 10 50 100 --train_steps 3"
OWN_TABLES = {"stress", "faults", "long-line"}  # the kinds with a table of their own; others go under bad inputs


def record_kind(record: dict[str, Any]) -> str:
    """What a reliability record measured: its `kind` (in its settings, its results or at its top), else the name
    of the benchmark script that wrote it (records written before they carried a kind)."""
    for where in (record.get("settings") or {}, record.get("results") or {}, record):
        if where.get("kind"):
            return str(where["kind"])
    scripts = [Path(word).stem for word in record.get("command", "").split() if word.endswith(".py")]
    return scripts[0].replace("_", "-") if scripts else "unnamed"


def _of_kind(context: Context, kinds: set[str], exclude: bool = False) -> list[dict[str, Any]]:
    return [record for record in context.records(BENCHMARK) if (record_kind(record) in kinds) != exclude]


def _table(context: Context, records: list[dict[str, Any]], header: list[str], rows_of) -> str:
    rows = [[fmt_date(record), *cells, fmt_load(record), context.link(record)]
            for record in reversed(records) for cells in rows_of(record)]  # fmt: skip
    return markdown_table(["date (UTC), commit", *header, "load average", "record"], rows)


def stress_rows(record: dict[str, Any]) -> list[list[str]]:
    settings = record["settings"]
    busy = str(settings["busy_processes"])
    if settings.get("engines_concurrent") and len(record["results"]["engines"]) > 1:
        busy += ", and the other engines' runs beside"
    return [[engine, str(summary["launches"]), busy, f"**{summary['aborts']}**",
             str(summary["weight_mismatches"]), "yes" if summary["reference_clean"] else "**no**"]
            for engine, summary in record["results"]["engines"].items()]  # fmt: skip


def faults_rows(record: dict[str, Any]) -> list[list[str]]:
    counts = record["results"]["counts"]["by_engine"]
    return [[engine, str(count["faults"]), f"**{count['survived']}**", str(count["identical"]),
             str(count["runs_lost"]), str(count["checkpoints_lost"]), str(count["not_hit"])]
            for engine, count in counts.items()]  # fmt: skip


def long_line_rows(record: dict[str, Any]) -> list[list[str]]:
    """A row a line size: the memory it took, the baseline's, what it added (anonymous; resident), against the
    record's bound on the anonymous part (older records stated theirs on the resident set: "-")."""
    settings, baseline = record["settings"], record["results"]["baseline"]["prepare"]
    bound = settings.get("anonymous_bound_mib")
    rows = []
    for size in record["results"]["sizes"]:
        prepare = size["prepare"]
        added = prepare["peak_anonymous_pss_mib"] - baseline["peak_anonymous_pss_mib"]
        verdict = "-" if bound is None else f"{bound}, {'holds' if added <= bound else '**broken**'}"
        rows.append([f"{size['line_mb']:g}", f"{size['tokens']:,}", fmt_number(size["prepared_bytes"] / 2**20, 1),
                     fmt_number(prepare["peak_anonymous_pss_mib"]), fmt_number(baseline["peak_anonymous_pss_mib"]),
                     f"**{fmt_number(added)}**", verdict,
                     fmt_number(prepare["peak_rss_mib"] - baseline["peak_rss_mib"]), fmt_number(prepare["seconds"]),
                     fmt_number(size["train"]["peak_anonymous_pss_mib"]) if size.get("train") else "-"])  # fmt: skip
    return rows


def long_line_intro(records: list[dict[str, Any]]) -> str:
    """What the long-line table shows, with the baseline and the bound of its latest record."""
    intro = ("**A very long line**: a corpus of one line prepared by `run_pretraining.py --prepare_only` (a byte-level "
             "BPE trained on it, the line tokenized and packed into blocks of 128 tokens), then trained on by a tiny "
             "model; the peak memory of the run's processes against a baseline, the same run on a short line")  # fmt: skip
    if not records:
        return intro + ".\n"
    settings = records[-1]["settings"]
    return (f"{intro} of {settings['baseline_mb']:g} MB. Bound: the anonymous memory the line adds stays under "
            f"{settings.get('anonymous_bound_mib', '-')} MiB however long the line (one batch of documents of the "
            "data path; docs/pretraining.md). The resident set also counts the memory-mapped Arrow files, which "
            "grow with any corpus.\n")


def counts_of(results: dict[str, Any]) -> str:
    """The whole-number figures at the top of a record's results (cases tried, refused, failures, ...)."""
    counts = [f"{name.replace('_', ' ')} {value}" for name, value in results.items()
              if isinstance(value, int) and not isinstance(value, bool)]  # fmt: skip
    return ", ".join(counts) or "-"


def other_rows(record: dict[str, Any]) -> list[list[str]]:
    return [[record_kind(record), counts_of(record["results"])]]


def lost_sentence(records: list[dict[str, Any]]) -> str:
    """What the latest faults record says was lost: nothing, or the runs and checkpoints and where."""
    if not records:
        return "Nothing measured yet."
    trials = records[-1]["results"]["trials"]
    lost = [entry for entry in trials if entry["fault"]["hit"] and (not entry["finished"] or entry["checkpoints_lost"])]
    if not lost:
        return "Lost in the latest faults record: nothing (every run hit by a fault ended with its final model, and "\
               "every complete checkpoint it had was still complete after the resume)."  # fmt: skip
    where = "; ".join(f"{entry['engine']}, {entry['moment']}: "
                      + ("the run (no final model after the resume)" if not entry["finished"]
                         else f"{', '.join(entry['checkpoints_lost'])}") for entry in lost)  # fmt: skip
    return f"Lost in the latest faults record: {where}."


def render_reliability(context: Context) -> str:
    stress = _of_kind(context, {"stress"})
    faults = _of_kind(context, {"faults"})
    long_lines = _of_kind(context, {"long-line"})
    others = _of_kind(context, OWN_TABLES, exclude=True)
    parts = ["**Load held**: resume launches of a tiny run on 2 CPU processes under busy background processes; an "
             "abort is a launch that did not exit 0 or printed \"terminate called\" or a traceback (target: 0 aborts "
             "in 20 launches under 6 busy processes, per engine).\n"]  # fmt: skip
    header = ["engine", "launches", "busy processes", "aborts", "weight mismatches", "uninterrupted run clean"]
    parts.append(_table(context, stress, header, stress_rows) if stress else none_yet(STRESS_COMMAND))
    parts.append("\n**Faults survived**: runs killed (or whose disk filled) at random moments and resumed; "
                 "identical means bit-identical final weights and the same loss at every step as an uninterrupted "
                 "run.\n")  # fmt: skip
    header = ["engine", "faults", "survived", "resumed identically", "runs lost", "checkpoints lost", "not hit"]
    parts.append(_table(context, faults, header, faults_rows) if faults else none_yet(FAULTS_COMMAND))
    parts.append("\n" + lost_sentence(faults) + "\n")
    parts.append("**Same seed, same score**: task-benchmark units run again from the commit of a committed record, "
                 "beside that record, with the kind of machine each ran on.\n")
    parts.append(render_same_seed(context) + "\n")
    parts.append(long_line_intro(long_lines))
    header = ["line (MB)", "tokens", "blocks on disk (MiB)", "peak anonymous (MiB)", "baseline's", "added (MiB)",
              "bound (MiB)", "added resident (MiB)", "prepare (s)", "training peak anonymous (MiB)"]  # fmt: skip
    parts.append((_table(context, long_lines, header, long_line_rows) if long_lines else none_yet(LONG_LINE_COMMAND))
                 + "\n")
    parts.append("**Bad inputs tried**:\n")
    if others:
        parts.append(_table(context, others, ["kind", "counts"], other_rows))
    else:
        parts.append("No committed record of malformed inputs yet.")
    return "\n".join(parts) + "\n"
