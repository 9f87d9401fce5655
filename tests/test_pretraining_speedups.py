"""SpanRobertaForPreTraining's efficient paths give the numbers of the reference: the sparse last layer (the
encoder's last layer runs only where a head reads it, modeling_spanroberta.py) and the fused decoder + cross-entropy
of the heads (modeling_span_heads.py); `efficient_pretraining=False` is the reference."""

import pytest
import torch
import torch.nn.functional as F
from conftest import packed_batch, tiny_span_config, to_slots
from torch import nn

from spanroberta import SpanRobertaForPreTraining
from spanroberta.models import modeling_span_heads

VOCAB = 90


def make_model(**overrides) -> SpanRobertaForPreTraining:
    torch.manual_seed(0)
    settings = dict(vocab_size=VOCAB, num_attention_heads=2, intermediate_size=48, max_span_targets=3)
    # This file's models keep RoBERTa's dropout: the tests compare in eval mode or with equal draws.
    dropout = dict(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    return SpanRobertaForPreTraining(tiny_span_config(**{**settings, **dropout, **overrides}))


NUM_SLOTS = 6


def make_batch() -> dict[str, torch.Tensor]:
    """Three rows of 12 tokens; the last one padded after 9. Spans (end exclusive) are masked as the collator
    would: row 0 one span of 3 tokens, row 1 two spans (one of 4 tokens, longer than max_span_targets), row 2 a
    span of 1 token whose right boundary is the last real token. Targets in 6 prediction slots."""
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(5, VOCAB, (3, 12), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[2, 9:] = 0
    input_ids[2, 9:] = 1
    labels, left, right, relative = (torch.full_like(input_ids, -100) for _ in range(4))
    for row, (start, end) in [(0, (3, 6)), (1, (1, 5)), (1, (8, 9)), (2, (7, 8))]:
        labels[row, start:end] = input_ids[row, start:end]
        input_ids[row, start:end] = 4
        for position in range(start, min(end, start + 3)):
            left[row, position], right[row, position], relative[row, position] = start - 1, end, position - start
    batch = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "labels": labels,
        "sbo_left_positions": left,
        "sbo_right_positions": right,
        "sbo_relative_positions": relative,
        "sentence_order_label": torch.tensor([0, 1, 0]),
    }
    return to_slots(batch, NUM_SLOTS)


def losses_and_gradients(model: SpanRobertaForPreTraining, batch: dict, **kwargs):
    model.zero_grad(set_to_none=True)
    output = model(**batch, **kwargs)
    output.loss.backward()
    gradients = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return output, gradients


@pytest.mark.parametrize("sentence_objective", ["none", "sop"])
def test_sparse_last_layer_matches_the_full_encoder(sentence_objective):
    model = make_model(sentence_objective=sentence_objective).eval()  # eval: no dropout, so both paths agree
    batch = make_batch()
    sparse, sparse_gradients = losses_and_gradients(model, batch)
    # Asking for the hidden states needs every position of the last layer: the full encoder runs.
    full, full_gradients = losses_and_gradients(model, batch, output_hidden_states=True)
    assert sparse.hidden_states is None and len(full.hidden_states) == 3

    for field in ("loss", "mlm_loss", "sbo_loss", "sop_loss", "mlm_logits", "sbo_logits", "sentence_logits"):
        if getattr(full, field) is not None or getattr(sparse, field) is not None:
            torch.testing.assert_close(getattr(sparse, field), getattr(full, field), msg=field)
    assert sparse_gradients.keys() == full_gradients.keys()
    for name, gradient in full_gradients.items():
        torch.testing.assert_close(sparse_gradients[name], gradient, msg=name)


def test_last_layer_runs_only_where_the_heads_read():
    model = make_model().train()
    batch = make_batch()
    rows_seen = []
    last_layer = model.roberta.encoder.layer[-1]
    hook = last_layer.intermediate.register_forward_hook(lambda module, args, out: rows_seen.append(args[0].shape))
    try:
        model(**batch).loss.backward()
    finally:
        hook.remove()
    # The heads read a fixed number of positions per row, whatever the row masks: the 6 slots and, for SBO, the
    # two boundaries of each slot; never the whole row of 12.
    assert rows_seen == [torch.Size([3, 3 * NUM_SLOTS, 32])]
    # Trained in train mode too: every parameter of the last layer gets a gradient.
    assert all(p.grad is not None for p in last_layer.parameters())


def decoder_case(rows: int = 7, hidden: int = 16, vocab: int = 50):
    torch.manual_seed(0)
    decoder = nn.Linear(hidden, vocab)
    x = torch.randn(rows, hidden, requires_grad=True)
    return x, decoder, torch.randint(0, vocab, (rows,))


def gradients(x: torch.Tensor, decoder: nn.Linear, loss: torch.Tensor) -> list[torch.Tensor]:
    return list(torch.autograd.grad(loss, [x, decoder.weight, decoder.bias]))


def fused(x: torch.Tensor, decoder: nn.Linear, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return modeling_span_heads._DecoderCrossEntropy.apply(x, decoder.weight, decoder.bias, targets)


@pytest.mark.parametrize("bf16", [False, True])
def test_fused_decoder_cross_entropy_matches_linear_then_cross_entropy(monkeypatch, bf16):
    # Chunks of 3 rows: the 7 rows take three chunks, the last one short.
    monkeypatch.setattr(modeling_span_heads, "_CROSS_ENTROPY_CHUNK_BYTES", 4 * 50 * 3)
    x, decoder, targets = decoder_case()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits, total = fused(x, decoder, targets)
        expected_logits = decoder(x)
    expected_total = F.cross_entropy(expected_logits.float(), targets, reduction="sum")
    assert logits.dtype == expected_logits.dtype
    torch.testing.assert_close(logits, expected_logits)
    torch.testing.assert_close(total, expected_total)
    # bf16 rounds the gradient of the logits before the matmuls, where autograd rounds it after scaling.
    tolerance = {"rtol": 2e-2, "atol": 1e-3} if bf16 else {}
    for got, want in zip(gradients(x, decoder, total / 7), gradients(x, decoder, expected_total / 7)):
        torch.testing.assert_close(got, want, **tolerance)


def test_fused_decoder_cross_entropy_passes_gradients_reaching_the_logits():
    x, decoder, targets = decoder_case()
    logits, total = fused(x, decoder, targets)
    expected_logits = decoder(x)
    expected_total = F.cross_entropy(expected_logits, targets, reduction="sum")
    # A user's own term on the logits, next to the loss.
    got = gradients(x, decoder, 0.5 * total + logits.square().mean())
    want = gradients(x, decoder, 0.5 * expected_total + expected_logits.square().mean())
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("bf16", [False, True])
def test_fused_decoder_cross_entropy_ignores_unused_slots(monkeypatch, bf16):
    """Targets of -100 (unused prediction slots) add nothing to the loss and get no gradient, as with
    F.cross_entropy(ignore_index=-100, reduction="sum")."""
    monkeypatch.setattr(modeling_span_heads, "_CROSS_ENTROPY_CHUNK_BYTES", 4 * 50 * 3)
    x, decoder, targets = decoder_case()
    targets[[1, 4, 5]] = -100
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits, total = fused(x, decoder, targets)
        expected_logits = F.linear(x, decoder.weight, decoder.bias)
    expected_total = F.cross_entropy(expected_logits.float(), targets, ignore_index=-100, reduction="sum")
    torch.testing.assert_close(logits, expected_logits)
    torch.testing.assert_close(total, expected_total)
    tolerance = {"rtol": 2e-2, "atol": 1e-3} if bf16 else {}
    got, want = gradients(x, decoder, total), gradients(x, decoder, expected_total)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **tolerance)
    assert bool((got[0][[1, 4, 5]] == 0).all())  # ignored rows: no gradient at all
    # every target ignored: 0, not NaN
    _, none = fused(x, decoder, torch.full_like(targets, -100))
    assert none.item() == 0.0


def test_model_under_bf16_autocast_gets_the_plain_heads_numbers(monkeypatch):
    """Under CPU autocast the model's heads take the fused path: same losses and gradients as the plain one."""
    model = make_model().train()
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
    batch = make_batch()
    fused_calls = []
    fused_function = modeling_span_heads.fused_decoder_cross_entropy
    monkeypatch.setattr(
        modeling_span_heads,
        "fused_decoder_cross_entropy",
        lambda *args: fused_calls.append(1) or fused_function(*args),
    )
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused_output, fused_gradients = losses_and_gradients(model, batch)
    assert len(fused_calls) == 2  # the MLM and the SBO heads

    monkeypatch.setattr(modeling_span_heads, "fuses_decoder_cross_entropy", lambda *args: False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        plain_output, plain_gradients = losses_and_gradients(model, batch)
    assert len(fused_calls) == 2

    for field in ("mlm_loss", "sbo_loss", "mlm_logits", "sbo_logits"):
        torch.testing.assert_close(getattr(fused_output, field), getattr(plain_output, field), msg=field)
    for name, gradient in plain_gradients.items():
        torch.testing.assert_close(fused_gradients[name], gradient, rtol=2e-2, atol=2e-3, msg=name)


# --------------------------------------------------------------------------------------------------------
# Reference (efficient_pretraining=False) against the efficient paths


def packed_case() -> dict[str, torch.Tensor]:
    """Packed rows: several sequences per row, restarting positions, trailing padding in two rows."""
    batch, _ = packed_batch([[7, 5, 9], [12, 8], [4, 6, 5, 4]], length=24, vocab=VOCAB, seed=3, num_slots=8)
    batch["sentence_order_label"] = torch.tensor([0, 1, 1])
    return batch


@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager", "varlen_fa2"])
@pytest.mark.parametrize("packed", [False, True], ids=["unpacked", "packed"])
@pytest.mark.parametrize("heads", ["sbo", "sbo+sop", "mlm only"])
def test_efficient_paths_match_the_reference(attn_implementation, packed, heads):
    model = make_model(
        attn_implementation=attn_implementation,
        use_sbo=heads != "mlm only",
        sentence_objective="sop" if "sop" in heads else "none",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    ).train()
    batch = packed_case() if packed else make_batch()
    if heads == "mlm only":
        batch = {k: v for k, v in batch.items() if not k.startswith("sbo_")}
    results = {}
    for efficient in (True, False):
        model.config.efficient_pretraining = efficient
        results[efficient] = losses_and_gradients(model, batch)
    (efficient, efficient_gradients), (reference, reference_gradients) = results[True], results[False]

    for field in ("loss", "mlm_loss", "sbo_loss", "sop_loss", "sentence_logits"):
        assert (getattr(efficient, field) is None) == (getattr(reference, field) is None), field
        if getattr(reference, field) is not None:
            torch.testing.assert_close(getattr(efficient, field), getattr(reference, field), msg=field)
    assert (reference.sbo_loss is not None) == (heads != "mlm only")
    assert (reference.sop_loss is not None) == ("sop" in heads)
    used = batch["labels"] != -100
    torch.testing.assert_close(efficient.mlm_logits[used], reference.mlm_logits[used])
    if reference.sbo_logits is not None:
        is_target = batch["sbo_relative_positions"] != -100
        torch.testing.assert_close(efficient.sbo_logits[is_target], reference.sbo_logits[is_target])
    assert efficient_gradients.keys() == reference_gradients.keys() == {
        name for name, p in model.named_parameters() if p.requires_grad
    } - ({"roberta.pooler.dense.weight", "roberta.pooler.dense.bias"} if "sop" not in heads else set())
    for name, gradient in reference_gradients.items():
        torch.testing.assert_close(efficient_gradients[name], gradient, rtol=1e-4, atol=1e-6, msg=name)


def test_efficient_paths_match_the_reference_under_bf16_autocast():
    """Training under CPU bf16 autocast, where both efficient paths apply (sparse last layer, fused heads)."""
    model = make_model(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0).train()
    batch = packed_case()
    results = {}
    for efficient in (True, False):
        model.config.efficient_pretraining = efficient
        with torch.autocast("cpu", dtype=torch.bfloat16):
            results[efficient] = losses_and_gradients(model, batch)
    (efficient, efficient_gradients), (reference, reference_gradients) = results[True], results[False]
    for field in ("loss", "mlm_loss", "sbo_loss"):
        torch.testing.assert_close(getattr(efficient, field), getattr(reference, field), rtol=2e-2, atol=1e-2)
    assert efficient_gradients.keys() == reference_gradients.keys()
    for name, gradient in reference_gradients.items():
        torch.testing.assert_close(efficient_gradients[name], gradient, rtol=5e-2, atol=5e-3, msg=name)
