"""DataCollatorForSpanMasking as a drop-in for transformers' DataCollatorForLanguageModeling: every behaviour
transformers' own collator tests check (shapes, padding to a multiple, left padding, -100 outside the targets,
special tokens never masked, inputs left as they were, NumPy output, causal-LM mode, masking rates, seeds,
next-sentence and sentence-order labels), with span masking and with token masking, plus the edge cases a
drop-in must take (rows of special tokens only, empty rows, mlm_probability=0, tokenizers without word-start
markers, no pad token)."""

import copy
import dataclasses
import warnings

import numpy as np
import pytest
import torch
from conftest import TINY_TEXT
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import DataCollatorForLanguageModeling, PreTrainedTokenizerFast, set_seed

from spanroberta.data.collator import DataCollatorForSpanMasking

MASKINGS = ("span", "token")


@pytest.fixture(scope="module")
def rows(tiny_tokenizer):
    """Rows of 3 to 120 ids, <s> ... </s>, cut from the shared tiny sentences."""
    stream = [i for ids in tiny_tokenizer(TINY_TEXT, add_special_tokens=False)["input_ids"] for i in ids]
    lengths = [3 + (37 * k) % 118 for k in range(24)]
    starts = np.cumsum([0, *lengths])
    return [
        [tiny_tokenizer.cls_token_id, *stream[s : s + n - 2], tiny_tokenizer.sep_token_id]
        for s, n in zip(starts, lengths)
    ]


@pytest.fixture
def left_padding_tokenizer(tiny_tokenizer):
    tokenizer = copy.deepcopy(tiny_tokenizer)
    tokenizer.padding_side = "left"
    return tokenizer


def collate(tokenizer, masking, examples, *args, **kwargs):
    return DataCollatorForSpanMasking(tokenizer, *args, masking=masking, **kwargs)(examples)


def special(tokenizer, ids):
    return torch.isin(ids, torch.tensor(tokenizer.all_special_ids))


def test_the_arguments_are_transformers_in_the_same_order(tiny_tokenizer):
    ours = [field.name for field in dataclasses.fields(DataCollatorForSpanMasking)]
    theirs = [field.name for field in dataclasses.fields(DataCollatorForLanguageModeling)]
    assert ours[: len(theirs)] == theirs
    defaults = {f.name: f.default for f in dataclasses.fields(DataCollatorForLanguageModeling) if f.name != "tokenizer"}
    assert {name: getattr(DataCollatorForSpanMasking(tiny_tokenizer), name) for name in defaults} == defaults
    # Positionally, as transformers' collator is called: DataCollatorForLanguageModeling(tokenizer, False).
    assert not DataCollatorForSpanMasking(tiny_tokenizer, False).mlm
    with pytest.raises(TypeError):
        DataCollatorForSpanMasking(tiny_tokenizer, True, False, 0.15, 0.8, 0.1, None, "pt", 0, "token")


@pytest.mark.parametrize("masking", MASKINGS)
def test_shapes_padding_and_targets(tiny_tokenizer, rows, masking):
    batch = collate(tiny_tokenizer, masking, [{"input_ids": r} for r in rows[:5]], seed=0)
    lengths = [len(r) for r in rows[:5]]
    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    assert all(value.shape == (5, max(lengths)) and value.dtype == torch.long for value in batch.values())
    assert batch["attention_mask"].sum(1).tolist() == lengths
    padding = batch["attention_mask"] == 0
    assert bool((batch["input_ids"][padding] == tiny_tokenizer.pad_token_id).all())
    original = torch.full_like(batch["input_ids"], tiny_tokenizer.pad_token_id)
    for i, row in enumerate(rows[:5]):
        original[i, : len(row)] = torch.tensor(row)
    targets = batch["labels"] != -100
    # -100 outside the targets, the original ids at them; tokens outside the targets are left as they were.
    assert bool(targets.any())
    assert torch.equal(batch["labels"][targets], original[targets])
    assert torch.equal(batch["input_ids"][~targets], original[~targets])
    # Special tokens and padding are never targets.
    assert not bool((targets & (special(tiny_tokenizer, original) | padding)).any())

    multiple = collate(tiny_tokenizer, masking, [{"input_ids": r} for r in rows[:5]], pad_to_multiple_of=16, seed=0)
    assert all(value.shape == (5, -(-max(lengths) // 16) * 16) for value in multiple.values())


@pytest.mark.parametrize("masking", MASKINGS)
def test_left_padding_moves_the_same_mask(tiny_tokenizer, left_padding_tokenizer, rows, masking):
    examples = [{"input_ids": r, "token_type_ids": [1] * len(r)} for r in rows[:4]]
    settings = {"seed": 3, "return_sbo_targets": True}
    right = collate(tiny_tokenizer, masking, examples, **settings)
    left = collate(left_padding_tokenizer, masking, examples, **settings)
    length = right["input_ids"].shape[1]
    for i, row in enumerate(rows[:4]):
        pad = length - len(row)
        assert left["attention_mask"][i].tolist() == [0] * pad + [1] * len(row)
        assert left["input_ids"][i, :pad].tolist() == [tiny_tokenizer.pad_token_id] * pad
        assert left["token_type_ids"][i].tolist() == [0] * pad + [1] * len(row)
        for name in ("input_ids", "labels", "sbo_relative_positions"):
            assert torch.equal(left[name][i, pad:], right[name][i, : len(row)])
        for name in ("sbo_left_positions", "sbo_right_positions"):  # positions in the row move with it
            moved = right[name][i, : len(row)]
            assert torch.equal(left[name][i, pad:], torch.where(moved >= 0, moved + pad, moved))
    slots = collate(left_padding_tokenizer, masking, examples, seed=3, label_layout="slots")
    used = slots["mlm_positions"] != -100
    assert torch.equal(slots["labels"][used], left["labels"][left["labels"] != -100])
    assert bool(left["attention_mask"].gather(1, slots["mlm_positions"].clamp(min=0))[used].bool().all())


@pytest.mark.parametrize("masking", MASKINGS)
@pytest.mark.parametrize("kind", ["lists", "numpy", "tensors", "bare lists"])
def test_inputs_are_not_mutated(tiny_tokenizer, rows, masking, kind):
    make = {"lists": list, "numpy": np.array, "tensors": torch.tensor, "bare lists": list}[kind]
    examples = [make(r) for r in rows[:4]]
    if kind != "bare lists":
        examples = [{"input_ids": r, "token_type_ids": make([0] * len(r)), "next_sentence_label": 1} for r in examples]
    before = copy.deepcopy(examples)
    for return_tensors in ("pt", "np"):
        collate(tiny_tokenizer, masking, examples, return_tensors=return_tensors)
    assert [as_lists(e) for e in examples] == [as_lists(e) for e in before]


def as_lists(value):
    if isinstance(value, dict):
        return {name: as_lists(v) for name, v in value.items()}
    return np.asarray(value).tolist() if isinstance(value, (list, np.ndarray, torch.Tensor)) else value


@pytest.mark.parametrize("masking", MASKINGS)
def test_numpy_output_holds_the_same_batch(tiny_tokenizer, rows, masking):
    examples = [{"input_ids": r, "sentence_order_label": i % 2} for i, r in enumerate(rows[:4])]
    tensors = collate(tiny_tokenizer, masking, examples, seed=5)
    arrays = collate(tiny_tokenizer, masking, examples, seed=5, return_tensors="np")
    per_call = DataCollatorForSpanMasking(tiny_tokenizer, seed=5, masking=masking)(examples, return_tensors="np")
    for batch in (arrays, per_call):
        assert set(batch) == set(tensors)
        assert all(isinstance(value, np.ndarray) and value.dtype == np.int64 for value in batch.values())
        assert all(np.array_equal(batch[name], tensors[name].numpy()) for name in tensors)
    with pytest.raises(ValueError, match="return_tensors='tf' is not one of 'pt', 'np'"):
        DataCollatorForSpanMasking(tiny_tokenizer, return_tensors="tf")


def test_causal_lm_labels_are_the_ids_with_padding_ignored(tiny_tokenizer, left_padding_tokenizer, rows):
    backend = Tokenizer(models.WordLevel({"<pad>": 0, "<unk>": 1, "the": 2}, unk_token="<unk>"))
    no_mask = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", unk_token="<unk>")
    with pytest.raises(ValueError, match="no mask token"):
        DataCollatorForSpanMasking(no_mask)
    assert DataCollatorForSpanMasking(no_mask, mlm=False)([[2, 2], [2]])["labels"].tolist() == [[2, 2], [2, -100]]

    for tokenizer in (tiny_tokenizer, left_padding_tokenizer):
        batch = DataCollatorForSpanMasking(tokenizer, mlm=False, pad_to_multiple_of=8)(rows[:3])
        padding = batch["attention_mask"] == 0
        assert not bool((batch["input_ids"] == tokenizer.mask_token_id).any())  # nothing masked
        assert torch.equal(batch["labels"][~padding], batch["input_ids"][~padding])
        assert bool((batch["labels"][padding] == -100).all())
        assert bool(padding[:, 0].any() if tokenizer.padding_side == "left" else padding[:, -1].any())
    with pytest.raises(ValueError, match="SBO targets need mlm=True"):
        DataCollatorForSpanMasking(tiny_tokenizer, mlm=False, label_layout="slots")
    with pytest.raises(ValueError, match="whole_word_mask=True .* needs mlm=True"):
        DataCollatorForSpanMasking(tiny_tokenizer, mlm=False, whole_word_mask=True)
    packed = [{"input_ids": row, "sequence_lengths": [len(row)]} for row in rows[:2]]
    with pytest.raises(ValueError, match="mlm=False takes unpacked rows"):
        DataCollatorForSpanMasking(tiny_tokenizer, mlm=False)(packed)


@pytest.mark.parametrize("masking", MASKINGS)
def test_masking_rates(tiny_tokenizer, rows, masking):
    collator = DataCollatorForSpanMasking(tiny_tokenizer, masking=masking, seed=0)
    batches = [collator(rows) for _ in range(8)]
    originals = [DataCollatorForSpanMasking(tiny_tokenizer, mlm=False)(rows)["input_ids"]] * len(batches)
    targets = torch.cat([b["labels"] != -100 for b in batches])
    original = torch.cat(originals)
    maskable = torch.cat([b["attention_mask"].bool() for b in batches]) & ~special(tiny_tokenizer, original)
    # Each row's budget is int(0.15 n + u): the share is 0.15 up to one token per row.
    assert abs(targets.sum() / maskable.sum() - 0.15) <= len(targets) / maskable.sum()
    inputs = torch.cat([b["input_ids"] for b in batches])
    as_mask = (inputs[targets] == tiny_tokenizer.mask_token_id).float().mean()
    kept = (inputs[targets] == original[targets]).float().mean()
    assert abs(as_mask - 0.8) < 0.12 and abs(kept - 0.1) < 0.08  # 80% [MASK], 10% random, 10% kept

    every = collate(tiny_tokenizer, masking, rows, True, False, 1.0, 1.0, 0.0, seed=0)  # positionally
    assert torch.equal(every["labels"] != -100, maskable[: len(rows)])
    assert bool((every["input_ids"][every["labels"] != -100] == tiny_tokenizer.mask_token_id).all())
    unchanged = collate(tiny_tokenizer, masking, rows, mask_replace_prob=0.0, random_replace_prob=0.0, seed=0)
    assert torch.equal(unchanged["input_ids"], original[: len(rows)])
    nothing = collate(tiny_tokenizer, masking, rows, mlm_probability=0.0, seed=0)
    assert bool((nothing["labels"] == -100).all()) and torch.equal(nothing["input_ids"], original[: len(rows)])


@pytest.mark.parametrize("masking", MASKINGS)
def test_seeds(tiny_tokenizer, rows, masking):
    def labels(collator):
        return collator(rows)["labels"]

    seeded = [DataCollatorForSpanMasking(tiny_tokenizer, masking=masking, seed=s) for s in (42, 42, 43)]
    first, again, other = (labels(c) for c in seeded)
    assert torch.equal(first, again) and not torch.equal(first, other)
    assert not torch.equal(labels(seeded[0]), first)  # a fresh mask per call

    # seed=None follows torch's global generator, as transformers' collator does: set_seed decides the masks.
    unseeded = DataCollatorForSpanMasking(tiny_tokenizer, masking=masking)
    set_seed(7)
    seven = labels(unseeded)
    set_seed(7)
    assert torch.equal(labels(unseeded), seven)
    set_seed(8)
    assert not torch.equal(labels(unseeded), seven)
    torch.manual_seed(7)  # seeded collators keep their own generator
    assert torch.equal(labels(DataCollatorForSpanMasking(tiny_tokenizer, masking=masking, seed=42)), first)


@pytest.mark.parametrize("masking", MASKINGS)
@pytest.mark.parametrize("name", ["next_sentence_label", "sentence_order_label"])
def test_sentence_labels(tiny_tokenizer, rows, masking, name):
    examples = [
        {"input_ids": torch.tensor(r), "token_type_ids": [0] * len(r), name: i % 2} for i, r in enumerate(rows[:4])
    ]
    for return_tensors in ("pt", "np"):
        batch = collate(tiny_tokenizer, masking, examples, pad_to_multiple_of=8, return_tensors=return_tensors)
        assert batch[name].tolist() == [0, 1, 0, 1] and batch[name].shape == (4,)
        assert batch["token_type_ids"].shape == batch["input_ids"].shape == batch["labels"].shape
        assert batch["input_ids"].shape[1] % 8 == 0


@pytest.mark.parametrize("masking", MASKINGS)
def test_special_tokens_are_never_masked(tiny_tokenizer, rows, masking):
    specials = [[tiny_tokenizer.cls_token_id, tiny_tokenizer.sep_token_id, tiny_tokenizer.sep_token_id]] * 3
    # Rows of special tokens only, and empty rows, alone or beside a row with tokens to mask: nothing to predict.
    for examples in (specials, [[], []], [[], rows[1]], [specials[0], rows[1]]):
        for layout in ("dense", "slots"):
            batch = collate(tiny_tokenizer, masking, examples, mlm_probability=1.0, label_layout=layout, seed=0)
            assert bool((batch["labels"][0] == -100).all())
    # A special_tokens_mask, as tokenizers give with return_special_tokens_mask=True, is honoured too.
    marked = [{"input_ids": r, "special_tokens_mask": [0] + [1] * (len(r) - 1)} for r in rows[:3]]
    batch = collate(tiny_tokenizer, masking, marked, mlm_probability=1.0, seed=0)
    assert bool((batch["labels"][:, 1:] == -100).all())


def test_words_come_from_word_ids_without_word_start_markers(rows):
    backend = Tokenizer(models.WordPiece({"[PAD]": 0, "[UNK]": 1, "[MASK]": 2, "un": 3, "+der": 4, "went": 5,
                                          "in": 6}, unk_token="[UNK]", continuing_subword_prefix="+"))  # fmt: skip
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]",
                                        mask_token="[MASK]")  # fmt: skip
    encodings = [tokenizer("went under in under")] * 64
    assert encodings[0]["input_ids"] == [5, 3, 4, 6, 3, 4]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # word_ids() are there: no warning
        batch = DataCollatorForSpanMasking(tokenizer, mlm_probability=0.3, seed=0)(encodings)
    targets = batch["labels"] != -100
    # "under" is one word of two tokens: masked whole, or not at all.
    assert bool(targets.any())
    assert torch.equal(targets[:, 1], targets[:, 2]) and torch.equal(targets[:, 4], targets[:, 5])

    collator = DataCollatorForSpanMasking(tokenizer, seed=0)
    with pytest.warns(UserWarning, match="takes each token as a word"):
        collator([e["input_ids"] for e in encodings])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once
        collator([e["input_ids"] for e in encodings])
    with pytest.raises(ValueError, match="whole_word_mask=True masks whole words"):
        DataCollatorForSpanMasking(tokenizer, whole_word_mask=True, masking="token")


def test_a_missing_pad_token_fails_only_when_rows_need_padding(tiny_tokenizer, rows):
    tokenizer = copy.deepcopy(tiny_tokenizer)
    tokenizer.pad_token = None
    collator = DataCollatorForSpanMasking(tokenizer, seed=0)
    assert collator([rows[0], rows[0]])["input_ids"].shape == (2, len(rows[0]))
    with pytest.raises(ValueError, match="need padding to .* no pad token"):
        collator([rows[0], rows[1]])


def test_ids_outside_the_vocabulary_are_refused(tiny_tokenizer):
    with pytest.raises(ValueError, match="outside the tokenizer's vocabulary"):
        DataCollatorForSpanMasking(tiny_tokenizer)([[0, len(tiny_tokenizer), 2]])
