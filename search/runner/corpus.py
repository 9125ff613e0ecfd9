"""The corpus a study trains on, loaded and checked once up front by whatever is about to train (a command that drives a
study, search.study.lifecycle; `train`)."""

from __future__ import annotations

from prism import CorpusError, load_corpus
from search.config import ConfigError, StudyConfig


def corpus_fingerprint(config: StudyConfig) -> str:
    """Load the corpus before Ray or the database, so a bad corpus fails here with one line; returns its fingerprint."""
    try:
        corpus = load_corpus(config.data.corpus, config.data.val_fraction, **config.data.corpus_options())
    except CorpusError as e:
        raise ConfigError(f"data.corpus: {e}") from None
    if corpus.vocab_size > config.model.vocab_size:
        raise ConfigError(
            f"model.vocab_size={config.model.vocab_size} is smaller than the corpus vocab {corpus.vocab_size}; "
            f"set model.vocab_size = {corpus.vocab_size}"
        )
    return corpus.fingerprint
