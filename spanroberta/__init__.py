"""spanroberta: SpanBERT objectives (span masking + span boundary objective) on the RoBERTa recipe.

Importing the package registers the config and every head with transformers' Auto classes, so
`AutoModelFor*.from_pretrained(<spanroberta checkpoint>)` works without `trust_remote_code`, and registers
the extractive `pipeline("question-answering")` that transformers 5 removed.
"""

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForMultipleChoice,
    AutoModelForPreTraining,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from .models.configuration_span_albert import SpanAlbertConfig
from .models.configuration_spanroberta import SpanRobertaConfig
from .models.configuration_coreference import CorefConfig
from .data.collator import DataCollatorForSpanMasking
from .models.modeling_coreference import CorefModel
from .models.modeling_electra_pretraining import ElectraForReplacedTokenDetection
from .models.modeling_spanroberta import (
    SpanRobertaForMaskedLM,
    SpanRobertaForMultipleChoice,
    SpanRobertaForPreTraining,
    SpanRobertaForQuestionAnswering,
    SpanRobertaForSequenceClassification,
    SpanRobertaForTokenClassification,
    SpanRobertaModel,
    SpanRobertaPreTrainedModel,
)
from .models.configuration_relation import RelationClassifierConfig
from .models.modeling_relation import EncoderForRelationClassification
from .models.pretraining_heads import SpanBoundaryHead, SpanRobertaForPreTrainingOutput
from .models.modeling_span_albert import (
    SpanAlbertForMaskedLM,
    SpanAlbertForMultipleChoice,
    SpanAlbertForPreTraining,
    SpanAlbertForQuestionAnswering,
    SpanAlbertForSequenceClassification,
    SpanAlbertForTokenClassification,
    SpanAlbertModel,
    SpanAlbertPreTrainedModel,
)
from .pipelines.question_answering import register_question_answering_pipeline

__version__ = "0.1.0"

AutoConfig.register(SpanRobertaConfig.model_type, SpanRobertaConfig, exist_ok=True)
for _auto_class, _model_class in (
    (AutoModel, SpanRobertaModel),
    (AutoModelForPreTraining, SpanRobertaForPreTraining),
    (AutoModelForMaskedLM, SpanRobertaForMaskedLM),
    (AutoModelForSequenceClassification, SpanRobertaForSequenceClassification),
    (AutoModelForQuestionAnswering, SpanRobertaForQuestionAnswering),
    (AutoModelForMultipleChoice, SpanRobertaForMultipleChoice),
    (AutoModelForTokenClassification, SpanRobertaForTokenClassification),
):
    _auto_class.register(SpanRobertaConfig, _model_class, exist_ok=True)

# The ALBERT encoder (factorised embeddings, cross-layer sharing) under the same heads.
AutoConfig.register(SpanAlbertConfig.model_type, SpanAlbertConfig, exist_ok=True)
for _auto_class, _model_class in (
    (AutoModel, SpanAlbertModel),
    (AutoModelForPreTraining, SpanAlbertForPreTraining),
    (AutoModelForMaskedLM, SpanAlbertForMaskedLM),
    (AutoModelForSequenceClassification, SpanAlbertForSequenceClassification),
    (AutoModelForQuestionAnswering, SpanAlbertForQuestionAnswering),
    (AutoModelForMultipleChoice, SpanAlbertForMultipleChoice),
    (AutoModelForTokenClassification, SpanAlbertForTokenClassification),
):
    _auto_class.register(SpanAlbertConfig, _model_class, exist_ok=True)

# End-to-end coreference over any encoder (run_coref.py).
AutoConfig.register(CorefConfig.model_type, CorefConfig, exist_ok=True)
AutoModel.register(CorefConfig, CorefModel, exist_ok=True)
# Relation classification from the entity start markers, over any encoder (run_relation.py).
AutoConfig.register(RelationClassifierConfig.model_type, RelationClassifierConfig, exist_ok=True)
AutoModelForSequenceClassification.register(RelationClassifierConfig, EncoderForRelationClassification, exist_ok=True)

# transformers 5 removed pipeline("question-answering"); importing spanroberta brings it back.
register_question_answering_pipeline()

__all__ = [
    "SpanRobertaConfig",
    "SpanRobertaPreTrainedModel",
    "SpanRobertaModel",
    "SpanBoundaryHead",
    "SpanRobertaForPreTraining",
    "SpanRobertaForPreTrainingOutput",
    "SpanRobertaForMaskedLM",
    "SpanRobertaForSequenceClassification",
    "SpanRobertaForQuestionAnswering",
    "SpanRobertaForMultipleChoice",
    "SpanRobertaForTokenClassification",
    "DataCollatorForSpanMasking",
    "ElectraForReplacedTokenDetection",
    "SpanAlbertConfig",
    "SpanAlbertPreTrainedModel",
    "SpanAlbertModel",
    "SpanAlbertForPreTraining",
    "SpanAlbertForMaskedLM",
    "SpanAlbertForSequenceClassification",
    "SpanAlbertForQuestionAnswering",
    "SpanAlbertForMultipleChoice",
    "SpanAlbertForTokenClassification",
    "CorefConfig",
    "CorefModel",
    "RelationClassifierConfig",
    "EncoderForRelationClassification",
]
