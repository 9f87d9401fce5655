"""The speed benchmarks' arithmetic and the tables read from their records, on hand-made inputs: the model FLOPs of a
step against a hand count (packed rows attend within each document), the windows' spread, the two transformers
baselines' set-ups, the speed targets' verdicts, the batch sweep's peak and where a profiled step's time goes."""

import argparse
import json
from types import SimpleNamespace

import torch

from benchmarks.common import code_of
from benchmarks.speed import baselines, common
from benchmarks.speed.pretraining_step import category_seconds
from benchmarks.speed.trainer import DEFAULTS, SPANBERT, TUNED, window_spread
from benchmarks.tables import generate
from benchmarks.tables.speed import verdicts
from spanroberta.data.collator import DataCollatorForSpanMasking
from spanroberta.records import RunStart, provenance, write_record

# hidden 4, 2 layers, FFN 8, vocabulary 10: per layer 4 x 4 x 4 + 2 x 4 x 8 = 128 matmul weights.
CONFIG = SimpleNamespace(hidden_size=4, num_hidden_layers=2, intermediate_size=8, vocab_size=10,
                         sbo_position_embedding_size=2)  # fmt: skip


def test_a_step_is_counted_as_the_kernels_run_it_the_last_layer_at_the_heads_positions_the_heads_at_every_slot():
    # One row of 8: documents of 3 and 4 tokens (positions restart at 2), then one padding token; 3 prediction
    # slots, two used (positions 1 and 4), the third unused (-100, read at position 0).
    batch = {"input_ids": torch.ones(1, 8, dtype=torch.long), "attention_mask": torch.tensor([[1] * 7 + [0]]),
             "position_ids": torch.tensor([[2, 3, 4, 2, 3, 4, 5, 1]]), "mlm_positions": torch.tensor([[1, 4, -100]]),
             "labels": torch.tensor([[5, 6, -100]])}  # fmt: skip
    assert common.attention_spans(batch) == [3, 4]
    # A full layer: 6 x 128 weights x 7 tokens, plus 3 x 4 x hidden 4 x (3^2 + 4^2).
    full_layer = 6 * 128 * 7 + 12 * 4 * 25
    # The last layer: keys and values (2 x 4 x 4 weights) at the 7 tokens; queries and output (2 x 4 x 4) and the
    # feed-forward (2 x 4 x 8) at the 3 positions read (1, 4 and 0); each query against its document's 3, 4, 3 keys.
    last_layer = 6 * 32 * 7 + 6 * (32 + 64) * 3 + 12 * 4 * (3 + 4 + 3)
    mlm_head = 6 * (4 * 4 + 4 * 10) * 3  # at every slot
    counted = common.model_flops_per_step(CONFIG, batch, dense_head=False)
    assert counted == full_layer + last_layer + mlm_head == 11136
    # The reference path (or an attention the efficient path does not take) runs the last layer whole.
    for reference in (SimpleNamespace(**vars(CONFIG), efficient_pretraining=False),
                      SimpleNamespace(**vars(CONFIG), _attn_implementation="flash_attention_2")):  # fmt: skip
        assert not common.last_layer_at_positions(reference)
        assert common.model_flops_per_step(reference, batch, dense_head=False) == 2 * full_layer + mlm_head
    # With SBO targets the boundaries are read too (9 positions: 1, 4, 0; 0, 3, 0; 2, 5, 0) and the SBO head (input
    # 2 x 4 + 2) runs at every slot.
    with_sbo = {**batch, "sbo_left_positions": torch.tensor([[0, 3, -100]]),
                "sbo_right_positions": torch.tensor([[2, 5, -100]]),
                "sbo_relative_positions": torch.tensor([[0, 0, -100]])}  # fmt: skip
    assert common.read_positions(CONFIG, with_sbo).tolist() == [[1, 4, 0, 0, 3, 0, 2, 5, 0]]
    last_layer = 6 * 32 * 7 + 6 * (32 + 64) * 9 + 12 * 4 * (3 + 4 + 3 + 3 + 4 + 3 + 3 + 4 + 3)
    sbo_head = 6 * (10 * 4 + 4 * 4 + 4 * 10) * 3
    counted = common.model_flops_per_step(CONFIG, with_sbo, dense_head=False)
    assert counted == full_layer + last_layer + mlm_head + sbo_head


def test_an_unpacked_row_attends_whole_and_the_baseline_runs_every_layer_and_its_head_at_every_position():
    batch = {"input_ids": torch.ones(1, 8, dtype=torch.long), "attention_mask": torch.tensor([[1] * 7 + [0]]),
             "mlm_positions": torch.tensor([[1, 4, -100]]), "labels": torch.tensor([[5, 6, -100]])}  # fmt: skip
    assert common.attention_spans(batch) == [8]  # the padded row, as its attention computes it
    full_layer = 6 * 128 * 8 + 12 * 4 * 64
    last_layer = 6 * 32 * 8 + 6 * (32 + 64) * 3 + 12 * 4 * 8 * 3
    assert common.model_flops_per_step(CONFIG, batch, dense_head=False) == full_layer + last_layer + 6 * 56 * 3
    assert common.model_flops_per_step(CONFIG, batch, dense_head=True) == 2 * full_layer + 6 * 56 * 8 == 21120


def test_gpu_peaks_by_exact_model_and_a_mig_slice_named_and_refused():
    peaks = {name: common.gpu_model(name) for name in ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL",
             "NVIDIA H200", "NVIDIA H200 NVL", "NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe", "NVIDIA GH200 480GB",
             "NVIDIA H100 80GB HBM3 MIG 1g.10gb")}  # fmt: skip
    assert {name: (peak.model, peak.flops) for name, peak in peaks.items()} == {
        "NVIDIA H100 80GB HBM3": ("H100 SXM", 989e12), "NVIDIA H100 PCIe": ("H100 PCIe", 756e12),
        "NVIDIA H100 NVL": ("H100 NVL", 835e12), "NVIDIA H200": ("H200 SXM", 989e12),
        "NVIDIA H200 NVL": ("H200 NVL", 835e12), "NVIDIA A100-SXM4-80GB": ("A100", 312e12),
        "NVIDIA A100 80GB PCIe": ("A100", 312e12), "NVIDIA GH200 480GB": (None, None),
        "NVIDIA H100 80GB HBM3 MIG 1g.10gb": ("MIG 1g.10gb", None)}  # fmt: skip
    assert "MIG" in peaks["NVIDIA H100 80GB HBM3 MIG 1g.10gb"].reason
    # A slice visible through CUDA_VISIBLE_DEVICES under the whole chip's name is refused too.
    sliced = common.gpu_model("NVIDIA H100 80GB HBM3", "MIG-5c1e2e6a-0d5b-5d3f-9a7c-0123456789ab")
    assert (sliced.model, sliced.flops) == ("MIG slice", None)
    assert common.mfu(1e12, sliced.flops) is None


def test_the_span_collators_packed_rows_give_their_documents_spans(tiny_tokenizer):
    ids = tiny_tokenizer("a short sentence of words here and there")["input_ids"]
    rows = [{"input_ids": ids[:5] + ids[:7], "sequence_lengths": [5, 7]}, {"input_ids": ids[:9], "sequence_lengths": [9]}]
    batch = DataCollatorForSpanMasking(tiny_tokenizer, label_layout="slots", pad_to_multiple_of=16,
                                       first_position_id=2)(rows)  # fmt: skip
    assert common.attention_spans(batch) == [5, 7, 9]


def test_the_spread_of_the_windows_after_the_warm_up():
    assert window_spread([1.0, 2.0, 4.0, 3.0], skip=1) == {"windows": 3, "min": 2.0, "median": 3.0, "max": 4.0,
                                                            "sd": 1.0}  # fmt: skip
    assert window_spread([5.0], skip=2) == {"windows": 1, "min": 5.0, "median": 5.0, "max": 5.0, "sd": 0.0}


def test_run_mlms_defaults_and_the_tuned_peer_load_batches_as_their_names_say(tmp_path):
    assert baselines.loading_settings("defaults", None, cuda=True) == {}  # the Trainer's own defaults
    assert baselines.loading_settings("tuned", None, cuda=True) == {
        "dataloader_num_workers": baselines.GPU_DATALOADER_WORKERS, "dataloader_persistent_workers": True,
        "dataloader_pin_memory": True, "accelerator_config": {"non_blocking": True}}  # fmt: skip
    # The workers asked of spanroberta's run go to the tuned peer; on a CPU nothing is pinned.
    assert baselines.loading_settings("tuned", 3, cuda=False) == {
        "dataloader_num_workers": 3, "dataloader_persistent_workers": True, "dataloader_pin_memory": False,
        "accelerator_config": {"non_blocking": False}}  # fmt: skip
    options = argparse.Namespace(steps=2, logging_steps=1, precision="fp32", torch_compile=False, workers=1)
    tuned = baselines.training_arguments("tuned", str(tmp_path), 8, options)
    assert (tuned.dataloader_num_workers, tuned.per_device_train_batch_size, tuned.max_steps) == (1, 8, 2)
    assert baselines.VOCAB_MULTIPLE == 64


def _trainer_record(size="base", compiled=True, steps=150, fp8=False, rate=100.0, **span):
    """A Trainer record's frame, as speed/trainer.py writes one on a GPU."""
    config = f"{size}-gpu"
    runs = {SPANBERT: {"real_tokens_per_second": rate, "mfu": 0.4, "ratio_to_baseline": 1.6, "mfu_over_tuned": 1.1,
                       **span}}  # fmt: skip
    return {"command": "python trainer.py" + (" --fp8" if fp8 else ""), "machine": {"gpu": "1 x NVIDIA H200"},
            "git_commit": "abc", "git_dirty": False,
            "settings": {"config": config, "model_size": size, "batch_size": {"base": 32, "large": 16}[size],
                         "torch_compile": compiled, "steps": steps, "logging_steps": 10},
            "results": {"runs": runs}}  # fmt: skip


def test_a_record_is_judged_by_the_targets_of_its_size_compilation_and_precision():
    found = verdicts(_trainer_record(mfu=0.36, ratio_to_baseline=1.6, mfu_over_tuned=0.9))
    assert [(v.target, v.met) for v in found] == [("mfu", True), ("vs_defaults", True), ("mfu_vs_tuned", False)]
    assert found[0].verdict() == "**met** (target >= 35.0%)" and found[2].shown(0.9) == "0.90x"
    large = verdicts(_trainer_record("large", compiled=False, ratio_to_baseline=1.25))
    assert [(v.target, v.floor, v.met) for v in large] == [("vs_defaults", 1.3, False), ("mfu_vs_tuned", 1.0, True)]
    assert verdicts(_trainer_record(mfu=None))[0].verdict() == "not measured (target >= 35.0%)"
    fp8 = verdicts(_trainer_record("large", fp8=True, rate=135.0), bf16=_trainer_record("large", rate=100.0))
    assert [(v.target, round(v.value, 2), v.met) for v in fp8] == [("fp8", 1.35, True)]
    assert verdicts(_trainer_record("large", fp8=True))[0].met is None  # no bf16 record of the same code
    assert verdicts(_trainer_record(steps=40)) == []  # too short for its windows to agree
    rehearsal = _trainer_record()
    rehearsal["settings"]["rehearsal"] = True
    assert verdicts(rehearsal) == []


def test_code_of_names_an_exported_copys_digest_or_a_clean_commit():
    assert code_of({"measured_from": {"commit": "abc", "code_sha256": "f00"}, "git_commit": "x"}) == "code f00"
    assert code_of({"git_commit": "abc", "git_dirty": False}) == "commit abc"
    assert code_of({"git_commit": "abc", "git_dirty": True}) is None


def test_the_profile_categories_sum_the_aten_ops_only():
    ops = [{"name": "aten::mm", "self_device_us": 1000.0}, {"name": "aten::addmm", "self_device_us": 500.0},
           {"name": "nvjet_sm90_gemm_kernel", "self_device_us": 1500.0},
           {"name": "aten::_flash_attention_backward", "self_device_us": 250.0}]  # fmt: skip
    assert category_seconds(ops) == {"attention": 0.00025, "gemm": 0.0015, "optimizer": None}


def _project(tmp_path, regions):
    root = tmp_path / "checkout"
    (root / "benchmarks").mkdir(parents=True)
    (root / "configs" / "ablations").mkdir(parents=True)
    page = root / "benchmarks" / "RESULTS.md"
    page.write_text("".join(f"<!-- generated:{name} -->\n<!-- /generated:{name} -->\n" for name in regions))
    return root, page, root / "benchmarks" / "results"


def _write(records_dir, benchmark, record, name):
    started = RunStart({**provenance(), **{key: record[key] for key in ("command", "machine")}}, [1.0, 1.0, 1.0])
    path = write_record(benchmark, record["settings"], record["results"], started=started, name=name,
                        results_dir=records_dir)  # fmt: skip
    return path


def test_the_speed_targets_table_shows_each_pairs_latest_long_record_or_what_is_not_measured(tmp_path):
    root, page, records = _project(tmp_path, ["speed-targets"])
    assert generate.main(["--root", str(root)]) == 0
    text = page.read_text()
    assert "| MFU, compiled | base | compiled | no record | not measured (target >= 35.0%) | - |" in text
    assert "| real tokens/s with --fp8 over bf16 | large | compiled, fp8 | no record |" in text
    assert text.count("| not measured (target") == 11 and "**met**" not in text
    path = _write(records, "trainer", _trainer_record(mfu=0.25), "base")
    _write(records, "trainer", _trainer_record(mfu=0.5, steps=40), "short")  # newer, too short: not read
    assert generate.main(["--root", str(root)]) == 0
    text = page.read_text()
    assert f"| MFU, compiled | base | compiled | 25.0% | **not met** (target >= 35.0%) | [{path.name}]" in text
    assert text.count("| **met** (") == 2 and text.count("| not measured (target") == 8  # 1.60x run_mlm, 1.10x MFU


def test_the_batch_sweep_marks_the_batch_each_side_peaks_at(tmp_path):
    root, page, records = _project(tmp_path, ["batch-sweep"])
    for batch, mfu in ((32, 0.30), (64, 0.34), (128, 0.33)):
        record = _trainer_record(compiled=False, mfu=mfu, window_spread={}, peak_memory={
            "allocated_bytes": batch * 2**28, "reserved_bytes": batch * 2**29})  # fmt: skip
        record["settings"] |= {"batch_size": batch, "precision": "bf16"}
        _write(records, "trainer", record, f"b{batch}")
    assert generate.main(["--root", str(root)]) == 0
    text = page.read_text()
    assert "| 64 **peak** | 34.0% | 100 | 16.0 GiB (32.0) |" in text and "| 128 | 33.0% |" in text


def test_where_the_time_goes_before_and_after_and_what_a_record_lacks(tmp_path):
    root, page, records = _project(tmp_path, ["step-profile"])
    top = [{"name": "aten::mm", "calls": 1, "self_device_us": 2000.0, "self_cpu_us": 1.0}]
    old = {"settings": {"config": "base-gpu", "device": "cuda"}, "command": "", "machine": {"gpu": "H200"},
           "results": {"sides": {"spanroberta": {"host_seconds": 0.036, "wall_seconds": 0.047, "top_ops": top}}}}
    _write(records, "pretraining_step_profile", old, "old")
    assert generate.main(["--root", str(root)]) == 0
    text = page.read_text()
    assert "| base-gpu | spanroberta | before, " in text
    assert "| 47.0 | 36.0 | not recorded | ≥ 2.0 (top 1 ops) | not recorded |" in text
    assert "| base-gpu | - | after | not measured |" in text and "| large-gpu | - | before | not measured |" in text
    new = json.loads(json.dumps(old))
    new["results"]["sides"]["spanroberta"]["category_seconds"] = {"attention": 0.004, "gemm": 0.01, "optimizer": None}
    _write(records, "pretraining_step_profile", new, "new")
    assert generate.main(["--root", str(root)]) == 0
    assert "| 47.0 | 36.0 | 4.0 | 10.0 | none |" in page.read_text()


def test_spanrobertas_window_of_real_tokens_starts_once_its_first_batch_is_fetched_as_the_baselines_do():
    from unittest import mock

    from spanroberta.pretraining.trainer import PretrainingTrainer

    trainer = object.__new__(PretrainingTrainer)  # only the attributes get_batch_samples reads
    trainer._real_tokens_window_start, trainer.model = None, SimpleNamespace()
    clock = iter(range(10))

    def fetch(self, epoch_iterator, num_batches, device):
        next(clock)  # the fetching takes one tick
        return [{}], None

    with mock.patch("spanroberta.runs.trainer.RunTrainer.get_batch_samples", fetch), \
            mock.patch("spanroberta.pretraining.trainer.time.perf_counter", lambda: next(clock)):  # fmt: skip
        trainer.get_batch_samples(iter([]), 1, "cpu")
    assert trainer._real_tokens_window_start == 1  # read after the fetch (tick 0), not before it
    # The baselines' meter starts at on_step_begin, which the Trainer calls once the step's batches are fetched.
    meter = baselines.TokensPerSecond(tokens_per_step=8)
    with mock.patch("benchmarks.speed.baselines.time.perf_counter", lambda: 5.0):
        meter.on_step_begin(None, None, None)
    assert meter.window_start == 5.0
