"""The answers a model that learned nothing can give, which the task benchmark's floors are the best of
(tasks/preparation.py): each is computed from the evaluated examples alone, with no training and no parameter fitted to
them. Besides the trivial answers (the majority class, chance, an empty answer, one constant answer), the cheap
heuristics the tasks' literature reports as baselines:

- RACE: the longest option; the option sharing the most words with the article; and the sliding window of
  Richardson et al. 2013 (MCTest, Algorithm 1), the baseline Lai et al. 2017 report for RACE.
- SQuAD and MRQA: a sliding-window span baseline after Rajpurkar et al. 2016, Section 5 (`sliding_window_answer`).
- STS-B: the rank correlation of word-overlap similarities (Jaccard; the cosine of binary bag-of-words vectors).
- GAP: the name nearer the pronoun (the token-distance cue of Webster et al. 2018's surface baselines).

Words are the lower-cased runs of letters and digits (`words`); the scores are the tasks' own scorers'.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from spanroberta.tasks.coreference.gap import read_gap
from spanroberta.tasks.coreference.gap_scoring import GapDecision, gap_scores
from spanroberta.tasks.coreference.scoring import coref_scores

WORD = re.compile(r"\w+")
# A sentence ends at ., ! or ? followed by white space: no parser, so abbreviations split sentences too.
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# The longest candidate span (in words) of the SQuAD baseline. Constituents of any length are its candidates in
# Rajpurkar et al. 2016; spans of up to this many words within one sentence stand for them here (most SQuAD answers
# are a few words: Rajpurkar et al. 2016, Table 2, finds dates, numbers, names and short noun phrases).
MAX_SPAN_WORDS = 4


def words(text: str) -> list[str]:
    """The lower-cased words of a text (runs of letters and digits): punctuation, as the scorers' normalisation
    drops it, never counts."""
    return [word.lower() for word in WORD.findall(text)]


# --- the sliding window of Richardson et al. 2013 ---


def inverse_counts(passage: Sequence[str]) -> dict[str, float]:
    """Richardson et al. 2013's IC(w) = log(1 + 1 / C(w)), C(w) the count of w in the passage: a word rare in the
    passage weighs more than a frequent one."""
    return {word: math.log(1 + 1 / count) for word, count in Counter(passage).items()}


def sliding_window_score(passage: Sequence[str], target: set[str], weights: dict[str, float] | None = None) -> float:
    """Richardson et al. 2013, Algorithm 1: the best sum, over windows of |target| consecutive passage words, of
    IC(w) for each word of the window that is in `target` (the question's words with one answer's)."""
    weights = weights if weights is not None else inverse_counts(passage)
    if not passage or not target:
        return 0.0
    values = np.array([weights[word] if word in target else 0.0 for word in passage])
    size = min(len(target), len(values))
    sums = np.convolve(values, np.ones(size), mode="valid")
    return float(sums.max())


# --- RACE ---


def longest_option(options: Sequence[str]) -> int:
    """The index of the longest option, in characters (the first of equally long ones)."""
    return max(range(len(options)), key=lambda i: (len(options[i]), -i))


def most_overlapping_option(article: str, options: Sequence[str]) -> int:
    """The index of the option with the most distinct words that also occur in the article (the first of equal
    ones)."""
    article_words = set(words(article))
    overlaps = [len(set(words(option)) & article_words) for option in options]
    return max(range(len(options)), key=lambda i: (overlaps[i], -i))


def sliding_window_option(article: str, question: str, options: Sequence[str]) -> int:
    """The index of the option whose words, with the question's, score the best sliding window over the article
    (Richardson et al. 2013, Algorithm 1, without its distance term; the first of equal ones)."""
    passage = words(article)
    weights = inverse_counts(passage)
    question_words = set(words(question))
    scores = [sliding_window_score(passage, question_words | set(words(option)), weights) for option in options]
    return max(range(len(options)), key=lambda i: (scores[i], -i))


def race_picks(questions: Sequence[dict]) -> dict[str, list[int]]:
    """The option each RACE answer that picks one (the most frequent answer letter, the longest option, the most
    overlapping option, the sliding window) picks for each question, on questions with the Hub's columns."""
    letters = [row["answer"] for row in questions]
    frequent = "ABCD".index(Counter(letters).most_common(1)[0][0])
    return {
        "most frequent answer letter": [frequent] * len(questions),
        "longest option": [longest_option(row["options"]) for row in questions],
        "most word overlap with the article": [most_overlapping_option(row["article"], row["options"])
                                               for row in questions],  # fmt: skip
        "sliding window": [sliding_window_option(row["article"], row["question"], row["options"])
                           for row in questions],
    }  # fmt: skip


def race_heuristics(questions: Sequence[dict], picks: dict[str, list[int]] | None = None) -> dict[str, float]:
    """Accuracy (0-100) of each RACE answer that learns nothing, on questions with the Hub's columns (`article`,
    `question`, `options`, `answer` a letter): chance, the most frequent answer letter, the longest option, the most
    overlapping option and the sliding window (`picks`: `race_picks` of the questions, computed where not given)."""
    letters = [row["answer"] for row in questions]
    scores = {"chance": 100 / len(questions[0]["options"])}
    for name, picked in (picks or race_picks(questions)).items():
        scores[name] = 100 * sum("ABCD"[i] == letter for i, letter in zip(picked, letters)) / len(letters)
    return scores


# --- SQuAD and MRQA ---


def _tokens(text: str) -> list[tuple[str, int, int]]:
    return [(match.group().lower(), match.start(), match.end()) for match in WORD.finditer(text)]


def _grams(tokens: Sequence[str]) -> set[tuple[str, ...]]:
    return {(word,) for word in tokens} | set(zip(tokens, tokens[1:]))


def sliding_window_answer(context: str, question: str, max_words: int = MAX_SPAN_WORDS) -> str:
    """A span of `context` chosen the way Rajpurkar et al. 2016 (Section 5) choose their sliding-window baseline's
    answer, with n-grams for constituents:

    1. Candidates: every span of 1 to `max_words` consecutive words within one sentence, other than spans made of
       question words only (Rajpurkar et al.'s candidates are the constituents of the sentences' parses, of any
       length; no parser is run here).
    2. Each candidate scores the number of the question's distinct unigrams and bigrams found in its sentence with
       the candidate's words taken out (a bigram does not bridge the gap): the candidates of the best score stay.
    3. Among them, the best sliding window over the whole context (Richardson et al. 2013, Algorithm 1) with the
       question's words and the candidate's; equal ones: the first in the context, then the shortest.

    Returns the candidate's text as the context spells it, from its first word's start to its last word's end, or
    "" for a context without words."""
    question_words = words(question)
    question_set, question_grams = set(question_words), _grams(question_words)
    tokens = _tokens(context)
    passage = [word for word, _, _ in tokens]
    weights = inverse_counts(passage)
    bounds, start = [], 0
    for part in SENTENCE_END.split(context):
        offset = context.index(part, start) if part else start
        bounds.append((offset, offset + len(part)))
        start = offset + len(part)
    best: list[tuple[int, int]] = []
    best_overlap = -1
    for first_char, last_char in bounds:
        sentence = [i for i, (_, begin, end) in enumerate(tokens) if begin >= first_char and end <= last_char]
        for length in range(1, max_words + 1):
            for at in range(len(sentence) - length + 1):
                span = sentence[at: at + length]
                if all(passage[i] in question_set for i in span):
                    continue
                left = [passage[i] for i in sentence[:at]]
                right = [passage[i] for i in sentence[at + length:]]
                overlap = len(question_grams & (_grams(left) | _grams(right)))
                if overlap > best_overlap:
                    best, best_overlap = [], overlap
                if overlap == best_overlap:
                    best.append((span[0], span[-1]))
    if not best:
        return ""
    windows = {(first, last): sliding_window_score(passage, question_set | set(passage[first: last + 1]), weights)
               for first, last in best}  # fmt: skip
    first, last = max(best, key=lambda span: (windows[span], -span[0], span[0] - span[1]))
    return context[tokens[first][1]: tokens[last][2]]


# --- STS-B ---


def jaccard(first: str, second: str) -> float:
    a, b = set(words(first)), set(words(second))
    return len(a & b) / len(a | b) if a | b else 0.0


def binary_cosine(first: str, second: str) -> float:
    """The cosine of the two sentences' binary bag-of-words vectors."""
    a, b = set(words(first)), set(words(second))
    return len(a & b) / math.sqrt(len(a) * len(b)) if a and b else 0.0


STSB_SIMILARITIES = {"word-overlap Jaccard": jaccard, "binary bag-of-words cosine": binary_cosine}


def stsb_heuristics(pairs: Sequence[tuple[str, str]], gold: Sequence[float]) -> dict[str, float]:
    """Spearman's correlation (0-100, the row's metric) of each word-overlap similarity with the gold scores, and
    of a constant answer (0: a constant has no correlation)."""
    scores = {"constant answer": 0.0}
    for name, similarity in STSB_SIMILARITIES.items():
        correlation = spearmanr([similarity(a, b) for a, b in pairs], gold).correlation
        scores[name] = 0.0 if math.isnan(correlation) else 100 * float(correlation)
    return scores


# --- classification ---


def classification_heuristics(labels: Sequence, positive_f1: bool = False) -> dict[str, float]:
    """Accuracy (0-100) of chance (a uniform guess among the labels present) and of the majority class; with
    `positive_f1`, the F1 of the positive class (1) instead: "positive" everywhere, and a fair coin's expected F1
    p / (p + 1/2), p the positive share."""
    counts = Counter(labels)
    if positive_f1:
        share = counts[1] / len(labels)
        return {"chance": 100 * share / (share + 0.5), "positive everywhere": 100 * 2 * share / (share + 1)}
    return {"chance": 100 / len(counts), "majority class": 100 * counts.most_common(1)[0][1] / len(labels)}


def best(scores: dict[str, float]) -> tuple[str, float]:
    """The name and score of the best answer (the first named of equal ones)."""
    name = max(scores, key=lambda key: scores[key])
    return name, scores[name]


def nearer_name(pronoun_offset: int, a_offset: int, b_offset: int) -> tuple[bool, bool]:
    """GAP's token-distance cue: the name whose offset is nearer the pronoun's is its antecedent (A on a tie)."""
    a_nearer = abs(pronoun_offset - a_offset) <= abs(pronoun_offset - b_offset)
    return a_nearer, not a_nearer


# --- LitBank ---

# English personal pronouns (LitBank marks the people, places, organisations and vehicles they refer to); "it" is
# left out, as it more often refers to what LitBank does not mark.
PRONOUNS = frozenset("i me my mine myself we us our ours ourselves you your yours yourself yourselves he him his "
                     "himself she her hers herself they them their theirs themselves".split())  # fmt: skip


def exact_match_clusters(sentences: Sequence[Sequence[str]]) -> list[list[tuple[int, int]]]:
    """A coreference answer with no learning, after the exact-match pass, the first, of the multi-pass sieve
    (Raghunathan et al. 2010; there, mentions come from parse trees): its mentions are every maximal run of
    capitalised words (a sentence's first word only where the word after it is capitalised too, so that a
    capitalised sentence opening is no name) and every personal pronoun (`PRONOUNS`); names with the same words
    (lower-cased) form one cluster, and each pronoun stays alone, as the string-match pass leaves pronouns to later
    passes. Spans are (first word, last word) over the whole document, as CorefDocument's clusters are."""
    names: dict[str, list[tuple[int, int]]] = {}
    pronouns = []
    offset = 0
    for sentence in sentences:
        capital = [word[:1].isupper() and word.lower() not in PRONOUNS for word in sentence]
        at = 0
        while at < len(sentence):
            if sentence[at].lower() in PRONOUNS:
                pronouns.append([(offset + at, offset + at)])
                at += 1
                continue
            end = at
            while end < len(sentence) and capital[end]:
                end += 1
            if end == at:
                at += 1
                continue
            start = at + 1 if at == 0 and end == 1 else at  # a sentence's capitalised first word alone
            if start < end:
                key = " ".join(sentence[start:end]).lower()
                names.setdefault(key, []).append((offset + start, offset + end - 1))
            at = end
        offset += len(sentence)
    return list(names.values()) + pronouns


# --- the coreference rows: GAP and LitBank ---


def gap_decisions(path: Path) -> dict[str, list[GapDecision]]:
    """Each answer given for every GAP pronoun (A, B, both, neither), and the name nearer the pronoun in words
    (heuristics.nearer_name), as decisions on each example of the file."""
    examples = read_gap(path)
    constants = {"A everywhere": (True, False), "B everywhere": (False, True), "both everywhere": (True, True),
                 "neither everywhere": (False, False)}  # fmt: skip
    decisions = {name: [GapDecision(e.pronoun, e.a_coref, e.b_coref, a, b) for e in examples]
                 for name, (a, b) in constants.items()}  # fmt: skip
    decisions["nearer name"] = [GapDecision(e.pronoun, e.a_coref, e.b_coref, *nearer_name(
        e.pronoun_words[0], e.a_words[0], e.b_words[0])) for e in examples]  # fmt: skip
    return decisions


def gap_answers(path: Path) -> dict[str, float]:
    """The overall F1 (0-100) of each of `gap_decisions`."""
    return {name: 100 * gap_scores(decided)["overall_f1"] for name, decided in gap_decisions(path).items()}


def litbank_pairs(documents: list) -> dict[str, list[tuple[list, list]]]:
    """Per answer that learns nothing, (gold clusters, its clusters) of each document: finding no mention, and
    clustering capitalised names and pronouns by exact string (heuristics.exact_match_clusters)."""
    return {"no mention": [(document.clusters, []) for document in documents],
            "exact string match": [(document.clusters, exact_match_clusters(document.sentences))
                                   for document in documents]}  # fmt: skip


def litbank_answers(documents: list) -> dict[str, float]:
    """The CoNLL F1 (0-100, singletons scored, as run_coref.py's --keep_singletons) of each of `litbank_pairs`
    (finding no mention scores 0)."""
    pairs = litbank_pairs(documents)["exact string match"]
    return {"no mention": 0.0, "exact string match": 100 * coref_scores(pairs, keep_singletons=True)["conll_f1"]}
