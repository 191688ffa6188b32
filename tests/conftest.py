"""Fixtures shared by the unit tests (the environment for every run is set in the root conftest.py)."""

import pytest


@pytest.fixture(scope="session")
def ptb_train():
    from lmlib.data import load_ptb

    return load_ptb("train")
