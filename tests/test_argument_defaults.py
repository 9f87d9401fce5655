"""A script's arguments class with its own defaults (`with_defaults`) pickles by name, as the Trainer saves
`training_args.bin` with torch.save: from Python 3.12 `make_dataclass` names its caller's module unless told."""

import pickle

import pytest

from spanroberta.tasks.coreference.task import CorefTrainingArguments
from spanroberta.tasks.race.task import RaceTrainingArguments


@pytest.mark.parametrize("arguments_class", [CorefTrainingArguments, RaceTrainingArguments])
def test_a_scripts_arguments_pickle_as_the_trainer_saves_them(arguments_class, tmp_path):
    arguments = arguments_class(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    restored = pickle.loads(pickle.dumps(arguments))
    assert type(restored) is arguments_class
    assert restored.learning_rate == arguments.learning_rate
