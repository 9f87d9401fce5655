"""Shared fixtures. Tests never touch the network: tiny models are built from configs and tiny
tokenizers are trained on the spot."""

import json
import os
import re

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_DISABLED", "true")

import sys
from pathlib import Path

import pytest

from spanroberta.data.demo_corpus import TINY_CORPUS

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"
# The run_*.py scripts at the top level and the benchmarks package are imported from PROJECT_ROOT, which pytest puts
# first on the import path (`pythonpath` in pyproject.toml).

def pytest_collection_modifyitems(config, items):
    """Tests marked `cuda` skip where there is no CUDA GPU."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("cuda"):
            item.add_marker(skip)


# The tiny corpus the tests train tokenizers and models on (shared with the reliability benchmarks' tiny runs).
TINY_TEXT = TINY_CORPUS


def _rank_of_two(target, rank, rendezvous, args, results):
    import torch

    torch.distributed.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=2)
    target(rank, *args, results)
    torch.distributed.destroy_process_group()


def run_two_ranks(target, rendezvous: Path, *args) -> tuple[list, list]:
    """Runs `target(rank, *args, results)` as ranks 0 and 1 of a gloo group (meeting through the file
    `rendezvous`), each a forked process (there is no CUDA here to fork, and spawn would import the tests again),
    waits for both, 5 minutes at most, and returns their exit codes and what they put in the queue `results`."""
    import torch

    context = torch.multiprocessing.get_context("fork")
    results = context.SimpleQueue()
    processes = [context.Process(target=_rank_of_two, args=(target, rank, rendezvous, args, results))
                 for rank in range(2)]  # fmt: skip
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=300)
    put = []
    while not results.empty():
        put.append(results.get())
    return [process.exitcode for process in processes], put


def tiny_span_config(**overrides):
    """A SpanRobertaConfig small enough for unit tests (2 layers, hidden 32, no dropout); `overrides` win."""
    from spanroberta import SpanRobertaConfig

    settings = dict(
        vocab_size=120,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_span_targets=4,
        sbo_position_embedding_size=8,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return SpanRobertaConfig(**{**settings, **overrides})


def run_without_spanroberta(code: str, cwd: Path) -> list[str]:
    """Runs `code` in a Python process where spanroberta cannot be imported (a Hub user's, loading a checkpoint
    with trust_remote_code=True); returns its output lines. The test fails with the process's error if it fails."""
    import subprocess
    import textwrap

    guard = textwrap.dedent(
        """
        import sys
        sys.modules["spanroberta"] = None  # as if spanroberta were not installed
        try:
            import spanroberta
        except ImportError:
            pass
        else:
            raise SystemExit("spanroberta is importable")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", guard + textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.splitlines()


def assert_weights_kept(saved: dict, original: dict, atol: float) -> None:
    """Each weight of `original` is in `saved`, within `atol`. One that a padded vocabulary grew (its first
    dimension rounded up to a multiple of 64 ids) is compared on its original rows."""
    import torch

    assert saved.keys() == original.keys()
    for name, tensor in original.items():
        kept = saved[name]
        if kept.shape != tensor.shape:
            assert kept.shape[1:] == tensor.shape[1:] and kept.shape[0] % 64 == 0 < kept.shape[0] - tensor.shape[0]
            kept = kept[: tensor.shape[0]]
        torch.testing.assert_close(kept, tensor, rtol=0, atol=atol, msg=name)


def drop_weight(checkpoint: Path, name: str) -> None:
    """Removes one tensor from a saved checkpoint's model.safetensors, in place: a checkpoint with a weight lost."""
    from safetensors.torch import load_file, save_file

    weights = load_file(str(checkpoint / "model.safetensors"))
    del weights[name]
    save_file(weights, str(checkpoint / "model.safetensors"), metadata={"format": "pt"})


def parsed(task, args: list[str]) -> tuple[tuple, set[str]]:
    """A fine-tuning task's arguments for `args` (presets applied) and the flags given, as its script parses them."""
    run = task.parse(args)
    return run.arguments, run.given


# The Trainer's own numbers beside a task's (its evaluation loss and timing; MNLI's mismatched set's with _mm).
TRAINER_KEYS = re.compile(r"(loss|runtime|samples_per_second|steps_per_second|model_preparation_time)(_mm)?")


def checked_results(output_dir: Path, report) -> dict:
    """A fine-tuning's `{split}_results.json` (eval_results.json, gap_results.json), whose keys are exactly what
    its task declares (`report`, a spanroberta.finetuning `Report`: its scores, and the other numbers it writes),
    besides the Trainer's loss and timing, each after `{split}_` (and the Trainer's epoch): the ablation's tables
    and the task benchmark read the files by that declaration."""
    results = json.loads((Path(output_dir) / report.results_file).read_text())
    prefix = f"{report.split}_"
    assert results and all(key.startswith(prefix) or key == "epoch" for key in results), sorted(results)
    names = {key.removeprefix(prefix) for key in results if key != "epoch"}
    written = {name for name in names if not TRAINER_KEYS.fullmatch(name)}
    named_by_data = {name for name in written if name not in report.keys and report.declares(name)}
    assert written == {*report.keys, *report.other, *named_by_data}, (sorted(written), report)
    return results


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data; the calling test is skipped when it is absent (users do not have it)."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not available: {path}")
    return path


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """A byte-level BPE with RoBERTa's special tokens, trained on a few sentences (vocabulary of 400)."""
    from spanroberta.data.tokenizer import train_byte_level_bpe

    return train_byte_level_bpe(TINY_TEXT, vocab_size=400, min_frequency=1, show_progress=False)


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tiny_tokenizer, tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny_tokenizer")
    tiny_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def spanroberta_checkpoint(tiny_tokenizer, tmp_path_factory):
    """A tiny pretraining checkpoint with its tokenizer, as run_pretraining.py would leave it."""
    from spanroberta import SpanRobertaConfig, SpanRobertaForPreTraining

    path = tmp_path_factory.mktemp("spanroberta_checkpoint")
    config = SpanRobertaConfig(
        vocab_size=len(tiny_tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, pad_token_id=tiny_tokenizer.pad_token_id, bos_token_id=0, eos_token_id=2,
        max_span_targets=4, sbo_position_embedding_size=8,
    )
    SpanRobertaForPreTraining(config).save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


# --------------------------------------------------------------------------------------------------------
# The prediction slots of DataCollatorForSpanMasking, written out plainly for the tests

SLOT_FIELDS = ("labels", "sbo_left_positions", "sbo_right_positions", "sbo_relative_positions")


def to_slots(batch, num_slots=None):
    """A batch whose `labels` and SBO fields are dense ([batch, length], -100 where there is no target), laid
    out in prediction slots as the collator does: `mlm_positions` the masked positions in increasing order, each
    field read there, -100 in unused slots. `num_slots` defaults to the most targets of a row."""
    import torch

    masked = batch["labels"] != -100
    positions = [row.nonzero().flatten().tolist() for row in masked]
    num_slots = num_slots or max(len(p) for p in positions)
    slots = torch.full((len(positions), num_slots), -100, dtype=torch.long)
    for row, row_positions in enumerate(positions):
        slots[row, : len(row_positions)] = torch.tensor(row_positions, dtype=torch.long)
    result = {name: value for name, value in batch.items() if name not in SLOT_FIELDS}
    result["mlm_positions"] = slots
    for name in SLOT_FIELDS:
        if name in batch:
            values = batch[name].gather(1, slots.clamp(min=0))
            result[name] = values.masked_fill(slots == -100, -100)
    return result


def dense(batch, name="labels"):
    """A slot field of a collated batch back in [batch, length] form, -100 where no slot holds a target."""
    import torch

    length = batch["input_ids"].shape[1]
    out = torch.full((batch["mlm_positions"].shape[0], length), -100, dtype=torch.long)
    used = batch["mlm_positions"] != -100
    rows = torch.arange(out.shape[0])[:, None].expand_as(used)
    out[rows[used], batch["mlm_positions"][used]] = batch[name][used]
    return out


def packed_batch(rows, length, vocab, seed=0, first_position_id=2, pad_id=1, max_span_targets=3, num_slots=None):
    """A hand-made packed pretraining batch, and where its sequences are.

    `rows` lists the sequence lengths of each row (each at least 4): every sequence is `<s> ... </s>` (ids 0 and
    2, random ids in [5, vocab) between), its position ids restart at `first_position_id`, and the row is padded
    with `pad_id` to `length`, the padding continuing the last sequence's positions (the collator's layout). Each
    sequence has a masked span of 1-4 tokens (two spans when long enough), strictly inside it, so its SBO
    boundaries are tokens of its own sequence. Returns (batch in prediction slots, [(row, start, length)])."""
    import torch

    generator = torch.Generator().manual_seed(seed)

    def draw(low, high):  # an int in [low, high]
        return int(torch.randint(low, high + 1, (1,), generator=generator))

    batch_size = len(rows)
    input_ids = torch.full((batch_size, length), pad_id, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    position_ids = torch.zeros_like(input_ids)
    labels, left, right, relative = (torch.full_like(input_ids, -100) for _ in range(4))
    sequences = []
    for row, lengths in enumerate(rows):
        assert sum(lengths) <= length and min(lengths) >= 4
        start = 0
        for n in lengths:
            ids = torch.randint(5, vocab, (n,), generator=generator)
            ids[0], ids[-1] = 0, 2
            input_ids[row, start : start + n] = ids
            attention_mask[row, start : start + n] = 1
            position_ids[row, start : start + n] = torch.arange(first_position_id, first_position_id + n)
            spans = [(1, n - 2)] if n < 10 else [(1, n // 2 - 2), (n // 2, n - 2)]  # token ranges for the spans
            for low, high in spans:
                span_start = draw(low, high)
                span_end = min(span_start + draw(1, 4), high + 1)  # exclusive; the token at span_end is real
                for position in range(span_start, span_end):
                    labels[row, start + position] = ids[position]
                    if position - span_start < max_span_targets:
                        left[row, start + position] = start + span_start - 1
                        right[row, start + position] = start + span_end
                        relative[row, start + position] = position - span_start
                input_ids[row, start + span_start : start + span_end] = 4  # <mask>
            sequences.append((row, start, n))
            start += n
        last = position_ids[row, start - 1]
        position_ids[row, start:] = torch.arange(last + 1, last + 1 + length - start)
    batch = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": position_ids,
        "labels": labels,
        "sbo_left_positions": left,
        "sbo_right_positions": right,
        "sbo_relative_positions": relative,
    }
    return to_slots(batch, num_slots), sequences


def unpacked_batch(batch, sequences, pad_id=1):
    """The sequences of a packed batch (`packed_batch`, or a collated one) one per row, with the same inputs and the
    same targets, padded to the longest; no position_ids, so RoBERTa numbers each row from padding_idx + 1."""
    import torch

    length = max(n for _, _, n in sequences)
    fields = {"labels": dense(batch)}
    if "sbo_relative_positions" in batch:
        for name in ("sbo_left_positions", "sbo_right_positions", "sbo_relative_positions"):
            fields[name] = dense(batch, name)
    out = {"input_ids": torch.full((len(sequences), length), pad_id, dtype=torch.long)}
    out["attention_mask"] = torch.zeros_like(out["input_ids"])
    for name in fields:
        out[name] = torch.full_like(out["input_ids"], -100)
    for i, (row, start, n) in enumerate(sequences):
        out["input_ids"][i, :n] = batch["input_ids"][row, start : start + n]
        out["attention_mask"][i, :n] = 1
        for name, value in fields.items():
            piece = value[row, start : start + n]
            if name in ("sbo_left_positions", "sbo_right_positions"):
                inside = piece != -100
                assert bool(((piece[inside] >= start) & (piece[inside] < start + n)).all())
                piece = torch.where(inside, piece - start, piece)
            out[name][i, :n] = piece
    return to_slots(out)


# Packed rows through one attention call: varlen_fa2 against a reference under the block-diagonal mask


@pytest.fixture
def flash_reference_kernels():
    """CPU reference kernels of torch's flash attention ops (tests/flash_reference.py), registered for the test: on
    CPU, varlen_fa2 then runs packed rows through the flash ops, as on CUDA, instead of falling back to the mask."""
    from flash_reference import ReferenceFlashKernels

    kernels = ReferenceFlashKernels()
    yield kernels
    kernels.close()


@pytest.fixture(autouse=True)
def _flash_path_for_varlen_fa2(request):
    """A CPU test parametrized with attn_implementation="varlen_fa2" runs its flash path (through the reference
    kernels), not the block-diagonal mask it falls back to where torch has no flash kernel, and fails if its packed
    rows (every case but `packed=False`) took the mask."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is None or callspec.params.get("attn_implementation") != "varlen_fa2":
        yield
        return
    if request.node.get_closest_marker("cuda"):
        yield
        return
    kernels = request.getfixturevalue("flash_reference_kernels")
    yield
    if callspec.params.get("packed", True):  # packed rows went through the flash ops, not the mask they fall back to
        assert kernels.calls["forward"] > 0, "varlen_fa2 took the mask path"

# Sequence lengths per row (rows of 24 tokens).
VARLEN_CASES = {
    "rows with padding tails": [[7, 5, 9], [12, 8], [4, 6, 5, 4]],
    "one document a row": [[24], [20], [17]],
    "one row": [[10, 14]],
}


def packed_attention_case(rows, length, vocab, dtype=None, device="cpu", head_dim=16, heads=2):
    """Packed positions and padding of `rows` (see `packed_batch`), and random query, key, value [batch, heads,
    length, head_dim] that require gradients."""
    import torch

    batch, _ = packed_batch(rows, length, vocab, seed=len(rows))
    generator = torch.Generator().manual_seed(0)
    states = [
        torch.randn(len(rows), heads, length, head_dim, generator=generator)
        .to(device, dtype or torch.float32)
        .requires_grad_()
        for _ in range(3)
    ]
    return batch["position_ids"].to(device), batch["attention_mask"].to(device), states


def _attention_module(training):
    import torch

    module = torch.nn.Module().train(training)
    module.is_causal = False
    return module


def varlen_output(states, position_ids, attention_mask, dropout=0.0):
    """varlen_fa2's output [batch, length, heads, head_dim] on packed rows (through the flash ops: on CPU, the
    `flash_reference_kernels` fixture's)."""
    from spanroberta.models.packed_attention import packed_sequence_offsets, varlen_fa2_attention_forward

    offsets = packed_sequence_offsets(position_ids, attention_mask)
    module = _attention_module(dropout > 0)
    length = position_ids.shape[-1]
    return varlen_fa2_attention_forward(
        module, *states, None, dropout=dropout, cu_seq_lens_q=offsets, max_length_q=length
    )[0]


def masked_output(states, position_ids, attention_mask, reference="sdpa"):
    """`reference`'s output ("sdpa" or "eager") under the block-diagonal mask of packed rows, written out."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.models.roberta.modeling_roberta import eager_attention_forward

    from spanroberta.models.packed_attention import packed_sequence_ids

    sequence_ids, real = packed_sequence_ids(position_ids), attention_mask.bool()
    mask = sequence_ids[:, None, :, None] == sequence_ids[:, None, None, :]
    mask = mask & (real[:, None, None, :] | ~real[:, None, :, None])
    dtype = states[0].dtype
    if reference == "eager":
        mask = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, torch.finfo(dtype).min)
    attention = eager_attention_forward if reference == "eager" else sdpa_attention_forward
    return attention(_attention_module(False), *states, mask, dropout=0.0, scaling=states[0].shape[-1] ** -0.5)[0]


def outputs_and_gradients(output, states, real):
    """(output at real tokens, zero elsewhere; the gradients of `states` for a fixed random upstream gradient at
    real tokens)."""
    import torch

    real = real[..., None, None]
    upstream = torch.randn(output.shape, generator=torch.Generator().manual_seed(1)).to(output.device, output.dtype)
    gradients = torch.autograd.grad((output * upstream * real).sum(), states)
    return output * real, gradients


def refusal_before_data_is_read(monkeypatch, tmp_path, tiny_tokenizer_dir, flags: list[str]) -> str:
    """The one-paragraph refusal run_pretraining.py ends with for `flags` (a tiny run on CPU whose train file does
    not exist), checked to come before the data loader is reached and before anything is written."""
    import run_pretraining

    def data_read(*args, **kwargs):
        raise AssertionError("the data was read before the run's settings were checked")

    monkeypatch.setattr("spanroberta.pretraining.run.load_pretraining_data", data_read)
    with pytest.raises(SystemExit) as exit_info:
        run_pretraining.main([
            "--output_dir", str(tmp_path / "out"), "--tokenizer_name", str(tiny_tokenizer_dir),
            "--train_file", str(tmp_path / "absent.txt"), "--model_size", "tiny", "--max_steps", "1",
            "--report_to", "none", "--use_cpu", "true", *flags,
        ])  # fmt: skip
    message = exit_info.value.code
    assert "\n" not in message
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    return message

