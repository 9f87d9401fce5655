#!/usr/bin/env python
"""The question-answering pipeline on a real fine-tuned model: a model that run_squad.py fine-tuned answers
questions from a SQuAD v1.1 article it never trained on, through `pipeline("question-answering")` twice: in a
process that imported spanroberta, and in a process where spanroberta cannot be imported at all (plain
transformers, the pipeline code the checkpoint carries, `trust_remote_code=True`). Both must give the same
answers; the record holds them with their scores and the questions' gold answers.

    python -m benchmarks.tasks.scores --size cpu --tasks squad --seeds 1 --keep_outputs outputs/tasks
    python -m benchmarks.parity.qa_pipeline --model outputs/tasks/cpu/squad-seed1

(a unit already recorded is not run again and keeps nothing: `--records_dir` a fresh folder runs it again; or a
SQuAD model of the parity benchmark, `benchmarks.parity.finetuning --keep_outputs`.)

The questions are the first paragraph's of the first article after those the parity benchmark trains on
(`--article`, `--questions`), taken in the file's order, whatever the model answers. Writes one `qa-pipeline`
record under benchmarks/results/qa-pipeline/.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import transformers  # noqa: E402
from huggingface_hub import ModelCard  # noqa: E402

# Registers pipeline("question-answering") by wrapping `transformers.pipeline`: called through the module below, so
# that no name bound before this import (`from transformers import pipeline`) bypasses it.
import spanroberta  # noqa: E402,F401

# The parity benchmark owns the SQuAD split by article.
from benchmarks.common import DATA, SQUAD_TRAIN_ARTICLES  # noqa: E402
from spanroberta.records import start_run, write_record  # noqa: E402

BENCHMARK = "qa-pipeline"


def parse_args(args: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True,
                        help="The --output_dir of a run_squad.py run that trained and evaluated (--do_train --do_eval).")  # fmt: skip
    parser.add_argument("--article", type=int, default=SQUAD_TRAIN_ARTICLES,
                        help="Index of the SQuAD v1.1 dev article whose first paragraph is asked about.")  # fmt: skip
    parser.add_argument("--questions", type=int, default=5, help="How many of that paragraph's questions (>= 1).")
    parser.add_argument("--records_dir", type=Path, help="Default: benchmarks/results (or $SPANROBERTA_RECORDS_DIR).")
    options = parser.parse_args(args)
    options.model = options.model.resolve()  # the plain-transformers process runs in another directory
    config = options.model / "config.json"
    carries_pipeline = config.is_file() and "custom_pipelines" in config.read_text(encoding="utf-8")
    if not (carries_pipeline and (options.model / "all_results.json").is_file()):
        parser.error(f"{options.model} is not the output folder of a run_squad.py run that trained and evaluated "
                     "(it needs config.json with the pipeline it carries, and all_results.json).")  # fmt: skip
    if options.questions < 1:
        parser.error("--questions must be at least 1.")
    return options


def without_spanroberta(model: Path, context: str, questions: list[str]) -> dict[str, Any]:
    """The answers of plain transformers' pipeline in a fresh, isolated interpreter where `import spanroberta`
    fails, and the module of the pipeline that served them."""
    script = f"""
import json, sys
sys.modules["spanroberta"] = None  # any import of spanroberta now raises ImportError
from transformers import pipeline
qa = pipeline("question-answering", model={str(model)!r}, trust_remote_code=True, device="cpu")
answers = [qa(question=question, context={context!r}) for question in {questions!r}]
print(json.dumps({{"pipeline_module": type(qa).__module__, "answers": answers}}))
"""
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run([sys.executable, "-I", "-c", script], cwd=folder, capture_output=True, text=True,
                              encoding="utf-8", errors="replace",
                              env={**os.environ, "HF_MODULES_CACHE": str(Path(folder) / "modules")})  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"The pipeline failed without spanroberta:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def base_model(folder: Path) -> str | None:
    """The checkpoint the model was fine-tuned from, as the Trainer's model card names it: a Hub id as it is,
    a local folder by its name."""
    card = folder / "README.md"
    base = ModelCard.load(card).data.base_model if card.is_file() else None
    if isinstance(base, list):
        base = base[0] if base else None
    return Path(base).name if base and Path(base).is_absolute() else base


def main(args: list[str] | None = None) -> None:
    options = parse_args(args)
    started = start_run()
    article = json.loads((DATA / "squad" / "dev-v1.1.json").read_text(encoding="utf-8"))["data"][options.article]
    paragraph = article["paragraphs"][0]
    asked = paragraph["qas"][: options.questions]
    questions = [qa["question"] for qa in asked]

    # The same questions through the pipeline spanroberta registers, then through plain transformers.
    qa = transformers.pipeline("question-answering", model=str(options.model), device="cpu")
    answers = [qa(question=question, context=paragraph["context"]) for question in questions]
    plain = without_spanroberta(options.model, paragraph["context"], questions)
    same = [(a["answer"], a["start"], a["end"]) == (b["answer"], b["start"], b["end"])
            and abs(a["score"] - b["score"]) < 1e-4 for a, b in zip(answers, plain["answers"], strict=True)]  # fmt: skip

    evaluated = json.loads((options.model / "all_results.json").read_text(encoding="utf-8"))
    settings = {"model": "/".join(options.model.parts[-2:]), "model_class": type(qa.model).__name__,
                "base_model": base_model(options.model), "article": article["title"], "article_index": options.article,
                "questions": len(questions),
                "model_scores": {key: evaluated[f"eval_{key}"]
                                 for key in ("exact_match", "f1") if f"eval_{key}" in evaluated}}  # fmt: skip
    results = {
        "context": paragraph["context"],
        "answers": [{"question": question, "gold": sorted({a["text"] for a in entry["answers"]}), **answer}
                    for question, entry, answer in zip(questions, asked, answers, strict=True)],  # fmt: skip
        "with_spanroberta": {"pipeline_module": type(qa).__module__},
        "without_spanroberta": {"pipeline_module": plain["pipeline_module"], "same_answers": all(same)},
    }
    path = write_record(BENCHMARK, settings, results, started=started, results_dir=options.records_dir)
    for entry in results["answers"]:
        print(f"Q: {entry['question']}\nA: {entry['answer']} (score {entry['score']:.3f}; gold {entry['gold']})")
    print(f"With spanroberta: {type(qa).__module__}; without: {plain['pipeline_module']}; same answers: {all(same)}\n"
          f"Record: {path}")


if __name__ == "__main__":
    main()
