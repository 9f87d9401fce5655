"""GAP (Webster et al. 2018, "Mind the GAP: A Balanced Corpus of Gendered Ambiguous Pronouns") for run_coref.py:
reading its TSV as documents of words, deciding A-coref and B-coref from predicted clusters, and writing (and
reading back) the official scorer's system file."""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from spanroberta.errors import UserInputError, require_file, utf8_errors
from spanroberta.tasks.coreference.documents import CorefDocument, Span, input_error
from spanroberta.tasks.coreference.gap_scoring import GapDecision

GAP_COLUMNS = ("ID", "Text", "Pronoun", "Pronoun-offset", "A", "A-offset", "A-coref", "B", "B-offset", "B-coref")
_WORD = re.compile(r"\w+|[^\w\s]")


@dataclass
class GapExample:
    """One GAP example as a document of words, with the words of the pronoun, name A and name B."""

    example_id: str
    pronoun: str
    document: CorefDocument
    pronoun_words: Span
    a_words: Span
    b_words: Span
    a_coref: bool
    b_coref: bool


def read_gap(path: Path) -> list[GapExample]:
    """GAP's TSV: the text split into words (runs of letters and digits, and single punctuation marks) and
    sentences (after `.`, `!` and `?`); the pronoun and the names become the words their character spans overlap."""
    require_file(path, f"--gap_file {path} does not exist.")
    with utf8_errors(path), open(path, encoding="utf-8", newline="") as file:
        rows = list(csv.DictReader(file, delimiter="\t", quoting=csv.QUOTE_NONE))
    missing = [column for column in GAP_COLUMNS if rows and column not in rows[0]]
    if not rows or missing:
        raise UserInputError(f"{path} is not a GAP file: it needs a header with {', '.join(GAP_COLUMNS)} and at least "
                             f"one example{f' (missing: {missing})' if missing else ''}.")  # fmt: skip
    return [_gap_example(path, row) for row in rows]


def _gap_example(path: Path, row: dict[str, str]) -> GapExample:
    text, example_id = row["Text"], row["ID"]
    matches = list(_WORD.finditer(text))
    sentences, sentence = [], []
    for match in matches:
        sentence.append(match.group())
        if match.group() in ".!?":
            sentences.append(sentence)
            sentence = []
    sentences += [sentence] if sentence else []

    def words_of(column: str) -> Span:
        mention, offset = row[column], row[f"{column}-offset"]
        if not offset.isdigit() or text[int(offset):int(offset) + len(mention)] != mention:
            raise input_error(path, example_id, f"{column} {mention!r} is not at character {offset} of the text.")
        begin, finish = int(offset), int(offset) + len(mention)
        inside = [i for i, m in enumerate(matches) if m.start() < finish and m.end() > begin]
        return inside[0], inside[-1]

    flags = {}
    for column in ("A-coref", "B-coref"):
        if row[column].upper() not in ("TRUE", "FALSE"):
            raise input_error(path, example_id, f"{column} must be TRUE or FALSE, not {row[column]!r}.")
        flags[column] = row[column].upper() == "TRUE"
    document = CorefDocument(example_id, sentences, [["-"] * len(s) for s in sentences], [], str(path), "gap")
    return GapExample(example_id, row["Pronoun"], document, words_of("Pronoun"), words_of("A"), words_of("B"),
                      flags["A-coref"], flags["B-coref"])  # fmt: skip


def _nested(span: Span, other: Span) -> bool:
    """Whether one span lies inside the other (either way)."""
    return (other[0] <= span[0] and span[1] <= other[1]) or (span[0] <= other[0] and other[1] <= span[1])


def gap_decision(example: GapExample, clusters: Sequence[list[Span]]) -> GapDecision:
    """Joshi et al.'s rule (`to_gap_tsv.py` of their coreference code): the pronoun's cluster is the first predicted
    cluster holding the pronoun's exact span; A (or B) is resolved as its antecedent when a mention of that cluster
    lies inside A's (B's) words or holds them. Both, one or neither may be. A cluster that only overlaps the
    pronoun (a mention "His mother" for the pronoun "His") is not the pronoun's."""
    cluster = next((cluster for cluster in clusters if example.pronoun_words in cluster), [])
    linked_a = any(_nested(span, example.a_words) for span in cluster)
    linked_b = any(_nested(span, example.b_words) for span in cluster)
    return GapDecision(example.pronoun, example.a_coref, example.b_coref, linked_a, linked_b)


def write_gap_predictions(path: Path, examples: Sequence[GapExample], decisions: Sequence[GapDecision]) -> None:
    """`ID<TAB>A-coref<TAB>B-coref` (TRUE/FALSE) a line, without a header: the system file of GAP's scorer."""
    with open(path, "w", encoding="utf-8") as file:
        for example, decision in zip(examples, decisions):
            a, b = (str(flag).upper() for flag in (decision.predicted_a, decision.predicted_b))
            file.write(f"{example.example_id}\t{a}\t{b}\n")

