"""Shared fixtures. Tests never touch the network: tiny models are built from configs and tiny
tokenizers are trained on the spot."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_DISABLED", "true")

import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"
# The run_*.py scripts live at the top level; tests import them and call their main().
sys.path.insert(0, str(PROJECT_ROOT))

TINY_TEXT = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Researchers pretrain encoders with span masking and a span boundary objective.",
    "A span of contiguous words is masked, and its boundary tokens predict every token inside it.",
    "Dynamic masking draws a fresh mask each time a sequence is seen during training.",
    "Question answering models predict the start and the end of an answer in a passage.",
    "The committee approved the budget on Tuesday after a long debate about taxes.",
    "In 1998 the museum opened a new wing dedicated to modern sculpture and painting.",
    "Students read the passage carefully and chose the best option for each question.",
] * 20


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
