# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --timeout 600
"""Many hosts on one Ethernet segment: eight network namespaces, each a
host with its own srnic device on its own veth, the veths' other ends on
one Linux bridge, and RC traffic between every two of them at once, every
byte checked.

One pyverbs process drives all the devices (ib_core's shared netns mode:
a device in another netns is usable from init_net), so that all 28 pairs'
QPs have their work in flight together: each of the 16 devices' engines
and receive paths serve several peers at once, their ARP and GID tables
hold seven neighbours each, and what one pair sends must land at that pair
only. Only srnic: rxe binds UDP 4791 in init_net before Linux 7.1.
"""
import itertools
import random

import pytest

import harness
import topology
import verbs_enums as e
from rc_verbs import RCPair, check_ok, recv_wr, send_wr, sge

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(topology.KIND != "srnic",
                       reason="eight hosts each with its own srnic device"),
]

HOSTS = 8
NET = "198.18.60"
BRIDGE = "srmhbr"
# Per pair and direction: SENDs in flight (each with its sequence number in
# its first bytes, so that the receiver sees their order), one RDMA WRITE
# and one RDMA READ of sizes that take several packets at path MTU 1024.
SENDS = 8
SEND_SIZE = 3000
WRITE_SIZE = 96 * 1024
READ_SIZE = 40 * 1024


@pytest.fixture(scope="module")
def hosts():
    """The eight hosts' topology.End, on a bridge in init_net."""
    with topology.BridgeHosts(HOSTS, "srmh", NET, BRIDGE) as bridged:
        yield bridged.ends


def pattern(name, size):
    """size bytes of their own for what name says (pair, direction,
    operation): random.Random's, a seeded generator in C (a Python loop
    over 9 MB took tens of seconds in the TCG guest)."""
    return random.Random(name).randbytes(size)


class Direction:
    """What one side of a pair sends the other: SENDS sends, a WRITE into
    the peer's buffer and a READ from it, their buffers and payloads."""

    def __init__(self, pair, side):
        self.side, self.peer = side, pair.peer(side)
        who = f"{side.end.name}->{self.peer.end.name}"
        self.sends = [pattern(f"{who} send {n}", SEND_SIZE)
                      for n in range(SENDS)]
        self.write = pattern(f"{who} write", WRITE_SIZE)
        self.read = pattern(f"{who} read", READ_SIZE)
        self.send_src = side.mr(SEND_SIZE * SENDS)
        self.recv_dst = self.peer.mr(SEND_SIZE * SENDS)
        self.write_src = side.mr(WRITE_SIZE)
        self.write_dst = self.peer.mr(WRITE_SIZE)
        self.read_src = self.peer.mr(READ_SIZE)
        self.read_dst = side.mr(READ_SIZE)
        for n, data in enumerate(self.sends):
            self.send_src.write(data, SEND_SIZE, n * SEND_SIZE)
        self.write_src.write(self.write, WRITE_SIZE)
        self.read_src.write(self.read, READ_SIZE)

    def post_recvs(self):
        for n in range(SENDS):
            self.peer.qp.post_recv(recv_wr(
                1000 + n, [sge(self.recv_dst, n * SEND_SIZE, SEND_SIZE)]))

    def post_sends(self):
        qp = self.side.qp
        for n in range(SENDS):
            qp.post_send(send_wr(n, e.IBV_WR_SEND, [
                sge(self.send_src, n * SEND_SIZE, SEND_SIZE)]))
        qp.post_send(send_wr(100, e.IBV_WR_RDMA_WRITE,
                             [sge(self.write_src)],
                             remote=(self.write_dst, 0)))
        qp.post_send(send_wr(200, e.IBV_WR_RDMA_READ, [sge(self.read_dst)],
                             remote=(self.read_src, 0)))

    def check(self, send_wcs, recv_wcs):
        """The requester's completions in posting order, the responder's
        receives in order and whole, and every buffer holds its bytes."""
        who = f"{self.side.end.name} -> {self.peer.end.name}"
        want = ([(n, e.IBV_WC_SEND) for n in range(SENDS)]
                + [(100, e.IBV_WC_RDMA_WRITE), (200, e.IBV_WC_RDMA_READ)])
        assert [(wc.wr_id, wc.opcode) for wc in send_wcs] == want, who
        for wc in send_wcs:
            check_ok(wc, wc.wr_id, wc.opcode)
        assert [wc.wr_id for wc in recv_wcs] == \
            [1000 + n for n in range(SENDS)], who
        for wc in recv_wcs:
            check_ok(wc, wc.wr_id, e.IBV_WC_RECV, SEND_SIZE)
        for n, data in enumerate(self.sends):
            assert self.recv_dst.read(SEND_SIZE, n * SEND_SIZE) == data, \
                f"{who}: SEND {n}"
        assert self.write_dst.read(WRITE_SIZE, 0) == self.write, \
            f"{who}: WRITE"
        assert self.read_dst.read(READ_SIZE, 0) == self.read, f"{who}: READ"


def test_every_host_pair_at_once(hosts):
    """RC QPs between every two of the eight hosts (28 pairs), both ways at
    once: each side's SENDs, WRITE and READ are all posted on every pair
    before any completion is polled; then every completion, in order, and
    every byte where it belongs. Each device's port counters saw packets
    from the wire: none of this is local delivery."""
    before = {h.name: harness.link_counters(h)["rx_packets"] for h in hosts}
    pairs, directions = [], []
    try:
        for a, b in itertools.combinations(hosts, 2):
            pair = RCPair(topology.Topology(f"{a.name}-{b.name}", a, b),
                          max_send_wr=SENDS + 4, max_recv_wr=SENDS + 4)
            pairs.append(pair)
            pair.connect()
            directions.append((pair, Direction(pair, pair.a),
                               Direction(pair, pair.b)))
        for _, ab, ba in directions:
            ab.post_recvs()
            ba.post_recvs()
        for _, ab, ba in directions:
            ab.post_sends()
            ba.post_sends()
        for pair, ab, ba in directions:
            # One CQ per side for its sends and receives: SENDS + 2 of its
            # own, SENDS of its peer's.
            wcs = {side: side.poll(2 * SENDS + 2, timeout=120)
                   for side in pair.sides()}
            for d in (ab, ba):
                d.check([wc for wc in wcs[d.side]
                         if wc.opcode != e.IBV_WC_RECV],
                        [wc for wc in wcs[d.peer]
                         if wc.opcode == e.IBV_WC_RECV])
    finally:
        for pair in pairs:
            pair.close()
    for h in hosts:
        got = harness.link_counters(h)["rx_packets"] - before[h.name]
        # Seven peers, each sending SENDS packets or more to this host.
        assert got >= (HOSTS - 1) * SENDS, f"{h.name}: {got} packets"

