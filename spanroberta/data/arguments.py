"""The flags the pretraining data stage reads (`data.sources`), declared once: the tokenizer's and the corpus's.
run_pretraining.py's argument dataclasses extend these classes, so that the data stage receives the very fields
the command line sets, and nothing here imports the runs or pretraining."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..hub import ModelSource
from .masking_units import PMI_MIN_COUNT, PMI_VOCABULARY_SIZE

# The 256 bytes and RoBERTa's 5 special tokens come first; a byte-level BPE needs a few merges on top.
MIN_TRAINED_VOCAB_SIZE = 263


@dataclass
class TokenizerArguments(ModelSource):
    """The model flags the data stage reads: the tokenizer's source (`hub.ModelSource`), and the size of one trained
    on the corpus. run_pretraining.py's model arguments extend this class."""

    tokenizer_vocab_size: int = field(
        default=50265,
        metadata={"help": f"Vocabulary size of a newly trained byte-level BPE (RoBERTa's: 50265; at least "
                  f"{MIN_TRAINED_VOCAB_SIZE})."},
    )


@dataclass
class CorpusArguments:
    """The data flags the data stage reads, declared once here (run_pretraining.py's data arguments extend this
    class): the corpus and its evaluation split, how its blocks are made and masked, how many are kept, and the
    mode it is read in."""

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
    spacy_model: str | None = field(
        default=None,
        metadata={
            "help": "--masking named-entity/noun-phrase: the spaCy pipeline that finds the spans (an installed one, "
            "e.g. en_core_web_sm, or a pipeline folder); needs `pip install -e \".[spacy]\"` in the checkout."
        },
    )
    word_segmenter: str | None = field(
        default=None,
        metadata={
            "help": "Cut each line into words with this segmenter while the blocks are made (jieba: Chinese; "
            "fugashi: Japanese), so that word-based masking masks its words; needs `pip install -e \".[segmenters]\"` "
            "in the checkout. Without it, each CJK character is a word."
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
    pack_documents: bool = field(
        default=True,
        metadata={
            "help": "doc-sentences: pack the blocks of several documents into each row, positions restarting and "
            "attention kept within each block, so that short documents need no padding. false: one block per "
            "row, padded to the longest of the batch (the papers' DOC-SENTENCES batches)."
        },
    )
    dupe_factor: int = field(default=10, metadata={"help": "Copies with different masks under static masking."})
    max_seq_length: int = field(
        default=512, metadata={"help": "Block length in tokens, special tokens included (the demo: 128)."}
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep only this many training blocks."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep only this many evaluation blocks."})
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
