#!/usr/bin/env python
"""Fine-tune and evaluate end-to-end coreference (Joshi et al. 2019's independent variant of Lee et al. 2018's
coarse-to-fine model, as SpanBERT section 4.2 runs it) on CoNLL-2012 files (OntoNotes, LitBank) or e2e-coref's JSON
lines, from any encoder checkpoint (spanroberta, RoBERTa, BERT, ...) or a saved coreference model.

    python run_coref.py --model_name_or_path CKPT --train_file train.english.v4_gold_conll \
        --validation_file dev.english.v4_gold_conll --do_train --do_eval --output_dir out
    python run_coref.py ... --train_file litbank/ --train_documents :80 --validation_file litbank/ \
        --eval_documents 80: --keep_singletons         # LitBank: one folder split by document, singletons scored
    python run_coref.py --model_name_or_path out --gap_file gap-development.tsv --output_dir gap_out
    accelerate launch run_coref.py ...                 # several GPUs

Each document is one batch, 20 epochs. --preset picks Joshi et al.'s released settings: spanbert_base (the default:
384-subword segments, 3 per training document, encoder lr 2e-5, task lr 1e-4) or bert_base (128 x 11, 1e-5 / 2e-4);
flags given override it; see docs/coreference.md. The CoNLL metrics go
to OUTPUT_DIR/eval_results.json (eval_muc_*, eval_b_cubed_*, eval_ceaf_phi4_*, eval_conll_f1), the predicted
clusters to OUTPUT_DIR/eval_predictions.conll (or .jsonlines, the input's layout), GAP's scores to
OUTPUT_DIR/gap_results.json and its decisions to OUTPUT_DIR/gap_predictions.tsv (the official scorer's input).
`python run_coref.py --help` lists every flag.
"""

from dataclasses import dataclass, field
from pathlib import Path

from transformers import AutoModel

from spanroberta.errors import UserInputError
from spanroberta.metrics.gap import gap_scores
from spanroberta.models.configuration_coreference import CorefConfig
from spanroberta.models.modeling_coreference import CorefModel
from spanroberta.tasks.coreference import (
    DocumentCollator,
    TrainingWindows,
    encode_document,
    gap_decision,
    read_coref_documents,
    read_gap,
    write_coref_documents,
    write_gap_predictions,
)
from spanroberta.training.cli import apply_defaults, parse_arguments, with_defaults
from spanroberta.training.coreference import COREF_PRESETS, DEFAULT_COREF_PRESET, CorefTrainer, predict_documents
from spanroberta.training.distributed import finish_processes
from spanroberta.training.finetuning import (
    FinetuningArguments,
    ModelArguments,
    check_finetuning_run,
    load_config_and_tokenizer,
    load_model,
    publish,
    train_and_save,
)
from spanroberta.training.validation import check_range, model_positions, user_errors


@dataclass
class CorefDataArguments:
    train_file: str | None = field(
        default=None, metadata={"help": "CoNLL-2012 or JSON-lines file, a folder of them, or a glob."}
    )
    validation_file: str | None = field(default=None, metadata={"help": "Same layouts as --train_file."})
    train_documents: str | None = field(
        default=None, metadata={"help": "A slice START:END of --train_file's documents (in file order), e.g. :80."}
    )
    eval_documents: str | None = field(
        default=None, metadata={"help": "A slice START:END of --validation_file's documents, e.g. 80:."}
    )
    gap_file: str | None = field(
        default=None, metadata={"help": "GAP's TSV: resolve each pronoun to A, B or neither and score it."}
    )
    preset: str = field(
        default=DEFAULT_COREF_PRESET,
        metadata={"help": "Joshi et al.'s released settings for the segment length, segments per training document and "
                  "both learning rates: spanbert_base (384, 3, 2e-5, 1e-4) or bert_base (128, 11, 1e-5, 2e-4). "
                  "Those flags, given, override it.", "choices": list(COREF_PRESETS)},
    )
    max_segment_length: int = field(
        default=COREF_PRESETS[DEFAULT_COREF_PRESET]["max_segment_length"],
        metadata={"help": "Subwords per segment, special tokens included (default: the --preset's)."},
    )
    max_train_segments: int = field(
        default=COREF_PRESETS[DEFAULT_COREF_PRESET]["max_train_segments"],
        metadata={"help": "Longer training documents give a random window of this many segments (default: the "
                  "--preset's)."},
    )
    keep_singletons: bool = field(
        default=False,
        metadata={"help": "Score singletons and predict them (LitBank annotates them; OntoNotes does not). A new "
                  "model then also trains its mention scores (--mention_loss_weight 1)."},
    )

    def __post_init__(self):
        check_range("max_segment_length", self.max_segment_length, 8)
        check_range("max_train_segments", self.max_train_segments, 1)


@dataclass
class CorefHeadArguments:
    """The task layers of a new model (a saved coreference model keeps its own); defaults: Joshi et al.'s."""

    max_span_width: int = field(default=30, metadata={"help": "Longest candidate mention, in subwords."})
    top_span_ratio: float = field(default=0.4, metadata={"help": "Mentions kept per word after pruning."})
    max_top_antecedents: int = field(default=50, metadata={"help": "Antecedents kept per mention (coarse scores)."})
    ffnn_size: int = field(default=3000, metadata={"help": "Hidden units of each scorer."})
    coref_depth: int = field(default=2, metadata={"help": "Rounds of antecedent scoring (1: no higher-order)."})
    coref_dropout: float = field(
        default=0.3, metadata={"help": "Dropout of the task layers (not of the encoder's output)."}
    )
    mention_loss_weight: float | None = field(
        default=None,
        metadata={"help": "Weight of a mention-detection loss (default: 1 with --keep_singletons, else 0)."},
    )

    def __post_init__(self):
        check_range("top_span_ratio", self.top_span_ratio, above=0, maximum=1)
        for flag in ("max_span_width", "max_top_antecedents", "ffnn_size", "coref_depth"):
            check_range(flag, getattr(self, flag), 1)


@dataclass
class _CorefTrainingArguments(FinetuningArguments):
    task_learning_rate: float = field(
        default=COREF_PRESETS[DEFAULT_COREF_PRESET]["task_learning_rate"],
        metadata={"help": "Learning rate of the task layers (--learning_rate is the encoder's; default: the "
                  "--preset's)."},
    )


# Joshi et al.'s: 20 epochs, linear decay after a 10% warm-up, one document a batch; the encoder's learning rate is
# the --preset's.
COREF_TRAINING_DEFAULTS = {"learning_rate": COREF_PRESETS[DEFAULT_COREF_PRESET]["learning_rate"],
                           "num_train_epochs": 20, "warmup_steps": 0.1,
                           "per_device_train_batch_size": 1, "per_device_eval_batch_size": 1}  # fmt: skip
CorefTrainingArguments = with_defaults(_CorefTrainingArguments, COREF_TRAINING_DEFAULTS, "CorefTrainingArguments",
                                       __name__)  # fmt: skip

# The dataclasses behind the flags (run_ablation.py checks its configs against them).
ARGUMENT_CLASSES = (ModelArguments, CorefDataArguments, CorefHeadArguments, CorefTrainingArguments)


def select_documents(documents: list, selection: str | None, flag: str) -> list:
    """`documents[START:END]` for a selection "START:END" (either may be left out)."""
    if selection is None:
        return documents
    try:
        start, end = (int(part) if part.strip() else None for part in selection.split(":"))
    except ValueError:
        raise UserInputError(f"--{flag} must be START:END (e.g. :80 or 80:), not {selection!r}.") from None
    chosen = documents[start:end]
    if not chosen:
        raise UserInputError(f"--{flag} {selection} selects none of the {len(documents)} documents.")
    return chosen


def read_splits(data_args: CorefDataArguments, training_args: FinetuningArguments) -> dict[str, list]:
    """The documents to train and to evaluate on, read and checked; the runs' batch size checked."""
    if training_args.per_device_train_batch_size != 1 or training_args.per_device_eval_batch_size != 1:
        raise UserInputError("Coreference trains on one document a batch: keep --per_device_train_batch_size 1 and "
                             "--per_device_eval_batch_size 1 (use --gradient_accumulation_steps for more).")
    if training_args.do_predict:
        raise UserInputError("run_coref.py has no --do_predict: evaluate with --do_eval and --validation_file (the "
                             "predicted clusters are written to eval_predictions.*), or resolve GAP with --gap_file.")
    splits = {}
    for split, asked, files, selection in (
        ("train", training_args.do_train, "train_file", "train_documents"),
        ("eval", training_args.do_eval, "validation_file", "eval_documents"),
    ):
        if asked and getattr(data_args, files) is None:
            raise UserInputError(f"--do_{split} needs --{files}.")
        if asked:
            documents = read_coref_documents(getattr(data_args, files))
            splits[split] = select_documents(documents, getattr(data_args, selection), selection)
    return splits


def coref_model(model_args: ModelArguments, config, data_args: CorefDataArguments, head_args: CorefHeadArguments):
    """A saved coreference model with its task layers, or an encoder under new ones (`head_args`)."""
    if config.model_type == CorefConfig.model_type:
        return load_model(model_args, AutoModel, config)
    settings = {name: value for name, value in vars(head_args).items()
                if name not in ("coref_dropout", "mention_loss_weight")}  # fmt: skip
    weight = head_args.mention_loss_weight
    return CorefModel.from_encoder(
        load_model(model_args, AutoModel, config), **settings, dropout=head_args.coref_dropout,
        mention_loss_weight=float(data_args.keep_singletons) if weight is None else weight,
        max_segment_distance=data_args.max_train_segments,
    )


def resolve_gap(trainer: CorefTrainer, examples: list, max_segment_length: int, output_dir: Path) -> None:
    """Resolves each GAP pronoun from the predicted clusters; writes gap_results.json and gap_predictions.tsv."""
    features = [encode_document(example.document, trainer.processing_class, max_segment_length)
                for example in examples]  # fmt: skip
    clusters = predict_documents(trainer.model, features, trainer.data_collator, keep_singletons=False)
    decisions = [gap_decision(example, found) for example, found in zip(examples, clusters)]
    metrics = {f"gap_{name}": value for name, value in gap_scores(decisions).items()}
    metrics["gap_examples"] = len(decisions)
    trainer.log_metrics("gap", {name: "-" if value is None else value for name, value in metrics.items()})
    trainer.save_metrics("gap", metrics)
    if trainer.is_world_process_zero():
        output_dir.mkdir(parents=True, exist_ok=True)
        write_gap_predictions(output_dir / "gap_predictions.tsv", examples, decisions)


def main(args: list[str] | None = None) -> None:
    # Everything is read and checked before a model is loaded, so bad input fails fast.
    with user_errors("run_coref.py", also=(ValueError, FileNotFoundError)):
        arguments, given = parse_arguments(ARGUMENT_CLASSES, args)
        model_args, data_args, head_args, training_args = apply_defaults(
            arguments, COREF_PRESETS[arguments[1].preset], given)  # fmt: skip
        check_finetuning_run(model_args, training_args, given, {})
        splits = read_splits(data_args, training_args)
        gap_examples = read_gap(Path(data_args.gap_file)) if data_args.gap_file else []
        config, tokenizer = load_config_and_tokenizer(model_args)
        encoder_config = config.encoder_config() if config.model_type == CorefConfig.model_type else config
        limit = model_positions(encoder_config, tokenizer)
        if limit is not None and data_args.max_segment_length > limit:
            raise UserInputError(f"--max_segment_length {data_args.max_segment_length} is above the {limit} tokens "
                                 f"{model_args.model_name_or_path} can hold; use {limit} or less.")  # fmt: skip

    # A saved coreference model keeps its task layers; an encoder gets new ones. Documents become segments.
    model = coref_model(model_args, config, data_args, head_args)
    encoded = {split: [encode_document(d, tokenizer, data_args.max_segment_length) for d in documents]
               for split, documents in splits.items()}  # fmt: skip

    trainer = CorefTrainer(
        model=model,
        args=training_args,
        train_dataset=TrainingWindows(encoded["train"], data_args.max_train_segments) if "train" in encoded else None,
        eval_dataset=encoded.get("eval"),
        processing_class=tokenizer,
        data_collator=DocumentCollator(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0),
        task_learning_rate=training_args.task_learning_rate,
        eval_documents=splits.get("eval", []),
        keep_singletons=data_args.keep_singletons,
    )

    if training_args.do_train:
        train_and_save(trainer, given)

    # The CoNLL metrics, and the predicted clusters in the input's layout.
    output_dir = Path(training_args.output_dir)
    if training_args.do_eval:
        metrics = trainer.evaluate()
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)
        if trainer.is_world_process_zero():
            output_dir.mkdir(parents=True, exist_ok=True)
            predictions = output_dir / f"eval_predictions.{splits['eval'][0].layout}"
            write_coref_documents(predictions, splits["eval"], trainer.eval_predictions)

    # GAP: each pronoun resolved to A, B, both or neither from the predicted clusters.
    if gap_examples:
        resolve_gap(trainer, gap_examples, data_args.max_segment_length, output_dir)

    card = {"finetuned_from": model_args.model_name_or_path, "tasks": "coreference-resolution", "language": "en",
            "dataset": "coreference (CoNLL-2012 layout)"}
    publish(trainer, card)
    finish_processes()


if __name__ == "__main__":
    main()
