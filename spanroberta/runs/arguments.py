"""The flags every script takes, declared once: which model, tokenizer and config to load and from where
(`hub.ModelSource`, which the layers below read), the attention implementation, and what to do with an
--output_dir that holds another run. run_pretraining.py and the fine-tuning scripts extend these classes, so that
every script accepts, refuses and explains them alike."""

from __future__ import annotations

from dataclasses import dataclass, field

from transformers import TrainingArguments

from ..hub import ModelSource
from ..models.packed_attention import ATTENTION_IMPLEMENTATIONS
from .ranges import check_range


@dataclass
class ModelArguments(ModelSource):
    """Where the model comes from (`hub.ModelSource`), and the attention implementation it runs."""

    attn_implementation: str | None = field(
        default=None,
        metadata={
            "help": "Attention kernel: sdpa, eager, varlen_fa2 (pretraining's packed rows through torch's flash "
            "kernel on CUDA under bf16 or fp16; sdpa wherever the kernel cannot run), flex_attention (no attention "
            "dropout: needs --config_overrides attention_probs_dropout_prob=0 where the model has some), "
            "flash_attention_2 or flash_attention_3 (these two need the flash-attn package and a GPU). Default: "
            "transformers' choice, sdpa (pretraining runs packed rows under a block-diagonal mask; its Run settings "
            "line says where varlen_fa2 would run them).",
            "choices": list(ATTENTION_IMPLEMENTATIONS),
        },
    )


@dataclass
class RunArguments(TrainingArguments):
    """TrainingArguments with the output-folder flag of transformers' example scripts, which TrainingArguments lacks,
    and the flag that lets a resume change the batch (`resume_settings`)."""

    overwrite_output_dir: bool = field(
        default=False,
        metadata={"help": "Train in an --output_dir that holds another run: its checkpoints are deleted first, its "
                  "model overwritten. Without it (or --resume_from_checkpoint), such a folder is refused."},
    )
    allow_changed_batch: bool = field(
        default=False,
        metadata={"help": "Resume from a checkpoint trained under another batch size per device, gradient "
                  "accumulation, number of processes (or, pretraining, --max_seq_length or masking): steps, epochs "
                  "and the data skipped are then counted in the new batches. Without it, such a resume is refused."},
    )

    def __post_init__(self):
        # Refused here, before any model is loaded: torch's optimizers would refuse some only once it is, and
        # a zero rate would train nothing.
        check_range("learning_rate", self.learning_rate, above=0)
        check_range("weight_decay", self.weight_decay, 0)
        for flag in ("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps"):
            check_range(flag, getattr(self, flag), 1)
        super().__post_init__()
