"""A new pretraining objective is one module: it registers itself and its recipe, and the run, the recipe lookup
and the trainer's evaluation take it without any other file changing."""

import importlib
import json
import sys
import textwrap

import pytest
from conftest import TINY_TEXT

from spanroberta.objectives import OBJECTIVES, get_objective
from spanroberta.objectives.base import register_objective
from spanroberta.objectives.masked_lm import MaskedLanguageModeling
from spanroberta.objectives.recipes import RECIPES, Recipe, get_recipe
from spanroberta.pretraining.arguments import (
    PretrainingArguments,
    PretrainingDataArguments,
    PretrainingModelArguments,
)
from spanroberta.pretraining.run import run_pretraining
from spanroberta.pretraining.specification import resolve_recipe, specify_run

# A masked LM that also counts the batches it evaluates: a metric no shipped objective reports.
TOY_OBJECTIVE = '''
import torch

from spanroberta.objectives.base import register_objective
from spanroberta.objectives.masked_lm import MaskedLanguageModeling
from spanroberta.objectives.recipes import Recipe


@register_objective("toy_masked_lm", {"toy": Recipe("word masking that counts its evaluation batches", masking="word")})
class ToyMaskedLanguageModeling(MaskedLanguageModeling):
    def evaluation_sums(self, config, device):
        return {**super().evaluation_sums(config, device), "toy_batches": torch.zeros((), device=device)}

    def accumulate(self, sums, inputs, outputs, config):
        super().accumulate(sums, inputs, outputs, config)
        sums["toy_batches"] += 1

    def evaluation_metrics(self, totals, model):
        return {**super().evaluation_metrics(totals, model), "toy_batches": totals["toy_batches"]}
'''


@pytest.fixture
def registries():
    """The objectives and recipes as they were before the test, restored after it."""
    saved = dict(OBJECTIVES), dict(RECIPES)
    yield
    for registry, before in zip((OBJECTIVES, RECIPES), saved):
        registry.clear()
        registry.update(before)


@pytest.fixture
def toy_module(tmp_path, monkeypatch, registries):
    (tmp_path / "toy_objective.py").write_text(TOY_OBJECTIVE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("toy_objective")
    sys.modules.pop("toy_objective", None)


def test_the_shipped_objectives_registered_their_recipes():
    assert {name: recipe.objective for name, recipe in RECIPES.items()} == {
        "spanbert": "masked_lm",
        "roberta": "masked_lm",
        "bert": "masked_lm",
        "albert": "masked_lm",
        "electra": "replaced_token_detection",
    }


@pytest.mark.slow
def test_a_toy_objective_in_one_file_trains_and_evaluates_through_the_run(toy_module, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join(TINY_TEXT[i : i + 3]) for i in range(0, len(TINY_TEXT), 3)) + "\n")
    model_args = PretrainingModelArguments(
        model_size="tiny",
        config_overrides="num_hidden_layers=1,hidden_size=32,num_attention_heads=2,intermediate_size=64",
        tokenizer_vocab_size=400,
    )
    data_args = PretrainingDataArguments(
        train_file=str(corpus), recipe="toy", max_seq_length=32, validation_split_percentage=20
    )
    recipe = resolve_recipe(model_args, data_args)
    assert (get_recipe("toy").objective, recipe.objective, recipe.masking) == ("toy_masked_lm", "toy_masked_lm", "word")
    assert isinstance(get_objective(recipe.objective), toy_module.ToyMaskedLanguageModeling)

    output_dir = tmp_path / "run"
    training_args = PretrainingArguments(
        output_dir=str(output_dir), max_steps=2, per_device_train_batch_size=4, per_device_eval_batch_size=4,
        report_to="none", disable_tqdm=True, save_strategy="no", use_cpu=True, dataloader_pin_memory=False,
    )  # fmt: skip
    run_pretraining(specify_run((model_args, data_args, training_args), given=None))
    results = json.loads((output_dir / "eval_results.json").read_text())
    assert results["eval_toy_batches"] >= 1 and "eval_mlm_accuracy" in results


def test_two_objectives_or_recipes_of_one_name_are_refused(registries):
    with pytest.raises(ValueError, match="Two objectives are named 'masked_lm'"):
        register_objective("masked_lm", {})(MaskedLanguageModeling)
    with pytest.raises(ValueError, match="Two recipes are named 'spanbert'"):
        register_objective("another", {"spanbert": Recipe("span masking again")})(MaskedLanguageModeling)
    with pytest.raises(ValueError, match="Unknown objective 'none_such'; registered objectives: masked_lm"):
        get_objective("none_such")
