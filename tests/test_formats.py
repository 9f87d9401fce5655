"""The RoBERTa input formats (spanroberta.data.formats): documents of token ids to pretraining blocks.

The synthetic corpus gives every token of the corpus its own id, counting up through each document, so
a block tells exactly where each of its tokens came from: B follows A when B[0] == A[-1] + 1.
"""

import random
from collections import Counter

import datasets
import pytest
from conftest import shared_data
from transformers import BertTokenizer

from spanroberta.data.corpus import CorpusSource, load_documents
from spanroberta.data.formats import (
    INPUT_FORMATS,
    PAIR_FORMATS,
    build_blocks,
    prepare_blocks,
    tokenize_documents,
    tokenize_texts,
)
from spanroberta.data.groups import MAX_GROUP_CHARACTERS, grouped
from spanroberta.data.tokenizer import train_byte_level_bpe

FIRST_ID = 1000  # above the special tokens of the tiny tokenizer (<s>=0, </s>=2)
MAX_LENGTH = 32


def synthetic_documents(num_documents=60, seed=0):
    """Documents of 1-6 sentences of 1-20 tokens, with a few sentences longer than a block."""
    rng = random.Random(seed)
    next_id, documents = FIRST_ID, []
    for _ in range(num_documents):
        document = []
        for _ in range(rng.randint(1, 6)):
            length = 70 if rng.random() < 0.05 else rng.randint(1, 20)
            document.append(list(range(next_id, next_id + length)))
            next_id += length
        documents.append(document)
    return documents


@pytest.fixture(scope="module")
def documents():
    return synthetic_documents()


def tokenized_dataset(documents, characters=None):
    """`documents` as `tokenize_documents` lays them out; a document's length in characters is 4 a token unless
    given."""
    if characters is None:
        characters = [4 * sum(len(sentence) for sentence in document) for document in documents]
    return datasets.Dataset.from_dict({"sentence_ids": documents, "characters": characters})


@pytest.fixture(scope="module")
def tokenized(documents):
    return tokenized_dataset(documents)


@pytest.fixture(scope="module")
def document_of(documents):
    return {token: index for index, document in enumerate(documents) for sentence in document for token in sentence}


@pytest.fixture(scope="module")
def sentence_of(documents):
    sentences = [sentence for document in documents for sentence in document]
    return {token: sentence for sentence in sentences for token in sentence}


def split_pair(input_ids):
    """A and B of RoBERTa's `<s> A </s></s> B </s>`, checking the layout."""
    assert input_ids[0] == 0 and input_ids[-1] == 2
    separator = input_ids.index(2)
    assert input_ids[separator : separator + 2] == [2, 2]
    a, b = input_ids[1:separator], input_ids[separator + 2 : -1]
    assert a and b and min(a + b) >= FIRST_ID
    for segment in (a, b):  # each segment is a contiguous stretch of one document
        assert segment == list(range(segment[0], segment[0] + len(segment)))
    return a, b


def test_full_sentences_fill_blocks_across_documents_with_a_separator(tiny_tokenizer, tokenized, documents):
    blocks = build_blocks(tokenized, tiny_tokenizer, "full-sentences", MAX_LENGTH)["input_ids"]
    assert all(block[0] == 0 and block[-1] == 2 for block in blocks)
    assert all(len(block) == MAX_LENGTH for block in blocks[:-1]) and len(blocks[-1]) <= MAX_LENGTH
    # every token exactly once and in order, long sentences cut, </s> between documents
    stream = [token for block in blocks for token in block[1:-1]]
    expected = []
    for document in documents:
        expected += ([2] if expected else []) + [token for sentence in document for token in sentence]
    assert stream == expected


def test_full_sentences_only_leave_the_last_block_of_each_group_short(tiny_tokenizer, tokenized):
    blocks = build_blocks(tokenized, tiny_tokenizer, "full-sentences", MAX_LENGTH, documents_per_group=7)
    short = sum(len(block) < MAX_LENGTH for block in blocks["input_ids"])
    assert 1 < short <= -(-len(tokenized) // 7)


def test_groups_end_at_their_count_or_their_characters():
    assert list(grouped([1] * 5, 2, int)) == [[1, 1], [1, 1], [1]]
    # A document that would take its group past the bound starts the next one; one longer than the bound is alone.
    half = MAX_GROUP_CHARACTERS // 2
    assert list(grouped([half, half, 1, 2 * MAX_GROUP_CHARACTERS, 3], 1000, int)) == [
        [half, half], [1], [2 * MAX_GROUP_CHARACTERS], [3]]  # fmt: skip


def test_a_document_of_more_characters_than_a_group_holds_is_a_group_of_its_own(tiny_tokenizer, documents, document_of):
    long_document = 20
    characters = [MAX_GROUP_CHARACTERS if index == long_document else 10 for index in range(len(documents))]
    blocks = build_blocks(tokenized_dataset(documents, characters), tiny_tokenizer, "full-sentences", MAX_LENGTH)
    owners = [{document_of[token] for token in block[1:-1] if token >= FIRST_ID} for block in blocks["input_ids"]]
    # Packing never crosses a group: no block holds the long document and another one.
    assert any(long_document in owner for owner in owners)
    assert all(owner == {long_document} for owner in owners if long_document in owner)
    # Three groups, so exactly the last blocks of the first two are short, besides the corpus's last.
    short = [len(block) < MAX_LENGTH for block in blocks["input_ids"]]
    assert sum(short[:-1]) == 2


def check_doc_sentences_blocks(blocks, documents, document_of):
    """Blocks of <s> ... </s> within one document each, every token in corpus order, each document starting one."""
    assert all(block[0] == 0 and block[-1] == 2 and len(block) <= MAX_LENGTH for block in blocks)
    contents = [block[1:-1] for block in blocks]
    assert all(len({document_of[token] for token in content}) == 1 for content in contents)
    stream = [token for content in contents for token in content]
    assert stream == [token for document in documents for sentence in document for token in sentence]
    # each document starts a block
    lengths = [sum(len(sentence) for sentence in document) for document in documents]
    assert len(blocks) == sum(-(-length // (MAX_LENGTH - 2)) for length in lengths)


def test_doc_sentences_never_mix_documents(tiny_tokenizer, tokenized, documents, document_of):
    # Unpacked: one block per row.
    unpacked = build_blocks(tokenized, tiny_tokenizer, "doc-sentences", MAX_LENGTH, pack_documents=False)
    assert "sequence_lengths" not in unpacked.column_names
    check_doc_sentences_blocks(unpacked["input_ids"], documents, document_of)

    # Packed (the default): rows of at most MAX_LENGTH tokens hold several blocks, each within one document.
    packed = build_blocks(tokenized, tiny_tokenizer, "doc-sentences", MAX_LENGTH)
    assert packed.column_names == ["input_ids", "sequence_lengths"]
    blocks = []
    for row, lengths in zip(packed["input_ids"], packed["sequence_lengths"]):
        assert len(row) <= MAX_LENGTH and sum(lengths) == len(row) and min(lengths) >= 1
        starts = [sum(lengths[:i]) for i in range(len(lengths))]
        blocks += [row[start : start + length] for start, length in zip(starts, lengths)]
    assert len(packed) < len(blocks)  # rows do hold several blocks
    # Packing only regroups the blocks: the same blocks, each kept whole, in corpus order within a row.
    assert sorted(blocks) == sorted(unpacked["input_ids"])
    for row, lengths in zip(packed["input_ids"], packed["sequence_lengths"]):
        firsts = [row[sum(lengths[:i]) + 1] for i in range(len(lengths))]
        assert firsts == sorted(firsts)
    check_doc_sentences_blocks(sorted(blocks, key=lambda block: block[1]), documents, document_of)


@pytest.mark.parametrize("input_format", PAIR_FORMATS)
def test_nsp_pairs_are_half_true_continuations_half_random_segments(
    tiny_tokenizer, tokenized, document_of, sentence_of, input_format
):
    blocks = build_blocks(tokenized, tiny_tokenizer, input_format, MAX_LENGTH, seed=1)
    assert blocks.column_names == ["input_ids", "next_sentence_label"]  # no token_type_ids for RoBERTa
    labels = blocks["next_sentence_label"]
    assert 0.4 < sum(labels) / len(labels) < 0.7  # single-sentence documents only get random B's
    a_segments_span_sentences = False
    for input_ids, label in zip(blocks["input_ids"], labels):
        assert len(input_ids) <= MAX_LENGTH
        a, b = split_pair(input_ids)
        if label == 0:
            assert b[0] == a[-1] + 1 and document_of[a[-1]] == document_of[b[0]]
        else:
            assert document_of[a[-1]] != document_of[b[0]]
        if input_format == "sentence-pair":
            # natural sentences, cut only when longer than half a block
            for segment in (a, b):
                sentence = sentence_of[segment[0]]
                assert segment == sentence if len(sentence) <= (MAX_LENGTH - 4) // 2 else set(segment) <= set(sentence)
        a_segments_span_sentences |= sentence_of[a[0]] != sentence_of[a[-1]]
    assert a_segments_span_sentences == (input_format == "segment-pair")


@pytest.mark.parametrize("input_format", PAIR_FORMATS)
def test_sop_pairs_are_consecutive_segments_swapped_half_of_the_time(
    tiny_tokenizer, tokenized, document_of, input_format
):
    blocks = build_blocks(tokenized, tiny_tokenizer, input_format, MAX_LENGTH, pair_objective="sop")
    assert blocks.column_names == ["input_ids", "sentence_order_label"]
    labels = blocks["sentence_order_label"]
    assert 0.35 < sum(labels) / len(labels) < 0.65
    for input_ids, label in zip(blocks["input_ids"], labels):
        a, b = split_pair(input_ids)
        first, second = (b, a) if label else (a, b)
        assert second[0] == first[-1] + 1 and document_of[first[-1]] == document_of[second[0]]


def test_blocks_depend_on_the_seed_but_not_on_num_proc(tiny_tokenizer):
    # Two processes splitting 50 documents in halves would cut a group of 8; groups are made first.
    tokenized = tokenized_dataset(synthetic_documents(num_documents=50))

    def blocks(seed, num_proc=None):
        return build_blocks(
            tokenized, tiny_tokenizer, "segment-pair", MAX_LENGTH, seed=seed, num_proc=num_proc, documents_per_group=8
        )[:]

    assert blocks(seed=3, num_proc=2) == blocks(seed=3)
    assert blocks(seed=4) != blocks(seed=3)


def test_bert_layout_and_token_type_ids():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "one", "two", "three", "four", "five", "six"]
    tokenizer = BertTokenizer(vocab={token: index for index, token in enumerate(vocab)})
    documents = datasets.Dataset.from_dict({"text": ["one two\nthree four", "five\nsix six"]})
    tokenized = tokenize_documents(documents, tokenizer)
    assert tokenized["sentence_ids"] == [[[5, 6], [7, 8]], [[9], [10, 10]]]

    pairs = build_blocks(tokenized, tokenizer, "sentence-pair", 16, pair_objective="sop", seed=0)
    for input_ids, token_type_ids in zip(pairs["input_ids"], pairs["token_type_ids"]):
        separator = input_ids.index(3)
        assert input_ids[0] == 2 and input_ids[-1] == 3 and input_ids.count(3) == 2
        assert token_type_ids == [0] * (separator + 1) + [1] * (len(input_ids) - separator - 1)
    packed = build_blocks(tokenized, tokenizer, "full-sentences", 16)
    assert packed["input_ids"] == [[2, 5, 6, 7, 8, 3, 9, 10, 10, 3]]  # [SEP] separates the documents
    assert packed["token_type_ids"] == [[0] * 10]


def test_tokenize_documents_keeps_one_list_of_sentences_per_document(tiny_tokenizer):
    documents = datasets.Dataset.from_dict({"text": ["The quick brown fox.\nThe lazy dog.", "A span."]})
    tokenized = tokenize_documents(documents, tiny_tokenizer)
    assert tokenized.column_names == ["sentence_ids", "characters"]
    assert tokenized["characters"] == [len(text) for text in documents["text"]]
    expected = [
        [tiny_tokenizer(" " + line, add_special_tokens=False)["input_ids"] for line in text.split("\n")]
        for text in documents["text"]
    ]
    assert tokenized["sentence_ids"] == expected


def test_tokenize_texts_matches_the_tokenizer_call_and_never_truncates(tiny_tokenizer):
    """tokenize_texts calls the Rust backend directly when it is set as `tokenizer(...)` would set it, and
    falls back to the call otherwise (here: a tokenizer saved with truncation on)."""
    import copy

    long_line = "The quick brown fox jumps over the lazy dog. " * 40
    texts = ["The quick brown fox.\n  <mask> and <s> inside a line.\n\n" + long_line, "A span."]
    lines = [" " + line.lstrip() for text in texts for line in text.split("\n") if line.strip()]
    expected = [tiny_tokenizer(line, add_special_tokens=False, verbose=False)["input_ids"] for line in lines]
    assert len(expected[2]) > 64

    truncating = copy.deepcopy(tiny_tokenizer)
    truncating.backend_tokenizer.enable_truncation(max_length=8)
    for tokenizer in (tiny_tokenizer, truncating):
        sentences = [sentence for document in tokenize_texts(texts, tokenizer) for sentence in document]
        assert sentences == expected
    assert tokenize_texts([], tiny_tokenizer) == [] and tokenize_texts(["\n \n"], tiny_tokenizer) == [[]]


def test_every_sentence_starts_a_word(tiny_tokenizer):
    """Span and word masking read word starts off the ids: a sentence's first token must start a word, or its
    first word would be joined to the previous sentence's last word inside a block."""
    from spanroberta.data.masking import word_start_table

    starts = word_start_table(tiny_tokenizer)
    documents = datasets.Dataset.from_dict({"text": ["The quick brown fox.\nResearchers pretrain encoders."]})
    for sentence in tokenize_documents(documents, tiny_tokenizer)["sentence_ids"][0]:
        assert starts[sentence[0]]


def test_bad_arguments_are_refused(tiny_tokenizer, tokenized):
    with pytest.raises(ValueError, match="full-sentences, doc-sentences, segment-pair, sentence-pair"):
        build_blocks(tokenized, tiny_tokenizer, "sentences", MAX_LENGTH)
    with pytest.raises(ValueError, match="nsp, sop"):
        build_blocks(tokenized, tiny_tokenizer, "segment-pair", MAX_LENGTH, pair_objective="order")
    with pytest.raises(ValueError, match=">= 6"):
        build_blocks(tokenized, tiny_tokenizer, "segment-pair", 5)
    with pytest.raises(ValueError, match="tokenize_documents"):
        build_blocks(datasets.Dataset.from_dict({"text": ["a"]}), tiny_tokenizer, "doc-sentences", MAX_LENGTH)


def test_prepared_blocks_are_cached_per_tokenizer(tmp_path, tiny_tokenizer):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The quick brown fox jumps.\nIt runs.\n\nThe lazy dog sleeps.\n")
    documents = load_documents(CorpusSource([str(corpus)]), cache_dir=str(tmp_path / "cache"))

    def cache_files(tokenizer):
        blocks = prepare_blocks(documents, tokenizer, "segment-pair", MAX_LENGTH, seed=5)
        assert len(blocks) > 0
        return [entry["filename"] for entry in blocks.cache_files]

    first = cache_files(tiny_tokenizer)
    assert first and first == cache_files(tiny_tokenizer)
    other_tokenizer = train_byte_level_bpe(["The lazy dog sleeps."] * 5, vocab_size=300, show_progress=False)
    assert cache_files(other_tokenizer) != first


@pytest.mark.slow
def test_wikitext_in_every_format(tmp_path, tiny_tokenizer):
    path = shared_data("corpus", "wiki.valid.raw")
    documents = load_documents(CorpusSource([str(path)]), cache_dir=str(tmp_path / "cache"))
    assert len(documents) > 1000 and "Homarus gammarus" in documents[1]["text"]
    tokenized = tokenize_documents(documents, tiny_tokenizer)["sentence_ids"]
    total_tokens = sum(len(sentence) for document in tokenized for sentence in document)
    for input_format in INPUT_FORMATS:
        blocks = prepare_blocks(documents, tiny_tokenizer, input_format, 128, pair_objective="sop")
        lengths = Counter(len(block) for block in blocks["input_ids"])
        assert max(lengths) <= 128 and min(lengths) > 2
        assert all(block[0] == 0 and block[-1] == 2 for block in blocks["input_ids"][:100])
        special_tokens = sum(block.count(0) + block.count(2) for block in blocks["input_ids"])
        corpus_tokens = sum(lengths[length] * length for length in lengths) - special_tokens
        if input_format == "full-sentences":
            assert len(blocks) - lengths[128] <= 2  # the last block of each group of 1000 documents
            assert corpus_tokens == total_tokens
        elif input_format == "doc-sentences":
            assert corpus_tokens == total_tokens
        else:
            labels = blocks["sentence_order_label"]
            assert 0.45 < sum(labels) / len(labels) < 0.55
            assert corpus_tokens == pytest.approx(total_tokens, rel=0.001)  # one-token lone pieces are dropped
        assert "lobster" in tiny_tokenizer.decode(sum(blocks["input_ids"][:20], []))
