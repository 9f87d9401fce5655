#!/usr/bin/env python
"""Writes every generated region of the project's markdown files from the committed raw records.

A region is the text between the lines `<!-- generated:NAME -->` and `<!-- /generated:NAME -->` in README.md,
benchmarks/RESULTS.md, benchmarks/ABLATIONS.md or docs/*.md. Its content comes from the records under
benchmarks/results/ (written by the benchmark scripts and run_ablation.py through `spanroberta.records`), so a table
never holds a number that no record holds: every row names the record it comes from. Headlines read the latest
record of each setting. A region whose name this script does not know is an error, as is one left open.

    python -m benchmarks.tables.generate           # rewrite the regions
    python -m benchmarks.tables.generate --check   # exit 1 and name each stale region, without writing

Known regions: the names in RENDERERS (each table module's REGIONS, and the headline, which reads several), and
ablation-<config> for each configs/ablations/<config>.yaml.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from benchmarks import ROOT
from benchmarks.tables import parity, reliability, speed, task_benchmark
from benchmarks.tables.ablations import ablation_rows, render_ablation
from benchmarks.tables.render import Context, markdown_table

# Markers stand on lines of their own (a marker quoted inside a sentence is text).
REGION = re.compile(r"^<!-- generated:(?P<name>[\w.-]+) -->\n(?P<body>.*?)^<!-- /generated:(?P=name) -->$", re.S | re.M)
OPENING = re.compile(r"^<!-- generated:([\w.-]+) -->$", re.M)


def render_headline(context: Context) -> str:
    """RESULTS.md's headline: the latest record of each setting against its target, then the GPU figures, the
    parity verdicts and the ablations."""
    rows = speed.collator_rows(context) + speed.gpu_rows(context) + parity.headline(context) + ablation_rows(context)
    return markdown_table(["figure", "latest", "target", "record"], rows)


RENDERERS: dict[str, Callable[[Context], str]] = {
    "headline": render_headline, **speed.REGIONS, **task_benchmark.REGIONS, **parity.REGIONS, **reliability.REGIONS,
}


def renderer(name: str, root: Path) -> Callable[[Context], str] | None:
    if name in RENDERERS:
        return RENDERERS[name]
    config = name.removeprefix("ablation-")
    if name.startswith("ablation-") and (root / "configs" / "ablations" / f"{config}.yaml").is_file():
        return lambda context: render_ablation(context, config)
    return None


class RegionError(Exception):
    """A region that cannot be generated: unknown name, or opened and never closed."""


def regenerate(text: str, context: Context) -> tuple[str, list[str]]:
    """The text with every region rewritten, and the names of the regions whose content changed."""
    closed = {match.group("name") for match in REGION.finditer(text)}
    for name in OPENING.findall(text):
        if name not in closed:
            raise RegionError(f"{context.markdown}: `<!-- generated:{name} -->` has no `<!-- /generated:{name} -->`.")
    stale = []

    def write(match: re.Match) -> str:
        name = match.group("name")
        render = renderer(name, context.root)
        if render is None:
            raise RegionError(
                f"{context.markdown}: region `{name}` is unknown to benchmarks/tables/generate.py (known: "
                f"{', '.join(RENDERERS)}, ablation-<config> for configs/ablations/<config>.yaml)."
            )
        body = render(context).strip("\n") + "\n"
        if match.group("body") != body:
            stale.append(name)
        return f"<!-- generated:{name} -->\n{body}<!-- /generated:{name} -->"

    return REGION.sub(write, text), stale


def markdown_files(root: Path) -> list[Path]:
    pages = ("RESULTS.md", "ABLATIONS.md", "PARITY.md", "TASKS.md")
    candidates = [root / "README.md", *(root / "benchmarks" / name for name in pages)]
    return [path for path in candidates + sorted((root / "docs").glob("*.md")) if path.is_file()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="Write nothing; exit 1 naming each stale region.")
    parser.add_argument("--root", type=Path, default=ROOT, help="The checkout whose markdown files are written.")
    parser.add_argument("--records_dir", type=Path, default=None, help="Default: <root>/benchmarks/results.")
    args = parser.parse_args(argv)
    records_dir = args.records_dir or args.root / "benchmarks" / "results"
    stale_files = []
    for path in markdown_files(args.root):
        text = path.read_text(encoding="utf-8")
        try:
            new_text, stale = regenerate(text, Context(records_dir, path, args.root))
        except RegionError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        if new_text == text:
            continue
        stale_files.append(path)
        if args.check:
            for name in stale:
                print(f"stale: {path.relative_to(args.root)}, region `{name}`", file=sys.stderr)
        else:
            path.write_text(new_text, encoding="utf-8")
            print(f"wrote {path.relative_to(args.root)}: {', '.join(stale)}")
    if args.check and stale_files:
        print("Regenerate with: python -m benchmarks.tables.generate", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
