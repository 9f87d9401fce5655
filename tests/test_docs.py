"""The documentation stays true to the code: every ```python example in README.md and docs/*.md runs (offline, with
tiny local models standing in for the Hub names the examples use), every `python run_*.py ...` line of a ```bash
block parses with that script's own argument parser (a renamed flag or script fails here), the README stays a
front door of at most 120 lines, no score of the project's is typed by hand outside the generated regions (of the
README, docs/*.md and the benchmark pages, nor in the docstrings and templates, model cards among them, of the
package, the benchmarks and the scripts), and every relative link points to a file that exists (and to a heading of
it when the link names one)."""

import argparse
import ast
import dataclasses
import importlib
import re
import shlex
import unicodedata
from pathlib import Path

import pytest
from conftest import PROJECT_ROOT

README = PROJECT_ROOT / "README.md"
PAGES = [README, *sorted((PROJECT_ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 120

# Scripts and pages that the docs name before they exist in every checkout: each is written with its feature,
# which lands separately. A command or link naming one is skipped, with the reason, only while it is missing.
PENDING_SCRIPTS = {"run_relation.py": "relation extraction", "run_coref.py": "coreference resolution"}
PENDING_PAGES = {"docs/relation-extraction.md": "relation extraction", "docs/coreference.md": "coreference resolution"}

# Hub names the examples load, and the tiny local model saved under that name in the examples' working directory.
STAND_INS = {"FacebookAI/roberta-base": "RobertaForMaskedLM", "deepset/roberta-base-squad2": "RobertaForQuestionAnswering"}

SCRIPT = re.compile(r"(?:^|/)(run_\w+\.py)$")
CONFIG_SUFFIXES = (".json", ".yaml", ".yml")


def name(page: Path) -> str:
    return page.relative_to(PROJECT_ROOT).as_posix()


def fenced_blocks(page: Path, language: str) -> list[str]:
    """The bodies of the page's fenced code blocks of `language`, in order."""
    blocks, body, inside = [], [], None
    for line in page.read_text(encoding="utf-8").splitlines():
        fence = re.match(r"^\s*```\s*(\S*)", line)
        if fence and inside is None:
            inside, body = fence.group(1), []
        elif fence:
            if inside == language:
                blocks.append("\n".join(body))
            inside = None
        elif inside is not None:
            body.append(line)
    return blocks


# --------------------------------------------------------------------------------------------------------
# (a) Python examples run


@pytest.fixture
def examples_directory(tmp_path, tiny_tokenizer, monkeypatch):
    """A working directory holding a tiny model and tokenizer under each Hub name the examples use, so that
    `from_pretrained("FacebookAI/roberta-base")` loads it offline."""
    import transformers

    config = transformers.RobertaConfig(
        vocab_size=len(tiny_tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=514, pad_token_id=tiny_tokenizer.pad_token_id,
        bos_token_id=tiny_tokenizer.bos_token_id, eos_token_id=tiny_tokenizer.eos_token_id,
    )  # fmt: skip
    for hub_name, class_name in STAND_INS.items():
        getattr(transformers, class_name)(config).save_pretrained(tmp_path / hub_name)
        tiny_tokenizer.save_pretrained(tmp_path / hub_name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("page", [page for page in PAGES if fenced_blocks(page, "python")], ids=name)
@pytest.mark.slow
def test_python_examples_run(page, examples_directory):
    """A page's blocks run in order in one namespace, as a reader pasting them one after the other would."""
    namespace = {"__name__": "__main__"}
    for number, block in enumerate(fenced_blocks(page, "python"), start=1):
        try:
            exec(compile(block, f"{name(page)}, python block {number}", "exec"), namespace)
        except Exception as error:
            pytest.fail(f"{name(page)}, python block {number} ({block.splitlines()[0]!r}) failed: {error!r}")


# --------------------------------------------------------------------------------------------------------
# (b) Script commands parse with the script's own parser


def script_commands(page: Path) -> list[tuple[str, list[str], str]]:
    """(script, its arguments, the command as written) for every `python run_X.py ...` or `accelerate launch ...
    run_X.py ...` in the page's bash blocks, continuation lines joined, comments and `...` dropped."""
    commands = []
    for block in fenced_blocks(page, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
            lexer.whitespace_split = True
            tokens, command = list(lexer), []
            for token in [*tokens, ";"]:
                if token and set(token) <= set(";&|"):
                    commands.append(command)
                    command = []
                else:
                    command.append(token)
    found = []
    for tokens in commands:
        scripts = [i for i, token in enumerate(tokens) if SCRIPT.search(token)]
        if not scripts:
            continue
        start = scripts[0]
        if not any("python" in token or token == "accelerate" for token in tokens[:start]):
            continue
        arguments = [token for token in tokens[start + 1 :] if token != "..."]
        found.append((SCRIPT.search(tokens[start]).group(1), arguments, " ".join(tokens)))
    return found


def argument_parser(script: str) -> argparse.ArgumentParser:
    """The script's parser, every flag optional (a docs line may leave out what `...` stands for): the HfArgumentParser
    of its ARGUMENT_CLASSES, as spanroberta.runs.cli builds it, or its own `argument_parser()`."""
    module = importlib.import_module(script.removesuffix(".py"))
    if hasattr(module, "ARGUMENT_CLASSES"):
        from transformers import HfArgumentParser

        parser = HfArgumentParser(module.ARGUMENT_CLASSES, allow_abbrev=False)
    elif hasattr(module, "argument_parser"):
        parser = module.argument_parser()
    else:
        pytest.fail(f"{script} has neither ARGUMENT_CLASSES nor argument_parser(): the docs cannot be checked")
    for action in parser._actions:
        action.required = False
    return parser


def config_file_keys(script: str, path: str) -> None:
    """A config file given first to a script with ARGUMENT_CLASSES holds only its flag names."""
    from spanroberta.runs.cli import read_flag_values

    module = importlib.import_module(script.removesuffix(".py"))
    if hasattr(module, "ARGUMENT_CLASSES"):
        fields = {field.name for cls in module.ARGUMENT_CLASSES for field in dataclasses.fields(cls) if field.init}
        read_flag_values(str(PROJECT_ROOT / path), fields)


COMMANDS = [(page, *command) for page in PAGES for command in script_commands(page)]


@pytest.mark.parametrize(
    "page, script, arguments, written", COMMANDS, ids=[f"{name(c[0])}:{c[1]}:{i}" for i, c in enumerate(COMMANDS)]
)
def test_script_commands_parse(page, script, arguments, written):
    if not (PROJECT_ROOT / script).is_file():
        if script in PENDING_SCRIPTS:
            pytest.skip(f"{script} ({PENDING_SCRIPTS[script]}) is not in this checkout yet; its commands are "
                        "checked once it is")  # fmt: skip
        pytest.fail(f"{name(page)} runs {script}, which does not exist: {written}")
    # Files of the project that a command names (launch configs, ablation configs) exist.
    for token in arguments + written.split():
        if token.startswith("configs/"):
            assert (PROJECT_ROOT / token).exists(), f"{name(page)}: {token} does not exist ({written})"
    if arguments and arguments[0].endswith(CONFIG_SUFFIXES) and (PROJECT_ROOT / arguments[0]).is_file():
        config_file_keys(script, arguments[0])
        if hasattr(importlib.import_module(script.removesuffix(".py")), "ARGUMENT_CLASSES"):
            arguments = arguments[1:]
    elif arguments and arguments[0].endswith(CONFIG_SUFFIXES) and not arguments[0].startswith("-"):
        arguments = arguments[1:]  # a run's own flags.json, which the docs' reader has and this checkout does not
    parser = argument_parser(script)
    try:
        _, unknown = parser.parse_known_args(arguments)
    except SystemExit:
        pytest.fail(f"{name(page)}: {script} rejects the arguments of `{written}` (see the error above)")
    assert not unknown, f"{name(page)}: {script} has no flag {' '.join(unknown)} (in `{written}`)"


def test_a_renamed_flag_fails_the_check():
    """The check above is not vacuous: a flag the script lacks is reported."""
    _, unknown = argument_parser("run_pretraining.py").parse_known_args(["--maskng", "span"])
    assert unknown == ["--maskng", "span"]


# --------------------------------------------------------------------------------------------------------
# (c) The README is a front door


def test_the_readme_is_short():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail into docs/ (at most {README_MAX_LINES})"


def test_the_readme_figures_region_is_left_to_the_generator():
    text = README.read_text(encoding="utf-8").splitlines()
    assert "<!-- generated:front-page -->" in text and "<!-- /generated:front-page -->" in text


# --------------------------------------------------------------------------------------------------------
# (c2) No task score typed by hand: a score the project got is a generated figure, with its seeds and its verdict

# A score in prose: a metric's or a task's name followed closely by a figure with one decimal (F1 67.1, accuracy
# 59.9, RACE middle 27.5); SQuAD's version numbers (SQuAD 2.0, SQuAD v1.1) are names, not scores.
PROSE_SCORE = re.compile(r"\b(F1|accuracy|exact match|EM|Matthews|Spearman|Pearson|CoNLL|SQuAD(?! ?v?[12]\.[01]\b)"
                         r"|MRQA|MRPC|RTE|SST-2|CoLA|STS-B|RACE|SemEval|LitBank|GAP)\b[^.\n|]{0,40}?\b\d{1,3}\.\d\b",
                         re.I)  # fmt: skip
# A published score names where it comes from: the paper's table, or "the paper(s) report(s)", "the authors report".
CITED = re.compile(r"\bTable \d+|\bet al\.|\bpapers? reports?\b|\bauthors report\b")
# Where a score could be typed by hand: the pages (the README, docs/*.md, the benchmark pages), and the string
# constants (docstrings, model-card templates) of the package, the benchmarks and the scripts.
SCORED_PAGES = [*PAGES, *sorted((PROJECT_ROOT / "benchmarks").glob("*.md"))]
SCORED_MODULES = sorted([*(PROJECT_ROOT / "spanroberta").rglob("*.py"), *(PROJECT_ROOT / "benchmarks").rglob("*.py"),
                         *PROJECT_ROOT.glob("run_*.py")])  # fmt: skip
GENERATED_REGION = re.compile(r"^<!-- generated:(?P<name>[\w.-]+) -->\n.*?^<!-- /generated:(?P=name) -->$", re.S | re.M)


def hand_typed_scores(text: str) -> list[str]:
    """The sentences of a page's prose (outside its generated regions and code blocks) that give a score without
    naming a published source: a score of the project's is a generated figure (benchmarks/tables/generate.py)."""
    prose = re.sub(r"^```.*?^```", "", GENERATED_REGION.sub("", text), flags=re.S | re.M)
    return [sentence.strip() for sentence in re.split(r"(?<=[.;])\s+", prose)
            if PROSE_SCORE.search(sentence) and not CITED.search(sentence)]  # fmt: skip


def module_strings(module: Path) -> list[str]:
    """The string constants of a module: its docstrings and its templates (a model card's among them)."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)]


@pytest.mark.parametrize("page", SCORED_PAGES, ids=name)
def test_no_task_score_is_typed_by_hand(page):
    assert hand_typed_scores(page.read_text(encoding="utf-8")) == []


def test_no_task_score_is_typed_by_hand_in_docstrings_or_templates():
    assert PROJECT_ROOT / "spanroberta" / "pretraining" / "model_card.py" in SCORED_MODULES
    found = [f"{name(module)}: {sentence}" for module in SCORED_MODULES for text in module_strings(module)
             for sentence in hand_typed_scores(text)]  # fmt: skip
    assert found == []


def test_a_hand_typed_score_fails_the_check():
    page = ("The gpu run went well.\n\nMRPC reaches F1 87.4 at the gpu size.\n\n<!-- generated:task-scores -->\n"
            "- MRPC, F1: **87.4** (1 seed), its floor 81.2 (1 seed: no verdict)\n<!-- /generated:task-scores -->\n"
            "BERT-base scores F1 88.9 on it (Devlin et al. 2019, Table 1).\n\n```python\nprint(f1)  # F1 12.5\n```\n")
    assert hand_typed_scores(page) == ["MRPC reaches F1 87.4 at the gpu size."]
    floors = "The floors are SQuAD 0.0 and RACE middle 27.5 there.\n\nSQuAD 2.0 and SQuAD v1.1 are datasets.\n"
    assert hand_typed_scores(floors) == ["The floors are SQuAD 0.0 and RACE middle 27.5 there."]


def test_a_hand_typed_score_in_a_model_card_template_fails_the_check(tmp_path):
    module = tmp_path / "card.py"
    module.write_text('"""Writes a model card."""\n\nCARD = """---\nlicense: mit\n---\n\nIt scores accuracy 91.2 on '
                      'SST-2.\n"""\n', encoding="utf-8")  # fmt: skip
    found = [sentence for text in module_strings(module) for sentence in hand_typed_scores(text)]
    assert len(found) == 1 and found[0].endswith("It scores accuracy 91.2 on SST-2.")


# --------------------------------------------------------------------------------------------------------
# (d) Relative links point to files that exist


def heading_anchors(page: Path) -> set[str]:
    """GitHub's anchors for the page's headings: lower case, punctuation dropped, spaces as hyphens."""
    anchors, inside = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
        elif not inside and re.match(r"^#{1,6} ", line):
            title = line.lstrip("#").strip().lower()
            kept = "".join(c for c in title if c in " -_" or unicodedata.category(c)[0] in "LN")
            anchors.add(kept.replace(" ", "-"))
    return anchors


def relative_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    links = re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", text)
    return [link for link in links if not re.match(r"^[a-z]+:", link)]


LINKS = [(page, link) for page in PAGES for link in relative_links(page)]


@pytest.mark.parametrize("page, link", LINKS, ids=[f"{name(page)}->{link}" for page, link in LINKS])
def test_relative_links_resolve(page, link):
    path, _, anchor = link.partition("#")
    target = (page.parent / path).resolve() if path else page
    if not target.exists():
        relative = target.relative_to(PROJECT_ROOT).as_posix() if target.is_relative_to(PROJECT_ROOT) else path
        if relative in PENDING_PAGES:
            pytest.skip(f"{relative} ({PENDING_PAGES[relative]}) is not in this checkout yet")
        pytest.fail(f"{name(page)} links to {link}, which does not exist")
    if anchor and target.suffix == ".md":
        assert anchor in heading_anchors(target), f"{name(page)} links to {link}: no such heading in {target.name}"
