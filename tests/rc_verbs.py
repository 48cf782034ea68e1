# SPDX-License-Identifier: GPL-2.0
"""A connected RC (or UC) QP pair over a topology (tests/topology.py), with
pyverbs.

Side a and side b each have a context, PD, CQ (optionally with a completion
channel) and one RC QP on their end's device; RCPair.connect() takes both
through INIT, RTR and RTS towards each other with RoCE v2 (global) address
vectors. Every wait is bounded (WC_TIMEOUT seconds, SRNIC_TEST_WC_TIMEOUT
in the environment), so a data path that does not move fails a test
instead of hanging the suite.
"""
import copy
import os
import select
import time

import verbs_enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ, CompChannel
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

WC_TIMEOUT = float(os.environ.get("SRNIC_TEST_WC_TIMEOUT", "10"))

RESET, INIT, RTR, RTS, SQD, SQE, ERR = (
    e.IBV_QPS_RESET, e.IBV_QPS_INIT, e.IBV_QPS_RTR, e.IBV_QPS_RTS,
    e.IBV_QPS_SQD, e.IBV_QPS_SQE, e.IBV_QPS_ERR)

ACCESS_ALL = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
              e.IBV_ACCESS_REMOTE_READ)
INIT_MASK = (e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT |
             e.IBV_QP_ACCESS_FLAGS)
RTR_MASK = (e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU |
            e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN |
            e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
RTS_MASK = (e.IBV_QP_STATE | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT |
            e.IBV_QP_RNR_RETRY | e.IBV_QP_SQ_PSN | e.IBV_QP_MAX_QP_RD_ATOMIC)
# UC has no ACKs: no RNR timer, retries, timeout or READ/atomic resources.
UC_RTR_MASK = (e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU |
               e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN)
UC_RTS_MASK = e.IBV_QP_STATE | e.IBV_QP_SQ_PSN

WC_STATUS = {getattr(e, n): n for n in dir(e) if n.startswith("IBV_WC_")
             and n.endswith(("_ERR", "SUCCESS"))}


def status_name(status):
    return WC_STATUS.get(status, str(status))


def comp_channel_fd(make):
    """Create a completion channel with make() and find its fd (pyverbs
    does not expose it): the one anon inode fd that creating it added.
    (Links are compared, not numbers: listing /proc/self/fd holds an fd
    of its own, whose number the channel may take next.)"""
    before = _fd_links()
    channel = make()
    new = [fd for fd, link in _fd_links().items()
           if link.startswith("anon_inode:") and before.get(fd) != link]
    assert len(new) == 1, f"completion channel fd not found: {new}"
    return channel, new[0]


def _fd_links():
    return {int(fd): _readlink(f"/proc/self/fd/{fd}")
            for fd in os.listdir("/proc/self/fd")}


def _readlink(path):
    try:
        return os.readlink(path)
    except OSError:
        return ""


# Every context opened here, closed by close_all() after each test even when
# a constructor failed half-way: a device cannot be deleted (rdma link
# delete blocks) while a user context on it is open.
OPEN_CONTEXTS = []


def close_all():
    while OPEN_CONTEXTS:
        OPEN_CONTEXTS.pop().close()


def open_context(end):
    """A context on end's device and the fd of its asynchronous event
    channel (pyverbs does not expose it): the anon inode fd that opening
    the context added."""
    before = _fd_links()
    ctx = Context(name=end.name)
    OPEN_CONTEXTS.append(ctx)
    new = [fd for fd, link in _fd_links().items()
           if link.startswith("anon_inode:") and before.get(fd) != link]
    assert len(new) == 1, f"async event fd not found: {new}"
    return ctx, new[0]


def async_event(ctx, async_fd, timeout):
    """The next asynchronous event of ctx (async_fd: open_context()'s) by
    type, acknowledged, or None if none arrives within timeout seconds."""
    ready, _, _ = select.select([async_fd], [], [], timeout)
    if not ready:
        return None
    event = ctx.get_async_event()
    event_type = event.event_type
    event.ack()
    return event_type


class Side:
    """Context, PD, CQ (+ channel) and an RC (or qp_type) QP on one end's
    device."""

    def __init__(self, end, max_send_wr=64, max_recv_wr=64, max_send_sge=4,
                 max_recv_sge=4, max_inline_data=0, sq_sig_all=0,
                 cq_depth=512, channel=False, qp_type=e.IBV_QPT_RC):
        self.end = end
        self.ctx, self.async_fd = open_context(end)
        self.dev_attr = self.ctx.query_device()
        self.port_attr = self.ctx.query_port(1)
        self.pd = PD(self.ctx)
        self.channel = self.channel_fd = None
        if channel:
            self.channel, self.channel_fd = comp_channel_fd(
                lambda: CompChannel(self.ctx))
        self.cq = CQ(self.ctx, cq_depth, None, self.channel, 0)
        cap = QPCap(max_send_wr=max_send_wr, max_recv_wr=max_recv_wr,
                    max_send_sge=min(max_send_sge, self.dev_attr.max_sge),
                    max_recv_sge=min(max_recv_sge, self.dev_attr.max_sge),
                    max_inline_data=max_inline_data)
        self.init_attr = QPInitAttr(qp_type=qp_type, scq=self.cq,
                                    rcq=self.cq, cap=cap,
                                    sq_sig_all=sq_sig_all)
        self.qp = QP(self.pd, self.init_attr)
        _, init = self.qp.query(e.IBV_QP_CAP)
        self.cap = init.cap
        self.mrs = []

    def mr(self, size, access=ACCESS_ALL):
        mr = MR(self.pd, size, access)
        self.mrs.append(mr)
        return mr

    def state(self):
        attr, _ = self.qp.query(e.IBV_QP_STATE)
        return attr.qp_state

    def poll(self, n=1, timeout=None, what="completions"):
        """Exactly n WCs, waiting at most timeout seconds for them."""
        return poll_cq(self.cq, n, timeout, f"{self.end.name}: ", what)

    def drain(self, settle=0.0):
        """Every WC there is now (after waiting settle seconds)."""
        if settle:
            time.sleep(settle)
        wcs = []
        while True:
            got, batch = self.cq.poll(64)
            if not got:
                return wcs
            wcs.extend(batch)

    def wait_event(self, timeout=None):
        """True if the channel fires within timeout: then the event is
        read and acknowledged and notification must be re-armed."""
        timeout = WC_TIMEOUT if timeout is None else timeout
        ready, _, _ = select.select([self.channel_fd], [], [], timeout)
        if not ready:
            return False
        self.channel.get_cq_event(self.cq)
        self.cq.ack_events(1)
        return True

    def async_event(self, timeout=None):
        """The next asynchronous event's type (acknowledged), or None if
        none arrives within timeout seconds."""
        return async_event(self.ctx, self.async_fd,
                           WC_TIMEOUT if timeout is None else timeout)

    def wait_state(self, state, timeout=None):
        timeout = WC_TIMEOUT if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while self.state() != state:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.end.name} QP {self.qp.qp_num} in state "
                    f"{self.state()}, expected {state} after {timeout}s")
            time.sleep(0.01)

    def with_new_qp(self):
        """A copy of this side with another RC QP on the same context,
        PD and CQ (so it reaches the same MRs)."""
        side = copy.copy(self)
        side.qp = QP(self.pd, self.init_attr)
        return side

    def close(self):
        self.ctx.close()


def poll_cq(cq, n, timeout=None, who="", what="completions"):
    """Exactly n WCs of cq, waiting at most timeout seconds (default
    WC_TIMEOUT) for them; AssertionError naming who and what otherwise."""
    timeout = WC_TIMEOUT if timeout is None else timeout
    deadline = time.monotonic() + timeout
    wcs = []
    while len(wcs) < n:
        got, batch = cq.poll(n - len(wcs))
        if got:
            wcs.extend(batch)
            continue
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{who}{len(wcs)} of {n} {what} after {timeout}s: "
                f"{[wc_text(w) for w in wcs]}")
        time.sleep(0.0005)
    return wcs


def poll_some(cq, n, polls):
    """Up to n WCs of cq, giving up after `polls` empty polls 5 ms apart
    (draining what a lossy path still delivers)."""
    wcs = []
    empty = 0
    while len(wcs) < n and empty < polls:
        got, batch = cq.poll(n - len(wcs))
        if got:
            wcs.extend(batch)
            empty = 0
        else:
            empty += 1
            time.sleep(0.005)
    return wcs


def wc_text(wc):
    return (f"wr_id={wc.wr_id} status={status_name(wc.status)} "
            f"opcode={wc.opcode} len={wc.byte_len}")


class RCPair:
    """Side a and side b, RC QPs (or qp_type: UC) connected to each
    other. qp_access is the remote access both QPs grant (set at INIT)."""

    def __init__(self, topo, a_kw=None, b_kw=None, qp_access=ACCESS_ALL,
                 qp_type=e.IBV_QPT_RC, **kw):
        self.topo = topo
        self.qp_access = qp_access
        self.qp_type = qp_type
        kw["qp_type"] = qp_type
        self.a = Side(topo.a, **{**kw, **(a_kw or {})})
        self.b = Side(topo.b, **{**kw, **(b_kw or {})})
        self.mtu = min(self.a.port_attr.active_mtu,
                       self.b.port_attr.active_mtu)
        self.psn = {self.a: 0x10203, self.b: 0xabcde}

    def sibling(self):
        """Another pair of RC QPs between the same two sides (contexts,
        PDs and CQs shared), not connected yet. Closing this pair closes
        both."""
        p = copy.copy(self)
        p.a, p.b = self.a.with_new_qp(), self.b.with_new_qp()
        p.psn = {p.a: 0x30405, p.b: 0xfedcb}
        return p

    def sides(self):
        return (self.a, self.b)

    def peer(self, side):
        return self.b if side is self.a else self.a

    def move(self, side, state, rnr_retry=7, retry_cnt=7, timeout=14,
             min_rnr_timer=1):
        peer = self.peer(side)
        a = QPAttr(qp_state=state, cur_qp_state=RESET)
        if state == INIT:
            a.pkey_index = 0
            a.port_num = 1
            a.qp_access_flags = self.qp_access
            mask = INIT_MASK
        elif state == RTR:
            gr = GlobalRoute(dgid=GID(peer.end.gid),
                             sgid_index=side.end.gid_index, hop_limit=64)
            a.ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
            a.path_mtu = self.mtu
            a.dest_qp_num = peer.qp.qp_num
            a.rq_psn = self.psn[peer]
            a.max_dest_rd_atomic = min(16, side.dev_attr.max_qp_rd_atom)
            a.min_rnr_timer = min_rnr_timer
            mask = RTR_MASK if self.qp_type == e.IBV_QPT_RC else UC_RTR_MASK
        elif state == RTS:
            a.timeout = timeout
            a.retry_cnt = retry_cnt
            a.rnr_retry = rnr_retry
            a.sq_psn = self.psn[side]
            a.max_rd_atomic = min(16, side.dev_attr.max_qp_rd_atom)
            mask = RTS_MASK if self.qp_type == e.IBV_QPT_RC else UC_RTS_MASK
        else:
            mask = e.IBV_QP_STATE
        try:
            side.qp.modify(a, mask)
        except PyverbsRDMAError as ex:
            name = {INIT: "INIT", RTR: "RTR", RTS: "RTS", ERR: "ERR",
                    RESET: "RESET"}.get(state, state)
            raise AssertionError(
                f"{side.end.name}: modify QP {side.qp.qp_num} to {name} "
                f"(peer {peer.end.name} {peer.end.addr}): {ex}") from ex

    def connect(self, rnr_retry=7, min_rnr_timer=1, a_rnr_retry=None,
                timeout=14):
        """Both QPs to RTS. a_rnr_retry overrides side a's rnr_retry;
        timeout is the local ACK timeout exponent."""
        for side in self.sides():
            self.move(side, INIT)
        for side in self.sides():
            self.move(side, RTR, min_rnr_timer=min_rnr_timer)
        for side in self.sides():
            rr = rnr_retry
            if side is self.a and a_rnr_retry is not None:
                rr = a_rnr_retry
            self.move(side, RTS, rnr_retry=rr, timeout=timeout)

    def close(self):
        for side in self.sides():
            side.close()


def sge(mr, offset=0, length=None):
    length = mr.length - offset if length is None else length
    return SGE(mr.buf + offset, length, mr.lkey)


def send_wr(wr_id, opcode, sgl, flags=e.IBV_SEND_SIGNALED, imm=0,
            remote=None):
    """A SendWR; remote=(mr, offset): the target of an RDMA opcode."""
    # pyverbs refuses a WR without SGEs: build it with one, then drop it.
    wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=max(1, len(sgl)),
                sg=list(sgl) or [SGE(0, 0, 0)], send_flags=flags,
                imm_data=imm)
    wr.num_sge = len(sgl)
    if remote is not None:
        target, offset = remote
        wr.set_wr_rdma(target.rkey, target.buf + offset)
    return wr


def recv_wr(wr_id, sgl):
    wr = RecvWR(wr_id=wr_id, num_sge=max(1, len(sgl)),
                sg=list(sgl) or [SGE(0, 0, 0)])
    wr.num_sge = len(sgl)
    return wr


def check_ok(wc, wr_id, opcode, byte_len=None):
    """A successful completion of WR wr_id with this opcode (and byte
    count, when given)."""
    assert wc.status == e.IBV_WC_SUCCESS, status_name(wc.status)
    assert wc.wr_id == wr_id
    assert wc.opcode == opcode
    if byte_len is not None:
        assert wc.byte_len == byte_len


def check_write(pair, data, imm, landed=None):
    """An RDMA WRITE (with immediate data if imm) of data from pair.a to
    byte 64 of a buffer of pair.b with 64 guard bytes on each side: the
    requester's completion is right; with imm the responder's too (byte
    count, immediate value), without it no completion comes, after
    landed(dst, data) when given (a UC responder's bytes may still be on
    their way when the requester completes); then the bytes are there and
    nothing around them was written."""
    a, b = pair.a, pair.b
    size = len(data)
    guard = bytes((i * 7 + 3) & 0xff for i in range(64))
    src, dst = a.mr(size), b.mr(size + 128)
    src.write(data, size)
    dst.write(guard, 64, 0)
    dst.write(guard, 64, 64 + size)
    if imm:
        b.qp.post_recv(recv_wr(8, []))
    opcode = e.IBV_WR_RDMA_WRITE_WITH_IMM if imm else e.IBV_WR_RDMA_WRITE
    a.qp.post_send(send_wr(2, opcode, [sge(src)],
                           imm=0x0badcafe if imm else 0, remote=(dst, 64)))
    check_ok(a.poll()[0], 2, e.IBV_WC_RDMA_WRITE)
    if imm:
        wc = b.poll()[0]
        check_ok(wc, 8, e.IBV_WC_RECV_RDMA_WITH_IMM, size)
        assert wc.wc_flags & e.IBV_WC_WITH_IMM
        assert wc.imm_data == 0x0badcafe
    else:
        if landed:
            landed(dst, data)
        assert b.drain(settle=0.05) == []
    assert dst.read(size, 64) == data
    assert dst.read(64, 0) == guard, "written before the target range"
    assert dst.read(64, 64 + size) == guard, "written after the target range"


def check_send(pair, data, imm):
    """A SEND (with immediate data if imm) of data from pair.a into a
    receive WQE of pair.b: both completions are right, the receive's
    immediate flag and value too, and b's buffer holds the bytes."""
    a, b = pair.a, pair.b
    size = len(data)
    src, dst = a.mr(size), b.mr(size + 64)
    src.write(data, size)
    b.qp.post_recv(recv_wr(7, [sge(dst)]))
    opcode = e.IBV_WR_SEND_WITH_IMM if imm else e.IBV_WR_SEND
    a.qp.post_send(send_wr(1, opcode, [sge(src)],
                           imm=0x12345678 if imm else 0))
    check_ok(a.poll()[0], 1, e.IBV_WC_SEND)
    wc = b.poll()[0]
    check_ok(wc, 7, e.IBV_WC_RECV, size)
    assert wc.qp_num == b.qp.qp_num
    if imm:
        assert wc.wc_flags & e.IBV_WC_WITH_IMM
        assert wc.imm_data == 0x12345678
    else:
        assert not wc.wc_flags & e.IBV_WC_WITH_IMM
    assert dst.read(size, 0) == data
