"""The models: sparse heads, the SBO as the paper defines it, loading paths and exact gradient accumulation."""

import os

import pytest
import torch
from conftest import dense, run_without_spanroberta, tiny_span_config, to_slots
import torch.nn.functional as F
from torch import nn
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForPreTraining,
    AutoModelForQuestionAnswering,
    RobertaConfig,
    RobertaForMaskedLM,
    RobertaForQuestionAnswering,
    RobertaForSequenceClassification,
    RobertaModel,
    TrainingArguments,
)

import spanroberta
from spanroberta import (
    SpanRobertaConfig,
    SpanRobertaForPreTraining,
    SpanRobertaForQuestionAnswering,
)
from spanroberta import DataCollatorForSpanMasking
from spanroberta.models.configuration_spanroberta import first_position_id
from spanroberta.pretraining.trainer import PretrainingTrainer

VOCAB = 120


def tiny_config(**overrides) -> SpanRobertaConfig:
    return tiny_span_config(vocab_size=VOCAB, **overrides)


def make_batch(batch_size: int = 4, length: int = 16, seed: int = 0) -> dict[str, torch.Tensor]:
    """Rows with a different number of masked spans each, their targets in prediction slots as the collator lays
    them out (one more slot than the fullest row holds, so every row has an unused slot)."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, VOCAB, (batch_size, length), generator=generator)
    input_ids[:, 0], input_ids[:, -1] = 0, 2
    labels = torch.full_like(input_ids, -100)
    left, right, relative = (torch.full_like(input_ids, -100) for _ in range(3))
    for row in range(batch_size):
        spans = [(2, 2 + (row % 3) + 1), (9, 9 + 2 * (row % 2) + 1)][: 1 + row % 2]
        for start, end in spans:  # end exclusive
            labels[row, start:end] = input_ids[row, start:end]
            input_ids[row, start:end] = 4  # <mask>
            offsets = torch.arange(end - start)
            keep = offsets < 4
            positions = torch.arange(start, end)[keep]
            left[row, positions], right[row, positions] = start - 1, end
            relative[row, positions] = offsets[keep]
    batch = {
        "input_ids": input_ids,
        "attention_mask": torch.ones_like(input_ids),
        "labels": labels,
        "sbo_left_positions": left,
        "sbo_right_positions": right,
        "sbo_relative_positions": relative,
    }
    return to_slots(batch, num_slots=int((labels != -100).sum(1).max()) + 1)


def test_sbo_head_has_the_papers_shape():
    model = SpanRobertaForPreTraining(tiny_config())
    head = model.sbo_head
    assert head.dense1.in_features == 2 * 32 + 8 and head.dense1.out_features == 32
    assert (head.dense2.in_features, head.dense2.out_features) == (32, 32)
    assert head.position_embeddings.num_embeddings == 4
    # decoder tied to the input embeddings, with a bias of its own
    assert head.decoder.weight is model.roberta.embeddings.word_embeddings.weight
    assert head.decoder.bias is not model.lm_head.bias


@pytest.mark.parametrize("efficient", [True, False])
def test_losses_match_a_dense_computation_and_logits_are_sparse(efficient):
    model = SpanRobertaForPreTraining(tiny_config(efficient_pretraining=efficient)).eval()
    batch = make_batch()
    # padding at the end of two rows, as the collator pads shorter blocks
    batch["input_ids"][1::2, -3:] = 1
    batch["attention_mask"][1::2, -3:] = 0
    output = model(**batch)
    num_slots = batch["mlm_positions"].shape[1]
    assert num_slots < 16
    # one row of logits per prediction slot, never [batch, length, vocab]
    assert output.mlm_logits.shape == (4, num_slots, VOCAB)
    assert output.sbo_logits.shape == (4, num_slots, VOCAB)

    # RobertaForMaskedLM's computation: dense logits, dense labels
    hidden = model.roberta(batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    dense_logits = model.lm_head(hidden)
    labels = dense(batch)
    expected_mlm = F.cross_entropy(dense_logits.view(-1, VOCAB), labels.view(-1))
    torch.testing.assert_close(output.mlm_loss, expected_mlm)
    # the slots' logits are the dense logits gathered at the slots' positions
    used = batch["mlm_positions"] != -100
    rows = torch.arange(4)[:, None].expand_as(used)
    torch.testing.assert_close(output.mlm_logits[used], dense_logits[rows[used], batch["mlm_positions"][used]])

    # SBO from its definition: y_i = f(h_{s-1}, h_{e+1}, p_{i-s}), one token at a time
    head = model.sbo_head
    losses = []
    for row, slot in (batch["sbo_relative_positions"] != -100).nonzero().tolist():
        left = hidden[row, batch["sbo_left_positions"][row, slot]]
        right = hidden[row, batch["sbo_right_positions"][row, slot]]
        relative = head.position_embeddings.weight[batch["sbo_relative_positions"][row, slot]]
        x = nn.functional.gelu(head.dense1(torch.cat([left, right, relative])))
        x = head.layer_norm2(nn.functional.gelu(head.dense2(head.layer_norm1(x))))
        logits = x @ model.roberta.embeddings.word_embeddings.weight.T + head.decoder.bias
        torch.testing.assert_close(output.sbo_logits[row, slot], logits)
        losses.append(F.cross_entropy(logits[None], batch["labels"][row, slot][None]))
    assert len(losses) == int((dense(batch, "sbo_relative_positions") != -100).sum()) > 0
    torch.testing.assert_close(output.sbo_loss, torch.stack(losses).mean())
    torch.testing.assert_close(output.loss, output.mlm_loss + output.sbo_loss)


def test_a_batch_without_targets_has_zero_loss():
    model = SpanRobertaForPreTraining(tiny_config(sentence_objective="sop"))
    batch = make_batch()
    empty = {**batch, "sentence_order_label": torch.full((4,), -100)}
    for name in ("mlm_positions", "labels", "sbo_left_positions", "sbo_right_positions", "sbo_relative_positions"):
        empty[name] = torch.full_like(batch[name], -100)
    for efficient in (True, False):
        model.config.efficient_pretraining = efficient
        model.zero_grad(set_to_none=True)
        output = model(**empty)
        for name in ("loss", "mlm_loss", "sbo_loss", "sop_loss"):
            assert getattr(output, name).item() == 0.0, name
        output.loss.backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
        assert SpanRobertaForPreTraining.loss_normalisers(empty) == {
            "num_items_in_batch": 0, "num_sbo_items_in_batch": 0, "num_sentence_items_in_batch": 0
        }


def test_a_step_without_targets_of_one_head_gives_zero_not_nan():
    """The trainer passes every head's global count; a step whose count is 0 for one head (no SBO target in the
    whole accumulated batch) gives that head a loss of 0, not 0/0."""
    model = SpanRobertaForPreTraining(tiny_config())
    batch = make_batch()
    batch["sbo_relative_positions"] = torch.full_like(batch["sbo_relative_positions"], -100)
    counts = SpanRobertaForPreTraining.loss_normalisers(batch)
    assert int(counts["num_sbo_items_in_batch"]) == 0
    output = model(**batch, **counts)
    assert output.sbo_loss.item() == 0.0 and torch.isfinite(output.loss)
    torch.testing.assert_close(output.loss, output.mlm_loss)


def test_sbo_switch_and_weight():
    batch = make_batch()
    torch.manual_seed(0)
    without = SpanRobertaForPreTraining(tiny_config(use_sbo=False)).eval()
    assert without.sbo_head is None
    output = without(**batch)
    assert output.sbo_loss is None and torch.equal(output.loss, output.mlm_loss)

    weighted = SpanRobertaForPreTraining(tiny_config(sbo_loss_weight=0.5)).eval()
    output = weighted(**batch)
    torch.testing.assert_close(output.loss, output.mlm_loss + 0.5 * output.sbo_loss)


@pytest.mark.parametrize("objective,label_name", [("nsp", "next_sentence_label"), ("sop", "sentence_order_label")])
def test_sentence_heads(objective, label_name):
    model = SpanRobertaForPreTraining(tiny_config(sentence_objective=objective)).eval()
    batch = make_batch()
    labels = torch.tensor([0, 1, 1, 0])
    output = model(**batch, **{label_name: labels})
    expected = F.cross_entropy(output.sentence_logits, labels)
    torch.testing.assert_close(getattr(output, f"{objective}_loss"), expected)
    torch.testing.assert_close(output.loss, output.mlm_loss + output.sbo_loss + expected)


def test_config_rejects_unknown_sentence_objective():
    with pytest.raises(ValueError, match="none, nsp, sop"):
        SpanRobertaConfig(sentence_objective="next")


@pytest.mark.parametrize(
    "config,expected",
    [
        (RobertaConfig(pad_token_id=1), 2),
        (SpanRobertaConfig(pad_token_id=3), 4),
        (AutoConfig.for_model("xlm-roberta", pad_token_id=1), 2),
        (AutoConfig.for_model("bert", pad_token_id=0), 0),
        (AutoConfig.for_model("electra", pad_token_id=0), 0),
        (spanroberta.SpanAlbertConfig(pad_token_id=0), 0),
    ],
    ids=lambda value: value.model_type if hasattr(value, "model_type") else str(value),
)
def test_first_position_id_answers_for_any_config(config, expected):
    """RoBERTa-style encoders number positions from the padding id + 1; BERT, ALBERT and ELECTRA from 0. The
    collator's default is spanroberta's own numbering."""
    assert first_position_id(config) == expected
    from transformers import RobertaTokenizerFast
    tokenizer = RobertaTokenizerFast(vocab={"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4}, merges=[])
    assert DataCollatorForSpanMasking(tokenizer, masking="token").first_position_id == 2


def test_the_loss_kwargs_policy():
    """Pretraining models normalise their losses by the Trainer's counts; every task head returns a plain mean,
    which the Trainer divides by the accumulation steps (models/configuration_spanroberta.py)."""
    for model_class in (SpanRobertaForPreTraining, spanroberta.SpanAlbertForPreTraining,
                        spanroberta.ElectraForReplacedTokenDetection):
        assert model_class.accepts_loss_kwargs is True, model_class.__name__
    heads = [
        getattr(spanroberta, class_path.split(".")[-1])
        for config in (SpanRobertaConfig(), spanroberta.SpanAlbertConfig())
        for auto_class, class_path in config.auto_map.items()
        if auto_class not in ("AutoConfig", "AutoModel", "AutoModelForPreTraining")
    ]
    assert len(heads) == 10
    for model_class in heads:
        assert model_class.accepts_loss_kwargs is False, model_class.__name__


def test_answerability_head_adds_its_loss():
    model = SpanRobertaForQuestionAnswering(tiny_config(answerability_head=True)).eval()
    batch = make_batch()
    starts, ends = torch.tensor([1, 0, 3, 0]), torch.tensor([2, 0, 5, 0])
    impossible = torch.tensor([0, 1, 0, 1])
    output = model(input_ids=batch["input_ids"], start_positions=starts, end_positions=ends, is_impossible=impossible)
    assert output.answerability_logits.shape == (4,)
    span_only = RobertaForQuestionAnswering.forward(model, input_ids=batch["input_ids"], start_positions=starts,
                                                    end_positions=ends)
    expected = span_only.loss + F.binary_cross_entropy_with_logits(output.answerability_logits, impossible.float())
    torch.testing.assert_close(output.loss, expected)
    assert output.hidden_states is None


def save_pretraining_checkpoint(path, **overrides):
    model = SpanRobertaForPreTraining(tiny_config(**overrides))
    model.save_pretrained(path)
    return model


def test_stock_roberta_loads_the_encoder_with_nothing_missing(tmp_path):
    saved = save_pretraining_checkpoint(tmp_path, sentence_objective="nsp")
    for model_class in (RobertaModel, RobertaForQuestionAnswering, RobertaForSequenceClassification,
                        RobertaForMaskedLM):
        model, info = model_class.from_pretrained(tmp_path, output_loading_info=True)
        encoder = model if model_class is RobertaModel else model.roberta
        missing_encoder = [k for k in info["missing_keys"] if k.startswith(("roberta.", "embeddings", "encoder"))]
        assert missing_encoder == [], model_class.__name__
        torch.testing.assert_close(
            encoder.embeddings.word_embeddings.weight, saved.roberta.embeddings.word_embeddings.weight
        )
    # RoBERTa's MLM head is spanroberta's, parameter for parameter
    _, info = RobertaForMaskedLM.from_pretrained(tmp_path, output_loading_info=True)
    assert info["missing_keys"] == set() or not info["missing_keys"]


def test_continued_pretraining_from_roberta_keeps_mlm_head_and_starts_sbo(tmp_path):
    roberta = RobertaForMaskedLM(RobertaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                                               num_attention_heads=2, intermediate_size=64))
    roberta.save_pretrained(tmp_path)
    config = SpanRobertaConfig.from_pretrained(tmp_path, use_sbo=True)
    model, info = SpanRobertaForPreTraining.from_pretrained(tmp_path, config=config, output_loading_info=True)
    assert set(info["missing_keys"]) and all(k.startswith("sbo_head.") for k in info["missing_keys"])
    torch.testing.assert_close(model.lm_head.dense.weight, roberta.lm_head.dense.weight)
    torch.testing.assert_close(model.lm_head.bias, roberta.lm_head.bias)
    assert model.sbo_head.decoder.weight is model.roberta.embeddings.word_embeddings.weight


def test_auto_classes_after_import(tmp_path):
    save_pretraining_checkpoint(tmp_path)
    assert isinstance(AutoConfig.from_pretrained(tmp_path), SpanRobertaConfig)
    assert type(AutoModelForPreTraining.from_pretrained(tmp_path)) is SpanRobertaForPreTraining
    assert type(AutoModelForQuestionAnswering.from_pretrained(tmp_path)) is SpanRobertaForQuestionAnswering
    assert type(AutoModel.from_pretrained(tmp_path)).__name__ == "SpanRobertaModel"
    assert type(AutoModelForMaskedLM.from_pretrained(tmp_path)).__name__ == "SpanRobertaForMaskedLM"
    assert {"configuration_spanroberta.py", "modeling_spanroberta.py"} <= set(os.listdir(tmp_path))


@pytest.mark.slow
def test_remote_code_loads_every_head_without_spanroberta(tmp_path):
    saved = save_pretraining_checkpoint(tmp_path / "ckpt")
    lines = run_without_spanroberta(
        f"""
        import torch, transformers
        path = {str(tmp_path / "ckpt")!r}
        print(type(transformers.AutoConfig.from_pretrained(path, trust_remote_code=True)).__name__)
        for name in {sorted(spanroberta.SpanRobertaConfig().auto_map)!r}:
            if name == "AutoConfig":
                continue
            model = getattr(transformers, name).from_pretrained(path, trust_remote_code=True)
            print(name, type(model).__name__)
        model = transformers.AutoModelForPreTraining.from_pretrained(path, trust_remote_code=True)
        print("checksum", float(model.roberta.embeddings.word_embeddings.weight.sum()))
        """,
        tmp_path,
    )
    assert lines[0] == "SpanRobertaConfig"
    heads = dict(line.split() for line in lines[1:-1])
    assert heads == {
        "AutoModel": "SpanRobertaModel",
        "AutoModelForPreTraining": "SpanRobertaForPreTraining",
        "AutoModelForMaskedLM": "SpanRobertaForMaskedLM",
        "AutoModelForSequenceClassification": "SpanRobertaForSequenceClassification",
        "AutoModelForQuestionAnswering": "SpanRobertaForQuestionAnswering",
        "AutoModelForMultipleChoice": "SpanRobertaForMultipleChoice",
        "AutoModelForTokenClassification": "SpanRobertaForTokenClassification",
    }
    checksum = float(lines[-1].split()[1])
    assert checksum == pytest.approx(float(saved.roberta.embeddings.word_embeddings.weight.detach().sum()), rel=1e-6)


class ListDataset(torch.utils.data.Dataset):
    def __init__(self, rows):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, index):
        return self.rows[index]


def stack(rows):
    return {key: torch.stack([row[key] for row in rows]) for key in rows[0]}


def train_one_step(tmp_path, batch_size, accumulation, trainer_class, objective="none"):
    torch.manual_seed(0)
    model = SpanRobertaForPreTraining(tiny_config(sentence_objective=objective))
    batch = make_batch(batch_size=8, seed=1)
    rows = [{key: value[i] for key, value in batch.items()} for i in range(8)]
    if objective == "nsp":
        for i, row in enumerate(rows):  # some rows unlabelled, so the sentence counts differ per micro-batch
            row["next_sentence_label"] = torch.tensor([0, 1, -100, -100, 1, 0, 1, -100][i])
    args = TrainingArguments(
        output_dir=str(tmp_path / f"{batch_size}x{accumulation}"),
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=accumulation,
        max_steps=1,
        learning_rate=1.0,
        optim="sgd",
        weight_decay=0.0,
        max_grad_norm=0.0,
        lr_scheduler_type="constant",
        save_strategy="no",
        report_to="none",
        remove_unused_columns=False,
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
    )
    trainer = trainer_class(model=model, args=args, train_dataset=ListDataset(rows), data_collator=stack)
    result = trainer.train()
    return result.training_loss, {name: p.detach().clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("objective", ["none", pytest.param("nsp", marks=pytest.mark.slow)])
def test_gradient_accumulation_matches_one_big_batch(tmp_path, objective):
    loss_full, weights_full = train_one_step(tmp_path, 8, 1, PretrainingTrainer, objective)
    loss_accumulated, weights_accumulated = train_one_step(tmp_path, 4, 2, PretrainingTrainer, objective)
    assert loss_accumulated == pytest.approx(loss_full, rel=1e-5)
    for name, weight in weights_full.items():
        torch.testing.assert_close(weights_accumulated[name], weight, rtol=1e-5, atol=1e-6, msg=name)
