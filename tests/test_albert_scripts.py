"""ALBERT checkpoints through the scripts: run_pretraining.py (the albert recipe from scratch, a transformers
ALBERT checkpoint continued, span masking + SBO on an ALBERT encoder), run_glue.py, run_squad.py, run_race.py and
pipeline("question-answering"), on spanroberta's ALBERT checkpoints and transformers' alike."""

import json

import pytest
import run_glue
import run_pretraining
import run_race
import run_squad
from conftest import shared_data
from transformers import AlbertConfig, AlbertForPreTraining, AlbertTokenizer, AutoTokenizer, pipeline

import spanroberta  # noqa: F401  (registers the Auto classes and the QA pipeline)
from spanroberta.data.demo_corpus import demo_corpus_path
from spanroberta.data.tokenizer import train_sentencepiece_unigram
from spanroberta.errors import UserInputError
from spanroberta.pretraining.arguments import (
    PretrainingArguments,
    PretrainingDataArguments,
    PretrainingModelArguments,
)
from spanroberta.runs.cli import parse_arguments
from spanroberta.objectives import get_objective
from spanroberta.pretraining.specification import resolve_recipe

FAST = ["--max_seq_length", "64", "--per_device_train_batch_size", "8", "--report_to", "none", "--disable_tqdm",
        "true", "--dataloader_pin_memory", "false"]  # fmt: skip


def logged(output_dir, key):
    state = json.loads((output_dir / "trainer_state.json").read_text())
    return [entry[key] for entry in state["log_history"] if key in entry]


@pytest.fixture(scope="module")
def transformers_albert(tmp_path_factory):
    """A tiny transformers AlbertForPreTraining checkpoint with a stock ALBERT tokenizer (SentencePiece unigram)."""
    path = tmp_path_factory.mktemp("albert")
    trained = train_sentencepiece_unigram([demo_corpus_path().read_text()], vocab_size=800, show_progress=False)
    tokenizer = AlbertTokenizer(vocab=trained._vocab_scores)  # as transformers ships ALBERT's: no token types out
    tokenizer.save_pretrained(path)
    config = AlbertConfig(vocab_size=len(tokenizer), embedding_size=16, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)  # fmt: skip
    AlbertForPreTraining(config).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def continued(transformers_albert, tmp_path_factory):
    """transformers' ALBERT continued with the albert recipe (MLM + SOP, n-gram masking): a spanroberta
    checkpoint with an ALBERT encoder."""
    output_dir = tmp_path_factory.mktemp("continued")
    run_pretraining.main([
        "--model_name_or_path", str(transformers_albert), "--recipe", "albert",
        "--train_file", str(demo_corpus_path()), "--output_dir", str(output_dir), "--max_steps", "4",
        "--logging_steps", "1", "--eval_strategy", "steps", "--eval_steps", "4", "--max_train_samples", "64",
        "--save_steps", "4", *FAST,
    ])  # fmt: skip
    return output_dir


@pytest.mark.slow
def test_a_transformers_albert_checkpoint_continues_pretraining_with_sop(continued):
    assert len(logged(continued, "sop_loss")) == 4 and len(logged(continued, "mlm_loss")) == 4
    assert not logged(continued, "sbo_loss")
    for total, mlm, sop in zip(logged(continued, "loss"), logged(continued, "mlm_loss"), logged(continued, "sop_loss")):
        assert total == pytest.approx(mlm + sop, abs=2e-3)
    results = json.loads((continued / "eval_results.json").read_text())
    assert 0.0 <= results["eval_sop_accuracy"] <= 1.0 and "eval_sop_loss" in results and "eval_mlm_accuracy" in results
    config = json.loads((continued / "config.json").read_text())
    assert config["model_type"] == "spanalbert" and config["architectures"] == ["SpanAlbertForPreTraining"]
    assert config["cross_layer_sharing"] == "all" and config["embedding_size"] == 16


@pytest.mark.slow
def test_the_albert_recipe_from_scratch_trains_a_sentencepiece_vocabulary(tmp_path):
    output_dir = tmp_path / "run"
    run_pretraining.main([
        "--recipe", "albert", "--train_file", str(shared_data("corpus", "wiki.valid.raw")),
        "--output_dir", str(output_dir), "--model_size", "tiny", "--tokenizer_vocab_size", "3000",
        "--max_steps", "3", "--logging_steps", "1", "--validation_split_percentage", "2", "--max_train_samples", "48",
        "--save_steps", "3", *FAST,
    ])  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(output_dir)
    assert type(tokenizer).__name__ == "AlbertTokenizer" and len(tokenizer) <= 3000
    assert tokenizer.convert_ids_to_tokens([0, 1, 2, 3, 4]) == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert tokenizer("a b", "c")["token_type_ids"] == [0, 0, 0, 0, 1, 1]
    config = json.loads((output_dir / "config.json").read_text())
    assert (config["model_type"], config["embedding_size"], config["cross_layer_sharing"]) == ("spanalbert", 128, "all")
    assert config["type_vocab_size"] == 2 and config["sentence_objective"] == "sop" and not config["use_sbo"]
    assert len(logged(output_dir, "sop_loss")) == 3
    assert "eval_sop_accuracy" in json.loads((output_dir / "eval_results.json").read_text())


@pytest.mark.slow
def test_span_masking_and_sbo_on_an_albert_encoder_with_packed_rows(tmp_path):
    """spanbert's recipe (span masking + SBO on packed doc-sentences) on an ALBERT encoder sharing its attention."""
    output_dir = tmp_path / "run"
    run_pretraining.main([
        "--recipe", "spanbert", "--cross_layer_sharing", "attention", "--embedding_size", "24",
        "--train_file", str(demo_corpus_path()), "--output_dir", str(output_dir), "--model_size", "tiny",
        "--tokenizer_vocab_size", "1000", "--max_steps", "3", "--logging_steps", "1", "--save_steps", "3",
        "--max_train_samples", "48", *FAST,
    ])  # fmt: skip
    assert len(logged(output_dir, "sbo_loss")) == 3
    config = json.loads((output_dir / "config.json").read_text())
    assert (config["model_type"], config["embedding_size"], config["cross_layer_sharing"]) == ("spanalbert", 24, "attention")
    assert config["num_hidden_groups"] == config["num_hidden_layers"] == 2
    assert json.loads((output_dir / "tokenizer_config.json").read_text())["tokenizer_class"] != "AlbertTokenizer"


def test_encoder_flags_must_agree_with_the_checkpoint(transformers_albert, spanroberta_checkpoint):
    def config_for(*flags):
        (model_args, data_args, _), _ = parse_arguments(
            (PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments), ["--output_dir", "x", *flags]
        )
        tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
        recipe = resolve_recipe(model_args, data_args)
        return get_objective(recipe.objective).build_config(model_args, recipe, tokenizer)

    assert config_for("--model_name_or_path", str(transformers_albert), "--cross_layer_sharing", "all")
    with pytest.raises(UserInputError, match="differs from the checkpoint"):
        config_for("--model_name_or_path", str(transformers_albert), "--cross_layer_sharing", "ffn")
    with pytest.raises(UserInputError, match="set an ALBERT encoder"):
        config_for("--model_name_or_path", str(spanroberta_checkpoint), "--embedding_size", "128")


@pytest.mark.parametrize("checkpoint", ["transformers", "spanroberta"])
@pytest.mark.slow
def test_run_glue_fine_tunes_albert_checkpoints(checkpoint, transformers_albert, continued, tmp_path):
    path = transformers_albert if checkpoint == "transformers" else continued
    run_glue.main([
        "--model_name_or_path", str(path), "--task_name", "rte", "--data_dir", str(shared_data("glue")),
        "--output_dir", str(tmp_path), "--do_train", "--do_eval", "--max_steps", "2", "--max_train_samples", "8",
        "--max_eval_samples", "8", "--save_strategy", "no", *FAST,
    ])  # fmt: skip
    assert json.loads((tmp_path / "eval_results.json").read_text())["eval_samples"] == 8
    architecture = json.loads((tmp_path / "config.json").read_text())["architectures"][0]
    assert architecture == {"transformers": "AlbertForSequenceClassification",
                            "spanroberta": "SpanAlbertForSequenceClassification"}[checkpoint]  # fmt: skip


@pytest.mark.parametrize("checkpoint", ["transformers", "spanroberta"])
@pytest.mark.slow
def test_run_squad_and_the_qa_pipeline_on_albert_checkpoints(checkpoint, transformers_albert, continued, tmp_path):
    path = transformers_albert if checkpoint == "transformers" else continued
    dev = str(shared_data("squad", "dev-v1.1.json"))
    out = tmp_path / "squad"
    run_squad.main([
        "--model_name_or_path", str(path), "--output_dir", str(out), "--do_train", "--do_eval",
        "--train_file", dev, "--validation_file", dev, "--max_train_samples", "16", "--max_eval_samples", "8",
        "--max_steps", "2", "--max_seq_length", "96", "--doc_stride", "16", "--max_query_length", "24",
        "--per_device_train_batch_size", "4", "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true",
    ])  # fmt: skip
    assert {"eval_exact_match", "eval_f1"} <= set(json.loads((out / "eval_results.json").read_text()))
    predictions = json.loads((out / "predictions.json").read_text())
    assert len(predictions) == 8
    context = "The Denver Broncos defeated the Carolina Panthers in Super Bowl 50 at Levi's Stadium."
    answer = pipeline("question-answering", model=str(out))(question="Who won Super Bowl 50?", context=context)
    assert context[answer["start"]:answer["end"]] == answer["answer"] and answer["answer"]


@pytest.mark.slow
def test_run_race_on_an_albert_checkpoint(continued, tmp_path):
    data = str(shared_data("race", "dev.middle.jsonl"))
    run_race.main([
        "--model_name_or_path", str(continued), "--train_file", data, "--validation_file", data,
        "--output_dir", str(tmp_path), "--do_train", "--do_eval", "--max_steps", "2", "--max_train_samples", "4",
        "--max_eval_samples", "6", "--max_qa_length", "24", "--per_device_eval_batch_size", "4",
        "--save_strategy", "no", *FAST,
    ])  # fmt: skip
    assert json.loads((tmp_path / "eval_results.json").read_text())["eval_samples"] == 6
    assert json.loads((tmp_path / "config.json").read_text())["architectures"] == ["SpanAlbertForMultipleChoice"]


@pytest.mark.slow
def test_a_resumed_albert_run_ends_with_the_weights_of_an_uninterrupted_one(transformers_albert, tmp_path):
    """The albert recipe (SOP on segment pairs, n-gram masks) on an encoder sharing its attention: resumed from
    the checkpoint of step 3, a run ends where the uninterrupted one does."""
    import shutil

    import torch
    from safetensors.torch import load_file

    args = [
        "--recipe", "albert", "--cross_layer_sharing", "attention", "--tokenizer_name", str(transformers_albert),
        "--train_file", str(demo_corpus_path()), "--model_size", "tiny", "--max_steps", "6", "--save_steps", "3",
        "--max_train_samples", "32", "--validation_split_percentage", "0", "--seed", "3", *FAST,
    ]  # fmt: skip
    run_pretraining.main([*args, "--output_dir", str(tmp_path / "whole")])
    shutil.copytree(tmp_path / "whole" / "checkpoint-3", tmp_path / "resumed" / "checkpoint-3")
    run_pretraining.main([*args, "--output_dir", str(tmp_path / "resumed"), "--resume_from_checkpoint", "true"])
    whole, resumed = (load_file(tmp_path / name / "model.safetensors") for name in ("whole", "resumed"))
    assert whole.keys() == resumed.keys()
    for name, weight in whole.items():
        torch.testing.assert_close(resumed[name], weight, rtol=1e-5, atol=1e-6, msg=name)
