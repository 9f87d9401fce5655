"""SpanRobertaForPreTraining's speed-ups give the numbers of the plain computation: the sparse last layer (the
encoder's last layer runs only where a head reads it) and the fused decoder + cross-entropy of the heads."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from spanroberta import SpanRobertaConfig, SpanRobertaForPreTraining
from spanroberta import modeling_spanroberta

VOCAB = 90


def make_model(**overrides) -> SpanRobertaForPreTraining:
    torch.manual_seed(0)
    settings = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=48,
        max_span_targets=3,
        sbo_position_embedding_size=8,
    )
    return SpanRobertaForPreTraining(SpanRobertaConfig(**{**settings, **overrides}))


def make_batch() -> dict[str, torch.Tensor]:
    """Three rows of 12 tokens; the last one padded after 9. Spans (end exclusive) are masked as the collator
    would: row 0 one span of 3 tokens, row 1 two spans (one of 4 tokens, longer than max_span_targets), row 2 a
    span of 1 token whose right boundary is the last real token."""
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
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "labels": labels,
        "sbo_left_positions": left,
        "sbo_right_positions": right,
        "sbo_relative_positions": relative,
        "sentence_order_label": torch.tensor([0, 1, 0]),
    }


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
    # Row 1 reads the most: 5 MLM targets and the boundaries 0, 5, 7 and 9 of its two spans.
    assert rows_seen == [torch.Size([3, 9, 32])]
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
    return modeling_spanroberta._DecoderCrossEntropy.apply(x, decoder.weight, decoder.bias, targets)


@pytest.mark.parametrize("bf16", [False, True])
def test_fused_decoder_cross_entropy_matches_linear_then_cross_entropy(monkeypatch, bf16):
    # Chunks of 3 rows: the 7 rows take three chunks, the last one short.
    monkeypatch.setattr(modeling_spanroberta, "_CROSS_ENTROPY_CHUNK_BYTES", 4 * 50 * 3)
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


def test_model_under_bf16_autocast_gets_the_plain_heads_numbers(monkeypatch):
    """Under CPU autocast the model's heads take the fused path: same losses and gradients as the plain one."""
    model = make_model().eval()
    batch = make_batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused_output, fused_gradients = losses_and_gradients(model, batch)

    def plain(x, decoder, targets):
        logits = decoder(x)
        return logits, F.cross_entropy(logits.float(), targets, reduction="sum")

    monkeypatch.setattr(modeling_spanroberta, "_decoder_cross_entropy", plain)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        plain_output, plain_gradients = losses_and_gradients(model, batch)

    for field in ("mlm_loss", "sbo_loss", "mlm_logits", "sbo_logits"):
        torch.testing.assert_close(getattr(fused_output, field), getattr(plain_output, field), msg=field)
    for name, gradient in plain_gradients.items():
        torch.testing.assert_close(fused_gradients[name], gradient, rtol=2e-2, atol=2e-3, msg=name)
