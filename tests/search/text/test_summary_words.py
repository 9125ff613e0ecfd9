"""The words of `status`: a failed trial is one line, whatever its trainer printed."""

from search.analysis.summary import FailedRun
from search.text import failed_trial_text
from search.text.summary import STATUS_ERROR_CHARS


def test_a_failed_trial_is_one_short_line_ending_with_the_trainer_s_last_words():
    long = " | ".join(f"frame {k}: File train.py, line {k}, in step" for k in range(40)) + " | RuntimeError: CUDA out of memory"
    text = failed_trial_text(FailedRun(7, "search", "4x4", 0, long))
    assert text.startswith("trial 7 4x4 seed 0: …") and text.endswith("RuntimeError: CUDA out of memory")
    assert len(text) == len("trial 7 4x4 seed 0: ") + STATUS_ERROR_CHARS and "\n" not in text


def test_a_short_error_is_shown_whole_and_a_missing_one_is_said():
    assert failed_trial_text(FailedRun(1, "search", "2x4", 3, "TrainerError: exited with code 1")) == (
        "trial 1 2x4 seed 3: TrainerError: exited with code 1"
    )
    assert failed_trial_text(FailedRun(1, "search", "2x4", 3, None)).endswith(": no error recorded")
