# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --timeout 600
"""ECN and CNPs (issue 23, congestion control): with ECN on (sysfs
/sys/class/infiniband/DEV/ecn, on by default) a device sends its connected
QPs' packets ECN-capable (ECT(0)), and a QP that receives a packet marked
Congestion Experienced sends its peer QP a CNP (RoCEv2 opcode 0x81), at
most one per 50 us; the peer counts it (kernel/srnic_net.c,
srnic_rx_congestion(), srnic_rx_cnp()) and its requester cuts the rate it
sends at, then paces its packets and recovers (kernel/srnic_rate.c, DCQCN's
reaction point). Counters: np_ecn_marked_roce_packets, np_cnp_sent,
rp_cnp_handled, rp_cnp_ignored (mlx5's names), rp_rate_decreases,
rp_rate_increases, rp_rate_waits.

Two srnic devices in two netns over a veth (tests/topology.py's
veth-two-netns); on a's side netem marks 20 % of what a sends
(`netem loss 20% ecn`: an ECN-capable packet is marked CE instead of
dropped, any other one dropped), so whether a's packets were ECT shows in
b's marks and a's retransmissions. netem sees what leaves the netdev: a
message's packets sent as one UDP GSO batch are marked, or dropped,
together.
"""
import json

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
            "rp_cnp_ignored", "retransmits", "selective_retransmits",
            "rp_rate_decreases", "rp_rate_increases", "rp_rate_waits")


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
    return harness.device_switch_path(end, "ecn")


def set_ecn(end, on):
    harness.set_device_switch(end, "ecn", on)


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


def test_ecn_is_on_by_default_and_takes_only_booleans(wire):
    for end in (wire.a, wire.b):
        assert harness.sysfs_read(ecn_path(end)) == "1"
    with pytest.raises(OSError):
        set_ecn(wire.a, "maybe")
    assert harness.sysfs_read(ecn_path(wire.a)) == "1"


def test_marked_packets_get_cnps(wire):
    """Both ends ECN on: a's packets are ECT (netem marks them rather than
    dropping them: no retransmission), b counts the marks and answers
    with CNPs, no more than the marks, and a handles every one: its
    requester cuts its rate for them (at most once per CNP), and every
    WRITE still lands whole. (Whether the cut rate makes a wait depends on
    how fast one WRITE at a time went before: the pacing is
    test_the_sender_slows_down_at_a_marking_bottleneck's; here 0 waits
    with 11 cuts was seen on trixie.)"""
    a, b, d = exchange(wire, 1, 1, 16 * 1024)
    assert a["retransmits"] == a["selective_retransmits"] == 0, d
    assert b["np_ecn_marked_roce_packets"] > 0, d
    assert 0 < b["np_cnp_sent"] <= b["np_ecn_marked_roce_packets"], d
    assert a["rp_cnp_handled"] == b["np_cnp_sent"], d
    assert a["rp_cnp_ignored"] == 0, d
    assert 0 < a["rp_rate_decreases"] <= a["rp_cnp_handled"], d
    # b's requester sent nothing to be marked: its rate never changed.
    assert b["rp_rate_decreases"] == b["rp_rate_waits"] == 0, d


def test_a_receiver_with_ecn_off_sends_no_cnp(wire):
    """a ECN on, b off: a's packets are marked and b counts them, but sends
    no CNP."""
    a, b, d = exchange(wire, 1, 0, 16 * 1024)
    assert a["retransmits"] == a["selective_retransmits"] == 0, d
    assert b["np_ecn_marked_roce_packets"] > 0, d
    assert b["np_cnp_sent"] == 0 and a["rp_cnp_handled"] == 0, d
    assert a["rp_rate_decreases"] == a["rp_rate_waits"] == 0, d


def test_a_sender_with_ecn_off_is_not_ecn_capable(wire):
    """a ECN off: its packets are not ECT, so netem drops them instead of
    marking them; they are sent again (go-back-N, or selective repeat),
    every WRITE still lands whole, and b sees no mark."""
    a, b, d = exchange(wire, 0, 1, 4 * 1024)
    assert a["retransmits"] + a["selective_retransmits"] > 0, d
    assert b["np_ecn_marked_roce_packets"] == 0, d
    assert b["np_cnp_sent"] == 0, d
    assert a["rp_rate_decreases"] == a["rp_rate_waits"] == 0, d


STREAM_WRITES = 150
STREAM_DEPTH = 8
STREAM_SIZE = 64 * 1024


def stream(topo):
    """STREAM_WRITES RDMA WRITEs of STREAM_SIZE from a to b, STREAM_DEPTH
    in flight, every one completing successfully; the last one's bytes
    checked. Returns a's counter deltas."""
    before = counters(topo.a)
    pair = RCPair(topo, max_send_wr=STREAM_DEPTH)
    try:
        pair.connect()
        src, dst = pair.a.mr(STREAM_SIZE), pair.b.mr(STREAM_SIZE)
        data = bytes((i * 7) & 0xff for i in range(STREAM_SIZE))
        src.write(data, STREAM_SIZE)
        wr = send_wr(0, e.IBV_WR_RDMA_WRITE, [sge(src)], remote=(dst, 0))
        posted = 0
        for _ in range(STREAM_DEPTH):
            pair.a.qp.post_send(wr)
            posted += 1
        for n in range(STREAM_WRITES):
            check_ok(pair.a.poll(timeout=60)[0], 0, e.IBV_WC_RDMA_WRITE)
            if posted < STREAM_WRITES:
                pair.a.qp.post_send(wr)
                posted += 1
        assert dst.read(STREAM_SIZE, 0) == data
    finally:
        pair.close()
    return {k: v - before[k] for k, v in counters(topo.a).items()}


def qdisc_stats(end):
    out = harness.run(*end.cmd("tc", "-s", "-j", "qdisc", "show", "dev",
                               end.netdev)).stdout
    return next(q for q in json.loads(out) if q["kind"] == "fq_codel")


@pytest.fixture
def bottleneck(wire):
    """a's netdev sends at most 40 Mbit/s (HTB) from an fq_codel queue that
    marks ECN-capable packets and drops the others; a's packets leave as
    one frame each (gso_max_segs 1: srnic sends no UDP GSO batch), as from
    a NIC. netem comes back after."""
    a = wire.a
    tc = ("tc", "qdisc")
    harness.run(*a.cmd(*tc, "del", "dev", a.netdev, "root"))
    harness.run(*a.cmd("ip", "link", "set", "dev", a.netdev, "gso_max_segs",
                       "1"))
    harness.run(*a.cmd(*tc, "add", "dev", a.netdev, "root", "handle", "1:",
                       "htb", "default", "10"))
    harness.run(*a.cmd("tc", "class", "add", "dev", a.netdev, "parent", "1:",
                       "classid", "1:10", "htb", "rate", "40mbit"))
    harness.run(*a.cmd(*tc, "add", "dev", a.netdev, "parent", "1:10",
                       "handle", "10:", "fq_codel", "ecn"))
    try:
        yield wire
    finally:
        harness.run(*a.cmd(*tc, "del", "dev", a.netdev, "root"))
        harness.run(*a.cmd("ip", "link", "set", "dev", a.netdev,
                           "gso_max_segs", "65535"))
        harness.run(*a.cmd(*tc, "add", "dev", a.netdev, "root", "netem",
                           "loss", "20%", "ecn"))


def test_the_sender_slows_down_at_a_marking_bottleneck(bottleneck):
    """ECN on at both ends, a stream of WRITEs through a 40 Mbit/s queue
    that marks: the queue marks instead of dropping, b's CNPs make a's
    requester cut its rate and pace its packets (rp_rate_waits), and its
    rate recovers between CNPs (rp_rate_increases); every WRITE
    completes."""
    set_ecn(bottleneck.a, 1)
    set_ecn(bottleneck.b, 1)
    tracing = harness.tracefs()
    event = f"{tracing}/events/srnic/srnic_rate_change/enable"
    with open(f"{tracing}/trace", "w") as f:
        f.write("")
    with open(event, "w") as f:
        f.write("1")
    try:
        q0 = qdisc_stats(bottleneck.a)
        d = stream(bottleneck)
        q1 = qdisc_stats(bottleneck.a)
    finally:
        with open(event, "w") as f:
            f.write("0")
    marks = q1["ecn_mark"] - q0["ecn_mark"]
    assert marks > 0, (d, q1)
    assert q1["drops"] == q0["drops"], (d, q1)
    assert 0 < d["rp_rate_decreases"] <= d["rp_cnp_handled"], d
    assert d["rp_rate_waits"] > 0 and d["rp_rate_increases"] > 0, d
    # Each cut and stage is traced: a's device, its QP, the new rate.
    with open(f"{tracing}/trace") as f:
        lines = [ln for ln in f if "srnic_rate_change:" in ln]
    cuts = [ln for ln in lines if f"{bottleneck.a.name} qpn=" in ln
            and " cut rate=" in ln]
    assert len(cuts) == d["rp_rate_decreases"], lines[:20]
