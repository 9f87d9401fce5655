"""The dataclasses behind run_pretraining.py. Flag names follow transformers' run_mlm.py where they overlap."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..models.configuration_span_albert import CROSS_LAYER_SHARING
from ..models.configuration_spanroberta import MODEL_SIZES, SENTENCE_OBJECTIVES
from ..data.collator import MASKING_SCHEMES, check_masking_rates
from ..data.masking_units import PMI_MIN_COUNT, PMI_VOCABULARY_SIZE, UNIT_SCHEMES, check_unit_settings
from ..errors import UserInputError
from ..objectives.recipes import INPUT_FORMATS, RECIPES
from ..runs.arguments import ModelArguments, RunArguments
from .nonfinite import NONFINITE_LOSS_POLICIES
from ..runs.ranges import check_range
from ..runs.validation import min_block_length_for_targets

# The schemes an evaluation can mask with: the unit schemes need marks prepared with the data for that scheme.
EVAL_MASKING_SCHEMES = tuple(scheme for scheme in MASKING_SCHEMES if scheme not in UNIT_SCHEMES)

# The 256 bytes and RoBERTa's 5 special tokens come first; a byte-level BPE needs a few merges on top.
MIN_TRAINED_VOCAB_SIZE = 263


@dataclass
class PretrainingModelArguments(ModelArguments):
    """The model flags every script takes, and those of a pretrained encoder's shape and heads."""

    model_size: str = field(
        default="base",
        metadata={"help": "Encoder shape when training from scratch.", "choices": list(MODEL_SIZES)},
    )
    config_overrides: str | None = field(
        default=None,
        metadata={"help": "Config settings to override, e.g. 'num_hidden_layers=6,hidden_dropout_prob=0.0'."},
    )
    tokenizer_vocab_size: int = field(
        default=50265,
        metadata={"help": f"Vocabulary size of a newly trained byte-level BPE (RoBERTa's: 50265; at least "
                  f"{MIN_TRAINED_VOCAB_SIZE})."},
    )
    pad_vocab_to_multiple_of: int = field(
        default=64,
        metadata={"help": "Pad the embeddings and decoders to a multiple of this many ids (for the GPU's tensor "
                  "cores; a checkpoint's are resized, except ELECTRA's); the padded ids are never predicted. 1: "
                  "no padding."},
    )
    sbo: bool | None = field(
        default=None, metadata={"help": "Train the span boundary objective. Default: the recipe's."}
    )
    sbo_loss_weight: float = field(default=1.0, metadata={"help": "loss = MLM + w * SBO."})
    sentence_objective: str | None = field(
        default=None,
        metadata={"help": "Sentence-level head. Default: the recipe's.", "choices": list(SENTENCE_OBJECTIVES)},
    )
    embedding_size: int | None = field(
        default=None,
        metadata={
            "help": "ALBERT encoder with factorised embeddings of this size (V x E, then E x H; ALBERT section 3.1). "
            "Giving it (or --cross_layer_sharing) builds an ALBERT encoder under any recipe. Default: 128 for an "
            "ALBERT encoder (the albert recipe, or --cross_layer_sharing given). With --recipe electra: the embedding "
            "size the discriminator and the generator share (default: ELECTRA Table 6)."
        },
    )
    cross_layer_sharing: str | None = field(
        default=None,
        metadata={
            "help": "ALBERT encoder whose layers share all their parameters (ALBERT's scheme), only the attention, "
            "only the feed-forward network, or none (ALBERT Table 4). Giving it (or --embedding_size) builds an "
            "ALBERT encoder under any recipe. Default: all for an ALBERT encoder.",
            "choices": list(CROSS_LAYER_SHARING),
        },
    )
    generator_size: float | None = field(
        default=None,
        metadata={
            "help": "--recipe electra: the generator's hidden size as a fraction of the discriminator's (heads and "
            "FFN follow; same layers). Default: ELECTRA Table 6, 1/4 for small and large, 1/3 for base."
        },
    )
    rtd_loss_weight: float = field(
        default=50.0,
        metadata={"help": "--recipe electra: loss = generator MLM + lambda * discriminator loss (ELECTRA: 50)."},
    )
    generator_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "--recipe electra with --model_name_or_path (an ELECTRA discriminator): the generator to continue "
            "from, e.g. google/electra-base-generator. Default: the generator/ folder of --model_name_or_path."
        },
    )

    def __post_init__(self):
        _check_choice("--model_size", self.model_size, MODEL_SIZES)
        if self.sentence_objective is not None:
            _check_choice("--sentence_objective", self.sentence_objective, SENTENCE_OBJECTIVES)
        check_range("tokenizer_vocab_size", self.tokenizer_vocab_size, MIN_TRAINED_VOCAB_SIZE,
                    hint="The 256 bytes and the 5 special tokens take 261 ids; a useful vocabulary has thousands.")
        check_range("sbo_loss_weight", self.sbo_loss_weight, 0)
        check_range("pad_vocab_to_multiple_of", self.pad_vocab_to_multiple_of, 1)
        if self.cross_layer_sharing is not None:
            _check_choice("--cross_layer_sharing", self.cross_layer_sharing, CROSS_LAYER_SHARING)


@dataclass
class PretrainingDataArguments:
    train_file: str | None = field(
        default=None,
        metadata={
            "help": "Training text: .txt (a blank line separates documents, one sentence or paragraph a line), or "
            ".json/.jsonl/.csv/.parquet with a text column. Several files: comma-separated. Without any data "
            "argument, a tiny model is pretrained on the corpus bundled with spanroberta (the demo)."
        },
    )
    validation_file: str | None = field(default=None, metadata={"help": "Evaluation text, same formats."})
    dataset_name: str | None = field(default=None, metadata={"help": "A datasets Hub id, e.g. wikitext."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "Its configuration."})
    text_column_name: str = field(default="text", metadata={"help": "The column holding the text."})
    validation_split_percentage: int = field(
        default=5, metadata={"help": "Held-out share of the training documents when no validation set is given."}
    )
    recipe: str = field(
        default="spanbert", metadata={"help": "Objective and data defaults.", "choices": list(RECIPES)}
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
    spacy_model: str | None = field(
        default=None,
        metadata={
            "help": "--masking named-entity/noun-phrase: the spaCy pipeline that finds the spans (an installed one, "
            "e.g. en_core_web_sm, or a pipeline folder); needs `pip install -e \".[spacy]\"` in the checkout."
        },
    )
    pmi_vocabulary_size: int = field(
        default=PMI_VOCABULARY_SIZE,
        metadata={"help": "--masking pmi: n-grams in the masking vocabulary (Levine et al. 2021: 800K)."},
    )
    pmi_min_count: int = field(
        default=PMI_MIN_COUNT,
        metadata={"help": "--masking pmi: rank only n-grams seen at least this often (the paper: over 10 times)."},
    )
    input_format: str | None = field(
        default=None, metadata={"help": "Input format. Default: the recipe's.", "choices": list(INPUT_FORMATS)}
    )
    pack_documents: bool = field(
        default=True,
        metadata={
            "help": "doc-sentences: pack the blocks of several documents into each row, positions restarting and "
            "attention kept within each block, so that short documents need no padding. false: one block per "
            "row, padded to the longest of the batch (the papers' DOC-SENTENCES batches)."
        },
    )
    static_masking: bool | None = field(
        default=None,
        metadata={"help": "Fix each copy's mask at preprocessing (RoBERTa's static baseline). Default: recipe's."},
    )
    dupe_factor: int = field(default=10, metadata={"help": "Copies with different masks under static masking."})
    max_seq_length: int = field(
        default=512, metadata={"help": "Block length in tokens, special tokens included (the demo: 128)."}
    )
    # argparse formats help texts with %: a percent sign is written %%.
    mlm_probability: float = field(default=0.15, metadata={"help": "Share of tokens to predict (RoBERTa: 15%%)."})
    geometric_p: float = field(default=0.2, metadata={"help": "Span lengths ~ Geo(p), 0 < p <= 1 (SpanBERT: 0.2)."})
    max_span_length: int = field(default=10, metadata={"help": "Longest span in words (SpanBERT: 10)."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep only this many training blocks."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep only this many evaluation blocks."})
    overwrite_cache: bool = field(
        default=False, metadata={"help": "Redo the tokenizing and packing instead of reusing the datasets cache."}
    )
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": "Processes for tokenizing."})
    documents_per_group: int = field(
        default=1000,
        metadata={
            "help": "Documents per packing group (at most: a group also holds at most 2^24 characters): blocks never "
            "span two groups, and a pair's random segment comes from its group. In streaming mode, groups are what "
            "processes and workers share out."
        },
    )
    prepared_data_dir: str | None = field(
        default=None,
        metadata={
            "help": "Prepared mode: tokenize and pack once into sharded Arrow files in this folder (with "
            "--preprocessing_num_workers processes), memory-mapped during training; later runs given the same "
            "folder reuse it (their settings must match). A prepared folder alone is enough data to train."
        },
    )
    prepare_only: bool = field(
        default=False, metadata={"help": "Prepare --prepared_data_dir and exit without training."}
    )
    streaming: bool = field(
        default=False,
        metadata={
            "help": "Streaming mode: read, tokenize and pack the corpus on the fly (datasets streaming), split "
            "between processes and DataLoader workers; nothing is cached. Needs --max_steps and a tokenizer."
        },
    )
    shuffle_buffer_size: int = field(
        default=10_000, metadata={"help": "Streaming mode: blocks in each reader's shuffle buffer."}
    )

    def __post_init__(self):
        _check_choice("--recipe", self.recipe, RECIPES)
        if self.masking is not None:
            _check_choice("--masking", self.masking, MASKING_SCHEMES)
        if self.eval_masking is not None:
            _check_choice("--eval_masking", self.eval_masking, EVAL_MASKING_SCHEMES)
        if self.input_format is not None:
            _check_choice("--input_format", self.input_format, INPUT_FORMATS)
        check_unit_settings(self.masking, self.spacy_model, self.streaming)
        if self.streaming and self.prepared_data_dir:
            raise UserInputError("--streaming and --prepared_data_dir are two ways to read the corpus: give one.")
        if self.prepare_only and not self.prepared_data_dir:
            raise UserInputError("--prepare_only needs --prepared_data_dir, the folder to prepare.")
        for flag in ("documents_per_group", "shuffle_buffer_size", "max_seq_length", "dupe_factor", "max_span_length",
                     "max_train_samples", "max_eval_samples", "pmi_vocabulary_size", "pmi_min_count"):  # fmt: skip
            check_range(flag, getattr(self, flag), 1)
        check_masking_rates(self.mlm_probability, self.geometric_p, flag_prefix="--")
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
            "the reason. Needs torchao: `pip install torchao==0.18.0`. Not yet run on a GPU."
        },
    )

    def __post_init__(self):
        _check_choice("--on_nonfinite_loss", self.on_nonfinite_loss, NONFINITE_LOSS_POLICIES)
        if self.logging_nan_inf_filter is None:
            self.logging_nan_inf_filter = self.on_nonfinite_loss == "skip"
        super().__post_init__()


def _check_choice(flag: str, value: str, valid) -> None:
    if value not in valid:
        raise UserInputError(f"{flag} {value!r} does not exist; valid values: {', '.join(valid)}.")
