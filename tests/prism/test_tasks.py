import math

import numpy as np
import pytest
import torch

from prism import ModelConfig, Schedule, TrainConfig, Trainer, load_corpus, train_batches, val_batches
from prism.data import CorpusError, check_windows
from prism.tasks import IGNORE, CountTask, MixTask, OffsetTask, PointerTask, RecallTask, TaskError, parse_task

TASK = "mqar:pairs=4,key_len=2,keys=4,values=8"


def test_a_sequence_lists_its_pairs_then_asks_them_and_scores_only_the_answers():
    task = parse_task(TASK)
    x, y = task.sample(np.random.default_rng(0), 3, 32)
    assert x.shape == y.shape == (3, 32)
    unit = task.key_len + 1
    for row, target in zip(x, y):
        pairs = {tuple(row[i : i + task.key_len]): row[i + task.key_len] for i in range(0, task.context_length, unit)}
        assert len(pairs) == task.pairs  # keys differ within a sequence
        assert all(k < task.keys for key in pairs for k in key) and all(v >= task.keys for v in pairs.values())
        answered = np.flatnonzero(target != IGNORE)
        assert len(answered) == task.queries(32) == (33 - task.context_length) // unit
        for at in answered:  # the target after a query's last key token is that key's value
            assert target[at] == pairs[tuple(row[at - task.key_len + 1 : at + 1])]
        assert target[: task.context_length].tolist() == [IGNORE] * task.context_length


def test_a_pointer_query_spells_a_table_index_in_digits_and_its_answer_is_the_symbol_there():
    task = parse_task("pointer:digits=2,base=3,symbols=5")
    x, y = task.sample(np.random.default_rng(0), 3, 32)
    assert task.context_length == 9 and task.vocab_size == 8 and task.queries(32) == 8
    for row, target in zip(x, y):
        table = row[:9]
        assert table.max() < 5
        answered = np.flatnonzero(target != IGNORE)
        assert len(answered) == 8 and target[:9].tolist() == [IGNORE] * 9
        for at in answered:
            high, low = row[at - 1] - 5, row[at] - 5
            assert 0 <= high < 3 and 0 <= low < 3 and target[at] == table[3 * high + low]


def test_a_count_answer_is_how_often_its_symbol_came_before():
    task = CountTask(symbols=3, cap=3)
    x, y = task.sample(np.random.default_rng(0), 4, 21)
    for row, target in zip(x, y):
        answered = np.flatnonzero(target != IGNORE)
        assert answered.tolist() == list(range(0, 21, 2))
        for at in answered:
            before = np.sum(row[:at:2] == row[at])
            assert target[at] == 3 + min(before, 2)  # counts from 2 on are written as 2 (cap - 1)


def test_a_mix_is_pointer_or_count_sequences_in_separate_tokens():
    task = MixTask(digits=1, base=4, symbols=4, count_symbols=3, cap=3)
    x, y = task.sample(np.random.default_rng(0), 64, 12)
    counting = x[:, 0] >= 8
    assert 0 < counting.sum() < 64 and task.vocab_size == 14
    assert x[counting].min() >= 8 and x[~counting].max() < 8 and y[~counting].max() < 4  # pointer answers are symbols
    assert set(y[counting][y[counting] != IGNORE].tolist()) <= {11, 12, 13}
    assert 0 < task.floor(x, y) < math.log(4)


def test_an_offset_group_answers_with_the_word_of_the_symbols_its_markers_aim_at():
    task = parse_task("offset:offsets=3,symbols=3,group=2")
    x, y = task.sample(np.random.default_rng(0), 4, 35)
    assert task.blank == 6 and task.vocab_size == 3 + 3 + 1 + 9 and task.queries(35) == 6
    for row, target in zip(x, y):
        units = np.append(row, target[-1]).reshape(12, 3)  # the inputs and the last answer: twelve whole units
        assert np.flatnonzero(target != IGNORE).tolist() == list(range(4, 36, 6))
        aimed = []
        for i, (symbol, marker, place) in enumerate(units):
            j = marker - 3 + 1
            assert symbol < 3 and 1 <= j <= min(3, i + 1)
            aimed.append(units[i + 1 - j, 0])
            assert place == (7 + 3 * aimed[-2] + aimed[-1] if i % 2 else 6)  # the blank, then the group's word
            assert i % 2 == 0 or target[3 * i + 1] == place


def test_the_offset_floor_knows_the_window_but_not_the_aim():
    task = OffsetTask(offsets=4, symbols=2)
    x, y = task.sample(np.random.default_rng(1), 400, 60)
    assert 0 < task.floor(x, y) < math.log(2)  # early units reach fewer symbols, some windows repeat one
    pairs = OffsetTask(offsets=4, symbols=2, group=2)
    x, y = pairs.sample(np.random.default_rng(1), 400, 60)
    assert pairs.floor(x, y) == pytest.approx(2 * task.floor(*task.sample(np.random.default_rng(1), 400, 60)), rel=0.1)


@pytest.mark.parametrize(
    "name", [TASK, "pointer:digits=2,base=3,symbols=5", "count:symbols=4", "mix:base=4,symbols=4", "offset:offsets=4,group=2"]
)
def test_training_batches_depend_on_the_seed_only_and_validation_batches_are_fixed(name):
    corpus = load_corpus(name)
    first, again = (next(train_batches(corpus, 32, 4, seed=5)) for _ in range(2))
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert not torch.equal(next(train_batches(corpus, 32, 4, seed=6))[0], first[0])
    a, b = val_batches(corpus, 32, 4, 3), val_batches(corpus, 32, 4, 3)
    assert len(a) == 3 and all(torch.equal(xa, xb) and torch.equal(ya, yb) for (xa, ya), (xb, yb) in zip(a, b))
    assert not any(torch.equal(a[0][0], x) for x, _ in (next(train_batches(corpus, 32, 4, seed=s)) for s in range(5)))


def test_a_task_corpus_names_its_settings_in_its_fingerprint():
    corpus = load_corpus(TASK)
    assert corpus.vocab_size == 12 and corpus.task == RecallTask(pairs=4, key_len=2, keys=4, values=8)
    assert load_corpus("mqar").fingerprint == load_corpus("mqar:pairs=8").fingerprint  # the defaults, spelled out
    assert load_corpus("mqar:pairs=9").fingerprint != load_corpus("mqar").fingerprint


@pytest.mark.parametrize(
    "name, words",
    [
        ("mqar:pairs=x", "pairs='x' is not an integer"),
        ("mqar:pears=4", "SETTING one of pairs, key_len, keys, values"),
        ("mqar:pairs=0", "pairs must be at least 1"),
        ("mqar:pairs=20,keys=4", "raise keys or key_len"),
        ("mqar:fused=2", "fused must be 0 or 1"),
        ("pointer:pairs=2", "SETTING one of digits, base, symbols"),
        ("pointer:base=0", "base must be at least 1"),
        ("mix:cap=0", "count: cap must be at least 1"),
        ("offset:offsets=0", "offsets must be at least 1"),
        ("offset:group=0", "group must be at least 1"),
    ],
)
def test_a_bad_task_setting_is_named_with_its_fix(name, words):
    with pytest.raises(CorpusError, match=words):
        load_corpus(name)
    with pytest.raises(TaskError, match=words):
        parse_task(name)


def test_a_name_of_no_task_is_a_corpus_path():
    with pytest.raises(CorpusError, match="not a built-in corpus"):
        load_corpus("maze:pairs=2")
    with pytest.raises(TaskError, match="unknown task 'maze'; use one of mqar, pointer, count, mix, offset"):
        parse_task("maze:pairs=2")


def test_a_block_without_room_for_a_query_is_refused_before_training():
    with pytest.raises(CorpusError, match="block_size >= 14"):
        check_windows(load_corpus(TASK), 13, 8)
    with pytest.raises(CorpusError, match="own tokens"):
        load_corpus(TASK, tokenizer="bpe")


def test_the_floor_is_a_guess_among_the_sequences_values():
    task = RecallTask(pairs=4, key_len=1, keys=8, values=2)
    x, y = task.sample(np.random.default_rng(1), 200, 20)
    assert 0 < task.floor(x, y) < math.log(2)  # a sequence whose pairs repeat a value guesses that value more often
    pointer = PointerTask(digits=1, base=4, symbols=2)
    x, y = pointer.sample(np.random.default_rng(1), 200, 20)
    assert 0 < pointer.floor(x, y) < math.log(2)


def test_a_fused_pair_is_one_token_that_names_the_last_key_token_and_the_value():
    task = parse_task("mqar:pairs=3,key_len=2,keys=3,values=4,fused=1")
    x, y = task.sample(np.random.default_rng(0), 2, 20)
    assert task.vocab_size == 3 + 4 + 12 and task.context_length == 6
    for row, target in zip(x, y):
        pairs = {}
        for first, joined in row[:6].reshape(3, 2):
            last, value = divmod(joined - 7, 4)
            pairs[first, last] = 3 + value
        for at in np.flatnonzero(target != IGNORE):
            assert target[at] == pairs[row[at - 1], row[at]]


def test_the_loss_is_per_answer_token_and_training_learns_the_task():
    """A model that knows nothing scores about ln(vocab) per answer; a few hundred steps of a small pointer task go
    far below the floor of guessing among the table's symbols, so the loss measures the look-up, not the rest."""
    corpus = load_corpus("pointer:digits=1,base=8,symbols=8")
    model = ModelConfig(vocab_size=corpus.vocab_size, n_layer=1, d_model=32, block_size=24, dh_min=4)
    train = TrainConfig(steps=200, batch_size=32, lr=1e-2, warmup_steps=20, eval_every=200, eval_batches=2)
    torch.set_num_threads(1)
    trainer = Trainer(model, Schedule.uniform(8, 1), train, corpus)  # many narrow heads: the fastest learner measured
    assert abs(trainer.evaluate() - math.log(corpus.vocab_size)) < 0.3
    x, y = (np.concatenate([b[i].numpy() for b in trainer.val]) for i in (0, 1))
    assert trainer.run_to_next_eval().val_loss < 0.5 * corpus.task.floor(x, y)
