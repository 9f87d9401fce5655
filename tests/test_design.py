"""docs/design.md opens with the map of the packages: every package on disk is on it, and every package it names
exists, so the map cannot drift from the code."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "design.md"


def mapped_packages(text: str) -> set[str]:
    """The packages in the map's table, between its start and end markers, as paths like `spanroberta/models`."""
    start, end = text.index("<!-- package-map:start -->"), text.index("<!-- package-map:end -->")
    return {name.rstrip("/") for name in re.findall(r"^\| `([\w/]+)/` \|", text[start:end], flags=re.MULTILINE)}


def packages_on_disk(root: Path = ROOT) -> set[str]:
    """The packages one level below spanroberta/ and benchmarks/ (folders with an __init__.py)."""
    return {
        init.parent.relative_to(root).as_posix()
        for top in ("spanroberta", "benchmarks")
        for init in (root / top).glob("*/__init__.py")
    }


def test_the_design_map_names_every_package_and_only_packages_that_exist():
    mapped, on_disk = mapped_packages(DESIGN.read_text()), packages_on_disk()
    assert not on_disk - mapped, f"packages missing from docs/design.md's map: {sorted(on_disk - mapped)}"
    assert not mapped - on_disk, f"docs/design.md's map names packages that are gone: {sorted(mapped - on_disk)}"


def test_the_map_check_sees_a_missing_and_a_gone_package(tmp_path):
    for package in ("spanroberta/models", "spanroberta/new_room", "benchmarks/speed"):
        (tmp_path / package).mkdir(parents=True)
        (tmp_path / package / "__init__.py").write_text("")
    text = "<!-- package-map:start -->\n| `spanroberta/models/` | x |\n| `spanroberta/gone/` | y |\n<!-- package-map:end -->"
    assert packages_on_disk(tmp_path) - mapped_packages(text) == {"spanroberta/new_room", "benchmarks/speed"}
    assert mapped_packages(text) - packages_on_disk(tmp_path) == {"spanroberta/gone"}


def walk_through_paths(text: str) -> set[str]:
    """The modules and packages (`tasks/squad/task.py`, `models/`) named in the design's walk-throughs, the code
    blocks under "One pretraining step" and "One fine-tuning run"."""
    paths = set()
    for heading in ("One pretraining step", "One fine-tuning run"):
        block = text[text.index(heading):].split("```")[1]
        paths |= set(re.findall(r"(?<![\w/.])((?:[\w]+/)+(?:\w+\.py)?|\w+\.py)(?![\w/])", block))
    return paths


def test_the_walk_throughs_name_files_that_exist():
    paths = walk_through_paths(DESIGN.read_text())
    assert {"run_squad.py", "tasks/squad/task.py", "finetuning/task.py", "run_pretraining.py"} <= paths
    missing = sorted(path for path in paths if not (ROOT / path).exists() and not (ROOT / "spanroberta" / path).exists())
    assert not missing, f"docs/design.md's walk-throughs name files that are gone: {missing}"
