import signal

import pytest
import torch

FAST_TIMEOUT_S = 60  # per test outside the e2e tier; e2e tests keep pyproject's `timeout`


def pytest_configure(config):
    """A suite started in the background (`cmd &` in a shell without job control, as `nohup` runs are) inherits
    SIGINT ignored, and so would every process it starts; the interrupt tests need Ctrl-C as a terminal gives it."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items):
    """A fast-tier test that hangs or grows slow fails on its own name instead of stretching the tier: it belongs in e2e.
    Tests marked `long` run first: on two workers a tier then never ends with one worker running one of them alone
    (`test_readme`'s, the longest, is collected last)."""
    for item in items:
        if item.get_closest_marker("e2e") is None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(FAST_TIMEOUT_S))
    items.sort(key=lambda item: item.get_closest_marker("long") is None)  # stable: the rest keep their order


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """Tiny tensors run fastest on one thread here; two threads make each small op pay pool overhead."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
