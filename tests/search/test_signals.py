"""A real SIGTERM whose KeyboardInterrupt lands in a finalizer, where Python can only print it ("Exception ignored
in ..."; seen in a `ray job stop` test, inside SQLAlchemy's garbage-collection callback): it is raised anyway, and
not printed as a crash."""

import gc
import os
import signal

import pytest

from search.signals import interrupts_held, raise_if_interrupted, sigterm_as_ctrl_c


class _SignalledInFinalizer:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10_000):  # the handler runs here, inside the finalizer, which swallows its KeyboardInterrupt
            pass


def swallow_one_sigterm() -> None:
    """A real SIGTERM whose KeyboardInterrupt a finalizer swallows (tests/search/runner/test_resilience.py too)."""
    gc.disable()  # the finalizer runs exactly where the object is dropped
    try:
        _SignalledInFinalizer()
    finally:
        gc.enable()


def _loop_turn(reached: list[str]) -> None:
    with sigterm_as_ctrl_c():
        swallow_one_sigterm()
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
            swallow_one_sigterm()

    with pytest.raises(KeyboardInterrupt):
        block()
    raise_if_interrupted()


def test_the_dashboard_server_stops_at_its_next_turn_not_when_it_is_shut_down():
    import threading
    import time

    from search.dashboard.app import make_server_for

    server = make_server_for("sqlite://", port=0, app=lambda environ, start_response: [])

    def serve() -> None:
        with sigterm_as_ctrl_c():
            swallow_one_sigterm()
            server.serve_forever()

    backstop = threading.Timer(10, server.shutdown)  # without the check, serve_forever would end only here
    backstop.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            serve()
    finally:
        backstop.cancel()
        server.server_close()
    assert time.monotonic() - started < 5  # serve_forever's turn (0.5 s), not the backstop


class _FailingInFinalizer:
    def __del__(self):
        raise ValueError("a real bug in a finalizer")


def test_a_swallowed_interrupt_prints_no_traceback_but_other_finalizer_errors_still_do(monkeypatch):
    """An orderly stop must not print "Exception ignored in ... Traceback" (the crash banner users and the CLI test
    look for); a finalizer's own bug is still reported."""
    import sys

    reported: list[BaseException | None] = []

    def record(unraisable) -> None:
        reported.append(unraisable.exc_value)

    def block() -> None:
        with sigterm_as_ctrl_c():
            gc.disable()
            try:
                _FailingInFinalizer()
                _SignalledInFinalizer()
            finally:
                gc.enable()

    monkeypatch.setattr(sys, "unraisablehook", record)
    with pytest.raises(KeyboardInterrupt):
        block()
    assert [type(e) for e in reported] == [ValueError]
    assert sys.unraisablehook is record  # the hook before the block is back


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_held_interrupt_lets_the_block_finish_then_stops(signum):
    reached: list[str] = []

    def start_up() -> None:
        with interrupts_held():
            os.kill(os.getpid(), signum)
            for _ in range(10_000):  # the handler runs here: it holds the signal
                pass
            reached.append("the block's end")

    with pytest.raises(KeyboardInterrupt):
        start_up()
    assert reached == ["the block's end"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handlers before the block are back


def test_a_second_interrupt_stops_a_held_block_at_once():
    reached: list[str] = []

    def start_up() -> None:
        with interrupts_held():
            for _ in range(2):
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(10_000):
                    pass
                reached.append("after a signal")

    with pytest.raises(KeyboardInterrupt):
        start_up()
    assert reached == ["after a signal"]
