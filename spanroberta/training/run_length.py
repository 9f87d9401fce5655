"""Settings whose good value depends on how long the run is: the learning-rate warm-up and how often the loss is
logged. A recipe's or a script's default is fitted to the run; what the user gave is kept (with a warning when it
cannot work).

Why: the papers' warm-ups are a small share of long runs (ELECTRA 10,000 of 1M steps, 1%; RoBERTa 24,000 of
500,000, 4.8%), but a fixed count of steps swallows a short run whole: a 200-step `--recipe electra` run with
ELECTRA's 10,000 warm-up steps would peak at 2% of its learning rate and learn nothing. Likewise transformers'
default `logging_steps` of 500 shows no loss at all for a run of a few hundred steps.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Collection

from transformers import Trainer, TrainingArguments
from transformers.trainer_utils import has_length

logger = logging.getLogger(__name__)

# A default warm-up takes at most this share of the run (the papers' take 1-5% of theirs).
MAX_DEFAULT_WARMUP_SHARE = 0.1
# A run of this many steps or more logs its loss at least this many times by default.
MIN_LOSS_POINTS = 20


def fit_to_run_length(trainer: Trainer, given: Collection[str] | None) -> None:
    """Fits `trainer.args`' warm-up and logging interval to the run's length, before `trainer.train()`.

    `given` holds the flags the user set (`cli.parse_arguments`); None means every setting was chosen on
    purpose (code that builds its own arguments), so that nothing is changed and only the warning is given.
    - a default warm-up longer than MAX_DEFAULT_WARMUP_SHARE of the run is cut to that share; a given one longer
      than the whole run is kept, with a warning (the learning rate would never reach its peak);
    - a default `logging_steps` is lowered so that the run logs at least MIN_LOSS_POINTS losses.
    Runs given by epochs get their length from the training set's size; a stream without one needs --max_steps
    (the Trainer's rule), so its length is always known.
    """
    args = trainer.args
    total = planned_steps(args, trainer.train_dataset)
    if total is None:
        return
    given = None if given is None else set(given)
    warmup = args.get_warmup_steps(total)
    if given is not None and "warmup_steps" not in given and warmup > total * MAX_DEFAULT_WARMUP_SHARE:
        args.warmup_steps = int(total * MAX_DEFAULT_WARMUP_SHARE)
        logger.info("Warm-up: %d steps (a tenth of this %d-step run) instead of the default %d.",
                    args.warmup_steps, total, warmup)  # fmt: skip
    elif warmup > total:
        logger.warning(
            "--warmup_steps %s is longer than the run (%d steps): the learning rate never reaches --learning_rate "
            "%g. Use --warmup_steps %d (a tenth of the run) or less, or train longer.",
            args.warmup_steps, total, args.learning_rate, int(total * MAX_DEFAULT_WARMUP_SHARE),
        )  # fmt: skip
    if given is not None and "logging_steps" not in given and args.logging_strategy == "steps":
        interval = args.logging_steps if args.logging_steps >= 1 else math.ceil(total * args.logging_steps)
        args.logging_steps = min(int(interval), max(1, total // MIN_LOSS_POINTS))


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
