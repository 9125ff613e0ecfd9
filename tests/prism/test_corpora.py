"""User corpora: text files/folders/globs, nanoGPT token files, datasets save_to_disk, local BPE; their errors."""

import multiprocessing
import os

import numpy as np
import pytest

from prism import CorpusError, load_corpus, val_batches
from prism.data import _bpe_path

TEXT = "".join(f"line {i}: the quick brown fox jumps over the lazy dog {i % 7}\n" for i in range(400))


@pytest.fixture(autouse=True)
def _fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("PRISM_CACHE_DIR", str(tmp_path / "cache"))
    load_corpus.cache_clear()
    yield
    load_corpus.cache_clear()


def test_text_file_folder_and_glob(tmp_path):
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "a.txt").write_text("alpha " * 100)
    (tmp_path / "books" / "b.txt").write_text("beta " * 100)
    (tmp_path / "books" / ".hidden").write_text("never")
    (tmp_path / "books" / "notes.md").write_text("gamma " * 10)
    one = load_corpus(str(tmp_path / "books" / "a.txt"))
    assert one.tokens.tobytes() == ("alpha " * 100).encode() and one.vocab_size == 256
    folder = load_corpus(str(tmp_path / "books")).tokens.tobytes()
    assert folder == b"\n".join([("alpha " * 100).encode(), ("beta " * 100).encode(), ("gamma " * 10).encode()])
    assert b"never" not in folder
    assert load_corpus(str(tmp_path / "books" / "*.txt")).tokens.tobytes() == b"\n".join(
        [("alpha " * 100).encode(), ("beta " * 100).encode()]
    )


def test_nanogpt_bin_file_and_train_val_pair(tmp_path):
    ids = (np.arange(5000) * 7919 % 50257).astype(np.uint16)
    ids.tofile(tmp_path / "all.bin")
    corpus = load_corpus(str(tmp_path / "all.bin"), vocab_size=50257)
    assert np.array_equal(corpus.tokens, ids) and corpus.vocab_size == 50257
    assert len(corpus.val) == 500  # split by val_fraction=0.1
    pair = tmp_path / "shards"
    pair.mkdir()
    ids[:4000].astype(np.uint32).tofile(pair / "train.bin")
    ids[4000:].astype(np.uint32).tofile(pair / "val.bin")
    split = load_corpus(str(pair), vocab_size=50257, token_dtype="uint32")
    assert np.array_equal(split.train, ids[:4000]) and np.array_equal(split.val, ids[4000:])
    assert split.fingerprint != corpus.fingerprint  # same ids, different split
    x, _y = val_batches(split, 16, 2, 1)[0]
    assert x.max() < 50257 and np.array_equal(x[0].numpy(), ids[4000:4016])


def test_hf_dataset_saved_to_disk(tmp_path):
    datasets = pytest.importorskip("datasets")
    lines = TEXT.splitlines()
    dd = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"text": lines[:300]}),
            "validation": datasets.Dataset.from_dict({"text": lines[300:]}),
        }
    )
    dd.save_to_disk(str(tmp_path / "ds"))
    corpus = load_corpus(str(tmp_path / "ds"))
    assert corpus.train.tobytes() == "\n".join(lines[:300]).encode()
    assert corpus.val.tobytes() == "\n".join(lines[300:]).encode()
    datasets.Dataset.from_dict({"input_ids": [[1, 2, 3], [4, 5]] * 50}).save_to_disk(str(tmp_path / "ids"))
    ids = load_corpus(str(tmp_path / "ids"), vocab_size=6)
    assert ids.tokens[:5].tolist() == [1, 2, 3, 4, 5] and len(ids.tokens) == 250


def test_bpe_is_trained_on_the_training_part_and_cached(tmp_path):
    pytest.importorskip("tokenizers")
    path = tmp_path / "t.txt"
    path.write_text(TEXT)
    corpus = load_corpus(str(path), tokenizer="bpe", vocab_size=300)
    assert corpus.vocab_size == 300 and corpus.tokens.max() < 300
    assert len(corpus.tokens) < len(TEXT) / 2  # merges compress the repetitive text
    fit_on = TEXT.encode()[: int(len(TEXT) * 0.9)]
    cached = _bpe_path(fit_on, 300)
    assert cached.is_file()
    from tokenizers import Tokenizer

    decoded = Tokenizer.from_file(str(cached)).decode(corpus.tokens[:50].tolist())
    assert len(decoded) > 50 and TEXT.startswith(decoded)
    stamp = cached.stat().st_mtime_ns
    load_corpus.cache_clear()
    again = load_corpus(str(path), tokenizer="bpe", vocab_size=300)
    assert np.array_equal(again.tokens, corpus.tokens) and cached.stat().st_mtime_ns == stamp


def _load_bpe_and_report(path: str, cache: str, barrier, results) -> None:
    os.environ["PRISM_CACHE_DIR"] = cache
    barrier.wait()  # all workers ask for the same uncached tokenizer at once
    corpus = load_corpus(path, tokenizer="bpe", vocab_size=300)
    fit_on = TEXT.encode()[: int(len(TEXT) * 0.9)]
    results.put((corpus.tokens.tobytes(), _bpe_path(fit_on, 300).stat().st_ino))


def test_bpe_trained_once_when_workers_start_together(tmp_path):
    """Workers of a new study start at the same moment on an uncached corpus: one trains, the rest read its file."""
    pytest.importorskip("tokenizers")
    (tmp_path / "t.txt").write_text(TEXT)
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(3), ctx.Queue()
    procs = [
        ctx.Process(target=_load_bpe_and_report, args=(str(tmp_path / "t.txt"), os.environ["PRISM_CACHE_DIR"], barrier, results))
        for _ in range(3)
    ]
    for p in procs:
        p.start()
    reports = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join()
    assert all(p.exitcode == 0 for p in procs)
    assert len({tokens for tokens, _ in reports}) == 1
    assert len({inode for _, inode in reports}) == 1  # a second training would have replaced the file
    assert not [f.name for f in (tmp_path / "cache" / "tokenizers").iterdir() if ".tmp" in f.name]


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing", "not found"),
        ("empty", "is empty"),
        ("vocab", r"token id 999 .*>= vocab_size=500"),
        ("undeclared", "declare the vocab_size"),
        ("short_val", "shorter than the sequence length block_size=64"),
    ],
)
def test_one_line_errors(tmp_path, case, message):
    np.arange(1000, dtype=np.uint16).tofile(tmp_path / "x.bin")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "short.txt").write_text("x" * 300)
    load = {
        "missing": lambda: load_corpus(str(tmp_path / "nope.txt")),
        "empty": lambda: load_corpus(str(tmp_path / "empty.txt")),
        "vocab": lambda: load_corpus(str(tmp_path / "x.bin"), vocab_size=500),
        "undeclared": lambda: load_corpus(str(tmp_path / "x.bin")),
        "short_val": lambda: val_batches(load_corpus(str(tmp_path / "short.txt")), 64, 2, 1),
    }[case]
    with pytest.raises(CorpusError, match=message) as info:
        load()
    assert "\n" not in str(info.value)
