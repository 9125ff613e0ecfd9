import numpy as np
import torch

from prism import corpus_vocab, load_corpus, train_batches, val_batches
from prism.data import Corpus


def test_builtin_corpus_is_real_text_and_large_enough():
    corpus = load_corpus("shakespeare")
    assert len(corpus.tokens) >= 5_000_000
    text = corpus.tokens[:200_000].tobytes().decode("ascii")
    assert "HAMLET" in corpus.tokens.tobytes().decode("ascii") and "\r" not in text
    assert len(corpus.train) + len(corpus.val) == len(corpus.tokens) and len(corpus.train) == int(len(corpus.tokens) * 0.9)


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


def test_a_gigabyte_token_file_stays_on_disk(tmp_path):
    """A nanoGPT token file is mapped, never copied: loading it, its fingerprint and a study's batches keep the
    process's peak resident memory within 300 MB of what it held before (a copy would add 1 GB, the old bytes-for-the-
    hash copy another)."""
    import subprocess
    import sys

    tokens = np.memmap(tmp_path / "train.bin", dtype=np.uint16, mode="w+", shape=(1 << 29,))  # 1 GiB
    for start in range(0, len(tokens), 1 << 26):
        tokens[start : start + (1 << 26)] = np.arange(1 << 26, dtype=np.uint64) % 50257
    tokens.flush()
    del tokens
    code = (
        "import re, torch\n"
        "from prism.data import load_corpus, train_batches, val_batches\n"
        "def kb(field):\n"
        "    return int(re.search(field + r':\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n"
        "before = kb('VmRSS')\n"
        f"corpus = load_corpus({str(tmp_path / 'train.bin')!r}, vocab_size=50257)\n"
        "fingerprint = corpus.fingerprint\n"
        "batches = train_batches(corpus, 256, 16, seed=0)\n"
        "for _ in range(20):\n"
        "    next(batches)\n"
        "val_batches(corpus, 256, 16, 4)\n"
        "print(len(corpus.train) + len(corpus.val), fingerprint, (kb('VmHWM') - before) // 1024)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    n, fingerprint, grew_mb = done.stdout.split()
    assert int(n) == 1 << 29 and len(fingerprint) == 16
    assert int(grew_mb) < 300, f"peak resident memory grew by {grew_mb} MB"


def test_the_vocab_a_corpus_will_have_is_known_without_reading_it(tmp_path):
    """corpus_vocab is what a study's model embeds unless it says otherwise: it must be what load_corpus gives."""
    (tmp_path / "ids.bin").write_bytes(np.arange(1000, dtype=np.uint16).tobytes())
    for name, options in (("shakespeare", {}), ("mqar:pairs=4,key_len=2", {}), (str(tmp_path / "ids.bin"), {"vocab_size": 1000})):
        assert corpus_vocab(name, **options) == load_corpus(name, **options).vocab_size
    assert (corpus_vocab("shakespeare"), corpus_vocab("x.txt", "bpe"), corpus_vocab("x.txt", "bpe", 512)) == (256, 4096, 512)
