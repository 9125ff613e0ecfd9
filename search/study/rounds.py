"""Confirmation in rounds, trained: once the search has its n_trials, `run` and `resume` go on into round 1 and
round 2 (search.analysis.rounds says what each trains and why). Every step can be cut by Ctrl-C or a lost driver
and done again: the contenders and the pick are stored the first time they are chosen, and a round queues only the
runs the study does not hold yet, so a resumed study trains what is left of the round it was in."""

from __future__ import annotations

import optuna

from search.analysis.rounds import N_ROUNDS, Rounds, contenders_of, pick_of, round_runs, round_seeds
from search.analysis.summary import schedule_ranking, study_rounds
from search.attrs import ATTR_ROUNDS
from search.config import StudyConfig
from search.errors import PrismSearchError
from search.runner.context import StudyContext
from search.runner.progress import StudyProgress
from search.study.confirmation import queue_missing, train_queued
from search.text import resume_line, round_skipped_text, round_started_text


def rounds_left(study: optuna.Study, config: StudyConfig) -> bool:
    """Whether a study confirmed in rounds still has a round to train once its search is over (False for one
    confirmed by hand)."""
    if config.search.confirmation != "rounds" or config.experiment is not None:
        return False
    return not study_rounds(study, study.get_trials(deepcopy=False), config, search_done=True).over


def frozen_rounds(study: optuna.Study, config: StudyConfig) -> Rounds | None:
    """What a study's rounds froze already (its contenders, and the pick once round 1 is over), else None: a search
    that goes on after that (`resume --n-trials`) adds schedules those rounds never train."""
    if config.search.confirmation != "rounds":
        return None
    rounds = Rounds.stored(study)
    return rounds if rounds.contenders else None


def check_confirmable(study: optuna.Study, config: StudyConfig) -> None:
    """`confirm` is refused while a study confirmed in rounds has a round left: runs on `confirm`'s seeds before its
    pick is frozen would be seeds it was selected on, which its round 2 must never be."""
    if rounds_left(study, config):
        raise PrismSearchError(
            f'study {config.name!r} confirms in rounds (search.confirmation = "rounds") and they are not over; a `confirm` now '
            f"would train the seeds its pick must not be selected on (fix: `{resume_line(config.name)}` trains the rounds; "
            "confirm after them)"
        )


def run_rounds(ctx: StudyContext, progress: StudyProgress) -> None:
    """Freeze what each round trains (once), queue its missing runs, train them; round 2 after round 1."""
    study, config = ctx.study, ctx.config
    for number in range(1, N_ROUNDS + 1):
        rounds = _frozen(study, ctx, number)
        if rounds is None:
            progress.note(round_skipped_text(number))
            return
        runs = round_runs(config, rounds, number)
        queue_missing(ctx, runs)
        if study_rounds(study, study.get_trials(deepcopy=False), config, search_done=True).number > number:
            continue  # this round's runs are all held already
        progress.note(round_started_text(number, rounds, round_seeds(config, number)))
        train_queued(ctx, progress)


def _frozen(study: optuna.Study, ctx: StudyContext, number: int) -> Rounds | None:
    """What the rounds froze, with round `number`'s schedules chosen now and stored if they were not yet; None when
    there is nothing to confirm (no schedule beside uniform has finished)."""
    rounds = Rounds.stored(study)
    if rounds.pick if number == 2 else rounds.contenders:
        return rounds
    ranking = schedule_ranking(study.get_trials(deepcopy=False), ctx.config)
    if number == 1:
        rounds = Rounds(contenders_of(ranking, ctx.config))
        if not rounds.contenders:
            return None
    else:
        rounds = Rounds(rounds.contenders, pick_of(ranking, rounds.contenders))
    study.set_user_attr(ATTR_ROUNDS, rounds.to_json())
    return rounds
