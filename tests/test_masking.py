"""The masking functions: counter-based randomness, word boundaries, span/word/token masking statistics on real
text, the sequential span procedure, 80/10/10 replacement and the SBO targets."""

from types import SimpleNamespace

import pytest
import torch
from conftest import shared_data
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import BertTokenizer, PreTrainedTokenizerFast

from spanroberta.data import masking
from spanroberta.data.tokenizer import train_byte_level_bpe

BLOCK = 512
NUM_BLOCKS = 300


@pytest.fixture(scope="module")
def wiki():
    """300 rows of WikiText, packed as RoBERTa does (paragraphs separated by </s>, <s> ... </s> blocks of 512),
    tokenised with a byte-level BPE of 8000 trained on the file. Every third row is cut short and padded, and
    some of those lose their </s>, so padding and rows without a trailing special token are covered too."""
    lines = [line for line in shared_data("corpus", "wiki.valid.raw").read_text().splitlines() if line.strip()]
    tokenizer = train_byte_level_bpe(lines, vocab_size=8000, show_progress=False)
    stream = []
    for ids in tokenizer(lines[:2500], add_special_tokens=False)["input_ids"]:
        stream += ids + [tokenizer.sep_token_id]
    body = BLOCK - 2
    assert len(stream) >= NUM_BLOCKS * body
    rows = [
        [tokenizer.cls_token_id] + stream[i * body : (i + 1) * body] + [tokenizer.sep_token_id]
        for i in range(NUM_BLOCKS)
    ]
    input_ids = torch.full((NUM_BLOCKS, BLOCK), tokenizer.pad_token_id)
    attention_mask = torch.zeros(NUM_BLOCKS, BLOCK, dtype=torch.long)
    for i, row in enumerate(rows):
        if i % 3 == 0:
            row = row[: 40 + (i * 37) % 400] + ([tokenizer.sep_token_id] if i % 2 else [])
        input_ids[i, : len(row)] = torch.tensor(row)
        attention_mask[i, : len(row)] = 1

    special_table = masking.special_token_table(tokenizer)
    maskable = attention_mask.bool() & ~special_table[input_ids]
    word_start = masking.word_starts(input_ids, maskable, masking.word_start_table(tokenizer))
    keys = masking.row_keys(seed=7, epochs=torch.zeros(NUM_BLOCKS), indices=torch.arange(NUM_BLOCKS))
    return SimpleNamespace(
        tokenizer=tokenizer,
        input_ids=input_ids,
        attention_mask=attention_mask,
        special_table=special_table,
        maskable=maskable,
        word_start=word_start,
        keys=keys,
    )


def word_end(word_start: torch.Tensor, maskable: torch.Tensor) -> torch.Tensor:
    """True at the last token of each word: the next token starts a word, is special, padding or past the end."""
    next_continues = torch.nn.functional.pad(maskable[:, 1:] & ~word_start[:, 1:], (0, 1), value=False)
    return maskable & ~next_continues


def runs(masked_row: torch.Tensor) -> list[tuple[int, int]]:
    """The (start, end) positions, inclusive, of the runs of True in a 1-D bool tensor."""
    positions = masked_row.nonzero().squeeze(1).tolist()
    result = []
    for position in positions:
        if result and result[-1][1] == position - 1:
            result[-1][1] = position
        else:
            result.append([position, position])
    return [tuple(r) for r in result]


def lowbias32_reference(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    return x ^ (x >> 16)


# --------------------------------------------------------------------------------------------------------
# Randomness


def test_mix32_is_exact_lowbias32_on_int64():
    edges = [0, 1, 2, 0x7FFFFFFF, 0x80000000, 0xDEADBEEF, 0xFFFFFFFE, 0xFFFFFFFF]
    values = edges + list(range(12345, 12345 * 40, 12345))
    hashed = masking.mix32(torch.tensor(values, dtype=torch.long)).tolist()
    assert hashed == [lowbias32_reference(v) for v in values]


def test_uniform_and_randint_are_uniform_and_stream_independent():
    keys = masking.row_keys(0, torch.zeros(64), torch.arange(64))
    positions = torch.arange(1000)
    bits = masking.random_bits(keys, masking.Stream.SPAN_START, positions)
    u = masking.uniform(bits)
    assert 0.0 <= float(u.min()) and float(u.max()) < 1.0
    assert abs(float(u.mean()) - 0.5) < 0.005
    counts = torch.bincount(masking.randint(bits, 10).flatten(), minlength=10)
    assert (counts - 6400).abs().max() < 400
    other = masking.uniform(masking.random_bits(keys, masking.Stream.SPAN_LENGTH, positions))
    assert abs(torch.corrcoef(torch.stack([u.flatten(), other.flatten()]))[0, 1]) < 0.02


def test_row_keys_depend_on_seed_epoch_and_index():
    base = masking.row_keys(0, torch.zeros(1000), torch.arange(1000))
    assert base.unique().numel() == 1000
    assert int((base == masking.row_keys(0, torch.ones(1000), torch.arange(1000))).sum()) == 0
    assert int((base == masking.row_keys(1, torch.zeros(1000), torch.arange(1000))).sum()) == 0
    assert torch.equal(base[500:], masking.row_keys(0, torch.zeros(500), torch.arange(500, 1000)))


def test_masking_budget_rounds_without_bias():
    keys = masking.row_keys(3, torch.zeros(20000), torch.arange(20000))
    maskable = torch.ones(20000, 10, dtype=torch.bool)
    budget = masking.masking_budget(maskable, keys, 0.15)
    assert set(budget.unique().tolist()) == {1, 2}
    assert abs(float(budget.double().mean()) - 1.5) < 0.02


def test_span_lengths_follow_the_renormalised_truncated_geometric():
    probabilities = masking.span_length_probabilities(0.2, 10)
    mean = float((torch.arange(1, 11) * probabilities).sum())
    assert abs(mean - 3.797) < 0.001  # SpanBERT section 3.1 reports 3.8; clipping would give 4.46

    keys = masking.row_keys(0, torch.zeros(100), torch.arange(100))
    _, lengths = masking.span_candidates(keys, torch.full((100,), 10**6), 1000)
    frequencies = torch.bincount(lengths.flatten(), minlength=11)[1:].double() / lengths.numel()
    assert (frequencies - probabilities).abs().max() < 0.006
    _, word_lengths = masking.span_candidates(keys, torch.full((100,), 10**6), 100, geometric_p=1.0)
    assert bool((word_lengths == 1).all())


# --------------------------------------------------------------------------------------------------------
# Word boundaries


def test_byte_level_word_starts(wiki):
    tokenizer = wiki.tokenizer
    table = masking.word_start_table(tokenizer)
    ids = tokenizer("Hello world, the cat sat.")["input_ids"]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert tokens[0] == "<s>" and tokens[-1] == "</s>"
    assert [bool(table[i]) for i in ids] == [t.startswith("Ġ") for t in tokens]
    assert not bool(table[list(tokenizer.all_special_ids)].any())

    input_ids = torch.tensor([ids])
    maskable = ~masking.special_token_table(tokenizer)[input_ids]
    starts = masking.word_starts(input_ids, maskable, table)[0].tolist()
    # "Hello" follows <s> with no "Ġ", yet starts a word; "," and "." continue theirs.
    assert starts == [False, True] + [t.startswith("Ġ") for t in tokens[2:-1]] + [False]


def test_wordpiece_word_starts_and_whole_word_spans():
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "play", "##ing", "##ed", "cat", "run", "##s", "a"]
    tokenizer = BertTokenizer(vocab={w: i for i, w in enumerate(words)})
    table = masking.word_start_table(tokenizer)
    assert table.tolist() == [False] * 5 + [True, True, False, False, True, True, False, True]

    ids = tokenizer(" ".join(["the cat playing a runs played"] * 30))["input_ids"]
    input_ids = torch.tensor([ids] * 50)
    maskable = ~masking.special_token_table(tokenizer)[input_ids]
    word_start = masking.word_starts(input_ids, maskable, table)
    keys = masking.row_keys(0, torch.zeros(50), torch.arange(50))
    masked = masking.span_mask(word_start, maskable, keys, mlm_probability=0.3).masked
    continuation = maskable & ~word_start
    previous = torch.nn.functional.pad(masked[:, :-1], (1, 0), value=False)
    assert bool(masked.any())
    assert torch.equal(masked & continuation, previous & continuation)  # "##" pieces go with their word


def test_sentencepiece_word_starts_and_a_vocabulary_without_markers():
    def tokenizer_from(vocab):
        backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
        backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        return PreTrainedTokenizerFast(
            tokenizer_object=backend, pad_token="<pad>", mask_token="<mask>", unk_token="<unk>"
        )

    sentencepiece = tokenizer_from({"<pad>": 0, "<mask>": 1, "<unk>": 2, "▁the": 3, "▁cat": 4, "s": 5, "▁sat": 6})
    assert masking.word_start_table(sentencepiece).tolist() == [False, False, False, True, True, False, True]
    plain = tokenizer_from({"<pad>": 0, "<mask>": 1, "<unk>": 2, "the": 3, "cat": 4})
    with pytest.raises(ValueError, match="masking='token'"):
        masking.word_start_table(plain)


# --------------------------------------------------------------------------------------------------------
# Span, word and token masking on real text


def test_span_masking_statistics(wiki):
    result = masking.span_mask(wiki.word_start, wiki.maskable, wiki.keys)
    masked = result.masked
    rate = masked.sum().item() / wiki.maskable.sum().item()
    assert abs(rate - 0.15) < 0.005
    assert abs(float(result.span_lengths.double().mean()) - 3.8) < 0.2
    assert int(result.span_lengths.min()) >= 1 and int(result.span_lengths.max()) <= 10
    assert not bool((masked & ~wiki.maskable).any())  # special tokens and padding are never masked
    assert bool((masked.sum(1) <= masking.masking_budget(wiki.maskable, wiki.keys, 0.15)).all())

    # Every run starts on a word start and ends on a word end: a span never splits a word.
    run_start = masked & ~torch.nn.functional.pad(masked[:, :-1], (1, 0), value=False)
    run_end = masked & ~torch.nn.functional.pad(masked[:, 1:], (0, 1), value=False)
    assert torch.equal(run_start & wiki.word_start, run_start)
    assert torch.equal(run_end & word_end(wiki.word_start, wiki.maskable), run_end)


def test_ngram_masking_statistics(wiki):
    """ALBERT section 4.1: whole-word n-grams with p(n) = (1/n) / (1 + 1/2 + 1/3), n <= 3, at a 15% mask rate."""
    probabilities = masking.ngram_length_probabilities(3)
    torch.testing.assert_close(probabilities, torch.tensor([6 / 11, 3 / 11, 2 / 11], dtype=torch.float64))
    result = masking.span_mask(wiki.word_start, wiki.maskable, wiki.keys, length_probabilities=probabilities)
    masked = result.masked
    rate = masked.sum().item() / wiki.maskable.sum().item()
    assert abs(rate - 0.15) < 0.005
    # The n-grams drawn, before overlapping ones merge (a few are cut at a row's end, hence the margin).
    frequencies = torch.bincount(result.span_lengths, minlength=4)[1:].double() / result.span_lengths.numel()
    assert len(result.span_lengths) > 3000
    assert (frequencies - probabilities).abs().max() < 0.02
    run_start = masked & ~torch.nn.functional.pad(masked[:, :-1], (1, 0), value=False)
    assert torch.equal(run_start & wiki.word_start, run_start)  # whole words only


def sequential_reference(word_tokens, budget, starts, lengths):
    """SpanBERT's procedure, literally: spans one after the other, overlaps merged, the span that would pass the
    budget cut at the first word that does not fit. Returns (masked words, index of the last span used)."""
    masked_words, total, last_used = set(), 0, -1
    for k, (start, length) in enumerate(zip(starts, lengths)):
        for word in range(start, min(start + length, len(word_tokens))):
            if word in masked_words:
                continue
            if total + word_tokens[word] > budget:
                return masked_words, last_used
            masked_words.add(word)
            total += word_tokens[word]
            last_used = k
        if len(masked_words) == len(word_tokens):
            break
    return masked_words, last_used


@pytest.mark.parametrize(
    ("mlm_probability", "geometric_p", "max_span_length"), [(0.15, 0.2, 10), (0.9, 1.0, 1), (0.5, 0.2, 10)]
)
def test_span_mask_equals_the_sequential_procedure(wiki, mlm_probability, geometric_p, max_span_length):
    rows = slice(0, 24)  # a mix of full and short rows
    word_start, maskable, keys = wiki.word_start[rows], wiki.maskable[rows], wiki.keys[rows]
    result = masking.span_mask(word_start, maskable, keys, mlm_probability, geometric_p, max_span_length)
    budget = masking.masking_budget(maskable, keys, mlm_probability)
    num_words = word_start.sum(1)
    starts, lengths = masking.span_candidates(keys, num_words, 40 * BLOCK, geometric_p, max_span_length)
    all_used = []
    for row in range(word_start.shape[0]):
        word_index = (word_start[row].cumsum(0) - 1)[maskable[row]]
        word_tokens = torch.bincount(word_index, minlength=int(num_words[row])).tolist()
        words, last_used = sequential_reference(
            word_tokens, int(budget[row]), starts[row].tolist(), lengths[row].tolist()
        )
        expected = torch.zeros_like(maskable[row])
        expected[maskable[row]] = torch.isin(word_index, torch.tensor(sorted(words), dtype=torch.long))
        assert torch.equal(result.masked[row], expected), f"row {row}"
        ends = torch.minimum(starts[row] + lengths[row], num_words[row])
        all_used += (ends - starts[row])[: last_used + 1].tolist()
    assert result.span_lengths.tolist() == all_used


def test_word_masking_masks_whole_words_with_the_same_budget(wiki):
    result = masking.span_mask(wiki.word_start, wiki.maskable, wiki.keys, geometric_p=1.0, max_span_length=1)
    masked = result.masked
    assert bool((result.span_lengths == 1).all())
    assert abs(masked.sum().item() / wiki.maskable.sum().item() - 0.15) < 0.005
    run_start = masked & ~torch.nn.functional.pad(masked[:, :-1], (1, 0), value=False)
    run_end = masked & ~torch.nn.functional.pad(masked[:, 1:], (0, 1), value=False)
    assert torch.equal(run_start & wiki.word_start, run_start)
    assert torch.equal(run_end & word_end(wiki.word_start, wiki.maskable), run_end)
    # Adjacent masked words merge into one run, so runs longer than a word occur.
    assert int((run_start.sum() - (masked & wiki.word_start).sum())) < 0


def test_token_masking_exact_budget_and_per_token_replacement(wiki):
    masked = masking.token_mask(wiki.maskable, wiki.keys)
    assert torch.equal(masked.sum(1), masking.masking_budget(wiki.maskable, wiki.keys, 0.15))
    assert not bool((masked & ~wiki.maskable).any())
    replacements = masking.random_token_ids(wiki.special_table)
    inputs, labels = masking.replace_masked_tokens(
        wiki.input_ids, masked, wiki.keys, wiki.tokenizer.mask_token_id, replacements, per_run=False
    )
    original = wiki.input_ids[masked]
    to_mask = (inputs[masked] == wiki.tokenizer.mask_token_id).double().mean().item()
    kept = (inputs[masked] == original).double().mean().item()
    assert abs(to_mask - 0.8) < 0.02 and abs(kept - 0.1) < 0.02  # the random share is 1 minus both
    assert torch.equal(labels[masked], original) and bool((labels[~masked] == -100).all())


def test_span_replacement_is_one_choice_per_run(wiki):
    masked = masking.span_mask(wiki.word_start, wiki.maskable, wiki.keys).masked
    replacements = masking.random_token_ids(wiki.special_table)
    inputs, labels = masking.replace_masked_tokens(
        wiki.input_ids, masked, wiki.keys, wiki.tokenizer.mask_token_id, replacements
    )
    assert torch.equal(labels[masked], wiki.input_ids[masked]) and bool((labels[~masked] == -100).all())
    assert torch.equal(inputs[~masked], wiki.input_ids[~masked])

    kinds = {"mask": 0, "random": 0, "keep": 0}
    for row in range(masked.shape[0]):
        for start, end in runs(masked[row]):
            new, old = inputs[row, start : end + 1], wiki.input_ids[row, start : end + 1]
            if bool((new == wiki.tokenizer.mask_token_id).all()):
                kinds["mask"] += 1
            elif bool((new == old).all()):
                kinds["keep"] += 1
            else:
                # Random: every token drawn on its own from the non-special ids, so almost all differ.
                assert not bool(wiki.special_table[new].any())
                assert (new != old).double().mean() >= 0.5
                kinds["random"] += 1
    total = sum(kinds.values())
    assert total > 2000
    assert abs(kinds["mask"] / total - 0.8) < 0.02
    assert abs(kinds["random"] / total - 0.1) < 0.02
    assert abs(kinds["keep"] / total - 0.1) < 0.02


# --------------------------------------------------------------------------------------------------------
# Span boundary objective targets


def test_sbo_targets_boundaries_relative_positions_and_cut_off():
    # Row 0: <s> a b c d e </s> pad, run 2..4. Row 1: a run at the row's start (no s-1) and a run at the row's
    # end without a trailing special token (no e+1). Row 2: a run right before padding (e+1 is padding).
    masked = torch.tensor(
        [
            [0, 0, 1, 1, 1, 0, 0, 0],
            [1, 1, 0, 1, 0, 0, 1, 1],
            [0, 0, 0, 1, 1, 0, 0, 0],
        ],
        dtype=torch.bool,
    )
    attention_mask = torch.tensor([[1] * 7 + [0], [1] * 8, [1] * 5 + [0] * 3])
    targets = masking.sbo_targets(masked, attention_mask, max_span_targets=2)
    left, right, relative = (
        targets["sbo_left_positions"],
        targets["sbo_right_positions"],
        targets["sbo_relative_positions"],
    )
    n = -100
    # Row 0: the third token of the run (i-s = 2) is past max_span_targets=2: an MLM target only.
    assert left[0].tolist() == [n, n, 1, 1, n, n, n, n]
    assert right[0].tolist() == [n, n, 5, 5, n, n, n, n]
    assert relative[0].tolist() == [n, n, 0, 1, n, n, n, n]
    # Row 1: only the middle run, 3..3, has both boundaries inside the row.
    assert left[1].tolist() == [n, n, n, 2, n, n, n, n]
    assert right[1].tolist() == [n, n, n, 4, n, n, n, n]
    assert relative[1].tolist() == [n, n, n, 0, n, n, n, n]
    assert bool((relative[2] == n).all())

    untruncated = masking.sbo_targets(masked, attention_mask)["sbo_relative_positions"]
    assert untruncated[0].tolist() == [n, n, 0, 1, 2, n, n, n]


def test_sbo_targets_on_real_spans(wiki):
    masked = masking.span_mask(wiki.word_start, wiki.maskable, wiki.keys).masked
    targets = masking.sbo_targets(masked, wiki.attention_mask)
    is_target = targets["sbo_relative_positions"] != -100
    assert bool((masked | ~is_target).all())
    for row in range(0, NUM_BLOCKS, 25):
        length = int(wiki.attention_mask[row].sum())
        for start, end in runs(masked[row]):
            span = slice(start, end + 1)
            if start == 0 or end + 1 >= length:
                assert not bool(is_target[row, span].any())
                continue
            # Merged runs can pass max_span_targets=15 tokens: the tokens past it are MLM targets only.
            n = end - start + 1
            cut = [-100] * max(n - 15, 0)
            assert targets["sbo_left_positions"][row, span].tolist() == [start - 1] * min(n, 15) + cut
            assert targets["sbo_right_positions"][row, span].tolist() == [end + 1] * min(n, 15) + cut
            assert targets["sbo_relative_positions"][row, span].tolist() == list(range(min(n, 15))) + cut
