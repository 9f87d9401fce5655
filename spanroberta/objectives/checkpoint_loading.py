"""Reading the checkpoint a run continues: which encoder path it takes, and a check that every weight loaded.

- `checkpoint_encoder` reads the checkpoint's model type: RoBERTa's and ALBERT's continue on spanroberta's own
  encoders (`SpanRobertaForPreTraining`, `SpanAlbertForPreTraining`), the families of
  `models.modeling_any_encoder.ENCODER_FAMILIES` (BERT, ModernBERT, DeBERTa-v2/v3) in their stock classes; any
  other type is refused before anything is loaded, never read as another.
- `check_loading_report` refuses a checkpoint that did not fill every weight of the model (a renamed or missing
  tensor would otherwise start from random initialisation, silently). The heads a checkpoint may lack start fresh
  and are logged, one line each (`FreshHead`): those the objective adds (SBO, a sentence head), and the masked-LM
  head of a headless checkpoint (a stock `BertModel`, as sentence-transformers publishes), which must then be
  absent as a whole; its decoder is tied to the word embeddings as the family's own is. transformers' own load
  report (and its "checkpoint seem corrupted" line about the absent MLM bias) is left out for these loads: this
  check reports the same facts, and says which of them are expected.

`objectives/masked_lm.py` builds its models through this module, which therefore imports nothing of the objectives;
what it reads of the run's model flags is `hub.ModelSource`, which the run's model arguments extend.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Iterator

from transformers import (
    MODEL_FOR_MASKED_LM_MAPPING,
    MODEL_FOR_PRETRAINING_MAPPING,
    AutoConfig,
    PretrainedConfig,
    PreTrainedModel,
)
from transformers.utils import cached_file

from ..errors import UserInputError
from ..hub import ModelSource, hub_kwargs
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
# The sentence head (and its pooler) of spanroberta's pretraining classes; a checkpoint may lack them.
SENTENCE_HEADS = {
    "spanroberta": ("sentence_head.", "roberta.pooler."),
    "spanalbert": ("sop_classifier.", "albert.pooler."),
}
# Model types that continue through another recipe, and what to say about them.
OTHER_RECIPES = {
    "electra": "ELECTRA checkpoints continue with --recipe electra (discriminator and generator together).",
}
TIED_DECODER = "decoder tied to the word embeddings"
# How many missing names a refusal lists.
MISSING_NAMES_SHOWN = 5


def checkpoint_model_type(source: str, model_args: ModelSource) -> str | None:
    config_dict, _ = PretrainedConfig.get_config_dict(source, **hub_kwargs(model_args))
    return config_dict.get("model_type")


def checkpoint_encoder(source: str, model_args: ModelSource, encoder_settings: dict) -> str:
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


def any_encoder_config(source: str, model_args: ModelSource, head_settings: dict) -> PretrainedConfig:
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


@dataclasses.dataclass(frozen=True)
class FreshHead:
    """A head that a continued checkpoint may lack, and that then starts fresh.

    prefixes: the parameter-name prefixes of its weights; description, note: what it is, and what its fresh start
        shares with the encoder, for the log line.
    required: set for a head that may only start fresh as a whole (the masked-LM head): the names a checkpoint
        holding it must hold (its tied weights left out). A checkpoint holding some of them is refused.
    """

    prefixes: tuple[str, ...]
    description: str
    note: str = ""
    required: frozenset[str] = frozenset()


def fresh_heads(model: PreTrainedModel) -> tuple[FreshHead, ...]:
    """The heads of `model` that a checkpoint may lack: SBO, the sentence head the run trains, and the masked-LM
    head (every weight outside the encoder and the heads above), for a checkpoint saved without it."""
    config = model.config
    # The config class's type: a config read from another type's checkpoint keeps that type's name as an attribute.
    model_type = type(config).model_type
    heads = [FreshHead((SBO_PREFIX,), "span boundary head", TIED_DECODER)]
    if model_type in SENTENCE_HEADS:
        heads.append(FreshHead(SENTENCE_HEADS[model_type], "sentence head"))
    elif config.sentence_objective != "none":
        family = ENCODER_FAMILIES[model_type]
        heads.append(FreshHead((f"{family.pooler}.", f"{family.sentence_classifier}."), "sentence head"))
    taken = tuple(prefix for head in heads for prefix in head.prefixes)
    tied = set(getattr(model, "all_tied_weights_keys", None) or {})
    names = [name for name in model.state_dict() if not name.startswith((f"{model.base_model_prefix}.", *taken))]
    if names:
        output = model.get_output_embeddings()
        is_tied = output is None or output.weight is model.get_input_embeddings().weight
        note = TIED_DECODER if is_tied else "decoder not tied to the word embeddings (tie_word_embeddings is false)"
        required = frozenset(name for name in names if name not in tied)
        heads.append(FreshHead(_module_prefixes(names), "masked-LM head", note, required))
    return tuple(heads)


def _module_prefixes(names: list[str]) -> tuple[str, ...]:
    """The modules holding `names`: their common module ("cls.predictions.") or, with none, each top module."""
    common = os.path.commonprefix([name.split(".")[:-1] for name in names])
    if common:
        return (".".join(common) + ".",)
    return tuple(sorted({name.split(".")[0] + "." for name in names}))


def load_checked(
    model_class: type, source: str, config: PretrainedConfig, model_args: ModelSource
) -> PreTrainedModel:
    """`model_class.from_pretrained(source, config=config)`, refused unless every weight but the heads that may
    start fresh loaded (`check_loading_report`, which reports the load in transformers' stead). The model's
    `fresh_head_prefixes` names the heads that started fresh (the trainer's --fresh_heads_learning_rate)."""
    with _transformers_load_report_left_out():
        model, report = model_class.from_pretrained(
            source, config=config, output_loading_info=True, **hub_kwargs(model_args)
        )
    model_type = checkpoint_model_type(source, model_args)
    model.fresh_head_prefixes = check_loading_report(source, model_type, report, fresh_heads(model),
                                                     unused_pooler(model))  # fmt: skip
    return model


def unused_pooler(model: PreTrainedModel) -> tuple[str, ...]:
    """The names (with and without the encoder's prefix) of the checkpoint's pooler when `model` has none: a
    BertModel's pooler, say, continued in BertForMaskedLM, or a RobertaModel's, when no sentence head is trained."""
    model_type = type(model.config).model_type
    if model_type in ENCODER_FAMILIES:
        pooler = ENCODER_FAMILIES[model_type].pooler
    else:  # spanroberta's and SpanALBERT's encoders: RoBERTa's and ALBERT's own pooler
        pooler = f"{model.base_model_prefix}.pooler"
    if pooler is None or _has_module(model, pooler):
        return ()
    return (f"{pooler}.", f"{pooler.removeprefix(model.base_model_prefix + '.')}.")


def _has_module(model: PreTrainedModel, name: str) -> bool:
    try:
        return model.get_submodule(name) is not None
    except AttributeError:
        return False


class _DropLoadReport(logging.Filter):
    """Drops transformers' load report and its "checkpoint seem corrupted" line (an absent MLM bias and decoder
    bias): `check_loading_report` refuses what is wrong and logs what is expected, so these would only mislead."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (message.startswith("This checkpoint seem corrupted") or " LOAD REPORT" in message)


@contextlib.contextmanager
def _transformers_load_report_left_out() -> Iterator[None]:
    transformers_logger = logging.getLogger("transformers.modeling_utils")
    drop = _DropLoadReport()
    transformers_logger.addFilter(drop)
    try:
        yield
    finally:
        transformers_logger.removeFilter(drop)


def load_any_encoder(model_args: ModelSource, config: PretrainedConfig) -> PreTrainedModel:
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
        model.fresh_head_prefixes = tuple(prefix for prefix in model.fresh_head_prefixes if prefix != SBO_PREFIX)
    return model


def check_loading_report(
    source: str, model_type: str | None, report: dict, fresh_heads: tuple[FreshHead, ...],
    unused: tuple[str, ...] = (),
) -> tuple[str, ...]:  # fmt: skip
    """Refuses (UserInputError) a load that left weights of the model unfilled, other than those of `fresh_heads`
    (a head that must be whole: only when the checkpoint holds none of it), which are logged as starting fresh,
    and returns their parameter-name prefixes. The checkpoint's weights the model has no place for are a warning,
    but for those under `unused` (an expected leftover: a pooler the model does not have), which are logged."""
    missing = set(report["missing_keys"])
    started = [head for head in fresh_heads if _starts_fresh(head, missing)]
    fresh_prefixes = tuple(prefix for head in started for prefix in head.prefixes)
    unloaded = sorted(name for name in missing if not name.startswith(fresh_prefixes))
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
    started_prefixes = []
    for head in started:
        prefixes = [prefix for prefix in head.prefixes if any(name.startswith(prefix) for name in missing)]
        note = f", {head.note}" if head.note else ""
        logger.info("%s (%s): not in the checkpoint, starts fresh%s.", ", ".join(prefix[:-1] for prefix in prefixes),
                    head.description, note)  # fmt: skip
        started_prefixes += prefixes
    left_over = sorted(name for name in report["unexpected_keys"] if name.startswith(unused))
    if left_over:
        logger.info("%s (pooler): in the checkpoint, not used by a model that trains no sentence head; the saved "
                    "model leaves it out.", ", ".join(sorted({name.rsplit(".", 2)[0] for name in left_over})))  # fmt: skip
    unexpected = sorted(name for name in report["unexpected_keys"] if not name.startswith(unused))
    if unexpected:
        logger.warning(
            "%d weights of %s are not used by the model: %s.", len(unexpected), source,
            ", ".join(unexpected[:MISSING_NAMES_SHOWN]),
        )  # fmt: skip
    return tuple(started_prefixes)


def _starts_fresh(head: FreshHead, missing: set[str]) -> bool:
    """Whether `head` is absent from the checkpoint: any of its weights missing, or all, for a whole head."""
    if head.required:
        return head.required <= missing
    return any(name.startswith(head.prefixes) for name in missing)

