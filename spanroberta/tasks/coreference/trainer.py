"""The Trainer of run_coref.py: one learning rate for the encoder and a larger one for the task layers (Joshi et al.
2019, "BERT for Coreference Resolution: Baselines and Analysis"), and an evaluation that predicts each document's
clusters and scores them with the CoNLL metrics; and the presets of Joshi et al.'s released settings."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch
from spanroberta.runs.trainer import RunTrainer

from spanroberta.tasks.coreference.scoring import CorefEvaluator
from spanroberta.tasks.coreference.data import CorefDocument, DocumentCollator, Span, predicted_clusters
from spanroberta.runs.optimizers import move_to_learning_rate

# Joshi et al.'s released settings (`experiments.conf` of their coreference code) as run_coref.py's flags:
# max_segment_len, max_training_sentences, bert_learning_rate and task_learning_rate. Both train 20 epochs with
# 3000-unit scorers; `spanbert_base` is the one released for SpanBERT-base (Joshi et al. 2020, section 4.2).
COREF_PRESETS = {
    "bert_base": {"max_segment_length": 128, "max_train_segments": 11, "learning_rate": 1e-5,
                  "task_learning_rate": 2e-4},
    "spanbert_base": {"max_segment_length": 384, "max_train_segments": 3, "learning_rate": 2e-5,
                      "task_learning_rate": 1e-4},
}  # fmt: skip
DEFAULT_COREF_PRESET = "spanbert_base"

# The model's inputs, as the collator gives them; the gold mentions are left out when predicting.
_INPUTS = ("input_ids", "attention_mask", "content_mask", "sentence_map", "word_map", "speaker_ids")


@torch.no_grad()
def predict_documents(
    model: torch.nn.Module, features: Sequence[dict], collator: DocumentCollator, keep_singletons: bool
) -> list[list[list[Span]]]:
    """Each encoded document's predicted clusters of (start, end) word spans, the model in eval mode."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    clusters = []
    for document in features:
        batch = collator([document])
        output = model(**{name: batch[name].to(device) for name in _INPUTS})
        clusters.append(predicted_clusters(output, document["word_map"], keep_singletons))
    model.train(was_training)
    return clusters


class CorefTrainer(RunTrainer):
    """transformers' Trainer with the task layers (every parameter outside `encoder.`) at `task_learning_rate`, and
    an `evaluate` that scores `eval_documents` (the documents of the evaluation set, in the order of its encoded
    features) with MUC, B-cubed, CEAF-phi4 and the CoNLL F1. The last predictions stay in `eval_predictions`."""

    def __init__(self, *args: Any, task_learning_rate: float, eval_documents: Sequence[CorefDocument] = (),
                 keep_singletons: bool = False, **kwargs: Any):  # fmt: skip
        super().__init__(*args, **kwargs)
        self.task_learning_rate = task_learning_rate
        self.eval_documents = list(eval_documents)
        self.keep_singletons = keep_singletons
        self.eval_predictions: list[list[list[Span]]] = []

    def create_optimizer(self, model=None) -> torch.optim.Optimizer:
        """The Trainer's optimiser (its class, settings and weight-decay groups), with each group's task-layer
        parameters moved to a group of their own at `task_learning_rate`; the schedule then scales both."""
        created = self.optimizer is None
        optimizer = super().create_optimizer(model)
        if not created:
            return optimizer
        task = {id(p) for name, p in self.model.named_parameters() if not name.startswith("encoder.")}
        move_to_learning_rate(optimizer, task, self.task_learning_rate)
        return optimizer

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval") -> dict[str, float]:
        features = self.eval_dataset if eval_dataset is None else eval_dataset
        started = time.perf_counter()
        self.eval_predictions = predict_documents(self.model, features, self.data_collator, self.keep_singletons)
        evaluator = CorefEvaluator(keep_singletons=self.keep_singletons)
        for document, clusters in zip(self.eval_documents, self.eval_predictions):
            evaluator.add(document.clusters, clusters)
        metrics = {f"{metric_key_prefix}_{name}": value for name, value in evaluator.scores().items()}
        metrics[f"{metric_key_prefix}_documents"] = len(features)
        metrics[f"{metric_key_prefix}_runtime"] = time.perf_counter() - started
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics
