# SPDX-License-Identifier: GPL-2.0
"""UC under loss: between two srnic devices in two netns on a veth pair
(tests/topology.py's veth-two-netns), with srnic's fault injection
(tests/faults.py: transmit drop, reordering, receive duplication and
corruption) at 1 %, 5 % and 20 %, SENDs of one to three packets.

UC never sends anything again, so a message that lost a packet is lost;
what must hold is "loss only": every message delivered carries exactly the
bytes that were sent (each holds its sequence number and a CRC-32 of its
payload, and is compared with the sender's, length included), so a message
that lost a middle packet is never delivered in pieces; messages arrive in
order and at most once (the responder drops a packet behind the expected
PSN); no receive WQE goes missing; each lost message is accounted for by a
fault the injector made.

And the same, packet by packet: hand-made UC packets from a peer netns
(tests/roce_packets.py) with a missing middle packet, a resync at the next
ONLY, a complete three-packet message and a stale duplicate.
"""
import json
import os
import random
import struct
import zlib

import pytest

pytest.importorskip("pyverbs")
import verbs_enums as e  # noqa: E402

import harness  # noqa: E402
import topology as topo_mod  # noqa: E402
import roce_packets as rp  # noqa: E402
from conftest import RoceDevice  # noqa: E402
from faults import injected, set_faults  # noqa: E402
from pyverbs.addr import AHAttr, GID, GlobalRoute  # noqa: E402
from pyverbs.qp import QPAttr  # noqa: E402
from rc_verbs import (RCPair, Side, close_all, poll_some, recv_wr, send_wr,  # noqa: E402
                      sge, status_name)

HERE = os.path.dirname(os.path.abspath(__file__))
LOCAL4, PEER4 = "198.18.9.1", "198.18.9.2"
UC_SEND_FIRST, UC_SEND_MIDDLE, UC_SEND_LAST, UC_SEND_ONLY = \
    0x20, 0x21, 0x22, 0x24

# (loss in %, messages)
LEVELS = [(1, 1500), (5, 1000), (20, 600)]
WINDOW = 32         # messages per batch; the receiver drains between
RQ_DEPTH = 64       # receive WQEs kept posted (> WINDOW: no RQ drops)
MAX_PKTS = 3        # packets of a message at most
HDR = struct.Struct("<II")   # sequence number, CRC-32 of the rest
QUIET_POLLS = 40    # empty polls of 5 ms that end a batch


@pytest.fixture(scope="module")
def wire():
    topo, veth = topo_mod.build("veth-two-netns")
    # Only the injector reorders (a loss it did not make fails the test).
    topo_mod.steer_flows_in_order(topo)
    yield topo
    topo_mod.teardown(topo, veth)


@pytest.fixture(autouse=True)
def close_contexts():
    yield
    close_all()


def message(rng, seq, mtu):
    body = rng.randbytes(rng.randrange(0, MAX_PKTS * mtu - HDR.size + 1))
    return HDR.pack(seq, zlib.crc32(body)) + body


@pytest.mark.parametrize("loss,count", LEVELS)
def test_messages_under_faults(wire, loss, count):
    seed = 0x0c00 + loss
    rng = random.Random(seed)
    pair = RCPair(wire, qp_type=e.IBV_QPT_UC, max_send_wr=WINDOW,
                  max_recv_wr=RQ_DEPTH)
    pair.connect()
    a, b = pair.a, pair.b
    mtu = 128 << pair.mtu
    slot = MAX_PKTS * mtu
    tx = a.mr(WINDOW * slot)
    rx = b.mr(RQ_DEPTH * slot)
    for i in range(RQ_DEPTH):
        b.qp.post_recv(recv_wr(i, [sge(rx, i * slot, slot)]))
    sent = {}
    delivered = []              # sequence numbers, in arrival order
    before = {end.name: harness.link_counters(end)
              for end in (wire.a, wire.b)}
    inj_before = {end.name: injected(end.name) for end in (wire.a, wire.b)}
    set_faults(wire, loss, seed)
    try:
        seq = 0
        while seq < count:
            n = min(WINDOW, count - seq)
            for k in range(n):
                data = message(rng, seq + k, mtu)
                sent[seq + k] = data
                tx.write(data, len(data), k * slot)
                flags = e.IBV_SEND_SIGNALED if k == n - 1 else 0
                a.qp.post_send(send_wr(seq + k, e.IBV_WR_SEND,
                                       [sge(tx, k * slot, len(data))],
                                       flags=flags))
            # UC completes a send when its last packet leaves.
            wcs = a.poll(1)
            assert wcs[0].status == e.IBV_WC_SUCCESS, \
                status_name(wcs[0].status)
            assert wcs[0].wr_id == seq + n - 1
            seq += n
            for wc in poll_some(b.cq, RQ_DEPTH, QUIET_POLLS):
                assert wc.status == e.IBV_WC_SUCCESS, status_name(wc.status)
                assert wc.opcode == e.IBV_WC_RECV
                i = wc.wr_id
                got = rx.read(wc.byte_len, i * slot)
                assert len(got) >= HDR.size, f"{len(got)} bytes delivered"
                rseq, crc = HDR.unpack_from(got)
                assert zlib.crc32(got[HDR.size:]) == crc, \
                    f"message {rseq}: corrupted or incomplete payload"
                assert sent.get(rseq) == got, \
                    f"message {rseq}: not the bytes that were sent"
                delivered.append(rseq)
                b.qp.post_recv(recv_wr(i, [sge(rx, i * slot, slot)]))
    finally:
        set_faults(wire, 0, seed)
    after = {end.name: harness.link_counters(end) for end in (wire.a, wire.b)}
    inj = {name: {k: v - inj_before[name].get(k, 0)
                  for k, v in injected(name).items()}
           for name in inj_before}
    grown = {name: {k: v - before[name].get(k, 0)
                    for k, v in after[name].items()
                    if v != before[name].get(k, 0)}
             for name in after}
    lost = sorted(set(sent) - set(delivered))
    multi_lost = [s for s in lost if len(sent[s]) > mtu]
    report = (f"{loss}%: sent {count}, delivered {len(delivered)} "
              f"(lost {len(lost)}, {len(multi_lost)} of them multi-packet); "
              f"injected at the sender {inj[wire.a.name]}, at the receiver "
              f"{inj[wire.b.name]}; counters grown: {grown}")
    print(report)
    # Loss only: in order, at most once, nothing invented.
    assert delivered == sorted(set(delivered)), report
    assert set(delivered) <= set(sent), report
    assert grown[wire.b.name].get("rx_drop_no_recv_wqe", 0) == 0, report
    # Every lost message is accounted for by a fault: a dropped, held back
    # (reordered) or corrupted packet costs at most its own message.
    faults = (inj[wire.a.name].get("tx_drop", 0) +
              inj[wire.a.name].get("tx_reorder", 0) +
              inj[wire.b.name].get("rx_corrupt", 0))
    assert len(lost) <= faults, report
    # The injector did inject, and the losses included messages of several
    # packets (a lost first, middle or last packet).
    assert inj[wire.a.name].get("tx_drop", 0) > 0, report
    if loss >= 5:
        assert multi_lost, report
    # The requester never went back, the responder never answered.
    assert grown[wire.a.name].get("retransmits", 0) == 0, report
    for name in after:
        assert not any(grown[name].get(k, 0) for k in
                       ("tx_nak_psn_sequence", "tx_nak_rnr",
                        "tx_nak_other")), report
    for side in pair.sides():
        assert side.state() == e.IBV_QPS_RTS
    pair.close()


def rdma_counters(name):
    out = harness.run("rdma", "-j", "statistic", "show", "link",
                      f"{name}/1").stdout
    return {k: v for k, v in json.loads(out)[0].items()
            if isinstance(v, int) and k != "port"}


def test_lost_middle_packet_drops_the_message(srnic, veth):
    """A UC QP on srnicuc0 connected to a peer QP that is a raw socket in
    netns srnic-peer. FIRST and LAST of a message without its MIDDLE:
    nothing delivered, the receive WQE stays; the next ONLY resyncs and
    takes it; a FIRST, MIDDLE, LAST message is delivered whole; an old
    PSN again (a duplicate) is dropped."""
    veth.move_to_netns(veth.b, "srnic-peer")
    harness.run("ip", "addr", "add", f"{LOCAL4}/24", "dev", veth.a)
    harness.run("ip", "addr", "add", f"{PEER4}/24", "dev", veth.b,
                netns="srnic-peer")
    # Not srnic0: the module's veth-two-netns devices may still exist.
    harness.link_add("srnicuc0", veth.a)
    dev = RoceDevice("srnicuc0", veth.a, LOCAL4)
    side = Side(dev, qp_type=e.IBV_QPT_UC)
    qp, peer_qpn, psn, mtu = side.qp, 0x99, 100, 256
    attr = QPAttr(qp_state=e.IBV_QPS_INIT)
    attr.pkey_index, attr.port_num = 0, 1
    attr.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE
    qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT |
              e.IBV_QP_ACCESS_FLAGS)
    attr = QPAttr(qp_state=e.IBV_QPS_RTR)
    gr = GlobalRoute(dgid=GID(harness.ipv4_gid(PEER4)),
                     sgid_index=dev.gid_index, hop_limit=64)
    attr.ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
    attr.path_mtu = e.IBV_MTU_256
    attr.dest_qp_num = peer_qpn
    attr.rq_psn = psn
    qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU |
              e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN)
    buf = side.mr(2 * 4096)
    for i in range(2):
        qp.post_recv(recv_wr(i + 1, [sge(buf, i * 4096, 4096)]))
    before = rdma_counters(dev.name)

    def send(opcode, n, data):
        transport = rp.bth(opcode, qp.qp_num, psn + n) + data
        harness.run("/usr/bin/python3", f"{HERE}/roce_packets.py", PEER4,
                    LOCAL4, transport.hex(), netns="srnic-peer")

    rng = random.Random(0x0c1d)
    a1, a3 = rng.randbytes(mtu), rng.randbytes(100)
    b = rng.randbytes(52)
    c = [rng.randbytes(mtu), rng.randbytes(mtu), rng.randbytes(100)]
    send(UC_SEND_FIRST, 0, a1)
    send(UC_SEND_LAST, 2, a3)           # PSN 1 (the MIDDLE) lost
    assert not side.drain(settle=0.3), "a message missing a packet"
    send(UC_SEND_ONLY, 3, b)
    send(UC_SEND_FIRST, 4, c[0])
    send(UC_SEND_MIDDLE, 5, c[1])
    send(UC_SEND_LAST, 6, c[2])
    send(UC_SEND_ONLY, 3, b"dup!" * 13)  # behind the expected PSN
    wcs = side.poll(2)
    assert not side.drain(settle=0.3)
    assert [(w.status, w.wr_id, w.byte_len) for w in wcs] == \
        [(e.IBV_WC_SUCCESS, 1, len(b)),
         (e.IBV_WC_SUCCESS, 2, 2 * mtu + 100)]
    assert buf.read(len(b), 0) == b
    assert buf.read(2 * mtu + 100, 4096) == b"".join(c)
    after = rdma_counters(dev.name)
    grown = {k: after[k] - before.get(k, 0) for k in after}
    assert grown["rx_out_of_sequence"] >= 1, grown
    assert grown["rx_drop_uc_message"] >= 1, grown
    assert grown["rx_duplicate_requests"] == 1, grown
    assert grown["tx_packets"] == 0, grown   # UC never answers
    assert side.state() == e.IBV_QPS_RTR
