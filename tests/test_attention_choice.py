"""Which attention implementation a pretraining run uses, and whether its rows are packed (training/attention.py):
varlen_sdpa chosen for packed rows on CUDA when none is asked for, the CPU default left as it is, an explicit
choice kept, and every implementation that could not train the run refused before any data is read."""

import dataclasses

import pytest
import run_pretraining
import torch
from transformers import HfArgumentParser

from spanroberta.errors import UserInputError
from spanroberta.models.packing import ATTENTION_IMPLEMENTATIONS
from spanroberta.objectives import resolve_recipe
from spanroberta.training.arguments import PretrainingArguments, PretrainingDataArguments, PretrainingModelArguments
from spanroberta.training.attention import plan_attention
from spanroberta.training.cli import parse_arguments
from spanroberta.training.run_length import run_settings

CUDA, CPU = torch.device("cuda"), torch.device("cpu")  # only their type is read: no GPU is needed


def plan(*flags, device=CUDA, attn_implementation=None):
    """(data_args, AttentionPlan) for the flags, on `device`; `attn_implementation` is set after parsing (the
    parser checks that flash attention's package is installed)."""
    types = (PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments)
    (model_args, data_args, _), _ = parse_arguments(types, ["--output_dir", "unused", *flags])
    if attn_implementation:
        model_args = dataclasses.replace(model_args, attn_implementation=attn_implementation)
    return plan_attention(model_args, data_args, resolve_recipe(model_args, data_args), device)


def test_packed_rows_on_cuda_run_through_varlen_sdpa_unless_told_otherwise():
    data_args, attention = plan("--recipe", "spanbert")
    assert data_args.pack_documents
    assert (attention.attn_implementation, attention.chosen_by) == ("varlen_sdpa", "packed rows on cuda")
    _, attention = plan("--recipe", "spanbert", "--attn_implementation", "sdpa")
    assert (attention.attn_implementation, attention.chosen_by) == ("sdpa", "you")


@pytest.mark.parametrize("flags", [["--recipe", "spanbert"], ["--recipe", "roberta"]], ids=["packed", "unpacked"])
def test_cpu_keeps_transformers_default(flags):
    """On CPU packed rows keep sdpa's block-diagonal mask (exact, and faster there than the nested kernel)."""
    _, attention = plan(*flags, device=CPU)
    assert (attention.attn_implementation, attention.chosen_by) == (None, None)


def test_unpacked_rows_on_cuda_keep_transformers_default():
    _, attention = plan("--recipe", "roberta")  # full-sentences: one stream of text a row, nothing to isolate
    assert attention.attn_implementation is None
    _, attention = plan("--recipe", "spanbert", "--pack_documents", "false")
    assert attention.attn_implementation is None


@pytest.mark.parametrize("device", [CUDA, CPU], ids=["cuda", "cpu"])
def test_flex_attention_is_refused_where_the_model_keeps_attention_dropout(device):
    with pytest.raises(UserInputError) as error:
        plan("--recipe", "roberta", "--attn_implementation", "flex_attention", device=device)
    message = str(error.value)
    assert "cannot apply attention dropout" in message and "dropout of 0.1" in message
    assert "--config_overrides attention_probs_dropout_prob=0" in message and "\n" not in message
    for other in ("sdpa", "eager", "varlen_sdpa", "flash_attention_2"):
        assert other in message
    _, attention = plan("--recipe", "roberta", "--attn_implementation", "flex_attention",
                        "--config_overrides", "attention_probs_dropout_prob=0,hidden_size=64")  # fmt: skip
    assert attention.attn_implementation == "flex_attention"
    _, attention = plan("--recipe", "albert", "--attn_implementation", "flex_attention")  # ALBERT has none
    assert attention.attn_implementation == "flex_attention"


def test_flash_attention_packs_rows_only_in_the_encoder_that_flattens_them():
    _, attention = plan("--recipe", "spanbert", attn_implementation="flash_attention_2")
    assert attention.attn_implementation == "flash_attention_2"
    with pytest.raises(UserInputError, match="flash_attention_2 does not take in this encoder.*--pack_documents false"):
        plan("--recipe", "spanbert", "--cross_layer_sharing", "all", attn_implementation="flash_attention_2")


def test_flex_attention_on_cpu_refuses_packed_rows():
    with pytest.raises(UserInputError, match="On CPU use sdpa or eager.*--pack_documents false"):
        plan("--recipe", "spanbert", "--attn_implementation", "flex_attention",
             "--config_overrides", "attention_probs_dropout_prob=0", device=CPU)  # fmt: skip


def test_the_refusal_comes_before_any_data_is_read(tmp_path, tiny_tokenizer_dir, monkeypatch):
    """The train file does not exist, and the data loader must not be reached: the attention is refused first."""

    def data_read(*args, **kwargs):
        raise AssertionError("the data was read before the attention was checked")

    monkeypatch.setattr("spanroberta.training.pretraining.load_pretraining_data", data_read)
    with pytest.raises(SystemExit) as exit_info:
        run_pretraining.main([
            "--output_dir", str(tmp_path / "out"), "--tokenizer_name", str(tiny_tokenizer_dir),
            "--train_file", str(tmp_path / "absent.txt"), "--recipe", "electra", "--model_size", "tiny",
            "--attn_implementation", "flex_attention", "--max_steps", "1", "--report_to", "none", "--use_cpu", "true",
        ])  # fmt: skip
    message = exit_info.value.code
    assert "flex_attention cannot apply attention dropout" in message and "\n" not in message
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_the_help_lists_every_accepted_attention_implementation():
    help_text = " ".join(HfArgumentParser(PretrainingModelArguments).format_help().split())
    for implementation in ATTENTION_IMPLEMENTATIONS:
        assert implementation in help_text
    with pytest.raises(SystemExit):
        HfArgumentParser(PretrainingModelArguments).parse_args_into_dataclasses(["--attn_implementation", "fast"])


def test_the_run_settings_line_names_the_attention_and_who_chose_it():
    (training_args,) = HfArgumentParser(PretrainingArguments).parse_args_into_dataclasses(
        ["--output_dir", "unused", "--max_steps", "10", "--use_cpu", "true"]
    )
    line = run_settings(training_args, None, {"attn_implementation": "packed rows on cuda"}, "varlen_sdpa")
    assert line.endswith("attn_implementation varlen_sdpa (packed rows on cuda)")
