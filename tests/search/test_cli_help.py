"""Every help text prints as written: rich must not read a bracketed word such as `[model]` as a style tag."""

import ast
import re
from pathlib import Path

from typer.testing import CliRunner

import search.cli
from search.cli import app

BRACKETED = re.compile(r"\[[^\[\]]+\]")


def _source_help_texts() -> list[str]:
    """The literal text of every `help=` argument and every command docstring in search/cli/__init__.py (f-string parts too)."""
    tree = ast.parse(Path(search.cli.__file__).read_text())
    texts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "help":
            parts = node.value.values if isinstance(node.value, ast.JoinedStr) else [node.value]
            texts += [p.value for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str)]
        elif isinstance(node, ast.FunctionDef) and ast.get_docstring(node):
            texts.append(ast.get_docstring(node))
    return texts


def _help_output(args: list[str]) -> str:
    result = CliRunner().invoke(app, [*args, "--help"])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.replace("│", " ").split())  # undo rich's wrapping and box borders


def test_every_bracketed_word_of_the_help_texts_is_printed():
    words = {w for text in _source_help_texts() for w in BRACKETED.findall(text)}
    assert "[model]" in words  # the text that rich used to eat ("study TOML whose , , to use")
    commands = [c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands]
    assert len(commands) >= 10 and "train" in commands
    printed = " ".join(_help_output([name]) for name in commands) + " " + _help_output([])
    assert sorted(w for w in words if w not in printed) == []


def test_train_help_names_the_config_sections():
    assert "study TOML whose [model], [train], [data] to use" in _help_output(["train"])
