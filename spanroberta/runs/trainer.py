"""The Trainer every script of the project runs: transformers' Trainer, except that a run resumed at its end takes no
further step.

transformers 5.23's training loop checks `max_steps` only after each optimizer step (`DefaultFlowCallback.on_step_end`),
so a run resumed from a checkpoint at its last step, where `max_steps` is not a whole number of epochs, trains one step
more than the uninterrupted run: a run killed after its last checkpoint was written, then resumed, ended with other
weights (by about one learning rate) and a loss logged at `max_steps + 1`. Here the loop is handed no batch once
`global_step` has reached `max_steps`, and stops.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import Trainer


class RunTrainer(Trainer):
    """transformers' Trainer that stops a run resumed at or past `max_steps` before it takes a step (see above)."""

    def get_batch_samples(self, epoch_iterator: Any, num_batches: int, device: torch.device) -> tuple[list, Any]:
        if 0 < self.state.max_steps <= self.state.global_step:
            # No batch: the loop takes no step, sees the stop and ends training as the uninterrupted run did.
            self.control.should_training_stop = True
            return [], None
        return super().get_batch_samples(epoch_iterator, num_batches, device)
