"""The reference pages say what the code does today, and the concepts page shows only commands that parse.

docs/configuration.md and docs/cli.md are written by scripts/gen_docs.py: a page that differs from what the script
writes now fails here, and running the script again is the fix. The other checks do not trust the script: they walk
the pydantic models and the click commands themselves and look for every field, command and option in the pages.
"""

import re
import runpy
import shlex
import tomllib
from pathlib import Path

import pytest
import typer
from pydantic import BaseModel

from search.cli import app
from search.config import StudyConfig, parse_config

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FIX = "is stale: run `.venv/bin/python scripts/gen_docs.py {page}` and commit the page"


@pytest.fixture(scope="module")
def gen_docs() -> dict:
    return runpy.run_path(str(ROOT / "scripts" / "gen_docs.py"))


def _sections() -> dict[str, type[BaseModel]]:
    """StudyConfig's sections by TOML table name, read off the model (not off the script)."""
    found = {}
    for name, field in StudyConfig.model_fields.items():
        for a in (field.annotation, *getattr(field.annotation, "__args__", ())):
            a = getattr(a, "__origin__", a) if hasattr(a, "__metadata__") else a  # Annotated[Section, Tag(...)]: a kind's section
            if isinstance(a, type) and issubclass(a, BaseModel):
                found[name] = a
    return found


def _parts(text: str, heading: str) -> dict[str, str]:
    """A page split at its level-2 headings: heading text -> the text under it."""
    pieces = re.split(rf"^{re.escape(heading)}(.*)$", text, flags=re.M)
    return {title.strip(): body for title, body in zip(pieces[1::2], pieces[2::2])}


def test_configuration_page_is_what_the_script_writes(gen_docs):
    assert (DOCS / "configuration.md").read_text(encoding="utf-8") == gen_docs["config_reference"](), "docs/configuration.md " + FIX.format(
        page="config"
    )


def test_every_config_field_of_every_section_is_in_the_configuration_page():
    parts = _parts((DOCS / "configuration.md").read_text(encoding="utf-8"), "## ")
    sections = _sections()
    top = [name for name in StudyConfig.model_fields if name not in sections]
    assert sections.keys() >= {"model", "space", "train", "data", "search", "resources", "tracking", "experiment"}
    for title, names in [("Top level", top)] + [(f"[{s}]", list(model.model_fields)) for s, model in sections.items()]:
        assert title in parts, f"docs/configuration.md has no section {title!r}"
        rows = set(re.findall(r"^\| `([a-z_0-9]+)` \|", parts[title], flags=re.M))
        missing = [n for n in names if n not in rows]
        assert not missing, f"docs/configuration.md, {title}: no row for {missing}; " + FIX.format(page="config")


def test_every_config_field_has_a_description():
    models = [StudyConfig, *_sections().values()]
    bare = [f"{m.__name__}.{n}" for m in models for n, f in m.model_fields.items() if not (f.description or "").strip()]
    assert not bare, f"fields without a description (add description= in search/config/schema.py): {bare}"


def test_the_configuration_pages_example_is_a_valid_study_config():
    example = re.search(r"```toml\n(.*?)```", (DOCS / "configuration.md").read_text(encoding="utf-8"), re.S)
    assert example is not None
    config = parse_config(tomllib.loads(example.group(1)), "docs/configuration.md")
    assert config.name == "example" and config.search.min_resource_evals == "auto"


def test_cli_page_is_what_the_script_writes(gen_docs):
    assert (DOCS / "cli.md").read_text(encoding="utf-8") == gen_docs["cli_reference"](), "docs/cli.md " + FIX.format(page="cli")


def test_every_command_and_option_is_in_the_cli_page():
    commands = _commands()
    assert len(commands) >= 10
    parts = _parts((DOCS / "cli.md").read_text(encoding="utf-8"), "## prism-search ")
    for name, command in commands.items():
        assert name in parts, f"docs/cli.md has no section for `prism-search {name}`; " + FIX.format(page="cli")
        for param in command.params:
            for word in [*param.opts, *param.secondary_opts] if param.param_type_name == "option" else [param.name]:
                assert f"`{word}`" in parts[name], f"docs/cli.md, {name}: {word} missing; " + FIX.format(page="cli")


def _commands() -> dict:
    """The CLI's commands as click objects (typer carries its own click, read by attribute)."""
    return typer.main.get_command(app).commands  # type: ignore[attr-defined]


def _shown_commands(page: str) -> list[str]:
    text = (DOCS / page).read_text(encoding="utf-8")
    return [line for block in re.findall(r"```bash\n(.*?)```", text, re.S) for line in block.splitlines() if line.strip()]


def test_every_command_the_concepts_page_shows_parses():
    """Each line of a ```bash block is a prism-search command with options the CLI accepts (click parses them
    without running the command)."""
    commands = _commands()
    lines = _shown_commands("concepts.md")
    assert len(lines) >= 10
    for line in lines:
        words = shlex.split(line, comments=True)
        assert words[0] == "prism-search" and words[1] in commands, line
        commands[words[1]].make_context(words[1], words[2:])  # a UsageError names the bad option


def test_links_between_the_pages_lead_somewhere():
    for page in ("concepts.md", "configuration.md", "cli.md"):
        text = (DOCS / page).read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
            assert (DOCS / target).exists(), f"docs/{page} links to {target}, which does not exist"
        for anchor in re.findall(r"\]\(#([^)]+)\)", text):
            headings = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in re.findall(r"^#+ (.*)$", text, re.M)}
            assert anchor in headings, f"docs/{page} links to #{anchor}, no such heading"


def test_the_python_trainer_api_in_own_model_md_is_what_the_code_takes(gen_docs):
    """The reporter's methods and the request's fields, written from search.trainers: a renamed method or a new
    field makes the page stale here, not wrong for a reader."""
    page = (DOCS / "own-model.md").read_text(encoding="utf-8")
    assert page == gen_docs["own_model_page"](), "docs/own-model.md " + FIX.format(page="trainer")
    from search.trainers import Reporter, TrialRequest

    assert all(f"`reporter.{method}(...)`" in page for method in Reporter.EVENTS)
    assert all(callable(getattr(Reporter, method)) for method in Reporter.EVENTS)
    assert all(f"`request.{name}`" in page for name in TrialRequest.__dataclass_fields__)
