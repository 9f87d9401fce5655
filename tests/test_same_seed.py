"""The same seed, the same result: each run_*.py script, run twice on tiny data with the same --seed on the CPU, saves
identical weights and reports identical metrics (the timings aside)."""

import json

import pytest
import torch
from conftest import TINY_TEXT
from safetensors.torch import load_file

import run_coref
import run_glue
import run_pretraining
import run_race
import run_relation
import run_squad
from benchmarks.reliability.bad_inputs import CONLL, RACE, RTE_HEADER, SQUAD, TACRED

pytestmark = pytest.mark.slow  # each test runs a script twice

QUIET = ["--report_to", "none", "--disable_tqdm", "true", "--use_cpu", "true", "--save_strategy", "no",
         "--max_steps", "2", "--seed", "3", "--dataloader_pin_memory", "false"]  # fmt: skip


def pretraining(folder, checkpoint, tokenizer):
    corpus = folder / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join(TINY_TEXT[i : i + 3]) for i in range(0, 60, 3)) + "\n")
    return run_pretraining.main, ["--train_file", str(corpus), "--tokenizer_name", str(tokenizer), "--model_size",
                                  "tiny", "--config_overrides", "num_hidden_layers=1,hidden_size=32,"
                                  "num_attention_heads=2,intermediate_size=64", "--max_seq_length", "32",
                                  "--validation_split_percentage", "10", "--per_device_train_batch_size", "4",
                                  "--do_eval"]  # fmt: skip


def glue(folder, checkpoint, tokenizer):
    rte = folder / "glue" / "RTE"
    rte.mkdir(parents=True)
    rows = "".join(f"{i}\t{TINY_TEXT[i]}\t{TINY_TEXT[i + 1]}\t{('entailment', 'not_entailment')[i % 2]}\n"
                   for i in range(8))  # fmt: skip
    for name in ("train.tsv", "dev.tsv"):
        (rte / name).write_text(RTE_HEADER + rows)
    return run_glue.main, ["--task_name", "rte", "--data_dir", str(folder / "glue"), "--max_seq_length", "32"]


def files(name, content):
    """A task whose training and evaluation file is `content`."""

    def flags(folder, checkpoint, tokenizer):
        path = folder / name
        path.write_text(content)
        return ["--train_file", str(path), "--validation_file", str(path)]

    return flags


def with_flags(main, data, *extra):
    return lambda folder, checkpoint, tokenizer: (main, [*data(folder, checkpoint, tokenizer), *extra])


SCRIPTS = {
    "run_pretraining.py": pretraining,
    "run_glue.py": glue,
    "run_squad.py": with_flags(run_squad.main, files("squad.json", json.dumps(SQUAD)), "--max_seq_length", "64",
                               "--doc_stride", "16", "--max_query_length", "16"),
    "run_race.py": with_flags(run_race.main, files("race.jsonl", "".join(
        json.dumps({**RACE, "example_id": f"high{i}", "answer": "ABCD"[i % 4]}) + "\n" for i in range(4))),
        "--max_seq_length", "32", "--max_qa_length", "8"),
    "run_relation.py": with_flags(run_relation.main, files("relation.json", json.dumps(
        [{**TACRED, "id": f"ex{i}", "relation": ("org:founded_by", "no_relation")[i % 2]} for i in range(4)])),
        "--max_seq_length", "32"),
    "run_coref.py": with_flags(run_coref.main, files("doc.conll", CONLL), "--max_segment_length", "16"),
}  # fmt: skip


def run_once(script, folder, checkpoint, tokenizer):
    """The run's saved weights and its metrics without the timings."""
    folder.mkdir()
    main, flags = SCRIPTS[script](folder, checkpoint, tokenizer)
    finetuning = [] if script == "run_pretraining.py" else ["--model_name_or_path", str(checkpoint), "--do_train",
                                                            "--do_eval"]  # fmt: skip
    main([*finetuning, *flags, *QUIET, "--output_dir", str(folder / "out")])
    metrics = json.loads((folder / "out" / "all_results.json").read_text())
    untimed = {name: value for name, value in metrics.items() if "runtime" not in name and "per_second" not in name}
    return load_file(folder / "out" / "model.safetensors"), untimed


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_same_seed_gives_the_same_weights_and_metrics(script, tmp_path, spanroberta_checkpoint,
                                                          tiny_tokenizer_dir):  # fmt: skip
    weights, metrics = run_once(script, tmp_path / "first", spanroberta_checkpoint, tiny_tokenizer_dir)
    torch.manual_seed(12345)  # whatever random state the process is in: the seed alone decides
    again, metrics_again = run_once(script, tmp_path / "second", spanroberta_checkpoint, tiny_tokenizer_dir)
    assert weights.keys() == again.keys() and weights
    for name in weights:
        assert torch.equal(weights[name], again[name]), name
    assert metrics == metrics_again and any(name.startswith("eval_") for name in metrics), metrics
