"""DataCollatorForSpanMasking (padding, outputs, keyed determinism, errors, a model forward) and the dynamic and
static masking schedules (epochs, pickling, DataLoader workers, the Trainer)."""

import pickle

import datasets
import pytest
import torch
from conftest import TINY_TEXT, dense
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, RobertaConfig, RobertaForMaskedLM

from spanroberta import SpanRobertaConfig, SpanRobertaForPreTraining

from spanroberta.data.collator import DataCollatorForSpanMasking
from spanroberta.data.masking import masking_budget, row_keys
from spanroberta.data.masking_schedule import DynamicMaskingDataset, StaticMaskingDataset

BLOCK = 64


@pytest.fixture(scope="module")
def blocks(tiny_tokenizer):
    """Blocks of 64 ids, <s> ... </s>, packed from the shared tiny sentences."""
    stream = [i for ids in tiny_tokenizer(TINY_TEXT[:40], add_special_tokens=False)["input_ids"] for i in ids]
    body = BLOCK - 2
    return [
        [tiny_tokenizer.cls_token_id] + stream[i : i + body] + [tiny_tokenizer.sep_token_id]
        for i in range(0, len(stream) - body, body)
    ]


def masked_positions(batch):
    return dense(batch) != -100


SLOT_NAMES = ("mlm_positions", "labels", "sbo_left_positions", "sbo_right_positions", "sbo_relative_positions")


def test_pads_mixed_lengths_and_passes_fields_through(tiny_tokenizer, blocks):
    collator = DataCollatorForSpanMasking(tiny_tokenizer, label_layout="slots", pad_to_multiple_of=8)
    lengths = [64, 30, 17]
    examples = [
        {
            "input_ids": torch.tensor(blocks[0][:n]) if i == 1 else blocks[0][:n],
            "token_type_ids": [1] * n,
            "next_sentence_label": i % 2,
            "example_index": i,
            "mask_epoch": 0,
        }
        for i, n in enumerate(lengths)
    ]
    examples[2]["input_ids"] = examples[2]["input_ids"][:-1] + [tiny_tokenizer.sep_token_id]
    batch = collator(examples)

    assert set(batch) == {
        "input_ids",
        "attention_mask",
        "mlm_positions",
        "labels",
        "sbo_left_positions",
        "sbo_right_positions",
        "sbo_relative_positions",
        "token_type_ids",
        "next_sentence_label",
    }
    assert all(t.dtype == torch.long for t in batch.values())
    assert batch["input_ids"].shape == (3, 64)
    assert "position_ids" not in batch  # unpacked examples: the model numbers positions itself
    # ceil(0.15 x 64) prediction slots per row, whatever each row masks
    assert all(batch[name].shape == (3, 10) for name in SLOT_NAMES)
    assert batch["attention_mask"].sum(1).tolist() == lengths
    padding = batch["attention_mask"] == 0
    assert bool((batch["input_ids"][padding] == tiny_tokenizer.pad_token_id).all())
    assert bool((dense(batch)[padding] == -100).all())
    assert bool((dense(batch, "sbo_relative_positions")[padding] == -100).all())
    # no slot points at padding, and the used slots come first
    used = batch["mlm_positions"] != -100
    assert bool(batch["attention_mask"].gather(1, batch["mlm_positions"].clamp(min=0))[used].bool().all())
    assert torch.equal(used, torch.arange(10) < used.sum(1, keepdim=True))
    assert batch["token_type_ids"].sum(1).tolist() == lengths
    assert batch["next_sentence_label"].tolist() == [0, 1, 0]
    assert bool(masked_positions(batch).any())

    rounded = DataCollatorForSpanMasking(tiny_tokenizer, pad_to_multiple_of=8)([{"input_ids": blocks[0][:30]}])
    assert rounded["input_ids"].shape == (1, 32)


def test_mask_depends_only_on_seed_epoch_and_index(tiny_tokenizer, blocks):
    collator = DataCollatorForSpanMasking(tiny_tokenizer, label_layout="slots", seed=3)
    row = blocks[0][:40] + [tiny_tokenizer.sep_token_id]
    alone = collator([{"input_ids": row, "example_index": 7, "mask_epoch": 2}])
    # In another batch, in second place, padded to 64, and beside other examples: the same mask.
    crowd = collator(
        [
            {"input_ids": blocks[1], "example_index": 8, "mask_epoch": 2},
            {"input_ids": row, "example_index": 7, "mask_epoch": 2},
            {"input_ids": blocks[2], "example_index": 0, "mask_epoch": 2},
        ]
    )
    for name, value in alone.items():
        if name in SLOT_NAMES:
            # 7 slots alone (41 tokens), 10 in the crowd (64): the same targets, then unused slots
            used = value.shape[1]
            assert torch.equal(crowd[name][1, :used], value[0]), name
            assert bool((crowd[name][1, used:] == -100).all()), name
            if name != "mlm_positions":
                assert torch.equal(dense(crowd, name)[1, : len(row)], dense(alone, name)[0]), name
        else:
            assert torch.equal(crowd[name][1, : len(row)], value[0]), name
    assert bool(masked_positions(alone).any())

    next_epoch = collator([{"input_ids": row, "example_index": 7, "mask_epoch": 3}])
    assert not torch.equal(masked_positions(next_epoch), masked_positions(alone))
    other_seed = DataCollatorForSpanMasking(tiny_tokenizer, label_layout="slots", seed=4)(
        [{"input_ids": row, "example_index": 7, "mask_epoch": 2}]
    )
    assert not torch.equal(masked_positions(other_seed), masked_positions(alone))


def test_plain_calls_draw_fresh_masks_reproducibly(tiny_tokenizer, blocks):
    examples = [{"input_ids": b} for b in blocks[:4]]
    collator = DataCollatorForSpanMasking(tiny_tokenizer, label_layout="slots", masking="word", seed=5)
    first, second = collator(examples), collator(examples)
    assert not torch.equal(first["input_ids"], second["input_ids"])
    replay = DataCollatorForSpanMasking(tiny_tokenizer, label_layout="slots", masking="word", seed=5)
    assert torch.equal(replay(examples)["input_ids"], first["input_ids"])
    assert torch.equal(replay(blocks[:4])["input_ids"], second["input_ids"])  # bare id lists work too


@pytest.mark.parametrize("masking", ["span", "word", "token"])
def test_each_scheme_masks_within_the_budget(tiny_tokenizer, blocks, masking):
    # The rates themselves are checked on real text in test_masking.py; here, the collator's wiring.
    collator = DataCollatorForSpanMasking(
        tiny_tokenizer, label_layout="slots", masking=masking, seed=1, return_sbo_targets=masking == "span"
    )
    batch = collator([{"input_ids": b, "example_index": i, "mask_epoch": 0} for i, b in enumerate(blocks)])
    ids = torch.tensor(blocks)
    maskable = ~torch.isin(ids, torch.tensor(tiny_tokenizer.all_special_ids))
    keys = row_keys(1, torch.zeros(len(blocks)), torch.arange(len(blocks)))
    budget = masking_budget(maskable, keys, 0.15)
    masked = masked_positions(batch)
    assert not bool((masked & ~maskable).any())
    if masking == "token":
        assert torch.equal(masked.sum(1), budget)
    else:
        # Whole words: a row stops short of its budget when the next word does not fit.
        assert bool((masked.sum(1) <= budget).all()) and masked.sum() > 0.8 * budget.sum()
    assert torch.equal(dense(batch)[masked], ids[masked])
    # the slots hold exactly the masked positions, in increasing order, then -100
    for row in range(len(blocks)):
        slots = batch["mlm_positions"][row]
        assert slots[slots != -100].tolist() == masked[row].nonzero().flatten().tolist()
        assert bool((batch["labels"][row][slots == -100] == -100).all())
    assert ("sbo_relative_positions" in batch) == (masking == "span")


def test_a_tiny_roberta_trains_on_the_batch(tiny_tokenizer, blocks):
    config = SpanRobertaConfig(
        vocab_size=len(tiny_tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=BLOCK + 2,
        pad_token_id=tiny_tokenizer.pad_token_id,
        use_sbo=False,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model = SpanRobertaForPreTraining(config)
    collator = DataCollatorForSpanMasking(tiny_tokenizer, label_layout="slots", return_sbo_targets=False)
    batch = collator([{"input_ids": b[: 20 + 10 * i]} for i, b in enumerate(blocks[:4])])
    loss = model(**batch).loss
    assert torch.isfinite(loss)
    loss.backward()
    # The slots carry the loss stock RoBERTa computes from dense labels, with the same weights.
    roberta = RobertaForMaskedLM(RobertaConfig(**config.to_dict()))
    roberta.load_state_dict(model.state_dict(), strict=False)
    roberta.eval()
    dense_loss = roberta(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=dense(batch)
    ).loss
    torch.testing.assert_close(model.eval()(**batch).loss, dense_loss)


def test_bad_settings_and_inputs_raise_clear_errors(tiny_tokenizer, blocks):
    with pytest.raises(ValueError, match="'span', 'word', 'token'"):
        DataCollatorForSpanMasking(tiny_tokenizer, label_layout="slots", masking="spans")
    # The same check as run_pretraining.py's --mlm_probability, without the flag's dashes, and with 0 allowed, as
    # transformers' collator allows it.
    with pytest.raises(ValueError, match=r"^mlm_probability must be at least 0 and at most 1, not 1.5\.$"):
        DataCollatorForSpanMasking(tiny_tokenizer, mlm_probability=1.5)
    backend = Tokenizer(models.WordLevel({"<pad>": 0, "<unk>": 1, "Ġthe": 2}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    no_mask = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", unk_token="<unk>")
    with pytest.raises(ValueError, match="no mask token"):
        DataCollatorForSpanMasking(no_mask, label_layout="slots")

    collator = DataCollatorForSpanMasking(tiny_tokenizer, label_layout="slots")
    with pytest.raises(ValueError, match=r"example 1 of the batch \(example_index=11\)"):
        collator(
            [
                {"input_ids": blocks[0], "example_index": 10},
                {"input_ids": [0, 5, len(tiny_tokenizer), 2], "example_index": 11},
            ]
        )
    with pytest.raises(ValueError, match="either all or none"):
        collator([{"input_ids": blocks[0], "example_index": 0}, {"input_ids": blocks[1]}])


# --------------------------------------------------------------------------------------------------------
# Masking schedules


@pytest.fixture(scope="module")
def block_dataset(blocks):
    return datasets.Dataset.from_dict({"input_ids": blocks[:6], "next_sentence_label": [0, 1] * 3})


def test_dynamic_masking_changes_with_the_epoch(tiny_tokenizer, block_dataset):
    collator = DataCollatorForSpanMasking(tiny_tokenizer, label_layout="slots")
    dataset = DynamicMaskingDataset(block_dataset)
    assert len(dataset) == 6
    item = dataset[4]
    assert item["example_index"] == 4 and item["mask_epoch"] == 0 and item["next_sentence_label"] == 0
    epoch0 = collator([dataset[i] for i in range(6)])
    assert torch.equal(collator([dataset[i] for i in range(6)])["input_ids"], epoch0["input_ids"])
    dataset.set_epoch(1)
    epoch1 = collator([dataset[i] for i in range(6)])
    assert not torch.equal(epoch1["input_ids"], epoch0["input_ids"])

    copy = pickle.loads(pickle.dumps(dataset))
    assert copy.epoch == 1 and copy[2] == dataset[2]


def test_static_masking_keeps_one_mask_per_copy(tiny_tokenizer, block_dataset):
    collator = DataCollatorForSpanMasking(tiny_tokenizer, label_layout="slots")
    dataset = StaticMaskingDataset(block_dataset, dupe_factor=3)
    assert len(dataset) == 18 and not hasattr(dataset, "set_epoch")
    assert dataset[13]["example_index"] == 1 and dataset[13]["mask_epoch"] == 2
    assert dataset[13]["input_ids"] == block_dataset[1]["input_ids"]
    copies = [collator([dataset[c * 6 + i] for i in range(6)])["input_ids"] for c in range(3)]
    assert not torch.equal(copies[0], copies[1]) and not torch.equal(copies[1], copies[2])
    # Seen again in a later epoch, in another order, a copy has the same mask.
    again = collator([dataset[6 + i] for i in reversed(range(6))])["input_ids"]
    assert torch.equal(again.flip(0), copies[1])
    assert pickle.loads(pickle.dumps(dataset))[13] == dataset[13]
    with pytest.raises(IndexError):
        dataset[18]


def test_persistent_dataloader_workers_see_set_epoch(tiny_tokenizer, block_dataset):
    collator = DataCollatorForSpanMasking(tiny_tokenizer, label_layout="slots")
    dataset = DynamicMaskingDataset(block_dataset)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=3, num_workers=2, persistent_workers=True, collate_fn=collator
    )
    masks = []
    for epoch in range(2):
        dataset.set_epoch(epoch)
        masks.append(torch.cat([batch["input_ids"] for batch in loader]))
    assert not torch.equal(masks[0], masks[1])
    assert torch.equal(masks[1], collator([dataset[i] for i in range(6)])["input_ids"])


@pytest.mark.slow
def test_the_trainer_sets_the_epoch_and_keeps_the_keys(tiny_tokenizer, block_dataset, tmp_path):
    from transformers import Trainer, TrainingArguments

    config = SpanRobertaConfig(
        vocab_size=len(tiny_tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=BLOCK + 2,
        pad_token_id=tiny_tokenizer.pad_token_id,
        use_sbo=False,
    )
    collator = DataCollatorForSpanMasking(tiny_tokenizer, label_layout="slots", return_sbo_targets=False)
    seen = []

    def recording_collator(examples):
        seen.append(sorted((e["mask_epoch"], e["example_index"]) for e in examples))
        return collator([{k: v for k, v in e.items() if k != "next_sentence_label"} for e in examples])

    args = TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=3,
        num_train_epochs=2,
        remove_unused_columns=False,  # otherwise the Trainer drops example_index and mask_epoch
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=SpanRobertaForPreTraining(config),
        args=args,
        train_dataset=DynamicMaskingDataset(block_dataset),
        data_collator=recording_collator,
    )
    trainer.train()
    epochs_seen = sorted({epoch for batch in seen for epoch, _ in batch})
    assert epochs_seen == [0, 1]
    assert sorted(index for batch in seen for epoch, index in batch if epoch == 1) == list(range(6))


def test_too_few_prediction_slots_fail_on_the_first_batch(tiny_tokenizer):
    """max_predictions_per_seq below what a row can mask is refused on every batch, not only on the unlucky one
    that masks more than it holds."""
    settings = {"label_layout": "slots", "masking": "token"}
    collator = DataCollatorForSpanMasking(tiny_tokenizer, **settings, max_predictions_per_seq=9)
    rows = [{"input_ids": [0] + [5 + i % 50 for i in range(62)] + [2], "example_index": i} for i in range(2)]
    with pytest.raises(ValueError, match=r"max_predictions_per_seq=9 is below .* \(10\)"):
        collator(rows)
    enough = DataCollatorForSpanMasking(tiny_tokenizer, **settings, max_predictions_per_seq=10)
    assert enough(rows)["labels"].shape[1] == 10


# --------------------------------------------------------------------------------------------------------
# The default layout: a drop-in for transformers' DataCollatorForLanguageModeling


def wordpiece_tokenizer():
    """A cased WordPiece tokenizer with BERT's special tokens, trained on the shared tiny sentences."""
    from tokenizers import decoders, processors, trainers

    backend = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    backend.train_from_iterator(TINY_TEXT, trainers.WordPieceTrainer(vocab_size=300, special_tokens=special))
    backend.post_processor = processors.BertProcessing(
        ("[SEP]", backend.token_to_id("[SEP]")), ("[CLS]", backend.token_to_id("[CLS]"))
    )
    backend.decoder = decoders.WordPiece()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
        mask_token="[MASK]",
    )  # fmt: skip


@pytest.mark.parametrize("masking", ["span", "token"])
def test_dense_labels_predict_the_positions_the_slots_would(tiny_tokenizer, blocks, masking):
    rows = [{"input_ids": b[: 30 + 5 * i], "example_index": i, "mask_epoch": 1} for i, b in enumerate(blocks[:4])]
    settings = {"masking": masking, "seed": 7, "return_sbo_targets": True}
    slots = DataCollatorForSpanMasking(tiny_tokenizer, label_layout="slots", **settings)(rows)
    plain = DataCollatorForSpanMasking(tiny_tokenizer, **settings)(rows)
    assert "mlm_positions" not in plain
    torch.testing.assert_close(plain["input_ids"], slots["input_ids"])
    # transformers' convention: [batch, length], the original id where predicted, -100 elsewhere
    assert plain["labels"].shape == plain["input_ids"].shape
    for name in ("labels", "sbo_left_positions", "sbo_right_positions", "sbo_relative_positions"):
        torch.testing.assert_close(plain[name], dense(slots, name))
    original = torch.full_like(plain["input_ids"], tiny_tokenizer.pad_token_id)
    for i, row in enumerate(rows):
        original[i, : len(row["input_ids"])] = torch.tensor(row["input_ids"])
    predicted = plain["labels"] != -100
    assert bool(predicted.any())
    torch.testing.assert_close(plain["labels"][predicted], original[predicted])
    special = torch.isin(original, torch.tensor(tiny_tokenizer.all_special_ids))
    assert not bool((predicted & (special | ~plain["attention_mask"].bool())).any())


def test_unkeyed_rows_get_the_same_mask_in_both_layouts(tiny_tokenizer, blocks):
    slots = DataCollatorForSpanMasking(tiny_tokenizer, seed=3, label_layout="slots")(blocks[:3])
    plain = DataCollatorForSpanMasking(tiny_tokenizer, seed=3)(blocks[:3])
    torch.testing.assert_close(plain["labels"], dense(slots))
    # Stock masked LMs take no SBO inputs: the dense layout leaves them out unless asked.
    assert set(plain) == {"input_ids", "attention_mask", "labels"}


def test_layout_settings_are_checked(tiny_tokenizer):
    with pytest.raises(ValueError, match="label_layout='sparse' is not one of 'dense', 'slots'"):
        DataCollatorForSpanMasking(tiny_tokenizer, label_layout="sparse")
    with pytest.raises(ValueError, match="max_predictions_per_seq .* needs label_layout='slots'"):
        DataCollatorForSpanMasking(tiny_tokenizer, max_predictions_per_seq=20)


@pytest.mark.parametrize("family", ["roberta", "bert"])
def test_the_default_collator_trains_stock_masked_lms_in_a_plain_trainer(family, tiny_tokenizer, tmp_path):
    from transformers import BertConfig, BertForMaskedLM, Trainer, TrainingArguments

    tokenizer = tiny_tokenizer if family == "roberta" else wordpiece_tokenizer()
    shape = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64,
             "max_position_embeddings": 70, "vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id}
    model = RobertaForMaskedLM(RobertaConfig(**shape)) if family == "roberta" else BertForMaskedLM(BertConfig(**shape))
    texts = datasets.Dataset.from_dict({"text": TINY_TEXT[:32]})
    train = texts.map(lambda rows: tokenizer(rows["text"], truncation=True, max_length=48), batched=True)
    args = TrainingArguments(
        output_dir=str(tmp_path), max_steps=3, per_device_train_batch_size=8, learning_rate=1e-3, logging_steps=1,
        report_to="none", use_cpu=True, disable_tqdm=True, save_strategy="no",
    )  # fmt: skip
    # The Trainer's default remove_unused_columns drops the text, as it would for DataCollatorForLanguageModeling.
    collator = DataCollatorForSpanMasking(tokenizer, seed=0)
    trainer = Trainer(model=model, args=args, train_dataset=train, data_collator=collator)
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert trainer.state.global_step == 3 and len(losses) == 3
    assert all(loss == loss and 0 < loss < float("inf") for loss in losses)
