"""Word starts in languages without spaces: CJK characters as words in every vocabulary convention, and the
examples' own word boundaries (a segmenter's) in the collator."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import BertTokenizer, PreTrainedTokenizerFast
from transformers.convert_slow_tokenizer import bytes_to_unicode

from spanroberta.data import masking
from spanroberta.data.collator import DataCollatorForSpanMasking
from spanroberta.data.tokenizer import train_byte_level_bpe
from spanroberta.data.word_starts import example_word_starts, starts_own_word, vocabulary_word_starts

LANGUAGES = Path(__file__).parent / "fixtures" / "languages"


@pytest.fixture(scope="module")
def cjk_tokenizer():
    """A byte-level BPE trained on the Chinese, Japanese and mixed samples and some English: small enough that many
    characters are cut into byte pieces."""
    texts = [(LANGUAGES / f"{code}.txt").read_text(encoding="utf-8") for code in ("zh", "ja", "mixed")]
    english = "The quick brown fox jumps over the lazy dog. Span masking masks whole words.\n" * 20
    return train_byte_level_bpe([*texts, english], vocab_size=700, show_progress=False)


@pytest.mark.parametrize(
    "character, own_word",
    [("中", True), ("国", True), ("𠀀", True), ("の", True), ("カ", True), ("ｶ", True), ("、", True), ("。", True),
     ("「", True), ("，", True), ("！", True), ("Ａ", False), ("１", False), ("한", False), ("ก", False),
     ("a", False), ("1", False), (",", False), ("é", False)],
)  # fmt: skip
def test_which_characters_are_words_of_their_own(character, own_word):
    assert starts_own_word(character) is own_word


def test_byte_level_tokens_start_a_word_at_each_cjk_character_and_never_mid_character(cjk_tokenizer):
    table = masking.word_start_table(cjk_tokenizer)
    text = "我家住在一条安静的小街上。祖母は毎朝六時に起きて、庭の花に水をやる。"
    ids = cjk_tokenizer(text, add_special_tokens=False)["input_ids"]
    tokens = cjk_tokenizer.convert_ids_to_tokens(ids)
    byte_of = {character: byte for byte, character in bytes_to_unicode().items()}
    token_bytes = [bytes(byte_of[character] for character in token) for token in tokens]
    assert b"".join(token_bytes) == text.encode("utf-8")
    # Every character of the text is CJK: a token starts a word exactly when its first byte starts a character.
    character_starts = set(itertools.accumulate((len(c.encode("utf-8")) for c in text), initial=0))
    token_offsets = itertools.accumulate((len(b) for b in token_bytes), initial=0)
    new_character = [offset in character_starts for offset, _ in zip(token_offsets, ids)]
    assert not all(new_character), "no token begins mid-character: a weak test"
    assert [bool(table[i]) for i in ids] == new_character, tokens


def test_byte_level_hangul_thai_and_latin_keep_the_marker_rule(cjk_tokenizer):
    table = masking.word_start_table(cjk_tokenizer)
    for text in ("한국어는 띄어쓰기를 한다", "ภาษาไทย", "the quick brownness"):
        ids = cjk_tokenizer(" " + text, add_special_tokens=False)["input_ids"]
        tokens = cjk_tokenizer.convert_ids_to_tokens(ids)
        assert [bool(table[i]) for i in ids] == [t.startswith("Ġ") for t in tokens]


def test_english_word_starts_of_a_byte_level_vocabulary_are_its_markers(tiny_tokenizer):
    """Only tokens that begin with the lead byte of a CJK character (lone bytes, in an English vocabulary) differ
    from the "Ġ" rule: no token of English text changes."""
    tokens = tiny_tokenizer.convert_ids_to_tokens(list(range(len(tiny_tokenizer))))
    special = set(tiny_tokenizer.all_special_ids)
    markers = [t.startswith("Ġ") and i not in special for i, t in enumerate(tokens)]
    byte_of = {character: byte for byte, character in bytes_to_unicode().items()}
    changed = [t for t, start, marker in zip(tokens, vocabulary_word_starts(tiny_tokenizer).tolist(), markers)
               if start != marker]  # fmt: skip
    assert changed and all(len(t) == 1 and 0xE3 <= byte_of[t] <= 0xF0 for t in changed), changed


def test_wordpiece_and_sentencepiece_cjk_tokens_start_words():
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "##s", "中", "##国", "##人", "の", "##ing", "한", "##국"]
    wordpiece = BertTokenizer(vocab={w: i for i, w in enumerate(words)})
    assert masking.word_start_table(wordpiece).tolist() == [False] * 5 + [True, False, True, True, True, True,
                                                                          False, True, False]  # fmt: skip

    vocab = {"<pad>": 0, "<mask>": 1, "<unk>": 2, "▁the": 3, "s": 4, "▁中": 5, "国": 6, "の": 7, "▁한": 8, "국": 9}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    sentencepiece = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", mask_token="<mask>", unk_token="<unk>"
    )
    assert masking.word_start_table(sentencepiece).tolist() == [False] * 3 + [True, False, True, True, True,
                                                                              True, False]  # fmt: skip


def test_span_masking_statistics_on_chinese_and_japanese(cjk_tokenizer):
    special = masking.special_token_table(cjk_tokenizer)
    table = masking.word_start_table(cjk_tokenizer)
    for code in ("zh", "ja"):
        ids = cjk_tokenizer((LANGUAGES / f"{code}.txt").read_text(encoding="utf-8"))["input_ids"]
        rows = torch.tensor(ids[: len(ids) // 256 * 256]).reshape(-1, 256).repeat(100, 1)
        maskable = ~special[rows]
        keys = masking.row_keys(0, torch.zeros(len(rows)), torch.arange(len(rows)))
        result = masking.span_mask(masking.word_starts(rows, maskable, table), maskable, keys)
        assert abs(float(result.masked.sum() / maskable.sum()) - 0.15) < 0.005, code
        assert abs(float(result.span_lengths.double().mean()) - 3.8) < 0.2, code


# --------------------------------------------------------------------------------------------------------
# The examples' own word boundaries


def _whole_words_masked(batch, starts, maskable):
    """Whether a word's tokens are masked all together or not at all (spans never split a word)."""
    masked = batch["labels"] != -100
    previous = torch.nn.functional.pad(masked[:, :-1], (1, 0), value=False)
    continuation = ~starts & maskable
    return bool(masked.any()) and torch.equal(masked & continuation, previous & continuation)


@pytest.mark.parametrize("masking_scheme", ["span", "word", "ngram", "pmi"])
def test_collator_masks_whole_words_of_a_word_starts_column(tiny_tokenizer, masking_scheme):
    ids = tiny_tokenizer(" ".join(["the quick brown fox jumps"] * 20))["input_ids"]
    # Words of three tokens each, whatever the vocabulary says (the special tokens <s> and </s> are words of none).
    starts = [0] + [int(i % 3 == 0) for i in range(len(ids) - 2)] + [0]
    # PMI masking draws units and the words outside them alike: with no unit marked, it masks whole words.
    units = {"masking_units": [0] * len(ids)} if masking_scheme == "pmi" else {}
    examples = [{"input_ids": ids, "word_starts": starts, "example_index": i, **units} for i in range(8)]
    collator = DataCollatorForSpanMasking(tiny_tokenizer, seed=0, masking=masking_scheme, mlm_probability=0.3)
    batch = collator(examples)
    maskable = ~masking.special_token_table(tiny_tokenizer)[torch.tensor([ids] * 8)]
    assert _whole_words_masked(batch, torch.tensor([starts] * 8, dtype=torch.bool), maskable)
    with_word_ids = [{"input_ids": ids, "word_ids": [-1] + [i // 3 for i in range(len(ids) - 2)] + [-1],
                      "example_index": i, **units} for i in range(8)]  # fmt: skip
    assert torch.equal(collator(with_word_ids)["labels"], batch["labels"])
    without = collator([{"input_ids": ids, "example_index": i, **units} for i in range(8)])
    assert not torch.equal(without["labels"], batch["labels"])


def test_examples_that_carry_word_boundaries_and_examples_that_do_not_are_refused(tiny_tokenizer):
    examples = [{"input_ids": [0, 5, 6, 2], "word_starts": [0, 1, 1, 0]}, {"input_ids": [0, 5, 6, 2]}]
    with pytest.raises(ValueError, match="1 of the 2 examples carry their own word boundaries"):
        example_word_starts(examples, 4)
    assert example_word_starts([{"input_ids": [0, 5]}], 2) is None
    padded = example_word_starts([{"word_ids": [None, 0, 0, 1, None]}, {"word_starts": [0, 1]}], 5)
    assert padded.tolist() == [[False, True, False, True, False], [False, True, False, False, False]]
