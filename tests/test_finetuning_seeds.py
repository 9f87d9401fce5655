"""run_glue.py and run_race.py seed before they build the model (as run_squad.py and transformers' example scripts
do): the same --seed gives the same new task head whatever random state the process was in, another seed another
head (compared after one training step, the same for the same seed: a learning rate of 0 is refused)."""

import json

import pytest
import torch
from safetensors.torch import load_file

import run_glue
import run_race

pytestmark = pytest.mark.slow  # each test fine-tunes through a script

RACE_QUESTION = {"example_id": "middle1", "article": "The fox jumps over the dog.", "question": "What jumps?",
                 "options": ["a fox", "a dog", "a cat", "a bird"], "answer": "A"}  # fmt: skip


def glue_data(tmp_path):
    path = tmp_path / "rte.jsonl"
    path.write_text("".join(json.dumps({"sentence1": "The fox jumps.", "sentence2": "A fox moves.", "label": label})
                            + "\n" for label in (0, 1)), encoding="utf-8")  # fmt: skip
    return run_glue.main, ["--task_name", "rte", "--train_file", str(path), "--max_seq_length", "32"]


def race_data(tmp_path):
    path = tmp_path / "race.jsonl"
    path.write_text(json.dumps(RACE_QUESTION) + "\n" + json.dumps({**RACE_QUESTION, "answer": "B"}) + "\n")
    return run_race.main, ["--train_file", str(path), "--max_seq_length", "32", "--max_qa_length", "8"]


def new_head(main, flags, checkpoint, out, seed, random_state):
    torch.manual_seed(random_state)  # whatever ran before in the process
    main(["--model_name_or_path", str(checkpoint), "--output_dir", str(out), "--do_train", "--max_steps", "1",
          "--learning_rate", "1e-3", "--per_device_train_batch_size", "2", "--seed", str(seed), "--report_to", "none",
          "--save_strategy", "no", "--dataloader_pin_memory", "false", *flags])  # fmt: skip
    weights = load_file(out / "model.safetensors")
    return {name: tensor for name, tensor in weights.items() if "classifier" in name}


@pytest.mark.parametrize("data", [glue_data, race_data], ids=["run_glue", "run_race"])
def test_the_new_head_starts_from_the_seed(data, spanroberta_checkpoint, tmp_path):
    main, flags = data(tmp_path)
    first = new_head(main, flags, spanroberta_checkpoint, tmp_path / "a", seed=3, random_state=1)
    again = new_head(main, flags, spanroberta_checkpoint, tmp_path / "b", seed=3, random_state=2)
    other = new_head(main, flags, spanroberta_checkpoint, tmp_path / "c", seed=4, random_state=1)
    assert first and first.keys() == again.keys() == other.keys()
    assert all(torch.equal(first[name], again[name]) for name in first)
    assert not all(torch.equal(first[name], other[name]) for name in first)
