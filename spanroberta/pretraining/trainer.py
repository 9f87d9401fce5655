"""A Trainer for pretraining: exact losses under gradient accumulation, each head's loss in the logs, the
evaluation its objective defines, a guard against NaN/inf losses and weights, and the DataLoader of the streaming
mode. It knows no objective by name: what differs between them, it asks the objective (`spanroberta.objectives`)."""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

import torch
from torch.utils.data import DataLoader, Dataset
from transformers import TrainerCallback

from ..data.streaming import StreamingBlocks
from ..errors import UserInputError
from ..objectives import PretrainingObjective, get_objective
from ..runs.distributed import weights_are_finite
from ..runs.trainer import RunTrainer
from .nonfinite import NonFiniteLossGuard, TrainingDivergedError
from ..runs.optimizers import deepspeed_builds_optimizer, move_to_learning_rate

logger = logging.getLogger(__name__)

class _MaskingEpochCallback(TrainerCallback):
    """Tells the dataset which epoch starts, so dynamic masks are drawn for (seed, epoch, index).

    accelerate's DataLoaderShard.set_epoch forwards the epoch to the dataset only when its sampler has no
    set_epoch of its own, which is not the case with several processes; this makes it unconditional.
    """

    def __init__(self, dataset):
        self.dataset = dataset

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.dataset.set_epoch(int(state.epoch or 0))


def _check_fresh_heads_learning_rate(trainer: PretrainingTrainer) -> None:
    """--fresh_heads_learning_rate applies to the heads a checkpoint lacked, through the Trainer's optimiser: said
    when there is none (nothing to apply it to), refused when DeepSpeed builds its own optimiser (it would be
    ignored)."""
    if deepspeed_builds_optimizer(trainer.args):
        raise UserInputError(
            "--fresh_heads_learning_rate needs the Trainer's optimiser, but the DeepSpeed config names its own "
            "(its `optimizer` section), which would train every weight at one learning rate. Remove the config's "
            "`optimizer` section (the Trainer's AdamW then runs under DeepSpeed) or leave the flag out."
        )
    if not trainer.fresh_head_prefixes:
        logger.warning(
            "--fresh_heads_learning_rate %g applies to nothing: no head of the model started fresh (the checkpoint "
            "held them all, or the model trains from scratch). Every weight trains at --learning_rate %g.",
            trainer.fresh_heads_learning_rate, trainer.args.learning_rate,
        )  # fmt: skip


def mark_sequence_count_dynamic(inputs: dict) -> dict:
    """The number of packed sequences (`sequence_offsets`' length) changes from batch to batch: marked dynamic, a
    compiled model traces one graph with that size symbolic from the first batch, instead of recompiling at the
    second."""
    if inputs.get("sequence_offsets") is not None:
        torch._dynamo.maybe_mark_dynamic(inputs["sequence_offsets"], 0)
    return inputs


class PretrainingTrainer(RunTrainer):
    """The project's Trainer (`runs.trainer.RunTrainer`), made exact for SpanRobertaForPreTraining.

    - The stock Trainer counts only `labels` (the MLM targets) across the accumulated batch; this one also sums
      the counts the model's `loss_normalisers` gives for its other heads (SBO, sentence) and hands them to the
      model, so batch 8 x accumulation 1 and batch 4 x accumulation 2 give the same loss and gradients.
    - Every head's loss the model outputs (`mlm_loss`, `sbo_loss`, `nsp_loss`, `discriminator_loss`, ...: each
      `*_loss` field) is logged next to `loss`, with `real_tokens_per_second`, the non-padding tokens trained on
      per second since the last log (all processes together).
    - `evaluate()` reports what the objective sums over the whole evaluation set (masked LM: loss, mlm_loss,
      mlm_accuracy, perplexity, sbo_ and nsp_/sop_ loss and accuracy; ELECTRA: the discriminator's loss,
      accuracy, precision and recall).
    - A NaN or infinite loss in any process never reaches the weights (`nonfinite.py`): with
      `args.on_nonfinite_loss="stop"` (the default) training stops with a `TrainingDivergedError` naming the
      step, read from the device only at steps that log, save, evaluate or end under torch's fused AdamW; with
      "skip" the update is skipped and a warning names the step. Weights holding NaN or inf are never saved:
      `save_model` raises.
    - A `StreamingBlocks` training set splits itself between processes; its DataLoader is not sharded again.
    - `eval_data_collator`, when given, masks the evaluation set instead of `data_collator` (--eval_masking).
    - With `args.fresh_heads_learning_rate`, the heads the checkpoint lacked (the model's `fresh_head_prefixes`,
      set where it was loaded) train at that peak learning rate, everything else at `args.learning_rate`.
    """

    def __init__(
        self,
        *args: Any,
        objective: PretrainingObjective | None = None,
        eval_data_collator: Callable | None = None,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        self.eval_data_collator = eval_data_collator
        # Masked LM (with whatever heads the model has) unless told otherwise.
        self.objective = objective or get_objective("masked_lm")
        # PretrainingArguments' flag; plain TrainingArguments get the safe default.
        self.on_nonfinite_loss = getattr(self.args, "on_nonfinite_loss", "stop")
        if self.on_nonfinite_loss == "skip" and self.is_deepspeed_enabled:
            # DeepSpeed's engine applies the update inside backward(), before the step can be skipped.
            raise ValueError("--on_nonfinite_loss skip does not work with DeepSpeed; use stop.")
        # PretrainingArguments' flag, and the heads the checkpoint lacked (set where the model was loaded).
        self.fresh_heads_learning_rate = getattr(self.args, "fresh_heads_learning_rate", None)
        self.fresh_head_prefixes = tuple(getattr(self.model, "fresh_head_prefixes", ()))
        if self.fresh_heads_learning_rate is not None:
            _check_fresh_heads_learning_rate(self)
        if hasattr(self.train_dataset, "set_epoch"):
            self.add_callback(_MaskingEpochCallback(self.train_dataset))
        self.nonfinite_guard = NonFiniteLossGuard(self, self.on_nonfinite_loss)
        self.add_callback(self.nonfinite_guard)
        self._step_loss_normalisers: dict[str, torch.Tensor] = {}
        self._head_loss_sums: dict[str, torch.Tensor] = {}
        self._head_losses_logged_at_step = 0
        # Real (non-padding) tokens trained on, summed on the device and read once per log.
        self._real_tokens = torch.zeros((), dtype=torch.long, device=self.args.device)
        self._real_tokens_logged = 0
        self._real_tokens_total = 0
        self._real_tokens_window_start: float | None = None

    def create_optimizer(self, model=None) -> torch.optim.Optimizer:
        """The Trainer's optimiser (its class, settings and weight-decay groups), with the heads that started fresh
        moved to groups of their own at --fresh_heads_learning_rate; the schedule then scales every group."""
        created = self.optimizer is None
        optimizer = super().create_optimizer(model)
        if created and self.fresh_heads_learning_rate is not None and self.fresh_head_prefixes:
            fresh = {id(p) for name, p in self.model.named_parameters() if name.startswith(self.fresh_head_prefixes)}
            move_to_learning_rate(optimizer, fresh, self.fresh_heads_learning_rate)
        return optimizer

    def get_train_dataloader(self) -> DataLoader:
        if not isinstance(self.train_dataset, StreamingBlocks):
            return super().get_train_dataloader()
        # accelerate would wrap an iterable dataset so that each process keeps a slice of every batch, or have
        # process 0 read all batches and send them out; streaming blocks are already split between processes.
        return DataLoader(
            self.train_dataset,
            batch_size=self._train_batch_size,
            collate_fn=self.data_collator,
            num_workers=self.args.dataloader_num_workers,
            pin_memory=self.args.dataloader_pin_memory,
            persistent_workers=self.args.dataloader_persistent_workers and self.args.dataloader_num_workers > 0,
            prefetch_factor=self.args.dataloader_prefetch_factor,
        )

    def _prepare_inputs(self, inputs: dict) -> dict:
        return mark_sequence_count_dynamic(super()._prepare_inputs(inputs))

    def training_step(self, model, inputs, num_items_in_batch=None) -> torch.Tensor:
        mask = inputs.get("attention_mask")
        self._real_tokens += mask.sum() if mask is not None else inputs["input_ids"].numel()
        loss = super().training_step(model, inputs, num_items_in_batch)
        self.nonfinite_guard.count(loss)
        return loss

    def _issue_warnings_after_load(self, load_result: Any) -> None:
        # A checkpoint leaves out the decoders tied to the word embeddings (they load with them); the Trainer
        # would warn on resuming that they are missing.
        tied = set(getattr(self.model, "_tied_weights_keys", None) or ())
        missing = [key for key in load_result.missing_keys if key not in tied]
        super()._issue_warnings_after_load(load_result._replace(missing_keys=missing))

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        # Every process's share (a ZeRO-3 or FSDP shard), agreed by all: every process saves or none does.
        if not weights_are_finite(self.model, self.accelerator):
            raise TrainingDivergedError(
                f"The model's weights hold NaN or infinite values at step {self.state.global_step}; they were not "
                f"saved to {output_dir or self.args.output_dir}. Resume from the last checkpoint with a lower "
                "learning rate."
            )
        super().save_model(output_dir, _internal_call)

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model=None) -> None:
        # A model saved in a layout of its objective's (ELECTRA's two checkpoints) is loaded by the objective.
        model = model or self.model
        if self._engine_loads_checkpoints() or not self.objective.load_checkpoint(model, resume_from_checkpoint):
            super()._load_from_checkpoint(resume_from_checkpoint, model)

    def _load_best_model(self) -> None:
        folder = self.state.best_model_checkpoint
        if self._engine_loads_checkpoints() or not self.objective.load_checkpoint(self.model, folder):
            return super()._load_best_model()
        logger.info("Loaded the best model from %s (%s).", folder, self.state.best_metric)

    def _engine_loads_checkpoints(self) -> bool:
        """DeepSpeed and FSDP load their own (sharded) checkpoints."""
        return self.is_fsdp_enabled or self.is_deepspeed_enabled

    def get_batch_samples(self, epoch_iterator, num_batches: int, device: torch.device):
        batch_samples, num_items_in_batch = super().get_batch_samples(epoch_iterator, num_batches, device)
        if self._real_tokens_window_start is None:
            # The window of real tokens/s starts once its first step's batches are fetched, where a callback's
            # on_step_begin would start it (the speed benchmarks' baselines time theirs so); the later steps' fetching
            # falls inside it.
            self._real_tokens_window_start = time.perf_counter()
        # The model says which targets normalise which loss; the trainer only sums them over the accumulated
        # micro-batches and the processes. The MLM targets (`labels`) are the stock Trainer's num_items_in_batch,
        # counted by it the same way.
        # Counted here and handed to the model in compute_loss: only this hook sees every micro-batch of the
        # optimizer step (a loss normalised by the step's total keeps accumulation exact), and only compute_loss
        # builds the model's inputs, one micro-batch at a time. The stock Trainer splits num_items_in_batch the same
        # way; `_step_loss_normalisers` carries the other counts from this end to that one.
        loss_normalisers = getattr(self.model, "loss_normalisers", None)
        self._step_loss_normalisers = {}
        if loss_normalisers is None:
            return batch_samples, num_items_in_batch
        totals: dict[str, torch.Tensor] = {}
        for batch in batch_samples:
            for name, count in loss_normalisers(batch).items():
                totals[name] = totals.get(name, 0) + count
        for name, count in totals.items():
            if name == "num_items_in_batch":
                continue
            count = torch.as_tensor(count, device=device)
            # As the stock Trainer treats its own count.
            if self.args.average_tokens_across_devices and self.args.world_size > 1:
                count = self.accelerator.gather(count).sum()
            elif self.args.n_gpu > 1:
                # nn.DataParallel: each replica gets its share, scattered along a first dimension.
                count = (count // self.args.n_gpu).unsqueeze(0).expand(self.args.n_gpu, -1)
            self._step_loss_normalisers[name] = count
        return batch_samples, num_items_in_batch

    def compute_loss(self, model, inputs, return_outputs: bool = False, num_items_in_batch=None):
        if model.training and num_items_in_batch is not None:
            # The step's counts from get_batch_samples (see there why they are counted there and fed here); the
            # Trainer passes num_items_in_batch only to training steps, so evaluation normalises by its own batch.
            inputs = {**inputs, **self._step_loss_normalisers}
        loss, outputs = super().compute_loss(model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch)
        if model.training:
            if not self._head_loss_sums:
                # First micro-batch since the last log (or since a resume): remember where this window starts.
                self._head_losses_logged_at_step = self.state.global_step
            for name, value in outputs.items():
                if name.endswith("_loss") and value is not None:
                    self._head_loss_sums[name] = self._head_loss_sums.get(name, 0.0) + value.detach()
        return (loss, outputs) if return_outputs else loss

    def real_token_metrics(self, runtime: float) -> dict[str, float]:
        """`real_tokens` trained on in this run (all processes, padding excluded) and `real_tokens_per_second`
        over `runtime` seconds, for the train metrics."""
        self._read_real_tokens()
        return {
            "train_real_tokens": self._real_tokens_total,
            "train_real_tokens_per_second": round(self._real_tokens_total / max(runtime, 1e-9), 1),
        }

    def _read_real_tokens(self) -> int:
        """Moves the device count into the run's total; returns the tokens counted since the last read."""
        count = int(self.accelerator.reduce(self._real_tokens.clone(), reduction="sum"))
        self._real_tokens.zero_()
        self._real_tokens_total += count
        return count

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs and self._real_tokens_window_start is not None:
            # transformers' --include_num_input_tokens_seen non_padding cannot be given on the command line in
            # 5.23 (HfArgumentParser reads the field as a bool); this is that figure, as a rate.
            elapsed = time.perf_counter() - self._real_tokens_window_start
            logs["real_tokens_per_second"] = round(self._read_real_tokens() / max(elapsed, 1e-9), 1)
            self._real_tokens_window_start = None
        if "loss" in logs and self._head_loss_sums:
            steps = self.state.global_step - self._head_losses_logged_at_step
            for name, total in self._head_loss_sums.items():
                # Each micro-batch contributes its share of the step's mean; processes hold parts of the global one.
                total = self.accelerator.reduce(total.reshape(1), reduction="sum").item()
                logs[name] = round(total / max(steps, 1), 4)
            self._head_loss_sums = {}
        super().log(logs, start_time)

    def get_eval_dataloader(self, eval_dataset: Dataset | str | None = None) -> DataLoader:
        if self.eval_data_collator is None:
            return super().get_eval_dataloader(eval_dataset)
        # The stock Trainer collates every split with data_collator: lend it the evaluation's for this DataLoader.
        training_collator, self.data_collator = self.data_collator, self.eval_data_collator
        try:
            return super().get_eval_dataloader(eval_dataset)
        finally:
            self.data_collator = training_collator

    def evaluate(
        self, eval_dataset: Dataset | None = None, ignore_keys=None, metric_key_prefix: str = "eval"
    ) -> dict[str, float]:
        """The objective's metrics over the whole evaluation set: sums on the device, reduced over the processes,
        read once at the end."""
        dataloader: DataLoader = self.get_eval_dataloader(eval_dataset)
        model = self._wrap_model(self.model, training=False, dataloader=dataloader)
        model.eval()
        sums = self.objective.evaluation_sums(self.model.config, self.args.device)
        for inputs in dataloader:
            inputs = self._prepare_inputs(inputs)
            with torch.no_grad(), self.compute_loss_context_manager():
                outputs = model(**inputs)
            self.objective.accumulate(sums, inputs, outputs, self.model.config)
        totals = {key: self.accelerator.reduce(value, reduction="sum").item() for key, value in sums.items()}
        metrics = self.objective.evaluation_metrics(totals, self.model)
        metrics = {f"{metric_key_prefix}_{key}": value for key, value in metrics.items()}
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics
