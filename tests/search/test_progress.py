import io

from rich.console import Console

from prism import EvalPoint
from search.cli.progress import Progress


def _progress(live):
    buffer = io.StringIO()
    progress = Progress(console=Console(file=buffer, width=120, force_terminal=live), live=live)
    progress.begin("demo", target=4, done_before=0)
    return progress, buffer


def test_plain_log_lines_when_not_a_terminal():
    progress, buffer = _progress(live=False)
    progress.started_trial(3, "1x2,4x2", "search", seed=0)
    progress.evaluated(3, EvalPoint(step=10, tokens=5120, val_loss=2.5, train_loss=2.6))
    progress.finished(3, "PRUNED", 2.5)
    progress.note("database error; retrying")
    lines = buffer.getvalue().splitlines()
    assert len(lines) == 4
    assert "trial 3 (1 of 4) started: 1x2,4x2 (search)" in lines[0] and "5,120 tokens, val loss 2.5000" in lines[1]
    assert "trial 3 (1 of 4) PRUNED" in lines[2] and "retrying" in lines[3]


def test_live_table_shows_running_trials_totals_and_eta():
    progress, _buffer = _progress(live=True)
    progress.started_trial(0, "2x4", "baseline", seed=0)
    progress.started_trial(1, "1x4", "search", seed=0)
    progress.evaluated(1, EvalPoint(step=10, tokens=5120, val_loss=2.25, train_loss=2.3))
    progress.finished(0, "COMPLETE", 2.1)
    rendered = Console(width=120, record=True)
    rendered.print(progress._render())
    screen = rendered.export_text()
    progress.close()
    assert "1x4" in screen and "2.2500" in screen and "5,120" in screen
    assert "2x4" not in screen.split("done")[0]  # finished trials leave the running table
    assert "done 1/4" in screen and "best 2x4 (2.1000)" in screen and "ETA" in screen and "ETA ?" not in screen


def test_a_served_duplicate_is_shown_but_not_counted_as_done():
    progress, buffer = _progress(live=False)
    progress.started_trial(5, "1x2,4x2 (= trial 3)", "search", seed=0, served=True)
    progress.finished(5, "COMPLETE", 2.4, served=True)
    assert "trial 5 (served) COMPLETE val loss 2.4000 — served from cache, not counted" in buffer.getvalue()
    rendered = Console(width=120, record=True)
    rendered.print(progress._render())
    screen = rendered.export_text()
    assert "done 0/4" in screen and "served from cache 1" in screen and "ETA ?" in screen


def test_a_note_before_the_run_begins_is_printed_as_it_is():
    """Recovered trials and the Ray dashboard are noted while the study is being opened, before trials train."""
    buffer = io.StringIO()
    progress = Progress(console=Console(file=buffer, width=120), live=False)
    progress.note("recovered trials left running by a lost driver: [3] (queued again)")
    progress.begin("demo", target=4, done_before=1)
    progress.note("racing: queued 1x4 at seed 1")
    first, second = buffer.getvalue().splitlines()
    assert first == "recovered trials left running by a lost driver: [3] (queued again)"
    assert second.endswith("s] racing: queued 1x4 at seed 1") and second.startswith("[")


def test_log_progress_says_k_of_n_and_the_time_left(caplog):
    """Outside the CLI (a notebook, a Ray Job) progress goes to the `search` logger, one line per finished trial."""
    import logging

    from search import LogProgress

    progress = LogProgress()
    with caplog.at_level(logging.INFO, logger="search"):
        progress.begin("demo", target=3, done_before=1)
        progress.started_trial(4, "1x2,4x2", "search", seed=0)
        progress.finished(4, "COMPLETE", 2.5)
        progress.finished(5, "COMPLETE", 2.4, served=True)  # a duplicate served from the cache: not counted
        progress.finished(6, "PRUNED", 2.9)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "study demo: 1 of 3 trials trained, training the rest"
    assert lines[2].startswith("trial 4 COMPLETE val loss 2.5000 (2 of 3, about ") and lines[2].endswith(" s left)")
    assert lines[3].startswith("trial 5 COMPLETE val loss 2.4000 (2 of 3, about ")
    assert lines[3].endswith(": served from the cache, not counted")
    assert lines[4] == "trial 6 PRUNED val loss 2.9000 (3 of 3)"


def test_each_log_line_says_which_trial_of_the_target_it_is_and_the_eta():
    """Piped or under Ray Jobs nobody sees the live table: every trial line carries k of N and an ETA, and a
    baseline line its seed (baselines differ only by it)."""
    progress, buffer = _progress(live=False)
    progress.started_trial(0, "2x4", "baseline", seed=1)
    progress.started_trial(1, "1x4", "search", seed=0)
    progress.evaluated(1, EvalPoint(step=10, tokens=5120, val_loss=2.25, train_loss=2.3))
    progress.finished(0, "COMPLETE", 2.1)
    progress.finished(1, "FAIL", None, "worker died")
    progress.started_trial(2, "1x4", "search", seed=0)  # its retry: the same place in the target
    lines = buffer.getvalue().splitlines()
    assert "trial 0 (1 of 4) started: 2x4 (baseline, seed 1); ETA ?" in lines[0], lines[0]
    assert "trial 1 (2 of 4) started: 1x4 (search)" in lines[1]
    assert "trial 1 (2 of 4): 5,120 tokens, val loss 2.2500; ETA ?" in lines[2]
    assert "trial 0 (1 of 4) COMPLETE val loss 2.1000; ETA " in lines[3] and "ETA ?" not in lines[3]
    assert "trial 1 (2 of 4) FAIL — worker died; ETA " in lines[4]
    assert "trial 2 (2 of 4) started" in lines[5]
