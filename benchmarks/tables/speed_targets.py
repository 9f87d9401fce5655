"""The speed targets of the Trainer path on a GPU and each record's verdict against them: speed/trainer.py writes
the records, the `speed-targets` region of benchmarks/RESULTS.md shows the verdicts of the latest.

The targets, for the spanbert recipe on a GPU at the pairs' per-device batches (speed/trainer.py's CONFIGS):

- its model FLOPs utilisation compiled: at least MFU_COMPILED at base and at large;
- its real tokens/s over run_mlm's defaults': at least VS_DEFAULTS of its size, eager and compiled;
- its MFU over the tuned transformers peer's: at least MFU_VS_TUNED (the peer's own), eager and compiled;
- at large, its real tokens/s with `--fp8` over the bf16 run's of the same code and compilation: FP8_OVER_BF16.

A record answers to them only where it ran long enough for its windows to agree (`long_enough`: MIN_STEPS steps at
least, windows of at most MAX_WINDOW_STEPS, and not marked a rehearsal); the earlier, shorter GPU records stay in
the tables as measurements, without a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.common import code_of
from benchmarks.speed.trainer import CONFIGS, DEFAULTS, MAX_WINDOW_STEPS, MIN_STEPS, SPANBERT, TUNED
from benchmarks.tables.format import Context, markdown_table

MFU_COMPILED = 0.35
VS_DEFAULTS = {"base": 1.5, "large": 1.3}
MFU_VS_TUNED = 1.0
FP8_OVER_BF16 = 1.3
# What each target compares, as the table names it.
LABELS = {"mfu": "MFU, compiled", "vs_defaults": f"real tokens/s over `{DEFAULTS}`",
          "mfu_vs_tuned": f"MFU over `{TUNED}`", "fp8": "real tokens/s with --fp8 over bf16"}  # fmt: skip
SIZES = {"base": "base-gpu", "large": "large-gpu"}  # the configs of the pairs, by model size


@dataclass(frozen=True)
class Verdict:
    """One target against one record: the least value that meets it and the record's (None: not in the record)."""

    target: str  # a key of LABELS
    floor: float
    value: float | None

    @property
    def met(self) -> bool | None:
        return None if self.value is None else self.value >= self.floor

    def shown(self, value: float | None) -> str:
        """A value as this target reads it: MFU in percent, the others as ratios."""
        if value is None:
            return "-"
        return f"{100 * value:.1f}%" if self.target == "mfu" else f"{value:.2f}x"

    def verdict(self) -> str:
        met = {True: "**met**", False: "**not met**", None: "not measured"}[self.met]
        return f"{met} (target >= {self.shown(self.floor)})"


def settings_of(record: dict[str, Any]) -> dict[str, Any]:
    """A Trainer record's settings, with `fp8` (whether it ran with `--fp8`, read from its command line where its
    settings do not say) and `rehearsal` (False where its settings do not say) always there."""
    settings = record["settings"]
    fp8 = settings.get("fp8", "--fp8" in record.get("command", "").split())
    return {**settings, "fp8": bool(fp8), "rehearsal": bool(settings.get("rehearsal"))}


def long_enough(record: dict[str, Any]) -> bool:
    """Whether a Trainer record ran long enough for its windows to agree, and is no rehearsal."""
    settings = settings_of(record)
    return (not settings["rehearsal"] and settings["steps"] >= MIN_STEPS
            and settings["logging_steps"] <= MAX_WINDOW_STEPS)  # fmt: skip


def verdicts(record: dict[str, Any], bf16: dict[str, Any] | None = None) -> list[Verdict]:
    """The verdicts of one Trainer record against the targets of its size, compilation and precision; an fp8
    record's against `bf16`, the record of the same code, size and compilation without fp8. None where the record
    answers to no target (a rehearsal, too short a run, a size without targets)."""
    settings = settings_of(record)
    if not long_enough(record) or settings.get("model_size") not in VS_DEFAULTS:
        return []
    span = record["results"]["runs"].get(SPANBERT, {})
    if settings["fp8"]:
        base = (bf16 or {}).get("results", {}).get("runs", {}).get(SPANBERT, {}).get("real_tokens_per_second")
        rate = span.get("real_tokens_per_second")
        value = rate / base if rate and base else None
        return [Verdict("fp8", FP8_OVER_BF16, value)] if settings["model_size"] == "large" else []
    found = [Verdict("vs_defaults", VS_DEFAULTS[settings["model_size"]], span.get("ratio_to_baseline")),
             Verdict("mfu_vs_tuned", MFU_VS_TUNED, span.get("mfu_over_tuned"))]  # fmt: skip
    return [Verdict("mfu", MFU_COMPILED, span.get("mfu")), *found] if settings["torch_compile"] else found


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
    met = sum(row[4].startswith("**met") for row in rows)
    unmeasured = sum(row[4].startswith("not measured") for row in rows)
    table = markdown_table(["target", "size", "run", "latest", "verdict", "record"], rows)
    return (f"{table}\n\nBy the latest records of {MIN_STEPS} steps or more, {met} of the {len(rows)} speed targets "
            f"are met; {unmeasured} not measured yet.")  # fmt: skip


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
