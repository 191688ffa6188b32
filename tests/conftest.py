"""Fixtures shared by the unit tests (the environment for every run is set in the root conftest.py)."""

import pytest
import torch


@pytest.fixture(scope="session")
def ptb_train():
    from lmlib.data import load_ptb

    return load_ptb("train")


@pytest.fixture
def one_thread():
    """One torch thread for the test, restored after: small models train several times faster on one thread
    than on two cores that other work is also using."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
