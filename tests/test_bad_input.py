"""Bad input: to run_pretraining.py, a one-paragraph error naming the file and line (or the setting), exit status 1,
no traceback, nothing trained; or, for a document longer than a block, splitting without loss. Then the sweep of
benchmarks/reliability/bad_inputs.py, every script's broken inputs: each refused before any model loads (a script
writes its output folder's marker just before it loads the model, so no output folder means no model loaded)."""

import json

import datasets
import pytest
import run_ablation
import run_coref
import run_glue
import run_pretraining
import run_race
import run_relation
import run_squad
from conftest import TINY_TEXT
from transformers import PreTrainedTokenizerFast

from benchmarks.reliability.bad_inputs import CASES
from spanroberta.objectives.recipes import RECIPES

TINY_MODEL = ["--model_size", "tiny", "--config_overrides",
              "num_hidden_layers=1,hidden_size=32,num_attention_heads=2,intermediate_size=64"]


@pytest.fixture
def run_args(tmp_path, tiny_tokenizer_dir):
    return ["--output_dir", str(tmp_path / "out"), "--tokenizer_name", str(tiny_tokenizer_dir), *TINY_MODEL,
            "--max_seq_length", "32", "--max_steps", "1", "--report_to", "none", "--validation_split_percentage", "0"]


def error_of(args, tmp_path):
    """The message of the run's exit; checks that it is one paragraph and that training never started."""
    with pytest.raises(SystemExit) as exit_info:
        run_pretraining.main(args)
    message = exit_info.value.code
    # sys.exit(message) prints it and exits with status 1, without a traceback
    assert isinstance(message, str) and message.startswith("run_pretraining.py: error: ")
    assert "\n" not in message and "Traceback" not in message
    assert not list((tmp_path / "out").glob("checkpoint-*")) and not (tmp_path / "out" / "model.safetensors").exists()
    return message


def test_an_empty_file(run_args, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    message = error_of([*run_args, "--train_file", str(empty)], tmp_path)
    assert f"No documents in {empty}: the file is empty" in message


def test_a_file_of_blank_lines(run_args, tmp_path):
    blank = tmp_path / "blank.txt"
    blank.write_text("\n   \n\n \n")
    message = error_of([*run_args, "--train_file", str(blank)], tmp_path)
    assert f"No documents in {blank}: every line is blank" in message


def test_a_byte_that_is_not_utf8_is_reported_with_its_file_and_line(run_args, tmp_path):
    corpus = tmp_path / "latin1.txt"
    corpus.write_bytes("First line.\nSecond line.\n\nCaf\xe9 au lait.\n".encode("latin-1"))
    message = error_of([*run_args, "--train_file", str(corpus)], tmp_path)
    assert f"{corpus}, line 4: byte 0xe9 at column 4 is not valid UTF-8" in message


def test_a_document_longer_than_a_block_is_split_not_dropped(run_args, tmp_path, tiny_tokenizer):
    corpus = tmp_path / "long.txt"
    long_sentence = " ".join(TINY_TEXT[:12])  # one line of about 150 tokens, blocks of 32
    corpus.write_text(f"{long_sentence}\n\nA short one.\n")
    prepared_dir = tmp_path / "prepared"
    run_pretraining.main([*run_args, "--train_file", str(corpus), "--input_format", "doc-sentences",
                          "--prepared_data_dir", str(prepared_dir), "--prepare_only", "true"])
    blocks = datasets.load_from_disk(str(prepared_dir / "blocks"))["train"]["input_ids"]
    assert max(len(block) for block in blocks) == 32 and len(blocks) > 5
    specials = set(tiny_tokenizer.all_special_ids)
    tokens = [token for block in blocks for token in block if token not in specials]
    expected = tiny_tokenizer(" " + long_sentence, add_special_tokens=False)["input_ids"]
    expected += tiny_tokenizer(" A short one.", add_special_tokens=False)["input_ids"]
    assert tokens == expected


def test_a_tokenizer_without_a_mask_token(run_args, tmp_path, tiny_tokenizer):
    no_mask = tmp_path / "no_mask_tokenizer"
    PreTrainedTokenizerFast(
        tokenizer_object=tiny_tokenizer.backend_tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    ).save_pretrained(no_mask)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TINY_TEXT[:8]))
    message = error_of([*run_args, "--train_file", str(corpus), "--tokenizer_name", str(no_mask)], tmp_path)
    assert f"The tokenizer {no_mask} has no mask token" in message


def test_max_seq_length_above_the_model_positions(run_args, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TINY_TEXT[:8]))
    message = error_of([*run_args, "--train_file", str(corpus), "--max_seq_length", "1024"], tmp_path)
    assert "--max_seq_length 1024 is above the model's 512 positions" in message
    assert "max_position_embeddings=1026" in message


@pytest.mark.parametrize(
    "key,value,valid",
    [("recipe", "xlnet", ", ".join(RECIPES)), ("masking", "sentence", "span, word, token, ngram, named-entity, noun-phrase, pmi"),
     ("input_format", "docs", "full-sentences, doc-sentences, segment-pair, sentence-pair")],
)
def test_an_unknown_choice_in_a_config_file_lists_the_valid_ones(tmp_path, key, value, valid):
    config = tmp_path / "run.yaml"
    config.write_text(f"output_dir: {tmp_path / 'out'}\n{key}: {value}\n")
    message = error_of([str(config)], tmp_path)
    assert f"--{key} '{value}' does not exist; valid values: {valid}." in message


def test_a_config_file_with_unknown_keys(tmp_path):
    config = tmp_path / "run.json"
    config.write_text(json.dumps({"output_dir": str(tmp_path / "out"), "learning_rat": 1e-4, "max_step": 3}))
    message = error_of([str(config)], tmp_path)
    assert f"Config file {config} has unknown keys: learning_rat, max_step" in message


def test_evaluation_during_training_without_evaluation_data(run_args, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(TINY_TEXT[:20]))
    message = error_of([*run_args, "--train_file", str(corpus), "--eval_strategy", "steps"], tmp_path)
    assert "--eval_strategy steps evaluates during training, and this run has no evaluation data" in message


def test_an_electra_discriminator_without_its_generator(run_args, tmp_path):
    discriminator = tmp_path / "discriminator"
    discriminator.mkdir()
    (discriminator / "config.json").write_text(json.dumps({"model_type": "electra"}))
    message = error_of([*run_args, "--train_file", "unused.txt", "--recipe", "electra",
                        "--model_name_or_path", str(discriminator)], tmp_path)  # fmt: skip
    assert f"{discriminator} has no generator/ folder. Name the generator with --generator_name_or_path" in message


def test_packed_rows_under_flex_attention_on_cpu(run_args, tmp_path):
    """Refused before the data is read: torch's CPU kernel for flex attention cannot keep packed rows apart."""
    message = error_of([*run_args, "--train_file", "unused.txt", "--recipe", "spanbert",
                        "--attn_implementation", "flex_attention", "--use_cpu", "true"], tmp_path)  # fmt: skip
    assert "On CPU use sdpa or eager (--attn_implementation sdpa" in message and "--pack_documents false" in message


SCRIPTS = {"run_pretraining.py": run_pretraining, "run_squad.py": run_squad, "run_glue.py": run_glue,
           "run_race.py": run_race, "run_relation.py": run_relation, "run_coref.py": run_coref,
           "run_ablation.py": run_ablation}  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_sweep_of_bad_inputs_is_refused_before_any_model_loads(case, tmp_path, spanroberta_checkpoint,
                                                                   tiny_tokenizer_dir):  # fmt: skip
    inputs, output_dir = tmp_path / "inputs", tmp_path / "out"
    args = case.command(inputs, spanroberta_checkpoint, tiny_tokenizer_dir, output_dir)
    with pytest.raises(SystemExit) as exit_info:
        SCRIPTS[case.script].main(args)
    message = exit_info.value.code
    assert isinstance(message, str) and message.startswith(f"{case.script}: error: ") and "\n" not in message
    assert case.expected_text(inputs) in message
    assert not output_dir.exists()
