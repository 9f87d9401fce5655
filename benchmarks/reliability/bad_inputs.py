"""The bad-input sweep: every script fed inputs broken on purpose (truncated, garbled and empty JSON, JSON lines, TSV
and CoNLL files; missing and extra columns, unknown labels, spans outside the context; bytes that are not UTF-8; a
folder where a file belongs; settings out of range; configs with wrong types or unknown keys). Each case must end
the script before any model loads, with a non-zero exit and one paragraph naming the file and line or the field,
and leave no output folder.

    python -m benchmarks.reliability.bad_inputs            # every case, each as its own process; writes a record

The cases are tests too (tests/test_bad_input.py runs each in-process). The record, under
benchmarks/results/reliability/, counts the cases tried, those refused cleanly, and the failures by kind: a
traceback, a hang (no exit within HANG_SECONDS), an exit without the expected paragraph, or an output folder
created.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import ROOT
from benchmarks.common import tiny_checkpoint
from spanroberta.records import start_run, write_record

# Seconds a refused case may take (start-up, imports and the checks) before it counts as a hang.
HANG_SECONDS = 300
TEXT = "The quick brown fox jumps over the lazy dog near the river bank."
# The flags every case of a script starts with; {model} and {tokenizer} are the tiny ones `tiny_model` saves.
BASE_FLAGS = {
    "run_pretraining.py": ["--tokenizer_name", "{tokenizer}", "--model_size", "tiny", "--config_overrides",
                           "num_hidden_layers=1,hidden_size=32,num_attention_heads=2,intermediate_size=64",
                           "--max_seq_length", "32", "--max_steps", "1", "--validation_split_percentage", "0"],
    **{script: ["--model_name_or_path", "{model}", "--do_train"]
       for script in ("run_squad.py", "run_glue.py", "run_race.py", "run_relation.py", "run_coref.py")},
    "run_ablation.py": ["--record_dir", ""],
}  # fmt: skip


@dataclass(frozen=True)
class Case:
    """One broken input: the files written under a fresh folder ({folder} in the flags), the flags after the
    script's BASE_FLAGS, and what its one-paragraph refusal must say (formatted like the flags)."""

    name: str
    script: str
    files: dict[str, str | bytes]
    flags: list[str]
    expected: str
    # A config file given first, before the base flags (the scripts read a .json/.yaml first argument as flags).
    config_first: str | None = field(default=None)

    def command(self, folder: Path, model: Path, tokenizer: Path, output_dir: Path) -> list[str]:
        """Writes the case's files under `folder`; returns the script's arguments."""
        for name, content in self.files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        places = {"folder": folder, "model": model, "tokenizer": tokenizer}
        first = [self.config_first.format(**places)] if self.config_first else []
        flags = [*BASE_FLAGS[self.script], *self.flags, "--output_dir", str(output_dir)]
        return first + [flag.format(**places) for flag in flags]

    def expected_text(self, folder: Path) -> str:
        return self.expected.format(folder=folder)


def _jsonl(*records: object) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)


SQUAD = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "Denver won in Santa Clara.", "qas": [
    {"id": "q1", "question": "Where?", "answers": [{"text": "Santa Clara", "answer_start": 14}]}]}]}]}  # fmt: skip
SQUAD_TEXT = json.dumps(SQUAD, indent=1)
RACE = {"example_id": "high1", "article": "The fox jumps.", "question": "What jumps?",
        "options": ["a fox", "a dog", "a cat", "a bird"], "answer": "A"}  # fmt: skip
TACRED = {"id": "ex0", "relation": "org:founded_by", "token": ["Microsoft", "was", "started", "by", "Paul", "Allen"],
          "subj_start": 0, "subj_end": 0, "obj_start": 4, "obj_end": 5, "subj_type": "ORGANIZATION",
          "obj_type": "PERSON"}  # fmt: skip
RTE_HEADER = "index\tsentence1\tsentence2\tlabel\n"
RTE_ROW = f"0\t{TEXT}\tA fox jumps.\tentailment\n"
CONLL_LINE = "story\t0\t{index}\t{word}\t_\t_\t_\t_\t_\t_\t_\t_\t{mention}\n"
CONLL = ("#begin document (story); part 0\n" + CONLL_LINE.format(index=0, word="Anna", mention="(0)")
         + CONLL_LINE.format(index=1, word="smiled", mention="") + CONLL_LINE.format(index=2, word="she", mention="(0)")
         + "\n#end document\n")  # fmt: skip
ABLATION = {"pretraining": {"model_size": "tiny", "max_steps": 2}, "arms": {"span": {"masking": "span"}},
            "tasks": {"rte": {"script": "run_glue.py", "task_name": "rte"}}, "seeds": [1]}  # fmt: skip


def _glue(rows: str, name: str = "train.tsv") -> dict:
    return {"files": {f"glue/RTE/{name}": rows}, "flags": ["--task_name", "rte", "--data_dir", "{folder}/glue"]}


def _train_case(name: str, script: str, file: str, content: str | bytes, expected: str) -> Case:
    """A case whose one broken file is given as --train_file."""
    return Case(name, script, {file: content}, ["--train_file", f"{{folder}}/{file}"], expected)


def _folder_case(task: str, script: str, name: str, content: str, flags: tuple[str, ...] = ()) -> Case:
    """A folder where --train_file's file belongs (the folder holds `name`): every script refuses it alike."""
    return Case(f"{task}: a folder as --train_file", script, {f"data/{name}": content},
                [*flags, "--train_file", "{folder}/data"], "{folder}/data is a folder, not a file")


def _learning_rate_case(task: str, script: str, name: str, content: str, rate: str) -> Case:
    """--learning_rate `rate` (not above 0) on otherwise valid data: every script refuses it alike."""
    flags = ["--train_file", f"{{folder}}/{name}", f"--learning_rate={rate}"]
    return Case(f"{task}: {'zero' if float(rate) == 0 else 'negative'} learning rate", script, {name: content}, flags,
                "--learning_rate must be above 0")


CASES = [
    # --- run_pretraining.py: corpora and settings
    _train_case("pretraining: truncated JSON lines", "run_pretraining.py",
                "c.jsonl", _jsonl({"text": TEXT}) + '{"text": "Th', "{folder}/c.jsonl, line 2: not valid JSON"),
    _train_case("pretraining: truncated JSON", "run_pretraining.py",
                "c.json", f'[{{"text": "{TEXT}"}},\n{{"text": "Th', "{folder}/c.json, line 2: not valid JSON"),
    _train_case("pretraining: garbled JSON line", "run_pretraining.py", "c.jsonl",
                _jsonl({"text": TEXT}) + "}{ not json\n" + _jsonl({"text": TEXT}),
                "{folder}/c.jsonl, line 2: not valid JSON"),
    _train_case("pretraining: empty JSON lines", "run_pretraining.py",
                "c.jsonl", "", "No documents in {folder}/c.jsonl: the file is empty"),
    _train_case("pretraining: JSON lines without the text column", "run_pretraining.py",
                "c.jsonl", _jsonl({"body": TEXT}), "has no column 'text'"),
    _train_case("pretraining: CSV without the text column", "run_pretraining.py",
                "c.csv", f"body\n{TEXT}\n", "{folder}/c.csv has no column 'text'"),
    _train_case("pretraining: text not UTF-8", "run_pretraining.py",
                "c.txt", b"Good line.\nCaf\xe9.\n", "{folder}/c.txt, line 2: byte 0xe9"),
    _train_case("pretraining: JSON lines not UTF-8", "run_pretraining.py",
                "c.jsonl", b'{"text": "Caf\xe9"}\n', "{folder}/c.jsonl, line 1: byte 0xe9"),
    _folder_case("pretraining", "run_pretraining.py", "c.txt", TEXT),
    _learning_rate_case("pretraining", "run_pretraining.py", "c.txt", TEXT, "-1e-4"),
    _learning_rate_case("pretraining", "run_pretraining.py", "c.txt", TEXT, "0"),
    Case("pretraining: config with a wrongly typed value", "run_pretraining.py",
         {"run.yaml": "max_steps: ten\n", "c.txt": TEXT}, ["--train_file", "{folder}/c.txt"],
         "Config file {folder}/run.yaml: max_steps is 'ten', which is not a whole number",
         config_first="{folder}/run.yaml"),
    Case("pretraining: config with an unknown key", "run_pretraining.py", {"run.json": '{"learning_rat": 1e-4}'},
         [], "Config file {folder}/run.json has unknown keys: learning_rat", config_first="{folder}/run.json"),
    Case("pretraining: truncated YAML config", "run_pretraining.py", {"run.yaml": "max_steps: [1, 2\n"}, [],
         "Config file {folder}/run.yaml is not valid YAML", config_first="{folder}/run.yaml"),
    # --- run_squad.py
    _train_case("squad: truncated JSON", "run_squad.py",
                "train.json", SQUAD_TEXT[: len(SQUAD_TEXT) // 2], "{folder}/train.json, line"),
    _train_case("squad: garbled JSON", "run_squad.py", "train.json", "{]} not json", "{folder}/train.json"),
    _train_case("squad: empty file", "run_squad.py", "train.json", "", "{folder}/train.json"),
    Case("squad: answer outside the context", "run_squad.py", {"train.json": json.dumps(
        {**SQUAD, "data": [{"title": "t", "paragraphs": [{"context": "Denver won.", "qas": [
            {"id": "q1", "question": "Where?", "answers": [{"text": "Santa Clara", "answer_start": 40}]}]}]}]})},
         ["--train_file", "{folder}/train.json"], "{folder}/train.json"),
    Case("squad: question field missing", "run_squad.py", {"train.jsonl": _jsonl(
        {"id": "q1", "context": "Denver won.", "answers": {"text": ["Denver"], "answer_start": [0]}})},
         ["--train_file", "{folder}/train.jsonl"], "{folder}/train.jsonl, line 1"),
    _train_case("squad: not UTF-8", "run_squad.py",
                "train.json", b'{"version": "1.1",\n "data": [\xff]}', "{folder}/train.json, line 2: byte 0xff"),
    _folder_case("squad", "run_squad.py", "train.json", SQUAD_TEXT),
    _learning_rate_case("squad", "run_squad.py", "train.json", SQUAD_TEXT, "-3e-5"),
    # --- run_glue.py
    Case("glue: TSV row cut short", "run_glue.py", **_glue(RTE_HEADER + RTE_ROW + "1\tA truncated row\n"),
         expected="{folder}/glue/RTE/train.tsv, line 3"),
    Case("glue: TSV row with an extra column", "run_glue.py", **_glue(RTE_HEADER + RTE_ROW.rstrip("\n") + "\textra\n"),
         expected="{folder}/glue/RTE/train.tsv, line 2"),
    Case("glue: unknown label", "run_glue.py", **_glue(RTE_HEADER + RTE_ROW.replace("entailment", "maybe")),
         expected="{folder}/glue/RTE/train.tsv, line 2"),
    Case("glue: empty TSV", "run_glue.py", **_glue(""), expected="{folder}/glue/RTE/train.tsv"),
    Case("glue: TSV not UTF-8", "run_glue.py", **_glue((RTE_HEADER + "0\tCaf\xe9\tb\tentailment\n").encode("latin-1")),
         expected="{folder}/glue/RTE/train.tsv, line 2: byte 0xe9"),
    Case("glue: CSV without a text column", "run_glue.py", {"train.csv": "sentence1,label\nA fox.,entailment\n"},
         ["--task_name", "rte", "--train_file", "{folder}/train.csv"], "{folder}/train.csv"),
    _folder_case("glue", "run_glue.py", "train.csv", "x", ("--task_name", "rte")),
    # --- run_race.py
    _train_case("race: truncated JSON lines", "run_race.py",
                "train.jsonl", _jsonl(RACE) + '{"example_id": "hi', "{folder}/train.jsonl, line 2: not valid JSON"),
    _train_case("race: unknown answer label", "run_race.py",
                "train.jsonl", _jsonl({**RACE, "answer": "E"}), "{folder}/train.jsonl, line 1"),
    _train_case("race: options missing", "run_race.py", "train.jsonl",
                _jsonl({key: value for key, value in RACE.items() if key != "options"}),
                "{folder}/train.jsonl, line 1"),
    _train_case("race: empty file", "run_race.py", "train.jsonl", "", "{folder}/train.jsonl"),
    _folder_case("race", "run_race.py", "train.jsonl", _jsonl(RACE)),
    # --- run_relation.py
    _train_case("relation: truncated JSON", "run_relation.py",
                "train.json", json.dumps([TACRED, TACRED])[:150], "{folder}/train.json"),
    _train_case("relation: object span outside the sentence", "run_relation.py",
                "train.json", json.dumps([{**TACRED, "obj_start": 7, "obj_end": 9}]), "{folder}/train.json"),
    _train_case("relation: relation field missing", "run_relation.py", "train.json",
                json.dumps([{key: value for key, value in TACRED.items() if key != "relation"}]),
                "{folder}/train.json"),
    _learning_rate_case("relation", "run_relation.py", "train.json", json.dumps([TACRED]), "0"),
    # --- run_coref.py
    _train_case("coref: truncated CoNLL", "run_coref.py",
                "train.conll", CONLL[: CONLL.index("smiled") + 12], "{folder}/train.conll"),
    _train_case("coref: CoNLL line with too few columns", "run_coref.py", "train.conll",
                CONLL.replace("story\t0\t0\tAnna\t_\t_\t_\t_\t_\t_\t_\t_\t(0)", "story\t0\tAnna\t(0)"),
                "{folder}/train.conll, document story_0: line 2 has 4 columns"),
    _train_case("coref: unclosed mention", "run_coref.py",
                "train.conll", CONLL.replace("(0)\n", "(0\n", 1), "{folder}/train.conll"),
    _train_case("coref: garbled JSON lines", "run_coref.py",
                "train.jsonlines", "{not json\n", "{folder}/train.jsonlines, line 1"),
    _train_case("coref: CoNLL not UTF-8", "run_coref.py", "train.conll",
                CONLL.replace("Anna", "Ann\xe9").encode("latin-1"), "{folder}/train.conll, line 2: byte 0xe9"),
    Case("coref: GAP file without its columns", "run_coref.py", {"train.conll": CONLL, "gap.tsv": "ID\tText\n1\tHi\n"},
         ["--train_file", "{folder}/train.conll", "--gap_file", "{folder}/gap.tsv"], "{folder}/gap.tsv is not a GAP file"),
    # --- run_ablation.py
    Case("ablation: wrongly typed pretraining value", "run_ablation.py",
         {"a.json": json.dumps({**ABLATION, "pretraining": {"model_size": "tiny", "max_steps": "two"}})}, [],
         "{folder}/a.json, arm 'span': max_steps is 'two', which is not a whole number", config_first="{folder}/a.json"),
    Case("ablation: wrongly typed task value", "run_ablation.py", {"a.json": json.dumps(
        {**ABLATION, "tasks": {"rte": {"script": "run_glue.py", "task_name": "rte", "learning_rate": [1]}}})}, [],
         "{folder}/a.json, task 'rte': learning_rate is [1], which is not a number", config_first="{folder}/a.json"),
    Case("ablation: unknown key", "run_ablation.py", {"a.json": json.dumps({**ABLATION, "seed": [1]})}, [],
         "{folder}/a.json: the top level has unknown keys: seed", config_first="{folder}/a.json"),
    Case("ablation: truncated YAML", "run_ablation.py", {"a.yaml": "pretraining: {model_size: tiny\n"}, [],
         "{folder}/a.yaml is not valid YAML", config_first="{folder}/a.yaml"),
]  # fmt: skip


def tiny_model(folder: Path) -> tuple[Path, Path]:
    """A tiny SpanBERT checkpoint with its tokenizer (what the fine-tuning cases name), and the tokenizer alone."""
    from spanroberta.data.tokenizer import train_byte_level_bpe

    tokenizer = train_byte_level_bpe([TEXT] * 20, vocab_size=300, min_frequency=1, show_progress=False)
    tokenizer.save_pretrained(folder / "tokenizer")
    model = tiny_checkpoint(tokenizer, folder / "model", max_span_targets=4, sbo_position_embedding_size=8)
    return model, folder / "tokenizer"


def run_case(case: Case, folder: Path, model: Path, tokenizer: Path) -> dict:
    """Runs `case` as `python SCRIPT ...` from the project root; returns its outcome: `refused cleanly`, or the
    failure (`traceback`, `hang`, `no paragraph` when the exit is not the expected one-paragraph error, `output
    folder created`)."""
    inputs, output_dir = folder / "inputs", folder / "out"
    command = [sys.executable, str(ROOT / case.script), *case.command(inputs, model, tokenizer, output_dir)]
    began = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS)
    except subprocess.TimeoutExpired as timeout:
        # What it had printed when it was stopped: where it was (its start-up, or a wait).
        printed = timeout.stderr.decode(errors="replace") if isinstance(timeout.stderr, bytes) else timeout.stderr
        return {"case": case.name, "outcome": "hang", "seconds": HANG_SECONDS, "stderr_tail": (printed or "")[-2000:]}
    seconds = round(time.perf_counter() - began, 1)
    last_line = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    if "Traceback" in done.stderr:
        outcome = "traceback"
    elif (done.returncode == 0 or not last_line.startswith(f"{case.script}: error: ")
          or case.expected_text(inputs) not in last_line):  # fmt: skip
        outcome = "no paragraph"
    elif output_dir.exists():
        outcome = "output folder created"
    else:
        outcome = "refused cleanly"
    return {"case": case.name, "outcome": outcome, "exit_status": done.returncode, "message": last_line,
            "seconds": seconds}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results-dir", default=None, help="where the record goes (default benchmarks/results)")
    options = parser.parse_args(argv)
    started = start_run()
    outcomes = []
    with tempfile.TemporaryDirectory() as scratch:
        model, tokenizer = tiny_model(Path(scratch))
        for number, case in enumerate(CASES):
            outcomes.append(run_case(case, Path(scratch) / f"case-{number}", model, tokenizer))
            print(f"[bad inputs] {case.name}: {outcomes[-1]['outcome']}", flush=True)
    failures = {kind: sum(outcome["outcome"] == kind for outcome in outcomes)
                for kind in ("traceback", "hang", "no paragraph", "output folder created")}  # fmt: skip
    results = {"cases_tried": len(outcomes),
               "refused_cleanly": sum(outcome["outcome"] == "refused cleanly" for outcome in outcomes),
               "failures": failures, "cases": outcomes}  # fmt: skip
    settings = {"kind": "bad-inputs", "hang_seconds": HANG_SECONDS, "scripts": sorted({case.script for case in CASES})}
    path = write_record("reliability", settings, results, started=started, name="bad-inputs",
                        results_dir=options.results_dir)  # fmt: skip
    print(f"[bad inputs] {results['refused_cleanly']}/{results['cases_tried']} refused cleanly; record: {path}")


if __name__ == "__main__":
    main()
