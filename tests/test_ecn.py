# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --timeout 600
"""ECN and CNPs (issue 23, congestion control): with ECN on (sysfs
/sys/class/infiniband/DEV/ecn, off by default) a device sends its connected
QPs' packets ECN-capable (ECT(0)), and a QP that receives a packet marked
Congestion Experienced sends its peer QP a CNP (RoCEv2 opcode 0x81), at
most one per 50 us; the peer counts it (kernel/srnic_net.c,
srnic_rx_congestion(), srnic_rx_cnp()). Counters: np_ecn_marked_roce_packets,
np_cnp_sent, rp_cnp_handled, rp_cnp_ignored (mlx5's names).

Two srnic devices in two netns over a veth (tests/topology.py's
veth-two-netns); on a's side netem marks 20 % of what a sends
(`netem loss 20% ecn`: an ECN-capable packet is marked CE instead of
dropped, any other one dropped), so whether a's packets were ECT shows in
b's marks and a's retransmissions. netem sees what leaves the netdev: a
message's packets sent as one UDP GSO batch are marked, or dropped,
together.
"""
import pytest

import harness
import topology
import verbs_enums as e
from rc_verbs import RCPair, check_ok, send_wr, sge

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(topology.KIND != "srnic", reason="srnic's ECN"),
]

WRITES = 60
COUNTERS = ("np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled",
            "rp_cnp_ignored", "retransmits")


@pytest.fixture(scope="module")
def wire():
    """veth-two-netns, netem on a's netdev marking (or dropping) 20 % of
    what a sends."""
    topo, veth = topology.build("veth-two-netns", "srnic")
    try:
        # netem would drop ARP too (seen on 7.2: the move to RTR timed out
        # resolving the peer): each end knows the other's MAC for good.
        for end, peer in ((topo.a, topo.b), (topo.b, topo.a)):
            mac = harness.run(*peer.cmd("cat", f"/sys/class/net/"
                                        f"{peer.netdev}/address")
                              ).stdout.strip()
            harness.run(*end.cmd("ip", "neigh", "replace", peer.addr,
                                 "lladdr", mac, "dev", end.netdev, "nud",
                                 "permanent"))
        harness.run(*topo.a.cmd("tc", "qdisc", "add", "dev", topo.a.netdev,
                                "root", "netem", "loss", "20%", "ecn"))
        yield topo
    finally:
        for end in (topo.a, topo.b):
            set_ecn(end, 0)
        topology.teardown(topo, veth)


def ecn_path(end):
    return f"/sys/class/infiniband/{end.name}/ecn"


def set_ecn(end, on):
    with open(ecn_path(end), "w") as f:
        f.write(f"{on}\n")


def counters(end):
    c = harness.link_counters(end)
    return {k: c[k] for k in COUNTERS}


def writes(topo, size):
    """WRITES RDMA WRITEs of size bytes from a to b, one at a time, each
    checked: its completion and the bytes that landed. Returns the two
    ends' counter deltas."""
    before = {end.name: counters(end) for end in (topo.a, topo.b)}
    pair = RCPair(topo)
    try:
        pair.connect()
        src, dst = pair.a.mr(size), pair.b.mr(size)
        for n in range(WRITES):
            data = bytes((n + i * 13) & 0xff for i in range(size))
            src.write(data, size)
            pair.a.qp.post_send(send_wr(n, e.IBV_WR_RDMA_WRITE, [sge(src)],
                                        remote=(dst, 0)))
            check_ok(pair.a.poll(timeout=60)[0], n, e.IBV_WC_RDMA_WRITE)
            assert dst.read(size, 0) == data, f"WRITE {n}"
    finally:
        pair.close()
    return {end.name: {k: v - before[end.name][k]
                       for k, v in counters(end).items()}
            for end in (topo.a, topo.b)}


def exchange(wire, a_ecn, b_ecn, size):
    """ECN a_ecn on a and b_ecn on b, then writes() of size: a's and b's
    counter deltas."""
    set_ecn(wire.a, a_ecn)
    set_ecn(wire.b, b_ecn)
    d = writes(wire, size)
    return d[wire.a.name], d[wire.b.name], d


def test_ecn_is_off_by_default_and_takes_only_booleans(wire):
    for end in (wire.a, wire.b):
        assert harness.sysfs_read(ecn_path(end)) == "0"
    with pytest.raises(OSError):
        set_ecn(wire.a, "maybe")
    assert harness.sysfs_read(ecn_path(wire.a)) == "0"


def test_marked_packets_get_cnps(wire):
    """Both ends ECN on: a's packets are ECT (netem marks them rather than
    dropping them: no retransmission), b counts the marks and answers
    with CNPs, no more than the marks, and a handles every one."""
    a, b, d = exchange(wire, 1, 1, 16 * 1024)
    assert a["retransmits"] == 0, d
    assert b["np_ecn_marked_roce_packets"] > 0, d
    assert 0 < b["np_cnp_sent"] <= b["np_ecn_marked_roce_packets"], d
    assert a["rp_cnp_handled"] == b["np_cnp_sent"], d
    assert a["rp_cnp_ignored"] == 0, d


def test_a_receiver_with_ecn_off_sends_no_cnp(wire):
    """a ECN on, b off: a's packets are marked and b counts them, but sends
    no CNP."""
    a, b, d = exchange(wire, 1, 0, 16 * 1024)
    assert a["retransmits"] == 0, d
    assert b["np_ecn_marked_roce_packets"] > 0, d
    assert b["np_cnp_sent"] == 0 and a["rp_cnp_handled"] == 0, d


def test_a_sender_with_ecn_off_is_not_ecn_capable(wire):
    """a ECN off: its packets are not ECT, so netem drops them instead of
    marking them; go-back-N resends them, every WRITE still lands whole,
    and b sees no mark."""
    a, b, d = exchange(wire, 0, 1, 4 * 1024)
    assert a["retransmits"] > 0, d
    assert b["np_ecn_marked_roce_packets"] == 0, d
    assert b["np_cnp_sent"] == 0, d
