# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --peer --timeout 900
"""RC traffic between two kernels: this VM and a peer VM on one virtual
wire (tests/peer.py), each with one RDMA device in its initial namespace,
srnic or that kernel's rxe (srnic against srnic, srnic against an rxe
host, an rxe host against srnic), the way srnic hosts meet rxe hosts and
hardware on a fabric: every packet crosses a real wire between two
kernels, with its own network stacks, timers and CPUs.

ibv_rc_pingpong with -c (every byte checked; its server on the peer, then
here) and perftest's six RC tools (server on the peer, client here). The
peer's end runs through tests/peer.py's RemoteEnd, so the runs are
tests/perftools.py's, as in test_rc_tools.
The wire is slow (QEMU's stream netdev, one vCPU per guest: about 30 MB/s
for TCP, a quarter of a millisecond for a UDP round trip), so the runs are
short.
"""
import itertools

import pytest

import peer as peer_vm
from perftools import perftest_argv, run_pair

pytestmark = pytest.mark.timeout(300)

TOOLS = ["ib_send_bw", "ib_write_bw", "ib_read_bw",
         "ib_send_lat", "ib_write_lat", "ib_read_lat"]
ports = itertools.count(18800)


@pytest.fixture(scope="module")
def topologies(peer, two_kernel_devices):
    """{server side: the two VMs' tests/topology.py Topology}, the server
    end (a) on the peer ("peer") or here ("local")."""
    return {server: peer_vm.two_kernel_topology(peer, *two_kernel_devices,
                                                server=server)
            for server in ("peer", "local")}


def run_tool(peer, topo, argv_of, tmp_path, tag, timeout=120):
    """argv_of(end, port) run with its server on topo's end a and its
    client on end b; the client's output."""
    port = next(ports)
    ready = None
    if isinstance(topo.a, peer_vm.RemoteEnd):
        def ready(_proc):
            return peer.listening(port)
    out, _ = run_pair(topo, argv_of(topo.a, port), argv_of(topo.b, port),
                      port, tmp_path, tag, timeout=timeout, ready=ready)
    return out


@pytest.mark.parametrize("server,size,events",
                         [("peer", 4096, False), ("local", 65536, True)],
                         ids=["4k-poll-peer-server",
                              "64k-events-local-server"])
def test_rc_pingpong_between_two_kernels(peer, topologies, server, size,
                                         events, tmp_path):
    iters = 50

    def argv(end, port):
        return (["ibv_rc_pingpong", "-d", end.name, "-g", str(end.gid_index),
                 "-s", str(size), "-n", str(iters), "-r", "16", "-p",
                 str(port), "-c"] + (["-e"] if events else []))

    out = run_tool(peer, topologies[server], argv, tmp_path,
                   f"pingpong-{size}-{server}")
    assert f"{iters} iters" in out, out


# make check: a bandwidth tool of each kind and a latency one (all six in
# make check PLATFORM=NAME).
@pytest.mark.check_subset(tool=["ib_write_bw", "ib_read_bw", "ib_send_lat"])
@pytest.mark.parametrize("tool", TOOLS)
def test_perftest_between_two_kernels(peer, topologies, tool, tmp_path):
    size = 65536 if tool.endswith("_bw") else 8
    iters = 50 if tool.endswith("_bw") else 20

    def argv(end, port):
        return perftest_argv(tool, end, size, iters, port)

    out = run_tool(peer, topologies["peer"], argv, tmp_path,
                   f"{tool}-{size}")
    # The results table: a line starting with the message size.
    assert any(line.split()[:1] == [str(size)] for line in out.splitlines()), \
        out
