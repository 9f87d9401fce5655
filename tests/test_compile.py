"""torch.compile of the pretraining step: one whole graph (no graph break, so no host synchronisation such as
.item(), .nonzero() or a branch on a tensor's value), the eager numbers, and no recompilation from one batch to
the next when the batches mask different numbers of tokens (the prediction slots keep every shape fixed).
Under varlen_fa2 packed rows compile whole too (the documents' offsets come with the batch), and batches with
different numbers of documents reuse what was compiled after one recompilation; with their offsets padded to a
fixed count by the collator, one graph with no dynamic size serves them all.

The backend is aot_eager (dynamo's graph capture and AOTAutograd's forward and backward graphs, run eagerly):
what decides graph breaks and recompilations, without inductor's code generation, which takes about a minute for
a tiny model on CPU."""

import pytest
import torch
from conftest import TINY_TEXT, tiny_span_config
from torch._dynamo.testing import CompileCounterWithBackend

from spanroberta import SpanRobertaForPreTraining
from spanroberta.data.collator import DataCollatorForSpanMasking
from spanroberta.data.formats import pack_sequences

pytestmark = pytest.mark.slow  # each test compiles a training step

LENGTH = 64


@pytest.fixture(scope="module")
def batches(tiny_tokenizer):
    """Three collated batches of rows of 64 tokens that mask different numbers of tokens; unpacked rows (some
    shorter, padded to 64) and packed rows (several sequences per row)."""
    ids = tiny_tokenizer(TINY_TEXT[:16], add_special_tokens=False)["input_ids"]
    sequences = [[tiny_tokenizer.cls_token_id] + s[: 20 + 3 * (i % 5)] + [tiny_tokenizer.sep_token_id]
                 for i, s in enumerate(ids)]
    collator = DataCollatorForSpanMasking(
        tiny_tokenizer, label_layout="slots", pad_to_multiple_of=LENGTH, max_span_targets=4
    )
    stream = [token for s in ids for token in s]
    unpacked = [
        [tiny_tokenizer.cls_token_id] + stream[i * 40 : i * 40 + 40 + 20 * (i % 2)] + [tiny_tokenizer.sep_token_id]
        for i in range(12)
    ]
    packed = pack_sequences([{"input_ids": s} for s in sequences], LENGTH)
    result = {"unpacked": [], "packed": []}
    for k in range(3):
        result["unpacked"].append(
            collator([{"input_ids": row, "example_index": 4 * k + i} for i, row in enumerate(unpacked[4 * k : 4 * k + 4])])
        )
        result["packed"].append(
            collator([{**row, "example_index": 10 * k + i} for i, row in enumerate(packed[:4])])
        )
    for kind, kind_batches in result.items():
        counts = {int((batch["labels"] != -100).sum()) for batch in kind_batches}
        assert len(counts) > 1, kind  # the batches mask different numbers of tokens
        assert len({tuple(batch["mlm_positions"].shape) for batch in kind_batches}) == 1
    assert "position_ids" in result["packed"][0] and "position_ids" not in result["unpacked"][0]
    return result


def make_model(vocab_size, pad_token_id, **overrides):
    torch.manual_seed(0)
    # No dropout (tiny_span_config's default): dropout draws differ between eager and compiled runs.
    config = tiny_span_config(
        vocab_size=vocab_size, max_position_embeddings=LENGTH + 2, pad_token_id=pad_token_id, **overrides
    )
    return SpanRobertaForPreTraining(config).train()


def step(model, batch, forward=None):
    """One forward and backward pass through `forward` (default `model`); the gradients of `model`'s parameters."""
    model.zero_grad(set_to_none=True)
    output = (model if forward is None else forward)(**batch)
    output.loss.backward()
    return output, {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("kind", ["unpacked", "packed"])
@pytest.mark.parametrize("efficient", [True, False], ids=["efficient", "reference"])
def test_the_compiled_step_is_one_graph_with_the_eager_numbers(tiny_tokenizer, batches, kind, efficient):
    torch._dynamo.reset()
    model = make_model(len(tiny_tokenizer), tiny_tokenizer.pad_token_id, efficient_pretraining=efficient)
    counter = CompileCounterWithBackend("aot_eager")
    # fullgraph=True raises on any graph break: data-dependent control flow, .item(), .tolist(), nonzero...
    compiled = torch.compile(model, backend=counter, fullgraph=True)
    for batch in batches[kind]:
        eager_output, eager_gradients = step(model, batch)
        compiled_output, compiled_gradients = step(model, batch, compiled)
        for field in ("loss", "mlm_loss", "sbo_loss"):
            torch.testing.assert_close(getattr(compiled_output, field), getattr(eager_output, field), msg=field)
        used = batch["labels"] != -100
        torch.testing.assert_close(compiled_output.mlm_logits[used], eager_output.mlm_logits[used])
        assert compiled_gradients.keys() == eager_gradients.keys()
        for name, gradient in eager_gradients.items():
            torch.testing.assert_close(compiled_gradients[name], gradient, rtol=1e-4, atol=1e-6, msg=name)
    # Batches that mask different numbers of tokens have the same shapes: one compilation serves them all
    # (at most one recompilation tolerated).
    assert 1 <= counter.frame_count <= 2, counter.frame_count


def test_a_batch_without_targets_compiles_and_gives_zero(tiny_tokenizer, batches):
    torch._dynamo.reset()
    model = make_model(len(tiny_tokenizer), tiny_tokenizer.pad_token_id)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    batch = dict(batches["unpacked"][0])
    for name in ("mlm_positions", "labels", "sbo_left_positions", "sbo_right_positions", "sbo_relative_positions"):
        batch[name] = torch.full_like(batch[name], -100)
    output, gradients = step(model, batch, compiled)
    assert all(bool(torch.isfinite(g).all()) for g in gradients.values())
    assert output.loss.item() == 0.0 and output.mlm_loss.item() == 0.0 and output.sbo_loss.item() == 0.0


@pytest.mark.parametrize("marked", [False, True], ids=["plain", "marked as the Trainer marks them"])
def test_under_varlen_fa2_packed_batches_compile_whole_once_and_are_reused(flash_reference_kernels, marked):
    """Under varlen_fa2 (the flash ops, through the reference kernels) with the collator's offsets, packed rows
    compile whole (fullgraph: no graph break, so no host synchronisation in the forward); batches with other numbers
    of documents reuse the graph: after one recompilation at the second batch, or none where the number of sequences
    is marked dynamic (PretrainingTrainer marks it). The compiled step equals the eager one."""
    from spanroberta.pretraining.trainer import mark_sequence_count_dynamic

    from conftest import packed_batch

    from spanroberta.models.packed_attention import packed_sequence_offsets

    torch._dynamo.reset()
    model = make_model(90, 1, attn_implementation="varlen_fa2")
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(model, backend=counter, fullgraph=True)
    layouts = [[[20, 30, 14], [64], [10, 20, 30]], [[32, 32], [8, 16, 24, 16], [40, 20]],
               [[16, 16, 16, 16], [50], [30, 30]], [[12, 40], [20, 20, 20], [60]]]  # fmt: skip
    frames = []
    for seed, rows in enumerate(layouts):
        batch = packed_batch(rows, LENGTH, 90, seed=seed, num_slots=40)[0]
        batch["sequence_offsets"] = packed_sequence_offsets(batch["position_ids"], batch["attention_mask"])
        if marked:
            batch = mark_sequence_count_dynamic(batch)
        output, gradients = step(model, batch, compiled)
        eager_output, eager_gradients = step(model, batch)
        torch.testing.assert_close(output.loss, eager_output.loss)
        for name, gradient in eager_gradients.items():
            torch.testing.assert_close(gradients[name], gradient, rtol=1e-4, atol=1e-6, msg=name)
        frames.append(counter.frame_count)
    assert frames == ([1, 1, 1, 1] if marked else [1, 2, 2, 2]), frames
    assert flash_reference_kernels.calls["forward"] > 0


def test_padded_offsets_give_the_same_numbers_and_one_graph_with_no_dynamic_size(tiny_tokenizer,
                                                                                 flash_reference_kernels):  # fmt: skip
    """The collator pads the documents' offsets to a fixed count (zero-length documents at the end): under varlen_fa2
    (the flash ops, through the reference kernels) outputs and gradients equal the unpadded offsets', and batches
    with different numbers of documents compile to one graph without marking any size dynamic, as CUDA graphs
    need. A batch with more documents than the count leaves room for is refused."""
    ids = tiny_tokenizer(TINY_TEXT[:24], add_special_tokens=False)["input_ids"]
    sequences = [[tiny_tokenizer.cls_token_id] + s[: 4 + 5 * (i % 7)] + [tiny_tokenizer.sep_token_id]
                 for i, s in enumerate(ids)]  # fmt: skip
    rows = pack_sequences([{"input_ids": s} for s in sequences], LENGTH)
    settings = dict(label_layout="slots", pad_to_multiple_of=LENGTH, max_span_targets=4, return_sequence_offsets=True)
    padded = DataCollatorForSpanMasking(tiny_tokenizer, sequence_offsets_count=40, **settings)
    unpadded = DataCollatorForSpanMasking(tiny_tokenizer, **settings)
    torch._dynamo.reset()
    model = make_model(len(tiny_tokenizer), tiny_tokenizer.pad_token_id, attn_implementation="varlen_fa2")
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(model, backend=counter, fullgraph=True)
    counts = set()
    for k in range(3):
        examples = [{**row, "example_index": 2 * k + i} for i, row in enumerate(rows[2 * k : 2 * k + 2])]
        batch, reference = padded(examples), unpadded(examples)
        offsets, count = reference["sequence_offsets"], len(reference["sequence_offsets"])
        counts.add(count)
        assert batch["sequence_offsets"].shape == (40,) and torch.equal(batch["sequence_offsets"][:count], offsets)
        assert (batch["sequence_offsets"][count:] == offsets[-1]).all()
        reference_output, reference_gradients = step(model, reference)
        for forward in (None, compiled):
            output, gradients = step(model, batch, forward)
            for field in ("loss", "mlm_loss", "sbo_loss"):
                torch.testing.assert_close(getattr(output, field), getattr(reference_output, field), msg=field)
            for name, gradient in reference_gradients.items():
                torch.testing.assert_close(gradients[name], gradient, rtol=1e-4, atol=1e-6, msg=name)
    assert len(counts) > 1, counts  # the batches hold different numbers of documents
    assert counter.frame_count == 1
    assert flash_reference_kernels.calls["forward"] > 0
    with pytest.raises(ValueError, match="more than the 3 that sequence_offsets_count=4 leaves room for"):
        DataCollatorForSpanMasking(tiny_tokenizer, sequence_offsets_count=4, **settings)(examples)
