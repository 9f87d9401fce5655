"""The dataclasses behind run_pretraining.py. Flag names follow transformers' run_mlm.py where they overlap."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..data.arguments import MIN_TRAINED_VOCAB_SIZE, CorpusArguments, TokenizerArguments
from ..data.collator import MASKING_SCHEMES, check_masking_rates
from ..data.masking import MLM_PROBABILITY
from ..data.masking_units import UNIT_SCHEMES, check_unit_settings
from ..data.segmenters import check_segmenter_settings
from ..errors import UserInputError
from ..models.configuration_spanroberta import SENTENCE_OBJECTIVES
from ..objectives.base import ObjectiveSettings
from ..objectives.recipes import INPUT_FORMATS, RECIPES
from ..runs.arguments import ModelArguments, RunArguments
from ..runs.ranges import check_choices, check_range
from ..runs.validation import min_block_length_for_targets
from .nonfinite import NONFINITE_LOSS_POLICIES

# The schemes an evaluation can mask with: the unit schemes need marks prepared with the data for that scheme.
EVAL_MASKING_SCHEMES = tuple(scheme for scheme in MASKING_SCHEMES if scheme not in UNIT_SCHEMES)


@dataclass
class PretrainingModelArguments(ObjectiveSettings, TokenizerArguments, ModelArguments):
    """The model flags every script takes (`ModelArguments`), those the objectives read (`ObjectiveSettings`: the
    encoder's shape and heads), the tokenizer's (`TokenizerArguments`), and the recipe's heads overridden."""

    config_overrides: str | None = field(
        default=None,
        metadata={"help": "Config settings to override, e.g. 'num_hidden_layers=6,hidden_dropout_prob=0.0'."},
    )
    sbo: bool | None = field(
        default=None, metadata={"help": "Train the span boundary objective. Default: the recipe's."}
    )
    sentence_objective: str | None = field(
        default=None,
        metadata={"help": "Sentence-level head. Default: the recipe's.", "choices": list(SENTENCE_OBJECTIVES)},
    )

    def __post_init__(self):
        check_choices(self)
        check_range("tokenizer_vocab_size", self.tokenizer_vocab_size, MIN_TRAINED_VOCAB_SIZE,
                    hint="The 256 bytes and the 5 special tokens take 261 ids; a useful vocabulary has thousands.")
        check_range("sbo_loss_weight", self.sbo_loss_weight, 0)
        check_range("pad_vocab_to_multiple_of", self.pad_vocab_to_multiple_of, 1)


@dataclass
class PretrainingDataArguments(CorpusArguments):
    """The corpus and how it is read (`CorpusArguments`, the data stage's), the recipe, and how it masks."""

    recipe: str = field(
        # A live view: a recipe that an objective module registers after this import is a choice too.
        default="spanbert", metadata={"help": "Objective and data defaults.", "choices": RECIPES.keys()}
    )
    masking: str | None = field(
        default=None, metadata={"help": "Masking scheme. Default: the recipe's.", "choices": list(MASKING_SCHEMES)}
    )
    eval_masking: str | None = field(
        default=None,
        metadata={
            "help": "Masking of the held-out blocks that the evaluation predicts. Default: --masking. Runs that train "
            "with different schemes but evaluate with the same one (and the same --seed and data) predict the "
            "same masked tokens, so their eval_mlm_accuracy compares them.",
            "choices": list(EVAL_MASKING_SCHEMES),
        },
    )
    input_format: str | None = field(
        default=None, metadata={"help": "Input format. Default: the recipe's.", "choices": list(INPUT_FORMATS)}
    )
    static_masking: bool | None = field(
        default=None,
        metadata={"help": "Fix each copy's mask at preprocessing (RoBERTa's static baseline). Default: recipe's."},
    )
    # argparse formats help texts with %: a percent sign is written %%.
    mlm_probability: float = field(default=MLM_PROBABILITY,
                                   metadata={"help": "Share of tokens to predict (RoBERTa: 15%%)."})
    # Of the masked tokens, the shares replaced by the mask token and by a random token; the rest stay unchanged
    # (BERT section 3.1). A recipe sets other shares through its flag defaults (electra: 85%, 0%).
    mask_replace_prob: float = field(
        default=0.8, metadata={"help": "Share of the masked tokens replaced by the mask token (BERT: 80%%)."}
    )
    random_replace_prob: float = field(
        default=0.1, metadata={"help": "Share of the masked tokens replaced by a random token (BERT: 10%%); the rest "
                               "stay unchanged."}
    )
    geometric_p: float = field(default=0.2, metadata={"help": "Span lengths ~ Geo(p), 0 < p <= 1 (SpanBERT: 0.2)."})
    max_span_length: int = field(default=10, metadata={"help": "Longest span in words (SpanBERT: 10)."})
    overwrite_cache: bool = field(
        default=False, metadata={"help": "Redo the tokenizing and packing instead of reusing the datasets cache."}
    )
    prepare_only: bool = field(
        default=False, metadata={"help": "Prepare --prepared_data_dir and exit without training."}
    )

    def __post_init__(self):
        check_choices(self)
        check_unit_settings(self.masking, self.spacy_model, self.streaming)
        check_segmenter_settings(self.word_segmenter, self.masking)
        if self.streaming and self.prepared_data_dir:
            raise UserInputError("--streaming and --prepared_data_dir are two ways to read the corpus: give one.")
        if self.prepare_only and not self.prepared_data_dir:
            raise UserInputError("--prepare_only needs --prepared_data_dir, the folder to prepare.")
        for flag in ("documents_per_group", "shuffle_buffer_size", "max_seq_length", "dupe_factor", "max_span_length",
                     "max_train_samples", "max_eval_samples", "pmi_vocabulary_size", "pmi_min_count"):  # fmt: skip
            check_range(flag, getattr(self, flag), 1)
        check_masking_rates(self.mlm_probability, self.geometric_p, flag_prefix="--")
        check_range("mask_replace_prob", self.mask_replace_prob, 0, 1)
        check_range("random_replace_prob", self.random_replace_prob, 0, 1 - self.mask_replace_prob,
                    hint="the two shares of the masked tokens sum to at most 1")
        check_range("validation_split_percentage", self.validation_split_percentage, 0, 99)
        shortest = min_block_length_for_targets(self.mlm_probability)
        if self.max_seq_length < shortest:
            # The masking budget is mlm_probability x a block's tokens: shorter blocks mostly have no target.
            raise UserInputError(
                f"--max_seq_length {self.max_seq_length} leaves at most {max(self.max_seq_length - 2, 0)} token(s) a "
                f"block to predict, and --mlm_probability {self.mlm_probability} masks that share of them: most "
                f"batches would have no masked target, and nothing to learn. Use --max_seq_length {shortest} or more."
            )

    @property
    def is_demo(self) -> bool:
        return self.train_file is None and self.dataset_name is None and self.prepared_data_dir is None


@dataclass
class PretrainingArguments(RunArguments):
    """TrainingArguments with the RoBERTa paper's optimiser (RoBERTa section 3.1 and appendix Table 9): AdamW
    with beta2 0.98, epsilon 1e-6, weight decay 0.01, peak learning rate 6e-4 (base), linear warm-up over
    24K of 500K steps (4.8%) then linear decay."""

    learning_rate: float = field(default=6e-4, metadata={"help": "Peak learning rate (RoBERTa-base: 6e-4)."})
    adam_beta2: float = field(default=0.98, metadata={"help": "RoBERTa: 0.98, for stability with large batches."})
    adam_epsilon: float = field(default=1e-6, metadata={"help": "RoBERTa: 1e-6."})
    weight_decay: float = field(default=0.01, metadata={"help": "RoBERTa and SpanBERT: 0.01."})
    warmup_steps: float = field(
        default=0.048,
        metadata={"help": "Warm-up steps, or a fraction of training below 1 (RoBERTa: 24K/500K). A default (the "
                  "recipe's, e.g. ELECTRA's 10,000) takes at most a tenth of the run."},
    )
    # The datasets handed to the Trainer are spanroberta's own; their fields are what the collator needs.
    remove_unused_columns: bool = field(default=False, metadata={"help": "Keep every dataset column."})
    on_nonfinite_loss: str = field(
        default="stop",
        metadata={
            "help": "When the loss is NaN or infinite: stop with an error naming the step, or skip that step's "
            "update. Either way, weights holding NaN or inf are never saved.",
            "choices": list(NONFINITE_LOSS_POLICIES),
        },
    )
    logging_nan_inf_filter: bool | None = field(
        default=None,
        metadata={
            "help": "Log a NaN or infinite loss as the window's mean so far (transformers' filter, which waits for "
            "the device at every step). Default: on under --on_nonfinite_loss skip, whose skipped losses it keeps "
            "out of the logs; off under stop, which ends the run before such a loss is logged."
        },
    )

    fresh_heads_learning_rate: float | None = field(
        default=None,
        metadata={
            "help": "Peak learning rate of the heads that start fresh on a checkpoint without them (the masked-LM "
            "head's transform and bias of a headless BertModel, say, or the SBO head), which the run logs as "
            "starting fresh; the encoder and everything else the checkpoint held keep --learning_rate. A fresh "
            "head at a small continuation rate learns slowly, and its random outputs send noise back into the "
            "encoder meanwhile. Default: --learning_rate for every weight."
        },
    )

    adam_bias_correction: bool | None = field(
        default=None,
        metadata={
            "help": "Correct the bias of Adam's moment estimates. Default: off for --recipe electra (ELECTRA's and "
            "BERT's Adam), on otherwise (the Trainer's AdamW)."
        },
    )

    fp8: bool = field(
        default=False,
        metadata={
            "help": "Train the linear layers of the encoder's layers with float8 matmuls (torchao's float8 "
            "training, tensorwise scaling; the embeddings and heads stay in bf16), with --bf16 true on one NVIDIA "
            "GPU of compute capability 8.9 or newer (Ada, Hopper), or several under DDP; refused elsewhere, with "
            "the reason. Turns --torch_compile on, under which float8 layers pay (refused with --torch_compile "
            "false). Needs torchao: `pip install torchao==0.18.0`. Not yet run on a GPU."
        },
    )

    def __post_init__(self):
        check_choices(self)
        if self.logging_nan_inf_filter is None:
            self.logging_nan_inf_filter = self.on_nonfinite_loss == "skip"
        super().__post_init__()
