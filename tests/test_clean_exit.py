"""A script's processes end in order: `finish_processes` closes the process group and, with it, every gloo thread and
connection, even of the groups DeepSpeed's module state keeps, and stops tqdm's monitor thread, so that none is
left to be torn down while the interpreter exits (where a ZeRO-3 rank once aborted with "terminate called without an active exception").

Each case runs in a process of its own, a world of one on gloo: the process group is state of the whole process."""

import importlib.util
import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import PROJECT_ROOT


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="threads are read from /proc (Linux)"),
]

# Starts a world of one on gloo (through DeepSpeed's comm module when asked), uses the world group and a second
# group as DeepSpeed does, then finishes; prints the gloo threads before and after.
SCRIPT = """
import json, os, sys
sys.path.insert(0, {root!r})
import torch, torch.distributed as dist
from spanroberta.runs.distributed import finish_processes, gloo_threads

if {deepspeed}:
    import deepspeed.comm
    from deepspeed.utils import groups
    deepspeed.comm.init_distributed(dist_backend="gloo", verbose=False)
    second = groups._clone_world_group()  # DeepSpeed's copy of the world group, kept in its module state
else:
    dist.init_process_group("gloo")
    second = dist.new_group([0])
dist.all_reduce(torch.ones(2))
dist.all_reduce(torch.ones(2), group=second)
del second
import threading
from tqdm import tqdm
list(tqdm(range(2), disable=False))  # starts tqdm's monitor thread
before = gloo_threads()
finish_processes()
monitors = [thread.name for thread in threading.enumerate() if thread.name == "tqdm_monitor"]
print(json.dumps({{"before": before, "after": gloo_threads(), "initialized": dist.is_initialized(),
                  "monitors": monitors}}))
"""


def finish_in_own_process(deepspeed: bool) -> dict:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "WORLD_SIZE": "1",
           "LOCAL_RANK": "0", "LOCAL_SIZE": "1", "CUDA_VISIBLE_DEVICES": "", "DS_ACCELERATOR": "cpu"}  # fmt: skip
    code = textwrap.dedent(SCRIPT.format(root=str(PROJECT_ROOT), deepspeed=deepspeed))
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_finishing_ends_every_gloo_thread():
    finished = finish_in_own_process(deepspeed=False)
    assert finished["before"] and not finished["initialized"]
    assert finished["after"] == {} and finished["monitors"] == []


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed")
def test_finishing_ends_the_gloo_threads_of_the_groups_deepspeed_keeps():
    finished = finish_in_own_process(deepspeed=True)
    assert finished["before"].get("pt_gloo_runloop", 0) >= 4  # two groups, two worker threads each
    assert finished["after"] == {} and not finished["initialized"]
