# SPDX-License-Identifier: GPL-2.0
"""Tag-matching SRQs (IBV_SRQT_TM: kernel/srnic_tm.c, post_srq_ops in
userspace/srq.cpp), through pyverbs, on one device and between two devices
in two netns.

End a is a plain RC QP, the sender; end b's RC QP receives through a
tag-matching SRQ whose completions (an extended CQ with IBV_WC_EX_WITH_
TM_INFO) carry the opcode, the TM flags, the tag and the header's app_ctx.
Every message begins with a 16-byte tag-matching header (struct ibv_tmh).
Checked: eager messages landing in the buffer of the first posted tag they
match under its mask, the header stripped, byte for byte, long enough to
take several packets; messages no tag matches landing whole in the SRQ's
receive WQEs as unexpected, matching stopping after one until the consumer
syncs its count (IBV_WR_TAG_SYNC), and list completions asking for the sync
meanwhile (IBV_WC_TM_SYNC_REQ); NO_TAG messages; cancellation
(IBV_WR_TAG_DEL, and IBV_WC_TM_ERR for a tag a message took); rendezvous:
on one device the data is read from the sender's buffer, the sender gets
the FIN, and the buffer's completions come as TM_MATCH then TM_DATA_VALID;
across the wire a rendezvous goes to software as an unexpected message (the
verbs let a device decline any match; srnic_tm.c says why); the errnos of
bad operations and a full list. rdma-core's own tests/test_tag_matching.py
runs in test_rdma_core.py.

srnic only: rxe has no tag matching.
"""
import errno
import struct
import time

import pytest

pytest.importorskip("pyverbs")
import harness  # noqa: E402
import verbs_enums as e  # noqa: E402
from pyverbs.cq import CQ, CQEX, CqInitAttrEx, PollCqAttr  # noqa: E402
from pyverbs.mr import MR  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402
from pyverbs.qp import QP, QPCap, QPInitAttr  # noqa: E402
from pyverbs.srq import (SRQ, OpsWr, SrqAttr, SrqInitAttr,  # noqa: E402
                         SrqInitAttrEx)

from rc_verbs import (ACCESS_ALL, INIT, RTR, RTS, WC_TIMEOUT,  # noqa: E402
                      close_all, open_context, poll_cq, recv_wr, send_wr,
                      sge, status_name)
from test_srq import move  # noqa: E402
from topology import topology  # noqa: E402,F401 (fixture)

CHECK_TOPOLOGIES = ("one-device", "veth-two-netns")

TMH = struct.Struct(">B3xIQ")		# opcode, app_ctx, tag
RVH = struct.Struct(">QII")		# va, rkey, len
BUF = 64 * 1024
SRQ_WR = 64


@pytest.fixture(autouse=True)
def close_contexts():
    yield
    close_all()


def srnic_pair(topology):
    for end in (topology.a, topology.b):
        if end.kind != "srnic":
            pytest.skip(f"{end.name} is {end.kind}: rxe has no tag matching")


class Sender:
    """End a: an RC QP with its own RQ (for a rendezvous' FIN)."""

    def __init__(self, end):
        self.end = end
        self.ctx, _ = open_context(end)
        self.dev_attr = self.ctx.query_device()
        self.port_attr = self.ctx.query_port(1)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 256, None, None, 0)
        cap = QPCap(max_send_wr=32, max_send_sge=1, max_recv_wr=32,
                    max_recv_sge=1)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq,
                                         rcq=self.cq, cap=cap))
        self.mr = MR(self.pd, BUF, ACCESS_ALL)
        self.data = MR(self.pd, BUF, ACCESS_ALL)


class Receiver:
    """End b: an RC QP attached to a tag-matching SRQ, one extended CQ for
    everything."""

    def __init__(self, end, max_num_tags=None):
        self.end = end
        self.ctx, _ = open_context(end)
        self.dev_attr = self.ctx.query_device()
        self.port_attr = self.ctx.query_port(1)
        self.tm_caps = self.ctx.query_device_ex().tm_caps
        self.pd = PD(self.ctx)
        self.cq = CQEX(self.ctx, CqInitAttrEx(
            cqe=1024, wc_flags=e.IBV_WC_EX_WITH_TM_INFO |
            e.IBV_WC_STANDARD_FLAGS))
        attr = SrqInitAttrEx(max_wr=SRQ_WR, max_sge=1)
        attr.comp_mask = (e.IBV_SRQ_INIT_ATTR_TYPE | e.IBV_SRQ_INIT_ATTR_PD |
                          e.IBV_SRQ_INIT_ATTR_CQ | e.IBV_SRQ_INIT_ATTR_TM)
        attr.srq_type = e.IBV_SRQT_TM
        attr.pd = self.pd
        attr.cq = self.cq
        attr.max_num_tags = max_num_tags or self.tm_caps.max_num_tags
        attr.max_ops = 16
        self.srq = SRQ(self.ctx, attr)
        cap = QPCap(max_send_wr=1, max_send_sge=1, max_recv_wr=0,
                    max_recv_sge=0)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq,
                                         rcq=self.cq, srq=self.srq, cap=cap))
        self.mr = MR(self.pd, 8 * BUF, ACCESS_ALL)
        self.unexpected = 0

    def poll(self, what="a completion"):
        """The next completion of the extended CQ, as a dict."""
        attr = PollCqAttr()
        deadline = time.monotonic() + WC_TIMEOUT
        ret = self.cq.start_poll(attr)
        while ret == errno.ENOENT and time.monotonic() < deadline:
            time.sleep(0.0005)
            ret = self.cq.start_poll(attr)
        assert ret == 0, f"{self.end.name}: no {what} in {WC_TIMEOUT}s"
        wc = {"wr_id": self.cq.wr_id, "status": self.cq.status,
              "opcode": self.cq.read_opcode(),
              "flags": self.cq.read_wc_flags(),
              "byte_len": self.cq.read_byte_len()}
        info = self.cq.read_tm_info()
        wc["tag"], wc["priv"] = info.tag, info.priv
        self.cq.end_poll()
        return wc

    def empty(self):
        ret = self.cq.start_poll(PollCqAttr())
        if ret == 0:
            self.cq.end_poll()
        return ret == errno.ENOENT

    def ops(self, opcode, wr_id, flags=e.IBV_OPS_SIGNALED, handle=None,
            **kw):
        wr = OpsWr(wr_id=wr_id, opcode=opcode, flags=flags,
                   unexpected_cnt=self.unexpected, **kw)
        if handle is not None:
            wr.handle = handle
        self.srq.post_srq_ops(wr)
        return wr

    def add_tag(self, tag, offset, length, recv_wr_id, mask=0xffffffffffffffff,
                sync=False):
        """Post a tagged buffer of mr; returns (handle, its TM_ADD
        completion)."""
        flags = e.IBV_OPS_SIGNALED | (e.IBV_OPS_TM_SYNC if sync else 0)
        wr = self.ops(e.IBV_WR_TAG_ADD, 1000 + recv_wr_id, flags=flags,
                      recv_wr_id=recv_wr_id, tag=tag, mask=mask, num_sge=1,
                      sg_list=[sge(self.mr, offset, length)])
        wc = self.poll("TM_ADD")
        assert (wc["opcode"], wc["status"], wc["wr_id"]) == \
            (e.IBV_WC_TM_ADD, e.IBV_WC_SUCCESS, 1000 + recv_wr_id), wc
        return wr.handle, wc

    def sync(self):
        self.ops(e.IBV_WR_TAG_SYNC, 27,
                 flags=e.IBV_OPS_SIGNALED | e.IBV_OPS_TM_SYNC)
        wc = self.poll("TM_SYNC")
        assert (wc["opcode"], wc["status"], wc["wr_id"]) == \
            (e.IBV_WC_TM_SYNC, e.IBV_WC_SUCCESS, 27), wc
        assert not wc["flags"] & e.IBV_WC_TM_SYNC_REQ, wc
        return wc

    def post_recvs(self, n, offset=4 * BUF):
        """n receive WQEs of the SRQ, all on the same buffer (an unexpected
        message's), wr_id 500 + i."""
        for i in range(n):
            self.srq.post_recv(recv_wr(500 + i, [sge(self.mr, offset, BUF)]))


class Pair:
    def __init__(self, topo, max_num_tags=None):
        self.a = Sender(topo.a)
        self.b = Receiver(topo.b, max_num_tags)
        mtu = min(self.a.port_attr.active_mtu, self.b.port_attr.active_mtu)
        for state in (INIT, RTR, RTS):
            move(self.a, self.a.qp, self.b, self.b.qp, state, mtu)
            move(self.b, self.b.qp, self.a, self.a.qp, state, mtu)

    def send(self, opcode, tag, body, app_ctx=0):
        """a sends header + body; returns the message's bytes."""
        msg = TMH.pack(opcode, app_ctx, tag) + body
        self.a.mr.write(msg, len(msg))
        self.a.qp.post_send(send_wr(1, e.IBV_WR_SEND,
                                    [sge(self.a.mr, 0, len(msg))]))
        (wc,) = poll_cq(self.a.cq, 1, who=f"{self.a.end.name}: ")
        assert (wc.status, wc.opcode) == (e.IBV_WC_SUCCESS, e.IBV_WC_SEND), \
            status_name(wc.status)
        return msg


def payload(seed, n):
    return bytes((seed * 131 + i * 7) & 0xff for i in range(n))


def test_device_reports_tm_caps(topology):
    srnic_pair(topology)
    ctx, _ = open_context(topology.b)
    caps = ctx.query_device_ex().tm_caps
    assert caps.flags & e.IBV_TM_CAP_RC
    assert caps.max_num_tags >= 64
    assert caps.max_rndv_hdr_size >= TMH.size + RVH.size
    assert caps.max_sge >= 1
    assert caps.max_ops >= 1


@pytest.mark.parametrize("size", [100, 9000])
def test_eager_messages_match_their_tags(topology, size):
    """Four tags, the messages sent in another order: each lands in its
    own buffer without its header; a masked tag matches any tag equal under
    its mask; the tag and app_ctx are in the completion."""
    srnic_pair(topology)
    p = Pair(topology)
    b = p.b
    before = harness.link_counters(topology.b)
    tags = [0x1111, 0x2222, 0x3333, 0xab00]
    masks = [~0 & 0xffffffffffffffff] * 3 + [0xff00]
    for i, (tag, mask) in enumerate(zip(tags, masks)):
        b.add_tag(tag, i * BUF, BUF, recv_wr_id=i, mask=mask)
    sent = {}
    for i, tag in [(2, 0x3333), (0, 0x1111), (3, 0xab42), (1, 0x2222)]:
        body = payload(i, size)
        p.send(e.IBV_TMH_EAGER, tag, body, app_ctx=0x50 + i)
        wc = b.poll("TM_RECV")
        assert wc == {"wr_id": i, "status": e.IBV_WC_SUCCESS,
                      "opcode": e.IBV_WC_TM_RECV,
                      "flags": e.IBV_WC_TM_MATCH | e.IBV_WC_TM_DATA_VALID,
                      "byte_len": size, "tag": tag, "priv": 0x50 + i}, wc
        sent[i] = body
    for i, body in sent.items():
        assert b.mr.read(size, i * BUF) == body, f"tag {i}: payload differs"
    assert b.empty()
    after = harness.link_counters(topology.b)
    assert after["tm_matched_msgs"] - before["tm_matched_msgs"] == 4
    assert after["tm_unexpected_msgs"] == before["tm_unexpected_msgs"]


def test_unexpected_message_and_phase_sync(topology):
    """A message no tag matches lands whole in the SRQ's WQE; after it the
    device matches nothing (a message for a posted tag is unexpected too)
    and list completions ask for a sync, until the consumer syncs its count;
    then the posted tag matches again."""
    srnic_pair(topology)
    p = Pair(topology)
    b = p.b
    b.post_recvs(8)
    b.add_tag(5, 0, BUF, recv_wr_id=5)
    before = harness.link_counters(topology.b)
    msg = p.send(e.IBV_TMH_EAGER, 9, payload(9, 300))
    wc = b.poll("unexpected TM_RECV")
    assert (wc["opcode"], wc["flags"], wc["wr_id"], wc["byte_len"],
            wc["tag"]) == (e.IBV_WC_TM_RECV, 0, 500, len(msg), 0), wc
    assert b.mr.read(len(msg), 4 * BUF) == msg
    # Out of sync: tag 5's message is unexpected as well.
    msg = p.send(e.IBV_TMH_EAGER, 5, payload(5, 200))
    wc = b.poll("unexpected TM_RECV")
    assert (wc["opcode"], wc["flags"], wc["wr_id"]) == \
        (e.IBV_WC_TM_RECV, 0, 501), wc
    _, add = b.add_tag(6, BUF, BUF, recv_wr_id=6)
    assert add["flags"] & e.IBV_WC_TM_SYNC_REQ, add
    after = harness.link_counters(topology.b)
    assert after["tm_unexpected_msgs"] - before["tm_unexpected_msgs"] == 2
    b.unexpected = 2
    b.sync()
    body = payload(55, 200)
    p.send(e.IBV_TMH_EAGER, 5, body)
    wc = b.poll("TM_RECV")
    assert (wc["opcode"], wc["wr_id"], wc["tag"], wc["flags"]) == \
        (e.IBV_WC_TM_RECV, 5, 5,
         e.IBV_WC_TM_MATCH | e.IBV_WC_TM_DATA_VALID), wc
    assert b.mr.read(len(body), 0) == body


def test_no_tag_message(topology):
    srnic_pair(topology)
    p = Pair(topology)
    b = p.b
    b.post_recvs(2)
    b.add_tag(7, 0, BUF, recv_wr_id=7)
    msg = p.send(e.IBV_TMH_NO_TAG, 7, payload(3, 1000))
    wc = b.poll("TM_NO_TAG")
    assert (wc["opcode"], wc["flags"], wc["wr_id"], wc["byte_len"]) == \
        (e.IBV_WC_TM_NO_TAG, 0, 500, len(msg)), wc
    assert b.mr.read(len(msg), 4 * BUF) == msg
    # Not unexpected: tag 7 still matches.
    p.send(e.IBV_TMH_EAGER, 7, b"x" * 64)
    wc = b.poll("TM_RECV")
    assert (wc["wr_id"], wc["flags"]) == \
        (7, e.IBV_WC_TM_MATCH | e.IBV_WC_TM_DATA_VALID), wc


def test_cancel_tags(topology):
    """DEL takes a tag off the list (its message is then unexpected); DEL
    of a tag a message took, or deleted already, completes with
    IBV_WC_TM_ERR."""
    srnic_pair(topology)
    p = Pair(topology)
    b = p.b
    b.post_recvs(4)
    h1, _ = b.add_tag(1, 0, BUF, recv_wr_id=1)
    h2, _ = b.add_tag(2, BUF, BUF, recv_wr_id=2)
    b.ops(e.IBV_WR_TAG_DEL, 71, handle=h1)
    wc = b.poll("TM_DEL")
    assert (wc["opcode"], wc["status"], wc["wr_id"]) == \
        (e.IBV_WC_TM_DEL, e.IBV_WC_SUCCESS, 71), wc
    p.send(e.IBV_TMH_EAGER, 2, b"two" * 10)
    assert b.poll("TM_RECV")["wr_id"] == 2
    for handle in (h1, h2):
        b.ops(e.IBV_WR_TAG_DEL, 72, handle=handle)
        wc = b.poll("TM_DEL")
        assert (wc["opcode"], wc["status"]) == \
            (e.IBV_WC_TM_DEL, e.IBV_WC_TM_ERR), wc
    p.send(e.IBV_TMH_EAGER, 1, b"one" * 10)
    wc = b.poll("unexpected TM_RECV")
    assert (wc["wr_id"], wc["flags"]) == (500, 0), wc


def test_rendezvous(topology):
    """One namespace (local delivery): the tag's buffer is filled by a READ of
    the sender's buffer; the sender's SEND completes, then it receives the
    FIN (a header with IBV_TMH_FIN and the tag); the receiver sees TM_MATCH,
    then TM_DATA_VALID. Over the wire: an unexpected message holding the
    headers, for the consumer's software."""
    srnic_pair(topology)
    p = Pair(topology)
    a, b = p.a, p.b
    data = payload(77, 40000)
    a.data.write(data, len(data))
    a.qp.post_recv(recv_wr(900, [sge(a.mr, BUF // 2, 64)]))
    b.post_recvs(2)
    b.add_tag(0x77, 0, BUF, recv_wr_id=0x77)
    rvh = RVH.pack(a.data.buf, a.data.rkey, len(data))
    msg = p.send(e.IBV_TMH_RNDV, 0x77, rvh + bytes(16), app_ctx=3)
    wc = b.poll("TM_RECV")
    if topology.id not in ("one-device", "veth-one-netns"):
        assert (wc["opcode"], wc["flags"], wc["wr_id"], wc["byte_len"]) == \
            (e.IBV_WC_TM_RECV, 0, 500, len(msg)), wc
        assert b.mr.read(len(msg), 4 * BUF) == msg
        return
    assert (wc["opcode"], wc["flags"], wc["wr_id"], wc["tag"],
            wc["priv"]) == (e.IBV_WC_TM_RECV, e.IBV_WC_TM_MATCH, 0x77, 0x77,
                            3), wc
    (fin,) = poll_cq(a.cq, 1, who="sender: ", what="FIN")
    assert (fin.status, fin.opcode, fin.wr_id, fin.byte_len) == \
        (e.IBV_WC_SUCCESS, e.IBV_WC_RECV, 900, TMH.size)
    assert TMH.unpack(a.mr.read(TMH.size, BUF // 2)) == \
        (e.IBV_TMH_FIN, 0, 0x77)
    wc = b.poll("TM_DATA_VALID")
    assert (wc["opcode"], wc["status"], wc["flags"], wc["wr_id"],
            wc["byte_len"], wc["tag"]) == \
        (e.IBV_WC_TM_RECV, e.IBV_WC_SUCCESS, e.IBV_WC_TM_DATA_VALID, 0x77,
         len(data), 0), wc
    assert b.mr.read(len(data), 0) == data
    assert harness.link_counters(topology.b)["tm_rndv_reads"] >= 1


def test_errnos(topology):
    """Bad operations are refused before they take effect; a full list is
    ENOMEM; a basic SRQ has no tag list."""
    srnic_pair(topology)
    p = Pair(topology, max_num_tags=2)
    b = p.b
    for tag in (1, 2):
        b.add_tag(tag, tag * BUF, BUF, recv_wr_id=tag)
    with pytest.raises(PyverbsRDMAError) as ex:
        b.ops(e.IBV_WR_TAG_ADD, 3, recv_wr_id=3, tag=3, mask=~0 & (2**64 - 1),
              num_sge=1, sg_list=[sge(b.mr, 0, 64)])
    assert ex.value.error_code == errno.ENOMEM
    with pytest.raises(PyverbsRDMAError) as ex:
        b.ops(e.IBV_WR_TAG_DEL, 4, handle=1 << 20)
    assert ex.value.error_code == errno.EINVAL
    many = b.tm_caps.max_sge + 1
    with pytest.raises(PyverbsRDMAError) as ex:
        b.ops(e.IBV_WR_TAG_ADD, 5, recv_wr_id=5, tag=5, mask=1,
              num_sge=many, sg_list=[sge(b.mr, 0, 8)] * many)
    assert ex.value.error_code == errno.EINVAL
    assert b.empty()
    # A basic SRQ: no list.
    basic = SRQ(b.pd, SrqInitAttr(SrqAttr(max_wr=4, max_sge=1)))
    with pytest.raises(PyverbsRDMAError) as ex:
        basic.post_srq_ops(OpsWr(wr_id=6, opcode=e.IBV_WR_TAG_SYNC))
    assert ex.value.error_code == errno.EINVAL

