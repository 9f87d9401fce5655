"""pipeline("question-answering") behaves as transformers 4's: every behaviour that transformers 4's own pipeline
tests check (tests/pipelines/test_pipelines_question_answering.py of the 4.4x releases), on local tiny BERT,
DistilBERT and RoBERTa checkpoints instead of Hub models, plus windows sized by each question, top_k filled with
distinct answers, and every answer checked against transformers 4's decoding of the same logits.

The models are untrained: tests check structure, and answers only against a decoding of the logits the models
gave, never what the models happen to answer."""

import math

import numpy as np
import pytest
from huggingface_hub import QuestionAnsweringOutputElement
from tokenizers import Tokenizer, models, processors, trainers
from transformers import BertConfig, BertForQuestionAnswering, PreTrainedTokenizerFast
from transformers.testing_utils import compare_pipeline_output_to_hub_spec, nested_simplify

import spanroberta  # noqa: F401  (brings pipeline("question-answering") back)
from spanroberta.pipelines.question_answering import SquadExample
from tiny_qa_models import KINDS, save_tiny_qa_checkpoints

Q = "Where was HuggingFace founded ?"
C = "HuggingFace was founded in Paris."
# Many windows, none the same as another (identical windows would give exactly tied answers, ranked by chance).
LONG = " ".join(
    f"In {1990 + i} HuggingFace opened office {i} in Paris, and {i * 7} people used its library." for i in range(24)
)
TEXTS = [Q, C, LONG, "In what field is HuggingFace working ?", "HuggingFace is a startup founded in Paris"]
ANSWER_KEYS = {"score", "start", "end", "answer"}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return save_tiny_qa_checkpoints(TEXTS, tmp_path_factory.mktemp("qa_conformance"))


def load(folder, **kwargs):
    from transformers import pipeline

    return pipeline("question-answering", model=str(folder), device="cpu", **kwargs)


def check_answer(answer, context):
    assert set(answer) == ANSWER_KEYS
    assert isinstance(answer["score"], float) and 0.0 <= answer["score"] <= 1.0 and math.isfinite(answer["score"])
    assert isinstance(answer["start"], int) and isinstance(answer["end"], int)
    assert answer["answer"] == context[answer["start"] : answer["end"]]
    compare_pipeline_output_to_hub_spec(answer, QuestionAnsweringOutputElement)


def transformers4_answers(qa, question, context, top_k=1, max_answer_len=15, handle_impossible_answer=False, **windows):
    """transformers 4's decoding of the pipeline's own windows and logits: per window, softmax over the context
    and the first token, p_start * p_end of every span of at most max_answer_len tokens, the spans mapped to
    their words' characters; here each character span kept once with its best score, best first."""
    best, null = {}, math.inf
    for window in qa.preprocess({"question": question, "context": context}, **windows):
        output = qa.forward(window)
        allowed = np.array([offset is not None for offset in window["offsets"]])
        allowed[window["cls_index"]] = True
        length = len(allowed)
        probabilities = []
        for logits in (output["start"][0, :length], output["end"][0, :length]):
            logits = np.where(allowed, logits.double().numpy(), -10000.0)
            exp = np.exp(logits - logits.max())
            probabilities.append(exp / exp.sum())
        start, end = probabilities
        null = min(null, start[window["cls_index"]] * end[window["cls_index"]])
        spans = np.tril(np.triu(np.outer(start, end)), max_answer_len - 1)
        for s, e in zip(*np.nonzero(spans)):
            offsets = window["offsets"]
            if offsets[s] is None or offsets[e] is None or s == window["cls_index"]:
                continue
            if offsets[s][1] == offsets[s][0] or offsets[e][1] == offsets[e][0]:
                continue  # an empty piece, which the pipeline never starts or ends an answer with
            characters = (offsets[s][0], offsets[e][1])
            best[characters] = max(best.get(characters, 0.0), float(spans[s, e]))
    answers = [{"score": score, "start": s, "end": e, "answer": context[s:e]} for (s, e), score in best.items()]
    if handle_impossible_answer:
        answers.append({"score": float(null), "start": 0, "end": 0, "answer": ""})
    return sorted(answers, key=lambda answer: -answer["score"])[:top_k]


def same_answers(got, expected):
    got = [got] if isinstance(got, dict) else got
    assert [(a["start"], a["end"], a["answer"]) for a in got] == [(a["start"], a["end"], a["answer"]) for a in expected]
    assert [a["score"] for a in got] == pytest.approx([a["score"] for a in expected], rel=1e-5)


# --- what transformers 4's pipeline tests check, on each kind of model ---


@pytest.mark.parametrize("kind", KINDS)
def test_outputs_errors_top_k_long_contexts_and_batches(kind, folders):
    qa = load(folders[kind])
    check_answer(qa(question=Q, context=C), C)
    check_answer(qa(question=Q, context=C, handle_impossible_answer=True), C)
    shared = qa(question=["In what field is HuggingFace working ?"] * 2, context=C)
    paired = qa(question=[Q, "In what field is HuggingFace ?"], context=[LONG, C])
    assert isinstance(shared, list) and isinstance(paired, list) and len(shared) == len(paired) == 2
    for answer, context in zip([*shared, *paired], [C, C, LONG, C]):
        check_answer(answer, context)
    for bad in (dict(question="", context=C), dict(question=None, context=C), dict(question=Q, context=""),
                dict(question=Q, context=None)):  # fmt: skip
        with pytest.raises(ValueError):
            qa(**bad)

    top = qa(question=Q, context=C, top_k=20)
    assert isinstance(top, list) and len(top) == 20
    assert len({(a["start"], a["end"]) for a in top}) == 20
    for answer in top:
        check_answer(answer, C)

    long_context = C * 80
    assert len(qa.tokenizer(Q, long_context)["input_ids"]) > 384  # more than one window of the default 384
    one_by_one = qa(question=Q, context=long_context)
    batched = qa(question=Q, context=long_context, batch_size=2)
    check_answer(one_by_one, long_context)
    assert nested_simplify(batched) == nested_simplify(one_by_one)


def test_generators_stream_lazily(folders):
    qa = load(folders["distilbert"], batch_size=4)
    read = []

    def examples():
        for i in range(10):
            read.append(i)
            yield {"question": Q, "context": C}

    results = qa(examples())
    assert not isinstance(results, list)
    first = next(iter(results))
    assert len(read) < 10  # the rest is read as the results are
    check_answer(first, C)
    assert [nested_simplify(answer) for answer in results] == [nested_simplify(first)] * 9
    with pytest.raises(ValueError, match="`question` cannot be empty"):  # a streamed item is checked as it comes
        list(qa(example for example in [{"question": " ", "context": C}]))


def test_huge_logits_give_probabilities_not_nan(folders):
    qa = load(folders["distilbert"])
    postprocess = qa.postprocess

    def with_huge_logits(model_outputs, **params):
        for output in model_outputs:
            output["start"], output["end"] = output["start"] * 1e6, output["end"] * 1e6
        return postprocess(model_outputs, **params)

    qa.postprocess = with_huge_logits
    check_answer(qa(question=Q, context=C), C)


def test_words_without_a_pre_tokenizer_and_align_to_words(tmp_path):
    """A tokenizer with no pre-tokenizer sees the whole context as one word (transformers 4's Japanese case):
    aligned to words, the only answer is the whole context; unaligned, answers are token spans."""
    context = "全学年にわたって小学校の国語の教科書に挿し絵が用いられている"
    bpe = Tokenizer(models.BPE(unk_token="[UNK]"))
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    # A few merges only, so that the context stays many tokens.
    vocab_size = len(specials) + len(set(context)) + 4
    bpe.train_from_iterator([context, "国語"], trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials))
    bpe.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[(token, bpe.token_to_id(token)) for token in ("[CLS]", "[SEP]")],
    )  # fmt: skip
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]"
    )
    config = BertConfig(vocab_size=bpe.get_vocab_size(), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64)  # fmt: skip
    BertForQuestionAnswering(config).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    qa = load(tmp_path)
    assert len(tokenizer(context, add_special_tokens=False)["input_ids"]) > 3
    # One candidate span only: a single answer, as a dict, as transformers 4 gave it.
    assert qa(question="国語", context=context, top_k=5) == {**qa(question="国語", context=context), "start": 0,
                                                              "end": len(context), "answer": context}  # fmt: skip
    unaligned = qa(question="国語", context=context, align_to_words=False, top_k=5)
    assert len(unaligned) == 5 and any(len(answer["answer"]) < len(context) for answer in unaligned)
    for answer in unaligned:
        check_answer(answer, context)


# --- the argument handler ---


def test_argument_handler_reads_every_input_form():
    from transformers.pipelines import QuestionAnsweringArgumentHandler

    handler = QuestionAnsweringArgumentHandler()
    one, two = {"question": Q, "context": C}, [{"question": Q, "context": C}] * 2
    for normalized, count in (
        (handler(Q, C), 1), (handler(question=Q, context=C), 1), (handler(question=[Q, Q], context=C), 2),
        (handler(question=[Q, Q], context=[C, C]), 2), (handler(one), 1), (handler([one]), 1), (handler(two), 2),
        (handler(X=one), 1), (handler(X=[one]), 1), (handler(data=one), 1), (handler(SquadExample(None, Q, C)), 1),
        (handler({**one, "id": "q1", "answers": {"text": []}}), 1),  # a SQuAD dataset row
    ):  # fmt: skip
        assert type(normalized) is list and len(normalized) == count
        assert {type(example) for example in normalized} == {SquadExample}
        assert all((e.question_text, e.context_text) == (Q, C) for e in normalized)
    streamed = (item for item in [one])
    assert handler(streamed) is streamed


def test_argument_handler_raises_transformers4s_exceptions():
    from transformers.pipelines import QuestionAnsweringArgumentHandler

    handler = QuestionAnsweringArgumentHandler()
    for call in ([{"context": C}], [{"question": Q}], [[{"context": C}]]):
        with pytest.raises(KeyError):
            handler(*call)
    bad_calls = [
        ((None, C), {}), (("", C), {}), ((Q, None), {}), ((Q, ""), {}), ((None,), {}), ((1,), {}), ((), {"Y": None}),
        ((), {"question": None, "context": C}), ((), {"question": "", "context": C}),
        ((), {"question": Q, "context": None}), ((), {"question": Q, "context": ""}),
        (({"question": None, "context": C},), {}), (({"question": Q, "context": ""},), {}),
        (([{"question": Q, "context": C}, {"question": "", "context": C}],), {}),
        (([{"question": Q, "context": C}, {"question": Q, "context": None}],), {}),
        ((), {"question": {"This": "Is weird"}, "context": "This is a context"}),
        ((), {"question": [Q, Q], "context": [C, C, C]}), ((), {"question": [Q, Q, Q], "context": [C, C]}),
    ]  # fmt: skip
    for args, kwargs in bad_calls:
        with pytest.raises(ValueError):
            handler(*args, **kwargs)


# --- the call: parameters and input forms ---


def test_classes_import_from_where_transformers4_had_them():
    import transformers
    import transformers.pipelines.question_answering as module
    from transformers import QuestionAnsweringPipeline
    from transformers.pipelines import QuestionAnsweringArgumentHandler
    from transformers.pipelines import QuestionAnsweringPipeline as FromPipelines

    assert QuestionAnsweringPipeline is FromPipelines is module.QuestionAnsweringPipeline
    assert QuestionAnsweringArgumentHandler is module.QuestionAnsweringArgumentHandler
    assert transformers.pipelines.question_answering is module
    assert QuestionAnsweringPipeline.create_sample([Q, Q], [C, C]) == [SquadExample(None, Q, C)] * 2


@pytest.mark.slow
def test_input_forms_and_parameters_of_transformers4(folders, caplog):
    qa = load(folders["roberta"])
    expected = qa(question=Q, context=LONG)
    one = {"question": Q, "context": LONG}
    for same in (qa(Q, LONG), qa(one), qa([one]), qa(X=one), qa(data=[one]), qa(SquadExample(None, Q, LONG)),
                 qa(question=[Q], context=LONG)):  # fmt: skip
        assert same == expected  # a list of one question gives one answer, as in transformers 4
    assert qa([one, one]) == qa(X=[one, one]) == [expected, expected]
    assert qa([]) == []
    with pytest.warns(UserWarning, match="topk"):
        assert qa(question=Q, context=LONG, topk=3) == qa(question=Q, context=LONG, top_k=3)
    padded = qa(question=Q, context=LONG, padding="max_length", max_seq_len=64, doc_stride=16)
    same_answers(padded, [qa(question=Q, context=LONG, max_seq_len=64, doc_stride=16)])
    with caplog.at_level("WARNING"):
        assert qa(question=Q, context=LONG, max_seq_length=512, framework="pt") == expected
    assert "ignores framework, max_seq_length" in caplog.text
    for bad in ((None,), (1,)):
        with pytest.raises(ValueError):
            qa(*bad)
    with pytest.raises(ValueError):
        qa(question=Q, context=LONG, top_k=0)


# --- windows sized by each question, and top_k ---


@pytest.mark.parametrize("kind", ["bert", "roberta"])
@pytest.mark.slow
def test_windows_hold_the_question_in_full_and_any_stride_that_fits(kind, folders):
    qa = load(folders[kind])
    context = LONG[: LONG.index("In 1998")]  # a little over a window of 128 tokens
    question_tokens = len(qa.tokenizer(Q, add_special_tokens=False)["input_ids"])
    room = 128 - question_tokens - qa.tokenizer.num_special_tokens_to_add(pair=True)
    assert room > 100  # the question is short: far more room than max_seq_len - max_question_len
    for doc_stride in (0, 61, room - 1):
        example = {"question": Q, "context": context}
        windows = list(qa.preprocess(example, max_seq_len=128, doc_stride=doc_stride, align_to_words=False))
        assert len(windows) > 1 and all(window["input_ids"].shape[1] == 128 for window in windows[:-1])
        for previous, window in zip(windows, windows[1:]):  # consecutive windows share doc_stride context tokens
            shared = [o for o in previous["offsets"] if o is not None][-doc_stride:] if doc_stride else []
            assert [o for o in window["offsets"] if o is not None][: len(shared)] == shared
        same_answers(qa(question=Q, context=context, max_seq_len=128, doc_stride=doc_stride),
                     transformers4_answers(qa, Q, context, max_seq_len=128, doc_stride=doc_stride))  # fmt: skip
    with pytest.raises(ValueError, match="doc_stride"):
        qa(question=Q, context=context, max_seq_len=128, doc_stride=room)
    for max_seq_len in (24, 40, 67):  # transformers 4's default stride, max_seq_len // 2, or less where it must
        check_answer(qa(question=Q, context=C * 3, max_seq_len=max_seq_len), C * 3)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("top_k", [20, 100])
@pytest.mark.slow
def test_top_k_gives_distinct_answers_decoded_as_transformers4(kind, top_k, folders):
    qa = load(folders[kind])
    windows = dict(max_seq_len=64, doc_stride=24)
    answers = qa(question=Q, context=LONG, top_k=top_k, **windows)
    expected = transformers4_answers(qa, Q, LONG, top_k=top_k, **windows)
    assert len(expected) == top_k  # the context holds that many spans
    same_answers(answers, expected)
    unaligned = dict(top_k=top_k, handle_impossible_answer=True, align_to_words=False, **windows)
    same_answers(qa(question=Q, context=LONG, **unaligned), transformers4_answers(qa, Q, LONG, **unaligned))


def test_max_answer_len_bounds_the_answer(folders):
    qa = load(folders["bert"])
    for answer in qa(question=Q, context=LONG, top_k=30, max_answer_len=2, align_to_words=False):
        assert len(qa.tokenizer(answer["answer"], add_special_tokens=False)["input_ids"]) <= 2
    same_answers(qa(question=Q, context=C, max_answer_len=3, top_k=4),
                 transformers4_answers(qa, Q, C, top_k=4, max_answer_len=3))  # fmt: skip
