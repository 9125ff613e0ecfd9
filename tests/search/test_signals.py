"""A real SIGTERM whose KeyboardInterrupt lands in a finalizer, where Python can only print it ("Exception ignored
in ..."; seen in a `ray job stop` test, inside SQLAlchemy's garbage-collection callback): it is raised anyway."""

import gc
import os
import signal

import pytest

from search.signals import raise_if_interrupted, sigterm_as_ctrl_c

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


class _SignalledInFinalizer:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10_000):  # the handler runs here, inside the finalizer, which swallows its KeyboardInterrupt
            pass


def _swallow_one_sigterm() -> None:
    gc.disable()  # the finalizer runs exactly where the object is dropped
    try:
        _SignalledInFinalizer()
    finally:
        gc.enable()


def _loop_turn(reached: list[str]) -> None:
    with sigterm_as_ctrl_c():
        _swallow_one_sigterm()
        reached.append("after the finalizer")  # the swallowed signal did not stop the block here...
        raise_if_interrupted()  # ...the next check does
        reached.append("after the check")


def test_a_loop_check_raises_the_interrupt_a_finalizer_swallowed():
    reached: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        _loop_turn(reached)
    assert reached == ["after the finalizer"]
    raise_if_interrupted()  # delivered: nothing is left pending


def test_a_swallowed_interrupt_surfaces_when_its_block_ends_at_the_latest():
    def block() -> None:
        with sigterm_as_ctrl_c():
            _swallow_one_sigterm()

    with pytest.raises(KeyboardInterrupt):
        block()
    raise_if_interrupted()
