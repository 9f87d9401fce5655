"""pipeline("question-answering"): in a process that imported spanroberta, and through remote code where
spanroberta is not installed; spanroberta, RoBERTa and BERT checkpoints; the span decoding it shares with
run_squad.py.

The tiny models are untrained, so tests that need a known answer steer them: a forward hook adds a large
bonus to the start/end logits of chosen tokens, which is what a trained model's confidence looks like."""

import json
import os
import re
import subprocess
import sys
import sysconfig
from contextlib import contextmanager

import numpy as np
import pytest
import torch
from transformers import (
    BertConfig,
    BertForQuestionAnswering,
    BertTokenizer,
    RobertaConfig,
    RobertaForQuestionAnswering,
)

import run_squad
import spanroberta  # noqa: F401  (brings pipeline("question-answering") back)
from conftest import TINY_TEXT, run_without_spanroberta
from spanroberta import SpanRobertaConfig, SpanRobertaForPreTraining, SpanRobertaForQuestionAnswering
from spanroberta.tasks.squad.span_decoding import WindowScores, decode_spans

# The answer word "passage" occurs once, at the very end of a context far longer than one window.
FILLER = " ".join(sentence for sentence in dict.fromkeys(TINY_TEXT) if "passage" not in sentence)
CONTEXT = f"{FILLER} {FILLER} The answer is hidden in the passage."
QUESTION = "Where is the answer hidden?"
WINDOWS = {"max_seq_len": 64, "doc_stride": 16, "max_question_len": 16}


def tiny_settings(vocab_size: int) -> dict:
    return dict(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)


def roberta_settings(tokenizer) -> dict:
    return dict(
        **tiny_settings(len(tokenizer)), max_position_embeddings=514, pad_token_id=1, bos_token_id=0, eos_token_id=2
    )


@pytest.fixture(scope="module")
def checkpoints(tiny_tokenizer, tmp_path_factory) -> dict:
    """Untrained QA checkpoints of each kind, saved as a user would have them."""
    root = tmp_path_factory.mktemp("qa_checkpoints")
    models = {
        "roberta": RobertaForQuestionAnswering(RobertaConfig(**roberta_settings(tiny_tokenizer))),
        "spanroberta": SpanRobertaForQuestionAnswering(SpanRobertaConfig(**roberta_settings(tiny_tokenizer))),
    }
    for name, model in models.items():
        model.save_pretrained(root / name)
        tiny_tokenizer.save_pretrained(root / name)
    words = sorted({w for text in (CONTEXT, QUESTION) for w in re.findall(r"\w+|[^\w\s]", text.lower())})
    vocab = {token: i for i, token in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])}
    BertForQuestionAnswering(BertConfig(**tiny_settings(len(vocab)), max_position_embeddings=128)).save_pretrained(
        root / "bert"
    )
    BertTokenizer(vocab=vocab).save_pretrained(root / "bert")
    return {name: root / name for name in ("roberta", "spanroberta", "bert")}


def fine_tune_one_step(pretrained, root):
    """run_squad.py on `pretrained` for one step; returns its output folder."""
    start = CONTEXT.index("passage")
    answers = [{"text": "passage", "answer_start": start}]
    qas = [{"id": f"q{i}", "question": QUESTION, "answers": answers} for i in range(4)]
    data = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": CONTEXT, "qas": qas}]}]}
    (root / "train.json").write_text(json.dumps(data))
    run_squad.main([
        "--model_name_or_path", str(pretrained), "--output_dir", str(root / "out"), "--do_train",
        "--train_file", str(root / "train.json"), "--max_steps", "1", "--max_seq_length", "64",
        "--doc_stride", "16", "--max_query_length", "16", "--use_cpu", "--save_strategy", "no", "--report_to", "none",
    ])  # fmt: skip
    return root / "out"


@pytest.fixture(scope="module")
def squad_checkpoint(tiny_tokenizer, tmp_path_factory):
    """A checkpoint written by run_squad.py: a spanroberta pretraining checkpoint fine-tuned for one step."""
    root = tmp_path_factory.mktemp("run_squad")
    SpanRobertaForPreTraining(SpanRobertaConfig(**roberta_settings(tiny_tokenizer))).save_pretrained(root / "pre")
    tiny_tokenizer.save_pretrained(root / "pre")
    return fine_tune_one_step(root / "pre", root)


def load(path):
    # Imported here, as a user would after `import spanroberta` (a `pipeline` bound before that import is
    # transformers' own, which refuses the task).
    from transformers import pipeline

    return pipeline("question-answering", model=str(path), device="cpu")


@contextmanager
def steered(qa, start_word: str | None = None, end_word: str | None = None, no_answer: bool = False):
    """Makes the model sure that answers start at the first token of `start_word` and end at the last token of
    `end_word`, however the tokenizer splits them, or that there is no answer (the first token)."""
    words = {key: qa.tokenizer(" " + word, add_special_tokens=False)["input_ids"]
             for key, word in (("start", start_word), ("end", end_word)) if word is not None}  # fmt: skip
    seen = {}

    def occurrences(input_ids: torch.Tensor, tokens: list[int], last: bool) -> torch.Tensor:
        """1.0 at the first (or last) token of every occurrence of `tokens` in `input_ids`."""
        found = torch.zeros(input_ids.shape, dtype=torch.float32)
        for start in range(input_ids.shape[1] - len(tokens) + 1):
            match = (input_ids[:, start : start + len(tokens)] == torch.tensor(tokens)).all(1)
            found[:, start + (len(tokens) - 1 if last else 0)] += match.float()
        return found

    def remember_inputs(module, args, kwargs):
        seen["input_ids"] = kwargs["input_ids"]

    def add_bonus(module, inputs, logits):
        bonus = torch.zeros_like(logits)
        if no_answer:
            bonus[:, 0, :] = 50.0
        for column, key in enumerate(("start", "end")):
            if key in words:
                bonus[..., column] += 50.0 * occurrences(seen["input_ids"].cpu(), words[key], last=key == "end")
        return logits + bonus

    hooks = [
        qa.model.register_forward_pre_hook(remember_inputs, with_kwargs=True),
        qa.model.qa_outputs.register_forward_hook(add_bonus),
    ]
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()


# --- the pipeline in a process that imported spanroberta ---


@pytest.mark.parametrize("kind", ["roberta", "spanroberta", "bert", "run_squad"])
def test_answer_found_in_the_last_window_of_a_long_context(kind, checkpoints, squad_checkpoint):
    qa = load(squad_checkpoint if kind == "run_squad" else checkpoints[kind])
    # Served by the installed class, also for run_squad's checkpoint, which names its own copy in
    # custom_pipelines (no code from a checkpoint runs without trust_remote_code).
    assert type(qa).__module__ == "spanroberta.pipelines.question_answering"
    # The context spans several windows; "passage", its last word, is in none but the last.
    assert len(qa.tokenizer(QUESTION, CONTEXT)["input_ids"]) > 1.5 * WINDOWS["max_seq_len"]

    with steered(qa, "passage", "passage"):
        result = qa(question=QUESTION, context=CONTEXT, **WINDOWS)
    assert set(result) == {"score", "start", "end", "answer"}
    assert result["answer"] == "passage" == CONTEXT[result["start"] : result["end"]]
    assert result["start"] == CONTEXT.index("passage") and result["score"] > 0.99


def test_lists_and_batches_give_the_same_answers(checkpoints):
    qa = load(checkpoints["roberta"])
    questions = [QUESTION, "What did the committee approve?", "Who jumps?"]
    contexts = [CONTEXT, FILLER, "The quick brown fox jumps over the lazy dog."]
    one_by_one = [qa(question=q, context=c, **WINDOWS) for q, c in zip(questions, contexts)]
    listed = qa(question=questions, context=contexts, **WINDOWS)
    batched = qa(question=questions, context=contexts, batch_size=3, **WINDOWS)
    assert isinstance(listed, list) and len(listed) == len(batched) == 3
    for single, in_list, in_batch, context in zip(one_by_one, listed, batched, contexts):
        assert single == in_list
        assert [in_batch[k] for k in ("start", "end", "answer")] == [single[k] for k in ("start", "end", "answer")]
        assert in_batch["score"] == pytest.approx(single["score"], rel=1e-4)
        assert context[single["start"] : single["end"]] == single["answer"] != ""


def test_top_k_answers_best_first(checkpoints):
    qa = load(checkpoints["spanroberta"])
    answers = qa(question=QUESTION, context=CONTEXT, top_k=4, **WINDOWS)
    assert isinstance(answers, list) and len(answers) == 4
    assert [a["score"] for a in answers] == sorted((a["score"] for a in answers), reverse=True)
    assert len({(a["start"], a["end"]) for a in answers}) == 4
    assert all(CONTEXT[a["start"] : a["end"]] == a["answer"] for a in answers)
    assert qa(question=QUESTION, context=CONTEXT, top_k=1, **WINDOWS) == answers[0]


def test_unanswerable_questions(checkpoints):
    qa = load(checkpoints["bert"])
    context = "The quick brown fox jumps over the lazy dog."
    with steered(qa, no_answer=True):
        assert qa(question=QUESTION, context=context, handle_impossible_answer=True) == {
            "score": pytest.approx(1.0), "start": 0, "end": 0, "answer": ""
        }  # fmt: skip
        top = qa(question=QUESTION, context=context, handle_impossible_answer=True, top_k=2)
        assert top[0]["answer"] == "" and top[1]["answer"] in context and top[1]["answer"]
        # Without handle_impossible_answer the best span is returned however unlikely.
        assert qa(question=QUESTION, context=context)["answer"] in context


@pytest.mark.slow
def test_max_answer_length_and_the_input_forms(checkpoints):
    qa = load(checkpoints["roberta"])
    with steered(qa, "answer", "passage"):  # 11 tokens apart
        assert qa(question=QUESTION, context=CONTEXT, **WINDOWS)["answer"] == "answer is hidden in the passage"
        # Two tokens cannot reach from "answer" to "passage"; unaligned, they cover at most two words.
        short = qa(question=QUESTION, context=CONTEXT, max_answer_length=2, align_to_words=False, **WINDOWS)
        assert short["answer"] == CONTEXT[short["start"] : short["end"]] and len(short["answer"].split()) <= 2
        assert qa(question=QUESTION, context=CONTEXT, max_answer_len=2, align_to_words=False, **WINDOWS) == short

    expected = qa(question=QUESTION, context=FILLER)
    assert qa({"question": QUESTION, "context": FILLER}) == expected
    assert qa(QUESTION, FILLER) == expected
    assert qa([{"question": QUESTION, "context": FILLER}] * 2) == [expected, expected]
    assert qa(question=[QUESTION, QUESTION], context=FILLER) == [expected, expected]
    with pytest.raises(ValueError, match="`context` cannot be empty"):
        qa(question=QUESTION, context="   ")
    with pytest.raises(ValueError, match="doc_stride"):
        qa(question=QUESTION, context=CONTEXT, max_seq_len=64, doc_stride=60)


# --- remote code, where spanroberta is not installed ---


@pytest.mark.slow
def test_run_squad_checkpoint_works_through_remote_code_without_spanroberta(squad_checkpoint, tmp_path):
    assert {"question_answering.py", "modeling_spanroberta.py"} <= {p.name for p in squad_checkpoint.iterdir()}
    call = dict(question=QUESTION, context=CONTEXT, top_k=3, handle_impossible_answer=True, **WINDOWS)
    script = f"""
import json, sys
sys.path.append({sysconfig.get_paths()["purelib"]!r})  # site-packages without its .pth files: no editable spanroberta
try:
    import spanroberta
except ImportError:
    pass
else:
    raise SystemExit("spanroberta is importable")
from transformers import pipeline
qa = pipeline("question-answering", model={str(squad_checkpoint)!r}, trust_remote_code=True, device="cpu")
print(json.dumps({{"pipeline": type(qa).__module__, "model": type(qa.model).__module__, "answers": qa(**{call!r})}}))
"""
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script],  # no site, no PYTHONPATH, no current directory
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    remote = json.loads(result.stdout.strip().splitlines()[-1])
    assert remote["pipeline"].startswith("transformers_modules.") and remote["pipeline"].endswith(".question_answering")
    assert remote["model"].endswith(".modeling_spanroberta")
    local = load(squad_checkpoint)(**call)
    assert [(a["start"], a["end"], a["answer"]) for a in remote["answers"]] == [
        (a["start"], a["end"], a["answer"]) for a in local
    ]
    assert [a["score"] for a in remote["answers"]] == pytest.approx([a["score"] for a in local])


@pytest.mark.slow
def test_a_stock_bert_fine_tuned_by_run_squad_stays_transformers_own_without_spanroberta(checkpoints, tmp_path):
    """The model is transformers' BertForQuestionAnswering, loaded with no remote code; the only code the
    checkpoint carries is the pipeline's, because transformers 5 has no question-answering pipeline of its own
    (if it gets one back, stock architectures should stop naming theirs in custom_pipelines)."""
    output_dir = fine_tune_one_step(checkpoints["bert"], tmp_path)
    lines = run_without_spanroberta(
        f"""
        import json
        from transformers import AutoModelForQuestionAnswering, pipeline
        from transformers.pipelines import PIPELINE_REGISTRY
        folder = {str(output_dir)!r}
        config = json.load(open(folder + "/config.json"))
        model, report = AutoModelForQuestionAnswering.from_pretrained(folder, output_loading_info=True)
        qa = pipeline("question-answering", model=folder, trust_remote_code=True, device="cpu")
        answer = qa(question={QUESTION!r}, context={CONTEXT!r}, **{WINDOWS!r})
        print(json.dumps({{
            "own_pipeline": "question-answering" in PIPELINE_REGISTRY.get_supported_tasks(),
            "remote_model": "auto_map" in config, "model": type(model).__module__,
            "missing": sorted(report["missing_keys"]), "pipeline_model": type(qa.model).__module__,
            "answer": answer["answer"],
            "spanroberta": [name for name, module in sys.modules.items() if name.startswith("spanroberta") and module],
        }}))
        """,
        tmp_path,
    )
    seen = json.loads(lines[-1])
    assert not seen["own_pipeline"] and not seen["remote_model"] and not seen["missing"] and not seen["spanroberta"]
    assert seen["model"] == seen["pipeline_model"] == "transformers.models.bert.modeling_bert"
    assert seen["answer"] in CONTEXT


# --- the span decoding shared with run_squad.py ---


def test_decoding_takes_the_best_span_over_overlapping_windows():
    context = "aa bb cc dd ee"
    # Two windows over the context's five words; tokens 0 (<s>) and 1 (the question) are not context.
    first = [None, None, (0, 2), (3, 5), (6, 8)]
    second = [None, None, (6, 8), (9, 11), (12, 14)]
    windows = [
        WindowScores(np.array([1.0, 0, 2, 0, 5]), np.array([1.0, 0, 0, 0, 4]), first),  # "cc" 9, "aa bb cc" 6
        WindowScores(np.array([-1.0, 0, 3, 0, 0]), np.array([-2.0, 0, 4, 5, 1]), second),  # "cc dd" 8, "cc" 7
    ]
    nbest, null = decode_spans(windows, context, n_best_size=3, max_answer_length=3)
    # "cc" is proposed by both windows and kept once, with its better score (and that window's logits).
    assert [(span.text, span.score) for span in nbest] == [("cc", 9.0), ("cc dd", 8.0), ("aa bb cc", 6.0)]
    assert (nbest[0].start_score, nbest[0].end_score) == (5.0, 4.0)
    assert all(context[span.start : span.end] == span.text for span in nbest)
    # The null answer is the first token's score in the window where it is lowest.
    assert (null.text, null.score, null.start_score, null.end_score) == ("", -3.0, -1.0, -2.0)
    # max_answer_length counts tokens: with 1, only single words remain.
    assert [span.text for span in decode_spans(windows, context, 2, max_answer_length=1)[0]] == ["cc", "dd"]
