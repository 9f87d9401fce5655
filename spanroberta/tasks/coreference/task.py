"""run_coref.py's task: end-to-end coreference (Joshi et al. 2019's independent variant of Lee et al. 2018's
coarse-to-fine model, as SpanBERT section 4.2 runs it) on CoNLL-2012 files or e2e-coref's JSON lines, one document a
batch; the CoNLL metrics (fractions: eval_muc_*, eval_b_cubed_*, eval_ceaf_phi4_*, eval_conll_f1) and the predicted
clusters in the input's layout, and GAP's scores (gap_results.json) with --gap_file. See docs/coreference.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import AutoModel, Trainer

from spanroberta.errors import UserInputError
from spanroberta.finetuning.arguments import FinetuningArguments, FinetuningModelArguments
from spanroberta.finetuning.model_steps import load_model
from spanroberta.finetuning.task import FineTuningRun, FineTuningTask, Report, output_file, save_outcomes
from spanroberta.models.configuration_coreference import CorefConfig
from spanroberta.models.modeling_coreference import CorefModel
from spanroberta.runs.cli import apply_defaults, with_defaults
from spanroberta.runs.ranges import check_choices, check_range
from spanroberta.runs.validation import model_positions
from spanroberta.tasks.coreference.data import (
    DocumentCollator,
    TrainingWindows,
    encode_document,
    gap_decision,
    read_coref_documents,
    read_gap,
    write_coref_documents,
    write_gap_predictions,
)
from spanroberta.tasks.coreference.gap_scoring import gap_answers, gap_outcomes, gap_scores
from spanroberta.tasks.coreference.scoring import document_outcomes
from spanroberta.tasks.coreference.trainer import COREF_PRESETS, DEFAULT_COREF_PRESET, CorefTrainer, predict_documents


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
    max_train_samples: int | None = field(
        default=None, metadata={"help": "Keep the first N training documents (after --train_documents)."}
    )
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "Keep the first N evaluation documents (after --eval_documents)."}
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
        check_choices(self)
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
    for split, asked, files, selection, limit in (
        ("train", training_args.do_train, "train_file", "train_documents", data_args.max_train_samples),
        ("eval", training_args.do_eval, "validation_file", "eval_documents", data_args.max_eval_samples),
    ):
        if asked and getattr(data_args, files) is None:
            raise UserInputError(f"--do_{split} needs --{files}.")
        if asked:
            documents = read_coref_documents(getattr(data_args, files))
            splits[split] = select_documents(documents, getattr(data_args, selection), selection)[:limit]
    return splits


def coref_model(
    model_args: FinetuningModelArguments, config, data_args: CorefDataArguments, head_args: CorefHeadArguments
):
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


def resolve_gap(trainer: CorefTrainer, examples: list, max_segment_length: int) -> dict[str, float]:
    """Resolves each GAP pronoun from the predicted clusters; writes gap_predictions.tsv and each example's decisions
    (gap_outcomes.json) and returns GAP's scores."""
    features = [encode_document(example.document, trainer.processing_class, max_segment_length)
                for example in examples]  # fmt: skip
    clusters = predict_documents(trainer.model, features, trainer.data_collator, keep_singletons=False)
    decisions = [gap_decision(example, found) for example, found in zip(examples, clusters)]
    metrics = {f"gap_{name}": value for name, value in {**gap_scores(decisions), **gap_answers(decisions)}.items()}
    metrics["gap_examples"] = len(decisions)
    save_outcomes(trainer, "gap", {"gap_overall_f1": gap_outcomes(decisions)})
    if path := output_file(trainer, "gap_predictions.tsv"):
        write_gap_predictions(path, examples, decisions)
    return metrics


def read_coreference(run: FineTuningRun) -> dict[str, Any]:
    """The documents to train and evaluate on, and GAP's examples."""
    gap_file = run.data_args.gap_file
    return {**read_splits(run.data_args, run.training_args), "gap": read_gap(Path(gap_file)) if gap_file else []}


def check_segment_length(run: FineTuningRun) -> None:
    """A --max_segment_length the encoder cannot hold is refused."""
    config = run.config
    encoder_config = config.encoder_config() if config.model_type == CorefConfig.model_type else config
    limit = model_positions(encoder_config, run.tokenizer)
    length = run.data_args.max_segment_length
    if limit is not None and length > limit:
        raise UserInputError(f"--max_segment_length {length} is above the {limit} tokens "
                             f"{run.model_args.model_name_or_path} can hold; use {limit} or less.")  # fmt: skip


def encode_documents(run: FineTuningRun) -> dict[str, Any]:
    """Documents become segments; a long training document gives a random window of them each time."""
    data_args = run.data_args
    encoded = {split: [encode_document(d, run.tokenizer, data_args.max_segment_length) for d in run.data[split]]
               for split in ("train", "eval") if split in run.data}  # fmt: skip
    if "train" in encoded:
        encoded["train"] = TrainingWindows(encoded["train"], data_args.max_train_segments)
    return encoded


def score_coreference(run: FineTuningRun, trainer: Trainer) -> dict[str, dict[str, float]]:
    """The CoNLL metrics with the predicted clusters in the input's layout and each document's sums of the metrics
    (eval_outcomes.json); GAP's pronouns resolved from the predicted clusters."""
    results = {}
    if run.training_args.do_eval:
        results["eval"] = trainer.evaluate()
        documents = [document.clusters for document in run.data["eval"]]
        outcomes = document_outcomes(zip(documents, trainer.eval_predictions), run.data_args.keep_singletons)
        save_outcomes(trainer, "eval", {"eval_conll_f1": outcomes})
        if path := output_file(trainer, f"eval_predictions.{run.data['eval'][0].layout}"):
            write_coref_documents(path, run.data["eval"], trainer.eval_predictions)
    if run.data["gap"]:
        results["gap"] = resolve_gap(trainer, run.data["gap"], run.data_args.max_segment_length)
    return results


# The CoNLL metrics (fractions), SpanBERT's headline the CoNLL F1 (the average of MUC, B-cubed and CEAF-phi4 F1);
# GAP's, resolved by the same model, in gap_results.json (its bias is None where either gender's F1 is 0).
COREFERENCE_REPORTS = {
    "coref": Report(tuple(f"{metric}_{part}" for metric in ("muc", "b_cubed", "ceaf_phi4")
                          for part in ("precision", "recall", "f1")) + ("conll_f1",), "conll_f1",
                    other=("documents",)),
    "gap": Report(tuple(f"{group}_{part}" for group in ("overall", "masculine", "feminine")
                        for part in ("precision", "recall", "f1")) + ("bias",), "overall_f1",
                  other=tuple(f"answered_{answer}" for answer in ("neither", "a", "b", "both")) + ("examples",),
                  split="gap"),
}  # fmt: skip


COREFERENCE = FineTuningTask(
    name="coref",
    task_arguments=(CorefDataArguments, CorefHeadArguments),
    training_arguments=CorefTrainingArguments,
    # --preset's settings, where the flags were not given.
    presets=lambda arguments, given: apply_defaults(arguments, COREF_PRESETS[arguments[1].preset], given),
    read=read_coreference,
    prepare=check_segment_length,
    # A saved coreference model keeps its task layers; an encoder gets new ones.
    build_model=lambda run: coref_model(run.model_args, run.config, run.data_args, run.arguments[2]),
    encode=encode_documents,
    collator=lambda run: DocumentCollator(run.tokenizer.pad_token_id if run.tokenizer.pad_token_id is not None else 0),
    trainer_class=CorefTrainer,
    trainer_arguments=lambda run: {"task_learning_rate": run.training_args.task_learning_rate,
                                   "eval_documents": run.data.get("eval", []),
                                   "keep_singletons": run.data_args.keep_singletons},  # fmt: skip
    score=score_coreference,
    model_card=lambda run: {"tasks": "coreference-resolution", "dataset": "coreference (CoNLL-2012 layout)"},
    reports=COREFERENCE_REPORTS,
)
