# SPDX-License-Identifier: GPL-2.0
"""pytest fixtures shared by srnic's VM suites."""
import os

import pytest

import harness


def pytest_configure(config):
    if not os.environ.get("SRNIC_VM"):
        raise pytest.UsageError(
            "srnic's tests/ suites run inside the VM: use `make vm-test` "
            "or scripts/run-vm-suites.sh tests/test_NAME.py")


@pytest.fixture
def srnic():
    """srnic.ko loaded; every srnic link it made removed afterwards."""
    if not harness.module_loaded():
        harness.run("modprobe", "srnic")
    before = set(harness.rdma_links())
    yield
    for name in set(harness.rdma_links()) - before:
        harness.link_delete(name, check=False)


@pytest.fixture
def veth():
    pair = harness.Veth()
    yield pair
    pair.close()
