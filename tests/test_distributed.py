"""Distributed training on 2 CPU processes (gloo) through `accelerate launch` and the shipped configs, on any
machine (CUDA hidden): DDP (configs/accelerate/cpu.yaml) matches one process with the same global batch;
DeepSpeed ZeRO-2 and ZeRO-3 (the project's deepspeed_zero*.yaml) train two data-parallel processes with DDP's
losses, save whole models and resume exactly; a launch that would start two independent runs is refused; the
configs load, and FSDP's is checked for what can be checked without GPUs."""

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys

import pytest
import run_pretraining
import torch
from accelerate.commands.config.config_args import ClusterConfig
from conftest import PROJECT_ROOT, TINY_TEXT
from safetensors.torch import load_file

from benchmarks.reliability.tiny_runs import save_initial_checkpoint
from spanroberta.data.collator import DataCollatorForSpanMasking
from spanroberta.pretraining.arguments import PretrainingArguments

CONFIGS = PROJECT_ROOT / "configs"
ACCELERATE_CONFIGS = sorted((CONFIGS / "accelerate").glob("*.yaml"))
PER_DEVICE, ACCUMULATION, PROCESSES, BLOCKS = 2, 2, 2, 16
GLOBAL_BATCH = PROCESSES * PER_DEVICE * ACCUMULATION
HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None
NEEDS_DEEPSPEED = pytest.mark.skipif(not HAS_DEEPSPEED, reason="deepspeed is not installed (`make test` installs it)")

# Run under `accelerate launch`: records the example indices of every batch the collator sees, then trains.
RECORDING_SCRIPT = """
import json, os, sys
sys.path.insert(0, {root!r})
import run_pretraining
from spanroberta.data.collator import DataCollatorForSpanMasking

batches = []
collate = DataCollatorForSpanMasking.__call__
def recording_collate(self, examples):
    batches.append([int(example["example_index"]) for example in examples])
    return collate(self, examples)
DataCollatorForSpanMasking.__call__ = recording_collate
run_pretraining.main(sys.argv[1:])
with open(os.path.join(os.environ["BATCHES_DIR"], "batches-" + os.environ["RANK"] + ".json"), "w") as file:
    json.dump(batches, file)
"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n\n".join("\n".join(TINY_TEXT[i : i + 3]) for i in range(0, 120, 3)) + "\n")
    return path


COMMON_ARGS = [
    "--max_seq_length", "32", "--input_format", "full-sentences", "--weight_decay", "0",
    "--lr_scheduler_type", "constant", "--warmup_steps", "0", "--max_grad_norm", "0",
    "--gradient_accumulation_steps", str(ACCUMULATION), "--max_steps", "2", "--save_steps", "1", "--logging_steps", "1",
    "--report_to", "none", "--disable_tqdm", "true", "--seed", "11",
]  # fmt: skip


@pytest.fixture(scope="module")
def run_args(corpus, tiny_tokenizer_dir):
    """Two steps of plain SGD without dropout, so that one process and two can agree to rounding."""
    return [
        "--train_file", str(corpus), "--tokenizer_name", str(tiny_tokenizer_dir), "--model_size", "tiny",
        "--config_overrides", "num_hidden_layers=1,hidden_size=32,num_attention_heads=2,intermediate_size=64,"
        "hidden_dropout_prob=0,attention_probs_dropout_prob=0",
        "--validation_split_percentage", "0", "--optim", "sgd", "--learning_rate", "0.5", *COMMON_ARGS,
    ]  # fmt: skip


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch(config, args, tmp_path, *, check=True, **env):
    """Runs run_pretraining.py in 2 CPU processes through `accelerate launch --config_file configs/accelerate/
    <config>`; returns the finished process and, per process, the example indices of each batch its collator saw."""
    script = tmp_path / "record_batches.py"
    script.write_text(RECORDING_SCRIPT.format(root=str(PROJECT_ROOT)))
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(CONFIGS / "accelerate" / config),
        "--num_processes", str(PROCESSES), "--main_process_port", str(free_port()), str(script), *args,
        "--per_device_train_batch_size", str(PER_DEVICE),
    ]  # fmt: skip
    # CPU processes on any machine: with CUDA visible, both processes would otherwise take the one GPU.
    env = {**os.environ, "BATCHES_DIR": str(tmp_path), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "",
           "DS_ACCELERATOR": "cpu", **env}  # fmt: skip
    result = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)
    if not check:
        return result, None
    assert result.returncode == 0, result.stderr[-3000:]
    return result, [json.loads((tmp_path / f"batches-{rank}.json").read_text()) for rank in range(PROCESSES)]


@pytest.mark.slow
def test_two_processes_split_the_global_batch_and_match_one_process(run_args, tmp_path, monkeypatch):
    run_args = [*run_args, "--max_train_samples", str(BLOCKS)]
    two = tmp_path / "two_processes"
    _, per_rank = launch("cpu.yaml", [*run_args, "--output_dir", str(two), "--use_cpu", "true"], tmp_path)
    assert (two / "model.safetensors").is_file()
    steps = BLOCKS // GLOBAL_BATCH
    for batches in per_rank:
        assert [len(batch) for batch in batches] == [PER_DEVICE] * ACCUMULATION * steps
    # one epoch: the processes' shards do not overlap and cover every block once
    seen = [index for batches in per_rank for batch in batches for index in batch]
    assert sorted(seen) == list(range(BLOCKS))

    # the same global batch in one process: per-device batch 4, accumulation 2
    one_process_batches = []
    collate = DataCollatorForSpanMasking.__call__

    def recording_collate(self, examples):
        one_process_batches.append([int(example["example_index"]) for example in examples])
        return collate(self, examples)

    monkeypatch.setattr(DataCollatorForSpanMasking, "__call__", recording_collate)
    one = tmp_path / "one_process"
    run_pretraining.main(
        [*run_args, "--output_dir", str(one), "--use_cpu", "true",
         "--per_device_train_batch_size", str(PER_DEVICE * PROCESSES)]
    )  # fmt: skip
    # the first step's global batch: processes x per-device batch x accumulation distinct blocks, the same ones
    first_step = sorted(i for batches in per_rank for batch in batches[:ACCUMULATION] for i in batch)
    assert len(set(first_step)) == GLOBAL_BATCH
    assert first_step == sorted(i for batch in one_process_batches[:ACCUMULATION] for i in batch)

    weights = {
        (run, step): load_file(run / f"checkpoint-{step}" / "model.safetensors")
        for run in (one, two)
        for step in (1, 2)
    }
    for step in (1, 2):
        for name, expected in weights[one, step].items():
            actual = weights[two, step][name]
            torch.testing.assert_close(actual, expected, rtol=0, atol=1e-5, msg=f"step {step}: {name}")
    # the weights do move from step to step, so their agreement is not trivial
    assert any(not torch.equal(weights[one, 1][name], weights[one, 2][name]) for name in weights[one, 1])


@pytest.mark.slow
def test_two_processes_stream_disjoint_shares_of_the_corpus(run_args, tmp_path):
    output_dir = tmp_path / "streaming"
    args = [*run_args, "--output_dir", str(output_dir), "--streaming", "true", "--documents_per_group", "2",
            "--save_strategy", "no", "--use_cpu", "true"]  # fmt: skip
    _, per_rank = launch("cpu.yaml", args, tmp_path)
    assert (output_dir / "model.safetensors").is_file()
    for batches in per_rank:
        assert [len(batch) for batch in batches] == [PER_DEVICE] * ACCUMULATION * 2
    # within the first pass over the corpus, no block reaches both processes, nor one process twice
    seen = [index for batches in per_rank for batch in batches for index in batch]
    assert len(set(seen)) == len(seen) == 2 * GLOBAL_BATCH


@pytest.mark.slow
def test_a_gpu_launch_without_gpus_is_refused_before_anything_is_written(run_args, tmp_path):
    """multi_gpu.yaml where no GPU is visible: Accelerate would start two independent single-process runs."""
    output_dir = tmp_path / "refused"
    result, _ = launch("multi_gpu.yaml", [*run_args, "--output_dir", str(output_dir)], tmp_path, check=False)
    assert result.returncode != 0
    assert "run_pretraining.py: error: The launcher started 2 processes" in result.stderr
    assert "configs/accelerate/cpu.yaml" in result.stderr
    assert not output_dir.exists()


# --------------------------------------------------------------------------------------------------------
# The engines against DDP: the same initial weights (a saved checkpoint: ZeRO-3 initialises a new model shard by
# shard, so a seed gives it other weights), AdamW as in configs/deepspeed/*.json, an evaluation at the end.


@pytest.fixture(scope="module")
def initial_checkpoint(tmp_path_factory, tiny_tokenizer):
    path = tmp_path_factory.mktemp("initial_checkpoint")
    save_initial_checkpoint(tiny_tokenizer, path)
    return path


@pytest.fixture(scope="module")
def engine_args(corpus, initial_checkpoint):
    return [
        "--train_file", str(corpus), "--model_name_or_path", str(initial_checkpoint),
        "--validation_split_percentage", "10", "--max_train_samples", str(BLOCKS),
        "--optim", "adamw_torch", "--learning_rate", "1e-3", *COMMON_ARGS,
        # ZeRO-3 keeps a checkpoint's vocabulary unpadded (pretraining/specification.py): every engine keeps it so.
        "--pad_vocab_to_multiple_of", "1",
    ]  # fmt: skip


def engine_run(name, engine_args, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp(name)
    output_dir = tmp_path / "out"
    config, extra = {"ddp": ("cpu.yaml", ["--use_cpu", "true"])}.get(name, (f"deepspeed_{name}.yaml", []))
    _, per_rank = launch(config, [*engine_args, *extra, "--output_dir", str(output_dir)], tmp_path)
    return output_dir, per_rank


@pytest.fixture(scope="module")
def ddp_run(engine_args, tmp_path_factory):
    return engine_run("ddp", engine_args, tmp_path_factory)


@pytest.fixture(scope="module")
def zero_runs(engine_args, tmp_path_factory):
    """ZeRO-2's and ZeRO-3's runs, each made once, when a test first asks for it."""
    runs = {}

    def run(stage):
        if stage not in runs:
            runs[stage] = engine_run(stage, engine_args, tmp_path_factory)
        return runs[stage]

    return run


def losses(output_dir):
    history = json.loads((output_dir / "trainer_state.json").read_text())["log_history"]
    return [(entry["step"], entry["epoch"], entry["loss"]) for entry in history if "loss" in entry]


def loaded_weights(output_dir):
    """The model in `output_dir` as `from_pretrained` loads it; fails on a missing, unexpected, renamed or empty
    weight."""
    from transformers import AutoModelForPreTraining

    model, info = AutoModelForPreTraining.from_pretrained(output_dir, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    weights = model.state_dict()
    # saved under the model's own names (not renamed on the way, e.g. LayerNorm.weight as LayerNorm.gamma)
    assert set(load_file(output_dir / "model.safetensors")) <= set(weights)
    assert all(tensor.numel() for tensor in weights.values())
    return weights


@NEEDS_DEEPSPEED
@pytest.mark.parametrize("stage", ["zero2", "zero3"])
@pytest.mark.slow
def test_deepspeed_trains_two_data_parallel_processes_like_ddp(stage, ddp_run, zero_runs):
    output_dir, per_rank = zero_runs(stage)
    assert_like_ddp(output_dir, per_rank, ddp_run[0])


def assert_like_ddp(output_dir, per_rank, ddp_dir):
    """Two data-parallel processes (disjoint shares of each step, one epoch in BLOCKS / GLOBAL_BATCH steps), DDP's
    losses step by step (relative 1e-5 in fp32), an ordinary whole checkpoint with DDP's weights, and the metrics
    files written once, by the main process."""
    training_batches = [batches[: ACCUMULATION * BLOCKS // GLOBAL_BATCH] for batches in per_rank]
    seen = [index for batches in training_batches for batch in batches for index in batch]
    assert sorted(seen) == list(range(BLOCKS))
    assert [epoch for _, epoch, _ in losses(output_dir)] == [0.5, 1.0]
    for (step, _, loss), (_, _, expected) in zip(losses(output_dir), losses(ddp_dir), strict=True):
        assert loss == pytest.approx(expected, rel=1e-5), f"step {step}"
    expected = loaded_weights(ddp_dir)
    for name, tensor in loaded_weights(output_dir).items():
        torch.testing.assert_close(tensor, expected[name], rtol=0, atol=1e-5, msg=name)
    results = json.loads((output_dir / "all_results.json").read_text())
    assert "train_loss" in results and "eval_loss" in results


def assert_same_weights(resumed_dir, uninterrupted_dir):
    assert losses(resumed_dir)[-1] == losses(uninterrupted_dir)[-1]
    expected = load_file(uninterrupted_dir / "model.safetensors")
    resumed = load_file(resumed_dir / "model.safetensors")
    assert resumed.keys() == expected.keys()
    for name, tensor in resumed.items():
        torch.testing.assert_close(tensor, expected[name], rtol=0, atol=0, msg=name)


@NEEDS_DEEPSPEED
@pytest.mark.parametrize("stage", ["zero2", "zero3"])
@pytest.mark.slow
def test_deepspeed_resumed_from_a_mid_run_checkpoint_ends_with_the_uninterrupted_weights(
    stage, zero_runs, engine_args, tmp_path
):
    uninterrupted, _ = zero_runs(stage)
    # What a run killed between the saves of steps 1 and 2 leaves: checkpoint-1 (with DeepSpeed's global_step1/).
    killed = tmp_path / "out"
    killed.mkdir()
    shutil.copytree(uninterrupted / "checkpoint-1", killed / "checkpoint-1")
    assert any(path.name.startswith("global_step") for path in (killed / "checkpoint-1").iterdir())
    launch(f"deepspeed_{stage}.yaml", [*engine_args, "--output_dir", str(killed), "--resume_from_checkpoint", "true"],
           tmp_path)  # fmt: skip
    assert_same_weights(killed, uninterrupted)


# --------------------------------------------------------------------------------------------------------
# The padded vocabulary under each engine, with the default padding (--pad_vocab_to_multiple_of 64): ZeRO-3
# partitions the decoders' biases as the model is built, so the bias at the padded ids is written where the
# parameter lives (models/vocabulary.py); the saved model never predicts a padded id.


@pytest.fixture(scope="module")
def padded_checkpoint(tmp_path_factory, tiny_tokenizer):
    """A checkpoint whose vocabulary is padded (400 ids to 448) by another tool: its bias at the padded ids is 0,
    as freshly initialised."""
    from spanroberta import SpanRobertaConfig, SpanRobertaForPreTraining

    path = tmp_path_factory.mktemp("padded_checkpoint")
    config = SpanRobertaConfig(
        vocab_size=448, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=40, pad_token_id=tiny_tokenizer.pad_token_id, bos_token_id=0, eos_token_id=2,
    )  # fmt: skip
    torch.manual_seed(0)
    SpanRobertaForPreTraining(config).save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


def assert_no_padded_id_predicted(output_dir, tokenizer):
    """The saved model, loaded through the Auto classes: every decoder's bias holds PADDED_ID_LOGIT at the padded
    ids, and at every position of a sentence a real id outscores each padded one."""
    from transformers import AutoModelForMaskedLM, AutoModelForPreTraining

    from spanroberta.models.vocabulary import PADDED_ID_LOGIT, vocabulary_decoders

    size = len(tokenizer)
    inputs = tokenizer(TINY_TEXT[0], return_tensors="pt")
    with torch.no_grad():
        logits = AutoModelForMaskedLM.from_pretrained(output_dir)(**inputs).logits[0]  # [T, V]
    padded_wins = logits[:, size:].max(-1).values >= logits[:, :size].max(-1).values  # [T]
    assert not padded_wins.any(), f"a padded id wins at {int(padded_wins.sum())} of {len(padded_wins)} positions"
    pretraining = AutoModelForPreTraining.from_pretrained(output_dir)
    assert pretraining.config.vocab_size == 448
    for decoder in vocabulary_decoders(pretraining):
        assert torch.equal(decoder.bias[size:], torch.full((448 - size,), PADDED_ID_LOGIT))


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["ddp", "zero3"])
def test_a_fresh_padded_model_never_predicts_a_padded_id_under_ddp_and_zero3(engine, run_args, tiny_tokenizer,
                                                                            tmp_path):  # fmt: skip
    if engine == "zero3" and not HAS_DEEPSPEED:
        pytest.skip("deepspeed is not installed (`make test` installs it)")
    output_dir = tmp_path / "out"
    config, extra = ("cpu.yaml", ["--use_cpu", "true"]) if engine == "ddp" else ("deepspeed_zero3.yaml", [])
    args = [*run_args, "--max_train_samples", str(BLOCKS), "--optim", "adamw_torch", "--learning_rate", "1e-3",
            "--save_strategy", "no", *extra, "--output_dir", str(output_dir)]  # fmt: skip
    launch(config, args, tmp_path)
    assert_no_padded_id_predicted(output_dir, tiny_tokenizer)


@NEEDS_DEEPSPEED
@pytest.mark.slow
def test_a_padded_checkpoint_continued_under_zero3_never_predicts_a_padded_id(padded_checkpoint, corpus,
                                                                             tiny_tokenizer, tmp_path):  # fmt: skip
    output_dir = tmp_path / "out"
    args = ["--train_file", str(corpus), "--model_name_or_path", str(padded_checkpoint),
            "--validation_split_percentage", "0", "--max_train_samples", str(BLOCKS), "--optim", "adamw_torch",
            "--learning_rate", "1e-3", *COMMON_ARGS, "--save_strategy", "no",
            "--output_dir", str(output_dir)]  # fmt: skip
    launch("deepspeed_zero3.yaml", args, tmp_path)
    assert_no_padded_id_predicted(output_dir, tiny_tokenizer)


@NEEDS_DEEPSPEED
@pytest.mark.slow
def test_zero3_keeps_a_checkpoints_unpadded_vocabulary_and_says_so(initial_checkpoint, corpus, tmp_path):
    """The default command continuing a checkpoint of 400 ids under ZeRO-3: it trains, unpadded, and the Run
    settings line says why."""
    output_dir = tmp_path / "out"
    args = ["--train_file", str(corpus), "--model_name_or_path", str(initial_checkpoint),
            "--validation_split_percentage", "0", "--max_train_samples", str(BLOCKS), "--optim", "adamw_torch",
            "--learning_rate", "1e-3", *COMMON_ARGS, "--save_strategy", "no",
            "--output_dir", str(output_dir)]  # fmt: skip
    result, _ = launch("deepspeed_zero3.yaml", args, tmp_path)
    assert "; pad_vocab_to_multiple_of 1 (ZeRO-3 keeps the checkpoint's vocabulary); " in result.stdout
    assert json.loads((output_dir / "config.json").read_text())["vocab_size"] == 400


@pytest.mark.skipif(
    torch.cuda.device_count() < 2,
    reason="FSDP needs 2 GPUs: Accelerate 1.15 sets FSDP up only on GPU (and other accelerator) process groups, not on "
    "CPU processes, where --use_cpu would run plain DDP instead (refused: see the test below). On CPU, fsdp.yaml is "
    "checked by test_the_fsdp_config_shards_the_encoder_layers_and_saves_whole.",
)
@pytest.mark.slow
def test_fsdp_trains_two_data_parallel_processes_like_ddp(engine_args, ddp_run, tmp_path):
    output_dir = tmp_path / "out"
    gpus = {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES") or "0,1"}
    _, per_rank = launch("fsdp.yaml", [*engine_args, "--output_dir", str(output_dir)], tmp_path, **gpus)
    assert_like_ddp(output_dir, per_rank, ddp_run[0])
    killed = tmp_path / "killed"
    killed.mkdir()
    shutil.copytree(output_dir / "checkpoint-1", killed / "checkpoint-1")
    launch("fsdp.yaml", [*engine_args, "--output_dir", str(killed), "--resume_from_checkpoint", "true"], tmp_path,
           **gpus)  # fmt: skip
    assert_same_weights(killed, output_dir)


def test_an_engine_that_use_cpu_would_turn_off_is_refused(tmp_path, monkeypatch):
    from spanroberta.errors import UserInputError
    from spanroberta.runs.distributed import check_process_world

    args = PretrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[])
    for variable, engine in (("ACCELERATE_USE_FSDP", "FSDP"), ("ACCELERATE_USE_DEEPSPEED", "DeepSpeed")):
        with monkeypatch.context() as patch:
            patch.setenv(variable, "true")  # what `accelerate launch` sets with fsdp.yaml, deepspeed_zero*.yaml
            with pytest.raises(UserInputError, match=f"--use_cpu true turns {engine} off"):
                check_process_world(args)
    check_process_world(args)


# --------------------------------------------------------------------------------------------------------
# The configs


@pytest.mark.parametrize("path", ACCELERATE_CONFIGS, ids=[path.name for path in ACCELERATE_CONFIGS])
def test_the_accelerate_configs_load_and_say_how_they_are_used(path):
    config = ClusterConfig.from_yaml_file(path)
    header = [line for line in path.read_text().splitlines() if line.startswith("#")]
    # what it is for, then the command that uses it
    assert len(header) >= 2
    assert f"accelerate launch --config_file configs/accelerate/{path.name}" in "\n".join(header)
    expected = 2 if config.use_cpu else 8 * config.num_machines
    assert config.num_processes == expected
    deepspeed_file = config.deepspeed_config.get("deepspeed_config_file")
    if deepspeed_file:
        assert (PROJECT_ROOT / deepspeed_file).is_file()


def test_the_fsdp_config_shards_the_encoder_layers_and_saves_whole(monkeypatch, tmp_path):
    """fsdp.yaml through `accelerate launch`'s own reading, down to the environment it gives each process and the
    FSDP plugin the Trainer builds from it: FSDP2, full shard, one unit per RobertaLayer of a SpanRoBERTa model,
    the state dict saved whole."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.launch import prepare_multi_gpu_env
    from conftest import tiny_span_config

    from spanroberta import SpanRobertaForPreTraining

    parser = launch_command_parser()
    launch_args, _, _ = _validate_launch_command(
        parser.parse_args(["--config_file", str(CONFIGS / "accelerate" / "fsdp.yaml"), "run_pretraining.py"])
    )
    for name, value in prepare_multi_gpu_env(launch_args).items():
        if name.startswith(("FSDP_", "ACCELERATE_USE_FSDP")):
            monkeypatch.setenv(name, value)
    plugin = FullyShardedDataParallelPlugin()
    assert plugin.fsdp_version == 2 and plugin.reshard_after_forward is True
    assert "FULL_STATE_DICT" in str(plugin.state_dict_type)
    model = SpanRobertaForPreTraining(tiny_span_config())
    plugin.set_auto_wrap_policy(model)  # raises when no module of the model has the class named
    layer_classes = plugin.auto_wrap_policy.keywords["transformer_layer_cls"]
    assert [cls.__name__ for cls in layer_classes] == ["RobertaLayer"]
    assert sum(isinstance(module, tuple(layer_classes)) for module in model.modules()) == model.config.num_hidden_layers


@pytest.fixture
def released_deepspeed_config():
    """`--deepspeed` registers its config process-wide (a ZeRO-3 one makes every later from_pretrained partition the
    weights) for as long as the arguments live; a failing test's traceback keeps them alive, so unregister it."""
    yield
    from transformers.integrations.deepspeed import unset_hf_deepspeed_config

    unset_hf_deepspeed_config()


@NEEDS_DEEPSPEED
@pytest.mark.parametrize("stage", [2, 3])
def test_the_deepspeed_configs_load_through_training_arguments(stage, tmp_path, released_deepspeed_config):
    args = PretrainingArguments(
        output_dir=str(tmp_path), deepspeed=str(CONFIGS / "deepspeed" / f"zero{stage}.json"),
        per_device_train_batch_size=4, gradient_accumulation_steps=8, report_to=[],
    )
    config = args.hf_deepspeed_config.config
    assert config["zero_optimization"]["stage"] == stage
    # the "auto" values come from the training flags
    assert (config["train_micro_batch_size_per_gpu"], config["gradient_accumulation_steps"]) == (4, 8)
    assert config["optimizer"]["params"]["lr"] == args.learning_rate
    assert config["optimizer"]["params"]["betas"] == [args.adam_beta1, args.adam_beta2]
