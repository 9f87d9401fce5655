"""Pretraining objectives, one module each: `masked_lm` (MLM + SBO + NSP/SOP) and `replaced_token_detection`
(ELECTRA). Each registers itself and the recipes it trains (`base.register_objective`); importing the package
imports every module of it, so a new objective is one new module here. The run resolves the recipe with the
user's overrides (`resolve_recipe`) and asks the objective (`get_objective`) for everything that differs between
them."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Protocol

from ..errors import UserInputError
from .base import OBJECTIVES, ObjectiveArguments, PretrainingObjective, ResolvedRecipe, get_objective
from .recipes import PAIR_FORMATS, get_recipe

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")


class RecipeModelArguments(ObjectiveArguments, Protocol):
    """The model flags `resolve_recipe` reads: those that override the recipe's heads, and the objective's own."""

    sbo: bool | None
    sentence_objective: str | None


class RecipeDataArguments(Protocol):
    """The data flags `resolve_recipe` reads: the recipe, and those that override its masking and input format."""

    recipe: str
    masking: str | None
    input_format: str | None
    static_masking: bool | None


def resolve_recipe(model_args: RecipeModelArguments, data_args: RecipeDataArguments) -> ResolvedRecipe:
    """The recipe of --recipe with the flags that override it; checks that the combination can train."""
    recipe = get_recipe(data_args.recipe)
    resolved = ResolvedRecipe(
        masking=data_args.masking or recipe.masking,
        sbo=recipe.sbo if model_args.sbo is None else model_args.sbo,
        sentence_objective=model_args.sentence_objective or recipe.sentence_objective,
        input_format=data_args.input_format or recipe.input_format,
        static_masking=recipe.static_masking if data_args.static_masking is None else data_args.static_masking,
        # --embedding_size or --cross_layer_sharing ask for an ALBERT encoder under any recipe.
        encoder=(
            "albert"
            if model_args.embedding_size is not None or model_args.cross_layer_sharing is not None
            else recipe.encoder
        ),
        tokenizer=recipe.tokenizer,
        objective=recipe.objective,
        mask_replace_prob=recipe.mask_replace_prob,
        random_replace_prob=recipe.random_replace_prob,
    )
    get_objective(resolved.objective).check(resolved, model_args)
    _check_input_format(resolved)
    return resolved


def _check_input_format(recipe: ResolvedRecipe) -> None:
    if recipe.sentence_objective != "none" and recipe.input_format not in PAIR_FORMATS:
        raise UserInputError(
            f"--sentence_objective {recipe.sentence_objective} needs a pair input format "
            f"({', '.join(PAIR_FORMATS)}), not {recipe.input_format}."
        )
    if recipe.sentence_objective == "none" and recipe.input_format in PAIR_FORMATS:
        # Half of NSP's pairs join unrelated documents: without a head that learns from the label, that is noise.
        raise UserInputError(
            f"--input_format {recipe.input_format} builds pairs for a sentence-level objective (RoBERTa "
            "section 4.2); add --sentence_objective nsp or sop, or use full-sentences or doc-sentences."
        )


__all__ = [
    "OBJECTIVES",
    "ObjectiveArguments",
    "PretrainingObjective",
    "RecipeDataArguments",
    "RecipeModelArguments",
    "ResolvedRecipe",
    "get_objective",
    "resolve_recipe",
]
