"""Both label layouts give the same losses for the same mask: transformers' dense labels (`[batch,
length]`, -100 where not predicted) and the prediction slots of `DataCollatorForSpanMasking` (`labels` and
`mlm_positions` `[batch, slots]`, with the SBO fields), for the pretraining models and the masked LMs of both
encoders."""

import pytest
import torch
from conftest import TINY_TEXT, dense, packed_batch, tiny_span_config

from spanroberta import (
    DataCollatorForSpanMasking,
    SpanAlbertConfig,
    SpanAlbertForMaskedLM,
    SpanAlbertForPreTraining,
    SpanRobertaForMaskedLM,
    SpanRobertaForPreTraining,
)

MAX_SPAN_TARGETS = 4
LOSSES = ("loss", "mlm_loss", "sbo_loss", "sop_loss")
SBO_FIELDS = ("sbo_left_positions", "sbo_right_positions", "sbo_relative_positions")


def tiny_config(encoder: str, tokenizer, **overrides):
    settings = dict(
        vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, max_span_targets=MAX_SPAN_TARGETS,
        sbo_position_embedding_size=8, sentence_objective="sop",
    )  # fmt: skip
    settings.update(overrides)
    if encoder == "spanroberta":
        return tiny_span_config(**settings)
    return SpanAlbertConfig(
        embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=128, **settings,
    )  # fmt: skip


PRETRAINING = {"spanroberta": SpanRobertaForPreTraining, "spanalbert": SpanAlbertForPreTraining}
MASKED_LM = {"spanroberta": SpanRobertaForMaskedLM, "spanalbert": SpanAlbertForMaskedLM}


@pytest.fixture(scope="module")
def slot_batch(tiny_tokenizer):
    """Span-masked rows of different lengths (padded), in prediction slots with SBO targets and SOP labels."""
    collator = DataCollatorForSpanMasking(
        tiny_tokenizer, label_layout="slots", mlm_probability=0.3, max_span_targets=MAX_SPAN_TARGETS, seed=4
    )
    batch = collator([tiny_tokenizer(text) for text in TINY_TEXT[:6]])
    batch["sentence_order_label"] = torch.tensor([0, 1, 1, 0, 1, 0])
    masked, sbo = batch["labels"] != -100, batch["sbo_relative_positions"] != -100
    # Not every masked token is an SBO target (spans longer than MAX_SPAN_TARGETS), and rows are padded.
    assert 0 < int(sbo.sum()) < int(masked.sum()) and bool((batch["attention_mask"] == 0).any())
    return batch


def dense_layout(batch, with_sbo_fields=False):
    """The batch in transformers' layout: dense labels, no mlm_positions and (by default) no SBO fields."""
    fields = {name: value for name, value in batch.items() if name not in ("mlm_positions", "labels", *SBO_FIELDS)}
    fields["labels"] = dense(batch)
    if with_sbo_fields:
        fields.update({name: dense(batch, name) for name in SBO_FIELDS})
    return fields


def losses_and_gradients(model, batch):
    model.zero_grad(set_to_none=True)
    output = model(**batch)
    output.loss.backward()
    return output, {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def assert_same(slots, dense_output, fields=LOSSES):
    for field in fields:
        torch.testing.assert_close(getattr(dense_output, field), getattr(slots, field), rtol=1e-5, atol=1e-5, msg=field)


@pytest.mark.parametrize("efficient", [True, False], ids=["efficient", "reference"])
@pytest.mark.parametrize("encoder", ["spanroberta", "spanalbert"])
def test_dense_labels_give_the_losses_and_gradients_of_the_slots(tiny_tokenizer, slot_batch, encoder, efficient):
    """Without SBO fields, the dense path derives the SBO targets from the runs of labelled tokens, as the collator
    does: the SBO loss is that of the collator's targets."""
    torch.manual_seed(0)
    model = PRETRAINING[encoder](tiny_config(encoder, tiny_tokenizer, efficient_pretraining=efficient)).eval()
    slots, slot_gradients = losses_and_gradients(model, slot_batch)
    for with_sbo_fields in (False, True):
        dense_output, dense_gradients = losses_and_gradients(model, dense_layout(slot_batch, with_sbo_fields))
        assert_same(slots, dense_output)
        assert dense_gradients.keys() == slot_gradients.keys()
        for name, gradient in slot_gradients.items():
            torch.testing.assert_close(dense_gradients[name], gradient, rtol=1e-5, atol=1e-5, msg=name)
    # The dense path's slots are each row's labelled positions in increasing order, as many as the fullest row.
    num_slots = int((slot_batch["labels"] != -100).sum(1).max())
    assert dense_output.mlm_logits.shape[1] == num_slots < slot_batch["labels"].shape[1]
    torch.testing.assert_close(dense_output.mlm_logits, slots.mlm_logits[:, :num_slots], rtol=1e-5, atol=1e-5)


def test_packed_rows_take_dense_labels_with_boundaries_inside_their_sequence():
    """Packed rows: the derived SBO boundaries stay inside each span's own sequence, as the collator's do."""
    batch, _ = packed_batch([[7, 5, 9], [12, 8], [4, 6, 5, 4]], 24, 120, seed=3, max_span_targets=MAX_SPAN_TARGETS)
    torch.manual_seed(0)
    model = SpanRobertaForPreTraining(tiny_span_config(max_span_targets=MAX_SPAN_TARGETS)).eval()
    slots = model(**batch)
    dense_output = model(**dense_layout(batch))
    assert_same(slots, dense_output, ("loss", "mlm_loss", "sbo_loss"))


@pytest.mark.parametrize("encoder", ["spanroberta", "spanalbert"])
def test_a_plain_call_with_dense_labels(tiny_tokenizer, encoder):
    """`model(input_ids, labels=dense)`, as with any transformers masked LM: rows of one length, no other field."""
    collator = DataCollatorForSpanMasking(
        tiny_tokenizer, label_layout="slots", mlm_probability=0.3, max_span_targets=MAX_SPAN_TARGETS, seed=1
    )
    batch = collator([tiny_tokenizer(text)["input_ids"][:14] for text in TINY_TEXT[:4]])
    assert bool((batch["attention_mask"] == 1).all())
    torch.manual_seed(0)
    model = PRETRAINING[encoder](tiny_config(encoder, tiny_tokenizer, sentence_objective="none")).eval()
    output = model(batch["input_ids"], labels=dense(batch))
    assert torch.isfinite(output.loss) and output.sbo_loss is not None
    assert_same(model(**batch), output, ("loss", "mlm_loss", "sbo_loss"))


@pytest.mark.parametrize("encoder", ["spanroberta", "spanalbert"])
def test_masked_lm_takes_both_layouts(tiny_tokenizer, slot_batch, encoder):
    """The masked LMs (dense logits) take transformers' labels and the collator's slots (their SBO fields unused)."""
    torch.manual_seed(0)
    model = MASKED_LM[encoder](tiny_config(encoder, tiny_tokenizer, sentence_objective="none")).eval()
    inputs = {"input_ids": slot_batch["input_ids"], "attention_mask": slot_batch["attention_mask"]}
    from_slots = model(**inputs, **{name: slot_batch[name] for name in ("labels", "mlm_positions", *SBO_FIELDS)})
    from_dense = model(**inputs, labels=dense(slot_batch))
    torch.testing.assert_close(from_slots.loss, from_dense.loss, rtol=1e-5, atol=1e-5)
    assert from_slots.logits.shape == (*slot_batch["input_ids"].shape, len(tiny_tokenizer))


@pytest.mark.parametrize("encoder", ["spanroberta", "spanalbert"])
def test_the_collators_two_layouts_give_the_same_losses(tiny_tokenizer, encoder):
    """The same collator settings and seed in either layout (dense: SBO fields per token) give the same losses."""
    examples = [tiny_tokenizer(text) for text in TINY_TEXT[:6]]
    batches = {
        layout: DataCollatorForSpanMasking(
            tiny_tokenizer, label_layout=layout, return_sbo_targets=True, mlm_probability=0.3,
            max_span_targets=MAX_SPAN_TARGETS, seed=7,
        )(examples)
        for layout in ("slots", "dense")
    }  # fmt: skip
    assert batches["dense"]["labels"].shape == batches["dense"]["input_ids"].shape
    torch.manual_seed(0)
    model = PRETRAINING[encoder](tiny_config(encoder, tiny_tokenizer, sentence_objective="none")).eval()
    with torch.no_grad():
        assert_same(model(**batches["slots"]), model(**batches["dense"]), ("loss", "mlm_loss", "sbo_loss"))


@pytest.mark.slow
def test_the_pretraining_trainer_evaluates_either_layout_alike(tiny_tokenizer, tmp_path):
    """PretrainingTrainer.evaluate reads the targets the heads used, so the default (dense) collator works too."""
    from transformers import TrainingArguments

    from spanroberta.pretraining.trainer import PretrainingTrainer

    examples = [{"input_ids": tiny_tokenizer(text)["input_ids"]} for text in TINY_TEXT[:12]]
    torch.manual_seed(0)
    model = SpanRobertaForPreTraining(tiny_config("spanroberta", tiny_tokenizer, sentence_objective="none"))
    metrics = {}
    for layout in ("slots", "dense"):
        collator = DataCollatorForSpanMasking(
            tiny_tokenizer, label_layout=layout, return_sbo_targets=layout == "slots", mlm_probability=0.3,
            max_span_targets=MAX_SPAN_TARGETS, seed=3,
        )  # fmt: skip
        args = TrainingArguments(output_dir=str(tmp_path / layout), report_to="none", use_cpu=True,
                                 per_device_eval_batch_size=4, remove_unused_columns=False)  # fmt: skip
        trainer = PretrainingTrainer(model=model, args=args, data_collator=collator)
        metrics[layout] = trainer.evaluate(examples)
    assert metrics["dense"]["eval_sbo_accuracy"] is not None
    for name in ("eval_loss", "eval_mlm_loss", "eval_mlm_accuracy", "eval_sbo_loss", "eval_sbo_accuracy"):
        assert metrics["dense"][name] == pytest.approx(metrics["slots"][name], rel=1e-5), name
