"""Adam without bias correction, with decoupled weight decay: the optimiser of BERT and ELECTRA
(`AdamWeightDecayOptimizer` in google-research/bert and google-research/electra's `model/optimization.py`).

torch's Adam and AdamW always correct the bias of the moment estimates, and transformers 5 no longer ships an
AdamW with `correct_bias=False`. Per parameter p with gradient g, at learning rate lr:

    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g^2
    p = p - lr * (m / (sqrt(v) + eps) + weight_decay * p)
"""

from __future__ import annotations

import torch
from transformers import TrainingArguments

from ..errors import UserInputError


class AdamWithoutBiasCorrection(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-6,
                 weight_decay: float = 0.0):
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0.0 <= beta < 1.0 for beta in betas):
            raise ValueError(f"Invalid settings: lr={lr}, betas={betas}, eps={eps}, weight_decay={weight_decay}.")
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(p.grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                update = exp_avg / (exp_avg_sq.sqrt() + group["eps"])
                if group["weight_decay"]:
                    update.add_(p, alpha=group["weight_decay"])
                p.add_(update, alpha=-group["lr"])
        return loss


def deepspeed_builds_optimizer(training_args: TrainingArguments) -> bool:
    """Whether a DeepSpeed config names its own optimizer: DeepSpeed then builds that one, and the Trainer's
    (its class, its parameter groups) would be ignored without a word."""
    deepspeed_config = getattr(training_args, "hf_deepspeed_config", None)
    return deepspeed_config is not None and "optimizer" in deepspeed_config.config


def trainer_optimizer(training_args: TrainingArguments) -> tuple[type, dict] | None:
    """For the Trainer's `optimizer_cls_and_kwargs`: Adam without bias correction when `--adam_bias_correction
    false` (the ELECTRA recipe's default), None otherwise (the Trainer's own optimiser). The Trainer still makes
    the parameter groups (no weight decay on biases and LayerNorm weights) and the schedule."""
    if getattr(training_args, "adam_bias_correction", None) is not False:
        return None
    if deepspeed_builds_optimizer(training_args):
        raise UserInputError(
            "--adam_bias_correction false (the electra recipe's default: Adam without bias correction) cannot run "
            "under a DeepSpeed config that names its own optimizer, which DeepSpeed would use instead. Remove the "
            "\"optimizer\" section from the DeepSpeed config (the Trainer's optimiser is then used), or pass "
            "--adam_bias_correction true."
        )
    kwargs = {
        "lr": training_args.learning_rate,
        "betas": (training_args.adam_beta1, training_args.adam_beta2),
        "eps": training_args.adam_epsilon,
    }
    return AdamWithoutBiasCorrection, kwargs


def move_to_learning_rate(optimizer: torch.optim.Optimizer, parameters: set[int], learning_rate: float) -> None:
    """Splits each of the optimizer's groups in two: the parameters whose id is in `parameters` go to a copy of
    their group (its weight decay and other settings) at `learning_rate`, the rest stay. Called on a new optimizer,
    before the schedule wraps it; the schedule then scales every group from its own peak."""
    groups = []
    for group in optimizer.param_groups:
        settings = {key: value for key, value in group.items() if key != "params"}
        groups.append({**settings, "params": [p for p in group["params"] if id(p) not in parameters]})
        groups.append({**settings, "params": [p for p in group["params"] if id(p) in parameters], "lr": learning_rate})
    optimizer.param_groups = [group for group in groups if group["params"]]
