"""Relation classification in TACRED's JSON layout (Zhang et al. 2017), which SemEval-2010 Task 8 is also
distributed in for SpanBERT's code: reading and checking the files, the label set and its scorer, the two input
encodings, and the predictions file.

An example is `{id, relation, token[], subj_start, subj_end, obj_start, obj_end, subj_type, obj_type}`, the spans
inclusive token ranges; a file holds a JSON list of them or one a line (JSON lines). TACRED's Penn Treebank bracket
tokens (-LRB- -RRB- -LSB- -RSB- -LCB- -RCB-) are read as the brackets they stand for, as SpanBERT's run_tacred.py
(`convert_token`) and Zhou and Chen's code read them. The two encodings:

- `spanbert_types` (SpanBERT, Joshi et al. 2020, section 4.3 "Relation Extraction"): each entity's words are
  replaced by one marker of its role and type, `[SUBJ-PERSON] was born in [OBJ-CITY] , Michigan`; the markers are
  added to the tokenizer as special tokens (`add_entity_markers`), and a [CLS] classifier reads the sequence
  (`AutoModelForSequenceClassification`).
- `typed_entity_markers` (Zhou and Chen 2021, "typed entity marker (punct)"): the words stay and are wrapped with
  their type in punctuation, `@ * person * Bill Gates @ founded # ^ organization ^ Microsoft #`; the classifier
  reads the hidden states at the two start markers (`EncoderForRelationClassification`), whose positions the
  encoding gives as `entity_positions`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from datasets import Dataset
from tokenizers import AddedToken
from transformers import EvalPrediction, PreTrainedTokenizerBase

from spanroberta.errors import UserInputError, require_file, utf8_errors
from spanroberta.tasks.classification import logits_to_predictions
from spanroberta.tasks.json_lines import read_json_lines
from spanroberta.tasks.relation.scoring import SCORERS

logger = logging.getLogger(__name__)

ENCODINGS = ("spanbert_types", "typed_entity_markers")

# TACRED's 42 labels (41 relations and no_relation) and the entity types of its subjects and objects (the
# Stanford NER and KBP types of the dataset's release).
TACRED_LABELS = ("no_relation",) + tuple(f"org:{name}" for name in (
    "alternate_names", "city_of_headquarters", "country_of_headquarters", "dissolved", "founded", "founded_by",
    "member_of", "members", "number_of_employees/members", "parents", "political/religious_affiliation",
    "shareholders", "stateorprovince_of_headquarters", "subsidiaries", "top_members/employees", "website",
)) + tuple(f"per:{name}" for name in (
    "age", "alternate_names", "cause_of_death", "charges", "children", "cities_of_residence", "city_of_birth",
    "city_of_death", "countries_of_residence", "country_of_birth", "country_of_death", "date_of_birth",
    "date_of_death", "employee_of", "origin", "other_family", "parents", "religion", "schools_attended", "siblings",
    "spouse", "stateorprovince_of_birth", "stateorprovince_of_death", "stateorprovinces_of_residence", "title",
))  # fmt: skip
TACRED_SUBJECT_TYPES = ("ORGANIZATION", "PERSON")
TACRED_OBJECT_TYPES = (
    "PERSON", "ORGANIZATION", "DATE", "NUMBER", "TITLE", "COUNTRY", "LOCATION", "CITY", "MISC", "STATE_OR_PROVINCE",
    "DURATION", "NATIONALITY", "CAUSE_OF_DEATH", "CRIMINAL_CHARGE", "RELIGION", "URL", "IDEOLOGY",
)  # fmt: skip
# SemEval-2010 Task 8's 19 labels: 9 relations in both directions and Other.
SEMEVAL_LABELS = ("Other",) + tuple(f"{relation}({direction})" for relation in (
    "Cause-Effect", "Component-Whole", "Content-Container", "Entity-Destination", "Entity-Origin",
    "Instrument-Agency", "Member-Collection", "Message-Topic", "Product-Producer",
) for direction in ("e1,e2", "e2,e1"))  # fmt: skip
NEGATIVE_LABELS = {"tacred": "no_relation", "semeval": "Other"}
_INVENTORIES = (TACRED_LABELS, SEMEVAL_LABELS)

_FIELDS = ("id", "token", "subj_start", "subj_end", "obj_start", "obj_end", "subj_type", "obj_type")
# TACRED's tokens are Penn Treebank's, with brackets escaped.
PTB_BRACKETS = {"-lrb-": "(", "-rrb-": ")", "-lsb-": "[", "-rsb-": "]", "-lcb-": "{", "-rcb-": "}"}


@dataclass(frozen=True)
class RelationExample:
    """One sentence with a subject and an object span (inclusive token ranges) and, if labelled, their relation."""

    id: str
    tokens: tuple[str, ...]
    subject: tuple[int, int]
    object: tuple[int, int]
    subject_type: str
    object_type: str
    relation: str | None


# ---------------------------------------------------------------------------------------------------------
# Reading


def read_relation_file(path: str | Path, labeled: bool = True) -> list[RelationExample]:
    """Every example of a TACRED-style file (a JSON list, or JSON lines), checked: a missing field, a span out of
    the sentence or overlapping the other, an empty sentence, or (when `labeled`) a missing relation raises a
    `UserInputError` naming the file and the example."""
    path = Path(path)
    require_file(path, f"{path}: no such file. Give a TACRED-style JSON file (a list of examples, or one example "
                       "a line).")  # fmt: skip
    examples = [_parse_example(record, where, path, labeled) for where, record in _records(path)]
    if not examples:
        raise UserInputError(f"{path}: the file holds no examples.")
    return examples


def _records(path: Path) -> Iterator[tuple[str, Any]]:
    """(where, record) for each example: "item N" of a JSON list, "line N" of JSON lines."""
    with utf8_errors(path), open(path, encoding="utf-8") as file:
        head = file.read(4096).lstrip()
    if head.startswith("["):
        with utf8_errors(path), open(path, encoding="utf-8") as file:
            try:
                records = json.load(file)
            except json.JSONDecodeError as error:
                raise UserInputError(f"{path}, line {error.lineno}: not valid JSON ({error.msg}).") from None
        yield from ((f"item {number}", record) for number, record in enumerate(records, start=1))
        return
    for line_number, record in read_json_lines(path, error=UserInputError):
        yield f"line {line_number}", record


def _parse_example(record: Any, where: str, path: Path, labeled: bool) -> RelationExample:
    if not isinstance(record, dict):
        raise UserInputError(f"{path}, {where}: expected a JSON object with the fields {', '.join(_FIELDS)}, found "
                             f"{type(record).__name__}.")  # fmt: skip
    name = f"{path}, {where} (id {record.get('id')!r})"
    wanted = _FIELDS + ("relation",) * labeled
    missing = [field for field in wanted if record.get(field) is None]
    if missing:
        raise UserInputError(f"{name}: missing {', '.join(missing)}. Each example needs {', '.join(wanted)} "
                             "(TACRED's layout; ends are inclusive); add them or drop the example.")  # fmt: skip
    tokens = record["token"]
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) and t for t in tokens):
        raise UserInputError(f"{name}: 'token' must be a non-empty list of non-empty strings (the sentence's words); "
                             "fix or drop the example.")  # fmt: skip
    spans = {}
    for role in ("subj", "obj"):
        start, end = record[f"{role}_start"], record[f"{role}_end"]
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end < len(tokens)):
            raise UserInputError(
                f"{name}: the {role} span {role}_start={start!r}, {role}_end={end!r} is not an inclusive range of "
                f"the {len(tokens)} tokens (0 <= start <= end <= {len(tokens) - 1}); fix the offsets or drop the "
                "example."
            )
        spans[role] = (start, end)
    (s_start, s_end), (o_start, o_end) = spans["subj"], spans["obj"]
    if s_start <= o_end and o_start <= s_end:
        raise UserInputError(
            f"{name}: the subject (tokens {s_start}-{s_end}) and the object (tokens {o_start}-{o_end}) overlap, so "
            "they cannot be marked apart; fix the spans or drop the example."
        )
    relation = record.get("relation")
    return RelationExample(
        id=str(record["id"]), tokens=tuple(PTB_BRACKETS.get(token.lower(), token) for token in tokens),
        subject=spans["subj"], object=spans["obj"],
        subject_type=str(record["subj_type"]), object_type=str(record["obj_type"]),
        relation=None if relation is None else str(relation),
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------------------
# Labels and scorer


def relation_label_set(train_labels: Sequence[str], negative_label: str | None) -> list[str]:
    """The labels a new classifier predicts, in class-id order: TACRED's or SemEval's full inventory when the
    training labels are all in it (a relation rare enough to miss the training split keeps its id), else the
    labels seen in training, sorted, the negative label first."""
    seen = set(train_labels)
    for inventory in _INVENTORIES:
        if seen <= set(inventory):
            return list(inventory)
    first = [negative_label] if negative_label is not None else []
    return first + sorted(seen - set(first))


def choose_scorer(labels: Sequence[str], scorer: str | None) -> str:
    """`scorer` if given; else "semeval" when every label is one of SemEval-2010 Task 8's 19, else "tacred"."""
    if scorer is not None:
        if scorer not in SCORERS:
            raise UserInputError(f"--scorer {scorer!r} is not one of {', '.join(SCORERS)}.")
        return scorer
    return "semeval" if set(labels) <= set(SEMEVAL_LABELS) else "tacred"


def check_labels(examples: Sequence[RelationExample], label2id: Mapping[str, int], path: str | Path) -> None:
    """Refuses an example whose relation the classifier does not know."""
    for example in examples:
        if example.relation is not None and example.relation not in label2id:
            raise UserInputError(
                f"{path}, id {example.id!r}: relation {example.relation!r} is not one of the classifier's "
                f"{len(label2id)} labels ({', '.join(sorted(label2id))}). Train with a file that has it, or fix the "
                "label."
            )


# ---------------------------------------------------------------------------------------------------------
# Encoding


def entity_markers(examples: Sequence[RelationExample], encoding: str) -> list[str]:
    """The tokens `encoding` adds to the tokenizer: for spanbert_types, a [SUBJ-TYPE] and an [OBJ-TYPE] for
    every type TACRED defines and every type in `examples`; none for typed_entity_markers (punctuation)."""
    if encoding != "spanbert_types":
        return []
    subjects = dict.fromkeys([*TACRED_SUBJECT_TYPES, *(e.subject_type for e in examples)])
    objects = dict.fromkeys([*TACRED_OBJECT_TYPES, *(e.object_type for e in examples)])
    return [f"[SUBJ-{t}]" for t in subjects] + [f"[OBJ-{t}]" for t in objects]


def add_entity_markers(
    tokenizer: PreTrainedTokenizerBase, examples: Sequence[RelationExample], encoding: str
) -> None:
    """Adds `entity_markers(examples, encoding)` to the tokenizer as special tokens (never split, never
    lower-cased). Each takes in the space before it (`lstrip`): byte-level BPE and SentencePiece would otherwise
    make that space a piece of its own (`Ġ`, `▁`) before every marker inside a sentence; WordPiece drops it anyway."""
    markers = entity_markers(examples, encoding)
    tokenizer.add_tokens([AddedToken(marker, lstrip=True, rstrip=False, normalized=False, special=True)
                          for marker in markers], special_tokens=True)  # fmt: skip


def warn_if_types_say_nothing(examples: Sequence[RelationExample], encoding: str) -> None:
    """spanbert_types replaces each entity's words by its type. Where every subject has one type and every object
    one type (SemEval-2010 Task 8's are all NOMINAL), the markers say nothing but the role, and nothing of the
    entities is left for the classifier: say so and name the encoding that keeps their words."""
    subject_types = {example.subject_type for example in examples}
    object_types = {example.object_type for example in examples}
    if encoding == "spanbert_types" and len(subject_types) == 1 and len(object_types) == 1:
        logger.warning(
            "Every subject in the training data has the type %s and every object the type %s: --entity_markers "
            "spanbert_types replaces each entity's words by one marker of its role, so the classifier sees no entity "
            "at all. Pass --entity_markers typed_entity_markers to keep the entities' words (on SemEval-2010 Task 8 "
            "this is what reaches a useful score; see docs/relation-extraction.md).",
            subject_types.pop(), object_types.pop(),
        )


def marked_text(example: RelationExample, encoding: str) -> tuple[str, int, int]:
    """The example's words joined by spaces with its entities marked, and the character offsets of the subject's
    and the object's (start) marker."""
    starts = {example.subject[0]: "subj", example.object[0]: "obj"}
    words: list[str] = []
    positions: dict[str, int] = {}
    length = index = 0
    while index < len(example.tokens):
        role = starts.get(index)
        if role is None:
            pieces, index = [example.tokens[index]], index + 1
        else:
            pieces, index = _marked_entity(example, role, encoding), _span(example, role)[1] + 1
        for number, piece in enumerate(pieces):
            length += bool(words)  # the space before every word but the first
            if number == 0 and role is not None:
                positions[role] = length
            words.append(piece)
            length += len(piece)
    return " ".join(words), positions["subj"], positions["obj"]


def _span(example: RelationExample, role: str) -> tuple[int, int]:
    return example.subject if role == "subj" else example.object


def _marked_entity(example: RelationExample, role: str, encoding: str) -> list[str]:
    entity_type = example.subject_type if role == "subj" else example.object_type
    if encoding == "spanbert_types":
        return [f"[{role.upper()}-{entity_type}]"]
    start, end = _span(example, role)
    mark, type_mark = ("@", "*") if role == "subj" else ("#", "^")
    words = entity_type.lower().replace("_", " ").split()
    return [mark, type_mark, *words, type_mark, *example.tokens[start : end + 1], mark]


def encode_relations(
    examples: Sequence[RelationExample],
    tokenizer: PreTrainedTokenizerBase,
    encoding: str,
    max_seq_length: int,
    label2id: Mapping[str, int] | None = None,
) -> Dataset:
    """The model inputs of `examples` under `encoding`: the tokenizer's own (with its special tokens), at most
    `max_seq_length` tokens, `entity_positions` (the subject's and the object's start marker) for
    typed_entity_markers, and `labels` when `label2id` is given and every example is labelled.

    A longer sentence keeps a window of its tokens that holds both markers where they fit (from its start when
    possible), rather than dropping whatever follows the limit, which may be an entity. A fast tokenizer is needed
    (its character offsets place the markers)."""
    if not tokenizer.is_fast:
        raise UserInputError(
            f"run_relation.py needs a fast tokenizer (it places the entity markers by character offsets); "
            f"{type(tokenizer).__name__} is not one. Load one with --tokenizer_name."
        )
    marked = [marked_text(example, encoding) for example in examples]
    encoded = tokenizer([text for text, _, _ in marked], return_offsets_mapping=True)
    names = [name for name in tokenizer.model_input_names if name in encoded]
    columns: dict[str, list] = {name: [] for name in names}
    positions_column, cut, lost = [], 0, 0
    for row, (_, *marker_chars) in enumerate(marked):
        keep, positions, fits = _window(encoded["offset_mapping"][row], marker_chars, max_seq_length)
        for name in names:
            columns[name].append([encoded[name][row][i] for i in keep])
        positions_column.append(positions)
        cut += len(keep) < len(encoded["offset_mapping"][row])
        lost += not fits
    if cut:
        logger.warning("%d of %d examples are longer than --max_seq_length %d tokens: each keeps a window that holds "
                       "its entity markers where they fit.", cut, len(examples), max_seq_length)  # fmt: skip
    if lost:
        logger.warning("In %d examples the entities lie further apart than --max_seq_length %d allows: the later "
                       "marker falls outside the window. Raise --max_seq_length to keep it.",
                       lost, max_seq_length)  # fmt: skip
    if encoding == "typed_entity_markers":
        columns["entity_positions"] = positions_column
    if label2id is not None and all(example.relation is not None for example in examples):
        columns["labels"] = [label2id[example.relation] for example in examples]
    return Dataset.from_dict(columns)


def _window(
    offsets: Sequence[Sequence[int]], marker_chars: Sequence[int], max_seq_length: int
) -> tuple[list[int], list[int], bool]:
    """Which tokens of one encoded sentence to keep, the (kept) positions of its markers and whether both fit.

    The tokenizer's own special tokens ([CLS] ... [SEP], <s> ... </s>) are the leading and trailing tokens of
    empty character span; they are always kept. The markers are the first tokens ending after their offsets."""
    offsets = [tuple(offset) for offset in offsets]
    prefix = next(i for i, offset in enumerate(offsets) if offset != (0, 0))
    suffix = next(i for i, offset in enumerate(reversed(offsets)) if offset != (0, 0))
    content = len(offsets) - prefix - suffix
    room = max_seq_length - prefix - suffix
    if room < 1:
        raise UserInputError(f"--max_seq_length {max_seq_length} leaves no room for words beside the tokenizer's "
                             f"{prefix + suffix} special tokens; raise it (128 is usual).")  # fmt: skip
    markers = [next(i for i in range(content) if offsets[prefix + i][1] > char) for char in marker_chars]
    low, high = min(markers), max(markers)
    start = min(low, max(0, high + 1 - room)) if content > room else 0
    stop = min(content, start + room)
    keep = [*range(prefix), *range(prefix + start, prefix + stop), *range(len(offsets) - suffix, len(offsets))]
    # A marker beyond the window (entities further apart than the room) points at the window's last token.
    positions = [prefix + min(marker, stop - 1) - start for marker in markers]
    return keep, positions, high < stop


# ---------------------------------------------------------------------------------------------------------
# Scores and predictions


def relation_compute_metrics(
    id2label: Mapping[int, str], scorer: str, negative_label: str
) -> Callable[[EvalPrediction], dict[str, float]]:
    """A `compute_metrics` for the Trainer: the official `scorer`'s precision, recall and F1 and the accuracy,
    over the label strings of the predicted and the gold class ids."""
    score = SCORERS[scorer]

    def compute_metrics(eval_prediction: EvalPrediction) -> dict[str, float]:
        predictions = predicted_labels(eval_prediction.predictions, id2label)
        references = [id2label[int(i)] for i in eval_prediction.label_ids]
        return score(predictions, references, negative_label)

    return compute_metrics


def predicted_labels(logits: np.ndarray | tuple, id2label: Mapping[int, str]) -> list[str]:
    """The label string of each row's highest logit."""
    return [id2label[int(i)] for i in logits_to_predictions(logits, is_regression=False)]


def write_relation_predictions(
    path: str | Path, examples: Sequence[RelationExample], predictions: Sequence[str]
) -> None:
    """One JSON line per example: its id, its gold label (null when unlabelled) and the predicted label."""
    if len(examples) != len(predictions):
        raise ValueError(f"{len(predictions)} predictions for {len(examples)} examples.")
    with open(path, "w", encoding="utf-8") as file:
        for example, prediction in zip(examples, predictions):
            file.write(json.dumps({"id": example.id, "gold": example.relation, "predicted": prediction}) + "\n")


# ---------------------------------------------------------------------------------------------------------
# The task a run sets up


@dataclass(frozen=True)
class RelationTask:
    """What a run classifies into and how it is scored. `labels` are in class-id order."""

    encoding: str
    labels: tuple[str, ...]
    scorer: str
    negative_label: str

    @property
    def label2id(self) -> dict[str, int]:
        return {label: i for i, label in enumerate(self.labels)}

    @property
    def id2label(self) -> dict[int, str]:
        return dict(enumerate(self.labels))

    def config_fields(self) -> dict[str, Any]:
        """The config fields a fine-tuned classifier keeps, so that evaluating it later needs no flags."""
        return {
            "num_labels": len(self.labels), "id2label": self.id2label, "label2id": self.label2id,
            "problem_type": "single_label_classification", "finetuning_task": "relation",
            "relation_encoding": self.encoding, "negative_label": self.negative_label, "relation_scorer": self.scorer,
        }  # fmt: skip


def relation_task(
    config: Any,
    train_examples: Sequence[RelationExample] | None,
    encoding: str,
    scorer: str | None = None,
    negative_label: str | None = None,
) -> RelationTask:
    """The labels, scorer and negative label of a run. A classifier that run_relation.py fine-tuned (its config
    has `relation_encoding`) keeps its own labels, and its scorer and negative label unless given; a new one takes
    `relation_label_set` of the training labels, `choose_scorer`'s scorer and that scorer's negative label."""
    if getattr(config, "relation_encoding", None) is not None:
        if config.relation_encoding != encoding:
            raise UserInputError(
                f"The checkpoint was fine-tuned with --entity_markers {config.relation_encoding}, not {encoding}: its "
                f"classifier reads that encoding only. Pass --entity_markers {config.relation_encoding}."
            )
        labels = tuple(config.id2label[i] for i in range(config.num_labels))
        scorer = choose_scorer(labels, scorer or config.relation_scorer)
        negative_label = negative_label or config.negative_label or NEGATIVE_LABELS[scorer]
        return RelationTask(encoding, labels, scorer, negative_label)
    if not train_examples:
        raise UserInputError(
            "The checkpoint has no relation classifier (it was not fine-tuned by run_relation.py): evaluating or "
            "predicting with it needs --do_train with a --train_file first."
        )
    seen = [example.relation for example in train_examples]
    scorer = choose_scorer(seen, scorer)
    negative_label = negative_label or NEGATIVE_LABELS[scorer]
    return RelationTask(encoding, tuple(relation_label_set(seen, negative_label)), scorer, negative_label)
