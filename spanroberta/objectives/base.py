"""What a pretraining objective answers for the run and the trainer, and the registry of objectives. Each
objective is one module of this package, whose class `register_objective` registers with the recipes it trains;
`pretraining/run.py` and `pretraining/trainer.py` ask it, and never which objective it is. What an objective may
read of the run's model flags is `ObjectiveSettings`, which run_pretraining.py's model arguments extend."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import torch
from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase, Trainer

from ..hub import ModelSource
from ..models.configuration_span_albert import CROSS_LAYER_SHARING
from ..models.configuration_spanroberta import IGNORE_INDEX, MODEL_SIZES
from .recipes import Recipe, add_recipe


@dataclass(frozen=True)
class ResolvedRecipe:
    """A recipe (`recipes.RECIPES`) with the user's overrides applied."""

    masking: str
    sbo: bool
    sentence_objective: str
    input_format: str
    static_masking: bool
    encoder: str = "roberta"
    tokenizer: str = "byte-level-bpe"
    # The name of the objective that trains the encoder (`OBJECTIVES`).
    objective: str = "masked_lm"


@dataclass
class ObjectiveSettings(ModelSource):
    """The model flags the objectives read to check a run, build its config and build its model
    (`PretrainingObjective.check`, `build_config`, `build_model`), all objectives together, declared once here:
    run_pretraining.py's model arguments extend this class. An objective that reads another flag declares it here."""

    model_size: str = field(
        default="base",
        metadata={"help": "Encoder shape when training from scratch.", "choices": list(MODEL_SIZES)},
    )
    pad_vocab_to_multiple_of: int = field(
        default=64,
        metadata={"help": "Pad the embeddings and decoders to a multiple of this many ids (for the GPU's tensor "
                  "cores; a checkpoint's are resized, except ELECTRA's); the padded ids are never predicted. 1: "
                  "no padding."},
    )
    sbo_loss_weight: float = field(default=1.0, metadata={"help": "loss = MLM + w * SBO."})
    embedding_size: int | None = field(
        default=None,
        metadata={
            "help": "ALBERT encoder with factorised embeddings of this size (V x E, then E x H; ALBERT section 3.1). "
            "Giving it (or --cross_layer_sharing) builds an ALBERT encoder under any recipe. Default: 128 for an "
            "ALBERT encoder (the albert recipe, or --cross_layer_sharing given). With --recipe electra: the embedding "
            "size the discriminator and the generator share (default: ELECTRA Table 6)."
        },
    )
    cross_layer_sharing: str | None = field(
        default=None,
        metadata={
            "help": "ALBERT encoder whose layers share all their parameters (ALBERT's scheme), only the attention, "
            "only the feed-forward network, or none (ALBERT Table 4). Giving it (or --embedding_size) builds an "
            "ALBERT encoder under any recipe. Default: all for an ALBERT encoder.",
            "choices": list(CROSS_LAYER_SHARING),
        },
    )
    generator_size: float | None = field(
        default=None,
        metadata={
            "help": "--recipe electra: the generator's hidden size as a fraction of the discriminator's (heads and "
            "FFN follow; same layers). Default: ELECTRA Table 6, 1/4 for small and large, 1/3 for base."
        },
    )
    rtd_loss_weight: float = field(
        default=50.0,
        metadata={"help": "--recipe electra: loss = generator MLM + lambda * discriminator loss (ELECTRA: 50)."},
    )
    generator_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "--recipe electra with --model_name_or_path (an ELECTRA discriminator): the generator to continue "
            "from, e.g. google/electra-base-generator. Default: the generator/ folder of --model_name_or_path."
        },
    )


class PretrainingObjective(ABC):
    """The questions the pretraining run and `PretrainingTrainer` ask an objective. The abstract ones every
    objective answers; the others have the plain answer, which an objective overrides where it differs."""

    def flag_defaults(self, model_args: ObjectiveSettings, batch_per_step: int) -> dict[str, Any]:
        """The objective's defaults (flag name -> value) beyond the recipe's `flag_defaults`, for the model flags
        and `batch_per_step` (the sequences of one forward over all processes: the per-device batch times the
        processes). The run applies them to the flags the user did not give."""
        return {}

    def check(self, recipe: ResolvedRecipe, model_args: ObjectiveSettings) -> None:
        """Raises UserInputError for settings the objective cannot train."""

    @abstractmethod
    def build_config(
        self, model_args: ObjectiveSettings, recipe: ResolvedRecipe, tokenizer: PreTrainedTokenizerBase
    ) -> PretrainedConfig:
        """The model's config: the checkpoint's, else built for --model_size and the tokenizer."""

    @abstractmethod
    def build_model(
        self, model_args: ObjectiveSettings, config: PretrainedConfig, tokenizer: PreTrainedTokenizerBase
    ) -> PreTrainedModel:
        """The pretraining model of `config`: from --model_name_or_path, else freshly initialised."""

    def collator_settings(self, recipe: ResolvedRecipe, config: PretrainedConfig) -> dict[str, Any]:
        """The `DataCollatorForSpanMasking` arguments the objective decides."""
        return {}

    # Evaluation: sums over the evaluation set, reduced over processes, then turned into metrics.

    @abstractmethod
    def evaluation_sums(self, config: PretrainedConfig, device: torch.device) -> dict[str, torch.Tensor]:
        """Zeroed sums, on `device`, that `accumulate` adds an evaluation batch to."""

    @abstractmethod
    def accumulate(
        self, sums: dict[str, torch.Tensor], inputs: dict[str, torch.Tensor], outputs: Any, config: PretrainedConfig
    ) -> None:
        """Adds a batch's sums (from the model's `outputs` on `inputs`) to `sums`."""

    @abstractmethod
    def evaluation_metrics(self, totals: dict[str, float], model: PreTrainedModel) -> dict[str, float]:
        """The metrics of the whole evaluation set from the sums over every process."""

    # Saving and loading beyond transformers' single checkpoint.

    def load_checkpoint(self, model: PreTrainedModel, folder: str) -> bool:
        """Loads a checkpoint the objective saved in its own layout into `model`; False: the Trainer's way."""
        return False

    def save_beside_model(self, trainer: Trainer, tokenizer: PreTrainedTokenizerBase) -> None:
        """Writes what the objective keeps beside the saved model (main process only)."""

    def masked_lm_folder(self, output_dir: str) -> str:
        """The folder `pipeline("fill-mask")` loads."""
        return output_dir

    def needs_spanroberta(self, config: PretrainedConfig) -> bool:
        """Whether the saved model is one of spanroberta's own types, which the Auto classes load only once
        `import spanroberta` has registered them; a stock architecture loads with transformers alone."""
        return False

    @abstractmethod
    def model_card_usage(self, config: PretrainedConfig) -> str:
        """How to use the saved model, for its model card."""


# Objective name -> the objective, as `register_objective` registered them.
OBJECTIVES: dict[str, PretrainingObjective] = {}
ObjectiveClass = TypeVar("ObjectiveClass", bound=type[PretrainingObjective])


def register_objective(name: str, recipes: dict[str, Recipe]) -> Callable[[ObjectiveClass], ObjectiveClass]:
    """Class decorator: registers an instance of the objective as `name` (`get_objective(name)`) and `recipes`
    (--recipe name -> recipe) as trained by it. The package imports every module of its own, so a new objective's
    module registers itself and nothing else is edited."""

    def register(objective_class: ObjectiveClass) -> ObjectiveClass:
        if name in OBJECTIVES:
            raise ValueError(f"Two objectives are named {name!r}: {type(OBJECTIVES[name])} and {objective_class}.")
        OBJECTIVES[name] = objective_class()
        for recipe_name, recipe in recipes.items():
            add_recipe(recipe_name, replace(recipe, objective=name))
        return objective_class

    return register


def get_objective(name: str) -> PretrainingObjective:
    if name not in OBJECTIVES:
        raise ValueError(f"Unknown objective {name!r}; registered objectives: {', '.join(OBJECTIVES)}.")
    return OBJECTIVES[name]


def accumulate_classification(
    sums: dict[str, torch.Tensor], head: str, logits: torch.Tensor, targets: torch.Tensor
) -> None:
    """Adds a head's summed cross-entropy, correct predictions and count over `targets` to `sums`."""
    logits = logits.float()
    sums[f"{head}_loss"] += torch.nn.functional.cross_entropy(logits, targets, reduction="sum").double()
    sums[f"{head}_correct"] += (logits.argmax(-1) == targets).sum()
    sums[f"{head}_count"] += targets.numel()


def accumulate_masked_lm(sums: dict[str, torch.Tensor], labels: torch.Tensor, mlm_logits: torch.Tensor) -> None:
    """Adds the masked LM's sums over every predicted token (`labels` not -100) to `sums`."""
    predicted = labels != IGNORE_INDEX
    accumulate_classification(sums, "mlm", mlm_logits[predicted], labels[predicted])


def masked_lm_metrics(totals: dict[str, float]) -> dict[str, float]:
    """mlm_loss, mlm_accuracy and perplexity (exp of the MLM loss) from the sums of `accumulate_masked_lm`
    (none when nothing was predicted)."""
    if not totals["mlm_count"]:
        return {}
    loss = totals["mlm_loss"] / totals["mlm_count"]
    return {
        "mlm_loss": loss,
        "mlm_accuracy": totals["mlm_correct"] / totals["mlm_count"],
        "perplexity": math.exp(min(loss, 50.0)),
    }


def zero_sums(names: list[str], device: torch.device) -> dict[str, torch.Tensor]:
    return {name: torch.zeros((), dtype=torch.float64, device=device) for name in names}
