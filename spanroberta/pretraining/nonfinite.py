"""The guard against NaN or infinite losses: one owner for counting them, keeping their update off the weights, and
stopping or skipping as `--on_nonfinite_loss` says, with the error or warning that names the step.

Each micro-batch's loss is counted on the device. Before the optimizer step, the guard works in one of two ways:

- **On the device**, for the default `stop` policy where the optimizer is torch's fused Adam or AdamW (the Trainer's
  default on torch 2.8 and newer), with no fp16 GradScaler and no DeepSpeed: the first step whose loss was not
  finite is written into a device tensor, and the fused optimizer skips that update and every later one through its
  `found_inf` input (the flag a GradScaler gives it: the kernel leaves weights, moments and step count as they
  were). The host reads the tensor only at steps that log, save, evaluate or end training, and stops there naming
  the first such step: weights and checkpoints hold nothing of it. No other step waits for the device.
- **On the host** otherwise (the `skip` policy, other optimizers, a GradScaler, DeepSpeed): the count is read once
  an optimizer step, before the update, which is stopped or skipped (the learning-rate schedule still advances, as
  for an fp16 overflow). transformers' `logging_nan_inf_filter`, which keeps a skipped loss out of the logged
  mean, is on for `skip` (PretrainingArguments).
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from transformers import Trainer, TrainerCallback

logger = logging.getLogger(__name__)

NONFINITE_LOSS_POLICIES = ("stop", "skip")


class TrainingDivergedError(RuntimeError):
    """The loss or the weights became NaN or infinite; the message names the step. Nothing non-finite was saved."""


class NonFiniteLossGuard(TrainerCallback):
    """Counts non-finite losses (`count`, from the training step) and acts on them around the optimizer step."""

    def __init__(self, trainer: Trainer, policy: str):
        self.trainer = trainer
        self.policy = policy
        self._losses: torch.Tensor | None = None  # non-finite losses since the last optimizer step, on the device
        self._on_device: bool | None = None  # which way the guard works, decided at the first optimizer step
        self._first_step: torch.Tensor | None = None  # on the device: the first non-finite step, 0 while none
        self._found_inf: torch.Tensor | None = None  # on the device: 1.0 from that step on, read by the optimizer

    def count(self, loss: torch.Tensor) -> None:
        nonfinite = (~torch.isfinite(loss.detach())).sum()
        self._losses = nonfinite if self._losses is None else self._losses + nonfinite

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        if self._losses is None:
            return
        count, self._losses = self._losses, None
        if args.world_size > 1:  # a collective, not a host read
            count = self.trainer.accelerator.reduce(count, reduction="sum")
        if self._on_device is None:
            self._on_device = self._start_on_device(count.device)
        if not self._on_device:
            self._act_on_host(int(count), state.global_step + 1)
            return
        step = torch.full_like(self._first_step, state.global_step + 1)
        self._first_step.copy_(torch.where((self._first_step == 0) & (count > 0), step, self._first_step))
        self._found_inf.copy_((self._first_step > 0).float())

    def on_step_end(self, args, state, control, **kwargs):
        if self._on_device and (control.should_log or control.should_save or control.should_evaluate
                                or control.should_training_stop):  # fmt: skip
            step = int(self._first_step)
            if step:
                raise self._diverged(step, f" (every update from it on was skipped; the run stopped at step "
                                           f"{state.global_step}, the first to log, save or end after it)")

    def _start_on_device(self, device: torch.device) -> bool:
        """Whether the guard can work on the device for this run's optimizer; if so, hands it the skip flag."""
        optimizer = getattr(self.trainer.optimizer, "optimizer", self.trainer.optimizer)  # accelerate's wrapper
        fused_adam = isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)) and all(
            group.get("fused") for group in optimizer.param_groups
        )
        if self.policy != "stop" or not fused_adam or self.trainer.accelerator.scaler is not None:
            return False
        self._first_step = torch.zeros((), dtype=torch.long, device=device)
        self._found_inf = torch.zeros((), dtype=torch.float32, device=device)
        optimizer.found_inf = self._found_inf
        return True

    def _act_on_host(self, count: int, step: int) -> None:
        if not count:
            return
        if self.policy == "stop":
            raise self._diverged(step, "")
        logger.warning("Step %d: the loss is NaN or infinite; skipping its update (on_nonfinite_loss=skip).", step)
        if self.trainer.accelerator.scaler is None:
            # Optimizers leave parameters without a gradient untouched (an fp16 GradScaler skips by itself).
            for parameter in self.trainer.model.parameters():
                parameter.grad = None

    @staticmethod
    def _diverged(step: int, detail: str) -> TrainingDivergedError:
        return TrainingDivergedError(
            f"The loss became NaN or infinite at step {step}{detail}; training stopped and saved nothing of that "
            "step. Resume from the last checkpoint with a lower learning rate (keep --max_grad_norm on, prefer bf16 "
            "to fp16), or pass --on_nonfinite_loss skip to skip such steps."
        )
