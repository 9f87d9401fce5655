"""Settings whose good value depends on how long the run is: the learning-rate warm-up, Adam's bias correction and
how often the loss is logged. A recipe's or a script's default is fitted to the run; what the user gave is kept
(with a warning when it cannot work).

Why: the papers' warm-ups are a small share of long runs (ELECTRA 10,000 of 1M steps, 1%; RoBERTa 24,000 of
500,000, 4.8%), but a fixed count of steps swallows a short run whole: a 200-step `--recipe electra` run with
ELECTRA's 10,000 warm-up steps would peak at 2% of its learning rate and learn nothing. Likewise transformers'
default `logging_steps` of 500 shows no loss at all for a run of a few hundred steps.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Collection, Mapping

from transformers import TrainingArguments
from transformers.trainer_utils import has_length

from .distributed import training_processes

logger = logging.getLogger(__name__)

# A default warm-up takes at most this share of the run (the papers' take 1-5% of theirs).
MAX_DEFAULT_WARMUP_SHARE = 0.1
# A run of this many steps or more logs its loss at least this many times by default.
MIN_LOSS_POINTS = 20
# Evaluations a run gets when --eval_strategy steps is given without --eval_steps.
EVALUATIONS = 10
# The settings fit_to_run_length may change.
FITTED = ("warmup_steps", "adam_bias_correction", "logging_steps", "eval_steps")


def fit_to_run_length(args: TrainingArguments, given: Collection[str] | None, train_dataset: object) -> set[str]:
    """Fits the warm-up, Adam's bias correction and the logging interval of `args` to the run's length, in place,
    before the Trainer builds its optimiser and schedule.

    `given` holds the flags the user set (`cli.parse_arguments`); None means every setting was chosen on
    purpose (code that builds its own arguments), so that nothing is changed and only the warnings are given.
    Runs given by epochs are measured on `train_dataset`; a stream without a length needs --max_steps (the
    Trainer's rule), so a run's length is always known. Returns the names of the settings it changed.
    """
    total = planned_steps(args, train_dataset)
    if total is None:
        return set()

    def is_default(flag: str) -> bool:
        return given is not None and flag not in given

    before = {name: getattr(args, name, None) for name in FITTED}
    _fit_warmup(args, total, is_default("warmup_steps"))
    _fit_bias_correction(args, args.get_warmup_steps(total), is_default("adam_bias_correction"))
    if is_default("logging_steps") and args.logging_strategy == "steps":
        _fit_logging(args, total, is_default("eval_steps"))
    return {name for name, value in before.items() if getattr(args, name, None) != value}


def run_settings(
    args: TrainingArguments,
    train_dataset: object,
    set_by: dict[str, str],
    attn_implementation: str | None = None,
    fp8: str | None = None,
    model_settings: Mapping[str, object] | None = None,
) -> str:
    """One line saying what the run will train with: the effective batch (per device x accumulation x processes), the
    accumulation, learning rate, warm-up, total steps, torch.compile where something set it, the `model_settings` (name
    -> value) that something set, attention implementation and, under --fp8, the layers in float8 (`fp8`, the run's
    account of them), each with who set it (`set_by`: flag name -> where its value came from, as the pretraining run's
    specification records it: "you", "recipe <name>", "demo", "fitted to the run", "--fp8 needs compile", ...;
    transformers' default otherwise). A recipe that accumulates gradients to reach its paper's batch multiplies the cost
    of every step: said before the first one."""
    processes = training_processes(args)
    total = planned_steps(args, train_dataset)

    def setting(name: str, value: object) -> str:
        return f"{name} {value} ({set_by.get(name, 'default')})"

    if args.max_steps > 0:
        length = setting("max_steps", args.max_steps)
    else:
        length = f"{total} steps in " + setting("num_train_epochs", f"{args.num_train_epochs:g}")
    batch = args.per_device_train_batch_size * args.gradient_accumulation_steps * processes
    return "Run settings: " + "; ".join([
        f"effective batch {batch} (per device x accumulation x {processes} process{'es' if processes > 1 else ''})",
        setting("per_device_train_batch_size", args.per_device_train_batch_size),
        setting("gradient_accumulation_steps", args.gradient_accumulation_steps),
        setting("learning_rate", f"{args.learning_rate:g}"),
        *([setting("fresh_heads_learning_rate", f"{args.fresh_heads_learning_rate:g}")]
          if getattr(args, "fresh_heads_learning_rate", None) is not None else []),
        setting("warmup_steps", args.get_warmup_steps(total) if total else args.warmup_steps),
        length,
        setting("dataloader_num_workers", args.dataloader_num_workers),
        *([setting("torch_compile", args.torch_compile)] if "torch_compile" in set_by else []),
        *[setting(name, value) for name, value in (model_settings or {}).items() if name in set_by],
        *([setting("attn_implementation", attn_implementation)] if attn_implementation else []),
        *([setting("fp8", fp8)] if fp8 else []),
    ])  # fmt: skip


def _fit_logging(args: TrainingArguments, total: int, eval_steps_is_default: bool) -> None:
    """At least MIN_LOSS_POINTS loss points. An unset --eval_steps, which transformers set to the logging interval,
    is fitted too, to EVALUATIONS evaluations a run, so that --eval_strategy steps evaluates a short run (not under
    --load_best_model_at_end, whose save and evaluation steps transformers has already checked against each other)."""
    previous = args.logging_steps
    interval = previous if previous >= 1 else math.ceil(total * previous)
    args.logging_steps = min(int(interval), max(1, total // MIN_LOSS_POINTS))
    inherited = args.eval_strategy == "steps" and args.eval_steps == previous
    if eval_steps_is_default and inherited and not args.load_best_model_at_end:
        args.eval_steps = min(int(interval), max(1, total // EVALUATIONS))


def _fit_warmup(args: TrainingArguments, total: int, is_default: bool) -> None:
    """A default warm-up longer than MAX_DEFAULT_WARMUP_SHARE of the run is cut to that share; a given one
    longer than the whole run is kept, with a warning (the learning rate would never reach its peak)."""
    warmup = args.get_warmup_steps(total)
    fitted = int(total * MAX_DEFAULT_WARMUP_SHARE)
    if is_default and warmup > fitted:
        args.warmup_steps = fitted
        logger.info("Warm-up: %d steps (a tenth of this %d-step run) instead of the default %d.",
                    fitted, total, warmup)  # fmt: skip
    elif warmup > total:
        logger.warning(
            "--warmup_steps %s is longer than the run (%d steps): the learning rate never reaches --learning_rate "
            "%g. Use --warmup_steps %d (a tenth of the run) or less, or train longer.",
            args.warmup_steps, total, args.learning_rate, fitted,
        )  # fmt: skip


def _fit_bias_correction(args: TrainingArguments, warmup: int, is_default: bool) -> None:
    """Adam without bias correction (ELECTRA's and BERT's; `--adam_bias_correction false`) needs a warm-up of at
    least 1 / (1 - beta2) steps, the second-moment estimate's time constant (1,000 for beta2 0.999).

    Uncorrected, the step-t update is about lr(t) (1 - beta1^t) / sqrt(1 - beta2^t); under a linear warm-up of W
    steps it tops the peak learning rate by up to sqrt(1 / ((1 - beta2) W)) when W is shorter (7x for 20 warm-up
    steps), which ELECTRA's 10,000 absorb. With a shorter warm-up the default turns the correction on; a setting
    the user gave is kept, with a warning."""
    time_constant = 1 / (1 - args.adam_beta2)
    if getattr(args, "adam_bias_correction", None) is not False or warmup >= time_constant:
        return
    if is_default:
        args.adam_bias_correction = True
        logger.info("Adam's bias correction is on: the %d warm-up steps are too few to absorb the uncorrected "
                    "first updates (at least %d are needed).", warmup, math.ceil(time_constant))  # fmt: skip
    else:
        logger.warning(
            "--adam_bias_correction false with %d warm-up steps: the first updates will be up to %.1f times the "
            "learning rate; a warm-up of %d steps or more absorbs them (ELECTRA's: 10,000).",
            warmup, math.sqrt(time_constant / max(warmup, 1)), math.ceil(time_constant),
        )  # fmt: skip


def planned_steps(args: TrainingArguments, train_dataset: object) -> int | None:
    """The optimizer steps the run will take: --max_steps, else --num_train_epochs over the training set (as the
    Trainer counts them); None when there is no training set or it has no length."""
    if args.max_steps > 0:
        return args.max_steps
    if train_dataset is None or not has_length(train_dataset):
        return None
    per_batch = args.per_device_train_batch_size * max(args.world_size, 1)
    round_batches = math.floor if args.dataloader_drop_last else math.ceil
    batches = max(round_batches(len(train_dataset) / per_batch), 1)
    return math.ceil(args.num_train_epochs * math.ceil(batches / args.gradient_accumulation_steps))
