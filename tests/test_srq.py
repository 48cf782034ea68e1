# SPDX-License-Identifier: GPL-2.0
"""Shared receive queues (SRQs) with RC QPs, through pyverbs, on every
topology (tests/topology.py): the SRQ verbs and their errnos, several RC QPs
of end b sharing one SRQ while the QPs of end a send to them (payloads
checked byte for byte, completions on the receiving QP's CQ with its
qp_num), SEND with immediate and RDMA WRITE with immediate consuming SRQ
WQEs, RNR while the SRQ is empty, the SRQ limit event
(IBV_EVENT_SRQ_LIMIT_REACHED) and IBV_EVENT_QP_LAST_WQE_REACHED on the
asynchronous event channel, and ibv_srq_pingpong between the two ends.

The SRQ is always on end b: srnic-to-rxe tests srnic's requester against
rxe's SRQ, rxe-to-srnic srnic's SRQ against rxe's requester.

Run against rxe to validate the suite: SRNIC_TEST_DEVICE_KIND=rxe.
"""
import errno
import itertools
import random
import struct
import time

import pytest

pytest.importorskip("pyverbs")
import verbs_enums as e  # noqa: E402
from pyverbs.cq import CQ  # noqa: E402
from pyverbs.mr import MR  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr  # noqa: E402
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr, SrqInitAttrEx  # noqa: E402
from pyverbs.addr import AHAttr, GID, GlobalRoute  # noqa: E402

from perftools import run_pair  # noqa: E402
from rc_verbs import (ACCESS_ALL, ERR, INIT, INIT_MASK, OPEN_CONTEXTS,  # noqa: E402
                      RTR, RTR_MASK, RTS, RTS_MASK, WC_TIMEOUT, close_all,
                      poll_cq, recv_wr, send_wr, sge, status_name,
                      wc_text, async_event, open_context)
from topology import topology  # noqa: E402,F401 (fixture)

rng = random.Random(0x5a9)
ports = itertools.count(18900)


@pytest.fixture(autouse=True)
def close_contexts():
    yield
    close_all()


def expect_errno(code, fn, *args):
    with pytest.raises(PyverbsRDMAError) as ex:
        fn(*args)
    assert ex.value.error_code == code, ex.value


class End:
    """One end: context (+ async fd), PD, CQ, optionally an SRQ, and RC QPs
    (attached to the SRQ if there is one)."""

    def __init__(self, end, nqp, srq_wr=0, srq_sge=2, cq_depth=1024):
        self.end = end
        self.ctx, self.async_fd = open_context(end)
        self.dev_attr = self.ctx.query_device()
        self.port_attr = self.ctx.query_port(1)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, cq_depth, None, None, 0)
        self.srq = None
        if srq_wr:
            self.srq = SRQ(self.pd, SrqInitAttr(SrqAttr(max_wr=srq_wr,
                                                        max_sge=srq_sge)))
        self.qps = [self.make_qp() for _ in range(nqp)]
        self.mrs = []

    def make_qp(self):
        if self.srq:
            cap = QPCap(max_send_wr=64, max_send_sge=2, max_recv_wr=0,
                        max_recv_sge=0)
        else:
            cap = QPCap(max_send_wr=64, max_send_sge=2, max_recv_wr=64,
                        max_recv_sge=2)
        attr = QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq,
                          srq=self.srq, cap=cap)
        return QP(self.pd, attr)

    def mr(self, size, access=ACCESS_ALL):
        mr = MR(self.pd, size, access)
        self.mrs.append(mr)
        return mr

    def poll(self, n, timeout=None):
        """Exactly n WCs within timeout seconds."""
        return poll_cq(self.cq, n, timeout, f"{self.end.name}: ")

    def drain(self):
        wcs = []
        while True:
            got, batch = self.cq.poll(64)
            if not got:
                return wcs
            wcs.extend(batch)

    def async_event(self, timeout):
        """The next asynchronous event's type (acknowledged), or None if
        none arrives within timeout seconds."""
        return async_event(self.ctx, self.async_fd, timeout)

    def qp_state(self, qp):
        attr, _ = qp.query(e.IBV_QP_STATE)
        return attr.qp_state


def move(side, qp, peer, peer_qp, state, mtu, rnr_retry=7, min_rnr_timer=1,
         timeout=14):
    a = QPAttr(qp_state=state)
    if state == INIT:
        a.pkey_index = 0
        a.port_num = 1
        a.qp_access_flags = ACCESS_ALL
        mask = INIT_MASK
    elif state == RTR:
        gr = GlobalRoute(dgid=GID(peer.end.gid),
                         sgid_index=side.end.gid_index, hop_limit=64)
        a.ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
        a.path_mtu = mtu
        a.dest_qp_num = peer_qp.qp_num
        a.rq_psn = 0x1234
        a.max_dest_rd_atomic = min(16, side.dev_attr.max_qp_rd_atom)
        a.min_rnr_timer = min_rnr_timer
        mask = RTR_MASK
    elif state == RTS:
        a.timeout = timeout
        a.retry_cnt = 7
        a.rnr_retry = rnr_retry
        a.sq_psn = 0x1234
        a.max_rd_atomic = min(16, side.dev_attr.max_qp_rd_atom)
        mask = RTS_MASK
    else:
        mask = e.IBV_QP_STATE
    qp.modify(a, mask)


class SrqTopo:
    """End a: nqp plain RC QPs; end b: nqp RC QPs sharing one SRQ; a.qps[i]
    connected to b.qps[i]."""

    def __init__(self, topo, nqp=3, srq_wr=256, srq_sge=2, rnr_retry=7,
                 min_rnr_timer=1, timeout=14):
        self.topo = topo
        self.a = End(topo.a, nqp)
        self.b = End(topo.b, nqp, srq_wr=srq_wr, srq_sge=srq_sge)
        self.mtu = min(self.a.port_attr.active_mtu,
                       self.b.port_attr.active_mtu)
        pairs = list(zip(self.a.qps, self.b.qps))
        for state in (INIT, RTR, RTS):
            for qa, qb in pairs:
                move(self.a, qa, self.b, qb, state, self.mtu,
                     rnr_retry=rnr_retry, min_rnr_timer=min_rnr_timer,
                     timeout=timeout)
                move(self.b, qb, self.a, qa, state, self.mtu,
                     rnr_retry=rnr_retry, min_rnr_timer=min_rnr_timer,
                     timeout=timeout)


def message(qp_index, seq, size):
    """The payload of message seq of a's QP qp_index: a header naming them,
    then bytes derived from both, so a mixed-up buffer is noticed."""
    head = struct.pack("<II", qp_index, seq)
    body = random.Random(qp_index << 20 | seq).randbytes(max(size - 8, 0))
    return (head + body)[:size]


# ---- the verbs and their errnos ----------------------------------------------

def srnic_only(end):
    if end.kind != "srnic":
        pytest.skip(f"{end.name} is {end.kind}: srnic's own behaviour")


def test_device_reports_srq_limits(topology):
    ctx, _ = open_context(topology.b)
    attr = ctx.query_device()
    assert attr.max_srq > 0
    assert attr.max_srq_wr > 0
    assert attr.max_srq_sge > 0


def test_create_query_modify_destroy(topology):
    ctx, _ = open_context(topology.b)
    pd = PD(ctx)
    srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=100, max_sge=3)))
    attr = srq.query()
    assert attr.max_wr >= 100
    assert attr.max_sge >= 3
    assert attr.srq_limit == 0
    srq.modify(SrqAttr(srq_limit=10), e.IBV_SRQ_LIMIT)
    assert srq.query().srq_limit == 10
    srq.modify(SrqAttr(srq_limit=0), e.IBV_SRQ_LIMIT)
    assert srq.query().srq_limit == 0
    srq.close()


def test_create_errnos(topology):
    ctx, _ = open_context(topology.b)
    dev = ctx.query_device()
    pd = PD(ctx)
    # As rdma-core's tests expect: a size beyond the device's is EINVAL.
    expect_errno(errno.EINVAL, SRQ, pd,
                 SrqInitAttr(SrqAttr(max_wr=dev.max_srq_wr + 1, max_sge=1)))
    expect_errno(errno.EINVAL, SRQ, pd,
                 SrqInitAttr(SrqAttr(max_wr=16,
                                     max_sge=dev.max_srq_sge + 1)))
    expect_errno(errno.EINVAL, SRQ, pd,
                 SrqInitAttr(SrqAttr(max_wr=0, max_sge=1)))


def test_create_tag_matching_srq(topology):
    """srnic creates it (test_tag_matching.py uses it); rxe has none."""
    ctx, _ = open_context(topology.b)
    pd = PD(ctx)
    cq = CQ(ctx, 16, None, None, 0)
    attr = SrqInitAttrEx(max_wr=16, max_sge=1)
    attr.comp_mask = (e.IBV_SRQ_INIT_ATTR_TYPE | e.IBV_SRQ_INIT_ATTR_PD |
                      e.IBV_SRQ_INIT_ATTR_CQ | e.IBV_SRQ_INIT_ATTR_TM)
    attr.srq_type = e.IBV_SRQT_TM
    attr.pd = pd
    attr.cq = cq
    attr.max_num_tags = 8
    attr.max_ops = 4
    if topology.b.kind == "srnic":
        SRQ(ctx, attr).close()
    else:
        expect_errno(errno.EOPNOTSUPP, SRQ, ctx, attr)


def test_create_srq_ex_basic(topology):
    """create_srq_ex of a basic SRQ (with the type given) works like
    create_srq."""
    ctx, _ = open_context(topology.b)
    pd = PD(ctx)
    attr = SrqInitAttrEx(max_wr=32, max_sge=2)
    attr.comp_mask = e.IBV_SRQ_INIT_ATTR_TYPE | e.IBV_SRQ_INIT_ATTR_PD
    attr.srq_type = e.IBV_SRQT_BASIC
    attr.pd = pd
    srq = SRQ(ctx, attr)
    assert srq.query().max_wr >= 32


def test_modify_errnos(topology):
    ctx, _ = open_context(topology.b)
    pd = PD(ctx)
    srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=16, max_sge=1)))
    max_wr = srq.query().max_wr
    expect_errno(errno.EINVAL, srq.modify, SrqAttr(srq_limit=max_wr + 1),
                 e.IBV_SRQ_LIMIT)
    if topology.b.kind == "srnic":
        # Resizing: 0 and beyond the device's limit are refused.
        for bad in (0, ctx.query_device().max_srq_wr + 1):
            expect_errno(errno.EINVAL, srq.modify, SrqAttr(max_wr=bad),
                         e.IBV_SRQ_MAX_WR)
        assert srq.query().max_wr == max_wr
    assert srq.query().srq_limit == 0


def test_resize_keeps_posted_wqes(topology):
    """Grow an SRQ holding posted WQEs (IBV_DEVICE_SRQ_RESIZE): they stay
    and are taken first, in order; the new room takes more; shrinking below
    what is posted is EINVAL, to what is posted succeeds. Every message
    lands in the WQE posted for it."""
    if topology.b.kind != "srnic":
        pytest.skip("srnic's resize (rxe's resize is its own)")
    t = SrqTopo(topology, nqp=1, srq_wr=16)
    a, b = t.a, t.b
    assert b.dev_attr.device_cap_flags & e.IBV_DEVICE_SRQ_RESIZE
    size = 100
    dst = b.mr(size * 64)
    for i in range(12):
        b.srq.post_recv(recv_wr(2000 + i, [sge(dst, i * size, size)]))
    b.srq.modify(SrqAttr(max_wr=64), e.IBV_SRQ_MAX_WR)
    assert b.srq.query().max_wr >= 64
    for i in range(12, 60):
        b.srq.post_recv(recv_wr(2000 + i, [sge(dst, i * size, size)]))
    src = a.mr(size * 64)
    payloads = [message(0, i, size) for i in range(64)]

    def deliver(first, last):
        """Messages first..last-1, each into the WQE posted for it."""
        for i in range(first, last):
            src.write(payloads[i], size, i * size)
            a.qps[0].post_send(send_wr(i, e.IBV_WR_SEND,
                                       [sge(src, i * size, size)]))
        for wc in a.poll(last - first):
            assert wc.status == e.IBV_WC_SUCCESS, wc_text(wc)
        got = [wc.wr_id - 2000 for wc in b.poll(last - first)]
        assert got == list(range(first, last))
        for i in range(first, last):
            assert dst.read(size, i * size) == payloads[i]

    deliver(0, 40)
    # 20 posted and not taken: 16 cannot hold them, 32 can.
    expect_errno(errno.EINVAL, b.srq.modify, SrqAttr(max_wr=16),
                 e.IBV_SRQ_MAX_WR)
    b.srq.modify(SrqAttr(max_wr=32), e.IBV_SRQ_MAX_WR)
    assert b.srq.query().max_wr == 32
    deliver(40, 60)


def test_qp_with_srq_has_no_rq(topology):
    srnic_only(topology.b)
    b = End(topology.b, 1, srq_wr=16)
    try:
        _, init = b.qps[0].query(e.IBV_QP_CAP)
        assert init.cap.max_recv_wr == 0
        assert init.cap.max_recv_sge == 0
        mr = b.mr(64)
        expect_errno(errno.EINVAL, b.qps[0].post_recv, recv_wr(1, [sge(mr)]))
    finally:
        # QPs before the PD: left to the garbage collector, the PD could
        # go first (EBUSY from PD.__dealloc__, a pytest warning).
        b.ctx.close()


def test_post_srq_recv_errnos(topology):
    ctx, _ = open_context(topology.b)
    pd = PD(ctx)
    srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=8, max_sge=1)))
    attr = srq.query()
    mr = MR(pd, 64, e.IBV_ACCESS_LOCAL_WRITE)
    wr = recv_wr(1, [sge(mr)] * (attr.max_sge + 1))
    expect_errno(errno.EINVAL, srq.post_recv, wr)
    for i in range(attr.max_wr):
        srq.post_recv(recv_wr(i, [sge(mr)]))
    expect_errno(errno.ENOMEM, srq.post_recv, recv_wr(99, [sge(mr)]))


# ---- traffic -----------------------------------------------------------------

@pytest.mark.parametrize("size", [8, 4097, 65536])
def test_qps_share_srq(topology, size):
    """Three QPs of b share an SRQ; each QP of a sends 8 messages to its
    peer, all QPs at once. Every receive completes on b's CQ with the
    receiving QP's number, in order per QP, into a buffer holding exactly
    the message sent."""
    nqp, per_qp = 3, 8
    t = SrqTopo(topology, nqp=nqp)
    a, b = t.a, t.b
    nmsg = nqp * per_qp
    slot = size + 64
    dst = b.mr(slot * nmsg)
    guard = bytes([0xa5]) * (slot * nmsg)
    dst.write(guard, len(guard), 0)
    for i in range(nmsg):
        b.srq.post_recv(recv_wr(1000 + i, [sge(dst, i * slot, size)]))
    srcs = []
    for q in range(nqp):
        for s in range(per_qp):
            src = a.mr(size)
            src.write(message(q, s, size), size)
            srcs.append((q, s, src))
    for q, s, src in srcs:
        a.qps[q].post_send(send_wr(q << 8 | s, e.IBV_WR_SEND, [sge(src)]))
    for wc in a.poll(nmsg):
        assert wc.status == e.IBV_WC_SUCCESS, wc_text(wc)
    b_qpn = {qp.qp_num: i for i, qp in enumerate(b.qps)}
    seen = {q: [] for q in range(nqp)}
    for wc in b.poll(nmsg):
        assert wc.status == e.IBV_WC_SUCCESS, wc_text(wc)
        assert wc.opcode == e.IBV_WC_RECV
        assert wc.byte_len == size
        assert wc.qp_num in b_qpn, (wc.qp_num, b_qpn)
        i = wc.wr_id - 1000
        head = dst.read(8, i * slot)
        q, s = struct.unpack("<II", head)
        assert q == b_qpn[wc.qp_num], "message landed for another QP"
        assert dst.read(size, i * slot) == message(q, s, size)
        assert dst.read(64, i * slot + size) == guard[:64]
        seen[q].append(s)
    # RC order per QP; every message exactly once.
    assert seen == {q: list(range(per_qp)) for q in range(nqp)}
    assert b.drain() == []


def test_send_imm_and_write_imm_use_srq(topology):
    t = SrqTopo(topology, nqp=2)
    a, b = t.a, t.b
    size = 3000
    dsts = {1: b.mr(size), 2: b.mr(size)}
    target = b.mr(size)
    src = a.mr(size)
    data = rng.randbytes(size)
    src.write(data, size)
    for wr_id, dst in dsts.items():
        b.srq.post_recv(recv_wr(wr_id, [sge(dst)]))
    a.qps[0].post_send(send_wr(10, e.IBV_WR_SEND_WITH_IMM, [sge(src)],
                               imm=0x11223344))
    a.qps[1].post_send(send_wr(11, e.IBV_WR_RDMA_WRITE_WITH_IMM, [sge(src)],
                               imm=0x55667788, remote=(target, 0)))
    for wc in a.poll(2):
        assert wc.status == e.IBV_WC_SUCCESS, wc_text(wc)
    by_qp = {wc.qp_num: wc for wc in b.poll(2)}
    w0, w1 = by_qp[b.qps[0].qp_num], by_qp[b.qps[1].qp_num]
    assert w0.status == w1.status == e.IBV_WC_SUCCESS
    assert w0.opcode == e.IBV_WC_RECV and w0.byte_len == size
    assert w0.wc_flags & e.IBV_WC_WITH_IMM and w0.imm_data == 0x11223344
    assert w1.opcode == e.IBV_WC_RECV_RDMA_WITH_IMM and w1.byte_len == size
    assert w1.wc_flags & e.IBV_WC_WITH_IMM and w1.imm_data == 0x55667788
    # Each took one of the two WQEs, whichever QP came first.
    assert {w0.wr_id, w1.wr_id} == {1, 2}
    assert dsts[w0.wr_id].read(size, 0) == data
    assert target.read(size, 0) == data


def test_rnr_retry_exceeded_when_srq_empty(topology):
    t = SrqTopo(topology, nqp=1, rnr_retry=1)
    a = t.a
    a.qps[0].post_send(send_wr(20, e.IBV_WR_SEND, [sge(a.mr(64))]))
    wc = a.poll(1)[0]
    assert wc.wr_id == 20
    assert wc.status == e.IBV_WC_RNR_RETRY_EXC_ERR, status_name(wc.status)


def test_rnr_then_srq_post_delivers(topology):
    """A SEND that finds the SRQ empty is retried (RNR NAK) until a WQE is
    posted to the SRQ, then delivered intact; the post needs no doorbell
    for that (the requester's RNR timer brings the retry)."""
    t = SrqTopo(topology, nqp=2, min_rnr_timer=10)
    a, b = t.a, t.b
    size = 5000
    data = rng.randbytes(size)
    src, dst = a.mr(size), b.mr(size)
    src.write(data, size)
    a.qps[1].post_send(send_wr(30, e.IBV_WR_SEND, [sge(src)]))
    assert b.drain() == []
    time.sleep(0.3)
    assert a.drain() == []
    b.srq.post_recv(recv_wr(31, [sge(dst)]))
    wc = a.poll(1)[0]
    assert wc.status == e.IBV_WC_SUCCESS, wc_text(wc)
    wc = b.poll(1)[0]
    assert wc.status == e.IBV_WC_SUCCESS, wc_text(wc)
    assert wc.wr_id == 31 and wc.qp_num == b.qps[1].qp_num
    assert wc.byte_len == size
    assert dst.read(size, 0) == data


# ---- asynchronous events -----------------------------------------------------

def test_srq_limit_event(topology):
    """Armed at 5 with 10 WQEs posted: no event while 5 or more remain;
    IBV_EVENT_SRQ_LIMIT_REACHED once when fewer remain, and the limit is
    disarmed (query reports 0, no second event)."""
    t = SrqTopo(topology, nqp=2, srq_wr=64)
    a, b = t.a, t.b
    dst = b.mr(64 * 16)
    for i in range(10):
        b.srq.post_recv(recv_wr(i, [sge(dst, 64 * i, 64)]))
    b.srq.modify(SrqAttr(srq_limit=5), e.IBV_SRQ_LIMIT)
    assert b.srq.query().srq_limit == 5
    src = a.mr(64)

    def send(n, qp_index):
        for i in range(n):
            a.qps[qp_index].post_send(send_wr(i, e.IBV_WR_SEND,
                                              [sge(src, 0, 16)]))
        for wc in a.poll(n):
            assert wc.status == e.IBV_WC_SUCCESS, wc_text(wc)
        for wc in b.poll(n):
            assert wc.status == e.IBV_WC_SUCCESS, wc_text(wc)

    # 10 -> 5 WQEs: never fewer than 5. The event would be queued before
    # the completion that follows the take, so its absence is certain.
    send(5, 0)
    assert b.async_event(0) is None
    assert b.srq.query().srq_limit == 5
    send(1, 1)      # 4 left: below the limit
    assert b.async_event(WC_TIMEOUT) == e.IBV_EVENT_SRQ_LIMIT_REACHED
    assert b.srq.query().srq_limit == 0
    send(2, 0)      # disarmed: no second event
    assert b.async_event(0) is None


def test_last_wqe_reached_and_srq_not_flushed(topology):
    """A QP of the SRQ moved to the error state reports
    IBV_EVENT_QP_LAST_WQE_REACHED and flushes nothing from the SRQ: its
    WQEs stay for the other QP, which still receives."""
    if topology.b.kind == "rxe":
        pytest.skip("rxe (6.1) never reports IBV_EVENT_QP_LAST_WQE_REACHED")
    t = SrqTopo(topology, nqp=2)
    a, b = t.a, t.b
    dst = b.mr(64 * 4)
    for i in range(4):
        b.srq.post_recv(recv_wr(40 + i, [sge(dst, 64 * i, 64)]))
    b.qps[0].modify(QPAttr(qp_state=ERR), e.IBV_QP_STATE)
    assert b.async_event(WC_TIMEOUT) == e.IBV_EVENT_QP_LAST_WQE_REACHED
    assert b.drain() == [], "the SRQ's WQEs were flushed"
    assert b.async_event(0) is None
    src = a.mr(64)
    src.write(b"x" * 64, 64)
    a.qps[1].post_send(send_wr(50, e.IBV_WR_SEND, [sge(src, 0, 32)]))
    wc = a.poll(1)[0]
    assert wc.status == e.IBV_WC_SUCCESS, wc_text(wc)
    wc = b.poll(1)[0]
    assert wc.status == e.IBV_WC_SUCCESS, wc_text(wc)
    assert wc.wr_id == 40 and wc.qp_num == b.qps[1].qp_num
    assert dst.read(32, 0) == b"x" * 32


def test_last_wqe_reached_after_fatal_error(topology):
    """A responder error (remote access: an RDMA WRITE with a bad R_Key)
    moves the QP of the SRQ to the error state on its own: the event comes
    then too."""
    if topology.b.kind == "rxe":
        pytest.skip("rxe (6.1) never reports IBV_EVENT_QP_LAST_WQE_REACHED")
    t = SrqTopo(topology, nqp=1)
    a, b = t.a, t.b
    target = b.mr(64)
    src = a.mr(64)
    wr = send_wr(60, e.IBV_WR_RDMA_WRITE, [sge(src)])
    wr.set_wr_rdma(target.rkey ^ 0x100, target.buf)
    a.qps[0].post_send(wr)
    wc = a.poll(1)[0]
    assert wc.status == e.IBV_WC_REM_ACCESS_ERR, wc_text(wc)
    events = set()
    while e.IBV_EVENT_QP_LAST_WQE_REACHED not in events:
        ev = b.async_event(WC_TIMEOUT)
        assert ev is not None, f"events so far: {events}"
        events.add(ev)
    assert b.qp_state(b.qps[0]) == ERR


# ---- teardown ----------------------------------------------------------------

# Every order of destroying end b's QPs, SRQ, CQ, MR and PD that the API
# allows: the QPs before the SRQ and the CQ, the SRQ and the MR before the
# PD. (ib_core refuses the others with EBUSY; pyverbs would close the QPs of
# an SRQ first anyway.)
ORDERS = ["qp,srq,cq,mr,pd", "qp,cq,srq,mr,pd", "mr,qp,srq,pd,cq",
          "qp,mr,srq,pd,cq"]


@pytest.mark.parametrize("order", ORDERS)
def test_destroy_orders_mid_transfer(topology, order):
    """End b destroys its QPs, SRQ, CQ, MR and PD in order while a's SENDs
    into the SRQ are in flight: every destroy succeeds, and every SEND of
    a completes (delivered, retries exhausted, refused for the MR gone, or
    flushed) in bounded time.
    The console check catches any kernel report. A's QPs wait 16.8 ms for
    an ACK (timeout 12), so the SENDs b's destroyed QPs no longer answer
    exhaust their retries in a few seconds, not in 67 ms' backed-off 17."""
    t = SrqTopo(topology, nqp=2, srq_wr=128, timeout=12)
    a, b = t.a, t.b
    size, per_qp = 4096, 32
    dst = b.mr(size * 128)
    for i in range(128):
        b.srq.post_recv(recv_wr(i, [sge(dst, i * size, size)]))
    src = a.mr(size)
    for n in range(per_qp):
        for qp in a.qps:
            qp.post_send(send_wr(n, e.IBV_WR_SEND, [sge(src)]))
    objs = {"qp": b.qps, "srq": [b.srq], "cq": [b.cq], "mr": [dst],
            "pd": [b.pd]}
    for name in order.split(","):
        for obj in objs[name]:
            obj.close()
    ok = {e.IBV_WC_SUCCESS, e.IBV_WC_RETRY_EXC_ERR, e.IBV_WC_WR_FLUSH_ERR}
    if order.startswith("mr"):
        # The SRQ's WQEs name a deregistered MR while b's QPs still
        # receive: b fails the receive and answers a remote operational
        # error (IBTA 9.7.5.2.4).
        ok.add(e.IBV_WC_REM_OP_ERR)
    for wc in a.poll(per_qp * len(a.qps), timeout=max(WC_TIMEOUT, 30)):
        assert wc.status in ok, wc_text(wc)


# ---- ibv_srq_pingpong ----------------------------------------------------------

@pytest.mark.parametrize("events", [False, True], ids=["poll", "events"])
@pytest.mark.parametrize("size", [1, 4096])
def test_srq_pingpong(topology, size, events, tmp_path):
    port = next(ports)
    iters = 200

    def argv(end):
        return (["ibv_srq_pingpong", "-d", end.name, "-g",
                 str(end.gid_index), "-s", str(size), "-n", str(iters),
                 "-q", "4", "-r", "64", "-p", str(port), "-c"] +
                (["-e"] if events else []))

    out, _ = run_pair(topology, argv(topology.a), argv(topology.b), port,
                      tmp_path, f"srq-pingpong-{size}")
    assert f"{iters} iters" in out, out
