"""A stored study is read as stored: its config is not checked against the disk again (issue 13, item 4)."""

import json
import subprocess
import sys

from typer.testing import CliRunner

from search.cli import app
from search.runner.corpus import corpus_fingerprint
from search.storage import open_storage
from search.study.create import open_study

runner = CliRunner()


def test_a_study_whose_corpus_moved_still_reports_and_resume_names_the_missing_corpus(tmp_path, tiny_config):
    text = tmp_path / "corpus.txt"
    text.write_text("to be or not to be, that is the question. " * 400)
    data = tiny_config.data.model_copy(update={"corpus": str(text)})
    config = tiny_config.model_copy(update={"data": data})
    open_study(config, open_storage(config.storage), corpus_fingerprint(config))
    text.rename(tmp_path / "moved.txt")
    url = ["--storage", config.storage]

    status = runner.invoke(app, ["status", "tiny", *url, "--json"])
    assert status.exit_code == 0, status.output
    assert json.loads(status.output)[0]["name"] == "tiny"
    export = runner.invoke(app, ["export", "tiny", *url, "--format", "json"])
    assert export.exit_code == 0 and json.loads(export.output) == []
    best = runner.invoke(app, ["best", "tiny", *url])
    assert "no complete feasible trial yet" in str(best.exception)  # the study's own state, not its config
    # resume has trials to train, so it needs the corpus; a fresh process (this one holds the corpus in memory)
    resume = subprocess.run([sys.executable, "-m", "search.cli", "resume", "tiny", *url], capture_output=True, text=True)
    assert resume.returncode == 2 and resume.stderr.count("\n") == 1, resume.stderr
    assert f"data.corpus: corpus {str(text)!r} not found" in resume.stderr and "version" not in resume.stderr
