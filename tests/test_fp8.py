"""--fp8 (pretraining/float8.py): refused before any data is read, in one paragraph with the reason, wherever it cannot
train the run (CPU, ROCm, compute capability below 8.9, no --bf16, DeepSpeed, FSDP, nn.DataParallel, no torchao), and
where --torch_compile was turned off, since float8 layers pay only compiled (left unset, --fp8 turns it on, and the
run-settings line says why); the layers it converts, exactly those of the encoder's layer stacks whose sizes float8
matmuls take; and its account in the run-settings line, which a speed record reads its attention from. The GPU's
capability and torchao's presence are injected, so every case runs on any machine; the swap itself needs torchao
installed (`pip install torchao==0.18.0`) and runs no float8 matmul. Training in float8, against bf16, is
tests/test_cuda.py's."""

import importlib.machinery
import importlib.util
import re

import pytest
import run_pretraining
import torch
from conftest import PROJECT_ROOT, TINY_TEXT, refusal_before_data_is_read, tiny_span_config
from transformers import HfArgumentParser

from spanroberta import SpanRobertaForPreTraining
from spanroberta.errors import MissingPackageError, UserInputError
from spanroberta.objectives import get_objective
from spanroberta.pretraining.specification import resolve_recipe, specify_run
from spanroberta.pretraining import float8
from spanroberta.pretraining.arguments import (
    PretrainingArguments,
    PretrainingDataArguments,
    PretrainingModelArguments,
)
from spanroberta.pretraining.float8 import (
    Float8Layers,
    Float8Request,
    check_float8,
    check_run_float8,
    convert_to_float8,
    float8_layers,
)
from spanroberta.runs.cli import parse_arguments
from spanroberta.runs.run_length import run_settings

CUDA, CPU = torch.device("cuda"), torch.device("cpu")  # only their type is read: no GPU is needed
ROBERTA_LAYER = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
                 "intermediate.dense", "output.dense")  # fmt: skip


@pytest.fixture
def gpu(monkeypatch):
    """A CUDA build of torch for NVIDIA GPUs on a GPU of compute capability `capability` (an H200's by default),
    with torchao installed or not, as --fp8's checks see them, on any host."""

    def machine(capability=(9, 0), torchao=True, hip=None):
        find_spec = importlib.util.find_spec

        def found(name, *args):
            if name == "torchao":
                return importlib.machinery.ModuleSpec(name, None) if torchao else None
            return find_spec(name, *args)

        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
        monkeypatch.setattr(torch.version, "hip", hip)
        monkeypatch.setattr(importlib.util, "find_spec", found)

    machine()
    return machine


def request(device=CUDA, precision="bf16", engine=None, gpus=1):
    return Float8Request(device, precision, engine, gpus_per_process=gpus)


def refusal(request_made) -> str:
    with pytest.raises(UserInputError) as error:
        check_float8(request_made)
    message = str(error.value)
    assert message.startswith("--fp8") and "\n" not in message
    return message


# Where it is accepted, and where refused with its reason


@pytest.mark.parametrize("capability", [(8, 9), (9, 0), (10, 0), (12, 0)])
def test_fp8_is_accepted_on_one_gpu_of_compute_capability_8_9_or_newer_under_bf16(gpu, capability):
    gpu(capability)
    check_float8(request())  # under DDP too: one GPU a process


def test_fp8_is_refused_off_cuda(gpu):
    assert "this run trains on cpu. Leave out --fp8." in refusal(request(CPU))


@pytest.mark.parametrize("capability", [(7, 5), (8, 0), (8, 6)])
def test_fp8_is_refused_below_compute_capability_8_9(gpu, capability):
    gpu(capability)
    assert f"this GPU has {capability[0]}.{capability[1]}" in refusal(request())


def test_fp8_is_refused_on_a_rocm_build(gpu):
    gpu(hip="6.4")
    assert "built for ROCm (HIP 6.4)" in refusal(request())


@pytest.mark.parametrize(("precision", "fix"), [("fp32", "Add --bf16 true."), ("fp16", "instead of --fp16 true")])
def test_fp8_is_refused_outside_a_bf16_run(gpu, precision, fix):
    assert fix in refusal(request(precision=precision))


@pytest.mark.parametrize("engine", ["DeepSpeed", "FSDP"])
def test_fp8_is_refused_under_deepspeed_and_fsdp(gpu, engine):
    message = refusal(request(engine=engine))
    assert message.startswith(f"--fp8 under {engine}: ") and "DDP" in message


def test_fp8_is_refused_on_several_gpus_in_one_process(gpu):
    assert "torchrun --nproc_per_node 2" in refusal(request(gpus=2))


def test_fp8_without_torchao_says_how_to_install_it(gpu):
    gpu(torchao=False)
    with pytest.raises(MissingPackageError, match=r"needs the torchao package.*pip install torchao==0\.18\.0"):
        check_float8(request())


# The flag, and the run's check of it


def parse(*flags):
    (training_args,) = HfArgumentParser(PretrainingArguments).parse_args_into_dataclasses(
        ["--output_dir", "unused", "--use_cpu", "true", *flags]
    )
    return training_args


def test_the_flag_is_off_by_default_and_checked_only_when_given():
    assert parse().fp8 is False and parse("--fp8", "true").fp8 is True
    check_run_float8(parse())  # on CPU, without --fp8: nothing to refuse
    with pytest.raises(UserInputError, match="this run trains on cpu"):
        check_run_float8(parse("--fp8", "true"))


def test_the_refusal_comes_before_any_data_is_read(tmp_path, tiny_tokenizer_dir, monkeypatch):
    message = refusal_before_data_is_read(monkeypatch, tmp_path, tiny_tokenizer_dir, ["--fp8", "true"])
    assert message.startswith("run_pretraining.py: error: --fp8 trains")


# Compile: float8 layers pay only compiled, so --fp8 turns --torch_compile on, or is refused where it was turned off


def specification(tmp_path, *flags):
    types = (PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments)
    parsed, given = parse_arguments(types, ["--output_dir", str(tmp_path / "out"), "--train_file", "corpus.txt",
                                            "--model_size", "tiny", "--use_cpu", "true", "--report_to", "none",
                                            *flags])  # fmt: skip
    return specify_run(parsed, given)


def test_fp8_turns_compile_on_where_it_was_not_given_and_says_why(tmp_path):
    spec = specification(tmp_path, "--fp8", "true")
    assert spec.training.torch_compile is True and spec.training.torch_compile_backend == "inductor"
    assert spec.source("torch_compile") == float8.FLOAT8_NEEDS_COMPILE == "--fp8 needs compile"
    line = run_settings(spec.training, None, spec.sources, "sdpa", "12 linear layers in float8 (...)")
    assert "; torch_compile True (--fp8 needs compile); attn_implementation sdpa (default); fp8 " in line
    # compile given, or no --fp8: nothing changes
    assert specification(tmp_path, "--fp8", "true", "--torch_compile", "true").source("torch_compile") == "you"
    spec = specification(tmp_path)
    assert spec.training.torch_compile is False and spec.source("torch_compile") == "default"
    assert "torch_compile" not in run_settings(spec.training, None, spec.sources, "sdpa")


def test_fp8_with_compile_turned_off_on_purpose_is_refused_with_the_reason(tmp_path, tiny_tokenizer_dir, monkeypatch):
    message = refusal_before_data_is_read(monkeypatch, tmp_path, tiny_tokenizer_dir,
                                          ["--fp8", "true", "--torch_compile", "false"])  # fmt: skip
    assert message.startswith("run_pretraining.py: error: --fp8 trains the encoder's linear layers with torchao's "
                              "float8 layers, which pay only under torch.compile")  # fmt: skip
    assert "This run gives --torch_compile false. Leave out --torch_compile false" in message
    # arguments built in code (no flag given) are taken as chosen
    with pytest.raises(UserInputError, match="This run has torch_compile off"):
        float8.compile_for_float8(parse("--fp8", "true"), None)


@pytest.mark.parametrize(
    ("line", "attention"),
    [
        ("Run settings: per_device_train_batch_size 8 (you); attn_implementation sdpa (default)", "sdpa"),
        ("Run settings: torch_compile True (you); attn_implementation varlen_fa2: packed rows on cuda under bf16 "
         "(attention plan)", "varlen_fa2"),
        ("Run settings: torch_compile True (--fp8 needs compile); attn_implementation sdpa (default); fp8 12 linear "
         "layers in float8 (roberta.encoder.layer.*: attention.self.query, output.dense) (you)", "sdpa"),
    ],
)
def test_a_speed_record_names_the_attention_of_the_run_settings_line_fp8_or_not(line, attention):
    from benchmarks.speed.trainer import printed_attention

    assert printed_attention(f"some log\n{line}\nmore log\n") == attention


# The layers it converts


def recipe_model(tokenizer, recipe, **model_flags):
    """The model `--recipe recipe --model_size tiny` builds from scratch, as the run builds it."""
    model_args = PretrainingModelArguments(model_size="tiny", **model_flags)
    resolved = resolve_recipe(model_args, PretrainingDataArguments(recipe=recipe))
    objective = get_objective(resolved.objective)
    return objective.build_model(model_args, objective.build_config(model_args, resolved, tokenizer), tokenizer)


def test_the_encoder_layers_linear_layers_are_chosen_and_nothing_else(tiny_tokenizer):
    model = recipe_model(tiny_tokenizer, "spanbert")
    layers = model.config.num_hidden_layers
    assert float8_layers(model) == Float8Layers(tuple(f"roberta.encoder.layer.{index}.{name}"
                                                      for index in range(layers) for name in ROBERTA_LAYER))  # fmt: skip


def test_electra_converts_both_encoders_layers_and_not_the_generators_embedding_projection(tiny_tokenizer):
    chosen = float8_layers(recipe_model(tiny_tokenizer, "electra")).converted
    assert {name.split(".encoder.layer.")[0] for name in chosen} == {"electra", "generator.electra"}
    assert not any("embeddings_project" in name or "predictions" in name for name in chosen)


def test_albert_converts_its_shared_layers_once_and_not_its_embedding_projection(tiny_tokenizer):
    model = recipe_model(tiny_tokenizer, "albert", cross_layer_sharing="attention")
    chosen = float8_layers(model).converted
    attention = [name for name in chosen if ".attention." in name]
    assert attention and all(".albert_layer_groups.0." in name for name in attention)  # shared: named once
    assert any(".albert_layer_groups.1.albert_layers.0.ffn" in name for name in chosen)  # each layer's own FFN
    assert not any("embedding_hidden_mapping_in" in name or "pooler" in name for name in chosen)


def test_layers_whose_sizes_float8_matmuls_refuse_are_left_out_and_named():
    """A feed-forward size of 72: the two feed-forward layers of each of the 2 layers stay in the run's precision."""
    layers = float8_layers(SpanRobertaForPreTraining(tiny_span_config(intermediate_size=72)))
    assert layers.kept == tuple(f"roberta.encoder.layer.{index}.{name}"
                                for index in range(2) for name in ("intermediate.dense", "output.dense"))  # fmt: skip
    assert layers.describe() == (
        "8 linear layers in float8 (roberta.encoder.layer.*: attention.self.query, attention.self.key, "
        "attention.self.value, attention.output.dense), 4 linear layers left out, a size not a multiple of 16 "
        "(roberta.encoder.layer.*: intermediate.dense, output.dense)"
    )


def test_a_model_with_no_layer_float8_can_take_is_refused():
    model = SpanRobertaForPreTraining(tiny_span_config(hidden_size=40, intermediate_size=72))
    with pytest.raises(UserInputError, match="--fp8 found no linear layer of this model"):
        convert_to_float8(model)


def test_the_swap_converts_exactly_the_chosen_layers_and_keeps_the_weights(tiny_tokenizer):
    """torchao's module swap only: no forward, so no float8 matmul runs on the CPU."""
    pytest.importorskip("torchao.float8")
    from torchao.float8.float8_linear import Float8Linear

    model = recipe_model(tiny_tokenizer, "albert", cross_layer_sharing="attention")
    layers, weights = float8_layers(model), model.state_dict()
    assert convert_to_float8(model) == layers
    converted = {name for name, module in model.named_modules(remove_duplicate=False)
                 if isinstance(module, Float8Linear)}  # fmt: skip
    linears = {name for name, module in model.named_modules(remove_duplicate=False)
               if isinstance(module, torch.nn.Linear)}  # fmt: skip
    # Every chosen layer, and the shared ones under each layer that holds them; no other linear layer.
    assert set(layers.converted) <= converted and all(".encoder.albert_layer_groups." in name for name in converted)
    assert {name for name in linears - converted if ".albert_layer_groups." in name} == set()
    shared = model.get_submodule("albert.encoder.albert_layer_groups")
    assert shared[1].albert_layers[0].attention.query.weight is shared[0].albert_layers[0].attention.query.weight
    after = model.state_dict()
    # The same keys, each the same storage: a checkpoint of the converted model is a plain one.
    assert list(after) == list(weights) and all(after[name].data_ptr() == weights[name].data_ptr() for name in weights)


# Its account in the run-settings line


def test_the_run_settings_line_names_the_layers_in_float8():
    line = run_settings(parse("--max_steps", "10"), None, {"fp8": "you"}, "sdpa",
                        Float8Layers(("roberta.encoder.layer.0.intermediate.dense",)).describe())  # fmt: skip
    assert line.endswith("; fp8 1 linear layer in float8 (roberta.encoder.layer.*: intermediate.dense) (you)")


@pytest.mark.slow
def test_a_run_reports_the_layers_it_converted(tmp_path, tiny_tokenizer_dir, monkeypatch, capsys):
    """On CPU, with --fp8's check accepted, the swap and compile left out (a CPU runs no float8 matmul): the
    conversion is given the built model, and the line names what it chose."""
    from spanroberta.pretraining import run, specification

    monkeypatch.setattr(run, "check_run_float8", lambda training_args: None)
    monkeypatch.setattr(specification, "compile_for_float8", lambda training_args, given: (training_args, {}))
    monkeypatch.setattr(run, "convert_to_float8", float8_layers)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(TINY_TEXT[:40]) + "\n")
    run_pretraining.main([
        "--train_file", str(corpus), "--output_dir", str(tmp_path / "out"), "--tokenizer_name", str(tiny_tokenizer_dir),
        "--model_size", "tiny", "--max_seq_length", "32", "--per_device_train_batch_size", "4", "--max_steps", "1",
        "--save_strategy", "no", "--report_to", "none", "--validation_split_percentage", "0", "--use_cpu", "true",
        "--disable_tqdm", "true", "--fp8", "true",
    ])  # fmt: skip
    settings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Run settings:")]
    assert settings[0].endswith(f"; fp8 12 linear layers in float8 (roberta.encoder.layer.*: "
                                f"{', '.join(ROBERTA_LAYER)}) (you)"), settings[0]  # fmt: skip


def test_the_install_hint_names_the_fp8_extras_version():
    pin = re.search(r'"(torchao==[\d.]+)"', (PROJECT_ROOT / "pyproject.toml").read_text()).group(1)
    assert f"pip install {pin}" in float8.INSTALL
