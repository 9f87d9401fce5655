"""Packed rows: several sequences per row, position ids restarting at each (transformers' padding-free convention).

The model computes each packed sequence exactly as it would alone, under every attention implementation that takes
packed rows (sdpa, eager and varlen_fa2; flex_attention on CUDA, refused on CPU; flash attention through
flattening); the
collator never lets a span, or the boundaries of its SBO targets, cross from one packed sequence to another; and
`pack_sequences` keeps blocks whole and rows full."""

import math
import random
import re

import pytest
import torch
from conftest import (
    VARLEN_CASES,
    dense,
    masked_output,
    outputs_and_gradients,
    packed_attention_case,
    packed_batch,
    shared_data,
    tiny_span_config,
    unpacked_batch,
    varlen_output,
)
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.modeling_flash_attention_utils import prepare_fa_kwargs_from_position_ids
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from spanroberta import SpanRobertaConfig, SpanRobertaForPreTraining, SpanRobertaModel
from spanroberta.data import masking
from spanroberta.data.collator import DataCollatorForSpanMasking
from spanroberta.data.formats import block_builder, pack_sequences, tokenize_texts
from spanroberta.data.tokenizer import train_byte_level_bpe
from spanroberta.models import packed_attention

VOCAB = 90
ROWS = [[7, 5, 9], [12, 8], [4, 6, 5, 4]]  # sequence lengths; rows of 24 tokens, two with trailing padding
LENGTH = 24


def tiny_config(**overrides) -> SpanRobertaConfig:
    settings = dict(vocab_size=VOCAB, num_attention_heads=2, intermediate_size=48, max_span_targets=3)
    return tiny_span_config(**{**settings, **overrides})


def random_rows(batch_size: int, length: int, seed: int) -> list[list[int]]:
    """Sequence lengths (4 or more) for `batch_size` rows of `length`: the first row full, the others ending at a
    random point (mid-block too: no multiple of 128 is aimed at), every row at least half full."""
    rng = random.Random(seed)
    rows = []
    for row in range(batch_size):
        end = length if row == 0 else rng.randint(length // 2, length)
        lengths = []
        while end - sum(lengths) >= 4:
            lengths.append(min(rng.randint(4, max(4, length // 3)), end - sum(lengths)))
        rows.append(lengths)
    return rows


def assert_each_sequence_has_its_hidden_states_alone(encoder, reference, rows, length, device="cpu"):
    """Every sequence of every row of the packed batch gets the last hidden states `reference` (same weights,
    sdpa) gives it alone, to 1e-4 in fp32."""
    batch, sequences = packed_batch(rows, length, VOCAB, seed=len(rows) * 1000 + length)
    batch = {name: tensor.to(device) for name, tensor in batch.items()}
    with torch.no_grad():
        packed = encoder(
            batch["input_ids"], attention_mask=batch["attention_mask"], position_ids=batch["position_ids"]
        ).last_hidden_state
        assert torch.isfinite(packed[batch["attention_mask"].bool()]).all()
        for row, start, n in sequences:
            alone = reference(batch["input_ids"][row : row + 1, start : start + n]).last_hidden_state[0]
            torch.testing.assert_close(
                packed[row, start : start + n], alone, rtol=1e-4, atol=1e-4, msg=f"row {row} of {len(rows)}"
            )


def encoders(attn_implementation: str, device: str = "cpu"):
    """A tiny encoder under `attn_implementation`, and the same weights under sdpa (the sequences alone)."""
    torch.manual_seed(0)
    config = tiny_config(attn_implementation=attn_implementation, max_position_embeddings=300)
    encoder = SpanRobertaModel(config).eval().to(device)
    assert encoder.config._attn_implementation == attn_implementation
    reference = SpanRobertaModel(tiny_config(attn_implementation="sdpa", max_position_embeddings=300)).eval()
    reference.load_state_dict(encoder.state_dict())
    return encoder, reference.to(device)


@pytest.mark.parametrize("length", [24, 128, 200, 256], ids=lambda n: f"rows of {n}")
@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager", "varlen_fa2"])
@pytest.mark.slow
def test_a_packed_sequence_gets_the_hidden_states_it_has_alone(attn_implementation, length):
    """On CPU, batches of 1 to 5 rows, rows a multiple of 128 long or not, ending at their end or mid-block."""
    encoder, reference = encoders(attn_implementation)
    for batch_size in range(1, 6):
        rows = random_rows(batch_size, length, seed=batch_size)
        assert_each_sequence_has_its_hidden_states_alone(encoder, reference, rows, length)


def test_flex_attention_refuses_packed_rows_on_cpu():
    """torch's CPU kernel for flex attention gives wrong attention, or NaN, for some batch shapes (rows of 24 tokens,
    even under a mask that reads no tensor): packed rows are refused, naming the backends to use."""
    encoder, _ = encoders("flex_attention")
    batch, _ = packed_batch(ROWS, LENGTH, VOCAB, seed=1)
    with pytest.raises(ValueError, match="On CPU use sdpa or eager") as error:
        encoder(batch["input_ids"], attention_mask=batch["attention_mask"], position_ids=batch["position_ids"])
    assert "\n" not in str(error.value)


@pytest.mark.cuda
@pytest.mark.parametrize("length", [24, 200])
@pytest.mark.parametrize("attn_implementation", ["flex_attention", "varlen_fa2"])
def test_on_cuda_a_packed_sequence_gets_the_hidden_states_it_has_alone(attn_implementation, length):
    """flex_attention packs rows on CUDA only; the CUDA kernels need heads of 16 or more (these are 16)."""
    encoder, reference = encoders(attn_implementation, device="cuda")
    for batch_size in range(1, 6):
        rows = random_rows(batch_size, length, seed=batch_size)
        assert_each_sequence_has_its_hidden_states_alone(encoder, reference, rows, length, device="cuda")


# The flash kernel's path (varlen_fa2, through the reference kernels on CPU) against sdpa and eager under the
# block-diagonal mask, one attention call


def varlen_and_masked(rows, reference):
    """(output, gradients) of varlen_fa2 on packed rows of LENGTH and of `reference` ("sdpa" or "eager") under
    the block-diagonal mask, at real tokens only, heads of 16."""
    position_ids, attention_mask, states = packed_attention_case(rows, LENGTH, VOCAB)
    real = attention_mask.bool()
    varlen = outputs_and_gradients(varlen_output(states, position_ids, attention_mask), states, real)
    masked = outputs_and_gradients(masked_output(states, position_ids, attention_mask, reference), states, real)
    return varlen, masked


@pytest.mark.parametrize("rows", VARLEN_CASES.values(), ids=VARLEN_CASES.keys())
@pytest.mark.parametrize("reference", ["sdpa", "eager"])
def test_varlen_attention_equals_the_block_diagonal_mask_with_gradients(flash_reference_kernels, rows, reference):
    (varlen, varlen_gradients), (masked, masked_gradients) = varlen_and_masked(rows, reference)
    assert flash_reference_kernels.calls == {"forward": 1, "backward": 1}  # the flash ops ran, not a fallback
    torch.testing.assert_close(varlen, masked, rtol=1e-5, atol=1e-5)
    for name, got, want in zip("qkv", varlen_gradients, masked_gradients):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=f"gradient of {name}")


@pytest.mark.parametrize("rows", VARLEN_CASES.values(), ids=VARLEN_CASES.keys())
def test_varlen_dropout_is_the_masked_reference_under_the_same_dropout_mask(flash_reference_kernels, rows):
    """With attention dropout, output and gradients equal attention written out under the block-diagonal mask with
    the dropout mask the forward drew: the backward replays that mask from the forward's rng_state (the autograd
    node saves it), rather than drawing a new one."""
    from spanroberta.models.packed_attention import packed_sequence_offsets

    dropout = 0.3
    position_ids, attention_mask, states = packed_attention_case(rows, LENGTH, VOCAB)
    real = attention_mask.bool()
    torch.manual_seed(5)
    varlen, varlen_gradients = outputs_and_gradients(
        varlen_output(states, position_ids, attention_mask, dropout=dropout), states, real
    )
    offsets = packed_sequence_offsets(position_ids, attention_mask)
    masks = flash_reference_kernels.keep_masks(flash_reference_kernels.last_seed, offsets, states[0].shape[1], dropout)
    # The reference: per flattened sequence, softmax then the forward's dropout mask, written out with autograd.
    query, key, value = (state.transpose(1, 2).reshape(-1, *state.shape[1::2]) for state in states)
    bounds = offsets.tolist()
    pieces = []
    for index, (start, end) in enumerate(zip(bounds[:-1], bounds[1:])):
        q, k, v = (x[start:end].transpose(0, 1) for x in (query, key, value))
        weights = (q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5).softmax(-1) * masks[index]
        pieces.append((weights @ v).transpose(0, 1))
    reference = torch.cat(pieces).view(varlen.shape)
    reference, reference_gradients = outputs_and_gradients(reference, states, real)
    torch.testing.assert_close(varlen, reference, rtol=1e-5, atol=1e-5)
    for name, got, want in zip("qkv", varlen_gradients, reference_gradients):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=f"gradient of {name}")
    assert flash_reference_kernels.calls == {"forward": 1, "backward": 1}


def test_varlen_attention_applies_dropout(flash_reference_kernels):
    """Training with attention dropout changes the output (the kernel applies it, rather than ignoring it)."""
    position_ids, attention_mask, states = packed_attention_case(VARLEN_CASES["rows with padding tails"], LENGTH, VOCAB)
    dropped, gradients = outputs_and_gradients(
        varlen_output(states, position_ids, attention_mask, dropout=0.5), states, attention_mask.bool()
    )
    plain = varlen_output(states, position_ids, attention_mask) * attention_mask.bool()[..., None, None]
    assert not torch.allclose(dropped, plain) and torch.isfinite(dropped).all()
    assert all(torch.isfinite(gradient).all() for gradient in gradients)


def test_without_a_flash_kernel_varlen_fa2_takes_the_block_diagonal_mask():
    """On CPU torch has no flash kernel: packed rows under varlen_fa2 get sdpa's mask, and the encoder's output is
    sdpa's, exactly; the refusal says why."""
    from spanroberta.models.packed_attention import packed_rows_path

    encoder, reference = encoders("varlen_fa2")
    assert packed_rows_path(encoder.config, "cpu", torch.float32) == (
        "mask", "torch has no flash attention kernel on cpu"
    )
    batch, _ = packed_batch(ROWS, LENGTH, VOCAB, seed=1)
    inputs = {name: batch[name] for name in ("input_ids", "attention_mask", "position_ids")}
    with torch.no_grad():
        torch.testing.assert_close(encoder(**inputs).last_hidden_state, reference(**inputs).last_hidden_state)


def test_the_collators_offsets_start_each_document_and_each_padding_tail(tiny_tokenizer):
    """The int32 offsets the collator makes on the host (`return_sequence_offsets`): in the flattened batch, each
    document's start, each row's padding tail as a sequence of its own, then the batch's end."""
    collator = DataCollatorForSpanMasking(tiny_tokenizer, first_position_id=2, return_sequence_offsets=True)
    generator = torch.Generator().manual_seed(0)
    for rows in VARLEN_CASES.values():
        examples = [{"input_ids": torch.randint(5, 50, (sum(lengths),), generator=generator).tolist(),
                     "sequence_lengths": lengths} for lengths in rows]  # fmt: skip
        batch = collator(examples)
        length = batch["input_ids"].shape[1]
        want = []
        for row, lengths in enumerate(rows):
            starts = [row * length + sum(lengths[:i]) for i in range(len(lengths))]
            want += starts + ([row * length + sum(lengths)] if sum(lengths) < length else [])
        assert batch["sequence_offsets"].dtype == torch.int32
        assert batch["sequence_offsets"].tolist() == [*want, len(rows) * length], rows
    assert "sequence_offsets" not in DataCollatorForSpanMasking(tiny_tokenizer, first_position_id=2)(examples)


@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager", "varlen_fa2"])
@pytest.mark.parametrize("efficient", [True, False], ids=["efficient", "reference"])
def test_packed_pretraining_equals_the_sequences_unpacked(attn_implementation, efficient):
    """Losses, logits at every target and gradients of a packed batch are those of its sequences one per row,
    with the same masks."""
    torch.manual_seed(0)
    model = SpanRobertaForPreTraining(
        tiny_config(attn_implementation=attn_implementation, efficient_pretraining=efficient)
    ).train()
    packed, sequences = packed_batch(ROWS, LENGTH, VOCAB, seed=2, num_slots=8)
    unpacked = unpacked_batch(packed, sequences)
    assert int((unpacked["labels"] != -100).sum()) == int((packed["labels"] != -100).sum()) > 0
    assert int((unpacked["sbo_relative_positions"] != -100).sum()) == int(
        (packed["sbo_relative_positions"] != -100).sum()
    ) > 0
    if attn_implementation == "varlen_fa2":  # the offsets the collator gives with the batch
        from spanroberta.models.packed_attention import packed_sequence_offsets

        packed["sequence_offsets"] = packed_sequence_offsets(packed["position_ids"], packed["attention_mask"])

    outputs, gradients = [], []
    for batch in (packed, unpacked):
        model.zero_grad(set_to_none=True)
        output = model(**batch)
        output.loss.backward()
        outputs.append(output)
        gradients.append({name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None})
    (packed_output, unpacked_output), (packed_gradients, unpacked_gradients) = outputs, gradients

    for field in ("loss", "mlm_loss", "sbo_loss"):
        torch.testing.assert_close(getattr(packed_output, field), getattr(unpacked_output, field), msg=field)
    # Slots are in increasing position order, so the targets come in the same order, sequence by sequence.
    for field, name in (("mlm_logits", "labels"), ("sbo_logits", "sbo_relative_positions")):
        got = getattr(packed_output, field)[packed[name] != -100]
        want = getattr(unpacked_output, field)[unpacked[name] != -100]
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, msg=field)
    assert packed_gradients.keys() == unpacked_gradients.keys()
    for name, gradient in unpacked_gradients.items():
        torch.testing.assert_close(packed_gradients[name], gradient, rtol=1e-4, atol=1e-5, msg=name)


def test_pretraining_model_reads_the_packed_hidden_states():
    torch.manual_seed(0)
    model = SpanRobertaForPreTraining(tiny_config()).eval()
    batch, sequences = packed_batch(ROWS, LENGTH, VOCAB, seed=4)
    hidden = model(**batch, output_hidden_states=True).hidden_states[-1]
    for row, start, n in sequences:
        alone = model.roberta(batch["input_ids"][row : row + 1, start : start + n]).last_hidden_state[0]
        torch.testing.assert_close(hidden[row, start : start + n], alone, rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------------------------------------
# Flash attention's path: the batch flattened into one row, sequences told apart by their restarting positions


def varlen_attention(module, query, key, value, attention_mask, position_ids=None, **kwargs):
    """What flash attention's varlen kernel computes from `position_ids` alone (transformers'
    `prepare_fa_kwargs_from_position_ids` gives its cu_seqlens), emulated with SDPA: flash attention is not
    installable here. Without position_ids (a sequence alone), plain SDPA."""
    if position_ids is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    assert attention_mask is None and query.shape[0] == 1
    (cu_seqlens, _), _ = prepare_fa_kwargs_from_position_ids(position_ids)
    length = query.shape[2]
    starts = torch.zeros(length, dtype=torch.long)
    starts[cu_seqlens[1:-1].long()] = 1
    sequence = starts.cumsum(0)
    mask = (sequence[:, None] == sequence[None, :])[None, None]
    return sdpa_attention_forward(module, query, key, value, mask, **kwargs)


@pytest.mark.parametrize("implementation", ["flash_attention_2", "flash_attention_3", "kernels-community/flash-attn"])
def test_the_packed_mask_refuses_flash_attention_which_takes_no_mask(implementation):
    """ALBERT's and ELECTRA's encoders isolate packed rows by a mask only; RoBERTa's flattens the batch instead."""
    from types import SimpleNamespace

    encoder = SimpleNamespace(config=SimpleNamespace(_attn_implementation=implementation))
    assert packed_attention.is_flash_attention(encoder.config) and not packed_attention.takes_dense_mask(encoder.config)
    with pytest.raises(ValueError, match="use sdpa, eager, varlen_fa2 or flex_attention"):
        packed_attention.packed_attention_inputs(encoder, None, torch.arange(4)[None])


@pytest.fixture
def flattening(monkeypatch):
    """SpanRobertaModel under sdpa taking flash attention's path: flattened rows, varlen attention."""
    calls = []

    def attention(*args, **kwargs):
        if kwargs.get("position_ids") is not None:
            calls.append(args[1].shape)
        return varlen_attention(*args, **kwargs)

    monkeypatch.setattr(SpanRobertaModel, "flattens_packed_rows", lambda self: True)
    monkeypatch.setitem(ALL_ATTENTION_FUNCTIONS._global_mapping, "sdpa", attention)
    return calls


@pytest.mark.parametrize("trailing_padding", [False, True], ids=["full rows", "padded rows"])
def test_the_flattened_path_gives_each_sequence_its_hidden_states_alone(flattening, trailing_padding):
    torch.manual_seed(0)
    rows = ROWS if trailing_padding else [[7, 8, 9], [12, 12], [4, 6, 5, 9]]
    batch, sequences = packed_batch(rows, LENGTH, VOCAB, seed=5)
    assert bool((batch["attention_mask"] == 0).any()) == trailing_padding
    encoder = SpanRobertaModel(tiny_config(), add_pooling_layer=True).eval()
    packed = encoder(batch["input_ids"], attention_mask=batch["attention_mask"], position_ids=batch["position_ids"])
    assert flattening and all(shape[0] == 1 and shape[2] == 3 * LENGTH for shape in flattening)  # [1, B*L]
    assert packed.last_hidden_state.shape == (3, LENGTH, 32) and packed.pooler_output.shape == (3, 32)
    flattening.clear()
    with torch.no_grad():
        for row, start, n in sequences:
            alone = encoder(batch["input_ids"][row : row + 1, start : start + n]).last_hidden_state[0]
            torch.testing.assert_close(packed.last_hidden_state[row, start : start + n], alone, rtol=1e-4, atol=1e-4)


def test_the_flattened_path_keeps_hidden_states_and_tuples(flattening):
    batch, _ = packed_batch(ROWS, LENGTH, VOCAB, seed=5)
    encoder = SpanRobertaModel(tiny_config(), add_pooling_layer=True).eval()
    inputs = {"attention_mask": batch["attention_mask"], "position_ids": batch["position_ids"]}
    with torch.no_grad():
        output = encoder(batch["input_ids"], output_hidden_states=True, **inputs)
        as_tuple = encoder(batch["input_ids"], return_dict=False, **inputs)
    assert flattening
    assert len(output.hidden_states) == 3 and all(h.shape == (3, LENGTH, 32) for h in output.hidden_states)
    torch.testing.assert_close(output.hidden_states[-1], output.last_hidden_state)
    torch.testing.assert_close(as_tuple[0], output.last_hidden_state)


def test_the_flattened_path_trains_as_the_unpacked_batch(flattening):
    torch.manual_seed(0)
    model = SpanRobertaForPreTraining(tiny_config(efficient_pretraining=False)).train()
    packed, sequences = packed_batch([[7, 8, 9], [12, 12], [4, 6, 5, 9]], LENGTH, VOCAB, seed=6, num_slots=8)
    unpacked = unpacked_batch(packed, sequences)
    packed_output = model(**packed)
    assert flattening
    packed_output.loss.backward()
    packed_gradients = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    unpacked_output = model(**unpacked)
    unpacked_output.loss.backward()
    for field in ("loss", "mlm_loss", "sbo_loss"):
        torch.testing.assert_close(getattr(packed_output, field), getattr(unpacked_output, field), msg=field)
    for name, p in model.named_parameters():
        torch.testing.assert_close(packed_gradients[name], p.grad, rtol=1e-4, atol=1e-5, msg=name)


# --------------------------------------------------------------------------------------------------------
# The collator on packed rows of real text


def documents_of(path, limit=None):
    documents = [d for d in re.split(r"\n\s*\n", path.read_text()) if d.strip()]
    return documents[:limit]


@pytest.fixture(scope="module")
def wiki_packed():
    """WikiText paragraphs as packed doc-sentences rows of 128 tokens, with a byte-level BPE trained on them."""
    documents = documents_of(shared_data("corpus", "wiki.valid.raw"), 600)
    tokenizer = train_byte_level_bpe(documents, vocab_size=2000, show_progress=False)
    rows = block_builder(tokenizer, "doc-sentences", 128).blocks(tokenize_texts(documents, tokenizer), 0)
    assert all("sequence_lengths" in row for row in rows)
    # Long paragraphs fill rows alone; keep the rows that pack several sequences, and a few that do not.
    several = [row for row in rows if len(row["sequence_lengths"]) > 1]
    assert len(several) >= 120
    return tokenizer, several[:120] + [row for row in rows if len(row["sequence_lengths"]) == 1][:8]


def sequence_ids_of(rows, length):
    ids = torch.full((len(rows), length), -1, dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row["input_ids"])] = torch.repeat_interleave(
            torch.arange(len(row["sequence_lengths"])), torch.tensor(row["sequence_lengths"])
        )
    return ids


@pytest.mark.parametrize("masking", ["span", "word", "token"])
@pytest.mark.slow
def test_masks_on_packed_rows_stay_within_their_sequence(wiki_packed, masking):
    tokenizer, rows = wiki_packed
    collator = DataCollatorForSpanMasking(
        tokenizer, label_layout="slots", masking=masking, seed=3, pad_to_multiple_of=128
    )
    examples = [{**row, "example_index": i, "mask_epoch": 0} for i, row in enumerate(rows)]
    batch = collator(examples)
    length = batch["input_ids"].shape[1]
    assert length == 128
    sequence_ids = sequence_ids_of(rows, length)
    real = batch["attention_mask"].bool()
    assert torch.equal(real, sequence_ids >= 0)

    # position ids restart at padding_idx + 1 at each sequence; padding is a sequence of its own
    first = tokenizer.pad_token_id + 1
    for i, row in enumerate(rows):
        expected = [first + p for n in row["sequence_lengths"] for p in range(n)]
        expected += [first + p for p in range(length - len(expected))]
        assert batch["position_ids"][i].tolist() == expected

    # slots: exactly the masked positions, in increasing order, labels their original ids
    original = torch.full((len(rows), length), tokenizer.pad_token_id, dtype=torch.long)
    for i, row in enumerate(rows):
        original[i, : len(row["input_ids"])] = torch.tensor(row["input_ids"])
    num_slots = math.ceil(0.15 * length)
    assert batch["mlm_positions"].shape == batch["labels"].shape == (len(rows), num_slots)
    labels = dense(batch)
    masked = labels != -100
    for i in range(len(rows)):
        slots = batch["mlm_positions"][i]
        used = slots != -100
        assert torch.equal(used, torch.arange(num_slots) < used.sum())
        assert slots[used].tolist() == masked[i].nonzero().flatten().tolist()
        assert torch.equal(batch["labels"][i][used], original[i][slots[used]])
        assert bool((batch["labels"][i][~used] == -100).all())
    assert not bool((masked & ~real).any())
    special = torch.isin(original, torch.tensor(tokenizer.all_special_ids))
    assert not bool((masked & special).any())

    # a run of masked tokens (a span) never crosses from one packed sequence into the next
    previous = torch.nn.functional.pad(masked[:, :-1], (1, 0))
    crossing = masked & previous & (sequence_ids != torch.nn.functional.pad(sequence_ids[:, :-1], (1, 0)))
    if masking != "token":
        assert not bool(crossing.any())

    # the mask rate on packed rows of real text: 15% of the maskable tokens
    rate = masked.sum() / (real & ~special).sum()
    assert 0.14 < float(rate) < 0.16, float(rate)

    if masking == "span":
        is_target = batch["sbo_relative_positions"] != -100
        assert bool(is_target.any())
        rows_index = torch.arange(len(rows))[:, None].expand_as(is_target)[is_target]
        own = sequence_ids[rows_index, batch["mlm_positions"][is_target]]
        for name in ("sbo_left_positions", "sbo_right_positions"):
            boundary = batch[name][is_target]
            assert bool((sequence_ids[rows_index, boundary] == own).all()), name
            assert not bool(masked[rows_index, boundary].any()), name
        # and a masked span touching its sequence's <s> or </s> still gets its targets from inside
        assert bool((batch["sbo_left_positions"][is_target] < batch["mlm_positions"][is_target]).all())
        assert bool((batch["sbo_right_positions"][is_target] > batch["mlm_positions"][is_target]).all())


@pytest.mark.parametrize("words_per_sequence", [1, 3])
def test_spans_are_cut_at_the_end_of_their_packed_sequence(tiny_tokenizer, words_per_sequence):
    """Rows of short sequences of whole words, with no special token between them: only the sequence boundaries
    keep spans apart. A span (of up to 10 words) is cut at the end of its sequence, so none is longer than one."""
    sentence = " the quick brown fox jumps over the lazy dog near the river bank"
    word_ids = [tiny_tokenizer(" " + w, add_special_tokens=False)["input_ids"] for w in sentence.split()]
    rows, documents = [], []
    for index in range(32):
        ids, document = [], []
        for k in range(48 // words_per_sequence):
            words = [word_ids[(index + k * words_per_sequence + j) % len(word_ids)] for j in range(words_per_sequence)]
            sequence = [token for word in words for token in word]
            ids += sequence
            document += [k] * len(sequence)
        rows.append(ids)
        documents.append(document)
    length = max(len(ids) for ids in rows)
    input_ids = torch.full((32, length), tiny_tokenizer.pad_token_id)
    document_ids = torch.zeros(32, length, dtype=torch.long)
    for i, (ids, document) in enumerate(zip(rows, documents)):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        document_ids[i, : len(ids)] = torch.tensor(document)
        document_ids[i, len(ids) :] = document[-1]
    maskable = input_ids != tiny_tokenizer.pad_token_id
    starts = masking.word_starts(input_ids, maskable, masking.word_start_table(tiny_tokenizer))
    keys = masking.row_keys(0, torch.zeros(32), torch.arange(32))
    packed = masking.span_mask(starts, maskable, keys, 0.3, document_ids=document_ids)
    assert int(packed.span_lengths.max()) == words_per_sequence
    alone = masking.span_mask(starts, maskable, keys, 0.3)
    assert int(alone.span_lengths.max()) > words_per_sequence  # unpacked, the same rows get longer spans
    # the budget is met all the same
    assert abs(int(packed.masked.sum()) - int(alone.masked.sum())) <= 0.05 * int(alone.masked.sum())

    # SBO boundaries of the collated batch: never in another sequence (a run touching a sequence boundary has no
    # boundary token of its own sequence on that side, and is no SBO target)
    examples = []
    for index, (ids, document) in enumerate(zip(rows, documents)):
        lengths = torch.bincount(torch.tensor(document)).tolist()
        examples.append({"input_ids": ids, "sequence_lengths": lengths, "example_index": index})
    batch = DataCollatorForSpanMasking(tiny_tokenizer, label_layout="slots", mlm_probability=0.3)(examples)
    is_target = batch["sbo_relative_positions"] != -100
    # one-word sequences: every span is its whole sequence, so no SBO target has both boundaries in it
    assert bool(is_target.any()) == (words_per_sequence > 1)
    row_index = torch.arange(32)[:, None].expand_as(is_target)[is_target]
    own = document_ids[row_index, batch["mlm_positions"][is_target]]
    for name in ("sbo_left_positions", "sbo_right_positions"):
        assert bool((document_ids[row_index, batch[name][is_target]] == own).all()), name


def test_a_packed_collated_batch_trains_as_its_sequences_unpacked(wiki_packed):
    tokenizer, rows = wiki_packed
    rows = rows[:4]
    collator = DataCollatorForSpanMasking(tokenizer, label_layout="slots", seed=1, max_span_targets=3)
    batch = collator([{**row, "example_index": i} for i, row in enumerate(rows)])
    sequences = []
    for i, row in enumerate(rows):
        start = 0
        for n in row["sequence_lengths"]:
            sequences.append((i, start, n))
            start += n
    unpacked = unpacked_batch(batch, sequences, pad_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    model = SpanRobertaForPreTraining(
        tiny_config(vocab_size=len(tokenizer), max_position_embeddings=130, pad_token_id=tokenizer.pad_token_id)
    ).eval()
    with torch.no_grad():
        packed_output, unpacked_output = model(**batch), model(**unpacked)
    for field in ("loss", "mlm_loss", "sbo_loss"):
        torch.testing.assert_close(getattr(packed_output, field), getattr(unpacked_output, field), msg=field)


# --------------------------------------------------------------------------------------------------------
# pack_sequences


def test_pack_sequences_keeps_blocks_whole_and_rows_within_the_length():
    rng = random.Random(0)
    next_id, blocks = 0, []
    for _ in range(300):
        n = rng.choice([rng.randint(1, 20), rng.randint(20, 64)])
        blocks.append({"input_ids": list(range(next_id, next_id + n)), "token_type_ids": [7] * n})
        next_id += n
    rows = pack_sequences(blocks, 64)
    found = []
    for row in rows:
        assert len(row["input_ids"]) == len(row["token_type_ids"]) == sum(row["sequence_lengths"]) <= 64
        start = 0
        for n in row["sequence_lengths"]:
            found.append(row["input_ids"][start : start + n])
            start += n
        firsts = [row["input_ids"][sum(row["sequence_lengths"][:i])] for i in range(len(row["sequence_lengths"]))]
        assert firsts == sorted(firsts)  # corpus order within a row
    assert sorted(found) == sorted(block["input_ids"] for block in blocks)
    total = sum(len(block["input_ids"]) for block in blocks)
    assert len(rows) <= math.ceil(total / 64) + 2  # best-fit decreasing: close to the bound
    assert pack_sequences([], 64) == []


@pytest.mark.slow
def test_packed_doc_sentences_rows_are_almost_all_real_tokens():
    """Reuters bodies (many short documents) at 512 tokens: best-fit decreasing fills rows to >= 95%."""
    documents = documents_of(shared_data("corpus", "reuters_bodies.txt"), 2000)
    tokenizer = train_byte_level_bpe(documents[:500], vocab_size=2000, show_progress=False)
    tokenized = tokenize_texts(documents, tokenizer)
    builder = block_builder(tokenizer, "doc-sentences", 512)
    rows = builder.blocks(tokenized, 0)
    unpacked = block_builder(tokenizer, "doc-sentences", 512, pack_documents=False).blocks(tokenized, 0)
    real = sum(len(row["input_ids"]) for row in rows)
    assert real == sum(len(block["input_ids"]) for block in unpacked)
    assert all(len(row["input_ids"]) <= 512 for row in rows)
    assert real / (512 * len(rows)) >= 0.95, real / (512 * len(rows))
    # without packing, padding to 512 would waste most of the row
    assert real / (512 * len(unpacked)) < 0.6


# --------------------------------------------------------------------------------------------------------
# varlen_fa2 in stock encoders (continued BERT and DistilBERT checkpoints), through attn_implementation


@pytest.mark.parametrize("family", ["bert", "distilbert"])
def test_varlen_fa2_keeps_packed_sequences_apart_in_stock_encoders(flash_reference_kernels, family):
    from transformers import BertConfig, BertModel, DistilBertConfig, DistilBertModel

    torch.manual_seed(0)
    if family == "bert":
        config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=64, attn_implementation="varlen_fa2")  # fmt: skip
        encoder = BertModel(config).eval()
    else:
        config = DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=1, n_heads=2, hidden_dim=64,
                                  attn_implementation="varlen_fa2")  # fmt: skip
        encoder = DistilBertModel(config).eval()
    first, second = torch.randint(5, VOCAB, (1, 7)), torch.randint(5, VOCAB, (1, 5))
    position_ids = torch.cat([torch.arange(7), torch.arange(5)])[None]
    packed = packed_attention.packed_attention_inputs(encoder, None, position_ids)
    assert packed["attention_mask"] is None and packed["cu_seq_lens_q"].tolist() == [0, 7, 12]
    with torch.no_grad():
        together = encoder(torch.cat([first, second], 1), position_ids=position_ids, **packed).last_hidden_state
        alone = torch.cat([encoder(first).last_hidden_state, encoder(second).last_hidden_state], 1)
    torch.testing.assert_close(together, alone, rtol=1e-5, atol=1e-5)
