"""spanroberta: SpanBERT objectives (span masking + span boundary objective) on the RoBERTa recipe.

Importing the package registers the config and every head with transformers' Auto classes, so
`AutoModelFor*.from_pretrained(<spanroberta checkpoint>)` works without `trust_remote_code`, and registers
the extractive `pipeline("question-answering")` that transformers 5 removed.
"""

import importlib

import transformers

from .data.collator import DataCollatorForSpanMasking
from .models import (
    configuration_coreference,
    configuration_relation,
    configuration_span_albert,
    configuration_spanroberta,
    modeling_span_albert,
    modeling_spanroberta,
)
from .models.configuration_coreference import CorefConfig
from .models.configuration_relation import RelationClassifierConfig
from .models.configuration_span_albert import SpanAlbertConfig
from .models.configuration_spanroberta import SpanRobertaConfig
from .models.modeling_coreference import CorefModel
from .models.modeling_electra_pretraining import ElectraForReplacedTokenDetection
from .models.modeling_relation import EncoderForRelationClassification
from .models.modeling_span_albert import *  # noqa: F403  (its __all__: the SpanALBERT classes)
from .models.modeling_spanroberta import *  # noqa: F403  (its __all__: the SpanRoBERTa classes and shared heads)
from .pipelines.question_answering import register_question_answering_pipeline

__version__ = "0.1.0"


def _register_with_auto_classes(auto_map: dict[str, str]) -> None:
    """Registers the config and every head that a checkpoint's `auto_map` names (Auto class -> "module.Class" of
    spanroberta/models/) with transformers' Auto classes: the classes remote code would load, loaded locally."""
    classes = {}
    for auto_class, class_path in auto_map.items():
        module_name, _, class_name = class_path.rpartition(".")
        classes[auto_class] = getattr(importlib.import_module(f"{__name__}.models.{module_name}"), class_name)
    config_class = classes.pop("AutoConfig")
    transformers.AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
    for auto_class, model_class in classes.items():
        getattr(transformers, auto_class).register(config_class, model_class, exist_ok=True)


# RoBERTa's and ALBERT's encoders with every head; end-to-end coreference over any encoder (run_coref.py);
# relation classification from the entity start markers, over any encoder (run_relation.py).
for _configuration in (
    configuration_spanroberta,
    configuration_span_albert,
    configuration_coreference,
    configuration_relation,
):
    _register_with_auto_classes(_configuration.AUTO_MAP)

# transformers 5 removed pipeline("question-answering"); importing spanroberta brings it back.
register_question_answering_pipeline()

__all__ = [
    "SpanRobertaConfig",
    "SpanAlbertConfig",
    "CorefConfig",
    "CorefModel",
    "RelationClassifierConfig",
    "EncoderForRelationClassification",
    "DataCollatorForSpanMasking",
    "ElectraForReplacedTokenDetection",
    *modeling_spanroberta.__all__,
    *modeling_span_albert.__all__,
]
