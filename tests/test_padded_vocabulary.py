"""The vocabulary padded to a multiple of 64 ids (models/vocabulary.py): fresh models are built padded, continued
checkpoints resized; the padded ids are never predicted (fill-mask, in a process without spanroberta, never returns
one; ELECTRA's generator gives them no probability), and the losses are those of the unpadded vocabulary."""

import pytest
import run_pretraining
import torch
from conftest import TINY_TEXT, packed_batch, run_without_spanroberta, tiny_span_config

from spanroberta import SpanRobertaForPreTraining
from spanroberta.models.vocabulary import PADDED_ID_LOGIT, pad_vocabulary, padded_vocab_size, vocabulary_decoders
from spanroberta.objectives import get_objective
from spanroberta.pretraining.specification import resolve_recipe
from spanroberta.pretraining.arguments import (
    PretrainingArguments,
    PretrainingDataArguments,
    PretrainingModelArguments,
)
from spanroberta.runs.cli import parse_arguments


def test_sizes_round_up_to_the_multiple():
    assert [padded_vocab_size(size, 64) for size in (400, 448, 50265)] == [448, 448, 50304]
    assert padded_vocab_size(50265, 1) == 50265


def built(tokenizer, *flags):
    types = (PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments)
    (model_args, data_args, _), _ = parse_arguments(types, ["--output_dir", "unused", "--model_size", "tiny", *flags])
    objective = get_objective(resolve_recipe(model_args, data_args).objective)
    config = objective.build_config(model_args, resolve_recipe(model_args, data_args), tokenizer)
    return objective.build_model(model_args, config, tokenizer)


@pytest.mark.parametrize("recipe", ["spanbert", "albert", "electra"])
def test_fresh_models_are_padded_and_their_padded_ids_get_no_probability(tiny_tokenizer, recipe):
    """400 ids become 448; every decoder into the vocabulary (MLM, SBO, ELECTRA's generator) gives the 48 padded ids
    a probability of exactly 0, so that nothing samples or predicts one."""
    model = built(tiny_tokenizer, "--recipe", recipe)
    assert (model.config.vocab_size, model.get_input_embeddings().num_embeddings) == (448, 448)
    decoders = vocabulary_decoders(model)
    assert len(decoders) == {"spanbert": 2, "albert": 1, "electra": 1}[recipe]  # ALBERT's recipe trains no SBO
    features = torch.randn(5, decoders[0].in_features)
    for decoder in decoders:
        assert decoder.out_features == 448 and (decoder.bias[400:] == PADDED_ID_LOGIT).all()
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            logits = decoder.to(dtype)(features.to(dtype)).float()
            assert (logits.softmax(-1)[:, 400:] == 0).all(), dtype
        decoder.float()
    unpadded = built(tiny_tokenizer, "--recipe", recipe, "--pad_vocab_to_multiple_of", "1")
    assert unpadded.config.vocab_size == 400


def test_a_continued_checkpoint_is_resized_and_its_losses_do_not_change():
    """A checkpoint of 400 ids grows to 448 through resize_token_embeddings; on the same batch (labels below 400
    always) the MLM and SBO losses are the unpadded model's."""
    model = SpanRobertaForPreTraining(tiny_span_config(vocab_size=400, max_span_targets=3)).eval()
    batch, _ = packed_batch([[7, 5, 9], [12, 8]], 24, 400)
    with torch.no_grad():
        before = model(**batch)
        pad_vocabulary(model, 400, 64)
        after = model(**batch)
    assert model.config.vocab_size == 448 and model.lm_head.decoder.weight.shape[0] == 448
    assert model.lm_head.decoder.weight is model.get_input_embeddings().weight  # still tied
    for name in ("loss", "mlm_loss", "sbo_loss"):
        torch.testing.assert_close(after[name], before[name], rtol=0, atol=1e-6, msg=name)
    torch.testing.assert_close(after.mlm_logits[..., :400], before.mlm_logits)
    assert (after.mlm_logits.argmax(-1) < 400).all() and (after.sbo_logits.argmax(-1) < 400).all()


@pytest.mark.slow
def test_the_saved_model_fills_masks_with_real_ids_in_plain_transformers(tmp_path, tiny_tokenizer_dir):
    """A fresh spanbert run, saved; loaded where spanroberta is not installed, by its shipped code and by plain
    RobertaForMaskedLM, with its tokenizer: fill-mask's every candidate is an id of the tokenizer."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join(TINY_TEXT[start : start + 4]) for start in range(0, 40, 4)) + "\n")
    output_dir = tmp_path / "out"
    run_pretraining.main([
        "--train_file", str(corpus), "--output_dir", str(output_dir), "--tokenizer_name", str(tiny_tokenizer_dir),
        "--recipe", "spanbert", "--model_size", "tiny", "--max_seq_length", "64", "--per_device_train_batch_size", "4",
        "--max_steps", "2", "--save_strategy", "no", "--report_to", "none", "--validation_split_percentage", "0",
        "--use_cpu", "true", "--disable_tqdm", "true",
    ])  # fmt: skip
    lines = run_without_spanroberta(
        f"""
        from transformers import AutoTokenizer, RobertaForMaskedLM, pipeline
        tokenizer = AutoTokenizer.from_pretrained({str(output_dir)!r}, trust_remote_code=True)
        shipped = pipeline("fill-mask", model={str(output_dir)!r}, trust_remote_code=True)
        plain = pipeline("fill-mask", model=RobertaForMaskedLM.from_pretrained({str(output_dir)!r}), tokenizer=tokenizer)
        for fill in (shipped, plain):
            ids = [candidate["token"] for candidate in fill("The committee approved the <mask>.", top_k=len(tokenizer))]
            print("fill-mask", len(tokenizer), fill.model.config.vocab_size, len(ids), max(ids))
        """,
        tmp_path,
    )
    results = [line.split()[1:] for line in lines if line.startswith("fill-mask ")]
    assert len(results) == 2, lines
    for result in results:
        tokenizer_size, vocab_size, candidates, highest = map(int, result)
        assert (vocab_size, candidates) == (padded_vocab_size(tokenizer_size, 64), tokenizer_size)
        assert vocab_size > tokenizer_size and highest < tokenizer_size
