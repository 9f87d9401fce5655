"""The tasks of the task benchmark (tasks/scores.py): for each, the script that fine-tunes on it and how its data is
prepared (tasks/preparation.py), the rows it gives the table (the score the row shows, one of those the fine-tuning
task declares in its `reports`, its floor's name and a published score for context), and its budget at each size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.tasks.preparation import (RACE_SPLIT, SEMEVAL_SPLIT, SQUAD_V2_SPLIT, Budget, Prepared, prepare_coref,
                                          prepare_glue, prepare_mrqa, prepare_race, prepare_semeval, prepare_squad,
                                          prepare_squad_v2)
from spanroberta.tasks.registry import FINETUNING_TASKS
from spanroberta.finetuning.task import FineTuningTask, Report

@dataclass(frozen=True)
class Published:
    """A published score for context: never the same model or data as the benchmark's."""

    score: float
    model: str  # with its size
    source: str  # paper and table


@dataclass(frozen=True)
class Row:
    """One line of the table: the score `key` of what the fine-tuning task reports (`report`, its declaration: which
    results file, which scale), shown on 0-100."""

    label: str
    report: Report
    key: str
    metric_name: str
    docs: str  # the docs page that shows this row's latest score
    published: Published | None = None
    # What a record says beyond the score, for the details table under the size table: results -> a short fact.
    note: Callable[[dict[str, Any]], str | None] | None = None

    @property
    def metric(self) -> str:
        """The score's key in the results file (eval_f1, gap_overall_f1)."""
        return f"{self.report.split}_{self.key}"

    def __post_init__(self):
        if not self.report.declares(self.key):
            raise ValueError(f"Row {self.label!r}: {self.key!r} is not a score its task reports ({self.report.keys})")

    @property
    def scale(self) -> float:
        """The factor that puts the score on 0-100."""
        return self.report.to_percent


@dataclass(frozen=True)
class Task:
    name: str
    finetuning: FineTuningTask  # what fine-tunes on it: its script, and what its evaluation reports
    prepare: Callable[[Path, Budget], Prepared]
    rows: tuple[Row, ...]
    # The task whose training questions and articles this one's are (MRQA's SQuAD: SQuAD v1.1's): the headline
    # counts the two as one task.
    same_task_as: str | None = None

    @property
    def script(self) -> str:
        return self.finetuning.script


def gap_note(results: dict[str, Any]) -> str | None:
    """GAP's precision and recall, and how often each answer was given where the record holds it
    (`gap_answered_*`): the gold is never both names, so "both" counts the pronoun's cluster taking in both."""
    scores = results.get("scores", {}).get("gap_results.json", {})
    if "gap_overall_precision" not in scores:
        return None
    note = f"precision {100 * scores['gap_overall_precision']:.1f}, recall {100 * scores['gap_overall_recall']:.1f}"
    answers = [(name, scores.get(f"gap_answered_{key}")) for name, key in
               (("neither", "neither"), ("A only", "a"), ("B only", "b"), ("both (never right)", "both"))]  # fmt: skip
    if all(share is not None for _, share in answers):
        note += "; answered " + ", ".join(f"{name} {100 * share:.0f}%" for name, share in answers)
    return note


def squad_v2_note(results: dict[str, Any]) -> str | None:
    """SQuAD v2.0's F1 on the answerable and the unanswerable questions apart (a model that answers nothing scores
    the floor with 100 on the one and 0 on the other), and the best F1 of any null threshold, searched on the
    evaluation questions themselves (evaluate-v2.0.py's best_f1): where it is no higher than F1, no threshold would
    lift the score and the answers themselves fall short."""
    scores = results.get("scores", {}).get("eval_results.json", {})
    if "eval_HasAns_f1" not in scores:
        return None
    note = (f"F1 {scores['eval_HasAns_f1']:.1f} on the {scores['eval_HasAns_total']} answerable questions, "
            f"{scores['eval_NoAns_f1']:.1f} on the {scores['eval_NoAns_total']} unanswerable ones")
    if "eval_best_f1" in scores:
        note += f"; the best null threshold, chosen on these questions, would score {scores['eval_best_f1']:.1f}"
    return note


# --- the tasks, their rows, and the published scores shown for context ---

BERT_BASE, BERT_LARGE = "BERT-base (110M)", "BERT-large (340M)"
GLUE_TEST = "Devlin et al. 2019, Table 1 (GLUE test set)"
ROBERTA_RACE = "Liu et al. 2019 (RoBERTa), Table 7 (RACE test set)"

SQUAD, GLUE, RACE, RELATION, COREF = (FINETUNING_TASKS[name] for name in ("squad", "glue", "race", "relation", "coref"))
# The GLUE rows: (task, label, the score shown, its name, BERT-base's published score).
GLUE_ROWS = (("cola", "CoLA", "matthews_correlation", "Matthews corr.", 52.1),
             ("sst2", "SST-2", "accuracy", "accuracy", 93.5), ("mrpc", "MRPC", "f1", "F1", 88.9),
             ("stsb", "STS-B", "spearmanr", "Spearman corr.", 85.8), ("rte", "RTE", "accuracy", "accuracy", 66.4))

TASKS: dict[str, Task] = {task.name: task for task in (
    Task("squad", SQUAD, prepare_squad, (
        Row("SQuAD v1.1", SQUAD.reports["squad"], "f1", "F1", "finetuning.md",
            published=Published(88.5, BERT_BASE, "Devlin et al. 2019, Table 2 (SQuAD v1.1 dev)")),)),
    Task("squad_v2", SQUAD, prepare_squad_v2, (
        Row("SQuAD v2.0", SQUAD.reports["squad_v2"], "f1", "F1", "finetuning.md",
            published=Published(81.9, BERT_LARGE, "Devlin et al. 2019, Table 3 (SQuAD v2.0 dev)"),
            note=squad_v2_note),)),
    Task("mrqa", SQUAD, prepare_mrqa, (Row("MRQA SQuAD", SQUAD.reports["mrqa"], "SQuAD_f1", "F1", "mrqa.md"),),
         same_task_as="squad"),
    *(Task(name, GLUE, prepare_glue(name, label), (
        Row(label, GLUE.reports[name], key, metric_name, "finetuning.md",
            published=Published(score, BERT_BASE, GLUE_TEST)),)) for name, label, key, metric_name, score in GLUE_ROWS),
    Task("race", RACE, prepare_race, tuple(
        Row(f"RACE {level}", RACE.reports["race"], f"accuracy_{level}", "accuracy", "finetuning.md",
            published=Published(score, "RoBERTa-large (355M)", ROBERTA_RACE))
        for level, score in (("middle", 86.5), ("high", 81.3)))),
    Task("semeval", RELATION, prepare_semeval, (
        Row("SemEval-2010 Task 8", RELATION.reports["relation"], "f1", "macro F1", "relation-extraction.md"),)),
    Task("coref", COREF, prepare_coref, (
        Row("LitBank", COREF.reports["coref"], "conll_f1", "CoNLL F1", "coreference.md"),
        Row("GAP", COREF.reports["gap"], "overall_f1", "overall F1", "coreference.md",
            published=Published(85.0, BERT_LARGE, "Joshi et al. 2019 (BERT for coreference), Table 2 (GAP test set; "
                                                  "the model trained on OntoNotes)"),
            note=gap_note))),
)}  # fmt: skip


# --- the sizes ---


@dataclass(frozen=True)
class Aim:
    """A score (0-100) a size aims at for a row, from an outside source: a stated `fraction` of a published score,
    never moved after it was fixed. It says on which split the published score was measured (`split`: "dev" or
    "test set"; the rows are scored on other splits), when it was fixed (`fixed`) and which of the size's scores had
    been seen by then (`seen`): an aim fixed after its row's scores were seen is not a prediction."""

    fraction: float
    published: Published
    split: str
    fixed: str
    seen: str

    @property
    def score(self) -> float:
        return round(self.fraction * self.published.score, 1)

    @property
    def source(self) -> str:
        published = self.published
        return (f"{self.fraction:g} of {published.score:g} ({published.model}; {published.source}), a {self.split} "
                f"score; fixed {self.fixed}, {self.seen}")

    @property
    def provenance(self) -> str:
        """The aim's split, date and what had been seen, as the tables word it."""
        return f"{self.fraction:g} × {self.published.score:g} ({self.split}), fixed {self.fixed}, {self.seen}"


@dataclass(frozen=True)
class Size:
    seeds: tuple[int, ...]
    budgets: dict[str, Budget]
    flags: dict[str, str] = field(default_factory=dict)  # given to every script at this size
    aims: dict[str, Aim] = field(default_factory=dict)  # per row label
    task_seeds: dict[str, tuple[int, ...]] = field(default_factory=dict)  # a task's seeds where not the size's

    def seeds_of(self, task: str) -> tuple[int, ...]:
        """The seeds a task runs at this size, and that a row of it needs from one class of machine."""
        return self.task_seeds.get(task, self.seeds)


PUBLISHED = {row.label: row.published for task in TASKS.values() for row in task.rows}
# The gpu size's aims, fixed by one rule for every row, never per row and never moved, after the size's seed-0
# records (2026-11-26) had been seen, before any of its 3-seed runs: four-fifths of BERT-base's published score
# (Devlin et al. 2019; GLUE's on the test set, SQuAD v1.1's on dev), for
# a model with a fifth of its parameters (all-MiniLM-L6-v2: 22.7M; BERT-base: 110M); MRQA's SQuAD dev lines are
# SQuAD v1.1's dev questions. MRPC has none: four-fifths of 88.9 is below its floor (answering
# "paraphrase" everywhere scores 81.2), so it would judge nothing. The other rows' published scores come from larger
# models (BERT-large, RoBERTa-large) or none fits, and the cpu size, a budget for 2 CPU cores, has no outside score
# of a comparable setting: they have no aim.
GPU_AIM_FRACTION = 0.8
GPU_AIMS_FIXED = "2026-11-28 19:48 UTC"  # the commit that fixed them (git log -S GPU_AIMS)
GPU_AIMS_SEEN = "after the size's seed-0 scores were seen"
GPU_AIMS = {label: Aim(GPU_AIM_FRACTION, PUBLISHED[label], "dev" if label == "SQuAD v1.1" else "test set",
                       GPU_AIMS_FIXED, GPU_AIMS_SEEN) for label in ("SQuAD v1.1", "CoLA", "SST-2", "STS-B", "RTE")}
GPU_AIMS["MRQA SQuAD"] = Aim(GPU_AIM_FRACTION, PUBLISHED["SQuAD v1.1"], "dev", GPU_AIMS_FIXED, GPU_AIMS_SEEN)


SQUAD_CPU = Budget(3000, 1000, 256, 32, 1e-4, 2, {"doc_stride": 128})
# MRQA's row trains on SQuAD v1.1's 3,000 training questions (its records before 2026-12-08 trained on the first
# 1,500, 108 steps, and its loss was still falling); it evaluates on MRQA's release of SQuAD's dev questions.
# SQuAD v2.0's row, chosen on its tuning split: 1,500 questions of its part (half of them unanswerable) alone taught
# a model that answered no question, so SQuAD v1.1 questions join them, as SQuAD 1.1's questions are part of SQuAD
# 2.0's training set, enough to make the part's unanswerable questions one-third of the training questions, SQuAD
# 2.0's own training share (Rajpurkar et al. 2018, Table 2: 43,498 of 130,319); 1,500 (a quarter unanswerable) left
# the model answering half of the unanswerable questions. On the 4 training articles beside the reporting split (all
# 1,305 of their questions, 689 unanswerable), that rule adds 762.
SQUAD_V2_CPU = dataclasses.replace(SQUAD_CPU, train=None, eval=None, squad_v1_train=762, split=SQUAD_V2_SPLIT)
SQUAD_GPU = Budget(None, None, 384, 32, 1e-4, 2, {"doc_stride": 128})
SQUAD_V2_GPU = dataclasses.replace(SQUAD_GPU, squad_v1_train=None, split=SQUAD_V2_SPLIT)
COREF_EVAL = {"per_device_eval_batch_size": 1}
# RACE, chosen on its tuning split (dev): 1,000 questions of one level at length 192 and 1e-4 (125 steps) left the
# loss at ln 4 on both levels; 2,000 at length 128 (the passage keeps 128 tokens less the question and option) and
# 5e-5 taught middle, not high. Trained on high alone, even the gpu size's 15,000 questions left the loss at ln 4,
# while middle's learned: both levels now train one model, as RoBERTa's RACE fine-tuning does. With 2,000 questions
# of each the loss began to fall only in the last tenth of the epoch, so 3,000 of each (a unit of two rows, about 45
# minutes).
RACE_CPU = Budget(3000, 400, 128, 8, 5e-5, 1, {"max_qa_length": 48}, split=RACE_SPLIT)
# SemEval's entities are all NOMINAL: SpanBERT's type markers would replace every entity's words by one marker.
TYPED_MARKERS = {"entity_markers": "typed_entity_markers"}

# cpu: a target time of about 20 minutes a task on 2 cores, sized from the tokens each task trains on; SQuAD v1.1 and
# v2.0 take longer (3,000 questions, 2 epochs: 27 to 53 minutes in their records), as their scores need.
# gpu: the whole shared data (RACE sampled to 20,000 questions a level), one epoch of SST-2 and RACE; a target time
# for all tasks of about 10 minutes a seed on one H100 in bf16, most of a short unit being its process's start and
# tokenization.
# CoLA's first cpu seeds spread widely (31.5 and 31.9 on one class of machine, 22.2 on another): it runs 5 seeds,
# so that one class's seeds give its row a verdict and a narrower seed term.
# toy: a tiny random model (scores.toy_checkpoint) on a few examples, for the test suite.
SIZES: dict[str, Size] = {
    "cpu": Size((0, 1, 2), {
        "squad": SQUAD_CPU, "squad_v2": SQUAD_V2_CPU, "mrqa": SQUAD_CPU,
        "cola": Budget(None, None, 64, 32, 1e-4, 3),
        "sst2": Budget(20000, None, 64, 32, 1e-4, 1),
        "mrpc": Budget(None, None, 128, 32, 1e-4, 3),
        "stsb": Budget(None, None, 128, 32, 1e-4, 3),
        "rte": Budget(None, None, 128, 16, 5e-5, 3),
        "race": RACE_CPU,
        "semeval": Budget(None, None, 128, 32, 1e-4, 2, TYPED_MARKERS, split=SEMEVAL_SPLIT),
        "coref": Budget(None, None, 256, 1, 5e-5, 5, {"max_train_segments": 2, "ffnn_size": 300,
                                                      "task_learning_rate": 3e-4, **COREF_EVAL}, gap_examples=500),
    }, task_seeds={"cola": (0, 1, 2, 3, 4)}),
    "gpu": Size((0, 1, 2), {
        "squad": SQUAD_GPU, "squad_v2": SQUAD_V2_GPU, "mrqa": SQUAD_GPU,
        "cola": Budget(None, None, 128, 32, 5e-5, 5),
        "sst2": Budget(None, None, 128, 32, 5e-5, 1),
        "mrpc": Budget(None, None, 128, 32, 5e-5, 5),
        "stsb": Budget(None, None, 128, 32, 5e-5, 5),
        "rte": Budget(None, None, 256, 16, 5e-5, 5),
        "race": Budget(20000, None, 384, 16, 5e-5, 1, {"max_qa_length": 128}, split=RACE_SPLIT),
        "semeval": Budget(None, None, 128, 32, 5e-5, 5, TYPED_MARKERS, split=SEMEVAL_SPLIT),
        "coref": Budget(None, None, 384, 1, 5e-5, 8, {"max_train_segments": 3, "task_learning_rate": 3e-4,
                                                       **COREF_EVAL}),
    }, flags={"bf16": "true"}, aims=GPU_AIMS),
    "toy": Size((0,), {
        **{name: Budget(16, 16, 64, 8, 1e-3, 1) for name in TASKS},
        **{name: Budget(16, 16, 128, 8, 1e-3, 1, {"doc_stride": 32}) for name in ("squad", "mrqa")},
        "squad_v2": Budget(16, 16, 128, 8, 1e-3, 1, {"doc_stride": 32}, split=SQUAD_V2_SPLIT),
        "race": Budget(16, 16, 64, 8, 1e-3, 1, {"max_qa_length": 32}, split=RACE_SPLIT),
        "semeval": Budget(16, 16, 64, 8, 1e-3, 1, TYPED_MARKERS, split=SEMEVAL_SPLIT),
        "coref": Budget(2, 1, 64, 1, 1e-3, 1, {"max_train_segments": 1, "ffnn_size": 32, **COREF_EVAL},
                        gap_examples=16),
    }),
}
