"""Pretraining objectives, one module each: `masked_lm` (MLM + SBO + NSP/SOP) and `replaced_token_detection`
(ELECTRA). Each registers itself and the recipes it trains (`base.register_objective`); importing the package
imports every module of it, so a new objective is one new module here. The run resolves the recipe with the
user's overrides (`pretraining.specification`), has it checked here (`check_recipe`) and asks the objective
(`get_objective`) for everything that differs between them."""

from __future__ import annotations

import importlib
import pkgutil

from ..errors import UserInputError
from .base import OBJECTIVES, ObjectiveSettings, PretrainingObjective, ResolvedRecipe, get_objective
from .recipes import PAIR_FORMATS

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")


def check_recipe(recipe: ResolvedRecipe, settings: ObjectiveSettings) -> None:
    """Refuses (UserInputError) a resolved recipe that cannot train: its objective's own checks against the model
    flags, then its sentence objective against its input format."""
    get_objective(recipe.objective).check(recipe, settings)
    _check_input_format(recipe)


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
    "check_recipe",
    "ObjectiveSettings",
    "PretrainingObjective",
    "ResolvedRecipe",
    "get_objective",
]
