# SPDX-License-Identifier: GPL-2.0
"""RC traffic through pyverbs over every topology (tests/topology.py):
data integrity of every opcode (random payloads compared byte for byte),
multiple SGEs, inline, signaled and unsignaled, solicited events; the error
completions (remote access, flush, RNR retry exhausted) and post errnos;
QP state transitions with traffic.

Run against rxe to validate the suite: SRNIC_TEST_DEVICE_KIND=rxe.
"""
import contextlib
import dataclasses
import errno
import os
import random
import time
from types import SimpleNamespace

import pytest

pytest.importorskip("pyverbs")
import verbs_enums as e  # noqa: E402
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402

from rc_verbs import (ERR, INIT, RESET, RTR, RTS, WC_TIMEOUT,  # noqa: E402
                      RCPair, Side, check_ok, check_send, check_write,
                      close_all, recv_wr, send_wr, sge, status_name,
                      wc_text)
import roce_packets as rp  # noqa: E402
from harness import (link_counters, module_param, run,  # noqa: E402
                     srnic_test_module, tracefs, wait_for)
from topology import link_local_end  # noqa: E402
from topology import TOPOLOGIES, topology  # noqa: E402,F401 (fixture)

# make check runs the RC data path on every topology (tests/topology.py).
CHECK_TOPOLOGIES = TOPOLOGIES

SIGNALED = e.IBV_SEND_SIGNALED
RC_SEND_FIRST = 0x00
ROCE_PACKETS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "roce_packets.py")
SIZES = [1, 63, 1024, 4097, 65536 + 3, 1 << 20]
rng = random.Random(0x5eed)


def payload(n):
    return rng.randbytes(n)


@pytest.fixture(autouse=True)
def close_contexts():
    yield
    close_all()


@pytest.fixture
def pair(topology):
    p = RCPair(topology)
    yield p
    p.close()


def connected(topology, **kw):
    p = RCPair(topology, **kw)
    p.connect()
    return p


@pytest.fixture
def rc(pair):
    pair.connect()
    return pair


def expect_errno(code, fn, *args):
    with pytest.raises(PyverbsRDMAError) as ex:
        fn(*args)
    assert ex.value.error_code == code, ex.value


# ---- data integrity of each opcode ----------------------------------------

@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("imm", [False, True], ids=["send", "send_imm"])
def test_send(rc, size, imm):
    check_send(rc, payload(size), imm)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("imm", [False, True], ids=["write", "write_imm"])
def test_rdma_write(rc, size, imm):
    check_write(rc, payload(size), imm)


@pytest.mark.parametrize("size", SIZES)
def test_rdma_read(rc, size):
    a, b = rc.a, rc.b
    data = payload(size)
    remote, local = b.mr(size + 32), a.mr(size)
    remote.write(data, size, 32)
    a.qp.post_send(send_wr(3, e.IBV_WR_RDMA_READ, [sge(local)],
                           remote=(remote, 32)))
    check_ok(a.poll()[0], 3, e.IBV_WC_RDMA_READ, size)
    assert local.read(size, 0) == data
    assert b.drain() == []


WIRE_TOPOLOGIES = ("veth-two-netns", "srnic-to-rxe", "rxe-to-srnic")


def settled_batch_counts(topology):
    """batch_counts() once they stop moving: a READ may complete while
    responses its requester asked for again (selective repeat: a range a
    reordered response looked lost from) are still on their way out."""
    counts = batch_counts(topology)
    for _ in range(20):
        time.sleep(0.3)
        now = batch_counts(topology)
        if now == counts:
            return now
        counts = now
    return counts


def batch_counts(topology):
    """{device: (tx_batches, rx_drop_bad_icrc)} of the topology's srnic
    ends."""
    ends = {end.name: end for end in (topology.a, topology.b)
            if end.kind == "srnic"}
    counts = {}
    for name, end in ends.items():
        c = link_counters(end)
        counts[name] = (c["tx_batches"], c["rx_drop_bad_icrc"])
    return counts


@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_packets_of_a_message_leave_in_batches(topology, family):
    """An srnic sender hands the packets of a long message to the IP layer
    in UDP GSO batches (srnic_tx_batch_flush(): tx_batches counts them):
    the requester its WRITE, the responder its READ responses, over IPv4
    and IPv6 (link-local GIDs). The stack splits a batch into the packets
    srnic built: every one arrives with a good ICRC at an srnic or rxe
    receiver (an ICRC that did not cover the IPv4 ID or the lengths a
    packet ends up with would drop all but the first of each batch). With
    srnic.tx_batch=0 no batch goes."""
    if topology.id not in WIRE_TOPOLOGIES:
        pytest.skip("no wire between the two ends")
    if "srnic" not in (topology.a.kind, topology.b.kind):
        pytest.skip("no srnic end")
    if family == "ipv6":
        topology = dataclasses.replace(topology,
                                       a=link_local_end(topology.a),
                                       b=link_local_end(topology.b))
    size = 1 << 20
    before = batch_counts(topology)
    pair = connected(topology)
    try:
        check_write(pair, payload(size), False)
        test_rdma_read(pair, size)
        after = settled_batch_counts(topology)
        for name in before:
            assert after[name][0] > before[name][0], (name, before, after)
            assert after[name][1] == before[name][1], (name, before, after)

        with module_param("tx_batch", 0):
            check_write(pair, payload(size), False)
            test_rdma_read(pair, size)
            final = settled_batch_counts(topology)
        assert final == after
    finally:
        pair.close()


def test_zero_length_send(rc):
    a, b = rc.a, rc.b
    dst = b.mr(64)
    b.qp.post_recv(recv_wr(9, [sge(dst)]))
    a.qp.post_send(send_wr(4, e.IBV_WR_SEND, []))
    check_ok(a.poll()[0], 4, e.IBV_WC_SEND)
    check_ok(b.poll()[0], 9, e.IBV_WC_RECV, 0)


def test_both_directions_interleaved(rc):
    """Both sides send, write and read at once; every byte checked."""
    size = 10000
    bufs = {}
    for side in rc.sides():
        peer = rc.peer(side)
        d = {k: payload(size) for k in ("send", "write", "read")}
        src_send, src_write = side.mr(size), side.mr(size)
        src_send.write(d["send"], size)
        src_write.write(d["write"], size)
        rd_local = side.mr(size)
        rd_remote, wr_remote, recv = peer.mr(size), peer.mr(size), peer.mr(size)
        rd_remote.write(d["read"], size)
        peer.qp.post_recv(recv_wr(50, [sge(recv)]))
        bufs[side] = (d, src_send, src_write, rd_local, rd_remote, wr_remote,
                      recv)
    for side in rc.sides():
        d, src_send, src_write, rd_local, rd_remote, wr_remote, recv = \
            bufs[side]
        side.qp.post_send(send_wr(10, e.IBV_WR_RDMA_WRITE, [sge(src_write)],
                                  remote=(wr_remote, 0)))
        side.qp.post_send(send_wr(11, e.IBV_WR_RDMA_READ, [sge(rd_local)],
                                  remote=(rd_remote, 0)))
        side.qp.post_send(send_wr(12, e.IBV_WR_SEND, [sge(src_send)]))
    for side in rc.sides():
        wcs = side.poll(4)
        assert all(w.status == e.IBV_WC_SUCCESS for w in wcs), \
            [status_name(w.status) for w in wcs]
        send_ids = [w.wr_id for w in wcs if w.opcode != e.IBV_WC_RECV]
        assert send_ids == [10, 11, 12]
    for side in rc.sides():
        d, src_send, src_write, rd_local, rd_remote, wr_remote, recv = \
            bufs[side]
        assert rd_local.read(size, 0) == d["read"]
        assert wr_remote.read(size, 0) == d["write"]
        assert recv.read(size, 0) == d["send"]


# ---- scatter/gather --------------------------------------------------------

class Sgl(list):
    """SGEs over separate MRs at odd offsets; .parts keeps (mr, offset,
    length) of each to read them back."""

    def __init__(self, side, lengths, data):
        super().__init__()
        self.parts, pos = [], 0
        for i, n in enumerate(lengths):
            mr = side.mr(n + 16 + i)  # room for the offset 3 + i
            if data is not None:
                mr.write(data[pos:pos + n], n, 3 + i)
            self.append(sge(mr, 3 + i, n))
            self.parts.append((mr, 3 + i, n))
            pos += n

    def gather(self):
        return b"".join(mr.read(n, off) for mr, off, n in self.parts)


def sgl_of(side, lengths, data):
    return Sgl(side, lengths, data)


def gather(sgl):
    return sgl.gather()


def test_send_multi_sge(rc):
    a, b = rc.a, rc.b
    n_send = min(3, a.cap.max_send_sge)
    n_recv = min(3, b.cap.max_recv_sge)
    lengths = [1000, 3000, 5][:n_send]
    data = payload(sum(lengths))
    src = sgl_of(a, lengths, data)
    recv_lengths = [7, 4100, 2000][:n_recv]
    dst = sgl_of(b, recv_lengths, None)
    b.qp.post_recv(recv_wr(20, dst))
    a.qp.post_send(send_wr(21, e.IBV_WR_SEND, src))
    check_ok(a.poll()[0], 21, e.IBV_WC_SEND)
    check_ok(b.poll()[0], 20, e.IBV_WC_RECV, len(data))
    assert gather(dst)[:len(data)] == data


def test_write_multi_sge(rc):
    a, b = rc.a, rc.b
    lengths = [4096, 1, 2500][:a.cap.max_send_sge]
    data = payload(sum(lengths))
    src = sgl_of(a, lengths, data)
    dst = b.mr(len(data))
    a.qp.post_send(send_wr(22, e.IBV_WR_RDMA_WRITE, src, remote=(dst, 0)))
    check_ok(a.poll()[0], 22, e.IBV_WC_RDMA_WRITE)
    assert dst.read(len(data), 0) == data


def test_write_gathered_from_many_pieces(topology):
    """A WRITE gathered from more pieces than a packet takes as page
    fragments (srnic attaches a packet's payload as fragments of the
    sender's pages when it needs fewer than 17, and copies it otherwise:
    32 SGEs of 40 bytes, one 1 KiB packet of 26 pieces), and one of a few
    SGEs straddling pages, each at an odd offset (attached): the bytes
    arrive in order."""
    p = connected(topology, a_kw={"max_send_sge": 32})
    a, b = p.a, p.b
    cases = ((30, [40] * min(32, a.cap.max_send_sge)),
             (31, [5000, 3000, 4100][:a.cap.max_send_sge]))
    for wr_id, lengths in cases:
        data = payload(sum(lengths))
        src = sgl_of(a, lengths, data)
        dst = b.mr(len(data) + 5)
        a.qp.post_send(send_wr(wr_id, e.IBV_WR_RDMA_WRITE, src,
                               remote=(dst, 5)))
        check_ok(a.poll()[0], wr_id, e.IBV_WC_RDMA_WRITE)
        assert dst.read(len(data), 5) == data, lengths


def test_read_multi_sge(rc):
    a, b = rc.a, rc.b
    lengths = [100, 5000, 33][:a.cap.max_send_sge]
    data = payload(sum(lengths))
    remote = b.mr(len(data))
    remote.write(data, len(data))
    dst = sgl_of(a, lengths, None)
    a.qp.post_send(send_wr(23, e.IBV_WR_RDMA_READ, dst, remote=(remote, 0)))
    check_ok(a.poll()[0], 23, e.IBV_WC_RDMA_READ, len(data))
    assert gather(dst) == data


def test_recv_too_small(rc):
    """A SEND larger than the posted receive: the receive completes in
    error (IBTA: local length error; rxe 6.1 reports a local QP operation
    error), the requester a remote error (IBTA: invalid request; rxe 6.1:
    remote operational error)."""
    a, b = rc.a, rc.b
    src, dst = a.mr(4096), b.mr(4096)
    b.qp.post_recv(recv_wr(24, [sge(dst, 0, 100)]))
    a.qp.post_send(send_wr(25, e.IBV_WR_SEND, [sge(src)]))
    wc = b.poll()[0]
    assert wc.wr_id == 24
    assert wc.status in (e.IBV_WC_LOC_LEN_ERR, e.IBV_WC_LOC_QP_OP_ERR), \
        status_name(wc.status)
    wc = a.poll()[0]
    assert wc.wr_id == 25
    assert wc.status in (e.IBV_WC_REM_INV_REQ_ERR, e.IBV_WC_REM_OP_ERR), \
        status_name(wc.status)


# ---- inline ------------------------------------------------------------------

@pytest.mark.parametrize("opcode", [e.IBV_WR_SEND, e.IBV_WR_RDMA_WRITE],
                         ids=["send", "write"])
def test_inline(topology, opcode):
    p = connected(topology, max_inline_data=64)
    try:
        a, b = p.a, p.b
        size = min(64, a.cap.max_inline_data)
        assert size >= 1
        for n in (1, size // 2 + 1, size):
            data = payload(n)
            src, dst = a.mr(n), b.mr(n)
            src.write(data, n)
            remote = None
            if opcode == e.IBV_WR_SEND:
                b.qp.post_recv(recv_wr(30, [sge(dst)]))
            else:
                remote = (dst, 0)
            a.qp.post_send(send_wr(31, opcode, [sge(src)],
                                   SIGNALED | e.IBV_SEND_INLINE,
                                   remote=remote))
            # Inline data is copied at post time: the buffer may change.
            src.write(b"\xee" * n, n)
            wc = a.poll()[0]
            assert wc.status == e.IBV_WC_SUCCESS, status_name(wc.status)
            if opcode == e.IBV_WR_SEND:
                check_ok(b.poll()[0], 30, e.IBV_WC_RECV, n)
            assert dst.read(n, 0) == data
    finally:
        p.close()


# ---- signaling --------------------------------------------------------------

def test_unsignaled(rc):
    """Unsignaled WRs give no completion; one signaled WR after them
    completes them all (every byte arrived)."""
    a, b = rc.a, rc.b
    n, size = 8, 3000
    datas = [payload(size) for _ in range(n)]
    dst = b.mr(n * size)
    for i, d in enumerate(datas):
        src = a.mr(size)
        src.write(d, size)
        a.qp.post_send(send_wr(100 + i, e.IBV_WR_RDMA_WRITE, [sge(src)], 0,
                               remote=(dst, i * size)))
    last = a.mr(16)
    b.qp.post_recv(recv_wr(60, [sge(b.mr(16))]))
    a.qp.post_send(send_wr(200, e.IBV_WR_SEND, [sge(last)]))
    wcs = a.poll(1)
    check_ok(wcs[0], 200, e.IBV_WC_SEND)
    check_ok(b.poll()[0], 60, e.IBV_WC_RECV, 16)
    assert a.drain(settle=0.2) == []
    for i, d in enumerate(datas):
        assert dst.read(size, i * size) == d


def test_unsignaled_stream_wraps_ring(rc):
    """Four rings' worth of unsignaled writes, one signaled per half ring:
    the send queue's slots come back through the signaled completions."""
    a, b = rc.a, rc.b
    depth = a.cap.max_send_wr
    every = max(1, depth // 2)
    size = 256
    total = 4 * depth
    src, dst = a.mr(total * size), b.mr(total * size)
    data = payload(total * size)
    src.write(data, len(data))
    outstanding = 0
    for i in range(total):
        signaled = (i + 1) % every == 0 or i == total - 1
        a.qp.post_send(send_wr(i, e.IBV_WR_RDMA_WRITE,
                               [sge(src, i * size, size)],
                               SIGNALED if signaled else 0,
                               remote=(dst, i * size)))
        if signaled:
            outstanding += 1
            if outstanding == 2:
                a.poll(1)
                outstanding -= 1
    for wc in a.poll(outstanding):
        assert wc.status == e.IBV_WC_SUCCESS, status_name(wc.status)
    assert dst.read(len(data), 0) == data


def test_sq_sig_all(topology):
    p = connected(topology, sq_sig_all=1)
    try:
        a, b = p.a, p.b
        src, dst = a.mr(64), b.mr(64 * 4)
        for i in range(4):
            a.qp.post_send(send_wr(300 + i, e.IBV_WR_RDMA_WRITE, [sge(src)],
                                   0, remote=(dst, i * 64)))
        wcs = a.poll(4)
        assert [w.wr_id for w in wcs] == [300, 301, 302, 303]
        assert all(w.status == e.IBV_WC_SUCCESS for w in wcs)
    finally:
        p.close()


# ---- completion events -----------------------------------------------------

def test_completion_events(topology):
    p = connected(topology, channel=True)
    try:
        a, b = p.a, p.b
        src, dst = a.mr(100), b.mr(100)
        data = payload(100)
        src.write(data, 100)
        for side in (a, b):
            side.cq.req_notify(0)
        b.qp.post_recv(recv_wr(70, [sge(dst)]))
        a.qp.post_send(send_wr(71, e.IBV_WR_SEND, [sge(src)]))
        assert b.wait_event(), "no completion event for a receive"
        assert a.wait_event(), "no completion event for a send"
        check_ok(a.poll()[0], 71, e.IBV_WC_SEND)
        check_ok(b.poll()[0], 70, e.IBV_WC_RECV, 100)
        assert dst.read(100, 0) == data
        # Not re-armed: no second event.
        b.qp.post_recv(recv_wr(72, [sge(dst)]))
        a.qp.post_send(send_wr(73, e.IBV_WR_SEND, [sge(src)]))
        b.poll()
        assert not b.wait_event(timeout=0.3)
    finally:
        p.close()


@pytest.mark.parametrize("opcode", [e.IBV_WR_SEND, e.IBV_WR_SEND_WITH_IMM,
                                    e.IBV_WR_RDMA_WRITE_WITH_IMM],
                         ids=["send", "send_imm", "write_imm"])
def test_solicited_event(topology, opcode):
    """With solicited-only notification, an unsolicited message completes
    without an event and a solicited one raises it."""
    p = connected(topology, channel=True)
    try:
        a, b = p.a, p.b
        src, dst = a.mr(64), b.mr(64)
        remote = (dst, 0) if opcode == e.IBV_WR_RDMA_WRITE_WITH_IMM else None
        b.cq.req_notify(1)
        for i, flags in enumerate((SIGNALED, SIGNALED | e.IBV_SEND_SOLICITED)):
            b.qp.post_recv(recv_wr(80 + i, [sge(dst)]))
            a.qp.post_send(send_wr(90 + i, opcode, [sge(src)], flags,
                                   imm=5, remote=remote))
            check_ok(a.poll()[0], 90 + i, a_opcode(opcode))
            if i == 0:
                assert b.poll()[0].wr_id == 80
                assert not b.wait_event(timeout=0.3), \
                    "event for an unsolicited message"
        assert b.wait_event(), "no event for a solicited message"
        assert b.poll()[0].wr_id == 81
    finally:
        p.close()


def a_opcode(wr_opcode):
    return {e.IBV_WR_SEND: e.IBV_WC_SEND,
            e.IBV_WR_SEND_WITH_IMM: e.IBV_WC_SEND,
            e.IBV_WR_RDMA_WRITE: e.IBV_WC_RDMA_WRITE,
            e.IBV_WR_RDMA_WRITE_WITH_IMM: e.IBV_WC_RDMA_WRITE,
            e.IBV_WR_RDMA_READ: e.IBV_WC_RDMA_READ}[wr_opcode]


# ---- error completions ----------------------------------------------------

BAD_ACCESS = {
    # (opcode, access of the target MR, what is wrong)
    "write-no-remote-write": (e.IBV_WR_RDMA_WRITE, e.IBV_ACCESS_LOCAL_WRITE
                              | e.IBV_ACCESS_REMOTE_READ, "access"),
    "read-no-remote-read": (e.IBV_WR_RDMA_READ, e.IBV_ACCESS_LOCAL_WRITE
                            | e.IBV_ACCESS_REMOTE_WRITE, "access"),
    "write-bad-rkey": (e.IBV_WR_RDMA_WRITE, None, "rkey"),
    "write-out-of-bounds": (e.IBV_WR_RDMA_WRITE, None, "bounds"),
    "read-out-of-bounds": (e.IBV_WR_RDMA_READ, None, "bounds"),
}


@pytest.mark.parametrize("case", list(BAD_ACCESS))
def test_remote_access_error(rc, case):
    """IBV_WC_REM_ACCESS_ERR at the requester; both QPs end in the error
    state, the responder's posted receive and the requester's next WR are
    flushed; the target memory is untouched."""
    a, b = rc.a, rc.b
    opcode, access, wrong = BAD_ACCESS[case]
    size = 256
    target = b.mr(size, access) if access is not None else b.mr(size)
    guard = payload(size)
    target.write(guard, size)
    local = a.mr(size * 2)
    b.qp.post_recv(recv_wr(40, [sge(b.mr(64))]))
    wr = send_wr(41, opcode, [sge(local, 0, size)], remote=(target, 0))
    if wrong == "rkey":
        wr.set_wr_rdma(target.rkey ^ 0x5a5a00, target.buf)
    elif wrong == "bounds":
        wr = send_wr(41, opcode, [sge(local, 0, size * 2)],
                     remote=(target, 0))
    a.qp.post_send(wr)
    wc = a.poll()[0]
    assert wc.wr_id == 41
    assert wc.status == e.IBV_WC_REM_ACCESS_ERR, status_name(wc.status)
    a.wait_state(ERR)
    b.wait_state(ERR)
    wc = b.poll()[0]
    assert (wc.wr_id, wc.status) == (40, e.IBV_WC_WR_FLUSH_ERR), \
        status_name(wc.status)
    a.qp.post_send(send_wr(42, e.IBV_WR_SEND, [sge(local, 0, 8)]))
    wc = a.poll()[0]
    assert (wc.wr_id, wc.status) == (42, e.IBV_WC_WR_FLUSH_ERR), \
        status_name(wc.status)
    assert target.read(size, 0) == guard


@pytest.mark.parametrize("nak_delay_ms", [0, 300])
def test_responder_in_error_before_its_nak(topology, nak_delay_ms):
    """A responder that NAKs a fatal error is in the error state, and its
    receive WQE held completed in error, before the NAK leaves: the
    requester's error completion polled, b's query_qp says ERR at once
    (no wait) and b's receive completion is there. (srnic's wire responder
    sent the NAK first and moved to the error state after: a consumer
    acting on the requester's error could find b still in RTS, and a
    RESET it made could be undone.) Rounds of a WRITE with a bad R_Key
    (remote access error) and a SEND longer than b's receive buffer
    (invalid request: b's receive WQE completes with IBV_WC_LOC_LEN_ERR),
    the pair reconnected through RESET between rounds.

    Without help the old order's window was a few microseconds, which
    300 rounds did not hit: with nak_delay_ms the responder pauses that
    long after each fatal NAK (srnic_test.ko's fatal_nak_delay_ms, a probe
    on the srnic_nak_send tracepoint), which made the old order fail every
    round. (Local delivery, one-device and
    veth-one-netns, sends no NAK: the responder is in the error state
    before the requester completes.)"""
    if topology.b.kind != "srnic":
        pytest.skip("tests srnic's responder")
    if nak_delay_ms and (topology.same_device or
                         topology.a.netns == topology.b.netns):
        pytest.skip("local delivery sends no NAK")
    p = RCPair(topology)
    p.connect()
    hooks = contextlib.ExitStack()
    try:
        if nak_delay_ms:
            hooks.enter_context(srnic_test_module())
            hooks.enter_context(module_param("fatal_nak_delay_ms",
                                             nak_delay_ms, "srnic_test"))
        a, b = p.a, p.b
        target, local = b.mr(256), a.mr(256)
        for rnd in range(4 if nak_delay_ms else 30):
            bad_rkey = rnd % 2 == 0
            b.qp.post_recv(recv_wr(100 + rnd, [sge(b.mr(64))]))
            if bad_rkey:
                wr = send_wr(200 + rnd, e.IBV_WR_RDMA_WRITE, [sge(local)],
                             remote=(target, 0))
                wr.set_wr_rdma(target.rkey ^ 0x5a5a00, target.buf)
                want = e.IBV_WC_REM_ACCESS_ERR
            else:
                wr = send_wr(200 + rnd, e.IBV_WR_SEND, [sge(local, 0, 128)])
                want = e.IBV_WC_REM_INV_REQ_ERR
            a.qp.post_send(wr)
            wc = a.poll()[0]
            assert (wc.wr_id, wc.status) == (200 + rnd, want), wc_text(wc)
            # Right away: no wait_state().
            assert b.state() == ERR, f"round {rnd}: b in {b.state()}"
            got, wcs = b.cq.poll(1)
            assert got == 1, f"round {rnd}: b has no receive completion"
            want_b = (e.IBV_WC_WR_FLUSH_ERR if bad_rkey else
                      e.IBV_WC_LOC_LEN_ERR)
            assert (wcs[0].wr_id, wcs[0].status) == (100 + rnd, want_b), \
                wc_text(wcs[0])
            a.wait_state(ERR)
            for side in p.sides():
                p.move(side, RESET)
            p.connect()
    finally:
        hooks.close()
        p.close()


def test_nak_tracepoint(topology):
    """srnic's responder fires the srnic_nak_send tracepoint for a NAK
    (kernel/srnic_trace.h): a WRITE with a bad R_Key shows in the trace
    buffer with b's device, QP number, PSN and NAK code 2 (remote access
    error)."""
    if topology.b.kind != "srnic":
        pytest.skip("tests srnic's responder")
    if topology.same_device or topology.a.netns == topology.b.netns:
        pytest.skip("local delivery sends no NAK")
    tracing = tracefs()
    event = f"{tracing}/events/srnic/srnic_nak_send/enable"
    p = RCPair(topology)
    p.connect()
    try:
        with open(f"{tracing}/trace", "w") as f:
            f.write("")
        with open(event, "w") as f:
            f.write("1")
        a, b = p.a, p.b
        target, local = b.mr(256), a.mr(256)
        wr = send_wr(7, e.IBV_WR_RDMA_WRITE, [sge(local)],
                     remote=(target, 0))
        wr.set_wr_rdma(target.rkey ^ 0x5a5a00, target.buf)
        a.qp.post_send(wr)
        wc = a.poll()[0]
        assert wc.status == e.IBV_WC_REM_ACCESS_ERR, wc_text(wc)
        with open(f"{tracing}/trace") as f:
            lines = [ln for ln in f if "srnic_nak_send:" in ln]
        want = f"{b.end.name} qpn={b.qp.qp_num} psn="
        assert any(want in ln and ln.rstrip().endswith(" nak 2")
                   for ln in lines), lines
    finally:
        with open(event, "w") as f:
            f.write("0")
        p.close()


QP_ACCESS = {
    # (opcode, the responder QP's access flags: all but the one it needs)
    "write": (e.IBV_WR_RDMA_WRITE, e.IBV_ACCESS_LOCAL_WRITE
              | e.IBV_ACCESS_REMOTE_READ),
    "write-imm": (e.IBV_WR_RDMA_WRITE_WITH_IMM, e.IBV_ACCESS_LOCAL_WRITE
                  | e.IBV_ACCESS_REMOTE_READ),
    "read": (e.IBV_WR_RDMA_READ, e.IBV_ACCESS_LOCAL_WRITE
             | e.IBV_ACCESS_REMOTE_WRITE),
}


@pytest.mark.parametrize("case", list(QP_ACCESS))
def test_qp_access_invalid_request(topology, case):
    """The responder QP does not enable the operation (IB_QP_ACCESS_FLAGS)
    although the MR does: an invalid request, IBV_WC_REM_INV_REQ_ERR at
    the requester, as rxe answers it (check_op_valid()); a remote access
    error is the MR's and the R_Key's (test_remote_access_error). Both QPs
    end in the error state, the target memory untouched. (srnic answered
    a remote access error before.)"""
    opcode, qp_access = QP_ACCESS[case]
    p = connected(topology, qp_access=qp_access)
    try:
        a, b = p.a, p.b
        size = 256
        target, local = b.mr(size), a.mr(size)
        guard = payload(size)
        target.write(guard, size)
        local.write(payload(size), size)
        b.qp.post_recv(recv_wr(50, [sge(b.mr(64))]))
        a.qp.post_send(send_wr(51, opcode, [sge(local)], remote=(target, 0),
                               imm=7 if "imm" in case else 0))
        wc = a.poll()[0]
        assert wc.wr_id == 51
        assert wc.status == e.IBV_WC_REM_INV_REQ_ERR, status_name(wc.status)
        a.wait_state(ERR)
        b.wait_state(ERR)
        wc = b.poll()[0]
        assert (wc.wr_id, wc.status) == (50, e.IBV_WC_WR_FLUSH_ERR), \
            status_name(wc.status)
        assert target.read(size, 0) == guard
    finally:
        p.close()


def test_reset_forgets_message_in_progress(topology):
    """A QP taken through RESET back to RTS forgets the old connection's
    wire state even when its engine task did not run in between.

    The responder b takes its receive WQE for a SEND whose FIRST packet (a
    hand-made one, from a's address) arrived and whose LAST never will.
    Then b's engine is held busy by a 128 MiB local RDMA WRITE of another
    QP on the same engine (one run() of that QP's task) while b goes RTS ->
    RESET -> INIT -> RTR -> RTS and posts a new receive WQE. The next SEND
    of the reconnected a must land in that new WQE: with the old one (which
    RESET discarded) and the half-received message still held, srnic
    answered it as out of the opcode sequence (NAK, both QPs in error)."""
    # In one netns (veth-one-netns, one-device) the hand-made packet from
    # a's address to b's goes over lo; srnic takes it for the device owning
    # the destination address (see tests/test_rx.py).
    if topology.b.kind != "srnic":
        pytest.skip("needs an srnic responder")
    p = connected(topology)
    busy, fillers = None, []
    try:
        a, b = p.a, p.b
        mtu_bytes = 128 << p.mtu
        old_buf, new_buf = b.mr(2 * mtu_bytes), b.mr(4096)
        b.qp.post_recv(recv_wr(1, [sge(old_buf)]))
        # SEND FIRST at the PSN b expects: b takes WQE 1 and fills it.
        first = payload(mtu_bytes)
        transport = rp.bth(RC_SEND_FIRST, b.qp.qp_num, psn=p.psn[a]) + first
        run(*topology.a.cmd("/usr/bin/python3", ROCE_PACKETS,
                            topology.a.addr, topology.b.addr,
                            transport.hex()))
        wait_for(lambda: old_buf.read(mtu_bytes, 0) == first,
                 what="the hand-made SEND FIRST to land")

        # A loopback pair on b's device, one of whose QPs shares b's
        # engine (one engine per CPU, chosen by QPN modulo their number);
        # one more QP on the device between tries shifts the QPNs.
        engines = os.cpu_count()
        for _ in range(2 * engines):
            busy = RCPair(SimpleNamespace(a=topology.b, b=topology.b))
            hold = [s for s in busy.sides()
                    if s.qp.qp_num % engines == b.qp.qp_num % engines]
            if hold:
                break
            busy.close()
            busy = None
            fillers.append(Side(topology.b))
        assert busy is not None, "no QP on b's engine"
        busy.connect()
        req, tgt = hold[0], busy.peer(hold[0])
        size = 128 << 20
        src, dst = req.mr(size), tgt.mr(size)
        src.write(b"\xa5" * 4096, 4096)
        req.qp.post_send(send_wr(60, e.IBV_WR_RDMA_WRITE, [sge(src)],
                                 remote=(dst, 0)))
        wait_for(lambda: dst.read(8, 0) == b"\xa5" * 8, interval=0.001,
                 what="the big WRITE to start")

        # b's task cannot run now: the QP goes round to RTS meanwhile.
        p.move(b, RESET)
        for state in (INIT, RTR, RTS):
            p.move(b, state)
        b.qp.post_recv(recv_wr(2, [sge(new_buf)]))
        if req.drain():
            pytest.skip("the engine finished the 128 MiB WRITE before b "
                        "was back in RTS: nothing held b's task")
        check_ok(req.poll(timeout=600)[0], 60, e.IBV_WC_RDMA_WRITE)

        p.move(a, RESET)
        for state in (INIT, RTR, RTS):
            p.move(a, state)
        data = payload(100)
        src_a = a.mr(100)
        src_a.write(data, 100)
        a.qp.post_send(send_wr(3, e.IBV_WR_SEND, [sge(src_a)]))
        check_ok(a.poll()[0], 3, e.IBV_WC_SEND)
        check_ok(b.poll()[0], 2, e.IBV_WC_RECV, 100)
        assert new_buf.read(100, 0) == data
        assert old_buf.read(mtu_bytes, 0) == first
        assert not b.drain(settle=0.1)
    finally:
        if busy is not None:
            busy.close()
        for side in fillers:
            side.close()
        p.close()


def test_error_state_flushes_outstanding(topology):
    """Sends stuck behind RNR (no receive at the peer, infinite RNR retry)
    and posted receives are flushed with IBV_WC_WR_FLUSH_ERR, in order,
    when the QP moves to the error state."""
    p = RCPair(topology)
    try:
        p.connect(rnr_retry=7, min_rnr_timer=14)
        a, b = p.a, p.b
        src = a.mr(64)
        for i in range(3):
            a.qp.post_recv(recv_wr(500 + i, [sge(a.mr(64))]))
        for i in range(4):
            a.qp.post_send(send_wr(600 + i, e.IBV_WR_SEND, [sge(src)]))
        assert a.drain(settle=0.5) == []
        p.move(a, ERR)
        assert a.state() == ERR
        wcs = a.poll(7)
        flushed = [(w.wr_id, w.status) for w in wcs]
        sends = [x for x in flushed if x[0] >= 600]
        recvs = [x for x in flushed if x[0] < 600]
        flush = e.IBV_WC_WR_FLUSH_ERR
        assert sends == [(600 + i, flush) for i in range(4)], \
            [(i, status_name(s)) for i, s in flushed]
        assert recvs == [(500 + i, flush) for i in range(3)], \
            [(i, status_name(s)) for i, s in flushed]
        # Posting in the error state completes with a flush too.
        a.qp.post_send(send_wr(610, e.IBV_WR_SEND, [sge(src)]))
        assert [(w.wr_id, w.status) for w in a.poll(1)] == [(610, flush)]
    finally:
        p.close()


def test_recv_posted_in_error_state_flushes(topology):
    if topology.a.kind == "rxe":
        # When is rxe's business: 6.1's flushes it only when its responder
        # next runs; 6.12's at once or seconds later, from run to run.
        pytest.skip("end a is rxe: when it flushes a receive posted in the "
                    "error state is rxe's (6.1: when its responder next runs)")
    p = RCPair(topology)
    try:
        p.connect()
        a = p.a
        p.move(a, ERR)
        a.qp.post_recv(recv_wr(520, [sge(a.mr(64))]))
        wc = a.poll(1, timeout=min(5, WC_TIMEOUT))[0]
        assert (wc.wr_id, wc.status) == (520, e.IBV_WC_WR_FLUSH_ERR)
    finally:
        p.close()


@pytest.mark.parametrize("rnr_retry", [0, 2])
def test_rnr_retry_exceeded(topology, rnr_retry):
    p = RCPair(topology)
    try:
        p.connect(min_rnr_timer=1, a_rnr_retry=rnr_retry)
        a, b = p.a, p.b
        a.qp.post_send(send_wr(700, e.IBV_WR_SEND, [sge(a.mr(64))]))
        wc = a.poll()[0]
        assert wc.wr_id == 700
        assert wc.status == e.IBV_WC_RNR_RETRY_EXC_ERR, status_name(wc.status)
        a.wait_state(ERR)
    finally:
        p.close()


def test_rnr_then_receive_arrives(topology):
    """A SEND that meets no receive is retried (RNR NAK) until one is
    posted, then delivered intact."""
    p = RCPair(topology)
    try:
        p.connect(rnr_retry=7, min_rnr_timer=10)
        a, b = p.a, p.b
        data = payload(5000)
        src, dst = a.mr(5000), b.mr(5000)
        src.write(data, 5000)
        a.qp.post_send(send_wr(710, e.IBV_WR_SEND, [sge(src)]))
        assert a.drain(settle=0.3) == []
        b.qp.post_recv(recv_wr(711, [sge(dst)]))
        check_ok(a.poll()[0], 710, e.IBV_WC_SEND)
        check_ok(b.poll()[0], 711, e.IBV_WC_RECV, 5000)
        assert dst.read(5000, 0) == data
    finally:
        p.close()


def test_route_change_applies_to_a_connected_qp(topology):
    """A QP keeps its route between packets (srnic_route() in
    kernel/srnic_net.c); a change of routing still applies from the next
    packet on. With a route to the peer through a gateway that does not
    answer ARP, a SEND makes no progress (its packets wait for a neighbour
    that never resolves, and are retried); once that route is gone again
    it is delivered, once. (A blackhole route would not do: a lookup bound
    to the output device, as srnic's are, ignores it.)"""
    a_end = topology.a
    if a_end.kind != "srnic" or not a_end.netns:
        pytest.skip("needs side a an srnic device in a netns of its own, "
                    "whose main table routes its packets")
    p = RCPair(topology)
    gateway = topology.b.addr.rsplit(".", 1)[0] + ".99"
    route = ["ip", "route", "{}", f"{topology.b.addr}/32", "via", gateway,
             "dev", a_end.netdev]
    try:
        # 268 ms a retry, 7 of them: the detour below costs two or so.
        p.connect(timeout=16)
        a, b = p.a, p.b
        data = [payload(3000) for _ in range(2)]
        src = [a.mr(3000) for _ in data]
        dst = [b.mr(3000) for _ in data]
        for i, d in enumerate(data):
            src[i].write(d, 3000)
            b.qp.post_recv(recv_wr(800 + i, [sge(dst[i])]))
        # The first SEND: the route is looked up, and kept.
        a.qp.post_send(send_wr(810, e.IBV_WR_SEND, [sge(src[0])]))
        check_ok(a.poll()[0], 810, e.IBV_WC_SEND)
        check_ok(b.poll()[0], 800, e.IBV_WC_RECV, 3000)
        run(*[w.format("add") for w in route], netns=a_end.netns)
        try:
            a.qp.post_send(send_wr(811, e.IBV_WR_SEND, [sge(src[1])]))
            assert a.drain(settle=0.4) == [], "sent along a stale route"
            assert b.drain() == []
        finally:
            run(*[w.format("del") for w in route], netns=a_end.netns)
        check_ok(a.poll()[0], 811, e.IBV_WC_SEND)
        check_ok(b.poll()[0], 801, e.IBV_WC_RECV, 3000)
        assert [d.read(3000, 0) for d in dst] == data
        assert a.drain(settle=0.3) == [] and b.drain() == []
    finally:
        p.close()


# ---- post errnos -------------------------------------------------------------

def test_post_to_reset_qp_einval(pair):
    a = pair.a
    src = a.mr(64)
    expect_errno(errno.EINVAL, a.qp.post_send,
                 send_wr(1, e.IBV_WR_SEND, [sge(src)]))
    expect_errno(errno.EINVAL, a.qp.post_recv, recv_wr(2, [sge(src)]))


def test_recv_queue_overflow_enomem(pair):
    a = pair.a
    pair.move(a, INIT)
    mr = a.mr(64)
    for i in range(a.cap.max_recv_wr):
        a.qp.post_recv(recv_wr(i, [sge(mr)]))
    expect_errno(errno.ENOMEM, a.qp.post_recv, recv_wr(999, [sge(mr)]))


def test_send_queue_overflow_enomem(topology):
    """A full send queue (its head stuck in RNR retries) refuses one more
    WR with ENOMEM."""
    p = RCPair(topology, max_send_wr=8)
    try:
        p.connect(rnr_retry=7, min_rnr_timer=14)
        a = p.a
        mr = a.mr(64)
        for i in range(a.cap.max_send_wr):
            a.qp.post_send(send_wr(i, e.IBV_WR_SEND, [sge(mr)]))
        expect_errno(errno.ENOMEM, a.qp.post_send,
                     send_wr(999, e.IBV_WR_SEND, [sge(mr)]))
    finally:
        p.close()


def test_too_many_sges_einval(rc):
    a, b = rc.a, rc.b
    mr = a.mr(4096)
    sends = [sge(mr, i * 8, 8) for i in range(a.cap.max_send_sge + 1)]
    recvs = [sge(mr, i * 8, 8) for i in range(a.cap.max_recv_sge + 1)]
    expect_errno(errno.EINVAL, a.qp.post_send,
                 send_wr(1, e.IBV_WR_SEND, sends))
    expect_errno(errno.EINVAL, a.qp.post_recv, recv_wr(2, recvs))
    # The refused WRs left no trace: traffic still flows.
    data = payload(32)
    mr.write(data, 32)
    dst = b.mr(32)
    b.qp.post_recv(recv_wr(3, [sge(dst)]))
    a.qp.post_send(send_wr(4, e.IBV_WR_SEND, [sge(mr, 0, 32)]))
    check_ok(a.poll()[0], 4, e.IBV_WC_SEND)
    check_ok(b.poll()[0], 3, e.IBV_WC_RECV, 32)
    assert dst.read(32, 0) == data


# ---- state transitions with traffic ---------------------------------------

def send_and_check(p, sender, size=2000, wr_id=800):
    recv = p.peer(sender)
    data = payload(size)
    src, dst = sender.mr(size), recv.mr(size)
    src.write(data, size)
    recv.qp.post_recv(recv_wr(wr_id, [sge(dst)]))
    sender.qp.post_send(send_wr(wr_id + 1, e.IBV_WR_SEND, [sge(src)]))
    check_ok(sender.poll()[0], wr_id + 1, e.IBV_WC_SEND)
    check_ok(recv.poll()[0], wr_id, e.IBV_WC_RECV, size)
    assert dst.read(size, 0) == data


def test_states_through_connection(pair):
    for side in pair.sides():
        assert side.state() == RESET
    for state in (INIT, RTR, RTS):
        for side in pair.sides():
            pair.move(side, state)
            assert side.state() == state
    send_and_check(pair, pair.a)
    send_and_check(pair, pair.b)


def test_rtr_receives(pair):
    """A QP in RTR is a responder already: it receives SENDs and serves
    RDMA WRITE and READ; only its send queue waits for RTS."""
    a, b = pair.a, pair.b
    for side in (a, b):
        pair.move(side, INIT)
    for side in (a, b):
        pair.move(side, RTR)
    pair.move(a, RTS)
    assert b.state() == RTR
    send_and_check(pair, a)
    data = payload(3000)
    remote, local = b.mr(3000), a.mr(3000)
    remote.write(data, 3000)
    a.qp.post_send(send_wr(820, e.IBV_WR_RDMA_READ, [sge(local)],
                           remote=(remote, 0)))
    check_ok(a.poll()[0], 820, e.IBV_WC_RDMA_READ, 3000)
    assert local.read(3000, 0) == data


def test_reset_and_reconnect(rc):
    """After an error, RESET and a new connection (new PSNs) carry traffic
    again on the same QPs."""
    a, b = rc.a, rc.b
    send_and_check(rc, a)
    for side in rc.sides():
        rc.move(side, ERR)
        side.drain()
        rc.move(side, RESET)
        assert side.state() == RESET
    rc.psn = {a: 0xfff000, b: 0x777}
    rc.connect()
    send_and_check(rc, a, wr_id=830)
    send_and_check(rc, b, wr_id=840)


def test_many_messages_in_order(rc):
    """A burst of SENDs of varying sizes arrives in order, each intact."""
    a, b = rc.a, rc.b
    n = min(32, a.cap.max_send_wr, b.cap.max_recv_wr)
    sizes = [rng.randrange(1, 9000) for _ in range(n)]
    datas = [payload(s) for s in sizes]
    dsts = []
    for i in range(n):
        dst = b.mr(9000)
        dsts.append(dst)
        b.qp.post_recv(recv_wr(1000 + i, [sge(dst)]))
    for i, d in enumerate(datas):
        src = a.mr(len(d))
        src.write(d, len(d))
        a.qp.post_send(send_wr(2000 + i, e.IBV_WR_SEND, [sge(src)]))
    swcs, rwcs = a.poll(n), b.poll(n)
    assert [w.wr_id for w in swcs] == [2000 + i for i in range(n)]
    assert [w.wr_id for w in rwcs] == [1000 + i for i in range(n)]
    for i, w in enumerate(rwcs):
        assert w.status == e.IBV_WC_SUCCESS and w.byte_len == sizes[i]
        assert dsts[i].read(sizes[i], 0) == datas[i]


def test_device_kind(topology):
    """Records which devices each end used (shows in -v output)."""
    assert topology.a.kind in ("srnic", "rxe")
    print(f"{topology.id}: a={topology.a.name} ({topology.a.kind}, "
          f"netns {topology.a.netns}) b={topology.b.name} "
          f"({topology.b.kind}, netns {topology.b.netns})")

