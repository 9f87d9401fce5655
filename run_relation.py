#!/usr/bin/env python
"""Fine-tune and evaluate relation classification on TACRED-style JSON (TACRED, SemEval-2010 Task 8, ...).

    python run_relation.py --model_name_or_path CKPT --train_file train.json --validation_file dev.json \\
        --do_train --do_eval --output_dir out                          # SpanBERT's [SUBJ-PERSON] markers
    python run_relation.py ... --entity_markers typed_entity_markers  # Zhou and Chen's @ * person * ... @
    python run_relation.py ... --scorer semeval                       # the official scorer (default: from the labels)
    python run_relation.py ... --test_file test.json --do_predict     # predict_predictions.jsonl
    accelerate launch run_relation.py ...                             # several GPUs

The official scores (TACRED's micro P/R/F1 without no_relation, or SemEval-2010 Task 8's macro F1 over its 9
relations, direction counted) go to OUTPUT_DIR/eval_results.json as eval_precision, eval_recall, eval_f1 and
eval_accuracy; each example's gold and predicted label to OUTPUT_DIR/eval_predictions.jsonl.
`python run_relation.py --help` lists every flag; docs/relation-extraction.md explains the encodings.
"""

from dataclasses import dataclass, field
from pathlib import Path

from transformers import (
    AutoModel,
    AutoModelForSequenceClassification,
    DataCollatorWithPadding,
    PreTrainedModel,
    Trainer,
)

from spanroberta.models.configuration_relation import RelationClassifierConfig
from spanroberta.models.modeling_relation import EncoderForRelationClassification, drop_pooler
from spanroberta.metrics.relation import SCORERS
from spanroberta.tasks.relation import (
    ENCODINGS,
    RelationTask,
    add_entity_markers,
    check_labels,
    encode_relations,
    predicted_labels,
    read_relation_file,
    relation_compute_metrics,
    relation_task,
    write_relation_predictions,
)
from spanroberta.training.cli import parse_arguments
from spanroberta.training.distributed import finish_processes
from spanroberta.training.finetuning import (
    FinetuningArguments,
    ModelArguments,
    check_finetuning_run,
    load_config_and_tokenizer,
    load_model,
    padding,
    publish,
    train_and_save,
)
from spanroberta.training.validation import check_max_seq_length, check_range, user_errors


@dataclass
class RelationDataArguments:
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
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep the first N training examples."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep the first N evaluation examples."})
    max_predict_samples: int | None = field(default=None, metadata={"help": "Keep the first N test examples."})

    def __post_init__(self):
        check_range("max_seq_length", self.max_seq_length, 1)


# The dataclasses behind the flags (run_ablation.py checks its configs against them).
ARGUMENT_CLASSES = (ModelArguments, RelationDataArguments, FinetuningArguments)
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


def load_relation_model(model_args: ModelArguments, config, tokenizer, around_encoder: bool) -> PreTrainedModel:
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


def main(args: list[str] | None = None) -> None:
    # Everything is read and checked before a model is loaded, so bad input fails fast.
    with user_errors("run_relation.py", also=(ValueError, FileNotFoundError)):
        (model_args, data_args, training_args), given = parse_arguments(ARGUMENT_CLASSES, args)
        check_finetuning_run(model_args, training_args, given, {
            flag: getattr(data_args, flag) for _, _, flag, _ in PHASES.values()})  # fmt: skip
        examples = read_phases(data_args, training_args)
        config, tokenizer = load_config_and_tokenizer(model_args)
        check_max_seq_length(data_args.max_seq_length, config, tokenizer, model_args.model_name_or_path)
        task = relation_task(config, examples.get("train"), data_args.entity_markers, data_args.scorer,
                             data_args.negative_label)  # fmt: skip
        for phase, (_, file_flag, _, _) in PHASES.items():
            check_labels(examples.get(phase, []), task.label2id, getattr(data_args, file_flag))
        around_encoder = task.encoding == "typed_entity_markers" and not isinstance(config, RelationClassifierConfig)
        config = relation_config(config, task)

    # SpanBERT's type markers become special tokens (never split, never lower-cased); the punctuation markers
    # are ordinary text.
    add_entity_markers(tokenizer, examples.get("train", []), task.encoding)
    model = load_relation_model(model_args, config, tokenizer, around_encoder)
    encoded = {phase: encode_relations(phase_examples, tokenizer, task.encoding, data_args.max_seq_length,
                                       task.label2id)
               for phase, phase_examples in examples.items()}  # fmt: skip

    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=encoded.get("train"),
        eval_dataset=encoded.get("eval"),
        processing_class=tokenizer,
        data_collator=DataCollatorWithPadding(tokenizer, **padding(training_args, data_args.max_seq_length)),
        compute_metrics=relation_compute_metrics(task.id2label, task.scorer, task.negative_label),
    )

    if training_args.do_train:
        train_and_save(trainer, given)

    # Evaluation and prediction: the scores (where the examples are labelled) and each example's prediction.
    for phase in ("eval", "predict"):
        if phase not in encoded:
            continue
        output = trainer.predict(encoded[phase], metric_key_prefix=phase)
        metrics = {**output.metrics, f"{phase}_samples": len(encoded[phase])}
        trainer.log_metrics(phase, metrics)
        trainer.save_metrics(phase, metrics)
        if trainer.is_world_process_zero():
            output_dir = Path(training_args.output_dir)
            output_dir.mkdir(parents=True, exist_ok=True)
            write_relation_predictions(output_dir / f"{phase}_predictions.jsonl", examples[phase],
                                       predicted_labels(output.predictions, task.id2label))  # fmt: skip

    dataset = "SemEval-2010 Task 8" if task.scorer == "semeval" else "TACRED-style relation classification"
    card = {"finetuned_from": model_args.model_name_or_path, "tasks": "text-classification", "language": "en",
            "dataset": dataset}
    publish(trainer, card)
    finish_processes()


if __name__ == "__main__":
    main()
