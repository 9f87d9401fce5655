"""run_pretraining.py end to end, and the command line around it."""

import json

import datasets

import pytest
import torch
import run_pretraining
from conftest import shared_data
from transformers import AutoModelForMaskedLM, AutoTokenizer, RobertaModel

import spanroberta  # noqa: F401  (registers the Auto classes)
from spanroberta import SpanRobertaForPreTraining
from spanroberta.pretraining.arguments import (
    PretrainingArguments,
    PretrainingDataArguments,
    PretrainingModelArguments,
)
from spanroberta.runs.cli import parse_arguments
from spanroberta.objectives import get_objective
from spanroberta.pretraining.specification import fill_defaults, resolve_recipe

ARGUMENT_TYPES = (PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments)


def logged(output_dir, key):
    state = json.loads((output_dir / "trainer_state.json").read_text())
    return [entry[key] for entry in state["log_history"] if key in entry]


@pytest.mark.slow
def test_thirty_steps_on_wikitext_lower_the_loss(tmp_path, capsys):
    corpus = shared_data("corpus", "wiki.valid.raw")
    output_dir = tmp_path / "run"
    run_pretraining.main([
        "--train_file", str(corpus),
        "--output_dir", str(output_dir),
        "--model_size", "tiny",
        "--tokenizer_vocab_size", "2000",
        "--max_seq_length", "128",
        "--per_device_train_batch_size", "16",
        "--max_steps", "30",
        "--learning_rate", "1e-3",
        "--warmup_steps", "3",
        "--logging_steps", "1",
        "--save_steps", "30",
        "--validation_split_percentage", "2",
        "--recipe", "spanbert",
        "--disable_tqdm", "true",
        "--seed", "1",
    ])
    losses, mlm, sbo = logged(output_dir, "loss"), logged(output_dir, "mlm_loss"), logged(output_dir, "sbo_loss")
    assert len(losses) == 30 and len(mlm) == 30 and len(sbo) == 30
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 1.0
    for total, mlm_loss, sbo_loss in zip(losses, mlm, sbo):
        assert total == pytest.approx(mlm_loss + sbo_loss, abs=2e-3)

    eval_results = json.loads((output_dir / "eval_results.json").read_text())
    for key in ("eval_mlm_accuracy", "eval_perplexity", "eval_sbo_accuracy", "eval_mlm_loss", "eval_sbo_loss"):
        assert key in eval_results
    assert 0.0 < eval_results["eval_mlm_accuracy"] <= 1.0
    assert eval_results["eval_perplexity"] == pytest.approx(torch.tensor(eval_results["eval_mlm_loss"]).exp().item())

    # the output folder: config, weights, tokenizer, code files and a model card, with both heads kept
    files = {path.name for path in output_dir.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md", "modeling_spanroberta.py"} <= files
    model = SpanRobertaForPreTraining.from_pretrained(output_dir)
    assert model.sbo_head is not None
    tokenizer = AutoTokenizer.from_pretrained(output_dir)
    assert (len(tokenizer), model.config.vocab_size) == (2000, 2048)  # padded to a multiple of 64
    encoder, info = RobertaModel.from_pretrained(output_dir, output_loading_info=True)
    # RoBERTa's pooler is not trained without a sentence-level objective (its classification head ignores it)
    assert not {key for key in info["missing_keys"] if not key.startswith("pooler.")}
    fill_mask = AutoModelForMaskedLM.from_pretrained(output_dir)
    torch.testing.assert_close(fill_mask.lm_head.dense.weight, model.lm_head.dense.weight)
    # A spanroberta model type loads through the Auto classes once spanroberta is imported: the hint says so.
    assert "Use it with:\n    import spanroberta" in capsys.readouterr().out


def test_recipes_and_overrides():
    (model_args, data_args, _), _ = parse_arguments(ARGUMENT_TYPES, ["--output_dir", "x"])
    objective = resolve_recipe(model_args, data_args)
    assert (objective.masking, objective.sbo, objective.input_format) == ("span", True, "doc-sentences")

    (model_args, data_args, _), _ = parse_arguments(
        ARGUMENT_TYPES, ["--output_dir", "x", "--recipe", "spanbert", "--masking", "word", "--sbo", "false",
                         "--input_format", "full-sentences"]
    )
    objective = resolve_recipe(model_args, data_args)
    assert (objective.masking, objective.sbo, objective.input_format) == ("word", False, "full-sentences")

    (model_args, data_args, _), _ = parse_arguments(ARGUMENT_TYPES, ["--output_dir", "x", "--recipe", "bert"])
    objective = resolve_recipe(model_args, data_args)
    assert objective.static_masking and objective.sentence_objective == "nsp"
    assert objective.input_format == "segment-pair"

    (model_args, data_args, _), _ = parse_arguments(ARGUMENT_TYPES, ["--output_dir", "x", "--recipe", "roberta"])
    objective = resolve_recipe(model_args, data_args)
    assert (objective.masking, objective.sbo, objective.static_masking) == ("token", False, False)


def test_optimizer_defaults_follow_roberta():
    (_, _, training_args), _ = parse_arguments(ARGUMENT_TYPES, ["--output_dir", "x"])
    assert training_args.adam_beta2 == 0.98 and training_args.adam_epsilon == 1e-6
    assert training_args.weight_decay == 0.01 and training_args.lr_scheduler_type == "linear"
    assert 0 < training_args.warmup_steps < 1


def test_demo_settings_fill_only_what_was_not_given():
    (model_args, data_args, training_args), given = parse_arguments(ARGUMENT_TYPES, ["--max_steps", "7"])
    (model_args, data_args, training_args), _ = fill_defaults((model_args, data_args, training_args), given)
    assert training_args.max_steps == 7
    assert model_args.model_size == "tiny" and training_args.output_dir == "spanroberta-demo"
    assert data_args.train_file.endswith(".txt")


def test_config_file_and_its_unknown_keys(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("output_dir: out\nrecipe: roberta\nmax_steps: 3\n")
    (model_args, data_args, training_args), given = parse_arguments(ARGUMENT_TYPES, [str(config)])
    assert data_args.recipe == "roberta" and training_args.max_steps == 3 and "max_steps" in given

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"output_dir": "out", "learning_rat": 1e-4}))
    with pytest.raises(ValueError, match=r"bad\.json has unknown keys: learning_rat"):
        parse_arguments(ARGUMENT_TYPES, [str(bad)])


@pytest.mark.parametrize("flag,value", [("--recipe", "xlnet"), ("--masking", "sentence"), ("--input_format", "docs")])
def test_unknown_choices_list_the_valid_ones(flag, value, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_pretraining.main(["--output_dir", "x", flag, value])
    assert exit_info.value.code != 0
    message = capsys.readouterr().err
    assert "invalid choice" in message and value in message


def test_pair_formats_need_a_sentence_objective():
    from spanroberta.errors import UserInputError

    (model_args, data_args, _), _ = parse_arguments(
        ARGUMENT_TYPES, ["--output_dir", "x", "--recipe", "spanbert", "--input_format", "segment-pair"]
    )
    with pytest.raises(UserInputError, match="add --sentence_objective nsp or sop"):
        resolve_recipe(model_args, data_args)


def test_a_wordpiece_tokenizer_gets_two_token_types_and_pairs_train(tmp_path):
    """BERT's tokenizer marks a pair's second segment with token type 1, which a one-type model cannot embed."""
    from transformers import BertTokenizer

    from spanroberta.data.collator import DataCollatorForSpanMasking
    from spanroberta.data.formats import prepare_blocks

    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "a", "span", "is", "masked", "."]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words, "##s"]
    tokenizer = BertTokenizer(vocab={token: index for index, token in enumerate(vocab)})
    (model_args, data_args, _), _ = parse_arguments(
        ARGUMENT_TYPES, ["--output_dir", "x", "--recipe", "bert", "--model_size", "tiny"]
    )
    objective = resolve_recipe(model_args, data_args)
    masked_lm = get_objective(objective.objective)
    config = masked_lm.build_config(model_args, objective, tokenizer)
    assert config.type_vocab_size == 2
    documents = datasets.Dataset.from_dict(
        {"text": ["the quick brown fox jumps .\nover the lazy dog .", "a span is masked .\nthe dog jumps ."] * 4}
    )
    blocks = prepare_blocks(documents, tokenizer, "segment-pair", 32, pair_objective="nsp")
    assert 1 in blocks[0]["token_type_ids"]
    collator = DataCollatorForSpanMasking(tokenizer, label_layout="slots", masking="word", return_sbo_targets=False)
    model = masked_lm.build_model(model_args, config, tokenizer)
    output = model(**collator(list(blocks)))
    assert torch.isfinite(output.loss) and output.nsp_loss is not None

    # evaluation reports the sentence head too, and its loss counts in eval_loss as in training
    from transformers import TrainingArguments

    from spanroberta.data.masking_schedule import DynamicMaskingDataset
    from spanroberta.pretraining.trainer import PretrainingTrainer

    args = TrainingArguments(output_dir=str(tmp_path / "eval"), report_to="none", use_cpu=True,
                             per_device_eval_batch_size=4, remove_unused_columns=False)  # fmt: skip
    trainer = PretrainingTrainer(model=model, args=args, data_collator=collator)
    metrics = trainer.evaluate(DynamicMaskingDataset(blocks))
    assert 0.0 <= metrics["eval_nsp_accuracy"] <= 1.0
    assert metrics["eval_loss"] == pytest.approx(metrics["eval_mlm_loss"] + metrics["eval_nsp_loss"])


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_on_cuda_the_run_copies_pinned_batches_without_waiting(device, monkeypatch):
    """On CUDA (the device stated to the arguments, so that any machine runs this) the run asks accelerate for
    non-blocking copies from pinned memory through the Trainer's accelerator_config; on CPU, and where the user
    set either flag, the arguments are left as they are."""
    from unittest import mock

    from transformers import Trainer

    from spanroberta.pretraining.specification import _copy_batches_without_waiting

    def arguments(*flags):
        types = (PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments)
        (_, _, training_args), given = parse_arguments(types, ["--output_dir", "unused", *flags])
        return training_args, given

    with mock.patch.object(PretrainingArguments, "device", torch.device(device)):
        training_args, given = arguments("--dataloader_pin_memory", "false")
        training_args.dataloader_pin_memory = False  # as a default would leave it
        _copy_batches_without_waiting(training_args, set())
        assert training_args.accelerator_config.non_blocking == training_args.dataloader_pin_memory == (
            device == "cuda"
        )
        training_args, given = arguments("--dataloader_pin_memory", "false")
        _copy_batches_without_waiting(training_args, given)
        assert not training_args.accelerator_config.non_blocking and not training_args.dataloader_pin_memory
    # What the Trainer hands accelerate: the copies of every batch are non-blocking.
    training_args, _ = arguments("--use_cpu", "true", "--report_to", "none")
    training_args.accelerator_config.non_blocking = True
    trainer = Trainer(model=torch.nn.Linear(2, 2), args=training_args)
    assert trainer.accelerator.dataloader_config.non_blocking
