"""The configuration of a relation classifier over any encoder: the encoder's own config, kept whole as a
sub-config, plus the classifier's settings and the relation task's (labels, negative label, scorer).

A model type of its own keeps the head apart from the encoder's: `AutoModelForSequenceClassification` maps a BERT,
RoBERTa or spanroberta config to that family's [CLS] classifier, and this config to `EncoderForRelationClassification`.

This file is copied next to every saved checkpoint (see `auto_map`); it imports only spanroberta's configuration
files, so that a relation classifier over a spanroberta encoder loads with `trust_remote_code=True` where
spanroberta is not installed.
"""

from transformers import AutoConfig, PretrainedConfig
from transformers.configuration_utils import SubConfigSpec
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

from .configuration_span_albert import SpanAlbertConfig
from .configuration_spanroberta import SpanRobertaConfig

AUTO_MAP = {
    "AutoConfig": "configuration_relation.RelationClassifierConfig",
    "AutoModelForSequenceClassification": "modeling_relation.EncoderForRelationClassification",
}

# The encoder may be one of spanroberta's own; where spanroberta is not installed (remote code), its config
# classes come from the files shipped beside this one.
for _config_class in (SpanRobertaConfig, SpanAlbertConfig):
    if _config_class.model_type not in CONFIG_MAPPING:
        AutoConfig.register(_config_class.model_type, _config_class)


class RelationClassifierConfig(PretrainedConfig):
    r"""
    Configuration of `EncoderForRelationClassification`: relation classification from the encoder's hidden states
    at the subject's and the object's start markers (Zhou and Chen 2021, "An Improved Baseline for Sentence-level
    Relation Extraction", section 3).

    Args:
        encoder (`PretrainedConfig` or `dict`):
            The encoder's config (BERT, RoBERTa, spanroberta, ...), as `AutoConfig` reads it.
        classifier_dropout (`float`, *optional*):
            Dropout before the classifier's output layer; the encoder's `hidden_dropout_prob` (else 0.1) if unset.
        relation_encoding (`str`, defaults to `"typed_entity_markers"`):
            How run_relation.py encoded the inputs this model was trained on.
        negative_label (`str`, *optional*), relation_scorer (`str`, *optional*):
            The label meaning "no relation" and the official scorer of the task ("tacred" or "semeval").
    """

    model_type = "spanroberta-relation"
    sub_configs_defaults = {"encoder": SubConfigSpec(config_class=AutoConfig, model_type="bert")}

    encoder: PretrainedConfig | dict | None = None
    classifier_dropout: float | None = None
    relation_encoding: str = "typed_entity_markers"
    negative_label: str | None = None
    relation_scorer: str | None = None

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        if self.classifier_dropout is None:
            self.classifier_dropout = getattr(self.encoder, "hidden_dropout_prob", None) or 0.1
        # The hidden size and initialiser scale are the encoder's (the Trainer and init read them here).
        self.hidden_size = self.encoder.hidden_size
        self.initializer_range = getattr(self.encoder, "initializer_range", 0.02)
        self.auto_map = {**AUTO_MAP, **(getattr(self, "auto_map", None) or {})}


__all__ = ["RelationClassifierConfig"]
