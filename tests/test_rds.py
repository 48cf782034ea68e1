# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --timeout 600
"""RDS over RDMA on srnic: two AF_RDS sockets (Python's socket module) on
srnic0's address exchange messages through rds_rdma, the kernel's RDS
transport over RDMA, on one srnic device in init_net (the one-device
topology; RDS's rdma_cm is in init_net).

RDS picks its loopback transport only for 127/8; to srnic0's address it
connects an RC QP pair through rdma_cm on srnic0, which the test checks in
`rdma resource show qp`, with the CM's packets in srnic0's counters.
Every message's payload is checked, in both directions, sizes from 1 byte
to 64 KiB (RDS fragments large messages over several SENDs).
"""
import os
import re
import socket

import pytest

import harness
import topology

# A ULP that stops answering leaves its tools waiting: a test ends in 3
# minutes (20 times what it takes here), the suite's VM in 10.
pytestmark = pytest.mark.timeout(180)

# RDS refuses a message above half the socket's send buffer (EMSGSIZE):
# 64 KiB fits the default one.
SIZES = [1, 100, 4096, 8192, 32768, 65536]


def rc_qps_on(dev):
    out = harness.run("rdma", "resource", "show", "qp", "link",
                      f"{dev}/1").stdout
    return [line for line in out.splitlines() if re.search(r"\btype RC\b",
                                                           line)]


def test_rds_ping_pong_over_srnic():
    topo, veth = topology.build("one-device", "srnic")
    socks = []
    try:
        harness.run("modprobe", "rds_rdma")
        addr = topo.a.addr
        for port in (4000, 4001):
            s = socket.socket(socket.AF_RDS, socket.SOCK_SEQPACKET, 0)
            s.bind((addr, port))
            s.settimeout(30)
            socks.append(s)
        a, b = socks
        for i, size in enumerate(SIZES * 3):
            ping = os.urandom(size)
            a.sendto(ping, (addr, 4001))
            data, frm = b.recvfrom(size + 1)
            assert (data, frm) == (ping, (addr, 4000)), f"ping {i}: {size} B"
            pong = os.urandom(size)
            b.sendto(pong, (addr, 4000))
            data, frm = a.recvfrom(size + 1)
            assert (data, frm) == (pong, (addr, 4001)), f"pong {i}: {size} B"
        assert rc_qps_on(topo.a.name), \
            "no RC QP on srnic0: RDS did not use rds_rdma over srnic"
    finally:
        for s in socks:
            s.close()
        # rds_rdma stays loaded: unloading it right after use WARNs in
        # rds_ib_recv_exit() on 7.2 ("Objects remaining" in its incoming
        # cache), over rxe just as over srnic (seen); the device's removal
        # below goes through its remove_one.
        topology.teardown(topo, veth)
