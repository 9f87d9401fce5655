"""Named-entity, noun-phrase and PMI masking (SpanBERT section 5.1; Levine et al. 2021) on real text: WikiText.

The spaCy pipelines are real ones built here (no English pipeline can be downloaded in the test environment): a
blank English pipeline with an entity ruler, and one whose morphologizer and parser are trained on four annotated
sentences. Their spans are poor linguistics but real `doc.ents` and `doc.noun_chunks`, which is what is tested.
"""

import functools
import itertools
import math
import pickle
import sys
from collections import Counter

import datasets
import numpy as np
import pytest
import torch
from conftest import shared_data

import run_pretraining
from spanroberta.data.collator import DataCollatorForSpanMasking
from spanroberta.data.corpus import CorpusSource, iter_documents, load_documents
from spanroberta.data.formats import block_builder, prepare_blocks
from spanroberta.data.masking import (
    INSIDE_UNIT,
    OUTSIDE_UNIT,
    UNIT_START,
    row_keys,
    special_token_table,
    unit_mask,
    word_start_table,
    word_starts,
)
from spanroberta.data.masking_units import (
    UNITS_COLUMN,
    PmiUnits,
    ngram_counts,
    pmi_n,
)
from spanroberta.data.sources import build_masking_units
from spanroberta.data.streaming import StreamingBlocks
from spanroberta.data.tokenizer import train_byte_level_bpe
from spanroberta.errors import UserInputError

spacy = pytest.importorskip("spacy")

NUM_PARAGRAPHS = 150  # about 16K words: the parser runs over them in a few seconds

# (words, part of speech, head of each word, dependency label): what the noun-phrase pipeline's parser learns from.
PARSED_SENTENCES = [
    ("The old man saw a big dog in the park .", "DET ADJ NOUN VERB DET ADJ NOUN ADP DET NOUN PUNCT",
     [2, 2, 3, 3, 6, 6, 3, 3, 9, 7, 3], "det amod nsubj ROOT det amod dobj prep det pobj punct"),
    ("A team of engineers built the new bridge .", "DET NOUN ADP NOUN VERB DET ADJ NOUN PUNCT",
     [1, 4, 1, 2, 4, 7, 7, 4, 4], "det nsubj prep pobj ROOT det amod dobj punct"),
    ("The album was released in the United States .", "DET NOUN AUX VERB ADP DET PROPN PROPN PUNCT",
     [1, 3, 3, 3, 3, 7, 7, 4, 3], "det nsubjpass auxpass ROOT prep det compound pobj punct"),
    ("She played the first game of the season .", "PRON VERB DET ADJ NOUN ADP DET NOUN PUNCT",
     [1, 1, 4, 4, 1, 4, 7, 5, 1], "nsubj ROOT det amod dobj prep det pobj punct"),
]  # fmt: skip


@pytest.fixture(scope="module")
def wiki_file(tmp_path_factory):
    """The first paragraphs of the WikiText validation file (headings left out), one a line, five to a document
    (documents apart by a blank line)."""
    lines = shared_data("corpus", "wiki.valid.raw").read_text(encoding="utf-8").splitlines()
    paragraphs = [line.strip() for line in lines if line.strip() and not line.strip().startswith("=")]
    documents = ["\n".join(paragraphs[i : i + 5]) for i in range(0, NUM_PARAGRAPHS, 5)]
    path = tmp_path_factory.mktemp("wiki") / "wiki.txt"
    path.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def wiki_documents(wiki_file):
    return datasets.Dataset.from_dict({"text": wiki_file.read_text(encoding="utf-8").split("\n\n")})


@pytest.fixture(scope="module")
def wiki_tokenizer(wiki_documents):
    return train_byte_level_bpe(wiki_documents["text"], vocab_size=2000, show_progress=False)


@pytest.fixture(scope="module")
def entity_pipeline(tmp_path_factory):
    """A blank English pipeline whose entity ruler calls runs of capitalised non-stop words and years entities."""
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns([
        {"label": "NAME", "pattern": [{"IS_TITLE": True, "IS_STOP": False, "OP": "+"}]},
        {"label": "DATE", "pattern": [{"SHAPE": "dddd"}]},
    ])  # fmt: skip
    path = tmp_path_factory.mktemp("spacy") / "entities"
    nlp.to_disk(path)
    return path


@pytest.fixture(scope="module")
def noun_phrase_pipeline(tmp_path_factory):
    """A blank English pipeline with a morphologizer and a parser trained on PARSED_SENTENCES."""
    from spacy.training import Example

    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("morphologizer")
    parser = nlp.add_pipe("parser")
    examples = []
    for text, pos, heads, deps in PARSED_SENTENCES:
        for label in deps.split():
            parser.add_label(label)
        annotations = {"pos": pos.split(), "heads": heads, "deps": deps.split()}
        examples.append(Example.from_dict(nlp.make_doc(text), annotations))
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(30):
        nlp.update(examples, sgd=optimizer)
    path = tmp_path_factory.mktemp("spacy") / "noun_phrases"
    nlp.to_disk(path)
    return path


@pytest.fixture(scope="module")
def unit_blocks(wiki_documents, wiki_tokenizer, entity_pipeline, noun_phrase_pipeline):
    """scheme -> the WikiText blocks of 512 tokens with that scheme's units."""
    models = {"named-entity": str(entity_pipeline), "noun-phrase": str(noun_phrase_pipeline), "pmi": None}
    blocks = {}
    for scheme, model in models.items():
        units = build_masking_units(scheme, wiki_tokenizer, wiki_documents, model, pmi_min_count=3)
        blocks[scheme] = prepare_blocks(wiki_documents, wiki_tokenizer, "doc-sentences", 512, units=units)
    return blocks


def batch_of(blocks, epoch=0, indices=None):
    indices = range(len(blocks)) if indices is None else indices
    return [{**blocks[i], "example_index": i, "mask_epoch": epoch} for i in indices]


def padded(rows, value):
    return torch.nn.utils.rnn.pad_sequence([torch.tensor(row) for row in rows], batch_first=True, padding_value=value)


def unit_masks(blocks, tokenizer, scheme, seed=0, epoch=0):
    """(unit_mask's result, maskable, word starts, unit marks) for all blocks, keyed as the collator keys them."""
    input_ids = padded(blocks["input_ids"], tokenizer.pad_token_id)
    lengths = torch.tensor([len(row) for row in blocks["input_ids"]])
    maskable = (torch.arange(input_ids.shape[1]) < lengths[:, None]) & ~special_token_table(tokenizer)[input_ids]
    starts = word_starts(input_ids, maskable, word_start_table(tokenizer))
    marks = padded(blocks[UNITS_COLUMN], OUTSIDE_UNIT).long()
    keys = row_keys(seed, torch.full((len(blocks),), epoch), torch.arange(len(blocks)))
    result = unit_mask(starts, maskable, marks, keys, 0.15, unit_share=None if scheme == "pmi" else 0.5)
    return result, maskable, starts, marks


def unit_numbers(marks, maskable):
    """Long [B, L]: the unit of each token (numbered along the row), -1 outside units."""
    in_unit = maskable & (marks != OUTSIDE_UNIT)
    previous = torch.nn.functional.pad(in_unit[:, :-1], (1, 0), value=False)
    starts = in_unit & ((marks == UNIT_START) | ~previous)
    return torch.where(in_unit, starts.cumsum(1) - 1, -1)


@pytest.mark.parametrize("scheme", ["named-entity", "noun-phrase", "pmi"])
def test_units_are_runs_of_whole_words(unit_blocks, wiki_tokenizer, scheme):
    result, maskable, starts, marks = unit_masks(unit_blocks[scheme], wiki_tokenizer, scheme)
    assert set(marks.unique().tolist()) == {OUTSIDE_UNIT, UNIT_START, INSIDE_UNIT}
    assert not (marks[~maskable] != OUTSIDE_UNIT).any()  # special tokens and padding are in no unit
    units = unit_numbers(marks, maskable)
    first_of_unit = (units >= 0) & (units != torch.nn.functional.pad(units[:, :-1], (1, 0), value=-1))
    next_token = torch.nn.functional.pad(units[:, 1:], (0, 1), value=-1)
    next_is_word_start = torch.nn.functional.pad(starts[:, 1:] | ~maskable[:, 1:], (0, 1), value=True)
    last_of_unit = (units >= 0) & (next_token != units)
    assert starts[first_of_unit].all() and next_is_word_start[last_of_unit].all()


def test_entity_units_are_the_entities_spacy_finds(unit_blocks, wiki_tokenizer, wiki_documents, entity_pipeline):
    nlp = spacy.load(entity_pipeline)
    entities = {ent.text for doc in nlp.pipe(wiki_documents["text"]) for ent in doc.ents}
    blocks = unit_blocks["named-entity"]
    marks = padded(blocks[UNITS_COLUMN], OUTSIDE_UNIT).long()
    input_ids = padded(blocks["input_ids"], wiki_tokenizer.pad_token_id)
    maskable = ~special_token_table(wiki_tokenizer)[input_ids] & (marks >= 0)
    units = unit_numbers(marks, maskable)
    texts = Counter()
    for row in range(len(blocks)):
        for unit in units[row].unique().tolist():
            if unit >= 0:
                texts[wiki_tokenizer.decode(input_ids[row][units[row] == unit]).strip() in entities] += 1
    # WikiText separates punctuation by spaces, so nearly every entity is whole words: its unit decodes to it.
    # The few others are entities cut by a block boundary, or inside a word ("2010s").
    assert texts[True] > 500 and texts[False] < 0.03 * texts[True]


@pytest.mark.parametrize("scheme", ["named-entity", "noun-phrase"])
def test_half_the_budget_goes_to_whole_units(unit_blocks, wiki_tokenizer, scheme):
    result, maskable, starts, marks = unit_masks(unit_blocks[scheme], wiki_tokenizer, scheme)
    rate = result.masked.sum() / maskable.sum()
    assert abs(rate.item() - 0.15) < 0.01
    assert (result.masked.sum(1) <= result.budget).all() and not (result.masked & ~maskable).any()

    # The units' part: whole units only, never more than half the budget; where the row has units enough, half
    # of it up to what the first unit that does not fit leaves (first fit: a few tokens at most).
    units = unit_numbers(marks, maskable)
    for row in range(len(units)):
        chosen = units[row][result.by_units[row]].unique()
        assert (result.by_units[row] == torch.isin(units[row], chosen) & (units[row] >= 0)).all()
    half = torch.floor(0.5 * result.budget.double() + 0.5).long()
    assert (result.by_units.sum(1) <= half).all()
    enough = (units >= 0).sum(1) >= 2 * half
    assert enough.sum() >= 10
    share = result.by_units[enough].sum() / half[enough].sum()
    assert share > 0.95


def test_pmi_masks_ngrams_as_often_as_they_cover_the_text(unit_blocks, wiki_tokenizer):
    """PMI-Masking draws n-grams and the words outside them alike, so n-grams get the share of the budget that they
    have of the text (the paper's 800K n-grams cover about half of it, hence half of the budget)."""
    result, maskable, starts, marks = unit_masks(unit_blocks["pmi"], wiki_tokenizer, "pmi")
    assert abs((result.masked.sum() / maskable.sum()).item() - 0.15) < 0.01
    in_ngram = maskable & (marks != OUTSIDE_UNIT)
    coverage = (in_ngram.sum() / maskable.sum()).item()
    share = ((result.masked & in_ngram).sum() / result.masked.sum()).item()
    assert 0.15 < coverage and abs(share - coverage) < 0.04
    units = unit_numbers(marks, maskable)
    for row in range(len(units)):  # n-grams chosen by the units' draw are masked whole
        chosen = units[row][result.by_units[row] & (units[row] >= 0)].unique()
        assert (torch.isin(units[row], chosen) & (units[row] >= 0) <= result.by_units[row]).all()


@pytest.mark.parametrize("scheme", ["named-entity", "noun-phrase", "pmi"])
def test_collator_masks_are_a_function_of_seed_epoch_and_index(unit_blocks, wiki_tokenizer, scheme):
    blocks = unit_blocks[scheme]
    collator = DataCollatorForSpanMasking(wiki_tokenizer, label_layout="slots", masking=scheme, seed=3)
    together = collator(batch_of(blocks, epoch=1, indices=[0, 1, 2, 3]))
    alone = collator(batch_of(blocks, epoch=1, indices=[2]))
    torch.testing.assert_close(together["labels"][2:3], alone["labels"])
    torch.testing.assert_close(together["input_ids"][2:3], alone["input_ids"])
    assert (together["sbo_left_positions"] != -100).any()  # units are spans: SBO has targets
    other_epoch = collator(batch_of(blocks, epoch=2, indices=[0, 1, 2, 3]))
    assert not torch.equal(together["mlm_positions"], other_epoch["mlm_positions"])


def test_collator_needs_blocks_made_with_units(wiki_tokenizer):
    collator = DataCollatorForSpanMasking(wiki_tokenizer, masking="pmi")
    with pytest.raises(ValueError, match="masking_units"):
        collator([{"input_ids": [0, 300, 301, 2]}])


def test_pmi_n_is_the_smallest_log_ratio_over_segmentations():
    # Words are tuples of token ids; a corpus where "a b" always goes together and "c" follows at random.
    a, b, c, d = (10,), (11,), (12,), (13,)
    lines = [[a, b, c]] * 6 + [[a, b, d]] * 4 + [[c, d]] * 5
    counts, positions = ngram_counts(lines, min_count=1)
    p = {ngram: count / positions[len(ngram)] for n in counts for ngram, count in counts[n].items()}
    segmentations = [
        p[(a,)] * p[(b,)] * p[(c,)],
        p[(a, b)] * p[(c,)],
        p[(a,)] * p[(b, c)],
    ]
    expected = min(math.log(p[(a, b, c)] / product) for product in segmentations)
    assert pmi_n((a, b, c), counts, positions) == pytest.approx(expected)
    assert pmi_n((a, b), counts, positions) > pmi_n((c, d), counts, positions)


def test_pmi_vocabulary_ranks_collocations_above_chance_pairs(wiki_documents, wiki_tokenizer, tmp_path):
    units = build_masking_units("pmi", wiki_tokenizer, wiki_documents, pmi_vocabulary_size=100, pmi_min_count=3)
    assert isinstance(units, PmiUnits) and 0 < len(units.ngrams) <= 100
    lengths = Counter(len(ngram) for ngram in units.ngrams)
    assert lengths[2] <= 50 and lengths[3] <= 25 and lengths[4] <= 12 and lengths[5] <= 12
    the_of = ((wiki_tokenizer.convert_tokens_to_ids("Ġof"),), (wiki_tokenizer.convert_tokens_to_ids("Ġthe"),))
    assert the_of not in units.ngrams  # frequent, but no more together than chance has it
    path = tmp_path / "vocabulary.tsv"
    units.save(path)
    scores = [float(line.split("\t")[0]) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(scores) == len(units.ngrams) and scores == sorted(scores, reverse=True)


def test_spacy_errors_say_what_to_install(wiki_tokenizer, monkeypatch, tmp_path):
    with pytest.raises(UserInputError, match="--spacy_model"):
        build_masking_units("named-entity", wiki_tokenizer, None)
    with pytest.raises(UserInputError, match="en_core_web_sm"):
        build_masking_units("noun-phrase", wiki_tokenizer, None, spacy_model=str(tmp_path / "missing"))
    spacy.blank("en").to_disk(tmp_path / "no_parser")
    units = build_masking_units("noun-phrase", wiki_tokenizer, None, spacy_model=str(tmp_path / "no_parser"))
    with pytest.raises(UserInputError, match="dependency parse"):
        units.mark([" A line of text."], [wiki_tokenizer(" A line of text.", add_special_tokens=False)["input_ids"]])
    with pytest.raises(UserInputError, match="streaming"):
        build_masking_units("pmi", wiki_tokenizer, None)
    monkeypatch.setitem(sys.modules, "spacy", None)  # what `import spacy` sees when spaCy is not installed
    with pytest.raises(UserInputError, match=r'pip install -e "\.\[spacy\]"'):
        build_masking_units("named-entity", wiki_tokenizer, None, spacy_model="en_core_web_sm")


def test_streaming_gives_the_blocks_and_units_of_prepare_blocks(wiki_file, wiki_tokenizer, entity_pipeline):
    units = build_masking_units("named-entity", wiki_tokenizer, None, str(entity_pipeline))
    units = pickle.loads(pickle.dumps(units))  # as DataLoader workers and datasets' processes receive them
    builder = block_builder(wiki_tokenizer, "doc-sentences", 512, units=units)
    read = functools.partial(iter_documents, CorpusSource([str(wiki_file)]))
    stream = StreamingBlocks(read, wiki_tokenizer, builder, documents_per_group=1000, shuffle_buffer_size=8)
    documents = load_documents(CorpusSource([str(wiki_file)]))
    expected = prepare_blocks(documents, wiki_tokenizer, "doc-sentences", 512, units=units)

    def contents(row):
        return tuple(row["input_ids"]), tuple(row[UNITS_COLUMN])

    streamed = [contents(row) for row in itertools.islice(stream, len(expected))]
    assert sorted(streamed) == sorted(contents(row) for row in expected)
    assert sum(UNIT_START in marks for _, marks in streamed) > len(expected) // 2


@pytest.mark.parametrize("scheme", ["named-entity", "noun-phrase", "pmi"])
@pytest.mark.slow
def test_pretraining_runs_with_unit_masking(wiki_file, entity_pipeline, noun_phrase_pipeline, tmp_path, scheme):
    model = {"named-entity": entity_pipeline, "noun-phrase": noun_phrase_pipeline}.get(scheme)
    prepared = tmp_path / "prepared"
    arguments = [
        "--train_file", str(wiki_file),
        "--output_dir", str(tmp_path / "run"),
        "--model_size", "tiny",
        "--tokenizer_vocab_size", "1000",
        "--max_seq_length", "128",
        "--per_device_train_batch_size", "8",
        "--max_steps", "3",
        "--logging_steps", "1",
        "--validation_split_percentage", "10",
        "--masking", scheme,
        "--pmi_min_count", "3",
        "--prepared_data_dir", str(prepared),
        "--disable_tqdm", "true",
        "--report_to", "none",
    ] + (["--spacy_model", str(model)] if model else [])  # fmt: skip
    run_pretraining.main(arguments)
    blocks = datasets.load_from_disk(str(prepared / "blocks"))
    assert UNITS_COLUMN in blocks["train"].column_names and UNITS_COLUMN in blocks["validation"].column_names
    marks = np.concatenate([np.asarray(row) for row in blocks["train"][UNITS_COLUMN]])
    assert (marks == UNIT_START).sum() > 50
    assert (tmp_path / "run" / "eval_results.json").is_file()
    assert (prepared / "pmi_vocabulary.tsv").is_file() == (scheme == "pmi")
    # The folder's units are those of its scheme: asking another of it says so instead of masking wrong units.
    other = "pmi" if scheme != "pmi" else "named-entity"
    again = [*arguments, "--output_dir", str(tmp_path / "again"), "--masking", other]
    again += ["--spacy_model", str(entity_pipeline)]
    with pytest.raises(SystemExit, match="masking_units: prepared with"):
        run_pretraining.main(again)
