# SPDX-License-Identifier: GPL-2.0
"""pytest fixtures shared by srnic's VM suites."""
import contextlib
import os

import pytest

import harness


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "check_topologies(*ids): the topologies this test runs "
        "on in make check (tests/topology.py's CHECK_TOPOLOGIES)")
    config.addinivalue_line(
        "markers", "check_subset(*ids, **values): the parameters this test "
        "runs with in make check (ids, or param=[values])")
    config.addinivalue_line(
        "markers", "platform_subset(*ids, **values): the same, on make "
        "check's other platforms only (SRNIC_TEST_MATRIX=platform)")
    if not os.environ.get("SRNIC_VM"):
        raise pytest.UsageError(
            "srnic's tests/ suites run inside the VM: use `make vm-test` "
            "or scripts/run-vm-suites.sh tests/test_NAME.py")


def in_subset(item, marker):
    """Whether item's parameters are among a check_subset or
    platform_subset marker's: its id one of the marker's args, or each
    param the marker names valued as one of the marker's values."""
    callspec = getattr(item, "callspec", None)
    if marker is None or callspec is None:
        return True
    if marker.args and callspec.id not in marker.args:
        return False
    return all(callspec.params.get(k) in v for k, v in marker.kwargs.items())


def interop_param(item):
    """Whether one of item's parameters names an rxe interop topology."""
    import topology

    callspec = getattr(item, "callspec", None)
    return callspec is not None and any(
        v in topology.INTEROP_TOPOLOGIES for k, v in callspec.params.items()
        if k != "topology" and isinstance(v, str))


def pytest_collection_modifyitems(config, items):
    """SRNIC_TEST_MATRIX=check (make check's primary) or platform (its other
    platforms): each topology-parametrised test on its suite's or its own
    check topologies only (tests/topology.py), and a test marked
    check_subset (both) or platform_subset (platform) with those parameters
    only; on the platform matrix no test whose own parameter is an rxe
    interop topology."""
    import topology

    if topology.MATRIX == "full":
        return
    keep, drop = [], []
    for item in items:
        topo = getattr(item, "callspec", None) and \
            item.callspec.params.get("topology")
        marker = item.get_closest_marker("check_topologies")
        wanted = marker.args if marker else getattr(
            item.module, "CHECK_TOPOLOGIES", topology.CHECK_TOPOLOGIES)
        for t in wanted:
            assert t in topology.TOPOLOGIES, f"{item.nodeid}: no topology {t}"
        ok = not topo or topo in wanted
        ok = ok and in_subset(item, item.get_closest_marker("check_subset"))
        if topology.MATRIX == "platform":
            ok = ok and in_subset(item,
                                  item.get_closest_marker("platform_subset"))
            # rxe interop is the primary's: a suite's own srnic-to-rxe or
            # rxe-to-srnic parameter (not the topology fixture's, which
            # SRNIC_TEST_TOPOLOGIES narrows) runs there only.
            ok = ok and not interop_param(item)
        (keep if ok else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="module", autouse=True)
def stack_as_booted():
    """Each suite leaves the stack as the VM booted it, for the next suite
    in the same VM (scripts/run-vm-suites.sh)."""
    yield
    harness.reset_stack()


@pytest.fixture(scope="session")
def peer():
    """The peer VM's agent (tests/peer.py), for the suites that run with
    "# srnic-vm-run: --peer"; one connection for all of them in this VM
    (scripts/run-vm-suites.sh groups them), told to end, so the peer VM
    powers off, once they are done."""
    import peer as peer_vm

    p = peer_vm.Peer()
    yield p
    p.close()


@pytest.fixture(scope="module",
                params=[f"{a}-to-{b}" for a, b in harness.TWO_KERNEL_PAIRS])
def two_kernel_devices(request, peer):
    """(this VM's device, the peer's) for the "--peer" suites, of each of
    harness.TWO_KERNEL_PAIRS' kinds in turn, each the only RDMA device of
    its kernel, on the wire (tests/peer.py's make_device)."""
    import peer as peer_vm

    local_kind, peer_kind = request.param.split("-to-")
    local = peer_vm.make_device(local_kind, peer_vm.LOCAL_ADDR)
    remote = peer.python(
        "import peer; print(peer.make_device("
        f"{peer_kind!r}, {peer_vm.PEER_ADDR!r}))", timeout=180).stdout.strip()
    yield local, remote
    for name in harness.rdma_links():
        harness.run("rdma", "link", "delete", name, check=False,
                    timeout=120)


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


class RoceDevice:
    """An srnic device on a veth end with an IPv4 address, and the index
    and text of its RoCE v2 GID for that address."""

    def __init__(self, name, netdev, addr):
        self.name = name
        self.netdev = netdev
        self.addr = addr
        self.gid = harness.ipv4_gid(addr)
        # A list, so that index 0 counts as found.
        self.gid_index = harness.wait_for(
            lambda: [i for i, g, t in harness.port_gids(name)
                     if g == self.gid and t == "RoCE v2"],
            what=f"RoCE v2 GID of {addr}")[0]


@contextlib.contextmanager
def module_roce_device(name, addr):
    """An srnic device NAME on a veth end with ADDR/24, its RoCE v2 GID
    resolved (a RoceDevice), for a module-scoped fixture: a device per test
    costs seconds each in the VM. The device and the veth go afterwards."""
    if not harness.module_loaded():
        harness.run("modprobe", "srnic")
    veth = harness.Veth()
    try:
        harness.run("ip", "addr", "add", f"{addr}/24", "dev", veth.a)
        harness.link_add(name, veth.a)
        yield RoceDevice(name, veth.a, addr)
    finally:
        harness.link_delete(name, check=False)
        veth.close()


@pytest.fixture
def roce_dev(srnic, veth):
    """srnic0 on veth.a (198.18.0.1/24), its RoCE v2 GID resolved."""
    harness.run("ip", "addr", "add", "198.18.0.1/24", "dev", veth.a)
    harness.link_add("srnic0", veth.a)
    return RoceDevice("srnic0", veth.a, "198.18.0.1")
