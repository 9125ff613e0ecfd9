"""The fast tier's per-test time limit comes from a measured budget: the CPU share the suite gets right now."""

import os
import subprocess
import sys

import pytest

from tests.conftest import FAST_BUDGET_S, MAX_SLOWDOWN, fast_timeout, measured_slowdown


def test_the_limit_is_the_budget_scaled_by_the_measured_slowdown_and_bounded():
    assert fast_timeout(1.0) == FAST_BUDGET_S and fast_timeout(0.7) == FAST_BUDGET_S  # never below the budget
    assert fast_timeout(2.5) == round(2.5 * FAST_BUDGET_S)
    assert fast_timeout(100.0) == MAX_SLOWDOWN * FAST_BUDGET_S  # a hang still ends


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_a_core_shared_with_a_busy_process_measures_about_twice_as_slow():
    """Real load: this process and a busy one pinned to one core each get about half of it."""
    core = min(os.sched_getaffinity(0))
    previous = os.sched_getaffinity(0)
    spin = f"import os; os.sched_setaffinity(0, {{{core}}}); print('spinning', flush=True)\nwhile True: pass"
    busy = subprocess.Popen([sys.executable, "-c", spin], stdout=subprocess.PIPE, text=True)
    try:
        assert busy.stdout.readline() == "spinning\n"
        os.sched_setaffinity(0, {core})
        alone_or_shared = measured_slowdown(0.6)
    finally:
        os.sched_setaffinity(0, previous)
        busy.kill()
        busy.wait()
    assert alone_or_shared >= 1.6, alone_or_shared
