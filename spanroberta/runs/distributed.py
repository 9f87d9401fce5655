"""Several processes, one run: what every run_*.py script does so that `accelerate launch` (or torchrun, or deepspeed)
with N processes gives one data-parallel run of N, never N runs writing into one folder.

- `check_process_world` (called by `validation.check_run`, before anything is read or written): the launcher
  says how many processes it started (WORLD_SIZE); the Trainer must see as many. It does not when the launcher
  was told to use GPUs that this machine lacks (configs/accelerate/multi_gpu.yaml on a CPU machine): Accelerate
  then finds no backend and each process trains alone on all the data, logs every line and writes every file
  into the same --output_dir. That is refused with what to launch instead. One case is repaired rather than
  refused: DeepSpeed on CPU processes (`DS_ACCELERATOR=cpu`), where DeepSpeed itself starts the process group
  (gloo) but Accelerate 1.15, which knows no DeepSpeed accelerator but CUDA's, records a world of one.
- `weights_are_finite`: the check before a save, over every process's share of the weights (ZeRO-3 and FSDP
  hold a shard per process), agreed by all processes so that all save or none does.
- `every_process_says`: what each process gives, gathered on every process, for a decision all must act on
  (`output_folder.claim_output_folder`, `preemption.stop_if_signalled`).
- `finish_processes`: at the end of a script, every process waits for the others and closes the process group,
  so that none exits while a peer still exchanges with it (gloo aborts a process whose peer vanished); inside
  `process_group_kept()` (run_ablation.py runs several scripts in the same processes) it only waits.

Every file a script writes is written by the main process only (`Trainer.is_world_process_zero`,
`args.should_save`); that holds as long as the Trainer sees the real world, which is what this module ensures.
"""

from __future__ import annotations

import contextlib
import gc
import glob
import logging
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

import torch
from accelerate import PartialState
from accelerate.utils import DistributedType
from transformers import TrainingArguments

from ..errors import UserInputError

logger = logging.getLogger(__name__)

# The variables a launcher sets to the number of processes it started (torchrun/accelerate/deepspeed, MPI).
_WORLD_SIZE_VARIABLES = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")


def launched_processes() -> int:
    """How many processes the launcher started for this run (1 without a launcher)."""
    for name in _WORLD_SIZE_VARIABLES:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 1


def in_process_group() -> bool:
    """Whether this process belongs to an initialised torch.distributed process group."""
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def training_processes(args: TrainingArguments) -> int:
    """How many processes train: the launcher's count, which under DeepSpeed on CPU processes is known before the
    Trainer sets up its world, else the world `args` sees."""
    return max(args.world_size, launched_processes())


def check_process_world(args: TrainingArguments) -> None:
    """Refuses a run whose launcher started several processes of which the Trainer sees only itself (each would
    train alone and write into the same --output_dir); adopts DeepSpeed's process group on CPU processes."""
    _check_engine_runs_on_cpu(args)
    launched = launched_processes()
    if launched <= 1 or args.world_size == launched:
        return
    if _adopt_deepspeed_cpu_group(args, launched):
        return
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0].endswith(".py") else "run_pretraining.py"
    raise UserInputError(
        f"The launcher started {launched} processes, but this one sees a world of {args.world_size} "
        f"({_device_note()}), so each process would train alone on all the data and write into the same "
        "--output_dir. To train on several CPU processes, launch with the CPU config and add --use_cpu true to the "
        f"script's flags: `accelerate launch --config_file configs/accelerate/cpu.yaml --num_processes {launched} "
        f"{script} --use_cpu true ...` (DeepSpeed configs: not --use_cpu, but DS_ACCELERATOR=cpu). To train on GPUs, "
        "make them visible to every process (CUDA_VISIBLE_DEVICES, `nvidia-smi`)."
    )


def engine_requested(args: TrainingArguments) -> str | None:
    """The engine the run asks for, by flag or by `accelerate launch` with its config: DeepSpeed, FSDP or None."""
    if args.deepspeed or os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true":
        return "DeepSpeed"
    if args.fsdp or os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true":
        return "FSDP"
    return None


def _check_engine_runs_on_cpu(args: TrainingArguments) -> None:
    """Accelerate 1.15 drops DeepSpeed and FSDP under --use_cpu without a word and runs plain DDP: refused."""
    engine = engine_requested(args)
    if not args.use_cpu or engine is None:
        return
    if engine == "DeepSpeed":
        raise UserInputError(
            "--use_cpu true turns DeepSpeed off (Accelerate runs plain DDP instead). To run DeepSpeed on CPU "
            "processes, leave --use_cpu out and set DS_ACCELERATOR=cpu and CUDA_VISIBLE_DEVICES=\"\" in the "
            "environment; DeepSpeed then trains on gloo."
        )
    raise UserInputError(
        "--use_cpu true turns FSDP off (Accelerate 1.15 runs FSDP on GPUs only, and plain DDP instead on CPU). Run "
        "FSDP on GPUs, or use configs/accelerate/cpu.yaml (DDP) or a DeepSpeed config with DS_ACCELERATOR=cpu to "
        "train on CPU processes."
    )


def _device_note() -> str:
    if torch.cuda.is_available():
        return f"torch sees {torch.cuda.device_count()} GPU(s), but no process group was set up"
    return f"no GPU is visible: CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}"


def _adopt_deepspeed_cpu_group(args: TrainingArguments, launched: int) -> bool:
    """Under DeepSpeed with no GPU, Accelerate's PartialState lets deepspeed.comm start the process group (gloo on
    DeepSpeed's CPU accelerator) and then, finding no GPU backend, records one process: the Trainer would neither
    shard the data nor keep its files to the main process, though the engine averages gradients over all. Copies
    the real world into the shared state (one state per process, read by TrainingArguments and the Accelerator
    alike); returns whether it did."""
    if not in_process_group():
        return False
    state = PartialState()
    if state.distributed_type != DistributedType.DEEPSPEED or state.backend is not None:
        return False
    if torch.distributed.get_world_size() != launched:
        return False
    PartialState._shared_state.update(
        backend=torch.distributed.get_backend(),
        num_processes=torch.distributed.get_world_size(),
        process_index=torch.distributed.get_rank(),
        local_process_index=int(os.environ.get("LOCAL_RANK", torch.distributed.get_rank())),
    )
    config = args.hf_deepspeed_config.config if getattr(args, "hf_deepspeed_config", None) else {}
    if "train_batch_size" in config:
        # Filled in with a world of one when the arguments were parsed.
        per_process = args.per_device_train_batch_size * args.gradient_accumulation_steps
        config["train_batch_size"] = args.world_size * per_process
    logger.info("DeepSpeed on %d CPU processes (%s): the Trainer uses DeepSpeed's process group.", launched,
                state.backend)  # fmt: skip
    return True


def weights_are_finite(model: torch.nn.Module, accelerator) -> bool:
    """Whether no weight of `model` is NaN or infinite, checked on every process's own share (a ZeRO-3 shard is
    `ds_tensor`, an FSDP2 one the local part of a DTensor) and agreed by all processes. Every process must call
    it (the Trainer's saves do)."""
    nonfinite = torch.zeros((), dtype=torch.long, device=accelerator.device)
    for parameter in model.parameters():
        local = getattr(parameter, "ds_tensor", parameter)
        local = local.to_local() if hasattr(local, "to_local") else local
        if local.numel():
            nonfinite += (~torch.isfinite(local.detach())).sum()
    if accelerator.num_processes > 1:
        nonfinite = accelerator.reduce(nonfinite, reduction="sum")
    return not int(nonfinite)


def any_process(flag: bool, device: torch.device) -> bool:
    """Whether `flag` is true on any process of the run (`flag` itself outside a distributed run). Every process must
    call it: a process that met an error says so here instead of leaving the others waiting at a barrier."""
    if not in_process_group():
        return flag
    agreed = torch.tensor([int(flag)], dtype=torch.int32, device=device)
    torch.distributed.all_reduce(agreed, op=torch.distributed.ReduceOp.MAX)
    return bool(agreed.item())


def finish_processes() -> None:
    """At the end of a script: every process waits for the others, then closes the process group and ends what
    still runs beside it, so that as little as possible is left to be torn down while the interpreter exits.
    Inside `process_group_kept()` the group stays open for the next script run in the same processes.

    Closing the group is not enough: torch's `destroy_process_group` forgets the groups, but a gloo group's worker
    threads and its connections to the peers live as long as a reference to it does. Left alone, they are torn
    down during interpreter exit, in no set order, after a faster peer may have exited and closed its end: a ZeRO-3
    rank aborted there once ("terminate called without an active exception"). So DeepSpeed's own teardown drops
    the references its module state keeps (`deepspeed.utils.groups`), what no longer holds a group is collected
    while every peer is still at this point, and tqdm's monitor threads are stopped. A live DeepSpeed engine still
    holds its groups (ZeRO-3: each parameter's `ds_process_group`, the optimizer's `dp_process_group`) until the
    Trainer that holds it is released; the gloo threads left then are logged at debug level."""
    if in_process_group():
        torch.distributed.barrier()
        if not _process_group_kept:
            _destroy_process_groups()
            gc.collect()
            _stop_progress_monitors()
    leftover = gloo_threads()
    if leftover:
        logger.debug("Gloo threads still running at the end of the script: %s.", leftover)


def _destroy_process_groups() -> None:
    """Destroys every group: through DeepSpeed's comm module where DeepSpeed set the groups up, which also drops
    the references its module state keeps to them (`deepspeed.utils.groups`); else through torch."""
    comm = sys.modules.get("deepspeed.comm.comm")
    if comm is not None and comm.is_initialized():
        comm.destroy_process_group()
    else:
        torch.distributed.destroy_process_group()


def _stop_progress_monitors() -> None:
    """tqdm's monitors (one per progress-bar class used) are daemon threads that wake every 10 seconds: one that
    wakes during interpreter exit is ended mid-call. Stopped (joined) here; a later progress bar starts another."""
    monitor_module = sys.modules.get("tqdm._monitor")
    if monitor_module is None:
        return
    for thread in threading.enumerate():
        if isinstance(thread, monitor_module.TMonitor):
            thread.exit()
            thread.tqdm_cls.monitor = None


def gloo_threads() -> dict[str, int]:
    """The threads of this process that belong to gloo process groups (worker and connection threads), by name,
    read from /proc (empty where /proc is not there)."""
    counts: dict[str, int] = {}
    for path in glob.glob(f"/proc/{os.getpid()}/task/*/comm"):
        with contextlib.suppress(OSError), open(path) as file:
            name = file.read().strip()
            if "gloo" in name:
                counts[name] = counts.get(name, 0) + 1
    return counts


_process_group_kept = False


@contextlib.contextmanager
def process_group_kept() -> Iterator[None]:
    """For a caller that runs several scripts' main() one after the other in the same processes (run_ablation.py
    under `accelerate launch`): their finish_processes() only wait for each other, so that every script's Trainer
    uses the one process group; the caller closes it with finish_processes() after the block."""
    global _process_group_kept
    _process_group_kept = True
    try:
        yield
    finally:
        _process_group_kept = False


def drop_unused_weight_conversions(model: torch.nn.Module) -> None:
    """Keeps, of the weight renamings transformers recorded while loading `model`, those that matched a weight.
    Under DeepSpeed ZeRO-3, transformers 5.23's loader records all of them, legacy ones included, and the save
    reverts them: LayerNorm.weight and .bias would be written as LayerNorm.gamma and .beta, a checkpoint that
    transformers reloads but that no other reader of the model's weights names as the model does."""
    conversions = getattr(model, "_weight_conversions", None)
    if conversions:
        model._weight_conversions = [conversion for conversion in conversions if conversion.was_used()]


def every_process_says(value: Any) -> list[Any]:
    """`value` (picklable) as each process gives it, in rank order; `[value]` without a process group. Every
    process must call it: for a decision that one process makes and all must act on (a refused output folder, a
    preemption signal that reached only some processes)."""
    if not in_process_group():
        return [value]
    gathered: list[Any] = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(gathered, value)
    return gathered
