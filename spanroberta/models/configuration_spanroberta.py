"""SpanRoBERTa configuration: RoBERTa's encoder settings plus those of the pretraining heads.

This file is copied next to every saved checkpoint (see `auto_map`), so it imports nothing from spanroberta.
"""

from dataclasses import dataclass

from transformers import PretrainedConfig, RobertaConfig

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
            Whether `SpanRobertaForPreTraining` takes the efficient paths of `modeling_efficient.py` where they
            apply (a last layer computed only where the heads read it, a fused decoder cross-entropy on CPU under
            autocast). `False` runs the reference forward; both give the same losses and gradients (tested).
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
    "SpanRobertaConfig",
    "SpanHeadSettings",
    "SENTENCE_LABELS",
    "SENTENCE_OBJECTIVES",
    "check_head_settings",
    "first_position_id",
]
