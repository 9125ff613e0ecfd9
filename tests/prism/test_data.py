import torch

from prism import load_corpus, train_batches, val_batches
from prism.data import Corpus


def test_builtin_corpus_is_real_text_and_large_enough():
    corpus = load_corpus("shakespeare")
    assert len(corpus.tokens) >= 5_000_000
    text = corpus.tokens[:200_000].tobytes().decode("ascii")
    assert "HAMLET" in corpus.tokens.tobytes().decode("ascii") and "\r" not in text
    assert len(corpus.val) == len(corpus.tokens) - corpus.split


def test_fingerprint_is_stable_and_sensitive():
    corpus = load_corpus("shakespeare")
    again = Corpus("shakespeare", corpus.tokens.copy(), 256)
    assert again.fingerprint == corpus.fingerprint
    assert Corpus("x", corpus.tokens, 256, val_fraction=0.2).fingerprint != corpus.fingerprint
    changed = corpus.tokens.copy()
    changed[1000] ^= 1
    assert Corpus("shakespeare", changed, 256).fingerprint != corpus.fingerprint


def test_validation_batches_are_fixed_and_from_the_val_split():
    corpus = load_corpus("shakespeare")
    a, b = val_batches(corpus, 32, 4, 3), val_batches(corpus, 32, 4, 3)
    assert len(a) == 3
    for (xa, ya), (xb, yb) in zip(a, b):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
        assert torch.equal(xa[:, 1:], ya[:, :-1])  # targets are inputs shifted by one
    val_text = corpus.val.tobytes()
    assert bytes(a[0][0][0].tolist()) in val_text


def test_training_order_depends_on_seed_only():
    corpus = load_corpus("shakespeare")
    first = [next(train_batches(corpus, 16, 2, seed=5))[0] for _ in range(2)]
    assert torch.equal(first[0], first[1])
    assert not torch.equal(next(train_batches(corpus, 16, 2, seed=6))[0], first[0])
