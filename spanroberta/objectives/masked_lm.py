"""Masked language modelling with SpanBERT's heads: MLM and the span boundary objective (SBO) at the prediction
slots, and optionally BERT's NSP or ALBERT's SOP, on RoBERTa's encoder (`SpanRobertaForPreTraining`) or ALBERT's
(`SpanAlbertForPreTraining`), or continuing a stock BERT, DistilBERT, ModernBERT or DeBERTa-v2/v3 checkpoint in
its own class (`models.modeling_any_encoder`; which path a checkpoint takes, and the check that all its weights
loaded, are `objectives.checkpoint_loading`'s). The spanbert, roberta, bert and albert recipes train this objective."""

from __future__ import annotations

from typing import Any

import torch
from transformers import (
    AutoModelForPreTraining,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from ..errors import UserInputError
from ..hub import hub_kwargs
from ..models.configuration_span_albert import SpanAlbertConfig
from ..models.configuration_spanroberta import IGNORE_INDEX, SENTENCE_LABELS, SpanRobertaConfig, get_model_size
from ..models.modeling_any_encoder import ENCODER_FAMILIES
from ..models.vocabulary import pad_vocabulary, padded_vocab_size
from .base import (
    ObjectiveSettings,
    PretrainingObjective,
    ResolvedRecipe,
    accumulate_classification,
    accumulate_masked_lm,
    masked_lm_metrics,
    register_objective,
    zero_sums,
)
from .checkpoint_loading import any_encoder_config, checkpoint_encoder, load_any_encoder, load_checked
from .recipes import Recipe

# The config of each encoder (recipes.ENCODERS); AutoModelForPreTraining maps it to its pretraining model.
ENCODER_CONFIGS = {"roberta": SpanRobertaConfig, "albert": SpanAlbertConfig}
# ALBERT's encoder settings (SpanAlbertConfig's defaults are ALBERT-base's: E = 128, all layers shared).
ALBERT_ENCODER_SETTINGS = ("embedding_size", "cross_layer_sharing")

_ENCODER_NOTES = {
    "spanroberta": "The encoder is RoBERTa's: `RobertaModel.from_pretrained` loads it.",
    "spanalbert": "The encoder is ALBERT's: with every layer shared (ALBERT's scheme) `AlbertModel.from_pretrained` "
    "loads it.",
}


MASKED_LM_RECIPES = {
    # SpanBERT section 3: span masking + SBO, single-sequence training without NSP (section 3.3).
    "spanbert": Recipe(
        "span masking + span boundary objective, no NSP, doc-sentences (SpanBERT)",
        masking="span",
        sbo=True,
        input_format="doc-sentences",
    ),
    # RoBERTa section 4: dynamic token masking (4.1), full-sentences without NSP (4.2): the defaults of Recipe.
    "roberta": Recipe("dynamic token masking, full-sentences, no NSP, no SBO (RoBERTa)"),
    # BERT as RoBERTa re-implements it (RoBERTa sections 4.1-4.2): static masking, segment pairs with NSP.
    "bert": Recipe(
        "static token masking (10 duplicates), segment-pair + NSP (BERT)",
        sentence_objective="nsp",
        input_format="segment-pair",
        static_masking=True,
    ),
    # ALBERT (Lan et al. 2019), base: factorised embeddings E = 128 and every layer shared (section 3.1, the
    # SpanAlbertConfig defaults), sentence-order prediction on segment pairs (3.1), n-gram masking (4.1), blocks of
    # 512 and a 30,000-id SentencePiece vocabulary (4.1). Optimiser: transformers offers no LAMB, so the
    # RoBERTa AdamW defaults stay (docs/pretraining.md).
    "albert": Recipe(
        "n-gram masking, segment-pair + SOP, ALBERT encoder (E = 128, all layers shared) (ALBERT)",
        masking="ngram",
        sentence_objective="sop",
        input_format="segment-pair",
        encoder="albert",
        tokenizer="unigram",
        flag_defaults=(("tokenizer_vocab_size", 30000), ("max_seq_length", 512)),
    ),
}


@register_objective("masked_lm", MASKED_LM_RECIPES)
class MaskedLanguageModeling(PretrainingObjective):
    def build_config(
        self, model_args: ObjectiveSettings, recipe: ResolvedRecipe, tokenizer: PreTrainedTokenizerBase
    ) -> PretrainedConfig:
        """The encoder's config: the checkpoint's (a RoBERTa or ALBERT checkpoint's becomes a spanroberta or
        SpanALBERT one: its encoder and MLM head load, the SBO head and a sentence head it lacks start fresh),
        else the recipe's encoder at --model_size."""
        head_settings = {
            "use_sbo": recipe.sbo,
            "sbo_loss_weight": model_args.sbo_loss_weight,
            "sentence_objective": recipe.sentence_objective,
        }
        encoder_settings = {
            name: getattr(model_args, name) for name in ALBERT_ENCODER_SETTINGS if getattr(model_args, name) is not None
        }
        source = model_args.config_name or model_args.model_name_or_path
        encoder = checkpoint_encoder(source, model_args, encoder_settings) if source else None
        if encoder == "any":
            # BERT, DistilBERT, ModernBERT, DeBERTa-v2/v3: the stock config, continued in the stock class.
            return any_encoder_config(source, model_args, head_settings)
        if source:
            config_class = ENCODER_CONFIGS[encoder]
            # A RoBERTa, XLM-R, CamemBERT or ALBERT checkpoint's config is read as spanroberta's on purpose
            # (checkpoint_encoder): from_dict, since from_pretrained would warn that the model types differ.
            config_dict, _ = config_class.get_config_dict(source, **hub_kwargs(model_args))
            config = config_class.from_dict(config_dict, **head_settings)
            _check_checkpoint_encoder_settings(config, encoder_settings)
            return config
        return ENCODER_CONFIGS[recipe.encoder](
            **get_model_size(model_args.model_size),
            vocab_size=padded_vocab_size(len(tokenizer), model_args.pad_vocab_to_multiple_of),
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.cls_token_id,
            eos_token_id=tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id,
            # BERT-style tokenizers mark a pair's second segment with token type 1; RoBERTa's have one type.
            type_vocab_size=2 if "token_type_ids" in tokenizer.model_input_names else 1,
            **head_settings,
            **encoder_settings,  # given only for an ALBERT encoder (resolve_recipe)
        )

    def build_model(
        self, model_args: ObjectiveSettings, config: PretrainedConfig, tokenizer: PreTrainedTokenizerBase
    ) -> PreTrainedModel:
        """SpanRobertaForPreTraining, SpanAlbertForPreTraining or a stock class with the SBO head: from the
        checkpoint (refused unless every weight but the objective's new heads loaded), else freshly initialised."""
        if type(config).model_type in ENCODER_FAMILIES:
            model = load_any_encoder(model_args, config)
        elif model_args.model_name_or_path:
            model = load_checked(AutoModelForPreTraining, model_args.model_name_or_path, config, model_args)
        else:
            model = AutoModelForPreTraining.from_config(config)
        pad_vocabulary(model, len(tokenizer), model_args.pad_vocab_to_multiple_of)
        return model

    def collator_settings(self, recipe: ResolvedRecipe, config: PretrainedConfig) -> dict[str, Any]:
        return {"return_sbo_targets": recipe.sbo, "max_span_targets": config.max_span_targets}

    def evaluation_sums(self, config: PretrainedConfig, device: torch.device) -> dict[str, torch.Tensor]:
        names = [f"{head}_{sum_}" for head in ("mlm", "sbo", "sentence") for sum_ in ("loss", "correct", "count")]
        return zero_sums(names, device)

    def accumulate(
        self, sums: dict[str, torch.Tensor], inputs: dict[str, torch.Tensor], outputs: Any, config: PretrainedConfig
    ) -> None:
        """MLM and SBO over every predicted token, the sentence head over every labelled pair."""
        # The targets as the heads read them, in slots whatever the input's label layout.
        labels = outputs.mlm_labels
        accumulate_masked_lm(sums, labels, outputs.mlm_logits)
        if outputs.sbo_logits is not None:
            is_target = outputs.sbo_relative_positions != IGNORE_INDEX
            accumulate_classification(sums, "sbo", outputs.sbo_logits[is_target], labels[is_target])
        sentence_label_name = SENTENCE_LABELS.get(config.sentence_objective)
        if sentence_label_name in inputs:
            sentence_labels = inputs[sentence_label_name].view(-1)
            labelled = sentence_labels != IGNORE_INDEX
            accumulate_classification(sums, "sentence", outputs.sentence_logits[labelled], sentence_labels[labelled])

    def evaluation_metrics(self, totals: dict[str, float], model: PreTrainedModel) -> dict[str, float]:
        """loss, mlm_loss, mlm_accuracy, perplexity (exp of the MLM loss), sbo_ and nsp_/sop_ loss and accuracy;
        `loss` sums the heads as training does."""
        metrics = masked_lm_metrics(totals)
        if totals["mlm_count"]:
            metrics["loss"] = metrics["mlm_loss"]
        if totals["sbo_count"]:
            metrics["sbo_loss"] = totals["sbo_loss"] / totals["sbo_count"]
            metrics["sbo_accuracy"] = totals["sbo_correct"] / totals["sbo_count"]
            metrics["loss"] += model.config.sbo_loss_weight * metrics["sbo_loss"]
        if totals["sentence_count"]:
            head = model.config.sentence_objective
            metrics[f"{head}_loss"] = totals["sentence_loss"] / totals["sentence_count"]
            metrics[f"{head}_accuracy"] = totals["sentence_correct"] / totals["sentence_count"]
            metrics["loss"] += metrics[f"{head}_loss"]
        return metrics

    def load_checkpoint(self, model: PreTrainedModel, folder: str) -> bool:
        # A stock class's checkpoint holds its SBO head in a file of its own (modeling_any_encoder).
        load_saved = getattr(model, "load_saved", None)
        if load_saved is None:
            return False
        load_saved(folder)
        return True

    def needs_spanroberta(self, config: PretrainedConfig) -> bool:
        return type(config).model_type not in ENCODER_FAMILIES

    def model_card_usage(self, config: PretrainedConfig) -> str:
        if not self.needs_spanroberta(config):
            return (
                f"The model is transformers' own `{(config.architectures or ['stock class'])[0]}` (no spanroberta "
                "needed to load it); the SBO head is in\n`sbo_head.safetensors`, which a further "
                "`run_pretraining.py --model_name_or_path` continuation loads back."
            )
        return (
            f"{_ENCODER_NOTES[type(config).model_type]} With spanroberta installed, `import spanroberta` and use the "
            "Auto classes;\nwithout it, pass `trust_remote_code=True`."
        )


def _check_checkpoint_encoder_settings(config: PretrainedConfig, encoder_settings: dict) -> None:
    """A checkpoint's encoder keeps its shape: --embedding_size and --cross_layer_sharing may only repeat it."""
    for name, value in encoder_settings.items():
        if getattr(config, name) != value:
            raise UserInputError(
                f"--{name} {value} differs from the checkpoint's ({getattr(config, name)}): continued pretraining "
                "keeps the checkpoint's encoder. Leave the flag out."
            )
