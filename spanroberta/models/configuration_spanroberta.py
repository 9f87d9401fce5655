"""SpanRoBERTa configuration: RoBERTa's encoder settings plus those of the pretraining heads; the encoder shapes
that `--model_size` names; and the conventions every spanroberta model shares with transformers, stated once (the
label that no loss reads, how a model's loss meets the Trainer's `num_items_in_batch`, how a model file registers
its classes for `auto_map`).

This file is copied next to every saved checkpoint (see `auto_map`), so it imports nothing from spanroberta.
"""

from dataclasses import dataclass
from typing import Any, TypeVar

from transformers import PretrainedConfig, RobertaConfig

# The target that no loss reads (unused prediction slots, unmasked tokens, unlabelled sequences): transformers'
# and PyTorch's `ignore_index` default.
IGNORE_INDEX = -100

# The loss-kwargs policy. transformers 5's Trainer reads `model.accepts_loss_kwargs` (unset, it guesses yes from a
# forward that takes **kwargs) to decide who normalises the loss under gradient accumulation:
# - True: the model divides its loss by `num_items_in_batch`, the Trainer's count of targets in the whole
#   accumulated batch, and the Trainer does not divide it again by the accumulation steps. spanroberta's
#   pretraining models do this, with their own counts per head (`loss_normalisers`), which makes accumulation exact.
# - False: the model returns a plain mean over its batch and the Trainer divides it by the accumulation steps.
#   The task heads are transformers' own forwards, which take **kwargs only to pass them down; without declaring
#   False, their mean would be inflated by the accumulation factor.
_Target = TypeVar("_Target")


def normalises_loss_by_item_counts(target: _Target) -> _Target:
    """Declares (on a model class or instance) that its loss is divided by the Trainer's `num_items_in_batch`."""
    target.accepts_loss_kwargs = True
    return target


def returns_mean_loss(target: _Target) -> _Target:
    """Declares (on a model class or instance) that its loss is a plain mean over its batch, which the Trainer
    divides by the gradient-accumulation steps."""
    target.accepts_loss_kwargs = False
    return target


def register_for_auto_classes(auto_map: dict[str, str], namespace: dict[str, Any]) -> None:
    """Marks the config and every head that `auto_map` names (Auto class -> "module.Class", each class found in
    `namespace`, the modelling file's globals) as custom code: save_pretrained then copies their files next to the
    weights, and the saved config's auto_map points each Auto class at them."""
    for auto_class, class_path in auto_map.items():
        namespace[class_path.rpartition(".")[2]].register_for_auto_class(auto_class)


# Encoder shapes. base and large are BERT's / RoBERTa's (RoBERTa appendix, Table 9); tiny is for demos and tests.
MODEL_SIZES: dict[str, dict[str, int]] = {
    "tiny": {"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 2, "intermediate_size": 512},
    "small": {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024},
    "base": {"num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072},
    "large": {"num_hidden_layers": 24, "hidden_size": 1024, "num_attention_heads": 16, "intermediate_size": 4096},
}


def get_model_size(name: str) -> dict[str, int]:
    if name not in MODEL_SIZES:
        raise ValueError(f"Unknown model size {name!r}; valid sizes: {', '.join(MODEL_SIZES)}.")
    return dict(MODEL_SIZES[name])


# The sentence-level objectives and the name of each one's label in a batch (and of the forward argument that takes
# it): BERT's next sentence prediction (0 when the second segment follows the first, 1 when it is random) and
# ALBERT's sentence order prediction (0 for the original order, 1 when swapped).
SENTENCE_LABELS = {"nsp": "next_sentence_label", "sop": "sentence_order_label"}
SENTENCE_OBJECTIVES = ("none", *SENTENCE_LABELS)

# Model types whose position ids start after the padding id (modeling_roberta's create_position_ids_from_input_ids).
_POSITIONS_AFTER_PADDING = {"roberta", "spanroberta", "xlm-roberta", "xlm-roberta-xl", "camembert",
                            "roberta-prelayernorm", "data2vec-text", "longformer"}  # fmt: skip

# Every head that a spanroberta checkpoint can be loaded into with `trust_remote_code=True` where
# spanroberta is not installed (how Hub users load it).
AUTO_MAP = {
    "AutoConfig": "configuration_spanroberta.SpanRobertaConfig",
    "AutoModel": "modeling_spanroberta.SpanRobertaModel",
    "AutoModelForPreTraining": "modeling_spanroberta.SpanRobertaForPreTraining",
    "AutoModelForMaskedLM": "modeling_spanroberta.SpanRobertaForMaskedLM",
    "AutoModelForSequenceClassification": "modeling_spanroberta.SpanRobertaForSequenceClassification",
    "AutoModelForQuestionAnswering": "modeling_spanroberta.SpanRobertaForQuestionAnswering",
    "AutoModelForMultipleChoice": "modeling_spanroberta.SpanRobertaForMultipleChoice",
    "AutoModelForTokenClassification": "modeling_spanroberta.SpanRobertaForTokenClassification",
}


@dataclass(repr=False, kw_only=True)
class SpanHeadSettings:
    """The settings of the pretraining heads (see `SpanRobertaConfig`), which every encoder's config carries:
    spanroberta's configs inherit them, and a continued stock encoder's config gets them set
    (`modeling_any_encoder.add_span_head_settings`). The defaults are SpanBERT's (section 3.2; 15 targets a span
    and 200-wide position embeddings in its released code)."""

    use_sbo: bool = True
    max_span_targets: int = 15
    sbo_position_embedding_size: int = 200
    sbo_loss_weight: float = 1.0
    sentence_objective: str = "none"


def check_head_settings(config) -> None:
    """Checks the pretraining heads' settings, which every encoder's config carries (RoBERTa's and ALBERT's)."""
    if config.sentence_objective not in SENTENCE_OBJECTIVES:
        raise ValueError(
            f"sentence_objective={config.sentence_objective!r} is not one of {', '.join(SENTENCE_OBJECTIVES)}."
        )
    if config.max_span_targets < 1:
        raise ValueError(f"max_span_targets must be at least 1, got {config.max_span_targets}.")


def first_position_id(config: PretrainedConfig) -> int:
    """The position id of a sequence's first token, for any transformers config: RoBERTa-style encoders number
    positions from the padding id + 1 (so max_position_embeddings - padding id - 1 positions are usable), BERT,
    ALBERT, ELECTRA and the others from 0. Packed rows restart their positions here at each sequence."""
    if config.model_type in _POSITIONS_AFTER_PADDING or isinstance(config, RobertaConfig):
        return (config.pad_token_id or 0) + 1
    return 0


class SpanRobertaConfig(SpanHeadSettings, RobertaConfig):
    r"""
    Configuration of a SpanRoBERTa model: a RoBERTa encoder (every encoder setting is RoBERTa's) plus the
    pretraining heads of SpanBERT (Joshi et al. 2019) and an optional sentence-level head.

    Args:
        use_sbo (`bool`, defaults to `True`):
            Whether `SpanRobertaForPreTraining` trains the span boundary objective (SpanBERT section 3.2).
        max_span_targets (`int`, defaults to 15):
            How many tokens of a masked span the SBO predicts; tokens further into a span are MLM targets only
            (SpanBERT's `max_pair_targets`). Also the number of relative-position embeddings of the SBO head.
        sbo_position_embedding_size (`int`, defaults to 200):
            Size of the SBO head's relative-position embeddings (SpanBERT's released code uses 200).
        sbo_loss_weight (`float`, defaults to 1.0):
            Weight of the SBO loss: loss = MLM + w * SBO (SpanBERT section 3.2 sums them with w = 1).
        sentence_objective (`str`, defaults to `"none"`):
            Sentence-level auxiliary head: `"none"` (RoBERTa and SpanBERT), `"nsp"` (BERT's next sentence
            prediction) or `"sop"` (ALBERT's sentence order prediction).
        efficient_pretraining (`bool`, defaults to `True`):
            Whether `SpanRobertaForPreTraining` takes its efficient paths where they apply (a last layer computed
            only where the heads read it, a fused decoder cross-entropy on CPU under autocast), each beside the
            reference it replaces. `False` runs the reference forward; both give the same losses and gradients (tested).
        answerability_head (`bool`, defaults to `False`):
            Whether `SpanRobertaForQuestionAnswering` adds RoBERTa's binary "is this question answerable"
            classifier for SQuAD v2.0 (RoBERTa section 5.2).

    The defaults of the encoder follow the released roberta-base checkpoint rather than `RobertaConfig`'s:
    one token type, layer-norm epsilon 1e-5 and 514 positions (RoBERTa offsets positions by the padding id + 1).
    """

    model_type = "spanroberta"

    type_vocab_size: int = 1
    layer_norm_eps: float = 1e-5
    max_position_embeddings: int = 514

    efficient_pretraining: bool = True
    answerability_head: bool = False

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        check_head_settings(self)
        # Saved with every checkpoint so that any Auto class finds its head with trust_remote_code=True.
        self.auto_map = {**AUTO_MAP, **(getattr(self, "auto_map", None) or {})}


__all__ = [
    "IGNORE_INDEX",
    "MODEL_SIZES",
    "SpanRobertaConfig",
    "SpanHeadSettings",
    "SENTENCE_LABELS",
    "SENTENCE_OBJECTIVES",
    "check_head_settings",
    "first_position_id",
    "get_model_size",
    "normalises_loss_by_item_counts",
    "register_for_auto_classes",
    "returns_mean_loss",
]
