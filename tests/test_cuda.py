"""Checks that need a CUDA GPU (`pytest -m cuda tests`); each skips without one. Heads are 64 wide, as in the
models the recipes build (and at least 16, which flex attention's and the fused kernels' CUDA code need).

- varlen_sdpa on packed rows equals sdpa under the block-diagonal mask, in fp32 and bf16, with gradients, and
  applies attention dropout;
- a compiled pretraining model does not recompile from one packed batch to the next;
- a few bf16 steps of each recipe run through run_pretraining.py on the GPU, with finite losses that fall (the
  corpus is a few sentences repeated, so every step sees the same text: falling is learning what it has seen).
"""

import json

import pytest
import run_pretraining
import torch
from conftest import (
    TINY_TEXT,
    VARLEN_CASES,
    masked_output,
    outputs_and_gradients,
    packed_attention_case,
    packed_batch,
    tiny_span_config,
    varlen_output,
)

from spanroberta import SpanRobertaForPreTraining

pytestmark = pytest.mark.cuda

LENGTH, VOCAB, HEAD_DIM = 24, 90, 64


@pytest.mark.parametrize("rows", VARLEN_CASES.values(), ids=VARLEN_CASES.keys())
def test_varlen_attention_equals_the_block_diagonal_mask_in_fp32(rows):
    position_ids, attention_mask, states = packed_attention_case(rows, LENGTH, VOCAB, device="cuda", head_dim=HEAD_DIM)
    real = attention_mask.bool()
    varlen, varlen_gradients = outputs_and_gradients(varlen_output(states, position_ids, attention_mask), states, real)
    masked, masked_gradients = outputs_and_gradients(masked_output(states, position_ids, attention_mask), states, real)
    torch.testing.assert_close(varlen, masked, rtol=1e-4, atol=1e-4)
    for name, got, want in zip("qkv", varlen_gradients, masked_gradients):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, msg=f"gradient of {name}")


@pytest.mark.parametrize("rows", VARLEN_CASES.values(), ids=VARLEN_CASES.keys())
def test_varlen_attention_in_bf16_is_within_bf16_rounding_of_fp32(rows):
    """bf16 (8 bits of mantissa, a relative step of 2^-8 = 0.004) against fp32 attention of the same rounded
    inputs: within 2e-2 for the outputs and 5e-2 for the gradients, a few bf16 steps on values of order 1."""
    position_ids, attention_mask, states = packed_attention_case(
        rows, LENGTH, VOCAB, dtype=torch.bfloat16, device="cuda", head_dim=HEAD_DIM
    )
    states_fp32 = [state.detach().float().requires_grad_() for state in states]
    real = attention_mask.bool()
    varlen, varlen_gradients = outputs_and_gradients(varlen_output(states, position_ids, attention_mask), states, real)
    masked, masked_gradients = outputs_and_gradients(
        masked_output(states_fp32, position_ids, attention_mask), states_fp32, real
    )
    torch.testing.assert_close(varlen.float(), masked, rtol=2e-2, atol=2e-2)
    for name, got, want in zip("qkv", varlen_gradients, masked_gradients):
        torch.testing.assert_close(got.float(), want, rtol=5e-2, atol=5e-2, msg=f"gradient of {name}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_varlen_attention_applies_dropout_on_cuda(dtype):
    rows = VARLEN_CASES["rows with padding tails"]
    position_ids, attention_mask, states = packed_attention_case(
        rows, LENGTH, VOCAB, dtype=dtype, device="cuda", head_dim=HEAD_DIM
    )
    real = attention_mask.bool()
    dropped, gradients = outputs_and_gradients(
        varlen_output(states, position_ids, attention_mask, dropout=0.1), states, real
    )
    plain = varlen_output(states, position_ids, attention_mask) * real[..., None, None]
    assert torch.isfinite(dropped).all() and not torch.allclose(dropped, plain)
    assert all(torch.isfinite(gradient).all() for gradient in gradients)


@pytest.mark.parametrize("attention", ["sdpa", "varlen_sdpa"])
def test_a_compiled_model_does_not_recompile_from_one_packed_batch_to_the_next(attention):
    """Packed batches of one shape whose rows hold different numbers of sequences, under the default attention
    (sdpa's block-diagonal mask) and under varlen_sdpa: after the first batches (the second may recompile once,
    marking the number of sequences dynamic), no batch compiles anything new."""
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    config = tiny_span_config(vocab_size=VOCAB, hidden_size=128, num_attention_heads=2, intermediate_size=256,
                              max_span_targets=3, attn_implementation=attention,
                              attention_probs_dropout_prob=0.1)  # fmt: skip
    model = SpanRobertaForPreTraining(config).cuda().train()
    torch._dynamo.reset()
    compiled = torch.compile(model)
    layouts = [[[20, 30, 14], [64], [10, 20, 30]], [[32, 32], [8, 16, 24, 16], [40, 20]],
               [[16, 16, 16, 16], [50], [30, 30]], [[12, 40], [20, 20, 20], [60]],
               [[64], [10, 10, 10, 30], [25, 35]], [[44, 20], [32, 30], [16, 16, 30]]]  # fmt: skip
    batches = [packed_batch(rows, 64, VOCAB, seed=seed, num_slots=40)[0] for seed, rows in enumerate(layouts)]

    def step(batch):
        loss = compiled(**{name: value.cuda() for name, value in batch.items()}).loss
        loss.backward()
        assert torch.isfinite(loss)

    for batch in batches[:3]:
        step(batch)
    graphs = counters["stats"]["unique_graphs"]
    for batch in batches[3:]:
        step(batch)
    assert counters["stats"]["unique_graphs"] == graphs


def write_corpus(path):
    """TINY_TEXT as documents of four sentences, separated by blank lines (doc-sentences reads documents)."""
    documents = ["\n".join(TINY_TEXT[start : start + 4]) for start in range(0, len(TINY_TEXT), 4)]
    path.write_text("\n\n".join(documents) + "\n")
    return path


@pytest.mark.parametrize("recipe", ["spanbert", "roberta", "albert", "electra"])
def test_a_few_bf16_steps_of_each_recipe_lower_its_loss(recipe, tmp_path, tiny_tokenizer_dir, capsys):
    """The tiny size (heads of 64), the recipe's own attention dropout, 20 steps at a high learning rate."""
    output_dir = tmp_path / "run"
    run_pretraining.main([
        "--train_file", str(write_corpus(tmp_path / "corpus.txt")), "--output_dir", str(output_dir),
        "--tokenizer_name", str(tiny_tokenizer_dir), "--recipe", recipe, "--model_size", "tiny",
        "--max_seq_length", "64", "--per_device_train_batch_size", "8", "--gradient_accumulation_steps", "1",
        "--max_steps", "20", "--learning_rate", "1e-3", "--warmup_steps", "2", "--logging_steps", "1",
        "--bf16", "true", "--save_strategy", "no", "--validation_split_percentage", "0", "--report_to", "none",
        "--disable_tqdm", "true", "--seed", "1", "--dataloader_pin_memory", "false",
    ])  # fmt: skip
    settings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Run settings:")]
    assert settings[0].endswith("attn_implementation sdpa (default)")  # packed rows (spanbert's) included
    state = json.loads((output_dir / "trainer_state.json").read_text())
    losses = [entry["loss"] for entry in state["log_history"] if "loss" in entry]
    assert len(losses) == 20 and all(torch.isfinite(torch.tensor(losses)))
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5
