"""ELECTRA's replaced token detection (Clark et al. 2020): a generator fills the masked slots, the discriminator
finds the replaced tokens (`ElectraForReplacedTokenDetection`). This module is everything `--recipe electra`
changes in a pretraining run: the paper's size-dependent defaults, the model, the evaluation (the discriminator's
loss, accuracy, precision and recall), the generator folder saved beside the discriminator, the model card. The
data, masking, trainer and checkpointing are the toolkit's own."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from transformers import ElectraConfig, PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase, Trainer

from ..errors import UserInputError
from ..hub import hub_kwargs
from ..models.modeling_electra_pretraining import (
    ELECTRA_SIZES,
    GENERATOR_FOLDER,
    ElectraForReplacedTokenDetection,
    generator_config,
)
from ..models.vocabulary import mask_padded_ids, padded_vocab_size
from .base import (
    ObjectiveSettings,
    PretrainingObjective,
    ResolvedRecipe,
    accumulate_masked_lm,
    masked_lm_metrics,
    register_objective,
    zero_sums,
)
from .checkpoint_loading import check_loading_report
from .recipes import Recipe

# Sums over the real tokens of the evaluation set; the generator's MLM sums are the masked-LM objective's.
DETECTION_SUMS = ("rtd_loss", "rtd_correct", "rtd_count", "rtd_true_positive", "rtd_predicted", "rtd_replaced")


ELECTRA_RECIPES = {
    # ELECTRA (Clark et al. 2020) sections 3.1-3.2 and appendix A: token masking at 15%, masked tokens 85% [MASK]
    # and 15% unchanged (no random tokens: the generator provides them), no NSP.
    "electra": Recipe(
        "replaced token detection: generator MLM + 50 x discriminator loss (ELECTRA)",
        # ELECTRA's optimiser (appendix Table 6): Adam without bias correction (BERT's and ELECTRA's
        # AdamWeightDecayOptimizer), beta2 0.999, epsilon 1e-6, weight decay 0.01, 10,000 warm-up steps (1% of
        # its 1M), linear decay, gradient clipping at 1 (the Trainer's default). A run of under 10,000 steps warms
        # up over a tenth of them, and then corrects Adam's bias (run_length.fit_to_run_length: the uncorrected
        # first updates need 1,000 warm-up steps). The size-dependent settings: ELECTRA_SIZES.
        flag_defaults=(
            ("mask_replace_prob", 0.85),
            ("random_replace_prob", 0.0),
            ("adam_bias_correction", False),
            ("adam_beta2", 0.999),
            ("adam_epsilon", 1e-6),
            ("weight_decay", 0.01),
            ("warmup_steps", 10_000),
        ),
    ),
}


@register_objective("replaced_token_detection", ELECTRA_RECIPES)
class ReplacedTokenDetection(PretrainingObjective):
    def flag_defaults(self, model_args: ObjectiveSettings, batch_per_step: int) -> dict[str, Any]:
        """ELECTRA's Table 6 for the model size: mask rate, learning rate, and the batch size reached through
        gradient accumulation over `batch_per_step` (the other optimiser settings are the recipe's
        `flag_defaults`)."""
        size = ELECTRA_SIZES[model_args.model_size]
        defaults: dict[str, Any] = {"mlm_probability": size.mask_rate}
        if size.learning_rate is not None:
            defaults["learning_rate"] = size.learning_rate
        if size.batch_size is not None:
            defaults["gradient_accumulation_steps"] = max(1, math.ceil(size.batch_size / batch_per_step))
        return defaults

    def check(self, recipe: ResolvedRecipe, model_args: ObjectiveSettings) -> None:
        if recipe.sbo or recipe.sentence_objective != "none" or model_args.cross_layer_sharing is not None:
            raise UserInputError(
                "--recipe electra trains an ELECTRA generator and discriminator, without SBO, sentence-level heads "
                "or ALBERT's cross-layer sharing; drop --sbo, --sentence_objective and --cross_layer_sharing."
            )
        discriminator = model_args.model_name_or_path
        if discriminator and not model_args.generator_name_or_path and not _has_generator_folder(discriminator):
            raise UserInputError(
                f"--recipe electra continues a discriminator and its generator, and {discriminator} has no "
                f"{GENERATOR_FOLDER}/ folder. Name the generator with --generator_name_or_path (for Google's "
                "google/electra-base-discriminator: google/electra-base-generator)."
            )

    def build_config(
        self, model_args: ObjectiveSettings, recipe: ResolvedRecipe, tokenizer: PreTrainedTokenizerBase
    ) -> ElectraConfig:
        """The discriminator's config (with `rtd_loss_weight` and `generator_size`): Google's from
        --model_name_or_path, else ELECTRA's shape for --model_size."""
        if model_args.model_name_or_path:
            config = ElectraConfig.from_pretrained(model_args.model_name_or_path, **hub_kwargs(model_args))
        else:
            config = ElectraConfig(
                **ELECTRA_SIZES[model_args.model_size].shape,
                vocab_size=padded_vocab_size(len(tokenizer), model_args.pad_vocab_to_multiple_of),
                pad_token_id=tokenizer.pad_token_id,
                type_vocab_size=2 if "token_type_ids" in tokenizer.model_input_names else 1,
            )
            if model_args.embedding_size is not None:
                config.embedding_size = model_args.embedding_size
            config.generator_size = model_args.generator_size or ELECTRA_SIZES[model_args.model_size].generator_size
        config.rtd_loss_weight = model_args.rtd_loss_weight
        return config

    def build_model(
        self, model_args: ObjectiveSettings, config: PretrainedConfig, tokenizer: PreTrainedTokenizerBase
    ) -> ElectraForReplacedTokenDetection:
        """From scratch, or continuing from an ELECTRA discriminator and its generator (--generator_name_or_path,
        else the discriminator's generator/ folder). The generator never samples an id past the tokenizer's
        (`mask_padded_ids`); a checkpoint's vocabulary is not resized, since both parts share it."""
        if not model_args.model_name_or_path:
            model = ElectraForReplacedTokenDetection(config, generator_config(config, config.generator_size))
        else:
            model = self._continued_model(model_args, config)
        mask_padded_ids(model, len(tokenizer))
        return model

    @staticmethod
    def _continued_model(model_args: ObjectiveSettings, config: ElectraConfig) -> ElectraForReplacedTokenDetection:
        return ElectraForReplacedTokenDetection.from_pretrained_parts(
            model_args.model_name_or_path,
            model_args.generator_name_or_path or str(Path(model_args.model_name_or_path) / GENERATOR_FOLDER),
            rtd_loss_weight=model_args.rtd_loss_weight,
            config=config,
            # Every weight of both parts must load: nothing trains from silently random weights.
            check_loading=lambda path, report: check_loading_report(path, "electra", report, fresh_heads=()),
            **hub_kwargs(model_args),
        )

    def collator_settings(self, recipe: ResolvedRecipe, config: PretrainedConfig) -> dict[str, Any]:
        # The generator predicts the masked tokens; there is no SBO head.
        return {"return_sbo_targets": False}

    def evaluation_sums(self, config: PretrainedConfig, device: torch.device) -> dict[str, torch.Tensor]:
        return zero_sums(["mlm_loss", "mlm_correct", "mlm_count", *DETECTION_SUMS], device)

    def accumulate(
        self, sums: dict[str, torch.Tensor], inputs: dict[str, torch.Tensor], outputs: Any, config: PretrainedConfig
    ) -> None:
        """The generator's MLM over the predicted tokens, the discriminator over every real token."""
        accumulate_masked_lm(sums, inputs["labels"], outputs.mlm_logits)
        mask = inputs.get("attention_mask")
        real = torch.ones_like(outputs.replaced) if mask is None else mask.bool()
        logits, replaced = outputs.discriminator_logits.float()[real], outputs.replaced[real]
        predicted_replaced = logits > 0
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, replaced.float(), reduction="sum")
        sums["rtd_loss"] += loss.double()
        sums["rtd_correct"] += (predicted_replaced == replaced).sum()
        sums["rtd_count"] += replaced.numel()
        sums["rtd_true_positive"] += (predicted_replaced & replaced).sum()
        sums["rtd_predicted"] += predicted_replaced.sum()
        sums["rtd_replaced"] += replaced.sum()

    def evaluation_metrics(self, totals: dict[str, float], model: PreTrainedModel) -> dict[str, float]:
        """The generator's MLM loss, accuracy and perplexity; the discriminator's loss and accuracy over real
        tokens, its precision and recall on replaced tokens, and the share of replaced tokens (1 minus it is the
        accuracy of always answering "original"); `loss` = MLM + lambda x discriminator loss, as in training."""
        metrics = masked_lm_metrics(totals)
        if totals["rtd_count"]:
            metrics.update({
                "discriminator_loss": totals["rtd_loss"] / totals["rtd_count"],
                "discriminator_accuracy": totals["rtd_correct"] / totals["rtd_count"],
                "discriminator_precision": totals["rtd_true_positive"] / max(totals["rtd_predicted"], 1),
                "discriminator_recall": totals["rtd_true_positive"] / max(totals["rtd_replaced"], 1),
                "replaced_share": totals["rtd_replaced"] / totals["rtd_count"],
            })  # fmt: skip
            metrics["loss"] = metrics.get("mlm_loss", 0.0) + model.rtd_loss_weight * metrics["discriminator_loss"]
        return metrics

    def load_checkpoint(self, model: PreTrainedModel, folder: str) -> bool:
        # Saved as two checkpoints, the discriminator's and the generator's (ElectraForReplacedTokenDetection).
        model.load_saved(folder)
        return True

    def save_beside_model(self, trainer: Trainer, tokenizer: PreTrainedTokenizerBase) -> None:
        """The generator folder gets the tokenizer too, so that pipeline("fill-mask") loads it alone."""
        tokenizer.save_pretrained(Path(trainer.args.output_dir) / GENERATOR_FOLDER)

    def masked_lm_folder(self, output_dir: str) -> str:
        return str(Path(output_dir) / GENERATOR_FOLDER)

    def model_card_usage(self, config: PretrainedConfig) -> str:
        return (
            "ELECTRA (replaced token detection): this folder is the discriminator (`ElectraForPreTraining`; fine-tune "
            "it\nwith `ElectraForSequenceClassification`, `ElectraForQuestionAnswering`, ...), `generator/` the "
            "generator\n(`ElectraForMaskedLM`, for `pipeline(\"fill-mask\")`)."
        )


def _has_generator_folder(discriminator: str) -> bool:
    """Whether a local discriminator folder holds its generator (a Hub id's is looked up when it loads)."""
    folder = Path(discriminator)
    return not folder.is_dir() or (folder / GENERATOR_FOLDER / "config.json").is_file()
