"""Relation classification from the entity start markers, over any encoder (Zhou and Chen 2021, "An Improved
Baseline for Sentence-level Relation Extraction", section 3).

The input marks each entity with its type in punctuation and keeps its words ("typed entity marker (punct)":
`@ * person * Bill Gates @ founded # ^ organization ^ Microsoft #`); the relation is classified from the
concatenated last hidden states at the two start markers (`@` and `#`), through the paper's head: a linear layer
to the hidden size, ReLU, dropout, and a linear layer to the labels. The markers are ordinary punctuation, which may
also occur in the text, so the collator gives their positions (`entity_positions`, [batch, 2]) rather than the model
searching for them.

The encoder is whatever `AutoModel` builds from `config.encoder` (BERT, RoBERTa, spanroberta, ALBERT, ELECTRA, ...),
without its pooler, which this head does not read. This file is copied next to every saved checkpoint with those it
imports (spanroberta's own encoders among them, so that one over a spanroberta encoder loads with
`trust_remote_code=True` where spanroberta is not installed).
"""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput
from transformers.models.auto.modeling_auto import MODEL_MAPPING

from .configuration_relation import RelationClassifierConfig
from .configuration_span_albert import SpanAlbertConfig
from .configuration_spanroberta import SpanRobertaConfig, returns_mean_loss
from .modeling_span_albert import SpanAlbertModel
from .modeling_spanroberta import SpanRobertaModel

# spanroberta's own encoders, by model type: where spanroberta is not installed, AutoModel does not know them, and
# their config classes (loaded with the checkpoint's code) are not the classes these files import.
OWN_ENCODERS = {SpanRobertaConfig.model_type: SpanRobertaModel, SpanAlbertConfig.model_type: SpanAlbertModel}


class EntityStartClassifier(nn.Module):
    """Zhou and Chen's head: [h_subject; h_object] -> Linear(2H, H) -> ReLU -> Dropout -> Linear(H, labels)."""

    def __init__(self, hidden_size: int, num_labels: int, dropout: float):
        super().__init__()
        self.dense = nn.Linear(2 * hidden_size, hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.out_proj = nn.Linear(hidden_size, num_labels)

    def forward(self, subject_states: torch.Tensor, object_states: torch.Tensor) -> torch.Tensor:
        hidden = F.relu(self.dense(torch.cat([subject_states, object_states], dim=-1)))
        return self.out_proj(self.dropout(hidden))


@returns_mean_loss
class EncoderForRelationClassification(PreTrainedModel):
    """An encoder and `EntityStartClassifier` on its hidden states at `entity_positions` (subject, object)."""

    config_class = RelationClassifierConfig
    config: RelationClassifierConfig
    base_model_prefix = "encoder"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_flex_attn = True

    def __init__(self, config: RelationClassifierConfig):
        super().__init__(config)
        # The encoder's class, built directly: through AutoModel.from_config, the auto_map that a spanroberta
        # encoder's config carries would ask for trust_remote_code a second time.
        encoder_class = OWN_ENCODERS.get(config.encoder.model_type) or MODEL_MAPPING[type(config.encoder)]
        self.encoder = encoder_class._from_config(config.encoder)
        drop_pooler(self.encoder)
        self.classifier = EntityStartClassifier(config.encoder.hidden_size, config.num_labels,
                                                config.classifier_dropout)  # fmt: skip
        self._encoder_arguments = frozenset(inspect.signature(self.encoder.forward).parameters)
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.encoder.get_input_embeddings()

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.encoder.set_input_embeddings(value)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        entity_positions: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs,
    ) -> SequenceClassifierOutput:
        r"""
        entity_positions (`torch.LongTensor` of shape `(batch_size, 2)`):
            The positions of the subject's and the object's start markers in each row.
        labels (`torch.LongTensor` of shape `(batch_size,)`, *optional*):
            The relation ids; the loss is the mean cross-entropy over the batch.
        """
        if entity_positions is None:
            raise ValueError("EncoderForRelationClassification needs entity_positions ([batch, 2]: the subject's and "
                             "the object's start markers), as run_relation.py's encoding gives them.")  # fmt: skip
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids,
                  "inputs_embeds": inputs_embeds}  # fmt: skip
        inputs = {name: value for name, value in inputs.items()
                  if value is not None and name in self._encoder_arguments}  # fmt: skip
        states = self.encoder(**inputs, **kwargs, return_dict=True).last_hidden_state
        rows = torch.arange(states.shape[0], device=states.device)
        logits = self.classifier(states[rows, entity_positions[:, 0]], states[rows, entity_positions[:, 1]])
        loss = F.cross_entropy(logits.view(-1, self.config.num_labels), labels.view(-1)) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits)


def drop_pooler(encoder: nn.Module) -> None:
    """Removes the [CLS] pooler of an encoder that has one (BERT, RoBERTa, ALBERT): nothing reads it here, and a
    module without gradients would stop DistributedDataParallel (unused parameters)."""
    if getattr(encoder, "pooler", None) is not None:
        encoder.pooler = None


# Registering marks the classes as custom code, so save_pretrained copies this file and those it imports next to
# the weights; the config's auto_map points the Auto classes at them.
RelationClassifierConfig.register_for_auto_class()
EncoderForRelationClassification.register_for_auto_class("AutoModelForSequenceClassification")

__all__ = ["EncoderForRelationClassification", "EntityStartClassifier", "drop_pooler"]
