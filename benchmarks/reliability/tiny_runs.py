"""The tiny pretraining runs the reliability benchmarks start, kill and resume: the set-up of tests/test_resume.py
and tests/test_distributed.py (a byte-level BPE of 400 tokens, a one-layer model of width 32, blocks of 32 tokens),
launched as the user launches them (`python run_pretraining.py`, or `accelerate launch` with the shipped configs on
2 CPU processes), and the comparison of a run's end with an uninterrupted run's.

Engines: "plain" (one process), "ddp" (configs/accelerate/cpu.yaml), "zero2" and "zero3"
(configs/accelerate/deepspeed_zero*.yaml with DS_ACCELERATOR=cpu). Every engine starts from one saved initial
checkpoint (ZeRO-3 initialises a new model shard by shard, so a seed alone would give it other weights).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from transformers import PreTrainedTokenizerBase

from benchmarks import ROOT
from benchmarks.common import script_environment, tiny_checkpoint
from benchmarks.reliability.outcomes import OUTLIVED
from spanroberta.data.demo_corpus import TINY_CORPUS

ENGINES = ("plain", "ddp", "zero2", "zero3")
SCRIPT = "run_pretraining.py"
PROCESSES = 2  # of the distributed engines
SHUTDOWN_SECONDS = 300
# In each launch's environment, a value of its own: every process it starts inherits it (`process_family`).
LAUNCH_MARK = "SPANROBERTA_BENCHMARK_LAUNCH"
_LAUNCH_NUMBERS = itertools.count()


@dataclass(frozen=True)
class TinyRun:
    """How long a tiny run trains and how often it saves and evaluates (the steps are optimizer steps)."""

    max_steps: int = 12
    save_steps: int = 3
    eval_steps: int = 3
    train_blocks: int = 32
    seed: int = 7

    def flags(self, setup: dict[str, str], engine: str) -> list[str]:
        """run_pretraining.py's flags for `engine` (not --output_dir): AdamW (DeepSpeed's configs name it), no
        dropout, a 10% validation split evaluated every eval_steps."""
        flags = [
            "--train_file", setup["corpus"], "--model_name_or_path", setup["initial_checkpoint"],
            "--max_seq_length", "32", "--input_format", "full-sentences", "--per_device_train_batch_size", "2",
            "--max_train_samples", str(self.train_blocks), "--validation_split_percentage", "10",
            "--optim", "adamw_torch", "--learning_rate", "1e-3", "--weight_decay", "0", "--warmup_steps", "0",
            "--lr_scheduler_type", "constant", "--max_grad_norm", "0", "--max_steps", str(self.max_steps),
            "--save_steps", str(self.save_steps), "--eval_strategy", "steps", "--eval_steps", str(self.eval_steps),
            "--logging_steps", "1", "--report_to", "none", "--disable_tqdm", "true",
            "--seed", str(self.seed),
        ]  # fmt: skip
        return flags + (["--use_cpu", "true"] if engine in ("plain", "ddp") else [])


def prepare(folder: Path) -> dict[str, str]:
    """Writes the corpus, the tokenizer and the initial checkpoint under `folder` (once); returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    setup = {name: str(folder / name) for name in ("corpus", "initial_checkpoint")}
    setup["corpus"] += ".txt"
    if Path(setup["initial_checkpoint"], "model.safetensors").is_file():
        return setup
    from spanroberta.data.tokenizer import train_byte_level_bpe

    groups = ("\n".join(TINY_CORPUS[i : i + 3]) for i in range(0, len(TINY_CORPUS), 3))
    Path(setup["corpus"]).write_text("\n\n".join(groups) + "\n")
    tokenizer = train_byte_level_bpe(TINY_CORPUS, vocab_size=400, min_frequency=1, show_progress=False)
    save_initial_checkpoint(tokenizer, Path(setup["initial_checkpoint"]))
    return setup


def save_initial_checkpoint(tokenizer: PreTrainedTokenizerBase, path: Path) -> None:
    """The tiny pretraining model every engine's run starts from (`benchmarks.common.tiny_checkpoint`: seed 0; no
    dropout, so that runs compare bit for bit), saved with `tokenizer` into `path`."""
    tiny_checkpoint(tokenizer, path, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                    max_position_embeddings=40)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def command(engine: str, flags: list[str], script: str = SCRIPT) -> list[str]:
    """The command line that runs `script` (relative to the repository root) with `flags` under `engine`."""
    if engine == "plain":
        return [sys.executable, str(ROOT / script), *flags]
    config = "cpu.yaml" if engine == "ddp" else f"deepspeed_{engine}.yaml"
    return [
        sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(ROOT / "configs/accelerate" / config),
        "--num_processes", str(PROCESSES), "--main_process_port", str(_free_port()), str(ROOT / script), *flags,
    ]  # fmt: skip


def environment() -> dict[str, str]:
    """`benchmarks.common.script_environment` (offline, unbuffered so that each step's log line reaches the benchmark
    as it is printed and a SIGTERM is aimed between two of them) on CPU processes on any machine (with CUDA visible,
    both processes would take the one GPU), one thread each so that every launch computes the same sums; the launcher
    of a distributed run waits `SHUTDOWN_SECONDS` for its processes to save after a SIGTERM, as
    docs/distributed.md advises."""
    return script_environment(OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="", DS_ACCELERATOR="cpu",
                              TORCH_ELASTIC_SHUTDOWN_TIMEOUT=str(SHUTDOWN_SECONDS))


def loss_curve(output_dir: Path) -> dict[int, float]:
    """Step -> training loss, from the run's trainer_state.json ({} when there is none)."""
    path = Path(output_dir) / "trainer_state.json"
    if not path.is_file():
        return {}
    history = json.loads(path.read_text())["log_history"]
    return {entry["step"]: entry["loss"] for entry in history if "loss" in entry}


def compare_with(output_dir: Path, reference_dir: Path) -> dict[str, Any]:
    """How a run's end compares with an uninterrupted run's: `finished` (final weights saved), `same_weights`
    (bit-identical), `same_losses` (every logged step's loss identical), `max_weight_difference`."""
    from safetensors.torch import load_file

    weights_path = Path(output_dir) / "model.safetensors"
    if not weights_path.is_file():
        return {"finished": False, "same_weights": False, "same_losses": False, "max_weight_difference": None}
    weights, expected = load_file(weights_path), load_file(Path(reference_dir) / "model.safetensors")
    difference = None
    if weights.keys() == expected.keys():
        difference = max(float((weights[name] - expected[name]).abs().max()) for name in expected)
    return {"finished": True, "same_weights": difference == 0.0,
            "same_losses": loss_curve(output_dir) == loss_curve(reference_dir), "max_weight_difference": difference}


def start(engine: str, flags: list[str], script: str = SCRIPT) -> subprocess.Popen:
    """Starts `engine`'s command in a session of its own (a signal to this terminal does not reach it; `kill_session`
    ends it), stdout and stderr piped as text. Its environment carries a mark of its own (`LAUNCH_MARK`, kept as
    the process's `launch_mark`), by which `process_family` finds its processes."""
    mark = f"{os.getpid()}-{next(_LAUNCH_NUMBERS)}"
    process = subprocess.Popen(command(engine, flags, script), cwd=ROOT, env={**environment(), LAUNCH_MARK: mark},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)  # fmt: skip
    process.launch_mark = mark
    return process


def process_family(process: subprocess.Popen) -> list[psutil.Process]:
    """The running processes of a launch: those whose environment carries its mark. Neither its session nor its
    children would do: torch's launcher starts its ranks in sessions of their own, and a rank that outlives the
    launcher is no longer anyone's child of it."""
    family = []
    for each in psutil.process_iter():
        with contextlib.suppress(psutil.Error):  # ended meanwhile, or a process of another user
            if each.environ().get(LAUNCH_MARK) == process.launch_mark:
                family.append(each)
    return family


def kill_session(process: subprocess.Popen) -> None:
    """SIGKILL to the launch and every process it started (`process_family`)."""
    for member in process_family(process):
        with contextlib.suppress(psutil.NoSuchProcess):
            member.kill()


def python_stacks(processes: list[psutil.Process]) -> str:
    """Where each process stands: py-spy's dump of its Python threads, or why there is none."""
    py_spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    dumps = []
    for each in processes:
        if py_spy is None:
            text = "no stack: py-spy is not installed"
        else:
            try:
                dump = subprocess.run([py_spy, "dump", "--pid", str(each.pid)], capture_output=True, text=True,
                                      timeout=60)  # fmt: skip
                text = dump.stdout or dump.stderr
            except subprocess.TimeoutExpired:
                text = "no stack: py-spy did not answer in 60 s"
        with contextlib.suppress(psutil.Error):
            dumps.append(f"process {each.pid}, {' '.join(each.cmdline()[:4])}:\n{text.strip()}")
    return "\n".join(dumps)


def launch(engine: str, flags: list[str], script: str = SCRIPT, timeout: float = 900) -> subprocess.CompletedProcess:
    """Runs `engine`'s command to its end, its output (stdout and stderr together) as `stdout`. One still running
    after `timeout` seconds, and any of its processes still running once the launcher has ended, are killed; the
    result's `stderr` then says so (`OUTLIVED`: an abort) with where each of them stood (`python_stacks`), and a
    launch killed at its timeout reads as ended by SIGKILL."""
    process = start(engine, flags, script)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        output = None
    ending = ""
    left = process_family(process)
    if left:
        outlived = process.poll() is not None
        stacks = python_stacks(left)
        kill_session(process)
        ending = f"{len(left)} of its processes {OUTLIVED}" if outlived else f"timed out after {timeout:.0f} s"
        ending += f"; killed. Where they stood:\n{stacks}"
    if output is None:
        output, _ = process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, output, ending)
