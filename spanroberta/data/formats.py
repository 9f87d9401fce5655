"""The four input formats of RoBERTa section 4.2: documents of tokenized sentences become pretraining blocks.

- `full-sentences`: the corpus as one stream of tokens, an extra separator token between documents,
  cut into blocks of exactly `max_seq_length` tokens (special tokens included).
- `doc-sentences`: the same within each document; a document's last block may be shorter. By default the
  blocks of several documents are then packed into one row of at most `max_seq_length` tokens, with their
  lengths in `sequence_lengths`: the collator restarts the position ids at each block and the model keeps
  every block to itself in attention, so a packed block is computed exactly as it would be alone, without the
  padding that short documents would otherwise need (see `pack_sequences`).
- `segment-pair`: BERT's input: two segments that can each hold several sentences, B following A in
  the document or, half of the time, taken from another document.
- `sentence-pair`: the same with one natural sentence per segment.

Pair formats carry the label of a pair objective: BERT's next sentence prediction (`nsp`, BERT section
3.1; label `next_sentence_label`, 0 when B follows A, 1 when B is random) or ALBERT's sentence order
prediction (`sop`, Lan et al. 2019 section 3.1; label `sentence_order_label`, 0 for the original order,
1 when the two consecutive segments are swapped).

Sentences too long for a block are cut into pieces, never dropped. Deviations from the papers:
- `full-sentences`/`doc-sentences` cut sentences at block boundaries so that blocks are full (fairseq's
  RoBERTa keeps sentences whole, so its blocks are "at most" 512 tokens);
- pair formats cut sentences into pieces of at most half a block, so that a pair always fits without
  BERT's truncation, and do not use BERT's `short_seq_prob`;
- a random segment B comes from another document of the same group of documents
  rather than of the whole corpus.

Blocks are built group by group: consecutive documents form a group (at most `documents_per_group` of them, and a
bounded number of characters: `groups.py`), packing never crosses groups, and a group's random choices come from a
generator seeded with (`seed`, group index). Results therefore do not depend on `num_proc`. How a group's documents are cut into segments and pairs
is `segments.py`'s; this module lays them out as blocks, with the tokenizer's special tokens.
"""

from __future__ import annotations

import bisect
import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets.fingerprint import Hasher
from transformers import PreTrainedTokenizerBase

from ..models.configuration_spanroberta import SENTENCE_LABELS
from ..objectives.recipes import INPUT_FORMATS, PAIR_FORMATS
from .corpus import DOCUMENTS_PER_BATCH
from .groups import MAX_GROUP_CHARACTERS, grouped
from .line_pieces import encode_lines
from .masking_units import split_unit_marks
from .segments import Document, packed_segments, segment_pairs
from .segmenters import TokenMarker


def tokenize_documents(
    documents: datasets.Dataset,
    tokenizer: PreTrainedTokenizerBase,
    num_proc: int | None = None,
    units: TokenMarker | None = None,
) -> datasets.Dataset:
    """Tokenizes each document's lines (no special tokens) into a `sentence_ids` column, one row per document, with
    the document's length in `characters` (what its group is bounded by: `groups.py`).

    With `units` (named-entity, noun-phrase or PMI masking, or a word segmenter), each id carries its mark
    (`masking_units`, `segmenters`)."""
    if "text" not in documents.column_names:
        raise ValueError(f"The documents have no 'text' column (their columns: {documents.column_names}).")
    return documents.map(
        _tokenize_batch,
        batched=True,
        num_proc=num_proc,
        input_columns=["text"],
        remove_columns=documents.column_names,
        fn_kwargs={"tokenizer": tokenizer, "units": units},
        batch_size=DOCUMENTS_PER_BATCH,
        # int32 halves the cache of the whole tokenized corpus (and the blocks' and a prepared folder's).
        features=datasets.Features({"sentence_ids": datasets.List(datasets.List(datasets.Value("int32"))),
                                    "characters": datasets.Value("int32")}),  # fmt: skip
        desc="Tokenizing documents",
    )


def _tokenize_batch(texts: list[str], tokenizer: PreTrainedTokenizerBase, units: TokenMarker | None) -> pa.Table:
    # Straight to Arrow from the int32 arrays: a long line's ids never become Python ints (about 36 bytes each).
    documents = token_arrays(texts, tokenizer, units)
    sentences = _list_array([sentence for document in documents for sentence in document], pa.int32())
    return pa.table({"sentence_ids": _lists_of(sentences, [len(document) for document in documents]),
                     "characters": pa.array([len(text) for text in texts], type=pa.int32())})  # fmt: skip


def tokenize_texts(
    texts: list[str], tokenizer: PreTrainedTokenizerBase, units: TokenMarker | None = None
) -> list[list[list[int]]]:
    """The documents of `token_arrays`, their sentences as lists of ints."""
    return [[sentence.tolist() for sentence in document] for document in token_arrays(texts, tokenizer, units)]


def token_arrays(
    texts: list[str], tokenizer: PreTrainedTokenizerBase, units: TokenMarker | None = None
) -> list[Document]:
    """Each text's non-blank lines, tokenized without special tokens (empty results dropped) into int32 arrays; with
    `units`, the ids carry their unit marks (`MaskingUnits.mark`). Each line is tokenized after a space, a long
    one in pieces, into the whole line's ids (`line_pieces`)."""
    lines_per_document = [[line for line in text.split("\n") if line.strip()] for text in texts]
    lines = [line.lstrip() for line in itertools.chain.from_iterable(lines_per_document)]
    encoded = encode_lines(lines, tokenizer)
    sentences = iter(units.mark(lines, encoded) if units is not None and lines else encoded)
    return [
        [sentence for sentence in itertools.islice(sentences, len(document_lines)) if len(sentence)]
        for document_lines in lines_per_document
    ]


def _list_array(arrays: list[np.ndarray], value_type: pa.DataType) -> pa.ListArray:
    """The arrays as one Arrow list array of `value_type` (one copy of their values)."""
    values = np.concatenate(arrays) if arrays else np.zeros(0, dtype=value_type.to_pandas_dtype())
    return _lists_of(pa.array(values, type=value_type), [len(array) for array in arrays])


def _lists_of(values: pa.Array, lengths: list[int]) -> pa.ListArray:
    """`values` cut into consecutive lists of `lengths`."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    # int32 offsets, as `datasets`' List feature has them (an overflow raises).
    return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), values)


@dataclass(frozen=True)
class SpecialTokenLayout:
    """Where a tokenizer puts its special tokens around one or two segments.

    `template` holds the special token ids with `None` where a segment goes, e.g. RoBERTa's pair
    `<s> A </s></s> B </s>` is `[0, None, 2, 2, None, 2]` and BERT's `[CLS] A [SEP] B [SEP]` is
    `[101, None, 102, None, 102]`. `token_type_ids` is parallel to it, or None for tokenizers that do not
    produce token type ids (RoBERTa: type_vocab_size 1).
    """

    template: tuple[int | None, ...]
    token_type_ids: tuple[int, ...] | None

    @classmethod
    def of(cls, tokenizer: PreTrainedTokenizerBase, pair: bool) -> SpecialTokenLayout:
        # transformers 5 fast tokenizers have no build_inputs_with_special_tokens, so the layout is read
        # off the encoding of a dummy input.
        encoding = tokenizer(
            "a", "b" if pair else None, return_special_tokens_mask=True, return_token_type_ids=True
        )
        template: list[int | None] = []
        type_ids: list[int] = []
        for token_id, is_special, type_id in zip(
            encoding["input_ids"], encoding["special_tokens_mask"], encoding["token_type_ids"]
        ):
            if is_special or not template or template[-1] is not None:
                template.append(token_id if is_special else None)
                type_ids.append(type_id)
        if template.count(None) != (2 if pair else 1):
            raise ValueError(
                f"{type(tokenizer).__name__} puts no special token between the two segments of a pair; "
                "the pair formats need one."
            )
        with_types = "token_type_ids" in tokenizer.model_input_names
        return cls(tuple(template), tuple(type_ids) if with_types else None)

    @property
    def num_special_tokens(self) -> int:
        return sum(token is not None for token in self.template)

    def encode(self, *segments: np.ndarray) -> dict[str, np.ndarray]:
        """The block's model inputs (int32): `input_ids`, and `token_type_ids` when the tokenizer uses them."""
        remaining = iter(segments)
        parts = [next(remaining) if token is None else np.array([token], dtype=np.int32) for token in self.template]
        block = {"input_ids": np.concatenate(parts).astype(np.int32, copy=False)}
        if self.token_type_ids is not None:
            lengths = [len(part) for part in parts]
            block["token_type_ids"] = np.repeat(np.array(self.token_type_ids, dtype=np.int32), lengths)
        return block


@dataclass(frozen=True)
class BlockBuilder:
    """Turns one group of tokenized documents into blocks; made (and its settings checked) by `block_builder`.

    `build_blocks` runs it over the groups of a dataset, `spanroberta.data.streaming` over the groups of a
    stream: both give the same blocks for the same documents.
    """

    input_format: str
    layout: SpecialTokenLayout
    budget: int
    separator: int | None
    label_name: str | None
    seed: int
    pack_documents: bool = False
    # The masking units the documents' ids were marked with (`tokenize_texts`), or None.
    units: TokenMarker | None = None

    @property
    def packs(self) -> bool:
        """Whether rows hold several packed blocks (doc-sentences with `pack_documents`)."""
        return self.pack_documents and self.input_format == "doc-sentences"

    @property
    def features(self) -> datasets.Features:
        features = {"input_ids": datasets.List(datasets.Value("int32"))}
        if self.layout.token_type_ids is not None:
            features["token_type_ids"] = datasets.List(datasets.Value("int32"))
        if self.label_name is not None:
            features[self.label_name] = datasets.Value("int64")
        if self.packs:
            features["sequence_lengths"] = datasets.List(datasets.Value("int32"))
        if self.units is not None:
            features[self.units.column] = datasets.List(datasets.Value("int8"))
        return datasets.Features(features)

    def blocks(self, group: list[list[Sequence[int]]], group_index: int) -> list[dict[str, np.ndarray | int]]:
        """The blocks of one group (documents of sentences of ids: lists, or arrays as `token_arrays` makes them),
        their token columns int32 arrays; its random choices come from a generator seeded with (seed, group_index).

        With `units`, the documents' ids carry marks, split off into its column (`masking_units`, or a segmenter's
        `word_starts`)."""
        documents = [[np.asarray(ids, dtype=np.int32) for ids in document] for document in group if document]
        blocks = self._blocks(documents, group_index)
        if self.units is None:
            return blocks
        return [split_unit_marks(block, self.units.stride, self.units.column) for block in blocks]

    def _blocks(self, documents: list[Document], group_index: int) -> list[dict[str, np.ndarray | int]]:
        if self.label_name is None:
            separator = self.separator if self.input_format == "full-sentences" else None
            blocks = [self.layout.encode(segment) for segment in packed_segments(documents, self.budget, separator)]
            return pack_sequences(blocks, self.budget + self.layout.num_special_tokens) if self.packs else blocks
        rng = np.random.default_rng([self.seed, group_index])
        pairs = segment_pairs(
            documents,
            rng,
            self.budget,
            one_sentence=self.input_format == "sentence-pair",
            sentence_order=self.label_name == SENTENCE_LABELS["sop"],
        )
        return [{**self.layout.encode(a, b), self.label_name: label} for a, b, label in pairs]


def block_builder(
    tokenizer: PreTrainedTokenizerBase,
    input_format: str,
    max_seq_length: int,
    pair_objective: str = "nsp",
    seed: int = 0,
    pack_documents: bool = True,
    units: TokenMarker | None = None,
) -> BlockBuilder:
    """Checks the settings of `build_blocks` against the tokenizer and returns the builder of a group's blocks.

    `pack_documents` packs doc-sentences blocks several to a row (see `pack_sequences`); other formats ignore it.
    `units`: the documents were tokenized with these masking units (`tokenize_documents`).
    """
    if input_format not in INPUT_FORMATS:
        raise ValueError(f"Unknown input_format {input_format!r}: expected one of {', '.join(INPUT_FORMATS)}.")
    if pair_objective not in SENTENCE_LABELS:
        raise ValueError(
            f"Unknown pair_objective {pair_objective!r}: expected one of {', '.join(SENTENCE_LABELS)}."
        )
    is_pair = input_format in PAIR_FORMATS
    layout = SpecialTokenLayout.of(tokenizer, pair=is_pair)
    # A pair needs at least one token in each segment.
    min_length = layout.num_special_tokens + (2 if is_pair else 1)
    if max_seq_length < min_length:
        raise ValueError(
            f"max_seq_length {max_seq_length} is too short for {input_format}: it must be >= {min_length}."
        )
    if input_format == "full-sentences" and tokenizer.sep_token_id is None:
        raise ValueError(
            f"full-sentences needs a separator token between documents; {type(tokenizer).__name__} has none."
        )
    return BlockBuilder(
        input_format=input_format,
        layout=layout,
        budget=max_seq_length - layout.num_special_tokens,
        separator=tokenizer.sep_token_id,
        label_name=SENTENCE_LABELS[pair_objective] if is_pair else None,
        seed=seed,
        pack_documents=pack_documents,
        units=units,
    )


def build_blocks(
    tokenized: datasets.Dataset,
    tokenizer: PreTrainedTokenizerBase,
    input_format: str,
    max_seq_length: int,
    pair_objective: str = "nsp",
    seed: int = 0,
    num_proc: int | None = None,
    documents_per_group: int = 1000,
    pack_documents: bool = True,
    units: TokenMarker | None = None,
) -> datasets.Dataset:
    """Packs or pairs the `sentence_ids` of `tokenized` (from `tokenize_documents`) into pretraining blocks.

    Each row is one block: `input_ids` with the tokenizer's special tokens, at most `max_seq_length`
    long (`full-sentences` blocks are exactly that long, but for the last block of each group: at most
    `documents_per_group` documents, `groups.py`); `token_type_ids` when the tokenizer produces them; and for pair
    formats the label of `pair_objective` ("nsp": `next_sentence_label`, "sop": `sentence_order_label`).
    Packed doc-sentences rows (`pack_documents`) hold several blocks and their `sequence_lengths`. With `units`
    (the ones `tokenize_documents` marked the ids with), rows carry their tokens' unit marks in `masking_units`.
    """
    builder = block_builder(tokenizer, input_format, max_seq_length, pair_objective, seed, pack_documents, units)
    if not {"sentence_ids", "characters"} <= set(tokenized.column_names):
        raise ValueError(
            f"The dataset has no 'sentence_ids' and 'characters' columns (its columns: {tokenized.column_names}); "
            "make it with tokenize_documents."
        )
    # Groups are decided in one process, from the documents' lengths, so that they do not depend on num_proc; the
    # blocks of each group are then built in parallel, each group read as an Arrow slice (`_group_documents`).
    characters = tokenized.select_columns(["characters"]).with_format("arrow")[:]["characters"].to_pylist()
    ends = list(itertools.accumulate(len(group) for group in grouped(characters, documents_per_group, int)))
    groups = datasets.Dataset.from_dict({"start": [0, *ends[:-1]], "stop": ends})
    fingerprint = Hasher.hash([tokenized._fingerprint, builder, documents_per_group, MAX_GROUP_CHARACTERS])
    return groups.map(
        _build_group_blocks,
        batched=True,
        batch_size=1,
        with_indices=True,
        num_proc=num_proc,
        remove_columns=groups.column_names,
        features=builder.features,
        fn_kwargs={"builder": builder, "documents": tokenized.select_columns(["sentence_ids"]).with_format("arrow")},
        new_fingerprint=fingerprint,
        # Where `datasets` would keep a map of `tokenized` (the groups are only their bounds): blocks of a
        # corpus on disk go to disk, not into memory.
        cache_file_name=_cache_file(tokenized, f"blocks-{fingerprint}"),
        desc=f"Building {input_format} blocks",
    )


def _cache_file(dataset: datasets.Dataset, name: str) -> str | None:
    """A cache file named `name` next to `dataset`'s own, or None for a dataset held in memory."""
    if not dataset.cache_files:
        return None
    return os.path.join(os.path.dirname(dataset.cache_files[0]["filename"]), f"cache-{name}.arrow")


def prepare_blocks(
    documents: datasets.Dataset,
    tokenizer: PreTrainedTokenizerBase,
    input_format: str,
    max_seq_length: int,
    *,
    num_proc: int | None = None,
    units: TokenMarker | None = None,
    **block_settings: Any,
) -> datasets.Dataset:
    """`tokenize_documents` then `build_blocks` (`block_settings`: its pair_objective, seed, documents_per_group and
    pack_documents): documents (a `text` column) to pretraining blocks, with the `masking_units` column of `units`
    (named-entity, noun-phrase or PMI masking) when given."""
    tokenized = tokenize_documents(documents, tokenizer, num_proc=num_proc, units=units)
    return build_blocks(
        tokenized, tokenizer, input_format, max_seq_length, num_proc=num_proc, units=units, **block_settings
    )


def _build_group_blocks(
    bounds: dict[str, list[int]], indices: list[int], builder: BlockBuilder, documents: datasets.Dataset
) -> pa.Table:
    group = documents[bounds["start"][0] : bounds["stop"][0]]["sentence_ids"]
    rows = builder.blocks(_group_documents(group), indices[0])
    schema = builder.features.arrow_schema
    return pa.table({name: _column([row[name] for row in rows], schema.field(name).type) for name in schema.names})


def _group_documents(group: pa.ChunkedArray) -> list[Document]:
    """The documents of a group, each sentence an int32 view of the Arrow buffer: a group is never turned into
    Python ints (about 36 bytes a token, where Arrow takes 4), nor copied."""
    return [document for chunk in group.chunks for document in _chunk_documents(chunk)]


def _chunk_documents(documents: pa.ListArray) -> list[Document]:
    sentences = documents.flatten()
    sentence_ends = np.cumsum(pc.list_value_length(sentences).to_numpy())
    ids = np.split(sentences.flatten().to_numpy(), sentence_ends[:-1]) if len(sentences) else []
    document_ends = np.cumsum(pc.list_value_length(documents).to_numpy())
    return [ids[start:end] for start, end in zip([0, *document_ends[:-1]], document_ends)]


def _column(values: list, arrow_type: pa.DataType) -> pa.Array:
    """One column of a group's blocks, in Arrow: arrays (or lists) of ids, or one label a block."""
    if not pa.types.is_list(arrow_type):
        return pa.array(values, type=arrow_type)
    value_type = arrow_type.value_type
    return _list_array([np.asarray(value, dtype=value_type.to_pandas_dtype()) for value in values], value_type)


def pack_sequences(blocks: list[dict[str, Sequence[int]]], row_length: int) -> list[dict[str, Sequence[int]]]:
    """Packs blocks (each at most `row_length` tokens) into as few rows of at most `row_length` tokens as
    best-fit decreasing finds: the longest block first, each into the fullest row it fits in. Each row holds the
    concatenated fields of its blocks and their `sequence_lengths`, in order.

    RoBERTa (section 4.2) kept the tokens per batch of DOC-SENTENCES constant by growing the batch when documents
    are short; packing keeps them constant in fixed-shape rows instead, as modern encoders do (Krell et al. 2021;
    ModernBERT's sequence packer). Best-fit decreasing leaves little room unused.
    """
    order = sorted(range(len(blocks)), key=lambda i: -len(blocks[i]["input_ids"]))
    rows: list[list[int]] = []  # block indices per row
    free: list[tuple[int, int]] = []  # (room left, row index), sorted
    for index in order:
        length = len(blocks[index]["input_ids"])
        slot = bisect.bisect_left(free, (length, -1))
        if slot == len(free):
            rows.append([index])
            room, row = row_length - length, len(rows) - 1
        else:
            room, row = free.pop(slot)
            rows[row].append(index)
            room -= length
        if room > 0:
            bisect.insort(free, (room, row))
    packed = []
    for members in rows:
        members.sort()  # blocks keep their corpus order within a row
        row = {name: _joined([blocks[i][name] for i in members]) for name in blocks[members[0]]}
        row["sequence_lengths"] = [len(blocks[i]["input_ids"]) for i in members]
        packed.append(row)
    return packed


def _joined(parts: list[Sequence[int]]) -> Sequence[int]:
    """The parts end to end: one array when they are arrays (the builder's blocks), else one list; a part alone is
    not copied (a long document's full blocks each fill a row)."""
    if len(parts) == 1:
        return parts[0]
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts)
    return list(itertools.chain.from_iterable(parts))
