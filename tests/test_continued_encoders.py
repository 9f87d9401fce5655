"""Continued pretraining of transformers' own encoders (BERT with a cased WordPiece vocabulary, ModernBERT with a
byte-level BPE, DeBERTa-v2 with a SentencePiece unigram vocabulary) through run_pretraining.py, and the loading
checks of every checkpoint path: tiny checkpoints built from configs, tokenizers trained here, offline."""

import dataclasses
import json
import math
import shutil
from collections import Counter

import pytest
import run_pretraining
import torch
from safetensors.torch import load_file, save_file
from tokenizers import BertWordPieceTokenizer
from tokenizers.trainers import UnigramTrainer
from transformers import (
    AutoTokenizer,
    BertConfig,
    BertForMaskedLM,
    BertForPreTraining,
    BertTokenizer,
    DebertaV2Config,
    DebertaV2ForMaskedLM,
    DebertaV2Tokenizer,
    DistilBertConfig,
    DistilBertForMaskedLM,
    ElectraConfig,
    ElectraForMaskedLM,
    ElectraForPreTraining,
    GPT2Config,
    GPT2LMHeadModel,
    ModernBertConfig,
    ModernBertForMaskedLM,
)

from conftest import assert_weights_kept, drop_weight
from spanroberta.data.collator import DataCollatorForSpanMasking
from spanroberta.data.demo_corpus import demo_corpus_path
from spanroberta.data.masking import word_start_table
from spanroberta.data.tokenizer import train_byte_level_bpe
from spanroberta.errors import UserInputError
from spanroberta.models.modeling_any_encoder import SBO_HEAD_FILE
from spanroberta.pretraining.arguments import (
    PretrainingArguments,
    PretrainingDataArguments,
    PretrainingModelArguments,
)
from spanroberta.pretraining.attention import plan_run_attention
from spanroberta.runs.cli import parse_arguments
from spanroberta.pretraining import run as pretraining
from spanroberta.pretraining.specification import resolve_recipe, specify_run
from spanroberta.objectives import get_objective

FAST = ["--max_seq_length", "64", "--per_device_train_batch_size", "8", "--report_to", "none", "--disable_tqdm",
        "true", "--dataloader_pin_memory", "false", "--use_cpu", "true"]  # fmt: skip
SHAPE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
         "max_position_embeddings": 128}  # fmt: skip
# A learning rate so small that no weight moves by more than this in a few steps (AdamW steps are about lr).
NEGLIGIBLE_LR, WEIGHT_TOLERANCE = 1e-12, 1e-9


def corpus_lines(count: int = 3000) -> list[str]:
    return [line for line in demo_corpus_path().read_text().splitlines() if line.strip()][:count]


def cased_wordpiece_tokenizer() -> BertTokenizer:
    """BERT's cased tokenizer (SpanBERT's checkpoints are cased), with a WordPiece vocabulary trained here."""
    trainer = BertWordPieceTokenizer(lowercase=False, strip_accents=False)
    trainer.train_from_iterator(corpus_lines(), vocab_size=1200, show_progress=False)
    return BertTokenizer(vocab=trainer.get_vocab(), do_lower_case=False)


def deberta_tokenizer() -> DebertaV2Tokenizer:
    """DeBERTa-v2/v3's tokenizer (SentencePiece, "▁" word starts) with a unigram vocabulary trained here."""
    backend = DebertaV2Tokenizer()._tokenizer
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    backend.train_from_iterator(corpus_lines(), trainer=UnigramTrainer(
        vocab_size=1000, special_tokens=specials, unk_token="[UNK]", show_progress=False))  # fmt: skip
    vocab = [tuple(piece) for piece in json.loads(backend.to_str())["model"]["vocab"]]
    return DebertaV2Tokenizer(vocab=vocab)


def build_bert(tokenizer):
    return BertForPreTraining(BertConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, **SHAPE))


def build_distilbert(tokenizer):
    shape = {"dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64, "max_position_embeddings": 128}
    return DistilBertForMaskedLM(DistilBertConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                                  **shape))  # fmt: skip


def build_modernbert(tokenizer):
    # A sliding window (local_attention) shorter than the 64-token blocks, and one global layer of two.
    ids = {f"{name}_token_id": getattr(tokenizer, f"{name}_token_id") for name in ("pad", "bos", "eos", "cls", "sep")}
    config = ModernBertConfig(vocab_size=len(tokenizer), local_attention=16, global_attn_every_n_layers=2, **ids,
                              **SHAPE)  # fmt: skip
    return ModernBertForMaskedLM(config)


def build_deberta(tokenizer):
    # DeBERTa-v3's shape: relative attention in buckets, no absolute positions in the input.
    config = DebertaV2Config(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, relative_attention=True,
                             position_buckets=16, pos_att_type=["p2c", "c2p"], position_biased_input=False,
                             norm_rel_ebd="layer_norm", **SHAPE)  # fmt: skip
    return DebertaV2ForMaskedLM(config)


FAMILIES = {
    "bert": (cased_wordpiece_tokenizer, build_bert, BertForPreTraining),
    "distilbert": (cased_wordpiece_tokenizer, build_distilbert, DistilBertForMaskedLM),
    "modernbert": (lambda: train_byte_level_bpe(corpus_lines(), vocab_size=1000, show_progress=False),
                   build_modernbert, ModernBertForMaskedLM),  # fmt: skip
    "deberta-v2": (deberta_tokenizer, build_deberta, DebertaV2ForMaskedLM),
}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """family -> a tiny stock checkpoint folder with its tokenizer."""
    folders = {}
    for family, (make_tokenizer, build, _) in FAMILIES.items():
        folder = tmp_path_factory.mktemp(family)
        tokenizer = make_tokenizer()
        torch.manual_seed(0)
        build(tokenizer).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders[family] = folder
    return folders


def continue_pretraining(checkpoint, output_dir, *flags):
    run_pretraining.main([
        "--model_name_or_path", str(checkpoint), "--recipe", "spanbert", "--train_file", str(demo_corpus_path()),
        "--output_dir", str(output_dir), "--max_steps", "2", "--logging_steps", "1", "--max_train_samples", "32",
        "--learning_rate", str(NEGLIGIBLE_LR), "--warmup_steps", "0", "--save_strategy", "no", *FAST, *flags,
    ])  # fmt: skip
    return output_dir


@pytest.fixture(scope="module")
def continued(checkpoints, tmp_path_factory):
    """family -> the folder of a short continuation with a negligible learning rate."""
    return {family: continue_pretraining(folder, tmp_path_factory.mktemp(f"{family}-continued"))
            for family, folder in checkpoints.items()}  # fmt: skip


def parse(*flags):
    types = (PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments)
    (model_args, data_args, training_args), _ = parse_arguments(types, ["--output_dir", "unused", *flags])
    return model_args, data_args, training_args


def built_model(*flags):
    """The model run_pretraining.py builds for `flags`, with its tokenizer."""
    model_args, data_args, _ = parse(*flags)
    tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
    recipe = resolve_recipe(model_args, data_args)
    objective = get_objective(recipe.objective)
    config = objective.build_config(model_args, recipe, tokenizer)
    return objective.build_model(model_args, config, tokenizer), tokenizer


def masked_batch(tokenizer, model, rows=6):
    collator = DataCollatorForSpanMasking(
        tokenizer, label_layout="slots", first_position_id=0, max_span_targets=model.config.max_span_targets
    )
    return collator([tokenizer(line, truncation=True, max_length=64)["input_ids"] for line in corpus_lines()[:rows]])


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.slow
def test_a_continued_checkpoint_reloads_in_its_stock_class_with_its_weights(family, checkpoints, continued):
    stock_class = FAMILIES[family][2]
    original = stock_class.from_pretrained(checkpoints[family]).state_dict()
    model, report = stock_class.from_pretrained(continued[family], output_loading_info=True)
    assert not report["missing_keys"] and not report["unexpected_keys"] and not report["mismatched_keys"]
    assert json.loads((continued[family] / "config.json").read_text())["architectures"] == [stock_class.__name__]
    # Loaded, not re-initialised: a negligible learning rate moves no weight further than the tolerance.
    assert_weights_kept(model.state_dict(), original, WEIGHT_TOLERANCE)
    assert (continued[family] / SBO_HEAD_FILE).is_file()
    history = json.loads((continued[family] / "trainer_state.json").read_text())["log_history"]
    assert [entry["step"] for entry in history if "sbo_loss" in entry and "mlm_loss" in entry] == [1, 2]


@pytest.mark.slow
def test_bert_keeps_its_next_sentence_head_untouched_under_a_recipe_without_nsp(checkpoints, continued):
    """The spanbert recipe trains no sentence head: BertForPreTraining's NSP head and pooler get no update at all."""
    original = BertForPreTraining.from_pretrained(checkpoints["bert"]).state_dict()
    saved = BertForPreTraining.from_pretrained(continued["bert"]).state_dict()
    for name in [name for name in original if name.startswith(("cls.seq_relationship.", "bert.pooler."))]:
        assert torch.equal(saved[name], original[name]), name


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.slow
def test_the_next_continuation_loads_the_saved_sbo_head(family, continued):
    model, _ = built_model("--model_name_or_path", str(continued[family]), "--recipe", "spanbert")
    saved = load_file(str(continued[family] / SBO_HEAD_FILE))
    assert saved and "decoder.weight" not in saved  # tied to the word embeddings, which the model file holds
    for name, tensor in saved.items():
        assert torch.equal(model.sbo_head.state_dict()[name], tensor), name
    assert model.sbo_head.decoder.weight is model.get_input_embeddings().weight


@pytest.mark.parametrize("family", FAMILIES)
def test_the_first_mlm_loss_is_the_stock_models_own_on_the_same_masked_batch(family, checkpoints):
    """A continued BERT computes its MLM loss as the stock BERT does: a BERT read as a RoBERTa (wrong positions or
    token types) would score about ln(vocabulary), well above the stock model's own loss on the same batch."""
    model, tokenizer = built_model("--model_name_or_path", str(checkpoints[family]), "--recipe", "spanbert")
    model.eval()
    batch = masked_batch(tokenizer, model)
    stock = FAMILIES[family][2] if family != "bert" else BertForMaskedLM
    stock = stock.from_pretrained(checkpoints[family]).eval()
    dense_labels = torch.full_like(batch["input_ids"], -100)
    predicted = batch["labels"] != -100
    dense_labels.scatter_(1, batch["mlm_positions"].clamp(min=0), torch.where(predicted, batch["labels"], -100))
    with torch.no_grad():
        ours = model(**batch).mlm_loss
        theirs = stock(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=dense_labels).loss
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", ["bert", "distilbert", "modernbert"])
def test_packed_sequences_encode_as_they_do_alone(family, checkpoints):
    """Positions restart at 0 for each packed sequence (BERT's first position) and attention stays inside it."""
    model, tokenizer = built_model("--model_name_or_path", str(checkpoints[family]), "--recipe", "spanbert")
    model.eval()
    first, second = (tokenizer(line)["input_ids"][:24] for line in corpus_lines()[:2])
    packed = torch.tensor([first + second])
    positions = torch.tensor([list(range(len(first))) + list(range(len(second)))])
    with torch.no_grad():
        together = model._encode({"input_ids": packed, "position_ids": positions}, {}).last_hidden_state
        alone = [model._encode({"input_ids": torch.tensor([ids])}, {}).last_hidden_state for ids in (first, second)]
    torch.testing.assert_close(together, torch.cat(alone, dim=1), rtol=1e-5, atol=1e-5)


def test_deberta_trains_on_unpacked_rows(checkpoints):
    model_args, data_args, training_args = parse("--model_name_or_path", str(checkpoints["deberta-v2"]))
    recipe = resolve_recipe(model_args, data_args)
    assert data_args.pack_documents and recipe.input_format == "doc-sentences"
    assert not plan_run_attention(model_args, data_args, training_args, recipe).packs_rows
    bert_args, _, _ = parse("--model_name_or_path", str(checkpoints["bert"]))
    assert plan_run_attention(bert_args, data_args, training_args, recipe).packs_rows


def test_modernbert_packs_under_sdpa_and_refuses_varlen_fa2(checkpoints):
    """ModernBERT's sliding-window layers need sdpa's per-layer masks: varlen_fa2 runs every layer over whole
    sequences, so asking for it is refused before any data is read."""
    model_args, data_args, training_args = parse("--model_name_or_path", str(checkpoints["modernbert"]))
    recipe = resolve_recipe(model_args, data_args)
    assert plan_run_attention(model_args, data_args, training_args, recipe).packs_rows
    model_args = dataclasses.replace(model_args, attn_implementation="varlen_fa2")
    with pytest.raises(UserInputError, match="sliding-window layers"):
        plan_run_attention(model_args, data_args, training_args, recipe)


@pytest.mark.parametrize("family", FAMILIES)
def test_word_starts_follow_each_tokenizers_convention(family, checkpoints):
    tokenizer = AutoTokenizer.from_pretrained(checkpoints[family])
    starts = word_start_table(tokenizer)
    # After a space, as inside a text (a row's first token always starts a word: masking.word_starts).
    ids = tokenizer(" Researchers pretrain encoders", add_special_tokens=False)["input_ids"]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert len(ids) > 3  # the rare words are split into pieces
    continues = {"bert": lambda t: t.startswith("##"), "distilbert": lambda t: t.startswith("##"),
                 "modernbert": lambda t: not t.startswith("Ġ"),
                 "deberta-v2": lambda t: not t.startswith("▁")}[family]  # fmt: skip
    assert [bool(starts[i]) for i in ids] == [not continues(token) for token in tokens]
    assert sum(bool(starts[i]) for i in ids) == 3


def run_refused(capsys, *flags) -> str:
    with pytest.raises(SystemExit) as exit_info:
        run_pretraining.main([*flags, "--train_file", str(demo_corpus_path()), "--max_steps", "1", *FAST])
    message = str(exit_info.value.code)
    assert message.startswith("run_pretraining.py: error: ") and "\n" not in message
    return message


def test_a_checkpoint_with_a_renamed_tensor_is_refused_before_training(checkpoints, tmp_path, capsys):
    broken = tmp_path / "broken-bert"
    shutil.copytree(checkpoints["bert"], broken)
    weights = load_file(str(broken / "model.safetensors"))
    weights["bert.encoder.layer.1.output.dense.renamed"] = weights.pop("bert.encoder.layer.1.output.dense.weight")
    save_file(weights, str(broken / "model.safetensors"), metadata={"format": "pt"})
    output_dir = tmp_path / "out"
    message = run_refused(capsys, "--model_name_or_path", str(broken), "--output_dir", str(output_dir))
    assert str(broken) in message and "(bert)" in message and "bert.encoder.layer.1.output.dense.weight" in message
    assert not (output_dir / "model.safetensors").exists() and not (output_dir / "trainer_state.json").exists()


def test_a_model_type_without_a_masked_lm_is_refused(checkpoints, tmp_path, capsys):
    gpt2 = tmp_path / "gpt2"
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=1200)).save_pretrained(gpt2)
    message = run_refused(capsys, "--model_name_or_path", str(gpt2), "--tokenizer_name", str(checkpoints["bert"]),
                          "--output_dir", str(tmp_path / "out"))  # fmt: skip
    assert "gpt2 checkpoint" in message and "no masked-LM class" in message


def test_a_spanroberta_checkpoint_missing_a_weight_is_refused(spanroberta_checkpoint, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(spanroberta_checkpoint, broken)
    drop_weight(broken, "roberta.encoder.layer.0.attention.self.query.weight")
    with pytest.raises(UserInputError, match=r"\(spanroberta\).*roberta\.encoder\.layer\.0\.attention\.self\.query"):
        built_model("--model_name_or_path", str(broken), "--recipe", "spanbert")
    # A head the objective adds is expected to start fresh: NSP on a checkpoint trained without it.
    model, _ = built_model("--model_name_or_path", str(spanroberta_checkpoint), "--recipe", "spanbert",
                           "--sentence_objective", "nsp", "--input_format", "segment-pair")  # fmt: skip
    assert model.sentence_head is not None


def test_an_electra_discriminator_missing_a_weight_is_refused(tmp_path, tiny_tokenizer):
    config = ElectraConfig(vocab_size=120, embedding_size=16, hidden_size=32, num_hidden_layers=1,
                           num_attention_heads=2, intermediate_size=64)  # fmt: skip
    ElectraForPreTraining(config).save_pretrained(tmp_path)
    ElectraForMaskedLM(ElectraConfig(**{**config.to_dict(), "hidden_size": 16, "num_attention_heads": 1})) \
        .save_pretrained(tmp_path / "generator")  # fmt: skip
    model_args, data_args, _ = parse("--model_name_or_path", str(tmp_path), "--recipe", "electra")
    recipe = resolve_recipe(model_args, data_args)
    electra = get_objective(recipe.objective)
    assert electra.build_model(model_args, electra.build_config(model_args, recipe, None), tiny_tokenizer) is not None
    drop_weight(tmp_path, "discriminator_predictions.dense.weight")
    with pytest.raises(UserInputError, match=r"\(electra\).*discriminator_predictions\.dense\.weight"):
        electra.build_model(model_args, electra.build_config(model_args, recipe, None), tiny_tokenizer)


def test_the_sentence_objective_must_be_the_familys_own(checkpoints):
    with pytest.raises(UserInputError, match="no sentence head"):
        built_model("--model_name_or_path", str(checkpoints["modernbert"]), "--recipe", "spanbert",
                    "--sentence_objective", "nsp", "--input_format", "segment-pair")  # fmt: skip
    model, tokenizer = built_model("--model_name_or_path", str(checkpoints["bert"]), "--recipe", "bert")
    assert isinstance(model, BertForPreTraining) and model.config.sentence_objective == "nsp"


@pytest.mark.slow
def test_a_continued_bert_run_resumes_from_its_checkpoint_with_its_sbo_head(checkpoints, tmp_path):
    output_dir = continue_pretraining(checkpoints["bert"], tmp_path / "run", "--save_strategy", "steps",
                                      "--save_steps", "2", "--learning_rate", "1e-3")  # fmt: skip
    saved_head = load_file(str(output_dir / "checkpoint-2" / SBO_HEAD_FILE))
    model, _ = built_model("--model_name_or_path", str(checkpoints["bert"]), "--recipe", "spanbert")
    model.sbo_head.position_embeddings.weight.data.zero_()
    model.load_saved(str(output_dir / "checkpoint-2"))
    assert torch.equal(model.sbo_head.position_embeddings.weight, saved_head["position_embeddings.weight"])
    continue_pretraining(checkpoints["bert"], output_dir, "--max_steps", "3", "--resume_from_checkpoint", "true",
                         "--learning_rate", "1e-3")  # fmt: skip
    history = json.loads((output_dir / "trainer_state.json").read_text())["log_history"]
    assert [entry["step"] for entry in history if "mlm_loss" in entry] == [1, 2, 3]


@pytest.fixture(scope="module")
def unigram_bert(tmp_path_factory):
    """A BERT that knows something: its MLM bias holds the corpus's log unigram frequencies, so its loss is well
    below ln(vocabulary), what a re-initialised model scores. No dropout, so that training and evaluation agree."""
    folder = tmp_path_factory.mktemp("unigram-bert")
    tokenizer = cased_wordpiece_tokenizer()
    counts = Counter(i for line in corpus_lines() for i in tokenizer(line, add_special_tokens=False)["input_ids"])
    frequencies = torch.tensor([counts[i] + 1.0 for i in range(len(tokenizer))])
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                          hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **SHAPE))  # fmt: skip
    with torch.no_grad():
        model.cls.predictions.bias.copy_((frequencies / frequencies.sum()).log())
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_the_first_logged_mlm_loss_of_a_continued_bert_is_the_bert_models_own(unigram_bert, tmp_path):
    """The first MLM loss run_pretraining.py logs for a continued BERT is the stock BERT's own on the same batch,
    not about ln(vocabulary), which a BERT misread as a RoBERTa would log. Unpacked rows, so that the stock model (which cannot isolate packed sequences) sees the same input."""
    flags = ["--model_name_or_path", str(unigram_bert), "--recipe", "spanbert", "--train_file",
             str(demo_corpus_path()), "--output_dir", str(tmp_path), "--max_steps", "1", "--logging_steps", "1",
             "--max_train_samples", "32", "--learning_rate", str(NEGLIGIBLE_LR), "--save_strategy", "no",
             "--pack_documents", "false", *FAST]  # fmt: skip
    (model_args, data_args, training_args), given = parse_arguments(
        (PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments), flags
    )
    trainer = pretraining.run_pretraining(specify_run((model_args, data_args, training_args), given))
    logged = next(entry["mlm_loss"] for entry in trainer.state.log_history if "mlm_loss" in entry)
    first_batch = next(iter(trainer.get_train_dataloader()))  # the same seeded order and masks
    dense_labels = torch.full_like(first_batch["input_ids"], -100)
    predicted = first_batch["labels"] != -100
    dense_labels.scatter_(1, first_batch["mlm_positions"].clamp(min=0), first_batch["labels"].where(predicted, -100))
    bert = BertForMaskedLM.from_pretrained(unigram_bert).eval()
    with torch.no_grad():
        own = bert(input_ids=first_batch["input_ids"], attention_mask=first_batch["attention_mask"],
                   token_type_ids=first_batch.get("token_type_ids"), labels=dense_labels).loss.item()  # fmt: skip
    assert own < math.log(bert.config.vocab_size) - 0.5  # the checkpoint's knowledge shows in its loss
    assert logged == pytest.approx(own, abs=1e-4)  # logged rounded to 4 decimals
