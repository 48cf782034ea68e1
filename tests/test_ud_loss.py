# SPDX-License-Identifier: GPL-2.0
"""UD under loss: between two srnic devices in two netns on a veth pair
(tests/topology.py's veth-two-netns), with srnic's fault injection
(tests/faults.py: transmit drop, reordering, receive duplication and
corruption) at 1 %, 5 % and 20 %, datagrams of random sizes up to the path
MTU. UD has no acknowledgements, retries or duplicate detection, so loss
and duplicates reach the application; corruption must not: every datagram
delivered carries exactly the bytes of one datagram that was sent (each
holds its sequence number and a CRC-32 of its payload, and the payload is
compared with the sender's), the ICRC check drops the corrupted ones
(counted in rx_drop_bad_icrc), and at most as many duplicates arrive as the
injector made.
"""
import random
import struct
import zlib

import pytest

pytest.importorskip("pyverbs")
import verbs_enums as e  # noqa: E402

import harness  # noqa: E402
from faults import wire  # noqa: E402,F401 (fixture)
from faults import injected, set_faults  # noqa: E402
from rc_verbs import (close_all, poll_some, recv_wr, sge,  # noqa: E402
                      status_name)
from ud_verbs import GRH, UDPair  # noqa: E402

# (loss in %, datagrams)
LEVELS = [(1, 3000), (5, 2000), (20, 1000)]
WINDOW = 32         # datagrams per batch; the receiver drains between
RQ_DEPTH = 128      # receive WQEs kept posted (> WINDOW: no RQ drops)
HDR = struct.Struct("<II")   # sequence number, CRC-32 of the rest
QUIET_POLLS = 40    # empty polls of 5 ms that end a batch


@pytest.fixture(autouse=True)
def close_contexts():
    yield
    close_all()


def datagram(rng, seq, mtu):
    body = rng.randbytes(rng.randrange(0, mtu - HDR.size + 1))
    return HDR.pack(seq, zlib.crc32(body)) + body


@pytest.mark.parametrize("loss,count", LEVELS)
def test_datagrams_under_faults(wire, loss, count):
    seed = 0x5d00 + loss
    rng = random.Random(seed)
    pair = UDPair(wire)
    a, b = pair.a, pair.b
    mtu = pair.mtu
    slot = GRH + mtu
    tx = a.mr(WINDOW * mtu)
    rx = b.mr(RQ_DEPTH * slot)
    for i in range(RQ_DEPTH):
        b.qp.post_recv(recv_wr(i, [sge(rx, i * slot, slot)]))
    sent = {}
    delivered = {}              # seq -> times
    before = {end.name: harness.link_counters(end)
              for end in (wire.a, wire.b)}
    inj_before = {end.name: injected(end.name) for end in (wire.a, wire.b)}
    set_faults(wire, loss, seed)
    try:
        seq = 0
        while seq < count:
            n = min(WINDOW, count - seq)
            for k in range(n):
                data = datagram(rng, seq + k, mtu)
                sent[seq + k] = data
                tx.write(data, len(data), k * mtu)
                flags = e.IBV_SEND_SIGNALED if k == n - 1 else 0
                pair.send(a, seq + k, [sge(tx, k * mtu, len(data))],
                          flags=flags)
            # UD completes a send when the packet leaves: lost or not.
            wcs = a.poll(1)
            assert wcs[0].status == e.IBV_WC_SUCCESS, \
                status_name(wcs[0].status)
            seq += n
            # Drain what arrives (delayed packets may trickle in later).
            for wc in poll_some(b.cq, RQ_DEPTH, QUIET_POLLS):
                assert wc.status == e.IBV_WC_SUCCESS, status_name(wc.status)
                assert wc.opcode == e.IBV_WC_RECV
                i = wc.wr_id
                got = rx.read(wc.byte_len - GRH, i * slot + GRH)
                rseq, crc = HDR.unpack_from(got)
                body = got[HDR.size:]
                assert zlib.crc32(body) == crc, \
                    f"datagram {rseq}: corrupted payload delivered"
                assert sent.get(rseq) == got, \
                    f"datagram {rseq}: not the bytes that were sent"
                delivered[rseq] = delivered.get(rseq, 0) + 1
                b.qp.post_recv(recv_wr(i, [sge(rx, i * slot, slot)]))
    finally:
        set_faults(wire, 0, seed)
    after = {end.name: harness.link_counters(end) for end in (wire.a, wire.b)}
    inj = {name: {k: v - inj_before[name].get(k, 0)
                  for k, v in injected(name).items()}
           for name in inj_before}
    got = sum(delivered.values())
    dups = got - len(delivered)
    made_dups = inj[wire.b.name].get("rx_duplicate", 0)
    dropped = inj[wire.a.name].get("tx_drop", 0)
    bad_icrc = after[wire.b.name]["rx_drop_bad_icrc"] - \
        before[wire.b.name]["rx_drop_bad_icrc"]
    no_wqe = after[wire.b.name]["rx_drop_no_recv_wqe"] - \
        before[wire.b.name]["rx_drop_no_recv_wqe"]
    grown = {name: {k: v - before[name].get(k, 0)
                    for k, v in after[name].items()
                    if v != before[name].get(k, 0)}
             for name in after}
    report = (f"{loss}%: sent {count}, delivered {len(delivered)} distinct "
              f"+ {dups} duplicates; injected at the sender {inj[wire.a.name]}"
              f", at the receiver {inj[wire.b.name]}; receiver dropped "
              f"{bad_icrc} for a bad ICRC, {no_wqe} for want of a WQE; "
              f"counters grown: {grown}")
    print(report)
    # Loss only: nothing invented, duplicates only those injected.
    assert set(delivered) <= set(sent), report
    assert dups <= made_dups, report
    assert no_wqe == 0, report
    # What was lost is accounted for by what the injector dropped or
    # corrupted (a corrupted duplicate may also be dropped), nothing else.
    lost = count - len(delivered)
    assert lost <= dropped + inj[wire.b.name].get("rx_corrupt", 0), report
    # The injector did inject: the test exercised what it claims to.
    assert dropped > 0, report
