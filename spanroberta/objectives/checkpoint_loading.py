"""Reading the checkpoint a run continues: which encoder path it takes, and a check that every weight loaded.

- `checkpoint_encoder` reads the checkpoint's model type: RoBERTa's and ALBERT's continue on spanroberta's own
  encoders (`SpanRobertaForPreTraining`, `SpanAlbertForPreTraining`), the families of
  `models.modeling_any_encoder.ENCODER_FAMILIES` (BERT, ModernBERT, DeBERTa-v2/v3) in their stock classes; any
  other type is refused before anything is loaded, never read as another.
- `check_loading_report` refuses a checkpoint that did not fill every weight of the model (a renamed or missing
  tensor would otherwise start from random initialisation, silently): the heads the objective adds (SBO, a
  sentence head the checkpoint lacks) are expected to start fresh and are logged.
- `without_packing_where_unsupported`: families whose attention cannot keep a packed row's sequences apart train
  on one sequence per row.

`objectives/masked_lm.py` builds its models through this module, which therefore imports nothing of the objectives
or of `training.arguments` (whose trainer import reaches the objectives): the arguments are duck-typed.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from transformers import (
    MODEL_FOR_MASKED_LM_MAPPING,
    MODEL_FOR_PRETRAINING_MAPPING,
    AutoConfig,
    PretrainedConfig,
    PreTrainedModel,
)
from transformers.utils import cached_file

from ..errors import UserInputError
from ..hub import hub_kwargs
from ..models.modeling_any_encoder import (
    ENCODER_FAMILIES,
    SBO_HEAD_FILE,
    SBO_PREFIX,
    add_span_head_settings,
    span_pretraining_class,
)

logger = logging.getLogger(__name__)

# Checkpoints continued on spanroberta's RoBERTa encoder (XLM-R and CamemBERT are RoBERTa's architecture under
# RoBERTa's parameter names) and on its ALBERT encoder.
ROBERTA_MODEL_TYPES = ("roberta", "spanroberta", "xlm-roberta", "camembert")
ALBERT_MODEL_TYPES = ("albert", "spanalbert")
# The modules spanroberta's pretraining classes add for the objective; a checkpoint may lack them.
OBJECTIVE_HEADS = {
    "spanroberta": (SBO_PREFIX, "sentence_head.", "roberta.pooler."),
    "spanalbert": (SBO_PREFIX, "sop_classifier.", "albert.pooler."),
}
# Model types that continue through another recipe, and what to say about them.
OTHER_RECIPES = {
    "electra": "ELECTRA checkpoints continue with --recipe electra (discriminator and generator together).",
}
# How many missing names a refusal lists.
MISSING_NAMES_SHOWN = 5


def checkpoint_model_type(source: str, model_args: Any) -> str | None:
    config_dict, _ = PretrainedConfig.get_config_dict(source, **hub_kwargs(model_args))
    return config_dict.get("model_type")


def checkpoint_encoder(source: str, model_args: Any, encoder_settings: dict) -> str:
    """The encoder path of the config or checkpoint `source`: "roberta", "albert" or "any" (a family of
    ENCODER_FAMILIES, continued in its stock class). Any other model type is refused."""
    model_type = checkpoint_model_type(source, model_args)
    if model_type in ALBERT_MODEL_TYPES:
        encoder = "albert"
    elif model_type in ROBERTA_MODEL_TYPES:
        encoder = "roberta"
    elif model_type in ENCODER_FAMILIES:
        encoder = "any"
    else:
        raise UserInputError(_unsupported_type_message(source, model_type))
    if encoder_settings and encoder != "albert":
        raise UserInputError(
            f"--{' and --'.join(encoder_settings)} set an ALBERT encoder, but {source} is a {model_type} "
            "checkpoint."
        )
    return encoder


def _unsupported_type_message(source: str, model_type: str | None) -> str:
    supported = ", ".join((*ROBERTA_MODEL_TYPES, *ALBERT_MODEL_TYPES, *ENCODER_FAMILIES))
    if model_type in OTHER_RECIPES:
        reason = OTHER_RECIPES[model_type]
    elif model_type is None or _config_class(model_type) not in MODEL_FOR_MASKED_LM_MAPPING:
        reason = (
            "It has no masked-LM class in transformers (a decoder-only or encoder-decoder model cannot learn span "
            "masking)."
        )
    else:
        reason = (
            "spanroberta does not know where its masked-LM head is (models/modeling_any_encoder.ENCODER_FAMILIES "
            "lists the families it can continue; adding one is a few lines of data)."
        )
    return (
        f"{source} is a {model_type or 'model of unknown type'} checkpoint, which spanroberta cannot continue "
        f"pretraining. {reason} Checkpoints of these types can continue: {supported}."
    )


def _config_class(model_type: str) -> type | None:
    try:
        return type(AutoConfig.for_model(model_type))
    except ValueError:
        return None


def any_encoder_config(
    source: str, model_args: Any, head_settings: dict
) -> PretrainedConfig:
    """The stock config of `source` (a family of ENCODER_FAMILIES) with the pretraining heads' settings."""
    config = AutoConfig.from_pretrained(source, **hub_kwargs(model_args))
    family = ENCODER_FAMILIES[config.model_type]
    objective = head_settings["sentence_objective"]
    own = family.sentence_objective
    if objective != "none" and objective != own:
        has = f"only {own} as its sentence head" if own else "no sentence head"
        raise UserInputError(
            f"--sentence_objective {objective}: a {config.model_type} checkpoint has {has} in transformers. Use "
            f"--sentence_objective {own + ' or none' if own else 'none'}."
        )
    return add_span_head_settings(config, **head_settings)


def any_encoder_class(config: PretrainedConfig) -> type[PreTrainedModel]:
    """The stock class the run continues in, with SpanBERT's objectives mixed in: the family's
    `AutoModelForPreTraining` class when the run trains its sentence head or the checkpoint is one (so that a
    BertForPreTraining keeps its NSP head), else its `AutoModelForMaskedLM` class."""
    family = ENCODER_FAMILIES[config.model_type]
    pretraining = MODEL_FOR_PRETRAINING_MAPPING.get(type(config), None) if family.sentence_objective else None
    keeps_sentence_head = pretraining is not None and (
        config.sentence_objective != "none" or pretraining.__name__ in (config.architectures or ())
    )
    return span_pretraining_class(pretraining if keeps_sentence_head else MODEL_FOR_MASKED_LM_MAPPING[type(config)])


def objective_heads(model: PreTrainedModel) -> tuple[str, ...]:
    """The parameter-name prefixes of the heads the objective adds to `model`, which a checkpoint may lack."""
    config = model.config
    # The config class's type: a config read from another type's checkpoint keeps that type's name as an attribute.
    model_type = type(config).model_type
    if model_type in OBJECTIVE_HEADS:
        return OBJECTIVE_HEADS[model_type]
    family = ENCODER_FAMILIES[model_type]
    if config.sentence_objective == "none":
        return (SBO_PREFIX,)
    return (SBO_PREFIX, f"{family.pooler}.", f"{family.sentence_classifier}.")


def load_checked(model_class: type, source: str, config: PretrainedConfig, model_args: Any):
    """`model_class.from_pretrained(source, config=config)`, refused unless every weight but the objective's new
    heads loaded (`check_loading_report`)."""
    model, report = model_class.from_pretrained(
        source, config=config, output_loading_info=True, **hub_kwargs(model_args)
    )
    check_loading_report(source, checkpoint_model_type(source, model_args), report, objective_heads(model))
    return model


def load_any_encoder(model_args: Any, config: PretrainedConfig) -> PreTrainedModel:
    """A family of ENCODER_FAMILIES in its stock class with the SBO head: from --model_name_or_path (checked, and
    with the SBO head a previous continuation saved beside it), or fresh from --config_name."""
    model_class = any_encoder_class(config)
    source = model_args.model_name_or_path
    if not source:
        return model_class(config)
    model = load_checked(model_class, source, config, model_args)
    # None when the checkpoint has no SBO head file (a stock checkpoint): the head then starts fresh.
    sbo_file = cached_file(
        source,
        SBO_HEAD_FILE,
        _raise_exceptions_for_missing_entries=False,
        _raise_exceptions_for_connection_errors=False,
        **hub_kwargs(model_args),
    )
    if model.load_sbo_head(sbo_file):
        logger.info("The SBO head continues from %s.", sbo_file)
    return model


def check_loading_report(source: str, model_type: str | None, report: dict, fresh_heads: tuple[str, ...]) -> None:
    """Refuses (UserInputError) a load that left weights of the model unfilled, other than those of
    `fresh_heads` (prefixes of the heads the objective adds), which are logged as starting fresh."""
    missing = sorted(report["missing_keys"])
    unloaded = [name for name in missing if not name.startswith(fresh_heads)]
    mismatched = sorted(str(entry[0] if isinstance(entry, tuple) else entry) for entry in report["mismatched_keys"])
    if unloaded or mismatched:
        names = (unloaded or mismatched)[:MISSING_NAMES_SHOWN]
        problem = f"{len(unloaded)} weights missing" if unloaded else f"{len(mismatched)} weights of another shape"
        raise UserInputError(
            f"The checkpoint {source} ({model_type}) does not hold every weight of the model it continues: "
            f"{problem}, among them {', '.join(names)}. Training would start those from random initialisation, "
            "so the run stops before its first step. Give a complete checkpoint saved by save_pretrained (check "
            "that no tensor was renamed or dropped, and that its config.json matches its weights)."
        )
    fresh = sorted({name.split(".")[0] if name.startswith(SBO_PREFIX) else name.rsplit(".", 1)[0] for name in missing})
    if fresh:
        logger.info("Heads the objective adds start fresh (not in %s): %s.", source, ", ".join(fresh))
    if report["unexpected_keys"]:
        logger.warning(
            "%d weights of %s are not used by the model: %s.", len(report["unexpected_keys"]), source,
            ", ".join(sorted(report["unexpected_keys"])[:MISSING_NAMES_SHOWN]),
        )  # fmt: skip


def without_packing_where_unsupported(
    model_args: Any, data_args: Any, input_format: str
) -> Any:
    """`data_args` with packing turned off (and a warning) when the checkpoint's family cannot keep a packed row's
    sequences apart (EncoderFamily.packing is None: DeBERTa-v2), so that doc-sentences rows hold one sequence."""
    source = model_args.model_name_or_path or model_args.config_name
    if not source or input_format != "doc-sentences" or not data_args.pack_documents:
        return data_args
    model_type = checkpoint_model_type(source, model_args)
    if model_type not in ENCODER_FAMILIES or ENCODER_FAMILIES[model_type].packing is not None:
        return data_args
    logger.warning(
        "%s cannot keep the sequences of a packed row apart (its attention builds its mask from a padding mask "
        "only), so doc-sentences rows hold one document's block each, padded (--pack_documents false).",
        model_type,
    )
    return dataclasses.replace(data_args, pack_documents=False)
