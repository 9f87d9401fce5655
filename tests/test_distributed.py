"""Distributed training: 2 processes on CPU (gloo) through `accelerate launch` match one process with the same global
batch; the shipped accelerate and DeepSpeed configs load."""

import importlib.util
import json
import os
import socket
import subprocess
import sys

import pytest
import run_pretraining
import torch
from accelerate.commands.config.config_args import ClusterConfig
from conftest import PROJECT_ROOT, TINY_TEXT
from safetensors.torch import load_file

from spanroberta.data.collator import DataCollatorForSpanMasking
from spanroberta.training.arguments import PretrainingArguments

CONFIGS = PROJECT_ROOT / "configs"
PER_DEVICE, ACCUMULATION, PROCESSES, BLOCKS = 2, 2, 2, 16
GLOBAL_BATCH = PROCESSES * PER_DEVICE * ACCUMULATION

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
def run_args(tmp_path_factory, tiny_tokenizer_dir):
    """Two steps of plain SGD without dropout, so that one process and two can agree to rounding."""
    corpus = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join(TINY_TEXT[i : i + 3]) for i in range(0, 120, 3)) + "\n")
    return [
        "--train_file", str(corpus), "--tokenizer_name", str(tiny_tokenizer_dir), "--model_size", "tiny",
        "--config_overrides", "num_hidden_layers=1,hidden_size=32,num_attention_heads=2,intermediate_size=64,"
        "hidden_dropout_prob=0,attention_probs_dropout_prob=0",
        "--max_seq_length", "32", "--input_format", "full-sentences",
        "--validation_split_percentage", "0", "--optim", "sgd", "--learning_rate", "0.5", "--weight_decay", "0",
        "--lr_scheduler_type", "constant", "--warmup_steps", "0", "--max_grad_norm", "0",
        "--gradient_accumulation_steps", str(ACCUMULATION), "--max_steps", "2", "--save_steps", "1",
        "--use_cpu", "true", "--report_to", "none", "--disable_tqdm", "true", "--seed", "11",
    ]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch_two_processes(args, tmp_path):
    """Runs run_pretraining.py in 2 CPU processes (gloo) through `accelerate launch` with the shipped multi-GPU config;
    returns, per process, the example indices of each batch its collator saw."""
    script = tmp_path / "record_batches.py"
    script.write_text(RECORDING_SCRIPT.format(root=str(PROJECT_ROOT)))
    command = [
        sys.executable, "-m", "accelerate.commands.launch",
        "--config_file", str(CONFIGS / "accelerate" / "multi_gpu.yaml"),
        "--num_processes", str(PROCESSES), "--main_process_port", str(free_port()),
        str(script), *args, "--per_device_train_batch_size", str(PER_DEVICE),
    ]
    # CPU processes on any machine: with CUDA visible, both processes would otherwise take the one GPU.
    env = {**os.environ, "BATCHES_DIR": str(tmp_path), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads((tmp_path / f"batches-{rank}.json").read_text()) for rank in range(PROCESSES)]


def test_two_processes_split_the_global_batch_and_match_one_process(run_args, tmp_path, monkeypatch):
    run_args = [*run_args, "--max_train_samples", str(BLOCKS)]
    two = tmp_path / "two_processes"
    per_rank = launch_two_processes([*run_args, "--output_dir", str(two)], tmp_path)
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
        [*run_args, "--output_dir", str(one), "--per_device_train_batch_size", str(PER_DEVICE * PROCESSES)]
    )
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


def test_two_processes_stream_disjoint_shares_of_the_corpus(run_args, tmp_path):
    output_dir = tmp_path / "streaming"
    args = [*run_args, "--output_dir", str(output_dir), "--streaming", "true", "--documents_per_group", "2",
            "--save_strategy", "no"]
    per_rank = launch_two_processes(args, tmp_path)
    assert (output_dir / "model.safetensors").is_file()
    for batches in per_rank:
        assert [len(batch) for batch in batches] == [PER_DEVICE] * ACCUMULATION * 2
    # within the first pass over the corpus, no block reaches both processes, nor one process twice
    seen = [index for batches in per_rank for batch in batches for index in batch]
    assert len(set(seen)) == len(seen) == 2 * GLOBAL_BATCH


@pytest.mark.parametrize("name", sorted(path.name for path in (CONFIGS / "accelerate").glob("*.yaml")))
def test_the_accelerate_configs_load(name):
    config = ClusterConfig.from_yaml_file(CONFIGS / "accelerate" / name)
    assert config.num_processes == 8 * config.num_machines
    deepspeed_file = config.deepspeed_config.get("deepspeed_config_file")
    if deepspeed_file:
        assert (PROJECT_ROOT / deepspeed_file).is_file()


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed (it needs CUDA)")
@pytest.mark.parametrize("stage", [2, 3])
def test_the_deepspeed_configs_load_through_training_arguments(stage, tmp_path):
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
