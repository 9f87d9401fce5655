"""The task benchmark's data (tasks/scores.py): for each task, the data it reads from ../shared/data, how it is split,
and its floors; a task's budget at one size (`Budget`) says how much of it trains and evaluates.

A floor is what a model that learned nothing scores on the evaluated examples, in the row's units (0-100): the best
of the answers that need no learning (tasks/heuristics.py), each scored on those examples and kept with the floor
(`Prepared.answers`): the trivial ones (chance, the majority class, "paraphrase" for MRPC's F1, the most frequent
relation for SemEval, each of A, B, both and neither for GAP, an empty answer for SQuAD and MRQA, which on SQuAD
v2.0 is right on every unanswerable question, no mention found for LitBank) and the cheap heuristics the tasks'
literature reports: the longest option, the option sharing the most words with the article and the sliding window
for RACE; a sliding-window span for SQuAD v1.1, v2.0 and MRQA; word-overlap similarity for STS-B; the nearer name
for GAP; exact string match over capitalised names and pronouns for LitBank. CoLA's floor is a constant answer's
Matthews correlation, 0: no cheap heuristic of its literature judges grammaticality.

Each answer that gives one outcome per evaluated example keeps them (`Prepared.outcomes`, in tasks/outcomes.py's
compact form and in the order the task's script writes the model's: the evaluation file's), with each example's
group (`Prepared.groups`: a question's article for SQuAD, MRQA and RACE, a LitBank document, and for GLUE, SemEval
and GAP the example itself), so that a model's outcomes are compared with the floor's example by example, resampling
whole groups (benchmarks/statistics.py's paired bootstrap).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import (DATA, SQUAD_DEV, SQUAD_TRAIN_ARTICLES, glue_files, sample, sample_questions,
                               split_by_article, squad_v1_scores, write_article_split, write_jsonl)
from benchmarks.tasks.heuristics import (best, classification_heuristics, gap_answers, gap_decisions, litbank_answers,
                                         litbank_pairs, race_heuristics, race_picks, sliding_window_answer,
                                         STSB_SIMILARITIES, stsb_heuristics)
from spanroberta.finetuning.task import MEAN
from spanroberta.tasks.coreference.scoring import document_outcomes
from spanroberta.tasks.coreference.gap_scoring import gap_outcomes
from spanroberta.tasks.relation.scoring import semeval_score
from spanroberta.tasks.coreference.documents import read_coref_documents
from spanroberta.tasks.coreference.gap import read_gap
from spanroberta.tasks.race.data import RACE_CONFIGS
from spanroberta.tasks.squad.scoring import squad_v1_question_scores, squad_v2_question_scores

SQUAD_V2_FILE = DATA / "squad" / "dev-v2.0.part-a.json"
# SQuAD v2.0: of the shared part's 8 articles, the last 2 are the tuning split (the mix of added SQuAD v1.1 questions
# was chosen on their scores); the reporting split is 2 of the first 6, drawn at random, and the other 4 train.
SQUAD_V2_POOL, SQUAD_V2_REPORTING = 6, 2
SQUAD_V2_SPLIT = "reporting: 2 of the first 6 articles, drawn with seed 0"
# RACE: each level's dev questions are its tuning split (the budgets were chosen on their scores); the reporting
# split is articles of the level's train file held out at random until they hold at least as many questions as its
# dev file, and training draws from the other articles (an article's questions never meet on both sides).
RACE_SPLIT = "reporting: train articles held out at random (seed 0), as many questions as dev"
# SemEval: of the 8,000 shared sentences, the last 1,000 are the tuning split (the entity markers and the epochs
# were chosen on their scores); the reporting split is 1,000 drawn from the first 7,000, which no choice looked at,
# and the other 6,000 train.
SEMEVAL_POOL, SEMEVAL_EVAL = 7000, 1000
# Budget.split of SemEval's budgets: records without it evaluated on the tuning split, then the only one.
SEMEVAL_SPLIT = "reporting: 1000 of the first 7000, label-stratified, seed 0"
LITBANK_TRAIN = 80  # documents sorted by name: the first 80 train, the last 10 evaluate
GAP_FILE = DATA / "coref" / "gap" / "gap-development.tsv"


@dataclass(frozen=True)
class Budget:
    """One task's data and hyperparameters at one size. Samples are drawn with seed 0 (benchmarks.common.sample), so
    every seed of a size sees the same examples, except two taken in file order: MRQA's evaluation questions (the
    first `eval`, run_squad.py's --max_eval_samples) and GAP's examples (the first `gap_examples`)."""

    train: int | None  # training examples (questions, sentences, documents; RACE's per level); None: all of the split
    eval: int | None  # evaluation examples (RACE's per level); None: all
    length: int  # tokens per input (per option for RACE, per segment for coreference)
    batch: int
    learning_rate: float
    epochs: float
    options: dict[str, Any] = field(default_factory=dict)  # further flags of the task's script
    gap_examples: int | None = None  # coreference: the first N GAP development examples (None: all 2,000)
    # SQuAD v2.0: this many SQuAD v1.1 questions (None: all 9,262) join its training part, drawn from the v1.1
    # articles the v2.0 part does not hold (SQuAD 2.0's own training set is SQuAD 1.1's with unanswerable questions
    # added).
    squad_v1_train: int | None = 0
    # The task's split, where it changed after the task's first records (None: the first one), so that a record of
    # the earlier split is another budget: run again, and never shown as the current split's score.
    split: str | None = None

    def as_record(self) -> dict[str, Any]:
        """The budget as a record holds it (through JSON)."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def completed(cls, recorded: dict[str, Any]) -> dict[str, Any]:
        """A record's budget with each field the record predates at its default."""
        defaults = {f.name: f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
                    for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING
                    or f.default_factory is not dataclasses.MISSING}  # fmt: skip
        return json.loads(json.dumps({**defaults, **recorded}))

    def matches(self, recorded: dict[str, Any]) -> bool:
        """Whether a record's budget is this one; a field the record predates counts at its default."""
        return self.completed(recorded) == self.as_record()



@dataclass
class Prepared:
    """A task's data written for one size: the script's data flags, each row's floor (0-100), a description of the
    data for the record, per row the score (0-100) of each answer that learns nothing (the floor is the best), the
    per-example outcomes of those answers that give one per example, and each evaluated example's group."""

    flags: list[str]
    floors: dict[str, float]
    data: dict[str, Any]
    answers: dict[str, dict[str, float]] = field(default_factory=dict)
    outcomes: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # row label -> answer -> outcomes
    groups: dict[str, list[str | int]] = field(default_factory=dict)  # row label -> each example's group


def prepared_with_floors(flags: list[str], answers: dict[str, dict[str, float]], data: dict[str, Any],
                         outcomes: dict[str, dict[str, dict[str, Any]]] | None = None,
                         groups: dict[str, list[str | int]] | None = None) -> Prepared:  # fmt: skip
    """A Prepared whose floors are the best of each row's answers."""
    return Prepared(flags, {label: best(scores)[1] for label, scores in answers.items()}, data, answers,
                    outcomes or {}, groups or {})  # fmt: skip


def question_outcomes(scores: dict[str, tuple[Any, float]]) -> dict[str, Any]:
    """The outcomes of SQuAD-style per-question scores (exact match, F1): each question's F1 (0-1), the score's
    mean."""
    return {"scorer": MEAN, "values": [f1 for _, f1 in scores.values()]}


def evaluated_examples(budget: dict[str, Any]) -> dict[str, Any]:
    """The fields of a budget (as a record holds it) that decide which examples a task evaluates: two budgets alike
    in them evaluate the same examples, so their floors are the same."""
    fields = ("eval", "gap_examples", "split")
    defaults = {f.name: f.default for f in dataclasses.fields(Budget) if f.name in fields}
    return {name: budget.get(name, defaults[name]) for name in fields}



# --- SQuAD v1.1, v2.0 and MRQA: split by article ---


def _squad_flags(files: dict[str, Path], budget: Budget) -> list[str]:
    return ["--train_file", str(files["train"]), "--validation_file", str(files["validation"]),
            "--max_seq_length", str(budget.length)]  # fmt: skip


def article_questions(articles: list[dict]) -> list[tuple[str, str, dict]]:
    """Each question of nested SQuAD articles as (its article's title, its context, the question), in file order."""
    return [(a["title"], p["context"], qa) for a in articles for p in a["paragraphs"] for qa in p["qas"]]


def sliding_window_answers(questions: list[tuple[str, str, dict]], key: str) -> dict[str, str]:
    """heuristics.sliding_window_answer for each (group, context, question), by the question's `key`."""
    return {qa[key]: sliding_window_answer(context, qa["question"]) for _, context, qa in questions}


def squad_v1_floor(questions: list[tuple[str, str, dict]], key: str,
                   gold: dict[str, list[str]]) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:  # fmt: skip
    """The F1 (0-100) and the per-question outcomes of the empty answer and the sliding window on SQuAD v1.1-style
    questions, each named by its `key` and answered by any of its `gold` answers."""
    predicted = {"empty answer": dict.fromkeys(gold, ""), "sliding window": sliding_window_answers(questions, key)}
    answers = {name: squad_v1_scores(gold, predictions)["f1"] for name, predictions in predicted.items()}
    outcomes = {name: question_outcomes(squad_v1_question_scores(gold, predictions))
                for name, predictions in predicted.items()}  # fmt: skip
    return answers, outcomes


def prepare_squad(folder: Path, budget: Budget) -> Prepared:
    files = split_by_article(SQUAD_DEV, SQUAD_TRAIN_ARTICLES, budget.train, budget.eval, folder)
    questions = article_questions(json.loads(files["validation"].read_text())["data"])
    gold = {qa["id"]: [answer["text"] for answer in qa["answers"]] for _, _, qa in questions}
    answers, outcomes = squad_v1_floor(questions, "id", gold)
    return prepared_with_floors(_squad_flags(files, budget), {"SQuAD v1.1": answers},
                                {"split": f"dev-v1.1.json articles 1-{SQUAD_TRAIN_ARTICLES} train, the rest evaluate"},
                                {"SQuAD v1.1": outcomes},
                                {"SQuAD v1.1": [title for title, _, _ in questions]})  # fmt: skip


def squad_v2_splits() -> tuple[str, dict[str, list[dict]]]:
    """The shared SQuAD v2.0 part's version and its articles in three splits: `train`, `reporting` (the scores
    reported: SQUAD_V2_REPORTING of the first SQUAD_V2_POOL articles, drawn with seed 0) and `tuning` (the rest,
    on which the mix of added SQuAD v1.1 questions was chosen)."""
    document = json.loads(SQUAD_V2_FILE.read_text(encoding="utf-8"))
    pool, tuning = document["data"][:SQUAD_V2_POOL], document["data"][SQUAD_V2_POOL:]
    drawn = set(random.Random(0).sample(range(SQUAD_V2_POOL), SQUAD_V2_REPORTING))
    return document["version"], {"train": [a for i, a in enumerate(pool) if i not in drawn],
                                 "reporting": [a for i, a in enumerate(pool) if i in drawn], "tuning": tuning}


def prepare_squad_v2(folder: Path, budget: Budget) -> Prepared:
    version, splits = squad_v2_splits()
    files = write_article_split(version, splits["train"], splits["reporting"], budget.train, budget.eval,
                                folder / SQUAD_V2_FILE.stem)  # fmt: skip
    evaluated = article_questions(json.loads(files["validation"].read_text())["data"])
    questions = [qa for _, _, qa in evaluated]
    # evaluate-v2.0.py scores an empty answer 1 on an unanswerable question and 0 on an answerable one, and a
    # non-empty answer 0 on an unanswerable one.
    empty_answer = 100 * sum(qa["is_impossible"] for qa in questions) / len(questions)
    answerable = {qa["id"]: [answer["text"] for answer in qa["answers"]] for qa in questions if not qa["is_impossible"]}
    window_answers = sliding_window_answers(evaluated, "id")
    window = squad_v1_scores(answerable, window_answers)["f1"] * len(answerable) / len(questions)
    gold = {qa["id"]: [answer["text"] for answer in qa["answers"]] for qa in questions}
    outcomes = {"empty answer": question_outcomes(squad_v2_question_scores(gold, dict.fromkeys(gold, ""))),
                "sliding window everywhere": question_outcomes(squad_v2_question_scores(gold, window_answers))}
    titles = lambda part: ", ".join(a["title"] for a in splits[part])  # noqa: E731
    split = (f"reporting split: {titles('reporting')} ({len(questions)} questions evaluate), {SQUAD_V2_REPORTING} of "
             f"{SQUAD_V2_FILE.name}'s first {SQUAD_V2_POOL} articles drawn at random (seed 0); {titles('train')} "
             f"train; the last {len(splits['tuning'])} articles ({titles('tuning')}) are the tuning split (the mix of "
             "added SQuAD v1.1 questions was chosen on it), unused here")  # fmt: skip
    if budget.squad_v1_train != 0:
        added = add_squad_v1_questions(files["train"], SQUAD_V2_FILE, budget.squad_v1_train)
        split += f"; {added} dev-v1.1.json questions from articles outside the part also train"
    return prepared_with_floors(_squad_flags(files, budget) + ["--version_2_with_negative"],
                                {"SQuAD v2.0": {"empty answer": empty_answer, "sliding window everywhere": window}},
                                {"split": split}, {"SQuAD v2.0": outcomes},
                                {"SQuAD v2.0": [title for title, _, _ in evaluated]})


def add_squad_v1_questions(train_file: Path, v2_source: Path, count: int | None) -> int:
    """Adds `count` SQuAD v1.1 questions (drawn with seed 0; None: all) to a v2.0 training file, from the v1.1
    articles that `v2_source` does not hold: its evaluation articles' answerable questions are v1.1 questions too.
    Returns how many it added."""
    v2_titles = {article["title"] for article in json.loads(v2_source.read_text(encoding="utf-8"))["data"]}
    articles = [a for a in json.loads(SQUAD_DEV.read_text(encoding="utf-8"))["data"]
                if a["title"] not in v2_titles]  # fmt: skip
    added = sample_questions(articles, count)
    questions = [qa for a in added for p in a["paragraphs"] for qa in p["qas"]]
    for qa in questions:
        qa["is_impossible"] = False  # v2.0's field, which the v1.1 file lacks
    document = json.loads(train_file.read_text(encoding="utf-8"))
    document["data"] += added
    train_file.write_text(json.dumps(document), encoding="utf-8")
    return len(questions)


def prepare_mrqa(folder: Path, budget: Budget) -> Prepared:
    """Trains on SQuAD v1.1's first 36 articles, evaluates on MRQA's SQuAD dev lines of the last 12: the first
    `budget.eval` questions in the file's order (run_squad.py's --max_eval_samples), not a seeded sample, so they
    come from some of those 12 articles, not from all of them: the file holds a few articles' lines at a time,
    interleaved, in SQuAD's article order (the record's data description counts the articles evaluated,
    `eval_articles`, against `held_out_articles`)."""
    files = split_by_article(SQUAD_DEV, SQUAD_TRAIN_ARTICLES, budget.train, budget.eval, folder)
    articles = json.loads(SQUAD_DEV.read_text(encoding="utf-8"))["data"]
    held_out = {p["context"]: a["title"] for a in articles[SQUAD_TRAIN_ARTICLES:] for p in a["paragraphs"]}
    with gzip.open(DATA / "mrqa" / "SQuAD-dev.jsonl.gz", "rt", encoding="utf-8") as source:
        header, *lines = [json.loads(line) for line in source]
    kept = [line for line in lines if line["context"] in held_out]
    validation = folder / "SQuAD-dev-held-out.jsonl.gz"
    with gzip.open(validation, "wt", encoding="utf-8") as target:
        target.write("".join(json.dumps(row) + "\n" for row in [header, *kept]))
    questions = [(held_out[line["context"]], line["context"], qa) for line in kept for qa in line["qas"]]
    questions = questions[: budget.eval]
    answers, outcomes = squad_v1_floor(questions, "qid", {qa["qid"]: qa["answers"] for _, _, qa in questions})
    flags = ["--train_file", str(files["train"]), "--validation_file", str(validation), "--max_seq_length",
             str(budget.length)] + (["--max_eval_samples", str(budget.eval)] if budget.eval else [])  # fmt: skip
    return prepared_with_floors(flags, {"MRQA SQuAD": answers},
                                {"split": f"dev-v1.1.json articles 1-{SQUAD_TRAIN_ARTICLES} train, MRQA's SQuAD-dev "
                                          "lines of the rest evaluate", "eval_contexts": len(kept),
                                 "eval_articles": len({title for title, _, _ in questions}),
                                 "held_out_articles": len(set(held_out.values()))},
                                {"MRQA SQuAD": outcomes},
                                {"MRQA SQuAD": [title for title, _, _ in questions]})  # fmt: skip


# --- GLUE, RACE, SemEval ---


def prepare_glue(task: str, label: str) -> Callable[[Path, Budget], Prepared]:
    def prepare(folder: Path, budget: Budget) -> Prepared:
        files = glue_files(folder, task, budget.train, budget.eval)
        rows = [json.loads(line) for line in files["validation"].read_text().splitlines()]
        labels = [row["label"] for row in rows]
        majority = Counter(labels).most_common(1)[0][0]
        if task == "cola":  # a constant answer has no Matthews correlation
            answers = {"constant answer": 0.0}
            outcomes = {"constant answer": {"scorer": "matthews_correlation", "predictions": [majority] * len(labels)}}
        elif task == "stsb":
            pairs = [(row["sentence1"], row["sentence2"]) for row in rows]
            answers = stsb_heuristics(pairs, labels)
            outcomes = {name: {"scorer": "spearmanr", "predictions": [similarity(a, b) for a, b in pairs]}
                        for name, similarity in STSB_SIMILARITIES.items()}  # fmt: skip
        elif task == "mrpc":
            answers = classification_heuristics(labels, positive_f1=True)
            outcomes = {"positive everywhere": {"scorer": "f1", "predictions": [1] * len(labels)}}
        else:
            answers = classification_heuristics(labels)
            outcomes = {"majority class": {"scorer": "accuracy", "predictions": [majority] * len(labels)}}
        outcomes = {name: {**outcome, "references": labels} for name, outcome in outcomes.items()}
        flags = ["--task_name", task, "--train_file", str(files["train"]), "--validation_file",
                 str(files["validation"]), "--max_seq_length", str(budget.length)]  # fmt: skip
        return prepared_with_floors(flags, {label: answers}, {"split": "GLUE train (sampled) and dev",
                                                              "eval": len(labels)},
                                    {label: outcomes}, {label: list(range(len(labels)))})  # fmt: skip

    return prepare


def hold_out_articles(questions: list[dict], article_key: str, count: int,
                      seed: int = 0) -> tuple[list[dict], list[dict]]:  # fmt: skip
    """Splits `questions` by article into the rest and a hold-out: articles (`question[article_key]`) drawn at random
    with `seed` join the hold-out until it holds at least `count` questions, so no article is on both sides. Both
    parts keep the questions' original order."""
    by_article: dict[Any, int] = {}
    for question in questions:
        by_article[question[article_key]] = by_article.get(question[article_key], 0) + 1
    drawn = sorted(by_article, key=str)
    random.Random(seed).shuffle(drawn)
    held, total = set(), 0
    for article in drawn:
        if total >= count:
            break
        held.add(article)
        total += by_article[article]
    return ([q for q in questions if q[article_key] not in held], [q for q in questions if q[article_key] in held])


def race_splits(level: str) -> dict[str, list[dict]]:
    """One RACE level's questions in three splits: `train`, `reporting` (the scores reported: train articles held out
    with `hold_out_articles`, as many questions as the dev file) and `tuning` (the dev file, on which the budgets were
    chosen)."""
    with gzip.open(DATA / "race" / f"train.{level}.jsonl.gz", "rt", encoding="utf-8") as file:
        train = [json.loads(line) for line in file]
    dev = [json.loads(line) for line in (DATA / "race" / f"dev.{level}.jsonl").read_text().splitlines()]
    rest, reporting = hold_out_articles(train, "example_id", len(dev))
    return {"train": rest, "reporting": reporting, "tuning": dev}


def prepare_race(folder: Path, budget: Budget) -> Prepared:
    """RACE as RoBERTa fine-tunes it (Liu et al. 2019, Section 5.3 and Table 7): one model trained on both school
    levels' questions, scored on each level's reporting split apart. `budget.train` and `budget.eval` count
    questions per level, so the two levels weigh the same in training."""
    train_files, eval_files, answers, outcomes, groups, sizes = [], [], {}, {}, {}, []
    for level in RACE_CONFIGS["all"]:
        splits = race_splits(level)
        train_files.append(write_jsonl(folder / f"race-{level}-train.jsonl", sample(splits["train"], budget.train)))
        evaluated = sample(splits["reporting"], budget.eval)
        eval_files.append(write_jsonl(folder / f"race-{level}-reporting.jsonl", evaluated))
        picks = race_picks(evaluated)
        answers[f"RACE {level}"] = race_heuristics(evaluated, picks)
        outcomes[f"RACE {level}"] = {
            "chance": {"scorer": MEAN, "values": [1 / len(row["options"]) for row in evaluated]},
            **{name: {"scorer": MEAN, "values": [int("ABCD"[i] == row["answer"]) for i, row in zip(picked, evaluated)]}
               for name, picked in picks.items()}}  # fmt: skip
        groups[f"RACE {level}"] = [row["example_id"] for row in evaluated]  # the article's file
        sizes.append(f"{level} {len(splits['reporting'])} ({len(evaluated)} evaluate)")
    flags = ["--train_file", *map(str, train_files), "--validation_file", *map(str, eval_files),
             "--max_seq_length", str(budget.length)]  # fmt: skip
    split = ("reporting split: each level's train articles held out at random (seed 0) until they hold as many "
             f"questions as its dev file: {', '.join(sizes)}; the other articles' questions train (sampled); each "
             "level's dev file is the tuning split (the budgets were chosen on it), unused here")  # fmt: skip
    return prepared_with_floors(flags, answers, {"split": split}, outcomes, groups)


def best_constant_semeval(relations: list[str]) -> float:
    """The best macro F1 (0-100) of one relation answered for every sentence."""
    return 100 * semeval_score([best_constant_relation(relations)] * len(relations), relations)["f1"]


def best_constant_relation(relations: list[str]) -> str:
    """The relation whose answer for every sentence scores the best macro F1 (the first by name of equal ones)."""
    return max(sorted(set(relations)), key=lambda label: semeval_score([label] * len(relations), relations)["f1"])


def stratified_holdout(rows: list[dict], key: str, count: int, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """Splits `rows` into the rest and a hold-out of `count` rows drawn at random with `seed`, stratified by
    `row[key]`: each label gets its share of `count` rounded down, and the rows still to place go to the labels
    with the largest remainders (ties to the more frequent label, then by name), so each label's count is within
    one of its share. Both parts keep the rows' original order."""
    by_label: dict[Any, list[int]] = {}
    for index, row in enumerate(rows):
        by_label.setdefault(row[key], []).append(index)
    shares = {label: len(indices) * count / len(rows) for label, indices in by_label.items()}
    counts = {label: int(share) for label, share in shares.items()}
    ranked = sorted(by_label, key=lambda label: (-(shares[label] - counts[label]), -len(by_label[label]), str(label)))
    for label in ranked[: count - sum(counts.values())]:
        counts[label] += 1
    generator = random.Random(seed)
    held = {index for label in sorted(by_label, key=str)
            for index in generator.sample(by_label[label], counts[label])}  # fmt: skip
    return [row for i, row in enumerate(rows) if i not in held], [row for i, row in enumerate(rows) if i in held]


def semeval_splits() -> dict[str, list[dict]]:
    """SemEval's three splits of the shared sentences: `train`, `reporting` (the scores reported) and `tuning`
    (the last 1,000, on which the entity markers and the epochs were chosen)."""
    sentences = json.loads((DATA / "relation" / "semeval2010_task8" / "train.json").read_text(encoding="utf-8"))
    train, reporting = stratified_holdout(sentences[:SEMEVAL_POOL], "relation", SEMEVAL_EVAL)
    return {"train": train, "reporting": reporting, "tuning": sentences[SEMEVAL_POOL:]}


def prepare_semeval(folder: Path, budget: Budget) -> Prepared:
    splits = semeval_splits()
    train = sample(splits["train"], budget.train)
    dev = sample(splits["reporting"], budget.eval)
    (folder / "semeval-train.json").write_text(json.dumps(train), encoding="utf-8")
    (folder / "semeval-dev.json").write_text(json.dumps(dev), encoding="utf-8")
    flags = ["--train_file", str(folder / "semeval-train.json"), "--validation_file", str(folder / "semeval-dev.json"),
             "--scorer", "semeval", "--max_seq_length", str(budget.length)]  # fmt: skip
    split = (f"reporting split: {len(splits['reporting'])} of the first {SEMEVAL_POOL} sentences held out at random "
             f"(seed 0, stratified by relation), {len(dev)} of them evaluate; {len(train)} of the other "
             f"{len(splits['train'])} train; the last {len(splits['tuning'])} sentences are the tuning split (the "
             "entity markers and epochs were chosen on it), unused here")  # fmt: skip
    relations = [row["relation"] for row in dev]
    constant = best_constant_semeval(relations)
    outcome = {"scorer": "semeval", "predictions": [best_constant_relation(relations)] * len(relations),
               "references": relations}  # fmt: skip
    return prepared_with_floors(flags, {"SemEval-2010 Task 8": {"best single relation everywhere": constant}},
                                {"split": split}, {"SemEval-2010 Task 8": {"best single relation everywhere": outcome}},
                                {"SemEval-2010 Task 8": list(range(len(relations)))})  # fmt: skip


# --- coreference: LitBank, and GAP resolved by the LitBank model ---


def prepare_coref(folder: Path, budget: Budget) -> Prepared:
    gap = folder / "gap-development.tsv"
    lines = GAP_FILE.read_text(encoding="utf-8").splitlines(keepends=True)
    gap.write_text("".join(lines[: 1 + budget.gap_examples] if budget.gap_examples else lines), encoding="utf-8")
    litbank = DATA / "coref" / "litbank"
    evaluated = f"{LITBANK_TRAIN}:{LITBANK_TRAIN + budget.eval}" if budget.eval else f"{LITBANK_TRAIN}:"
    flags = ["--train_file", str(litbank), "--train_documents", f":{budget.train or LITBANK_TRAIN}",
             "--validation_file", str(litbank), "--eval_documents", evaluated, "--keep_singletons",
             "--gap_file", str(gap), "--max_segment_length", str(budget.length)]  # fmt: skip
    split = (f"LitBank documents by name: the first {budget.train or LITBANK_TRAIN} train, {evaluated} evaluate; "
             f"the first {budget.gap_examples or 'all'} GAP development examples resolved by the LitBank model")
    end = LITBANK_TRAIN + budget.eval if budget.eval else None
    documents = read_coref_documents(str(litbank))[LITBANK_TRAIN:end]  # run_coref.py's --eval_documents
    outcomes = {"LitBank": {name: document_outcomes(pairs, keep_singletons=True)
                            for name, pairs in litbank_pairs(documents).items()},
                "GAP": {name: gap_outcomes(decided) for name, decided in gap_decisions(gap).items()}}  # fmt: skip
    groups = {"LitBank": list(range(len(documents))), "GAP": list(range(len(read_gap(gap))))}
    return prepared_with_floors(flags, {"LitBank": litbank_answers(documents), "GAP": gap_answers(gap)},
                                {"split": split}, outcomes, groups)
