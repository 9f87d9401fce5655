"""The units of named-entity, noun-phrase and PMI masking, found once when the corpus is tokenized and stored with
the blocks, so that masking itself stays a fast, pure function of (ids, word starts, units, row key).

- `SpacyUnits`: named entities (`doc.ents`) or noun phrases (`doc.noun_chunks`) of a spaCy pipeline, as
  SpanBERT section 5.1 found them (Table 6, "Named Entities" and "Noun Phrases"). spaCy is an optional extra:
  `pip install -e ".[spacy]"` in the checkout, then a pipeline (`python -m spacy download en_core_web_sm`, or a
  folder).
- `PmiUnits`: the word n-grams (n = 2..5) whose words co-occur far more often than chance, ranked by PMI_n on
  the training corpus itself (Levine et al. 2021, "PMI-Masking: Principled Masking of Correlated Spans",
  section 3).

A unit is a run of whole words (the tokenizer's words, as whole-word masking has them). Each token gets a mark:
`OUTSIDE_UNIT`, `UNIT_START` or `INSIDE_UNIT` (`spanroberta.data.masking`). The block builder only slices and
concatenates token ids, so the marks ride through it inside the ids, `id + mark * stride` (`unit_stride`), and
are split off into a `masking_units` column when the blocks are made (`split_unit_marks`): special tokens and
separators the builder inserts carry no mark, and a unit cut by a block boundary keeps its INSIDE_UNIT marks,
which `masking.unit_mask` reads as the start of what is left of it.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import random
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path

import datasets
import numpy as np
from transformers import PreTrainedTokenizerBase

from ..errors import UserInputError, require_package
from .line_pieces import in_pieces
from .masking import INSIDE_UNIT, OUTSIDE_UNIT, UNIT_START, word_start_table

logger = logging.getLogger(__name__)

SPACY_SCHEMES = ("named-entity", "noun-phrase")
UNIT_SCHEMES = (*SPACY_SCHEMES, "pmi")
UNITS_COLUMN = "masking_units"
# Levine et al. section 3 and their released vocabularies: n-grams of 2 to 5 words seen more than 10 times, 800K
# of them, half bigrams, a quarter trigrams, an eighth each 4-grams and 5-grams.
PMI_NGRAM_LENGTHS = (2, 3, 4, 5)
PMI_LENGTH_SHARES = {2: 0.5, 3: 0.25, 4: 0.125, 5: 0.125}
PMI_VOCABULARY_SIZE = 800_000
PMI_MIN_COUNT = 11

Word = tuple[int, ...]


def unit_stride(tokenizer: PreTrainedTokenizerBase) -> int:
    """The power of two above every id: `id + mark * stride` holds a mark (0-2) in int32 for any vocabulary."""
    return 1 << max(len(tokenizer) - 1, 1).bit_length()


def split_unit_marks(
    block: dict[str, np.ndarray | int], stride: int, column: str = UNITS_COLUMN
) -> dict[str, np.ndarray | int]:
    """A block made from marked ids, with its plain `input_ids` (int32) and their marks in `column` (int8): the
    units' `UNITS_COLUMN`, or a segmenter's word starts (`segmenters.WordSegmenter`)."""
    marked = np.asarray(block["input_ids"], dtype=np.int32)
    return {**block, "input_ids": marked % stride, column: (marked // stride).astype(np.int8)}


class MaskingUnits:
    """Finds the units of tokenized lines. Subclasses say where units come from (`unit_index`)."""

    name: str
    column = UNITS_COLUMN

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer
        self.stride = unit_stride(tokenizer)
        self.word_table = word_start_table(tokenizer).numpy()

    def mark(self, lines: list[str], sentences: list[np.ndarray]) -> list[np.ndarray]:
        """The token ids of each line (`sentences`, tokenized from `lines` by `line_pieces.encode_lines`), each plus
        its mark x stride (int32)."""
        return [
            (np.asarray(ids, dtype=np.int64) + self.stride * self._marks(ids, units)).astype(np.int32)
            for ids, units in zip(sentences, self.unit_index(lines, sentences))
        ]

    def unit_index(self, lines: list[str], sentences: list[np.ndarray]) -> Iterable[np.ndarray]:
        """Per line, the unit of each token (numbered in line order; -1 outside units)."""
        raise NotImplementedError

    def _marks(self, ids: np.ndarray, token_unit: np.ndarray) -> np.ndarray:
        """Marks of a line's tokens; a word belongs to the first unit any of its tokens is in, so units are
        runs of whole words (a spaCy token can be part of a word: "Obama" in "Obama's")."""
        if not len(ids):
            return np.zeros(0, dtype=np.int64)
        starts = self.word_table[np.asarray(ids)]
        starts[0] = True
        word_first = np.flatnonzero(starts)
        outside = np.iinfo(np.int64).max
        word_unit = np.minimum.reduceat(np.where(token_unit < 0, outside, token_unit), word_first)
        unit = word_unit[np.cumsum(starts) - 1]
        in_unit = unit != outside
        first = in_unit & np.concatenate([[True], unit[1:] != unit[:-1]])
        return np.where(first, UNIT_START, np.where(in_unit, INSIDE_UNIT, OUTSIDE_UNIT))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


class SpacyUnits(MaskingUnits):
    """Named entities or noun phrases found by a spaCy pipeline (SpanBERT section 5.1 used spaCy too).

    What is pickled (for `datasets`' and DataLoader workers, and `datasets`' cache fingerprints) is the pipeline's
    name and what identifies it (its meta's name and version, its components, the spaCy version), not the
    pipeline, which each process loads on first use. A pipeline folder changed in place under the same name and
    version needs --overwrite_cache.
    """

    def __init__(self, tokenizer: PreTrainedTokenizerBase, scheme: str, spacy_model: str) -> None:
        super().__init__(tokenizer)
        self.scheme, self.spacy_model = scheme, spacy_model
        self.name = units_name(scheme, spacy_model)
        self._nlp = load_spacy_pipeline(spacy_model, scheme)
        meta = self._nlp.meta
        self.pipeline_identity = (meta.get("name"), meta.get("version"), list(self._nlp.pipe_names), _spacy_version())

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_nlp": None}

    def unit_index(self, lines: list[str], sentences: list[np.ndarray]) -> Iterable[np.ndarray]:
        if self._nlp is None:
            self._nlp = load_spacy_pipeline(self.spacy_model, self.scheme)
        # Piece by piece, as the ids were tokenized (`line_pieces`): the tokenizer and spaCy see a bounded text at a
        # time (spaCy refuses one over nlp.max_length, a million characters by default). No unit spans two pieces.
        for expected, pieces in zip(sentences, in_pieces(lines, self._piece_spans)):
            if not np.array_equal(np.concatenate([ids for ids, _, _ in pieces]), expected):
                raise ValueError("The tokenizer gives other ids with offsets than without; cannot align spaCy spans.")
            numbered, earlier = [], 0
            for _, token_span, spans in pieces:
                numbered.append(np.where(token_span < 0, -1, token_span + earlier))
                earlier += spans
            yield np.concatenate(numbered)

    def _piece_spans(self, pieces: list[str]) -> list[tuple[np.ndarray, np.ndarray, int]]:
        """Per piece: its ids, the span (entity or noun phrase) each of its tokens overlaps (-1: none), the number
        of its spans."""
        encodings = self.tokenizer(pieces, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        found = []
        for doc, ids, offsets in zip(self._nlp.pipe(pieces), encodings["input_ids"], encodings["offset_mapping"]):
            spans = doc.ents if self.scheme == "named-entity" else _noun_chunks(doc, self.spacy_model)
            bounds = np.array([(s.start_char, s.end_char) for s in spans if s.text.strip()], dtype=np.int64)
            token_span = _overlapping_span(np.asarray(offsets, dtype=np.int64).reshape(-1, 2), bounds.reshape(-1, 2))
            found.append((np.asarray(ids, dtype=np.int32), token_span, len(bounds)))
        return found


def _spacy_version() -> str:
    import spacy

    return spacy.__version__


def _noun_chunks(doc, spacy_model: str) -> list:
    try:
        return list(doc.noun_chunks)
    except ValueError as error:  # spaCy raises it when no component set the dependency parse
        raise UserInputError(
            f"--masking noun-phrase reads doc.noun_chunks, which needs a dependency parse, and the spaCy pipeline "
            f"{spacy_model!r} sets none ({error}). Use a pipeline with a parser, e.g. en_core_web_sm."
        ) from None


def _overlapping_span(offsets: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """For each token's [start, end) characters, the index of the (sorted, disjoint) span it overlaps, or -1."""
    if not len(spans):
        return np.full(len(offsets), -1)
    first_ending_after = np.searchsorted(spans[:, 1], offsets[:, 0], side="right")
    candidate = np.minimum(first_ending_after, len(spans) - 1)
    overlaps = (first_ending_after < len(spans)) & (spans[candidate, 0] < offsets[:, 1])
    return np.where(overlaps, candidate, -1)


def load_spacy_pipeline(spacy_model: str, scheme: str):
    """`spacy.load(spacy_model)`, with a one-paragraph error saying what to install when it cannot be loaded."""
    require_package(
        "spacy", f"--masking {scheme}",
        install="`pip install -e \".[spacy]\"` in the checkout (or `pip install spacy`), then an "
        "English pipeline, e.g. `python -m spacy download en_core_web_sm`, passed as --spacy_model en_core_web_sm",
    )  # fmt: skip
    import spacy

    try:
        nlp = spacy.load(spacy_model)
    except OSError as error:
        raise UserInputError(
            f"--spacy_model {spacy_model!r} is neither an installed spaCy pipeline nor a pipeline folder ({error}). "
            f"Install one, e.g. `python -m spacy download en_core_web_sm`, or give the folder of a pipeline saved "
            "with `nlp.to_disk`."
        ) from None
    if scheme == "named-entity" and not {"ner", "entity_ruler"} & set(nlp.pipe_names):
        logger.warning(
            "The spaCy pipeline %r has no ner or entity_ruler component (its components: %s): unless one of them "
            "sets doc.ents, it finds no entity and --masking named-entity masks whole words only.",
            spacy_model,
            nlp.pipe_names,
        )
    return nlp


class PmiUnits(MaskingUnits):
    """PMI-Masking's units (Levine et al. 2021): the n-grams of `ngrams` where they occur in a line.

    Where two n-grams of the vocabulary overlap in a line, the longer one that contains the other wins, and of
    two that overlap without containment one is chosen at random, as the paper's procedure says. Deviation: the
    choice is made once, when the blocks are made (seeded by the line's ids), rather than at every masking.
    """

    def __init__(self, tokenizer: PreTrainedTokenizerBase, ngrams: dict[tuple[Word, ...], float], name: str) -> None:
        super().__init__(tokenizer)
        self.ngrams = ngrams
        self.name = name

    def save(self, path: str | os.PathLike) -> None:
        """Writes the vocabulary, best first, one n-gram a line: its PMI_n, a tab, its text (for the record)."""
        best_first = sorted(self.ngrams.items(), key=lambda item: -item[1])
        lines = [f"{score:.4f}\t{self.tokenizer.decode(sum(ngram, ())).strip()}" for ngram, score in best_first]
        Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")

    @classmethod
    def from_corpus(
        cls,
        sentences: Iterable[Sequence[int]],
        tokenizer: PreTrainedTokenizerBase,
        vocabulary_size: int = PMI_VOCABULARY_SIZE,
        min_count: int = PMI_MIN_COUNT,
    ) -> PmiUnits:
        """The `vocabulary_size` best n-grams of the tokenized `sentences` (token id lists, one per line) seen at
        least `min_count` times, ranked by PMI_n per length and mixed in PMI_LENGTH_SHARES (section 3)."""
        word_table = word_start_table(tokenizer).numpy()
        # Words are counted by number (one per distinct word), so the corpus takes a pointer a word in memory.
        numbers: dict[Word, int] = {}
        lines = [[numbers.setdefault(word, len(numbers)) for word in _words(ids, word_table)] for ids in sentences]
        counts, positions = ngram_counts(lines, min_count)
        words = list(numbers)
        ngrams = {
            tuple(words[number] for number in ngram): score
            for ngram, score in pmi_vocabulary(counts, positions, vocabulary_size).items()
        }
        candidates = sum(len(counts[n]) for n in PMI_NGRAM_LENGTHS)
        logger.info(
            "PMI-Masking vocabulary: the best %d of %d n-grams seen %d+ times.", len(ngrams), candidates, min_count
        )
        return cls(tokenizer, ngrams, units_name("pmi", None, vocabulary_size, min_count))

    def unit_index(self, lines: list[str], sentences: list[np.ndarray]) -> Iterable[np.ndarray]:
        for ids in sentences:
            words = _words(ids, self.word_table)
            unit_of_word = np.full(len(words), -1, dtype=np.int64)
            # The hash of a tuple of ints is the same in every process and run (unlike a string's).
            seed = hash(tuple(np.asarray(ids).tolist()))
            for number, (start, end) in enumerate(self._units(words, random.Random(seed))):
                unit_of_word[start:end] = number
            yield np.repeat(unit_of_word, [len(word) for word in words])

    def _units(self, words: list[Word], rng: random.Random) -> list[tuple[int, int]]:
        """The [start, end) word ranges of the units of a line, in order, not overlapping."""
        found = [
            (start, start + n)
            for n in PMI_NGRAM_LENGTHS
            for start in range(len(words) - n + 1)
            if tuple(words[start : start + n]) in self.ngrams
        ]
        contained = {a for a in found for b in found if a != b and b[0] <= a[0] and a[1] <= b[1]}
        candidates = [span for span in found if span not in contained]
        rng.shuffle(candidates)
        taken: list[tuple[int, int]] = []
        for start, end in candidates:
            if all(end <= s or e <= start for s, e in taken):
                taken.append((start, end))
        return sorted(taken)


def _words(ids: Sequence[int], word_table: np.ndarray) -> list[Word]:
    """A line's token ids cut into words (tuples of ids); the first token always starts one."""
    ids = np.asarray(ids, dtype=np.int64)
    if not len(ids):
        return []
    starts = word_table[ids]
    starts[0] = True
    return [tuple(word.tolist()) for word in np.split(ids, np.flatnonzero(starts)[1:])]


def ngram_counts(lines: list[list[Hashable]], min_count: int) -> tuple[dict[int, Counter], dict[int, int]]:
    """Counts of the word n-grams (n = 1..5) within lines, keeping those seen at least `min_count` times, and the
    number of n-gram positions per length (what a probability p(s) = count(s) / positions divides by).

    An n-gram is counted only when its first and last n-1 words are frequent (a-priori pruning: an n-gram is never
    more frequent than its parts), so memory grows with the frequent n-grams, not with all n-grams.
    """
    counts: dict[int, Counter] = {}
    positions: dict[int, int] = {}
    for n in range(1, max(PMI_NGRAM_LENGTHS) + 1):
        counter: Counter = Counter()
        positions[n] = sum(max(len(words) - n + 1, 0) for words in lines)
        shorter = counts.get(n - 1)
        for words in lines:
            for start in range(len(words) - n + 1):
                ngram = tuple(words[start : start + n])
                if shorter is None or (ngram[:-1] in shorter and ngram[1:] in shorter):
                    counter[ngram] += 1
        counts[n] = Counter({ngram: count for ngram, count in counter.items() if count >= min_count})
    return counts, positions


def pmi_n(ngram: tuple[Hashable, ...], counts: dict[int, Counter], positions: dict[int, int]) -> float:
    """Levine et al.'s PMI_n (section 3, equation 3): log p(w1..wn) / prod p(s) for the segmentation s of the
    n-gram into two or more contiguous parts that makes it smallest, i.e. the part-wise product that best explains
    the n-gram. (The lists AI21 released multiply in p(w1..wn) once more; this is the paper's measure.)"""
    n = len(ngram)

    def log_p(part: tuple[Hashable, ...]) -> float:
        return math.log(counts[len(part)][part] / positions[len(part)])

    best_parts = max(
        sum(log_p(ngram[a:b]) for a, b in itertools.pairwise((0, *cuts, n)))
        for k in range(1, n)
        for cuts in itertools.combinations(range(1, n), k)
    )
    return log_p(ngram) - best_parts


def pmi_vocabulary(
    counts: dict[int, Counter], positions: dict[int, int], vocabulary_size: int
) -> dict[tuple[Hashable, ...], float]:
    """The masking vocabulary: per length n, the top PMI_LENGTH_SHARES[n] x `vocabulary_size` n-grams by PMI_n
    (fewer when the corpus has fewer frequent n-grams of that length), with their scores."""
    vocabulary = {}
    for n in PMI_NGRAM_LENGTHS:
        scored = sorted(((pmi_n(g, counts, positions), g) for g in counts[n]), key=lambda item: -item[0])
        vocabulary.update({ngram: score for score, ngram in scored[: int(PMI_LENGTH_SHARES[n] * vocabulary_size)]})
    return vocabulary


PMI_VOCABULARY_FILE = "pmi_vocabulary.tsv"


def save_units(units: object, folder: str | os.PathLike) -> None:
    """Records what the units were found with in a prepared folder: PMI masking's vocabulary, best first (other
    units and a segmenter's word starts record nothing more than the manifest's name of them)."""
    if isinstance(units, PmiUnits):
        units.save(Path(folder, PMI_VOCABULARY_FILE))


def units_name(
    masking: str,
    spacy_model: str | None,
    pmi_vocabulary_size: int = PMI_VOCABULARY_SIZE,
    pmi_min_count: int = PMI_MIN_COUNT,
) -> str | None:
    """What decides a masking scheme's units, as the prepared data's manifest records it; None for schemes
    without units."""
    if masking in SPACY_SCHEMES:
        return f"{masking}:{spacy_model}"
    if masking == "pmi":
        return f"pmi:{pmi_vocabulary_size}:{pmi_min_count}"
    return None


def check_unit_settings(masking: str | None, spacy_model: str | None, streaming: bool) -> None:
    """Raises a `UserInputError` when the units of `masking` cannot be found with these settings."""
    if masking in SPACY_SCHEMES and not spacy_model:
        raise UserInputError(
            f"--masking {masking} needs --spacy_model: an installed spaCy pipeline (e.g. en_core_web_sm, from "
            "`python -m spacy download en_core_web_sm`) or the folder of one."
        )
    if masking == "pmi" and streaming:
        raise UserInputError(
            "--masking pmi ranks the n-grams of the training corpus before making the blocks, which --streaming "
            "cannot do: prepare the corpus once with --prepared_data_dir (or train in memory) instead."
        )
