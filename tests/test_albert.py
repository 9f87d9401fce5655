"""SpanALBERT: ALBERT's encoder (factorised embeddings, the three cross-layer sharing schemes) under spanroberta's
heads. Parameter counts against ALBERT's Table 4, sharing across save and load, transformers' ALBERT loading
spanroberta's all-shared checkpoints, remote code, packed rows and the objectives' losses."""

import os

import pytest
import torch
from conftest import run_without_spanroberta
from safetensors import safe_open
from transformers import (
    AlbertConfig,
    AlbertForPreTraining,
    AlbertModel,
    AutoModel,
    AutoModelForPreTraining,
    AutoModelForSequenceClassification,
)

import spanroberta
from spanroberta import SpanAlbertConfig, SpanAlbertForPreTraining, SpanAlbertModel
from spanroberta.models.configuration_span_albert import CROSS_LAYER_SHARING
from spanroberta.models.configuration_spanroberta import first_position_id
from spanroberta.models.modeling_span_albert import SHARED_SUBMODULES

# ALBERT (Lan et al. 2019), Table 4: ALBERT-base, E = 128, 30,000-id vocabulary; parameters in millions.
ALBERT_TABLE_4 = {"none": 89, "attention": 64, "ffn": 38, "all": 12}

TINY = dict(
    vocab_size=120, embedding_size=16, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
    intermediate_size=64, max_position_embeddings=64, max_span_targets=4, sbo_position_embedding_size=8,
)  # fmt: skip


def tiny_config(**overrides):
    return SpanAlbertConfig(**{**TINY, **overrides})


def layers(model):
    return [group.albert_layers[0] for group in model.base_model.encoder.albert_layer_groups]


def shares(model, scheme):
    """Whether every layer's shared blocks are group 0's very modules (and the others are not)."""
    first, *others = layers(model)
    for name in {name for names in SHARED_SUBMODULES.values() for name in names}:
        expected = name in SHARED_SUBMODULES[scheme] or scheme == "all"
        if any((layer.get_submodule(name) is first.get_submodule(name)) != expected for layer in others):
            return False
    return True


def parameters_on_disk(path):
    with safe_open(os.path.join(path, "model.safetensors"), "pt") as file:
        return sum(file.get_tensor(key).numel() for key in file.keys())


def random_batch(vocab_size, batch=2, length=12, seed=0):
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, vocab_size, (batch, length), generator=generator)
    input_ids[:, 0], input_ids[:, -1] = 2, 3
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}


@pytest.mark.parametrize("scheme", sorted(ALBERT_TABLE_4))
def test_parameter_counts_match_albert_table_4(scheme):
    config = SpanAlbertConfig(vocab_size=30000, cross_layer_sharing=scheme)  # ALBERT-base, E = 128
    with torch.device("meta"):
        model = SpanAlbertModel(config)
    count = model.num_parameters()
    assert abs(count - ALBERT_TABLE_4[scheme] * 1e6) < 1e6, f"{scheme}: {count:,}"
    assert shares(model, scheme)
    if scheme in ("all", "none"):  # transformers' own whole-layer sharing gives the same count
        groups = 1 if scheme == "all" else 12
        with torch.device("meta"):
            stock = AlbertModel(AlbertConfig(vocab_size=30000, embedding_size=128, hidden_size=768,
                                             num_attention_heads=12, intermediate_size=3072,
                                             num_hidden_groups=groups))  # fmt: skip
        assert stock.num_parameters() == count


def test_config_sets_the_layer_groups_and_reads_stock_ones():
    assert tiny_config().cross_layer_sharing == "all" and tiny_config().num_hidden_groups == 1
    for scheme in ("none", "attention", "ffn"):
        assert tiny_config(cross_layer_sharing=scheme).num_hidden_groups == 3
    assert tiny_config(num_hidden_groups=3).cross_layer_sharing == "none"
    config = tiny_config(cross_layer_sharing="ffn")
    config.update_from_string("num_hidden_layers=5")
    assert config.num_hidden_groups == 5
    with pytest.raises(ValueError, match="cross_layer_sharing"):
        tiny_config(cross_layer_sharing="heads")
    with pytest.raises(ValueError, match="not one of spanroberta's sharing schemes"):
        tiny_config(num_hidden_groups=2, num_hidden_layers=4)
    with pytest.raises(ValueError, match="tie_word_embeddings"):
        tiny_config(cross_layer_sharing="attention", tie_word_embeddings=False)
    assert first_position_id(tiny_config()) == 0


@pytest.mark.parametrize("scheme", CROSS_LAYER_SHARING)
def test_sharing_survives_save_and_load(tmp_path, scheme):
    model = SpanAlbertForPreTraining(tiny_config(cross_layer_sharing=scheme, sentence_objective="sop")).eval()
    assert shares(model, scheme)
    model.save_pretrained(tmp_path)
    reloaded, info = AutoModelForPreTraining.from_pretrained(tmp_path, output_loading_info=True)
    assert type(reloaded) is SpanAlbertForPreTraining and shares(reloaded, scheme)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    # One tensor per shared block: on disk, in memory before and after.
    assert parameters_on_disk(tmp_path) == model.num_parameters() == reloaded.num_parameters()
    for (name, weight), (_, loaded) in zip(model.state_dict().items(), reloaded.state_dict().items()):
        torch.testing.assert_close(loaded, weight, msg=name)
    batch = random_batch(TINY["vocab_size"])
    torch.testing.assert_close(reloaded.albert(**batch).last_hidden_state, model.albert(**batch).last_hidden_state)
    # A task head built on the checkpoint shares as the pretraining model did.
    classifier, info = AutoModelForSequenceClassification.from_pretrained(tmp_path, num_labels=3,
                                                                          output_loading_info=True)  # fmt: skip
    assert shares(classifier, scheme) and info["missing_keys"] == {"classifier.weight", "classifier.bias"}
    torch.testing.assert_close(
        dict(classifier.albert.named_parameters())["embeddings.word_embeddings.weight"],
        model.albert.embeddings.word_embeddings.weight,
    )


def test_shared_blocks_stay_one_tensor_through_training_steps():
    model = SpanAlbertForPreTraining(tiny_config(cross_layer_sharing="attention", use_sbo=False))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batch = random_batch(TINY["vocab_size"], batch=4)
    labels = batch["input_ids"][:, 1:3].clone()
    for _ in range(2):
        loss = model(**batch, labels=labels, mlm_positions=torch.tensor([[1, 2]] * 4)).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    first, *others = layers(model)
    assert all(layer.attention.query.weight is first.attention.query.weight for layer in others)
    assert not torch.equal(others[0].ffn.weight, first.ffn.weight)


def test_transformers_albert_loads_an_all_shared_checkpoint(tmp_path):
    model = SpanAlbertForPreTraining(tiny_config(sentence_objective="sop")).eval()
    model.save_pretrained(tmp_path)
    stock, info = AlbertModel.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"]
    batch = random_batch(TINY["vocab_size"])
    torch.testing.assert_close(stock.eval()(**batch).last_hidden_state, model.albert(**batch).last_hidden_state)
    pretraining, info = AlbertForPreTraining.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"]  # the MLM head, pooler and SOP head too
    torch.testing.assert_close(pretraining.predictions.dense.weight, model.predictions.dense.weight)
    torch.testing.assert_close(pretraining.sop_classifier.classifier.weight, model.sop_classifier.classifier.weight)


def test_a_transformers_albert_checkpoint_continues_with_its_mlm_and_sop_heads(tmp_path):
    stock = AlbertForPreTraining(AlbertConfig(**{k: v for k, v in TINY.items() if k in AlbertConfig().to_dict()}))
    stock.save_pretrained(tmp_path)
    config = SpanAlbertConfig.from_pretrained(tmp_path, sentence_objective="sop", max_span_targets=4,
                                              sbo_position_embedding_size=8)  # fmt: skip
    model, info = SpanAlbertForPreTraining.from_pretrained(tmp_path, config=config, output_loading_info=True)
    assert info["missing_keys"] and all(key.startswith("sbo_head.") for key in info["missing_keys"])
    assert not info["unexpected_keys"]
    for name in ("predictions.dense.weight", "predictions.bias", "sop_classifier.classifier.weight",
                 "albert.pooler.weight", "albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight"):  # fmt: skip
        torch.testing.assert_close(model.get_parameter(name), stock.get_parameter(name), msg=name)
    # the SBO decoder is E wide and tied to the word embeddings, like the MLM decoder
    assert model.sbo_head.decoder.weight is model.albert.embeddings.word_embeddings.weight
    assert model.predictions.decoder.weight is model.albert.embeddings.word_embeddings.weight


def test_objectives_and_exact_accumulation_on_an_albert_encoder():
    """MLM + SBO + SOP through SpanPreTrainingMixin: two half batches normalised by the whole batch's counts give
    the whole batch's loss and gradients."""
    model = SpanAlbertForPreTraining(tiny_config(cross_layer_sharing="ffn", sentence_objective="sop")).eval()
    batch = random_batch(TINY["vocab_size"], batch=4, length=16, seed=1)
    labels = torch.stack([batch["input_ids"][i, 3:7] for i in range(4)])
    labels[1, 2:] = -100
    targets = {
        "labels": labels,
        "mlm_positions": torch.tensor([[3, 4, 5, 6]] * 4),
        "sbo_left_positions": torch.tensor([[2, 2, 2, 2]] * 4),
        "sbo_right_positions": torch.tensor([[7, 7, 7, 7]] * 4),
        "sbo_relative_positions": torch.tensor([[0, 1, 2, 3]] * 4).masked_fill(labels == -100, -100),
        "sentence_order_label": torch.tensor([0, 1, 1, 0]),
    }
    full = {**batch, **targets}
    output = model(**full)
    assert output.mlm_loss is not None and output.sbo_loss is not None and output.sop_loss is not None
    assert output.sbo_logits.shape[-1] == TINY["vocab_size"]
    output.loss.backward()
    whole = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    counts = model.loss_normalisers(full)
    total = 0.0
    for half in (slice(0, 2), slice(2, 4)):
        loss = model(**{name: value[half] for name, value in full.items()}, **counts).loss
        loss.backward()
        total += loss.item()
    assert total == pytest.approx(output.loss.item(), rel=1e-5)
    for name, p in model.named_parameters():
        if name in whole:
            torch.testing.assert_close(p.grad, whole[name], rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("scheme", CROSS_LAYER_SHARING)
def test_hidden_states_and_attentions_come_once_per_layer(scheme):
    model = SpanAlbertModel(tiny_config(cross_layer_sharing=scheme, attn_implementation="eager"))
    output = model(**random_batch(TINY["vocab_size"]), output_hidden_states=True, output_attentions=True)
    assert len(output.hidden_states) == TINY["num_hidden_layers"] + 1
    assert len(output.attentions) == TINY["num_hidden_layers"]


@pytest.mark.parametrize("attn_implementation", ["sdpa", "varlen_fa2"])
def test_packed_rows_are_computed_as_alone(attn_implementation):
    model = SpanAlbertModel(tiny_config(cross_layer_sharing="attention", attn_implementation=attn_implementation))
    model.eval()
    a, b = random_batch(TINY["vocab_size"], 1, 7, seed=2), random_batch(TINY["vocab_size"], 1, 5, seed=3)
    packed = torch.cat([a["input_ids"], b["input_ids"]], dim=1)
    position_ids = torch.cat([torch.arange(7), torch.arange(5)])[None]  # ALBERT's positions start at 0
    with torch.no_grad():
        together = model(input_ids=packed, position_ids=position_ids).last_hidden_state
        alone = [model(input_ids=x["input_ids"]).last_hidden_state for x in (a, b)]
    torch.testing.assert_close(together, torch.cat(alone, dim=1), rtol=1e-4, atol=1e-4)


def test_remote_code_loads_every_head_without_spanroberta(tmp_path):
    saved = SpanAlbertForPreTraining(tiny_config(cross_layer_sharing="attention", sentence_objective="sop"))
    saved.save_pretrained(tmp_path / "ckpt")
    lines = run_without_spanroberta(
        f"""
        import transformers
        path = {str(tmp_path / "ckpt")!r}
        print(type(transformers.AutoConfig.from_pretrained(path, trust_remote_code=True)).__name__)
        for name in {sorted(SpanAlbertConfig().auto_map)!r}:
            if name == "AutoConfig":
                continue
            model = getattr(transformers, name).from_pretrained(path, trust_remote_code=True)
            print(name, type(model).__name__)
        model = transformers.AutoModelForPreTraining.from_pretrained(path, trust_remote_code=True)
        groups = model.albert.encoder.albert_layer_groups
        shared = all(g.albert_layers[0].attention.query is groups[0].albert_layers[0].attention.query for g in groups)
        print("shared", shared, model.num_parameters(), float(model.albert.embeddings.word_embeddings.weight.sum()))
        """,
        tmp_path,
    )
    assert lines[0] == "SpanAlbertConfig"
    heads = dict(line.split() for line in lines[1:-1])
    assert heads == {name: path.split(".")[-1] for name, path in SpanAlbertConfig().auto_map.items() if name != "AutoConfig"}
    _, shared, count, checksum = lines[-1].split()
    assert shared == "True" and int(count) == saved.num_parameters()
    assert float(checksum) == pytest.approx(float(saved.albert.embeddings.word_embeddings.weight.detach().sum()), rel=1e-6)


def test_auto_classes_after_import(tmp_path):
    SpanAlbertForPreTraining(tiny_config(cross_layer_sharing="ffn")).save_pretrained(tmp_path)
    assert type(AutoModel.from_pretrained(tmp_path)) is spanroberta.SpanAlbertModel
    assert shares(AutoModel.from_pretrained(tmp_path), "ffn")
