"""run_relation.py's task: relation classification on TACRED-style JSON (TACRED, SemEval-2010 Task 8, ...), with
SpanBERT's [SUBJ-TYPE]/[OBJ-TYPE] markers (section 4.3) or Zhou and Chen's typed entity markers, scored with the
official scorer (TACRED's micro P/R/F1 without no_relation, or SemEval-2010 Task 8's macro F1 over its 9 relations):
fractions, eval_precision, eval_recall, eval_f1 and eval_accuracy; each example's prediction in
{phase}_predictions.jsonl. The encodings are spanroberta/tasks/relation/data.py's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from transformers import AutoModel, AutoModelForSequenceClassification, PreTrainedModel, Trainer

from spanroberta.finetuning.arguments import FinetuningArguments, FinetuningModelArguments, SampleLimitArguments
from spanroberta.finetuning.model_steps import load_model
from spanroberta.finetuning.task import (
    FineTuningRun,
    FineTuningTask,
    Report,
    check_model_length,
    output_file,
    save_outcomes,
)
from spanroberta.models.configuration_relation import RelationClassifierConfig
from spanroberta.models.modeling_relation import EncoderForRelationClassification, drop_pooler
from spanroberta.runs.ranges import check_choices, check_range
from spanroberta.tasks.relation.data import (
    ENCODINGS,
    RelationTask,
    add_entity_markers,
    check_labels,
    encode_relations,
    predicted_labels,
    read_relation_file,
    relation_compute_metrics,
    relation_task,
    warn_if_types_say_nothing,
    write_relation_predictions,
)
from spanroberta.tasks.relation.scoring import SCORERS


@dataclass
class RelationDataArguments(SampleLimitArguments):
    train_file: str | None = field(
        default=None, metadata={"help": "TACRED-style JSON: a list of {id, relation, token, subj_start, subj_end, "
                                "obj_start, obj_end, subj_type, obj_type} (ends inclusive), or one a line."}
    )
    validation_file: str | None = field(default=None, metadata={"help": "TACRED-style JSON to evaluate on."})
    test_file: str | None = field(default=None, metadata={"help": "TACRED-style JSON to predict; `relation` optional."})
    entity_markers: str = field(
        default="spanbert_types",
        metadata={"help": "spanbert_types: entities replaced by [SUBJ-TYPE]/[OBJ-TYPE], [CLS] classifier (SpanBERT "
                  "section 4.3); typed_entity_markers: words kept inside @ * type * ... @ and # ^ type ^ ... #, "
                  "classified from the two start markers (Zhou and Chen 2021).", "choices": list(ENCODINGS)},
    )
    scorer: str | None = field(
        default=None,
        metadata={"help": "The official score: tacred (micro P/R/F1 without the negative label) or semeval (macro F1 "
                  "over the 9 relations, direction counted). Default: semeval when every label is one of "
                  "SemEval-2010 Task 8's 19, else tacred.", "choices": list(SCORERS)},
    )
    negative_label: str | None = field(
        default=None, metadata={"help": "The label meaning no relation (default: no_relation; Other for semeval)."}
    )
    max_seq_length: int = field(
        default=128, metadata={"help": "Longer inputs keep a window of this many tokens around the entities."}
    )

    def __post_init__(self):
        check_choices(self)
        check_range("max_seq_length", self.max_seq_length, 1)


# Each phase: its --do_* flag, its file flag, its sample limit flag, and whether its examples need a relation.
PHASES = {
    "train": ("do_train", "train_file", "max_train_samples", True),
    "eval": ("do_eval", "validation_file", "max_eval_samples", True),
    "predict": ("do_predict", "test_file", "max_predict_samples", False),
}


def read_phases(data_args: RelationDataArguments, training_args: FinetuningArguments) -> dict[str, list]:
    """The checked examples of every phase asked, cut to its --max_*_samples."""
    examples = {}
    for phase, (do_flag, file_flag, limit_flag, labeled) in PHASES.items():
        if not getattr(training_args, do_flag):
            continue
        path = getattr(data_args, file_flag)
        if path is None:
            raise ValueError(f"--{do_flag} needs --{file_flag} (TACRED-style JSON).")
        limit = getattr(data_args, limit_flag)
        examples[phase] = read_relation_file(path, labeled=labeled)[:limit]
    return examples


def relation_config(config, task: RelationTask):
    """The model's config: the checkpoint's with the task's fields (labels, encoding, scorer), or for
    typed_entity_markers over a plain encoder, a `RelationClassifierConfig` around the encoder's config."""
    if task.encoding == "typed_entity_markers" and not isinstance(config, RelationClassifierConfig):
        return RelationClassifierConfig(encoder=config, **task.config_fields())
    for name, value in task.config_fields().items():
        setattr(config, name, value)
    return config


def load_relation_model(
    model_args: FinetuningModelArguments, config, tokenizer, around_encoder: bool
) -> PreTrainedModel:
    """The classifier: the checkpoint's own sequence classifier (a stock [CLS] one for spanbert_types, or the
    `EncoderForRelationClassification` a typed_entity_markers run saved), or with `around_encoder` a new
    `EncoderForRelationClassification` around the checkpoint's encoder; its embeddings grown to the markers."""
    if around_encoder:
        encoder = load_model(model_args, AutoModel, config.encoder)
        drop_pooler(encoder)
        config.encoder = encoder.config
        model = EncoderForRelationClassification(config)
        model.encoder = encoder
    else:
        model = load_model(model_args, AutoModelForSequenceClassification, config)
    if len(tokenizer) > model.get_input_embeddings().num_embeddings:
        model.resize_token_embeddings(len(tokenizer))
    return model


def prepare_relation(run: FineTuningRun) -> None:
    """The labels, encoding and scorer (`RelationTask`) from the training data and the checkpoint, every split's
    labels checked against them, and the config given the task's fields."""
    data_args, config = run.data_args, run.config
    check_model_length(run)
    task = relation_task(config, run.data.get("train"), data_args.entity_markers, data_args.scorer,
                         data_args.negative_label)  # fmt: skip
    for phase, (_, file_flag, _, _) in PHASES.items():
        check_labels(run.data.get(phase, []), task.label2id, getattr(data_args, file_flag))
    warn_if_types_say_nothing(run.data.get("train", []), task.encoding)
    run.settings["task"] = task
    run.settings["around_encoder"] = (task.encoding == "typed_entity_markers"
                                      and not isinstance(config, RelationClassifierConfig))  # fmt: skip
    run.config = relation_config(config, task)


def build_relation_model(run: FineTuningRun) -> PreTrainedModel:
    task = run.settings["task"]
    # SpanBERT's type markers become special tokens (never split, never lower-cased); the punctuation markers
    # are ordinary text.
    add_entity_markers(run.tokenizer, run.data.get("train", []), task.encoding)
    return load_relation_model(run.model_args, run.config, run.tokenizer, run.settings["around_encoder"])


def encode_phases(run: FineTuningRun) -> dict[str, Any]:
    task = run.settings["task"]
    return {phase: encode_relations(phase_examples, run.tokenizer, task.encoding, run.data_args.max_seq_length,
                                    task.label2id)
            for phase, phase_examples in run.data.items()}  # fmt: skip


def score_relations(run: FineTuningRun, trainer: Trainer) -> dict[str, dict[str, float]]:
    """The scores (where the examples are labelled) with each example's predicted and gold label, for the official
    F1 on any resample ({phase}_outcomes.json), and each example's prediction, for evaluation and prediction."""
    task, results = run.settings["task"], {}
    for phase in ("eval", "predict"):
        if phase not in run.encoded:
            continue
        output = trainer.predict(run.encoded[phase], metric_key_prefix=phase)
        results[phase] = {**output.metrics, f"{phase}_samples": len(run.encoded[phase])}
        predicted = predicted_labels(output.predictions, task.id2label)
        if f"{phase}_f1" in output.metrics:
            gold = [example.relation for example in run.data[phase]]
            outcome = {"scorer": task.scorer, "predictions": predicted, "references": gold}
            save_outcomes(trainer, phase, {f"{phase}_f1": outcome})
        if path := output_file(trainer, f"{phase}_predictions.jsonl"):
            write_relation_predictions(path, run.data[phase], predicted)
    return results


def relation_card(run: FineTuningRun) -> dict[str, Any]:
    semeval = run.settings["task"].scorer == "semeval"
    dataset = "SemEval-2010 Task 8" if semeval else "TACRED-style relation classification"
    return {"tasks": "text-classification", "dataset": dataset}


def relation_metrics(run: FineTuningRun):
    task = run.settings["task"]
    return relation_compute_metrics(task.id2label, task.scorer, task.negative_label)


RELATION = FineTuningTask(
    name="relation",
    task_arguments=(RelationDataArguments,),
    read=lambda run: read_phases(run.data_args, run.training_args),
    prepare=prepare_relation,
    build_model=build_relation_model,
    encode=encode_phases,
    compute_metrics=relation_metrics,
    score=score_relations,
    model_card=relation_card,
    reports={"relation": Report(("precision", "recall", "f1", "accuracy"), "f1", other=("samples",))},
)
