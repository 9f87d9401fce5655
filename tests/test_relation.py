"""Relation classification: the official TACRED and SemEval-2010 Task 8 scores (worked by hand), the reader's checks
on bad input, the two encodings, run_relation.py end to end with tiny BERT and spanroberta checkpoints and on the
shared SemEval data, and the saved classifiers reloading through the Auto classes (with remote code too)."""

import json

import pytest
import torch
from tokenizers import BertWordPieceTokenizer
from transformers import AutoModelForSequenceClassification, AutoTokenizer, BertConfig, BertForMaskedLM, BertTokenizer

import run_relation
from conftest import TINY_TEXT, checked_results, run_without_spanroberta, shared_data
from spanroberta import EncoderForRelationClassification
from spanroberta.tasks.relation import task as relation_declaration
from spanroberta.tasks.relation.scoring import semeval_score, tacred_score
from spanroberta.tasks.relation.data import (
    SEMEVAL_LABELS,
    TACRED_LABELS,
    RelationExample,
    add_entity_markers,
    encode_relations,
    marked_text,
    read_relation_file,
    relation_label_set,
    warn_if_types_say_nothing,
)

# --- the official scores, by hand ----------------------------------------------------------------------------


def test_tacred_score_by_hand():
    gold = ["no_relation", "per:title", "per:title", "org:founded", "no_relation", "per:age", "per:age"]
    pred = ["per:title", "per:title", "no_relation", "org:members", "no_relation", "per:age", "no_relation"]
    # Row by row (TACRED's score(): a no_relation guess is no guess, a no_relation gold nothing to find):
    # 1 guess per:title on a negative: guessed 1. 2 right: guessed 2, gold 1, correct 1. 3 missed: gold 2.
    # 4 wrong relation: guessed 3, gold 3. 5 both negative: nothing. 6 right: guessed 4, gold 4, correct 2.
    # 7 missed: gold 5. P = 2/4 = 0.5, R = 2/5 = 0.4, F1 = 2 * 0.5 * 0.4 / 0.9 = 4/9.
    # Accuracy counts the negative label too: rows 2, 5 and 6 are right, 3/7.
    score = tacred_score(pred, gold)
    assert score == pytest.approx({"precision": 0.5, "recall": 0.4, "f1": 4 / 9, "accuracy": 3 / 7})
    # Nothing but no_relation predicted: the official scorer's precision is 1.0, its recall and F1 0.
    assert tacred_score(["no_relation"] * 2, ["per:age", "no_relation"]) == pytest.approx(
        {"precision": 1.0, "recall": 0.0, "f1": 0.0, "accuracy": 0.5})
    # Another negative label (SemEval's Other under TACRED's definition) is only a name.
    assert tacred_score(["Other", "A"], ["A", "A"], negative_label="Other")["recall"] == 0.5


def test_semeval_score_by_hand():
    gold = ["Cause-Effect(e1,e2)", "Cause-Effect(e1,e2)", "Cause-Effect(e2,e1)", "Other", "Message-Topic(e1,e2)",
            "Message-Topic(e2,e1)", "Other", "Other"]  # fmt: skip
    pred = ["Cause-Effect(e1,e2)", "Cause-Effect(e2,e1)", "Other", "Cause-Effect(e1,e2)", "Message-Topic(e1,e2)",
            "Cause-Effect(e2,e1)", "Other", "Product-Producer(e1,e2)"]  # fmt: skip
    # The official (9+1)-way evaluation with direction: per relation (direction removed), Other excluded.
    # Cause-Effect: guessed in rows 1, 2 (wrong direction: a guess, not correct), 4 and 6 -> 4; correct row 1;
    #   gold rows 1, 2, 3 -> 3. P = 1/4, R = 1/3, F1 = 2 (1/12) / (7/12) = 2/7.
    # Message-Topic: guessed row 5; correct row 5; gold rows 5, 6. P = 1, R = 1/2, F1 = 2/3.
    # Product-Producer is guessed (row 8) but absent from the gold labels: the scorer averages over the gold
    # relations only. Macro P = (1/4 + 1) / 2 = 5/8, R = (1/3 + 1/2) / 2 = 5/12, F1 = (2/7 + 2/3) / 2 = 10/21.
    # Accuracy (19-way, direction and Other counted): rows 1, 5, 7, so 3/8.
    score = semeval_score(pred, gold)
    assert score == pytest.approx({"precision": 5 / 8, "recall": 5 / 12, "f1": 10 / 21, "accuracy": 3 / 8})
    # The same predictions under TACRED's micro definition score otherwise: guessed 6, gold 5, correct 2.
    micro = 2 * (2 / 6) * (2 / 5) / (2 / 6 + 2 / 5)
    assert tacred_score(pred, gold, negative_label="Other")["f1"] == pytest.approx(micro)


def test_label_sets():
    assert len(TACRED_LABELS) == 42 and len(SEMEVAL_LABELS) == 19
    # Labels inside a known inventory get the whole inventory, so a relation missing from a split keeps its id.
    assert relation_label_set(["Other", "Cause-Effect(e1,e2)"], "Other") == list(SEMEVAL_LABELS)
    assert relation_label_set(["b", "none", "a"], "none") == ["none", "a", "b"]


# --- reading and encoding ---------------------------------------------------------------------------------------

EXAMPLES = [
    (["Bill", "Gates", "founded", "Microsoft", "in", "Albuquerque", "."], (3, 3), (0, 1), "ORGANIZATION", "PERSON",
     "org:founded_by"),
    (["Microsoft", "was", "started", "by", "Paul", "Allen", "."], (0, 0), (4, 5), "ORGANIZATION", "PERSON",
     "org:founded_by"),
    (["Angela", "Merkel", "was", "born", "in", "Hamburg", "."], (0, 1), (5, 5), "PERSON", "CITY", "per:city_of_birth"),
    (["The", "singer", "Adele", "lives", "in", "London", "."], (2, 2), (5, 5), "PERSON", "CITY",
     "per:cities_of_residence"),
    (["Adele", "sang", "in", "Paris", "last", "year", "."], (0, 0), (3, 3), "PERSON", "CITY", "no_relation"),
    (["The", "museum", "of", "Paris", "opened", "a", "new", "wing", "."], (1, 1), (3, 3), "ORGANIZATION", "CITY",
     "org:city_of_headquarters"),
]  # fmt: skip


def tacred_records(count=12):
    records = []
    for index in range(count):
        tokens, subject, obj, subject_type, object_type, relation = EXAMPLES[index % len(EXAMPLES)]
        records.append({"id": f"ex{index}", "relation": relation, "token": tokens, "subj_start": subject[0],
                        "subj_end": subject[1], "obj_start": obj[0], "obj_end": obj[1], "subj_type": subject_type,
                        "obj_type": object_type})  # fmt: skip
    return records


def write_json(path, records, lines=False):
    text = "".join(json.dumps(r) + "\n" for r in records) if lines else json.dumps(records)
    path.write_text(text, encoding="utf-8")
    return path


def example(tokens, subject, obj, subject_type="PERSON", object_type="CITY", relation=None):
    return RelationExample("x", tuple(tokens), subject, obj, subject_type, object_type, relation)


def test_the_two_encodings_mark_the_entities():
    merkel = example(["Angela", "Merkel", "was", "born", "in", "Hamburg", "."], (0, 1), (5, 5))
    text, subject_char, object_char = marked_text(merkel, "spanbert_types")
    assert text == "[SUBJ-PERSON] was born in [OBJ-CITY] ."
    assert (text[subject_char], text[object_char:].split()[0]) == ("[", "[OBJ-CITY]") and subject_char == 0
    # Zhou and Chen's typed entity marker (punct): the words stay; types lower-cased, underscores as spaces.
    founded = example(["Microsoft", "was", "started", "in", "New", "Mexico"], (0, 0), (4, 5), "ORGANIZATION",
                      "STATE_OR_PROVINCE")  # fmt: skip
    text, subject_char, object_char = marked_text(founded, "typed_entity_markers")
    assert text == "@ * organization * Microsoft @ was started in # ^ state or province ^ New Mexico #"
    assert (text[subject_char], text[object_char]) == ("@", "#") and object_char == text.index("#")


def test_type_markers_over_one_type_are_flagged(caplog):
    """SemEval's entities are all NOMINAL: SpanBERT's markers would leave the classifier no entity to read."""
    nominal = [example(["a", "cord", "in", "a", "cradle"], (1, 1), (4, 4), "NOMINAL", "NOMINAL")] * 3
    typed = [example(["Merkel", "in", "Hamburg"], (0, 0), (2, 2)), *nominal]
    one_each = [example(["Merkel", "in", "Hamburg"], (0, 0), (2, 2))] * 3  # every subject PERSON, every object CITY
    with caplog.at_level("WARNING", logger="spanroberta.tasks.relation.data"):
        warn_if_types_say_nothing(typed, "spanbert_types")
        warn_if_types_say_nothing(nominal, "typed_entity_markers")
        assert not caplog.records
        warn_if_types_say_nothing(nominal, "spanbert_types")
        warn_if_types_say_nothing(one_each, "spanbert_types")
    first, second = caplog.records
    assert "the type NOMINAL and every object the type NOMINAL" in first.getMessage()
    assert "the type PERSON and every object the type CITY" in second.getMessage()
    assert "--entity_markers typed_entity_markers" in caplog.text


def wordpiece_tokenizer(lowercase=True):
    trainer = BertWordPieceTokenizer(lowercase=lowercase)
    # The sentences with their typed entity markers, so that the vocabulary has the markers' punctuation.
    marked = [marked_text(example(*e[:5]), "typed_entity_markers")[0] for e in EXAMPLES]
    trainer.train_from_iterator(TINY_TEXT + marked, vocab_size=400, show_progress=False)
    return BertTokenizer(vocab=trainer.get_vocab(), do_lower_case=lowercase)


def test_encoding_points_at_the_start_markers_and_keeps_them_in_a_window():
    tokenizer = wordpiece_tokenizer()
    long_sentence = ["word"] * 40 + ["Adele", "lives", "in", "London"]
    examples = [example(long_sentence, (40, 40), (43, 43))]
    encoded = encode_relations(examples, tokenizer, "typed_entity_markers", max_seq_length=16)[0]
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"])
    assert len(tokens) == 16 and tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    subject, obj = encoded["entity_positions"]
    assert tokens[subject] == "@" and tokens[obj] == "#" and tokens[obj - 1] != "#"
    assert tokens[subject + 1 : subject + 3] == ["*", "person"]
    # SpanBERT's markers are special tokens: one token each, never lower-cased.
    tokenizer.add_tokens(["[SUBJ-PERSON]", "[OBJ-CITY]"], special_tokens=True)
    encoded = encode_relations(examples, tokenizer, "spanbert_types", max_seq_length=16)[0]
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"])
    assert "[SUBJ-PERSON]" in tokens and "[OBJ-CITY]" in tokens and "entity_positions" not in encoded


def byte_level_bpe_tokenizer():
    from spanroberta.data.tokenizer import train_byte_level_bpe

    return train_byte_level_bpe(TINY_TEXT, vocab_size=400, min_frequency=1, show_progress=False)


@pytest.mark.parametrize("build", [byte_level_bpe_tokenizer, wordpiece_tokenizer])
def test_type_markers_leave_no_stray_piece_around_them(build):
    tokenizer = build()
    merkel = example(["Angela", "Merkel", "was", "born", "in", "Hamburg", ",", "Germany"], (0, 1), (5, 5))
    add_entity_markers(tokenizer, [merkel], "spanbert_types")
    encoded = encode_relations([merkel], tokenizer, "spanbert_types", max_seq_length=64)[0]
    subject, obj = tokenizer.convert_tokens_to_ids(["[SUBJ-PERSON]", "[OBJ-CITY]"])

    def pieces(text):
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    # Between and after the markers, the words' own pieces as in running text: no lone space piece (byte-level
    # BPE's `Ġ`) before the object's marker.
    assert encoded["input_ids"][1:-1] == [subject, *pieces(" was born in"), obj, *pieces(" , Germany")]


def test_ptb_brackets_are_read_as_brackets(tmp_path):
    record = {**tacred_records(1)[0], "token": ["-LRB-", "Bill", "-rrb-", "-LSB-", "-RSB-", "-LCB-", "-RCB-"],
              "subj_start": 1, "subj_end": 1, "obj_start": 4, "obj_end": 4}  # fmt: skip
    (read,) = read_relation_file(write_json(tmp_path / "ptb.json", [record]))
    assert read.tokens == ("(", "Bill", ")", "[", "]", "{", "}")


def test_reads_json_lists_and_json_lines(tmp_path):
    records = tacred_records(3)
    from_list = read_relation_file(write_json(tmp_path / "a.json", records))
    from_lines = read_relation_file(write_json(tmp_path / "b.jsonl", records, lines=True))
    assert from_list == from_lines and from_list[0].subject == (3, 3) and from_list[2].relation == "per:city_of_birth"
    unlabeled = [{k: v for k, v in r.items() if k != "relation"} for r in records]
    assert read_relation_file(write_json(tmp_path / "c.json", unlabeled), labeled=False)[0].relation is None


BAD_INPUT = {
    "missing field": ({"subj_type": None}, r"id 'ex1'\): missing subj_type"),
    "span out of range": ({"obj_end": 9}, r"id 'ex1'\): the obj span obj_start=4, obj_end=9 is not an inclusive range"),
    "overlapping spans": ({"subj_start": 3, "subj_end": 4}, r"id 'ex1'\): the subject \(tokens 3-4\) and the object "
                          r"\(tokens 4-5\) overlap"),
    "empty sentence": ({"token": []}, r"id 'ex1'\): 'token' must be a non-empty list"),
}  # fmt: skip


@pytest.fixture
def bert_checkpoint(tmp_path_factory):
    """A tiny BERT masked LM with an uncased WordPiece tokenizer (the layout of BERT's and MiniLM's checkpoints)."""
    path = tmp_path_factory.mktemp("bert")
    tokenizer = wordpiece_tokenizer()
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128,
                        pad_token_id=tokenizer.pad_token_id)  # fmt: skip
    BertForMaskedLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_stops_with_one_paragraph_before_any_model_loads(case, tmp_path, bert_checkpoint, monkeypatch):
    change, message = BAD_INPUT[case]
    records = tacred_records(3)
    records[1].update(change)
    train = write_json(tmp_path / "train.json", records)
    monkeypatch.setattr(relation_declaration, "load_model", lambda *a, **k: pytest.fail("a model was loaded"))
    with pytest.raises(SystemExit, match=rf"^run_relation.py: error: {train}, item 2 \({message}") as error:
        run_relation.main(["--model_name_or_path", str(bert_checkpoint), "--train_file", str(train), "--do_train",
                           "--output_dir", str(tmp_path / "out")])  # fmt: skip
    assert "\n" not in str(error.value) and "drop the example" in str(error.value)


def test_an_unknown_label_in_evaluation_is_refused(tmp_path, bert_checkpoint, monkeypatch):
    train = write_json(tmp_path / "train.json", [{**r, "relation": "likes"} for r in tacred_records(4)])
    dev_records = [{**r, "relation": "likes"} for r in tacred_records(2)]
    dev_records[1]["relation"] = "hates"
    dev = write_json(tmp_path / "dev.jsonl", dev_records, lines=True)
    monkeypatch.setattr(relation_declaration, "load_model", lambda *a, **k: pytest.fail("a model was loaded"))
    with pytest.raises(SystemExit, match=rf"{dev}, id 'ex1': relation 'hates' is not one of the classifier's 2 labels"):
        run_relation.main(["--model_name_or_path", str(bert_checkpoint), "--train_file", str(train), "--do_train",
                           "--validation_file", str(dev), "--do_eval", "--negative_label", "none",
                           "--output_dir", str(tmp_path / "out")])  # fmt: skip


# --- run_relation.py end to end -----------------------------------------------------------------------------------

COMMON = ["--max_steps", "3", "--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "8",
          "--max_seq_length", "48", "--report_to", "none", "--save_strategy", "no", "--dataloader_pin_memory", "false",
          "--use_cpu", "true", "--learning_rate", "1e-3"]  # fmt: skip


def read_predictions(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def check_run(output_dir, score, negative_label):
    """The written metrics are the official scorer's over the written predictions, as fractions."""
    results = checked_results(output_dir, relation_declaration.RELATION.reports["relation"])
    predictions = read_predictions(output_dir / "eval_predictions.jsonl")
    expected = score([p["predicted"] for p in predictions], [p["gold"] for p in predictions], negative_label)
    assert {name: results[f"eval_{name}"] for name in expected} == pytest.approx(expected)
    return results, predictions


@pytest.mark.parametrize("encoding", ["spanbert_types", "typed_entity_markers"])
@pytest.mark.parametrize("checkpoint", [pytest.param("bert", marks=pytest.mark.slow), "spanroberta"])
def test_run_relation_trains_evaluates_and_reloads(encoding, checkpoint, tmp_path, request):
    source = request.getfixturevalue("bert_checkpoint" if checkpoint == "bert" else "spanroberta_checkpoint")
    train = write_json(tmp_path / "train.json", tacred_records(12))
    dev = write_json(tmp_path / "dev.jsonl", tacred_records(6), lines=True)
    out = tmp_path / "out"
    run_relation.main(["--model_name_or_path", str(source), "--train_file", str(train), "--validation_file", str(dev),
                       "--test_file", str(dev), "--do_train", "--do_eval", "--do_predict", "--entity_markers", encoding,
                       "--output_dir", str(out), *COMMON])  # fmt: skip
    results, predictions = check_run(out, tacred_score, "no_relation")
    assert results["eval_samples"] == 6 and [p["id"] for p in predictions] == [f"ex{i}" for i in range(6)]
    assert [p["gold"] for p in predictions] == [r["relation"] for r in tacred_records(6)]
    assert read_predictions(out / "predict_predictions.jsonl") == predictions
    config = json.loads((out / "config.json").read_text())
    assert (config["relation_encoding"], config["relation_scorer"], config["negative_label"]) == (
        encoding, "tacred", "no_relation")
    assert list(config["id2label"].values()) == list(TACRED_LABELS)
    tokenizer = AutoTokenizer.from_pretrained(out)
    if encoding == "spanbert_types":
        assert {"[SUBJ-ORGANIZATION]", "[OBJ-PERSON]", "[OBJ-CITY]", "[OBJ-IDEOLOGY]"} <= set(tokenizer.get_vocab())
    model = AutoModelForSequenceClassification.from_pretrained(out)
    assert isinstance(model, EncoderForRelationClassification) == (encoding == "typed_entity_markers")
    # The saved classifier, evaluated alone, predicts what the run predicted.
    again = tmp_path / "again"
    run_relation.main(["--model_name_or_path", str(out), "--validation_file", str(dev), "--do_eval",
                       "--entity_markers", encoding, "--output_dir", str(again), *COMMON])  # fmt: skip
    assert read_predictions(again / "eval_predictions.jsonl") == predictions


@pytest.mark.slow
def test_an_evaluation_with_the_other_encoding_is_refused(tmp_path, bert_checkpoint):
    out = tmp_path / "out"
    train = write_json(tmp_path / "train.json", tacred_records(8))
    run_relation.main(["--model_name_or_path", str(bert_checkpoint), "--train_file", str(train), "--do_train",
                       "--entity_markers", "typed_entity_markers", "--output_dir", str(out), *COMMON])  # fmt: skip
    with pytest.raises(SystemExit, match="fine-tuned with --entity_markers typed_entity_markers, not spanbert_types"):
        run_relation.main(["--model_name_or_path", str(out), "--validation_file", str(train), "--do_eval",
                           "--output_dir", str(tmp_path / "again")])  # fmt: skip
    # With the right encoding it predicts an unlabelled file: no scores, the predictions with a null gold.
    unlabeled = write_json(tmp_path / "test.json", [{k: v for k, v in r.items() if k != "relation"}
                                                    for r in tacred_records(3)])  # fmt: skip
    run_relation.main(["--model_name_or_path", str(out), "--test_file", str(unlabeled), "--do_predict",
                       "--entity_markers", "typed_entity_markers", "--output_dir", str(tmp_path / "test"), *COMMON])
    predictions = read_predictions(tmp_path / "test" / "predict_predictions.jsonl")
    assert [(p["id"], p["gold"]) for p in predictions] == [("ex0", None), ("ex1", None), ("ex2", None)]
    assert {p["predicted"] for p in predictions} <= set(TACRED_LABELS)
    assert "predict_f1" not in json.loads((tmp_path / "test" / "predict_results.json").read_text())


@pytest.mark.slow
def test_semeval_from_the_shared_data(tmp_path, bert_checkpoint):
    """SemEval-2010 Task 8's training sentences, split by a fixed rule: the first 7,000 to train, the last 1,000 to
    evaluate. The scorer is chosen from the labels: SemEval's official macro F1, Other the negative label."""
    sentences = json.loads(shared_data("relation", "semeval2010_task8", "train.json").read_text())
    train = write_json(tmp_path / "train.json", sentences[:7000])
    dev = write_json(tmp_path / "dev.json", sentences[7000:])
    out = tmp_path / "out"
    run_relation.main(["--model_name_or_path", str(bert_checkpoint), "--train_file", str(train), "--validation_file",
                       str(dev), "--do_train", "--do_eval", "--max_train_samples", "32", "--max_eval_samples", "40",
                       "--entity_markers", "typed_entity_markers", "--output_dir", str(out), *COMMON])  # fmt: skip
    results, predictions = check_run(out, semeval_score, "Other")
    assert results["eval_samples"] == 40 and [p["id"] for p in predictions] == [s["id"] for s in sentences[7000:7040]]
    config = json.loads((out / "config.json").read_text())
    assert (config["relation_scorer"], config["negative_label"]) == ("semeval", "Other")
    assert list(config["id2label"].values()) == list(SEMEVAL_LABELS)


# --- remote code ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("checkpoint", ["bert", "spanroberta"])
@pytest.mark.slow
def test_the_entity_start_classifier_loads_with_remote_code_without_spanroberta(checkpoint, tmp_path, request):
    source = request.getfixturevalue("bert_checkpoint" if checkpoint == "bert" else "spanroberta_checkpoint")
    train = write_json(tmp_path / "train.json", tacred_records(8))
    out = tmp_path / "out"
    run_relation.main(["--model_name_or_path", str(source), "--train_file", str(train), "--do_train",
                       "--entity_markers", "typed_entity_markers", "--output_dir", str(out), *COMMON])  # fmt: skip
    inputs = {"input_ids": [[2, 5, 6, 7, 8, 3]], "entity_positions": [[1, 3]]}
    model = AutoModelForSequenceClassification.from_pretrained(out).eval()
    with torch.no_grad():
        expected = model(**{name: torch.tensor(value) for name, value in inputs.items()}).logits
    lines = run_without_spanroberta(
        f"""
        import torch, transformers
        model = transformers.AutoModelForSequenceClassification.from_pretrained({str(out)!r}, trust_remote_code=True)
        inputs = {{name: torch.tensor(value) for name, value in {inputs!r}.items()}}
        with torch.no_grad():
            print(type(model).__name__, model.eval()(**inputs).logits.tolist())
        """,
        tmp_path,
    )
    name, logits = lines[-1].split(" ", 1)
    assert name == "EncoderForRelationClassification"
    torch.testing.assert_close(torch.tensor(json.loads(logits)), expected)
