"""Ablations in one command (run_ablation.py, or `python -m spanroberta.ablation` from an installed package): pretrain
every arm on the same data with the same budget, fine-tune each on every task for every seed, and tabulate the scores
as the papers do (median over seeds, min-max).

- command.py: the command line, and the raw record of the ablation;
- config.py: reading and checking an ablation config (YAML or JSON) against the argument classes of the package's
  pretraining and fine-tuning tasks, which its units run;
- units.py: the plan, one unit per pretraining and per fine-tuning, each done once its result file is on disk;
- runner.py: runs the units in turn, in this process (under `accelerate launch`, in every process together);
- results.py: the scores on a 0-100 scale, results.json and the paper-style results.md;
- plots.py: pretraining loss curves and per-task scores as PNG files.
"""

from .config import AblationConfig, load_config
from .runner import run_ablation

__all__ = ["AblationConfig", "load_config", "run_ablation"]
