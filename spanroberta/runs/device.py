"""The settings a run takes from the device it runs on, decided once for every script (`validation.check_run`
applies them, before any model or data loader is built):

- the data loader pins host memory only for an accelerator to copy from: on CPU, `dataloader_pin_memory` is
  turned off (torch would pin nothing and warn that no accelerator was found);
- DeepSpeed is told the device when no DeepSpeed run is asked for. Accelerate imports DeepSpeed whenever it is
  installed (`unwrap_model`, inside the Trainer's constructor), and DeepSpeed, finding no GPU and no
  `DS_ACCELERATOR`, warns on import that it fell back to CPU, a line that a plain CPU run cannot act on.
  `DS_ACCELERATOR=cpu` states the fact; a value the user set is kept, and a DeepSpeed run is left to DeepSpeed.
"""

from __future__ import annotations

import logging
import os

from transformers import TrainingArguments

from .distributed import engine_requested

logger = logging.getLogger(__name__)


def fit_to_device(args: TrainingArguments) -> None:
    """Sets `args` (and DeepSpeed's accelerator) for the device the run trains on; see the module's docstring."""
    if args.device.type != "cpu":
        return
    if args.dataloader_pin_memory:
        logger.info("Training on CPU: the data loader does not pin memory (--dataloader_pin_memory false).")
        args.dataloader_pin_memory = False
    if engine_requested(args) != "DeepSpeed":
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
