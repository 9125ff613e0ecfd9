import signal
import time

import pytest
import torch

FAST_BUDGET_S = 60  # per test outside the e2e tier, with the CPU to itself; e2e tests keep pyproject's `timeout`
MAX_SLOWDOWN = 5  # however loaded the machine, a hung fast test ends within 5 budgets


def measured_slowdown(sample_s: float = 0.3) -> float:
    """How much slower than its own CPU time this process runs right now: the wall time of a single-threaded busy
    loop over the CPU time it got (1 on an idle machine, about 3 where three busy processes share each core)."""
    wall, cpu = time.perf_counter(), time.thread_time()
    while time.perf_counter() - wall < sample_s:
        sum(range(1000))
    return (time.perf_counter() - wall) / max(time.thread_time() - cpu, 1e-6)


def fast_timeout(slowdown: float) -> int:
    """A fast test's limit: the budget, stretched by the measured slowdown (never below it), bounded."""
    return round(FAST_BUDGET_S * min(MAX_SLOWDOWN, max(1.0, slowdown)))


_slowdown: list[float] = []  # measured once per pytest process (each xdist worker measures its own share)


def pytest_configure(config):
    """A suite started in the background (`cmd &` in a shell without job control, as `nohup` runs are) inherits
    SIGINT ignored, and so would every process it starts; the interrupt tests need Ctrl-C as a terminal gives it."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    _slowdown.append(measured_slowdown())


def pytest_report_header(config):
    return f"fast-tier limit: {fast_timeout(_slowdown[0])} s per test (budget {FAST_BUDGET_S} s x measured slowdown {_slowdown[0]:.2f})"


def pytest_collection_modifyitems(items):
    """A fast-tier test that hangs or grows slow fails on its own name instead of stretching the tier: it belongs in e2e.
    Its limit is FAST_BUDGET_S scaled by the slowdown measured when the session started, so a machine shared with
    other work (a CI runner, parallel sessions) does not fail tests that only waited for the CPU.
    Tests marked `long` run first: on two workers a tier then never ends with one worker running one of them alone
    (`test_readme`'s, the longest, is collected last)."""
    limit = fast_timeout(_slowdown[0])
    for item in items:
        if item.get_closest_marker("e2e") is None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(limit))
    items.sort(key=lambda item: item.get_closest_marker("long") is None)  # stable: the rest keep their order


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """Tiny tensors run fastest on one thread here; two threads make each small op pay pool overhead."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
