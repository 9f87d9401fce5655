#!/usr/bin/env python
"""The question-answering pipeline on a real fine-tuned model: a model that run_squad.py fine-tuned answers
questions from a SQuAD v1.1 article it never trained on, through `pipeline("question-answering")` twice: in a
process that imported spanroberta, and in a process where spanroberta cannot be imported at all (plain
transformers, the pipeline code the checkpoint carries, `trust_remote_code=True`). Both must give the same
answers; the record holds them with their scores and the questions' gold answers.

    python benchmarks/bench_finetuning_parity.py --size cpu --tasks squad --seeds 0 --keep_outputs out/parity
    python benchmarks/bench_qa_pipeline.py --model out/parity/squad-spanroberta-0

The questions are the first paragraph's of the first article after the 36 that the parity benchmark trains on
(`--article`, `--questions`), taken in the file's order, whatever the model answers. Writes one `qa-pipeline`
record under benchmarks/results/qa-pipeline/.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import spanroberta  # noqa: E402,F401  (registers pipeline("question-answering") in this process)
from spanroberta.records import write_record  # noqa: E402
from transformers import pipeline  # noqa: E402

BENCHMARK = "qa-pipeline"
SQUAD_DEV = ROOT.parent / "shared" / "data" / "squad" / "dev-v1.1.json"
FIRST_HELD_OUT_ARTICLE = 36  # bench_finetuning_parity trains on the first 36 articles of SQuAD v1.1 dev


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="A run_squad.py output folder.")
    parser.add_argument("--article", type=int, default=FIRST_HELD_OUT_ARTICLE,
                        help="Index of the SQuAD v1.1 dev article whose first paragraph is asked about.")
    parser.add_argument("--questions", type=int, default=5, help="How many of that paragraph's questions.")
    return parser.parse_args()


def without_spanroberta(model: Path, context: str, questions: list[str]) -> dict[str, Any]:
    """The answers of plain transformers' pipeline in a fresh interpreter where `import spanroberta` fails
    (no site, so no editable install; site-packages added back by hand), and the pipeline's module."""
    script = f"""
import json, sys
sys.path.append({sysconfig.get_paths()["purelib"]!r})
sys.modules["spanroberta"] = None  # any import of spanroberta now raises ImportError
from transformers import pipeline
qa = pipeline("question-answering", model={str(model)!r}, trust_remote_code=True, device="cpu")
answers = [qa(question=question, context={context!r}) for question in {questions!r}]
print(json.dumps({{"pipeline_module": type(qa).__module__, "model_class": type(qa.model).__name__,
                  "answers": answers}}))
"""
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run([sys.executable, "-I", "-S", "-c", script], cwd=folder, capture_output=True, text=True,
                              env={**os.environ, "HF_MODULES_CACHE": str(Path(folder) / "modules")})  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"The pipeline failed without spanroberta:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    args = parse_args()
    if not (args.model / "config.json").is_file():
        raise SystemExit(f"{args.model} holds no model: give a run_squad.py output folder (see --help).")
    article = json.loads(SQUAD_DEV.read_text(encoding="utf-8"))["data"][args.article]
    paragraph = article["paragraphs"][0]
    asked = paragraph["qas"][: args.questions]
    questions = [qa["question"] for qa in asked]

    # The same questions through the pipeline spanroberta registers, then through plain transformers.
    qa = pipeline("question-answering", model=str(args.model), device="cpu")
    answers = [qa(question=question, context=paragraph["context"]) for question in questions]
    plain = without_spanroberta(args.model, paragraph["context"], questions)
    same = [(a["answer"], a["start"], a["end"]) == (b["answer"], b["start"], b["end"])
            and abs(a["score"] - b["score"]) < 1e-4 for a, b in zip(answers, plain["answers"])]  # fmt: skip

    trained = json.loads((args.model / "all_results.json").read_text())
    # The model card the Trainer wrote names the checkpoint it fine-tuned ("base_model: <path or Hub id>").
    card = (args.model / "README.md").read_text(encoding="utf-8") if (args.model / "README.md").is_file() else ""
    base = re.search(r"^base_model: (.+)$", card, re.MULTILINE)
    settings = {"model": args.model.name, "model_class": type(qa.model).__name__,
                "base_model": base and base.group(1).strip().rstrip("/").split("/")[-1], "article": article["title"],
                "article_index": args.article, "questions": len(questions),
                "model_scores": {key: trained[key] for key in ("exact_match", "f1", "train_samples") if key in trained}}
    results = {
        "context": paragraph["context"],
        "answers": [{"question": question, "gold": sorted({a["text"] for a in qa_["answers"]}), **answer}
                    for question, qa_, answer in zip(questions, asked, answers)],  # fmt: skip
        "without_spanroberta": {"pipeline_module": plain["pipeline_module"], "model_class": plain["model_class"],
                                "same_answers": all(same)},  # fmt: skip
    }
    path = write_record(BENCHMARK, settings, results)
    for entry in results["answers"]:
        print(f"Q: {entry['question']}\nA: {entry['answer']} (score {entry['score']:.3f}; gold {entry['gold']})")
    print(f"Without spanroberta: {plain['pipeline_module']}, same answers: {all(same)}\nRecord: {path}")


if __name__ == "__main__":
    main()
