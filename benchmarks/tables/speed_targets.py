"""The speed targets of the Trainer path on a GPU and each record's verdict against them: speed/trainer.py writes
the records, the `speed-targets` region of benchmarks/RESULTS.md shows the verdicts of the latest.

The targets and the rule are benchmarks/statistics.py's (`speed_verdicts`).

A record answers to them only where it ran long enough for its windows to agree (`long_enough`: MIN_STEPS steps at
least, windows of at most MAX_WINDOW_STEPS, and not marked a rehearsal); the earlier, shorter GPU records stay in
the tables as measurements, without a verdict.
"""

from __future__ import annotations

from typing import Any

from benchmarks.common import code_of
from benchmarks.speed.trainer import (
    CONFIGS,
    DEFAULTS,
    MAX_WINDOW_STEPS,
    MIN_STEPS,
    SPANBERT,
    TUNED,
    long_enough,
    settings_of,
)
from benchmarks.statistics import Verdict, speed_verdicts
from benchmarks.tables.render import Context, markdown_table

# What each target compares, as the table names it.
LABELS = {"mfu": "MFU, compiled", "vs_defaults": f"real tokens/s over `{DEFAULTS}`",
          "mfu_vs_tuned": f"MFU over `{TUNED}`", "fp8": "real tokens/s with --fp8 over bf16"}  # fmt: skip
SIZES = {"base": "base-gpu", "large": "large-gpu"}  # the configs of the pairs, by model size


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
    config = SIZES[size]
    return [record for record in records if record["machine"].get("gpu") and long_enough(record)
            and {key: settings_of(record).get(key) for key in ("config", "batch_size", "torch_compile", "fp8")}
            == {"config": config, "batch_size": CONFIGS[config][2], "torch_compile": compiled, "fp8": fp8}]  # fmt: skip


def render_speed_targets(context: Context) -> str:
    """Per pair (size, eager or compiled, and fp8 at large), the latest record long enough against each target it
    answers to, or what is not measured yet."""
    records = context.records("trainer")
    rows = []
    for size in SIZES:
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
    if record is None:
        empty = {**_synthetic(size, compiled, fp8), "results": {"runs": {}}}
        return [[LABELS[v.target], size, run, "no record", v.verdict(), "-"] for v in verdicts(empty)]
    return [[LABELS[v.target], size, run, v.shown(v.value), v.verdict(), context.link(record)]
            for v in verdicts(record, bf16)]  # fmt: skip


def _synthetic(size: str, compiled: bool, fp8: bool) -> dict[str, Any]:
    """A record's frame with no figures, long enough: what a pair not measured yet would answer to."""
    return {"command": "", "settings": {"model_size": size, "torch_compile": compiled, "fp8": fp8, "steps": MIN_STEPS,
                                        "logging_steps": MAX_WINDOW_STEPS}}  # fmt: skip
