"""Checkpoints saved by earlier versions of spanroberta keep loading: tiny checkpoints saved with the code of
commit c153b42 (tests/fixtures/make_legacy_checkpoints.py), whose weight names predate the current models/ layout,
load in today's classes with every weight and give the outputs they gave when saved."""

from pathlib import Path

import pytest
import torch

import spanroberta  # noqa: F401  (registers the Auto classes)
from transformers import AutoModelForPreTraining

FIXTURES = Path(__file__).parent / "fixtures" / "legacy_checkpoints"


@pytest.mark.parametrize("name", ["spanroberta", "spanalbert"])
def test_checkpoint_saved_before_the_redesign_loads_with_the_same_outputs(name):
    model, info = AutoModelForPreTraining.from_pretrained(FIXTURES / name, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert type(model).__module__.startswith("spanroberta."), "loaded the checkpoint's copied code, not today's"
    expected = torch.load(FIXTURES / name / "expected_outputs.pt")
    model.eval()
    with torch.no_grad():
        outputs = model(**expected["batch"])
    for key in ("loss", "mlm_logits", "sbo_logits", "sentence_logits"):
        torch.testing.assert_close(getattr(outputs, key), expected[key], rtol=1e-5, atol=1e-5, msg=key)
