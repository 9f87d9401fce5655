"""The conventions spanroberta's models share with transformers, stated once: the label that no loss reads, and how
a model's loss meets the Trainer's `num_items_in_batch`. The rest of the package imports them from here.

This file ships with every checkpoint beside the model files that import it; it imports nothing from spanroberta.
"""

from __future__ import annotations

from typing import Any, TypeVar

# The target that no loss reads (unused prediction slots, unmasked tokens, unlabelled sequences): transformers'
# and PyTorch's `ignore_index` default.
IGNORE_INDEX = -100

# The loss-kwargs policy. transformers 5's Trainer reads `model.accepts_loss_kwargs` (unset, it guesses yes from a
# forward that takes **kwargs) to decide who normalises the loss under gradient accumulation:
# - True: the model divides its loss by `num_items_in_batch`, the Trainer's count of targets in the whole
#   accumulated batch, and the Trainer does not divide it again by the accumulation steps. spanroberta's
#   pretraining models do this, with their own counts per head (`loss_normalisers`), which makes accumulation exact.
# - False: the model returns a plain mean over its batch and the Trainer divides it by the accumulation steps.
#   The task heads are transformers' own forwards, which take **kwargs only to pass them down; without declaring
#   False, their mean would be inflated by the accumulation factor.
_Target = TypeVar("_Target")


def normalises_loss_by_item_counts(target: _Target) -> _Target:
    """Declares (on a model class or instance) that its loss is divided by the Trainer's `num_items_in_batch`."""
    target.accepts_loss_kwargs = True
    return target


def returns_mean_loss(target: _Target) -> _Target:
    """Declares (on a model class or instance) that its loss is a plain mean over its batch, which the Trainer
    divides by the gradient-accumulation steps."""
    target.accepts_loss_kwargs = False
    return target


def register_for_auto_classes(auto_map: dict[str, str], namespace: dict[str, Any]) -> None:
    """Marks the config and every head that `auto_map` names (Auto class -> "module.Class", each class found in
    `namespace`, the modelling file's globals) as custom code: save_pretrained then copies their files next to the
    weights, and the saved config's auto_map points each Auto class at them."""
    for auto_class, class_path in auto_map.items():
        namespace[class_path.rpartition(".")[2]].register_for_auto_class(auto_class)


__all__ = ["IGNORE_INDEX", "normalises_loss_by_item_counts", "register_for_auto_classes", "returns_mean_loss"]
