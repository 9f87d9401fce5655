"""SpanALBERT configuration: ALBERT's encoder (factorised embeddings, cross-layer sharing) plus the settings of
spanroberta's pretraining heads.

This file is copied next to every saved checkpoint (see `auto_map`); it imports only the configuration file it
shares the heads' settings and checks with.
"""

from transformers import AlbertConfig

from .configuration_spanroberta import SpanHeadSettings, check_head_settings

# ALBERT section 3.1 and Table 4: share every layer's parameters, or only the feed-forward networks, or only the
# attention, or nothing. "all" is ALBERT's own scheme.
CROSS_LAYER_SHARING = ("all", "none", "attention", "ffn")

AUTO_MAP = {
    "AutoConfig": "configuration_span_albert.SpanAlbertConfig",
    "AutoModel": "modeling_span_albert.SpanAlbertModel",
    "AutoModelForPreTraining": "modeling_span_albert.SpanAlbertForPreTraining",
    "AutoModelForMaskedLM": "modeling_span_albert.SpanAlbertForMaskedLM",
    "AutoModelForSequenceClassification": "modeling_span_albert.SpanAlbertForSequenceClassification",
    "AutoModelForQuestionAnswering": "modeling_span_albert.SpanAlbertForQuestionAnswering",
    "AutoModelForMultipleChoice": "modeling_span_albert.SpanAlbertForMultipleChoice",
    "AutoModelForTokenClassification": "modeling_span_albert.SpanAlbertForTokenClassification",
}


class SpanAlbertConfig(SpanHeadSettings, AlbertConfig):
    r"""
    Configuration of a SpanALBERT model: an ALBERT encoder (Lan et al. 2019) under spanroberta's pretraining heads.
    The defaults are ALBERT-base's (v2): 12 layers, hidden 768, 12 heads, FFN 3072, embeddings E = 128, a 30,000
    vocabulary, every layer shared.

    Args:
        cross_layer_sharing (`str`, *optional*):
            Which parameters the layers share (ALBERT section 3.1 and Table 4): `"all"` (every layer is the first
            layer: ALBERT's scheme, `num_hidden_groups=1`), `"none"`, `"attention"` (one attention block for every
            layer, a feed-forward network each) or `"ffn"` (one feed-forward network for every layer, an attention
            block each). Unset, it is read from `num_hidden_groups` (1: "all", one per layer: "none"), so a stock
            ALBERT config converts. It sets `num_hidden_groups`: one group for "all", one per layer otherwise.
        use_sbo, max_span_targets, sbo_position_embedding_size, sbo_loss_weight, sentence_objective,
        efficient_pretraining, answerability_head:
            As in `SpanRobertaConfig`. The SBO head's decoder is tied to the E-dimensional word embeddings, as the
            MLM head's is.

    Positions start at 0, as in BERT, not after the padding id as in RoBERTa (`first_position_id`).
    """

    model_type = "spanalbert"

    embedding_size: int = 128
    hidden_size: int = 768
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0

    cross_layer_sharing: str | None = None
    efficient_pretraining: bool = True
    answerability_head: bool = False

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        check_head_settings(self)
        if self.cross_layer_sharing is None:
            self.cross_layer_sharing = self._sharing_of_groups()
        self.resolve_layer_groups()
        self.auto_map = {**AUTO_MAP, **(getattr(self, "auto_map", None) or {})}

    def resolve_layer_groups(self) -> None:
        """Sets `num_hidden_groups` from `cross_layer_sharing` (again after a change of either, e.g. of the
        number of layers)."""
        if self.cross_layer_sharing not in CROSS_LAYER_SHARING:
            raise ValueError(
                f"cross_layer_sharing={self.cross_layer_sharing!r} is not one of {', '.join(CROSS_LAYER_SHARING)}."
            )
        if self.cross_layer_sharing in ("attention", "ffn") and not self.tie_word_embeddings:
            # transformers reads every `_tied_weights_keys` (the shared blocks' too) only with tied embeddings.
            raise ValueError(f"cross_layer_sharing={self.cross_layer_sharing!r} needs tie_word_embeddings=True.")
        self.num_hidden_groups = 1 if self.cross_layer_sharing == "all" else self.num_hidden_layers
        self.inner_group_num = 1

    def update_from_string(self, update_str: str) -> None:
        """As PreTrainedConfig's, then the layer groups again (`num_hidden_layers=6` keeps the sharing scheme)."""
        super().update_from_string(update_str)
        self.resolve_layer_groups()

    def _sharing_of_groups(self) -> str:
        if self.inner_group_num == 1 and self.num_hidden_groups == 1:
            return "all"
        if self.inner_group_num == 1 and self.num_hidden_groups == self.num_hidden_layers:
            return "none"
        raise ValueError(
            f"num_hidden_groups={self.num_hidden_groups} and inner_group_num={self.inner_group_num} over "
            f"{self.num_hidden_layers} layers is not one of spanroberta's sharing schemes "
            f"({', '.join(CROSS_LAYER_SHARING)}): use transformers' AlbertModel for it."
        )


__all__ = ["SpanAlbertConfig", "CROSS_LAYER_SHARING"]
