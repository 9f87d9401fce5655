"""A NaN loss stops the run naming the step, or skips the step's update; NaN weights are never saved. On CPU and, where
there is one, on a CUDA GPU (marked `cuda`: the GPU check runs them), where the fused AdamW's CUDA kernel skips the
updates through its `found_inf` input."""

import logging

import pytest
import run_pretraining
import torch
from conftest import TINY_TEXT
from safetensors.torch import load_file

from spanroberta import SpanRobertaConfig, SpanRobertaForPreTraining
from spanroberta.data.collator import DataCollatorForSpanMasking
from spanroberta.data.masking_schedule import DynamicMaskingDataset
from spanroberta.pretraining.arguments import PretrainingArguments
from spanroberta.pretraining.trainer import PretrainingTrainer, TrainingDivergedError

POISONED_STEP = 3
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]


def make_trainer(tokenizer, output_dir, policy, optim="adamw_torch_fused", every=1, device="cpu"):
    config = SpanRobertaConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        pad_token_id=tokenizer.pad_token_id, max_span_targets=4, sbo_position_embedding_size=8,
    )
    torch.manual_seed(0)
    args = PretrainingArguments(
        output_dir=str(output_dir), max_steps=5, per_device_train_batch_size=4, save_steps=every,
        logging_steps=every, learning_rate=1e-3, warmup_steps=0, report_to=[], disable_tqdm=True,
        use_cpu=device == "cpu",
        on_nonfinite_loss=policy, optim=optim,
    )
    blocks = [tokenizer(text)["input_ids"] for text in TINY_TEXT[:16]]
    trainer = PretrainingTrainer(
        model=SpanRobertaForPreTraining(config),
        args=args,
        train_dataset=DynamicMaskingDataset(blocks),
        data_collator=DataCollatorForSpanMasking(tokenizer, label_layout="slots", max_span_targets=4),
    )

    def poison(module, inputs, output):
        # The forward passes of POISONED_STEP return a NaN loss, as a diverging run would.
        if module.training and trainer.state.global_step == POISONED_STEP - 1:
            output.loss = output.loss * float("nan")
        return output

    trainer.model.register_forward_hook(poison)
    return trainer


def weights(checkpoint):
    return load_file(checkpoint / "model.safetensors")


def assert_weights_are_those_of(trainer, checkpoint):
    saved = weights(checkpoint)
    for name, parameter in trainer.model.state_dict().items():
        if name in saved:
            torch.testing.assert_close(parameter.cpu(), saved[name], rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("optim", [pytest.param("adamw_torch_fused", marks=pytest.mark.slow), "adamw_torch"])
def test_a_nan_loss_stops_the_run_naming_the_step_before_anything_is_applied_or_saved(
    tiny_tokenizer, tmp_path, optim, device
):
    """On the device under the fused AdamW, on the host under the plain one: the same stop."""
    trainer = make_trainer(tiny_tokenizer, tmp_path, "stop", optim, device=device)
    with pytest.raises(TrainingDivergedError, match=f"NaN or infinite at step {POISONED_STEP}"):
        trainer.train()
    assert trainer.model.device.type == device
    assert trainer.nonfinite_guard._on_device == (optim == "adamw_torch_fused")
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    # the poisoned step's update was not applied: the weights are still those of checkpoint-2
    assert_weights_are_those_of(trainer, tmp_path / "checkpoint-2")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.slow
def test_on_the_device_the_stop_waits_for_a_step_that_logs_or_saves_and_every_update_since_is_skipped(
    tiny_tokenizer, tmp_path, device
):
    """Logging and saving every 2 steps: the NaN of step 3 is read at step 4, which stops the run naming step 3;
    the weights are still those of checkpoint-2 (the updates of steps 3 and 4 were skipped), and no checkpoint-4."""
    trainer = make_trainer(tiny_tokenizer, tmp_path, "stop", every=2, device=device)
    with pytest.raises(TrainingDivergedError, match=f"at step {POISONED_STEP} .*stopped at step {POISONED_STEP + 1}"):
        trainer.train()
    assert trainer.nonfinite_guard._on_device
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-2"]
    assert_weights_are_those_of(trainer, tmp_path / "checkpoint-2")
    assert trainer.args.logging_nan_inf_filter is False  # the stop needs no filter, which would wait every step


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.slow
def test_skipping_a_nan_step_leaves_the_weights_unchanged_and_trains_on(tiny_tokenizer, tmp_path, caplog, device):
    trainer = make_trainer(tiny_tokenizer, tmp_path, "skip", device=device)
    with caplog.at_level(logging.WARNING, logger="spanroberta.pretraining.trainer"):
        trainer.train()
    assert f"Step {POISONED_STEP}: the loss is NaN" in caplog.text
    before, skipped, after = (weights(tmp_path / f"checkpoint-{step}") for step in (2, 3, 4))
    for name in before:
        torch.testing.assert_close(skipped[name], before[name], rtol=0, atol=0)
    assert any(not torch.equal(after[name], skipped[name]) for name in before)
    assert all(torch.isfinite(tensor).all() for tensor in weights(tmp_path / "checkpoint-5").values())


def test_weights_holding_nan_are_never_saved(tiny_tokenizer, tmp_path):
    trainer = make_trainer(tiny_tokenizer, tmp_path, "stop")
    with torch.no_grad():
        trainer.model.lm_head.dense.weight[0, 0] = float("inf")
    with pytest.raises(TrainingDivergedError, match="NaN or infinite values"):
        trainer.save_model(str(tmp_path / "final"))
    assert not (tmp_path / "final" / "model.safetensors").exists()


@pytest.mark.slow
def test_the_script_reports_a_diverged_run_in_one_paragraph(tiny_tokenizer_dir, tmp_path, monkeypatch):
    forward = SpanRobertaForPreTraining.forward
    calls = []

    def diverging_forward(self, *args, **kwargs):
        output = forward(self, *args, **kwargs)
        calls.append(1)
        if self.training and len(calls) >= 2:
            output.loss = output.loss * float("inf")
        return output

    monkeypatch.setattr(SpanRobertaForPreTraining, "forward", diverging_forward)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(TINY_TEXT[:40]) + "\n")
    with pytest.raises(SystemExit) as exit_info:
        run_pretraining.main([
            "--train_file", str(corpus), "--tokenizer_name", str(tiny_tokenizer_dir),
            "--output_dir", str(tmp_path / "out"),
            "--config_overrides", "num_hidden_layers=1,hidden_size=32,num_attention_heads=2,intermediate_size=64",
            "--model_size", "tiny", "--max_seq_length", "32", "--per_device_train_batch_size", "4",
            "--max_steps", "4", "--save_steps", "1", "--validation_split_percentage", "0", "--report_to", "none",
        ])
    message = str(exit_info.value.code)
    assert message.startswith("run_pretraining.py: error:") and "at step 2" in message and "\n" not in message
    assert not (tmp_path / "out" / "checkpoint-2").exists() and not (tmp_path / "out" / "model.safetensors").exists()
