"""Span, whole-word, token and unit (named entity, noun phrase, PMI n-gram) masking as pure, vectorised torch
functions.

Everything here works on token ids and per-row integer keys; no tokenizer object is touched in the hot path
(the tokenizer is read once, into the bool tables built by `word_start_table` and `special_token_table`).

Randomness is counter-based (`random_streams.py`): every random number is a hash of (row key, stream, position),
where the row key is itself a hash of (seed, epoch, example index), as fairseq derives its masks from (seed,
epoch, index). An example's mask is therefore a pure function of that triple: it does not depend on the batch
the example lands in, on its padding, on the order of the batch, nor on how many random numbers other code drew
before (so a run resumed from a checkpoint masks exactly as an uninterrupted one).

Typical use (what `DataCollatorForSpanMasking` does):

    maskable = attention_mask.bool() & ~special_table[input_ids]
    masked = span_mask(word_starts(input_ids, maskable, word_table), maskable, keys, 0.15).masked
    inputs, labels = replace_masked_tokens(input_ids, masked, keys, mask_id, random_token_ids(special_table))
    sbo = sbo_targets(masked, attention_mask)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import PreTrainedTokenizerBase

from ..models.configuration_spanroberta import IGNORE_INDEX
from ..models.modeling_span_heads import run_starts, sbo_targets  # noqa: F401  (sbo_targets: masking's interface)
from .random_streams import MASK32, Stream, mix32, mix32_int, randint, random_bits, uniform
from .word_starts import (  # noqa: F401  (special_token_table: masking's interface)
    BPE_MARKER,
    SENTENCEPIECE_MARKER,
    WORDPIECE_CONTINUATION,
    special_token_table,
    vocabulary_word_starts,
)

# The share of tokens masked for prediction: BERT's 15% (BERT §3.1), kept by RoBERTa and SpanBERT (§3.1). The flag
# (--mlm_probability), the collator and the masking functions take it from here.
MLM_PROBABILITY = 0.15


# ---------------------------------------------------------------------------------------------------------
# Row keys (the random numbers themselves: random_streams.py)

# Mixed into the seed, so that row keys differ from the other hashes of the same numbers.
_ROW_KEY_SALT = mix32_int(0x5EED)


def row_keys(seed: int, epochs: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """Per-row keys: a hash of (seed, epoch, example index). `epochs` and `indices` are int tensors of shape [B].

    Values are taken modulo 2**32 (so an index past 4 billion wraps around).
    """
    indices = torch.as_tensor(indices, dtype=torch.long)
    key = mix32(torch.full_like(indices, (seed & MASK32) ^ _ROW_KEY_SALT))
    key = mix32(key ^ (torch.as_tensor(epochs, dtype=torch.long) & MASK32))
    return mix32(key ^ (indices & MASK32))


# ---------------------------------------------------------------------------------------------------------
# Vocabulary tables, computed once per tokenizer


def word_start_table(tokenizer: PreTrainedTokenizerBase) -> torch.Tensor:
    """Bool [len(tokenizer)]: True for the ids whose token starts a word, read from the vocabulary alone
    (`word_starts.vocabulary_word_starts`: markers, and CJK characters as words); refuses a vocabulary without
    word-start markers."""
    table = vocabulary_word_starts(tokenizer)
    if table is None:
        raise ValueError(
            f"Cannot find word boundaries in the vocabulary of {type(tokenizer).__name__}: no token starts with "
            f"'{BPE_MARKER}' (byte-level BPE), '{SENTENCEPIECE_MARKER}' (SentencePiece) or "
            f"'{WORDPIECE_CONTINUATION}' (WordPiece). Use masking='token' with this tokenizer."
        )
    return table


def random_token_ids(special_table: torch.Tensor) -> torch.Tensor:
    """The ids a masked token may be replaced with: every non-special id of the vocabulary."""
    return (~special_table).nonzero().squeeze(1)


# ---------------------------------------------------------------------------------------------------------
# Choosing what to mask


def word_starts(input_ids: torch.Tensor, maskable: torch.Tensor, word_table: torch.Tensor) -> torch.Tensor:
    """Bool [B, L]: the maskable tokens that start a word, by the vocabulary's `word_table`
    (`word_starts_at`)."""
    return word_starts_at(word_table[input_ids], maskable)


def word_starts_at(starts_word: torch.Tensor, maskable: torch.Tensor) -> torch.Tensor:
    """Bool [B, L]: the maskable tokens that start a word.

    A token starts a word when `starts_word` [B, L] says so (the vocabulary, or the tokenizer's word ids), or when
    the token before it is not maskable (a special token, or the row's start): "<s>Hello" has no "Ġ" on "Hello",
    yet it is a word.
    """
    previous_maskable = F.pad(maskable[:, :-1], (1, 0), value=False)
    return maskable & (starts_word | ~previous_maskable)


def masking_budget(maskable: torch.Tensor, keys: torch.Tensor, mlm_probability: float) -> torch.Tensor:
    """Tokens to mask per row: int(p * n + u), u uniform in [0, 1), as fairseq rounds it, so the expected
    count is exactly p * n (n = the row's maskable tokens)."""
    u = uniform(random_bits(keys, Stream.BUDGET, torch.zeros(1, dtype=torch.long)))[:, 0]
    return torch.floor(mlm_probability * maskable.sum(1).double() + u.double()).long()


def span_length_probabilities(geometric_p: float, max_span_length: int) -> torch.Tensor:
    """p(l) for l = 1..max_span_length, float64: Geo(p) truncated to [1, max] and renormalised.

    SpanBERT (section 3.1) clips l at 10 with p = 0.2 and reports a mean of 3.8 words; its code renormalises
    p(l) ∝ p(1-p)^(l-1) over 1..10, which gives 3.797. Clipping (moving the tail's mass onto 10) would give 4.46.
    """
    lengths = torch.arange(1, max_span_length + 1, dtype=torch.float64)
    probabilities = geometric_p * (1.0 - geometric_p) ** (lengths - 1)
    return probabilities / probabilities.sum()


def ngram_length_probabilities(max_ngram_length: int = 3) -> torch.Tensor:
    """p(n) = (1/n) / sum_{k=1..N} 1/k for n = 1..N, float64: ALBERT's n-gram masking (section 4.1, N = 3:
    p = 6/11, 3/11, 2/11)."""
    inverse = 1.0 / torch.arange(1, max_ngram_length + 1, dtype=torch.float64)
    return inverse / inverse.sum()


def span_candidates(
    keys: torch.Tensor,
    num_words: torch.Tensor,
    num_candidates: int,
    geometric_p: float = 0.2,
    max_span_length: int = 10,
    length_probabilities: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The spans drawn for each row, in order: (first word [B, K], length in words [B, K]).

    Candidate k of a row depends on (row key, k) alone, so drawing more candidates never changes earlier ones.
    The first word is uniform over the row's `num_words` words; the length follows `length_probabilities` (p(l)
    for l = 1, 2, ...; default the truncated geometric of `span_length_probabilities`), sampled by inverse CDF
    on 32-bit thresholds.
    """
    k = torch.arange(num_candidates)
    starts = randint(random_bits(keys, Stream.SPAN_START, k), num_words[:, None])
    if length_probabilities is None:
        length_probabilities = span_length_probabilities(geometric_p, max_span_length)
    cdf = length_probabilities.cumsum(0)
    thresholds = torch.round(cdf[:-1] * 2.0**32).long()
    lengths = torch.bucketize(random_bits(keys, Stream.SPAN_LENGTH, k), thresholds, right=True) + 1
    return starts, lengths


@dataclass
class SpanMask:
    """The result of `span_mask`.

    masked: bool [B, L], the tokens to predict.
    span_lengths: long [S], the lengths in words of the spans drawn and used, before merging: a row's spans up
        to the last one that added a masked word, each clipped at the row's end (and the last one counted
        before it is shortened to fit the budget); all rows' spans, in row order. For statistics and tests.
    """

    masked: torch.Tensor
    span_lengths: torch.Tensor


def span_mask(
    word_start: torch.Tensor,
    maskable: torch.Tensor,
    keys: torch.Tensor,
    mlm_probability: float = MLM_PROBABILITY,
    geometric_p: float = 0.2,
    max_span_length: int = 10,
    document_ids: torch.Tensor | None = None,
    length_probabilities: torch.Tensor | None = None,
) -> SpanMask:
    """SpanBERT's span masking (section 3.1), vectorised over the batch.

    Spans of whole words are drawn one after the other (a uniform first word, a truncated-geometric length)
    until the row's budget (`masking_budget`) is reached; overlapping spans merge, and the span that would pass
    the budget is shortened word by word, so a word is never split. `geometric_p=1` masks whole words.

    `length_probabilities` (p(l) for l = 1..n words) replaces the truncated geometric, e.g. with
    `ngram_length_probabilities()` for ALBERT's n-gram masking.

    `document_ids` (long [B, L], non-decreasing along a row) marks the documents of packed rows: a span is cut
    at the end of the document it starts in, so it never crosses into the next one.

    Instead of a loop over spans, every word gets the index of the first candidate span covering it; taking
    the words in (that index, position) order and keeping them while their cumulative token count stays
    within the budget gives the same mask as the sequential procedure.
    """
    batch_size = maskable.shape[0]
    budget = masking_budget(maskable, keys, mlm_probability)
    num_words = word_start.sum(1)
    max_words = int(num_words.max()) if batch_size else 0
    # Word index of each token; tokens outside words go to an extra bin, `max_words`, dropped afterwards.
    word_index = torch.where(maskable, word_start.cumsum(1) - 1, max_words)
    word_tokens = torch.zeros(batch_size, max_words + 1, dtype=torch.long)
    word_tokens.scatter_add_(1, word_index, maskable.long())
    word_tokens = word_tokens[:, :max_words]

    # Each span adds at least one token unless it overlaps earlier ones, so budget + a margin candidates reach
    # the budget in practice; rows that do not (a high mlm_probability) are redone with twice as many.
    if length_probabilities is None:
        length_probabilities = span_length_probabilities(geometric_p, max_span_length)
    max_span_length = len(length_probabilities)
    num_candidates = int(budget.max()) + 16 if batch_size else 1
    document_ends = _document_ends(word_start, word_index, document_ids, max_words)
    while True:
        starts, lengths = span_candidates(keys, num_words, num_candidates, length_probabilities=length_probabilities)
        ends = torch.minimum(starts + lengths, document_ends.gather(1, starts))
        keep, last_used, settled = _words_within_budget(word_tokens, num_words, budget, starts, ends, max_span_length)
        if bool(settled.all()):
            break
        num_candidates *= 2

    used = torch.arange(num_candidates) <= last_used[:, None]
    masked = maskable & F.pad(keep, (0, 1), value=False).gather(1, word_index)
    return SpanMask(masked=masked, span_lengths=(ends - starts)[used])


def _document_ends(
    word_start: torch.Tensor, word_index: torch.Tensor, document_ids: torch.Tensor | None, max_words: int
) -> torch.Tensor:
    """Long [B, W + 1]: for each word, the index of the first word past its document (the row's word count when
    the row is one document). Column W, the bin of tokens outside words, maps to the row's end."""
    batch_size = word_start.shape[0]
    num_words = word_start.sum(1, keepdim=True)
    if document_ids is None:
        return num_words.expand(batch_size, max_words + 1)
    beyond = torch.iinfo(torch.long).max
    # The document of each word, read at its first token; the padding words past a row's end sort last.
    word_document = torch.full((batch_size, max_words + 1), beyond, dtype=torch.long)
    word_document.scatter_(
        1, torch.where(word_start, word_index, max_words), torch.where(word_start, document_ids, beyond)
    )
    ends = torch.searchsorted(word_document, word_document, right=True)
    return torch.minimum(ends, num_words)


def _words_within_budget(
    word_tokens: torch.Tensor,
    num_words: torch.Tensor,
    budget: torch.Tensor,
    starts: torch.Tensor,
    ends: torch.Tensor,
    max_span_length: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Which words the sequential span procedure masks, given candidate spans [starts, ends) in words.

    Returns (keep [B, W], last used candidate [B] (-1 when none), settled [B]). A row is settled when more
    candidates could not change its mask: its candidates cover at least the budget, or every word.
    """
    batch_size, num_words_max = word_tokens.shape
    num_candidates = starts.shape[1]
    offsets = torch.arange(max_span_length)
    covered = starts[:, :, None] + offsets
    covered = torch.where(covered < ends[:, :, None], covered, num_words_max).reshape(batch_size, -1)
    candidate = torch.arange(num_candidates).repeat_interleave(max_span_length).expand(batch_size, -1)
    first_cover = torch.full((batch_size, num_words_max + 1), num_candidates, dtype=torch.long)
    first_cover.scatter_reduce_(1, covered, candidate, reduce="amin")
    first_cover = first_cover[:, :num_words_max]

    # Tokens each candidate adds (its words not covered before), and the candidate that crosses the budget.
    new_tokens = torch.zeros(batch_size, num_candidates + 1, dtype=torch.long)
    new_tokens.scatter_add_(1, first_cover, word_tokens)
    cumulative = new_tokens[:, :num_candidates].cumsum(1)
    crossing = (cumulative <= budget[:, None]).sum(1)  # == num_candidates when no candidate crosses it
    before_crossing = torch.where(crossing > 0, cumulative.gather(1, (crossing - 1).clamp(min=0)[:, None])[:, 0], 0)

    # The crossing span is shortened from its right end: its new words, left to right, while they fit.
    in_crossing = (first_cover == crossing[:, None]) & (crossing < num_candidates)[:, None]
    fits = before_crossing[:, None] + (word_tokens * in_crossing).cumsum(1) <= budget[:, None]
    keep = (first_cover < crossing[:, None]) | (in_crossing & fits)

    last_used = torch.where(keep, first_cover, -1).max(1).values if num_words_max else torch.full_like(budget, -1)
    all_covered = (first_cover < num_candidates).sum(1) == num_words
    settled = (cumulative[:, -1] >= budget) | all_covered
    return keep, last_used, settled


# Marks of masking units, one per token (`masking_units` columns, see spanroberta.data.masking_units).
OUTSIDE_UNIT, UNIT_START, INSIDE_UNIT = 0, 1, 2


@dataclass
class UnitMask:
    """The result of `unit_mask`.

    masked: bool [B, L], the tokens to predict.
    by_units: bool [B, L], those chosen in the units' part of the budget (the rest are the whole words that fill
        it up). For statistics and tests.
    budget: long [B], the row's budget (`masking_budget`).
    """

    masked: torch.Tensor
    by_units: torch.Tensor
    budget: torch.Tensor


def unit_mask(
    word_start: torch.Tensor,
    maskable: torch.Tensor,
    unit_marks: torch.Tensor,
    keys: torch.Tensor,
    mlm_probability: float = MLM_PROBABILITY,
    unit_share: float | None = 0.5,
) -> UnitMask:
    """Masking of linguistic units (named entities, noun phrases, PMI n-grams), vectorised over the batch.

    `unit_marks` (long [B, L]) marks each token OUTSIDE_UNIT, UNIT_START or INSIDE_UNIT; units lie on word
    boundaries. A unit is a UNIT_START token and the INSIDE_UNIT tokens after it; an INSIDE_UNIT token after a
    token outside any unit (a unit cut by a block boundary or a special token) starts what is left of its unit.

    unit_share=0.5, SpanBERT section 5.1 (Table 6, "Named Entities" and "Noun Phrases"): half of the masking
        budget (`masking_budget`) goes to whole units, the other half to random whole words.
    unit_share=None, PMI-Masking (Levine et al. 2021, section 3 and their masking procedure): the units and the
        words outside units are all units, drawn uniformly at random for the whole budget.
    Units are drawn in a random order without replacement, and one that does not fit in what is left of its part
    of the budget is passed over (`_first_fit`): units are never split, and the next ones that fit are taken.
    Whatever the units leave of the budget goes to random whole words, so the rate is that of the other schemes.
    """
    budget = masking_budget(maskable, keys, mlm_probability)
    in_unit = maskable & (unit_marks != OUTSIDE_UNIT)
    previous_in_unit = F.pad(in_unit[:, :-1], (1, 0), value=False)
    starts_unit = in_unit & ((unit_marks == UNIT_START) | ~previous_in_unit)
    if unit_share is None:
        masked = _first_fit(starts_unit | (word_start & ~in_unit), maskable, keys, Stream.UNIT_ORDER, budget)
    else:
        unit_budget = torch.floor(unit_share * budget.double() + 0.5).long()
        masked = _first_fit(starts_unit, in_unit, keys, Stream.UNIT_ORDER, unit_budget)
    remaining = maskable & ~masked
    fill = _first_fit(word_start & remaining, remaining, keys, Stream.WORD_FILL_ORDER, budget - masked.sum(1))
    return UnitMask(masked=masked | fill, by_units=masked, budget=budget)


def _first_fit(
    starts: torch.Tensor, members: torch.Tensor, keys: torch.Tensor, stream: Stream, budget: torch.Tensor
) -> torch.Tensor:
    """Bool [B, L]: whole pieces (a `starts` token and the `members` tokens after it, up to the next start) taken
    in a random order, each when it fits in what is left of `budget` [B] and passed over otherwise.

    Rounds reproduce the sequential procedure: each takes, in order, the pieces that fit while their running total
    fits; the first piece that does not fit is then too big for every later round, which goes on after it.
    """
    batch_size, length = members.shape
    piece = torch.where(members, starts.cumsum(1) - 1, length)  # tokens outside pieces go to bin `length`
    sizes = torch.zeros(batch_size, length + 1, dtype=torch.long).scatter_add_(1, piece, members.long())[:, :length]
    # Random order: sort by (random bits, piece index), so ties cannot happen; pieces that do not exist sort last.
    indices = torch.arange(length)
    sort_keys = random_bits(keys, stream, indices) * length + indices
    order = sort_keys.masked_fill(sizes == 0, torch.iinfo(torch.long).max).argsort(1)
    sorted_sizes = sizes.gather(1, order)
    taken = torch.zeros_like(sorted_sizes, dtype=torch.bool)
    remaining = budget.clone()
    while True:
        fits = ~taken & (sorted_sizes > 0) & (sorted_sizes <= remaining[:, None])
        take = fits & ((sorted_sizes * fits).cumsum(1) <= remaining[:, None])
        if not bool(take.any()):
            break
        taken |= take
        remaining -= (sorted_sizes * take).sum(1)
    taken_pieces = torch.zeros(batch_size, length + 1, dtype=torch.bool)
    taken_pieces[:, :length] = torch.zeros_like(taken).scatter(1, order, taken)
    return members & taken_pieces.gather(1, piece)


def token_mask(maskable: torch.Tensor, keys: torch.Tensor, mlm_probability: float = MLM_PROBABILITY) -> torch.Tensor:
    """RoBERTa/BERT token-level masking: exactly the budgeted number of maskable tokens, chosen uniformly."""
    length = maskable.shape[1]
    if length == 0:  # rows of no tokens: nothing to rank
        return maskable.clone()
    budget = masking_budget(maskable, keys, mlm_probability)
    positions = torch.arange(length)
    # Ranking by (random bits, position) makes every key distinct, so ties cannot change the count.
    sort_keys = random_bits(keys, Stream.TOKEN_SELECTION, positions) * length + positions
    sort_keys = sort_keys.masked_fill(~maskable, torch.iinfo(torch.long).max)
    threshold = sort_keys.sort(1).values.gather(1, (budget - 1).clamp(min=0)[:, None])
    return maskable & (sort_keys <= threshold) & (budget > 0)[:, None]


# ---------------------------------------------------------------------------------------------------------
# Replacing the masked tokens (the span boundary objective's targets are models/modeling_span_heads.py's sbo_targets)


def replace_masked_tokens(
    input_ids: torch.Tensor,
    masked: torch.Tensor,
    keys: torch.Tensor,
    mask_token_id: int,
    replacement_ids: torch.Tensor,
    mask_replace_prob: float = 0.8,
    random_replace_prob: float = 0.1,
    per_run: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's 80/10/10: masked tokens become the mask token, a random token, or stay. Returns (inputs, labels).

    per_run=True makes the choice once per run of masked tokens, as SpanBERT does per span (section 3.1);
    per_run=False makes it per token (BERT, RoBERTa). Random tokens are drawn per token, uniformly from
    `replacement_ids`; with none (a vocabulary of special tokens only), the tokens that would be replaced stay.
    Labels hold the original id at masked positions and -100 elsewhere.
    """
    positions = torch.arange(input_ids.shape[1])
    choice = uniform(random_bits(keys, Stream.REPLACEMENT, positions))
    if per_run:
        choice = choice.gather(1, run_starts(masked))
    to_mask = masked & (choice < mask_replace_prob)
    inputs = input_ids.masked_fill(to_mask, mask_token_id)
    if len(replacement_ids):
        to_random = masked & ~to_mask & (choice < mask_replace_prob + random_replace_prob)
        drawn = randint(random_bits(keys, Stream.RANDOM_TOKEN, positions), len(replacement_ids))
        inputs = torch.where(to_random, replacement_ids[drawn], inputs)
    labels = input_ids.masked_fill(~masked, IGNORE_INDEX)
    return inputs, labels
