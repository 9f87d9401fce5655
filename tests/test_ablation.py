"""run_ablation.py: the tiny config's arms end to end on CPU (every arm x task x seed, results.json, results.md,
the plots), a second run that redoes nothing, an interrupted run that continues, configs that are refused, and the
shipped configs checked against the scripts' argument parsers."""

import contextlib
import importlib
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import safetensors.torch
import torch
import yaml

import run_ablation
import run_pretraining
from conftest import PROJECT_ROOT, TINY_TEXT
from test_distributed import free_port
from spanroberta.ablation.config import AblationConfig, AblationConfigError, check_values, load_config, script_arguments
from spanroberta.ablation.results import records, results_markdown, summarize
from spanroberta.ablation.reports import TaskSpec, headline_metric, report, scores
from spanroberta.ablation.units import start_flags
from spanroberta.errors import UserInputError
from spanroberta.records import read_records
from spanroberta.tasks.registry import FINETUNING_TASKS, TASKS_BY_SCRIPT

CONFIGS = PROJECT_ROOT / "configs" / "ablations"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def squad_articles(count: int) -> list[dict]:
    """Articles of TINY_TEXT sentences; each question asks for a word of its sentence."""
    articles = []
    for index in range(count):
        sentences = TINY_TEXT[index * 3 : index * 3 + 3]
        context = " ".join(sentences)
        qas = []
        for number, sentence in enumerate(sentences):
            answer = sentence.split()[2]
            qas.append({"id": f"a{index}q{number}", "question": f"What is the third word of '{sentence[:20]}'?",
                        "answers": [{"text": answer, "answer_start": context.index(answer)}]})  # fmt: skip
        articles.append({"title": f"article-{index}", "paragraphs": [{"context": context, "qas": qas}]})
    return articles


def write_rte(folder: Path) -> Path:
    rng = random.Random(0)
    rte = folder / "RTE"
    rte.mkdir(parents=True)
    for name, count in (("train.tsv", 48), ("dev.tsv", 24)):
        lines = ["index\tsentence1\tsentence2\tlabel"]
        for index in range(count):
            first, second = rng.choice(TINY_TEXT), rng.choice(TINY_TEXT)
            lines.append(f"{index}\t{first}\t{second}\t{'entailment' if first == second else 'not_entailment'}")
        (rte / name).write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory) -> Path:
    """configs/ablations/tiny.yaml with its pretraining, arms and seeds, and tasks that read generated files."""
    folder = tmp_path_factory.mktemp("ablation_data")
    squad = folder / "squad.json"
    squad.write_text(json.dumps({"version": "1.1", "data": squad_articles(6)}))
    config = yaml.safe_load((CONFIGS / "tiny.yaml").read_text())
    config["tasks"]["squad"]["split_by_article"] = {"file": str(squad), "train_articles": 4}
    config["tasks"]["rte"]["data_dir"] = str(write_rte(folder / "glue"))
    path = folder / "tiny.json"
    path.write_text(json.dumps(config))
    return path


def run(config: Path, output_dir: Path) -> list[str]:
    """Runs the ablation; returns its progress lines."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        # Records go beside the output, not into the checkout's benchmarks/results.
        records = output_dir.parent / "records"
        run_ablation.main([str(config), "--output_dir", str(output_dir), "--record_dir", str(records)])
    return [line for line in printed.getvalue().splitlines() if line.startswith("[ablation]")]


def result_files(output_dir: Path) -> dict[Path, int]:
    return {path: path.stat().st_mtime_ns for path in output_dir.rglob("result.json")}


@pytest.fixture(scope="module")
def first_run(tiny_config, tmp_path_factory) -> tuple[Path, list[str]]:
    output_dir = tmp_path_factory.mktemp("ablation") / "out"
    return output_dir, run(tiny_config, output_dir)


@pytest.mark.slow
def test_the_tiny_ablation_runs_every_arm_task_and_seed(first_run):
    output_dir, progress = first_run
    assert progress[0] == (f"[ablation] 10 units (2 pretraining, 8 fine-tuning): 0 already done in {output_dir}, "
                           "10 to run.")
    assert sum(line.startswith("[ablation] unit ") for line in progress) == 10
    assert "[ablation] unit 10/10: fine-tuning arm token on rte, seed 2 (0 left after it)" in progress

    results = json.loads((output_dir / "results.json").read_text())
    runs = {(row["arm"], row["task"], row["seed"]) for row in results["finetuning"]}
    assert runs == {(arm, task, seed) for arm in ("span-sbo", "token") for task in ("squad", "rte") for seed in (1, 2)}
    assert {row["metric"] for row in results["finetuning"] if row["task"] == "squad"} == {"exact_match", "f1"}
    assert all(0 <= row["value"] <= 100 for row in results["finetuning"])
    # RTE's accuracy is a fraction in eval_results.json; results.json has it on the papers' 0-100 scale
    eval_results = json.loads((output_dir / "finetuning/token/rte/seed-1/model/eval_results.json").read_text())
    token_rte = [row for row in results["finetuning"] if (row["arm"], row["task"], row["seed"]) == ("token", "rte", 1)]
    assert token_rte[0]["value"] == pytest.approx(100 * eval_results["eval_accuracy"], abs=1e-3)
    # a scored fine-tuning keeps its results but not its weights
    assert not list((output_dir / "finetuning/token/rte/seed-1/model").glob("*.safetensors"))

    table = (output_dir / "results.md").read_text()
    assert "| arm | squad (f1) | rte (accuracy) |" in table
    rows = [line for line in table.splitlines() if line.startswith(("| span-sbo |", "| token |"))]
    assert len(rows) == 4  # the scores table and the pretraining table
    assert table.count("**") >= 4  # a best arm in each of the two columns
    for plot in ("pretraining_loss.png", "scores.png"):
        assert (output_dir / plot).read_bytes().startswith(PNG_MAGIC)


@pytest.mark.slow
def test_the_raw_record_holds_every_score_and_the_pretraining_figures(first_run):
    output_dir, _ = first_run
    record = read_records("ablation-tiny", output_dir.parent / "records")[0]
    results = json.loads((output_dir / "results.json").read_text())
    assert record["results"]["finetuning"] == results["finetuning"]
    assert record["results"]["pretraining"] == results["pretraining"]
    assert record["settings"]["config"]["seeds"] == [1, 2] and record["results"]["wall_seconds"] > 0
    assert record["git_commit"] and record["machine"]["cpu"]


@pytest.mark.slow
def test_the_arms_see_the_same_budget_and_their_compute_differences_are_named(first_run):
    output_dir, _ = first_run
    results = json.loads((output_dir / "results.json").read_text())
    figures = results["pretraining"]
    assert set(figures) == {"span-sbo", "token"}
    assert figures["span-sbo"]["token_slots"] == figures["token"]["token_slots"] == 60 * 16 * 64
    assert "sbo_head" in figures["span-sbo"]["parameters"]["by_part"]
    assert "sbo_head" not in figures["token"]["parameters"]["by_part"]
    assert {"loss", "mlm_loss", "sbo_loss"} <= set(figures["span-sbo"]["final_train_losses"])
    assert any("sbo_head" in line for line in results["compute_differences"])


@pytest.mark.slow
def test_a_second_run_redoes_nothing_and_an_interrupted_one_continues(first_run, tiny_config, tmp_path):
    output_dir, _ = first_run
    before = result_files(output_dir)
    progress = run(tiny_config, output_dir)
    assert progress[0].endswith(f"10 already done in {output_dir}, 0 to run.")
    assert not any(line.startswith("[ablation] unit ") for line in progress)
    assert result_files(output_dir) == before

    # an interrupted run (here: one fine-tuning without its result) continues with that unit only
    unit = output_dir / "finetuning/token/squad/seed-2"
    (unit / "result.json").unlink()
    progress = run(tiny_config, output_dir)
    assert [line for line in progress if line.startswith("[ablation] unit ")] == [
        "[ablation] unit 1/1: fine-tuning arm token on squad, seed 2 (0 left after it)"
    ]
    after = result_files(output_dir)
    assert {path for path in after if after[path] != before.get(path)} == {unit / "result.json"}
    assert json.loads((unit / "result.json").read_text())["start"] == "over the files of an interrupted attempt"

    # the same folder with an arm changed: refused, rather than one table mixing two configs
    changed = json.loads(tiny_config.read_text())
    changed["arms"]["token"]["mlm_probability"] = 0.2
    changed_path = tmp_path / "changed.json"
    changed_path.write_text(json.dumps(changed))
    with pytest.raises(SystemExit, match="pretraining arm token that was run with other settings"):
        run(changed_path, output_dir)


BASE = {
    "pretraining": {"model_size": "tiny", "max_steps": 2},
    "arms": {"span": {"masking": "span"}, "token": {"masking": "token", "sbo": False}},
    "tasks": {"rte": {"script": "run_glue.py", "task_name": "rte"}},
    "seeds": [1],
}


def refused(tmp_path, config, suffix=".json") -> str:
    path = tmp_path / f"config{suffix}"
    path.write_text(config if isinstance(config, str) else json.dumps(config))
    with pytest.raises(SystemExit) as stop:
        run_ablation.main([str(path), "--output_dir", str(tmp_path / "out")])
    message = str(stop.value.code)
    assert message.startswith("run_ablation.py: error: ") and "\n" not in message
    assert not (tmp_path / "out").exists()
    return message


@pytest.mark.parametrize(
    "change, message",
    [
        ({"tasks": {"rte": {"script": "run_qa.py"}}}, "task 'rte' has script 'run_qa.py'; each task needs `script`"),
        ({"arms": {"span": {"maskng": "span"}}}, "arm 'span' sets --maskng (did you mean --masking?), which "
                                                 "run_pretraining.py does not have"),
        ({"tasks": {"rte": {"script": "run_glue.py", "task_name": "rte", "doc_stride": 8}}},
         "task 'rte' sets --doc_stride, which run_glue.py does not have"),
        ({"arms": {"span": {"output_dir": "elsewhere"}}}, "arm 'span' sets output_dir, which the ablation sets itself"),
        ({"arms": {"span": {"max_steps": 5}}}, "arm 'span' sets max_steps, which the ablation sets itself"),
        ({"tasks": {"rte": {"script": "run_glue.py", "task_name": "rte", "seed": 3}}}, "task 'rte' sets seed"),
        ({"arms": {"span": {"masking": "nonsense"}}}, "arm 'span': --masking 'nonsense' does not exist"),
        ({"arms": {"span": {"input_format": "segment-pair"}}}, "arm 'span': --input_format segment-pair builds pairs"),
        ({"seeds": [1, 1]}, "`seeds` must be a list of distinct integer seeds"),
        ({"arms": {"span": {"mlm_probability": "high"}}}, "arm 'span': mlm_probability is 'high', which is not a "
                                                          "number"),
        ({"tasks": {"rte": {"script": "run_glue.py", "task_name": "rte", "num_train_epochs": [2]}}},
         "task 'rte': num_train_epochs is [2], which is not a number"),
        ({"arms": {"span": {"sbo": "maybe"}}}, "arm 'span': sbo is 'maybe', which is not true or false"),
        ({"tasks": {"rte": {"script": "run_glue.py", "task_name": "rte", "metric": "f1"}}},
         "task 'rte' has metric 'f1'; run_glue.py reports accuracy"),
        ({"token_budget": 1000}, "`token_budget` sets the pretraining steps"),
        ({"arms": {"bad name": {}}}, "arm name 'bad name' is not a usable folder name"),
        ({"arms": {"span": {"model_name_or_path": "ckpt"}}}, "arm 'span' sets model_name_or_path, which the ablation "
                                                             "sets itself"),
        ({"arms": {"span": {"tokenizer_name": "tok"}}}, "arm 'span' sets tokenizer_name, which the ablation sets"),
        ({"pretraining": {"model_size": "tiny", "max_steps": 2, "model_name_or_path": "./no/checkpoint"}},
         "arm 'span': --model_name_or_path ./no/checkpoint: no such folder"),
        ({"tasks": {"squad": {"script": "run_squad.py", "split_by_article": {"file": "nowhere.json",
                                                                           "train_articles": 3}}}},
         "task 'squad': split_by_article's file nowhere.json does not exist"),
        ({"arms": {"span": {"eval_masking": "span"}}}, "arm 'span' sets eval_masking, which the ablation sets"),
        ({"pretraining": {"model_size": "tiny", "max_steps": 2, "eval_masking": "pmi"}},
         "--eval_masking 'pmi' does not exist; valid values: span, word, token, ngram"),
        ({"finetune_starting_checkpoint": True}, "`finetune_starting_checkpoint: true` fine-tunes the model every arm "
                                                 "continues, and the pretraining section names none"),
        ({"finetune_starting_checkpoint": "yes"}, "`finetune_starting_checkpoint` must be true or false"),
        ({"pretraining": {"model_name_or_path": "ckpt"}, "finetune_starting_checkpoint": True,
          "arms": {"starting-checkpoint": {}}}, "an arm is named 'starting-checkpoint'"),
        ({"tasks": {"rte": {"script": "run_glue.py", "task_name": "rte", "split_by_article": {"file": "x.json",
                                                                                           "train_articles": 3}}}},
         "task 'rte': `split_by_article` is for run_squad.py tasks"),
    ],
)
def test_bad_configs_are_refused_in_one_paragraph(tmp_path, change, message):
    assert message in refused(tmp_path, {**BASE, **change})


def test_a_missing_section_is_named(tmp_path):
    assert "has no `tasks` section" in refused(tmp_path, {key: BASE[key] for key in ("pretraining", "arms", "seeds")})


@pytest.mark.parametrize("name", sorted(path.name for path in CONFIGS.glob("*.yaml")))
def test_the_shipped_configs_match_the_scripts_parsers(name, monkeypatch):
    """Every flag of every shipped config is one its script has, with a value its parser and recipe accept (checked
    with use_cpu, so that a GPU config's bf16 is accepted on a CPU machine). A config that continues a checkpoint
    of benchmarks/.cache/ (`python -m benchmarks.parity.fetch_checkpoint` puts it there) is skipped without it. Every
    config but a quick variant (a smoke run of a bigger config) has several fine-tuning seeds, and at least two rows
    to compare (arms, or one arm beside the starting checkpoint fine-tuned as it is)."""
    config = load_config(CONFIGS / name)
    start = config.pretraining.get("model_name_or_path", "")
    if start.startswith("benchmarks/.cache/") and not (PROJECT_ROOT / start).is_dir():
        pytest.skip(f"{start} is not here: `python -m benchmarks.parity.fetch_checkpoint` fetches it")
    monkeypatch.chdir(PROJECT_ROOT)  # the configs' paths are relative to the project root
    check_values(config, extra={"use_cpu": True})
    assert len(config.table_arms) >= 2 and (len(config.seeds) >= 2 or name.endswith("-quick.yaml"))


def test_check_values_names_the_arm(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**BASE, "arms": {"ok": {}, "bad": {"mlm_probability": 2.0}}}))
    with pytest.raises(AblationConfigError, match=re.escape("arm 'bad': --mlm_probability")):
        check_values(load_config(path))


@pytest.mark.slow
def test_under_accelerate_launch_every_process_trains_each_unit(tmp_path):
    """2 CPU processes (gloo): each unit is trained by both (the pretraining's real tokens, summed over the
    processes, fill the token slots of 2 x the per-device batch), and the runner's files are written once."""
    config = {
        "pretraining": {
            "model_size": "tiny", "config_overrides": "num_hidden_layers=1,hidden_size=32,num_attention_heads=2,"
            "intermediate_size=64", "tokenizer_vocab_size": 400, "max_seq_length": 32, "input_format": "full-sentences",
            "per_device_train_batch_size": 4, "max_steps": 3, "logging_steps": 1, "save_strategy": "no",
            "validation_split_percentage": 0, "max_train_samples": 64, "use_cpu": True, "disable_tqdm": True,
        },
        "arms": {"span": {"masking": "span"}},
        "tasks": {"rte": {"script": "run_glue.py", "task_name": "rte", "data_dir": str(write_rte(tmp_path / "glue")),
                          "max_seq_length": 32, "max_steps": 2, "per_device_train_batch_size": 4,
                          "save_strategy": "no", "use_cpu": True, "disable_tqdm": True}},
        "seeds": [1],
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    output_dir = tmp_path / "out"
    command = [
        sys.executable, "-m", "accelerate.commands.launch",
        "--config_file", str(PROJECT_ROOT / "configs" / "accelerate" / "multi_gpu.yaml"),
        "--num_processes", "2", "--main_process_port", str(free_port()),
        str(PROJECT_ROOT / "run_ablation.py"), str(path), "--output_dir", str(output_dir),
        "--record_dir", str(tmp_path / "records"),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    progress = [line for line in result.stdout.splitlines() if line.startswith("[ablation] unit ")]
    assert progress == ["[ablation] unit 1/2: pretraining arm span (1 left after it)",
                        "[ablation] unit 2/2: fine-tuning arm span on rte, seed 1 (0 left after it)"]  # fmt: skip
    figures = json.loads((output_dir / "results.json").read_text())["pretraining"]["span"]
    assert figures["token_slots"] == 3 * 4 * 2 * 32
    assert figures["real_tokens"] == figures["token_slots"]
    assert len(json.loads((output_dir / "results.json").read_text())["finetuning"]) == 1
    assert len(read_records("ablation-config", tmp_path / "records")) == 1  # the main process writes the record


def test_an_unfinished_unit_resumes_from_a_complete_checkpoint_or_starts_over_an_attempt(tmp_path):
    model_dir = tmp_path / "unit" / "model"
    assert start_flags(tmp_path / "unit") == {}
    model_dir.mkdir(parents=True)
    (model_dir / "trainer_state.json").write_text(json.dumps({"global_step": 3}))
    assert start_flags(tmp_path / "unit") == {"overwrite_output_dir": "true"}
    checkpoint = model_dir / "checkpoint-2"
    checkpoint.mkdir()
    (checkpoint / "trainer_state.json").write_text("{")  # killed while saving: not resumable
    assert start_flags(tmp_path / "unit") == {"overwrite_output_dir": "true"}
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": 2}))
    (checkpoint / "model.safetensors").write_bytes(b"")  # emptied by a full disk: not resumable either
    assert start_flags(tmp_path / "unit") == {"overwrite_output_dir": "true"}
    safetensors.torch.save_file({"weight": torch.zeros(2)}, checkpoint / "model.safetensors")
    assert start_flags(tmp_path / "unit") == {"resume_from_checkpoint": "true"}


# --- continued pretraining: every arm starts from the same saved model ---


@pytest.mark.slow
def test_every_arm_continues_the_same_checkpoint(tmp_path, spanroberta_checkpoint):
    """`pretraining: {model_name_or_path: ...}` reaches every arm's run_pretraining.py: after 2 steps at a learning
    rate of 1e-5, each arm's embeddings are within 1e-3 of the checkpoint's (Adam moves a weight by about the learning
    rate a step, while two draws of a fresh initialisation, std 0.02, differ by more than 0.05 somewhere) and its
    tokenizer is the checkpoint's."""
    from safetensors.numpy import load_file
    from transformers import AutoTokenizer

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TINY_TEXT) + "\n")
    config = {
        "pretraining": {
            "model_name_or_path": str(spanroberta_checkpoint), "train_file": str(corpus), "max_seq_length": 32,
            "input_format": "full-sentences", "per_device_train_batch_size": 4, "max_steps": 2, "learning_rate": 1e-5,
            "logging_steps": 1, "save_strategy": "no", "validation_split_percentage": 0, "max_train_samples": 32,
            "use_cpu": True, "disable_tqdm": True,
        },
        "arms": {"span": {"masking": "span"}, "token": {"masking": "token", "sbo": False}},
        "tasks": {"rte": {"script": "run_glue.py", "task_name": "rte", "data_dir": str(write_rte(tmp_path / "glue")),
                          "max_seq_length": 32, "max_steps": 1, "per_device_train_batch_size": 4,
                          "save_strategy": "no", "use_cpu": True, "disable_tqdm": True}},
        "seeds": [1],
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    run(path, tmp_path / "out")
    start = load_file(str(spanroberta_checkpoint / "model.safetensors"))
    vocabulary = AutoTokenizer.from_pretrained(spanroberta_checkpoint).get_vocab()
    for arm in ("span", "token"):
        folder = tmp_path / "out" / "pretraining" / arm
        flags = json.loads((folder / "flags.json").read_text())
        assert flags["model_name_or_path"] == str(spanroberta_checkpoint) and flags["train_file"] == str(corpus)
        trained = load_file(str(folder / "model" / "model.safetensors"))
        for name in ("roberta.embeddings.word_embeddings.weight", "roberta.encoder.layer.0.output.dense.weight"):
            # The run pads the vocabulary to a multiple of 64 ids: the checkpoint's rows come first, unchanged.
            assert abs(trained[name][: len(start[name])] - start[name]).max() < 1e-3
        assert AutoTokenizer.from_pretrained(folder / "model").get_vocab() == vocabulary


@pytest.mark.slow
def test_the_starting_checkpoint_is_fine_tuned_beside_arms_evaluated_on_the_same_masking(
    tmp_path, spanroberta_checkpoint
):
    """`finetune_starting_checkpoint: true` fine-tunes the checkpoint itself (no pretraining unit) as the table's
    first row; `eval_masking: span` reaches every arm's run_pretraining.py, and results.json and results.md carry
    each arm's held-out MLM accuracy under it."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TINY_TEXT) + "\n")
    config = {
        "pretraining": {
            "model_name_or_path": str(spanroberta_checkpoint), "train_file": str(corpus),
            "validation_file": str(corpus), "eval_masking": "span", "max_seq_length": 32,
            "input_format": "full-sentences", "per_device_train_batch_size": 4, "max_steps": 1, "learning_rate": 1e-5,
            "save_strategy": "no", "use_cpu": True, "disable_tqdm": True,
        },
        "arms": {"token": {"masking": "token", "sbo": False}, "span": {"masking": "span", "sbo": False}},
        "finetune_starting_checkpoint": True,
        "tasks": {"rte": {"script": "run_glue.py", "task_name": "rte", "data_dir": str(write_rte(tmp_path / "glue")),
                          "max_seq_length": 32, "max_steps": 1, "per_device_train_batch_size": 4,
                          "save_strategy": "no", "use_cpu": True, "disable_tqdm": True}},
        "seeds": [1],
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    progress = run(path, tmp_path / "out")
    assert progress[0].startswith("[ablation] 5 units (2 pretraining, 3 fine-tuning)")
    assert "[ablation] unit 3/5: fine-tuning the starting checkpoint on rte, seed 1 (2 left after it)" in progress
    out = tmp_path / "out"
    assert sorted(folder.name for folder in (out / "pretraining").iterdir()) == ["span", "token"]
    flags = json.loads((out / "finetuning/starting-checkpoint/rte/seed-1/flags.json").read_text())
    assert flags["model_name_or_path"] == str(spanroberta_checkpoint)
    assert json.loads((out / "pretraining/token/flags.json").read_text())["eval_masking"] == "span"

    results = json.loads((out / "results.json").read_text())
    assert {row["arm"] for row in results["finetuning"]} == {"starting-checkpoint", "token", "span"}
    accuracies = {arm: figures["eval"]["eval_mlm_accuracy"] for arm, figures in results["pretraining"].items()}
    assert set(accuracies) == {"token", "span"} and all(0 <= value <= 1 for value in accuracies.values())
    table = (out / "results.md").read_text()
    assert table_rows(table, ["starting-checkpoint", "token", "span"])[0].startswith("| starting-checkpoint |")
    assert f"starting-checkpoint: {spanroberta_checkpoint}, the model every arm continues" in table
    assert "masked with span masking for every arm (eval_masking)" in table
    for arm, accuracy in accuracies.items():
        assert re.search(rf"^\| {arm} \|.*\| {accuracy:.3f} \|$", table, re.MULTILINE)


def test_eval_masking_gives_every_arm_the_same_held_out_targets(tiny_tokenizer, tmp_path):
    """A token-masking arm evaluated with --eval_masking span predicts exactly the tokens a span-masking arm with
    SBO predicts (same seed, same blocks), which are not those its own masking would give; its training batches
    keep its own masking."""
    from spanroberta import SpanRobertaConfig, SpanRobertaForPreTraining
    from spanroberta.data.collator import DataCollatorForSpanMasking
    from spanroberta.data.masking_schedule import DynamicMaskingDataset
    from spanroberta.pretraining.arguments import PretrainingArguments
    from spanroberta.pretraining.trainer import PretrainingTrainer

    blocks = DynamicMaskingDataset([{"input_ids": tiny_tokenizer(text)["input_ids"]} for text in TINY_TEXT[:12]])
    model = SpanRobertaForPreTraining(SpanRobertaConfig(
        vocab_size=len(tiny_tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, pad_token_id=tiny_tokenizer.pad_token_id, max_span_targets=4,
        sbo_position_embedding_size=8))  # fmt: skip
    args = PretrainingArguments(output_dir=str(tmp_path), per_device_eval_batch_size=4, report_to=[], use_cpu=True)

    def collator(masking: str, sbo: bool) -> DataCollatorForSpanMasking:
        return DataCollatorForSpanMasking(tiny_tokenizer, masking=masking, seed=42, label_layout="slots",
                                          return_sbo_targets=sbo, max_span_targets=4)  # fmt: skip

    def eval_labels(trainer: PretrainingTrainer) -> list:
        return [batch["labels"] for batch in trainer.get_eval_dataloader()]

    def trainer(**collators) -> PretrainingTrainer:
        return PretrainingTrainer(model=model, args=args, train_dataset=blocks, eval_dataset=blocks, **collators)

    token_arm = trainer(data_collator=collator("token", False), eval_data_collator=collator("span", False))
    span_sbo_arm = trainer(data_collator=collator("span", True))
    own_masking = trainer(data_collator=collator("token", False))
    evaluated, expected = eval_labels(token_arm), eval_labels(span_sbo_arm)
    assert len(evaluated) == len(expected) == 3
    assert all(torch.equal(mine, theirs) for mine, theirs in zip(evaluated, expected))
    assert not all(torch.equal(mine, own) for mine, own in zip(evaluated, eval_labels(own_masking)))
    assert token_arm.data_collator.masking == "token"


def test_the_sbo_head_kept_beside_a_stock_encoder_counts_as_one_part(tmp_path):
    """A continued BertModel saves a stock checkpoint and its SBO head in sbo_head.safetensors, whose names have
    no `sbo_head.` prefix: the head is one part, not one per sub-module."""
    from safetensors.torch import save_file

    from spanroberta.ablation.results import parameter_counts

    save_file({"bert.embeddings.word_embeddings.weight": torch.zeros(10, 4), "cls.predictions.bias": torch.zeros(10)},
              str(tmp_path / "model.safetensors"))  # fmt: skip
    save_file({"dense1.weight": torch.zeros(4, 8), "layer_norm1.bias": torch.zeros(4)},
              str(tmp_path / "sbo_head.safetensors"))  # fmt: skip
    assert parameter_counts(tmp_path) == {"total": 86, "by_part": {"bert": 40, "cls": 10, "sbo_head": 36}}


# --- what each script reports (its task's declaration) ---


def test_relation_coref_and_mrqa_scores_come_from_the_tasks_declaration(tmp_path):
    relation = TaskSpec("tacred", "run_relation.py", {})
    results = {"eval_precision": 0.5, "eval_recall": 0.25, "eval_f1": 1 / 3, "eval_accuracy": 0.9, "eval_loss": 1.2}
    # fractions become 0-100; eval_loss is not a score
    assert scores(relation, results) == pytest.approx({"precision": 50.0, "recall": 25.0, "f1": 100 / 3,
                                                       "accuracy": 90.0})  # fmt: skip
    assert headline_metric(relation) == "f1"

    coref = TaskSpec("ontonotes", "run_coref.py", {})
    results = {f"eval_{metric}_{part}": value for metric, value in (("muc", 0.7), ("b_cubed", 0.6),
               ("ceaf_phi4", 0.5)) for part in ("precision", "recall", "f1")}  # fmt: skip
    results["eval_conll_f1"] = 0.6  # (0.7 + 0.6 + 0.5) / 3
    found = scores(coref, results)
    assert headline_metric(coref) == "conll_f1" and found["conll_f1"] == pytest.approx(60.0)
    assert len(found) == 10 and found["ceaf_phi4_recall"] == pytest.approx(50.0)

    # MRQA: several evaluation files; percentages already, each dataset's scores kept beside the macro averages
    mrqa = TaskSpec("mrqa", "run_squad.py", {"validation_file": "SQuAD-dev.jsonl.gz,NewsQA-dev.jsonl.gz"})
    percentages = {"SQuAD_em": 80.0, "SQuAD_f1": 88.0, "NewsQA_em": 50.0, "NewsQA_f1": 60.0, "macro_em": 65.0,
                   "macro_f1": 74.0}  # fmt: skip
    results = {f"eval_{name}": value for name, value in percentages.items()}
    assert headline_metric(mrqa) == "macro_f1" and scores(mrqa, {**results, "eval_samples": 9}) == percentages
    # one MRQA file is told by its content; a SQuAD file (or one not there yet) is SQuAD
    (tmp_path / "dev.jsonl").write_text(json.dumps({"header": {"dataset": "SQuAD", "split": "dev"}}) + "\n")
    for file, headline in (("dev.jsonl", "macro_f1"), ("later.json", "f1")):
        assert headline_metric(TaskSpec("qa", "run_squad.py", {"validation_file": str(tmp_path / file)})) == headline

    # a script that writes other keys than the table says stops, rather than leave its column empty
    with pytest.raises(UserInputError, match="has no eval_f1 .it has eval_loss, eval_macro_f1."):
        scores(relation, {"eval_macro_f1": 0.5, "eval_loss": 1.0})


def test_every_script_of_the_table_is_a_task_of_the_package(tmp_path):
    """A config's `script` names a task the package declares, with the script's own flags; another is refused."""
    for spec, variant in ((TaskSpec("q", "run_squad.py", {"version_2_with_negative": True}), "squad_v2"),
                          (TaskSpec("q", "run_squad.py", {}), "squad"),
                          (TaskSpec("g", "run_glue.py", {"task_name": "STS-B"}), "stsb"),
                          (TaskSpec("c", "run_coref.py", {}), "coref")):  # GAP's report is not the evaluation's
        # the ablation's scores are read by the task's own declaration, not a copy of it
        assert report(spec) is TASKS_BY_SCRIPT[spec.script].reports[variant]
    assert report(TaskSpec("g", "run_glue.py", {"task_name": "nope"})) is None
    for script, task in TASKS_BY_SCRIPT.items():
        assert task.script == script and FINETUNING_TASKS[task.name] is task
        assert script_arguments(script) == importlib.import_module(script.removesuffix(".py")).ARGUMENT_CLASSES
    assert script_arguments("run_pretraining.py") == run_pretraining.ARGUMENT_CLASSES
    assert "task 'rc' has script 'run_qa.py'; each task needs `script`, one of run_squad.py, run_glue.py, " \
           "run_race.py, run_relation.py, run_coref.py" in refused(tmp_path, {**BASE, "tasks": {"rc": {
               "script": "run_qa.py"}}})  # fmt: skip


@pytest.mark.slow
def test_an_installed_package_runs_an_ablation_without_the_scripts(tiny_config, tmp_path):
    """`python -m spanroberta.ablation` with only the package on the path (a copy of it, as an installation has), run
    from a folder without the run_*.py scripts: one arm pretrained and fine-tuned on RTE."""
    installed = tmp_path / "site-packages"
    shutil.copytree(PROJECT_ROOT / "spanroberta", installed / "spanroberta",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    config = json.loads(tiny_config.read_text())
    config["pretraining"]["max_steps"] = 4
    config.update(arms={"span-sbo": config["arms"]["span-sbo"]}, seeds=[1],
                  tasks={"rte": {**config["tasks"]["rte"], "max_train_samples": 16, "max_eval_samples": 8}})
    (tmp_path / "tiny.json").write_text(json.dumps(config))
    environment = {**os.environ, "PYTHONPATH": str(installed)}
    finished = subprocess.run([sys.executable, "-m", "spanroberta.ablation", "tiny.json", "--output_dir", "out"],
                              cwd=tmp_path, env=environment, capture_output=True, text=True)  # fmt: skip
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert not list(tmp_path.glob("run_*.py"))
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert {(row["arm"], row["task"], row["seed"]) for row in results["finetuning"]} == {("span-sbo", "rte", 1)}
    # No checkout around the package: no record is written.
    assert not (installed / "benchmarks").exists() and "[ablation] record:" not in finished.stdout


# --- the table: medians, ranges, missing runs, the best cell ---


def ablation_config(arms, tasks, seeds, pretraining_seeds=None) -> AblationConfig:
    return AblationConfig(path="hand.yaml", pretraining={}, arms={arm: {} for arm in arms}, tasks=tasks,
                          seeds=tuple(seeds), pretraining_seeds=pretraining_seeds)  # fmt: skip


TWO_TASKS = {"squad": TaskSpec("squad", "run_squad.py", {}),
             "rte": TaskSpec("rte", "run_glue.py", {"task_name": "rte"})}  # fmt: skip


def rows_of(values: dict, metric_of: dict) -> list[dict]:
    """{(arm, task): [scores by seed, None for a run that did not happen]} -> records' rows."""
    return [{"arm": arm, "task": task, "seed": seed, "metric": metric_of[task], "value": value}
            for (arm, task), scores_by_seed in values.items()
            for seed, value in enumerate(scores_by_seed, start=1) if value is not None]  # fmt: skip


def table_rows(markdown: str, arms) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith(tuple(f"| {arm} |" for arm in arms))]


def test_cells_are_medians_with_ranges_and_the_best_median_is_bold():
    config = ablation_config("abc", TWO_TASKS, seeds=[1, 2, 3])
    rows = rows_of({
        ("a", "squad"): [70, 74, 71],    # sorted 70 71 74: median 71.0, range 70-74
        ("b", "squad"): [72, 72.5, 80],  # median 72.5: the best ...
        ("c", "squad"): [50, 90, 72.5],  # ... tied by c (sorted 50 72.5 90): both bold
        ("a", "rte"): [55, 60, 65],      # median 60.0
        ("b", "rte"): [58, 64, 61],      # sorted 58 61 64: median 61.0, the best
        ("c", "rte"): [50, None, 60],    # seed 2 not run: median of 2 runs (50 + 60) / 2 = 55.0, said so
    }, {"squad": "f1", "rte": "accuracy"})  # fmt: skip
    # a score that is not the column's headline (SQuAD's exact match) takes no part
    rows.append({"arm": "a", "task": "squad", "seed": 1, "metric": "exact_match", "value": 99.0})
    summary = summarize(config, rows)
    assert summary["c", "rte"] == {"median": 55.0, "min": 50, "max": 60, "n": 2}
    markdown = results_markdown(config, rows, {})
    assert "median over 3 run(s) per cell (seeds [1, 2, 3])" in markdown
    assert "| arm | squad (f1) | rte (accuracy) |" in markdown
    assert table_rows(markdown, "abc") == [
        "| a | 71.0 (70.0-74.0) | 60.0 (55.0-65.0) |",
        "| b | **72.5** (72.0-80.0) | **61.0** (58.0-64.0) |",
        "| c | **72.5** (50.0-90.0) | 55.0 (50.0-60.0) [2 of 3 runs] |",
    ]


def test_the_starting_checkpoint_row_comes_first_and_counts_fine_tuning_seeds_only():
    config = AblationConfig(path="hand.yaml", pretraining={"model_name_or_path": "start"}, arms={"a": {}},
                            tasks={"squad": TWO_TASKS["squad"]}, seeds=(1, 2), pretraining_seeds=(42, 43),
                            finetune_starting_checkpoint=True)  # fmt: skip
    rows = rows_of({("starting-checkpoint", "squad"): [60, 64], ("a", "squad"): [70, 72]}, {"squad": "f1"})
    markdown = results_markdown(config, rows, {})
    # the arm ran 2 of its 2 x 2 runs; the starting checkpoint is fine-tuned once per seed: 2 of 2
    assert table_rows(markdown, ["starting-checkpoint", "a"]) == [
        "| starting-checkpoint | 62.0 (60.0-64.0) |",
        "| a | **71.0** (70.0-72.0) [2 of 4 runs] |",
    ]
    assert "starting-checkpoint: start, the model every arm continues, fine-tuned as it is" in markdown


def test_several_pretraining_seeds_pool_into_one_cell_and_missing_units_show():
    config = ablation_config("abc", {"squad": TWO_TASKS["squad"]}, seeds=[1, 2], pretraining_seeds=(42, 43))
    finished = [
        # arm a: 2 pretraining seeds x 2 fine-tuning seeds = 4 runs: sorted 70 72 76 80, median (72 + 76) / 2 = 74.0
        *({"arm": "a", "task": "squad", "seed": seed, "pretraining_seed": pretraining, "scores": {"f1": value}}
          for (pretraining, seed), value in {(42, 1): 70, (42, 2): 72, (43, 1): 80, (43, 2): 76}.items()),
        # arm b: its pretraining seed 43 did not run (nor its fine-tunings): 2 of 4 runs, median (73 + 74.123456) / 2
        *({"arm": "b", "task": "squad", "seed": seed, "pretraining_seed": 42, "scores": {"f1": value}}
          for seed, value in ((1, 73), (2, 74.123456))),
        # arm c: nothing ran
    ]  # fmt: skip
    rows = records(config, finished)
    assert rows[0] == {"arm": "a", "task": "squad", "seed": 1, "metric": "f1", "value": 70, "pretraining_seed": 42}
    assert rows[-1]["value"] == 74.1235  # rounded to 4 decimals
    markdown = results_markdown(config, rows, {})
    assert "median over 4 run(s) per cell (seeds [1, 2], pretraining seeds [42, 43])" in markdown
    assert table_rows(markdown, "abc") == [
        "| a | **74.0** (70.0-80.0) |",
        "| b | 73.6 (73.0-74.1) [2 of 4 runs] |",  # (73 + 74.1235) / 2 = 73.56
        "| c | - |",
    ]


def test_a_preempted_unit_stops_the_driver_as_preempted_and_a_signal_between_units_too(tmp_path, monkeypatch, capsys):
    """A unit that exits 75 (its run saved and stopped) is a preempted unit, not a failed one: the driver says so,
    leaves the mark and exits 75; the next run starts with that unit. A SIGTERM that the driver takes after a
    unit's training stops it before the next unit."""
    import signal

    from spanroberta.ablation import runner
    from spanroberta.runs.preemption import PREEMPTED_EXIT_CODE, PREEMPTED_FILE

    config = tmp_path / "config.json"
    config.write_text(json.dumps(BASE))
    output_dir = tmp_path / "out"
    units_run = []

    def preempted_unit(argv):
        units_run.append(argv[0])
        raise SystemExit(PREEMPTED_EXIT_CODE)

    def unit_then_signal(argv):  # the unit's evaluation ends as the signal comes: it completes
        units_run.append(argv[0])
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(runner, "_outcome", lambda *args: {})
    for script, units_left in ((preempted_unit, 4), (unit_then_signal, 3)):
        monkeypatch.setattr(runner, "script_command", lambda name, script=script: script)
        with pytest.raises(SystemExit) as ended:
            run_ablation.main([str(config), "--output_dir", str(output_dir), "--record_dir", ""])
        assert ended.value.code == PREEMPTED_EXIT_CODE
        assert json.loads((output_dir / PREEMPTED_FILE).read_text())["units_left"] == units_left
    first_unit = str(output_dir / "pretraining/span/flags.json")
    assert units_run == [first_unit, first_unit]  # the preempted unit is the first the next run runs
    printed = capsys.readouterr().out
    assert "[ablation] the pretraining arm span was preempted and saved a checkpoint" in printed
    assert "[ablation] stopped by SIGTERM between two units; 3 unit(s) left." in printed
    assert "failed" not in printed
