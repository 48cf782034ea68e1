# SPDX-License-Identifier: GPL-2.0
"""Per-QP counters (issue 25, item 2): ib_core's counter API
(kernel/srnic_counters.c's counter_* callbacks) through `rdma statistic`.

`rdma statistic qp set link DEV/1 auto type on` binds every new user QP of
a type to one counter of that type; `rdma statistic qp bind` binds one QP to
a counter of its own. A bound QP's events count in its counter, under the
port's counter names, and the port's figures (`rdma statistic show link`)
stay the sum of everything: its own, every counter's, and those of counters
already released. Checked over srnic's wire between two netns, where each
message is packets: a's SENDs of one packet each are its counter's
tx_packets, b's counter receives them.
"""
import json

import pytest

import harness
import topology
import verbs_enums as e
from rc_verbs import RCPair, check_ok, recv_wr, send_wr, sge

SEND = 256      # one packet


@pytest.fixture(scope="module")
def topo():
    topo, veth = topology.build("veth-two-netns", "srnic")
    yield topo
    topology.teardown(topo, veth)


@pytest.fixture
def wire(topo):
    """The two netns, auto mode off again after each test."""
    yield topo
    for end in (topo.a, topo.b):
        rdma(end, "qp", "set", "link", f"{end.name}/1", "auto", "off")


def rdma(end, *argv):
    return harness.run(*end.cmd("rdma", "statistic", *argv)).stdout


def qp_counters(end):
    """The device's QP counters: `rdma -j statistic qp show link DEV/1`,
    one dict per counter (cntn, qp-type, lqpn and the counts, which rdma
    prints under "hwcounters" or at the top, by iproute2 version)."""
    out = harness.run(*end.cmd("rdma", "-j", "statistic", "qp", "show",
                               "link", f"{end.name}/1")).stdout
    found = []
    for c in json.loads(out or "[]"):
        counts = c.pop("hwcounters", {})
        if isinstance(counts, list):    # [{"name": value}, ...]
            counts = {k: v for d in counts for k, v in d.items()}
        found.append({**c, **counts})
    return found


def lqpns(counter):
    """The QP numbers a counter lists (a list of numbers, or of objects
    {"lqpn": N}, by iproute2 version)."""
    q = counter.get("lqpn", [])
    q = q if isinstance(q, list) else [q]
    return [x["lqpn"] if isinstance(x, dict) else int(x) for x in q]


def counter_of(end, qpn):
    found = [c for c in qp_counters(end) if qpn in lqpns(c)]
    assert len(found) == 1, (qpn, qp_counters(end))
    return found[0]


def sends(pair, n):
    """a SENDs n messages of one packet to b."""
    a, b = pair.a, pair.b
    src, dst = a.mr(SEND), b.mr(SEND)
    for i in range(n):
        b.qp.post_recv(recv_wr(i, [sge(dst, 0, SEND)]))
        a.qp.post_send(send_wr(i, e.IBV_WR_SEND, [sge(src, 0, SEND)]))
        check_ok(a.poll()[0], i, e.IBV_WC_SEND)
        check_ok(b.poll()[0], i, e.IBV_WC_RECV, SEND)


def test_auto_mode_counts_each_type_apart(wire):
    """auto type on: a's two RC QPs share one counter, which holds exactly
    their packets; b's QP has its counter; the port's figures still add up
    to everything."""
    a_end, b_end = wire.a, wire.b
    for end in (a_end, b_end):
        rdma(end, "qp", "set", "link", f"{end.name}/1", "auto", "type", "on")
        assert "auto type on" in rdma(end, "qp", "mode", "link",
                                      f"{end.name}/1"), end.name
    port_before = harness.link_counters(a_end)
    first, second = RCPair(wire), RCPair(wire)
    try:
        first.connect()
        second.connect()
        sends(first, 5)
        sends(second, 3)
        qpns = [first.a.qp.qp_num, second.a.qp.qp_num]
        counter = counter_of(a_end, qpns[0])
        assert sorted(lqpns(counter)) == sorted(qpns), counter
        assert counter.get("qp-type") == "RC", counter
        # a's 8 SENDs, one packet each; whatever else a received were b's
        # ACKs (coalesced, at least one per QP).
        assert counter["tx_packets"] == 8, counter
        assert 2 <= counter["rx_packets"] <= 8, counter
        assert counter["retransmits"] == 0, counter
        b_counter = counter_of(b_end, first.b.qp.qp_num)
        assert b_counter["rx_packets"] == 8, b_counter
        assert b_counter["tx_packets"] == counter["rx_packets"], b_counter
        # The port: its own events plus its counters'.
        port = harness.link_counters(a_end)
        assert port["tx_packets"] - port_before["tx_packets"] >= 8, port
    finally:
        first.close()
        second.close()
    # Their QPs gone, the counter is released; the port keeps its counts.
    assert not [c for c in qp_counters(a_end) if c.get("qp-type") == "RC"]
    port_after = harness.link_counters(a_end)
    assert port_after["tx_packets"] - port_before["tx_packets"] >= 8


def test_manual_binding_gives_one_qp_its_own_counter(wire):
    """rdma statistic qp bind: one QP gets a counter of its own, another
    stays on the port's; unbinding ends the counter, the port keeps every
    packet."""
    a_end = wire.a
    bound, free = RCPair(wire), RCPair(wire)
    try:
        bound.connect()
        free.connect()
        qpn = bound.a.qp.qp_num
        port_before = harness.link_counters(a_end)
        rdma(a_end, "qp", "bind", "link", f"{a_end.name}/1", "lqpn",
             str(qpn))
        counter = counter_of(a_end, qpn)
        assert counter["tx_packets"] == 0, counter
        assert free.a.qp.qp_num not in [q for c in qp_counters(a_end)
                                        for q in lqpns(c)]
        sends(bound, 4)
        sends(free, 6)
        counter = counter_of(a_end, qpn)
        assert counter["tx_packets"] == 4, counter
        port = harness.link_counters(a_end)
        # The port's figure holds both QPs' packets (6 in its own counts,
        # 4 in the bound QP's counter).
        assert port["tx_packets"] - port_before["tx_packets"] >= 10, port
        rdma(a_end, "qp", "unbind", "link", f"{a_end.name}/1", "cntn",
             str(counter["cntn"]), "lqpn", str(qpn))
        assert not [c for c in qp_counters(a_end) if qpn in lqpns(c)]
        sends(bound, 2)
        port_after = harness.link_counters(a_end)
        assert port_after["tx_packets"] - port_before["tx_packets"] >= 12
    finally:
        bound.close()
        free.close()


def test_kernel_refuses_what_it_should(wire):
    """Binding a QP that does not exist, or turning auto mode on while a
    counter is bound, fails with rdma's message; nothing is left bound."""
    a_end = wire.a
    out = harness.run(*a_end.cmd("rdma", "statistic", "qp", "bind", "link",
                                 f"{a_end.name}/1", "lqpn", "999999"),
                      check=False)
    assert out.returncode != 0, out
    pair = RCPair(wire)
    try:
        pair.connect()
        rdma(a_end, "qp", "bind", "link", f"{a_end.name}/1", "lqpn",
             str(pair.a.qp.qp_num))
        out = harness.run(*a_end.cmd("rdma", "statistic", "qp", "set",
                                     "link", f"{a_end.name}/1", "auto",
                                     "type", "on"), check=False)
        assert out.returncode != 0, out
    finally:
        pair.close()
    assert qp_counters(a_end) == []
