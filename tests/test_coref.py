"""Coreference: the readers and writers (CoNLL-2012, JSON lines, GAP), segmenting, the model's loss and pruning on
hand-made cases, and run_coref.py end to end on a tiny model (and on LitBank where the shared data is present)."""

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import checked_results, run_without_spanroberta, shared_data
from transformers import BertConfig, BertModel

from spanroberta.errors import UserInputError
from spanroberta.tasks.coreference.task import COREFERENCE
from spanroberta.models.modeling_coreference import CorefModel, gold_marginal_loss, prune_spans
from spanroberta.tasks.coreference.data import (
    DocumentCollator,
    TrainingWindows,
    encode_document,
    gap_decision,
    predicted_clusters,
    read_coref_documents,
    read_gap,
    split_into_segments,
    write_coref_documents,
)

# Two documents in one file. The first is tab-separated with an empty last column where there is no mention (as
# LitBank's files); the second space-separated with "-" and a speaker in column 10 (as OntoNotes').
CONLL = """#begin document (story); part 0
story\t0\t0\tAnna\t_\t_\t_\t_\t_\t_\t_\t_\t(0)
story\t0\t1\tmet\t_\t_\t_\t_\t_\t_\t_\t_\t
story\t0\t2\ther\t_\t_\t_\t_\t_\t_\t_\t_\t(1
story\t0\t3\tsister\t_\t_\t_\t_\t_\t_\t_\t_\t1)
story\t0\t4\t.\t_\t_\t_\t_\t_\t_\t_\t_\t

story\t0\t0\tShe\t_\t_\t_\t_\t_\t_\t_\t_\t(0)
story\t0\t1\tsmiled\t_\t_\t_\t_\t_\t_\t_\t_\t
story\t0\t2\tat\t_\t_\t_\t_\t_\t_\t_\t_\t
story\t0\t3\ther\t_\t_\t_\t_\t_\t_\t_\t_\t(1)|(2
story\t0\t4\tsister\t_\t_\t_\t_\t_\t_\t_\t_\t2)
story\t0\t5\t.\t_\t_\t_\t_\t_\t_\t_\t_\t

#end document
#begin document (news/wire); part 3
news/wire   3   0   John   NNP   *   -   -   -   Speaker#1   *   (5
news/wire   3   1   Smith   NNP   *   -   -   -   Speaker#1   *   5)
news/wire   3   2   said   VBD   *   -   -   -   Speaker#1   *   -
news/wire   3   3   he   PRP   *   -   -   -   Speaker#2   *   (5)
news/wire   3   4   left   VBD   *   -   -   -   Speaker#2   *   -

#end document
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_conll_reader(tmp_path):
    story, news = read_coref_documents(str(write(tmp_path, "two.conll", CONLL)))
    assert story.doc_key == "story_0" and news.doc_key == "news/wire_3"
    assert story.sentences == [["Anna", "met", "her", "sister", "."], ["She", "smiled", "at", "her", "sister", "."]]
    # Words are numbered over the document: "She" is word 5, "her sister" in sentence 2 is 8-9.
    assert story.clusters == [[(0, 0), (5, 5)], [(2, 3), (8, 8)], [(8, 9)]]
    assert news.clusters == [[(0, 1), (3, 3)]]
    assert news.speakers == [["Speaker#1"] * 3 + ["Speaker#2"] * 2]
    # A folder and a glob read the same file.
    assert [d.doc_key for d in read_coref_documents(str(tmp_path))] == ["story_0", "news/wire_3"]
    assert len(read_coref_documents(str(tmp_path / "*.conll"))) == 2


def test_conll_round_trip_keeps_every_other_column(tmp_path):
    documents = read_coref_documents(str(write(tmp_path, "in.conll", CONLL)))
    out = tmp_path / "out.conll"
    write_coref_documents(out, documents, [[[(0, 0), (2, 3)]], [[(3, 3), (0, 1)]]])
    again = read_coref_documents(str(out))
    assert again[0].clusters == [[(0, 0), (2, 3)]] and again[1].clusters == [[(0, 1), (3, 3)]]
    assert [d.sentences for d in again] == [d.sentences for d in documents]
    lines = out.read_text().splitlines()
    assert lines[1] == "story\t0\t0\tAnna\t_\t_\t_\t_\t_\t_\t_\t_\t(0)"
    assert lines[2] == "story\t0\t1\tmet\t_\t_\t_\t_\t_\t_\t_\t_\t"  # no mention: the file's own empty column
    assert lines[-4].split() == "news/wire 3 3 he PRP * - - - Speaker#2 * (0)".split()
    assert lines[-3].split()[-1] == "-"


def test_jsonlines_reader_and_round_trip(tmp_path):
    record = {"doc_key": "bc/cctv/00/cctv_0000_0", "sentences": [["I", "saw", "Bo"], ["He", "ran"]],
              "speakers": [["a", "a", "a"], ["b", "b"]], "clusters": [[[2, 2], [3, 3]]], "extra": 1}  # fmt: skip
    path = write(tmp_path, "dev.jsonlines", json.dumps(record) + "\n")
    (document,) = read_coref_documents(str(path))
    assert document.clusters == [[(2, 2), (3, 3)]] and document.num_words == 5
    out = tmp_path / "out.jsonlines"
    write_coref_documents(out, [document], [[[(0, 0), (3, 4)]]])
    written = json.loads(out.read_text())
    assert written == {**record, "clusters": [[[0, 0], [3, 4]]]}


def test_conll_reader_reads_joined_brackets_as_the_reference_scorer(tmp_path):
    cells = [("Ann", "(1(3"), ("Lee", "1)"), ("and", "-"), ("her", "(2)|(4"), ("dog", "4)3)")]
    lines = [f"j\t0\t{i}\t{word}\t_\t{cell}" for i, (word, cell) in enumerate(cells)]
    path = write(tmp_path, "joined.conll", "#begin document (j); part 0\n" + "\n".join(lines) + "\n\n#end document\n")
    (document,) = read_coref_documents(str(path))
    # Clusters in id order: 1 "Ann Lee", 2 "her", 3 "Ann Lee and her dog", 4 "her dog".
    assert document.clusters == [[(0, 1)], [(3, 3)], [(0, 4)], [(3, 4)]]
    bad = write(tmp_path, "bad.conll", "#begin document (b); part 0\nb 0 0 Hi - (1)x\n#end document\n")
    with pytest.raises(UserInputError, match="line 2: '\\(1\\)x' is not a cell of coreference brackets"):
        read_coref_documents(str(bad))


@pytest.mark.parametrize(
    "name, text, expected",
    [
        ("missing.jsonlines", '{"doc_key": "d1", "sentences": [["a"]]}\n', "d1: line 1 lacks the field `clusters`"),
        ("range.jsonlines", '{"doc_key": "d2", "sentences": [["a", "b"]], "clusters": [[[0, 2]]]}\n',
         "d2: the span [0, 2] is out of range"),
        ("empty.jsonlines", '{"doc_key": "d3", "sentences": [], "clusters": []}\n', "d3: `sentences` must be"),
        ("close.conll", "#begin document (d4); part 0\nd4 0 0 Hi - - - - - - - 3)\n#end document\n",
         "document d4_0: line 2: `3)` closes a mention of cluster 3 that was never opened"),
        ("open.conll", "#begin document (d5); part 0\nd5 0 0 Hi - - - - - - - (3\n#end document\n",
         "document d5_0: mentions of cluster(s) 3 are opened but never closed"),
        ("empty.conll", "#begin document (d6); part 0\n\n#end document\n", "document d6_0: the document has no words"),
    ],
)  # fmt: skip
def test_bad_input_names_file_and_document(tmp_path, name, text, expected):
    path = write(tmp_path, name, text)
    with pytest.raises(UserInputError) as caught:
        read_coref_documents(str(path))
    assert str(path) in str(caught.value) and expected in str(caught.value)


def test_segments_end_at_sentences_then_words():
    # Subwords of sentences ending at 2 and 6 and of words ending at 0, 2, 4, 6; a budget of 5.
    sentence_ends = [False, False, True, False, False, False, True]
    word_ends = [True, False, True, False, True, False, True]
    assert split_into_segments(sentence_ends, word_ends, 5) == [(0, 2), (3, 6)]
    # A budget of 3: the second segment cannot reach a sentence end, so it ends at a word end (4).
    assert split_into_segments(sentence_ends, word_ends, 3) == [(0, 2), (3, 4), (5, 6)]
    # A word longer than the budget is cut.
    assert split_into_segments([False, False, True], [False, False, True], 2) == [(0, 1), (2, 2)]


def test_encode_document_maps_gold_mentions_to_subwords(tmp_path, tiny_tokenizer):
    story = read_coref_documents(str(write(tmp_path, "two.conll", CONLL)))[0]
    features = encode_document(story, tiny_tokenizer, max_segment_length=12)
    assert all(len(ids) <= 12 for ids in features["input_ids"])
    content = [i for row, mask in zip(features["input_ids"], features["content_mask"]) for i, m in zip(row, mask) if m]
    assert len(content) == len(features["word_map"]) == len(features["sentence_map"])
    assert sorted(set(features["word_map"])) == list(range(story.num_words))
    word_map = features["word_map"]
    for start, end, cluster in zip(features["gold_starts"], features["gold_ends"], features["gold_cluster_ids"]):
        span = (word_map[start], word_map[end])
        assert span in story.clusters[cluster - 1]
        assert start == 0 or word_map[start - 1] != word_map[start]  # the word's first subword
        assert end == len(word_map) - 1 or word_map[end + 1] != word_map[end]  # the word's last subword


def test_training_windows_shift_the_gold_mentions():
    features = {"input_ids": [[0, 7, 2], [0, 8, 8, 2], [0, 9, 2]], "attention_mask": [[1] * 3, [1] * 4, [1] * 3],
                "content_mask": [[0, 1, 0], [0, 1, 1, 0], [0, 1, 0]], "sentence_map": [0, 1, 1, 2],
                "word_map": [0, 1, 2, 3], "speaker_ids": [0, 0, 0, 0], "gold_starts": [0, 1, 2, 3],
                "gold_ends": [0, 2, 2, 3], "gold_cluster_ids": [1, 1, 2, 2]}  # fmt: skip
    windows = TrainingWindows([features], max_segments=1)
    seen = set()
    for _ in range(50):
        window = windows[0]
        seen.add(window["word_map"][0])
        tokens = sum(map(sum, window["content_mask"]))
        assert len(window["input_ids"]) == 1 and len(window["word_map"]) == tokens
        assert all(0 <= s <= e < tokens for s, e in zip(window["gold_starts"], window["gold_ends"]))
        if window["word_map"] == [1, 2]:  # the second segment: subwords 1-2 of the document become 0-1
            assert window["gold_starts"] == [0, 1] and window["gold_ends"] == [1, 1]
            assert window["gold_cluster_ids"] == [1, 2]
    assert seen == {0, 1, 3}


def test_gold_marginal_loss_by_hand():
    # Row 1: dummy 0, antecedents log 2 and 0: probabilities 1/4, 2/4, 1/4. Gold: both antecedents, marginal 3/4.
    # Row 2: no antecedent (-inf), the dummy is gold with probability 1: loss 0.
    scores = torch.tensor([[0.0, math.log(2), 0.0], [0.0, float("-inf"), float("-inf")]])
    labels = torch.tensor([[False, True, True], [True, False, False]])
    assert gold_marginal_loss(scores, labels).item() == pytest.approx(-math.log(3 / 4))


def test_pruning_skips_crossing_spans_and_sorts():
    # Spans (0,2) best, (1,3) crosses it, (1,1) nests inside it, (3,4) is disjoint.
    starts, ends, scores = [0, 1, 1, 3], [2, 3, 1, 4], [4.0, 3.0, 2.0, 1.0]
    assert prune_spans(starts, ends, scores, keep=3) == [0, 2, 3]
    assert prune_spans(starts, ends, scores, keep=1) == [0]


def tiny_coref_model(**settings):
    torch.manual_seed(0)
    encoder = BertModel(BertConfig(vocab_size=60, hidden_size=16, num_hidden_layers=1, num_attention_heads=1,
                                   intermediate_size=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    return CorefModel.from_encoder(encoder, ffnn_size=8, feature_size=4, max_span_width=3, **settings)


def tiny_batch():
    # Two segments of 4 content subwords ([CLS] ... [SEP]); 8 words in two sentences; gold: (0,1) ~ (5,5), (3,3).
    collator = DocumentCollator(pad_token_id=0)
    return collator([{"input_ids": [[1, 10, 11, 12, 13, 2], [1, 14, 15, 16, 17, 2]], "attention_mask": [[1] * 6] * 2,
                      "content_mask": [[0, 1, 1, 1, 1, 0]] * 2, "sentence_map": [0, 0, 0, 0, 1, 1, 1, 1],
                      "word_map": list(range(8)), "speaker_ids": [0] * 8, "gold_starts": [0, 5, 3],
                      "gold_ends": [1, 5, 3], "gold_cluster_ids": [1, 1, 2]}])  # fmt: skip


def test_model_loss_is_finite_and_saved_model_predicts_the_same(tmp_path):
    model = tiny_coref_model(mention_loss_weight=1.0)
    output = model(**tiny_batch())
    assert torch.isfinite(output.loss) and output.loss > 0
    output.loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    assert model.antecedent_scorer[0].weight.grad.abs().sum() > 0
    # No candidate crosses a sentence (words 0-3 | 4-7) or is wider than 3 subwords; the dummy column scores 0.
    assert all(e - s < 3 and (s < 4) == (e < 4) for s, e in zip(output.top_span_starts, output.top_span_ends))
    assert bool((output.antecedent_scores[:, 0] == 0).all())
    model.eval()
    model.save_pretrained(tmp_path)
    loaded = CorefModel.from_pretrained(tmp_path).eval()
    batch = tiny_batch()
    assert torch.allclose(model(**batch).antecedent_scores, loaded(**batch).antecedent_scores)


def test_dropout_spares_the_encoder_output_and_drops_both_sides_of_the_coarse_score():
    model = tiny_coref_model(dropout=0.5).train()
    batch = tiny_batch()
    # The tiny encoder has no dropout of its own, so its states are the same on every call.
    states = model.encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    seen, dropped_shapes = {}, []
    model.head_scorer.register_forward_hook(lambda module, inputs, output: seen.update(tokens=inputs[0]))
    model.dropout.register_forward_hook(lambda module, inputs, output: dropped_shapes.append(tuple(inputs[0].shape)))
    output = model(**batch)
    # As in Joshi et al.'s code, the span layers read the encoder's states without a dropout of their own ...
    assert torch.equal(seen["tokens"], states[batch["content_mask"].bool()])
    # ... and the coarse score g_i' W_c g_j drops out both the projected and the plain kept-span representations.
    span_size = 3 * states.shape[-1] + model.config.feature_size
    assert dropped_shapes.count((len(output.top_span_starts), span_size)) == 2


@pytest.mark.slow
def test_saved_model_loads_with_remote_code_without_spanroberta(tmp_path):
    model = tiny_coref_model().eval()
    model.save_pretrained(tmp_path / "ckpt")
    expected = model(**tiny_batch()).antecedent_scores
    torch.save(tiny_batch(), tmp_path / "batch.pt")
    lines = run_without_spanroberta(
        f"""
        import torch, transformers
        model = transformers.AutoModel.from_pretrained({str(tmp_path / "ckpt")!r}, trust_remote_code=True).eval()
        torch.save(model(**torch.load({str(tmp_path / "batch.pt")!r})).antecedent_scores, {str(tmp_path / "out.pt")!r})
        print(type(model).__name__)
        """,
        tmp_path,
    )
    assert lines[-1] == "CorefModel"
    assert torch.allclose(torch.load(tmp_path / "out.pt"), expected)


def test_fine_scores_equal_the_scorer_on_the_concatenated_pair():
    model = tiny_coref_model().eval()
    spans, features = torch.randn(5, 3 * 16 + 4), torch.randn(5, 3, 12)
    antecedents = torch.tensor([[0, 0, 0], [0, 0, 0], [0, 1, 0], [2, 0, 1], [3, 1, 2]])
    targets, candidates = spans[:, None].expand(-1, 3, -1), spans[antecedents]
    pairs = torch.cat([targets, candidates, targets * candidates, features], dim=-1)
    expected = model.antecedent_scorer(pairs).squeeze(-1)
    assert torch.allclose(model._fine_scores(spans, antecedents, features), expected, atol=1e-5)


def test_antecedent_labels_mark_same_cluster_or_dummy():
    top_starts, top_ends = torch.tensor([0, 3, 5]), torch.tensor([1, 3, 5])
    antecedents = torch.tensor([[0, 0], [0, 0], [0, 1]])  # span 2's candidates: spans 0 and 1
    mask = torch.tensor([[False, False], [True, False], [True, True]])
    labels = CorefModel._antecedent_labels(top_starts, top_ends, antecedents, mask, torch.tensor([0, 5, 3]),
                                           torch.tensor([1, 5, 3]), torch.tensor([1, 1, 2]))  # fmt: skip
    # Span 0: nothing earlier, dummy. Span 1 (cluster 2): span 0 is cluster 1, dummy. Span 2 (cluster 1): span 0.
    assert labels.tolist() == [[True, False, False], [True, False, False], [False, True, False]]


def test_predicted_clusters_follow_best_antecedents():
    output = SimpleNamespace(
        top_span_starts=torch.tensor([0, 2, 4, 6]), top_span_ends=torch.tensor([1, 2, 4, 6]),
        top_antecedents=torch.tensor([[0], [0], [1], [2]]),
        # Span 1 -> span 0; span 2 -> dummy; span 3 -> span 2.
        antecedent_scores=torch.tensor([[0.0, float("-inf")], [0.0, 2.0], [0.0, -1.0], [0.0, 3.0]]),
        top_span_mention_scores=torch.tensor([1.0, 1.0, 1.0, 1.0]),
    )  # fmt: skip
    word_map = [0, 0, 1, 2, 3, 4, 5]  # subwords 0 and 1 are word 0
    assert predicted_clusters(output, word_map) == [[(0, 0), (1, 1)], [(3, 3), (5, 5)]]
    output.antecedent_scores[3, 1] = -2.0  # span 3 unlinked: a singleton only with keep_singletons
    assert predicted_clusters(output, word_map, keep_singletons=True)[1:] == [[(3, 3)], [(5, 5)]]


GAP_TSV = (
    "ID\tText\tPronoun\tPronoun-offset\tA\tA-offset\tA-coref\tB\tB-offset\tB-coref\tURL\n"
    "test-1\tMary Ann met Kate. She waved.\tShe\t19\tMary Ann\t0\tFALSE\tKate\t13\tTRUE\thttp://x\n"
    "test-2\tMary met John. His mother smiled.\tHis\t15\tMary\t0\tFALSE\tJohn\t9\tTRUE\thttp://x\n"
)


def test_gap_reader_and_decision(tmp_path):
    example, _ = read_gap(write(tmp_path, "gap.tsv", GAP_TSV))
    # Words: Mary(0) Ann(1) met(2) Kate(3) .(4) She(5) waved(6) .(7)
    assert example.document.sentences == [["Mary", "Ann", "met", "Kate", "."], ["She", "waved", "."]]
    assert (example.pronoun_words, example.a_words, example.b_words) == ((5, 5), (0, 1), (3, 3))
    decision = gap_decision(example, [[(3, 3), (5, 5)], [(1, 1)]])
    assert (decision.predicted_a, decision.predicted_b, decision.gold_b) == (False, True, True)
    assert not gap_decision(example, [[(0, 1), (3, 3)]]).predicted_a  # the pronoun is in no cluster
    bad = write(tmp_path, "bad.tsv", GAP_TSV.replace("\t13\t", "\t12\t"))
    with pytest.raises(UserInputError, match="test-1: B 'Kate' is not at character 12"):
        read_gap(bad)


def test_gap_decision_takes_the_cluster_of_the_exact_pronoun_and_names_by_containment(tmp_path):
    mary_ann, example = read_gap(write(tmp_path, "gap.tsv", GAP_TSV))
    # Words: Mary(0) met(1) John(2) .(3) His(4) mother(5) smiled(6) .(7)
    assert (example.pronoun_words, example.a_words, example.b_words) == ((4, 4), (0, 0), (2, 2))
    # "His mother" merely overlaps the pronoun: the cluster {Mary, His mother} is not the pronoun's.
    decision = gap_decision(example, [[(0, 0), (4, 5)]])
    assert (decision.predicted_a, decision.predicted_b) == (False, False)
    # The first cluster holding the exact pronoun span decides, even when a later one holds it too.
    decision = gap_decision(example, [[(2, 2), (4, 4)], [(0, 0), (4, 4)]])
    assert (decision.predicted_a, decision.predicted_b) == (False, True)
    # A mention inside the name's words ("Ann" of "Mary Ann"), or holding them, resolves it; one only overlapping
    # them ("Ann met") does not.
    assert gap_decision(mary_ann, [[(1, 1), (5, 5)]]).predicted_a
    assert gap_decision(example, [[(0, 1), (4, 4)]]).predicted_a
    assert not gap_decision(mary_ann, [[(1, 2), (5, 5)]]).predicted_a


# run_coref.py end to end.

METRIC_KEYS = [f"eval_{metric}_{kind}" for metric in ("muc", "b_cubed", "ceaf_phi4")
               for kind in ("precision", "recall", "f1")] + ["eval_conll_f1"]  # fmt: skip


def run_coref(*flags):
    import run_coref

    run_coref.main([*map(str, flags), "--report_to", "none", "--use_cpu", "--ffnn_size", "16"])


def test_run_coref_trains_evaluates_and_resolves_gap(tmp_path, spanroberta_checkpoint):
    data = write(tmp_path, "data.conll", CONLL)
    gap = write(tmp_path, "gap.tsv", GAP_TSV)
    out = tmp_path / "out"
    run_coref("--model_name_or_path", spanroberta_checkpoint, "--train_file", data, "--validation_file", data,
              "--eval_documents", "1:", "--do_train", "--do_eval", "--max_steps", 3, "--max_segment_length", 16,
              "--max_train_segments", 1, "--output_dir", out)  # fmt: skip
    results = checked_results(out, COREFERENCE.reports["coref"])
    assert set(METRIC_KEYS) <= set(results) and all(0.0 <= results[key] <= 1.0 for key in METRIC_KEYS)
    assert results["eval_documents"] == 1
    # The predictions are a CoNLL file of the evaluated document, readable as input.
    (predicted,) = read_coref_documents(str(out / "eval_predictions.conll"))
    assert predicted.doc_key == "news/wire_3" and predicted.num_words == 5

    # The saved coreference model evaluates again (its task layers kept) and resolves GAP's pronouns.
    again = tmp_path / "again"
    run_coref("--model_name_or_path", out, "--validation_file", data, "--do_eval", "--max_segment_length", 16,
              "--gap_file", gap, "--output_dir", again)  # fmt: skip
    assert checked_results(again, COREFERENCE.reports["coref"])["eval_documents"] == 2
    gap_results = checked_results(again, COREFERENCE.reports["gap"])
    assert gap_results["gap_examples"] == 2 and 0.0 <= gap_results["gap_overall_f1"] <= 1.0
    answered = [gap_results[f"gap_answered_{answer}"] for answer in ("neither", "a", "b", "both")]
    assert sum(answered) == pytest.approx(1.0) and all(share in (0.0, 0.5, 1.0) for share in answered)
    lines = [line.split("\t") for line in (again / "gap_predictions.tsv").read_text().splitlines()]
    assert [line[0] for line in lines] == ["test-1", "test-2"]
    assert all(set(line[1:]) <= {"TRUE", "FALSE"} for line in lines)


def test_a_preset_that_does_not_exist_in_a_config_file_lists_the_presets(tmp_path):
    # argparse checks a flag's choices on the command line only; the argument class checks a config file's too.
    config = tmp_path / "run.yaml"
    config.write_text(f"output_dir: {tmp_path / 'out'}\nmodel_name_or_path: x\npreset: spanbert_large\n")
    with pytest.raises(UserInputError, match="--preset 'spanbert_large' does not exist; valid values: bert_base, "
                       "spanbert_base."):
        COREFERENCE.parse([str(config)])


@pytest.mark.parametrize(
    "preset, given, expected",
    [
        # Joshi et al.'s experiments.conf: (segment length, segments a window, encoder lr, task lr).
        ("spanbert_base", [], (384, 3, 2e-5, 1e-4)),
        ("bert_base", [], (128, 11, 1e-5, 2e-4)),
        ("bert_base", ["--max_segment_length", 16, "--task_learning_rate", 1e-3], (16, 11, 1e-5, 1e-3)),
    ],
)  # fmt: skip
@pytest.mark.slow
def test_presets_set_what_the_flags_do_not(tmp_path, spanroberta_checkpoint, monkeypatch, preset, given, expected):
    import spanroberta.tasks.coreference.task as script

    segment_lengths, encode = set(), script.encode_document
    monkeypatch.setattr(script, "encode_document", lambda document, tokenizer, length: (
        segment_lengths.add(length), encode(document, tokenizer, length))[1])  # fmt: skip
    data = write(tmp_path, "data.conll", CONLL)
    out = tmp_path / "out"
    run_coref("--model_name_or_path", spanroberta_checkpoint, "--train_file", data, "--do_train", "--max_steps", 1,
              "--preset", preset, *given, "--output_dir", out)  # fmt: skip
    arguments = torch.load(out / "training_args.bin", weights_only=False)
    config = json.loads((out / "config.json").read_text())
    assert segment_lengths == {expected[0]}
    # The training window's segments bound the segment distances the model embeds.
    assert (config["max_segment_distance"], arguments.learning_rate, arguments.task_learning_rate) == expected[1:]


def test_task_layers_get_their_own_learning_rate(tmp_path):
    from transformers import TrainingArguments

    from spanroberta.tasks.coreference.trainer import CorefTrainer

    model = tiny_coref_model()
    args = TrainingArguments(output_dir=str(tmp_path), learning_rate=1e-5, weight_decay=0.01, use_cpu=True,
                             report_to="none")  # fmt: skip
    trainer = CorefTrainer(model=model, args=args, task_learning_rate=2e-4)
    optimizer = trainer.create_optimizer()
    rate_of = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}
    assert len(rate_of) == len(list(model.parameters()))
    for name, parameter in model.named_parameters():
        assert rate_of[id(parameter)] == (1e-5 if name.startswith("encoder.") else 2e-4), name


def test_bad_documents_stop_the_script_before_the_model_loads(tmp_path, spanroberta_checkpoint, capsys):
    bad = write(tmp_path, "bad.conll", "#begin document (d9); part 0\nd9 0 0 Hi - - - - - - - (3\n#end document\n")
    with pytest.raises(SystemExit) as stopped:
        run_coref("--model_name_or_path", spanroberta_checkpoint, "--validation_file", bad, "--do_eval",
                  "--output_dir", tmp_path / "out")  # fmt: skip
    message = str(stopped.value)
    assert message.startswith("run_coref.py: error:") and str(bad) in message and "d9_0" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--eval_documents", "5:"], "--eval_documents 5: selects none of the 2 documents"),
        (["--eval_documents", "1"], "--eval_documents must be START:END"),
        (["--max_segment_length", "100000"], "--max_segment_length 100000 is above the"),
        (["--per_device_eval_batch_size", "2"], "one document a batch"),
        (["--do_predict"], "no --do_predict"),
    ],
)  # fmt: skip
def test_bad_flags_stop_the_script(tmp_path, spanroberta_checkpoint, flags, expected):
    data = write(tmp_path, "data.conll", CONLL)
    with pytest.raises(SystemExit) as stopped:
        run_coref("--model_name_or_path", spanroberta_checkpoint, "--validation_file", data, "--do_eval",
                  "--output_dir", tmp_path / "out", *flags)  # fmt: skip
    assert expected in str(stopped.value)


@pytest.mark.slow
def test_run_coref_on_two_litbank_documents(tmp_path, spanroberta_checkpoint):
    litbank = shared_data("coref", "litbank")
    out = tmp_path / "out"
    run_coref("--model_name_or_path", spanroberta_checkpoint, "--train_file", litbank, "--train_documents", ":1",
              "--validation_file", litbank, "--eval_documents", "1:2", "--keep_singletons", "--do_train", "--do_eval",
              "--max_steps", 2, "--max_segment_length", 64, "--max_train_segments", 2, "--max_span_width", 5,
              "--output_dir", out)  # fmt: skip
    results = json.loads((out / "eval_results.json").read_text())
    assert results["eval_documents"] == 1 and all(0.0 <= results[key] <= 1.0 for key in METRIC_KEYS)
    (predicted,) = read_coref_documents(str(out / "eval_predictions.conll"))
    (gold,) = read_coref_documents(str(litbank))[1:2]
    assert predicted.doc_key == gold.doc_key and predicted.sentences == gold.sentences


def test_head_attention_of_every_span_matches_a_direct_softmax():
    model = tiny_coref_model()
    tokens = torch.randn(7, 16)
    grid = model._head_grid(tokens)
    scores = model.head_scorer(tokens).squeeze(-1)
    for start, end in [(0, 0), (2, 4), (4, 6), (6, 6)]:
        weights = scores[start:end + 1].softmax(0)
        expected = (weights[:, None] * tokens[start:end + 1]).sum(0)
        assert torch.allclose(grid[start, end - start], expected, atol=1e-6)
