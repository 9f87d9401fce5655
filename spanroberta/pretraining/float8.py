"""--fp8: float8 matmuls in the encoder's layers, through torchao's float8 training, on NVIDIA GPUs of compute
capability 8.9 and newer. Like the attention plan, it is decided once, before any data is read
(`check_run_float8`, which refuses it with the reason where it cannot train the run); the built model is then
converted (`convert_to_float8`) and the run-settings line names the layers that were (`Float8Layers.describe`).

What is converted: every `nn.Linear` inside the encoder's stack of layers, the `nn.ModuleList` in which every
transformers encoder keeps its layers (`float8_layers`): the attention's projections and the feed-forward layers.
Not the embeddings (ALBERT's embedding projection and ELECTRA's generator's sit outside the stack), not the heads
(their transforms, and their decoders over the vocabulary), and not a layer whose input or output size is not a
multiple of 16, which torch's float8 matmul (`torch._scaled_mm`) refuses: those stay in the run's precision and
the line names them. torchao's default recipe scales each tensor by one factor computed at every step (tensorwise
dynamic scaling: inputs and weights cast to e4m3, output gradients to e5m2); the weights stay parameters of their
own dtype, so checkpoints are plain ones. The tokens of a batch are the inner dimension of the weight gradient's
matmul, which `_scaled_mm` needs in multiples of 16 too; rows padded to the longest of their batch and the last
layer's read positions (`encode_at_positions`, models/modeling_spanroberta.py) are not always, so torchao pads that
dimension (`pad_inner_dim`).

torchao's float8 layers pay under torch.compile, which fuses their casts to float8 and their scaling into the
kernels around each matmul; run eagerly, each is a kernel of its own, and a step is slower than bf16's (torchao
documents its float8 training with torch.compile). So --fp8 turns --torch_compile on where it was not given, and
the run-settings line says why (`compile_for_float8`); --fp8 with --torch_compile false given is refused.

Refused, each with its reason: a run that is not on a CUDA GPU, a ROCm build of torch, compute capability below
8.9 (no float8 tensor cores), a run without --bf16 (torchao's float8 recipe is bf16's: fp16, with its loss
scaling, and fp32 around float8 matmuls have not been tried), DeepSpeed and FSDP (`_ENGINE_REFUSALS`), several GPUs
in one process (nn.DataParallel, never tried with float8 layers), and torchao not installed. DDP is accepted: each
process holds a whole model whose weights stay plain parameters, and DDP reduces only their gradients.

Nothing of it has run on a GPU yet, nor has the CUDA test that holds its loss to bf16's (tests/test_cuda.py).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection

import torch
from torch import nn

from ..errors import UserInputError, require_package
from ..runs.distributed import engine_requested
from .arguments import PretrainingArguments
from .attention import run_precision

# Float8 tensor cores: Ada (8.9), Hopper (9.0) and newer.
MIN_CAPABILITY = (8, 9)
# torch._scaled_mm takes operands whose sizes are multiples of this.
FLOAT8_SIZE_MULTIPLE = 16
# The fp8 extra's pin (pyproject.toml), installed alone: `pip install -e ".[fp8]"` would also pull the torch the
# package asks for over the CUDA build a GPU machine has. torchao declares no dependency.
INSTALL = "`pip install torchao==0.18.0` (the fp8 extra's version; it brings no torch of its own)"

# The source of --torch_compile where --fp8 turned it on, as the run-settings line names it.
FLOAT8_NEEDS_COMPILE = "--fp8 needs compile"

_ENGINE_REFUSALS = {
    "DeepSpeed": "DeepSpeed's engine wraps the model and, under ZeRO-3, partitions the weights that torchao's "
    "float8 layers read at every step; torchao names torch.compile and FSDP2 as what its float8 training works "
    "with, not DeepSpeed, and no DeepSpeed run has tried them here",
    "FSDP": "torchao documents its float8 layers under FSDP2 (torch's fully_shard), with float8 all-gathers it "
    "sets up on the sharded model, and no FSDP run of the Trainer's has tried them here",
}


@dataclasses.dataclass(frozen=True)
class Float8Request:
    """What --fp8 needs to know of the run, known before any data is read.

    device: where it trains. precision: "bf16", "fp16" or "fp32", as the run's flags name it. engine: "DeepSpeed",
    "FSDP" or None (`runs.distributed.engine_requested`). gpus_per_process: above 1, the Trainer wraps the model in
    nn.DataParallel."""

    device: torch.device
    precision: str
    engine: str | None = None
    gpus_per_process: int = 1


def check_float8(request: Float8Request) -> None:
    """Refuses --fp8 (UserInputError, one paragraph with the reason) where it cannot train the run."""
    fp8 = "--fp8 trains the encoder's linear layers with float8 matmuls"
    if request.device.type != "cuda":
        raise UserInputError(
            f"{fp8}, which run on NVIDIA GPUs of compute capability {_dotted(MIN_CAPABILITY)} or newer (Ada, Hopper, "
            f"Blackwell), and this run trains on {request.device.type}. Leave out --fp8."
        )
    if torch.version.hip is not None:
        raise UserInputError(
            f"{fp8} on NVIDIA GPUs, and this torch is built for ROCm (HIP {torch.version.hip}), whose float8 formats "
            "and kernels differ and have not been tried here. Leave out --fp8."
        )
    capability = torch.cuda.get_device_capability(request.device)
    if capability < MIN_CAPABILITY:
        raise UserInputError(
            f"{fp8}, which need the float8 tensor cores of compute capability {_dotted(MIN_CAPABILITY)} or newer "
            f"(Ada, Hopper, Blackwell), and this GPU has {_dotted(capability)}. Leave out --fp8 (--bf16 true trains "
            "on its bf16 tensor cores)."
        )
    if request.precision != "bf16":
        instead = " instead of --fp16 true" if request.precision == "fp16" else ""
        raise UserInputError(
            f"{fp8} inside a bf16 run, torchao's float8 recipe: its layers take their inputs in the autocast dtype, "
            f"and neither fp16, with its loss scaling, nor fp32 around float8 matmuls has been tried. Add --bf16 "
            f"true{instead}."
        )
    if request.engine in _ENGINE_REFUSALS:
        raise UserInputError(
            f"--fp8 under {request.engine}: {_ENGINE_REFUSALS[request.engine]}. Train on one GPU, or on several with "
            f"DDP (accelerate launch or torchrun without {request.engine}), or leave out --fp8."
        )
    if request.gpus_per_process > 1:
        raise UserInputError(
            f"--fp8 on {request.gpus_per_process} GPUs in one process: the Trainer would replicate the model onto "
            "each at every step (nn.DataParallel), which has not been tried with float8 layers. Launch one process "
            f"per GPU (torchrun --nproc_per_node {request.gpus_per_process} run_pretraining.py ...), or make one "
            "GPU visible (CUDA_VISIBLE_DEVICES=0)."
        )
    require_package("torchao", "--fp8", install=INSTALL, otherwise="leave out --fp8")


def check_run_float8(training_args: PretrainingArguments) -> None:
    """`check_float8` for a run given --fp8, from its flags and its device; nothing without --fp8."""
    if training_args.fp8:
        check_float8(Float8Request(training_args.device, run_precision(training_args),
                                   engine_requested(training_args), gpus_per_process=training_args.n_gpu))  # fmt: skip


def compile_for_float8(
    training_args: PretrainingArguments, given: Collection[str] | None
) -> tuple[PretrainingArguments, dict[str, str]]:
    """The training arguments with --torch_compile on where --fp8 is given and compile was left unset, and the
    sources of what it set; refuses --fp8 (UserInputError) where compile was turned off on purpose (--torch_compile
    false given, or arguments built in code, `given` None). Needs neither torchao nor a GPU."""
    if not training_args.fp8 or training_args.torch_compile:
        return training_args, {}
    if given is None or "torch_compile" in given:
        turned_off = "gives --torch_compile false" if given is not None else "has torch_compile off"
        raise UserInputError(
            "--fp8 trains the encoder's linear layers with torchao's float8 layers, which pay only under "
            "torch.compile: it fuses their casts to float8 and their scaling into the kernels around each matmul, "
            f"which eagerly run as kernels of their own and make a step slower than bf16's. This run {turned_off}. "
            "Leave out --torch_compile false (--fp8 turns compile on), or leave out --fp8."
        )
    # replace() runs __post_init__ again, which picks compile's backend as for a run given --torch_compile true.
    return dataclasses.replace(training_args, torch_compile=True), {"torch_compile": FLOAT8_NEEDS_COMPILE}


@dataclasses.dataclass(frozen=True)
class Float8Layers:
    """The linear layers of the encoder's layer stacks: those in float8 (`converted`), and those left in the run's
    precision because a size is not a multiple of 16 (`kept`), by qualified name."""

    converted: tuple[str, ...]
    kept: tuple[str, ...] = ()

    def describe(self) -> str:
        """The run-settings line's account: how many layers are in float8, which (each layer index as *), and
        which were left out."""
        text = f"{_count(self.converted)} in float8 ({_grouped(self.converted)})"
        if self.kept:
            text += f", {_count(self.kept)} left out, a size not a multiple of 16 ({_grouped(self.kept)})"
        return text


def float8_layers(model: nn.Module) -> Float8Layers:
    """The layers --fp8 converts: each `nn.Linear` inside an `nn.ModuleList` (an encoder's stack of layers) whose
    input and output sizes are multiples of 16; the others of those stacks are kept. A module shared by several
    layers (ALBERT's) is named once, where it first appears."""
    stacks = [name for name, module in model.named_modules() if isinstance(module, nn.ModuleList)]
    stacked = [name for name, module in model.named_modules()
               if isinstance(module, nn.Linear) and any(name.startswith(f"{stack}.") for stack in stacks)]  # fmt: skip
    sized = [name for name in stacked if _float8_sizes(model.get_submodule(name))]
    return Float8Layers(tuple(sized), tuple(name for name in stacked if name not in sized))


def convert_to_float8(model: nn.Module) -> Float8Layers:
    """Swaps the layers `float8_layers` chooses for torchao's float8 training layers, in place; refuses a model
    with none."""
    layers = float8_layers(model)
    if not layers.converted:
        raise UserInputError(
            f"--fp8 found no linear layer of this model to train in float8: those of its encoder's layers "
            f"({_grouped(layers.kept) or 'none'}) have sizes that are not multiples of {FLOAT8_SIZE_MULTIPLE}, "
            "which float8 matmuls need. Leave out --fp8, or give the model sizes that are."
        )
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    # By identity: a layer shared by several parents (ALBERT's) is swapped under each of them, all reading its one
    # weight. `chosen` keeps the originals alive, so that no new module takes one of their ids meanwhile.
    chosen = [model.get_submodule(name) for name in layers.converted]
    ids = {id(module) for module in chosen}
    convert_to_float8_training(model, module_filter_fn=lambda module, name: id(module) in ids,
                               config=Float8LinearConfig(pad_inner_dim=True))  # fmt: skip
    return layers


def _float8_sizes(layer: nn.Linear) -> bool:
    return layer.in_features % FLOAT8_SIZE_MULTIPLE == 0 and layer.out_features % FLOAT8_SIZE_MULTIPLE == 0


def _grouped(names: tuple[str, ...]) -> str:
    """Names with each layer index as *, grouped by the stack: "roberta.encoder.layer.*: attention.self.query, ..."."""
    groups: dict[str, list[str]] = {}
    for name in names:
        stack, _, inside = re.sub(r"\.\d+(?=\.|$)", ".*", name).rpartition(".*.")
        members = groups.setdefault(f"{stack}.*" if stack else inside, [])
        if stack and inside not in members:
            members.append(inside)
    return "; ".join(f"{stack}: {', '.join(members)}" if members else stack for stack, members in groups.items())


def _count(names: tuple[str, ...]) -> str:
    return f"{len(names)} linear layer{'' if len(names) == 1 else 's'}"


def _dotted(capability: tuple[int, int]) -> str:
    return ".".join(map(str, capability))
