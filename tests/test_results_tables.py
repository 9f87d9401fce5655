"""benchmarks/tables/generate.py: the committed tables are what the committed records give, a region is rendered from
its records, a stale or unknown region is reported."""

from pathlib import Path

import pytest

from benchmarks.tables import generate
from spanroberta.records import RunStart, provenance, write_record


@pytest.mark.slow
def test_the_committed_files_are_what_the_committed_records_give(capsys):
    assert generate.main(["--check"]) == 0, capsys.readouterr().err


def _collator_record(records_dir: Path, token_seconds: float) -> Path:
    results = {
        "collators": {
            "spanroberta span+SBO": {"median_seconds": 0.01, "sequences_per_second_median": 12800.0,
                                     "sequences_per_second_best": 14000.0},
            "transformers token": {"median_seconds": token_seconds, "sequences_per_second_median": 128 / token_seconds,
                                   "sequences_per_second_best": 5000.0},
        },  # fmt: skip
        "span_sbo_ratios": {"transformers token": {"median": token_seconds / 0.01, "best": 3.0}},
    }
    started = RunStart(provenance(), [1.5, 1.0, 0.5])  # the load average at the start, as if read then
    return write_record("collator", {"threads": 2}, results, started=started, results_dir=records_dir)


def _project(tmp_path: Path, markdown: str) -> tuple[Path, Path]:
    """A checkout with one markdown file and an empty records folder."""
    root = tmp_path / "checkout"
    (root / "benchmarks").mkdir(parents=True)
    (root / "configs" / "ablations").mkdir(parents=True)
    page = root / "benchmarks" / "RESULTS.md"
    page.write_text(markdown, encoding="utf-8")
    return root, page


PAGE = (
    "# Results\n\nText kept as is.\n\n"
    "<!-- generated:collator -->\nhand-written\n<!-- /generated:collator -->\n\nEnd.\n"
)


def test_a_region_is_rendered_from_its_records_and_a_stale_one_is_named(tmp_path, capsys):
    root, page = _project(tmp_path, PAGE)
    records = root / "benchmarks" / "results"
    first = _collator_record(records, token_seconds=0.04)

    assert generate.main(["--root", str(root), "--check"]) == 1
    assert "benchmarks/RESULTS.md, region `collator`" in capsys.readouterr().err
    assert generate.main(["--root", str(root)]) == 0
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# Results\n\nText kept as is.\n\n<!-- generated:collator -->\n")
    assert text.endswith("<!-- /generated:collator -->\n\nEnd.\n")
    assert "hand-written" not in text
    assert f"[{first.name}](results/collator/{first.name})" in text  # each row links its record
    assert "| 12,800 |" in text and "4.00x" in text and "| 1.5 → " in text
    assert generate.main(["--root", str(root), "--check"]) == 0

    second = _collator_record(records, token_seconds=0.05)  # a new record makes the committed table stale
    assert generate.main(["--root", str(root), "--check"]) == 1
    assert "region `collator`" in capsys.readouterr().err
    assert generate.main(["--root", str(root)]) == 0
    assert second.name in page.read_text(encoding="utf-8") and "5.00x" in page.read_text(encoding="utf-8")


def test_the_headline_says_which_targets_are_met_and_what_is_not_measured(tmp_path):
    root, page = _project(tmp_path, "<!-- generated:headline -->\n<!-- /generated:headline -->\n")
    _collator_record(root / "benchmarks" / "results", token_seconds=0.005)  # span+SBO at 0.5x token masking
    assert generate.main(["--root", str(root)]) == 0
    text = page.read_text(encoding="utf-8")
    row = "| collator, span+SBO against transformers token | **0.50x** (sequences/s) | **not met** (target >= 1.0x)"
    assert row in text
    assert "collator, span+SBO against transformers whole-word | no record | not measured" in text
    assert "Not measured on a GPU yet; run `python -m benchmarks.speed.pretraining_step" in text


def test_the_front_page_shows_only_what_was_measured(tmp_path):
    """The README's summary names the measured figures; what has no record stays in RESULTS.md's headline."""
    root, page = _project(tmp_path, "<!-- generated:front-page -->\n<!-- /generated:front-page -->\n")
    _collator_record(root / "benchmarks" / "results", token_seconds=0.05)
    assert generate.main(["--root", str(root)]) == 0
    text = page.read_text(encoding="utf-8")
    assert "| collator, span+SBO against transformers token | **5.00x** (sequences/s) | **met** (target >= 1.0x)" in text
    assert "no record" not in text and "whole-word" not in text and "| Trainer path" not in text


@pytest.mark.parametrize(
    "markdown, message",
    [
        ("<!-- generated:no-such-table -->\n<!-- /generated:no-such-table -->\n", "region `no-such-table` is unknown"),
        ("<!-- generated:collator -->\nnever closed\n", "has no `<!-- /generated:collator -->`"),
    ],
)
def test_an_unknown_or_unclosed_region_is_an_error(tmp_path, capsys, markdown, message):
    root, page = _project(tmp_path, markdown)
    assert generate.main(["--root", str(root)]) == 2
    assert message in capsys.readouterr().err
    assert page.read_text(encoding="utf-8") == markdown  # nothing written
