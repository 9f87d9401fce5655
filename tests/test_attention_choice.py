"""Whether a pretraining run's rows are packed, and whether its attention implementation can train it
(pretraining/attention.py): transformers' default, sdpa, runs packed rows on CUDA as on CPU, an explicit choice is
kept, and every implementation that could not train the run is refused before any data is read."""

import dataclasses

import pytest
import run_pretraining
import torch
from transformers import HfArgumentParser

from spanroberta.ablation.config import script_arguments
from spanroberta.errors import UserInputError
from spanroberta.finetuning import TASKS_BY_SCRIPT
from spanroberta.models.packing import ATTENTION_IMPLEMENTATIONS
from spanroberta.objectives import resolve_recipe
from spanroberta.pretraining.arguments import (
    PretrainingArguments,
    PretrainingDataArguments,
    PretrainingModelArguments,
)
from spanroberta.pretraining.attention import plan_packing
from spanroberta.runs.cli import parse_arguments
from spanroberta.runs.run_length import run_settings

CUDA, CPU = torch.device("cuda"), torch.device("cpu")  # only their type is read: no GPU is needed


def plan(*flags, device=CUDA, attn_implementation=None):
    """The data arguments plan_packing gives for the flags, on `device`; `attn_implementation` is set after parsing
    (the parser checks that flash attention's package is installed)."""
    types = (PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments)
    (model_args, data_args, _), _ = parse_arguments(types, ["--output_dir", "unused", *flags])
    if attn_implementation:
        model_args = dataclasses.replace(model_args, attn_implementation=attn_implementation)
    return plan_packing(model_args, data_args, resolve_recipe(model_args, data_args), device)


@pytest.mark.parametrize("device", [CUDA, CPU], ids=["cuda", "cpu"])
def test_the_spanbert_recipe_packs_its_rows_under_any_attention_that_runs_them(device):
    """No --attn_implementation: transformers' default (sdpa, with a block-diagonal mask) runs packed rows on every
    device; varlen_fa2 and eager are choices, kept."""
    assert plan("--recipe", "spanbert", device=device).pack_documents
    for choice in ("sdpa", "eager", "varlen_fa2"):
        assert plan("--recipe", "spanbert", "--attn_implementation", choice, device=device).pack_documents
    assert not plan("--recipe", "spanbert", "--pack_documents", "false", device=device).pack_documents


@pytest.mark.parametrize("device", [CUDA, CPU], ids=["cuda", "cpu"])
def test_flex_attention_is_refused_where_the_model_keeps_attention_dropout(device):
    with pytest.raises(UserInputError) as error:
        plan("--recipe", "roberta", "--attn_implementation", "flex_attention", device=device)
    message = str(error.value)
    assert "cannot apply attention dropout" in message and "dropout of 0.1" in message
    assert "--config_overrides attention_probs_dropout_prob=0" in message and "\n" not in message
    for other in ("sdpa", "eager", "varlen_fa2", "flash_attention_2"):
        assert other in message
    plan("--recipe", "roberta", "--attn_implementation", "flex_attention",
         "--config_overrides", "attention_probs_dropout_prob=0,hidden_size=64")  # fmt: skip
    plan("--recipe", "albert", "--attn_implementation", "flex_attention")  # ALBERT has no attention dropout


def test_flash_attention_packs_rows_only_in_the_encoder_that_flattens_them():
    assert plan("--recipe", "spanbert", attn_implementation="flash_attention_2").pack_documents
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

    monkeypatch.setattr("spanroberta.pretraining.run.load_pretraining_data", data_read)
    with pytest.raises(SystemExit) as exit_info:
        run_pretraining.main([
            "--output_dir", str(tmp_path / "out"), "--tokenizer_name", str(tiny_tokenizer_dir),
            "--train_file", str(tmp_path / "absent.txt"), "--recipe", "electra", "--model_size", "tiny",
            "--attn_implementation", "flex_attention", "--max_steps", "1", "--report_to", "none", "--use_cpu", "true",
        ])  # fmt: skip
    message = exit_info.value.code
    assert "flex_attention cannot apply attention dropout" in message and "\n" not in message
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("script", ["run_pretraining.py", *TASKS_BY_SCRIPT])
def test_every_script_lists_and_accepts_the_same_attention_implementations(script):
    """The help and the choices come from one field (runs/arguments.py) for every script."""
    model_arguments = script_arguments(script)[0]
    help_text = " ".join(HfArgumentParser(model_arguments).format_help().split())
    for implementation in ATTENTION_IMPLEMENTATIONS:
        assert implementation in help_text
    with pytest.raises(SystemExit):
        HfArgumentParser(model_arguments).parse_args_into_dataclasses(
            ["--model_name_or_path", "unused", "--attn_implementation", "fast"]
        )


def test_the_run_settings_line_names_the_attention_and_who_set_it():
    (training_args,) = HfArgumentParser(PretrainingArguments).parse_args_into_dataclasses(
        ["--output_dir", "unused", "--max_steps", "10", "--use_cpu", "true"]
    )
    line = run_settings(training_args, None, {"attn_implementation": "you"}, "varlen_fa2")
    assert line.endswith("attn_implementation varlen_fa2 (you)")


def test_the_run_settings_line_names_the_path_packed_rows_take():
    """On CPU varlen_fa2's packed rows take sdpa's mask, and the line says why; sdpa recommends nothing there (no
    flash kernel). Where the kernel would run (a CUDA device under bf16, here asked of a stand-in that says so),
    sdpa's line recommends varlen_fa2, except for an encoder with sliding-window layers."""
    from types import SimpleNamespace
    from unittest import mock

    from transformers import ModernBertConfig, RobertaConfig

    from spanroberta.pretraining import attention

    on_cpu = SimpleNamespace(device=torch.device("cpu"), bf16=True, fp16=False)
    config = RobertaConfig(attn_implementation="varlen_fa2")
    assert attention.describe_attention(config, on_cpu, packed=True) == (
        "varlen_fa2: packed rows under sdpa's block-diagonal mask, since torch has no flash attention kernel on cpu"
    )
    assert attention.describe_attention(config, on_cpu, packed=False) == "varlen_fa2"
    assert attention.describe_attention(RobertaConfig(attn_implementation="sdpa"), on_cpu, packed=True) == "sdpa"
    with mock.patch.object(attention, "varlen_fa2_refusal", lambda *args: None):
        assert attention.describe_attention(config, on_cpu, packed=True) == (
            "varlen_fa2: packed rows through torch's flash kernel"
        )
        line = attention.describe_attention(RobertaConfig(attn_implementation="sdpa"), on_cpu, packed=True)
        assert line.endswith("--attn_implementation varlen_fa2 would run them through torch's flash kernel here")
        modernbert = ModernBertConfig(attn_implementation="sdpa")
        assert attention.describe_attention(modernbert, on_cpu, packed=True) == "sdpa"


def test_attention_computes_in_autocasts_dtype_where_it_is_on():
    from spanroberta.models.varlen_attention import attention_compute_dtype

    assert attention_compute_dtype("cpu", torch.float32) == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert attention_compute_dtype("cpu", torch.float32) == torch.bfloat16


def test_offsets_go_with_the_batch_only_where_it_reaches_one_model_whole():
    """nn.DataParallel and accelerate's dispatched batches cut every tensor along its first dimension: there the
    collator makes no offsets and the model derives them from the rows it gets."""
    from types import SimpleNamespace

    from spanroberta.pretraining.run import _batches_reach_the_model_whole

    def args(n_gpu, dispatch):
        return SimpleNamespace(n_gpu=n_gpu, accelerator_config=SimpleNamespace(dispatch_batches=dispatch))

    assert _batches_reach_the_model_whole(args(1, None)) and _batches_reach_the_model_whole(args(0, False))
    assert not _batches_reach_the_model_whole(args(2, None))
    assert not _batches_reach_the_model_whole(args(1, True))


def test_packed_rows_on_cuda_take_varlen_fa2_unless_told_otherwise():
    """With no --attn_implementation, packed rows on CUDA under bf16 or fp16 take varlen_fa2 where its kernel
    would run them (asked here of a stand-in that says so), and the run-settings line says who chose it. An
    implementation given, rows not packed, a CPU device, fp32 and sliding-window layers all keep the default."""
    from types import SimpleNamespace
    from unittest import mock

    from transformers import ModernBertConfig, RobertaConfig

    from spanroberta.models import varlen_attention
    from spanroberta.pretraining import attention

    def run(device="cuda", bf16=True, fp16=False):
        return SimpleNamespace(device=torch.device(device), bf16=bf16, fp16=fp16)

    not_given, given = SimpleNamespace(attn_implementation=None), SimpleNamespace(attn_implementation="sdpa")

    def choose(model_args=not_given, training_args=None, packed=True, config=None):
        config = config or RobertaConfig(attn_implementation="sdpa")
        reason = attention.choose_packed_rows_attention(config, model_args, training_args or run(), packed)
        return reason, config._attn_implementation

    def refusal(device, dtype, head_dim):  # the kernel's own rule on CUDA, the device's kernels taken as present
        return None if dtype in (torch.bfloat16, torch.float16) else "fp32"

    with mock.patch.object(attention, "varlen_fa2_refusal", refusal):
        assert choose() == ("packed rows on cuda under bf16", "varlen_fa2")
        assert choose(training_args=run(bf16=False, fp16=True)) == ("packed rows on cuda under fp16", "varlen_fa2")
        assert choose(training_args=run(bf16=False)) == (None, "sdpa")
        assert choose(model_args=given) == (None, "sdpa")
        assert choose(packed=False) == (None, "sdpa")
        assert choose(training_args=run("cpu")) == (None, "sdpa")
        assert choose(config=ModernBertConfig(attn_implementation="sdpa")) == (None, "sdpa")
    # On this machine's CPU torch has no flash kernel: nothing changes, whatever the device is called.
    assert varlen_attention.varlen_fa2_refusal("cpu", torch.bfloat16, 64) is not None
    assert choose(training_args=run("cpu")) == (None, "sdpa")
