"""Stored studies as the commands find them, by name or every one in a storage: read as they are, changing nothing.

A study prism-search created carries its config (search.storage.records); another tool's studies in the same
storage are named but never read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, TypeVar

import optuna

from search.analysis.summary import Summary
from search.attrs import ATTR_CONFIG
from search.errors import ConfigError, PrismSearchError, StudyUnreadable
from search.storage import open_storage
from search.storage import unreadable_studies as stored_unreadable
from search.storage.records import find_study


def stored_study(name: str, url: str) -> optuna.Study:
    """Study `name` in the storage at `url` (no sampler of its own: a command that trains gives it the one its
    config asks for, search.study.create.reopen_study)."""
    return find_study(name, open_storage(url, create=False))


def stored_studies(url: str) -> tuple[list[optuna.Study], list[str]]:
    """Every study prism-search created in the storage at `url`, and the names of those another tool made there."""
    storage = open_storage(url, create=False)
    studies = storage.get_all_studies()  # names and attrs only: Optuna's study summaries read every trial of every study
    ours = [find_study(s.study_name, storage) for s in studies if _created(s.user_attrs)]
    return ours, [s.study_name for s in studies if not _created(s.user_attrs)]


class Summarised(Protocol):
    name: str

    def summary(self) -> Summary: ...


S = TypeVar("S", bound=Summarised)


def unreadable_studies(url: str) -> dict[str, str]:
    """Why each study of the storage at `url` whose own stored data (name, directions, attrs) cannot be decoded
    cannot be read, by name: `stored_studies` leaves them out."""
    return {s.study: s.text() for s in stored_unreadable(open_storage(url, create=False))}


def summaries(studies: Sequence[S]) -> tuple[list[tuple[S, Summary]], dict[str, str]]:
    """Each study with its summary, and why each study that cannot be summarised cannot (by name; its stored config
    fails validation, or a stored value of it cannot be decoded): one bad study never hides the others. A damaged
    database (any other StorageError) is every study's problem, and is raised."""
    good, bad = [], {}
    for study in studies:
        try:
            good.append((study, study.summary()))
        except (ConfigError, StudyUnreadable) as e:
            bad[study.name] = str(e)
    return good, bad


def is_stored(name: str, url: str) -> bool:
    """Whether study `name` was created in the storage at `url` (False where the storage cannot be read)."""
    try:
        return any(s.study_name == name and _created(s.user_attrs) for s in open_storage(url, create=False).get_all_studies())
    except PrismSearchError:
        return False


def _created(user_attrs: Mapping) -> bool:
    """Its config marks a study created: a driver killed before storing it left a study `run` makes anew."""
    return ATTR_CONFIG in user_attrs
