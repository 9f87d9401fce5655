"""A pretraining run's attention plan (pretraining/attention.py, `plan_attention`): made once, before any data is
read, from the flags, the device, the precision and the model; every implementation that could not train the run
refused first; varlen_fa2 the default for packed rows where torch's flash kernel trains them, and otherwise the
reason it is not, in the plan and in the run-settings line; the config, the collator and the run-settings line
reading the plan. The CUDA cases run on any machine: the facts of the GPU and of torch's build are injected."""

import dataclasses
import logging

import pytest
import run_pretraining
import torch
from conftest import TINY_TEXT, packed_batch, refusal_before_data_is_read, tiny_span_config
from transformers import HfArgumentParser

from spanroberta.ablation.config import script_arguments
from spanroberta.errors import UserInputError
from spanroberta.tasks.registry import TASKS_BY_SCRIPT
from spanroberta.models import packed_attention
from spanroberta.models.packed_attention import ATTENTION_IMPLEMENTATIONS
from spanroberta.pretraining.specification import resolve_recipe
from spanroberta.pretraining import attention
from spanroberta.pretraining.arguments import (
    PretrainingArguments,
    PretrainingDataArguments,
    PretrainingModelArguments,
)
from spanroberta.pretraining.attention import AttentionRequest, EncoderFacts, plan_attention, read_encoder_facts
from spanroberta.runs.cli import parse_arguments
from spanroberta.runs.run_length import run_settings

CUDA, CPU = torch.device("cuda"), torch.device("cpu")  # only their type is read: no GPU is needed
ROBERTA_BASE = EncoderFacts(model_type=None, head_size=64, attention_dropout=0.1, flattens_rows=True)
MASK = "packed rows under sdpa's block-diagonal mask, since "
FLASH_KERNEL = "packed rows through torch's flash kernel"


@pytest.fixture
def gpu(monkeypatch):
    """A CUDA machine as varlen_fa2's checks see it, on any host: a torch built with flash attention 2 for NVIDIA
    GPUs, its flash ops with CUDA kernels, on a GPU of compute capability `capability` (an H200's by default);
    `hip`, `flash` and `activated` change the build (ROCm, no flash attention, FA3 activated globally)."""

    def machine(capability=(9, 0), hip=None, flash=True, activated=None):
        has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
        monkeypatch.setattr(torch._C, "_dispatch_has_kernel_for_dispatch_key",
                            lambda op, key: key == "CUDA" or has_kernel(op, key))  # fmt: skip
        monkeypatch.setattr(torch.version, "hip", hip)
        monkeypatch.setattr(torch.backends.cuda, "is_flash_attention_available", lambda: flash)
        monkeypatch.setattr(torch.nn.attention, "current_flash_attention_impl", lambda: activated)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)

    machine()
    return machine


def request(device=CUDA, precision="bf16", asked=None, packed=True, whole=True):
    return AttentionRequest(attn_implementation=asked, packed_rows_asked=packed, device=device, precision=precision,
                            batches_reach_the_model_whole=whole)  # fmt: skip


# The one function, for each kind of machine, with its reason


def test_on_cpu_packed_rows_take_the_mask_and_the_plan_says_why():
    plan = plan_attention(request(CPU), ROBERTA_BASE)
    assert (plan.implementation, plan.packs_rows, plan.takes_offsets) == (None, True, False)
    assert plan.reason == MASK + "torch has no flash attention kernel on cpu" and plan.chosen_by is None
    assert plan.describe("sdpa") == "sdpa: " + plan.reason


def test_on_cuda_under_bf16_packed_rows_take_varlen_fa2_and_its_offsets(gpu):
    plan = plan_attention(request(CUDA, "bf16"), ROBERTA_BASE)
    assert (plan.implementation, plan.packs_rows, plan.takes_offsets) == ("varlen_fa2", True, True)
    assert (plan.reason, plan.chosen_by) == (FLASH_KERNEL, "packed rows on cuda under bf16")
    assert plan_attention(request(CUDA, "fp16"), ROBERTA_BASE).chosen_by == "packed rows on cuda under fp16"
    # Under nn.DataParallel or dispatched batches the model derives the offsets from the rows it gets.
    assert not plan_attention(request(CUDA, whole=False), ROBERTA_BASE).takes_offsets


def test_in_fp32_on_cuda_packed_rows_take_the_mask_and_the_plan_says_why(gpu):
    plan = plan_attention(request(CUDA, "fp32"), ROBERTA_BASE)
    assert (plan.implementation, plan.packs_rows, plan.takes_offsets) == (None, True, False)
    assert plan.reason == MASK + ("the flash kernel computes in fp16 or bf16 only, and attention here computes in "
                                  "torch.float32 (use --bf16)")  # fmt: skip


@pytest.mark.parametrize("capability", [(8, 6), (8, 9), (12, 0)])
def test_head_sizes_the_flash_backward_refuses_are_refused_on_consumer_gpus(gpu, capability):
    """torch's flash backward on sm86-sm89 and sm120-121 refuses heads of 193 to 224, and above 224 with dropout."""
    gpu(capability)
    found = ".".join(map(str, capability))
    for head, dropout in ((200, 0.0), (256, 0.1)):
        plan = plan_attention(request(), dataclasses.replace(ROBERTA_BASE, head_size=head, attention_dropout=dropout))
        assert (plan.implementation, plan.takes_offsets) == (None, False)
        assert plan.reason.startswith(MASK + f"the flash kernel's backward on compute capability {found} refuses "
                                      f"heads of {head}")  # fmt: skip
    for head, dropout in ((192, 0.1), (256, 0.0)):  # what the backward takes there
        plan = plan_attention(request(), dataclasses.replace(ROBERTA_BASE, head_size=head, attention_dropout=dropout))
        assert plan.implementation == "varlen_fa2", (head, dropout)


def test_heads_above_192_train_under_varlen_fa2_on_a_data_centre_gpu(gpu):
    assert plan_attention(request(), dataclasses.replace(ROBERTA_BASE, head_size=256)).implementation == "varlen_fa2"
    plan = plan_attention(request(), dataclasses.replace(ROBERTA_BASE, head_size=264))
    assert plan.reason == MASK + "the flash kernel takes head sizes that are multiples of 8 up to 256, not 264"


@pytest.mark.parametrize("build, reason", [
    ({"hip": "6.4"}, "this torch is built for ROCm (HIP 6.4), and varlen_fa2 is built on NVIDIA's flash kernel"),
    ({"flash": False}, "this torch is built without flash attention"),
    ({"activated": "FA3"}, "flash attention FA3 is activated in place of torch's flash attention 2"),
    ({"capability": (7, 5)}, "the flash kernel needs compute capability 8.0 or newer, and this GPU has 7.5"),
])  # fmt: skip
def test_builds_without_torchs_flash_attention_2_refuse_varlen_fa2_up_front(gpu, build, reason):
    """Refused when it would be the default and when it is asked for; the run-settings line gives the reason."""
    gpu(**build)
    for asked in (None, "varlen_fa2"):
        plan = plan_attention(request(asked=asked), ROBERTA_BASE)
        assert (plan.implementation, plan.takes_offsets) == (asked, False)
        assert plan.reason.startswith(MASK + reason), plan.reason
        assert plan.describe(asked or "sdpa").startswith(f"{asked or 'sdpa'}: {MASK}{reason}")


def test_an_implementation_asked_for_is_kept(gpu):
    """sdpa asked for where the flash kernel would run: the plan recommends varlen_fa2; others say nothing."""
    plan = plan_attention(request(asked="sdpa"), ROBERTA_BASE)
    assert (plan.implementation, plan.takes_offsets, plan.chosen_by) == ("sdpa", False, None)
    assert plan.reason.endswith("--attn_implementation varlen_fa2 would run them through torch's flash kernel here")
    assert plan_attention(request(asked="eager"), ROBERTA_BASE).reason is None
    assert plan_attention(request(asked="varlen_fa2"), ROBERTA_BASE).reason == FLASH_KERNEL
    assert plan_attention(request(asked="sdpa", precision="fp32"), ROBERTA_BASE).reason is None


def test_rows_that_are_not_packed_keep_the_default(gpu):
    plan = plan_attention(request(packed=False), ROBERTA_BASE)
    assert plan == attention.AttentionPlan(None, packs_rows=False, takes_offsets=False)
    assert plan.describe("sdpa") == "sdpa"


def test_encoders_with_sliding_window_layers_or_no_packing(gpu):
    """ModernBERT's sliding-window layers need sdpa's per-layer masks (varlen_fa2 asked for is refused); DeBERTa's
    attention cannot keep packed sequences apart, so its rows hold one document each."""
    modernbert = dataclasses.replace(ROBERTA_BASE, model_type="modernbert", flattens_rows=False)
    plan = plan_attention(request(), modernbert)
    assert (plan.implementation, plan.packs_rows) == (None, True)
    assert plan.reason == MASK + "this encoder has sliding-window layers, which need sdpa's per-layer masks"
    with pytest.raises(UserInputError, match="sliding-window layers"):
        plan_attention(request(asked="varlen_fa2"), modernbert)
    deberta = dataclasses.replace(ROBERTA_BASE, model_type="deberta-v2", flattens_rows=False)
    assert plan_attention(request(), deberta) == attention.AttentionPlan(None, packs_rows=False, takes_offsets=False)


# The plan from the run's flags: refusals before any data is read


def plan(*flags, device=CUDA, attn_implementation=None, precision="bf16"):
    """The plan for the flags on `device`; `attn_implementation` is set after parsing (the parser checks that flash
    attention's package is installed)."""
    types = (PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments)
    (model_args, data_args, _), _ = parse_arguments(types, ["--output_dir", "unused", *flags])
    if attn_implementation:
        model_args = dataclasses.replace(model_args, attn_implementation=attn_implementation)
    recipe = resolve_recipe(model_args, data_args)
    asked = recipe.input_format == "doc-sentences" and data_args.pack_documents
    run = request(device, precision, model_args.attn_implementation, asked)
    return plan_attention(run, read_encoder_facts(model_args, recipe))


def test_the_encoder_facts_come_from_the_recipe_and_the_overrides():
    facts = read_encoder_facts(*recipe_of("--recipe", "spanbert", "--model_size", "base"))
    assert facts == EncoderFacts(model_type=None, head_size=64, attention_dropout=0.1, flattens_rows=True)
    overridden = ("--config_overrides", "hidden_size=1024,num_attention_heads=4,attention_probs_dropout_prob=0")
    facts = read_encoder_facts(*recipe_of("--recipe", "spanbert", *overridden))
    assert (facts.head_size, facts.attention_dropout) == (256, 0.0)
    assert read_encoder_facts(*recipe_of("--recipe", "albert")).attention_dropout == 0  # ALBERT keeps none
    electra = read_encoder_facts(*recipe_of("--recipe", "electra", "--model_size", "small"))
    assert (electra.head_size, electra.flattens_rows) == (64, False)


def recipe_of(*flags):
    types = (PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments)
    (model_args, data_args, _), _ = parse_arguments(types, ["--output_dir", "unused", *flags])
    return model_args, resolve_recipe(model_args, data_args)


@pytest.mark.parametrize("device", [CUDA, CPU], ids=["cuda", "cpu"])
def test_the_spanbert_recipe_packs_its_rows_under_any_attention_that_runs_them(device):
    assert plan("--recipe", "spanbert", device=device).packs_rows
    for choice in ("sdpa", "eager", "varlen_fa2"):
        assert plan("--recipe", "spanbert", "--attn_implementation", choice, device=device).packs_rows
    assert not plan("--recipe", "spanbert", "--pack_documents", "false", device=device).packs_rows


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
    assert plan("--recipe", "spanbert", attn_implementation="flash_attention_2").packs_rows
    with pytest.raises(UserInputError, match="flash_attention_2 does not take in this encoder.*--pack_documents false"):
        plan("--recipe", "spanbert", "--cross_layer_sharing", "all", attn_implementation="flash_attention_2")


def test_flex_attention_on_cpu_refuses_packed_rows():
    with pytest.raises(UserInputError, match="On CPU use sdpa or eager.*--pack_documents false"):
        plan("--recipe", "spanbert", "--attn_implementation", "flex_attention",
             "--config_overrides", "attention_probs_dropout_prob=0", device=CPU)  # fmt: skip


def test_the_refusal_comes_before_any_data_is_read(tmp_path, tiny_tokenizer_dir, monkeypatch):
    """The train file does not exist, and the data loader must not be reached: the attention is refused first."""
    message = refusal_before_data_is_read(monkeypatch, tmp_path, tiny_tokenizer_dir,
                                          ["--recipe", "electra", "--attn_implementation", "flex_attention"])
    assert "flex_attention cannot apply attention dropout" in message


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


def test_the_batches_reach_the_model_whole_unless_dataparallel_or_dispatched():
    """nn.DataParallel and accelerate's dispatched batches cut every tensor along its first dimension: there the
    collator makes no offsets and the model derives them from the rows it gets."""
    from types import SimpleNamespace

    def args(n_gpu, dispatch):
        return SimpleNamespace(n_gpu=n_gpu, accelerator_config=SimpleNamespace(dispatch_batches=dispatch))

    whole = attention._batches_reach_the_model_whole
    assert whole(args(1, None)) and whole(args(0, False))
    assert not whole(args(2, None)) and not whole(args(1, True))


# The run reads the plan: made once, then the config, the collator and the run-settings line follow it


def test_a_run_plans_its_attention_once_and_its_config_collator_and_settings_follow(
    tmp_path, tiny_tokenizer_dir, flash_reference_kernels, monkeypatch, capsys
):
    """varlen_fa2 asked for on CPU with reference kernels of torch's flash ops (so that the kernel path runs):
    the model gets it, the collator emits the documents' offsets, and the run-settings line gives the plan's path."""
    from spanroberta.pretraining import run

    plans, collators = [], []
    real_plan, real_collator = attention.plan_attention, run.DataCollatorForSpanMasking
    monkeypatch.setattr(attention, "plan_attention", lambda *args: plans.append(real_plan(*args)) or plans[-1])
    monkeypatch.setattr(run, "DataCollatorForSpanMasking",
                        lambda *args, **kwargs: collators.append(real_collator(*args, **kwargs)) or collators[-1])  # fmt: skip
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join(TINY_TEXT[start : start + 4]) for start in range(0, 40, 4)) + "\n")
    run_pretraining.main([
        "--train_file", str(corpus), "--output_dir", str(tmp_path / "out"), "--tokenizer_name", str(tiny_tokenizer_dir),
        "--recipe", "spanbert", "--model_size", "tiny", "--max_seq_length", "64", "--per_device_train_batch_size", "4",
        "--max_steps", "1", "--attn_implementation", "varlen_fa2", "--save_strategy", "no", "--report_to", "none",
        "--validation_split_percentage", "0", "--use_cpu", "true", "--disable_tqdm", "true",
    ])  # fmt: skip
    (plan_made,) = plans
    assert (plan_made.implementation, plan_made.packs_rows, plan_made.takes_offsets) == ("varlen_fa2", True, True)
    assert collators and all(collator.return_sequence_offsets for collator in collators)
    assert flash_reference_kernels.calls["forward"] > 0  # the packed rows took the flash kernel, with the offsets
    settings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Run settings:")]
    assert settings[0].endswith(f"attn_implementation varlen_fa2: {FLASH_KERNEL} (you)"), settings[0]


# A forward's own fallback


def test_a_forward_without_offsets_under_varlen_fa2_says_so_once(flash_reference_kernels, caplog):
    """Packed rows under varlen_fa2 without the collator's offsets: the forward derives them from the positions (a
    wait for the device on a GPU) and logs that once per process, not at every step."""
    from spanroberta import SpanRobertaModel

    logging.Logger.warning_once.cache_clear()  # an earlier test may have said it already in this process
    encoder = SpanRobertaModel(tiny_span_config(attn_implementation="varlen_fa2", num_attention_heads=2))
    batch, _ = packed_batch([[7, 5], [12]], 16, 120)
    with caplog.at_level(logging.WARNING, logger=packed_attention.logger.name):
        for _ in range(3):
            encoder(batch["input_ids"], attention_mask=batch["attention_mask"], position_ids=batch["position_ids"])
    assert [record.getMessage() for record in caplog.records] == [packed_attention.NO_SEQUENCE_OFFSETS]
    assert flash_reference_kernels.calls["forward"] > 0


def test_attention_computes_in_autocasts_dtype_where_it_is_on():
    from spanroberta.models.packed_attention import attention_compute_dtype

    assert attention_compute_dtype("cpu", torch.float32) == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert attention_compute_dtype("cpu", torch.float32) == torch.bfloat16
